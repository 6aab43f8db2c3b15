#!/usr/bin/env bash
# The reverse proxy in front of a real server: nginx as the upstream, over
# HTTP/1.1 and over h2c (nginx's `http2` listener, prior knowledge, RFC
# 9113 §3.3).  Through the proxy: a 3 MB file whole (its SHA-256), HEAD
# (the length, no body: RFC 9110 §9.3.2), a conditional GET answered 304
# (§13.1.2), a range answered 206 (§14.2), a 404 as it is; uploads with
# WebDAV's PUT, streamed to nginx and read back whole (20 MB from an
# HTTP/1.1 client, 5 MB from an h2c client to the h2c upstream, a chunked
# one); nginx's own 413 for a body over its client_max_body_size answered
# to the client; connections reused (nginx logs each request's connection
# number), also when nginx closes them after 3 requests (keepalive_requests
# 3: every request answered, none failed).
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
NGINX=$(sbin_cmd nginx)
[[ -n $NGINX ]] || skip "no nginx (apt-get install nginx)"
"$NGINX" -V 2>&1 | grep -q -- '--with-http_dav_module' || skip "nginx without its dav module"
T=$LIB_TMP
N1=$(free_port)
N2=$(free_port)
N3=$(free_port)
W=$T/nginx
mkdir -p "$W/www/dav" "$W/tmp"
head -c 3000000 /dev/urandom >"$W/www/file.bin"
user=
[[ $(id -u) == 0 ]] && user="user root;"
cat >"$W/nginx.conf" <<CONF
$user
worker_processes 1;
daemon off;
pid $W/nginx.pid;
error_log $W/error.log warn;
events { worker_connections 256; }
http {
    log_format c '\$server_port \$connection \$request_method \$status \$request_length';
    access_log $W/access.log c;
    client_body_temp_path $W/tmp/body; proxy_temp_path $W/tmp/proxy;
    fastcgi_temp_path $W/tmp/fastcgi; uwsgi_temp_path $W/tmp/uwsgi; scgi_temp_path $W/tmp/scgi;
    client_max_body_size 32m;
    root $W/www;
    server {
        listen 127.0.0.1:$N1;
        listen 127.0.0.1:$N2 http2;
        keepalive_requests 1000;
        location /dav/ { dav_methods PUT DELETE; create_full_put_path on; }
        location /small/ { client_max_body_size 8m; dav_methods PUT; }
    }
    server {
        listen 127.0.0.1:$N3;
        keepalive_requests 3;
    }
}
CONF
"$NGINX" -p "$W/" -c "$W/nginx.conf" -e "$W/error.log" 2>"$T/nginx.err" &
LIB_BG+=($!)
wait_port "$N1"
wait_port "$N2"

petrel_start --workers 1 --max-body-size 64m \
    --module "proxy:/n=http://127.0.0.1:$N1,strip;/h=h2c://127.0.0.1:$N2,strip;/c=http://127.0.0.1:$N3,strip"
SHA=$(sha256sum "$W/www/file.bin" | cut -d' ' -f1)

# nginx's connections for a port: distinct connection numbers in its log
conns_of() { awk -v p="$1" '$1 == p { print $2 }' "$W/access.log" | sort -u | wc -l; }
reqs_of() { awk -v p="$1" '$1 == p' "$W/access.log" | wc -l; }

# --- GET, whole, over both upstream protocols; reuse ----------------------------------
for via in n h; do
    got=$(curl_ "$BASE/$via/file.bin" | sha256sum | cut -d' ' -f1)
    expect_eq "$got" "$SHA" "GET /$via/file.bin"
done
for i in $(seq 1 30); do curl_ -o /dev/null "$BASE/n/file.bin?$i"; done
c=$(conns_of "$N1") r=$(reqs_of "$N1")
((c <= 3)) || fail "nginx saw $c connections for $r requests"
ok "a 3 MB file through the proxy from nginx over HTTP/1.1 and h2c; $r requests on $c connection(s)"

# --- HEAD, conditional, range, 404 ----------------------------------------------------
curl_ -I "$BASE/n/file.bin" >"$T/head"
expect_eq "$(header_value "$T/head" content-length)" 3000000 "HEAD: Content-Length"
etag=$(header_value "$T/head" etag)
expect_eq "$(curl_ -o /dev/null -w '%{http_code} %{size_download}' -H "If-None-Match: $etag" "$BASE/n/file.bin")" \
    "304 0" "If-None-Match"
expect_eq "$(curl_ -o "$T/part" -w '%{http_code}' -r 100-199 "$BASE/h/file.bin")" 206 "range over h2c"
cmp -s "$T/part" <(tail -c +101 "$W/www/file.bin" | head -c 100) || fail "the range's bytes differ"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/n/nothing-here")" 404 "404"
ok "HEAD, 304, 206 and 404 as nginx answers them"

# --- uploads: streamed to nginx, read back whole -----------------------------------------
head -c $((20 << 20)) /dev/urandom >"$T/up20"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -T "$T/up20" "$BASE/n/dav/up20")" 201 "PUT 20 MB"
cmp -s "$T/up20" "$W/www/dav/up20" || fail "nginx stored a different 20 MB"
head -c $((5 << 20)) "$T/up20" >"$T/up5"
expect_eq "$(curl_ --http2-prior-knowledge -o /dev/null -w '%{http_code}' -T "$T/up5" "$BASE/h/dav/up5")" \
    201 "PUT 5 MB, h2c both sides"
cmp -s "$T/up5" "$W/www/dav/up5" || fail "nginx stored a different 5 MB (h2c)"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' -T "$T/up5" \
    "$BASE/n/dav/chunked")" 201 "chunked PUT"
cmp -s "$T/up5" "$W/www/dav/chunked" || fail "nginx stored a different chunked body"
expect_eq "$(curl_ "$BASE/n/dav/up20" | sha256sum | cut -d' ' -f1)" \
    "$(sha256sum "$T/up20" | cut -d' ' -f1)" "the upload read back"
ok "20 MB, 5 MB over h2c and a chunked body PUT to nginx through the proxy, stored whole"

# --- nginx's own 413 ---------------------------------------------------------------------
head -c $((10 << 20)) "$T/up20" >"$T/up10"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -T "$T/up10" "$BASE/n/small/x")" 413 \
    "a body over nginx's client_max_body_size"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/n/file.bin")" 200 "after the 413"
ok "nginx's 413 for a body it will not take answered to the client"

# --- nginx closes after 3 requests: no request fails ------------------------------------
for i in $(seq 1 30); do
    code=$(curl_ -o /dev/null -w '%{http_code}' "$BASE/c/file.bin?$i")
    expect_eq "$code" 200 "request $i to a server that closes every third"
done
ok "30 requests to an nginx that closes each connection after 3: all 200 ($(conns_of "$N3") connections)"
petrel_stop
