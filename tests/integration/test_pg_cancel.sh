#!/usr/bin/env bash
# A query whose client left is cancelled on the server (petrel.h,
# petrel_pg_exec: the abort callback of the request): a request runs
# SELECT pg_sleep(30), and pg_stat_activity must show that query gone
# within seconds of
#  - the HTTP/1.1 client closing its connection (FIN), or resetting it (RST);
#  - an h2 client resetting the stream (RST_STREAM, RFC 9113 §6.4) while its
#    connection stays open;
#  - --handler-timeout passing (the client gets 504, RFC 9110 §15.6.5);
# and a query of an aborted request that still waits in the pool's queue
# never reaches the server.  The pool keeps serving afterwards, and a
# cancel of ours is not logged as a query error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs cc h2
pg_setup
pg_start
pg_module "$LIB_TMP"
petrel_start --workers 1 --handler-timeout 3 \
    --dev --module "$LIB_TMP/pgtest.c:pool.connections=2 pool.depth=1 host=$PGHOST port=$PGPORT dbname=postgres user=postgres"

pyrun <<'PY'
import os
import socket
import subprocess
import time
from petrel_client import *
from petrel_fault import rst, h2_open, h2_get


def sleeping():
    r = subprocess.run(["psql", "-X", "-At", "-d", "postgres", "-c",
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                        "AND query LIKE 'SELECT ''slept'' FROM pg_sleep%'"],
                       capture_output=True, text=True, timeout=bound(30))
    check(r.returncode == 0, "psql: %s" % r.stderr)
    return int(r.stdout.strip())


def wait_sleeping(n, what):
    wait_until(lambda: sleeping() == n, 10, "%d pg_sleep queries running (%s)" % (n, what))


def gone(what):
    t0 = time.monotonic()
    wait_until(lambda: sleeping() == 0, 5, "the pg_sleep query cancelled after %s" % what)
    return time.monotonic() - t0


# --- HTTP/1.1: the client closes, or resets -------------------------------------
for how in ("closes its connection (FIN)", "resets its connection (RST)"):
    c = Conn()
    c.send(request("GET", "/sleep?s=30"))
    wait_sleeping(1, how)
    if "RST" in how:
        rst(c.sock)
    else:
        c.close()
    ok("HTTP/1.1: the client %s: the query is gone from pg_stat_activity %.2fs later" % (how, gone(how)))

# --- h2: RST_STREAM, the connection stays ---------------------------------------
import h2.events
c, h = h2_open()
sid = h2_get(c, h, "/sleep?s=30")
wait_sleeping(1, "h2 stream")
h.reset_stream(sid)
c.send(h.data_to_send())
ok("h2: RST_STREAM: the query is gone %.2fs later" % gone("RST_STREAM"))
sid = h2_get(c, h, "/one")
got = None
c.settimeout(10)
while got is None:
    data = c.sock.recv(65536)
    check(data, "h2: connection closed")
    for ev in h.receive_data(data):
        if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
            got = ev.data
        if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
            check(dict(ev.headers).get(b":status", dict(ev.headers).get(":status")) in (b"200", "200"),
                  "h2 /one: %r" % ev.headers)
    c.send(h.data_to_send())
check(got == b"1", "h2 /one on the same connection: %r" % got)
c.close()
ok("h2: the connection goes on: /one on it answers 1")

# --- --handler-timeout: 504, then the query is cancelled ---------------------------
t0 = time.monotonic()
r = get("/sleep?s=30")
check(r.status == 504, "a 30 s query past --handler-timeout 3: %r" % r)
ok("--handler-timeout: 504 after %.1fs; the query is gone %.2fs later"
   % (time.monotonic() - t0, gone("the handler timeout")))

# --- a queued query of an aborted request never runs --------------------------------
# two connections of depth 1: two sleeps run, the third waits in the queue
a, b, q = Conn(), Conn(), Conn()
for x in (a, b):
    x.send(request("GET", "/sleep?s=30"))
wait_sleeping(2, "two connections busy")
q.send(request("GET", "/sleep?s=30"))
wait_server_read(q)
time.sleep(0.2)  # a window for a wrong dispatch to show
q.close()
time.sleep(0.3)
check(sleeping() == 2, "the queued query of a closed client ran (%d sleeping)" % sleeping())
a.close()
b.close()
gone("two clients closing")
ok("a queued query of a client that left is dropped; the running ones are cancelled")
check(get("/one").body == b"1", "/one after the cancels")
ok("the pool serves after the cancels")
PY
if grep -E "query failed|SQLSTATE" "$PETREL_ERR"; then
    fail "a cancel of ours was logged as a query error"
fi
petrel_stop
