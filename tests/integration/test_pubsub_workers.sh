#!/usr/bin/env bash
# Publish/subscribe across the worker processes of one instance (the
# `topics` module, doc/pubsub.md "Across workers"): with --workers 2,
# subscribers on both workers get every message of publishers on both
# workers, once each and in each publisher's order, WebSocket and HTTP
# publishers alike, with and without permessage-deflate; the counters of
# each worker add up (nothing lost between the rings).  Then a worker is
# killed: the master starts another, which gets a ring of its own, and
# messages flow again both ways; then a reload (SIGHUP): the old workers'
# subscribers get Close 1001 and the new workers' publish and deliver.
# The limits: --pubsub-max-message-size (413 over HTTP, 1009 over
# WebSocket), --pubsub-max-topic-size (1008).
. "$(dirname "$0")/lib.sh"

py_needs websockets

petrel_start --module topics --workers 2 --pubsub-max-message-size 1000 --pubsub-max-topic-size 16 \
    --pubsub-ring-size 1m --drain-timeout 3
export LIB_DIR

PYTHONPATH=$LIB_DIR pyrun <<'PYEOF'
import asyncio, os, signal, subprocess, time
import websockets
from petrel_client import ok, fail, check, bound
from pubsub_client import *

PORT = env_int("PORT")
MASTER = env_int("PETREL_PID")


def workers():
    out = subprocess.run(["pgrep", "-P", str(MASTER)], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


async def subscribers_on_both(n, want_pids=None):
    """At least n subscribers of topic t, until every worker holds some."""
    subs = []
    for _ in range(200):
        while len(subs) < n:
            subs.append(await connect(PORT, sub="t", deflate=len(subs) % 2 == 1))
        by = stats_by_worker(PORT, 2)
        if all(s["subscriptions"] > 0 for s in by.values()) and \
                (want_pids is None or set(want_pids) <= set(by)):
            return subs, by
        n += 4
    fail("the subscribers never reached both workers")


async def round_(subs, tag, publishers=3, count=200, http=10):
    pubs = [await connect(PORT, pub="t") for _ in range(publishers)]
    names = ["%s%d" % (tag, k) for k in range(publishers)]
    await asyncio.gather(*(publish(p, n, count) for p, n in zip(pubs, names)))
    posted = []
    for i in range(http):
        m = "%sH-%d" % (tag, i)
        r = post(PORT, "t", m)
        check(r.status == 202, "POST /topics/t: %r" % r)
        posted.append(m)
    want = publishers * count + http
    got = await asyncio.gather(*(drain(s, want, 10) for s in subs))
    for k, g in enumerate(got):
        check_once_in_order("subscriber %d" % k, g, names, count, posted)
    for p in pubs:
        await p.close()
    return want


async def main():
    subs, by = await subscribers_on_both(12)
    total = await round_(subs, "A")
    ok("%d subscribers on 2 workers (%s): %d messages of 3 WebSocket publishers and %d HTTP "
       "posts, each once, in each publisher's order"
       % (len(subs), ", ".join("pid %d: %d" % (p, s["subscriptions"]) for p, s in by.items()),
          total, 10))
    by = stats_by_worker(PORT, 2)
    check(sum(s["delivered"] for s in by.values()) == len(subs) * total,
          "delivered adds up: %s" % by)
    check(all(s["from_workers"] > 0 and s["lost_workers"] == 0 for s in by.values()),
          "each worker read the other's ring, lost nothing: %s" % by)
    ok("the counters add up: delivered %d, from the other worker %s, lost 0"
       % (sum(s["delivered"] for s in by.values()), [s["from_workers"] for s in by.values()]))

    # --- limits ---
    r = post(PORT, "t", "x" * 1001)
    check(r.status == 413, "a 1001-byte message over HTTP: %r" % r)
    big = await connect(PORT, pub="t")
    await big.send("y" * 1001)
    try:
        await asyncio.wait_for(big.recv(), bound(5))
        fail("a 1001-byte message over WebSocket was taken")
    except websockets.ConnectionClosed as e:
        check(e.code == 1009, "close code %r" % e.code)
    bad = await connect(PORT, sub="t,12345678901234567")
    try:
        await asyncio.wait_for(bad.recv(), bound(5))
        fail("a 17-byte topic was taken")
    except websockets.ConnectionClosed as e:
        check(e.code == 1008 and "limit" in e.reason, "close %r %r" % (e.code, e.reason))
    r = post(PORT, "a%20b%0A", "x")
    check(r.status == 400, "a topic with a control character: %r" % r)
    ok("limits: 413 and 1009 past --pubsub-max-message-size, 1008 past "
       "--pubsub-max-topic-size, 400 for a control character")
    for s in subs:
        await s.close()

    # --- a worker dies: its successor takes a ring, messages flow both ways ---
    before = workers()
    os.kill(before[0], signal.SIGKILL)
    deadline = time.time() + bound(10)
    while time.time() < deadline and (len(workers()) < 2 or before[0] in workers()):
        await asyncio.sleep(0.05)
    after = workers()
    check(len(after) == 2 and before[0] not in after, "the master restarted the worker: %s" % after)
    subs, by = await subscribers_on_both(12, after)
    total = await round_(subs, "B")
    ok("worker %d killed, %d started: %d messages reach %d subscribers on both, once, in order"
       % (before[0], [p for p in after if p not in before][0], total, len(subs)))

    # --- a reload: old subscribers get 1001, the new workers serve ---
    old = after
    os.kill(MASTER, signal.SIGHUP)
    codes = []
    for s in subs:
        try:
            await asyncio.wait_for(s.recv(), bound(10))
        except websockets.ConnectionClosed as e:
            codes.append(e.code)
    check(codes == [1001] * len(subs), "old subscribers closed with 1001: %s" % codes)
    deadline = time.time() + bound(15)
    while time.time() < deadline and (len(workers()) != 2 or set(workers()) & set(old)):
        await asyncio.sleep(0.05)
    new = workers()
    check(len(new) == 2 and not set(new) & set(old), "new workers after the reload: %s" % new)
    subs, by = await subscribers_on_both(12, new)
    total = await round_(subs, "C")
    by = stats_by_worker(PORT, 2)
    check(all(s["lost_workers"] == 0 for s in by.values()), "nothing lost: %s" % by)
    ok("after a reload: %d messages reach %d subscribers on the new workers, once, in order"
       % (total, len(subs)))
    for s in subs:
        await s.close()

asyncio.run(main())
PYEOF
petrel_stop
ok "SIGTERM: exit 0"
