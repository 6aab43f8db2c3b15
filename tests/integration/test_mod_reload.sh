#!/usr/bin/env bash
# Reload (petrel(1), SIGHUP): under load from keep-alive and one-request
# connections, SIGHUP six times; each time the module file has been rebuilt
# with a new version string, the new version is what new workers answer,
# the old workers exit, and not one request fails or gets a wrong answer.
# A reload whose module does not load, or whose init fails, leaves the
# previous generation serving (still no failed request).  wrk under
# reloads: no socket error and no non-2xx.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"

src=$LIB_TMP/ver.c
cat >"$src" <<'EOF'
#include <petrel.h>
#include <string.h>

#ifndef VERSION
#define VERSION "v0"
#endif

static int ver(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", VERSION, strlen(VERSION));
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)srv;
    (void)args;
#ifdef INIT_FAILS
    return PETREL_EINVAL;
#endif
    return 0;
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
#ifdef WORKER_INIT_FAILS
    return PETREL_ENOMEM;
#endif
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/ver", ver, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(ver, routes, init, worker_init, NULL)
EOF
so=$LIB_TMP/ver.so
# build VERSION [CFLAG]...: a new file renamed over the old one, as
# petrel-mod does
build() {
    local v=$1
    shift
    cc -shared -fPIC -I"$top_srcdir/include" -DVERSION="\"$v\"" "$@" -o "$so.tmp" "$src"
    mv -f "$so.tmp" "$so"
}
# reloads_done N: the log says N reloads succeeded
reloads_done() {
    [[ $(grep -c "reload: generation [0-9]* serving" "$PETREL_ERR") -eq $1 ]]
}
build v0

petrel_start --module "$so" --module echo --workers 2
master=$PETREL_PID
wait_for "$(bound 10)" nworkers 2

# --- load -------------------------------------------------------------------
stopfile=$LIB_TMP/stop
result=$LIB_TMP/load.out
pyrun "$stopfile" "$result" <<'EOF' &
import http.client
import os
import socket
import sys
import threading
import time
from petrel_client import *

stopfile, result = sys.argv[1], sys.argv[2]
lock = threading.Lock()
stats = {"ok": 0, "reconnects": 0}
errors = []
seen = set()


def keepalive(idx):
    """One http.client connection, reused; it reconnects only when a
    response says Connection: close (a retiring worker)."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=bound(10))
    n = 0
    while not os.path.exists(stopfile):
        n += 1
        try:
            if idx % 2:
                body = b"ka %d %d" % (idx, n)
                c.request("POST", "/echo", body=body)
                r = c.getresponse()
                got = r.read()
                good = r.status == 200 and got == body
            else:
                c.request("GET", "/ver")
                r = c.getresponse()
                got = r.read()
                good = r.status == 200 and got.startswith(b"v")
                with lock:
                    seen.add(got)
            if r.will_close:
                with lock:
                    stats["reconnects"] += 1
                c.close()
        except Exception as e:
            good = False
            got = repr(e)
            c.close()
        with lock:
            if good:
                stats["ok"] += 1
            else:
                errors.append("keep-alive client %d, request %d: %s" % (idx, n, got))


def oneshot(idx):
    """A new connection for every request."""
    n = 0
    while not os.path.exists(stopfile):
        n += 1
        try:
            c = Conn(timeout=10)
            c.send(request("GET", "/ver", [("Connection", "close")]))
            r = c.read_response()
            c.close()
            good = r.status == 200 and r.body.startswith(b"v")
            got = r
        except Exception as e:
            good = False
            got = repr(e)
        with lock:
            if good:
                stats["ok"] += 1
            else:
                errors.append("one-shot client %d, request %d: %s" % (idx, n, got))


threads = [threading.Thread(target=keepalive, args=(i,)) for i in range(6)]
threads += [threading.Thread(target=oneshot, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(result, "w") as f:
    f.write("%d %d %d\n" % (stats["ok"], stats["reconnects"], len(errors)))
    for e in errors[:20]:
        f.write(e + "\n")
EOF
loadpid=$!
LIB_BG+=("$loadpid")

# ver_is V: a request on a new connection is answered with V
ver_is() {
    [[ $(curl_ http://127.0.0.1:"$PORT"/ver) == "$1" ]]
}
# workers_settled: exactly two children, none of them retiring any more
workers_settled() {
    [[ $(petrel_workers "$master" | wc -l) -eq 2 ]]
}

wait_for "$(bound 10)" ver_is v0
for i in 1 2 3 4 5 6; do
    before=$(petrel_workers "$master" | sort | tr '\n' ' ')
    build "v$i"
    kill -HUP "$master"
    wait_for "$(bound 20)" grep -q "reload: generation $i serving with 2 workers" "$PETREL_ERR"
    wait_for "$(bound 10)" ver_is "v$i"
    # the old workers finish their requests and exit (keep-alive clients
    # hear Connection: close on their next response)
    wait_for "$(bound 15)" workers_settled
    after=$(petrel_workers "$master" | sort | tr '\n' ' ')
    [[ $before != "$after" ]] || fail "reload $i: the workers are the same ($after)"
    ok "reload $i: v$i served by new workers ($after), the old ones ($before) exited"
done

# Reloads that fail, under the same load: a module file that does not
# load, a module whose init fails (in the master), a module whose
# worker_init fails (in the new workers, which are then retired).  The
# previous generation keeps serving each time.
echo "not an ELF file" >"$so"
kill -HUP "$master"
wait_for "$(bound 20)" grep -q "reload failed: --module '$so': cannot load: .*; still serving generation 6" "$PETREL_ERR"
ver_is v6 || fail "after a failed reload: not v6 any more"
ok "a module file that does not load: reload refused, generation 6 still serving"

build v7 -DINIT_FAILS
kill -HUP "$master"
wait_for "$(bound 20)" grep -q "reload failed: module 'ver': init failed: invalid argument; still serving generation 6" "$PETREL_ERR"
ver_is v6 || fail "after a failed init: not v6 any more"
ok "an init that fails: reload refused, generation 6 still serving"

build v8 -DWORKER_INIT_FAILS
before=$(petrel_workers "$master" | sort | tr '\n' ' ')
kill -HUP "$master"
wait_for "$(bound 20)" grep -q "reload failed: a new worker (pid [0-9]*) exited with status 3 at start-up.*; still serving generation 6" "$PETREL_ERR"
wait_for "$(bound 15)" workers_settled
after=$(petrel_workers "$master" | sort | tr '\n' ' ')
expect_eq "$after" "$before" "the workers after a reload whose new workers failed"
ver_is v6 || fail "after a failed worker_init: not v6 any more"
grep -q "module 'ver': worker init failed" "$PETREL_ERR" || fail "no 'worker init failed' in the log"
ok "a worker_init that fails: the new workers are given up, the old ones ($after) keep serving v6"

touch "$stopfile"
wait "$loadpid" || fail "the load generator failed"
read -r nok nreconn nerr <"$result"
[[ $nerr -eq 0 ]] || fail "$nerr requests failed during the reloads: $(tail -n +2 "$result")"
[[ $nok -gt 500 ]] || fail "only $nok requests were answered during the reloads"
ok "under load: $nok requests answered during 6 reloads and 3 failed ones, 0 failed ($nreconn reconnections on Connection: close)"

# --- wrk ---------------------------------------------------------------------
if command -v wrk >/dev/null; then
    wrk -t 2 -c 32 -d "$(bound 4)s" "http://127.0.0.1:$PORT/ver" >"$LIB_TMP/wrk.out" 2>&1 &
    wrkpid=$!
    LIB_BG+=("$wrkpid")
    for i in 1 2 3; do
        sleep 0.7
        build "w$i"
        kill -HUP "$master"
        wait_for "$(bound 20)" reloads_done $((6 + i))
    done
    wait "$wrkpid" || fail "wrk failed: $(cat "$LIB_TMP/wrk.out")"
    out=$(cat "$LIB_TMP/wrk.out")
    expect_match "$out" "requests in" "wrk output"
    expect_no_match "$out" "Socket errors|Non-2xx" "wrk under 3 reloads"
    ok "wrk under 3 reloads: $(grep -o '[0-9]* requests in [^,]*' <<<"$out"), no socket error, no non-2xx"
else
    ok "wrk not installed: its part skipped"
fi

petrel_stop "$master"
ok "SIGTERM: exit status 0, no worker left"

# no error logged but the three reloads that were meant to fail
unexpected=$(grep -E '\[(error|warn)\]' "$PETREL_ERR" |
    grep -vE "reload failed: |module 'ver': worker init failed" || true)
[[ -z $unexpected ]] || fail "unexpected errors in the log: $unexpected"
ok "no other error or warning logged through the reloads"
