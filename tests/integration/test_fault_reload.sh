#!/usr/bin/env bash
# test_fault_reload.sh -- a new generation of modules that crashes or hangs
# cannot take the service down ("When a handler goes wrong" in the module
# guide; petrel(1), --init-timeout):
#   1. a module whose init crashes (SIGSEGV) at start-up: petrel exits with
#      status 1 and one line naming the module, the function and the signal;
#      one whose init hangs: the same at --init-timeout;
#   2. under load from keep-alive and one-request clients, SIGHUP with the
#      module rebuilt so that its init crashes, then so that its init hangs
#      past --init-timeout, then so that its worker_init crashes: each time
#      the log says "reload failed:" with the module, the function and what
#      happened, and the old generation serves throughout -- not one
#      request fails -- and a good build then reloads;
#   3. --dev: saving a source whose init crashes is the same.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"

src=$LIB_TMP/crashy.c
cat >"$src" <<'EOF'
#include <petrel.h>
#include <string.h>

#ifndef VERSION
#define VERSION "v0"
#endif

static int ver(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", VERSION, strlen(VERSION));
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)srv;
    (void)args;
#ifdef INIT_CRASH
    *(volatile int *)0 = 1;
#endif
#ifdef INIT_HANG
    for (;;)
        ;
#endif
    return 0;
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
#ifdef WORKER_INIT_CRASH
    *(volatile int *)0 = 1;
#endif
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/ver", ver, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(crashy, routes, init, worker_init, NULL)
EOF
so=$LIB_TMP/crashy.so
# build VERSION [CFLAG]...: a new file renamed over the old one
build() {
    local v=$1
    shift
    cc -shared -fPIC -g -I"$top_srcdir/include" -DVERSION="\"$v\"" "$@" -o "$so.tmp" "$src"
    mv -f "$so.tmp" "$so"
}

# --- 1. at start-up ---------------------------------------------------------------
# start_fails WHAT NEEDLE ARG...: petrel exits 1 within 10 s, before serving,
# and its one line of error names NEEDLE
start_fails() {
    local what=$1 needle=$2 rc=0
    shift 2
    timeout -k 2 "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 "$@" >"$LIB_TMP/start.out" \
        2>"$LIB_TMP/start.err" </dev/null || rc=$?
    [[ $rc -eq 1 ]] || fail "$what: exit status $rc, want 1: $(cat "$LIB_TMP/start.err")"
    grep -q -- "$needle" "$LIB_TMP/start.err" ||
        fail "$what: the error does not say '$needle': $(cat "$LIB_TMP/start.err")"
    ! grep -q "listening on" "$LIB_TMP/start.err" || fail "$what: it said it was listening"
    ok "$what: status 1, '$(grep -- "$needle" "$LIB_TMP/start.err")'"
}
build v0 -DINIT_CRASH
start_fails "init crashes at start-up" \
    "petrel: module 'crashy' init crashed: signal 11 (SIGSEGV) at address 0x0, code in crashy.so+0x" \
    --module "$so"
build v0 -DINIT_HANG
start_fails "init hangs at start-up" \
    "petrel: module 'crashy' init did not return within 1 s (--init-timeout)" \
    --module "$so" --init-timeout 1

# --- 2. SIGHUP under load ------------------------------------------------------------
build v0
petrel_start --module "$so" --module echo --workers 2 --init-timeout 2
master=$PETREL_PID
wait_for "$(bound 10)" nworkers 2

stopfile=$LIB_TMP/stop
result=$LIB_TMP/load.out
pyrun "$stopfile" "$result" <<'EOF' &
import sys
from petrel_client import load_until
load_until(sys.argv[1], sys.argv[2], "/ver", b"v", keepalive=3, oneshot=3)
EOF
loadpid=$!
LIB_BG+=("$loadpid")

ver_is() {
    [[ $(curl_ "$BASE/ver") == "$1" ]]
}
wait_for "$(bound 10)" ver_is v0
gen=0
# reload_fails WHAT NEEDLE CFLAG: rebuild with CFLAG, SIGHUP, the log says
# "reload failed: NEEDLE...; still serving generation $gen", v0 still serves
failed_more() {
    [[ $(grep -c "reload failed: " "$PETREL_ERR") -gt $1 ]]
}
reload_fails() {
    local what=$1 needle=$2 n
    n=$(grep -c "reload failed: " "$PETREL_ERR" || true)
    build v1 "$3"
    kill -HUP "$master"
    wait_for "$(bound 20)" failed_more "$n"
    grep "reload failed: " "$PETREL_ERR" | tail -n 1 | grep -q -- "reload failed: $needle" ||
        fail "$what: $(grep "reload failed: " "$PETREL_ERR" | tail -n 1)"
    grep "reload failed: " "$PETREL_ERR" | tail -n 1 |
        grep -q "; still serving generation $gen\$" || fail "$what: not 'still serving'"
    lib_alive "$master" || fail "$what: the master died"
    ver_is v0 || fail "$what: v0 is not served any more"
    ok "$what: $(grep "reload failed: " "$PETREL_ERR" | tail -n 1 | sed 's/.*reload failed: //')"
}
reload_fails "SIGHUP, init crashes" \
    "module 'crashy' init crashed: signal 11 (SIGSEGV) at address 0x0, code in [0-9]*-crashy.so+0x" \
    -DINIT_CRASH
reload_fails "SIGHUP, init hangs" \
    "module 'crashy' init did not return within 2 s (--init-timeout); stopped it" -DINIT_HANG
reload_fails "SIGHUP, worker_init crashes" \
    "a new worker (pid [0-9]*) killed by signal 11 (SIGSEGV) in module 'crashy' worker_init, at address 0x0, code in [0-9]*-crashy.so+0x" \
    -DWORKER_INIT_CRASH
# and a good build still reloads (the generation numbers went on)
build v2
kill -HUP "$master"
wait_for "$(bound 20)" grep -q "reload: generation [0-9]* serving with 2 workers" "$PETREL_ERR"
wait_for "$(bound 10)" ver_is v2
ok "a good build after three bad ones: reloaded, v2 served"

touch "$stopfile"
wait "$loadpid" || true
read -r served errs <"$result"
[[ $errs -eq 0 ]] || fail "$errs requests failed under the reloads: $(tail -n +2 "$result")"
[[ $served -gt 100 ]] || fail "only $served requests served under load"
ok "under load through the failed reloads: $served requests, none failed"
petrel_stop "$master"

# --- 3. --dev: a save whose init crashes ------------------------------------------
dir=$LIB_TMP/dev
mkdir -p "$dir"
sed 's/^#ifdef INIT_CRASH/#if CRASH/' "$src" >"$dir/mod.c"
sed -i '1i #define CRASH 0' "$dir/mod.c"
petrel_start --dev --module "$dir/mod.c" --workers 2
dev=$PETREL_PID
wait_for "$(bound 10)" ver_is v0
sed -i 's/^#define CRASH 0/#define CRASH 1/' "$dir/mod.c"
wait_for "$(bound 30)" grep -q "reload failed: " "$PETREL_ERR"
line=$(grep "reload failed: " "$PETREL_ERR")
[[ $line == *"reload failed: module 'crashy' init crashed: signal 11 (SIGSEGV) at address 0x0, code in mod."*".so+0x"*"; still serving generation 0" ]] ||
    fail "--dev, init crashes: $line"
lib_alive "$dev" || fail "--dev: the master died"
ver_is v0 || fail "--dev: v0 is not served any more"
ok "--dev, a save whose init crashes: ${line#*reload failed: }"
sed -i 's/^#define CRASH 1/#define CRASH 0/' "$dir/mod.c"
wait_for "$(bound 30)" grep -q "reload: generation [0-9]* serving" "$PETREL_ERR"
ok "--dev: the fixed save reloads"
petrel_stop "$dev"
