#!/usr/bin/env bash
# WebSocket (RFC 6455) against the real binary with python3-websockets as the
# client: the wsecho module (GET /ws) echoes text as text and binary as
# binary, from empty to 16 MiB, with and without permessage-deflate (RFC
# 7692, which python3-websockets offers by default); the closing handshake
# echoes the client's code; bad handshakes get 400/426; frames that break a
# MUST of RFC 6455 get the right Close code, and the server keeps serving.
. "$(dirname "$0")/lib.sh"

py_needs websockets

petrel_start --module wsecho --module hello

pyrun <<'PYEOF'
import asyncio, os, socket, struct
import websockets
from petrel_client import ok, fail, check, bound, Conn, request

URI = "ws://127.0.0.1:%s/ws" % os.environ["PORT"]


async def echo(compression):
    async with websockets.connect(URI, max_size=None, ping_interval=None,
                                  compression=compression) as ws:
        names = [e.name for e in ws.extensions]
        check(names == (["permessage-deflate"] if compression else []),
              "extensions negotiated: %r" % names)
        for m in ["hello", "", "é€😀", "x" * 125, "y" * 126, "z" * 65535, "w" * 65536]:
            await ws.send(m)
            r = await ws.recv()
            check(isinstance(r, str) and r == m, "text echo of %d chars" % len(m))
        for n in [0, 1, 125, 126, 65535, 65536, 1 << 20, 16 << 20]:
            m = os.urandom(n)
            await ws.send(m)
            r = await ws.recv()
            check(isinstance(r, bytes) and r == m, "binary echo of %d bytes" % n)
        # a fragmented message is echoed whole
        await ws.send(iter(["frag", "men", "ted"]))
        check(await ws.recv() == "fragmented", "fragmented text")
        # ping: answered with a pong carrying the same payload
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, bound(5))
        await ws.close(1000, "done")
        check(ws.close_code == 1000, "close code %r" % ws.close_code)
    ok("echo%s: text and binary of 0 B..16 MiB, fragments, ping, close 1000"
       % (" with permessage-deflate" if compression else ""))


async def too_big():
    async with websockets.connect(URI, max_size=None, ping_interval=None) as ws:
        try:
            # refused from its header on: the send itself may see the close
            await ws.send(b"x" * ((16 << 20) + 1))
            await asyncio.wait_for(ws.recv(), bound(10))
            fail("a message over 16 MiB was echoed")
        except websockets.ConnectionClosed as e:
            check(e.rcvd is not None and e.rcvd.code == 1009, "over the limit: %r" % e)
    ok("a message over 16 MiB: close 1009")


async def close_codes():
    for code in [1000, 1001, 1003, 1008, 1011, 3000, 4000, 4999]:
        ws = await websockets.connect(URI, ping_interval=None)
        await ws.close(code, "reason %d" % code)
        check(ws.close_code == code, "close %d answered with %r" % (code, ws.close_code))
    ok("the closing handshake echoes the code (1000..4999)")


async def many_messages():
    async with websockets.connect(URI, ping_interval=None) as ws:
        for i in range(2000):
            await ws.send("message %d" % i)
        for i in range(2000):
            r = await ws.recv()
            check(r == "message %d" % i, "pipelined message %d: %r" % (i, r))
    ok("2000 messages sent ahead, echoed in order")


asyncio.run(echo(None))
asyncio.run(echo("deflate"))
asyncio.run(too_big())
asyncio.run(close_codes())
asyncio.run(many_messages())


# --- the handshake, raw ------------------------------------------------------
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
good = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", KEY), ("Sec-WebSocket-Version", "13")]


class Head:
    def __init__(self, raw):
        lines = raw.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = [(n.strip().lower(), v.strip())
                        for n, _, v in (ln.partition(":") for ln in lines[1:] if ln)]
        self.raw = raw

    def header(self, name):
        return next((v for n, v in self.headers if n == name), None)

    def __repr__(self):
        return repr(self.raw)


def handshake(headers):
    # a 101 has no body and no length: read the head only
    c = Conn()
    c.send(request("GET", "/ws", headers))
    while b"\r\n\r\n" not in c.buf:
        check(c._fill(), "connection closed before the response head")
    i = c.buf.index(b"\r\n\r\n") + 4
    return c, Head(c._take(i)[:-4])


c, r = handshake(good)
check(r.status == 101, "handshake: %r" % r)
check(r.header("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "accept: %r" % r)
c.close()
for name, hs, want in [
    ("no Upgrade", good[1:], 400),
    ("no Connection: Upgrade", [good[0]] + good[2:], 400),
    ("a 15-byte key", good[:2] + [("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAA")] + good[3:], 400),
    ("version 8", good[:3] + [("Sec-WebSocket-Version", "8")], 426),
]:
    c, r = handshake(hs)
    check(r.status == want, "%s: %r" % (name, r))
    if want == 426:
        check(r.header("sec-websocket-version") == "13", "426 names version 13: %r" % r)
    c.close()
ok("handshake: 101 with the RFC 6455 example accept; 400 and 426 for bad ones")


# --- frames that break the protocol ------------------------------------------
def frame(b0, payload, masked=True):
    m = b"\x11\x22\x33\x44"
    n = len(payload)
    h = bytes([b0])
    mb = 0x80 if masked else 0
    if n < 126:
        h += bytes([mb | n])
    elif n < 65536:
        h += bytes([mb | 126]) + struct.pack("!H", n)
    else:
        h += bytes([mb | 127]) + struct.pack("!Q", n)
    if masked:
        return h + m + bytes(b ^ m[i % 4] for i, b in enumerate(payload))
    return h + payload


def close_code_after(data):
    c, r = handshake(good)
    check(r.status == 101, "handshake")
    c.send(data)
    got, _ = c.wait_eof(10)
    check(len(got) >= 4 and got[0] == 0x88, "a close frame, got %r" % got[:20])
    return struct.unpack("!H", got[2:4])[0]


cases = [
    ("unmasked frame", frame(0x81, b"hi", masked=False), 1002),
    ("RSV1 without an extension", frame(0xC1, b"hi"), 1002),
    ("opcode 3", frame(0x83, b"hi"), 1002),
    ("opcode 0xB", frame(0x8B, b"hi"), 1002),
    ("fragmented ping", frame(0x09, b"hi"), 1002),
    ("ping of 126 bytes", frame(0x89, b"p" * 126), 1002),
    ("continuation without a message", frame(0x80, b"hi"), 1002),
    ("close with 1 byte", frame(0x88, b"\x03"), 1002),
    ("close code 1005", frame(0x88, b"\x03\xed"), 1002),
    ("close code 2999", frame(0x88, b"\x0b\xb7"), 1002),
    ("text not UTF-8", frame(0x81, b"\xff"), 1007),
    ("text split badly across fragments", frame(0x01, b"\xe2\x82") + frame(0x80, b"x"), 1007),
]
for name, data, want in cases:
    code = close_code_after(data)
    check(code == want, "%s: close %d, want %d" % (name, code, want))
ok("bad frames: 1002 (mask, RSV, opcodes, control frames, close codes), 1007 (UTF-8)")

c, r = handshake(good)
c.send(frame(0x81, b"still serving"))
c.settimeout(5)
d = b""
while len(d) < 15:
    d += c.sock.recv(100)
check(d == b"\x81\x0dstill serving", "echo after the bad frames: %r" % d)
c.close()
ok("the server keeps serving")
PYEOF

# plain HTTP on the same server is unaffected
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "GET /hello"
petrel_stop
ok "SIGTERM: exit 0"
