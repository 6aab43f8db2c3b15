# bench_lib.sh -- shared set-up of the petrel-bench integration tests
# (sourced, not run; also by the tests that run other servers): start/stop petrel with an access log, read
# petrel-bench's JSON, bounded waits, Python stub servers.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
: "${top_builddir:=$(cd "$(dirname "$0")/../../build" 2>/dev/null && pwd || echo .)}"
BENCH=$top_builddir/src/bench/petrel-bench
[[ -x $BENCH ]] || { echo "FAIL: $BENCH not built"; exit 1; }
SCALE=1
[[ ${PETREL_SANITIZERS:-no} == yes ]] && SCALE=3

TMP=$(mktemp -d)
PID=
cleanup() {
    if [[ -n $PID ]]; then kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi || true
    rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; [[ -f $TMP/err ]] && tail -20 "$TMP/err"; exit 1; }
free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# wait until 127.0.0.1:$1 accepts (polling, bounded)
wait_port() {
    local i
    for ((i = 0; i < 500 * SCALE; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$PID" 2>/dev/null || fail "petrel exited at start"
        sleep 0.02
    done
    fail "port $1 never opened"
}
start_petrel() {
    [[ -n ${PETREL:-} && -x $PETREL ]] || { echo "SKIP: PETREL not set or not executable"; exit 77; }
    PORT=$(free_port)
    "$PETREL" --listen "127.0.0.1:$PORT" --module hello --module echo \
        --access-log "$TMP/access.log" "$@" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    wait_port "$PORT"
    URL=http://127.0.0.1:$PORT
}
stop_petrel() {
    kill -TERM "$PID"
    local i
    for ((i = 0; i < 500 * SCALE; i++)); do
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.02
    done
    kill -0 "$PID" 2>/dev/null && fail "petrel did not stop on SIGTERM"
    wait "$PID" || true
    PID=
}
# jget FILE KEY[.KEY]: a value from petrel-bench's JSON
jget() {
    $PY - "$1" "$2" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)
EOF
}
expect() { [[ $1 == "$2" ]] || fail "$3: got '$1', want '$2'"; }
# expect_latency FILE: a report's latency median is above 0 and at most its maximum
expect_latency() {
    local p50 max
    p50=$(jget "$1" latency_us.p50)
    max=$(jget "$1" latency_us.max)
    awk -v a="$p50" -v b="$max" 'BEGIN { exit !(a > 0 && a <= b) }' || fail "latency p50 $p50 max $max"
}
bench() { timeout $((60 * SCALE)) "$BENCH" "$@"; }
# refused PATTERN ARGS...: petrel-bench ARGS exits 2 at once (within 2 s,
# before any load) and says PATTERN on stderr (the bad flag named)
refused() {
    local pat=$1 rc=0 t0=$SECONDS
    shift
    timeout 10 "$BENCH" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    expect "$rc" 2 "exit status of: $*"
    grep -q -- "$pat" "$TMP/err" || fail "'$*' said: $(cat "$TMP/err")"
    ((SECONDS - t0 <= 2)) || fail "'$*' was refused only after $((SECONDS - t0)) s"
}

# Python stub servers (tests that count what petrel-bench sends): the test
# writes $TMP/srv.py, a serve(c) for one connection and the arguments it
# takes (MODE PORTFILE ..., portfile named), then stub_serve_py's main loop.
# stub_serve_py: Python that listens on a free port of 127.0.0.1, writes the
# port to portfile (whole, by a rename) and serves each connection in a
# thread; the connection is closed when serve returns or raises EOFError or
# OSError
stub_serve_py() {
    cat <<'PYEOF'
import os, socket, threading
def serve_closed(c):
    try:
        serve(c)
    except (EOFError, OSError):  # the peer closed or reset: the connection ends
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(128)
with open(portfile + ".t", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(portfile + ".t", portfile)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve_closed, args=(c,), daemon=True).start()
PYEOF
}
# stub_start MODE [ARG]...: run $TMP/srv.py MODE $TMP/port ARG... and wait
# (bounded) for its port: STUB_PORT; it is PID, so cleanup ends it
SRV=
stub_start() {
    rm -f "$TMP/port"
    $PY "$TMP/srv.py" "$1" "$TMP/port" "${@:2}" 2>"$TMP/err" &
    SRV=$!
    PID=$SRV
    local i
    for ((i = 0; i < 500 * SCALE; i++)); do
        [[ -s $TMP/port ]] && break
        kill -0 "$SRV" 2>/dev/null || fail "server $1 exited"
        sleep 0.02
    done
    [[ -s $TMP/port ]] || fail "server $1 never started"
    STUB_PORT=$(cat "$TMP/port")
}
stub_stop() {
    kill -TERM "$SRV" 2>/dev/null || true
    wait "$SRV" 2>/dev/null || true
    PID=
}
