#!/usr/bin/env bash
# test_bench_rate_stall.sh -- petrel-bench --rate measures latency without
# coordinated omission: the real petrel, made to stall on purpose (its worker
# stopped with SIGSTOP for 200 ms once a second: nothing is read or answered
# meanwhile), driven at 400 requests/s, far below what it serves.
#   - open loop (--rate), over HTTP/1.1, h2c streams (-m) and WebSocket
#     messages: about a fifth of the requests fall due during a stall, so p99
#     shows it (>= 100 ms), and every request due in the window is counted;
#     the answers did not wait in the client's socket (its read delay);
#   - closed loop (the default): only the few requests in flight wait, and the
#     client sends nothing meanwhile, so p99 hides it (< 50 ms) although the
#     maximum shows one stall (>= 150 ms);
#   - wrk 4.1, as an independent estimate: it is closed-loop too, but after
#     the run it adds synthetic samples at its mean interval for every slow
#     response (stats_correct), which for a stall of the whole server gives
#     nearly the p99 that petrel-bench measures: the two must agree within a
#     factor of two.
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

command -v wrk >/dev/null || { echo "SKIP: wrk not found (Debian package wrk)"; exit 77; }

STALLER=
WORKERS=
stall_stop() {
    if [[ -n $STALLER ]]; then kill -TERM "$STALLER" 2>/dev/null; wait "$STALLER" 2>/dev/null || true; fi
    STALLER=
    local w
    for w in $WORKERS; do kill -CONT "$w" 2>/dev/null || true; done
}
trap 'stall_stop; cleanup' EXIT

start_petrel --module wsecho
WORKERS=$(ps -o pid= --ppid "$PID" | tr -d ' ')
[[ -n $WORKERS ]] || fail "no worker under petrel $PID"
# the staller: 800 ms running, 200 ms stopped, until it is ended
(
    trap 'kill -CONT $WORKERS 2>/dev/null; exit 0' TERM
    while :; do
        sleep 0.8
        kill -STOP $WORKERS
        sleep 0.2
        kill -CONT $WORKERS
    done
) &
STALLER=$!

us() { awk -v v="$1" 'BEGIN { printf "%d", v }'; }

# open loop: HTTP/1.1 (4 connections), h2c (1 connection, 4 streams),
# WebSocket (2 connections, 2 messages in flight each); 3 s = 1200 requests
open_run() { # name args...
    local name=$1
    shift
    bench --rate 400 -d 3 --max-lag 0 --json "$@" >"$TMP/$name" || fail "$name: exited $?"
    expect "$(jget "$TMP/$name" requests)" 1200 "$name: requests due in the window, all answered"
    expect "$(jget "$TMP/$name" rate.scheduled)" 1200 "$name: scheduled"
    expect "$(jget "$TMP/$name" errors.total)" 0 "$name: errors"
    local p50 p99
    p50=$(us "$(jget "$TMP/$name" latency_us.p50)")
    p99=$(us "$(jget "$TMP/$name" latency_us.p99)")
    echo "$name: open loop at 400/s: p50 ${p50} us, p99 ${p99} us, max $(us "$(jget "$TMP/$name" latency_us.max)") us, answers unread p99 $(us "$(jget "$TMP/$name" read_delay_us.p99)") us"
    ((p99 >= 100000)) || fail "$name: open-loop p99 ${p99} us does not show the 200 ms stalls"
    ((p50 < 50000)) || fail "$name: open-loop p50 ${p50} us: most requests are not in a stall"
    # the wait was the server's: the answers did not sit unread in the client
    local rd
    rd=$(us "$(jget "$TMP/$name" read_delay_us.p99)")
    ((rd < 50000)) || fail "$name: answers waited ${rd} us unread (p99) in the client"
}
open_run h1 -c 4 "$URL/hello"
open_run h2c -c 1 -m 4 "$URL/hello"
open_run ws -c 2 -m 2 "ws://127.0.0.1:$PORT/ws"

# closed loop, the same 4 connections for 3 s
bench -c 4 -d 3 --json "$URL/hello" >"$TMP/closed" || fail "closed loop: exited $?"
n=$(jget "$TMP/closed" requests)
p99=$(us "$(jget "$TMP/closed" latency_us.p99)")
max=$(us "$(jget "$TMP/closed" latency_us.max)")
echo "closed loop: $n requests, p99 ${p99} us, max ${max} us"
((max >= 150000)) || fail "closed loop: max ${max} us: no stall happened"
((p99 < 50000)) || fail "closed loop: p99 ${p99} us: the stall should hide in a handful of requests"

# wrk, closed loop with its after-the-fact correction
timeout $((30 * SCALE)) wrk -t1 -c4 -d3s --latency "$URL/hello" >"$TMP/wrk" 2>&1 || fail "wrk exited $?"
wrk99=$(awk '$1 == "99%" { v = $2
    if (v ~ /us$/) print int(v); else if (v ~ /ms$/) print int(v * 1000); else if (v ~ /s$/) print int(v * 1000000) }' "$TMP/wrk")
[[ -n $wrk99 ]] || { cat "$TMP/wrk"; fail "no 99% line from wrk"; }
open99=$(us "$(jget "$TMP/h1" latency_us.p99)")
echo "wrk (corrected after the run): p99 ${wrk99} us; petrel-bench open loop: ${open99} us"
((wrk99 * 2 >= open99 && wrk99 <= open99 * 2)) ||
    fail "wrk's corrected p99 ${wrk99} us and petrel-bench's measured ${open99} us disagree"

stall_stop
echo "PASS: test_bench_rate_stall"
