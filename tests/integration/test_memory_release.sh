#!/usr/bin/env bash
# test_memory_release.sh -- memory that comes back (petrel(1), "Memory"):
# a burst of h2c connections that each make one request and close leaves
# its free memory in the worker's free lists; after --memory-release-delay
# (twice: the first look only ends the burst's interval) what the worker no
# longer uses goes back to the kernel, and the next burst of the same size
# is served again within the first one's peak.
#
# 2,000 h2c connections (fewer when the descriptor limit is lower: 2,000
# plus 100 for the test itself are needed, on both sides), each: the
# preface, SETTINGS, GET /hello with :authority and :path indexed (so each
# session's HPACK decoder holds two entries, as with a real client), the
# server's SETTINGS acknowledged, the response read to END_STREAM; all of
# them are held open at once, then closed.  The worker's RSS is read from
# /proc/PID/status (VmRSS): before, at the peak of each burst, and after
# the close until it comes back down.
#
# "Back down": within a quarter of what the burst took above the idle
# worker (petrel keeps about 1 KiB per closed h2c connection plus
# --memory-reserve; before memory came back it kept 16 KiB, two thirds of
# the burst).  The second burst's peak: at most the first one's plus half
# of what the burst took (the heap's layout differs between the two: on a
# quiet machine the second peak was 1.1-1.5 MiB above the first in 3 of 5
# runs; on a loaded one, where the release timer runs while a slow burst
# is still opening, once 8.4 MiB above a 23 MiB peak).  What this bounds is
# the failure that matters: memory given back that the next burst cannot
# take again, which would make the second burst cost the first one's twice.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# the sanitizers' and valgrind's allocators keep freed memory in
# quarantine and do not take malloc_trim: RSS is not petrel's there
[[ ${PETREL_SANITIZERS:-no} == yes ]] && skip "RSS under the sanitizers' allocator"
[[ ${PETREL_VALGRIND:-0} == 1 ]] && skip "RSS under valgrind"

N=2000
nofile=$(ulimit -n)
if ((nofile < N + 100)); then
    N=$((nofile - 100))
    ((N >= 200)) || skip "descriptor limit $nofile: too low for a burst of connections"
    echo "# descriptor limit $nofile: $N connections"
fi

petrel_start --module hello --workers 1 --keepalive-timeout 300 --memory-release-delay 0.5
W=$(petrel_worker)
[[ -n $W ]] || fail "no worker"

N=$N W=$W pyrun <<'EOF'
import os, selectors, socket, struct, time
from petrel_client import *

N = int(os.environ["N"])
W = int(os.environ["W"])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload

def lit(index, value):  # literal with incremental indexing, indexed name (RFC 7541 §6.2.1)
    v = value.encode()
    return bytes([0x40 | index, len(v)]) + v

# GET /hello: :method GET (2), :scheme http (6) indexed; :authority (1) and
# :path (4) literals with incremental indexing, as a fresh HPACK encoder writes them
BLOCK = b"\x82\x86" + lit(1, "127.0.0.1:%d" % PORT) + lit(4, "/hello")
HELLO = PREFACE + frame(4, 0, 0) + frame(1, 0x05, 1, BLOCK)  # END_STREAM | END_HEADERS
ACK = frame(4, 0x01, 0)

def rss_kb():
    with open("/proc/%d/status" % W) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def conns():  # sockets of the worker
    n = 0
    for fd in os.listdir("/proc/%d/fd" % W):
        try:
            if os.readlink("/proc/%d/fd/%s" % (W, fd)).startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n

def burst(n):
    """n connections, one request each, all held open; returns (sockets, peak RSS)."""
    sel = selectors.DefaultSelector()
    socks, done, peak = [], 0, 0
    pending = list(range(n))
    state = {}
    deadline = time.monotonic() + bound(120)
    while done < n:
        check(time.monotonic() < deadline, "burst: %d of %d responses after %ss" % (done, n, bound(120)))
        while pending and len(state) < 100:  # at most 100 requests in flight
            pending.pop()
            s = socket.create_connection(("127.0.0.1", PORT), timeout=bound(10))
            s.sendall(HELLO)
            s.setblocking(False)
            socks.append(s)
            state[s] = [b"", False]
            sel.register(s, selectors.EVENT_READ)
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            check(d, "a connection closed before its response")
            st = state[s]
            st[0] += d
            while len(st[0]) >= 9:
                ln = int.from_bytes(st[0][:3], "big")
                if len(st[0]) < 9 + ln:
                    break
                ftype, flags = st[0][3], st[0][4]
                sid = int.from_bytes(st[0][5:9], "big") & 0x7FFFFFFF
                st[0] = st[0][9 + ln:]
                if ftype == 4 and not flags & 1:
                    s.sendall(ACK)
                check(ftype != 7, "GOAWAY during the burst")
                check(ftype != 3, "RST_STREAM during the burst")
                if ftype == 0 and sid == 1 and flags & 1:
                    st[1] = True
            if st[1]:
                sel.unregister(s)
                del state[s]
                done += 1
        peak = max(peak, rss_kb())
    time.sleep(0.2)
    return socks, max(peak, rss_kb())

def close_all(socks):
    for s in socks:
        s.close()
    t0 = time.monotonic()
    while conns() > 2:  # the listener (and the ring's or signal's, at most one)
        check(time.monotonic() - t0 < bound(30), "the worker still holds %d sockets" % conns())
        time.sleep(0.1)

def settle(limit_kb):
    """RSS once it is at most limit_kb, waiting up to 10 s (20 release delays)."""
    t0 = time.monotonic()
    while True:
        r = rss_kb()
        if r <= limit_kb or time.monotonic() - t0 > bound(10):
            return r, time.monotonic() - t0
        time.sleep(0.1)

# warm-up: a few connections, so that the idle worker has its code and
# libraries in, and the RSS of the idle worker
socks, _ = burst(10)
close_all(socks)
time.sleep(1.5)
r0 = rss_kb()

socks, p1 = burst(N)
check(p1 - r0 > N * 4, "the burst took %d KiB, want more than 4 KiB per connection" % (p1 - r0))
close_all(socks)
limit = r0 + (p1 - r0) // 4
r1, secs = settle(limit)
check(r1 <= limit, "after the first burst: RSS %d KiB, want at most %d (idle %d, peak %d)"
      % (r1, limit, r0, p1))
time.sleep(1.0)  # two more release delays: what is left for good
r1b = rss_kb()
ok("%d h2c connections: RSS %d KiB idle, %d at the peak, %d %.1fs after the close, %d 1s later "
   "(%.0f bytes per closed connection)" % (N, r0, p1, r1, secs, r1b, (r1b - r0) * 1024.0 / N))

socks, p2 = burst(N)
close_all(socks)
slack = (p1 - r0) // 2
check(p2 <= p1 + slack, "second burst: peak %d KiB, want at most the first's %d + %d" % (p2, p1, slack))
r2, secs = settle(limit)
check(r2 <= limit, "after the second burst: RSS %d KiB, want at most %d" % (r2, limit))
ok("again %d h2c connections, all served: peak %d KiB (first %d), %d KiB %.1fs after the close"
   % (N, p2, p1, r2, secs))
EOF
petrel_stop
