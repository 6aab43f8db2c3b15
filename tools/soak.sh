#!/usr/bin/env bash
# soak.sh -- run petrel under a mixed load for a long time and check that its
# memory stays flat and that no request fails.
#
#   tools/soak.sh [--seconds N] [--workers N] [--build DIR] [--out DIR] ...
#
# It starts a release petrel (pinned with taskset to --server-cpus) with the
# hello, echo and wsecho modules and a document root of generated files, and
# runs these loads at once, each a petrel-bench (pinned to --client-cpus) for
# the whole run:
#   h1-hello    HTTP/1.1 keep-alive, GET /hello, 8 connections
#   h1-post     HTTP/1.1 keep-alive, POST /echo with a 1 KiB body, 4 connections
#   h1-close    HTTP/1.1, a new connection per request (--close), 2 at a time
#   h1-static   HTTP/1.1 keep-alive, GET /small.html (4 KiB, served from the
#               in-memory cache), 4 connections
#   h1-sendfile HTTP/1.1 keep-alive, GET /big.bin (256 KiB, sendfile), 2 conns
#   h2-hello    h2c, GET /hello, 4 connections x 16 streams
#   h2-static   h2c, GET /small.html, 2 connections x 8 streams
#   ws-echo     WebSocket echo of 128-byte messages on /ws, 8 connections
#               (petrel-bench ws://; tests/ws-bench/wsbench.c when this
#               petrel-bench has no WebSocket mode)
# Every second it samples the resident memory of the server (VmRSS of the
# master plus its workers, from /proc/PID/status) and its open descriptors.
#
# Pass/fail (exit status 0/1; 2 for bad usage or a set-up failure):
#   - every load reports 0 errors of any kind and more than 0 requests;
#   - petrel exits with status 0 on SIGTERM at the end;
#   - memory is flat after the warm-up (the first --warmup seconds, default a
#     fifth of the run): the peak RSS of the rest of the run minus the peak of
#     the first window after the warm-up (a fifth of the run) is at most
#     --max-growth KiB (default 1024), and the least-squares slope of RSS over
#     the post-warm-up samples, times the post-warm-up duration, is also at
#     most --max-growth;
#   - once the loads have ended, the server's open descriptors (master plus
#     workers) come back, within 10 s, to their count before the loads: no
#     descriptor leak.  Descriptors of the files of the document root are not
#     counted: the static cache keeps one open per cached sendfile file and
#     worker, a bounded number.
#
# Output in --out DIR (default ./soak-out):
#   soak-rss.tsv        sec, rss_kib (master + workers), master_kib,
#                       workers_kib, workers, fds -- one line per second
#   soak-rss.png        the RSS plot (gnuplot; skipped with a warning if
#                       gnuplot is missing)
#   soak-rss-loads.tsv  per load: requests, req/s, errors, p99 latency
#   soak-rss-summary.txt the figures and the verdict, as printed
#
# Options:
#   --seconds N         run length (default 300)
#   --warmup N          warm-up seconds not judged (default: seconds / 5)
#   --workers N         petrel worker processes (default 1)
#   --max-growth KIB    allowed RSS growth after the warm-up (default 1024)
#   --server-cpus LIST  taskset CPU list for petrel (default 0)
#   --client-cpus LIST  taskset CPU list for the load generators (default 1)
#   --build DIR         build directory with src/petrel and
#                       src/bench/petrel-bench (default: . if it has them,
#                       else build/ of the source tree)
#   --port N            listen port (default: a free one)
#   --out DIR           where to write the results (default ./soak-out)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/.." && pwd)
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

seconds=300
warmup=
workers=1
max_growth=1024
server_cpus=0
client_cpus=1
build=
port=
out=./soak-out

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

die() {
    printf 'soak: %s\n' "$*" >&2
    exit 2
}

while [[ $# -gt 0 ]]; do
    case $1 in
    --seconds) seconds=${2:?}; shift ;;
    --warmup) warmup=${2:?}; shift ;;
    --workers) workers=${2:?}; shift ;;
    --max-growth) max_growth=${2:?}; shift ;;
    --server-cpus) server_cpus=${2:?}; shift ;;
    --client-cpus) client_cpus=${2:?}; shift ;;
    --build) build=${2:?}; shift ;;
    --port) port=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
    esac
    shift
done

isnum() { [[ $1 =~ ^[0-9]+$ ]]; }
isnum "$seconds" && ((seconds >= 10)) || die "--seconds wants a whole number, at least 10: $seconds"
[[ -z $warmup ]] && warmup=$((seconds / 5))
isnum "$warmup" && ((warmup < seconds)) || die "--warmup wants a whole number below --seconds: $warmup"
isnum "$workers" && ((workers >= 1)) || die "--workers wants a number >= 1: $workers"
isnum "$max_growth" || die "--max-growth wants KiB as a whole number: $max_growth"
[[ -z $port ]] || isnum "$port" || die "--port wants a number: $port"
# the first judged window: a fifth of the run, and at least 5 s
window=$((seconds / 5))
((window >= 5)) || window=5
((warmup + window < seconds)) || die "--warmup $warmup leaves no time after the first window ($window s)"

if [[ -z $build ]]; then
    if [[ -x ./src/petrel ]]; then build=.; else build=$srcdir/build; fi
fi
[[ -d $build ]] || die "no build directory $build"
build=$(cd "$build" && pwd)
PETREL=$build/src/petrel
BENCH=$build/src/bench/petrel-bench
[[ -x $PETREL ]] || die "no petrel at $PETREL (build it, or give --build DIR)"
[[ -x $BENCH ]] || die "no petrel-bench at $BENCH"
command -v taskset >/dev/null || die "taskset (util-linux) is missing"
taskset -c "$server_cpus" true 2>/dev/null || die "bad --server-cpus: $server_cpus"
taskset -c "$client_cpus" true 2>/dev/null || die "bad --client-cpus: $client_cpus"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/petrel-soak.XXXXXX")
server_pid=
load_pids=()
cleanup() {
    local p
    for p in "${load_pids[@]}" $server_pid; do
        kill -KILL "$p" 2>/dev/null || true
    done
    for p in "${load_pids[@]}" $server_pid; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# ---------------------------------------------------------------------------
# The document root and the server

www=$tmp/www
mkdir -p "$www"
cp "$srcdir/examples/www/index.html" "$www/index.html"
head -c 4096 /dev/zero | tr '\0' 'a' >"$www/small.html"
head -c 262144 /dev/urandom >"$www/big.bin"

if [[ -z $port ]]; then
    port=$("$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
fi

taskset -c "$server_cpus" "$PETREL" --listen "127.0.0.1:$port" --workers "$workers" \
    --module hello --module echo --module wsecho --root "$www" --log-level info \
    >"$tmp/petrel.out" 2>"$tmp/petrel.err" </dev/null &
server_pid=$!

alive() { kill -0 "$1" 2>/dev/null; }
deadline=$((SECONDS + 10))
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    alive "$server_pid" || { cat "$tmp/petrel.err" >&2; die "petrel exited at start-up"; }
    ((SECONDS < deadline)) || die "petrel does not accept connections on port $port after 10 s"
    sleep 0.05
done
# every worker is up: as many children as --workers
deadline=$((SECONDS + 10))
until [[ $(pgrep -P "$server_pid" | wc -l) -ge $workers ]]; do
    ((SECONDS < deadline)) || die "petrel has fewer than $workers workers after 10 s"
    sleep 0.05
done

# (a process may be gone by the time it is read: that counts as 0)
rss_of() {
    local v
    v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || v=0
    echo "${v:-0}"
}
fds_of() {
    local v
    v=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' 2>/dev/null |
        grep -vc "^$www/") || true
    echo "${v:-0}"
}

# server_fds: open descriptors of the master and its workers, but for those
# of the document root's files
server_fds() {
    local f w
    f=$(fds_of "$server_pid")
    for w in $(pgrep -P "$server_pid"); do f=$((f + $(fds_of "$w"))); done
    echo "$f"
}
idle_fds=$(server_fds)

# ---------------------------------------------------------------------------
# The loads

url=http://127.0.0.1:$port
ws_mode=petrel-bench
if ! "$BENCH" --help 2>&1 | grep -q 'ws://'; then
    ws_mode=wsbench
    cc -O2 -pthread -o "$tmp/wsbench" "$srcdir/tests/ws-bench/wsbench.c" ||
        die "petrel-bench has no WebSocket mode and tests/ws-bench/wsbench.c does not build"
fi

names=()
# load NAME ARG...: start one petrel-bench for the whole run
load() {
    local name=$1
    shift
    names+=("$name")
    taskset -c "$client_cpus" "$BENCH" -t 1 -d "${seconds}s" --timeout 10s --json -v "$@" \
        >"$tmp/$name.json" 2>"$tmp/$name.err" </dev/null &
    load_pids+=($!)
}

load h1-hello -c 8 --expect-status 200 "$url/hello"
load h1-post -c 4 --body-size 1024 --expect-status 200 "$url/echo"
load h1-close -c 2 --close --expect-status 200 "$url/hello"
load h1-static -c 4 --expect-status 200 --expect-body-size 4096 "$url/small.html"
load h1-sendfile -c 2 --expect-status 200 --expect-body-size 262144 "$url/big.bin"
load h2-hello -c 4 -m 16 --expect-status 200 "$url/hello"
load h2-static -c 2 -m 8 --expect-status 200 --expect-body-size 4096 "$url/small.html"
if [[ $ws_mode == petrel-bench ]]; then
    load ws-echo -c 8 --body-size 128 "ws://127.0.0.1:$port/ws"
else
    names+=(ws-echo)
    taskset -c "$client_cpus" "$tmp/wsbench" -c 8 -t 1 -d "$seconds" -w 0 -s 128 \
        127.0.0.1 "$port" /ws >"$tmp/ws-echo.txt" 2>"$tmp/ws-echo.err" </dev/null &
    load_pids+=($!)
fi

# ---------------------------------------------------------------------------
# Sampling: one line a second, on a fixed schedule

tsv=$out/soak-rss.tsv
printf 'sec\trss_kib\tmaster_kib\tworkers_kib\tworkers\tfds\n' >"$tsv"
printf 'soak: %d s (warm-up %d s), %d worker(s), petrel on CPUs %s, loads on CPUs %s, port %d\n' \
    "$seconds" "$warmup" "$workers" "$server_cpus" "$client_cpus" "$port"
t0=$EPOCHREALTIME
for ((i = 0; i < seconds; i++)); do
    # sleep until t0 + i
    d=$(awk -v t0="$t0" -v i="$i" -v now="$EPOCHREALTIME" 'BEGIN { d = t0 + i - now; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$d"
    alive "$server_pid" || { cat "$tmp/petrel.err" >&2; echo "soak: FAIL: petrel exited during the run (at ${i}s)" >&2; exit 1; }
    m=$(rss_of "$server_pid")
    f=$(fds_of "$server_pid")
    wk=0
    nw=0
    for w in $(pgrep -P "$server_pid"); do
        wk=$((wk + $(rss_of "$w")))
        f=$((f + $(fds_of "$w")))
        nw=$((nw + 1))
    done
    printf '%d\t%d\t%d\t%d\t%d\t%d\n' "$i" $((m + wk)) "$m" "$wk" "$nw" "$f" >>"$tsv"
    if ((i % 30 == 0)); then
        printf 'soak: %4d s  rss %d KiB  (master %d, workers %d)  fds %d\n' "$i" $((m + wk)) "$m" "$wk" "$f"
    fi
done

# the loads end by themselves after --seconds; give them 30 s more
deadline=$((SECONDS + 30))
for p in "${load_pids[@]}"; do
    while alive "$p"; do
        if ((SECONDS >= deadline)); then
            echo "soak: FAIL: a load generator is still running 30 s after the end" >&2
            exit 1
        fi
        sleep 0.1
    done
done
load_rc=()
for p in "${load_pids[@]}"; do
    rc=0
    wait "$p" || rc=$?
    load_rc+=("$rc")
done
load_pids=()

# every connection closed: the descriptors are back to their idle count
deadline=$((SECONDS + 10))
end_fds=$(server_fds)
while ((end_fds != idle_fds && SECONDS < deadline)); do
    sleep 0.1
    end_fds=$(server_fds)
done

kill -TERM "$server_pid"
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=

# ---------------------------------------------------------------------------
# The verdict

if [[ -s $tmp/petrel.err ]]; then
    echo "soak: petrel's log (last 20 lines):"
    tail -n 20 "$tmp/petrel.err" | sed 's/^/    /'
fi

verdict=0
"$PY" - "$tmp" "$out" "$seconds" "$warmup" "$window" "$max_growth" "$server_rc" \
    "$idle_fds" "$end_fds" "${names[*]}" "${load_rc[*]}" "$ws_mode" <<'PYEOF' || verdict=1
import json, os, sys

tmp, out = sys.argv[1], sys.argv[2]
seconds, warmup, window, max_growth, server_rc, idle_fds, end_fds = map(int, sys.argv[3:10])
names, rcs, ws_mode = sys.argv[10].split(), [int(x) for x in sys.argv[11].split()], sys.argv[12]
failures = []
lines = []

def say(s=""):
    print(s)
    lines.append(s)

# the loads
rows = []
for name, rc in zip(names, rcs):
    if name == "ws-echo" and ws_mode == "wsbench":
        kv = {}
        try:
            for ln in open(os.path.join(tmp, "ws-echo.txt")):
                k, _, v = ln.partition(" ")
                kv[k] = v.strip()
            req, rps, err = int(kv["messages"]), float(kv["msgs_per_sec"]), int(kv["errors"])
            p99 = float(kv["p99_us"])
        except (OSError, KeyError, ValueError):
            failures.append("ws-echo: no result (%s)" % open(os.path.join(tmp, "ws-echo.err")).read().strip())
            continue
        detail = "errors %d" % err
    else:
        try:
            j = json.load(open(os.path.join(tmp, name + ".json")))
        except (OSError, ValueError):
            err = open(os.path.join(tmp, name + ".err")).read().strip()
            failures.append("%s: no JSON result (exit status %d: %s)" % (name, rc, err[-300:]))
            continue
        req, rps, err = j["requests"], j["rps"], j["errors"]["total"]
        p99 = j["latency_us"]["p99"]
        detail = ", ".join("%s %d" % (k, v) for k, v in j["errors"].items() if k != "total" and v)
    rows.append((name, req, rps, err, p99))
    if rc != 0:
        failures.append("%s: exit status %d" % (name, rc))
    if err != 0:
        failures.append("%s: %d errors (%s)" % (name, err, detail))
        why = open(os.path.join(tmp, name + ".err"), errors="replace").read().strip().splitlines()
        for ln in why[:5]:
            failures.append("%s:   %s" % (name, ln))
    if req <= 0:
        failures.append("%s: no request completed" % name)

with open(os.path.join(out, "soak-rss-loads.tsv"), "w") as f:
    f.write("load\trequests\treq_per_s\terrors\tp99_us\n")
    for r in rows:
        f.write("%s\t%d\t%.0f\t%d\t%.1f\n" % r)
say("%-12s %12s %10s %7s %10s" % ("load", "requests", "req/s", "errors", "p99 (us)"))
for r in rows:
    say("%-12s %12d %10.0f %7d %10.1f" % r)
say("%-12s %12d %10.0f" % ("total", sum(r[1] for r in rows), sum(r[2] for r in rows)))
say()

# the memory
samples = []
for ln in open(os.path.join(out, "soak-rss.tsv")):
    f = ln.split("\t")
    if f[0] == "sec":
        continue
    samples.append((int(f[0]), int(f[1]), int(f[5])))
post = [s for s in samples if s[0] >= warmup]
first = [s for s in post if s[0] < warmup + window]
rest = [s for s in post if s[0] >= warmup + window]
if not first or not rest:
    failures.append("too few samples (%d)" % len(samples))
else:
    peak_first = max(s[1] for s in first)
    peak_rest = max(s[1] for s in rest)
    growth = peak_rest - peak_first
    n = len(post)
    mx = sum(s[0] for s in post) / n
    my = sum(s[1] for s in post) / n
    sxx = sum((s[0] - mx) ** 2 for s in post)
    slope = sum((s[0] - mx) * (s[1] - my) for s in post) / sxx if sxx else 0.0
    span = post[-1][0] - post[0][0]
    fit_growth = slope * span
    say("RSS (master + workers), KiB: start %d, end of warm-up (%d s) %d, min %d, max %d, end %d"
        % (samples[0][1], warmup, post[0][1], min(s[1] for s in post), max(s[1] for s in post),
           samples[-1][1]))
    say("peak %d-%d s: %d KiB; peak %d-%d s: %d KiB; growth %+d KiB (bound %d)"
        % (warmup, warmup + window, peak_first, warmup + window, samples[-1][0], peak_rest, growth,
           max_growth))
    say("least-squares slope after the warm-up: %+.2f KiB/min, %+.0f KiB over %d s (bound %d)"
        % (slope * 60, fit_growth, span, max_growth))
    say("descriptors (master + workers): %d before the loads, %d under load (max), %d after them"
        % (idle_fds, max(s[2] for s in samples), end_fds))
    if growth > max_growth:
        failures.append("RSS grew by %d KiB after the first window (bound %d)" % (growth, max_growth))
    if fit_growth > max_growth:
        failures.append("RSS trend %+.0f KiB over the run (bound %d)" % (fit_growth, max_growth))
if end_fds != idle_fds:
    failures.append("%d descriptors open 10 s after the loads ended, %d before them"
                    % (end_fds, idle_fds))
if server_rc != 0:
    failures.append("petrel exited with status %d on SIGTERM" % server_rc)
say()
for f in failures:
    say("FAIL: " + f)
say("soak: %s" % ("FAIL" if failures else "PASS"))
with open(os.path.join(out, "soak-rss-summary.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
sys.exit(1 if failures else 0)
PYEOF

# ---------------------------------------------------------------------------
# The plot

if command -v gnuplot >/dev/null; then
    gnuplot <<EOF || echo "soak: warning: gnuplot failed; no plot" >&2
set terminal pngcairo size 900,450 noenhanced font "sans,10"
set output "$out/soak-rss.png"
set title "petrel RSS under mixed load (${workers} worker(s), ${seconds} s; warm-up ${warmup} s)"
set xlabel "seconds"
set ylabel "RSS, MiB (master + workers)"
set y2label "open descriptors"
set ytics nomirror
set y2tics
set grid
set key bottom right
set xrange [0:$((seconds - 1))]
set yrange [0:*]
set y2range [0:*]
set arrow from ${warmup}, graph 0 to ${warmup}, graph 1 nohead dashtype 2 lc rgb "gray40"
set arrow from $((warmup + window)), graph 0 to $((warmup + window)), graph 1 nohead dashtype 3 lc rgb "gray60"
plot "$tsv" using 1:(\$2/1024) skip 1 with lines lw 2 lc rgb "#1f77b4" title "RSS (MiB)", \
     "$tsv" using 1:6 skip 1 axes x1y2 with lines lw 1 lc rgb "#ff7f0e" title "descriptors"
EOF
else
    echo "soak: warning: gnuplot not found (Debian: gnuplot-nox); no plot" >&2
fi

exit "$verdict"
