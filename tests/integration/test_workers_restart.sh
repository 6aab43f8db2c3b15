#!/usr/bin/env bash
# --workers 2: both workers take connections; a worker killed with SIGKILL
# is restarted by the master (a new child appears) and requests keep being
# answered, including those that arrive while it is down; SIGTERM then ends
# everything with status 0.
. "$(dirname "$0")/lib.sh"

petrel_start --module hello --module echo --workers 2
master=$PETREL_PID
wait_for "$(bound 10)" nworkers 2
mapfile -t workers < <(petrel_workers)
ok "--workers 2: master $master, workers ${workers[*]}"

# Both serve: hold 40 keep-alive connections open (each has had a response,
# so some worker accepted it) and count each worker's sockets beyond its
# listener.  With SO_REUSEPORT spreading connections, one worker having
# them all would be a 1-in-2^39 chance.
pyrun "${workers[@]}" <<'EOF'
import os
import sys
from petrel_client import *
from petrel_fault import sockets

base = {w: sockets(int(w)) for w in sys.argv[1:]}
conns = []
for i in range(40):
    c = Conn()
    c.send(request("GET", "/hello"))
    r = c.read_response()
    check(r.status == 200 and r.body == b"Hello World!", "connection %d: %r" % (i, r))
    conns.append(c)
held = {w: sockets(int(w)) - base[w] for w in base}
for w, n in held.items():
    check(n >= 1, "worker %s holds no connection of 40 (held: %r)" % (w, held))
check(sum(held.values()) >= 40, "the workers hold %d connections, want 40: %r" % (sum(held.values()), held))
for c in conns:
    c.close()
ok("40 connections spread over both workers: %s" % ", ".join("%s: %d" % kv for kv in held.items()))
EOF

# requests_ok N WHAT: N requests, each on a new connection, all answered
# (with a generous bound: some may wait in the accept queue of a worker
# that is being restarted).
requests_ok() {
    pyrun "$1" "$2" <<'EOF'
import sys
import time
from petrel_client import *
n, what = int(sys.argv[1]), sys.argv[2]
t0 = time.monotonic()
for i in range(n):
    try:
        c = Conn(timeout=10)
        c.send(request("POST", "/echo", body=b"request %d" % i))
        r = c.read_response()
    except Exception as e:
        fail("%s: request %d of %d: %r" % (what, i, n, e))
    check(r.status == 200 and r.body == b"request %d" % i, "%s: request %d: %r" % (what, i, r))
    c.close()
ok("%s: %d requests on new connections answered (%.2fs)" % (what, n, time.monotonic() - t0))
EOF
}

# replaced PID...: there are two workers, and none of them is one of PID...
replaced() {
    local w p
    w=$(petrel_workers) || return 1
    [[ $(wc -l <<<"$w") -eq 2 ]] || return 1
    for p; do
        ! grep -qxF "$p" <<<"$w" || return 1
    done
}

# Kill one worker: the requests right after it are answered (the master
# keeps the dead worker's listening socket, its successor accepts what is
# queued there), and a new worker appears.
victim=${workers[0]}
kill -KILL "$victim"
requests_ok 100 "right after kill -9 of worker $victim"
wait_for "$(bound 10)" replaced "$victim"
mapfile -t workers2 < <(petrel_workers)
ok "the master restarted worker $victim: workers now ${workers2[*]}"
grep -q "killed by signal 9" "$PETREL_ERR" || fail "no 'killed by signal 9' in the log: $(cat "$PETREL_ERR")"
ok "the log says the worker was killed by signal 9 and restarted"
lib_alive "$master" || fail "the master died"
requests_ok 100 "after the restart"

# Kill both, one after the other, and the fresh one right away again (the
# master slows down restarts of a worker that dies within a second, but
# still restarts it).
for w in "${workers2[@]}"; do
    kill -KILL "$w"
done
requests_ok 50 "right after kill -9 of both workers"
wait_for "$(bound 10)" replaced "${workers2[@]}"
mapfile -t workers3 < <(petrel_workers)
kill -KILL "${workers3[0]}"
requests_ok 50 "right after kill -9 of a worker a moment old"
wait_for "$(bound 10)" replaced "${workers3[0]}"
ok "workers killed twice in a row are restarted: now $(petrel_workers | tr '\n' ' ')"

# The load is still shared and served after all that.
requests_ok 100 "after three restarts"

petrel_stop "$master"
ok "SIGTERM: exit status 0, no worker left"
