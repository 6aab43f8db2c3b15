#!/usr/bin/env bash
# Requests that wait on the database, many at once:
#  - HTTP/1.1: pipelined requests with different numbers of queries (and
#    slower ones first: they finish last) in one write are answered in
#    request order (RFC 9112 §9.3.2), each with its own rows;
#  - h2: 100 concurrent streams on one connection, each waiting on the
#    database (a 1 s pg_sleep on a pool of 100 connections: together they
#    take about 1 s, not 100), then 100 streams of /queries?queries=20,
#    every one answered with its rows.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs cc h2
pg_setup
pg_start
pg_tfb
pg_module "$LIB_TMP"
petrel_start --workers 1 --module tfb:"host=$PGHOST port=$PGPORT dbname=hello_world user=postgres" \
    --dev --module "$LIB_TMP/pgtest.c:pool.connections=100 host=$PGHOST port=$PGPORT dbname=hello_world user=postgres"

pyrun <<'PY'
import json
import time
from petrel_client import *
from petrel_fault import h2_open

# --- HTTP/1.1 pipelining ------------------------------------------------------
paths = ["/sleep?s=0.6", "/queries?queries=20", "/db", "/sleep?s=0.3", "/queries?queries=5",
         "/fortunes", "/queries?queries=500", "/sleep?s=0", "/queries?queries=1",
         "/updates?queries=3", "/cached-queries?count=7", "/json", "/queries?queries=2", "/plaintext"]
c = Conn()
t0 = time.monotonic()
c.send(b"".join(request("GET", p) for p in paths))
for p in paths:
    r = c.read_response()
    check(r.status == 200, "pipelined %s: %r" % (p, r))
    if p.startswith("/sleep"):
        check(r.body == b"slept", "pipelined %s: %r" % (p, r.body))
    elif "queries=" in p or "count=" in p:
        n = int(p.split("=")[1])
        rows = json.loads(r.body)
        check(isinstance(rows, list) and len(rows) == n, "pipelined %s: %d rows" % (p, len(rows)))
    elif p == "/db":
        check(set(json.loads(r.body)) == {"id", "randomNumber"}, "pipelined /db: %r" % r.body)
    elif p == "/fortunes":
        check(b"Additional fortune added at request time." in r.body, "pipelined /fortunes: %r" % r.body)
    elif p == "/json":
        check(json.loads(r.body) == {"message": "Hello, World!"}, "pipelined /json: %r" % r.body)
    elif p == "/plaintext":
        check(r.body == b"Hello, World!", "pipelined /plaintext: %r" % r.body)
dt = time.monotonic() - t0
check(dt < bound(5), "the pipelined requests took %.1fs" % dt)
c.close()
ok("HTTP/1.1: %d pipelined requests (1 to 500 queries, slow ones first) answered in order in %.2fs"
   % (len(paths), dt))

# --- h2: 100 streams waiting at once ---------------------------------------------
import h2.events


def streams(path, n):
    c, h = h2_open()
    sids = []
    for i in range(n):
        sid = h.get_next_available_stream_id()
        h.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                             (":path", path)], end_stream=True)
        sids.append(sid)
    c.send(h.data_to_send())
    status, body, done = {}, {}, set()
    c.settimeout(30)
    while len(done) < n:
        data = c.sock.recv(1 << 16)
        check(data, "h2: the connection closed with %d of %d streams answered" % (len(done), n))
        for ev in h.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status[ev.stream_id] = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived):
                body[ev.stream_id] = body.get(ev.stream_id, b"") + ev.data
                h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                done.add(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                fail("h2 %s: stream %d reset" % (path, ev.stream_id))
        c.send(h.data_to_send())
    c.close()
    return [(status.get(s), body.get(s, b"")) for s in sids]


t0 = time.monotonic()
got = streams("/sleep?s=1", 100)
dt = time.monotonic() - t0
bad = [x for x in got if x != ("200", b"slept")]
check(not bad, "h2: %d of 100 waiting streams not answered 200 slept: %r" % (len(bad), bad[:3]))
check(dt < bound(6), "h2: 100 streams of a 1 s query took %.1fs: they did not wait side by side" % dt)
ok("h2: 100 concurrent streams each waiting 1 s on the database answered in %.2fs" % dt)
got = streams("/queries?queries=20", 100)
for st, b in got:
    check(st == "200" and len(json.loads(b)) == 20, "h2 /queries?queries=20: %r %r" % (st, b[:80]))
ok("h2: 100 concurrent streams of /queries?queries=20 answered, 20 rows each")
PY

# --- the statements of a loop turn go out together --------------------------------
# Each statement is a transaction of its own (a Sync after each), yet the
# pool writes a connection's statements of a loop turn at once (libpq 17's
# PQsendPipelineSync; before 17, the Sync held back): 100 streams of
# /queries?queries=20 in one write are 2,000 statements and far fewer writes.
if ! command -v strace >/dev/null; then
    ok "strace not installed: the writes to the database are not counted"
else
    worker=$(petrel_workers)
    strace -f -c -e trace=sendto -o "$LIB_TMP/strace" -p "$worker" 2>"$LIB_TMP/strace-err" &
    spid=$!
    LIB_BG+=("$spid")
    wait_for "$(bound 10)" grep -q "Process $worker attached" "$LIB_TMP/strace-err"
    pyrun <<'PY'
import json
import h2.events
from petrel_client import *
from petrel_fault import h2_open

c, h = h2_open()
sids = []
for i in range(100):
    sid = h.get_next_available_stream_id()
    h.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                         (":path", "/queries?queries=20")], end_stream=True)
    sids.append(sid)
c.send(h.data_to_send())
body, done = {}, set()
c.settimeout(30)
while len(done) < 100:
    data = c.sock.recv(1 << 16)
    check(data, "h2: the connection closed with %d of 100 streams answered" % len(done))
    for ev in h.receive_data(data):
        if isinstance(ev, h2.events.DataReceived):
            body[ev.stream_id] = body.get(ev.stream_id, b"") + ev.data
            h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            done.add(ev.stream_id)
    c.send(h.data_to_send())
c.close()
check(all(len(json.loads(body[s])) == 20 for s in sids), "h2 /queries?queries=20: rows missing")
PY
    kill -INT "$spid"
    wait "$spid" || true
    writes=$(awk '$NF == "sendto" { print $4; found = 1 } END { if (!found) print 0 }' "$LIB_TMP/strace")
    [[ $writes -lt 500 ]] || fail "$writes writes to the database for 2,000 statements (fewer than 500 expected)"
    ok "100 streams of /queries?queries=20 (2,000 statements, each its own transaction): $writes writes to the database"
fi

petrel_stop
