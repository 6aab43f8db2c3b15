#!/usr/bin/env bash
# run.sh -- WebSocket echo round trips of petrel's wsecho and of the
# python3-websockets echo server, run the same way: one server process
# (petrel --workers 1), wsbench with 100 connections, one message in flight
# each, 32-byte text messages (override with WSBENCH_ARGS), 10 s after a 1 s
# warm-up; the server pinned to CPU 0 and the client to CPU 1 (taskset), as
# ../shared/bench/peers.sh does.  Prints one line per server;
# doc/benchmarks.md records them.
#   tests/ws-bench/run.sh [PETREL]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PETREL=${1:-${PETREL:-$here/../../build/src/petrel}}
PY=${PETREL_PYTHON:-/usr/bin/python3}
args=(${WSBENCH_ARGS:--c 100 -d 10 -w 1 -s 32})
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

cc -O2 -pthread -o "$tmp/wsbench" "$here/wsbench.c"
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
    awk -v who="$1" '{ v[$1] = $2 } END {
        printf "%-22s %9s msg/s   p50 %6s us   p99 %6s us   max %6s us   errors %s\n",
               who, v["msgs_per_sec"], v["p50_us"], v["p99_us"], v["max_us"], v["errors"] }' "$2"
}

p=$(port)
"${srv_cpu[@]}" "$PETREL" --listen "127.0.0.1:$p" --workers 1 --log-level error --module wsecho &
pids+=($!)
wait_port "$p"
"${cli_cpu[@]}" "$tmp/wsbench" "${args[@]}" 127.0.0.1 "$p" /ws >"$tmp/petrel.out"
report "petrel wsecho" "$tmp/petrel.out"

p=$(port)
"${srv_cpu[@]}" "$PY" "$here/py_echo_server.py" "$p" >/dev/null 2>&1 &
pids+=($!)
wait_port "$p"
"${cli_cpu[@]}" "$tmp/wsbench" "${args[@]}" 127.0.0.1 "$p" / >"$tmp/py.out"
report "python3-websockets" "$tmp/py.out"
