#!/usr/bin/env bash
# WebSocket and the server's life: SIGTERM sends Close 1001 to every open
# WebSocket, waits for the answers and exits 0 at once (not at the drain
# timeout); so does a reload (SIGHUP) to the WebSockets of the workers it
# retires, while new ones open on the new workers; a client that never
# answers is cut at --drain-timeout; an idle
# connection is pinged after --ws-idle-timeout and closed when it stays
# silent; a client that answers pings stays.
. "$(dirname "$0")/lib.sh"

py_needs websockets

# --- SIGTERM with 20 open connections -----------------------------------------
petrel_start --module wsecho --drain-timeout 20
pyrun <<'PYEOF'
import asyncio, os, time
import websockets
from petrel_client import ok, check, bound, sigterm

URI = "ws://127.0.0.1:%s/ws" % os.environ["PORT"]


async def main():
    conns = [await websockets.connect(URI, ping_interval=None) for _ in range(20)]
    for ws in conns:
        await ws.send("hi")
        check(await ws.recv() == "hi", "echo before the drain")
    t0 = time.monotonic()
    sigterm()
    for ws in conns:
        await asyncio.wait_for(ws.wait_closed(), bound(10))
        check(ws.close_code == 1001, "close code at shutdown: %r" % ws.close_code)
    ok("SIGTERM: every connection got Close 1001 after %.2fs" % (time.monotonic() - t0))

asyncio.run(main())
PYEOF
petrel_wait_exit "$PETREL_PID" "$(bound 5)"
expect_eq "$PETREL_RC" 0 "exit status after the drain"
fcmp "$EXIT_SECS < $(bound 5)" || fail "the drain took ${EXIT_SECS}s: it waited for the drain timeout"
ok "petrel exited 0 in ${EXIT_SECS}s, well before --drain-timeout 20"

# --- SIGHUP: the retired worker's WebSockets get Close 1001 -------------------
# (a reload and SIGTERM share one drain: every protocol is asked to finish)
petrel_start --module wsecho --drain-timeout 20
pyrun <<'PYEOF'
import asyncio, os, signal, time
import websockets
from petrel_client import ok, check, bound, petrel_pid

URI = "ws://127.0.0.1:%s/ws" % os.environ["PORT"]


async def main():
    conns = [await websockets.connect(URI, ping_interval=None) for _ in range(5)]
    for ws in conns:
        await ws.send("hi")
        check(await ws.recv() == "hi", "echo before the reload")
    t0 = time.monotonic()
    os.kill(petrel_pid(), signal.SIGHUP)
    for ws in conns:
        await asyncio.wait_for(ws.wait_closed(), bound(10))
        check(ws.close_code == 1001,
              "close code when the worker retires: %r (1006: cut without a Close)" % ws.close_code)
    secs = time.monotonic() - t0
    check(secs < bound(5), "Close 1001 came after %.2fs, not at once" % secs)
    async with websockets.connect(URI, ping_interval=None) as ws:
        await ws.send("again")
        check(await ws.recv() == "again", "a new WebSocket on the new worker")
    ok("SIGHUP: every WebSocket of the retired worker got Close 1001 after %.2fs" % secs)

asyncio.run(main())
PYEOF
petrel_stop

# --- a client that does not answer the Close: cut at the drain timeout ---------
petrel_start --module wsecho --drain-timeout 1
pyrun <<'PYEOF'
import time
from petrel_client import ok, check, bound, sigterm
from petrel_fault import ws_open

c = ws_open()  # the opening handshake, RFC 6455 §4.1: a 101
t0 = time.monotonic()
sigterm()
got, secs = c.wait_eof(bound(10))
check(got[:1] == b"\x88" and got[2:4] == b"\x03\xe9", "Close 1001 first: %r" % got)
ok("a silent client: Close 1001, then cut after %.2fs" % (time.monotonic() - t0))
PYEOF
petrel_wait_exit "$PETREL_PID" "$(bound 5)"
expect_eq "$PETREL_RC" 0 "exit status after the drain timeout"

# --- idle timeout: ping, then close -------------------------------------------
petrel_start --module wsecho --ws-idle-timeout 0.3
pyrun <<'PYEOF'
import asyncio, os, time
import websockets
from petrel_client import ok, check, bound

URI = "ws://127.0.0.1:%s/ws" % os.environ["PORT"]


async def main():
    # python3-websockets answers pings by itself: the connection stays
    async with websockets.connect(URI, ping_interval=None) as ws:
        await asyncio.sleep(1.2)
        await ws.send("alive")
        check(await ws.recv() == "alive", "a client that answers pings stays open")
    ok("a client answering pings survives 4 idle periods")

asyncio.run(main())
PYEOF
pyrun <<'PYEOF'
import struct, time
from petrel_client import ok, check, bound
from petrel_fault import ws_open

c = ws_open()  # the opening handshake, RFC 6455 §4.1: a 101
t0 = time.monotonic()
got, secs = c.wait_eof(bound(10))
check(got[:1] == b"\x89", "a ping first: %r" % got[:20])
n = got[1] & 0x7f
rest = got[2 + n:]
check(rest[:1] == b"\x88" and struct.unpack("!H", rest[2:4])[0] == 1001,
      "then Close 1001: %r" % rest[:20])
check(0.4 < secs < bound(5), "closed after %.2fs (2 idle periods of 0.3s)" % secs)
ok("a silent client: ping after the idle timeout, Close 1001 after another")
PYEOF
petrel_stop
