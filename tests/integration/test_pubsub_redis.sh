#!/usr/bin/env bash
# Publish/subscribe across instances through a real Redis (Debian's
# redis-server, started here on a loopback port and a Unix socket;
# doc/pubsub.md "Across instances"): two petrel instances of two workers
# each, one connected over TCP, the other over the Unix socket.
#   1. Every subscriber of either instance gets every message published in
#      either (WebSocket and HTTP publishers), once each, in each
#      publisher's order; a message another program publishes to the
#      channel (redis-cli) arrives too; a third instance with another
#      --pubsub-redis-prefix shares none of it.
#   2. Redis is killed: delivery within each instance goes on, nothing
#      crosses, the workers log the outage and count what they could not
#      bridge.
#   3. Redis is started again: the workers reconnect and subscribe again by
#      themselves, log the end of the outage with its gap, and messages
#      cross both ways again, once each.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/redis_lib.sh"

py_needs websockets
redis_needs
redis_start

petrel_start --module topics --workers 2 --pubsub-redis "127.0.0.1:$REDIS_PORT"
A_PID=$PETREL_PID A_PORT=$PORT A_ERR=$PETREL_ERR
petrel_start --module topics --workers 2 --pubsub-redis "unix:$REDIS_SOCK"
B_PID=$PETREL_PID B_PORT=$PORT B_ERR=$PETREL_ERR
# another application on the same Redis: its channels are its own
petrel_start --module topics --pubsub-redis "127.0.0.1:$REDIS_PORT" --pubsub-redis-prefix app2:
C_PID=$PETREL_PID C_PORT=$PORT
export A_PORT B_PORT C_PORT REDIS_PORT REDIS_CLI LIB_DIR

# phase PHASE: the Python side of one phase (the script below, by name)
phase() {
    PYTHONPATH=$LIB_DIR pyrun "$1" <<'PYEOF'
import asyncio, os, subprocess, sys, time
import websockets
from petrel_client import ok, fail, check, bound
from pubsub_client import *

A, B, C = env_int("A_PORT"), env_int("B_PORT"), env_int("C_PORT")
PHASE = sys.argv[1]


def redis(*args):
    return subprocess.run([os.environ["REDIS_CLI"], "-p", os.environ["REDIS_PORT"]] + list(args),
                          capture_output=True, text=True, timeout=bound(10)).stdout.strip()


def wait_redis_state(want):
    """Every worker of both instances says the bridge is up (1) or down (0)."""
    deadline = time.time() + bound(15)
    while True:
        states = {(p, pid): s["redis"] for p in (A, B)
                  for pid, s in stats_by_worker(p, 2).items()}
        if all(v == want for v in states.values()):
            return
        check(time.time() < deadline, "bridge states %s, want %d" % (states, want))
        time.sleep(0.05)


async def subscribers(port, n):
    """At least n subscribers of t on `port`, until both its workers hold some."""
    subs = []
    for _ in range(100):
        while len(subs) < n:
            subs.append(await connect(port, sub="t", deflate=len(subs) % 2 == 0))
        if all(s["subscriptions"] > 0 for s in stats_by_worker(port, 2).values()):
            return subs
        n += 2
    fail("subscribers never reached both workers of :%d" % port)


def wait_numsub(want):
    deadline = time.time() + bound(10)
    while True:
        n = int(redis("PUBSUB", "NUMSUB", "petrel:t").split()[-1])
        if n == want:
            return
        check(time.time() < deadline, "PUBSUB NUMSUB petrel:t is %d, want %d" % (n, want))
        time.sleep(0.02)


async def cross(subs_a, subs_b, tag, count=100):
    """Publishers on both instances; every subscriber gets all, once, in order."""
    pubs = [await connect(A, pub="t"), await connect(A, pub="t"),
            await connect(B, pub="t"), await connect(B, pub="t")]
    names = ["%s%d" % (tag, k) for k in range(4)]
    await asyncio.gather(*(publish(p, n, count) for p, n in zip(pubs, names)))
    posted = []
    for k, port in enumerate((A, B) * 3):
        m = "%sH-%d" % (tag, k)
        check(post(port, "t", m).status == 202, "POST")
        posted.append(m)
    want = 4 * count + len(posted)
    subs = subs_a + subs_b
    got = await asyncio.gather(*(drain(s, want, 10) for s in subs))
    for k, g in enumerate(got):
        check_once_in_order("subscriber %d (%s)" % (k, "A" if k < len(subs_a) else "B"), g,
                            names, count, posted)
    for p in pubs:
        await p.close()
    return want


async def main():
    subs_a = await subscribers(A, 6)
    subs_b = await subscribers(B, 6)
    if PHASE == "up":
        wait_redis_state(1)
        wait_numsub(4)  # each worker of each instance, once
        other = await connect(C, sub="t")
        deadline = time.time() + bound(10)
        while redis("PUBSUB", "NUMSUB", "app2:t").split()[-1] != "1":
            check(time.time() < deadline, "app2:t never subscribed")
            time.sleep(0.02)
        n = await cross(subs_a, subs_b, "U")
        ok("2 instances x 2 workers through Redis (TCP and Unix socket): %d messages reach "
           "%d subscribers once each, in each publisher's order" % (n, len(subs_a) + len(subs_b)))
        redis("PUBLISH", "petrel:t", "from redis-cli")
        got = await asyncio.gather(*(drain(s, 1, 10) for s in subs_a + subs_b))
        check(all(g == ["from redis-cli"] for g in got), "a message of redis-cli: %s" % got)
        ok("a message another program publishes to petrel:t reaches every subscriber once")
        redis("PUBLISH", "app2:t", "to app2")
        check(await drain(other, 1, 10) == ["to app2"], "app2's subscriber")
        got = await asyncio.gather(*(drain(s, 1, 0.3) for s in subs_a + subs_b))
        check(all(g == [] for g in got), "app2's message crossed to petrel:t: %s" % got)
        ok("--pubsub-redis-prefix app2: the third instance got none of the %d messages of "
           "petrel:t, and only it got app2:t's" % n)
        await other.close()
    elif PHASE == "down":
        wait_redis_state(0)
        pub = await connect(A, pub="t")
        await publish(pub, "D", 50)
        got_a = await asyncio.gather(*(drain(s, 50, 10) for s in subs_a))
        for k, g in enumerate(got_a):
            check_once_in_order("subscriber %d of A" % k, g, ["D"], 50)
        got_b = await asyncio.gather(*(drain(s, 1, 0.5) for s in subs_b))
        check(all(g == [] for g in got_b), "B got messages without Redis: %s" % got_b)
        by = stats_by_worker(A, 2)
        unbridged = sum(s["unbridged"] for s in by.values())
        check(unbridged == 50, "unbridged on A: %s" % by)
        ok("Redis down: A's %d subscribers (both workers) get A's 50 messages, B's get none; "
           "A counts 50 not bridged" % len(subs_a))
        await pub.close()
    elif PHASE == "back":
        wait_redis_state(1)
        wait_numsub(4)  # subscribed again, by themselves
        n = await cross(subs_a, subs_b, "R")
        by = {**{("A", p): s for p, s in stats_by_worker(A, 2).items()},
              **{("B", p): s for p, s in stats_by_worker(B, 2).items()}}
        check(all(s["redis_disconnects"] >= 1 for s in by.values()), "disconnects: %s" % by)
        ok("Redis back: every worker reconnected and subscribed again; %d messages cross both "
           "ways once each, in order" % n)
    for s in subs_a + subs_b:
        await s.close()

asyncio.run(main())
PYEOF
}

phase up
redis_kill
phase down
for err in "$A_ERR" "$B_ERR"; do
    n=$(grep -c "pubsub: redis .*: connection lost" "$err" || true)
    [[ $n -eq 2 ]] || fail "each worker logs the outage once: $n lines in $err"
done
ok "the outage is logged once by each worker: $(grep -m 1 'connection lost' "$A_ERR")"
redis_start
phase back
line=$(grep "pubsub: redis .*: back after" "$A_ERR" | grep -m 1 "50 messages published here meanwhile were not bridged") ||
    fail "no worker of A logged the gap of 50: $(grep 'back after' "$A_ERR")"
[[ $(grep -c "back after" "$B_ERR") -eq 2 ]] || fail "B's workers did not log their return"
ok "the return is logged with its gap: $line"

petrel_stop "$A_PID"
petrel_stop "$B_PID"
petrel_stop "$C_PID"
redis_stop
ok "SIGTERM: the instances exit 0; Redis stopped"
