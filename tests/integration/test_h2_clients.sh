#!/usr/bin/env bash
# test_h2_clients.sh -- HTTP/2 prior knowledge (h2c) against real clients:
# curl --http2-prior-knowledge, nghttp and h2load (10000 requests, 10
# connections, 16 streams each: none may fail), settings from the flags.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v nghttp >/dev/null || skip "nghttp not installed (apt-get install nghttp2-client)"
command -v h2load >/dev/null || skip "h2load not installed (apt-get install nghttp2-client)"
curl --version | grep -qw HTTP2 || skip "curl without HTTP/2"

petrel_start --module hello --module echo --h2-max-concurrent-streams 64 \
    --h2-initial-window-size 256k

# curl: GET and POST, HTTP/2 on the same port as HTTP/1.1
out=$(curl_ --http2-prior-knowledge -D "$LIB_TMP/h" "$BASE/hello")
expect_eq "$out" "Hello World!" "curl GET body"
expect_eq "$(status_of "$LIB_TMP/h")" 200 "curl GET status"
expect_match "$(head -n 1 "$LIB_TMP/h")" '^HTTP/2 200' "curl speaks HTTP/2"
expect_eq "$(header_value "$LIB_TMP/h" content-length)" 12 "content-length"
expect_eq "$(header_value "$LIB_TMP/h" content-type)" text/plain "content-type"
header_value "$LIB_TMP/h" date >/dev/null
ok "curl --http2-prior-knowledge GET /hello"

head -c 300000 /dev/urandom >"$LIB_TMP/body"
curl_ --http2-prior-knowledge -o "$LIB_TMP/echoed" -H 'Content-Type: application/x-test' \
    --data-binary @"$LIB_TMP/body" "$BASE/echo"
cmp "$LIB_TMP/body" "$LIB_TMP/echoed" || fail "POST /echo over h2: body differs"
ok "curl --http2-prior-knowledge POST /echo (300 kB, flow control)"

status=$(curl_ --http2-prior-knowledge -o /dev/null -w '%{http_code}' "$BASE/nothing")
expect_eq "$status" 404 "unknown path"
ok "404 over h2"

# nghttp: the SETTINGS we announce, and several streams on one connection
nghttp -nv "$BASE/hello" >"$LIB_TMP/nghttp" 2>&1 || fail "nghttp failed: $(tail -5 "$LIB_TMP/nghttp")"
grep -q 'SETTINGS_MAX_CONCURRENT_STREAMS(0x03):64' "$LIB_TMP/nghttp" ||
    fail "no MAX_CONCURRENT_STREAMS 64 in: $(grep -A4 'recv SETTINGS' "$LIB_TMP/nghttp")"
grep -q 'SETTINGS_INITIAL_WINDOW_SIZE(0x04):262144' "$LIB_TMP/nghttp" || fail "no INITIAL_WINDOW_SIZE 262144"
grep -q 'SETTINGS_MAX_HEADER_LIST_SIZE(0x06):16384' "$LIB_TMP/nghttp" || fail "no MAX_HEADER_LIST_SIZE 16384"
grep -q ':status: 200' "$LIB_TMP/nghttp" || fail "nghttp: no 200"
ok "nghttp: settings from --h2-* flags"

nghttp -ns "$BASE/hello" "$BASE/hello?a=1" "$BASE/nothing" >"$LIB_TMP/nghttp2" 2>&1 ||
    fail "nghttp (3 streams) failed"
[[ $(grep -cE ' (200|404) ' "$LIB_TMP/nghttp2") -eq 3 ]] || fail "nghttp: $(cat "$LIB_TMP/nghttp2")"
ok "nghttp: three streams on one connection"

# h2load: 10000 requests, 10 connections, 16 concurrent streams each
h2load -n 10000 -c 10 -m 16 "$BASE/hello" >"$LIB_TMP/h2load" 2>&1 || fail "h2load failed: $(cat "$LIB_TMP/h2load")"
grep -q 'requests: 10000 total, 10000 started, 10000 done, 10000 succeeded, 0 failed, 0 errored' \
    "$LIB_TMP/h2load" || fail "h2load: $(grep -E '^(requests|status)' "$LIB_TMP/h2load")"
grep -q 'status codes: 10000 2xx' "$LIB_TMP/h2load" || fail "h2load: not all 2xx"
ok "h2load -n 10000 -c 10 -m 16: 0 failed, 0 errored"

# POSTs with bodies through h2load (data from a file)
head -c 20000 /dev/urandom >"$LIB_TMP/post"
h2load -n 500 -c 5 -m 8 -d "$LIB_TMP/post" "$BASE/echo" >"$LIB_TMP/h2load2" 2>&1 || fail "h2load POST failed"
grep -q '500 succeeded, 0 failed, 0 errored' "$LIB_TMP/h2load2" ||
    fail "h2load POST: $(grep -E '^(requests|status)' "$LIB_TMP/h2load2")"
ok "h2load POST /echo: 500 requests with 20 kB bodies"

# h2c upgrade from HTTP/1.1 (RFC 7540 §3.2): curl --http2, nghttp -u
curl_ --http2 -v -o "$LIB_TMP/up" "$BASE/hello" 2>"$LIB_TMP/upv"
expect_eq "$(cat "$LIB_TMP/up")" "Hello World!" "curl --http2 (upgrade) body"
grep -q '< HTTP/1.1 101 Switching Protocols' "$LIB_TMP/upv" || fail "no 101: $(grep '^[<>]' "$LIB_TMP/upv")"
grep -q '< HTTP/2 200' "$LIB_TMP/upv" || fail "no HTTP/2 200 after the upgrade"
curl_ --http2 -o "$LIB_TMP/echoed2" --data-binary @"$LIB_TMP/body" "$BASE/echo"
cmp "$LIB_TMP/body" "$LIB_TMP/echoed2" || fail "POST /echo with h2c upgrade: body differs"
nghttp -nvu "$BASE/hello" >"$LIB_TMP/nu" 2>&1 || fail "nghttp -u failed: $(tail -5 "$LIB_TMP/nu")"
grep -q 'HTTP Upgrade success' "$LIB_TMP/nu" || fail "nghttp -u: no upgrade"
grep -q 'recv (stream_id=1) :status: 200' "$LIB_TMP/nu" || fail "nghttp -u: no 200 on stream 1"
ok "h2c upgrade: curl --http2 (GET, POST 300 kB), nghttp -u"

# the server is still healthy over HTTP/1.1
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "HTTP/1.1 after h2"
petrel_stop
ok "SIGTERM: clean exit"
