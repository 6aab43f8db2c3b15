#!/usr/bin/env bash
# The proxy module when the upstream fails (RFC 9110 §15.6.3, §15.6.4,
# §15.6.5): nobody listening -> 502; a response head cut, a line that is
# not a status line, two Content-Length fields, Content-Length with
# Transfer-Encoding (RFC 9112 §6.3: ambiguous framing) -> 502; no head
# within header-timeout -> 504; every breaker open -> 503 with Retry-After
# (RFC 9110 §10.2.3); the pool full -> 503; a body cut midway -> the
# client's response is cut (HTTP/1.1: the connection closes before the
# end, curl says so; HTTP/2: the stream is reset); a bad argument stops
# petrel at start-up with a message that says why.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
upstream_start
T=$LIB_TMP
DEAD=$(free_port)

petrel_start --workers 1 --module "proxy:/p=$UP,header-timeout=0.5,breaker-failures=1000;/refused=http://127.0.0.1:$DEAD,breaker-failures=1000;/dead=http://127.0.0.1:$DEAD,breaker-failures=2,breaker-pause=30;/full=$UP,max-conns=1,max-pending=1"

code() { curl_ -o "$T/out" -D "$T/h" -w '%{http_code}' "$@" || true; }

expect_eq "$(code "$BASE/refused/x")" 502 "RFC 9110 15.6.3: nobody listening"
for what in headcut garbage twocl clte; do
    expect_eq "$(code "$BASE/p/$what")" 502 "RFC 9110 15.6.3: upstream answers $what"
done
ok "502: refused, a head cut, garbage, two Content-Length, Content-Length with Transfer-Encoding"

t0=$EPOCHREALTIME
expect_eq "$(code "$BASE/p/slow?ms=3000")" 504 "RFC 9110 15.6.5: no head within header-timeout"
fcmp "$(secs_since "$t0") < $(bound 2.5)" || fail "the 504 came after $(secs_since "$t0")s, not 0.5"
ok "504 at header-timeout"

# the breaker of the dead address opens after its failures in a row
got=
for _ in 1 2 3 4 5 6 7 8; do
    c=$(code "$BASE/dead/x")
    if [[ $c == 503 ]]; then
        got=yes
        break
    fi
    expect_eq "$c" 502 "a dead upstream, its breaker closed (retries count: it opens soon)"
done
[[ $got == yes ]] || fail "no 503 once the breaker is open"
ra=$(header_value "$T/h" Retry-After)
expect_match "$ra" '^[0-9]+$' "RFC 9110 10.2.3: Retry-After"
fcmp "$ra >= 1 && $ra <= 30" || fail "Retry-After: $ra, want 1..30 (breaker-pause=30)"
ok "503 with Retry-After once every breaker is open"

# max-conns=1, max-pending=1: of 4 slow requests at once, one is sent, one
# waits, the others are refused at once
pids=()
for i in 1 2 3 4; do
    curl_ -o /dev/null -w '%{http_code}\n' "$BASE/full/slow?ms=1000" >"$T/full.$i" &
    pids+=($!)
done
wait "${pids[@]}"
sort "$T"/full.* | uniq -c >"$T/full"
grep -q ' 503$' "$T/full" || fail "the pool full: no 503 ($(tr '\n' ' ' <"$T/full"))"
grep -q ' 200$' "$T/full" || fail "the pool full: no 200 ($(tr '\n' ' ' <"$T/full"))"
ok "503 when the pool is full"

# a body cut midway: the client must not take it for whole
rc=0
curl_ -o "$T/out" "$BASE/p/cut" 2>"$T/err" || rc=$?
[[ $rc -ne 0 ]] || fail "HTTP/1.1: a cut body (Content-Length 1000000, 100000 sent) taken for whole"
ok "HTTP/1.1: a cut body is cut for the client (curl: $(head -n 1 "$T/err"))"
rc=0
curl_ -o "$T/out" "$BASE/p/cutchunked" 2>"$T/err" || rc=$?
[[ $rc -ne 0 ]] || fail "HTTP/1.1: a cut chunked body taken for whole"
ok "HTTP/1.1: a cut chunked body is cut for the client (curl: $(head -n 1 "$T/err"))"
rc=0
curl_ --http2-prior-knowledge -o "$T/out" "$BASE/p/cut" 2>"$T/err" || rc=$?
[[ $rc -ne 0 ]] || fail "h2c: a cut body taken for whole"
ok "h2c: a cut body resets the stream (curl: $(head -n 1 "$T/err"))"
# and the server goes on
expect_eq "$(code "$BASE/p/ok")" 200 "after the cuts"
petrel_stop

# --- a bad argument stops petrel at start-up, saying why --------------------------
refused() { # ARG WORDS: petrel --module ARG exits 1 and says WORDS
    local rc=0
    timeout "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 --module "$1" >"$T/bad" 2>&1 || rc=$?
    expect_eq "$rc" 1 "--module '$1': exit status"
    grep -qF "$2" "$T/bad" || fail "--module '$1': no '$2' in $(cat "$T/bad")"
}
refused "proxy" "expected --module proxy:PREFIX=URL"
refused "proxy:/x" "expected PREFIX=URL"
refused "proxy:/x=ftp://a" "unsupported scheme 'ftp'"
refused "proxy:/x=$UP,bogus=1" "option 'bogus=1': expected strip"
refused "proxy:/x=$UP,host=maybe" "option 'host=maybe'"
refused "proxy:/a/:b=$UP" "not a plain path prefix"
refused "proxy:/x=$UP,max-conns=many" "option 'max-conns=many'"
ok "bad arguments refused at start-up"
