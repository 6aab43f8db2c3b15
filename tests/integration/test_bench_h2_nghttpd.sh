#!/usr/bin/env bash
# test_bench_h2_nghttpd.sh -- petrel-bench's h2c mode (prior knowledge, -m
# streams per connection, --close) against nghttpd, a reference HTTP/2
# server: exact counts (checked against the HEADERS frames nghttpd logs),
# bodies, non-2xx, and --compare skipping what the server does not speak.
# Skips (77) when nghttpd is not installed (Debian: nghttp2-server).
#
# Standalone: env top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"


NGHTTPD=$(command -v nghttpd || true)
[[ -n $NGHTTPD ]] || { echo "SKIP: nghttpd not installed (apt-get install nghttp2-server)"; exit 77; }
mkdir -p "$TMP/root"
printf 'Hello World!' >"$TMP/root/hello"

start_nghttpd() {
    PORT=$(free_port)
    "$NGHTTPD" --no-tls -v -d "$TMP/root" "$PORT" >"$TMP/ng.log" 2>"$TMP/err" &
    PID=$!
    wait_port "$PORT"
    URL=http://127.0.0.1:$PORT
}
stop_nghttpd() {
    kill -TERM "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
}
# requests nghttpd received (one HEADERS frame from the client per request)
served() { grep -c 'recv HEADERS frame' "$TMP/ng.log" || true; }

start_nghttpd
# 1. 4 connections x 8 streams, exactly 2000
bench -c 4 -m 8 -n 2000 --expect-body-size 12 --json --fail-on-error "$URL/hello" >"$TMP/r1" ||
    fail "h2c run exited $?"
expect "$(jget "$TMP/r1" protocol)" h2c "protocol"
expect "$(jget "$TMP/r1" requests)" 2000 "h2c requests"
expect "$(jget "$TMP/r1" connects)" 4 "h2c connections"
expect "$(jget "$TMP/r1" streams)" 8 "h2c streams"
expect "$(jget "$TMP/r1" errors.total)" 0 "h2c errors"
# 2. per request: a new connection (preface, SETTINGS, one stream) each time
bench --h2 --close -c 4 -n 200 --json --fail-on-error "$URL/hello" >"$TMP/r2" ||
    fail "h2c --close exited $?"
expect "$(jget "$TMP/r2" requests)" 200 "h2c --close requests"
expect "$(jget "$TMP/r2" connects)" 200 "h2c --close connections"
# 3. POST bodies of 1000 bytes over 2 threads
bench -t 2 -c 4 -m 4 -n 400 --body-size 1000 --json --fail-on-error "$URL/hello" >"$TMP/r3" ||
    fail "h2c POST exited $?"
expect "$(jget "$TMP/r3" requests)" 400 "h2c POST requests"
(($(jget "$TMP/r3" bytes_written) > 400000)) || fail "h2c POST: bodies not sent"
stop_nghttpd
expect "$(served)" 2600 "requests nghttpd received"

start_nghttpd
# 4. 404 is non-2xx
rc=0
bench -c 1 -m 4 -n 40 --json --fail-on-error "$URL/missing" >"$TMP/r4" || rc=$?
expect "$rc" 1 "h2c non-2xx exit status"
expect "$(jget "$TMP/r4" errors.non2xx)" 40 "h2c non-2xx"
# 5. timed, with a warm-up
bench -c 2 -m 4 -d 500ms --warmup 200ms --json --fail-on-error "$URL/hello" >"$TMP/r5" ||
    fail "h2c timed exited $?"
(($(jget "$TMP/r5" requests) > 50)) || fail "h2c timed: too few requests"
# 6. HTTP/1.1 to an h2-only server: every request is a read error, at once
bench -c 2 -n 20 --json "$URL/hello" >"$TMP/r6" || fail "h1 to h2 exited $?"
expect "$(jget "$TMP/r6" errors.read)" 20 "HTTP/1.1 to h2-only: read errors"
# 7. --compare: the HTTP/1.1 rows are skipped after their probe, h2c rows run
bench -c 4 -n 300 --compare --json "$URL/hello" >"$TMP/r7" || fail "--compare exited $?"
$PY - "$TMP/r7" <<'PYEOF' || fail "--compare JSON: $(cat "$TMP/r7")"
import json, sys
rows = json.load(open(sys.argv[1]))["compare"]
assert "skipped" in rows[0] and "skipped" in rows[1], rows[:2]
assert rows[2]["requests"] == 300 and rows[3]["requests"] == 300, rows[2:]
assert rows[2]["connects"] == 4 and rows[3]["connects"] == 300, rows[2:]
PYEOF
stop_nghttpd
echo "PASS: test_bench_h2_nghttpd"
