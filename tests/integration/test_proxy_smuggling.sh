#!/usr/bin/env bash
# Request smuggling through the proxy module: the upstream request is
# serialised by petrel from the parsed request, never copied from the
# client's bytes, so whatever framing the client tries (RFC 9112 §6.1:
# Content-Length with Transfer-Encoding; §6.3: two different
# Content-Length fields; §5.2: obs-fold; a bad chunk size; a request hidden
# in a body), the upstream sees one well-framed request for each request
# petrel answered with the upstream's response, and none for the others.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
upstream_start

petrel_start --workers 1 --module "proxy:/p=$UP"

pyrun "$PORT" "$UP_PORT" "$UP_REC" <<'EOF'
import json, os, socket, sys, time
port, up_port, rec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def up_requests():
    s = socket.create_connection(("127.0.0.1", up_port))
    s.sendall(b"GET /__stats HTTP/1.1\r\nHost: x\r\n\r\n")
    buf = b""
    while not buf.endswith(b"}"):
        buf += s.recv(4096)
    s.close()
    return json.loads(buf.split(b"\r\n\r\n", 1)[1])["requests"]

def talk(raw):
    """Send raw, read until the server closes (or 2 s of silence): the
    number of responses that came from the upstream, and all statuses."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(raw)
    s.settimeout(2)
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except socket.timeout:
        pass
    s.close()
    statuses, from_up = [], 0
    for part in buf.split(b"HTTP/1.1 ")[1:]:
        statuses.append(part[:3].decode())
    from_up = buf.lower().count(b"\r\nx-up: 1\r\n")
    return statuses, from_up

def well_framed(path):
    raw = open(path, "rb").read()
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, "%s: no end of head" % path
    lines = head.decode("latin-1").split("\r\n")
    assert len(lines[0].split(" ")) == 3 and lines[0].endswith(" HTTP/1.1"), lines[0]
    for l in lines[1:]:
        assert l and l[0] not in " \t", "%s: obs-fold forwarded: %r" % (path, l)
        assert ":" in l, "%s: not a field: %r" % (path, l)
    names = [l.split(":", 1)[0].strip().lower() for l in lines[1:]]
    assert "transfer-encoding" not in names or "content-length" not in names, "%s: CL and TE" % path
    assert names.count("content-length") <= 1, "%s: two Content-Length" % path
    assert names.count("host") == 1, "%s: %d Host fields" % (path, names.count("host"))
    if "content-length" in names:
        cl = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("content-length:")]
        assert int(cl[0]) == len(body), "%s: Content-Length %s, body %d" % (path, cl[0], len(body))
    else:
        assert body == b"" or "transfer-encoding" in names, "%s: a body without framing" % path
    return lines[0]

smuggle = b"GET /p/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
vectors = {
    "CL.TE (RFC 9112 6.1)": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggle,
    "TE.CL (RFC 9112 6.1)": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                            b"Content-Length: 40\r\n\r\n0\r\n\r\n" + smuggle,
    "two Content-Length (RFC 9112 6.3)": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                         b"Content-Length: 41\r\n\r\nabc" + smuggle,
    "obs-fold (RFC 9112 5.2)": b"GET /p/rec HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n",
    "obs-fold of Content-Length": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 3\r\n\r\nabc",
    "TE: xchunked": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n"
                    b"0\r\n\r\n" + smuggle,
    "TE: chunked, identity": b"POST /p/rec HTTP/1.1\r\nHost: x\r\n"
                             b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggle,
    "bad chunk size": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"3;\n\r\nabc\r\n0\r\n\r\n" + smuggle,
    "space before colon (RFC 9112 5.1)": b"POST /p/rec HTTP/1.1\r\nHost: x\r\n"
                                         b"Content-Length : 3\r\n\r\nabc" + smuggle,
    "two Host (RFC 9112 3.2)": b"GET /p/rec HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    "request hidden in a body": b"POST /p/rec HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                                % len(smuggle) + smuggle,
    "chunked body, a request in it": b"POST /p/rec HTTP/1.1\r\nHost: x\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(smuggle)
                                     + smuggle + b"\r\n0\r\n\r\n",
    "LF only": b"GET /p/rec HTTP/1.1\nHost: x\nContent-Length: 0\n\n",
}
for name, raw in vectors.items():
    before = up_requests()
    statuses, from_up = talk(raw)
    after = up_requests()
    got = after - before
    print("%-36s client got %s; %d from the upstream; the upstream got %d" %
          (name, statuses, from_up, got))
    assert got == from_up, "%s: the upstream got %d requests for %d answered by it" % (
        name, got, from_up)
    for n in range(before + 1, after + 1):
        line = well_framed(os.path.join(rec, str(n)))
        assert "/p/smuggled" not in line, "%s: a smuggled request reached the upstream" % name
EOF
ok "the upstream sees one well-framed request per request answered from it, or none"
petrel_stop
