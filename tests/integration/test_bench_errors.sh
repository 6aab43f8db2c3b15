#!/usr/bin/env bash
# test_bench_errors.sh -- petrel-bench counts failures by kind, and every
# request ends either as a response or as exactly one error:
#   connect   nothing listens on the port
#   read      a server that ignores keep-alive and closes after one response
#             (like a blocking server), or that closes inside a body
#   timeout   a server that never answers
# and a server that says "Connection: close" costs reconnects, not errors.
# The servers are small Python scripts; the request body they record is
# checked to be the JSON of --body-size.
#
# Standalone: env top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"


{
    cat <<'PYEOF'
# srv.py MODE PORTFILE COUNTFILE BODYFILE: a thread per connection.
#   once   answer the first request of a connection, then close (no header)
#   close  answer every request with "Connection: close", then close
#   silent read and never answer
#   short  announce 10 body bytes, send 3, close
import socket, sys, threading
mode, portfile, countfile, bodyfile = sys.argv[1:5]
lock = threading.Lock()
def read_request(c, buf):
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        d = c.recv(65536)
        if not d:
            return None, b""
        rest += d
    return (head, rest[:n]), rest[n:]
def serve(c):
    buf = b""
    while True:
        req, buf = read_request(c, buf)
        if req is None:
            return
        if mode == "silent":
            continue
        if req[1]:
            with lock:
                with open(bodyfile, "wb") as f:
                    f.write(req[1])
        if mode == "short":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            return
        hdr = b"Connection: close\r\n" if mode == "close" else b""
        # counted before it is sent: once the client has the response,
        # the count is on disk (the test reads it as soon as the client
        # is done)
        with lock:
            with open(countfile, "a") as f:
                f.write("1\n")
        c.sendall(b"HTTP/1.1 200 OK\r\n" + hdr + b"Content-Length: 2\r\n\r\nok")
        if mode in ("once", "close"):
            return
PYEOF
    stub_serve_py
} >"$TMP/srv.py"

start_srv() {
    rm -f "$TMP/count" "$TMP/body"
    : >"$TMP/count"
    stub_start "$1" "$TMP/count" "$TMP/body"
    URL=http://127.0.0.1:$STUB_PORT
}
stop_srv() { stub_stop; }
sum_errors() { jget "$1" errors.total; }

# 1. connect: nothing listens
URL=http://127.0.0.1:$(free_port)
rc=0
bench -c 2 -n 20 --json --fail-on-error "$URL/" >"$TMP/r1" || rc=$?
expect "$rc" 1 "exit status with connect errors"
expect "$(jget "$TMP/r1" requests)" 0 "requests with nothing listening"
expect "$(jget "$TMP/r1" errors.connect)" 20 "connect errors"
rc=0
bench -c 2 -n 10 --close --json "$URL/" >"$TMP/r1b" || rc=$?
expect "$rc" 0 "exit status without --fail-on-error"
expect "$(jget "$TMP/r1b" errors.connect)" 10 "--close connect errors"

# 2. a server that ignores keep-alive: answers once, closes.  The requests
#    sent on the connection after the first are lost: read/write errors.
start_srv once
bench -c 4 -n 200 --body-size 100 --json "$URL/api" >"$TMP/r2" || fail "once: exit $?"
stop_srv
req=$(jget "$TMP/r2" requests)
err=$(sum_errors "$TMP/r2")
expect "$((req + err))" 200 "once: requests + errors"
((err > 0)) || fail "once: no errors counted"
expect "$(($(jget "$TMP/r2" errors.read) + $(jget "$TMP/r2" errors.write)))" "$err" "once: error kinds"
((req <= $(wc -l <"$TMP/count"))) || fail "once: counted $req, server answered $(wc -l <"$TMP/count")"
(($(jget "$TMP/r2" server_closes) > 0)) || fail "once: no server closes"
# the body: {"requestId":N,"payload":"xxx..."} of exactly 100 bytes
$PY - "$TMP/body" <<'PYEOF' || fail "body: $(cat "$TMP/body")"
import json, sys
b = open(sys.argv[1], "rb").read()
assert len(b) == 100, len(b)
d = json.loads(b)
assert isinstance(d["requestId"], int) and set(d["payload"]) == {"x"}, d
PYEOF

# 3. Connection: close is honoured: one connection per response, no error
start_srv close
bench -c 3 -n 60 --json --fail-on-error "$URL/" >"$TMP/r3" || fail "close: exit $?"
stop_srv
expect "$(jget "$TMP/r3" requests)" 60 "close: requests"
# one connection per response; a connection may reconnect once more before it
# learns that all 60 are done (at most one extra per connection)
n3=$(jget "$TMP/r3" connects)
((n3 >= 60 && n3 <= 63)) || fail "close: connections: got '$n3', want 60 to 63"
expect "$(wc -l <"$TMP/count")" 60 "close: server count"
#    ... but with a pipeline, the requests behind it are lost
start_srv close
bench -c 1 -p 4 -n 40 --json "$URL/" >"$TMP/r3b" || fail "close -p: exit $?"
stop_srv
req=$(jget "$TMP/r3b" requests)
expect "$((req + $(jget "$TMP/r3b" errors.read) + $(jget "$TMP/r3b" errors.write)))" 40 "close -p 4: requests + errors"
(( req < 40 )) || fail "close -p 4: no request lost"

# 4. timeout: a server that never answers
start_srv silent
t0=$(date +%s%N)
bench -c 2 -n 4 --timeout 300ms --json "$URL/" >"$TMP/r4" || fail "silent: exit $?"
t1=$(date +%s%N)
stop_srv
expect "$(jget "$TMP/r4" errors.timeout)" 4 "timeouts"
expect "$(jget "$TMP/r4" requests)" 0 "silent: requests"
(((t1 - t0) / 1000000 < 5000 * SCALE)) || fail "timeouts took $(((t1 - t0) / 1000000)) ms"

# 5. a body cut short by the close
start_srv short
bench -c 1 -n 10 --json "$URL/" >"$TMP/r5" || fail "short: exit $?"
stop_srv
expect "$(jget "$TMP/r5" errors.read)" 10 "short bodies"
expect "$(jget "$TMP/r5" requests)" 0 "short: requests"

# 6. bad usage exits 2
rc=0
"$BENCH" -c 0 http://127.0.0.1:1/ >/dev/null 2>&1 || rc=$?
expect "$rc" 2 "usage error exit status"
rc=0
"$BENCH" -d 1 -n 5 http://127.0.0.1:1/ >/dev/null 2>&1 || rc=$?
expect "$rc" 2 "-d with -n"
refused "--proxy: expected v1 or v2, got 'v3'" --proxy v3 http://127.0.0.1:1/
echo "PASS: test_bench_errors"
