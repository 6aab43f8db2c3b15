#!/usr/bin/env bash
# --dev (petrel(1)): `petrel --dev --module ./mod.c` builds the source with cc
# against the headers petrel was built with (petrel.h and petrel/*.h; no
# install needed), serves it,
# and rebuilds and swaps it in when the file -- or a header beside it --
# changes, however the editor saves it; a compile error is shown and the
# previous build keeps serving; under load through all of it, no request
# fails.  A module .so given with --dev is reloaded when it is rebuilt.
# An initial compile error stops petrel with status 1.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
dir=$LIB_TMP/dev
mkdir -p "$dir"
cd "$dir"

cat >msg.h <<'EOF'
#define MSG "from the header"
EOF
write_mod() { # VERSION [FILE]: the module source, written in place
    cat >"${2:-mod.c}" <<EOF
#include <petrel.h>
#include <petrel/pg.h>
#include <petrel/redis.h>
#include <petrel/static.h>
#include <string.h>
#include "msg.h"

static int ver(petrel_req_t *req, void *data)
{
    (void)data;
    static const char body[] = "$1 " MSG " " FLAG;
    return petrel_send(req, 200, "text/plain", body, strlen(body));
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/ver", ver, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(devmod, routes, NULL, NULL, NULL)
EOF
}
write_mod v1
# CFLAGS reach the compiler (split at blanks, as a shell would without quotes)
export CFLAGS='-O1 -Wall -DFLAG="cflags"'

petrel_start --dev --module ./mod.c --workers 2
master=$PETREL_PID
grep -q "dev: built ./mod.c" "$PETREL_ERR" || fail "no 'dev: built' in the log"
grep -q "dev: watching $dir/mod.c" "$PETREL_ERR" || fail "no 'dev: watching' in the log"
body_is() {
    [[ $(curl_ "http://127.0.0.1:$PORT/ver") == "$1" ]]
}
body_is "v1 from the header cflags" || fail "GET /ver: $(curl_ "$BASE/ver")"
ok "--dev --module ./mod.c: built with cc (and CFLAGS) and served"

# --- load through the edits ---------------------------------------------------
stopfile=$LIB_TMP/stop
result=$LIB_TMP/load.out
pyrun "$stopfile" "$result" <<'EOF' &
import sys
from petrel_client import load_until
load_until(sys.argv[1], sys.argv[2], "/ver", b"v", keepalive=6, oneshot=0)
EOF
loadpid=$!
LIB_BG+=("$loadpid")

n=0
reloaded() { # N: the log says N reloads succeeded
    [[ $(grep -c "reload: generation [0-9]* serving" "$PETREL_ERR") -ge $1 ]]
}

# saved in place (cat >, as many editors do)
write_mod v2
n=$((n + 1))
wait_for "$(bound 20)" reloaded $n
wait_for "$(bound 10)" body_is "v2 from the header cflags"
ok "saved in place: rebuilt and reloaded"

# saved by writing another file and renaming it over (vim, emacs, sed -i)
write_mod v3 .mod.c.swp
mv .mod.c.swp mod.c
n=$((n + 1))
wait_for "$(bound 20)" reloaded $n
wait_for "$(bound 10)" body_is "v3 from the header cflags"
ok "saved by rename: rebuilt and reloaded"

# a header beside the source
echo '#define MSG "from the new header"' >msg.h
n=$((n + 1))
wait_for "$(bound 20)" reloaded $n
wait_for "$(bound 10)" body_is "v3 from the new header cflags"
ok "a header beside it changed: rebuilt and reloaded"

# a compile error: shown, and the previous build keeps serving
printf 'this does not compile\n' >>mod.c
wait_for "$(bound 20)" grep -q "reload failed: --module './mod.c': build failed (compiler exit status 1; its messages are above); still serving generation" "$PETREL_ERR"
grep -q "mod.c:[0-9]*:[0-9]*: error" "$PETREL_ERR" || fail "the compiler's error is not in the terminal output: $(cat "$PETREL_ERR")"
body_is "v3 from the new header cflags" || fail "after a compile error: $(curl_ "$BASE/ver")"
ok "a compile error: the compiler's message is shown, the previous build keeps serving"

write_mod v4
n=$((n + 1))
wait_for "$(bound 20)" reloaded $n
wait_for "$(bound 10)" body_is "v4 from the new header cflags"
ok "fixed: rebuilt and reloaded"

# several saves in a row: one rebuild (150 ms debounce), the last one wins
for v in v5 v6 v7; do write_mod $v; done
n=$((n + 1))
wait_for "$(bound 20)" reloaded $n
wait_for "$(bound 10)" body_is "v7 from the new header cflags"
ok "three saves in a row: the last one is served"

touch "$stopfile"
wait "$loadpid" || fail "the load generator failed"
read -r nok nerr <"$result"
[[ $nerr -eq 0 ]] || fail "$nerr requests failed during the rebuilds: $(tail -n +2 "$result")"
[[ $nok -gt 100 ]] || fail "only $nok requests answered"
ok "under load: $nok requests answered through the rebuilds, 0 failed"
petrel_stop "$master"
left=("${TMPDIR:-/tmp}/petrel.$master".*) # nullglob: empty when none
[[ ${#left[@]} -eq 0 ]] || fail "the private directory of petrel $master is still there: ${left[*]}"
ok "SIGTERM: exit status 0; the build directory is removed"

# --- --dev with a module .so that something else builds ---------------------
write_mod s1
cc -shared -fPIC -I"$top_srcdir/include" -DFLAG='"so"' -o mod.so mod.c
petrel_start --dev --module ./mod.so
body_is "s1 from the new header so" || fail "GET /ver: $(curl_ "$BASE/ver")"
write_mod s2
cc -shared -fPIC -I"$top_srcdir/include" -DFLAG='"so"' -o mod.so mod.c
wait_for "$(bound 20)" reloaded 1
wait_for "$(bound 10)" body_is "s2 from the new header so"
petrel_stop
ok "--dev --module ./mod.so: reloaded when the .so is rebuilt"

# --- an initial compile error stops petrel ------------------------------------
printf 'nope\n' >bad.c
rc=0
timeout "$(bound 30)" "$PETREL" --listen 127.0.0.1:0 --dev --module ./bad.c >"$LIB_TMP/bad.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "--dev with a source that does not compile: status $rc, want 1: $(cat "$LIB_TMP/bad.out")"
grep -q "bad.c:1:1: error" "$LIB_TMP/bad.out" || fail "no compiler error shown: $(cat "$LIB_TMP/bad.out")"
grep -q "^petrel: --module './bad.c': build failed" "$LIB_TMP/bad.out" || fail "no petrel message: $(cat "$LIB_TMP/bad.out")"
rc=0
CC=/nonexistent/cc timeout "$(bound 30)" "$PETREL" --listen 127.0.0.1:0 --dev --module ./mod.c >"$LIB_TMP/bad.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "no compiler (/nonexistent/cc not found; set CC)" "$LIB_TMP/bad.out" ||
    fail "--dev with CC=/nonexistent/cc: status $rc: $(cat "$LIB_TMP/bad.out")"
ok "a source that does not compile at start-up, or no compiler: exit status 1 with the reason"
