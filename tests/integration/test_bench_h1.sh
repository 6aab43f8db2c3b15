#!/usr/bin/env bash
# test_bench_h1.sh -- petrel-bench, HTTP/1.1 keep-alive against the real petrel:
# exact request counts (checked against petrel's access log), pipelining,
# threads, POST bodies checked by size, timed runs with warm-up, and the
# response checks (non-2xx, --expect-status, --fail-on-error).
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

start_petrel

# 1. GET, 8 connections, pipeline 4, two threads: exactly 2000, no errors
bench -c 8 -t 2 -p 4 -n 2000 --json --fail-on-error "$URL/hello" >"$TMP/r1" ||
    fail "GET run exited $?"
expect "$(jget "$TMP/r1" requests)" 2000 "GET requests"
expect "$(jget "$TMP/r1" errors.total)" 0 "GET errors"
expect "$(jget "$TMP/r1" connects)" 8 "GET connections"
expect_latency "$TMP/r1"

# 2. POST /echo with a 300-byte JSON body, echoed with the same size
bench -c 4 -n 500 --body-size 300 --expect-body-size 300 --json --fail-on-error "$URL/echo" \
    >"$TMP/r2" || fail "POST run exited $?"
expect "$(jget "$TMP/r2" requests)" 500 "POST requests"
expect "$(jget "$TMP/r2" errors.check)" 0 "POST check failures"

# 3. a wrong body size is a check failure, counted, and --fail-on-error exits 1
rc=0
bench -c 2 -n 50 --body-size 100 --expect-body-size 99 --json --fail-on-error "$URL/echo" \
    >"$TMP/r3" || rc=$?
expect "$rc" 1 "--fail-on-error exit status"
expect "$(jget "$TMP/r3" requests)" 50 "check-failure requests"
expect "$(jget "$TMP/r3" errors.check)" 50 "check failures"

# 4. --expect-status: 200 is not 201
rc=0
bench -c 2 -n 20 --expect-status 201 --json "$URL/hello" >"$TMP/r4" || rc=$?
expect "$rc" 0 "exit status without --fail-on-error"
expect "$(jget "$TMP/r4" errors.check)" 20 "--expect-status failures"

# the server's own count: 2000 + 20 GET /hello, 500 + 50 POST /echo
stop_petrel
expect "$(grep -c '"GET /hello HTTP/1.1"' "$TMP/access.log" || true)" 2020 "server count of GET /hello"
expect "$(grep -c '"POST /echo HTTP/1.1"' "$TMP/access.log" || true)" 550 "server count of POST /echo"

start_petrel

# 5. 404 is non-2xx
rc=0
bench -c 2 -n 30 --json --fail-on-error "$URL/nope" >"$TMP/r5" || rc=$?
expect "$rc" 1 "non-2xx exit status"
expect "$(jget "$TMP/r5" requests)" 30 "404 requests"
expect "$(jget "$TMP/r5" errors.non2xx)" 30 "non-2xx count"

# 6. timed run with a warm-up: the window is -d long, the server saw more
bench -c 4 -p 2 -d 1 --warmup 300ms --json --fail-on-error "$URL/hello?timed" >"$TMP/r6" ||
    fail "timed run exited $?"
expect "$(jget "$TMP/r6" duration_s)" 1.0 "duration"
n6=$(jget "$TMP/r6" requests)
((n6 > 100)) || fail "timed run: only $n6 requests"

# 7. human output, piped: a summary and no progress line (no carriage return)
bench -c 2 -d 300ms "$URL/hello" >"$TMP/r7" || fail "human run exited $?"
grep -q '^Requests/sec:' "$TMP/r7" || fail "no Requests/sec line"
grep -q '99.9%' "$TMP/r7" || fail "no 99.9% line"
if grep -q $'\r' "$TMP/r7"; then fail "progress line written to a pipe"; fi

stop_petrel
n_timed=$(grep -c '"GET /hello?timed HTTP/1.1"' "$TMP/access.log" || true)
((n_timed > n6)) || fail "server saw $n_timed timed requests, petrel-bench counted $n6 in the window"
echo "PASS: test_bench_h1"
