#!/usr/bin/env bash
# test_h2_edges.sh -- the HTTP/2 checks petrel makes itself, over a real
# socket (doc/conformance.md):
#   - RFC 9113 §6.3: PRIORITY on stream 0 is a connection error
#     PROTOCOL_ERROR (nghttp2 skips PRIORITY frames in petrel's mode);
#   - RFC 9113 §5.1, §6.1: DATA on a stream that the client ended and that
#     was answered is a stream error STREAM_CLOSED; the connection goes on;
#   - RFC 9113 §7: a rapid-reset flood ends with ENHANCE_YOUR_CALM;
#   - --body-timeout per stream: a trickling request body gets 408 and
#     RST_STREAM NO_ERROR, while another stream is served.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
py_needs hpack

petrel_start --module hello --module echo --body-timeout 1 --body-min-rate 1k

pyrun <<'EOF'
import socket, struct, time
import hpack
from petrel_client import *

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, GOAWAY = 0, 1, 2, 3, 4, 7
END_STREAM, END_HEADERS = 1, 4
NO_ERROR, PROTOCOL_ERROR, STREAM_CLOSED, ENHANCE_YOUR_CALM = 0, 1, 5, 11


def frame(ftype, flags, stream, payload=b""):
    return struct.pack("!I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack("!I", stream) + payload


class H2:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=bound(10))
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.eof = False

    def headers(self, stream, fields, flags=END_STREAM | END_HEADERS):
        return frame(HEADERS, flags, stream, self.enc.encode(fields))

    def get(self, stream, path="/hello"):
        return self.headers(stream, [(":method", "GET"), (":scheme", "http"),
                                     (":path", path), (":authority", "x")])

    def frames(self, until, secs, scaled=True):
        """Frames received until until(frame) is true, EOF or secs."""
        out = []
        end = time.monotonic() + (bound(secs) if scaled else secs)
        while time.monotonic() < end:
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                t, fl = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
                p = self.buf[9:9 + n]
                self.buf = self.buf[9 + n:]
                f = (t, fl, sid, p)
                if t == HEADERS:
                    f = (t, fl, sid, dict(self.dec.decode(p)))
                out.append(f)
                if until(f):
                    return out
            if self.eof:
                return out
            self.s.settimeout(max(0.01, end - time.monotonic()))
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                return out
            if not d:
                self.eof = True
            self.buf += d
        return out


def status(fs, sid):
    for t, fl, s, p in fs:
        if t == HEADERS and s == sid:
            return p.get(":status")
    return None


def code(p):
    return int.from_bytes(p[:4], "big")


def goaway(fs):
    for t, fl, s, p in fs:
        if t == GOAWAY:
            return code(p[4:8])
    return None


# RFC 9113 §6.3: PRIORITY on stream 0
c = H2()
c.s.sendall(frame(PRIORITY, 0, 0, b"\x00\x00\x00\x03\x10"))
fs = c.frames(lambda f: False, 5)
check(goaway(fs) == PROTOCOL_ERROR, "PRIORITY on stream 0: GOAWAY %r" % goaway(fs))
check(c.eof, "PRIORITY on stream 0: connection not closed")
ok("RFC 9113 §6.3: PRIORITY on stream 0 -> GOAWAY PROTOCOL_ERROR, closed")

# RFC 9113 §5.1, §6.1: DATA on a closed stream
c = H2()
c.s.sendall(c.get(1))
fs = c.frames(lambda f: f[0] == DATA and f[2] == 1 and f[1] & END_STREAM, 5)
check(status(fs, 1) == "200", "GET on stream 1: %r" % (status(fs, 1),))
c.s.sendall(frame(DATA, 0, 1, b"late"))
fs = c.frames(lambda f: f[0] == RST_STREAM, 5)
rst = [f for f in fs if f[0] == RST_STREAM]
check(rst and rst[0][2] == 1 and code(rst[0][3]) == STREAM_CLOSED,
      "DATA on closed stream 1: %r" % (rst,))
c.s.sendall(c.get(3))
fs = c.frames(lambda f: f[0] == DATA and f[2] == 3 and f[1] & END_STREAM, 5)
check(status(fs, 3) == "200" and goaway(fs) is None, "stream 3 after it: %r" % (fs,))
ok("RFC 9113 §5.1: DATA on a closed stream -> RST_STREAM STREAM_CLOSED, the connection goes on")

# RFC 9113 §7: rapid reset
c = H2()
sid = 1
for batch in range(15):
    out = b""
    for i in range(100):
        out += c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":path", "/hello"),
                               (":authority", "x")], END_HEADERS)
        out += frame(RST_STREAM, 0, sid, b"\x00\x00\x00\x08")
        sid += 2
    try:
        c.s.sendall(out)
    except OSError:
        break
fs = c.frames(lambda f: f[0] == GOAWAY, 10)
check(goaway(fs) == ENHANCE_YOUR_CALM, "rapid reset: GOAWAY %r" % goaway(fs))
ok("RFC 9113 §7: rapid reset (%d streams opened and reset) -> GOAWAY ENHANCE_YOUR_CALM"
   % ((sid - 1) // 2))

# --body-timeout 1 --body-min-rate 1k: a trickle gets 408, another stream is served
c = H2()
t0 = time.monotonic()
c.s.sendall(c.headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/echo"),
                          (":authority", "x"), ("content-length", "100000")], END_HEADERS)
            + frame(DATA, 0, 1, b"x" * 10) + c.get(3))
got = []
while time.monotonic() - t0 < bound(6):
    # a byte every 0.3 s (not scaled: the pace of the trickle)
    got += c.frames(lambda f: f[0] == RST_STREAM, 0.3, scaled=False)
    if any(f[0] == RST_STREAM for f in got) or c.eof:
        break
    c.s.sendall(frame(DATA, 0, 1, b"x"))
secs = time.monotonic() - t0
rst = [f for f in got if f[0] == RST_STREAM]
check(status(got, 1) == "408", "trickled body: status %r" % (status(got, 1),))
check(rst and rst[0][2] == 1 and code(rst[0][3]) == NO_ERROR, "trickled body: %r" % (rst,))
check(1.0 <= secs < bound(4), "408 after %.2fs, want a little over 1s" % secs)
check(status(got, 3) == "200", "the other stream: %r" % (status(got, 3),))
check(goaway(got) is None and not c.eof, "the connection ended: %r" % (got,))
ok("--body-timeout 1: a trickled h2 request body -> 408 and RST_STREAM NO_ERROR after %.2fs, "
   "another stream served" % secs)
EOF
petrel_stop
