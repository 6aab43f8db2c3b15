#!/usr/bin/env bash
# The drain order seen from outside, with --admin-listen and --drain-delay:
#   1. SIGTERM: /readyz answers 503 at once (petrel_draining 1), while the
#      public port still accepts and serves, for --drain-delay;
#   2. then the public listeners close (connections are refused), idle
#      keep-alive connections close, and a connection accepted but not read
#      yet is in flight, not idle: it is answered (Connection: close);
#   3. the admin port answers (/livez 200) until the workers exit; petrel
#      exits 0.
# And: a second SIGTERM during the delay drains at once; workers never
# outlive a master killed with SIGKILL; a reload is refused while draining.
. "$(dirname "$0")/lib.sh"

petrel_start --workers 2 --module hello --admin-listen 127.0.0.1:0 --drain-delay 1.5
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT PETREL_ERR

pyrun <<'PYEOF'
import os, signal, socket, time
from petrel_client import Conn, request, check, ok, fail, bound, petrel_pid, refused

ADMIN = int(os.environ["ADMIN_PORT"])

def admin(path):
    c = Conn(ADMIN)
    c.send(request("GET", path))
    r = c.read_response()
    c.close()
    return r

def metric(name):
    for line in admin("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    fail("no %s in /metrics" % name)

check(admin("/readyz").status == 200, "/readyz before the drain")
check(metric("petrel_draining") == 0, "petrel_draining before")

idle = Conn()                   # a keep-alive connection, idle at the drain
idle.send(request("GET", "/hello"))
check(idle.read_response().status == 200, "keep-alive request")
unread = Conn()                 # accepted, nothing sent yet
time.sleep(0.1)

t0 = time.monotonic()
os.kill(petrel_pid(), signal.SIGTERM)
time.sleep(0.1)
r = admin("/readyz")
check(r.status == 503 and b"draining" in r.body, "/readyz right after SIGTERM: %r" % r)
check(admin("/livez").status == 200, "/livez during the delay")
check(metric("petrel_draining") == 1, "petrel_draining during the delay")
served = 0
while time.monotonic() - t0 < 1.2:      # the public port still accepts
    c = Conn()
    c.send(request("GET", "/hello"))
    r = c.read_response()
    check(r.status == 200, "a new connection during --drain-delay: %r" % r)
    served += 1
    c.close()
    time.sleep(0.05)
ok("SIGTERM: /readyz 503 at once; %d new connections served during --drain-delay" % served)

deadline = t0 + bound(1.5 + 5)
while not refused():
    check(time.monotonic() < deadline, "the public port still accepts after --drain-delay")
    time.sleep(0.02)
took = time.monotonic() - t0
check(took >= 1.4, "the listeners closed after %.2fs, before --drain-delay 1.5s" % took)
ok("the public listeners closed %.2fs after SIGTERM (--drain-delay 1.5)" % took)

idle.settimeout(5)
check(idle.sock.recv(100) == b"", "the idle keep-alive connection was not closed by the drain")
# the unread connection is in flight: the workers wait for it, the admin
# port answers meanwhile
for i in range(3):
    check(admin("/livez").status == 200, "/livez while a worker drains")
    check(admin("/readyz").status == 503, "/readyz while a worker drains")
    time.sleep(0.1)
unread.send(request("GET", "/hello?late"))
r = unread.read_response()
check(r.status == 200 and r.closes(), "the connection accepted before the drain: %r" % r)
ok("idle connections closed, the one accepted but unread was answered with Connection: close,"
   " /livez 200 until then")
PYEOF
petrel_wait_exit "$PETREL_PID" "$(bound 10)"
[[ $PETREL_RC -eq 0 ]] || fail "petrel exited with status $PETREL_RC"
ok "petrel exited 0 after the drain"

# --- a second SIGTERM skips the rest of the delay -------------------------
petrel_start --module hello --admin-listen 127.0.0.1:0 --drain-delay 30
kill -TERM "$PETREL_PID"
sleep 0.2
kill -HUP "$PETREL_PID" # no reload while draining
sleep 0.2
kill -TERM "$PETREL_PID"
petrel_wait_exit "$PETREL_PID" "$(bound 5)"
[[ $PETREL_RC -eq 0 ]] || fail "petrel exited with status $PETREL_RC"
grep -q 'not reloading: the instance is draining' "$PETREL_ERR" || fail "a reload during the drain"
ok "a second SIGTERM drains at once (in ${EXIT_SECS}s of a 30s delay); no reload while draining"

# --- workers never outlive a killed master -------------------------------
petrel_start --workers 2 --module hello --admin-listen 127.0.0.1:0
ADMIN_PORT=$(petrel_admin_port)
workers=$(petrel_workers)
[[ $(wc -w <<<"$workers") -eq 2 ]] || fail "workers: $workers"
kill -KILL "$PETREL_PID"
wait "$PETREL_PID" 2>/dev/null || true
t0=$(now)
for w in $workers; do
    while lib_alive "$w"; do
        fcmp "$(secs_since "$t0") < $(bound 12)" || fail "worker $w outlived its master"
        sleep 0.05
    done
done
ok "both workers exited $(secs_since "$t0")s after their master was killed"
