#!/usr/bin/env bash
# WebSocket: 100 concurrent python3-websockets clients echo 200 messages each
# (text and binary, 1 B..64 KiB) through one worker and through two, then
# close with their own codes, which come back.
. "$(dirname "$0")/lib.sh"

py_needs websockets

run_clients() {
    pyrun <<'PYEOF'
import asyncio, os, random
import websockets
from petrel_client import ok, fail, check, bound

URI = "ws://127.0.0.1:%s/ws" % os.environ["PORT"]
N, MSGS = 100, 200


async def client(i, ws):
    rnd = random.Random(i)
    for k in range(MSGS):
        n = rnd.choice([1, 10, 100, 1000, 4096, 65536])
        if k % 2:
            m = bytes(rnd.getrandbits(8) for _ in range(min(n, 64))) * (n // min(n, 64))
        else:
            m = ("%d:%d:" % (i, k)) + "é" * (n // 2)
        await ws.send(m)
        r = await ws.recv()
        if r != m:
            fail("client %d message %d: echo differs (%s of %d)"
                 % (i, k, type(r).__name__, len(r)))
    await ws.close(4000 + i, "client %d" % i)
    check(ws.close_code == 4000 + i, "client %d: close code %r" % (i, ws.close_code))
    return i


async def main():
    # all N open at once, then all of them echo concurrently
    conns = await asyncio.wait_for(asyncio.gather(
        *(websockets.connect(URI, max_size=None, ping_interval=None) for _ in range(N))),
        bound(30))
    done = await asyncio.wait_for(
        asyncio.gather(*(client(i, ws) for i, ws in enumerate(conns))), bound(100))
    check(sorted(done) == list(range(N)), "every client finished")

asyncio.run(main())
ok("%d concurrent connections, %d echoes each, own close codes" % (N, MSGS))
PYEOF
}

petrel_start --module wsecho
run_clients
petrel_stop

petrel_start --module wsecho --workers 2
run_clients
petrel_stop
ok "with 2 workers too; SIGTERM: exit 0"
