"""deflate_cpu.py PETREL [MIB] -- the worker's CPU time to echo one large
message on a connection with permessage-deflate (RFC 7692): petrel's wsecho,
a message of MIB MiB (default 16) of random bytes and one of text, each sent
uncompressed by the client (RSV1 clear, which RFC 7692 allows per message)
so that what is measured is the server's side of the echo -- the deflate of
the answer (ws.c, WS_DEFLATE_PROBE), framing and writing.  Each message is
echoed 5 times; prints the median of the worker's user+system time from
/proc/PID/stat, and whether the answer came compressed."""
import base64, os, socket, statistics, subprocess, sys, time, zlib

petrel = sys.argv[1]
size = int(sys.argv[2] if len(sys.argv) > 2 else 16) << 20
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / TICK


def read_n(s, n):
    parts, got = [], 0
    while got < n:
        c = s.recv(min(n - got, 1 << 20))
        if not c:
            raise SystemExit("connection closed")
        parts.append(c)
        got += len(c)
    return b"".join(parts)


def frame(op, payload):
    # a zero masking key: the payload goes as it is (the server cannot tell)
    n = len(payload)
    if n < 126:
        h = bytes([0x80 | op, 0x80 | n])
    elif n < 65536:
        h = bytes([0x80 | op, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        h = bytes([0x80 | op, 0x80 | 127]) + n.to_bytes(8, "big")
    return h + b"\0\0\0\0" + payload


def read_frame(s):
    b0, b1 = read_n(s, 2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(read_n(s, 2), "big")
    elif n == 127:
        n = int.from_bytes(read_n(s, 8), "big")
    return b0, read_n(s, n)


s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
p = subprocess.Popen([petrel, "--listen", "127.0.0.1:%d" % port, "--module", "wsecho",
                      "--log-level", "error"])
try:
    for _ in range(100):
        try:
            c = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(0.05)
    worker = int(subprocess.check_output(["pgrep", "-P", str(p.pid)]).split()[0])
    key = base64.b64encode(os.urandom(16)).decode()
    c.sendall(("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n" % key).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(4096)
    if b" 101 " not in head or b"permessage-deflate" not in head:
        raise SystemExit("no permessage-deflate: %r" % head)
    line = b"line %d of a text that compresses, {\"id\": %d, \"name\": \"petrel\"}\n"
    text = b"".join(line % (i, i * 7) for i in range(size // 40))[:size]
    for name, msg in (("random", os.urandom(size)), ("text", text)):
        times, zipped = [], set()
        for _ in range(5):
            t = cpu(worker)
            c.sendall(frame(2, msg))
            b0, data = read_frame(c)
            times.append(cpu(worker) - t)
            zipped.add(bool(b0 & 0x40))
            if b0 & 0x40:
                data = zlib.decompressobj(-15).decompress(data + b"\0\0\xff\xff")
            if data != msg:
                raise SystemExit("%s: the echo differs" % name)
        print("%-6s %d MiB: worker CPU %.3f s per echo (median of 5), answer %s"
              % (name, size >> 20, statistics.median(times),
                 "compressed" if zipped == {True} else
                 "uncompressed" if zipped == {False} else "both"))
finally:
    p.terminate()
    p.wait()
