#!/usr/bin/env bash
# The tfb module (modules/tfb.c) on a real PostgreSQL: each TechEmpower
# Framework Benchmarks test type against the rules of the benchmark's test
# requirements and verifier:
#  - every response has Server and Date, Content-Length, the exact
#    Content-Type of its type (application/json, text/plain,
#    text/html; charset=utf-8);
#  - the database: the tables of the benchmark's create-postgres.sql,
#    under quoted names too (its verifier reads "World");
#  - /json: {"message":"Hello, World!"}; /plaintext: Hello, World!, also 16
#    pipelined requests in one write;
#  - /db: one World object whose randomNumber is the database's;
#  - /queries, /updates, /cached-queries: N objects for N in 1..500; a
#    missing, empty or non-integer N is 1, N < 1 is 1, N > 500 is 500;
#  - /fortunes: the 12 fortunes and the one added at request time, sorted by
#    message, escaped, UTF-8 intact: byte for byte the benchmark's page;
#  - /updates: the new numbers are in the database after the response; the
#    ids are drawn as for /queries (a repeated id shows one number, the one
#    written); counted as the benchmark's verifier counts (pg_stat_statements:
#    a statement matching "select" is a read), each row is read by a SELECT
#    of its own and the rows are written by one UPDATE a request, with no
#    "select" in its text;
#  - /cached-queries: the numbers come from the database (set to a known
#    pattern before petrel starts), from a cache (changing the table after
#    start-up does not change them); rows missing from the table at
#    start-up are read through when asked for, each loaded once however
#    many requests asked (/metrics: petrel_cache_loads_total, hits,
#    misses, entries).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_setup
pg_needs pgss
pg_start
pg_tfb # pg_stat_statements too, as the benchmark's database has it
# the tables twice, as the benchmark's create-postgres.sql makes them:
# unquoted (world, fortune: the module's) and quoted ("World", "Fortune");
# the benchmark's verifier reads both World tables before and after
# /updates (SELECT * FROM "World", then "world") and fails the type when
# either is missing
for t in world:10000 fortune:12 '"World":10000' '"Fortune":12'; do
    n=$(psql_ -c "SELECT count(*) FROM ${t%:*}") ||
        fail "setup.sh: no table ${t%:*} (the benchmark's create-postgres.sql makes it)"
    [[ $n == "${t##*:}" ]] || fail "setup.sh: ${t%:*} has $n rows, want ${t##*:}"
done
ok "setup.sh: world and \"World\" 10,000 rows, fortune and \"Fortune\" 12, as create-postgres.sql makes them"
# a known pattern, so that a value can only have come from the database
psql_ -c "UPDATE world SET randomnumber = (id * 7) % 10000 + 1"
# rows 1..50 away while petrel fills its cache: read through later
psql_ -c "CREATE TABLE world_away AS SELECT * FROM world WHERE id <= 50" \
    -c "DELETE FROM world WHERE id <= 50"

petrel_start --workers 1 --admin-listen 127.0.0.1:0 \
    --module tfb:"pool.connections=2 host=$PGHOST port=$PGPORT dbname=hello_world user=benchmarkdbuser"
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT
metric() { curl_ "http://127.0.0.1:$ADMIN_PORT/metrics" | sed -n "s/^$1 //p"; }
# the cache is filled at start-up (9,950 rows: then the table changes under it)
filled() { [[ $(metric petrel_cache_entries) == 9950 ]]; }
wait_for "$(bound 10)" filled
psql_ -c "INSERT INTO world SELECT * FROM world_away"
ok "the cache filled at start-up with the 9,950 rows there: petrel_cache_entries $(metric petrel_cache_entries)"

pyrun <<'EOF'
import json
import os
import re
import subprocess
import sys
import time
from petrel_client import *



def sql(q):
    r = subprocess.run(["psql", "-X", "-At", "-q", "-v", "ON_ERROR_STOP=1", "-c", q],
                       capture_output=True, text=True, timeout=bound(30))
    check(r.returncode == 0, "psql %r: %s" % (q, r.stderr))
    return r.stdout.strip()


def pattern(i):
    return (i * 7) % 10000 + 1


DATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|"
                  r"Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")


def fetch(path, ctype):
    r = get(path)
    check(r.status == 200, "GET %s: %r" % (path, r))
    check(r.header("server"), "GET %s: no Server" % path)
    check(r.header("date") and DATE.match(r.header("date")), "GET %s: Date %r" % (path, r.header("date")))
    check(r.header("content-length") == str(len(r.body)), "GET %s: Content-Length %r for %d bytes"
          % (path, r.header("content-length"), len(r.body)))
    check(r.header("content-type") == ctype, "GET %s: Content-Type %r, want %r"
          % (path, r.header("content-type"), ctype))
    check(r.header("content-encoding") is None, "GET %s: compressed" % path)
    return r.body


def world(o, what):
    check(isinstance(o, dict) and set(o) == {"id", "randomNumber"}, "%s: not a World object: %r" % (what, o))
    check(isinstance(o["id"], int) and 1 <= o["id"] <= 10000, "%s: id %r" % (what, o["id"]))
    check(isinstance(o["randomNumber"], int) and 1 <= o["randomNumber"] <= 10000,
          "%s: randomNumber %r" % (what, o["randomNumber"]))
    return o["id"], o["randomNumber"]


# --- /json, /plaintext ------------------------------------------------------
b = fetch("/json", "application/json")
check(json.loads(b) == {"message": "Hello, World!"}, "/json: %r" % b)
check(b == b'{"message":"Hello, World!"}', "/json: %r" % b)
b = fetch("/plaintext", "text/plain")
check(b == b"Hello, World!", "/plaintext: %r" % b)
c = Conn()
c.send(request("GET", "/plaintext") * 16)
for i in range(16):
    r = c.read_response()
    check(r.status == 200 and r.body == b"Hello, World!", "pipelined /plaintext %d: %r" % (i, r))
c.close()
ok("/json and /plaintext: bodies, Server, Date, Content-Length, Content-Type; 16 pipelined")

# --- /db ------------------------------------------------------------------------
ids = set()
for i in range(50):
    o = json.loads(fetch("/db", "application/json"))
    wid, rn = world(o, "/db")
    check(rn == pattern(wid), "/db: id %d has randomNumber %d in the database, got %d" % (wid, pattern(wid), rn))
    ids.add(wid)
check(len(ids) > 40, "/db: 50 requests gave only %d distinct ids: not random" % len(ids))
ok("/db: a World object with the database's number, random ids (%d distinct of 50)" % len(ids))

# --- the count of /queries, /updates, /cached-queries -----------------------------
cases = [("", 1), ("?queries=", 1), ("?queries=foo", 1), ("?queries=0", 1), ("?queries=-3", 1),
         ("?queries=1.5", 1), ("?queries=7abc", 1), ("?queries=1", 1), ("?queries=2", 2),
         ("?queries=20", 20), ("?queries=500", 500), ("?queries=501", 500),
         ("?queries=99999999999999999999", 500)]


def rows(path, name, q):
    out = json.loads(fetch(path + q.replace("queries", name), "application/json"))
    check(isinstance(out, list), "%s%s: not an array: %r" % (path, q, out))
    return [world(o, path + q) for o in out]


for q, n in cases:
    got = rows("/queries", "queries", q)
    check(len(got) == n, "/queries%s: %d rows, want %d" % (q, len(got), n))
    for wid, rn in got:
        check(rn == pattern(wid), "/queries%s: id %d: %d, the database has %d" % (q, wid, rn, pattern(wid)))
ok("/queries: N rows of the database for %d values of N (missing, empty, not an integer, < 1: 1; > 500: 500)"
   % len(cases))

# --- /cached-queries: from the database, then from the cache -------------------------
sql("UPDATE world SET randomnumber = 1")
seen = {}  # ids 1..50: not in the cache at first, read through (from the table as it is now: 1)
for q, n in cases:
    got = rows("/cached-queries", "count", q)
    check(len(got) == n, "/cached-queries%s: %d rows, want %d" % (q, len(got), n))
    for wid, rn in got:
        if wid <= 50:
            seen[wid] = seen.get(wid, 0) + 1
            check(rn == 1, "/cached-queries%s: id %d: %d, not read through (1)" % (q, wid, rn))
            continue
        check(rn == pattern(wid), "/cached-queries%s: id %d: %d, not the number the cache was filled "
              "with (%d)" % (q, wid, rn, pattern(wid)))
o = json.loads(fetch("/db", "application/json"))
check(o["randomNumber"] == 1, "/db after the change: %r" % o)


def metric(name):
    c = Conn(int(os.environ["ADMIN_PORT"]))
    c.send(request("GET", "/metrics"))
    body = c.read_response().body.decode()
    c.close()
    m = re.search(r"^%s (\d+)$" % name, body, re.M)
    check(m, "/metrics: no %s" % name)
    return int(m.group(1))


# rows 1..50 were not there at start-up: read through, each loaded once
# however many requests want it.  500 random ids of 10,000 a request: after
# 40 requests a row has come up with p = 0.86 (about 43 of the 50, and 40
# or fewer one time in ten), after 80 with p = 0.98: requests go on until
# more than 40 have come up, 200 at most
for i in range(200):
    if i >= 40 and len(seen) > 40:
        break
    got = rows("/cached-queries", "count", "?queries=500")
    for wid, rn in got:
        want = 1 if wid <= 50 else pattern(wid)
        check(rn == want, "/cached-queries: id %d: %d, want %d" % (wid, rn, want))
        if wid <= 50:
            seen[wid] = seen.get(wid, 0) + 1
loads, misses = metric("petrel_cache_loads_total"), metric("petrel_cache_misses_total")
check(len(seen) > 40, "/cached-queries: only %d of the 50 rows read through came up" % len(seen))
check(loads == len(seen), "/cached-queries: %d loads for %d rows read through (each once)" % (loads, len(seen)))
check(misses >= loads, "/cached-queries: %d misses for %d loads" % (misses, loads))
check(metric("petrel_cache_entries") == 9950 + len(seen), "petrel_cache_entries %d, want %d"
      % (metric("petrel_cache_entries"), 9950 + len(seen)))
ok("/cached-queries: %d rows missing at start-up read through (asked for %d times), each loaded once "
   "(petrel_cache_loads_total); the cache holds them since" % (len(seen), sum(seen.values())))
ok("/cached-queries: the numbers the database had at start-up, from the cache (the table changed since); "
   "the same rules for count")

# --- /fortunes: the benchmark's page, byte for byte ------------------------------
want = ("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th>"
        "<th>message</th></tr>"
        "<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert "
        "box.&quot;);&lt;/script&gt;</td></tr>"
        "<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>"
        "<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do."
        "</td></tr>"
        "<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t broken."
        "</td></tr>"
        "<tr><td>8</td><td>A list is only as strong as its weakest link. \u2014 Donald Knuth</td></tr>"
        "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>"
        "<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>"
        "<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>"
        "<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>"
        "<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"
        "</td></tr>"
        "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>"
        "<tr><td>1</td><td>fortune: No such file or directory</td></tr>"
        "<tr><td>12</td><td>\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc"
        "\u30af</td></tr>"
        "</table></body></html>").encode("utf-8")
b = fetch("/fortunes", "text/html; charset=utf-8")
check(b == want, "/fortunes:\n got %r\nwant %r" % (b, want))
# a fortune added to the table shows up, escaped, in its place
sql("INSERT INTO fortune VALUES (13, 'B & <b>\"q\"</b> ''s')")
b = fetch("/fortunes", "text/html; charset=utf-8")
check(b"<tr><td>13</td><td>B &amp; &lt;b&gt;&quot;q&quot;&lt;/b&gt; &#39;s</td></tr><tr><td>10</td>" in b,
      "/fortunes with a 13th fortune: %r" % b)
sql("DELETE FROM fortune WHERE id = 13")
ok("/fortunes: the benchmark's page byte for byte (sorted, the extra fortune, escaped, UTF-8); a new row "
   "read at request time")

# --- /updates: written, read and written as the benchmark counts -------------------
sql("SELECT pg_stat_statements_reset()")
total = 0
written = 0
repeats = 0
for q, n in cases:
    got = rows("/updates", "queries", q)
    check(len(got) == n, "/updates%s: %d rows, want %d" % (q, len(got), n))
    shown = {}
    for wid, rn in got:
        check(shown.setdefault(wid, rn) == rn, "/updates%s: id %d shows %d and %d" % (q, wid, shown[wid], rn))
    repeats += n - len(shown)
    idl = ",".join(str(wid) for wid in shown)
    db = dict(tuple(map(int, ln.split("|"))) for ln in
              sql("SELECT id, randomnumber FROM world WHERE id IN (%s)" % idl).split("\n"))
    for wid, rn in shown.items():
        check(db[wid] == rn, "/updates%s: id %d is %d in the database, the response says %d"
              % (q, wid, db[wid], rn))
    total += n
    written += len(shown)
check(repeats > 0, "/updates: no id came twice in %d rows: not drawn as for /queries" % total)
# as the benchmark's verifier counts: statements on world matching "select"
# are reads, those matching "update" writes (but for this test's own
# reading back, WHERE id IN)
reads = sql("SELECT coalesce(sum(calls), 0) || '|' || coalesce(sum(rows), 0) FROM pg_stat_statements "
            "WHERE query ~* 'world' AND query ~* 'select' AND query NOT LIKE '%WHERE id IN%'")
check(reads == "%d|%d" % (total, total), "/updates: reads (calls|rows of statements matching select) "
      "%r, want %d|%d: one SELECT a row" % (reads, total, total))
writes = sql("SELECT coalesce(sum(calls), 0) || '|' || coalesce(sum(rows), 0) FROM pg_stat_statements "
             "WHERE query ~* 'world' AND query ~* 'update'")
check(writes == "%d|%d" % (len(cases), written), "/updates: writes (calls|rows of statements matching "
      "update) %r, want %d|%d: one UPDATE a request, each id once" % (writes, len(cases), written))
both = sql("SELECT count(*) FROM pg_stat_statements WHERE query ~* 'update' AND query ~* 'select'")
check(both == "0", "/updates: %s statements match both update and select (counted as reads)" % both)
ok("/updates: %d rows in %d requests (%d ids drawn twice): written (read back), each row read by a "
   "SELECT of its own, one UPDATE a request writing each id once, no select in it (pg_stat_statements)"
   % (total, len(cases), repeats))
EOF

petrel_stop
