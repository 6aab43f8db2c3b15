#!/usr/bin/env bash
# The database killed under load: PostgreSQL's immediate shutdown (SIGQUIT:
# every backend exits at once, as in a crash) while petrel-bench keeps 16
# connections busy on /db and /queries.  petrel must not crash or hang: the
# queries in flight fail with 503 (counted by the client), the lost
# connections are logged, new requests get 503 while the server is down,
# and once it is back the pool reconnects and every request succeeds
# again, in the same worker process.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs bench
pg_setup
pg_start
pg_tfb
petrel_start --workers 1 --access-log "$LIB_TMP/access.log" --module tfb:"pool.reconnect_max_ms=300 host=$PGHOST port=$PGPORT dbname=hello_world user=postgres"
worker=$(petrel_worker)
T=$LIB_TMP

commits() { psql_ -d postgres -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'hello_world'"; }
"$BENCH" -c 16 -d "$(bound 8)s" --json "$BASE/db" >"$T/db.json" 2>"$T/db.err" &
b1=$!
LIB_BG+=("$b1")
"$BENCH" -c 4 -d "$(bound 8)s" --json "$BASE/queries?queries=20" >"$T/q.json" 2>"$T/q.err" &
b2=$!
LIB_BG+=("$b2")
c0=$(commits)
busy() { (($(commits) > c0 + 2000)); }
wait_for "$(bound 10)" busy
pg_crash
ok "postgres killed (immediate shutdown) under load"
down() { [[ $(curl -q -s --noproxy '*' -o /dev/null -w '%{http_code}' "$BASE/db") == 503 ]]; }
wait_for "$(bound 5)" down
lib_alive "$worker" || fail "the worker died with the database"
pg_start
up() { [[ $(curl -q -s --noproxy '*' -o /dev/null -w '%{http_code}' "$BASE/db") == 200 ]]; }
wait_for "$(bound 10)" up
wait "$b1" || fail "petrel-bench /db: exit status $?: $(cat "$T/db.err")"
wait "$b2" || fail "petrel-bench /queries: exit status $?: $(cat "$T/q.err")"
pyrun "$T/db.json" "$T/q.json" <<'PY'
import json
import sys
from petrel_client import *
for f in sys.argv[1:3]:
    j = json.load(open(f))
    e = j["errors"]
    check(j["requests"] > 0, "%s: no request succeeded: %r" % (f, j))
    check(e["non2xx"] > 0, "%s: no request failed while the database was down: %r" % (f, e))
    check(e["timeout"] == 0 and e["read"] == 0 and e["connect"] == 0 and e["protocol"] == 0,
          "%s: errors other than statuses: %r" % (f, e))
    ok("%s: %d responses 2xx, %d not (503 while the database was down), no timeout, no connection error"
       % (f.rsplit("/", 1)[1], j["requests"], e["non2xx"]))
PY
expect_eq "$(petrel_worker)" "$worker" "the worker (not restarted)"
n503=$(grep -c '" 503 ' "$LIB_TMP/access.log" || true)
n500=$(grep -c '" 500 ' "$LIB_TMP/access.log" || true)
((n503 > 0)) || fail "no 503 in the access log"
expect_eq "$n500" 0 "responses 500 while the database was away (want 503: it is not the request's fault)"
ok "the failed requests were answered 503 ($n503 of them), none 500"
grep -q "pg: connection [0-9]* lost" "$PETREL_ERR" || fail "no 'connection lost' log line"
for path in /db "/queries?queries=20" /fortunes "/updates?queries=20"; do
    curl_ -D "$T/h" -o "$T/b" "$BASE$path"
    expect_eq "$(status_of "$T/h")" 200 "GET $path after the recovery"
done
ok "recovery: every type answers 200 again in the same worker; the lost connections were logged"
petrel_stop
