#!/usr/bin/env bash
# sweep-diag.sh -- where an open-loop run's tail comes from: one
# `petrel-bench --rate` run against a running server, with what its
# process(es) did meanwhile.
#
#   tools/sweep-diag.sh [--gen-cpu C] [-d S] PID RATE URL [petrel-bench options...]
#
# PID is the server's process group (its master, started with setsid, as
# tools/sweep-peers.sh starts them); RATE the requests per second asked.
# petrel-bench runs pinned to --gen-cpu (default 1) with -t 1 -c 100 -d S
# (default 3) --warmup 1 and the options given (e.g. --h2 -m 16).  Printed,
# one line each:
#   latency     p50, p90, p99, p99.9, max (from the intended send times),
#               the rate achieved, the client's largest lag and its read
#               delay p99 (how long answers waited unread in its sockets);
#   turns       the server's event-loop turns (epoll_wait calls returning
#               events) per second, and the events one turn handled: mean,
#               p50, p99, max (perf, tracepoint syscalls:sys_exit_epoll_wait);
#   syscalls    per request: epoll_wait, read/recvfrom, write/writev/sendmsg;
#   scheduler   for the server's processes and for petrel-bench: the time
#               they were runnable but waited for their CPU (run-queue wait,
#               /proc/PID/schedstat), and involuntary context switches,
#               over the run; the CPU time of the kernel's softirq threads
#               (ksoftirqd/N: network work deferred from the interrupted
#               process to a thread that must be scheduled like any other);
#               and how busy each core was.
# Needs perf (Debian package linux-perf) and root (or perf_event_paranoid
# <= 1); environment PETREL_BENCH as for tools/sweep-peers.sh.
set -u -o pipefail

BENCH=${PETREL_BENCH:-build/src/bench/petrel-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
GEN_CPU=1 DUR=3
die() { echo "sweep-diag.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --gen-cpu) GEN_CPU=${2:?--gen-cpu needs a value}; shift 2 ;;
    -d) DUR=${2:?-d needs a value}; shift 2 ;;
    -h | --help) sed -n '2,25s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
[ $# -ge 3 ] || { sed -n '2,25s/^# \{0,1\}//p' "$0" >&2; exit 2; }
PG=$1 RATE=$2 URL=$3
shift 3
[[ $PG =~ ^[0-9]+$ ]] && kill -0 "$PG" 2>/dev/null || die "no process $PG"
[ -x "$BENCH" ] || die "no petrel-bench at $BENCH"
command -v perf >/dev/null || die "perf not found (Debian package linux-perf)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweep-diag.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$TMP"' EXIT

# the threads of process group PG: "tid ..." (task dirs of every process in it)
tasks() {
    local f line rest
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        rest=${line##*) }
        set -- $rest
        [ "$3" = "$PG" ] && ls -d "${f%/stat}"/task/[0-9]* 2>/dev/null
    done
}
# sum over task dirs: run-queue wait (ns) and involuntary switches
sched_sum() {
    local t w=0 n=0 a b c v
    for t in "$@"; do
        read -r a b c <"$t/schedstat" 2>/dev/null || continue
        v=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null) || continue
        w=$((w + b)) n=$((n + ${v:-0}))
    done
    echo "$w $n"
}
cpu_snap() { awk '$1 ~ /^cpu[0-9]+$/ { printf "%s %d %d ", $1, $2 + $3 + $4, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

mapfile -t T < <(tasks)
[ ${#T[@]} -gt 0 ] || die "no processes in process group $PG"
PIDS=$(printf '%s\n' "${T[@]}" | sed 's,^/proc/\([0-9]*\)/task/\([0-9]*\)$,\2,' | paste -sd,)

perf record -q -e syscalls:sys_exit_epoll_wait -t "$PIDS" -o "$TMP/turns.data" \
    -- sleep $((DUR + 2)) 2>"$TMP/perf-rec.err" &
prec=$!
perf stat -x, -e syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom \
    -e syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendmsg \
    -t "$PIDS" -o "$TMP/stat.csv" -- sleep $((DUR + 2)) &
pstat=$!
sleep 0.3
ksoft() { # "ksoftirqd/N:ticks ..." (utime + stime)
    local f line
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        case $line in *"(ksoftirqd/"*) ;; *) continue ;; esac
        set -- ${line##*) }
        line=${line#*\(}
        echo -n "${line%%)*}:$((${12} + ${13})) "
    done
}
s0=$(sched_sum "${T[@]}") c0=$(cpu_snap) k0=$(ksoft)
taskset -c "$GEN_CPU" "$BENCH" -t 1 -c 100 -d "$DUR" --warmup 1 --rate "$RATE" --json "$@" "$URL" \
    >"$TMP/bench.json" 2>"$TMP/bench.err" &
bpid=$!
declare -A W0 N0 W1 N1 # petrel-bench's threads: first and last readings (they vanish with it)
while kill -0 $bpid 2>/dev/null; do
    for t in /proc/$bpid/task/[0-9]*; do
        read -r _ w _ <"$t/schedstat" 2>/dev/null || continue
        v=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null) || continue
        [ -n "${W0[$t]:-}" ] || W0[$t]=$w N0[$t]=${v:-0}
        W1[$t]=$w N1[$t]=${v:-0}
    done
    sleep 0.05
done
b0="0 0" last="0 0"
for t in "${!W0[@]}"; do
    b0="$(( ${b0% *} + W0[$t] )) $(( ${b0#* } + N0[$t] ))"
    last="$(( ${last% *} + W1[$t] )) $(( ${last#* } + N1[$t] ))"
done
wait $bpid
brc=$?
s1=$(sched_sum "${T[@]}") c1=$(cpu_snap) k1=$(ksoft)
wait $prec $pstat
[ $brc = 0 ] || [ $brc = 3 ] || { cat "$TMP/bench.err" >&2; die "petrel-bench exited $brc"; }
perf script -i "$TMP/turns.data" -F event,trace 2>/dev/null | sed -n 's/.*0x\([0-9a-f]*\)$/\1/p' >"$TMP/turns.txt"

"$PYTHON" - "$TMP" "$s0" "$s1" "$b0" "$last" "$c0" "$c1" "$DUR" "$k0" "$k1" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
tmp, s0, s1, b0, b1, c0, c1, dur, k0, k1, hz = sys.argv[1:12]
dur = float(dur)
r = json.load(open(tmp + "/bench.json"))
lat, rate = r["latency_us"], r["rate"]
def t(us):
    return "%.0f µs" % us if us < 1000 else "%.2f ms" % (us / 1e3)
print("latency    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s; %.0f req/s achieved of %.0f; "
      "client lag max %s, read delay p99 %s" % (t(lat["p50"]), t(lat["p90"]), t(lat["p99"]),
      t(lat["p999"]), t(lat["max"]), rate["achieved"], rate["asked"], t(r["lag_us"]["max"]),
      t(r["read_delay_us"]["p99"])))
n = sorted(int(x, 16) for x in open(tmp + "/turns.txt") if x.strip())
n = [x for x in n if 0 < x < 2**31]
if n:
    q = lambda p: n[min(len(n) - 1, int(len(n) * p))]
    print("turns      %d with events in %.1f s (%.0f/s); events per turn mean %.1f, p50 %d, "
          "p99 %d, max %d" % (len(n), dur + 2, len(n) / (dur + 2), sum(n) / len(n), q(0.5),
                              q(0.99), n[-1]))
cnt = {}
for line in open(tmp + "/stat.csv"):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        cnt[f[2].split(":")[-1].replace("sys_enter_", "")] = int(f[0])
# perf counted over the whole run, its second of warm-up included
reqs = max(1.0, rate["achieved"] * (dur + 1))
rd = cnt.get("read", 0) + cnt.get("recvfrom", 0)
wr = cnt.get("write", 0) + cnt.get("writev", 0) + cnt.get("sendmsg", 0)
print("syscalls   per request (approx.): epoll_wait %.2f, read %.2f, write %.2f" %
      (cnt.get("epoll_wait", 0) / reqs, rd / reqs, wr / reqs))
w0, n0 = map(int, s0.split()); w1, n1 = map(int, s1.split())
bw0, bn0 = map(int, b0.split()); bw1, bn1 = map(int, b1.split())
def cpus(s):
    f = s.split(); return {f[i]: (int(f[i + 1]), int(f[i + 2])) for i in range(0, len(f), 3)}
a, b = cpus(c0), cpus(c1)
busy = ", ".join("%s %.0f %%" % (k, 100 * (b[k][0] - a[k][0]) / max(1, b[k][1] - a[k][1])) for k in sorted(a))
print("scheduler  server: run-queue wait %.1f ms, %d involuntary switches; petrel-bench: "
      "%.1f ms, %d; cores busy (all processes): %s" %
      ((w1 - w0) / 1e6, n1 - n0, (bw1 - bw0) / 1e6, bn1 - bn0, busy))
ka = dict(x.split(":") for x in k0.split()); kb = dict(x.split(":") for x in k1.split())
print("softirq    " + ", ".join("%s %.0f ms" % (k, (int(kb[k]) - int(ka[k])) * 1000 / int(hz))
                                for k in sorted(kb) if k in ka) + " of CPU over the run")
EOF
