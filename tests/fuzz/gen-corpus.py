#!/usr/bin/python3
"""gen-corpus.py -- write the seed corpora of tests/fuzz/corpus/<harness>/.

The files are committed; run this again (from anywhere) after changing it:
    /usr/bin/python3 tests/fuzz/gen-corpus.py
HTTP/2 seeds are the bytes a real client library (python3-h2) sends;
WebSocket seeds are masked client frames built here per RFC 6455 §5.2.
Each file of a connection harness starts with the harness's mode byte
(see the comment at the top of fuzz_http1.c, fuzz_h2.c, fuzz_ws.c).
"""
import os
import struct
import zlib

import h2.config
import h2.connection
import h2.events
import h2.settings

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
WRITTEN = set()  # (harness, name) of every seed written by this run


def write(harness, name, data):
    assert (harness, name) not in WRITTEN, "seed written twice: %s/%s" % (harness, name)
    WRITTEN.add((harness, name))
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------------------
# HTTP/1.1 (RFC 9112)


def http1():
    H = "Host: fuzz\r\n"

    def get(target, fields=""):
        """GET target with Host and fields (CRLF-ended lines), no body"""
        return "GET " + target + " HTTP/1.1\r\n" + H + fields + "\r\n"

    reqs = {
        "get-hello": get("/hello"),
        "head-hello": "HEAD /hello HTTP/1.1\r\n" + H + "\r\n",
        "http10": "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "close": get("/hello", "Connection: close\r\n"),
        "post-echo": "POST /echo HTTP/1.1\r\n" + H + "Content-Length: 11\r\n\r\nhello world",
        "chunked": "POST /echo HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n",
        "expect": "POST /echo HTTP/1.1\r\n" + H + "Expect: 100-continue\r\n"
        "Content-Length: 4\r\n\r\nabcd",
        "pipelined": get("/hello") * 2
        + "POST /echo HTTP/1.1\r\n" + H + "Content-Length: 2\r\n\r\nok"
        + get("/stream"),
        "stream": get("/stream", "TE: trailers\r\n"),
        "kv-param": get("/kv/abc?q=1&r=%20x", "User-Agent: fuzz\r\n"),
        "kv-all": get("/kv/all"),
        "kv-put": "PUT /kv/k1 HTTP/1.1\r\n" + H + "Content-Length: 3\r\n\r\nv=1",
        "kv-delete-405": "DELETE /kv/k1 HTTP/1.1\r\n" + H + "\r\n",
        "info-wild": "PATCH /info/a/b/../c?q=x+y HTTP/1.1\r\n" + H + "Content-Length: 0\r\n\r\n",
        "options-star": "OPTIONS * HTTP/1.1\r\n" + H + "\r\n",
        "absolute-form": get("http://fuzz/hello?x"),
        "status": "GET /status/418 HTTP/1.1\r\n" + H + "\r\nGET /status/fail HTTP/1.1\r\n"
        + H + "\r\n",
        "not-found": get("/nope"),
        "files-a": get("/files/a.txt"),
        "files-index": get("/files/"),
        "files-redirect": get("/files/sub"),
        "files-autoindex": get("/files/empty/"),
        "files-big-range": get("/files/big.bin", "Range: bytes=100-199\r\n"),
        "files-suffix-range": "GET /files/a.txt HTTP/1.1\r\n" + H + "Range: bytes=-5\r\n"
        "If-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
        "files-multi-range": get("/files/a.txt", "Range: bytes=0-1,3-4\r\n"),
        "files-416": get("/files/a.txt", "Range: bytes=1000-\r\n"),
        "files-inm": get("/files/a.txt", "If-None-Match: \"x\", W/\"y\", *\r\n"),
        "files-ims": "GET /files/a.txt HTTP/1.1\r\n" + H
        + "If-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT\r\n"
        "If-Unmodified-Since: Sun Nov  6 08:49:37 1994\r\nIf-Match: *\r\n\r\n",
        "files-gzip": get("/files/a.txt", "Accept-Encoding: br;q=0, gzip\r\n"),
        "files-outside": get("/files/up/secret"),
        "files-dotdot": get("/files/%2e%2e/%2e%2e/etc/passwd"),
        "files-link": "HEAD /files/link.txt HTTP/1.1\r\n" + H + "\r\n",
        "bad-no-host": "GET /hello HTTP/1.1\r\n\r\n",
        "bad-two-hosts": "GET /hello HTTP/1.1\r\n" + H + H + "\r\n",
        "bad-chunk": "POST /echo HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        "bad-cl-te": "POST /echo HTTP/1.1\r\n" + H + "Content-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "obs-fold": get("/info/x", "X-A: one\r\n two\r\n"),
        "big-header": "GET /hello HTTP/1.1\r\n" + H + "X-Big: " + "a" * 5000 + "\r\n\r\n",
        "big-body": "POST /echo HTTP/1.1\r\n" + H + "Content-Length: 9000\r\n\r\n" + "b" * 9000,
        "version-2": "GET /hello HTTP/2.0\r\n" + H + "\r\n",
        "upgrade-ws": "GET /ws HTTP/1.1\r\n" + H + "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        "\x81\x82abcd\x09\x07",
        "upgrade-h2c": "GET /hello HTTP/1.1\r\n" + H + "Connection: Upgrade, HTTP2-Settings\r\n"
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
        "h2-preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    }
    for name, r in reqs.items():
        b = r.encode("latin-1")
        write("http1", name, b"\x00" + b)
    # split into small writes, and half-closed after the request
    write("http1", "split-chunked", b"\x03" + reqs["chunked"].encode())
    write("http1", "split-pipelined", b"\x01" + reqs["pipelined"].encode())
    write("http1", "halfclose-close", b"\x80" + reqs["close"].encode())
    write("http1", "halfclose-partial", b"\x82" + b"POST /echo HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 10\r\n\r\nabc")
    # bits 5 and 6: every timeout is zero (408 on a partial head, keep-alive
    # close after a response, a timeout in the middle of a body)
    write("http1", "timeout-partial-head", b"\x60" + b"GET /hello HTTP/1.1\r\nHo")
    write("http1", "timeout-keepalive", b"\x60" + reqs["get-hello"].encode())
    write("http1", "timeout-body", b"\x61" + b"POST /echo HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 10\r\n\r\nabc")
    write("http1", "timeout-big-file", b"\x60" + reqs["files-big-range"].encode()
          .replace(b"Range: bytes=100-199\r\n", b""))


# ---------------------------------------------------------------------------
# HTTP/2 (RFC 9113), frames from python3-h2

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2client(validate=True):
    cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                    validate_outbound_headers=validate,
                                    normalize_outbound_headers=validate)
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    return c


def req(path, method="GET", extra=()):
    return [(":method", method), (":scheme", "http"), (":authority", "fuzz"),
            (":path", path)] + list(extra)


def rawframe(ftype, flags, stream, payload):
    return struct.pack("!I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack("!I", stream) + payload


def h2seed(name, build, validate=True):
    c = h2client(validate)
    build(c)
    out = c.data_to_send()
    assert out.startswith(PREFACE)
    # mode 0: the preface is prepended by the harness
    write("h2", name, b"\x00" + out[len(PREFACE):])


def http2():
    h2seed("get-hello", lambda c: c.send_headers(1, req("/hello"), end_stream=True))

    def post(c):
        c.send_headers(1, req("/echo", "POST", [("content-length", "5")]))
        c.send_data(1, b"hel")
        c.send_data(1, b"lo", end_stream=True)
    h2seed("post-echo", post)

    def many(c):
        for i, p in enumerate(["/hello", "/stream", "/files/a.txt", "/kv/x?q=1", "/nope"]):
            c.send_headers(1 + 2 * i, req(p), end_stream=True)
    h2seed("many-streams", many)

    def trailers(c):
        c.send_headers(1, req("/echo", "POST"))
        c.send_data(1, b"data")
        c.send_headers(1, [("x-trailer", "1")], end_stream=True)
    h2seed("trailers", trailers)

    def control(c):
        c.ping(b"12345678")
        c.increment_flow_control_window(65535)
        c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 100,
                           h2.settings.SettingCodes.MAX_FRAME_SIZE: 16384})
        c.send_headers(1, req("/files/big.bin"), end_stream=True)
        c.increment_flow_control_window(1000, stream_id=1)
    h2seed("control", control)

    def reset(c):
        c.send_headers(1, req("/echo", "POST"))
        c.reset_stream(1)
        c.send_headers(3, req("/hello"), end_stream=True)
        c.close_connection()
    h2seed("reset-goaway", reset)

    def prio(c):
        c.send_headers(1, req("/hello"), end_stream=True, priority_weight=200,
                       priority_depends_on=0, priority_exclusive=True)
        c.prioritize(3, weight=10, depends_on=1)
    h2seed("priority", prio)

    # WebSocket over HTTP/2 (RFC 8441): Extended CONNECT to the wsecho
    # route, masked frames in DATA (a header cut across two DATA frames),
    # the Close handshake and END_STREAM; one with permessage-deflate, one
    # reset mid-message
    def connect(path="/ws", extra=()):
        return [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                (":authority", "fuzz"), (":path", path),
                ("sec-websocket-version", "13")] + list(extra)

    def ws_frame(op, payload):
        mask = b"\x11\x22\x33\x44"
        return (bytes([0x80 | op, 0x80 | len(payload)]) + mask +
                bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def ws_echo(c):
        c.send_headers(1, connect())
        f = ws_frame(1, b"hello")
        c.send_data(1, f[:3])
        c.send_data(1, f[3:] + ws_frame(2, b"\x00\x01"))
        c.send_data(1, ws_frame(8, b"\x03\xe8"), end_stream=True)
    h2seed("ws-connect-echo", ws_echo, validate=False)

    def ws_deflate(c):
        c.send_headers(1, connect(extra=[("sec-websocket-extensions",
                                         "permessage-deflate; client_max_window_bits")]))
        # "hello" compressed (RFC 7692 §7.2.3.1), RSV1 set
        p = b"\xf2\x48\xcd\xc9\xc9\x07\x00"
        mask = b"\x01\x02\x03\x04"
        c.send_data(1, bytes([0xc1, 0x80 | len(p)]) + mask +
                    bytes(b ^ mask[i % 4] for i, b in enumerate(p)))
        c.send_headers(3, req("/hello"), end_stream=True)
    h2seed("ws-connect-deflate", ws_deflate, validate=False)

    def ws_reset(c):
        c.send_headers(1, connect())
        c.send_data(1, ws_frame(2, b"x" * 20)[:10])
        c.reset_stream(1)
        c.send_headers(3, connect("/hello"), end_stream=True)
        c.send_headers(5, [(":method", "CONNECT"), (":authority", "fuzz:80")], end_stream=True)
    h2seed("ws-connect-reset", ws_reset, validate=False)

    def bigheaders(c):
        # small frames, so the header block needs CONTINUATION frames
        c.max_outbound_frame_size = 512
        c.send_headers(1, req("/info/x", "GET", [("x-%d" % i, "v" * 50) for i in range(30)]),
                       end_stream=True)
    h2seed("continuation", bigheaders)

    def range_cond(c):
        c.send_headers(1, req("/files/a.txt", "GET", [("range", "bytes=2-5"),
                                                      ("if-none-match", "\"nope\"")]),
                       end_stream=True)
        c.send_headers(3, req("/files/", "HEAD"), end_stream=True)
    h2seed("files", range_cond)

    def bad(c):
        c.send_headers(1, [(":method", "GET"), (":path", "/hello"), (":scheme", "http"),
                           ("Upper", "x"), ("connection", "close")], end_stream=True)
        c.send_headers(3, [(":path", "/hello"), (":method", "GET"), (":scheme", "http"),
                           (":authority", "a"), (":path", "/again")], end_stream=True)
    h2seed("bad-headers", bad, validate=False)

    def cl_mismatch(c):
        c.send_headers(1, req("/echo", "POST", [("content-length", "10")]))
        c.send_data(1, b"abc", end_stream=True)
    h2seed("content-length-mismatch", cl_mismatch)

    def semantics(c):
        # the RFC 9113 §8 checks petrel makes itself (nghttp2's HTTP
        # messaging is off): field syntax, pseudo-header values, CONNECT
        # and :protocol, the priority field, a trailer section
        c.send_headers(1, req("/hello", "GET", [("priority", "u=1, i"), ("te", "trailers"),
                                                ("x-a", ""), ("host", "a")]), end_stream=True)
        c.send_headers(3, [(":method", "CONNECT"), (":authority", "x:1"), (":path", "/")],
                       end_stream=True)
        c.send_headers(5, [(":method", "GET"), (":scheme", "http"), (":path", "/hello"),
                           (":protocol", "websocket"), (":authority", "u@x")], end_stream=True)
        c.send_headers(7, req("/echo", "POST", [("content-length", "3")]))
        c.send_data(7, b"abc")
        c.send_headers(9, req("/hello", "GET", [("x-b", "a\x01b"), ("x(c", "v")]),
                       end_stream=True)
        c.send_headers(7, [("x-sum", "1")], end_stream=True)
    h2seed("semantics", semantics, validate=False)

    # mode 1: the harness sends the preface and an empty SETTINGS; the fuzz
    # bytes are frames of the running connection
    c = h2client()
    c.data_to_send()
    c.send_headers(1, req("/hello"), end_stream=True)
    c.send_headers(3, req("/echo", "POST"))
    c.send_data(3, b"x" * 100, end_stream=True)
    write("h2", "established", b"\x01" + c.data_to_send())
    # mode 2 (SETTINGS ACK sent too) with small splits
    c = h2client()
    c.data_to_send()
    c.send_headers(1, req("/stream"), end_stream=True)
    write("h2", "acked-split", b"\x06" + c.data_to_send())
    # mode 3: after an HTTP/1.1 Upgrade: h2c (stream 1 is the upgrade request)
    c = h2client()
    c.data_to_send()
    c.send_headers(3, req("/hello"), end_stream=True)
    write("h2", "upgrade", b"\x03" + c.data_to_send())
    # raw frames: an unknown frame type, a window update of 0, a bad preface
    write("h2", "raw-unknown", b"\x01" + b"\x00\x00\x03\xfa\x00\x00\x00\x00\x01abc"
          + b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00")
    write("h2", "raw-garbage", b"\x00GET / HTTP/1.1\r\n\r\n")
    # zero timeouts (bits 5 and 6): idle timeout and GOAWAY with streams open
    c = h2client()
    c.data_to_send()
    c.send_headers(1, req("/echo", "POST"))
    c.send_data(1, b"partial")
    write("h2", "timeout-open-stream", b"\x61" + c.data_to_send())
    # frames petrel judges before nghttp2 (RFC 9113 §5.1, §6.3): DATA after
    # the client's END_STREAM and after its RST_STREAM, trailers on an ended
    # stream, PRIORITY frames on stream 0 and on a stream that depends on
    # itself; mode 1 with small splits, so that frame headers straddle reads
    c = h2client()
    c.data_to_send()
    c.send_headers(1, req("/hello"), end_stream=True)
    c.send_headers(3, req("/echo", "POST"))
    c.reset_stream(3)
    c.send_headers(5, req("/hello"), end_stream=True)
    write("h2", "closed-streams", b"\x05" + c.data_to_send() + rawframe(0, 0, 1, b"abcd")
          + rawframe(0, 1, 3, b"efgh") + rawframe(1, 5, 5, b"\x40\x01a\x01b"))
    write("h2", "priority-raw", b"\x05" + rawframe(2, 0, 7, b"\x00\x00\x00\x01\x10")
          + rawframe(2, 0, 9, b"\x00\x00\x00\x09\x10")
          + rawframe(2, 0, 0, b"\x00\x00\x00\x01\x10"))


# ---------------------------------------------------------------------------
# WebSocket (RFC 6455): masked client frames

MASK = b"\x37\xfa\x21\x3d"


def frame(opcode, payload, fin=True, rsv1=False, mask=MASK):
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    m = 0x80 if mask is not None else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if mask is None:
        return head + payload
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def close(code, reason=b""):
    return frame(0x8, struct.pack("!H", code) + reason)


def deflate(data):
    z = zlib.compressobj(wbits=-15)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def ws():
    seeds = {
        "text": frame(0x1, b"hello") + close(1000),
        "binary": frame(0x2, bytes(range(256))),
        "fragmented": frame(0x1, b"hel", fin=False) + frame(0x9, b"ping")
        + frame(0x0, b"lo", fin=False) + frame(0x0, b"!"),
        "ping-pong": frame(0x9, b"") + frame(0xA, b"unsolicited") + frame(0x9, b"x" * 125),
        "close-reason": close(1001, b"going away"),
        "close-bad-code": close(1005),
        "close-short": frame(0x8, b"\x03"),
        "bad-utf8": frame(0x1, b"\xc3\x28"),
        "utf8-split": frame(0x1, b"caf\xc3", fin=False) + frame(0x0, b"\xa9"),
        "unmasked": frame(0x1, b"hi", mask=None),
        "len126": frame(0x2, b"y" * 300),
        # a 64-bit length (65536) whose payload never comes in full
        "len127": frame(0x2, b"z" * 65536)[:200],
        "control-too-long": frame(0x9, b"p" * 126),
        "control-fragmented": frame(0x9, b"p", fin=False),
        "reserved-opcode": frame(0x3, b"r") + frame(0xB, b"r"),
        "rsv1-no-deflate": frame(0x1, b"x", rsv1=True),
        "continuation-first": frame(0x0, b"c"),
        "too-big": frame(0x2, b"q" * 9000),
    }
    for name, b in seeds.items():
        write("ws", name, b"\x00" + b)
    write("ws", "split-text", b"\x04" + seeds["fragmented"])
    write("ws", "halfclose", b"\x80" + frame(0x1, b"bye"))
    # zero timeouts (bits 5 and 6): the idle ping, the close after it, and
    # the wait for the peer's Close
    write("ws", "timeout-idle", b"\x60" + frame(0x1, b"hi"))
    write("ws", "timeout-closing", b"\x61" + close(1000))
    # permessage-deflate negotiated (mode 1; mode 3 with no context takeover)
    d = deflate(b"hello hello hello")
    write("ws", "deflate-text", b"\x01" + frame(0x1, d, rsv1=True) + frame(0x1, b"plain"))
    half = len(d) // 2
    write("ws", "deflate-fragmented", b"\x01" + frame(0x2, d[:half], fin=False, rsv1=True)
          + frame(0x0, d[half:]))
    write("ws", "deflate-nocontext", b"\x03" + frame(0x1, d, rsv1=True) * 2)
    write("ws", "deflate-bomb", b"\x01" + frame(0x2, deflate(b"\0" * 100000), rsv1=True))
    write("ws", "deflate-garbage", b"\x01" + frame(0x1, b"\xff\xff\xff\xff", rsv1=True))


# ---------------------------------------------------------------------------
# Paths (RFC 3986 §5.2.4) and the router: a method byte (index into
# GET HEAD POST PUT DELETE PATCH OPTIONS), then the path


def path():
    paths = [
        "/", "/hello", "/echo", "/kv/abc", "/kv/all", "/kv/", "/a/1/b/2", "/a/1/c", "/a//c",
        "/files/x/y.txt", "/files/", "/files", "/any/thing/else", "/deep/a/b/c/d/e/f",
        "/p/" + "/".join("abcdefghijklmnop"), "/w/" + "/".join("abcdefghijklmno") + "/r/e/s/t",
        "/x.y/%2541", "/a/./b/../c", "//x//y//", "/%2e%2e/", "/%2E/x", "/a%2fb", "/a%00b",
        "/%zz", "/%4", "/..", "/.", "/a/b/..", "/a/b/.", "/./../", "/a/..%2f..", "/hello/",
        "/kv/%E2%82%AC", "/" + "a/" * 200, "/.../....", "/a/.b/..c/d..",
    ]
    for i, p in enumerate(paths):
        write("path", "p%02d" % i, bytes([i % 7]) + p.encode())


# ---------------------------------------------------------------------------
# Static path resolution: a flag byte (1 walk, 2 directory read, 4 through
# petrel__path_normalize, 8 no root realpath), then the path


def static_path():
    paths = [
        "a.txt", "sub/b.txt", "sub/deeper/c.css", "in/b.txt", "in/deeper/../b.txt", "out/secret",
        "secret", "sub/up", "slash/etc/passwd", "dangling", "loop", "dotdot/outside/secret",
        "absin/b.txt", "absout/secret", "fifo", "", ".", "sub/", "sub/back", "../outside/secret",
        "/etc/passwd", "sub/../../outside", "a.txt/", "sub//b.txt", "./a.txt", "in/back",
    ]
    i = 0
    for p in paths:
        for flags in (0, 3):
            write("static_path", "s%03d" % i, bytes([flags]) + p.encode())
            i += 1
    for p in ["/a.txt", "/sub/../a.txt", "/%2e%2e/outside/secret", "/in/%2E%2E/a.txt",
              "/out/secret", "/absout/secret"]:
        for flags in (4, 13):
            write("static_path", "s%03d" % i, bytes([flags]) + p.encode())
            i += 1


# ---------------------------------------------------------------------------
# Range and conditional headers: 8 bytes of size (low bit of the first: a
# small size in the second byte), then Range, If-Range, a date, an
# entity-tag list, NUL-separated


def rng():
    big = struct.pack("<Q", 1000000 << 1)
    small = b"\x01\x0d" + b"\x00" * 6
    zero = b"\x01\x00" + b"\x00" * 6
    seeds = [
        (small, "bytes=0-4", "\"5f3a-1c8\"", "Sun, 06 Nov 1994 08:49:37 GMT", "\"5f3a-1c8\""),
        (small, "bytes=5-", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
         "W/\"5f3a-1c8\", \"x\""),
        (small, "bytes=-3", "W/\"x\"", "Sun Nov  6 08:49:37 1994", "*"),
        (small, "bytes=100-", "", "Thu, 01 Jan 1970 00:00:00 GMT", "gzip;q=0.5, br"),
        (small, "bytes=0-0,2-3", "", "Fri, 31 Dec 9999 23:59:59 GMT", "br;q=0, gzip;q=1.0"),
        (zero, "bytes=-1", "", "Mon, 29 Feb 2016 12:00:60 GMT", "identity, *;q=0"),
        (zero, "bytes=0-", "", "Sun, 06 Nov 1994 08:49:37 UTC", ""),
        (big, "BYTES = 10 - 20 ", "", "Sun,06 Nov 1994 08:49:37 GMT", "\"a\",W/\"b\" ,  \"c"),
        (big, "bytes=99999999999999999999999-", "", "Sun, 32 Nov 1994 08:49:37 GMT", "gzip;q=2"),
        (big, "bytes=5-4", "", "Sun, 06 Foo 1994 08:49:37 GMT", "br;q=0.001"),
        (big, "items=0-1", "", "Sun, 06 Nov 1994 8:9:7 GMT", "x-gzip, deflate"),
        (big, "bytes=-0", "", "Sunday, 06-Nov-69 08:49:37 GMT", "gzip; q=0.000"),
        (big, "bytes=-99999999999999999999", "", "asctime garbage", "*;q=0.1, br;q=0"),
        # several ranges: merged when they overlap or touch, else ignored
        (small, "bytes=4-6, 0-1,2-3", "", "", "zstd, gzip;q=0.9"),
        (small, "bytes=0-0,,-1, 100-", "", "", "identity;q=0"),
        (big, "bytes=" + ",".join(["0-0"] * 17), "", "", ""),
        (zero, "bytes=0-0,-5", "", "", ""),
    ]
    for i, (size, *fields) in enumerate(seeds):
        write("range", "r%02d" % i, size + b"\0".join(f.encode() for f in fields))


def main():
    # Seeds are overwritten, never deleted: files added by hand (inputs a
    # fuzzer found, e.g. h2/body-check-zero-timeouts) and the harnesses not
    # generated here (corpus/grpc, corpus/proxy) are kept. A seed renamed or
    # dropped here leaves its old file behind; they are listed for removal.
    http1()
    http2()
    ws()
    path()
    static_path()
    rng()
    for harness in sorted({h for h, _ in WRITTEN}):
        for name in sorted(os.listdir(os.path.join(OUT, harness))):
            if (harness, name) not in WRITTEN:
                print("kept (not generated here): corpus/%s/%s" % (harness, name))


if __name__ == "__main__":
    main()
