#!/usr/bin/env bash
# test_fault_stall.sh -- a client that asks for a large response and then
# stops reading: the server must not buffer without bound (the worker's
# VmRSS, sampled while the client is stalled, stays under a bound) and the
# stalled connection must be closed by --send-timeout ("time without write
# progress").  A 64 MiB static file, a 3 MiB echo and an endless streamed
# response over HTTP/1.1; a static file and a streamed response over h2c
# with a zero flow-control window (RFC 9113 §6.9.2: SETTINGS_INITIAL_WINDOW
# _SIZE 0, so the server may send no DATA at all).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fault_setup

www=$LIB_TMP/www
truncate -s 64M "$www/big.bin"

# --max-body-size 4m: a connection's memory budget (its arena limit) is
# 2 x 4 MiB + 2 x 16 KiB + 1 MiB; queued output copies count toward it
petrel_start --workers 1 --module hello --module echo --root "$www" \
    --dev --module "$LIB_TMP/stream.c" --send-timeout 1.5 --max-body-size 4m
WORKER=$(petrel_worker) pyrun <<'EOF'
import os
import socket
import time
from petrel_client import *
from petrel_fault import *

W = int(os.environ["WORKER"])
SEND_TIMEOUT = 1.5
GROWTH_MAX = 24 << 10  # KiB: the bound on RSS growth while a client stalls

# warm up: the static cache entry, the module, the pool's chunks
listeners = sockets(W)


def fetch_len(path):
    """GET path and count the bytes until the server closes (a fast reader:
    --send-timeout is short here)."""
    c = Conn()
    c.send(request("GET", path, [("Connection", "close")]))
    n = 0
    buf = bytearray(1 << 20)
    while True:
        k = c.sock.recv_into(buf)
        if k == 0:
            break
        n += k
    c.close()
    return n


n = fetch_len("/big.bin")
check(n > 64 << 20, "GET /big.bin: %d bytes" % n)
n = fetch_len("/stream?kb=8192")
check(n > 8 << 20, "GET /stream: %d bytes" % n)
wait_until(lambda: sockets(W) <= listeners, 10, "the warm-up connections to close")
base_fds = fds(W)


def stalled(c, what, sample=2.0):
    """The client c has sent its request and reads nothing: sample the
    worker's RSS, then wait for the server to drop the connection."""
    rss0 = rss_kb(W)
    t0 = time.monotonic()
    peak = rss0
    closed_at = None
    limit = bound(SEND_TIMEOUT * 2 + 8)
    while time.monotonic() - t0 < limit:
        peak = max(peak, rss_kb(W))
        if sockets(W) <= listeners:
            if closed_at is None:
                closed_at = time.monotonic() - t0
            if time.monotonic() - t0 >= sample:
                break
        time.sleep(0.02)
    problems = []
    if peak - rss0 >= GROWTH_MAX:
        problems.append("the worker's RSS grew by %d KiB (from %d KiB) while the client did "
                        "not read; bound %d KiB" % (peak - rss0, rss0, GROWTH_MAX))
    if closed_at is None:
        problems.append("the stalled connection is still open after %.1fs (--send-timeout %.1f)"
                        % (limit, SEND_TIMEOUT))
    c.close()
    if problems:
        fail("%s: %s" % (what, "; ".join(problems)))
    wait_fds(W, base_fds, 10, what)
    check_hello(what="a new connection after: " + what)
    ok("%s: RSS grew by %d KiB at most (bound %d); the server closed it after %.2fs"
       % (what, peak - rss0, GROWTH_MAX, closed_at))


def stall_conn():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(bound(10))
    s.connect(("127.0.0.1", PORT))
    c = Conn.__new__(Conn)
    c.port, c.sock, c.buf, c.eof = PORT, s, b"", False
    return c


c = stall_conn()
c.send(request("GET", "/big.bin"))
stalled(c, "HTTP/1.1 GET of a 64 MiB static file, not read")

c = stall_conn()
c.send(request("POST", "/echo", body=b"e" * (3 << 20)))
stalled(c, "HTTP/1.1 POST /echo of 3 MiB, the answer not read")

c = stall_conn()
c.send(request("GET", "/stream?kb=4194304"))  # 4 GiB, produced at up to 64 MB/s
stalled(c, "HTTP/1.1 streamed response of 4 GiB, not read", sample=3.0)

# a producer that slows down (8 MiB at once, to fill the socket buffers,
# then 4 KiB every 20 ms): from then on every write it makes queues output
# and flushes nothing; --send-timeout is time without write progress, so
# those flushes must not restart it (else the connection stays until its
# budget is spent, ~25 s at this rate)
c = stall_conn()
c.send(request("GET", "/stream?kb=4194304&fast=8192&bs=4096&ms=20"))
stalled(c, "HTTP/1.1 response streamed slowly (4 KiB every 20 ms), not read", sample=1.0)

# pipelined requests behind a response that is not read
c = stall_conn()
c.send(request("GET", "/big.bin") + request("GET", "/stream?kb=4194304") * 3)
stalled(c, "HTTP/1.1 pipelined large responses, not read")

# RFC 9113 §6.9.1: the server may send no DATA while the window is 0: the
# connection is closed by --send-timeout, and a streamed body's buffered
# output is bounded (the stream is reset past the connection's budget)
for path, n, what in (("/big.bin", 4, "4 streams of a 64 MiB static file"),
                      ("/stream?kb=4194304", 4, "4 streams of 4 GiB")):
    c, h = h2_open(window=0)
    # wait for the server's SETTINGS ACK: from then on the window is 0
    acked = False
    while not acked:
        check(c._fill(), "h2: connection closed")
        for ev in h.receive_data(c._take(len(c.buf))):
            acked = acked or type(ev).__name__ == "SettingsAcknowledged"
    c.send(h.data_to_send())
    for _ in range(n):
        h2_get(c, h, path)
    stalled(c, "h2c with a zero window, %s" % what, sample=1.5)
EOF
petrel_stop
fault_sanitizer_check
ok "SIGTERM: exit status 0, no sanitizer report"
