#!/usr/bin/env bash
# The proxy module with an h2c upstream (--module proxy:PREFIX=h2c://...):
#   - an HTTP/1.1 client and an h2c client through the proxy reach petrel
#     serving h2c (hello, echo): a GET, a POST of 1 MB both ways; the
#     response's Via says "2 petrel" (RFC 9110 §7.6.3);
#   - 200 requests at once through the proxy are multiplexed on 2
#     connections to the upstream (100 streams each);
#   - RFC 9113 §8.2.2: the request the proxy makes carries no
#     connection-specific field (Connection and the fields it names,
#     Keep-Alive, Proxy-Connection, TE but "trailers", Transfer-Encoding,
#     Upgrade), nor Host (its :authority): what upstream_h2_peer.py (the
#     h2 library, which refuses such a request) received;
#   - an h2c+unix: upstream;
#   - gRPC (a grpcio client) through the proxy to grpcecho and to a grpcio
#     server: the message, the trailers, an error (trailers-only), 300 kB;
#     the client's te: trailers reaches the upstream (grpcio's server wants
#     it; RFC 9113 §8.2.2 lets it cross).
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
bench_needs
T=$LIB_TMP

petrel_start --module hello --module echo --workers 1
UPORT=$PORT
UPID=$PETREL_PID
petrel_start --workers 1 --module "proxy:/=h2c://127.0.0.1:$UPORT" --admin-listen 127.0.0.1:0
ADMIN=http://127.0.0.1:$(petrel_admin_port)
[[ $(curl_ -D "$T/head" "$BASE/hello") == "Hello World!" ]] || fail "HTTP/1.1 client: $(curl_ "$BASE/hello")"
# RFC 9110 §7.6.3: the Via of the response names the protocol it came in
[[ $(header_value "$T/head" via) == "2 petrel" ]] || fail "Via of an h2c upstream's response: $(cat "$T/head")"
[[ $(curl_ --http2-prior-knowledge "$BASE/hello") == "Hello World!" ]] ||
    fail "h2c client: $(curl_ --http2-prior-knowledge "$BASE/hello")"
awk 'BEGIN { for (i = 0; i < 62500; i++) print "0123456789abcdef" }' >"$T/big"
curl_ -o "$T/got1" --data-binary "@$T/big" "$BASE/echo"
curl_ -o "$T/got2" --http2-prior-knowledge --data-binary "@$T/big" "$BASE/echo"
cmp -s "$T/big" "$T/got1" || fail "HTTP/1.1 client, POST of 1 MB: $(wc -c <"$T/got1") bytes back"
cmp -s "$T/big" "$T/got2" || fail "h2c client, POST of 1 MB: $(wc -c <"$T/got2") bytes back"
ok "HTTP/1.1 and h2c clients through the proxy to an h2c upstream: GET, and 1 MB both ways"

"$BENCH" -c 200 -n 4000 --fail-on-error "$BASE/hello" >"$T/bench.out" ||
    fail "200 requests at once: $(tail -3 "$T/bench.out")"
c=$(curl_ "$ADMIN/metrics" | awk '$1 ~ /^petrel_upstream_connects_total/ { n += $2 } END { print n + 0 }')
(( c >= 1 && c <= 2 )) || fail "4,000 requests, 200 at once: $c connections to the upstream, want 2 at most"
ok "4,000 requests, 200 at once, through the proxy: $c connection(s) to the h2c upstream"
petrel_stop
petrel_stop "$UPID"

py_needs h2 python3-h2
"$PY" "$LIB_DIR/upstream_h2_peer.py" "$T/peerport" &
LIB_BG+=("$!")
wait_for "$(bound 10)" test -s "$T/peerport" || fail "upstream_h2_peer.py did not start"
PEER=$(cat "$T/peerport")
"$PY" "$LIB_DIR/upstream_h2_peer.py" "$T/peer2port" "$T/sock" &
LIB_BG+=("$!")
wait_for "$(bound 10)" test -S "$T/sock" || fail "upstream_h2_peer.py on $T/sock did not start"
petrel_start --workers 1 --module "proxy:/u=h2c+unix:$T/sock,strip;/=h2c://127.0.0.1:$PEER"
curl_ -o "$T/h" -H 'Connection: keep-alive, X-Hop' -H 'X-Hop: 1' -H 'Keep-Alive: timeout=5' \
    -H 'Proxy-Connection: keep-alive' -H 'TE: trailers, deflate' -H 'Upgrade: websocket' \
    -H 'X-End: 2' "$BASE/headers"
grep -q '^x-end: 2$' "$T/h" || fail "the upstream did not get X-End: $(cat "$T/h")"
grep -q '^:authority: 127.0.0.1:' "$T/h" || fail "no :authority: $(cat "$T/h")"
# TE crosses as "trailers" only (RFC 9113 §8.2.2)
grep -q '^te: trailers$' "$T/h" || fail "TE: trailers, deflate did not reach the upstream as te: trailers: $(cat "$T/h")"
if grep -v '^te: trailers$' "$T/h" |
    grep -Eiq '^(connection|x-hop|keep-alive|proxy-connection|te|upgrade|transfer-encoding|host):'; then
    fail "connection-specific fields reached the h2c upstream: $(tr '\n' '|' <"$T/h")"
fi
ok "the h2c request carries no connection-specific field nor Host (RFC 9113 §8.2.2)"
[[ $(curl_ "$BASE/u/ok") == hello ]] || fail "h2c+unix: upstream: $(curl_ "$BASE/u/ok")"
ok "an h2c+unix: upstream through the proxy"
petrel_stop

# --- gRPC through the proxy -------------------------------------------------------
"$PY" -c 'import grpc' 2>/dev/null || skip "no python3-grpcio for $PY (the gRPC part)"
cat >"$T/gs.py" <<'PYEOF'
import os
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
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.start()
s.wait_for_termination()
PYEOF
"$PY" "$T/gs.py" "$T/gsport" &
LIB_BG+=("$!")
wait_for "$(bound 10)" test -s "$T/gsport" || fail "the Python gRPC server did not start"
petrel_start --module grpcecho --workers 1
GPID=$PETREL_PID
petrel_start --workers 1 --module "proxy:/petrel.bench.Echo/=h2c://127.0.0.1:$PORT;/py/=h2c://127.0.0.1:$(cat "$T/gsport"),strip"
# a gRPC client (grpcio, C-core) through the proxy: a unary call answered with
# its message and its trailers (grpc-status, and the grpcio server's
# x-trailer), an error as a trailers-only answer, a message of 300 kB
pyrun "$PORT" <<'PYEOF' || fail "gRPC through the proxy"
import sys
import grpc

def msg(rid, payload):
    def varint(v):
        b = bytearray()
        while True:
            x, v = v & 0x7f, v >> 7
            b.append(x | (0x80 if v else 0))
            if not v:
                return bytes(b)
    p = payload.encode()
    return b"\x08" + varint(rid) + b"\x12" + varint(len(p)) + p

ch = grpc.insecure_channel("127.0.0.1:" + sys.argv[1])
for prefix, want in (("", msg(7, "hi") + b"\x18\x02"), ("/py", msg(7, "hi"))):
    echo = ch.unary_unary(prefix + "/petrel.bench.Echo/Echo")
    got, call = echo.with_call(msg(7, "hi"), timeout=10)
    assert got == want, (prefix, got)
    assert call.code() == grpc.StatusCode.OK, (prefix, call.code())
    if prefix:
        assert ("x-trailer", "yes") in tuple(call.trailing_metadata()), call.trailing_metadata()
    big = echo(msg(9, "x" * 300000), timeout=10)
    assert len(big) >= 300000, (prefix, len(big))
    try:
        ch.unary_unary(prefix + "/petrel.bench.Echo/Nope")(msg(1, "x"), timeout=10)
        raise SystemExit("%s: Nope answered" % prefix)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, (prefix, e.code(), e.details())
print("ok")
PYEOF
ok "gRPC through the proxy to grpcecho and to a grpcio server: message, trailers, UNIMPLEMENTED, 300 kB"
petrel_stop
petrel_stop "$GPID"
