#!/usr/bin/env bash
# test_fault_slowbody.sh -- slow-body attacks against the minimum-rate rule
# (--body-timeout plus 1 s per --body-min-rate bytes received):
#   - 200 connections announcing Content-Length: 1000000 and sending one
#     byte a second are all answered 408 (RFC 9110 §15.5.9) and closed,
#     within the rule's bound, and the worker's descriptors come back;
#   - 50 WebSockets trickling a fragmented message one byte a second get
#     Close 1008 (RFC 6455 §7.4.1) and the end of the connection;
#   - meanwhile other clients are served, and an upload slower than the
#     network but above the minimum rate is answered 200.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fault_setup

petrel_start --workers 1 --module hello --module echo --module wsecho \
    --body-timeout 2 --body-min-rate 1k
WORKER=$(petrel_worker) pyrun <<'EOF'
import os
import select
import socket
import time
from petrel_client import *
from petrel_fault import *

W = int(os.environ["WORKER"])
TIMEOUT = 2.0   # --body-timeout
CHECK = 1.0     # how often a body's deadline is checked
# one byte a second earns 1/1024 s: the bound is the timeout, one check
# period, and the tick of the clients' loop
LIMIT = bound(TIMEOUT + CHECK + 2.0)

fds0 = fds(W)
check_hello()

# --- 200 slow HTTP/1.1 bodies ---------------------------------------------------
N = 200
head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"
slow = []
for i in range(N):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(head)
    slow.append(s)
# and 50 WebSockets trickling a fragmented text message
M = 50
wss = [ws_open("/ws") for _ in range(M)]
for c in wss:
    c.sock.sendall(ws_frame(1, b"x", fin=False))
t0 = time.monotonic()

# an upload at 2 KiB/s, above the minimum rate (its deadline moves 2 s a
# second), on the side
up = Conn()
body = b"u" * 10240
up.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))

got = {}       # socket -> bytes received
ended = {}     # socket -> seconds after t0 when the server closed


def collect(wait):
    """Take what the server sent on the open sockets; note the closed ones."""
    live = [s for s in allsocks if s not in ended]
    r, _, _ = select.select(live, [], [], wait) if live else ([], [], [])
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


sent_up = 0
served = 0
allsocks = slow + [c.sock for c in wss]
for s in allsocks:
    s.setblocking(False)
    got[s] = b""
while len(ended) < len(allsocks) and time.monotonic() - t0 < LIMIT + 5:
    tick = time.monotonic()
    for s in slow:
        if s not in ended:
            try:
                s.send(b"a")
            except OSError:
                pass
    for c in wss:
        if c.sock not in ended:
            try:
                c.sock.send(ws_frame(0, b"y", fin=False))
            except OSError:
                pass
    if sent_up < len(body):
        up.send(body[sent_up:sent_up + 2048])
        sent_up += 2048
    # other clients are served all the while
    check_hello(what="a new connection during the slow-body attack")
    served += 1
    # one byte a second from each slow client; what the server says, meanwhile
    while time.monotonic() - tick < 1.0:
        collect(0.05)

open_left = [s for s in allsocks if s not in ended]
check(not open_left, "%d of %d slow connections still open after %.1f s"
      % (len(open_left), len(allsocks), time.monotonic() - t0))
h1_408 = sum(1 for s in slow if got[s].startswith(b"HTTP/1.1 408 "))
check(h1_408 == N, "%d of %d slow bodies answered 408 (first: %r)"
      % (h1_408, N, [got[s][:40] for s in slow if not got[s].startswith(b"HTTP/1.1 408 ")][:3]))
late = max(ended[s] for s in slow)
check(late <= LIMIT, "the last slow body was closed after %.1f s, bound %.1f s" % (late, LIMIT))
ok("%d connections sending a 1,000,000-byte body at 1 byte/s: all 408 and closed "
   "within %.1f s (bound %.1f s); %d other requests served meanwhile" % (N, late, LIMIT, served))

ws_1008 = 0
for c in wss:
    d = got[c.sock]
    # a Close frame: 0x88, a length, then the code
    if len(d) >= 4 and d[0] == 0x88 and (d[2] << 8 | d[3]) == 1008:
        ws_1008 += 1
check(ws_1008 == M, "%d of %d trickled WebSocket messages got Close 1008 (first: %r)"
      % (ws_1008, M, [got[c.sock][:8] for c in wss][:3]))
late = max(ended[c.sock] for c in wss)
check(late <= LIMIT, "the last trickling WebSocket was closed after %.1f s" % late)
ok("%d WebSockets trickling a message at 1 byte/s: Close 1008 and closed within %.1f s"
   % (M, late))

# the upload above the rate
while sent_up < len(body):
    up.send(body[sent_up:sent_up + 1024])
    sent_up += 1024
r = up.read_response("POST")
check(r.status == 200 and r.body == body, "an upload at 2 KiB/s: %r" % r)
ok("an upload above the minimum rate is answered 200")

for s in allsocks:
    s.close()
up.close()
wait_fds(W, fds0, 5, "the worker's descriptors back to %d" % fds0)
ok("the worker's descriptors are back to %d" % fds0)
EOF

fault_sanitizer_check
petrel_stop
