#!/usr/bin/env bash
# test_upstream_h2c.sh -- the upstream client over HTTP/2 with prior
# knowledge (h2c://HOST:PORT, h2c+unix:PATH), through the module
# upstream_mod.c (GET|POST /up/PATH calls the upstream and answers what it
# got), against:
#   1. petrel itself (hello, echo): a GET, a POST of 1 MB both ways; 200
#      calls at once multiplexed on 2 connections (100 streams each);
#      the upstream reloaded twice under load (its old workers' GOAWAY):
#      no call lost; what /metrics says;
#   2. upstream_h2_peer.py (the h2 library): trailers, a paused response,
#      the header deadline of one stream while another on the same
#      connection is answered, a cancel that resets its stream only, a
#      stream above a GOAWAY's last stream id and a REFUSED_STREAM sent
#      again (RFC 9113 §8.7), a stream reset mid-body, a response with a
#      connection-specific field (malformed, RFC 9113 §8.2.2), 20 slow
#      calls at once on one connection, a POST of 1 MB, an h2c+unix:
#      address, max_requests;
#      streamed request bodies (petrel_call_stream: DATA frames as they
#      are written, the data provider deferred while none are held):
#      intact with and without content-length, to a peer whose stream
#      window is 1000 bytes (the body waits for each WINDOW_UPDATE), five
#      at once on one connection, an early 413 (the stream reset, the
#      connection kept), write_end short of the length;
#   3. a dead upstream: its breaker opens; a URL with a path is refused;
#   4. gRPC unary calls (content-type application/grpc, te: trailers, the
#      5-byte message prefix; grpc-status from the trailers or a
#      trailers-only answer) to grpcecho and to a grpcio server.
# driver: time limit 300s (about 40 s; several times that under valgrind)
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
bench_needs
T=$LIB_TMP
cc -shared -fPIC -g -Wall -Wextra -Werror -I"$top_srcdir/include" -o "$T/upt.so" \
    "$top_srcdir/tests/integration/upstream_mod.c" || fail "the test module does not build"

# call PATH [CURL-ARGS]: "CODE BODY" (newlines as |) of GET $BASE/PATH.
call() {
    local p=$1
    shift
    curl_ -o "$T/body" -w '%{http_code}' "$@" "$BASE/$p" >"$T/code" || true
    printf '%s %s\n' "$(cat "$T/code")" "$(tr '\n' '|' <"$T/body")"
}
want() { # want PATH PATTERN [CURL-ARGS]
    local p=$1 pat=$2
    shift 2
    local got
    got=$(call "$p" "$@")
    [[ $got == $pat ]] || fail "/$p: got '$got', want '$pat'"
}
metric() { # metric NAME{LABELS}: its value in the caller's /metrics
    curl_ "$ADMIN/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

# --- 1. petrel as the h2c upstream -------------------------------------------------
petrel_start --module hello --module echo --workers 1
UPORT=$PORT
UPID=$PETREL_PID
UPT_URLS=h2c://127.0.0.1:$UPORT petrel_start --module "$T/upt.so" --workers 1 \
    --admin-listen 127.0.0.1:0
ADMIN=http://127.0.0.1:$(petrel_admin_port)
A='upstream="t",address="127.0.0.1:'$UPORT'"'
want up/hello '200 status 200|x-test |body Hello World!|trailer |'
want up/echo '200 status 200|x-test |body ping|trailer |' --data-binary ping
awk 'BEGIN { for (i = 0; i < 62500; i++) print "0123456789abcdef" }' >"$T/big"
{ printf 'status 200\nx-test \nbody '; cat "$T/big"; printf '\ntrailer \n'; } >"$T/big.want"
curl_ -o "$T/big.got" --data-binary "@$T/big" "$BASE/up/echo"
cmp -s "$T/big.got" "$T/big.want" || fail "POST /up/echo of 1 MB: $(wc -c <"$T/big.got") bytes back"
ok "petrel as h2c upstream: GET /hello, POST /echo, and 1 MB both ways"

"$BENCH" -c 200 -n 4000 --fail-on-error "$BASE/up/hello" >"$T/bench.out" ||
    fail "200 calls at once: $(tail -3 "$T/bench.out")"
c=$(metric "petrel_upstream_connects_total{$A}")
(( c <= 2 )) || fail "4,000 calls, 200 at once: $c connections, want 2 (100 streams each)"
if command -v ss >/dev/null; then
    n=$(ss -Htn state established "( dport = :$UPORT )" | wc -l)
    (( n <= 2 )) || fail "the upstream sees $n connections, want 2 at most"
fi
[[ $(metric 'petrel_upstream_calls_total{upstream="t",result="2xx"}') == 4003 ]] ||
    fail "calls by result: $(curl_ "$ADMIN/metrics" | grep upstream_calls)"
ok "4,000 calls, 200 at once: $c connection(s) to the upstream; /metrics counts 4,003 2xx"

# the upstream reloads twice under load: its old worker sends GOAWAY and
# ends the streams it took; no call fails
c0=$(metric "petrel_upstream_connects_total{$A}")
"$BENCH" -c 100 -d 3s --fail-on-error "$BASE/up/hello" >"$T/bench.out" 2>&1 &
bench=$!
sleep 1
kill -HUP "$UPID"
sleep 1
kill -HUP "$UPID"
wait "$bench" || fail "calls while the upstream reloaded: $(grep -i 'error\|fail' "$T/bench.out" | head -5)"
c1=$(metric "petrel_upstream_connects_total{$A}")
(( c1 > c0 )) || fail "no new connection after the upstream's GOAWAY ($c0, $c1)"
ok "the upstream reloaded twice under load (GOAWAY): no call failed ($((c1 - c0)) new connections)"
for q in "n=3000" "n=3000&chunked=1" "n=40000&chunked=1&part=1000&tick=1" "n=0&chunked=1"; do
    n=${q#n=}
    n=${n%%&*}
    curl_ -o "$T/s.got" --data-binary '' "$BASE/stream/echo?$q" || true
    { printf 'status 200\nbody '; "$PY" -c 'import sys; a = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"; n = int(sys.argv[1]); sys.stdout.buffer.write((a * (n // 61 + 1))[:n])' "$n"; printf '\nwrote %s\n' "$n"; } >"$T/s.want"
    head -c "$(wc -c <"$T/s.want")" "$T/s.got" | cmp -s - "$T/s.want" ||
        fail "/stream/echo?$q: $(head -c 300 "$T/s.got")"
done
ok "petrel as h2c upstream: a streamed body echoed (content-length, none, a part per tick, empty)"
petrel_stop
petrel_stop "$UPID"

# --- 2. the h2 library's upstream -------------------------------------------------
py_needs h2 python3-h2
# peer PORTFILE [UNIX_SOCKET]: start upstream_h2_peer.py; sets PEER.
peer() {
    "$PY" "$top_srcdir/tests/integration/upstream_h2_peer.py" "$@" &
    LIB_BG+=("$!")
    wait_for "$(bound 10)" test -s "$1" || fail "upstream_h2_peer.py did not start"
    PEER=$(cat "$1")
}
# stat FIELD: a count of the peer's
stat() {
    curl_ "$BASE/up/stats" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'
}
peer "$T/p1"
UPT_URLS=h2c://127.0.0.1:$PEER UPT_OPTS=header_timeout_ms=500,breaker_failures=1000 \
    petrel_start --module "$T/upt.so" --workers 1
want up/ok '200 status 200|x-test ok|body hello|trailer |'
want up/trailers '200 status 200|x-test ok|body hello|trailer yes|'
want pause/trailers '200 status 200|x-test ok|body hello|trailer yes|'
ok "a response with trailers, and paused from on_head"

c0=$(stat conns)
curl_ -o "$T/hang" "$BASE/up/hang" &
hang=$!
sleep 0.1
want up/ok '200 *body hello*'
wait "$hang" || true
grep -q 'error -103 .*no response header in 500 ms' "$T/hang" || fail "/up/hang: $(cat "$T/hang")"
r0=$(stat resets)
want cancel-later/hang '200 cancelled|'
want up/ok '200 *body hello*'
r1=$(stat resets)
(( r1 - r0 == 1 )) || fail "a cancel: the upstream saw $((r1 - r0)) RST_STREAM, want 1"
[[ $(stat conns) == "$c0" ]] || fail "a header deadline and a cancel: $(($(stat conns) - c0)) new connections"
ok "a header deadline and a cancel reset their stream only (RST_STREAM seen), the connection goes on"

want up/goaway-once '200 *body hello*'
want up/refuse-once '200 *body hello*'
ok "a stream above a GOAWAY's last stream id and one refused: sent again, answered (RFC 9113 §8.7)"
want up/reset '502 error -105 *stream was reset*after head|'
want up/conn-field '502 error -106 *malformed*'
ok "a stream reset mid-body (ECLOSED), a connection-specific field (EPROTO, RFC 9113 §8.2.2)"

c0=$(stat conns)
args=()
for ((i = 0; i < 20; i++)); do args+=(-o /dev/null "$BASE/up/slow"); done
got=$(curl_ --parallel --parallel-immediate --parallel-max 20 -w '%{http_code}\n' "${args[@]}" |
    sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
[[ $got == "200:20 " ]] || fail "20 slow calls at once: $got"
m=$(stat maxopen)
(( m >= 10 )) || fail "20 slow calls at once: at most $m streams open at once on a connection"
[[ $(stat conns) == "$c0" ]] || fail "20 slow calls at once: $(($(stat conns) - c0)) new connections"
ok "20 slow calls at once: one connection, up to $m streams open at once"

awk 'BEGIN { for (i = 0; i < 62500; i++) print "fedcba9876543210" }' >"$T/big"
{ printf 'status 200\nx-test ok\nbody '; cat "$T/big"; printf '\ntrailer \n'; } >"$T/big.want"
curl_ -o "$T/big.got" --data-binary "@$T/big" "$BASE/up/echo"
cmp -s "$T/big.got" "$T/big.want" || fail "POST of 1 MB: $(wc -c <"$T/big.got") bytes back"
# paused from on_head for 100 ms: the stream's window (64 KiB) is held, not
# given back, and the rest comes once the call resumes
curl_ -o "$T/big.got" --data-binary "@$T/big" "$BASE/pause/echo"
cmp -s "$T/big.got" "$T/big.want" || fail "paused POST of 1 MB: $(wc -c <"$T/big.got") bytes back"
ok "a POST of 1 MB, echoed; the same paused from on_head"
petrel_stop

UPT_URLS=h2c://127.0.0.1:$PEER UPT_OPTS=max_requests=3 petrel_start --module "$T/upt.so" --workers 1
c0=$(stat conns)
for i in 1 2 3 4 5 6 7 8 9; do want up/ok '200 *body hello*'; done
c1=$(stat conns)
(( c1 - c0 == 3 )) || fail "max_requests 3: 10 streams on $((c1 - c0 + 1)) connections, want 4"
ok "max_requests 3: a connection takes 3 streams"
petrel_stop

peer "$T/p2" "$T/sock"
UPT_URLS="h2c+unix:$T/sock" petrel_start --module "$T/upt.so" --workers 1
want up/ok '200 status 200|x-test ok|body hello|trailer |'
ok "an h2c+unix: address"
petrel_stop

# streamed request bodies, to a peer whose stream windows are 1000 bytes
md5of() { # md5of N: what /sink answers for the body of N bytes /stream/ makes
    "$PY" -c 'import hashlib, sys; a = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"; n = int(sys.argv[1]); print("len %d md5 %s" % (n, hashlib.md5((a * (n // 61 + 1))[:n]).hexdigest()))' "$1"
}
H2PEER_WINDOW=1000 peer "$T/p4"
UPT_URLS=h2c://127.0.0.1:$PEER UPT_OPTS=max_conns=1,header_timeout_ms=3000 \
    petrel_start --module "$T/upt.so" --workers 1
for n in 0 1 200003; do
    e=$(md5of "$n")
    want "stream/sink?n=$n" "200 status 200|body $e|wrote $n|*after 0|" --data-binary ''
    want "stream/sink?n=$n&chunked=1" "200 status 200|body $e|wrote $n|*after 0|" --data-binary ''
done
e=$(md5of 100000)
want "stream/sink?n=100000&part=3001&tick=1" "200 status 200|body $e|wrote 100000|*after 0|" --data-binary ''
ok "streamed bodies through a stream window of 1000 bytes: intact, with and without content-length, a part per tick"

c0=$(stat conns)
e=$(md5of 1500000)
pids=()
for i in 1 2 3 4 5; do
    curl_ -o "$T/s.$i" --data-binary '' "$BASE/stream/sink?n=1500000&chunked=$((i % 2))" &
    pids+=("$!")
done
wait "${pids[@]}"
for i in 1 2 3 4 5; do
    [[ $(head -2 "$T/s.$i" | tr '\n' '|') == "status 200|body $e|" ]] || fail "streamed call $i of 5: $(cat "$T/s.$i")"
done
c1=$(stat conns)
m=$(stat maxopen)
(( c1 - c0 == 0 )) || fail "5 streamed calls at once: $((c1 - c0)) new connections, want 0 (max_conns 1)"
(( m >= 2 )) || fail "5 streamed calls at once: at most $m stream(s) open at once"
ok "5 streamed calls of 1.5 MB at once on one connection (up to $m streams open at once)"

r0=$(stat resets)
want "stream/early413?n=20000000" "200 status 413|body too big|wrote *|after -3|" --data-binary ''
want up/ok '200 *body hello*'
r1=$(stat resets)
(( r1 - r0 == 1 )) || fail "early 413: $((r1 - r0)) RST_STREAM seen, want 1"
(( $(stat conns) == c1 )) || fail "early 413: the connection was not kept"
ok "an early 413 over h2c: delivered, a write after it refused, its stream reset (the connection kept)"

want "stream/sink?n=5000&short=100" "502 error -106 *the body ended after 4900 of its 5000 bytes|wrote 4900|wend -2|" --data-binary ''
want up/ok '200 *body hello*'
ok "write_end short of the length over h2c: the call fails (EPROTO), the connection goes on"
petrel_stop

# --- 3. a dead upstream; a bad URL -------------------------------------------------
closed=$(free_port)
UPT_URLS=h2c://127.0.0.1:$closed UPT_OPTS=breaker_failures=2,retry_budget_pct=0 \
    petrel_start --module "$T/upt.so" --workers 1
want up/ok '502 error -101 *Connection refused*'
want up/ok '502 error -101 *Connection refused*'
want up/ok '503 error -107 *every address is out*'
grep -q "127.0.0.1:$closed failed 2 times in a row" "$PETREL_ERR" || fail "no breaker line: $(cat "$PETREL_ERR")"
ok "a dead h2c upstream: refused twice, then its breaker is open (EBREAKER)"
petrel_stop

rc=0
UPT_URLS=h2c://127.0.0.1:$closed/path timeout 10 "$PETREL" --listen 127.0.0.1:0 \
    --module "$T/upt.so" >"$T/bad.out" 2>&1 || rc=$?
(( rc != 0 )) && grep -q "a path in 'h2c://127.0.0.1:$closed/path'" "$T/bad.out" ||
    fail "an h2c URL with a path: status $rc, $(cat "$T/bad.out")"
ok "an h2c URL with a path is refused at start-up"

# --- 4. gRPC unary over h2c ---------------------------------------------------------
# POST /grpc/PATH: content-type application/grpc, te: trailers, the body as
# given (the 5-byte prefix: not compressed, length 6; then EchoMessage
# {request_id 7, payload "hi"}); grpc-status from the trailers, or from the
# header of a trailers-only answer (gRPC over HTTP/2, "Responses")
printf '\x00\x00\x00\x00\x06\x08\x07\x12\x02hi' >"$T/msg"
petrel_start --module grpcecho --workers 1
GPID=$PETREL_PID
UPT_URLS=h2c://127.0.0.1:$PORT petrel_start --module "$T/upt.so" --workers 1
want grpc/petrel.bench.Echo/Echo '200 status 200|x-test |body 00000000080807120268691802|trailer |grpc-status 0|' \
    --data-binary "@$T/msg"
want grpc/petrel.bench.Echo/Nope '200 status 200|x-test |body |trailer |grpc-status 12|' --data-binary "@$T/msg"
# the benchmark's wrapping (tools/upstream-bench.sh pool N grpc): a JSON body
# of 30 bytes as the payload of EchoMessage {request_id 7}; the echo adds
# payload_bytes 30 (0x18 0x1e)
want grpc-wrap/petrel.bench.Echo/Echo '200 status 200|x-test |body 00000000240807121e*181e|trailer |grpc-status 0|' \
    --data-binary '{"requestId":7,"payload":"hi"}'
ok "gRPC to grpcecho: the echo (request_id, payload, payload_bytes) and grpc-status 0; UNIMPLEMENTED (12) trailers-only"
petrel_stop
petrel_stop "$GPID"

# the last part: without grpcio the test is a SKIP with its reason (the
# parts above have passed)
"$PY" -c 'import grpc' 2>/dev/null || skip "python3-grpcio is not installed for $PY (the grpcio part)"
cat >"$T/gs.py" <<'PYEOF'
import sys
from concurrent import futures
import grpc

def echo(req, ctx):
    ctx.set_trailing_metadata((("x-trailer", "yes"),))
    return req

h = grpc.method_handlers_generic_handler(
    "petrel.bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
s = grpc.server(futures.ThreadPoolExecutor(4))
s.add_generic_rpc_handlers((h,))
port = s.add_insecure_port("127.0.0.1:0")
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % port)
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.start()
s.wait_for_termination()
PYEOF
"$PY" "$T/gs.py" "$T/gsport" &
LIB_BG+=("$!")
wait_for "$(bound 10)" test -s "$T/gsport" || fail "the Python gRPC server did not start"
UPT_URLS=h2c://127.0.0.1:$(cat "$T/gsport") petrel_start --module "$T/upt.so" --workers 1
# grpcio's server refuses a call without te: trailers ("Missing :te header")
want grpc/petrel.bench.Echo/Echo '200 status 200|x-test |body 0000000006080712026869|trailer yes|grpc-status 0|' \
    --data-binary "@$T/msg"
want grpc/petrel.bench.Echo/Nope '200 status 200|x-test |body |trailer |grpc-status 12|' --data-binary "@$T/msg"
ok "gRPC to a grpcio server: the echo with its trailers (x-trailer, grpc-status 0); UNIMPLEMENTED (12)"
petrel_stop
