#!/usr/bin/env bash
# sweep-peers.sh -- latency against load (petrel-bench --sweep) for petrel,
# nginx and h2o, one worker each, in one run, over HTTP/1.1 keep-alive
# (GET /hello, a 12-byte "Hello World!") and h2c (prior knowledge).
#
#   tools/sweep-peers.sh [options] --out DIR
#
# Each server runs pinned to --server-cpu (default 0), petrel-bench to
# --gen-cpu (default 1).  For each protocol: first each server's maximum
# rate (a closed-loop run), then, step by step (default 10, 25, 50, 75, 80,
# 90, 95 and 100 %), the servers one after the other at
#   own      the step's share of its own maximum: its curve up to what it
#            serves;
#   common   the step's share of petrel's maximum: the same absolute rates
#            for every server (petrel's own steps serve as its common ones).
# Each step is one `petrel-bench --sweep --sweep-max R --sweep-steps P`
# (an open-loop run, -d after --warmup, new connections), so the servers
# of one step are measured within seconds of each other.  Before each run
# the script waits (up to --quiet-wait s) for a second in which other
# processes used less than --noise-max % of both pinned cores; a run during
# which they used more is measured again (up to --retries times; every
# attempt is kept).  DIR gets raw/ (one JSON per run), runs.tsv (one line
# per run: load average, other processes' share of each pinned core, exit
# status), one sweep JSON per server and phase joined from the last
# attempts (PROTO.SERVER.own.json, PROTO.SERVER.common.json, in the form of
# `petrel-bench --sweep --json`), and from tools/sweep-chart.py the
# combined chart (PROTO.svg) and the tables (PROTO.md).
#
# Options:
#   --protocols LIST   plaintext,h2c (default both)
#   --servers LIST     petrel,nginx,h2o (default; nginx and h2o are those of
#                      the Debian packages, on PATH)
#   --control CMD      also sweep a control server over HTTP/1.1: CMD is run
#                      with bash -c after replacing {port}; it must answer
#                      GET /hello on 127.0.0.1:{port}
#   -d S, --warmup S   seconds at each rate (and for the maximum), warm-up
#                      before each (5, 1)
#   -c N, -m N         connections (100); h2c streams per connection (16)
#   --steps LIST       percentages of the maximum
#   --noise-max PCT    (default 10)  --retries N (default 1)
#   --quiet-wait S     (default 30)
#   --server-cpu C, --gen-cpu C, --port-base P (default 28300)
#
# Environment: PETREL (default build/src/petrel), PETREL_BENCH (default
# build/src/bench/petrel-bench), PYTHON (default /usr/bin/python3).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PETREL=${PETREL:-build/src/petrel}
BENCH=${PETREL_BENCH:-build/src/bench/petrel-bench}
PYTHON=${PYTHON:-/usr/bin/python3}
PROTOCOLS="plaintext h2c" SERVERS="petrel nginx h2o" CONTROL="" OUT=""
DUR=5 WARMUP=1 CONNS=100 STREAMS=16 STEPS=10,25,50,75,80,90,95,100 NOISE_MAX=10 RETRIES=1 QUIET_WAIT=30
SRV_CPU=0 GEN_CPU=1 PORT_BASE=28300

die() { echo "sweep-peers.sh: $*" >&2; exit 2; }
log() { echo "sweep-peers.sh: $*" >&2; }
usage() { sed -n '2,44s/^# \{0,1\}//p' "$0"; }

while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --protocols | --servers | --control | -d | --warmup | -c | -m | --steps | --noise-max | \
        --retries | --quiet-wait | --server-cpu | --gen-cpu | --port-base | --out)
        [ $# -ge 2 ] || die "$1 needs a value" ;;
    *) usage >&2; die "unknown option: $1" ;;
    esac
    case $1 in
    --protocols) PROTOCOLS=${2//,/ } ;;
    --servers) SERVERS=${2//,/ } ;;
    --control) CONTROL=$2 ;;
    -d) DUR=$2 ;;
    --warmup) WARMUP=$2 ;;
    -c) CONNS=$2 ;;
    -m) STREAMS=$2 ;;
    --steps) STEPS=$2 ;;
    --noise-max) NOISE_MAX=$2 ;;
    --retries) RETRIES=$2 ;;
    --quiet-wait) QUIET_WAIT=$2 ;;
    --server-cpu) SRV_CPU=$2 ;;
    --gen-cpu) GEN_CPU=$2 ;;
    --port-base) PORT_BASE=$2 ;;
    --out) OUT=$2 ;;
    esac
    shift 2
done
[ -n "$OUT" ] || { usage >&2; die "--out DIR is required"; }
for p in $PROTOCOLS; do
    case $p in plaintext | h2c) ;; *) die "--protocols: unknown protocol '$p' (plaintext, h2c)" ;; esac
done
for s in $SERVERS; do
    case $s in petrel | nginx | h2o) ;; *) die "--servers: unknown server '$s' (petrel, nginx, h2o)" ;; esac
done
case " $SERVERS " in *" petrel "*) ;; *) die "--servers must include petrel (the common rates are its)" ;; esac
for n in "$DUR" "$WARMUP" "$CONNS" "$STREAMS" "$NOISE_MAX" "$RETRIES" "$QUIET_WAIT" "$SRV_CPU" "$GEN_CPU" "$PORT_BASE"; do
    [[ $n =~ ^[0-9]+$ ]] || die "not a whole number: '$n'"
done
[ -x "$PETREL" ] || die "no petrel at $PETREL (build first, or set PETREL)"
[ -x "$BENCH" ] || die "no petrel-bench at $BENCH (build first, or set PETREL_BENCH)"
[ -x "$PYTHON" ] || die "no $PYTHON (Debian package python3)"
need() { command -v "$1" >/dev/null || die "$1 not found (Debian package $2)"; }
need taskset util-linux
need curl curl
case " $SERVERS " in *" nginx "*) need nginx nginx ;; esac
case " $SERVERS " in *" h2o "*) need h2o h2o ;; esac
PETREL=$(realpath "$PETREL") BENCH=$(realpath "$BENCH")
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(realpath "$OUT")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sweep-peers.XXXXXX") || die "mktemp failed"
chmod 755 "$TMP" # nginx's and h2o's workers read the document root as nobody when run as root
declare -A PID PORT H2PORT
cleanup() {
    local s
    trap - EXIT INT TERM
    for s in "${!PID[@]}"; do kill -TERM -- "-${PID[$s]}" 2>/dev/null; done
    for s in "${!PID[@]}"; do
        for _ in $(seq 20); do kill -0 "${PID[$s]}" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-${PID[$s]}" 2>/dev/null
        wait "${PID[$s]}" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

printf 'Hello World!' >"$TMP/hello"
chmod 644 "$TMP/hello"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
NEXT_PORT=$PORT_BASE
alloc_port() { # -> GOT
    while port_busy "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
    GOT=$NEXT_PORT
    NEXT_PORT=$((NEXT_PORT + 1))
}

launch() { # name port h2port cmd... : own session (process group), pinned to SRV_CPU
    local name=$1 port=$2 h2port=$3 i
    shift 3
    PORT[$name]=$port H2PORT[$name]=$h2port
    setsid taskset -c "$SRV_CPU" "$@" >"$TMP/$name.log" 2>&1 </dev/null &
    PID[$name]=$!
    for ((i = 0; i < 100; i++)); do
        kill -0 "${PID[$name]}" 2>/dev/null || { tail -5 "$TMP/$name.log" >&2; die "$name exited"; }
        port_busy "$port" && port_busy "$h2port" && return 0
        sleep 0.1
    done
    die "$name: not listening on $port after 10 s"
}

start_petrel() {
    alloc_port
    launch petrel "$GOT" "$GOT" "$PETREL" --listen "127.0.0.1:$GOT" --module hello --log-level error
}

start_nginx() {
    local d=$TMP/nginx port h2port
    mkdir -p "$d"
    alloc_port; port=$GOT
    alloc_port; h2port=$GOT # nginx 1.22: a port with 'http2' speaks h2c only (prior knowledge)
    cat >"$d/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $d/body; proxy_temp_path $d/proxy; fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi; scgi_temp_path $d/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    tcp_nodelay on;
    server {
        listen 127.0.0.1:$port;
        listen 127.0.0.1:$h2port http2;
        location = /hello { default_type text/plain; return 200 "Hello World!"; }
    }
}
EOF
    launch nginx "$port" "$h2port" nginx -e "$d/error.log" -p "$d/" -c "$d/nginx.conf"
}

start_h2o() {
    local d=$TMP/h2o
    mkdir -p "$d"
    alloc_port
    cat >"$d/h2o.conf" <<EOF
num-threads: 1
$([ "$(id -u)" = 0 ] && echo "user: root")
pid-file: $d/h2o.pid
error-log: $d/error.log
listen:
  host: 127.0.0.1
  port: $GOT
hosts:
  default:
    paths:
      /hello:
        file.file: $TMP/hello
EOF
    launch h2o "$GOT" "$GOT" h2o -m worker -c "$d/h2o.conf"
}

start_control() {
    alloc_port
    launch control "$GOT" "$GOT" bash -c "${CONTROL//\{port\}/$GOT}"
}

check() { # name protocol
    local port res
    if [ "$2" = h2c ]; then
        port=${H2PORT[$1]}
        res=$(curl -s --max-time 5 --http2-prior-knowledge -w ' %{http_code} %{http_version}' \
            "http://127.0.0.1:$port/hello")
        [ "$res" = "Hello World! 200 2" ] || { log "$1: h2c GET /hello gave '$res'"; return 1; }
    else
        port=${PORT[$1]}
        res=$(curl -s --max-time 5 -w ' %{http_code} %{http_version}' "http://127.0.0.1:$port/hello")
        [ "$res" = "Hello World! 200 1.1" ] || { log "$1: GET /hello gave '$res'"; return 1; }
    fi
}

# /proc/stat of both pinned CPUs: "busy total" ticks each (busy: user, nice, system)
cpu_snap() {
    awk -v a="cpu$SRV_CPU" -v b="cpu$GEN_CPU" '
        $1 == a || $1 == b { v[$1] = ($2 + $3 + $4) " " ($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9) }
        END { print v[a], v[b] }' /proc/stat
}
grp_ticks() { # utime + stime of the live processes of process group $1
    local f line rest tot=0
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        rest=${line##*) }
        set -- "$1" $rest
        [ "$4" = "$1" ] && tot=$((tot + ${13} + ${14}))
    done
    echo "$tot"
}

wait_quiet() { # up to QUIET_WAIT s for a second with both pinned cores busy < NOISE_MAX %
    local i c0 c1 busy
    [ "$QUIET_WAIT" -gt 0 ] || return 0
    for ((i = 0; i < QUIET_WAIT; i++)); do
        c0=$(cpu_snap); sleep 1; c1=$(cpu_snap)
        busy=$(awk -v c0="$c0" -v c1="$c1" 'BEGIN { split(c0, a, " "); split(c1, b, " ")
            x = 100 * (b[1] - a[1]) / (b[2] - a[2] + 1e-9); y = 100 * (b[3] - a[3]) / (b[4] - a[4] + 1e-9)
            printf "%.0f", (x > y ? x : y) }')
        [ "$busy" -lt "$NOISE_MAX" ] && { [ $i -gt 0 ] && log "  waited ${i} s for quiet cores"; return 0; }
    done
    log "  the cores were not quiet for ${QUIET_WAIT} s (last second: $busy % busy): measuring anyway"
}

mkdir -p "$OUT/raw"
echo -e "protocol\tserver\tphase\tstep_pct\tattempt\tstart_utc\tloadavg_1m_before\tloadavg_1m_after\tnoise_pct\tsrv_core_other_pct\tgen_core_other_pct\texit\tfile" \
    >"$OUT/runs.tsv"
HZ=$(getconf CLK_TCK)
declare -A LAST MAX

# one petrel-bench run, measured again when other processes took the cores;
# kind: max (closed loop) or own / common (one open-loop step at rate R)
measure() { # protocol server kind [percent rate] -> LAST[protocol.server.kind.percent]
    local proto=$1 name=$2 kind=$3 pct=${4:-} rate=${5:-} a file url rc c0 c1 t0 t1 l0 l1 start noise
    local TIMEFORMAT='%U %S' tf=$TMP/time args=(-t 1 -c "$CONNS" -d "$DUR" --warmup "$WARMUP")
    if [ "$proto" = h2c ]; then
        url="http://127.0.0.1:${H2PORT[$name]}/hello"
        args+=(--h2 -m "$STREAMS")
    else
        url="http://127.0.0.1:${PORT[$name]}/hello"
    fi
    [ "$kind" != max ] && args+=(--sweep --sweep-max "$rate" --sweep-steps "$pct")
    for ((a = 1; ; a++)); do
        file=$OUT/raw/$proto.$name.$kind${pct:+.$pct}$([ $a -gt 1 ] && echo ".try$a").json
        wait_quiet
        start=$(date -u +%FT%TZ)
        l0=$(cut -d' ' -f1 /proc/loadavg)
        t0=$(grp_ticks "${PID[$name]}") c0=$(cpu_snap)
        { time taskset -c "$GEN_CPU" "$BENCH" "${args[@]}" --json --label "$name" "$url" \
            >"$file" 2>"$TMP/bench.err"; } 2>"$tf"
        rc=$?
        c1=$(cpu_snap) t1=$(grp_ticks "${PID[$name]}")
        l1=$(cut -d' ' -f1 /proc/loadavg)
        grep -v '^petrel-bench: sweep: [0-9]' "$TMP/bench.err" >&2
        # other processes' share of each pinned core: its busy ticks minus the server's
        # (on the server core) or petrel-bench's (on the generator core)
        noise=$(awk -v c0="$c0" -v c1="$c1" -v st=$((t1 - t0)) -v gt="$(cat "$tf")" -v hz="$HZ" 'BEGIN {
            split(c0, a, " "); split(c1, b, " "); split(gt, g, " ")
            ta = b[2] - a[2]; tb = b[4] - a[4]; if (ta < 1) ta = 1; if (tb < 1) tb = 1
            f0 = 100 * (b[1] - a[1] - st) / ta; f1 = 100 * (b[3] - a[3] - (g[1] + g[2]) * hz) / tb
            if (f0 < 0) f0 = 0; if (f1 < 0) f1 = 0
            printf "%.0f\t%.0f\t%.0f", (f0 > f1 ? f0 : f1), f0, f1 }')
        echo -e "$proto\t$name\t$kind\t${pct:--}\t$a\t$start\t$l0\t$l1\t$noise\t$rc\t${file#"$OUT"/}" >>"$OUT/runs.tsv"
        log "$proto $name $kind${pct:+ $pct % = $rate req/s}: exit $rc, load average $l0, other processes $(echo "$noise" | cut -f1) %"
        [ "${noise%%	*}" -le "$NOISE_MAX" ] && break
        [ $a -gt "$RETRIES" ] && break
    done
    LAST[$proto.$name.$kind.$pct]=$file
}

# the last attempts of one server and phase as one `petrel-bench --sweep --json` object
join() { # protocol server phase max max_from closed-file|"" step-files...
    "$PYTHON" - "$@" <<'EOF'
import json, sys
proto, name, phase, mx, max_from, closed = sys.argv[1:7]
steps, first = [], None
for f in sys.argv[7:]:
    sw = json.load(open(f))["sweep"]
    first = first or sw
    steps += sw["steps"]
out = {"url": first["url"], "duration_s": first["duration_s"], "warmup_s": first["warmup_s"],
       "max_rate": float(mx), "max_from": max_from, "max_lag_us": first["max_lag_us"],
       "steps_percent": [s["percent"] for s in steps],
       "closed_loop": json.load(open(closed)) if closed else None, "steps": steps,
       "label": name}
json.dump({"sweep": out}, sys.stdout)
print()
EOF
}

for s in $SERVERS; do "start_$s"; done
[ -n "$CONTROL" ] && start_control
for s in "${!PID[@]}"; do
    log "$s: pid ${PID[$s]}, 127.0.0.1:${PORT[$s]}$([ "${H2PORT[$s]}" != "${PORT[$s]}" ] && echo " (h2c :${H2PORT[$s]})")"
done
{
    echo "date: $(date -u +%FT%TZ)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, kernel $(uname -r)"
    echo "petrel: $("$PETREL" --version 2>&1 | head -1)"
    case " $SERVERS " in *" nginx "*) echo "nginx: $(nginx -v 2>&1)" ;; esac
    case " $SERVERS " in *" h2o "*) echo "h2o: $(h2o --version | head -1)" ;; esac
    echo "petrel-bench -t 1 -c $CONNS (h2c: -m $STREAMS) -d $DUR --warmup $WARMUP, steps $STEPS %"
    echo "servers on CPU $SRV_CPU, petrel-bench on CPU $GEN_CPU"
} >"$OUT/setup.txt"

for proto in $PROTOCOLS; do
    names=$SERVERS
    [ -n "$CONTROL" ] && [ "$proto" = plaintext ] && names="$names control"
    ok=""
    for s in $names; do check "$s" "$proto" && ok="$ok $s"; done
    for s in $ok; do
        measure "$proto" "$s" max
        MAX[$s]=$("$PYTHON" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["rps"])' \
            "${LAST[$proto.$s.max.]}") || die "no rate in ${LAST[$proto.$s.max.]}"
        log "$proto $s: closed-loop maximum ${MAX[$s]} requests/s"
    done
    for pct in ${STEPS//,/ }; do
        for s in $ok; do
            measure "$proto" "$s" own "$pct" "${MAX[$s]}"
            [ "$s" = petrel ] || measure "$proto" "$s" common "$pct" "${MAX[petrel]}"
        done
    done
    files=()
    for s in $ok; do
        own=() common=()
        for pct in ${STEPS//,/ }; do
            own+=("${LAST[$proto.$s.own.$pct]}")
            [ "$s" = petrel ] || common+=("${LAST[$proto.$s.common.$pct]}")
        done
        join "$proto" "$s" own "${MAX[$s]}" "closed-loop maximum" "${LAST[$proto.$s.max.]}" \
            "${own[@]}" >"$OUT/$proto.$s.own.json" || die "joining $proto $s own failed"
        files+=("$s=$OUT/$proto.$s.own.json")
        if [ "$s" != petrel ]; then
            join "$proto" "$s" common "${MAX[petrel]}" "petrel's closed-loop maximum" "" \
                "${common[@]}" >"$OUT/$proto.$s.common.json" || die "joining $proto $s common failed"
            files+=("$s=$OUT/$proto.$s.common.json")
        fi
    done
    "$PYTHON" "$HERE/sweep-chart.py" --title "$proto: latency vs load, one worker each" \
        --svg "$OUT/$proto.svg" --md "$OUT/$proto.md" --runs "$OUT/runs.tsv" "${files[@]}" ||
        die "sweep-chart.py failed"
done
log "done: $OUT"
