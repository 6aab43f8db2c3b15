#!/usr/bin/env bash
# HAProxy terminating TLS with ALPN h2 in front of two petrel instances (the
# TLS frontend of examples/haproxy/haproxy.cfg), the deployment browsers
# need since petrel speaks cleartext: a self-signed certificate made here
# with openssl; curl over https with HTTP/2; headless Chromium (Debian's,
# browser_lib.sh) loads the demo page over h2 (its net log says which
# protocol) and runs the WebSocket page's self-test through wss://.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/haproxy_lib.sh"
haproxy_setup
command -v openssl >/dev/null || skip "no openssl (apt-get install openssl)"
. "$LIB_DIR/browser_lib.sh"
chromium_needs

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
        --module wsecho --module hello \
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

# Chromium: the test's certificate is its own; the net log tells the protocol
CHROMIUM_FLAGS="--ignore-certificate-errors --log-net-log=$LIB_TMP/net.json"
chromium_selftest "https://127.0.0.1:$S/" page 30
grep -q '<h1>petrel is serving this directory</h1>' "$LIB_TMP/page.html" ||
    fail "headless Chromium did not get the demo page: $(head -c 300 "$LIB_TMP/page.html")"
grep -q '"negotiated_protocol":"h2"' "$LIB_TMP/net.json" ||
    fail "the demo page did not come over h2 (Chromium's net log: no negotiated h2)"
ok "headless Chromium loads the demo page over https, HTTP/2"

CHROMIUM_FLAGS="--ignore-certificate-errors"
chromium_selftest "https://127.0.0.1:$S/ws.html?selftest" ws 30
verdict=$(sed -n 's/.*<output id="result">\([^<]*\)<\/output>.*/\1/p' "$LIB_TMP/ws.html")
[[ $verdict == PASS* ]] ||
    fail "the WebSocket page's self-test did not pass through HAProxy's TLS: '$verdict'"
ok "headless Chromium: the WebSocket page's self-test over wss://: $verdict"

# the browser's requests reached petrel with its address (PROXY v2); the
# access logs are read after the instances stopped, which writes out what
# they hold (waiting a flush interval was not enough for a sanitizer build
# on a busy machine)
for pid in $(printf '%s\n' "${LIB_PIDS[@]}"); do
    petrel_stop "$pid"
done
# (grep reads the files itself: `cat | grep -q` under pipefail failed when
# grep had left at a match in the first file before cat wrote the second)
grep -q '"target":"/ws.html?selftest"' "$T"/access-*.log ||
    fail "the page request is in no access log; the logs' targets:" \
        "$(grep -ho '"target":"[^"]*"' "$T"/access-*.log | sort | uniq -c | tr '\n' ' ')"
others=$(grep -hv '"client":"127.0.0.1"' "$T"/access-*.log || true)
[[ -z $others ]] || fail "a request without the client's address: $others"
