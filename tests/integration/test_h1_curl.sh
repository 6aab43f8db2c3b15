#!/usr/bin/env bash
# HTTP/1.1 with curl: GET /hello and its header fields, keep-alive reuse,
# HEAD, POST /echo and /api/benchmark/echo (small, 1 MiB, chunked, with
# Expect: 100-continue).
. "$(dirname "$0")/lib.sh"

petrel_start --module hello --module echo
T=$LIB_TMP

# --- GET /hello ------------------------------------------------------------
curl_ -D "$T/h" -o "$T/b" "$BASE/hello"
expect_eq "$(status_of "$T/h")" 200 "GET /hello status"
expect_eq "$(cat "$T/b")" "Hello World!" "GET /hello body"
expect_match "$(head -n 1 "$T/h")" $'^HTTP/1\\.1 200 OK\r$' "GET /hello status line"
# RFC 9110 §10.2.4: Server; §6.6.1: an origin server with a clock sends Date,
# in the IMF-fixdate form of §5.6.7.
expect_match "$(header_value "$T/h" Server)" '^petrel' "Server"
date_=$(header_value "$T/h" Date)
expect_match "$date_" '^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$' "Date is an IMF-fixdate"
skew=$(($(date -u -d "$date_" +%s) - $(date -u +%s)))
[[ ${skew#-} -le 5 ]] || fail "Date '$date_' is ${skew}s off the clock"
expect_match "$(header_value "$T/h" Content-Type)" '^text/plain' "Content-Type"
expect_eq "$(header_value "$T/h" Content-Length)" 12 "Content-Length"
ok "GET /hello: 200, Hello World!, Server, Date, Content-Type, Content-Length"

# --- keep-alive: two URLs in one curl invocation share the connection ------
# (RFC 9112 §9.3: HTTP/1.1 connections persist by default.)
curl_ -v -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' \
    "$BASE/hello" "$BASE/hello" >"$T/w" 2>"$T/v"
grep -q 'Re-using existing connection' "$T/v" ||
    fail "curl did not reuse the connection for the second request: $(cat "$T/v")"
expect_eq "$(tr '\n' ' ' <"$T/w")" "200 1 200 0 " "status and new connections per request"
ok "keep-alive: the second request reuses the connection"

# --- HEAD ------------------------------------------------------------------
# RFC 9110 §9.3.2: the same header fields as GET, no content.
curl_ -I -D "$T/h" -o "$T/b" "$BASE/hello"
expect_eq "$(status_of "$T/h")" 200 "HEAD /hello status"
expect_eq "$(header_value "$T/h" Content-Length)" 12 "HEAD /hello Content-Length"
expect_match "$(header_value "$T/h" Content-Type)" '^text/plain' "HEAD /hello Content-Type"
header_value "$T/h" Date >/dev/null
# Two HEADs and a GET on one connection: a body after a HEAD response would
# show up as garbage in front of the next response.
curl_ -v -I -o /dev/null -I -o /dev/null "$BASE/hello" "$BASE/hello" 2>"$T/v"
curl_ -v -o "$T/b" "$BASE/hello" 2>>"$T/v"
expect_eq "$(cat "$T/b")" "Hello World!" "GET after HEADs"
ok "HEAD /hello: 200, Content-Length 12, no body"

# --- POST /echo ------------------------------------------------------------
for path in /echo /api/benchmark/echo; do
    curl_ -D "$T/h" -o "$T/b" -H 'Content-Type: application/json' --data-binary '{"a":1}' "$BASE$path"
    expect_eq "$(status_of "$T/h")" 200 "POST $path status"
    expect_eq "$(cat "$T/b")" '{"a":1}' "POST $path body"
    expect_eq "$(header_value "$T/h" Content-Type)" application/json "POST $path Content-Type"
    expect_eq "$(header_value "$T/h" Content-Length)" 7 "POST $path Content-Length"

    # without a Content-Type, the module answers application/octet-stream
    curl_ -D "$T/h" -o "$T/b" -H 'Content-Type:' --data-binary 'abc' "$BASE$path"
    expect_eq "$(cat "$T/b")" abc "POST $path body without Content-Type"
    expect_eq "$(header_value "$T/h" Content-Type)" application/octet-stream "POST $path default Content-Type"

    # an empty body
    curl_ -D "$T/h" -o "$T/b" -X POST -H 'Content-Length: 0' "$BASE$path"
    expect_eq "$(status_of "$T/h")" 200 "POST $path empty body status"
    expect_eq "$(header_value "$T/h" Content-Length)" 0 "POST $path empty body Content-Length"
    [[ ! -s $T/b ]] || fail "POST $path with an empty body answered $(cat "$T/b")"
    ok "POST $path echoes body and Content-Type"
done

# 1 MiB of random bytes, byte-exact
head -c 1048576 /dev/urandom >"$T/big"
for path in /echo /api/benchmark/echo; do
    curl_ -D "$T/h" -o "$T/b" -H 'Content-Type: application/x-petrel-test' -H 'Expect:' \
        --data-binary "@$T/big" "$BASE$path"
    expect_eq "$(status_of "$T/h")" 200 "POST $path 1 MiB status"
    expect_eq "$(header_value "$T/h" Content-Length)" 1048576 "POST $path 1 MiB Content-Length"
    expect_eq "$(header_value "$T/h" Content-Type)" application/x-petrel-test "POST $path 1 MiB Content-Type"
    cmp "$T/big" "$T/b" || fail "POST $path: the 1 MiB echo differs from what was sent"
    ok "POST $path: 1 MiB echoed byte-exact"
done

# A chunked request body (RFC 9112 §7.1): curl sends the file in chunks.
for path in /echo /api/benchmark/echo; do
    curl_ -v -D "$T/h" -o "$T/b" -H 'Transfer-Encoding: chunked' -H 'Expect:' \
        -H 'Content-Type: text/x-chunked' --data-binary "@$T/big" "$BASE$path" 2>"$T/v"
    grep -qi '^> Transfer-Encoding: chunked' "$T/v" || fail "curl did not send a chunked body"
    expect_eq "$(status_of "$T/h")" 200 "POST $path chunked status"
    expect_eq "$(header_value "$T/h" Content-Type)" text/x-chunked "POST $path chunked Content-Type"
    cmp "$T/big" "$T/b" || fail "POST $path: the chunked 1 MiB echo differs from what was sent"
    printf 'hello, chunks' >"$T/small"
    curl_ -o "$T/b" -H 'Transfer-Encoding: chunked' --data-binary "@$T/small" "$BASE$path"
    cmp "$T/small" "$T/b" || fail "POST $path: small chunked echo differs"
    ok "POST $path: chunked bodies echoed byte-exact"
done

# Expect: 100-continue (RFC 9110 §10.1.1): the server answers 100 Continue
# before the body, so curl does not wait out its timeout (here 5 s) before
# sending it.
head -c $((3 * 1048576)) /dev/urandom >"$T/big3"
t0=$(now)
curl_ -v --expect100-timeout 5 -D "$T/h" -o "$T/b" -H 'Expect: 100-continue' \
    --data-binary "@$T/big3" "$BASE/echo" 2>"$T/v"
secs=$(secs_since "$t0")
grep -q '^> Expect: 100-continue' "$T/v" || fail "curl did not send Expect: 100-continue"
grep -q '^< HTTP/1.1 100 Continue' "$T/v" || fail "no 100 Continue: $(grep '^[<>*]' "$T/v")"
! grep -q 'Done waiting for 100-continue' "$T/v" || fail "curl had to wait out its 100-continue timeout"
expect_eq "$(status_of "$T/h")" 200 "Expect: 100-continue final status"
cmp "$T/big3" "$T/b" || fail "the 3 MiB echo after 100 Continue differs from what was sent"
fcmp "$secs < $(bound 4)" || fail "the 100-continue request took ${secs}s"
ok "Expect: 100-continue: 100 Continue, then the 3 MiB body echoed (${secs}s)"

# Expect: 100-continue on a body over --max-body-size would get 413 instead
# of 100; that is in test_h1_errors.sh.

petrel_stop
ok "SIGTERM: exit status 0"
