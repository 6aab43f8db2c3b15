"""deflate_cpu.py PETREL [MIB] -- the worker's CPU time to echo one large
message on a connection with permessage-deflate (RFC 7692): petrel's wsecho,
a message of MIB MiB (default 16) of random bytes and one of text, each sent
uncompressed by the client (RSV1 clear, which RFC 7692 allows per message)
so that what is measured is the server's side of the echo -- the deflate of
the answer (ws.c, WS_DEFLATE_PROBE), framing and writing.  Each message is
echoed 5 times; prints the median of the worker's user+system time from
/proc/PID/stat, and whether the answer came compressed."""
import os, statistics, sys, zlib

from wsraw import frame, read_frame, start, ws_open

petrel = sys.argv[1]
size = int(sys.argv[2] if len(sys.argv) > 2 else 16) << 20
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / TICK


p, port, worker = start(petrel)
try:
    c, head = ws_open(port, "permessage-deflate")
    if b"permessage-deflate" not in head:
        raise SystemExit("no permessage-deflate: %r" % head)
    line = b"line %d of a text that compresses, {\"id\": %d, \"name\": \"petrel\"}\n"
    text = b"".join(line % (i, i * 7) for i in range(size // 40))[:size]
    for name, msg in (("random", os.urandom(size)), ("text", text)):
        times, zipped = [], set()
        for _ in range(5):
            t = cpu(worker)
            c.sendall(frame(2, msg, b"\0\0\0\0"))  # the payload as it is
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
