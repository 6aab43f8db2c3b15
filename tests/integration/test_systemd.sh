#!/usr/bin/env bash
# petrel under systemd, without a running systemd: its tools and protocols.
#   - petrel.service and petrel.socket pass `systemd-analyze verify`, with
#     Type=notify, ExecReload and the hardening options;
#   - socket activation with systemd-socket-activate (two sockets, named
#     "http" and "admin"): both serve, no default address is bound besides,
#     LISTEN_* are not in the workers' environment, and a reload (SIGHUP)
#     keeps serving on the same sockets;
#   - LISTEN_PID of another process: the sockets are ignored; a passed
#     descriptor that is no listening socket: a clear refusal;
#   - a restart loses no connection attempt: an activator holds the socket
#     while petrel is stopped and started again under a stream of requests;
#   - sd_notify to a test-made NOTIFY_SOCKET (abstract), from the master's
#     pid only: READY=1 once the workers accept, RELOADING=1 with
#     MONOTONIC_USEC in one message then READY=1 around SIGHUP, STOPPING=1
#     when the drain starts, STATUS= lines.
. "$(dirname "$0")/lib.sh"

SSA=$(command -v systemd-socket-activate || true)
[[ -n $SSA ]] || skip "no systemd-socket-activate (apt-get install systemd)"
command -v systemd-analyze >/dev/null || skip "no systemd-analyze (apt-get install systemd)"
command -v cc >/dev/null || skip "no C compiler (cc) for the test module"

# GET /env?name=X: what getenv(X) says in the worker (the environment any
# program it runs would get)
cat >"$LIB_TMP/envmod.c" <<'EOF'
#include <petrel.h>
#include <stdlib.h>

static int env(petrel_req_t *req, void *data)
{
    (void)data;
    const char *v = getenv(petrel_req_query(req, "name"));
    return petrel_send_text(req, 200, "text/plain", v ? v : "(unset)");
}

static const petrel_route_t routes[] = {{PETREL_GET, "/env", env, NULL}, {0, NULL, NULL, NULL}};

PETREL_MODULE(envmod, routes, NULL, NULL, NULL)
EOF

# --- the unit files --------------------------------------------------------
U=$LIB_TMP/units
mkdir -p "$U"
sed "s|@bindir@/petrel|$PETREL|" "$top_srcdir/systemd/petrel.service.in" >"$U/petrel.service"
cp "$top_srcdir/systemd/petrel.socket" "$U/petrel.socket"
for key in Type=notify NotifyAccess=main 'ExecReload=/bin/kill -HUP $MAINPID' KillMode=mixed \
    NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes ProtectHome=yes PrivateDevices=yes \
    RestrictAddressFamilies= CapabilityBoundingSet= SystemCallFilter=@system-service; do
    grep -qF -- "$key" "$U/petrel.service" || fail "petrel.service has no $key"
done
(cd "$U" && systemd-analyze verify --man=no ./petrel.socket ./petrel.service) \
    >"$LIB_TMP/verify.out" 2>&1 || fail "systemd-analyze verify: $(cat "$LIB_TMP/verify.out")"
if grep -E 'petrel\.(service|socket)' "$LIB_TMP/verify.out"; then
    fail "systemd-analyze verify complains about the units"
fi
ok "petrel.service and petrel.socket pass systemd-analyze verify"
if [[ -n ${top_builddir:-} && -f $top_builddir/systemd/petrel.service ]]; then
    bindir=$(sed -n 's/^bindir = //p' "$top_builddir/Makefile")
    prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
    grep -q "^ExecStart=${bindir//\$\{exec_prefix\}/$prefix}/petrel " "$top_builddir/systemd/petrel.service" ||
        grep -q "^ExecStart=.*/bin/petrel " "$top_builddir/systemd/petrel.service" ||
        fail "the built petrel.service does not start the installed petrel"
fi

# --- socket activation with systemd-socket-activate -------------------------
P=$(free_port)
A=$(free_port)
PETREL_ERR=$LIB_TMP/petrel.ssa.err
"$SSA" -l "127.0.0.1:$P" -l "127.0.0.1:$A" --fdname=http:admin \
    "$PETREL" --workers 2 --module hello --dev --module "$LIB_TMP/envmod.c" \
    --admin-listen "127.0.0.1:$A" >/dev/null 2>"$PETREL_ERR" &
PETREL_PID=$!
LIB_PIDS+=("$PETREL_PID")
wait_port "$P"
# the first connection makes systemd-socket-activate exec petrel
[[ $(curl_ "http://127.0.0.1:$P/hello") == "Hello World!" ]] || fail "no answer through the passed socket"
wait_for "$(bound 10)" nworkers 2
[[ $(curl_ "http://127.0.0.1:$A/readyz") == ready ]] || fail "no admin listener on the passed socket"
grep -q "listening on 127.0.0.1:$P with 2 workers, socket from systemd" "$PETREL_ERR" ||
    fail "the public socket is not systemd's: $(cat "$PETREL_ERR")"
grep -q "admin listener .* on 127.0.0.1:$A with 2 workers, socket from systemd" "$PETREL_ERR" ||
    fail "the admin socket is not systemd's"
if ss -ltnp 2>/dev/null | grep -E "pid=($PETREL_PID|$(petrel_workers | paste -sd'|'))," |
    grep -vE "127\.0\.0\.1:($P|$A) " | grep -q .; then
    fail "petrel listens on an address besides the passed ones: $(ss -ltnp | grep petrel)"
fi
for v in LISTEN_PID LISTEN_FDS LISTEN_FDNAMES; do
    for i in 1 2 3 4; do # both workers, most likely
        got=$(curl_ "http://127.0.0.1:$P/env?name=$v")
        [[ $got == "(unset)" ]] || fail "a worker's environment has $v=$got"
    done
done
inode() { readlink "/proc/$1/fd/$2"; }
sock_before=$(inode "$PETREL_PID" 3)
kill -HUP "$PETREL_PID"
wait_for "$(bound 20)" grep -q 'generation 1 serving' "$PETREL_ERR"
[[ $(inode "$PETREL_PID" 3) == "$sock_before" ]] || fail "the master's socket changed over SIGHUP"
# the retiring workers of generation 0 (their listeners closed) exit first
wait_for "$(bound 20)" nworkers 2
for w in $(petrel_workers); do
    ls -l "/proc/$w/fd" | grep -qF "${sock_before}" ||
        fail "worker $w of generation 1 does not hold systemd's socket $sock_before"
done
for i in 1 2 3; do
    [[ $(curl_ "http://127.0.0.1:$P/hello") == "Hello World!" ]] || fail "after SIGHUP"
done
ok "systemd-socket-activate: both sockets serve, nothing else bound, no LISTEN_* left; SIGHUP keeps them"
petrel_stop

# --- LISTEN_PID of another process; a descriptor that is no listener ------
LISTEN_PID=1 LISTEN_FDS=1 petrel_start --module hello --dev --module "$LIB_TMP/envmod.c"
grep -q 'socket from systemd' "$PETREL_ERR" && fail "another process's LISTEN_FDS were used"
[[ $(curl_ "$BASE/env?name=LISTEN_FDS") == "(unset)" ]] || fail "LISTEN_FDS reached a worker"
petrel_stop
ok "LISTEN_PID of another process: ignored (and unset)"
if sh -c 'LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$0" --module hello' \
    "$PETREL" 3</dev/null >/dev/null 2>"$LIB_TMP/notsock.err"; then
    fail "petrel started with /dev/null as its listening socket"
fi
grep -q 'descriptor 3 from systemd (LISTEN_FDS) is not a listening stream socket' "$LIB_TMP/notsock.err" ||
    fail "refusal: $(cat "$LIB_TMP/notsock.err")"
ok "a passed descriptor that is no listening socket is refused with a message"

# --- a restart loses no connection attempt ---------------------------------
export PETREL LIB_TMP
pyrun <<'PYEOF'
import os, signal, socket, subprocess, threading, time
from petrel_client import check, ok, fail, bound, recv_all, request

PETREL = os.environ["PETREL"]
tmp = os.environ["LIB_TMP"]
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(4096)
port = ls.getsockname()[1]
os.dup2(ls.fileno(), 3)
os.set_inheritable(3, True)

def start(n):
    err = open(os.path.join(tmp, "petrel.restart%d.err" % n), "w")
    return subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$0" "$@"',
         PETREL, "--module", "hello", "--workers", "2"],
        pass_fds=(3,), stdout=subprocess.DEVNULL, stderr=err)

stop = threading.Event()
results = {"ok": 0, "failed": []}
def client():
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=bound(20))
            s.sendall(request("GET", "/hello", [("Connection", "close")]))
            data = recv_all(s)
            s.close()
            if data.startswith(b"HTTP/1.1 200") and data.endswith(b"Hello World!"):
                results["ok"] += 1
            else:
                results["failed"].append(data[:80])
        except OSError as e:
            results["failed"].append(repr(e))

p = start(0)
time.sleep(0.5)
threads = [threading.Thread(target=client) for _ in range(3)]
for t in threads:
    t.start()
served = []
for n in (1, 2):
    time.sleep(0.7)
    before = results["ok"]
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=bound(15)) == 0, "petrel exited with %r" % p.returncode)
    time.sleep(0.3)          # nobody accepts: connection attempts wait in the backlog
    p = start(n)
    served.append(before)
time.sleep(0.7)
stop.set()
for t in threads:
    t.join()
p.send_signal(signal.SIGTERM)
check(p.wait(timeout=bound(15)) == 0, "petrel exited with %r" % p.returncode)
check(not results["failed"], "%d requests failed across restarts: %r"
      % (len(results["failed"]), results["failed"][:3]))
check(results["ok"] > served[-1] > served[0] > 0, "requests served: %r, %r" % (results, served))
ok("two restarts on a held socket under load: %d requests, 0 failed" % results["ok"])
PYEOF

# --- sd_notify -----------------------------------------------------------------
pyrun <<'PYEOF'
import array, os, re, signal, socket, struct, subprocess, time
from petrel_client import check, ok, fail, bound

PETREL = os.environ["PETREL"]
tmp = os.environ["LIB_TMP"]
name = "@petrel-test-notify-%d" % os.getpid()
ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
ns.bind("\0" + name[1:])
ns.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
ns.settimeout(bound(20))

def msg():
    data, anc, _, _ = ns.recvmsg(4096, socket.CMSG_SPACE(12))
    pid = None
    for level, typ, d in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", d[:12])[0]
    return pid, dict(l.split("=", 1) for l in data.decode().split("\n") if l)

env = dict(os.environ, NOTIFY_SOCKET=name)
err = open(os.path.join(tmp, "petrel.notify.err"), "w")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
p = subprocess.Popen([PETREL, "--module", "hello", "--workers", "2", "--listen",
                      "127.0.0.1:%d" % port], env=env, stdout=subprocess.DEVNULL, stderr=err)
pid, m = msg()
check(pid == p.pid, "READY=1 from pid %r, not the master %d" % (pid, p.pid))
check(m.get("READY") == "1" and "2 workers" in m.get("STATUS", ""), "first message: %r" % m)
c = socket.create_connection(("127.0.0.1", port), timeout=5)   # workers accept by now
c.close()
ok("READY=1 from the master once both workers accept: %r" % m["STATUS"])

p.send_signal(signal.SIGHUP)
pid, m = msg()
now_us = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
check(pid == p.pid and m.get("RELOADING") == "1", "after SIGHUP: %r from %r" % (m, pid))
check("MONOTONIC_USEC" in m and abs(int(m["MONOTONIC_USEC"]) - now_us) < bound(5) * 1e6,
      "RELOADING=1 without a current MONOTONIC_USEC in the same message: %r" % m)
pid, m = msg()
check(pid == p.pid and m.get("READY") == "1" and "generation 1" in m.get("STATUS", ""),
      "after the reload: %r" % m)
ok("SIGHUP: RELOADING=1 with MONOTONIC_USEC in one message, then READY=1 (%s)" % m["STATUS"])

p.send_signal(signal.SIGTERM)
pid, m = msg()
check(pid == p.pid and m.get("STOPPING") == "1", "after SIGTERM: %r" % m)
check(p.wait(timeout=bound(15)) == 0, "exit status %r" % p.returncode)
ns.settimeout(0.3)
try:
    extra = ns.recv(4096)
    fail("a message after STOPPING=1: %r" % extra)
except socket.timeout:
    pass
ok("SIGTERM: STOPPING=1, then exit 0; every message from the master's pid")
PYEOF
