#!/usr/bin/env bash
# The pool's transactions (petrel.h, petrel_pg_t): every query is a
# transaction of its own, and queries of different requests never share
# one; petrel_pg_tx_begin() makes one of several queries.
#  - a unique violation in one request while 100 others insert at the same
#    time, on the same two connections: 500 for it, 200 and its row for
#    every other, and each INSERT ran exactly once (pg_stat_statements:
#    calls and rows; a shared transaction that was rolled back and run
#    again would count more);
#  - a transaction of two INSERTs whose second fails: 500, neither row;
#    one whose two succeed: both rows; each statement ran once;
#  - transactions per statement under concurrent load: the delta of
#    pg_stat_database.xact_commit of the database over a run of /db,
#    /queries?queries=N and /swap (three statements in one transaction)
#    requests from 16 clients at once is one per /db or /queries statement
#    and one per /swap, beyond what a run without requests commits (the
#    backends report their counts when they exit: petrel is stopped
#    before each count is read).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs cc
pg_setup
pg_needs pgss
PG_OPTS=(-c autovacuum=off) # no commits but petrel's in hello_world
pg_start
pg_tfb
psql_ -c "CREATE TABLE uniq (k int PRIMARY KEY)" -c "INSERT INTO uniq VALUES (0)" \
    -c "CREATE TABLE swap (id int PRIMARY KEY, v int NOT NULL)" \
    -c "INSERT INTO swap SELECT x, 0 FROM generate_series(0, 31) AS x"
psql_ -d postgres -c "CREATE EXTENSION pg_stat_statements"
pg_module "$LIB_TMP"
start() {
    petrel_start --workers 1 \
        --module tfb:"pool.connections=2 host=$PGHOST port=$PGPORT dbname=hello_world user=postgres" \
        --dev --module "$LIB_TMP/pgtest.c:pool.connections=2 host=$PGHOST port=$PGPORT dbname=hello_world user=postgres"
}
# the counts are read from the database postgres: hello_world commits
# only petrel's transactions
pq() { psql_ -d postgres -c "$1"; }
commits() { pq "SELECT xact_commit FROM pg_stat_database WHERE datname = 'hello_world'"; }
backends() { pq "SELECT count(*) FROM pg_stat_activity WHERE datname = 'hello_world'"; }
no_backends() { [[ $(backends) == 0 ]]; }
# stop petrel; wait until its backends have gone and their counts are in
stop_and_settle() {
    petrel_stop
    wait_for "$(bound 20)" no_backends
    local a b t0=$EPOCHREALTIME
    a=$(commits)
    while :; do
        sleep 0.5
        b=$(commits)
        [[ $a == "$b" ]] && break
        a=$b
        fcmp "$(secs_since "$t0") < $(bound 20)" || fail "xact_commit still moving after $(bound 20)s"
    done
    SETTLED=$b
}
# the tfb module reads World at start-up (its cache): the Nth start has
# when this many such statements have run
fills() { pq "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%FROM world%' AND query NOT LIKE '%WHERE%'"; }
fills_reach() { (($(fills) >= $1)); }
wait_fills() { wait_for "$(bound 20)" fills_reach "$1"; }

# --- a run without requests: what petrel commits by itself -------------------------
pq "SELECT pg_stat_statements_reset()" >/dev/null
a0=$(commits)
start
wait_fills 1
stop_and_settle
base=$((SETTLED - a0))
ok "petrel started and stopped without requests: $base transactions in hello_world"

# --- a run with requests --------------------------------------------------------------
a1=$SETTLED
start
wait_fills 2
pq "SELECT pg_stat_statements_reset()" >/dev/null
pyrun >"$LIB_TMP/load.out" <<'PY'
import json
import random
import threading
from petrel_client import *

# --- one unique violation among 101 concurrent INSERTs -----------------------------
got = {}
bar = threading.Barrier(101)


def ins(k):
    c = Conn()
    bar.wait()
    c.send(request("GET", "/ins?k=%d" % k))
    got[k] = c.read_response()
    c.close()


t = [threading.Thread(target=ins, args=(k,)) for k in range(101)]
for x in t:
    x.start()
for x in t:
    x.join()
check(got[0].status == 500, "the duplicate key: %r" % got[0])
for k in range(1, 101):
    check(got[k].status == 200 and got[k].body == str(k).encode(), "/ins?k=%d: %r" % (k, got[k]))
ok("a duplicate key among 101 concurrent INSERTs: 500 for it, 200 and its key for the 100 others")

r = get("/txins?a=5000&b=0")
check(r.status == 500, "a transaction whose second INSERT fails: %r" % r)
r = get("/txins?a=5001&b=5002")
check(r.status == 200 and r.body == b"inserted", "a transaction of two good INSERTs: %r" % r)
ok("transactions: one whose second statement fails answers 500, one of two good ones 200")

# --- the load: 16 clients, /db, /queries and /swap ----------------------------------
lock = threading.Lock()
count = {"stmts": 0, "world": 0, "swaps": 0}


def client(i):
    c = Conn()
    rnd = random.Random(i)
    for j in range(12):
        x = rnd.randrange(3)
        if x == 0:
            path, n, tx = "/db", 1, 0
        elif x == 1:
            n = rnd.randint(1, 20)
            path, tx = "/queries?queries=%d" % n, 0
        else:
            path, n, tx = "/swap?a=%d&b=%d" % (2 * i, 2 * i + 1), 0, 1
        c.send(request("GET", path))
        r = c.read_response()
        check(r.status == 200, "%s: %r" % (path, r))
        if n:
            rows = json.loads(r.body)
            check(len(rows if isinstance(rows, list) else [rows]) == n, "%s: %r" % (path, r.body))
        with lock:
            count["stmts"] += n
            count["world"] += n
            count["swaps"] += tx
    c.close()


t = [threading.Thread(target=client, args=(i,)) for i in range(16)]
for x in t:
    x.start()
for x in t:
    x.join()
print("LOAD %d %d %d" % (count["stmts"], count["world"], count["swaps"]))
ok("16 clients: %d World statements, %d /swap transactions of 3 statements, all 200"
   % (count["world"], count["swaps"]))
PY
cat "$LIB_TMP/load.out" | grep -v '^LOAD'
read -r _ stmts world swaps < <(grep '^LOAD' "$LIB_TMP/load.out")

# each INSERT once: the 100 good ones, the failing one is not counted (it
# did not finish); the transactions' statements once each
st=$(pq "SELECT calls || '|' || rows FROM pg_stat_statements WHERE query = 'INSERT INTO uniq (k) VALUES (\$1::int) RETURNING k'")
expect_eq "$st" "100|100" "INSERT ... RETURNING k: calls|rows (each of the 100 good ones once)"
st=$(pq "SELECT calls FROM pg_stat_statements WHERE query = 'INSERT INTO uniq (k) VALUES (\$1::int)'")
expect_eq "$st" 3 "the INSERTs of the two transactions that finished (5000, then 5001 and 5002)"
ok "each INSERT ran exactly once (pg_stat_statements)"
n=$(pq "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'SELECT id, randomnumber FROM world WHERE%'")
expect_eq "$n" "$world" "World statements run (pg_stat_statements), for the requests' $world"

stop_and_settle
# the requests' transactions: 100 INSERTs, the good transaction, the load
want=$((base + 100 + 1 + stmts + swaps))
got=$((SETTLED - a1))
expect_eq "$got" "$want" "transactions committed in hello_world (base $base + 101 + $stmts statements + $swaps /swap)"
ok "$stmts statements of /db and /queries from 16 concurrent clients: $stmts transactions, and one for each of $swaps /swap transactions of 3 statements (xact_commit)"
# (read after the count: a session of psql in hello_world commits too)
expect_eq "$(psql_ -c "SELECT count(*), count(*) FILTER (WHERE k >= 5000) FROM uniq")" "103|2" \
    "uniq: 0..100, 5001, 5002 (5000 rolled back)"
ok "the rows: one for each good INSERT, none of the failed transaction"
