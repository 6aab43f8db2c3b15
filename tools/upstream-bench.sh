#!/usr/bin/env bash
# upstream-bench.sh -- the upstream client and the reverse proxy, measured
# (doc/benchmarks.md, "Calling other services").
#
#   tools/upstream-bench.sh proxy [ROUNDS [SECONDS]]   requests per second
#       through a reverse proxy: an upstream petrel (--module hello, one
#       worker) behind petrel's proxy module, nginx (proxy_pass, upstream
#       keepalive 64) and h2o (proxy.reverse.url) when installed, each with
#       one worker; upstream and proxies on CPU 0, wrk (-t1 -c64, GET
#       /hello) on CPU 1; the proxies interleaved ROUNDS times (default
#       3 x 10 s, after a 2 s warm-up each).  Prints every run, the
#       upstream's accepted connections during it, the proxy's CPU time
#       (user + system, all its processes) and requests per second of it
#       ("per core"), and the medians.
#   tools/upstream-bench.sh instr [N1 N2]   callgrind: user-space
#       instructions per proxied request of the proxy's processes, petrel
#       and nginx, (Ir(N2) - Ir(N1)) / (N2 - N1) (the method of instr.sh);
#       the upstream runs natively.  Default N1 = 2000, N2 = 10000,
#       petrel-bench -c 16.
#   tools/upstream-bench.sh instr N1 N2 h2   the same with h2c clients
#       (petrel-bench --h2 -m 1, prior knowledge: nginx's listener gets
#       `http2`, which nginx 1.22 speaks without TLS by prior knowledge
#       only); the upstream stays HTTP/1.1.
#   tools/upstream-bench.sh syscalls [N]   strace -c of the proxy's worker
#       over N proxied requests (default 20000, petrel-bench -c 16, after
#       5000 of warm-up), petrel and nginx: the system calls per proxied
#       request, by name (the kernel's share of each proxy's CPU, which
#       instructions do not count).
#   tools/upstream-bench.sh heap [N]   heap calls of petrel's code per
#       proxied request after warm-up (the counting allocator of
#       tests/integration/test_pg_heap.sh), over N requests (default 20000).
#   tools/upstream-bench.sh pool [N]   a handler POSTing a 512-byte JSON
#       body with a request id to an echo upstream and answering what came
#       back (tests/integration/upstream_mod.c), 16 callers: the pool
#       (default options) vs max_requests=1 (a new connection per call)
#       with connects_per_sec=1000000, N calls each (default 50000),
#       interleaved three times; and once 2,000 calls with max_requests=1
#       alone (the default connection rate limit, 100/s).
#   tools/upstream-bench.sh pool N grpc   the same as gRPC unary calls over
#       h2c: the handler wraps the body as an EchoMessage (request_id and
#       the 512 bytes as its payload) and calls the grpcecho module's
#       /petrel.bench.Echo/Echo.
#   tools/upstream-bench.sh storm [SECONDS]   calls into an upstream that
#       is down (a closed port), 16 callers for SECONDS (default 10): the
#       breaker (default options) vs no breaker and a new connection per
#       call (breaker_failures=0, max_requests=1, and again with
#       connects_per_sec=1000000, no rate limit): calls per second,
#       connection attempts per second (TcpActiveOpens) and the caller's
#       CPU time.
#
# Environment: PETREL (default build/src/petrel), PETREL_BENCH (default
# build/src/bench/petrel-bench), PORT_BASE (default 28600), SRV_CPU (0),
# GEN_CPU (1).
set -uo pipefail

PETREL=${PETREL:-build/src/petrel}
BENCH=${PETREL_BENCH:-build/src/bench/petrel-bench}
PORT_BASE=${PORT_BASE:-28600}
SRV_CPU=${SRV_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case $mode in proxy | instr | syscalls | heap | pool | storm) ;; *)
    sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0" >&2
    exit 2
    ;;
esac
shift
[[ -x $PETREL && -x $BENCH ]] || { echo "upstream-bench.sh: no $PETREL or $BENCH" >&2; exit 2; }
PETREL=$(cd "$(dirname "$PETREL")" && pwd)/${PETREL##*/}
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/${BENCH##*/}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/upstream-bench.XXXXXX")
chmod 755 "$tmp"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

UPORT=$PORT_BASE APORT=$((PORT_BASE + 1)) PPORT=$((PORT_BASE + 2))
NPORT=$((PORT_BASE + 3)) HPORT=$((PORT_BASE + 4)) DOWN=$((PORT_BASE + 5))

wait_port() { # port
    for _ in $(seq 400); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "upstream-bench.sh: nothing listens on port $1" >&2
    exit 1
}
start() { # name cmd... : own session, pinned to SRV_CPU -> LAST
    local name=$1
    shift
    setsid taskset -c "$SRV_CPU" "$@" >"$tmp/$name.log" 2>&1 </dev/null &
    LAST=$!
    PIDS+=("$LAST")
}
stop() { # pid
    kill -TERM -- "-$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
accepted() { # the upstream's accepted connections, from its /metrics
    curl -s "http://127.0.0.1:$APORT/metrics" |
        awk '/^petrel_connections_accepted_total/ { t += $NF } END { printf "%d", t }'
}

start_upstream() { # extra args...
    start upstream "$PETREL" --listen "127.0.0.1:$UPORT" --admin-listen "127.0.0.1:$APORT" \
        --workers 1 --log-level error "$@"
    wait_port "$UPORT"
}

nginx_conf() {
    mkdir -p "$tmp/nginx"
    cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
$([[ $mode == instr ]] && echo "master_process off;")
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body; proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi; uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 65;
    tcp_nodelay on;
    upstream up { server 127.0.0.1:$UPORT; keepalive 64; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$NPORT${NGINX_H2:+ http2};
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}
h2o_conf() {
    mkdir -p "$tmp/h2o"
    cat >"$tmp/h2o/h2o.conf" <<EOF
num-threads: 1
$([[ $(id -u) == 0 ]] && echo "user: root")
pid-file: $tmp/h2o/h2o.pid
error-log: $tmp/h2o/error.log
proxy.timeout.keepalive: 60000
listen:
  host: 127.0.0.1
  port: $HPORT
hosts:
  default:
    paths:
      /:
        proxy.reverse.url: http://127.0.0.1:$UPORT/
EOF
}

# ------------------------------------------------------------------ proxy
if [[ $mode == proxy ]]; then
    rounds=${1:-3} secs=${2:-10}
    start_upstream --module hello
    start petrel "$PETREL" --listen "127.0.0.1:$PPORT" --workers 1 --log-level error \
        --module "proxy:/=http://127.0.0.1:$UPORT"
    wait_port "$PPORT"
    names=(petrel) ports=("$PPORT") pgs=("$LAST")
    nginx_conf
    start nginx nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx/" -c "$tmp/nginx/nginx.conf"
    wait_port "$NPORT"
    names+=(nginx) ports+=("$NPORT") pgs+=("$LAST")
    if command -v h2o >/dev/null; then
        h2o_conf
        start h2o h2o -m worker -c "$tmp/h2o/h2o.conf"
        wait_port "$HPORT"
        names+=(h2o) ports+=("$HPORT") pgs+=("$LAST")
    else
        echo "h2o: not installed, not measured"
    fi
    for i in "${!names[@]}"; do
        body=$(curl -s "http://127.0.0.1:${ports[$i]}/hello")
        [[ $body == "Hello World!" ]] || { echo "${names[$i]}: /hello answered '$body'" >&2; exit 1; }
    done
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    cpu() { # process group -> its processes' user + system ticks
        local p t=0
        for p in $(pgrep -g "$1"); do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done
        echo "$t"
    }
    hz=$(getconf CLK_TCK)
    printf '%-7s %5s %10s %9s %11s %9s %16s\n' proxy round req/s upconns reuse% proxyCPU% "req/s per core"
    declare -A rs pc
    for ((r = 1; r <= rounds; r++)); do
        for i in "${!names[@]}"; do
            n=${names[$i]} p=${ports[$i]}
            taskset -c "$GEN_CPU" wrk -t1 -c64 -d2s "http://127.0.0.1:$p/hello" >/dev/null
            a0=$(accepted) c0=$(cpu "${pgs[$i]}")
            out=$(taskset -c "$GEN_CPU" wrk -t1 -c64 -d"${secs}s" "http://127.0.0.1:$p/hello")
            a1=$(accepted) c1=$(cpu "${pgs[$i]}")
            v=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' <<<"$out")
            tot=$(awk '/requests in/ { print $1 }' <<<"$out")
            errs=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ')
            rs[$n]+=" $v"
            pcore=$(awk -v t="$tot" -v c=$((c1 - c0)) -v hz="$hz" 'BEGIN { printf "%.0f", c ? t * hz / c : 0 }')
            pc[$n]+=" $pcore"
            printf '%-7s %5d %10s %9d %10.3f%% %9.1f %16s %s\n' "$n" "$r" "$v" $((a1 - a0)) \
                "$(awk -v t="$tot" -v c=$((a1 - a0)) 'BEGIN { printf "%.3f", t ? 100 * (1 - c / t) : 0 }')" \
                "$(awk -v c=$((c1 - c0)) -v hz="$hz" -v s="$secs" 'BEGIN { print 100 * c / hz / s }')" "$pcore" "$errs"
        done
    done
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "medians (req/s; req/s per core: requests / the proxy's CPU seconds, user + system):"
    m_n=$(median <<<"${rs[nginx]}") p_n=$(median <<<"${pc[nginx]}")
    for n in "${names[@]}"; do
        m=$(median <<<"${rs[$n]}") q=$(median <<<"${pc[$n]}")
        printf '  %-7s %8.0f  %.2fx nginx   per core %8.0f  %.2fx nginx\n' "$n" "$m" \
            "$(awk -v a="$m" -v b="$m_n" 'BEGIN { print a / b }')" "$q" \
            "$(awk -v a="$q" -v b="$p_n" 'BEGIN { print a / b }')"
    done
    exit 0
fi

# ------------------------------------------------------------------ instr
if [[ $mode == instr ]]; then
    n1=${1:-2000} n2=${2:-10000}
    h2=()
    if [[ ${3:-} == h2 ]]; then
        h2=(--h2 -m 1)
        NGINX_H2=1
    fi
    command -v valgrind >/dev/null || { echo "no valgrind" >&2; exit 2; }
    start_upstream --module hello
    nginx_conf
    cg() { # name n -> total Ir of the proxy's processes over n requests
        local name=$1 n=$2 d=$tmp/cg.$1.$2 pid port
        mkdir -p "$d"
        chmod 1777 "$d"
        local vg=(valgrind --tool=callgrind -q --vgdb=no --trace-children=yes
            "--callgrind-out-file=$d/cg.%p")
        if [[ $name == petrel ]]; then
            port=$PPORT
            start petrel "${vg[@]}" "$PETREL" --listen "127.0.0.1:$PPORT" --workers 1 \
                --log-level error --module "proxy:/=http://127.0.0.1:$UPORT"
        else
            port=$NPORT
            start nginx "${vg[@]}" nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx/" \
                -c "$tmp/nginx/nginx.conf"
        fi
        pid=$LAST
        wait_port "$port"
        taskset -c "$GEN_CPU" "$BENCH" -c 16 -n "$n" "${h2[@]}" --fail-on-error \
            "http://127.0.0.1:$port/hello" >"$d/bench.out" ||
            { echo "$name: petrel-bench failed: $(tail -2 "$d/bench.out")" >&2; exit 1; }
        stop "$pid"
        sleep 0.5
        awk '/^totals:/ { t += $2 } END { printf "%.0f", t }' "$d"/cg.*
    }
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    for name in petrel nginx; do
        i1=$(cg "$name" "$n1")
        i2=$(cg "$name" "$n2")
        printf '%-7s Ir(%d) %s  Ir(%d) %s  per proxied request %.0f\n' "$name" "$n1" "$i1" \
            "$n2" "$i2" "$(awk -v a="$i1" -v b="$i2" -v x="$n1" -v y="$n2" 'BEGIN { print (b - a) / (y - x) }')"
    done
    exit 0
fi

# ------------------------------------------------------------------ syscalls
if [[ $mode == syscalls ]]; then
    n=${1:-20000}
    command -v strace >/dev/null || { echo "no strace" >&2; exit 2; }
    start_upstream --module hello
    start petrel "$PETREL" --listen "127.0.0.1:$PPORT" --workers 1 --log-level error \
        --module "proxy:/=http://127.0.0.1:$UPORT"
    ppid=$LAST
    wait_port "$PPORT"
    nginx_conf
    start nginx nginx -e "$tmp/nginx/error.log" -p "$tmp/nginx/" -c "$tmp/nginx/nginx.conf"
    npid=$LAST
    wait_port "$NPORT"
    for name in petrel nginx; do
        if [[ $name == petrel ]]; then port=$PPORT master=$ppid; else port=$NPORT master=$npid; fi
        w=$(pgrep -P "$master" | head -1) # the one worker
        [[ -n $w ]] || { echo "$name: no worker" >&2; exit 1; }
        taskset -c "$GEN_CPU" "$BENCH" -c 16 -n 5000 --fail-on-error "http://127.0.0.1:$port/hello" >/dev/null ||
            { echo "$name: warm-up failed" >&2; exit 1; }
        strace -c -o "$tmp/$name.strace" -p "$w" 2>/dev/null &
        st=$!
        sleep 1 # attached
        taskset -c "$GEN_CPU" "$BENCH" -c 16 -n "$n" --fail-on-error "http://127.0.0.1:$port/hello" >/dev/null ||
            { echo "$name: petrel-bench failed" >&2; exit 1; }
        kill -INT "$st"
        wait "$st" 2>/dev/null
        echo "$name: system calls per proxied request over $n (strace -c of worker $w):"
        awk -v n="$n" '$NF ~ /^[a-z_0-9]+$/ && $NF != "syscall" && $NF != "total" {
                printf "  %-14s %7.3f\n", $NF, $4 / n; t += $4 } # % seconds usecs/call calls [errors] name
            END { printf "  %-14s %7.3f\n", "all", t / n }' "$tmp/$name.strace"
    done
    exit 0
fi

# ------------------------------------------------------------------ heap
if [[ $mode == heap ]]; then
    n=${1:-20000}
    sed -n "/^cat >\"\$LIB_TMP\/heap.c\" <<'C'\$/,/^C\$/p" "$top/tests/integration/test_pg_heap.sh" |
        sed '1d;$d' >"$tmp/heap.c"
    cc -shared -fPIC -O2 -o "$tmp/heap.so" "$tmp/heap.c" -lpthread || exit 1
    start_upstream --module hello
    mkdir -p "$tmp/heap"
    HEAP_DIR=$tmp/heap LD_PRELOAD=$tmp/heap.so start petrel "$PETREL" \
        --listen "127.0.0.1:$PPORT" --workers 1 --log-level error \
        --memory-release-delay 86400 --module "proxy:/=http://127.0.0.1:$UPORT"
    wait_port "$PPORT"
    taskset -c "$GEN_CPU" "$BENCH" -c 16 -n 5000 --fail-on-error "http://127.0.0.1:$PPORT/hello" >/dev/null
    w=$(pgrep -P "$LAST" | head -1)
    f=$tmp/heap/heap.$w
    [[ -n $w && -f $f ]] || { echo "no counters of the proxy's worker" >&2; exit 1; }
    read -r e0 _ c0 o0 <<<"$(od -An -t u8 -v "$f" | tr -s ' \n' ' ')"
    taskset -c "$GEN_CPU" "$BENCH" -c 16 -n "$n" --fail-on-error "http://127.0.0.1:$PPORT/hello" >/dev/null
    read -r e1 _ c1 o1 <<<"$(od -An -t u8 -v "$f" | tr -s ' \n' ' ')"
    echo "$n proxied requests after 5000 of warm-up (worker ${f##*.}): petrel's code $((e1 - e0)) heap calls," \
        "the C library $((c1 - c0)), others $((o1 - o0)) (up to the end of the warm-up:" \
        "petrel's code $e0, the C library $c0, others $o0)"
    exit 0
fi

# ------------------------------------------------------------------ pool, storm
cc -shared -fPIC -O2 -I"$top/include" -o "$tmp/upt.so" "$top/tests/integration/upstream_mod.c" || exit 1
caller() { # name UPT_URLS UPT_OPTS -> LAST
    UPT_URLS=$2 UPT_OPTS=$3 start "$1" "$PETREL" --listen "127.0.0.1:$PPORT" --workers 1 \
        --log-level error --module "$tmp/upt.so"
    wait_port "$PPORT"
}
if [[ $mode == pool ]]; then
    n=${1:-50000}
    proto=${2:-http}
    case $proto in
    http) umod=echo scheme=http path=/up/echo ;;
    grpc) umod=grpcecho scheme=h2c path=/grpc-wrap/petrel.bench.Echo/Echo ;;
    *) echo "upstream-bench.sh pool: http or grpc, not '$proto'" >&2; exit 2 ;;
    esac
    start_upstream --module "$umod"
    echo "$proto calls"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-22s %5s %8s %9s %8s %8s %8s %8s %9s %7s\n' caller round total_ms req/s mean_ms \
        p50_ms p95_ms p99_ms upconns errors
    for r in 1 2 3; do
        for kind in pool per-call per-call-100/s; do
            case $kind in
            pool) opts="" ;;
            per-call) opts="max_requests=1,connects_per_sec=1000000" ;;
            *) opts="max_requests=1" ;;
            esac
            [[ $kind == per-call-100/s && $r -gt 1 ]] && continue
            m=$n
            [[ $kind == per-call-100/s ]] && m=2000
            caller "${kind%%/*}" "$scheme://127.0.0.1:$UPORT" "$opts"
            pid=$LAST
            taskset -c "$GEN_CPU" "$BENCH" -c 16 -n 1000 --body-size 512 --fail-on-error \
                "http://127.0.0.1:$PPORT$path" >/dev/null
            a0=$(accepted)
            out=$(taskset -c "$GEN_CPU" "$BENCH" -c 16 -n "$m" --body-size 512 --json \
                "http://127.0.0.1:$PPORT$path" 2>&1)
            a1=$(accepted)
            stop "$pid"
            python3 -c '
import json, sys
j = json.loads(sys.argv[1]); l = j["latency_us"]
print("%-22s %5s %8.1f %9.0f %8.3f %8.3f %8.3f %8.3f %9s %7d" % (sys.argv[2], sys.argv[3],
      j["duration_s"] * 1000, j["rps"], l["mean"] / 1000, l["p50"] / 1000, l["p95"] / 1000,
      l["p99"] / 1000, sys.argv[4], j["errors"]["total"]))' "$out" "$kind${opts:+ ($opts)}" "$r" $((a1 - a0))
        done
    done
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
if [[ $mode == storm ]]; then
    secs=${1:-10}
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    for kind in breaker no-breaker no-breaker-no-limit; do
        case $kind in
        breaker) opts="" ;;
        no-breaker) opts="breaker_failures=0,max_requests=1" ;;
        *) opts="breaker_failures=0,max_requests=1,connects_per_sec=1000000" ;;
        esac
        caller "$kind" "http://127.0.0.1:$DOWN" "$opts"
        pid=$LAST
        w=$(pgrep -P "$pid" | tail -1)
        w=${w:-$pid}
        s0=$(nstat -az TcpActiveOpens | awk '/TcpActiveOpens/ { print $2 }')
        t0=$(awk '{ print $14 + $15 }' "/proc/$w/stat")
        out=$(taskset -c "$GEN_CPU" "$BENCH" -c 16 -d "$secs" "http://127.0.0.1:$PPORT/up/hello" 2>&1)
        t1=$(awk '{ print $14 + $15 }' "/proc/$w/stat")
        s1=$(nstat -az TcpActiveOpens | awk '/TcpActiveOpens/ { print $2 }')
        stop "$pid"
        calls=$(awk '/requests in/ { print $1 }' <<<"$out")
        echo "== $kind${opts:+ ($opts)}: $calls calls ($((calls / secs))/s)," \
            "connection attempts (TcpActiveOpens, the whole machine, the client's 16 included)" \
            "$((s1 - s0)) ($(((s1 - s0) / secs))/s), caller worker CPU" \
            "$(awk -v t=$((t1 - t0)) -v s="$secs" -v hz="$(getconf CLK_TCK)" -v c="$calls" \
                'BEGIN { printf "%.1f %% (%.1f us per call)", 100 * t / hz / s, 1e6 * t / hz / c }')"
        echo "$out" | grep -E 'Latency |^ +[0-9.]+(us|ms|s) |50%|99%|Errors'
        echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    done
    exit 0
fi
