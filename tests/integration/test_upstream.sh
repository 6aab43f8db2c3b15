#!/usr/bin/env bash
# test_upstream.sh -- the upstream client (petrel_upstream_new, petrel_call),
# through the module upstream_mod.c (GET|POST /up/PATH calls the upstream
# and answers what it got) against:
#   1. petrel itself (hello, echo): a GET and a POST with its body;
#   2. upstream_peer.py, a raw-socket upstream: chunked with trailers, 1xx
#      skipped, a body delimited by the close, HTTP/1.0; every way of
#      failing (closed mid-header, mid-body after on_head, garbage, CL+TE,
#      two Content-Lengths, a bad chunk: EPROTO; no header: EHEADER);
#      connections reused (100 calls, a handful of connections), not reused
#      after Connection: close or an HTTP/1.0 response, an idle connection
#      the upstream closed dropped without an error; a POST whose reused
#      connection broke is not sent again while a GET is; a response
#      paused from on_head and resumed; a call cancelled; a full queue
#      (EFULL); a closed port (EREFUSED);
#   3. the circuit breaker: an upstream that resets every connection sees
#      breaker_failures connections, then calls fail at once with EBREAKER,
#      and after breaker_pause_ms one probe closes the breaker again; what
#      /metrics says of it; a request aborted by its client cancels its call
#      and closes the call's connection;
#   4. two addresses: round robin, and one of them down (retried on the
#      other, taken out by its breaker);
#   5. the connection rate: connects_per_sec bounds the connections made;
#   6. a unix: address; the least pending balance;
#   7. idle_timeout_ms, max_requests and call_timeout_ms;
#   8. connect_timeout_ms: an upstream whose accept queue is full;
#   9. streamed request bodies (petrel_call_stream, POST /stream/PATH of
#      upstream_mod.c): intact (length and MD5) with Content-Length and
#      chunked, written at once or a part per timer tick, to petrel and to
#      upstream_peer.py; 100 MB to an upstream that reads slowly, the
#      caller's resident memory bounded; an early 413 delivered, the writes
#      after it refused and its connection not reused; write_end short of
#      the length fails the call; a cancel mid-body; a PUT whose body bytes
#      went out is not sent again on a broken reused connection.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
T=$LIB_TMP
cc -shared -fPIC -g -Wall -Wextra -Werror -I"$top_srcdir/include" -o "$T/upt.so" \
    "$top_srcdir/tests/integration/upstream_mod.c" || fail "the test module does not build"

# peer DIR [UNIX_SOCKET]: start upstream_peer.py with control directory DIR;
# sets PEER (its port).
peer() {
    mkdir -p "$1"
    "$PY" "$top_srcdir/tests/integration/upstream_peer.py" "$1/port" "$@" &
    LIB_BG+=("$!") # killed at the end
    wait_for "$(bound 10)" test -s "$1/port" || fail "upstream_peer.py did not start"
    PEER=$(cat "$1/port")
    [[ $# -gt 1 || -e $1/noaccept ]] || wait_port "$PEER"
}
# stat PORT FIELD: a count of the peer's (its own /stats connection included).
stat() {
    curl_ "http://127.0.0.1:$1/stats" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'
}
# call PATH [CURL-ARGS]: "CODE BODY" (newlines as |) of GET $BASE/up/PATH.
call() {
    local p=$1
    shift
    curl_ -o "$T/body" -w '%{http_code}' "$@" "$BASE/up/$p" >"$T/code" || true
    printf '%s %s\n' "$(cat "$T/code")" "$(tr '\n' '|' <"$T/body")"
}
want() { # want PATH PATTERN [CURL-ARGS]
    local p=$1 pat=$2
    shift 2
    local got
    got=$(call "$p" "$@")
    [[ $got == $pat ]] || fail "/up/$p: got '$got', want '$pat'"
}

# --- 1. petrel as the upstream ------------------------------------------------
petrel_start --module hello --module echo
UBASE=$BASE
UPID=$PETREL_PID
UPT_URLS=$UBASE petrel_start --module "$T/upt.so"
want hello '200 status 200|x-test |body Hello World!|trailer |'
want echo '200 status 200|x-test |body ping|trailer |' --data-binary ping
ok "petrel as upstream: GET /hello and POST /echo with its body"
# pattern N: the body /stream/ makes (byte i is ALPHA[i % 61])
pattern() {
    "$PY" -c 'import sys; a = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"; n = int(sys.argv[1]); sys.stdout.buffer.write((a * (n // 61 + 1))[:n])' "$1"
}
for q in "n=3000" "n=3000&chunked=1" "n=40000&chunked=1&part=1000&tick=1" "n=0" "n=0&chunked=1"; do
    n=${q#n=}
    n=${n%%&*}
    curl_ -o "$T/s.got" --data-binary '' "$BASE/stream/echo?$q" || true
    { printf 'status 200\nbody '; pattern "$n"; printf '\nwrote %s\n' "$n"; } >"$T/s.want"
    head -c "$(wc -c <"$T/s.want")" "$T/s.got" | cmp -s - "$T/s.want" ||
        fail "/stream/echo?$q: $(head -c 300 "$T/s.got")"
done
ok "petrel as upstream: a streamed body echoed (Content-Length, chunked, a part per tick, empty)"
# a caller that ignores petrel_call_write()'s 0 and keeps writing: refused
# with PETREL_ENOMEM (-1) once the call holds 1 MiB (its buffer's bound)
got=$(curl_ --data-binary '' "$BASE/stream/echo?n=4194304&chunked=1&greedy=1")
[[ $got =~ ^refused\ -1\ after\ ([0-9]+)$ ]] || fail "a writer past the bound: '$got'"
held=${BASH_REMATCH[1]}
((held > 1048576 - 16384 && held <= 1048576)) || fail "refused after $held bytes, not at 1 MiB"
ok "a streamed call refuses a writer that ignores its mark at 1 MiB held ($held bytes taken)"
petrel_stop
petrel_stop "$UPID"

# --- 2. the raw upstream ----------------------------------------------------------
peer "$T/p1"
P1=$PEER
UPT_URLS=http://127.0.0.1:$P1 UPT_OPTS=header_timeout_ms=300,breaker_failures=1000 \
    petrel_start --module "$T/upt.so" --workers 1
want ok '200 status 200|x-test ok|body hello|trailer |'
want host "200 status 200|x-test ok|body 127.0.0.1:$P1|trailer |"
want chunked '200 status 200|x-test chunky|body hello|trailer yes|'
want interim '200 status 200|x-test ok|body after interim|trailer |'
want nolen '200 status 200|x-test nolen|body to the end|trailer |'
want http10 '200 status 200|x-test old|body ok|trailer |'
ok "chunked with trailers, 1xx skipped, a body to the close, HTTP/1.0"

want close-head '502 error -105 *closed before the response|'
want close-body '502 error -105 *closed mid-body after head|'
want garbage '502 error -106 *'
want cl-te '502 error -106 *'
want two-cl '502 error -106 *'
want bad-chunk '502 error -106 *after head|'
want hang '504 error -103 *no response header in 300 ms|'
ok "closed mid-header (ECLOSED), mid-body after on_head, garbage, CL+TE, two CLs, a bad chunk (EPROTO), no header (EHEADER)"

c0=$(stat "$P1" conns)
# many PATH N: the status codes of N calls of /up/PATH from one curl, counted
many() {
    local args=() i
    for ((i = 0; i < $2; i++)); do args+=(-o /dev/null "$BASE/up/$1"); done
    curl_ -w '%{http_code}\n' "${args[@]}" | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }'
}
got=$(many ok 100)
[[ $got == "200:100 " ]] || fail "100 calls: $got"
c1=$(stat "$P1" conns)
(( c1 - c0 <= 3 )) || fail "100 calls opened $((c1 - c0 - 1)) connections, want reuse"
ok "100 calls on $((c1 - c0 - 1)) connection(s)"

for i in 1 2 3 4 5; do want close '200 *body bye*'; done
for i in 1 2 3; do want http10 '200 *body ok*'; done
c2=$(stat "$P1" conns)
# the first call takes the connection the calls before left in the pool
(( c2 - c1 - 1 == 7 )) || fail "Connection: close / HTTP/1.0: $((c2 - c1 - 1)) connections for 8 calls, want 7"
ok "no reuse after Connection: close nor HTTP/1.0 ($((c2 - c1 - 1)) connections for 8 calls)"

for i in 1 2 3; do
    want idle-close '200 *body soon closed*'
    sleep 0.3 # the upstream closes the pooled connection meanwhile
    want ok '200 *body hello*'
done
ok "an idle connection the upstream closed: no error on the next call"

want ok '200 *'
d0=$(stat "$P1" drops)
want drop '502 error -105 *' --data-binary once
d1=$(stat "$P1" drops)
(( d1 - d0 == 1 )) || fail "a POST on a broken reused connection reached the upstream $((d1 - d0)) times"
want ok '200 *'
want drop '502 error -105 *'
d2=$(stat "$P1" drops)
(( d2 - d1 == 2 )) || fail "a GET on a broken reused connection was sent $((d2 - d1)) times, want 2 (a retry)"
ok "a POST is not sent twice; a GET on a reused connection that broke is sent again once"

# empty: a pause that leaves no byte unread (the end of the head is the
# end of the response): the resume alone must end it
for p in chunked nolen close-body empty; do
    curl_ -o "$T/b" "$BASE/pause/$p" || true
    cmp -s "$T/b" <(curl_ "$BASE/up/$p") || fail "paused /up/$p: $(cat "$T/b")"
done
[[ $(curl_ "$BASE/pause/chunked") == $'status 200\nx-test chunky\nbody hello\ntrailer yes' ]] ||
    fail "paused /up/chunked: $(curl_ "$BASE/pause/chunked")"
ok "a response paused from on_head for 100 ms: the same as unpaused (chunked, to the close, cut, empty)"

curl_ -o "$T/b" "$BASE/cancel/hang" && [[ $(cat "$T/b") == cancelled ]] || fail "cancel: $(cat "$T/b")"
want ok '200 *body hello*'
ok "a cancelled call: the next one is answered"
petrel_stop

UPT_URLS=http://127.0.0.1:$P1 UPT_OPTS=header_timeout_ms=2000,max_conns=1,max_pending=1 \
    petrel_start --module "$T/upt.so" --workers 1
for i in 1 2 3; do
    curl_ -o "$T/full.$i" -w '%{http_code}\n' "$BASE/up/hang" >"$T/fullcode.$i" &
    sleep 0.1
done
wait_for "$(bound 10)" bash -c "[[ -s $T/fullcode.1 && -s $T/fullcode.2 && -s $T/fullcode.3 ]]"
grep -q 'error -108' "$T/full.3" || fail "a third call with max_conns 1, max_pending 1: $(cat "$T/full.3")"
grep -q 'error -103' "$T/full.1" || fail "the first of them: $(cat "$T/full.1")"
ok "max_conns 1, max_pending 1: the third call fails at once with EFULL"
petrel_stop

closed=$(free_port)
UPT_URLS=http://127.0.0.1:$closed petrel_start --module "$T/upt.so" --workers 1
want ok '502 error -101 *Connection refused*'
ok "a closed port: EREFUSED"
petrel_stop

# two addresses: round robin over both; one of them down: its calls are
# sent again to the other (GET, within the budget) and its breaker takes it out
peer "$T/p3"
P3=$PEER
r1=$(stat "$P1" requests)
r3=$(stat "$P3" requests)
UPT_URLS="http://127.0.0.1:$P1, http://127.0.0.1:$P3" petrel_start --module "$T/upt.so" --workers 1
got=$(many ok 20)
[[ $got == "200:20 " ]] || fail "20 calls over two addresses: $got"
n1=$(($(stat "$P1" requests) - r1 - 1))
n3=$(($(stat "$P3" requests) - r3 - 1))
(( n1 == 10 && n3 == 10 )) || fail "round robin: $n1 and $n3 requests, want 10 and 10"
ok "round robin over two addresses: 10 calls each"
petrel_stop
UPT_URLS="http://127.0.0.1:$P1,http://127.0.0.1:$closed" UPT_OPTS=breaker_failures=2 \
    petrel_start --module "$T/upt.so" --workers 1
got=$(many ok 20)
[[ $got == "200:20 " ]] || fail "20 calls, one address down: $got"
grep -q "127.0.0.1:$closed failed 2 times in a row" "$PETREL_ERR" || fail "no breaker line: $(cat "$PETREL_ERR")"
ok "one address down: 20 calls answered (retried on the other), its breaker open"
petrel_stop

# --- 3. the circuit breaker ---------------------------------------------------------
peer "$T/p2"
P2=$PEER
touch "$T/p2/rst"
# the pause is long enough for the 30 calls and the checks below on a slow
# (sanitizer) build; the probe is sent once it has passed, however long they
# took (a pause of 3 s once ended before the 30th call under ASan)
UPT_URLS=http://127.0.0.1:$P2 UPT_OPTS=breaker_failures=3,breaker_pause_ms=8000,retry_budget_pct=0 \
    petrel_start --module "$T/upt.so" --workers 1 --admin-listen 127.0.0.1:0
ADMIN=http://127.0.0.1:$(petrel_admin_port)
# metric NAME{LABELS}: its value in /metrics
metric() {
    curl_ "$ADMIN/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}
rm "$T/p2/rst"
b0=$(stat "$P2" conns)
touch "$T/p2/rst"
for i in 1 2 3; do want ok '502 error -10[15] *'; done # reset at connect or after
t_open=$(now) # the breaker opened (at the third failure): out for 8 s
t0=$(now)
got=$(many ok 30)
took=$(secs_since "$t0")
[[ $got == "503:30 " ]] || fail "30 calls with the breaker open: $got"
want ok '503 error -107 *every address is out*'
rm "$T/p2/rst"
b1=$(stat "$P2" conns)
(( b1 - b0 - 1 == 3 )) || fail "breaker: the upstream saw $((b1 - b0 - 1)) connections for 34 calls, want 3"
ok "breaker: 3 failures, then 31 calls failed at once (30 in ${took}s) with EBREAKER; 3 connections seen"
A='upstream="t",address="127.0.0.1:'$P2'"'
[[ $(metric "petrel_upstream_breaker_open{$A}") == 1 ]] || fail "breaker_open: $(curl_ "$ADMIN/metrics" | grep upstream)"
[[ $(metric 'petrel_upstream_calls_total{upstream="t",result="breaker"}') == 31 ]] ||
    fail "calls by result: $(curl_ "$ADMIN/metrics" | grep upstream_calls)"
[[ $(metric "petrel_upstream_connects_total{$A}") == 3 ]] || fail "connects: $(curl_ "$ADMIN/metrics" | grep upstream)"
ok "/metrics: 31 calls failed by the breaker, 3 connects, the breaker open"
fcmp "$(secs_since "$t_open") < 7.5" ||
    fail "the calls and checks with the breaker open took $(secs_since "$t_open") s, near its 8 s pause"
sleep "$(awk -v s="$(secs_since "$t_open")" 'BEGIN { printf "%.2f", 8.1 - s }')"
want ok '200 *body hello*'
want ok '200 *body hello*'
[[ $(metric "petrel_upstream_breaker_open{$A}") == 0 ]] || fail "breaker_open after the probe: $(curl_ "$ADMIN/metrics" | grep upstream)"
[[ $(metric 'petrel_upstream_calls_total{upstream="t",result="2xx"}') == 2 ]] || fail "2xx: $(curl_ "$ADMIN/metrics" | grep upstream_calls)"
[[ $(metric "petrel_upstream_reuses_total{$A}") == 1 ]] || fail "reuses: $(curl_ "$ADMIN/metrics" | grep upstream)"
[[ $(metric "petrel_upstream_idle_connections{$A}") == 1 ]] || fail "idle: $(curl_ "$ADMIN/metrics" | grep upstream)"
ok "breaker: after the pause a probe closes it (/metrics: breaker closed, 2 calls 2xx, 1 reuse, 1 idle connection)"

# the client leaves while the call waits: the call is cancelled, its
# connection (taken from the pool) closed, and no result is counted
curl_ "$ADMIN/metrics" | grep '^petrel_upstream_calls_total' >"$T/calls.before"
rc=0
curl -q -sS --noproxy '*' --max-time 0.5 -o /dev/null "$BASE/up/hang" 2>/dev/null || rc=$?
[[ $rc -eq 28 ]] || fail "curl --max-time 0.5 /up/hang: status $rc, want 28 (timed out)"
no_conns() { [[ $(metric "petrel_upstream_connections{$A}") == 0 ]]; }
wait_for "$(bound 5)" no_conns ||
    fail "connections after the abort: $(curl_ "$ADMIN/metrics" | grep upstream_connections)"
curl_ "$ADMIN/metrics" | grep '^petrel_upstream_calls_total' >"$T/calls.after"
cmp -s "$T/calls.before" "$T/calls.after" || fail "an aborted call was counted: $(diff "$T/calls.before" "$T/calls.after")"
ok "the request aborted: its call cancelled, its connection closed"
petrel_stop

# --- 5. the connection rate ---------------------------------------------------------
# no breaker, no retry: 40 calls to an upstream that resets every connection
# each need a connection; at 20 a second (a bucket of 20 to start with) the
# last 20 wait for their tokens: a second at least
UPT_URLS=http://127.0.0.1:$P2 UPT_OPTS=breaker_failures=0,retry_budget_pct=0,connects_per_sec=20 \
    petrel_start --module "$T/upt.so" --workers 1
c0=$(stat "$P2" conns)
touch "$T/p2/rst"
t0=$(now)
got=$(many ok 40)
took=$(secs_since "$t0")
rm "$T/p2/rst"
[[ $got == "502:40 " ]] || fail "40 calls to a resetting upstream: $got"
c1=$(stat "$P2" conns)
(( c1 - c0 - 1 == 40 )) || fail "40 calls: $((c1 - c0 - 1)) connections"
fcmp "$took >= 0.9" || fail "40 connections at connects_per_sec 20 took ${took}s, want 1 s at least"
ok "connects_per_sec 20: 40 connections took ${took}s"
petrel_stop

# --- 6. a Unix socket, the least pending balance ---------------------------------
peer "$T/p4" "$T/p4/sock"
UPT_URLS="unix:$T/p4/sock" petrel_start --module "$T/upt.so" --workers 1
want ok '200 status 200|x-test ok|body hello|trailer |'
want host '200 status 200|x-test ok|body localhost|trailer |'
ok "a unix: address (Host: localhost)"
petrel_stop
r1=$(stat "$P1" requests)
r3=$(stat "$P3" requests)
UPT_URLS="http://127.0.0.1:$P1,http://127.0.0.1:$P3" UPT_OPTS=balance=1,header_timeout_ms=1500 \
    petrel_start --module "$T/upt.so" --workers 1
# one call hangs on the first address it got: the next ones go to the other
curl_ -o /dev/null "$BASE/up/hang" &
hang=$!
sleep 0.3
got=$(many ok 10)
[[ $got == "200:10 " ]] || fail "least pending, 10 calls: $got"
wait "$hang" || true
n1=$(($(stat "$P1" requests) - r1 - 1))
n3=$(($(stat "$P3" requests) - r3 - 1))
(( (n1 == 1 && n3 == 10) || (n1 == 10 && n3 == 1) )) ||
    fail "least pending: $n1 and $n3 requests, want 1 (the hang) and 10"
ok "least pending: while a call hangs on one address, the 10 others go to the other"
petrel_stop

# --- 7. idle_timeout_ms, max_requests, call_timeout_ms ----------------------------
UPT_URLS=http://127.0.0.1:$P1 UPT_OPTS=idle_timeout_ms=1000,max_requests=3,call_timeout_ms=400 \
    petrel_start --module "$T/upt.so" --workers 1 --admin-listen 127.0.0.1:0
ADMIN=http://127.0.0.1:$(petrel_admin_port)
A='upstream="t",address="127.0.0.1:'$P1'"'
c0=$(stat "$P1" conns)
got=$(many ok 9)
[[ $got == "200:9 " ]] || fail "9 calls: $got"
c1=$(stat "$P1" conns)
(( c1 - c0 - 1 == 3 )) || fail "max_requests 3: 9 calls on $((c1 - c0 - 1)) connections, want 3"
ok "max_requests 3: 9 calls on 3 connections"
# (the clock starts before the call: the connection idles after it)
t0=$(now)
want ok '200 *body hello*'
[[ $(metric "petrel_upstream_idle_connections{$A}") == 1 ]] || fail "idle: $(curl_ "$ADMIN/metrics" | grep upstream)"
no_conns() { [[ $(metric "petrel_upstream_connections{$A}") == 0 ]]; }
wait_for "$(bound 5)" no_conns
took=$(secs_since "$t0")
fcmp "$took >= 0.99" || fail "idle_timeout_ms 1000: closed after ${took}s"
ok "idle_timeout_ms 1000: the idle connection closed after ${took}s"
want hang '504 error -104 *no complete response in 400 ms|'
ok "call_timeout_ms 400: ETIMEOUT"
petrel_stop

# --- 8. connect_timeout_ms -----------------------------------------------------------
# a backlog of 0, never accepted: the first connection is made (its call
# waits for a header), the handshakes of the next ones never complete
mkdir -p "$T/p5"
touch "$T/p5/noaccept"
peer "$T/p5"
UPT_URLS=http://127.0.0.1:$PEER UPT_OPTS=connect_timeout_ms=300,header_timeout_ms=3000,retry_budget_pct=0 \
    petrel_start --module "$T/upt.so" --workers 1
curl_ -o "$T/first" "$BASE/up/first" &
first=$!
sleep 0.3
want second '504 error -102 *no answer in 300 ms|'
wait "$first" || true
grep -q 'error -103' "$T/first" || fail "the first call: $(cat "$T/first")"
ok "connect_timeout_ms 300: ECONNECT"
petrel_stop

# --- 9. streamed request bodies ---------------------------------------------------------
peer "$T/p6"
P6=$PEER
UPT_URLS=http://127.0.0.1:$P6 UPT_OPTS=header_timeout_ms=3000,breaker_failures=1000 \
    petrel_start --module "$T/upt.so" --workers 1
# md5of N: what /sink answers for the body of N bytes /stream/ makes
md5of() {
    "$PY" -c 'import hashlib, sys; a = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"; n = int(sys.argv[1]); print("len %d md5 %s" % (n, hashlib.md5((a * (n // 61 + 1))[:n]).hexdigest()))' "$1"
}
# scall PATH?QUERY: "CODE BODY" (newlines as |) of POST $BASE/stream/PATH?QUERY
scall() {
    curl_ -o "$T/body" -w '%{http_code}' --data-binary '' "$BASE/stream/$1" >"$T/code" || true
    printf '%s %s\n' "$(cat "$T/code")" "$(tr '\n' '|' <"$T/body")"
}
swant() { # swant PATH?QUERY PATTERN
    local got
    got=$(scall "$1")
    [[ $got == $2 ]] || fail "/stream/$1: got '$got', want '$2'"
}
for n in 0 1 65536 1000003; do
    e=$(md5of "$n")
    swant "sink?n=$n" "200 status 200|body $e|wrote $n|*after 0|"
    swant "sink?n=$n&chunked=1" "200 status 200|body $e|wrote $n|*after 0|"
    swant "sink?n=$n&part=333" "200 status 200|body $e|wrote $n|*after 0|"
done
e=$(md5of 300000)
swant "sink?n=300000&chunked=1&part=7001&tick=1" "200 status 200|body $e|wrote 300000|waits *|after 0|"
ok "streamed bodies arrive intact (length and MD5): Content-Length and chunked, 0 B to 1 MB, parts of 16 KiB, 333 B, a part per tick"

worker=$(petrel_worker)
rss0=$(rss_kb "$worker")
e=$(md5of 100000000)
t0=$(now)
swant "sink-slow?n=100000000" "200 status 200|body $e|wrote 100000000|waits *|after 0|"
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$worker/status")
rss1=$(rss_kb "$worker")
echo "# 100 MB streamed in $(secs_since "$t0") s: caller's VmRSS ${rss0} KiB before, ${rss1} KiB after, peak (VmHWM) ${hwm} KiB"
(( hwm - rss0 < 16384 )) || fail "100 MB streamed: the caller's peak resident memory grew by $((hwm - rss0)) KiB"
ok "100 MB to an upstream that reads slowly: intact, the caller's peak RSS $((hwm - rss0)) KiB above its start"

want ok '200 *' # a pooled connection for the next call
u0=$(stat "$P6" cuts)
c0=$(stat "$P6" conns)
swant "early413?n=50000000" "200 status 413|body too big|wrote *|after -3|"
want ok '200 *body hello*'
c1=$(stat "$P6" conns)
(( c1 - c0 == 2 )) || fail "early 413: $((c1 - c0 - 1)) new connection(s) after it, want 1 (its own not reused)"
cuts_grew() { (( $(stat "$P6" cuts) > u0 )); }
wait_for "$(bound 5)" cuts_grew || fail "early 413: the upstream did not see its connection closed mid-body"
ok "an early 413: delivered, a write after it refused (PETREL_ESTATE), its connection closed, not reused"

swant "sink?n=5000&short=100" "502 error -106 *the body ended after 4900 of its 5000 bytes|wrote 4900|wend -2|"
want ok '200 *body hello*'
ok "petrel_call_write_end() short of the length: EINVAL, the call fails (EPROTO)"

u0=$(stat "$P6" cuts)
swant "sink-slow?n=50000000&cancel=3000000" "200 cancelled 0 after 3*|"
wait_for "$(bound 5)" cuts_grew || fail "cancel mid-body: the upstream did not see its connection closed"
want ok '200 *body hello*'
ok "a call cancelled mid-body: its connection closed, the next call answered"

want ok '200 *'
d0=$(stat "$P6" drops)
swant "drop-body?n=2000000&put=1" "502 error -105 *"
d1=$(stat "$P6" drops)
(( d1 - d0 == 1 )) || fail "a streamed PUT whose body went out reached the upstream $((d1 - d0)) times, want 1"
ok "a streamed PUT whose body bytes went out is not sent again (its reused connection broke)"
petrel_stop
