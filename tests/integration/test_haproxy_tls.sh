#!/usr/bin/env bash
# HAProxy terminating TLS with ALPN h2 in front of two petrel instances (the
# TLS frontend of examples/haproxy/haproxy.cfg), the deployment browsers
# need since petrel speaks cleartext: a self-signed certificate made here
# with openssl; curl over https with HTTP/2; headless Chromium (Debian's,
# driven by tests/ws-browser/browser.mjs) loads the demo page over h2 and
# runs the WebSocket page's self-test through wss://.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/haproxy_lib.sh"
haproxy_setup
command -v openssl >/dev/null || skip "no openssl (apt-get install openssl)"
BROWSER_DIR=$top_srcdir/tests/ws-browser
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $CHROMIUM ]] || skip "no Chromium at $CHROMIUM (apt-get install chromium)"
command -v node >/dev/null || skip "no node (apt-get install nodejs)"
[[ -d $BROWSER_DIR/node_modules/playwright-core ]] ||
    skip "no playwright-core in $BROWSER_DIR/node_modules (cd tests/ws-browser && npm ci)"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$T/key.pem" -out "$T/cert.pem" >"$T/openssl.out" 2>&1 ||
    fail "openssl: $(cat "$T/openssl.out")"
cat "$T/cert.pem" "$T/key.pem" >"$T/site.pem"

haproxy_start "$T/site.pem"
wait_port "$S"

for inst in "$A $AA" "$B $BA"; do
    set -- $inst
    petrel_start --listen "127.0.0.1:$1" --admin-listen "127.0.0.1:$2" --proxy-protocol \
        --trusted-proxies 127.0.0.1 --root "$top_srcdir/examples/www" \
        --module "static:/wsdemo=$top_srcdir/examples/ws" --module wsecho --module hello \
        --access-log "$T/access-$1.log" --access-log-format json
done
pyrun <<'PYEOF'
from hap import wait_status
wait_status("p1", "UP")
wait_status("p2", "UP")
PYEOF

# curl over TLS: ALPN h2, the demo page and /hello
out=$(curl_ --cacert "$T/cert.pem" --http2 -w '\n%{http_version}' "https://localhost:$S/hello" \
    --resolve "localhost:$S:127.0.0.1")
[[ $out == $'Hello World!\n2' ]] || fail "curl https /hello over h2: $out"
ok "curl: https://localhost:$S/hello over HTTP/2 (ALPN h2), the self-signed certificate verified"

export CHROMIUM BROWSER_TIMEOUT_MS=$(($(bound 30) * 1000)) BROWSER_IGNORE_HTTPS_ERRORS=1
BROWSER_PAGE_ONLY=1 HOME=$T node "$BROWSER_DIR/browser.mjs" "https://127.0.0.1:$S/" \
    >"$T/browser-page.out" 2>&1 && rc=0 || rc=$?
sed 's/^/    /' "$T/browser-page.out"
[[ $rc -ne 2 ]] || skip "Chromium does not start here (see above)"
[[ $rc -eq 0 ]] || fail "Chromium did not load the demo page"
grep -q '^page: protocol h2$' "$T/browser-page.out" || fail "the demo page did not come over h2"
grep -q '^h1: petrel is serving this directory$' "$T/browser-page.out" || fail "not the demo page"
ok "headless Chromium loads the demo page over https, HTTP/2"

HOME=$T node "$BROWSER_DIR/browser.mjs" "https://127.0.0.1:$S/wsdemo/" >"$T/browser-ws.out" 2>&1 &&
    rc=0 || rc=$?
sed 's/^/    /' "$T/browser-ws.out"
[[ $rc -eq 0 ]] || fail "the WebSocket page's self-test did not pass through HAProxy's TLS"
ok "headless Chromium: the WebSocket page's self-test over wss:// $(grep '^verdict:' "$T/browser-ws.out")"

# the browser's requests reached petrel with its address (PROXY v2)
sleep 1.2
cat "$T"/access-*.log | grep -q '"target":"/wsdemo/"' || fail "the page request is in no access log"
if cat "$T"/access-*.log | grep -v '"client":"127.0.0.1"' | grep -q .; then
    fail "a request without the client's address"
fi
for pid in $(printf '%s\n' "${LIB_PIDS[@]}"); do
    petrel_stop "$pid"
done
