#!/usr/bin/env bash
# The command line: bad options are usage errors (status 2) with one line on
# stderr naming the option; start-up errors (an address in use, an unknown
# module, a bad --root or --access-log) have status 1 and a message naming
# the cause; --help and --version exit 0; SIGTERM and SIGINT exit 0;
# several --listen addresses all serve.  See petrel(1), EXIT STATUS.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
failures=()
not_ok() {
    printf 'not ok - %s\n' "$*"
    failures+=("$*")
}

# run_petrel ARG...: run petrel to completion (bounded: a petrel that starts
# serving instead of failing is killed after 5 s and reported); sets RC,
# ERR (its stderr) and OUT (its stdout).
run_petrel() {
    RC=0
    timeout -k 2 "$(bound 5)" "$PETREL" "$@" >"$T/out" 2>"$T/err" </dev/null || RC=$?
    ERR=$(cat "$T/err")
    OUT=$(cat "$T/out")
}

# expect_error STATUS NEEDLE WHAT ARG...: petrel ARG... exits with STATUS
# before serving and prints exactly one line on stderr, containing NEEDLE.
expect_error() {
    local want=$1 needle=$2 what=$3 nlines
    shift 3
    run_petrel "$@"
    nlines=$(printf '%s' "$ERR" | grep -c '' || true)
    if [[ $RC -eq 124 || $RC -eq 137 ]]; then
        not_ok "$what: petrel $* did not exit (it started serving?)"
    elif [[ $RC -ne $want ]]; then
        not_ok "$what: petrel $* exited with status $RC, want $want; stderr: $ERR"
    elif [[ $ERR != *"$needle"* ]]; then
        not_ok "$what: petrel $*: the message does not name '$needle': $ERR"
    elif [[ $nlines -ne 1 ]]; then
        not_ok "$what: petrel $*: want one line on stderr, got $nlines: $ERR"
    else
        ok "$what: status $want, '$ERR'"
    fi
}

# Every case listens on a port of the kernel's choice (if the bad option
# were accepted, petrel would serve and be timed out) and loads a module
# (no warning about serving nothing on stderr).
L=(--listen 127.0.0.1:0 --module hello)

# --- usage errors: status 2 -----------------------------------------------
expect_error 2 --workers "--workers x" "${L[@]}" --workers x
expect_error 2 --workers "--workers 0" "${L[@]}" --workers 0
expect_error 2 --workers "--workers=2x" "${L[@]}" --workers=2x
expect_error 2 --max-body-size "--max-body-size -1" "${L[@]}" --max-body-size -1
expect_error 2 --max-body-size "--max-body-size=-1" "${L[@]}" --max-body-size=-1
expect_error 2 --max-header-size "--max-header-size 2m" "${L[@]}" --max-header-size 2m
expect_error 2 --max-uri-size "--max-uri-size 12q" "${L[@]}" --max-uri-size 12q
expect_error 2 --header-timeout "--header-timeout 0" "${L[@]}" --header-timeout 0
expect_error 2 --drain-timeout "--drain-timeout soon" "${L[@]}" --drain-timeout soon
expect_error 2 --body-timeout "--body-timeout 0" "${L[@]}" --body-timeout 0
expect_error 2 --body-min-rate "--body-min-rate slow" "${L[@]}" --body-min-rate slow
expect_error 2 --handler-timeout "--handler-timeout -1" "${L[@]}" --handler-timeout -1
expect_error 2 --max-pipelined "--max-pipelined 0" "${L[@]}" --max-pipelined 0
expect_error 2 --h2-max-resets "--h2-max-resets 0" "${L[@]}" --h2-max-resets 0
expect_error 2 --admin-max-connections "--admin-max-connections 0" "${L[@]}" \
    --admin-max-connections 0
expect_error 2 --h2-reset-rate "--h2-reset-rate many" "${L[@]}" --h2-reset-rate many
expect_error 2 --keepalive-timeout "--keepalive-timeout 1k" "${L[@]}" --keepalive-timeout 1k
expect_error 2 --h2-output-budget "--h2-output-budget 64k" "${L[@]}" --h2-output-budget 64k
expect_error 2 --h2-output-budget "--h2-output-budget lots" "${L[@]}" --h2-output-budget lots
expect_error 2 --log-level "--log-level loud" "${L[@]}" --log-level loud
expect_error 2 --nope "--nope" "${L[@]}" --nope
expect_error 2 --listen "--listen 1.2.3.4:99999" --module hello --listen 1.2.3.4:99999
expect_error 2 --listen "--listen 127.0.0.1:http" --module hello --listen 127.0.0.1:http
expect_error 2 --listen "--listen without a value" --module hello --listen
# a bare port named no address and bound every interface: refused, with the
# two addresses it may have meant
expect_error 2 "127.0.0.1:18485 (this host only)" "--listen PORT" --module hello --listen 18485
expect_error 2 "0.0.0.0:18485 (every interface)" "--listen :PORT" --module hello --listen :18485
expect_error 2 --admin-listen "--admin-listen PORT" "${L[@]}" --admin-listen 18486
# the fault flags (petrel(1), "When a handler goes wrong" in the guide)
expect_error 2 --init-timeout "--init-timeout 0" "${L[@]}" --init-timeout 0
expect_error 2 --init-timeout "--init-timeout soon" "${L[@]}" --init-timeout soon
expect_error 2 --watchdog-timeout "--watchdog-timeout -1" "${L[@]}" --watchdog-timeout -1
expect_error 2 --restart-limit "--restart-limit -1" "${L[@]}" --restart-limit -1
expect_error 2 --restart-limit "--restart-limit 2x" "${L[@]}" --restart-limit 2x
expect_error 2 extra "an unexpected argument" "${L[@]}" extra
# memory that comes back (petrel(1), "Memory")
expect_error 2 "a size from 0 to 1g" "--memory-reserve 2g" "${L[@]}" --memory-reserve 2g
expect_error 2 "a size from 0 to 1g" "--memory-reserve lots" "${L[@]}" --memory-reserve lots
expect_error 2 "a size from 0 to 1g" "--memory-reserve -1" "${L[@]}" --memory-reserve -1
expect_error 2 --memory-release-delay "--memory-release-delay 0" "${L[@]}" \
    --memory-release-delay 0
expect_error 2 --memory-release-delay "--memory-release-delay soon" "${L[@]}" \
    --memory-release-delay soon
# production flags (doc/deployment.md)
expect_error 2 --trusted-proxies "--trusted-proxies without --proxy-protocol" "${L[@]}" \
    --trusted-proxies 10.0.0.0/8
expect_error 2 --trusted-proxies "--trusted-proxies 10.0.0.0/33" "${L[@]}" --proxy-protocol \
    --trusted-proxies 10.0.0.0/33
expect_error 2 --trusted-proxies "--trusted-proxies with a name" "${L[@]}" --proxy-protocol \
    --trusted-proxies 10.0.0.1,lb.example
expect_error 2 --max-proxy-header-size "--max-proxy-header-size 100" "${L[@]}" --proxy-protocol \
    --max-proxy-header-size 100
expect_error 2 --max-proxy-header-size "--max-proxy-header-size 64k" "${L[@]}" --proxy-protocol \
    --max-proxy-header-size 64k
expect_error 2 --admin-listen "--admin-listen 127.0.0.1:99999" "${L[@]}" --admin-listen 127.0.0.1:99999
expect_error 2 --drain-delay "--drain-delay -1" "${L[@]}" --drain-delay -1
expect_error 2 --access-log-format "--access-log-format xml" "${L[@]}" --access-log-format xml
expect_error 1 --error-log "--error-log in a missing directory" "${L[@]}" --error-log /nonexistent/e.log
expect_error 1 --pid-file "--pid-file in a missing directory" "${L[@]}" --pid-file /nonexistent/p.pid

# publish/subscribe (doc/pubsub.md): each limit's flag refuses what it cannot take
expect_error 2 --ws-send-overflow "--ws-send-overflow maybe" "${L[@]}" --ws-send-overflow maybe
expect_error 2 --pubsub-max-topic-size "--pubsub-max-topic-size 0" "${L[@]}" \
    --pubsub-max-topic-size 0
expect_error 2 --pubsub-max-topic-size "--pubsub-max-topic-size 64k" "${L[@]}" \
    --pubsub-max-topic-size 64k
expect_error 2 --pubsub-max-message-size "--pubsub-max-message-size 1g" "${L[@]}" \
    --pubsub-max-message-size 1g
expect_error 2 --pubsub-max-subscriptions "--pubsub-max-subscriptions 0" "${L[@]}" \
    --pubsub-max-subscriptions 0
expect_error 2 --pubsub-max-subscribers "--pubsub-max-subscribers many" "${L[@]}" \
    --pubsub-max-subscribers many
expect_error 2 --pubsub-ring-size "--pubsub-ring-size 100k (not a power of two)" "${L[@]}" \
    --pubsub-ring-size 100k
expect_error 2 --pubsub-ring-size "--pubsub-ring-size 32k" "${L[@]}" --pubsub-ring-size 32k
expect_error 2 --pubsub-redis "--pubsub-redis without a port" "${L[@]}" --pubsub-redis localhost
expect_error 2 --pubsub-redis "--pubsub-redis with port 0" "${L[@]}" --pubsub-redis 127.0.0.1:0
expect_error 2 --pubsub-redis "--pubsub-redis unix: without a path" "${L[@]}" --pubsub-redis unix:
expect_error 2 --pubsub-redis-prefix "--pubsub-redis-prefix with a control character" \
    "${L[@]}" --pubsub-redis-prefix $'a\x01b'
# a ring that cannot hold four of the largest messages: a start-up error
expect_error 1 --pubsub-ring-size "--pubsub-ring-size too small for --pubsub-max-message-size" \
    "${L[@]}" --workers 2 --pubsub-ring-size 64k --pubsub-max-message-size 64k

# --- start-up errors: status 1 --------------------------------------------
# A port in use: a plain listening socket holds it (RFC-free: bind(2) says
# EADDRINUSE), and another petrel holds it.
"$PY" - "$T/held" <<'EOF' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
EOF
holder=$!
LIB_BG+=("$holder")
wait_for "$(bound 10)" test -s "$T/held"
held=$(cat "$T/held")
expect_error 1 "127.0.0.1:$held" "--listen on a port held by another socket" \
    --module hello --listen "127.0.0.1:$held"
[[ $ERR == *"in use"* ]] || not_ok "port in use: the message does not say so: $ERR"
kill "$holder"
wait "$holder" 2>/dev/null || true

petrel_start --module hello
first=$PETREL_PID
expect_error 1 "127.0.0.1:$PORT" "--listen on the port of a running petrel" \
    --module hello --listen "127.0.0.1:$PORT"
curl_ -o /dev/null "$BASE/hello"

expect_error 1 nosuch "--module nosuch" "${L[@]}" --module nosuch
expect_error 1 ./nosuch.so "--module ./nosuch.so" "${L[@]}" --module ./nosuch.so
expect_error 1 /nonexistent "--root /nonexistent" "${L[@]}" --root /nonexistent
touch "$T/file"
expect_error 1 "$T/file" "--root on a file" "${L[@]}" --root "$T/file"
expect_error 1 /nonexistent/dir/access.log "--access-log in a missing directory" \
    "${L[@]}" --access-log /nonexistent/dir/access.log

expect_error 2 --default-type "--default-type without a slash" "${L[@]}" --default-type plain
expect_error 2 --cache-control "--cache-control with a line break" "${L[@]}" \
    --cache-control $'no-cache\r\nX-Injected: 1'

# --- the options of --root without it: a warning naming them --------------------
# (it used to name whichever option came last on the line: --workers here)
petrel_start --module hello --autoindex --workers 1
w=$(grep 'apply\|applies' "$PETREL_ERR")
if [[ $w == *"[warn]"*"--autoindex applies to --root, and there is none"* && $w != *--workers* ]]; then
    ok "--autoindex without --root: '$w'"
else
    not_ok "--autoindex without --root: the warning is '$w'"
fi
petrel_stop
petrel_start --static-cache-size=1m --module hello --cache-control no-cache --autoindex \
    --default-type text/plain --max-body-size 1m
w=$(grep 'apply\|applies' "$PETREL_ERR")
want="--static-cache-size, --cache-control, --autoindex and --default-type apply to --root"
if [[ $w == *"$want"* && $w != *--max-body-size* ]]; then
    ok "four static options without --root: '$w'"
else
    not_ok "four static options without --root: the warning is '$w'"
fi
petrel_stop

# --- --root needs the static module ---------------------------------------------
# (a program embedding petrel without it: see check_static.c, root_without_module)

# --- --help, --version: status 0 -----------------------------------------
run_petrel --help
if [[ $RC -eq 0 && $OUT == *usage:* && $OUT == *--listen* && $OUT == *--drain-timeout* && -z $ERR ]]; then
    ok "--help: status 0, usage on stdout"
else
    not_ok "--help: status $RC, stdout '$OUT', stderr '$ERR'"
fi
run_petrel --version
if [[ $RC -eq 0 && $OUT =~ ^petrel\ [0-9]+\.[0-9]+ && -z $ERR ]]; then
    ok "--version: status 0, '${OUT%%$'\n'*}'"
else
    not_ok "--version: status $RC, stdout '$OUT', stderr '$ERR'"
fi
# the optional parts, said as configure found them (config.h)
want_pg=no want_redis=no
grep -q '^#define HAVE_PGSQL 1' "$top_builddir/config.h" && want_pg=yes
grep -q '^#define HAVE_HIREDIS 1' "$top_builddir/config.h" && want_redis=yes
if [[ $OUT == *"PostgreSQL pool: $want_pg"* && $OUT == *"Redis bridge of publish/subscribe: $want_redis"* &&
    $OUT == *"systemd: socket activation and readiness notification"* ]]; then
    ok "--version names the optional parts: PostgreSQL pool $want_pg, Redis bridge $want_redis, systemd"
else
    not_ok "--version does not say PostgreSQL pool $want_pg, Redis bridge $want_redis and systemd: '$OUT'"
fi

# --- signals: SIGTERM and SIGINT end petrel with status 0 ----------------
petrel_stop "$first"
ok "SIGTERM: exit status 0"
petrel_start --module hello
curl_ -o /dev/null "$BASE/hello"
kill -INT "$PETREL_PID"
petrel_wait_exit "$PETREL_PID" "$(bound 15)"
[[ $PETREL_RC -eq 0 ]] && ok "SIGINT: exit status 0" || not_ok "SIGINT: exit status $PETREL_RC, want 0"
petrel_start --module hello --workers 2
kill -TERM "$PETREL_PID"
petrel_wait_exit "$PETREL_PID" "$(bound 15)"
[[ $PETREL_RC -eq 0 ]] && ok "SIGTERM right after start-up, 2 workers: exit status 0" ||
    not_ok "SIGTERM right after start-up: exit status $PETREL_RC, want 0"

# --- several --listen addresses, --option=value, --workers auto ----------
petrel_start --listen=127.0.0.1:0 --listen 127.0.0.1:0 --module=hello --workers auto
mapfile -t ports < <(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9][0-9]*\) with .*/\1/p' "$PETREL_ERR")
if [[ ${#ports[@]} -ne 2 || ${ports[0]} == "${ports[1]}" ]]; then
    not_ok "two --listen 127.0.0.1:0: logged ports '${ports[*]}'"
else
    for p in "${ports[@]}"; do
        wait_port "$p"
        body=$(curl_ "http://127.0.0.1:$p/hello")
        [[ $body == "Hello World!" ]] || not_ok "port $p answered '$body'"
    done
    ok "two --listen addresses both serve (ports ${ports[*]})"
fi
nw=$(petrel_workers | wc -l)
[[ $nw -eq $(nproc) ]] && ok "--workers auto: $nw workers, one per CPU" ||
    not_ok "--workers auto: $nw workers, $(nproc) CPUs"
petrel_stop

if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
    petrel_start --listen '[::1]:0' --module hello
    body=$(curl_ -g "$BASE/hello")
    [[ $body == "Hello World!" ]] && ok "--listen [::1]:0 serves over IPv6" ||
        not_ok "--listen [::1]:0 answered '$body'"
    petrel_stop
else
    ok "no IPv6 loopback here: [::1] not tried"
fi

if [[ ${#failures[@]} -gt 0 ]]; then
    printf '%s\n' "${#failures[@]} command-line checks failed:" "${failures[@]/#/  }" >&2
    exit 1
fi
