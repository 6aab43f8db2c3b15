#!/usr/bin/env bash
# test_fault_handler.sh -- a handler that crashes or never returns ("When a
# handler goes wrong" in the module guide; petrel(1), --watchdog-timeout):
#   1. a handler that dereferences NULL: the master's log line names the
#      request (id, method, path), its route pattern and module, the
#      faulting address and the module the code at fault belongs to; a new
#      worker serves; /metrics counts the crash;
#   2. a handler that loops for ever, two workers, --watchdog-timeout 2:
#      within the timeout and a second and a half the log names the request
#      the worker was stuck in and says it was killed (SIGABRT) and
#      restarted; every one of 40 new connections made while the worker was
#      stuck is answered (the connections queued on the stuck worker's
#      listening socket are its successor's: no loss, with or without the
#      kernel's tcp_migrate_req); /metrics counts the kill;
#   3. --watchdog-timeout 0: no watchdog, the stuck worker stays.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"

src=$LIB_TMP/faulty.c
cat >"$src" <<'EOF'
#include <petrel.h>
#include <string.h>

static int hello(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", "hello", 5);
}

static int segv(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return *(volatile int *)0;
}

static int spin(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    for (volatile unsigned long i = 0;; i++)
        ;
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/hello", hello, NULL},
    {PETREL_GET, "/segv/:id", segv, NULL},
    {PETREL_GET, "/loop", spin, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(faulty, routes, NULL, NULL, NULL)
EOF
so=$LIB_TMP/faulty.so
cc -shared -fPIC -g -I"$top_srcdir/include" -o "$so" "$src"

petrel_start --module "$so" --workers 2 --watchdog-timeout 2 --admin-listen 127.0.0.1:0
master=$PETREL_PID
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT
wait_for "$(bound 10)" nworkers 2

# metric NAME: its value in /metrics
metric() {
    curl_ "http://127.0.0.1:$ADMIN_PORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
metric_is() {
    [[ $(metric "$1") == "$2" ]]
}
[[ $(metric petrel_worker_crashes_total) == 0 ]] || fail "crashes before any: $(metric petrel_worker_crashes_total)"
[[ $(metric petrel_watchdog_kills_total) == 0 ]] || fail "watchdog kills before any"

# --- 1. a crash names its request ----------------------------------------------------
before=$(petrel_workers | sort | tr '\n' ' ')
curl -q -s --noproxy '*' --max-time "$(bound 10)" "$BASE/segv/7" >/dev/null || true
wait_for "$(bound 10)" grep -q "killed by signal 11 (SIGSEGV)" "$PETREL_ERR"
line=$(grep "killed by signal 11 (SIGSEGV)" "$PETREL_ERR")
expect_match "$line" "worker [01] \(pid [0-9]+\) killed by signal 11 \(SIGSEGV\) while running request [0-9]+ GET /segv/7 \(route /segv/:id, module 'faulty'\), at address 0x0, code in faulty\.so\+0x[0-9a-f]+, module 'faulty'; restarting it" \
    "the crash report"
ok "a crash names its request: ${line#*] }"
wait_for "$(bound 10)" nworkers 2
wait_for "$(bound 10)" metric_is petrel_workers 2
[[ $(curl_ "$BASE/hello") == hello ]] || fail "no hello after the crash"
[[ $(metric petrel_worker_crashes_total) == 1 ]] || fail "petrel_worker_crashes_total $(metric petrel_worker_crashes_total), want 1"
[[ $(metric 'petrel_module_crashes_total{module="faulty"}') == 1 ]] ||
    fail "petrel_module_crashes_total{module=\"faulty\"}: $(metric 'petrel_module_crashes_total{module="faulty"}')"
ok "a new worker serves; petrel_worker_crashes_total 1, petrel_module_crashes_total{module=\"faulty\"} 1"

# --- 2. the watchdog ---------------------------------------------------------------------
# /loop on a connection of its own; then 40 new connections, made while
# the worker is stuck, each asking for /hello: all answered
pyrun "$PETREL_ERR" <<'EOF'
import os
import sys
import threading
import time
from petrel_client import *

log = sys.argv[1]
WD = 2.0
t0 = time.monotonic()
stuck = Conn(timeout=bound(20))
stuck.send(request("GET", "/loop"))
wait_server_read(stuck)  # its worker read it (and then never turns again)
results = {}
waited = {}


def one(i):
    try:
        t = time.monotonic()
        c = Conn(timeout=bound(20))
        c.send(request("GET", "/hello", [("Connection", "close")]))
        r = c.read_response()
        c.close()
        results[i] = (r.status, r.body)
        waited[i] = time.monotonic() - t
    except Exception as e:
        results[i] = repr(e)


threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
for t in threads:
    t.start()
made = time.monotonic() - t0


def logged():
    with open(log) as f:
        return [l for l in f if "watchdog: worker" in l]


while not logged() and time.monotonic() - t0 < bound(15):
    time.sleep(0.05)
seen = time.monotonic() - t0
lines = logged()
check(len(lines) == 1, "watchdog lines: %r" % lines)
check(seen <= WD + bound(1.5), "the watchdog spoke after %.2f s, want at most %.1f + 1.5"
      % (seen, WD))
for t in threads:
    t.join()
bad = {i: r for i, r in results.items() if r != (200, b"hello")}
check(len(results) == 40 and not bad, "of 40 connections made while stuck: %r" % bad)
# those queued on the stuck worker's socket waited for its successor
late = [i for i in waited if waited[i] >= 1.0]
check(late, "no connection waited for the stuck worker's successor: %r" % sorted(waited.values()))
try:
    got = stuck.read_response()
    check(False, "the stuck request was answered: %r" % got)
except Exception:
    pass
ok("watchdog after %.2f s; the 40 connections made in the first %.2f s all answered, "
   "%d of them by the stuck worker's successor" % (seen, made, len(late)))
EOF
line=$(grep "watchdog: worker" "$PETREL_ERR")
expect_match "$line" "watchdog: worker [01] \(pid [0-9]+\) was in one loop turn for [0-9.]+ s \(--watchdog-timeout 2\), killed by signal 6 \(SIGABRT\) while running request [0-9]+ GET /loop \(route /loop, module 'faulty'\); restarting it \(a handler must not block its worker: .*petrel_watch_start; see \"When a handler goes wrong\"" \
    "the watchdog's line"
ok "the watchdog names the request: ${line#*] }"
wait_for "$(bound 10)" nworkers 2
[[ $(metric petrel_watchdog_kills_total) == 1 ]] || fail "petrel_watchdog_kills_total $(metric petrel_watchdog_kills_total), want 1"
[[ $(metric petrel_worker_crashes_total) == 1 ]] || fail "a watchdog kill counted as a crash"
[[ $(metric 'petrel_module_watchdog_kills_total{module="faulty"}') == 1 ]] ||
    fail "petrel_module_watchdog_kills_total{module=\"faulty\"}: $(metric 'petrel_module_watchdog_kills_total{module="faulty"}')"
ok "petrel_watchdog_kills_total 1 (and not a crash)"
petrel_stop "$master"

# --- 3. --watchdog-timeout 0 ---------------------------------------------------------------
petrel_start --module "$so" --workers 1 --watchdog-timeout 0
master=$PETREL_PID
wait_for "$(bound 10)" nworkers 1
w=$(petrel_workers)
curl -q -s --noproxy '*' --max-time 4 "$BASE/loop" >/dev/null || true
lib_alive "$w" || fail "--watchdog-timeout 0: the stuck worker is gone"
! grep -q "watchdog" "$PETREL_ERR" || fail "--watchdog-timeout 0: $(grep watchdog "$PETREL_ERR")"
ok "--watchdog-timeout 0: a worker stuck for 4 s stays, nothing logged"
kill -KILL "$w"
petrel_stop "$master"
