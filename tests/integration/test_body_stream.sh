#!/usr/bin/env bash
# test_body_stream.sh -- request bodies read as they arrive
# (PETREL_BODY_STREAM routes, petrel_body_read/pause/length), through the
# module body_mod.c, over HTTP/1.1 with raw sockets and over h2c with curl:
#   1. Content-Length and chunked bodies reach the callback whole (bytes and
#      checksum), with the declared length (-1 for chunked); req->body of a
#      streamed request is empty, a non-streamed route beside them is as
#      before;
#   2. keep-alive and pipelining after a streamed request; a handler that
#      answers without reading (/early): the unread body is dropped, never
#      parsed as a request (a request hidden in it is not answered: RFC 9112
#      §6.3, the body's length is the Content-Length);
#   3. Expect: 100-continue: the 100 goes out when the handler reads (not at
#      the head: /latesink reads 100 ms later), and not at all when it
#      answers first (RFC 9110 §10.1.1), the connection then closing;
#   4. --max-body-size: a Content-Length over it is answered 413 before the
#      handler; a chunked body that grows past it: the callback gets
#      PETREL_ELIMIT and petrel answers 413;
#   5. --body-timeout: a client that stops mid-body: the callback gets
#      PETREL_EIO (answered 500 by the module); a client that closes
#      mid-body: PETREL_EIO too;
#   6. backpressure: a paused reader (/slowsink) blocks the client's send,
#      and a 100 MB upload to /slowsink leaves the worker's RSS bounded;
#   7. h2c (curl --http2-prior-knowledge, nghttp): bodies to /sink, the
#      length, a 100 MB upload to a pausing reader with RSS bounded, two
#      streams of which the paused one does not hold back the other, and a
#      content-length that the DATA do not match is refused (RFC 9113
#      §8.1.1).
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
T=$LIB_TMP
cc -shared -fPIC -g -Wall -Wextra -Werror -I"$top_srcdir/include" -o "$T/body.so" \
    "$top_srcdir/tests/integration/body_mod.c" || fail "the test module does not build"

petrel_start --workers 1 --module "$T/body.so" --module hello --max-body-size 128m \
    --log-level info
W=$(petrel_worker)
PORT1=$PORT
PID1=$PETREL_PID
ERR1=$PETREL_ERR
petrel_start --workers 1 --module "$T/body.so" --module hello --max-body-size 64k \
    --body-timeout 1 --body-min-rate 0 --log-level info
PORT2=$PORT
ERR2=$PETREL_ERR

PORT1=$PORT1 PORT2=$PORT2 WORKER=$W SCALE=$LIB_SCALE "$PY" - <<'PYEOF'
import os, socket, sys, time, select

P1 = int(os.environ["PORT1"]); P2 = int(os.environ["PORT2"])
W = int(os.environ["WORKER"]); SCALE = float(os.environ["SCALE"])

def fail(msg):
    print("FAIL: " + msg); sys.exit(1)

def ok(msg):
    print("ok - " + msg)

def conn(port=P1):
    s = socket.create_connection(("127.0.0.1", port), timeout=10 * SCALE)
    return s

def fnv(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xffffffff
    return h

class Reader:
    def __init__(self, s):
        self.s = s; self.buf = b""
    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("closed")
        self.buf += d
    def response(self):
        """(status, headers dict, body) of one response (Content-Length or close)."""
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        st = int(lines[0].split()[1])
        h = {}
        for l in lines[1:]:
            k, v = l.split(":", 1); h[k.strip().lower()] = v.strip()
        if st < 200:
            return st, h, b""
        n = int(h.get("content-length", "0"))
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return st, h, body
    def closed(self, wait=2.0):
        self.s.settimeout(wait * SCALE)
        try:
            d = self.s.recv(1)
            return d == b""
        except (socket.timeout, ConnectionResetError):
            return False

def sink_want(body, length):
    return ("bytes %d sum %08x" % (len(body), fnv(body)), "length %d" % length)

def check_sink(st, body, data, length, what):
    b = body.decode()
    w1, w2 = sink_want(data, length)
    if st != 200 or not b.startswith(w1) or w2 not in b:
        fail("%s: got %d %r, want 200 %r ... %r" % (what, st, b, w1, w2))

# --- 1. Content-Length and chunked bodies -------------------------------------
data = os.urandom(1 << 20)
s = conn(); r = Reader(s)
s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
st, h, body = r.response()
check_sink(st, body, data, len(data), "1 MiB Content-Length body")
ok("a 1 MiB Content-Length body reaches the callback whole: " + body.decode().strip())

chunks = [os.urandom(n) for n in (1, 100, 5000, 70000, 3)]
wire = b"".join(b"%x;ext=1\r\n" % len(c) + c + b"\r\n" for c in chunks) + b"0\r\nX-T: 1\r\n\r\n"
s.sendall(b"PUT /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
for i in range(0, len(wire), 777):   # in pieces: parts cut anywhere
    s.sendall(wire[i:i + 777]); time.sleep(0.001)
st, h, body = r.response()
check_sink(st, body, b"".join(chunks), -1, "chunked body")
ok("a chunked body (trailers ignored) on the same connection: " + body.decode().strip())

s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
st, h, body = r.response()
check_sink(st, body, b"", 0, "empty body")
ok("no body: one call with end=1, length 0")

s.sendall(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
st, h, body = r.response()
if (st, body) != (200, b"whole 5\n"):
    fail("the non-streamed route: %d %r" % (st, body))
ok("a non-streamed route of the same server gets req->body as before")

# --- 2. pipelining, keep-alive, early answers -----------------------------------
body1 = b"abcdefghij"
s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n" + body1 +
          b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n" +
          b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
          b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
st, h, b1 = r.response(); check_sink(st, b1, body1, 10, "pipelined 1")
st, h, b2 = r.response()
if st != 200 or b"Hello" not in b2 and b"hello" not in b2: fail("pipelined GET after a streamed body: %d %r" % (st, b2))
st, h, b3 = r.response(); check_sink(st, b3, b"abc", -1, "pipelined 3")
st, h, b4 = r.response()
if st != 200: fail("the last pipelined GET: %d" % st)
ok("four pipelined requests, two streamed: answered in order")

smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
for n, want in ((len(smuggled), 200), (2000, 413)):
    payload = (smuggled * (n // len(smuggled) + 1))[:n]
    s.sendall(b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n + payload +
              b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    st, h, b = r.response()
    if st != want: fail("/early with %d bytes: %d, want %d" % (n, st, want))
    st, h, b = r.response()
    if st != 200 or h.get("connection") == "close":
        fail("after /early (%d bytes): %d %r %r (the unread body parsed as a request?)" % (n, st, h, b))
s.settimeout(0.3 * SCALE)
try:
    extra = s.recv(100)
except socket.timeout:
    extra = b""
if extra:
    fail("more responses after the early answers: %r (a request smuggled in a body)" % extra)
ok("an answer before the body (200, then 413 from the handler): the body is dropped, "
   "the request in it never answered, the connection goes on")
s.close()

# chunked body with a request in it, answered early
s = conn(); r = Reader(s)
inner = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
s.sendall(b"POST /early HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
          b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
st, h, b = r.response()
if st != 200 or b != b"early\n": fail("/early chunked: %d %r" % (st, b))
st, h, b = r.response()
if st != 200: fail("after /early chunked: %d %r" % (st, b))
s.settimeout(0.3 * SCALE)
try:
    extra = s.recv(100)
except socket.timeout:
    extra = b""
if extra: fail("a response for a request inside a chunked body: %r" % extra)
ok("a chunked body with a request in it, answered early: dropped, never parsed as a request")
s.close()

# --- 3. Expect: 100-continue -----------------------------------------------------
s = conn(); r = Reader(s)
s.sendall(b"POST /latesink HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
t0 = time.monotonic()
s.settimeout(0.05)
try:
    early_bytes = s.recv(100)
except socket.timeout:
    early_bytes = b""
if early_bytes: fail("100 Continue before the handler reads: %r" % early_bytes)
s.settimeout(5 * SCALE)
st, h, b = r.response()
dt = time.monotonic() - t0
if st != 100 or dt < 0.09: fail("the 100 Continue: %d after %.3f s (the handler reads at 100 ms)" % (st, dt))
s.sendall(b"hello")
st, h, b = r.response()
check_sink(st, b, b"hello", 5, "after 100 Continue")
ok("Expect: 100-continue: 100 sent when the handler reads (%.0f ms after the head), then the body" % (dt * 1000))
s.sendall(b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
st, h, b = r.response()
if st != 200 or h.get("connection") != "close":
    fail("/early with Expect: %d %r (want 200 without 100 Continue, Connection: close)" % (st, h))
if not r.closed(): fail("/early with Expect: the connection stayed open")
ok("Expect: 100-continue answered before reading: no 100, Connection: close, closed")
s.close()

# --- 4. --max-body-size (server 2: 64k) --------------------------------------------
s = conn(P2); r = Reader(s)
s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
st, h, b = r.response()
if st != 413: fail("Content-Length over --max-body-size: %d" % st)
ok("Content-Length over --max-body-size: 413 before the handler")
s.close()
s = conn(P2); r = Reader(s)
s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
piece = b"4000\r\n" + b"z" * 0x4000 + b"\r\n"
try:
    for i in range(8):   # 128 KiB
        s.sendall(piece)
except (BrokenPipeError, ConnectionResetError):
    pass
st, h, b = r.response()
if st != 413: fail("a chunked body past --max-body-size: %d %r" % (st, b))
ok("a chunked body that grows past --max-body-size: 413 (the callback got PETREL_ELIMIT)")
s.close()

# --- 5. a client that stops mid-body (server 2: --body-timeout 1) ------------------
s = conn(P2); r = Reader(s)
t0 = time.monotonic()
s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n" + b"y" * 1000)
st, h, b = r.response()
dt = time.monotonic() - t0
if st != 500 or not b.startswith(b"error"):
    fail("a body that stopped: %d %r (want the module's 500 for PETREL_EIO)" % (st, b))
if dt > 4 * SCALE: fail("the body timeout took %.1f s" % dt)
ok("a client that stops mid-body: the callback gets %s after %.1f s (--body-timeout 1)" % (b.decode().strip(), dt))
s.close()

# --- 6. backpressure --------------------------------------------------------------
def rss(pid):
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

# a paused reader blocks the client: 50 ms per part
s = conn(); s.setblocking(False)
total = 32 << 20
head = b"POST /slowsink HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % total
sent = 0; buf = head + b"s" * (1 << 20)
t0 = time.monotonic()
while time.monotonic() - t0 < 2.0:
    _, w, _ = select.select([], [s], [], 0.05)
    if w:
        try:
            n = s.send(buf)
            sent += n
            buf = buf[n:] + b"s" * n
        except BlockingIOError:
            pass
if sent >= total // 2:
    fail("the client sent %d of %d bytes in 2 s to a reader that takes one part per 50 ms" % (sent, total))
ok("a paused reader: the client's sending blocks (%d KiB sent in 2 s of %d MiB)" % (sent >> 10, total >> 20))
s.close()   # and it goes away mid-body: the callback gets PETREL_EIO

rss0 = rss(W)
data_total = 100 << 20
s = conn(); r = Reader(s)
s.sendall(b"POST /slowsink?every=64 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % data_total)
blk = bytes(range(256)) * 256   # 64 KiB
peak = rss0
t0 = time.monotonic()
for i in range(data_total // len(blk)):
    s.sendall(blk)
    if i % 64 == 0:
        peak = max(peak, rss(W))
peak = max(peak, rss(W))
st, h, b = r.response()
dt = time.monotonic() - t0
if st != 200 or not b.startswith(b"bytes %d " % data_total):
    fail("100 MB to /slowsink: %d %r" % (st, b))
grow = peak - rss0
print("# worker VmRSS: %d KiB before, %d KiB at most during a 100 MB upload (+%d KiB), %.1f s"
      % (rss0, peak, grow, dt))
if grow > 24 * 1024:
    fail("the worker grew by %d KiB for a 100 MB streamed upload" % grow)
ok("100 MB streamed to /slowsink with RSS bounded (+%d KiB)" % grow)
s.close()
print("PYDONE")
PYEOF

# the callbacks' ends, as the module logged them
grep -q "body end -" "$ERR2" || fail "no callback got a negative end on server 2"
ok "server 2 logged negative ends: $(grep -o 'body end -[0-9]*' "$ERR2" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"

# --- 7. h2c ---------------------------------------------------------------------
BASE1=http://127.0.0.1:$PORT1
head -c 300000 /dev/urandom >"$T/up.bin"
out=$(curl_ -s --http2-prior-knowledge --data-binary @"$T/up.bin" "$BASE1/sink")
want=$("$PY" -c '
import sys
d = open(sys.argv[1], "rb").read()
h = 2166136261
for b in d: h = ((h ^ b) * 16777619) & 0xffffffff
print("bytes %d sum %08x" % (len(d), h))' "$T/up.bin")
[[ $out == "$want"* ]] || fail "h2c /sink: got '$out', want '$want ...'"
[[ $out == *"length 300000" ]] || fail "h2c /sink: the length: '$out'"
ok "h2c: a 300 KB body to /sink: $out"
out=$(curl_ -s --http2-prior-knowledge -X POST "$BASE1/sink")
[[ $out == "bytes 0 "*"length 0" ]] || fail "h2c /sink without a body: '$out'"
ok "h2c: HEADERS with END_STREAM: one end, length 0"
# a 100 MB upload to a paused reader: the stream window holds it back
head -c 100m /dev/zero >"$T/big.bin"
rss0=$(rss_kb "$W")
curl_ -s --max-time "$(bound 120)" --http2-prior-knowledge --data-binary @"$T/big.bin" \
    -o "$T/big.out" "$BASE1/slowsink?every=64" &
cpid=$!
peak=$rss0
while kill -0 "$cpid" 2>/dev/null; do
    r=$(rss_kb "$W")
    ((r > peak)) && peak=$r
    sleep 0.05
done
wait "$cpid" || fail "h2c 100 MB upload: curl failed"
[[ $(cat "$T/big.out") == "bytes 104857600 "* ]] || fail "h2c 100 MB upload: $(cat "$T/big.out")"
echo "# h2c: worker VmRSS $rss0 KiB before, $peak KiB at most during a 100 MB upload to /slowsink"
((peak - rss0 < 24 * 1024)) || fail "h2c: the worker grew by $((peak - rss0)) KiB for a streamed 100 MB upload"
ok "h2c: 100 MB to a pausing reader with RSS bounded (+$((peak - rss0)) KiB): the stream window holds"
# content-length that the DATA do not match: malformed (RFC 9113 §8.1.1),
# RST_STREAM PROTOCOL_ERROR, and the reader gets PETREL_EIO; fewer bytes
# (seen at END_STREAM) and more (seen as they arrive)
for cl in 10 3; do
    out=$(curl -q -sS --noproxy '*' --max-time "$(bound 10)" --http2-prior-knowledge \
        -H "Content-Length: $cl" --data-binary hello "$BASE1/sink" 2>&1 || true)
    [[ $out == *PROTOCOL_ERROR* && $out != *bytes* ]] ||
        fail "h2c content-length $cl with 5 bytes of DATA: '$out'"
done
wait_for "$(bound 5)" grep -q "body end -4 after 5 bytes" "$ERR1" ||
    fail "h2c content-length mismatch: the reader did not get PETREL_EIO"
ok "h2c: content-length 10 and 3 with 5 bytes of DATA: RST_STREAM PROTOCOL_ERROR, the reader gets PETREL_EIO (RFC 9113 §8.1.1)"
if command -v nghttp >/dev/null; then
    # two streams of one connection: one reader pauses (50 ms a part), the
    # other's stream goes on and completes first
    head -c 2000000 /dev/urandom >"$T/two.bin"
    nghttp -n -s -d "$T/two.bin" "$BASE1/slowsink" "$BASE1/sink" >"$T/two" 2>&1 ||
        fail "nghttp two streams: $(tail -3 "$T/two")"
    # nghttp -s: per stream, responseEnd (time since the connection began)
    order=$("$PY" - "$T/two" <<'PYEOF'
import re, sys
ends = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*\d+\s+\+([\d.]+)(us|ms|s)\s.*\s(\d{3})\s+\d+\s+(/\w+)", line)
    if m:
        v = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
        ends[m.group(4)] = (v, m.group(3))
if set(ends) != {"/sink", "/slowsink"} or any(c != "200" for _, c in ends.values()):
    print("bad %r" % ends); sys.exit(0)
print("sink %.0f ms, slowsink %.0f ms" % (ends["/sink"][0] * 1e3, ends["/slowsink"][0] * 1e3))
PYEOF
    )
    [[ $order == sink* ]] || fail "nghttp two streams: $order ($(tail -4 "$T/two"))"
    read -r _ t_sink _ _ t_slow _ <<<"$order"
    ((t_sink < t_slow)) || fail "h2c: the stream of /sink waited for the paused one: $order"
    ok "h2c: two streams at once, one paused by its reader: the other completes first ($order)"
fi
petrel_stop
petrel_stop "$PID1"
grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$LIB_TMP"/petrel.*.err &&
    fail "a sanitizer report"
ok "done"
