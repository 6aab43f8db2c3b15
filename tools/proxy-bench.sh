#!/usr/bin/env bash
# proxy-bench.sh -- the cost of the PROXY protocol stage on the `close`
# workload (a new connection for every request, as a load balancer that
# does not keep connections open makes), with and without a header.
#
#   tools/proxy-bench.sh instr [N1 N2]   callgrind: user-space instructions
#       per request of petrel, (Ir(N2) - Ir(N1)) / (N2 - N1), for no header,
#       a v1 and a v2 header (petrel-bench --close --proxy v1|v2, 4 at a
#       time); the same method as instr.sh.  Default N1 = 2000, N2 = 10000.
#   tools/proxy-bench.sh wall [ROUNDS [SECONDS]]   requests per second,
#       petrel (one worker) on CPU 0, petrel-bench (-c 16 --close) on CPU 1,
#       the three kinds interleaved ROUNDS times (default 7 x 5 s, after a
#       1 s warm-up each); prints every run and the medians.
#   tools/proxy-bench.sh cpu [ROUNDS [N]]   the CPU time (user + system, from
#       /proc) petrel's worker spends per request over N requests (default
#       7 rounds of 60000), the kernel's work for each connection included:
#       less sensitive than req/s to a machine that others share.
#
# Environment: PETREL (default build/src/petrel), PETREL_BENCH (default
# build/src/bench/petrel-bench), PORT (default 28521).
set -euo pipefail

PETREL=${PETREL:-build/src/petrel}
BENCH=${PETREL_BENCH:-build/src/bench/petrel-bench}
PORT=${PORT:-28521}
mode=${1:-}
[[ $mode == instr || $mode == wall || $mode == cpu ]] || {
    sed -n '2,21s/^# \{0,1\}//p' "$0" >&2
    exit 2
}
[[ -x $PETREL && -x $BENCH ]] || { echo "proxy-bench.sh: no $PETREL or $BENCH" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/proxy-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

args_for() { # kind -> SERVER_ARGS, CLIENT_ARGS
    case $1 in
    none) SERVER_ARGS=() CLIENT_ARGS=() ;;
    *) SERVER_ARGS=(--proxy-protocol) CLIENT_ARGS=(--proxy "$1") ;;
    esac
}

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "proxy-bench.sh: petrel did not start" >&2
    exit 1
}

# one run: kind n-or-duration prefix... -> the total Ir (instr) or req/s (wall)
run() {
    local kind=$1 what=$2 pid
    shift 2
    args_for "$kind"
    "$@" "$PETREL" --listen "127.0.0.1:$PORT" --module hello --log-level error \
        "${SERVER_ARGS[@]}" &
    pid=$!
    wait_port
    if [[ $mode == instr ]]; then
        taskset -c 1 "$BENCH" --close -c 4 -n "$what" --json --fail-on-error "${CLIENT_ARGS[@]}" \
            "http://127.0.0.1:$PORT/hello" >"$tmp/b.json"
    elif [[ $mode == cpu ]]; then
        local w t0 t1
        w=$(pgrep -P "$pid")
        t0=$(awk '{ print $14 + $15 }' "/proc/$w/stat")
        taskset -c 1 "$BENCH" --close -c 16 -n "$what" --json --fail-on-error "${CLIENT_ARGS[@]}" \
            "http://127.0.0.1:$PORT/hello" >"$tmp/b.json"
        t1=$(awk '{ print $14 + $15 }' "/proc/$w/stat")
        echo "$t0 $t1" >"$tmp/ticks"
    else
        taskset -c 1 "$BENCH" --close -c 16 -d "${what}s" --warmup 1s --json --fail-on-error \
            "${CLIENT_ARGS[@]}" "http://127.0.0.1:$PORT/hello" >"$tmp/b.json"
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    if [[ $mode == instr ]]; then
        awk '/^totals:/ { t += $2 } END { printf "%.0f\n", t }' "$tmp"/cg.*
        rm -f "$tmp"/cg.*
    elif [[ $mode == cpu ]]; then
        awk -v n="$what" -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($2 - $1) * 1e6 / hz / n }' "$tmp/ticks"
    else
        sed -n 's/.*"rps":\([0-9.]*\).*/\1/p' "$tmp/b.json"
    fi
}

if [[ $mode == instr ]]; then
    N1=${2:-2000} N2=${3:-10000}
    CG=(taskset -c 0 valgrind --tool=callgrind -q --trace-children=yes
        "--callgrind-out-file=$tmp/cg.%p")
    printf 'kind\tIr/request\n'
    for kind in none v1 v2; do
        a=$(run "$kind" "$N1" "${CG[@]}")
        b=$(run "$kind" "$N2" "${CG[@]}")
        awk -v k="$kind" -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" \
            'BEGIN { printf "%s\t%.1f\n", k, (b - a) / (n2 - n1) }'
    done
else
    ROUNDS=${2:-7}
    if [[ $mode == cpu ]]; then WHAT=${3:-60000} UNIT="us CPU/request"; else WHAT=${3:-5} UNIT="req/s"; fi
    for r in $(seq "$ROUNDS"); do
        for kind in none v1 v2; do
            v=$(run "$kind" "$WHAT" taskset -c 0)
            printf '%s\t%s\t%s\n' "$r" "$kind" "$v" | tee -a "$tmp/runs"
        done
    done
    for kind in none v1 v2; do
        awk -v k="$kind" '$2 == k { print $3 }' "$tmp/runs" | sort -n |
            awk -v k="$kind" -v u="$UNIT" '{ v[NR] = $1 } END { printf "median %s\t%.2f %s (min %.2f, max %.2f)\n", k, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), u, v[1], v[NR] }'
    done
fi
