#!/usr/bin/env bash
# instr-paths.sh -- user-space instructions per request of some paths of
# one petrel command, by the method of the shared benchmark's instr.sh:
# petrel runs under valgrind --tool=callgrind and gets exactly N1, then (a
# fresh server) N2 requests of a path from petrel-bench (10 keep-alive
# connections, on the server's CPU), and
#     Ir/request = (Ir(N2) - Ir(N1)) / (N2 - N1)
# summed over every process of petrel (master and worker), so that
# start-up, connections and shutdown cancel out.  instr.sh itself only asks
# for /hello; this asks for any path of the same server.
#
# usage: tools/instr-paths.sh [--n1 N] [--n2 N] [--cpu C] -- PETREL-ARGS... -- PATH...
#   tools/instr-paths.sh -- --module hello --module tfb -- /hello /json /plaintext
set -euo pipefail

N1=1600 N2=12800 CPU=0 PORT=28979
here=$(cd "$(dirname "$0")" && pwd)
PETREL=${PETREL:-$here/../build/src/petrel}
BENCH=${BENCH:-$here/../build/src/bench/petrel-bench}
while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
    --n1) N1=$2 ;;
    --n2) N2=$2 ;;
    --cpu) CPU=$2 ;;
    *) echo "instr-paths.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
[[ ${1:-} == -- ]] || { sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 2; }
shift
args=()
while [[ $# -gt 0 && $1 != -- ]]; do args+=("$1"); shift; done
[[ ${1:-} == -- ]] || { echo "instr-paths.sh: no paths (after a second --)" >&2; exit 2; }
shift
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ir() { # PATH N -> the Ir of all of petrel's processes
    local dir=$TMP/$RANDOM pid
    mkdir -p "$dir"
    taskset -c "$CPU" valgrind --tool=callgrind -q --callgrind-out-file="$dir/cg.%p" \
        "$PETREL" --listen "127.0.0.1:$PORT" --workers 1 --log-level error "${args[@]}" \
        >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.05
    done
    taskset -c "$CPU" "$BENCH" -c 10 -n "$2" --fail-on-error "http://127.0.0.1:$PORT$1" >"$dir/bench" ||
        { echo "instr-paths.sh: $1: $(tail -3 "$dir/bench")" >&2; exit 1; }
    kill -TERM "$pid"
    wait "$pid" || true
    awk '/^totals:/ { t += $2 } END { printf "%.0f\n", t }' "$dir"/cg.*
}

echo "| path | Ir/request |"
echo "|---|---:|"
for p in "$@"; do
    a=$(ir "$p" "$N1")
    b=$(ir "$p" "$N2")
    awk -v p="$p" -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" \
        'BEGIN { printf "| %s | %.0f |\n", p, (b - a) / (n2 - n1) }'
done
