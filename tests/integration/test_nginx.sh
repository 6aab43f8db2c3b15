#!/usr/bin/env bash
# nginx in front of two petrel instances (examples/nginx/petrel-stream.conf,
# with this test's ports and paths): nginx's stream module ends TLS (a
# certificate made here with openssl) and passes each connection on with a
# PROXY protocol v1 header, which petrel (--proxy-protocol --trusted-proxies
# 127.0.0.1) reads: the client's address (127.0.0.2 here, nginx connecting
# from 127.0.0.1) is the one petrel logs, on both instances.  With one
# instance stopped, nginx sends every connection to the other: none fails.
. "$(dirname "$0")/lib.sh"

NGINX=$(sbin_cmd nginx)
[[ -n $NGINX ]] || skip "no nginx (apt-get install nginx)"
STREAM=/usr/lib/nginx/modules/ngx_stream_module.so
if ! "$NGINX" -V 2>&1 | grep -q -- '--with-stream\( \|$\)' && [[ ! -f $STREAM ]]; then
    skip "nginx has no stream module (apt-get install libnginx-mod-stream)"
fi
command -v openssl >/dev/null || skip "no openssl (apt-get install openssl)"

T=$LIB_TMP
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost" -keyout "$T/site.key" -out "$T/site.pem" \
    >"$T/openssl.out" 2>&1 || fail "openssl: $(cat "$T/openssl.out")"
N=$(free_port)
A=$(free_port)
B=$(free_port)
sed -e "s|listen 443 ssl;|listen 127.0.0.1:$N ssl;|" \
    -e "s|127.0.0.1:8081|127.0.0.1:$A|" -e "s|127.0.0.1:8082|127.0.0.1:$B|" \
    -e "s|/etc/nginx/certs/site.pem|$T/site.pem|" -e "s|/etc/nginx/certs/site.key|$T/site.key|" \
    "$top_srcdir/examples/nginx/petrel-stream.conf" >"$T/petrel-stream.conf"
grep -q "listen 127.0.0.1:$N ssl;" "$T/petrel-stream.conf" || fail "the example's listen line changed"
{
    [[ -f $STREAM ]] && echo "load_module $STREAM;"
    echo "daemon off; worker_processes 1; pid $T/nginx.pid; error_log $T/nginx.err info;"
    echo "events { worker_connections 256; }"
    echo "include $T/petrel-stream.conf;"
} >"$T/nginx.conf"
"$NGINX" -t -e "$T/nginx.err" -p "$T" -c "$T/nginx.conf" >"$T/nginx-t.out" 2>&1 ||
    fail "nginx -t: $(cat "$T/nginx-t.out")"
"$NGINX" -e "$T/nginx.err" -p "$T" -c "$T/nginx.conf" >"$T/nginx.out" 2>&1 &
LIB_BG+=($!)
wait_port "$N"

pids=()
for p in "$A" "$B"; do
    petrel_start --listen "127.0.0.1:$p" --module hello --proxy-protocol \
        --trusted-proxies 127.0.0.1 --access-log "$T/access-$p.log" --access-log-format json
    pids+=("$PETREL_PID")
done

get() {
    curl_ --interface 127.0.0.2 --cacert "$T/site.pem" --resolve "localhost:$N:127.0.0.1" \
        "https://localhost:$N/hello"
}
for i in $(seq 10); do
    [[ $(get) == "Hello World!" ]] || fail "request $i through nginx"
done
for p in "$A" "$B"; do # (the access log is written out within a second)
    wait_for "$(bound 5)" grep -q '"client":"127.0.0.2"' "$T/access-$p.log"
    n=$(grep -c '"client":"127.0.0.2"' "$T/access-$p.log" || true)
    [[ $n -ge 1 ]] || fail "instance $p logged no request of client 127.0.0.2: $(cat "$T/access-$p.log")"
    ! grep -q '"client":"127.0.0.1"' "$T/access-$p.log" || fail "nginx's own address was logged"
done
ok "nginx (stream, TLS, proxy_protocol on) in front of two instances: 10 requests, client 127.0.0.2 on both"

petrel_stop "${pids[0]}"
for i in $(seq 10); do
    [[ $(get) == "Hello World!" ]] || fail "request $i with instance A stopped"
done
ok "with instance A stopped, nginx sends every connection to B: 10 of 10 answered"
petrel_stop "${pids[1]}"
