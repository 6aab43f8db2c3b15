#!/usr/bin/env bash
# A deadlock between two requests' transactions is cured by the pool,
# unseen: request 1 adds 1 to row 1, pauses, adds 1 to row 2, in one
# transaction (petrel_pg_tx_begin); request 2 does rows 2 then 1, at the
# same time, on the other connection.  PostgreSQL aborts
# one of the two transactions (SQLSTATE 40P01, "deadlock detected"); the
# pool runs that transaction again (petrel.h, petrel_pg_t: 40001 and 40P01 are
# run again, twice at most), so both requests answer 200, each row is
# added to exactly twice (both batches committed once), and no query
# error is logged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs cc
pg_setup
pg_start
psql_ -d postgres -c "CREATE TABLE swap (id int PRIMARY KEY, v int NOT NULL)" \
    -c "INSERT INTO swap VALUES (1, 0), (2, 0)"
pg_module "$LIB_TMP"
petrel_start --workers 1 \
    --dev --module "$LIB_TMP/pgtest.c:pool.connections=2 host=$PGHOST port=$PGPORT dbname=postgres user=postgres"

pyrun <<'PY'
import threading
from petrel_client import *

got = {}


def ask(i, path):
    got[i] = get(path)


t = [threading.Thread(target=ask, args=(1, "/swap?a=1&b=2")),
     threading.Thread(target=ask, args=(2, "/swap?a=2&b=1"))]
for x in t:
    x.start()
for x in t:
    x.join()
for i in (1, 2):
    check(got[i].status == 200 and got[i].body == b"swapped", "request %d: %r" % (i, got[i]))
ok("two requests whose batches lock two rows in opposite orders: both 200")
PY

expect_eq "$(psql_ -d postgres -c "SELECT string_agg(v::text, ',' ORDER BY id) FROM swap")" "2,2" \
    "the rows after the two requests"
grep -q "deadlock detected" "$PG_LOG" ||
    fail "PostgreSQL logged no deadlock: the test did not make one (timing?)"
if grep -E "SQLSTATE" "$PETREL_ERR"; then
    fail "the deadlock reached the log as a query error: it was not run again"
fi
ok "PostgreSQL saw the deadlock and aborted one transaction; the pool ran it again: each row +2, no error logged"
petrel_stop
