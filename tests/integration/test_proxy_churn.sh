#!/usr/bin/env bash
# The proxy under churn: timed load runs that end with every connection
# closed while its proxied requests are in flight (the client aborts them,
# their calls are cancelled and their upstream connections closed), many
# in one loop turn.  An event the loop had taken for an upstream
# connection that an earlier event of the same turn closed once closed it
# a second time and corrupted the free list: the worker crashed in a later
# run (about one run in three), and under the sanitizers leaked the
# connections.  After the runs: the worker never crashed, the proxy still
# answers, and once idle its upstream connections are all idle ones.
. "$(dirname "$0")/lib.sh"
bench_needs

petrel_start --module hello
UPORT=$PORT
UPID=$PETREL_PID
petrel_start --workers 1 --admin-listen 127.0.0.1:0 --module "proxy:/=http://127.0.0.1:$UPORT"
ADMIN=$(petrel_admin_port)
for i in $(seq 10); do
    "$BENCH" -c 64 -d 0.5s "$BASE/hello" >"$LIB_TMP/bench.$i" 2>&1 ||
        fail "petrel-bench run $i: $(tail -n 5 "$LIB_TMP/bench.$i")"
done
! grep -q "killed by signal" "$PETREL_ERR" ||
    fail "the proxy's worker crashed under churn: $(grep "killed by signal" "$PETREL_ERR" | head -n 3)"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "GET /hello through the proxy after the runs"
metric() {
    curl_ "http://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" '$1 ~ "^"m"[{]" { s += $2 } END { print s + 0 }'
}
idle_all() {
    [[ $(metric petrel_upstream_connections) == "$(metric petrel_upstream_idle_connections)" ]]
}
wait_for "$(bound 5)" idle_all
open=$(metric petrel_upstream_connections)
((open >= 1 && open <= 64)) || fail "petrel_upstream_connections $open after the runs (1 to 64: max_conns)"
ok "10 timed runs of 64 connections ended mid-request: no crash, the proxy answers, $open upstream connection(s), all idle"
proxy=$PETREL_PID
petrel_stop "$proxy"
! grep -q "exited with status" "$PETREL_ERR" ||
    fail "the proxy's worker did not exit cleanly: $(grep "exited with status" "$PETREL_ERR" | head -n 3)"
fault_sanitizer_check
petrel_stop "$UPID"
ok "the proxy stopped cleanly after them (no sanitizer report)"

