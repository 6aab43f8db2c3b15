#!/usr/bin/env bash
# WebSocket through the reverse proxy: petrel's wsecho module (GET /ws) is the
# upstream, behind a petrel whose proxy module mounts it at /u (strip).  An
# HTTP/1.1 client (python3-websockets: the opening handshake of RFC 6455
# §4.1, Upgrade of RFC 9110 §7.8) and an h2c client (RFC 8441 Extended
# CONNECT, ws_h2_client.py) get their handshake accepted once the upstream
# said 101 (HTTP/1.1: 101 with the Sec-WebSocket-Accept of the client's own
# key, §4.2.2; RFC 8441 §5: 200), and their messages echoed through the
# relay: text and binary, 1 MiB; the upstream's Close code and reason reach
# the client (§7.4.1: 1001 from an upstream shutting down); an
# upstream answer other than 101 (404, 200) is the client's answer, as any
# response (§4.1: the handshake failed); nobody listening upstream -> 502
# (RFC 9110 §15.6.3); 40 tunnels at once; a client that sends and never
# reads stops being read (backpressure through both legs: the upstream
# echoes into a full queue) and the proxy's memory stays bounded.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
py_needs websockets

# the upstream: wsecho
petrel_start --workers 1 --module wsecho --module hello --drain-timeout 5
UPORT=$PORT
UPID=$PETREL_PID
DEAD=$(free_port)
petrel_start --workers 1 --module \
    "proxy:/u=http://127.0.0.1:$UPORT,strip,buffer=64k;/down=http://127.0.0.1:$DEAD,strip,breaker-failures=1000"
WORKER=$(petrel_workers)
export WORKER LIB_DIR

PYTHONPATH=$LIB_DIR pyrun <<'PYEOF'
import asyncio, base64, os, socket, struct, time
import websockets
from petrel_client import ok, fail, check, bound

PORT = os.environ["PORT"]
URI = "ws://127.0.0.1:%s/u/ws" % PORT


async def echo():
    async with websockets.connect(URI, max_size=None, ping_interval=None,
                                  subprotocols=None) as ws:
        for m in ["hello", "", "é€😀", "x" * 70000]:
            await ws.send(m)
            r = await ws.recv()
            check(isinstance(r, str) and r == m, "text echo of %d chars" % len(m))
        for n in [0, 1, 126, 65536, 1 << 20]:
            m = os.urandom(n)
            await ws.send(m)
            r = await ws.recv()
            check(isinstance(r, bytes) and r == m, "binary echo of %d bytes" % n)
        await ws.close(4001, "bye")
        check(ws.close_code == 4001, "close code %r" % ws.close_code)
    ok("HTTP/1.1 client (RFC 6455 §4.1): text, binary up to 1 MiB, close 4001 through the proxy")


async def refused(path, want):
    try:
        async with websockets.connect("ws://127.0.0.1:%s%s" % (PORT, path),
                                      ping_interval=None):
            fail("%s: the handshake succeeded" % path)
    except websockets.InvalidStatusCode as e:
        check(e.status_code == want, "%s: %r" % (path, e.status_code))


async def many(n):
    async def one(i):
        async with websockets.connect(URI, ping_interval=None) as ws:
            for k in range(10):
                m = "%d-%d" % (i, k)
                await ws.send(m)
                check(await ws.recv() == m, "tunnel %d message %d" % (i, k))
            await ws.close(1000)
    await asyncio.wait_for(asyncio.gather(*[one(i) for i in range(n)]), bound(30))
    ok("%d tunnels at once, 10 messages each" % n)


asyncio.run(echo())
asyncio.run(refused("/u/nows", 404))
asyncio.run(refused("/u/hello", 200))
ok("an upstream that does not switch: its 404 and its 200 are the client's answers")
asyncio.run(refused("/down/ws", 502))
ok("nobody listening upstream: 502 (RFC 9110 §15.6.3)")
asyncio.run(many(40))


def rss_kb(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# A client that sends and never reads: the echoes fill its socket, the
# proxy's queue to it, then the upstream's to the proxy; each leg stops
# reading in turn, until the client's own sends block.
worker = os.environ["WORKER"]
before = rss_kb(worker)
s = socket.create_connection(("127.0.0.1", int(PORT)))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /u/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
check(head.startswith(b"HTTP/1.1 101"), "handshake: %r" % head[:40])
payload = os.urandom(65536)
mask = b"\x01\x02\x03\x04"
masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
frame = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", len(payload)) + mask + masked
s.settimeout(bound(2))
sent = 0
try:
    while sent < (512 << 20):
        s.sendall(frame)
        sent += len(payload)
except socket.timeout:
    pass
check(sent < (512 << 20), "never blocked after %d MiB" % (sent >> 20))
grown = rss_kb(worker) - before
check(grown < 48 * 1024, "the proxy grew by %d KiB" % grown)
ok("a client that never reads: its sends block after %d MiB, the proxy grew by %d KiB"
   % (sent >> 20, grown))
s.close()
PYEOF

# RFC 8441 clients, when python3-h2 and python3-wsproto are there
if "$PY" -c 'import h2, wsproto' 2>/dev/null; then
    PYTHONPATH=$LIB_DIR pyrun <<'PYEOF'
import os
from petrel_client import ok, fail, check, bound
from ws_h2_client import H2

c = H2(int(os.environ["PORT"]), timeout=bound(10))
ws = c.websocket("/u/ws", deflate=True)
check(ws.status == 200, "Extended CONNECT answered %r" % ws.status)
for m in ["hello", "é€😀", os.urandom(100), os.urandom(1 << 20)]:
    ws.send(m)
    c.pump_until(lambda: ws.messages)
    b, got = ws.messages.pop(0)
    check(got == m, "echo of %d" % len(m))
ws.close(4002, "done")
c.pump_until(lambda: ws.closed)
check(ws.closed[0] == 4002, "close %r" % (ws.closed,))
ok("h2c client (RFC 8441 §4, §5): 200, text, binary up to 1 MiB with permessage-deflate, close 4002")
nows = c.websocket("/u/nows")
check(nows.status == 404, "an upstream 404 over RFC 8441: %r" % nows.status)
ok("h2c: the upstream's 404 is the client's")
PYEOF
else
    echo "skip: python3-h2 or python3-wsproto missing: RFC 8441 clients not tested"
fi

# the upstream's own Close: it shuts down (Close 1001, its reason)
export UPID
PYTHONPATH=$LIB_DIR pyrun <<'PYEOF'
import asyncio, os, signal
import websockets
from petrel_client import ok, fail, check, bound


async def main():
    async with websockets.connect("ws://127.0.0.1:%s/u/ws" % os.environ["PORT"],
                                  ping_interval=None) as ws:
        await ws.send("before")
        check(await ws.recv() == "before", "echo before the shutdown")
        os.kill(int(os.environ["UPID"]), signal.SIGTERM)
        try:
            await asyncio.wait_for(ws.recv(), bound(10))
            fail("a message after the upstream's Close")
        except websockets.ConnectionClosed as e:
            check(e.rcvd is not None and e.rcvd.code == 1001 and
                  e.rcvd.reason == "server shutting down", "the close: %r" % e)
    ok("the upstream's Close (1001, its reason) reaches the client (RFC 6455 §7.4.1)")


asyncio.run(main())
PYEOF
petrel_wait_exit "$UPID" "$(bound 10)"
expect_eq "$PETREL_RC" 0 "the upstream's exit status"

petrel_stop
