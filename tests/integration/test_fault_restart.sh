#!/usr/bin/env bash
# test_fault_restart.sh -- the restart policy (petrel(1), --restart-limit):
#   1. a module whose worker_init crashes: each worker is restarted after
#      0.5 s, then 1 s (doubling), and at --restart-limit 3 failures in a
#      row petrel stops with status 1, saying so; it never said it was
#      listening, since no worker ever was;
#   2. a worker that served, then crashes on a request, is restarted however
#      often it happens: three crashes with --restart-limit 2 leave petrel
#      serving (a request that crashes its worker must not stop the
#      instance);
#   3. --admin-listen, two workers: while one of them cannot start (its
#      worker_init crashes, it waits out its backoff), /readyz answers 503
#      "1 of 2 workers serving" and petrel_workers is 1, and new
#      connections are all answered by the other worker, also while the
#      slot tries again and crashes (the waiting slot's listening sockets
#      are closed, a worker listens once it started); once it starts again, /readyz
#      answers 200.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"

src=$LIB_TMP/wi.c
cat >"$src" <<'EOF'
#include <petrel.h>
#include <stdlib.h>
#include <unistd.h>

static int segv(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return *(volatile int *)0;
}

static int hello(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", "hello", 5);
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    const char *flag = getenv("WI_CRASH_IF");
    if (getenv("WI_CRASH") || (flag && access(flag, F_OK) == 0))
        *(volatile int *)0 = 1;
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/segv", segv, NULL},
    {PETREL_GET, "/hello", hello, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(wi, routes, NULL, worker_init, NULL)
EOF
so=$LIB_TMP/wi.so
cc -shared -fPIC -g -I"$top_srcdir/include" -o "$so" "$src"

# --- 1. worker_init crashes at start-up ---------------------------------------------
err=$LIB_TMP/start.err
rc=0
t0=$(now)
WI_CRASH=1 timeout -k 2 "$(bound 20)" "$PETREL" --listen 127.0.0.1:0 --module "$so" \
    --workers 2 --restart-limit 3 >/dev/null 2>"$err" </dev/null || rc=$?
took=$(secs_since "$t0")
[[ $rc -eq 1 ]] || fail "worker_init crashes: exit status $rc, want 1: $(cat "$err")"
for w in 0 1; do
    n=$(grep -c "worker $w (pid [0-9]*) killed by signal 11 (SIGSEGV) in module 'wi' worker_init, at address 0x0, code in wi.so+0x" "$err" || true)
    [[ $n -ge 1 && $n -le 3 ]] || fail "worker $w: $n crash lines, want 1 to 3: $(cat "$err")"
done
grep -q "worker [01]: restarting it in 0.5 s (failure 1 of 3)" "$err" || fail "no first backoff: $(cat "$err")"
grep -q "worker [01]: restarting it in 1.0 s (failure 2 of 3)" "$err" || fail "no doubled backoff: $(cat "$err")"
grep -q "worker [01] failed to start 3 times in a row (--restart-limit): giving up, stopping" "$err" ||
    fail "no 'giving up': $(cat "$err")"
! grep -q "listening on" "$err" || fail "it said it was listening: $(grep "listening on" "$err")"
fcmp "$took >= 1.4" || fail "gave up after ${took}s: the backoff (0.5 s, then 1 s) was not waited"
ok "worker_init crashes: restarted after 0.5 s then 1 s, gave up at the third failure with status 1 after ${took}s, never 'listening'"

# --- 2. crashes of a worker that served do not stop petrel ---------------------------
petrel_start --module "$so" --workers 1 --restart-limit 2
master=$PETREL_PID
crashes_at_least() {
    [[ $(grep -c "killed by signal 11" "$PETREL_ERR") -ge $1 ]]
}
hello_served() {
    [[ $(curl_ "$BASE/hello" 2>/dev/null) == hello ]]
}
for i in 1 2 3; do
    curl -q -s --noproxy '*' --max-time "$(bound 10)" "$BASE/segv" >/dev/null || true
    wait_for "$(bound 10)" crashes_at_least "$i"
    # the restarted worker serves (it may take a second: no spinning)
    wait_for "$(bound 10)" hello_served
done
lib_alive "$master" || fail "petrel stopped after three crashes of a serving worker"
! grep -q "giving up" "$PETREL_ERR" || fail "$(grep "giving up" "$PETREL_ERR")"
ok "three crashes of a worker that served, --restart-limit 2: still serving"
petrel_stop "$master"

# --- 3. /readyz while a worker cannot start ---------------------------------------------
flag=$LIB_TMP/crash-now
WI_CRASH_IF=$flag petrel_start --module "$so" --workers 2 --restart-limit 100 \
    --admin-listen 127.0.0.1:0
master=$PETREL_PID
ADMIN=$(petrel_admin_port)
wait_for "$(bound 10)" nworkers 2
readyz() {
    curl_ -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN/readyz"
}
readyz_is() {
    [[ $(readyz) == "$1" ]]
}
wait_for "$(bound 10)" readyz_is 200
touch "$flag"
victim=$(petrel_workers | head -n 1)
kill -KILL "$victim"
wait_for "$(bound 10)" grep -q "worker [01]: restarting it in 1.0 s (failure 2 of 100)" "$PETREL_ERR"
body=$(curl_ "http://127.0.0.1:$ADMIN/readyz")
[[ $(readyz) == 503 && $body == *"1 of 2 workers serving"* ]] ||
    fail "/readyz while a worker cannot start: $(readyz) $body"
workers=$(curl_ "http://127.0.0.1:$ADMIN/metrics" | awk '$1 == "petrel_workers" { print $2 }')
[[ $workers == 1 ]] || fail "petrel_workers $workers while one cannot start"
ok "a worker that cannot start: /readyz 503 '$body', petrel_workers 1"
# its listening sockets are closed while it waits, and a worker listens
# only once its worker_init succeeded: every new connection goes to the
# worker that serves, none waits in a queue nobody accepts from -- also
# while the slot's next try starts and crashes (the requests go on until
# two more tries have failed)
i=0
until [[ $i -ge 20 ]] && grep -q "failure 4 of 100" "$PETREL_ERR"; do
    i=$((i + 1))
    [[ $i -le 2000 ]] || fail "the fourth try of the worker that cannot start never came"
    [[ $(curl -q -sS --noproxy '*' --max-time "$(bound 2)" "$BASE/hello") == hello ]] ||
        fail "request $i while a worker cannot start: not answered within $(bound 2) s"
done
ok "$i new connections while a worker cannot start and twice more tries to: all answered at once by the other"
rm -f "$flag"
wait_for "$(bound 20)" readyz_is 200
ok "it started again: /readyz 200"
petrel_stop "$master"
