"""Helpers of the publish/subscribe tests (test_pubsub_*.sh): WebSocket
subscribers and publishers of the `topics` module (python3-websockets),
its per-worker counters, and the check that every subscriber got every
message once, in each publisher's order."""
import asyncio
import json
import os

import websockets

from petrel_client import Conn, bound, check, request


def topics_url(port, sub=None, pub=None):
    q = []
    if sub:
        q.append("sub=" + sub)
    if pub:
        q.append("pub=" + pub)
    return "ws://127.0.0.1:%d/topics?%s" % (port, "&".join(q))


async def connect(port, sub=None, pub=None, deflate=False):
    return await asyncio.wait_for(websockets.connect(
        topics_url(port, sub, pub), max_size=None, ping_interval=None,
        compression="deflate" if deflate else None), bound(10))


def stats(port):
    """One worker's counters (the worker that takes the connection)."""
    c = Conn(port)
    c.send(request("GET", "/topics-stats", [("Connection", "close")]))
    r = c.read_response()
    check(r.status == 200, "GET /topics-stats: %r" % r)
    return json.loads(r.body)


def stats_by_worker(port, workers, tries=400):
    """{pid: counters} of `workers` workers: new connections until each has
    answered (the kernel spreads them across the workers)."""
    seen = {}
    for _ in range(tries):
        s = stats(port)
        seen[s["pid"]] = s
        if len(seen) >= workers:
            break
    check(len(seen) >= workers, "only %d of %d workers answered /topics-stats" % (len(seen), workers))
    return seen


def post(port, topic, body):
    c = Conn(port)
    c.send(request("POST", "/topics/" + topic, [("Connection", "close")], body))
    return c.read_response()


async def drain(ws, want, secs):
    """Exactly `want` messages from ws, then nothing more for a moment."""
    got = []
    try:
        while len(got) < want:
            got.append(await asyncio.wait_for(ws.recv(), bound(secs)))
    except asyncio.TimeoutError:
        return got
    try:
        got.append(await asyncio.wait_for(ws.recv(), 0.3))
    except asyncio.TimeoutError:
        pass
    return got


def check_once_in_order(name, got, publishers, count, unordered=()):
    """`got` holds, once each, "P:i" for every publisher P of `publishers`
    and i in 0..count-1, each P's in order, and every message of
    `unordered` (any order)."""
    per = {p: [] for p in publishers}
    rest = []
    for m in got:
        p, _, i = m.partition(":")
        if p in per:
            per[p].append(int(i))
        else:
            rest.append(m)
    for p, seq in per.items():
        check(seq == list(range(count)),
              "%s: from %s got %d messages, first differences: %s"
              % (name, p, len(seq), [(k, v) for k, v in enumerate(seq) if v != k][:5]))
    check(sorted(rest) == sorted(unordered),
          "%s: other messages differ: %d got, %d wanted (extra %s, missing %s)"
          % (name, len(rest), len(unordered), sorted(set(rest) - set(unordered))[:5],
             sorted(set(unordered) - set(rest))[:5]))


async def publish(ws, name, count):
    for i in range(count):
        await ws.send("%s:%d" % (name, i))
        if i % 20 == 0:
            await asyncio.sleep(0)


def env_int(name):
    return int(os.environ[name])
