#!/usr/bin/env bash
# Two petrel instances behind the real HAProxy (Debian's), configured by
# examples/haproxy/haproxy.cfg (with this test's ports): PROXY v2 to petrel,
# health checks on each instance's /readyz (admin listener), HTTP/1.1 to the
# backends for HTTP/1.1 clients and h2c (proto h2) for HTTP/2 clients.
#
# Under petrel-bench load through HAProxy, HTTP/1.1 and HTTP/2 at once:
#   1. instance A reloaded with SIGHUP, instance B drained with SIGTERM
#      (--drain-delay: /readyz 503 first) and started again: 0 failed
#      requests, and both instances served, with PROXY v2 headers;
#   2. instance A killed (SIGKILL, master and workers): the failed requests
#      are counted and bounded by what was in flight on A; none fail once
#      HAProxy has marked A down; WebSocket connections through HAProxy
#      that B holds go on echoing, unaffected.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/haproxy_lib.sh"
haproxy_setup
bench_needs
haproxy_start

# instance N on PORT with admin port APORT; sets PID_N
instance() {
    local n=$1 port=$2 aport=$3
    petrel_start --listen "127.0.0.1:$port" --workers 2 --module hello --module wsecho \
        --proxy-protocol --trusted-proxies 127.0.0.1 --admin-listen "127.0.0.1:$aport" \
        --drain-delay 1.5 --access-log "$T/access-$n.log"
    printf -v "PID_$n" '%s' "$PETREL_PID"
    printf -v "ERR_$n" '%s' "$PETREL_ERR"
}
instance A "$A" "$AA"
instance B "$B" "$BA"
export BENCH PID_A PID_B ERR_A ERR_B

pyrun <<'PYEOF'
from hap import wait_status
wait_status("p1", "UP")
wait_status("p2", "UP")
PYEOF
ok "HAProxy (examples/haproxy/haproxy.cfg) sees both instances UP through /readyz"

# --- 1. a reload and a drain/restart under load: 0 failed -----------------
"$BENCH" -c 8 -d 9s --json --expect-status 200 --expect-body-size 12 \
    "http://127.0.0.1:$F/hello" >"$T/bench-h1.json" 2>"$T/bench-h1.err" &
b1=$!
"$BENCH" --h2 -c 2 -m 8 -d 9s --json --expect-status 200 --expect-body-size 12 \
    "http://127.0.0.1:$F/hello" >"$T/bench-h2.json" 2>"$T/bench-h2.err" &
b2=$!
LIB_BG+=("$b1" "$b2")
sleep 1.5
kill -HUP "$PID_A"
wait_for "$(bound 20)" grep -q 'generation 1 serving' "$ERR_A"
ok "instance A reloaded under load"
sleep 0.5
kill -TERM "$PID_B"
petrel_wait_exit "$PID_B" "$(bound 20)"
[[ $PETREL_RC -eq 0 ]] || fail "instance B exited with $PETREL_RC"
ok "instance B drained (SIGTERM, --drain-delay 1.5) in ${EXIT_SECS}s"
instance B "$B" "$BA"
export PID_B ERR_B
pyrun <<'PYEOF'
from hap import wait_status
from petrel_client import ok
ok("instance B started again, UP in HAProxy after %.1fs" % wait_status("p2", "UP"))
PYEOF
wait "$b1" || fail "petrel-bench (HTTP/1.1) exited $?: $(cat "$T/bench-h1.err")"
wait "$b2" || fail "petrel-bench (HTTP/2) exited $?: $(cat "$T/bench-h2.err")"
pyrun <<'PYEOF'
import json, os, re
from petrel_client import check, ok
T = os.environ["T"]
for name in ("h1", "h2"):
    r = json.load(open(os.path.join(T, "bench-%s.json" % name)))
    check(r["requests"] > 100, "%s: %d requests" % (name, r["requests"]))
    check(r["errors"]["total"] == 0, "%s: %r failed" % (name, r["errors"]))
    ok("%s through HAProxy across the reload and the drain: %d requests, 0 failed"
       % ("HTTP/1.1 backend" if name == "h1" else "h2c backend (proto h2)", r["requests"]))
for n in ("A", "B"):
    lines = open(os.path.join(T, "access-%s.log" % n)).read().count("GET /hello")
    check(lines > 0, "instance %s served nothing" % n)
PYEOF
for port in "$AA" "$BA"; do
    v2=$(curl_ "http://127.0.0.1:$port/metrics" | sed -n 's/^petrel_proxy_headers_total{version="2"} //p')
    [[ ${v2:-0} -gt 0 ]] || fail "no PROXY v2 header counted on the instance with admin port $port"
done
ok "both instances served, every connection from HAProxy with a PROXY v2 header"

# --- 2. SIGKILL of instance A; WebSockets on B unaffected -----------------
pyrun <<'PYEOF'
import json, os, signal, subprocess, threading, time
from hap import wait_status, status
from petrel_client import Conn, request, check, ok, fail, bound
import petrel_fault
from petrel_fault import ws_open, ws_frame, ws_read

class Closed(Exception):
    pass

def closed(msg):
    raise Closed(msg)

petrel_fault.fail = closed  # a WebSocket that ends is counted, not a failure of the test

F, BA = int(os.environ["F"]), int(os.environ["BA"])
BENCH, T = os.environ["BENCH"], os.environ["T"]
PID_A = int(os.environ["PID_A"])

def ws_open_on_b():
    c = Conn(BA)
    c.send(request("GET", "/metrics"))
    body = c.read_response().body.decode()
    c.close()
    for l in body.splitlines():
        if l.startswith("petrel_websocket_connections_open "):
            return int(float(l.split()[1]))
    return 0

before_b = ws_open_on_b()
socks = [ws_open("/ws", F) for _ in range(8)]
time.sleep(0.2)
on_b = ws_open_on_b() - before_b
check(0 < on_b < 8, "WebSockets through HAProxy: %d of 8 on instance B" % on_b)

stop = threading.Event()
echo = [[0, 0] for _ in socks]   # per connection: echoes, failures after the kill
killed = threading.Event()
def pinger(i, w):
    n = 0
    w.settimeout(bound(5))
    while not stop.is_set():
        try:
            w.send(ws_frame(1, b"ping %d" % n))
            op, payload = ws_read(w)
            if op != 1 or payload != b"ping %d" % n:
                raise OSError("bad echo %r" % payload)
            echo[i][0] += 1
        except (OSError, Closed):
            echo[i][1] += 1
            return
        n += 1
        time.sleep(0.05)
threads = [threading.Thread(target=pinger, args=(i, w)) for i, w in enumerate(socks)]
for t in threads:
    t.start()

bench = subprocess.Popen([BENCH, "-c", "8", "-d", "5s", "--json", "--expect-status", "200",
                          "http://127.0.0.1:%d/hello" % F], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
time.sleep(1.5)
workers = [int(p) for p in os.popen("pgrep -P %d" % PID_A).read().split()]
for pid in [PID_A] + workers:
    os.kill(pid, signal.SIGKILL)
t_kill = time.monotonic()
took = wait_status("p1", "DOWN")
r1 = json.loads(bench.communicate(timeout=bound(30))[0])
failed = r1["errors"]["total"]
check(failed <= 8, "%d requests failed when A was killed, more than the 8 that can be in flight"
      % failed)
ok("SIGKILL of instance A under load (8 connections): %d of %d requests failed; HAProxy marked"
   " it DOWN %.1fs after" % (failed, r1["requests"], took))

r2 = subprocess.run([BENCH, "-c", "8", "-d", "2s", "--json", "--expect-status", "200",
                     "http://127.0.0.1:%d/hello" % F], capture_output=True, timeout=bound(30))
r2 = json.loads(r2.stdout)
check(r2["errors"]["total"] == 0 and r2["requests"] > 50,
      "after A was marked down: %r" % r2["errors"])
ok("after HAProxy marked A down: %d requests, 0 failed" % r2["requests"])

stop.set()
for t in threads:
    t.join()
alive = [e for e in echo if e[1] == 0]
check(len(alive) == on_b, "%d WebSockets kept echoing, %d were on B: %r" % (len(alive), on_b, echo))
check(all(e[0] > 20 for e in alive), "WebSockets on B: %r" % echo)
ok("the %d WebSockets through HAProxy on instance B echoed throughout (%s messages), the %d on A"
   " ended" % (on_b, "/".join(str(e[0]) for e in alive), 8 - on_b))
for w in socks:
    w.close()
PYEOF
PETREL_PID=$PID_B petrel_stop
