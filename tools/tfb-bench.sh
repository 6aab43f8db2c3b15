#!/usr/bin/env bash
# tfb-bench.sh -- the tfb module against PostgreSQL's own ceiling, measured
# in one run on one machine (doc/benchmarks.md, "PostgreSQL"):
#
#   pgbench -S -M prepared        the built-in select-only transaction
#   pgbench world.sql             SELECT id, randomnumber FROM world WHERE id = :id
#                                 (the query of /db), -M prepared
#   pgbench world20.sql           20 of them between \startpipeline and
#                                 \endpipeline (the queries of /queries?queries=20)
#   petrel /json, /plaintext, /db, /queries?queries=20, /fortunes,
#          /updates?queries=20, /cached-queries?count=100
#                                 petrel-bench over HTTP_CONNS keep-alive
#                                 connections to petrel (one worker, a pool of
#                                 CONNS connections)
#   the peer, the same seven      with --peer 'CMD': another implementation of
#                                 the benchmark's test types (e.g. the
#                                 benchmark's own h2o entry), started by
#                                 bash -c 'exec CMD' pinned as petrel is, after
#                                 replacing {port} (PORT+1), {conns} (CONNS)
#                                 and {cpu} (SERVER_CPU) in CMD; give it one
#                                 worker thread and CONNS database
#                                 connections to compare like with like; CMD
#                                 tells it where the database is (or the PG*
#                                 variables, which it inherits).
#                                 --peer-cached PATH: its URL for cached
#                                 queries, up to the count (default
#                                 /cached-queries?count=; h2o's entry:
#                                 /cached-worlds?queries=).  Petrel and the
#                                 peer alternate first and second by round.
#
# Each server answers every route that needs the database once before the
# rounds (a server may connect to the database only when first asked).
# pgbench runs with CONNS connections (-c CONNS -j 1), as many as the pool
# has.  Each round runs every measurement once, the rounds interleave them,
# and the report gives each round and the median; rows/s = req/s x rows;
# with a peer, the ratios petrel/peer of each route (medians, and the range
# of the ratios within rounds), and petrel /db against pgbench -S.
# With each rate, the CPU time per transaction or request (from /proc, in
# microseconds): of the database server (its backends, and what the
# postmaster reaped of those that ended) and of the client of the database
# (pgbench, petrel's worker, or the peer's process).  On a shared, noisy machine the CPU times
# move less than the rates: the database's CPU per request is what bounds
# the rate when the database has a core to itself.
# The server is the one of the PG* variables (or libpq's defaults); it must
# hold the databases hello_world (examples/tfb/setup.sh) and pgbench
# (pgbench -i -s 1 pgbench).  Pinning: the database server to DB_CPU (its
# postmaster and backends: root, or the server's own user, is needed),
# petrel to SERVER_CPU, pgbench and petrel-bench to CLIENT_CPU.
#
# usage: tools/tfb-bench.sh [-r ROUNDS] [-d SECS] [-c CONNS] [--http-conns N]
#            [--db-cpu C] [--server-cpu C] [--client-cpu C] [--petrel PATH]
#            [--bench PATH] [--port PORT] [--peer CMD] [--peer-name NAME]
#            [--peer-cached PATH] [--only LIST]
# --only: a comma-separated subset of the measurements' names (pgbench-S,
# pgbench-world, pgbench-world20, json, plaintext, db, queries20, fortunes,
# updates20, cached100; the peer's are NAME:json and so on).
set -euo pipefail

ROUNDS=3 SECS=10 CONNS=4 HTTP_CONNS=64 DB_CPU= SERVER_CPU=0 CLIENT_CPU=1 PORT=28977
PEER= PEER_NAME=peer PEER_CACHED='/cached-queries?count=' ONLY=
here=$(cd "$(dirname "$0")" && pwd)
PETREL=$here/../build/src/petrel
BENCH=$here/../build/src/bench/petrel-bench
while (($#)); do
    case $1 in
    -r) ROUNDS=$2 ;;
    -d) SECS=$2 ;;
    -c) CONNS=$2 ;;
    --http-conns) HTTP_CONNS=$2 ;;
    --db-cpu) DB_CPU=$2 ;;
    --server-cpu) SERVER_CPU=$2 ;;
    --client-cpu) CLIENT_CPU=$2 ;;
    --petrel) PETREL=$2 ;;
    --bench) BENCH=$2 ;;
    --port) PORT=$2 ;;
    --peer) PEER=$2 ;;
    --peer-name) PEER_NAME=$2 ;;
    --peer-cached) PEER_CACHED=$2 ;;
    --only) ONLY=,$2, ;;
    -h | --help) sed -n '2,56s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "tfb-bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift 2
done
for t in pgbench:postgresql-client psql:postgresql-client taskset:util-linux \
    /usr/bin/time:time /usr/bin/python3:python3; do
    command -v "${t%%:*}" >/dev/null ||
        { echo "tfb-bench.sh: ${t%%:*} not found (Debian package ${t#*:})" >&2; exit 1; }
done
[[ -x $PETREL && -x $BENCH ]] || { echo "tfb-bench.sh: no $PETREL or $BENCH (build first)" >&2; exit 1; }
psql -X -At -d hello_world -c 'SELECT 1 FROM world LIMIT 1' >/dev/null ||
    { echo "tfb-bench.sh: no hello_world database (examples/tfb/setup.sh)" >&2; exit 1; }
psql -X -At -d pgbench -c 'SELECT 1 FROM pgbench_accounts LIMIT 1' >/dev/null ||
    { echo "tfb-bench.sh: no pgbench database (pgbench -i -s 1 pgbench)" >&2; exit 1; }

[[ $PEER_NAME =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "tfb-bench.sh: --peer-name: letters, digits, _ . - only" >&2; exit 2; }
TMP=$(mktemp -d)
PID= PEER_PID=
cleanup() {
    [[ -z $PID ]] || { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; } || true
    [[ -z $PEER_PID ]] || { kill -TERM "$PEER_PID" 2>/dev/null; wait "$PEER_PID" 2>/dev/null; } || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# the postmaster: the parent of the checkpointer (which lives as long as it)
ckpt=$(psql -X -At -d postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
PM=$(awk '{ print $4 }' "/proc/$ckpt/stat")
if [[ -n $DB_CPU ]]; then
    for p in $PM $(pgrep -P "$PM"); do taskset -a -p -c "$DB_CPU" "$p" >/dev/null; done
fi

printf '\\set id random(1, 10000)\nSELECT id, randomnumber FROM world WHERE id = :id;\n' >"$TMP/world.sql"
{
    for i in $(seq 20); do echo "\\set id$i random(1, 10000)"; done
    echo '\startpipeline'
    for i in $(seq 20); do echo "SELECT id, randomnumber FROM world WHERE id = :id$i;"; done
    echo '\endpipeline'
} >"$TMP/world20.sql"

# CPU clock ticks: of the database server (its live processes, and its
# ended backends as the postmaster reaped them), and of process $1
ticks_of() { # PID... -> utime+stime (+ cutime+cstime with -c)
    local c=0 t=0 p st
    [[ $1 == -c ]] && { c=1; shift; }
    for p in "$@"; do
        st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        st=${st##*) }
        # shellcheck disable=SC2086
        set -- $st
        t=$((t + ${12} + ${13} + c * (${14} + ${15})))
    done
    echo "$t"
}
db_ticks() { echo $(($(ticks_of -c "$PM") + $(ticks_of $(pgrep -P "$PM")))); }
HZ=$(getconf CLK_TCK)
us() { awk -v t="$1" -v n="$2" -v hz="$HZ" 'BEGIN { printf "%.1f", n ? t * 1e6 / hz / n : 0 }'; }

pgb() { # NAME ARGS...: one pgbench run -> "NAME TPS ERRORS DB-US CLIENT-US"
    local name=$1 d0 d1 out n tps
    want "$name" || return 0
    shift
    d0=$(db_ticks)
    out=$(taskset -c "$CLIENT_CPU" /usr/bin/time -f 'cpu %U %S' pgbench -n -M prepared -c "$CONNS" \
        -j 1 -T "$SECS" "$@" 2>&1)
    sleep 0.5 # its backends exit after it: the postmaster reaps them (cutime)
    d1=$(db_ticks)
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
    n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    echo "$name ${tps:-0} 0 $(us $((d1 - d0)) "${n:-0}") $(awk -v n="${n:-0}" \
        '/^cpu / { printf "%.1f", n ? ($2 + $3) * 1e6 / n : 0 }' <<<"$out")"
}

wait_port() { # PORT NAME LOG
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "tfb-bench.sh: $2 did not start: $(cat "$3")" >&2
    exit 1
}

petrel_up() {
    taskset -c "$SERVER_CPU" "$PETREL" --listen "127.0.0.1:$PORT" --workers 1 --log-level error \
        --module "tfb:pool.connections=$CONNS dbname=hello_world" >"$TMP/petrel.log" 2>&1 &
    PID=$!
    wait_port "$PORT" petrel "$TMP/petrel.log"
}

# a first answer from each route that needs the database: a server may
# connect to it only when asked (h2o's entry takes seconds for its first
# /db), which is not what the rounds measure
warm() { # PORT CACHED-URL NAME
    /usr/bin/python3 - "$@" <<'PY' || { echo "tfb-bench.sh: $3 does not answer: $(cat "$TMP"/*.log)" >&2; exit 1; }
import sys, time, urllib.request
port, cached = sys.argv[1:3]
for path in ["/db", "/queries?queries=2", "/fortunes", "/updates?queries=2", cached + "2"]:
    for i in range(60):
        try:
            if urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=30).status == 200:
                break
        except Exception:
            pass
        time.sleep(0.5)
    else:
        sys.exit(1)
PY
}

PEER_PORT=$((PORT + 1))
peer_up() {
    local cmd=${PEER//\{port\}/$PEER_PORT}
    cmd=${cmd//\{conns\}/$CONNS}
    cmd=${cmd//\{cpu\}/$SERVER_CPU}
    echo "tfb-bench.sh: $PEER_NAME: $cmd" >&2
    taskset -c "$SERVER_CPU" bash -c "exec $cmd" >"$TMP/peer.log" 2>&1 &
    PEER_PID=$!
    wait_port "$PEER_PORT" "$PEER_NAME" "$TMP/peer.log"
}

want() { [[ -z $ONLY || $ONLY == *",$1,"* ]]; }

hb() { # NAME PATH [PORT PROCESS]: one petrel-bench run -> "NAME RPS ERRORS DB-US SERVER-US"
    local w d0 d1 p0 p1 n port=${3:-$PORT}
    want "$1" || return 0
    # petrel's worker (the child of the master), or the peer's process
    w=${4:-$(pgrep -P "$PID")}
    taskset -c "$CLIENT_CPU" "$BENCH" -c "$HTTP_CONNS" -d 1s "http://127.0.0.1:$port$2" >/dev/null
    d0=$(db_ticks)
    p0=$(ticks_of "$w")
    taskset -c "$CLIENT_CPU" "$BENCH" -c "$HTTP_CONNS" -d "${SECS}s" --json \
        "http://127.0.0.1:$port$2" >"$TMP/b.json"
    d1=$(db_ticks)
    p1=$(ticks_of "$w")
    n=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests"])' "$TMP/b.json")
    /usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[2], "%.1f" % j["rps"], j["errors"]["total"], sys.argv[3], sys.argv[4])' \
        "$TMP/b.json" "$1" "$(us $((d1 - d0)) "$n")" "$(us $((p1 - p0)) "$n")"
}

# the seven routes of one server: PREFIX CACHED-URL [PORT PROCESS]
routes() {
    local p=$1 c=$2
    shift 2
    hb "${p}json" /json "$@"
    hb "${p}plaintext" /plaintext "$@"
    hb "${p}db" /db "$@"
    hb "${p}queries20" "/queries?queries=20" "$@"
    hb "${p}fortunes" /fortunes "$@"
    hb "${p}updates20" "/updates?queries=20" "$@"
    hb "${p}cached100" "${c}100" "$@"
}

petrel_up
warm "$PORT" "/cached-queries?count=" petrel
if [[ -n $PEER ]]; then
    peer_up
    warm "$PEER_PORT" "$PEER_CACHED" "$PEER_NAME"
fi
: >"$TMP/all"
for ((r = 1; r <= ROUNDS; r++)); do
    {
        pgb pgbench-S -S pgbench
        pgb pgbench-world -f "$TMP/world.sql" hello_world
        pgb pgbench-world20 -f "$TMP/world20.sql" hello_world
        # petrel and the peer alternate, first one then the other
        if ((r % 2)) || [[ -z $PEER ]]; then
            routes "" "/cached-queries?count="
            [[ -z $PEER ]] || routes "$PEER_NAME:" "$PEER_CACHED" "$PEER_PORT" "$PEER_PID"
        else
            routes "$PEER_NAME:" "$PEER_CACHED" "$PEER_PORT" "$PEER_PID"
            routes "" "/cached-queries?count="
        fi
    } | sed "s/^/$r /" | tee -a "$TMP/all" >&2
done

/usr/bin/python3 - "$TMP/all" "$PEER_NAME" "$CONNS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
peer = sys.argv[2]
v, db, cl, rounds = {}, {}, {}, {}
errs = 0
for r in rows:
    v.setdefault(r[1], []).append(float(r[2]))
    rounds.setdefault(r[1], {})[r[0]] = float(r[2])
    errs += int(r[3])
    db.setdefault(r[1], []).append(float(r[4]))
    cl.setdefault(r[1], []).append(float(r[5]))
med = {k: statistics.median(x) for k, x in v.items()}
dbm = {k: statistics.median(x) for k, x in db.items()}
per = {"pgbench-world20": 20, "queries20": 20, "updates20": 20, "cached100": 100}
anchor = {"db": "pgbench-world", "queries20": "pgbench-world20"}
routes = ["json", "plaintext", "db", "queries20", "fortunes", "updates20", "cached100"]
names = ["pgbench-S", "pgbench-world", "pgbench-world20"] + routes + ["%s:%s" % (peer, k) for k in routes]
print("| measurement | req or tx/s, each round | median | rows/s | x anchor (rate) | database CPU us | server or client CPU us | x anchor (database CPU per row) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for k in names:
    if k not in med:
        continue
    base = k.split(":", 1)[-1]
    n = per.get(base, 1)
    ratio = cpu_ratio = ""
    if k in anchor and anchor[k] in med:
        a = anchor[k]
        na = per.get(a, 1)
        ratio = "%.2fx" % (med[k] * n / (med[a] * na))
        if dbm[k] > 0:
            cpu_ratio = "%.2fx" % ((dbm[a] / na) / (dbm[k] / n))
    print("| %s | %s | %s | %s | %s | %.1f | %.1f | %s |" % (
        k, " / ".join("%.0f" % x for x in v[k]), "{:,.0f}".format(med[k]), "{:,.0f}".format(med[k] * n),
        ratio, dbm[k], statistics.median(cl[k]), cpu_ratio))
if any(k.startswith(peer + ":") for k in med):
    print("\n| route | petrel req/s | %s req/s | petrel / %s (medians) | in each round | petrel server CPU us | %s server CPU us |" % (peer, peer, peer))
    print("|---|---:|---:|---:|---|---:|---:|")
    for k in routes:
        p = peer + ":" + k
        if k not in med or p not in med:
            continue
        each = ["%.2f" % (rounds[k][r] / rounds[p][r]) for r in sorted(rounds[k], key=int)
                if r in rounds[p] and rounds[p][r] > 0]
        print("| %s | %s | %s | %.2fx | %s | %.1f | %.1f |" % (
            k, "{:,.0f}".format(med[k]), "{:,.0f}".format(med[p]),
            med[k] / med[p] if med[p] else 0, " / ".join(each),
            statistics.median(cl[k]), statistics.median(cl[p])))
    if "db" in med and "pgbench-S" in med:
        print("\n/db against pgbench -S -M prepared (the same %s database connections): petrel %.2fx, %s %.2fx"
              % (sys.argv[3], med["db"] / med["pgbench-S"], peer, med.get(peer + ":db", 0) / med["pgbench-S"]))
print("\nHTTP errors in all rounds: %d" % errs)
PY
