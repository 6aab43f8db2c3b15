#!/usr/bin/env bash
# The proxy module (--module proxy:PREFIX=URL) and the fields it forwards,
# against a raw-socket upstream that records the bytes it receives:
#   - RFC 9110 §7.6.1: Connection and the fields it names, Keep-Alive,
#     Proxy-Connection, TE, Transfer-Encoding, Upgrade go neither to the
#     upstream nor back to the client (a client's `Connection: X-Foo`
#     takes X-Foo away; the upstream's `Connection: X-Up-Hop` X-Up-Hop);
#   - RFC 9110 §7.6.3: Via added both ways, after the Via received;
#   - X-Forwarded-For appended, X-Forwarded-Proto, Forwarded (RFC 7239
#     §4, §5: for=, proto=, host=) with the client's address;
#   - Host kept (default) or the upstream's (host=rewrite), the prefix
#     kept (default) or taken off (strip);
#   - the body of a POST forwarded with its length; HEAD, 204, 304;
#   - HTTP/2 (h2c) clients through the proxy to the HTTP/1.1 upstream,
#     their Cookie fields joined into one (RFC 9113 §8.2.3);
#   - behind --proxy-protocol, the PROXY header's client address;
#   - petrel (hello, echo) as the upstream.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
upstream_start
T=$LIB_TMP

petrel_start --workers 1 --module "proxy:/p=$UP;/r=$UP,host=rewrite,strip"

# --- hop-by-hop fields both ways, Via, X-Forwarded-*, Forwarded -----------------
pyrun "$PORT" "$UP_PORT" <<'EOF'
import socket, sys
port, up_port = sys.argv[1], sys.argv[2]

def exchange(raw):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.sendall(raw)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        assert d, "no response head: %r" % buf
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = [(n.strip().lower(), v.strip()) for n, v in (l.split(":", 1) for l in lines[1:])]
    assert "transfer-encoding" not in dict(fields), "a small body of known length streamed"
    n = int(dict(fields)["content-length"])
    while len(body) < n:
        d = s.recv(65536)
        assert d, "body cut"
        body += d
    s.close()
    return lines[0], fields, body

def values(fields, name):
    return [v for n, v in fields if n == name]

status, fields, body = exchange(
    b"GET /p/rec?x=1 HTTP/1.1\r\nHost: front.example:8080\r\n"
    b"Connection: X-Foo, keep-alive\r\nX-Foo: bar\r\nKeep-Alive: timeout=1\r\n"
    b"Proxy-Connection: keep-alive\r\nTE: deflate\r\nX-Forwarded-For: 203.0.113.9\r\n"
    b"Via: 1.0 edge\r\nX-Keep: yes\r\nForwarded: for=198.51.100.1\r\n"
    b"X-Forwarded-Proto: https\r\n\r\n")
assert status.startswith("HTTP/1.1 200"), status
# what the upstream received
up = body.decode("latin-1")
uhead = up.split("\r\n\r\n")[0].split("\r\n")
assert uhead[0] == "GET /p/rec?x=1 HTTP/1.1", uhead[0]
uf = [(n.strip().lower(), v.strip()) for n, v in (l.split(":", 1) for l in uhead[1:])]
print("upstream got:", uf)
assert values(uf, "host") == ["front.example:8080"], "Host kept"
for hop in ("x-foo", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"):
    assert not values(uf, hop), "RFC 9110 7.6.1: %s forwarded" % hop
assert all("deflate" not in v for v in values(uf, "te")), "the client's TE forwarded"
assert all("x-foo" not in v.lower() for v in values(uf, "connection")), "Connection: X-Foo forwarded"
assert values(uf, "x-keep") == ["yes"], "an end-to-end field lost"
assert values(uf, "via") == ["1.0 edge, 1.1 petrel"], values(uf, "via")
assert values(uf, "x-forwarded-for") == ["203.0.113.9, 127.0.0.1"], values(uf, "x-forwarded-for")
assert values(uf, "x-forwarded-proto") == ["http"], values(uf, "x-forwarded-proto")
assert values(uf, "forwarded") == [
    'for=198.51.100.1, for=127.0.0.1;proto=http;host="front.example:8080"'], values(uf, "forwarded")
assert len(values(uf, "content-length")) <= 1
assert up.count("HTTP/1.1\r\n") == 1, "more than one request"
# what the client received
print("client got:", fields)
for hop in ("x-up-hop", "keep-alive", "proxy-connection", "upgrade"):
    assert not values(fields, hop), "RFC 9110 7.6.1: %s sent back" % hop
assert all("x-up-hop" not in v.lower() for v in values(fields, "connection"))
assert values(fields, "via") == ["1.1 upstream, 1.1 petrel"], values(fields, "via")
assert values(fields, "x-up") == ["1"]

# host=rewrite and strip
status, fields, body = exchange(b"GET /r/rec HTTP/1.1\r\nHost: front.example\r\n\r\n")
uhead = body.decode("latin-1").split("\r\n")
assert uhead[0] == "GET /rec HTTP/1.1", uhead[0]
hosts = [l.split(":", 1)[1].strip() for l in uhead if l.lower().startswith("host:")]
assert hosts == ["127.0.0.1:%s" % up_port], hosts
status, fields, body = exchange(b"GET /r/rec?q=1 HTTP/1.1\r\nHost: front.example\r\n\r\n")
assert body.decode("latin-1").startswith("GET /rec?q=1 HTTP/1.1\r\n"), body[:40]
# the prefix alone: "/" upstream (the upstream answers "ok")
status, fields, body = exchange(b"GET /r?q=1 HTTP/1.1\r\nHost: front.example\r\n\r\n")
assert body == b"ok\n", body
EOF
ok "hop-by-hop fields removed both ways, Via, X-Forwarded-For/Proto, Forwarded; Host kept or rewritten"

# --- a body, HEAD, 204, 304 -------------------------------------------------------
printf 'a body of 23 bytes\nxyz\n' >"$T/body"
curl_ -o "$T/out" -H 'Expect: 100-continue' --data-binary @"$T/body" "$BASE/p/rec"
! tr -d '\r' <"$T/out" | grep -qi '^expect:' || fail "Expect forwarded (petrel answered it)"
tr -d '\r' <"$T/out" | grep -qi '^content-length: 23$' || fail "no Content-Length: 23 upstream: $(cat "$T/out")"
tail -c 23 "$T/out" | cmp - "$T/body" || fail "the body did not reach the upstream whole"
grep -c 'HTTP/1.1' "$T/out" | grep -qx 1 || fail "more than one request line upstream"
ok "POST: the body forwarded with its length, Expect not"

code=$(curl_ -I -o "$T/h" -w '%{http_code}' "$BASE/p/rec")
expect_eq "$code" 200 "HEAD"
head -c 4 "$(up_last)" | grep -qx HEAD || fail "the upstream got no HEAD"
curl_ -I -o "$T/h" "$BASE/p/big?n=1000"
expect_eq "$(header_value "$T/h" Content-Length)" 1000 "RFC 9110 9.3.2: HEAD, the Content-Length of a GET"
code=$(curl_ -D "$T/h" -o "$T/out" -w '%{http_code}' "$BASE/p/nobody204")
expect_eq "$code" 204 "204 through the proxy"
[[ ! -s $T/out ]] || fail "a 204 with a body"
code=$(curl_ -D "$T/h" -o "$T/out" -w '%{http_code}' "$BASE/p/nm304")
expect_eq "$code" 304 "304 through the proxy"
expect_eq "$(header_value "$T/h" ETag)" '"v1"' "the 304's ETag"
ok "HEAD, 204 and 304"

# --- methods beyond the seven (RFC 9110 §9.1: WebDAV's, over HTTP/1.1 and h2c) -----
code=$(curl_ -X PROPFIND -H 'Depth: 1' --data-binary '<propfind/>' -o "$T/out" -w '%{http_code}' \
    "$BASE/p/rec")
expect_eq "$code" 200 "PROPFIND through the proxy"
head -n 1 "$T/out" | grep -q '^PROPFIND /p/rec HTTP/1.1' || fail "PROPFIND: upstream got $(head -n 1 "$T/out")"
tr -d '\r' <"$T/out" | grep -qi '^depth: 1$' || fail "PROPFIND: Depth not forwarded"
tail -c 11 "$T/out" | grep -qx '<propfind/>' || fail "PROPFIND: the body not forwarded"
code=$(curl_ --http2-prior-knowledge -X REPORT -o "$T/out" -w '%{http_code}' "$BASE/p/rec")
expect_eq "$code" 200 "REPORT from an h2c client"
head -n 1 "$T/out" | grep -q '^REPORT /p/rec HTTP/1.1' || fail "REPORT: upstream got $(head -n 1 "$T/out")"
code=$(curl_ -X PROPFIND -o /dev/null -w '%{http_code}' "$BASE/elsewhere")
expect_eq "$code" 404 "PROPFIND outside the proxy's prefix"
ok "PROPFIND and REPORT forwarded; 404 outside the prefix"

# --- h2c clients to the HTTP/1.1 upstream -----------------------------------------
code=$(curl_ --http2-prior-knowledge -H 'Cookie: a=1' -H 'Cookie: b=2' -D "$T/h" -o "$T/out" \
    -w '%{http_code} %{http_version}' "$BASE/p/rec")
expect_eq "$code" "200 2" "h2c through the proxy"
head -n 1 "$T/out" | grep -q '^GET /p/rec HTTP/1.1' || fail "h2c: upstream request line $(head -n 1 "$T/out")"
tr -d '\r' <"$T/out" | grep -qi '^via: 2 petrel$' || fail "h2c: no 'Via: 2 petrel' upstream"
tr -d '\r' <"$T/out" | grep -qi '^cookie: a=1; b=2$' || fail "h2c: the Cookie fields not joined"
expect_eq "$(header_value "$T/h" via)" "1.1 upstream, 1.1 petrel" "h2c: Via back"
ok "h2c client through the proxy to an HTTP/1.1 upstream"
code=$(curl_ -H 'Cookie: a=1' -H 'Cookie: b=2' -o "$T/out" -w '%{http_code}' "$BASE/p/rec")
expect_eq "$code" 200 "two Cookie fields through the proxy"
tr -d '\r' <"$T/out" | grep -qi '^cookie: a=1; b=2$' ||
    fail "HTTP/1.1: two Cookie fields not joined with '; ': $(grep -i '^cookie' "$T/out")"
ok "HTTP/1.1 client's two Cookie fields joined into one"
petrel_stop

# --- behind a load balancer: the PROXY protocol's client address ----------------
petrel_start --workers 1 --proxy-protocol --module "proxy:/p=$UP"
pyrun "$PORT" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n"
          b"GET /p/rec HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n")
buf = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
up = buf.partition(b"\r\n\r\n")[2].decode("latin-1").lower()
assert "\r\nx-forwarded-for: 203.0.113.7\r\n" in up, up
assert '\r\nforwarded: for=203.0.113.7;proto=http;host="front"\r\n' in up, up
EOF
ok "with --proxy-protocol, the PROXY header's client address is forwarded"
petrel_stop

# --- petrel itself as the upstream (the echo module) -----------------------------
petrel_start --workers 1 --module echo --module hello
ECHO=$BASE
ECHOPID=$PETREL_PID
petrel_start --workers 1 --module "proxy:/=$ECHO" --access-log "$T/alog" --access-log-format json
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "petrel behind petrel: /hello"
expect_eq "$(curl_ --data-binary @"$T/body" "$BASE/echo")" "$(cat "$T/body")" "petrel behind petrel: /echo"
expect_eq "$(curl_ --http2-prior-knowledge --data-binary @"$T/body" "$BASE/echo")" \
    "$(cat "$T/body")" "h2c, petrel behind petrel: /echo"
ok "petrel as the upstream (hello, echo)"
petrel_stop
petrel_stop "$ECHOPID"
# the access log line of a proxied request names the upstream's address and
# the call's time (JSON format)
pyrun "$T/alog" "${ECHO#http://}" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 3, lines
for l in lines:
    assert l.get("upstream") == sys.argv[2], l
    assert isinstance(l.get("upstream_us"), int) and 0 <= l["upstream_us"] < 10000000, l
EOF
ok "the access log names the upstream and the call's time"
