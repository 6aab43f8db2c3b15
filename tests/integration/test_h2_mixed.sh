#!/usr/bin/env bash
# test_h2_mixed.sh -- HTTP/1.1 and HTTP/2 clients on the same port at the
# same time: h2load over h2c and h2load --h1 in parallel, plus curl.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v h2load >/dev/null || skip "h2load not installed (apt-get install nghttp2-client)"

petrel_start --module hello

h2load -n 20000 -c 8 -m 16 "$BASE/hello" >"$LIB_TMP/h2" 2>&1 &
p2=$!
LIB_BG+=("$p2")
h2load --h1 -n 20000 -c 8 -m 1 "$BASE/hello" >"$LIB_TMP/h1" 2>&1 &
p1=$!
LIB_BG+=("$p1")
for i in $(seq 20); do
    expect_eq "$(curl_ --http2-prior-knowledge "$BASE/hello")" "Hello World!" "curl h2 #$i"
    expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "curl h1 #$i"
done
wait "$p2" || fail "h2load (h2) failed: $(cat "$LIB_TMP/h2")"
wait "$p1" || fail "h2load --h1 failed: $(cat "$LIB_TMP/h1")"
for f in h2 h1; do
    grep -q '20000 succeeded, 0 failed, 0 errored' "$LIB_TMP/$f" ||
        fail "$f: $(grep -E '^(requests|status)' "$LIB_TMP/$f")"
done
grep -q 'Application protocol: h2c' "$LIB_TMP/h2" || fail "h2load did not speak h2c"
ok "h2load h2c and h2load --h1 at the same time on one port: 0 failed"
petrel_stop
ok "SIGTERM: clean exit"
