# bench_lib.sh -- shared set-up of the petrel-bench integration tests
# (sourced, not run; also by the tests that run other servers): start/stop petrel with an access log, read
# petrel-bench's JSON, bounded waits.
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
bench() { timeout $((60 * SCALE)) "$BENCH" "$@"; }
