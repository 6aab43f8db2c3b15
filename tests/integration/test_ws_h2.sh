#!/usr/bin/env bash
# WebSocket over HTTP/2 (RFC 8441) against the real binary, with independent
# libraries as the client: python3-h2 (Extended CONNECT on an h2c
# connection) and python3-wsproto (the WebSocket frames), ws_h2_client.py.
# The wsecho module (/ws) echoes over h2c as over HTTP/1.1: SETTINGS has
# ENABLE_CONNECT_PROTOCOL (§3); the answer is 200 without END_STREAM,
# content-length, transfer-encoding, connection or sec-websocket-accept
# (§5); frames cut anywhere by DATA frames; permessage-deflate; two
# WebSockets and plain GETs on one connection; a WebSocket whose reader
# stalls holds only its own stream (flow control), the others go on; the
# close is Close both ways then END_STREAM both ways, never a reset; bad
# requests (§4, RFC 9113 §8.5) get 501 or a stream error, the connection
# serves on; at shutdown a WebSocket gets Close 1001.
. "$(dirname "$0")/lib.sh"

py_needs h2
py_needs wsproto

petrel_start --module wsecho --module hello --drain-timeout 5
export LIB_DIR

PYTHONPATH=$LIB_DIR pyrun <<'PYEOF'
import os, signal
from petrel_client import ok, fail, check, bound
from ws_h2_client import H2
from wsproto.events import Message
import h2.errors

PORT = int(os.environ["PORT"])
c = H2(PORT, timeout=bound(10))

# RFC 8441 §3
check(c.server_settings.get(8) == 1, "SETTINGS_ENABLE_CONNECT_PROTOCOL: %r" % c.server_settings)
ok("SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 §3)")

# §5: 200, the stream stays open, no fields HTTP/2 or RFC 8441 rule out
ws = c.websocket("/ws")
check(ws.status == 200, "Extended CONNECT answered %r" % ws.status)
check(not ws.ended and ws.reset is None, "the stream stays open after the 200")
for f in ["content-length", "transfer-encoding", "connection", "upgrade",
          "sec-websocket-accept"]:
    check(f not in ws.headers, "%s in the 200: %r" % (f, ws.headers))
ok("Extended CONNECT :protocol websocket: 200 without END_STREAM, no content-length, "
   "transfer-encoding, connection, sec-websocket-accept (RFC 8441 §5)")

sizes = [0, 1, 125, 126, 65535, 65536, 1 << 20]
for n in sizes:
    m = os.urandom(n)
    ws.send(m)
    c.pump_until(lambda: ws.messages)
    b, got = ws.messages.pop(0)
    check(b and got == m, "binary echo of %d bytes" % n)
for t in ["hello", "é€😀", "x" * 70000]:
    ws.send(t)
    c.pump_until(lambda: ws.messages)
    b, got = ws.messages.pop(0)
    check(not b and got == t, "text echo of %d chars" % len(t))
ok("echo over h2c: binary of %s bytes, text (UTF-8) up to 70000 chars" % sizes)

# frames independent of DATA boundaries: three messages in 1-byte DATA
# frames, then all three in one DATA frame
raw = b"".join(ws.ws.send(Message(data="part %d" % i)) for i in range(3))
for i in range(len(raw)):
    ws.send_raw(raw[i:i + 1])
c.pump_until(lambda: len(ws.messages) == 3)
check([m for _, m in ws.messages] == ["part 0", "part 1", "part 2"], "%r" % ws.messages)
ws.messages.clear()
ws.send_raw(raw)
c.pump_until(lambda: len(ws.messages) == 3)
check([m for _, m in ws.messages] == ["part 0", "part 1", "part 2"], "%r" % ws.messages)
ws.messages.clear()
ok("WebSocket frames cut byte by byte across DATA frames, and several in one")

# permessage-deflate (RFC 7692) negotiated through sec-websocket-extensions
wz = c.websocket("/ws", deflate=True)
ext = wz.headers.get("sec-websocket-extensions", "")
check(wz.status == 200 and ext.startswith("permessage-deflate"), "deflate: %r" % wz.headers)
for t in ["a" * 10000, "short", "é" * 3000]:
    wz.send(t)
    c.pump_until(lambda: wz.messages)
    check(wz.messages.pop(0) == (False, t), "deflated echo of %d chars" % len(t))
ok("permessage-deflate over h2c: %s" % ext)

# two WebSockets and plain GETs on the one connection, interleaved
g = c.get("/hello")
ws.send("one")
wz.send("two")
g2 = c.get("/hello")
c.pump_until(lambda: g["done"] and g2["done"] and ws.messages and wz.messages)
check(g["status"] == 200 and g["body"] == b"Hello World!", "GET: %r" % g)
check(ws.messages.pop(0) == (False, "one") and wz.messages.pop(0) == (False, "two"),
      "both WebSockets echo")
ok("two WebSockets and two GETs on one h2c connection")

# a stalled WebSocket: its reader stops opening the stream window; it is
# sent 1 MiB more than that window holds.  The server stops taking its
# input (its stream window closes: the client can send no more on it), but
# the connection window stays open: the other WebSocket and GETs go on.
c.stall(ws.sid)
msg = ws.ws.send(Message(data=b"s" * 16000))
pending = b""
sent = 0
for _ in range(2000):
    if not pending:
        pending = msg
        sent += 1
    pending = c.send_some(ws.sid, pending)
    if pending:
        # the stream window is shut: wait a little for an update that must not come
        c.sock.settimeout(0.2)
        try:
            c.pump()
        except (TimeoutError, OSError):
            pass
        c.sock.settimeout(bound(10))
        if c.h.local_flow_control_window(ws.sid) == 0:
            break
check(c.h.local_flow_control_window(ws.sid) == 0, "the stalled stream's window never closed")
# the connection's WINDOW_UPDATE for the last bytes: they were buffered
c.pump_until(lambda: c.h.outbound_flow_control_window > 65535, limit=20)
conn_window = c.h.outbound_flow_control_window
check(conn_window > 65535, "the connection window closed with the stream's: %d" % conn_window)
for i in range(20):
    wz.send("still %d" % i)
    c.pump_until(lambda: wz.messages)
    check(wz.messages.pop(0) == (False, "still %d" % i), "the other WebSocket")
g = c.get("/hello")
c.pump_until(lambda: g["done"])
check(g["status"] == 200, "GET beside a stalled WebSocket")
ok("a stalled WebSocket (%d messages of 16000 B sent, its window shut) blocks neither "
   "the other WebSocket nor a GET (connection window %d)" % (sent, conn_window))
# the reader comes back: every message is echoed, in order
c.unstall(ws.sid)
if pending:
    c.send_data(ws.sid, pending)
c.pump_until(lambda: len(ws.messages) == sent)
check(all(m == (True, b"s" * 16000) for m in ws.messages), "echoes after the stall")
ws.messages.clear()
ok("the stalled WebSocket resumes: %d echoes" % sent)

# bad requests (RFC 8441 §4, RFC 9113 §8.5): the connection serves on
def connect(hdrs, end=False):
    sid = c.h.get_next_available_stream_id()
    r = {"status": None, "body": b"", "done": False, "reset": None}
    c.streams[sid] = r
    c.h.send_headers(sid, hdrs, end_stream=end)
    c.flush()
    c.pump_until(lambda: r["done"] or r["reset"] is not None)
    return r

r = connect([(":method", "CONNECT"), (":authority", "127.0.0.1:%d" % PORT)])
check(r["status"] in (405, 501), "a plain CONNECT: %r" % r)
ok("a CONNECT without :protocol: %d, no tunnel (RFC 9110 §9.3.6)" % r["status"])
r = connect([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
             (":authority", "127.0.0.1")])
check(r["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR, "no :path: %r" % r)
r = connect([(":method", "CONNECT"), (":protocol", "websocket"), (":path", "/ws"),
             (":authority", "127.0.0.1")])
check(r["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR, "no :scheme: %r" % r)
r = connect([(":method", "GET"), (":protocol", "websocket"), (":scheme", "http"),
             (":path", "/ws"), (":authority", "127.0.0.1")], end=True)
check(r["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR, ":protocol on a GET: %r" % r)
ok("malformed (RFC 9113 §8.5): :protocol without :path or :scheme, :protocol on a GET: "
   "RST_STREAM PROTOCOL_ERROR")
r = connect([(":method", "CONNECT"), (":protocol", "webtransport"), (":scheme", "http"),
             (":path", "/ws"), (":authority", "127.0.0.1")])
check(r["status"] == 501, "an unknown :protocol: %r" % r)
r = connect([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
             (":path", "/hello"), (":authority", "127.0.0.1")])
check(r["status"] == 405, "Extended CONNECT to a GET route: %r" % r)
r = connect([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
             (":path", "/nowhere"), (":authority", "127.0.0.1")])
check(r["status"] == 404, "Extended CONNECT to no route: %r" % r)
wv = c.websocket("/ws", extra=[("sec-websocket-version", "8")])
check(wv.status == 426, "sec-websocket-version 8: %r" % wv.status)
ok("an unknown :protocol: 501; no WebSocket route: 405/404; another version: 426")

# the close: Close both ways, then END_STREAM both ways, no RST_STREAM
ws.close(1000, "bye")
c.pump_until(lambda: ws.closed is not None and ws.ended)
check(ws.closed[0] == 1000 and ws.reset is None, "close: %r reset %r" % (ws.closed, ws.reset))
ws.end()
ws2 = c.websocket("/ws")  # a round trip: a reset would have come by now
ws2.send("after")
c.pump_until(lambda: ws2.messages)
check(ws.reset is None, "the closed stream was reset: %r" % ws.reset)
check(ws.sid not in c.h.streams or c.h.streams[ws.sid].closed, "the stream is not closed")
ok("close: Close 1000 both ways, END_STREAM both ways, no RST_STREAM (RFC 8441 §5)")

# DATA after the WebSocket closed: a stream error, the connection serves on
ws2.close(1000)
c.pump_until(lambda: ws2.closed is not None and ws2.ended)
ws2.send_raw(b"\x81\x80\x00\x00\x00\x00")
c.pump_until(lambda: ws2.reset is not None)
check(ws2.reset == h2.errors.ErrorCodes.STREAM_CLOSED, "DATA after the close: %r" % ws2.reset)
ok("DATA after the WebSocket closed: RST_STREAM STREAM_CLOSED")

# a reset by the client: the connection and the other WebSocket go on
c.h.reset_stream(wz.sid)
c.flush()
g = c.get("/hello")
wz2 = c.websocket("/ws")
wz2.send("alive")
c.pump_until(lambda: g["done"] and wz2.messages)
check(g["status"] == 200 and c.goaway is None, "after a reset: %r" % g)
ok("RST_STREAM of a WebSocket: the connection serves on")

# shutdown: GOAWAY, then Close 1001 to every WebSocket (as over HTTP/1.1).
# python3-h2 takes no frame after a GOAWAY: the frames are read raw here
# (hyperframe, python3-h2's own frame layer).
from hyperframe.frame import DataFrame, Frame
from wsproto.events import CloseConnection
st = {"buf": b"", "goaway": False, "close": None, "ended": False}


def read_raw(done):
    while not done():
        d = c.sock.recv(65536)
        if not d:
            return
        st["buf"] += d
        while len(st["buf"]) >= 9:
            f, n = Frame.parse_frame_header(memoryview(st["buf"][:9]))
            if len(st["buf"]) < 9 + n:
                break
            f.parse_body(memoryview(st["buf"][9:9 + n]))
            st["buf"] = st["buf"][9 + n:]
            st["goaway"] = st["goaway"] or f.type == 0x7
            if f.type == 0x0 and f.stream_id == wz2.sid:
                p = bytes(f.data)
                if len(p) >= 4 and p[0] == 0x88:
                    st["close"] = int.from_bytes(p[2:4], "big")
                st["ended"] = st["ended"] or "END_STREAM" in f.flags


os.kill(int(os.environ["PETREL_PID"]), signal.SIGTERM)
read_raw(lambda: st["goaway"] and st["close"] is not None)
check(st["goaway"] and st["close"] == 1001, "at shutdown: %r" % st)
# our Close: the server ends the stream, we end ours, it exits
c.sock.sendall(DataFrame(wz2.sid, wz2.ws.send(CloseConnection(code=1001))).serialize())
read_raw(lambda: st["ended"])
check(st["ended"], "no END_STREAM after the Close handshake")
c.sock.sendall(DataFrame(wz2.sid, b"", flags=["END_STREAM"]).serialize())
ok("shutdown: GOAWAY, Close 1001 both ways, END_STREAM both ways")
PYEOF
petrel_wait_exit "$PETREL_PID" "$(bound 10)"
expect_eq "$PETREL_RC" 0 "petrel's exit status"
