#!/usr/bin/env bash
# Bad requests over raw sockets: each gets the right status, with a Date
# header field and Connection: close, the connection is then closed, and a
# new connection is served normally.  Also 404 and 405 (which keep the
# connection), and the size limits at their defaults.
. "$(dirname "$0")/lib.sh"

# --- small limits ----------------------------------------------------------
petrel_start --module hello --module echo \
    --max-header-size 1k --max-uri-size 256 --max-body-size 1k

failed=0
pyrun <<'EOF' || failed=1
from petrel_client import *

H = b"Host: x\r\n"
# (what, bytes, status, RFC)
cases = [
    # RFC 9112 §3: an invalid request-line gets 400.
    ("malformed request line: no SP", b"GARBAGE\r\n\r\n", 400, "RFC 9112 §3"),
    ("malformed request line: bad version token",
     b"GET /hello HTTX/1.1\r\n" + H + b"\r\n", 400, "RFC 9112 §3, §2.3"),
    ("malformed request line: trailing garbage after the version",
     b"GET /hello HTTP/1.1 extra\r\n" + H + b"\r\n", 400, "RFC 9112 §3"),
    ("malformed request line: control bytes as method", b"\x01\x02 / HTTP/1.1\r\n\r\n", 400,
     "RFC 9112 §3"),
    ("malformed request line: control byte in the target",
     b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", 400, "RFC 9112 §3.2"),
    ("malformed request line: target not in origin-form",
     b"GET hello HTTP/1.1\r\n" + H + b"\r\n", 400, "RFC 9112 §3.2"),
    # RFC 9112 §6.1: a request with both Content-Length and Transfer-Encoding
    # may be rejected, and the connection MUST be closed after responding.
    ("Content-Length and Transfer-Encoding",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400, "RFC 9112 §6.1"),
    ("Transfer-Encoding and Content-Length",
     b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
     400, "RFC 9112 §6.1"),
    # RFC 9112 §6.3 (5): an invalid Content-Length (differing values) is
    # unrecoverable: 400 and close.
    ("two differing Content-Length fields",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
     400, "RFC 9112 §6.3"),
    ("a Content-Length list of differing values",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 5, 6\r\n\r\nhello!", 400, "RFC 9112 §6.3"),
    ("a Content-Length that is not a number",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 1x\r\n\r\nh", 400, "RFC 9112 §6.3"),
    ("a negative Content-Length",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", 400, "RFC 9112 §6.3"),
    # RFC 9112 §3.2: 400 to an HTTP/1.1 request without Host, with more
    # than one Host, or with an invalid one.
    ("HTTP/1.1 without Host", b"GET /hello HTTP/1.1\r\n\r\n", 400, "RFC 9112 §3.2"),
    ("two Host fields", b"GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "RFC 9112 §3.2"),
    ("two identical Host fields", b"GET /hello HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400,
     "RFC 9112 §3.2"),
    ("an invalid Host", b"GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "RFC 9112 §3.2"),
    # RFC 9112 §5.1: whitespace between a field name and the colon MUST be
    # rejected with 400 (a smuggling vector: "Content-Length : 5").
    ("whitespace before the colon of Content-Length",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length : 5\r\n\r\nhello", 400, "RFC 9112 §5.1"),
    ("whitespace before the colon of any field",
     b"GET /hello HTTP/1.1\r\n" + H + b"X-Foo : y\r\n\r\n", 400, "RFC 9112 §5.1"),
    ("a field name that is not a token",
     b"GET /hello HTTP/1.1\r\n" + H + b"Bad Name: y\r\n\r\n", 400, "RFC 9110 §5.1"),
    # Limits: --max-header-size 1k -> 431 (RFC 6585 §5), --max-uri-size 256
    # -> 414 (RFC 9110 §15.5.15), --max-body-size 1k -> 413 (§15.5.14).
    ("one header field over --max-header-size",
     b"GET /hello HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 2000 + b"\r\n\r\n", 431, "RFC 6585 §5"),
    ("many header fields over --max-header-size",
     b"GET /hello HTTP/1.1\r\n" + H + b"X-A: b\r\n" * 200 + b"\r\n", 431, "RFC 6585 §5"),
    ("a target over --max-uri-size",
     b"GET /" + b"a" * 300 + b" HTTP/1.1\r\n" + H + b"\r\n", 414, "RFC 9110 §15.5.15"),
    ("a query over --max-uri-size",
     b"GET /hello?" + b"a" * 300 + b" HTTP/1.1\r\n" + H + b"\r\n", 414, "RFC 9110 §15.5.15"),
    ("a Content-Length over --max-body-size (head only: no need to wait for the body)",
     b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: 2000\r\n\r\n", 413, "RFC 9110 §15.5.14"),
    ("a Content-Length over --max-body-size with Expect: 100-continue (no 100 first)",
     b"POST /echo HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 2000\r\n\r\n",
     413, "RFC 9110 §10.1.1, §15.5.14"),
    ("a chunked body over --max-body-size",
     b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
     + b"200\r\n" + b"a" * 512 + b"\r\n" + b"200\r\n" + b"b" * 512 + b"\r\n"
     + b"200\r\n" + b"c" * 512 + b"\r\n0\r\n\r\n", 413, "RFC 9110 §15.5.14"),
    # RFC 9112 §6.1: a transfer coding the server does not understand -> 501.
    ("Transfer-Encoding: gzip, chunked",
     b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
     "RFC 9112 §6.1"),
    # RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty.
    ("Transfer-Encoding in HTTP/1.0",
     b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "RFC 9112 §6.1"),
    # RFC 9110 §9.1: an unrecognized method -> 501.
    ("unknown method FOO", b"FOO /hello HTTP/1.1\r\n" + H + b"\r\n", 501, "RFC 9110 §9.1"),
    # RFC 9110 §15.6.6: an unsupported major version -> 505.
    ("HTTP/3.0 request line", b"GET /hello HTTP/3.0\r\n" + H + b"\r\n", 505, "RFC 9110 §15.6.6"),
    ("an invalid chunk size",
     b"POST /echo HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
     "RFC 9112 §7.1"),
]

failures = []
for what, data, want, rfc in cases:
    errs = []
    c = Conn()
    try:
        c.send(data)
        r = c.read_response(interim=True)
        if r.status != want:
            errs.append("status %d, want %d" % (r.status, want))
        if r.header("date") is None:
            errs.append("no Date header (RFC 9110 §6.6.1)")
        if r.status >= 400 and r.status == want and not r.closes():
            errs.append("no Connection: close (RFC 9112 §9.6)")
        rest, secs = c.wait_eof(5) if not errs else (b"", 0)
        if rest:
            errs.append("bytes after the response: %r" % rest[:100])
    except SystemExit:
        errs.append("the connection stayed open after the response")
    except (NoResponse, Incomplete, OSError) as e:
        errs.append("no complete response: %r" % e)
    finally:
        c.close()
    try:
        check_hello(what="a new connection after it")
    except (NoResponse, Incomplete, OSError, SystemExit) as e:
        errs.append("a new connection afterwards failed: %r" % e)
    if errs:
        failures.append("%s (%s): %s; sent %r" % (what, rfc, "; ".join(errs), data[:100]))
        print("not ok - %s: %s" % (what, "; ".join(errs)), flush=True)
    else:
        ok("%s -> %d, Date, closed (%s)" % (what, want, rfc))

# 404 and 405 answer well-formed requests: the connection stays usable.
# RFC 9110 §15.5.6: a 405 MUST carry Allow with the methods the target
# supports.
c = Conn()
for method, target, want, allow in [
        ("GET", "/nosuch", 404, None),
        ("POST", "/nosuch", 404, None),
        ("DELETE", "/hello", 405, "GET"),
        ("POST", "/hello", 405, "GET"),
        ("GET", "/echo", 405, "POST"),
        ("PUT", "/api/benchmark/echo", 405, "POST")]:
    errs = []
    c.send(request(method, target, body=b"x" if method in ("POST", "PUT") else b""))
    r = c.read_response()
    if r.status != want:
        errs.append("status %d, want %d" % (r.status, want))
    if r.header("date") is None:
        errs.append("no Date header")
    if allow:
        methods = [m.strip() for m in (r.header("allow") or "").split(",")]
        if allow not in methods:
            errs.append("Allow %r lacks %s" % (r.header("allow"), allow))
    if r.closes() or not c.is_open(0.2):
        errs.append("the connection was closed")
    if errs:
        failures.append("%s %s: %s" % (method, target, "; ".join(errs)))
        print("not ok - %s %s: %s" % (method, target, "; ".join(errs)), flush=True)
        c.close()
        c = Conn()
    else:
        ok("%s %s -> %d%s, Date, connection kept" % (method, target, want,
                                                      ", Allow: " + r.header("allow") if allow else ""))
c.send(request("GET", "/hello"))
check(c.read_response().body == b"Hello World!", "GET /hello after 404s and 405s")
c.close()

if failures:
    fail("%d bad-request checks failed:\n  %s" % (len(failures), "\n  ".join(failures)))
EOF

petrel_stop
ok "SIGTERM: exit status 0"

# --- default limits: 16k head, 8k target, 16m body -------------------------
petrel_start --module hello --module echo
pyrun <<'EOF' || failed=1
from petrel_client import *

def expect(data, want, what):
    c = Conn()
    c.send(data)
    r = c.read_response()
    check(r.status == want, "%s: status %d, want %d" % (what, r.status, want))
    check(r.header("date") is not None, "%s: no Date" % what)
    c.wait_eof(5)
    c.close()
    check_hello(what="a new connection after " + what)
    ok("%s -> %d" % (what, want))

H = b"Host: x\r\n"
expect(b"GET /hello HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 20000 + b"\r\n\r\n", 431,
       "a 20 KB header field (default --max-header-size 16k)")
expect(b"GET /hello HTTP/1.1\r\n" + H + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 150) for i in range(120))
       + b"\r\n", 431, "120 header fields of 160 bytes (default --max-header-size 16k)")
expect(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414,
       "a 9 KB target (default --max-uri-size 8k)")
expect(b"POST /echo HTTP/1.1\r\n" + H + b"Content-Length: %d\r\n\r\n" % (16 * 1048576 + 1), 413,
       "a Content-Length of 16 MiB + 1 (default --max-body-size 16m)")

# Just under the limits is fine.
c = Conn()
c.send(b"GET /hello?" + b"q" * 8000 + b" HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 7000 + b"\r\n\r\n")
r = c.read_response()
check(r.status == 200, "an 8000-byte target and a 7 KB field: %r" % r)
ok("an 8000-byte target with a 7 KB field -> 200")
EOF
petrel_stop
ok "SIGTERM: exit status 0"
[[ $failed -eq 0 ]] || fail "some checks failed (see above)"
