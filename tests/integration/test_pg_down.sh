#!/usr/bin/env bash
# The database down when petrel starts: petrel starts and serves what needs
# no database, a request that needs it gets 503 with Retry-After at once
# (not a hang, not a 500), the outage is logged once, and serving resumes by
# itself once the server comes up (the pool reconnects with backoff, never
# blocking the worker: /json keeps answering meanwhile).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_setup
PG_PORT=$(free_port)
petrel_start --module tfb:"pool.reconnect_max_ms=300 host=$PG_DIR/sock port=$PG_PORT dbname=hello_world user=postgres"
T=$LIB_TMP

for path in /db "/queries?queries=20" /fortunes "/updates?queries=5"; do
    t0=$EPOCHREALTIME
    curl_ -D "$T/h" -o "$T/b" "$BASE$path"
    expect_eq "$(status_of "$T/h")" 503 "GET $path with the database down"
    expect_eq "$(header_value "$T/h" Retry-After)" 1 "Retry-After of GET $path"
    fcmp "$(secs_since "$t0") < $(bound 2)" || fail "GET $path took $(secs_since "$t0")s to fail"
done
curl_ -o "$T/b" "$BASE/json"
expect_eq "$(cat "$T/b")" '{"message":"Hello, World!"}' "GET /json while the database is down"
wait_for "$(bound 5)" grep -q "pg: the database is unavailable" "$PETREL_ERR"
n=$(grep -c "pg: the database is unavailable" "$PETREL_ERR")
ok "database down: petrel serves, 503 + Retry-After: 1 at once for the database's types, $n log line(s) for the outage"

pg_start
pg_tfb
t0=$EPOCHREALTIME
up() { [[ $(curl -q -s --noproxy '*' -o /dev/null -w '%{http_code}' "$BASE/db") == 200 ]]; }
wait_for "$(bound 10)" up
ok "the database came up: /db answers 200 after $(secs_since "$t0")s"
for path in "/queries?queries=20" /fortunes "/updates?queries=5" "/cached-queries?count=5"; do
    curl_ -D "$T/h" -o "$T/b" "$BASE$path"
    expect_eq "$(status_of "$T/h")" 200 "GET $path once the database is up"
done
grep -q "pg: the database is available again" "$PETREL_ERR" || fail "no log line for the recovery"
# with the database down the cache could not be filled: the misses read it
# through, and /cached-queries answers as soon as the database is back
ok "every type answers once the database is up; the recovery is logged"

petrel_stop
