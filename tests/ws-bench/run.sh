#!/usr/bin/env bash
# run.sh -- WebSocket echo round trips of petrel's wsecho and of the
# python3-websockets echo server, measured the same way with petrel-bench's
# WebSocket mode: one server process (petrel --workers 1), 100 connections,
# one message in flight each, 32-byte text messages (override with
# BENCH_ARGS, e.g. '-c 100 -m 4 -d 10 --warmup 1s --body-size 4096 --binary'),
# 10 s after a 1 s warm-up; the server pinned to CPU 0 and the client to CPU 1
# (taskset), as ../shared/bench/peers.sh does.  Prints one line per server;
# doc/benchmarks.md records them.
#
# With WSBENCH=1 the older stand-alone client (wsbench.c, same workload, its
# own arguments in WSBENCH_ARGS) also measures petrel, for comparison.
#   tests/ws-bench/run.sh [PETREL [PETREL_BENCH]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PETREL=${1:-${PETREL:-$here/../../build/src/petrel}}
BENCH=${2:-${PETREL_BENCH:-$(dirname "$PETREL")/bench/petrel-bench}}
PY=${PETREL_PYTHON:-/usr/bin/python3}
args=(${BENCH_ARGS:--c 100 -d 10 --warmup 1s --body-size 32})
wargs=(${WSBENCH_ARGS:--c 100 -d 10 -w 1 -s 32})
[[ -x $BENCH ]] || { echo "petrel-bench not found: $BENCH" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

srv_cpu=() cli_cpu=()
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
    srv_cpu=(taskset -c 0) cli_cpu=(taskset -c 1)
fi
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 500); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.02; done
    echo "port $1 never opened" >&2; exit 1
}
report() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[2]))
l = r["latency_us"]
print("%-22s %9.0f msg/s   p50 %6.0f us   p99 %6.0f us   max %6.0f us   errors %d"
      % (sys.argv[1], r["rps"], l["p50"], l["p99"], l["max"], r["errors"]["total"]))
EOF
}
report_wsbench() {
    awk -v who="$1" '{ v[$1] = $2 } END {
        printf "%-22s %9s msg/s   p50 %6s us   p99 %6s us   max %6s us   errors %s\n",
               who, v["msgs_per_sec"], v["p50_us"], v["p99_us"], v["max_us"], v["errors"] }' "$2"
}

p=$(port)
"${srv_cpu[@]}" "$PETREL" --listen "127.0.0.1:$p" --workers 1 --log-level error --module wsecho &
pids+=($!)
wait_port "$p"
"${cli_cpu[@]}" "$BENCH" "${args[@]}" --json "ws://127.0.0.1:$p/ws" >"$tmp/petrel.json"
report "petrel wsecho" "$tmp/petrel.json"
if [[ ${WSBENCH:-0} == 1 ]]; then
    cc -O2 -pthread -o "$tmp/wsbench" "$here/wsbench.c"
    "${cli_cpu[@]}" "$tmp/wsbench" "${wargs[@]}" 127.0.0.1 "$p" /ws >"$tmp/wsbench.out" || true
    report_wsbench "petrel (wsbench.c)" "$tmp/wsbench.out"
fi

p=$(port)
"${srv_cpu[@]}" "$PY" "$here/py_echo_server.py" "$p" >/dev/null 2>&1 &
pids+=($!)
wait_port "$p"
"${cli_cpu[@]}" "$BENCH" "${args[@]}" --json "ws://127.0.0.1:$p/" >"$tmp/py.json"
report "python3-websockets" "$tmp/py.json"
