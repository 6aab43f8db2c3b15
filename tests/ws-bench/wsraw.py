"""wsraw.py -- what the WebSocket benchmark scripts of this directory share:
start petrel, open a WebSocket on a raw socket, build a client frame, read
exact byte counts and server frames."""
import socket, subprocess, time


def start(petrel, *args):
    """petrel with wsecho on a free loopback port: (process, port, worker pid)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([petrel, "--listen", "127.0.0.1:%d" % port, "--module", "wsecho",
                          "--log-level", "error", *args])
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.02)
    worker = int(open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0])
    return p, port, worker


def read_n(s, n):
    parts, got = [], 0
    while got < n:
        c = s.recv(min(n - got, 1 << 20))
        if not c:
            raise SystemExit("connection closed")
        parts.append(c)
        got += len(c)
    return b"".join(parts)


def ws_open(port, extensions=None):
    """A WebSocket on /ws: (socket, the 101 response's head)."""
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
              (b"Sec-WebSocket-Extensions: %s\r\n" % extensions.encode() if extensions else b"") +
              b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = c.recv(1)
        if not b:
            raise SystemExit("handshake: connection closed: %r" % head)
        head += b
    if b" 101 " not in head:
        raise SystemExit("handshake: %r" % head)
    return c, head


def frame(op, payload, key=b"\x01\x02\x03\x04"):
    """A whole client frame, masked with `key` (all zero: the payload as it is)."""
    n = len(payload)
    if n < 126:
        h = bytes([0x80 | op, 0x80 | n])
    elif n < 65536:
        h = bytes([0x80 | op, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        h = bytes([0x80 | op, 0x80 | 127]) + n.to_bytes(8, "big")
    if key == b"\0\0\0\0":
        return h + key + payload
    k = int.from_bytes(key * ((n + 3) // 4), "big") >> (8 * (-n % 4))
    return h + key + (int.from_bytes(payload, "big") ^ k).to_bytes(n, "big")


def read_frame(s):
    """One server frame: (first byte, payload)."""
    b0, b1 = read_n(s, 2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(read_n(s, 2), "big")
    elif n == 127:
        n = int.from_bytes(read_n(s, 8), "big")
    return b0, read_n(s, n)
