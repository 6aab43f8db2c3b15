"""memory.py PETREL -- bytes per idle WebSocket connection of petrel's wsecho:
the anonymous memory (smaps_rollup) of the worker before and after K
connections that each did the handshake and echoed one 100-byte message and
one of 100 KB, then stay idle.  Prints one line per K."""
import os, sys, time

from wsraw import frame, read_n, start, ws_open

petrel = sys.argv[1]
KS = [int(k) for k in (sys.argv[2:] or ["1000", "4000"])]


def anon(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        return sum(int(l.split()[1]) * 1024 for l in f if l.startswith("Anonymous:"))


p, port, worker = start(petrel, "--max-connections", "20000")
try:
    small, large = frame(1, b"m" * 100), frame(2, os.urandom(100000))
    conns = []

    def open_ws():
        c = ws_open(port)[0]
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
