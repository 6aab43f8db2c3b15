"""memory.py PETREL -- bytes per idle WebSocket connection of petrel's wsecho:
the anonymous memory (smaps_rollup) of the worker before and after K
connections that each did the handshake and echoed one 100-byte message and
one of 100 KB, then stay idle.  Prints one line per K."""
import os, socket, subprocess, sys, time

petrel = sys.argv[1]
KS = [int(k) for k in (sys.argv[2:] or ["1000", "4000"])]


def anon(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        return sum(int(l.split()[1]) * 1024 for l in f if l.startswith("Anonymous:"))


def frame(op, payload):
    m = b"\x01\x02\x03\x04"
    n = len(payload)
    h = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else
                              bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536 else
                              bytes([0x80 | 127]) + n.to_bytes(8, "big"))
    return h + m + bytes(b ^ m[i % 4] for i, b in enumerate(payload))


def read_n(s, n):
    d = b""
    while len(d) < n:
        c = s.recv(n - len(d))
        if not c:
            raise SystemExit("connection closed")
        d += c
    return d


s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
p = subprocess.Popen([petrel, "--listen", "127.0.0.1:%d" % port, "--module", "wsecho",
                      "--log-level", "error", "--max-connections", "20000"])
try:
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.02)
    worker = int(open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0])
    small, large = frame(1, b"m" * 100), frame(2, os.urandom(100000))
    conns = []

    def open_ws():
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        h = b""
        while b"\r\n\r\n" not in h:
            h += c.recv(1)
        c.sendall(small)
        read_n(c, 2 + 100)
        c.sendall(large)
        read_n(c, 10 + 100000)
        return c

    conns.append(open_ws())  # warm-up
    time.sleep(0.5)
    m0 = anon(worker)
    base = len(conns)
    for k in KS:
        while len(conns) - base < k:
            conns.append(open_ws())
        time.sleep(1)
        m = anon(worker)
        print("%5d idle WebSocket connections: %6d bytes each (anonymous memory of the worker)"
              % (k, (m - m0) // k), flush=True)
finally:
    p.terminate()
    p.wait()
