#!/usr/bin/env bash
# The pool's limits and errors:
#  - every connection busy and the queue full: 503 with Retry-After (the
#    pool's retry_after) at once, while the queries taken still complete;
#  - an SQL error: 500, and one error log line with the SQLSTATE, the
#    message and the request's id;
#  - bad settings refuse petrel at start-up, naming them: an unknown
#    pool.* setting, a number out of range, a connection string libpq
#    cannot parse.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"
. "$(dirname "$0")/mod_lib.sh"

pg_needs cc
pg_setup
pg_start
pg_module "$LIB_TMP"
petrel_start --workers 1 \
    --dev --module "$LIB_TMP/pgtest.c:pool.connections=1 pool.depth=1 pool.queue=1 pool.retry_after=7 host=$PGHOST port=$PGPORT dbname=postgres user=postgres"

pyrun <<'PY'
import time
from petrel_client import *

# one connection of depth 1 runs a, b waits in the queue (of 1): c is refused
a, b = Conn(), Conn()
a.send(request("GET", "/sleep?s=1.5"))
time.sleep(0.3)  # a reaches the connection first
b.send(request("GET", "/sleep?s=0"))
wait_server_read(b)
t0 = time.monotonic()
r = get("/one")
dt = time.monotonic() - t0
check(r.status == 503, "a third request with the connection and the queue full: %r" % r)
check(r.header("retry-after") == "7", "Retry-After: %r" % r.header("retry-after"))
check(dt < bound(1), "the 503 took %.2fs" % dt)
ra, rb = a.read_response(), b.read_response()
check(ra.status == 200 and ra.body == b"slept", "the running request: %r" % ra)
check(rb.status == 200 and rb.body == b"slept", "the queued request: %r" % rb)
ok("connection and queue full: 503 with Retry-After: 7 after %.3fs; the running and the queued "
   "requests complete (200)" % dt)
r = get("/one")
check(r.status == 200 and r.body == b"1", "afterwards: %r" % r)
ok("then the pool takes queries again")

PY

n0=$(grep -c "SQLSTATE" "$PETREL_ERR" || true)
curl_ -D "$LIB_TMP/h" -o "$LIB_TMP/b" "$BASE/sql/bad"
expect_eq "$(status_of "$LIB_TMP/h")" 500 "GET /sql/bad (no such table)"
more() { (($(grep -c "SQLSTATE" "$PETREL_ERR") > n0)); }
wait_for "$(bound 5)" more
n=$(grep -c "SQLSTATE" "$PETREL_ERR")
expect_eq "$((n - n0))" 1 "error log lines with an SQLSTATE for one failed request"
line=$(grep "SQLSTATE" "$PETREL_ERR" | tail -n 1)
expect_match "$line" '\[error\] .*request [0-9]+ GET /sql/bad: query failed: SQLSTATE 42P01: relation "no_such_table" does not exist' "the log line"
ok "an SQL error: 500 and one log line: ${line#*] }"
petrel_stop

# --- one connection: a failing query fails alone -----------------------------------
petrel_start --workers 1 \
    --dev --module "$LIB_TMP/pgtest.c:pool.connections=1 host=$PGHOST port=$PGPORT dbname=postgres user=postgres"
pyrun <<'PY'
from petrel_client import *
# the queries of four requests in flight together on the one connection,
# each its own transaction: the failing one fails alone
c = Conn()
c.send(request("GET", "/one") + request("GET", "/sql/bad") + request("GET", "/one") +
       request("GET", "/sleep?s=0"))
got = [c.read_response() for _ in range(4)]
check([r.status for r in got] == [200, 500, 200, 200], "pipelined good, bad, good: %r" % got)
check(got[0].body == b"1" and got[2].body == b"1" and got[3].body == b"slept", "bodies: %r" % got)
c.close()
ok("a failing query in flight with other requests' queries on one connection: 500 for it, "
   "200 for the others")
PY
petrel_stop

# --- bad settings: refused at start-up ----------------------------------------------
expect_refused "unknown pool setting 'pool.bogus'" --module "tfb:pool.bogus=1 host=$PGHOST"
expect_refused "pool.connections: '0' is not a number" --module "tfb:pool.connections=0"
expect_refused "pool.depth: 'x' is not a number" --module "tfb:pool.depth=x"
expect_refused 'invalid connection string: invalid connection option "bogus"' --module "tfb:bogus=1"
ok "bad pool settings and connection strings are refused at start-up, named"
