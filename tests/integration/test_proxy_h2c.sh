#!/usr/bin/env bash
# The proxy module with an h2c upstream (--module proxy:PREFIX=h2c://...):
#   - an HTTP/1.1 client and an h2c client through the proxy reach petrel
#     serving h2c (hello, echo): a GET, a POST of 1 MB both ways;
#   - 200 requests at once through the proxy are multiplexed on 2
#     connections to the upstream (100 streams each);
#   - RFC 9113 §8.2.2: the request the proxy makes carries no
#     connection-specific field (Connection and the fields it names,
#     Keep-Alive, Proxy-Connection, TE but "trailers", Transfer-Encoding,
#     Upgrade), nor Host (its :authority): what upstream_h2_peer.py (the
#     h2 library, which refuses such a request) received;
#   - an h2c+unix: upstream.
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
[[ $(curl_ "$BASE/hello") == "Hello World!" ]] || fail "HTTP/1.1 client: $(curl_ "$BASE/hello")"
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
if grep -Eiq '^(connection|x-hop|keep-alive|proxy-connection|te|upgrade|transfer-encoding|host):' "$T/h"; then
    fail "connection-specific fields reached the h2c upstream: $(cat "$T/h")"
fi
ok "the h2c request carries no connection-specific field nor Host (RFC 9113 §8.2.2)"
[[ $(curl_ "$BASE/u/ok") == hello ]] || fail "h2c+unix: upstream: $(curl_ "$BASE/u/ok")"
ok "an h2c+unix: upstream through the proxy"
petrel_stop
