#!/usr/bin/env bash
# test_fault_slowbody_default.sh -- the default --body-timeout (petrel(1)):
# with no timeout flag, 200 connections announcing Content-Length: 1000000
# and sending one byte a second are all answered 408 and closed by the
# header timeout's 10 s (plus the one-second check period and some slack),
# no later: a trickled body holds a connection no longer than a trickled
# request head would.  None is closed before 9 s (the rule still grants its
# 10 s).  Meanwhile an upload at 2 KiB/s, above the default minimum rate of
# 1 KiB/s, completes past the 10 s with 200.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

petrel_start --workers 1 --module hello --module echo
pyrun <<'EOF'
import select
import socket
import time
from petrel_client import *

TIMEOUT = 10.0  # the default --body-timeout, the default --header-timeout
CHECK = 1.0     # how often a body's deadline is checked
LIMIT = TIMEOUT + CHECK + bound(2.0)

N = 200
head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"
slow = []
for i in range(N):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(head)
    s.setblocking(False)
    slow.append(s)
t0 = time.monotonic()
# 24 KiB at 2 KiB/s: 12 s, past the 10 s, and fine
up = socket.create_connection(("127.0.0.1", PORT))
body = b"u" * (24 * 1024)
up.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
sent_up = 0
got = {s: b"" for s in slow}
ended = {}
while len(ended) < N and time.monotonic() - t0 < LIMIT + 5:
    tick = time.monotonic()
    for s in slow:
        if s not in ended:
            try:
                s.send(b"a")
            except OSError:
                pass
    if sent_up < len(body):
        up.sendall(body[sent_up:sent_up + 2048])
        sent_up += 2048
    while True:
        live = [s for s in slow if s not in ended]
        left = 1.0 - (time.monotonic() - tick)
        if not live or left <= 0:
            break
        r, _, _ = select.select(live, [], [], left)
        for s in r:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if d:
                got[s] += d
            else:
                ended[s] = time.monotonic() - t0
while sent_up < len(body):
    up.sendall(body[sent_up:sent_up + 2048])
    sent_up += 2048
    time.sleep(1.0)

check(len(ended) == N, "%d of %d trickled bodies still open after %.1f s (the default "
      "--body-timeout should close them by %.1f s)" % (N - len(ended), N,
                                                      time.monotonic() - t0, LIMIT))
first, last = min(ended.values()), max(ended.values())
check(first >= TIMEOUT - 1.0, "a trickled body closed after %.1f s, before its %.0f s"
      % (first, TIMEOUT))
check(last <= LIMIT, "the last trickled body closed after %.1f s, past %.1f s" % (last, LIMIT))
statuses = [g.split(b" ", 2)[1] if g.startswith(b"HTTP/1.1 ") else g[:40] for g in got.values()]
check(all(st == b"408" for st in statuses), "not all 408: %r" % sorted(set(statuses))[:5])
up.settimeout(bound(10))
resp = b""
while b"\r\n\r\n" not in resp or len(resp) < len(body):
    d = up.recv(65536)
    if not d:
        break
    resp += d
check(resp.startswith(b"HTTP/1.1 200"), "the 2 KiB/s upload: %r" % resp[:60])
ok("default --body-timeout: %d bodies at 1 byte/s got 408 and closed after %.1f-%.1f s; "
   "an upload at 2 KiB/s for %.0f s got 200" % (N, first, last, len(body) / 2048))
EOF
petrel_stop
