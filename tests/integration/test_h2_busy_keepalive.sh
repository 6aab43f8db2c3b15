#!/usr/bin/env bash
# test_h2_busy_keepalive.sh -- --keepalive-timeout is idle time between
# requests: an h2c connection that is never idle must not get a GOAWAY for
# it.  A GOAWAY on a busy connection refuses the streams the client opened
# after its last stream id (RFC 9113 §6.8; REFUSED_STREAM, §8.7), which a
# client counts as failed requests.  petrel-bench keeps 16 streams in flight
# on one connection for four keep-alive timeouts: one connection, no
# error.  Then, left idle, the connection is closed (the timeout still works).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_needs

petrel_start --module hello --keepalive-timeout 1
"$BENCH" -c 1 -m 16 -d 4s --json "http://127.0.0.1:$PORT/hello" >"$LIB_TMP/busy.json" \
    2>"$LIB_TMP/busy.err" || fail "petrel-bench failed: $(tail -5 "$LIB_TMP/busy.err")"
read -r requests connects errors < <("$PY" - "$LIB_TMP/busy.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(j["requests"], j["connects"], j["errors"]["total"])
EOF
)
fcmp "$requests > 0" || fail "no request completed"
expect_eq "$errors" 0 "failed requests on a busy h2c connection (--keepalive-timeout 1, 4 s)"
expect_eq "$connects" 1 "connections opened (a GOAWAY makes petrel-bench open another)"
ok "h2c: $requests requests in 4 s on one connection, no GOAWAY while busy"

# idle: the keep-alive timeout closes the connection (GOAWAY, then EOF)
pyrun <<'EOF'
import socket, time
from petrel_client import *
s = socket.create_connection(("127.0.0.1", PORT), timeout=bound(10))
# the preface and an empty SETTINGS frame, then nothing
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
t0 = time.monotonic()
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
secs = time.monotonic() - t0
check(b"\x07\x00\x00\x00\x00\x00" in got, "no GOAWAY frame before the close: %r" % got[:100])
check(secs < bound(5), "idle connection closed after %.1fs, want about 1s" % secs)
ok("h2c: an idle connection is closed after %.1fs (--keepalive-timeout 1)" % secs)
EOF
petrel_stop
