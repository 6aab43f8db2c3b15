#!/usr/bin/env bash
# HTTP/1.1 over raw sockets: pipelining, persistence rules of HTTP/1.0 and
# HTTP/1.1 (Connection: close / keep-alive), HEAD, a request in pieces.
. "$(dirname "$0")/lib.sh"

petrel_start --module hello --module echo

pyrun <<'EOF'
from petrel_client import *

# RFC 9112 §9.3.2: a server MUST send its responses to pipelined requests
# in the order the requests were received.  16 requests in one write,
# alternating GET /hello and POST /echo with a body naming its position.
c = Conn()
reqs, want = b"", []
for i in range(16):
    if i % 2:
        body = ("request %d" % i).encode()
        reqs += request("POST", "/echo", [("Content-Type", "text/x-%d" % i)], body)
        want.append((body, "text/x-%d" % i))
    else:
        reqs += request("GET", "/hello")
        want.append((b"Hello World!", "text/plain"))
c.send(reqs)
for i, (body, ctype) in enumerate(want):
    r = c.read_response()
    check(r.status == 200 and r.body == body, "pipelined response %d: %r" % (i, r))
    check((r.header("content-type") or "").startswith(ctype),
          "pipelined response %d: Content-Type %r" % (i, r.header("content-type")))
check(c.is_open(0.3), "the connection closed after 16 pipelined requests")
c.send(request("GET", "/hello"))
check(c.read_response().body == b"Hello World!", "request after the pipelined batch")
c.close()
ok("16 pipelined requests in one write: 16 responses, in order")

# The same with bodies too large to be copied (20 KiB each: the echo refers
# to request memory) and a last request that closes.
c = Conn()
reqs, bodies = b"", []
for i in range(16):
    body = bytes([65 + i]) * 20000 + b"|%d" % i
    bodies.append(body)
    hs = [("Connection", "close")] if i == 15 else []
    reqs += request("POST", "/api/benchmark/echo", hs, body)
c.send(reqs)
for i, body in enumerate(bodies):
    r = c.read_response()
    check(r.status == 200 and r.body == body,
          "pipelined 20 KiB echo %d: status %d, %d bytes" % (i, r.status, len(r.body)))
check(r.closes(), "the last response lacks Connection: close")
rest, _ = c.wait_eof(5)
check(rest == b"", "bytes after the last response: %r" % rest[:100])
ok("16 pipelined 20 KiB echoes in order; Connection: close on the last one closes")

# RFC 9112 §9.3: HTTP/1.0 without keep-alive: the server closes after the
# response.
c = Conn()
c.send(b"GET /hello HTTP/1.0\r\n\r\n")
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "HTTP/1.0 GET: %r" % r)
check(r.version in ("HTTP/1.1", "HTTP/1.0"), "HTTP/1.0 response version %s" % r.version)
rest, secs = c.wait_eof(5)
check(rest == b"", "bytes after the HTTP/1.0 response: %r" % rest)
ok("HTTP/1.0 without keep-alive: response, then the server closes (%.2fs)" % secs)

# HTTP/1.0 with Connection: keep-alive stays open (RFC 9112 §C.2.2), and the
# response says so.
c = Conn()
for i in range(3):
    c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    r = c.read_response()
    check(r.status == 200 and r.body == b"Hello World!", "HTTP/1.0 keep-alive GET %d: %r" % (i, r))
    check((r.header("connection") or "").lower() == "keep-alive",
          "HTTP/1.0 keep-alive response %d: Connection %r" % (i, r.header("connection")))
    check(r.header("content-length") == "12", "HTTP/1.0 keep-alive: Content-Length")
    check(c.is_open(0.3), "HTTP/1.0 keep-alive connection closed after request %d" % i)
c.send(b"POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc")
r = c.read_response()
check(r.body == b"abc", "HTTP/1.0 keep-alive POST: %r" % r)
c.send(b"GET /hello HTTP/1.0\r\n\r\n")
r = c.read_response()
check(r.status == 200, "last HTTP/1.0 request: %r" % r)
c.wait_eof(5)
c.close()
ok("HTTP/1.0 with Connection: keep-alive stays open; without it closes")

# RFC 9112 §9.6: Connection: close -- the server answers, says close, and
# closes; what follows on the connection is not processed.
c = Conn()
c.send(request("GET", "/hello", [("Connection", "close")]) + request("GET", "/hello"))
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "Connection: close GET: %r" % r)
check(r.closes(), "response to Connection: close lacks Connection: close")
rest, secs = c.wait_eof(5)
check(rest == b"", "a response after Connection: close: %r" % rest[:200])
ok("Connection: close: response with Connection: close, then closed (%.2fs)" % secs)

# Connection: close on a keep-alive connection after some requests; and
# the token is matched without regard to case, in a list.
c = Conn()
c.send(request("GET", "/hello"))
check(c.read_response().status == 200, "first request")
c.send(request("GET", "/hello", [("Connection", "foo, CLOSE")]))
r = c.read_response()
check(r.status == 200 and r.closes(), "Connection: foo, CLOSE: %r" % r)
c.wait_eof(5)
ok("Connection: foo, CLOSE closes too")

# HEAD: header fields of GET, no content (RFC 9110 §9.3.2); the next
# response on the connection starts right after the head.
c = Conn()
c.send(request("HEAD", "/hello") + request("HEAD", "/hello") + request("GET", "/hello"))
for i in range(2):
    r = c.read_response(method="HEAD")
    check(r.status == 200, "HEAD %d: %r" % (i, r))
    check(r.header("content-length") == "12", "HEAD %d Content-Length %r" % (i, r.header("content-length")))
    check(r.header("date") is not None, "HEAD %d without Date" % i)
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "GET after two HEADs: %r" % r)
check(c.buf == b"", "bytes after the GET: %r" % c.buf)
c.close()
ok("HEAD: Content-Length 12 and no body, pipelined with a GET")

# A request arriving in many small pieces, and empty lines before a request
# (RFC 9112 §2.2 allows at least one).
c = Conn()
data = b"\r\n" + request("POST", "/echo", [("Content-Type", "text/plain")], b"0123456789")
for i in range(0, len(data), 3):
    c.send(data[i:i + 3])
r = c.read_response()
check(r.status == 200 and r.body == b"0123456789", "request in 3-byte pieces: %r" % r)
ok("a request sent 3 bytes at a time, after an empty line")

# A header section of many fields, and a long (but allowed) target.
c = Conn()
hs = [("X-Field-%d" % i, "v" * 50) for i in range(60)]
c.send(request("GET", "/hello?" + "q" * 4000, hs))
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "60 fields and a 4 KB query: %r" % r)
ok("60 header fields and a 4 KB query string under the default limits")

# Absolute-form target (RFC 9112 §3.2.2) is accepted by an origin server.
c = Conn()
c.send(b"GET http://127.0.0.1/hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
r = c.read_response()
check(r.status == 200 and r.body == b"Hello World!", "absolute-form GET: %r" % r)
ok("absolute-form request target")
EOF

petrel_stop
ok "SIGTERM: exit status 0"
