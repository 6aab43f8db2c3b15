#!/usr/bin/env bash
# test_fault_halfclose.sh -- clients that half-close (shutdown(SHUT_WR), a
# FIN) their side.  After a complete request the server still answers in
# full, then closes (RFC 9112 §9.6: a client that half-closes still reads the
# response); after a partial request it closes at once, long before its
# header timeout, instead of waiting for bytes that cannot come.  Over
# HTTP/1.1, h2c (RFC 9113 §5.1: a half-closed peer still receives) and
# WebSocket; the worker ends with the descriptors it started with.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

py_needs h2

www=$LIB_TMP/www
mkdir -p "$www"
head -c $((16 << 20)) /dev/urandom >"$www/big.bin"

# the timeouts are long: a close that comes quickly comes from the FIN
petrel_start --workers 1 --module hello --module echo --module wsecho --root "$www" \
    --header-timeout 30 --keepalive-timeout 30 --ws-idle-timeout 30
WWW=$www WORKER=$(petrel_worker) pyrun <<'EOF'
import os
import socket
import time
from petrel_client import *
from petrel_fault import *

W = int(os.environ["WORKER"])
BIG = open(os.path.join(os.environ["WWW"], "big.bin"), "rb").read()
CLOSE_BY = 3  # seconds, against 30 s timeouts
listeners = sockets(W)
check_hello()
c = Conn()  # the static cache keeps the file open: part of the baseline
c.send(request("GET", "/big.bin", [("Connection", "close")]))
slurp(c)
r = c.read_response()
check(r.status == 200 and r.body == BIG, "GET /big.bin: %d bytes" % len(r.body))
c.close()
wait_until(lambda: sockets(W) <= listeners, 10, "the first connection to close")
base = fds(W)


def half(c):
    c.sock.shutdown(socket.SHUT_WR)


def eof_after(c, what):
    got, secs = c.wait_eof(CLOSE_BY)
    check(got == b"", "%s: extra bytes after the response: %r" % (what, got[:100]))
    return secs


# --- HTTP/1.1 ---------------------------------------------------------------
c = Conn()
c.send(request("GET", "/hello"))
half(c)
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "GET then SHUT_WR: %r" % r)
secs = eof_after(c, "GET then SHUT_WR")
ok("HTTP/1.1: GET, then SHUT_WR: answered, then closed (%.2fs)" % secs)

c = Conn()
body = os.urandom(300000)
c.send(request("POST", "/echo", body=body) + request("GET", "/hello") + request("GET", "/big.bin"))
half(c)
slurp(c)
r1 = c.read_response()
r2 = c.read_response()
r3 = c.read_response()
check(r1.status == 200 and r1.body == body, "POST /echo: %r" % r1)
check(r2.status == 200 and r2.body == b"Hello World!", "GET /hello: %r" % r2)
check(r3.status == 200 and r3.body == BIG, "GET /big.bin: status %d, %d bytes" % (r3.status, len(r3.body)))
secs = eof_after(c, "three pipelined requests then SHUT_WR")
ok("HTTP/1.1: POST 300 kB + GET + GET 16 MiB pipelined, then SHUT_WR: all answered in full, "
   "then closed (%.2fs)" % secs)

# a half-closed client that starts reading late still gets every byte (16 MiB
# do not fit in the socket buffers: the server waits for EPOLLOUT meanwhile)
c = Conn()
c.send(request("GET", "/big.bin"))
half(c)
time.sleep(0.3)  # reading late is the point, not a wait for the server
slurp(c)
r = c.read_response()
check(r.status == 200 and r.body == BIG, "slow reader: status %d, %d bytes" % (r.status, len(r.body)))
eof_after(c, "slow reader")
ok("HTTP/1.1: a half-closed client that reads late gets the whole 16 MiB")

for what, data in (
        ("half a request line", b"GET /hel"),
        ("half a header section", b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b"),
        ("half a body", b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n" + b"x" * 500),
        ("half a chunked body",
         b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n100\r\nabc")):
    c = Conn()
    c.send(data)
    half(c)
    t0 = time.monotonic()
    got, secs = c.wait_eof(CLOSE_BY)
    # an error status may come first (a 400 for the cut request), never a 200
    check(not got.startswith(b"HTTP/1.1 2"), "%s then SHUT_WR: got %r" % (what, got[:200]))
    ok("HTTP/1.1: %s, then SHUT_WR: closed after %.2fs (%s)"
       % (what, secs, got.split(b"\r\n")[0].decode() if got else "no response"))

# SHUT_WR on an idle keep-alive connection: closed at once
c = Conn()
c.send(request("GET", "/hello"))
r = c.read_response()
half(c)
secs = eof_after(c, "idle keep-alive then SHUT_WR")
ok("HTTP/1.1: an idle keep-alive connection that half-closes is closed (%.2fs)" % secs)

# --- h2c ----------------------------------------------------------------------
# the client cannot send WINDOW_UPDATE once half-closed: open the windows
# wide first (RFC 9113 §6.9.2) so that 16 MiB can flow
c, h = h2_open(window=(1 << 31) - 1)
h.increment_flow_control_window((1 << 31) - 1 - 65535)
c.send(h.data_to_send())
sids = [h2_get(c, h, "/hello"), h2_get(c, h, "/big.bin")]
half(c)
bodies = {s: b"" for s in sids}
ended = set()
t0 = time.monotonic()
while len(ended) < len(sids):
    check(time.monotonic() - t0 < bound(30), "h2: responses incomplete after 30 s: %r"
          % {s: len(b) for s, b in bodies.items()})
    if not c._fill():
        fail("h2: connection closed before the responses ended: %r" % {s: len(b) for s, b in bodies.items()})
    for ev in h.receive_data(c._take(len(c.buf))):
        n = type(ev).__name__
        if n == "DataReceived":
            bodies[ev.stream_id] += ev.data
            h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif n == "StreamEnded":
            ended.add(ev.stream_id)
        elif n in ("StreamReset", "ConnectionTerminated"):
            fail("h2: %r" % ev)
check(bodies[sids[0]] == b"Hello World!" and bodies[sids[1]] == BIG,
      "h2 bodies: %r" % {s: len(b) for s, b in bodies.items()})
secs = eof_after(c, "h2 then SHUT_WR")
ok("h2c: two requests, then SHUT_WR: both answered in full, then closed (%.2fs)" % secs)

c = Conn()
c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x40\x01")
half(c)
got, secs = c.wait_eof(CLOSE_BY)
ok("h2c: half a frame, then SHUT_WR: closed after %.2fs" % secs)

# --- WebSocket ----------------------------------------------------------------
c = ws_open()
c.send(ws_frame(0x1, b"last words"))
half(c)
op, data = ws_read(c)
check((op, data) == (0x1, b"last words"), "WebSocket echo after SHUT_WR: %r" % ((op, data),))
got, secs = c.wait_eof(CLOSE_BY)
ok("WebSocket: a message, then SHUT_WR: echoed, then closed (%.2fs)" % secs)

c = ws_open()
c.send(ws_frame(0x2, b"q" * 1000, length=5000)[:600])
half(c)
got, secs = c.wait_eof(CLOSE_BY)
ok("WebSocket: half a frame, then SHUT_WR: closed after %.2fs" % secs)

secs = wait_fds(W, base, 10, "after the half-closed connections")
check_hello()
ok("the worker is back to its %d descriptors and still serving" % base)
EOF
petrel_stop
fault_sanitizer_check
ok "SIGTERM: exit status 0, no sanitizer report"
