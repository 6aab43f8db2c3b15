#!/usr/bin/env bash
# test_fault_reset.sh -- clients that reset their connection (SO_LINGER 0,
# then close: the server gets a RST, RFC 9293 §3.5.2) in the middle of a
# request (head half sent, body half sent) or of a response (a large static
# file, an echoed body, a streamed body), over HTTP/1.1, h2c and WebSocket.
# After each kind the worker is the same process (no crash, no restart), it
# is back to its baseline of open descriptors (nothing leaked: no socket, no
# file of an aborted response) and still answers.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fault_setup

www=$LIB_TMP/www
head -c $((32 << 20)) /dev/zero >"$www/big.bin"

petrel_start --workers 1 --module hello --module echo --module wsecho --root "$www" \
    --dev --module "$LIB_TMP/stream.c" --send-timeout 10
WORKER=$(petrel_worker) pyrun <<'EOF'
import os
import socket
import time
from petrel_client import *
from petrel_fault import *

W = int(os.environ["WORKER"])
N = 20
BIG = 32 << 20


def alive():
    check(os.path.exists("/proc/%d" % W), "the worker %d is gone (crashed?)" % W)


def read_some(c, n):
    """Read at least n bytes of the response (head included)."""
    while len(c.buf) < n:
        check(c._fill(), "connection closed after %d bytes, want %d" % (len(c.buf), n))


# Warm up every path once (the static cache, module code, h2 and ws state),
# then let every connection go: the baseline is what the idle worker holds.
listeners = sockets(W)
check_hello()
c = Conn()
c.send(request("GET", "/big.bin", [("Connection", "close")]))
slurp(c)
r = c.read_response()
check(r.status == 200 and len(r.body) == BIG, "GET /big.bin: %r" % r)
c.close()
c = Conn()
c.send(request("GET", "/stream?kb=256"))
r = c.read_response()
check(r.status == 200 and r.body == b"x" * (256 << 10), "GET /stream: %r" % r)
c.close()
ws = ws_open()
ws.send(ws_frame(0x2, b"warm"))
check(ws_read(ws) == (0x2, b"warm"), "WebSocket echo")
ws.send(ws_frame(0x8, b"\x03\xe8"))  # Close 1000
ws.close()
hc, h = h2_open()
h2_get(hc, h, "/hello")
ended = False
while not ended:
    check(hc._fill(), "h2: connection closed")
    for ev in h.receive_data(hc._take(len(hc.buf))):
        ended = ended or type(ev).__name__ == "StreamEnded"
hc.close()
wait_until(lambda: sockets(W) <= listeners, 10, "the warm-up connections to close")
base = fds(W)
ok("baseline: worker %d holds %d descriptors (%d listening sockets)" % (W, base, listeners))


def settle(what):
    alive()
    secs = wait_fds(W, base, 15, what)
    check_hello(what="a new connection after: " + what)
    ok("%s (x%d): back to %d descriptors in %.2fs, still serving" % (what, N, base, secs))


def reset_n(*data, read=0, open_conn=Conn):
    """N connections (open_conn()): send data (in these pieces), wait until
    the server has read it all (read=0) or read `read` bytes of the
    response, and reset."""
    for i in range(N):
        c = open_conn()
        for d in data:
            c.send(d)
        if read:
            read_some(c, read)
        else:
            wait_server_read(c)
        rst(c.sock)


# --- HTTP/1.1 ---------------------------------------------------------------
reset_n(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: abc")
settle("HTTP/1.1: RST with the request head half sent")

reset_n(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200000\r\n\r\n", b"y" * 100000)
settle("HTTP/1.1: RST with the request body half sent")

reset_n(request("GET", "/big.bin"), read=1 << 20)
settle("HTTP/1.1: RST while a 32 MiB static file is sent")

reset_n(request("POST", "/echo", body=b"e" * (4 << 20)), read=256 << 10)
settle("HTTP/1.1: RST while a 4 MiB echo is sent")

reset_n(request("GET", "/stream?kb=65536"), read=256 << 10)
# the handlers of those streams are still producing when the resets arrive:
# none of their bytes may reach the connections that come next
idle = []
for i in range(N):
    c = Conn()
    c.send(request("GET", "/hello"))
    r = c.read_response()
    check(r.status == 200 and r.body == b"Hello World!", "GET /hello after the resets: %r" % r)
    idle.append(c)
time.sleep(0.3)  # a window for stray writes to show (not a wait for the server)
for c in idle:
    c.sock.setblocking(False)
    try:
        stray = c.sock.recv(4096)
    except BlockingIOError:
        stray = None
    check(stray is None, "an idle keep-alive connection received %r" % (stray or b"")[:80])
    c.close()
settle("HTTP/1.1: RST while a streamed response is produced")

reset_n(request("GET", "/big.bin") * 3 + request("GET", "/hello"), read=2 << 20)
settle("HTTP/1.1: RST with pipelined requests queued")

# --- h2c (RFC 9113) ---------------------------------------------------------
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
for i in range(N):
    c = Conn()
    # the preface, an empty SETTINGS, then 5 bytes of a 9-byte frame header
    c.send(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" + b"\x00\x00\x40\x01\x05")
    wait_server_read(c)
    rst(c.sock)
settle("h2c: RST with a frame header half sent")

for i in range(N):
    c, h = h2_open()
    sid = h.get_next_available_stream_id()
    h.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1"),
                         (":path", "/echo"), ("content-length", "200000")])
    for k in range(4):
        h.send_data(sid, b"y" * 15000)
    c.send(h.data_to_send())
    wait_server_read(c)
    rst(c.sock)
settle("h2c: RST with a request body half sent")

for path, what in (("/big.bin", "a 32 MiB static file"), ("/stream?kb=65536", "a streamed response")):
    for i in range(N):
        c, h = h2_open()
        sids = [h2_get(c, h, path) for _ in range(3)]
        got = 0
        while got < (256 << 10):
            check(c._fill(), "h2 %s: connection closed" % path)
            for ev in h.receive_data(c._take(len(c.buf))):
                if type(ev).__name__ == "DataReceived":
                    got += len(ev.data)
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            c.send(h.data_to_send())
        rst(c.sock)
    settle("h2c: RST while %s is sent on 3 streams" % what)

# --- WebSocket (RFC 6455) ---------------------------------------------------
reset_n(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
settle("WebSocket: RST with the handshake half sent")

reset_n(ws_frame(0x2, b"z" * 50000, length=100000)[:50014], open_conn=ws_open)
settle("WebSocket: RST with a frame half sent")

reset_n(ws_frame(0x2, b"m" * (4 << 20)), read=128 << 10, open_conn=ws_open)
settle("WebSocket: RST while a 4 MiB echo is sent")

# --- all of it at once ------------------------------------------------------
socks = []
for i in range(N):
    c = Conn()
    c.send(request("GET", "/big.bin"))
    socks.append(c)
    c = Conn()
    c.send(request("GET", "/stream?kb=65536"))
    socks.append(c)
    c = ws_open()
    c.send(ws_frame(0x2, b"m" * (1 << 20)))
    socks.append(c)
for c in socks:
    read_some(c, 64 << 10)
for c in socks:
    rst(c.sock)
settle("%d connections reset together mid-response" % (3 * N))
EOF
petrel_stop
fault_sanitizer_check
ok "SIGTERM: exit status 0, no sanitizer report"
