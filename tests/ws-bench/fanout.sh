#!/usr/bin/env bash
# fanout.sh -- the publish/subscribe benchmarks of doc/benchmarks.md: petrel's
# `topics` module, subscribers and stamped publishers of wssub.c, the
# publisher of the throughput runs petrel-bench's WebSocket mode (subscribed
# to its own topic, so each message comes back to it like an echo).
#
#   fanout.sh instr [SUBS [WORKERS]]
#       user-space instructions (callgrind) per delivered message: SUBS
#       subscribers (default 10000), one publisher with one message of 100
#       bytes in flight; the server runs twice, with N1 and N2 messages,
#       and Ir/delivery = (Ir(N2) - Ir(N1)) / ((N2 - N1) x (SUBS + 1)), so
#       start-up and the connections' set-up cancel out.  Then the anchor,
#       petrel's own unicast echo (the wsecho module, 10 connections, 100-byte
#       messages) measured the same way: Ir per echoed message.  Server and
#       clients share CPU 0 (as ../shared/bench/instr.sh does: repeatable).
#   fanout.sh h2 [N1 [N2]]
#       WebSocket over HTTP/2 (RFC 8441): user-space instructions per echoed
#       message over h2c against HTTP/1.1, the wsecho module, 10
#       WebSockets (over h2c: 10 streams of one connection; over HTTP/1.1:
#       10 connections), one 100-byte binary message in flight, the same
#       client for both (h2echo.py: python3-wsproto frames, python3-h2 for
#       h2c), then petrel-bench's HTTP/1.1 run (-c 10 -m 1) as a second
#       anchor; N1 and N2 messages (default 2000 and 12000), measured as in
#       `instr`.
#   fanout.sh rate [SUBS [WORKERS [INFLIGHT]]]
#       messages delivered per second: the server (WORKERS workers, default
#       1) pinned to CPU 0, the clients to CPU 1, SUBS subscribers, the
#       publisher with INFLIGHT messages in flight (default 16), 2000
#       messages; with the server's CPU time per million deliveries.
#   fanout.sh echo
#       the anchor of `rate`: petrel's unicast echo (wsecho), 100 connections
#       with 16 messages of 100 bytes in flight each for 10 s, pinned the same
#       way: echoes per second and the server's CPU time per million.
#   fanout.sh latency MODE [SUBS] [RATE]
#       latency from publisher to subscriber (p50, p99) of stamped
#       100-byte messages at RATE a second (default 1000) for 10 s, SUBS
#       subscribers (default 100) on each side: MODE workers -- one instance
#       of 2 workers, subscribers (spread by the kernel) vs one worker
#       alone; MODE redis -- two instances joined by a redis-server started
#       here, subscribers on the publisher's instance vs on the other.
#
#   tests/ws-bench/fanout.sh MODE ... (from the source tree, after a build in
#   build/; PETREL, PETREL_BENCH, REDIS_SERVER override the programs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PETREL=${PETREL:-$here/../../build/src/petrel}
BENCH=${PETREL_BENCH:-$(dirname "$PETREL")/bench/petrel-bench}
PY=${PETREL_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
pids=()
echo_binary=
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
cc -O2 -o "$tmp/wssub" "$here/wssub.c"
WSSUB=$tmp/wssub
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 3000); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.02; done
    echo "port $1 never opened" >&2; exit 1
}
wait_ready() { # FILE: wssub's stderr says "ready"
    for _ in $(seq 30000); do grep -q '^ready' "$1" && return 0; sleep 0.02; done
    echo "the subscribers never got ready: $(cat "$1")" >&2; exit 1
}
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$2"; }
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }

# --- instructions -------------------------------------------------------------
# run_cg N SUBS WORKERS: the total Ir of a server that delivered N messages
run_cg() {
    local n=$1 subs=$2 workers=$3 p out=$tmp/cg-$1
    mkdir -p "$out"
    p=$(port)
    taskset -c 0 valgrind --tool=callgrind -q --trace-children=yes \
        --callgrind-out-file="$out/callgrind.out.%p" "$PETREL" --listen "127.0.0.1:$p" \
        --workers "$workers" --module topics --max-connections 30000 --log-level error \
        >"$out/server.log" 2>&1 &
    local sp=$!
    pids+=($sp)
    wait_port "$p"
    taskset -c 0 "$WSSUB" -c "$subs" -n "$n" -d 3600 127.0.0.1 "$p" '/topics?sub=bench' \
        >"$out/subs.out" 2>"$out/subs.err" &
    local wp=$!
    wait_ready "$out/subs.err"
    taskset -c 0 "$BENCH" -c 1 -m 1 -n "$n" --timeout 600s --body-size 100 --json \
        "ws://127.0.0.1:$p/topics?sub=bench&pub=bench" >"$out/bench.json"
    wait "$wp"
    kill -TERM "$sp"
    wait "$sp" || true
    awk '/^totals:/ { t += $2 } END { printf "%.0f\n", t }' "$out"/callgrind.out.*
}

run_cg_echo() { # N [CLIENT: bench (default), h1 or h2 (h2echo.py)]
    local n=$1 client=${2:-bench} p out=$tmp/cge-$1-${2:-bench}
    mkdir -p "$out"
    p=$(port)
    taskset -c 0 valgrind --tool=callgrind -q --callgrind-out-file="$out/callgrind.out.%p" \
        "$PETREL" --listen "127.0.0.1:$p" --module wsecho --log-level error >"$out/server.log" 2>&1 &
    local sp=$!
    pids+=($sp)
    wait_port "$p"
    if [[ $client == bench ]]; then
        taskset -c 0 "$BENCH" -c 10 -m 1 -n "$n" --timeout 600s --body-size 100 --json \
            ${echo_binary:+--binary} "ws://127.0.0.1:$p/ws" >"$out/bench.json"
    else
        taskset -c 0 "$PY" "$here/h2echo.py" "$client" "$p" -c 10 -n "$n" -s 100 >"$out/client.out"
    fi
    kill -TERM "$sp"
    wait "$sp" || true
    awk '/^totals:/ { t += $2 } END { printf "%.0f\n", t }' "$out"/callgrind.out.*
}

mode=${1:-}
case $mode in
instr)
    subs=${2:-10000} workers=${3:-1}
    n1=20 n2=120
    a=$(run_cg $n1 "$subs" "$workers")
    b=$(run_cg $n2 "$subs" "$workers")
    per=$(awk -v a="$a" -v b="$b" -v d=$((n2 - n1)) -v s=$((subs + 1)) 'BEGIN { printf "%.0f", (b - a) / (d * s) }')
    permsg=$(awk -v a="$a" -v b="$b" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (b - a) / d }')
    e1=2000 e2=12000
    ea=$(run_cg_echo $e1)
    eb=$(run_cg_echo $e2)
    echo_per=$(awk -v a="$ea" -v b="$eb" -v d=$((e2 - e1)) 'BEGIN { printf "%.0f", (b - a) / d }')
    echo "fan-out: $subs subscribers (+1 publisher), $workers worker(s): Ir(N=$n1) $a, Ir(N=$n2) $b"
    echo "  Ir per published message: $permsg; per delivered message: $per"
    echo "echo (wsecho, 10 connections): Ir(N=$e1) $ea, Ir(N=$e2) $eb; per echoed message: $echo_per"
    awk -v a="$per" -v b="$echo_per" 'BEGIN { printf "a delivered message costs %.2fx an echoed one\n", a / b }'
    ;;
h2)
    n1=${2:-2000} n2=${3:-12000}
    echo_binary=1 # as h2echo.py sends
    declare -A per
    for client in h2 h1 bench; do
        a=$(run_cg_echo "$n1" $client)
        b=$(run_cg_echo "$n2" $client)
        per[$client]=$(awk -v a="$a" -v b="$b" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (b - a) / d }')
        echo "$client: Ir(N=$n1) $a, Ir(N=$n2) $b; per echoed message: ${per[$client]}"
    done
    awk -v a="${per[h2]}" -v b="${per[h1]}" -v c="${per[bench]}" 'BEGIN { printf "over h2c: %.2fx the Ir per message of HTTP/1.1 (same client); %.2fx petrel-bench'"'"'s HTTP/1.1 run\n", a / b, a / c }'
    ;;
rate)
    subs=${2:-10000} workers=${3:-1} inflight=${4:-16} n=2000
    p=$(port)
    taskset -c 0 "$PETREL" --listen "127.0.0.1:$p" --workers "$workers" --module topics \
        --max-connections 30000 --log-level error &
    sp=$!
    pids+=($sp)
    wait_port "$p"
    mapfile -t w < <(pgrep -P "$sp")
    taskset -c 1 "$WSSUB" -c "$subs" -n "$n" -d 600 127.0.0.1 "$p" '/topics?sub=bench' \
        >"$tmp/subs.out" 2>"$tmp/subs.err" &
    wp=$!
    wait_ready "$tmp/subs.err"
    t0=$(cpu_ticks "${w[@]}")
    taskset -c 1 "$BENCH" -c 1 -m "$inflight" -n "$n" --timeout 600s --body-size 100 --json \
        "ws://127.0.0.1:$p/topics?sub=bench&pub=bench" >"$tmp/bench.json"
    wait "$wp"
    t1=$(cpu_ticks "${w[@]}")
    msgs=$(field messages "$tmp/subs.out")
    rate=$(field msgs_per_sec "$tmp/subs.out")
    hz=$(getconf CLK_TCK)
    echo "fan-out: $subs subscribers, $workers worker(s), $inflight in flight, $n messages of 100 bytes"
    echo "  delivered $msgs to the subscribers (+ $n to the publisher) at $rate messages/s"
    awk -v t=$((t1 - t0)) -v hz="$hz" -v m="$msgs" -v n="$n" 'BEGIN {
        printf "  server CPU: %.2f s, %.2f s per million deliveries\n", t / hz, t / hz / ((m + n) / 1e6) }'
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); l = r["latency_us"]
print("  publisher: %.0f messages/s, round trip p50 %.0f us, p99 %.0f us, errors %d"
      % (r["rps"], l["p50"], l["p99"], r["errors"]["total"]))' "$tmp/bench.json"
    ;;
echo)
    p=$(port)
    taskset -c 0 "$PETREL" --listen "127.0.0.1:$p" --module wsecho --log-level error &
    sp=$!
    pids+=($sp)
    wait_port "$p"
    mapfile -t w < <(pgrep -P "$sp")
    t0=$(cpu_ticks "${w[@]}")
    taskset -c 1 "$BENCH" -c 100 -m 16 -d 10 --body-size 100 --json "ws://127.0.0.1:$p/ws" \
        >"$tmp/bench.json"
    t1=$(cpu_ticks "${w[@]}")
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
t = int(sys.argv[2]) / int(sys.argv[3]); n = r["rps"] * r["duration_s"] if "duration_s" in r else r["rps"] * 10
print("echo: %.0f messages/s (100 connections, 16 in flight each); server CPU %.2f s, %.2f s per million echoes"
      % (r["rps"], t, t / (n / 1e6)))' "$tmp/bench.json" $((t1 - t0)) "$(getconf CLK_TCK)"
    ;;
latency)
    what=${2:-workers} subs=${3:-100} rate=${4:-1000}
    if [[ $what == redis ]]; then
        REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server)}
        rp=$(port)
        "$REDIS_SERVER" --port "$rp" --bind 127.0.0.1 --save '' --appendonly no \
            --daemonize no --dir "$tmp" --logfile "$tmp/redis.log" &
        pids+=($!)
        wait_port "$rp"
        near=$(port) far=$(port)
        for q in $near $far; do
            taskset -c 0 "$PETREL" --listen "127.0.0.1:$q" --module topics --log-level error \
                --pubsub-redis "127.0.0.1:$rp" &
            pids+=($!)
            wait_port "$q"
        done
        labels=("subscribers on the publisher's instance" "subscribers on the other instance, through Redis")
    else
        near=$(port) far=$(port)
        taskset -c 0 "$PETREL" --listen "127.0.0.1:$near" --module topics --log-level error &
        pids+=($!)
        taskset -c 0 "$PETREL" --listen "127.0.0.1:$far" --workers 2 --module topics --log-level error &
        pids+=($!)
        wait_port "$near"
        wait_port "$far"
        labels=("one worker: publisher and subscribers in it" "two workers: subscribers on both, the publisher on one")
    fi
    taskset -c 1 "$WSSUB" -c "$subs" -d 30 -n $((rate * 10)) 127.0.0.1 "$near" '/topics?sub=lat' \
        >"$tmp/near.out" 2>"$tmp/near.err" &
    n1=$!
    taskset -c 1 "$WSSUB" -c "$subs" -d 30 -n $((rate * 10)) 127.0.0.1 "$far" '/topics?sub=lat' \
        >"$tmp/far.out" 2>"$tmp/far.err" &
    n2=$!
    wait_ready "$tmp/near.err"
    wait_ready "$tmp/far.err"
    sleep 0.5 # Redis subscriptions confirmed
    # one publisher on the near side (with Redis, its messages reach the far
    # side through it); without Redis, one on each instance
    taskset -c 1 "$WSSUB" -p "$rate" -s 100 -n $((rate * 10)) 127.0.0.1 "$near" '/topics?pub=lat' \
        >/dev/null &
    p1=$!
    if [[ $what != redis ]]; then
        taskset -c 1 "$WSSUB" -p "$rate" -s 100 -n $((rate * 10)) 127.0.0.1 "$far" '/topics?pub=lat' \
            >/dev/null
    fi
    wait "$p1"
    wait "$n1" "$n2" || true
    echo "latency, $rate stamped messages of 100 bytes a second for 10 s, $subs subscribers each:"
    printf '  %-58s p50 %5s us  p99 %6s us  max %6s us  (%s messages)\n' "${labels[0]}" \
        "$(field p50_us "$tmp/near.out")" "$(field p99_us "$tmp/near.out")" \
        "$(field max_us "$tmp/near.out")" "$(field messages "$tmp/near.out")"
    printf '  %-58s p50 %5s us  p99 %6s us  max %6s us  (%s messages)\n' "${labels[1]}" \
        "$(field p50_us "$tmp/far.out")" "$(field p99_us "$tmp/far.out")" \
        "$(field max_us "$tmp/far.out")" "$(field messages "$tmp/far.out")"
    ;;
*)
    sed -n '2,30s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
