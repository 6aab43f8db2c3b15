#!/usr/bin/env bash
# h2-instr.sh -- user-space instructions (callgrind) per echoed WebSocket
# message over HTTP/2 (RFC 8441, Extended CONNECT on h2c) against the same
# over HTTP/1.1: petrel's wsecho module, 10 WebSockets (over h2c: 10
# streams of one connection; over HTTP/1.1: 10 connections), one 100-byte
# binary message in flight, the same client for both (h2echo.py:
# python3-wsproto frames, python3-h2 for h2c).  The server runs twice per
# protocol, with N1 and N2 messages, and Ir/message = (Ir(N2) - Ir(N1)) /
# (N2 - N1): start-up and the set-up of the WebSockets cancel out.  Then
# petrel-bench's own WebSocket mode over HTTP/1.1 (-c 10 -m 1) as a second
# anchor, measured the same way.  Server and client share CPU 0, as
# fanout.sh and ../shared/bench/instr.sh do.
#
#   tests/ws-bench/h2-instr.sh [N1 [N2]]   (after a build in build/; PETREL,
#                                          PETREL_BENCH override the programs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PETREL=${PETREL:-$here/../../build/src/petrel}
BENCH=${PETREL_BENCH:-$(dirname "$PETREL")/bench/petrel-bench}
PY=${PETREL_PYTHON:-/usr/bin/python3}
n1=${1:-2000} n2=${2:-12000}
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 3000); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.02; done
    echo "port $1 never opened" >&2; exit 1
}

# run_cg CLIENT N: the total Ir of a server that echoed N messages to CLIENT
run_cg() {
    local client=$1 n=$2 p out=$tmp/cg-$1-$2
    mkdir -p "$out"
    p=$(port)
    taskset -c 0 valgrind --tool=callgrind -q --callgrind-out-file="$out/callgrind.out.%p" \
        "$PETREL" --listen "127.0.0.1:$p" --module wsecho --log-level error >"$out/server.log" 2>&1 &
    local sp=$!
    pids+=($sp)
    wait_port "$p"
    case $client in
    h2 | h1) taskset -c 0 "$PY" "$here/h2echo.py" "$client" "$p" -c 10 -n "$n" -s 100 >"$out/client.out" ;;
    bench) taskset -c 0 "$BENCH" -c 10 -m 1 -n "$n" --timeout 600s --body-size 100 --binary --json \
        "ws://127.0.0.1:$p/ws" >"$out/client.out" ;;
    esac
    kill -TERM "$sp"
    wait "$sp" || true
    awk '/^totals:/ { t += $2 } END { printf "%.0f\n", t }' "$out"/callgrind.out.*
}

declare -A per
for client in h2 h1 bench; do
    a=$(run_cg $client "$n1")
    b=$(run_cg $client "$n2")
    per[$client]=$(awk -v a="$a" -v b="$b" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (b - a) / d }')
    echo "$client: Ir(N=$n1) $a, Ir(N=$n2) $b; per echoed message: ${per[$client]}"
done
awk -v a="${per[h2]}" -v b="${per[h1]}" -v c="${per[bench]}" 'BEGIN {
    printf "over h2c: %.2fx the instructions per message of HTTP/1.1 (same client), %.2fx petrel-bench'"'"'s HTTP/1.1 run\n", a / b, a / c }'
