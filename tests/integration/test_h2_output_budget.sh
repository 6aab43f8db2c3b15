#!/usr/bin/env bash
# HTTP/2 output without a reader (the CVE-2019-9517 "internal data
# buffering" class): clients that open the largest flow-control windows
# (RFC 9113 §6.9: SETTINGS_INITIAL_WINDOW_SIZE and a connection
# WINDOW_UPDATE of 2^31-1), request 100 streams of an 8 MiB file and never
# read.  petrel produces DATA only while the socket takes it: the worker's
# RSS stays bounded (it grew by ~18 MB per such connection when every DATA
# frame the windows allowed was queued at once), a normal client is served
# all the while, and --send-timeout closes the connections that do not
# read.  Then the worker's bound, --h2-output-budget: with a budget smaller
# than what the silent connections could queue, connections wait for room
# instead of queuing, and are served once the silent ones are closed.
. "$(dirname "$0")/lib.sh"

py_needs hpack
curl_ -V | grep -q HTTP2 || skip "curl without HTTP/2 (apt-get install curl with libnghttp2)"

W=$LIB_TMP/www
mkdir -p "$W"
head -c $((8 << 20)) /dev/urandom >"$W/big.bin"

cat >"$LIB_TMP/py/h2silent.py" <<'EOF'
"""Clients that open every window, ask for a large file many times and never read."""
import socket
import struct

from hpack import Encoder
from petrel_fault import rss_kb  # noqa: F401 (for the tests)


def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload


def silent(port, path, streams):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # read nothing, take little
    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    out += frame(4, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF))  # INITIAL_WINDOW_SIZE
    out += frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535))  # the connection's window
    enc = Encoder()
    for i in range(streams):
        hb = enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "x"),
                         (":path", path)])
        out += frame(1, 5, 1 + 2 * i, hb)  # HEADERS, END_STREAM | END_HEADERS
    s.sendall(out)
    return s


def established(port):
    """Server-side sockets of `port` still established (/proc/net/tcp)."""
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if int(parts[1].split(":")[1], 16) == port and parts[3] == "01":
                        n += 1
        except OSError:
            pass
    return n
EOF

# --- the connection's bound, and --send-timeout ---------------------------------
petrel_start --root "$W" --module hello --send-timeout 3
worker=$(petrel_workers)
[[ -n $worker ]] || fail "no worker"
pyrun "$worker" <<'EOF'
import sys
import time
from petrel_client import *
from h2silent import *

worker = int(sys.argv[1])
check_hello()
before = rss_kb(worker)
conns = [silent(PORT, "/big.bin", 100) for _ in range(10)]
t0 = time.monotonic()
time.sleep(1.0)
peak = rss_kb(worker)
grown = peak - before
# before the bound: ~18 MB per connection (all 800 MiB the windows allowed
# framed at once, as references into the output queue)
check(grown < 30 * 1024, "RSS of the worker grew by %d kB for 10 silent connections" % grown)
ok("10 silent h2 connections x 100 streams of 8 MiB: worker RSS %d kB -> %d kB" % (before, peak))
wait_until(lambda: established(PORT) == 0, 3 + 6,
           "the silent connections closed by --send-timeout")
ok("--send-timeout 3 closed them after %.1f s" % (time.monotonic() - t0))
for c in conns:
    c.close()
EOF
# a normal client during the attack, within the default budget (background silent clients, curl meanwhile)
pyrun "$worker" <<'EOF' &
import time
from h2silent import *
from petrel_client import *
conns = [silent(PORT, "/big.bin", 100) for _ in range(10)]
time.sleep(bound(6))
EOF
LIB_BG+=($!)
sleep 0.5
for i in 1 2 3; do
    got=$(curl_ --http2-prior-knowledge -o "$LIB_TMP/got" -w '%{http_code} %{size_download}' "$BASE/big.bin")
    expect_eq "$got" "200 $((8 << 20))" "a normal h2 client during the attack (#$i)"
    cmp -s "$LIB_TMP/got" "$W/big.bin" || fail "a normal h2 client: body differs"
done
ok "a normal h2 client gets the 8 MiB file whole during the attack"
petrel_stop

# --- the worker's bound: --h2-output-budget ----------------------------------------
petrel_start --root "$W" --module hello --send-timeout 2 --h2-output-budget 1m
worker=$(petrel_workers)
pyrun "$worker" <<'EOF'
import subprocess
import sys
import time
from petrel_client import *
from h2silent import *

worker = int(sys.argv[1])
before = rss_kb(worker)
# 30 connections whose queues, past what their sockets took, hold more
# than 1 MiB together
conns = [silent(PORT, "/big.bin", 100) for _ in range(30)]
time.sleep(0.5)
peak = rss_kb(worker)
check(peak - before < 30 * 3 * 1024, "RSS grew by %d kB" % (peak - before))
# a new client waits for room (the silent queues hold the budget), and is
# served whole once --send-timeout has closed them
t0 = time.monotonic()
r = subprocess.run(["curl", "-q", "-s", "--noproxy", "*", "--max-time", str(bound(20)),
                    "--http2-prior-knowledge", "-o", "/dev/null",
                    "-w", "%{http_code} %{size_download}",
                    "http://127.0.0.1:%d/big.bin" % PORT], capture_output=True, text=True)
check(r.stdout == "200 %d" % (8 << 20), "a client after the budget was spent: %r" % r.stdout)
took = time.monotonic() - t0
# it waited for the silent ones to be closed (--send-timeout 2, counted
# from when they stopped taking bytes), not served at once past the budget
check(took > 1.0, "a new client was served in %.2f s: the budget was not spent" % took)
ok("--h2-output-budget 1m, 30 silent connections: RSS %d kB -> %d kB; a new client "
   "served whole after %.1f s" % (before, peak, took))
for c in conns:
    c.close()
EOF
petrel_stop
