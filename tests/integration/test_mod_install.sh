#!/usr/bin/env bash
# Out-of-tree modules against an installed petrel (the promise of the module
# guide): `make install` into a temporary prefix installs petrel, petrel-mod,
# petrel.h, petrel.pc, libpetrel and the man pages (petrel(1), petrel-mod(1),
# libpetrel(3) and a page per API declaration); each example module of
# modules/ builds out of the tree with `pkg-config --cflags --libs petrel`
# and with `petrel-mod build`, loads into the installed petrel and answers
# on its routes; a module linked with -lpetrel binds to the petrel binary
# (one copy of the library), and still works when a second copy is forced
# in; bad modules are refused with their clear errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"

mod_install
work=$LIB_TMP/work
mkdir -p "$work"
cd "$work"

# --- what is installed ------------------------------------------------------
for f in "$STAGE_BIN/petrel" "$STAGE_BIN/petrel-mod" "$STAGE_INC/petrel.h" \
    "$STAGE_LIB/libpetrel.so.0" "$STAGE_MAN/man1/petrel.1" "$STAGE_MAN/man1/petrel-mod.1" \
    "$STAGE_MAN/man3/libpetrel.3" "$STAGE_MAN/man3/petrel_route_add.3" \
    "$STAGE_MAN/man3/PETREL_MODULE.3" "$STAGE_MAN/man3/petrel_req_t.3"; do
    [[ -e $f ]] || fail "not installed: $f"
done
ok "make install: petrel, petrel-mod, petrel.h, petrel.pc, libpetrel and the man pages"

# every PETREL_API function and every public type has a page, and man shows it
mapfile -t api < <(sed -n 's/^PETREL_API [^(]*[ *]\([a-z_0-9]*\)(.*/\1/p' "$STAGE_INC/petrel.h")
mapfile -t types < <(grep -o 'petrel_[a-z_0-9]*_t;' "$STAGE_INC/petrel.h" | tr -d ';' | sort -u)
[[ ${#api[@]} -gt 30 ]] || fail "only ${#api[@]} PETREL_API functions found in petrel.h"
for name in "${api[@]}" "${types[@]}"; do
    [[ -f $STAGE_MAN/man3/$name.3 ]] || fail "no man page for $name"
done
if command -v man >/dev/null; then
    page=$(MANWIDTH=100 man -P cat petrel_route_add 2>&1) || fail "man petrel_route_add: $page"
    expect_match "$page" "petrel_route_add - Register a route" "man petrel_route_add"
    expect_match "$page" "int petrel_route_add\(petrel_server_t \*srv" "its synopsis"
    page=$(MANWIDTH=100 man -P cat PETREL_ENOTFOUND 2>&1) || fail "man PETREL_ENOTFOUND: $page"
    expect_match "$page" "Error codes" "man PETREL_ENOTFOUND (a link to the enum's page)"
    page=$(MANWIDTH=100 man -P cat libpetrel 2>&1) || fail "man libpetrel: $page"
    expect_match "$page" "petrel_send_text\(3\)" "man libpetrel (the index)"
fi
if command -v groff >/dev/null; then
    for f in "$STAGE_MAN"/man3/petrel*.3 "$STAGE_MAN"/man3/libpetrel.3 "$STAGE_MAN"/man1/petrel-mod.1; do
        w=$(groff -man -ww -z "$f" 2>&1) || fail "groff $f: $w"
        [[ -z $w ]] || fail "groff warns about $f: $w"
    done
fi
ok "a man page for each of ${#api[@]} functions and ${#types[@]} types; man petrel_route_add shows it"

# the petrel binary answers to libpetrel's soname (see Makefile.am)
if command -v readelf >/dev/null; then
    lib_soname=$(readelf -d "$STAGE_LIB/libpetrel.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    bin_soname=$(readelf -d "$STAGE_BIN/petrel" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    expect_eq "$bin_soname" "$lib_soname" "the soname of the petrel binary (PETREL_SONAME)"
    ok "petrel and libpetrel.so have the same soname: $lib_soname"
fi

# --- the example modules, out of tree ---------------------------------------
for m in hello echo kv wsecho; do
    cp "$top_srcdir/modules/$m.c" .
done
# a hello that says something else: a module file named like a built-in
# module must run its own code, not the built-in one
sed 's/Hello World!", 12/Hello, file!", 12/' hello.c >hello2.c
mv hello2.c hello.c
grep -q 'Hello, file!' hello.c || fail "could not change hello.c"

for m in hello echo kv wsecho; do
    # shellcheck disable=SC2046 # pkg-config prints word lists
    cc -shared -fPIC -Wall -Werror "$m.c" $(pkg-config --cflags --libs petrel) -o "$m-pc.so" ||
        fail "cc $m.c \$(pkg-config --cflags --libs petrel) failed"
    petrel-mod build -o "$m-mod.so" "$m.c" >"$LIB_TMP/pm.out" 2>&1 ||
        fail "petrel-mod build $m.c: $(cat "$LIB_TMP/pm.out")"
    grep -q "built $m-mod.so" "$LIB_TMP/pm.out" || fail "petrel-mod build says: $(cat "$LIB_TMP/pm.out")"
done
petrel-mod build kv.c >/dev/null && [[ -f kv.so ]] || fail "petrel-mod build kv.c made no kv.so"
ok "hello, echo, kv and wsecho build out of tree with pkg-config and with petrel-mod"

check_examples() {
    local v=$1 out
    petrel_start --module "./hello-$v.so" --module "./echo-$v.so" \
        --module "./kv-$v.so:prefix=/api,max_keys=2" --module "./wsecho-$v.so"
    out=$(curl_ "$BASE/hello")
    expect_eq "$out" "Hello, file!" "GET /hello from hello-$v.so"
    out=$(curl_ -H 'Content-Type: text/x-test' --data-binary 'echo me' "$BASE/echo")
    expect_eq "$out" "echo me" "POST /echo from echo-$v.so"
    out=$(curl_ -X PUT -H 'Content-Type: application/json' -d '{"n":[1,2]}' -w ' %{http_code}' "$BASE/api/kv/a")
    expect_eq "$out" '{"key":"a","bytes":11}
 201' "PUT /api/kv/a"
    out=$(curl_ "$BASE/api/kv/a")
    expect_eq "$out" '{"n":[1,2]}' "GET /api/kv/a"
    curl_ -X PUT -H 'Content-Type: application/json' -d '2' "$BASE/api/kv/b" >/dev/null
    out=$(curl_ -X PUT -H 'Content-Type: application/json' -d '3' -w ' %{http_code}' "$BASE/api/kv/c")
    expect_match "$out" '"status":507\}.* 507$' "PUT over max_keys=2"
    out=$(curl_ "$BASE/api/kv?prefix=a")
    expect_eq "$out" '{"count":1,"keys":["a"],"truncated":false}' "GET /api/kv?prefix=a"
    out=$(curl_ -o /dev/null -w '%{http_code}' "$BASE/kv/a")
    expect_eq "$out" 404 "GET /kv/a (the kv routes are under /api)"
    PORT=$PORT pyrun <<'EOF'
import base64, os, socket
from petrel_client import *
c = Conn()
key = base64.b64encode(os.urandom(16)).decode()
c.send(request("GET", "/ws", [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                              ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]))
while b"\r\n\r\n" not in c.buf:
    check(c._fill(), "connection closed before the 101: %r" % c.buf)
head, c.buf = c.buf.split(b"\r\n\r\n", 1)
check(head.startswith(b"HTTP/1.1 101 "), "GET /ws upgrade: %r" % head)
mask = b"\x01\x02\x03\x04"
payload = b"ping from the test"
c.send(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
while len(c.buf) < 2 + len(payload):
    check(c._fill(), "connection closed before the echo")
check(c.buf[:2] == bytes([0x81, len(payload)]) and c.buf[2:2 + len(payload)] == payload,
      "echo: %r" % c.buf)
ok("wsecho: a text message is echoed")
EOF
    petrel_stop
    ok "modules built with $( [[ $v == pc ]] && echo 'pkg-config --cflags --libs' || echo petrel-mod) load into the installed petrel and answer"
}
check_examples pc
check_examples mod

# --- a module linked with -lpetrel: one copy of libpetrel ------------------
cat >twocopies.c <<'EOF'
/* Uses what lives in thread-local and global state of the library: the
 * worker's chunk pool (arena), its event loop (timers) and the log level. */
#include <petrel.h>
#include <string.h>

static void later(void *data)
{
    petrel_req_t *req = data;
    petrel_stream_write(req, "timer fired\n", 12);
    petrel_stream_end(req);
}

static int h(petrel_req_t *req, void *data)
{
    (void)data;
    char *s = petrel_arena_printf(req->arena, "arena %d\n", 42);
    if (s == NULL || petrel_stream_begin(req, 200, "text/plain") < 0)
        return 500;
    petrel_stream_write(req, s, strlen(s));
    if (petrel_timer_start(1, later, req) == NULL)
        return petrel_stream_end(req);
    return 0;
}

static const petrel_route_t routes[] = {{PETREL_GET, "/two", h, NULL}, {0, NULL, NULL, NULL}};
PETREL_MODULE(twocopies, routes, NULL, NULL, NULL)
EOF
# shellcheck disable=SC2046
cc -shared -fPIC -Wall -Werror twocopies.c $(pkg-config --cflags --libs petrel) -o twocopies.so
readelf -d twocopies.so 2>/dev/null | grep -q 'NEEDED.*libpetrel.so.0' ||
    fail "twocopies.so does not need libpetrel.so.0: $(readelf -d twocopies.so)"

petrel_start --module ./twocopies.so
out=$(curl_ "$BASE/two")
expect_eq "$out" $'arena 42\ntimer fired' "GET /two"
w=$(petrel_workers | head -n 1)
! grep -q 'libpetrel\.so' "/proc/$w/maps" || fail "the worker mapped a copy of libpetrel.so: $(grep libpetrel "/proc/$w/maps")"
petrel_stop
ok "a module linked with -lpetrel needs no library path: it binds to the petrel binary (no libpetrel.so mapped)"

# a second copy forced in (as an embedder that preloads the library would):
# the module still uses the binary's copy, with its pool and loop
preload=$STAGE_LIB/libpetrel.so.0
# under ASan its runtime must come first
asan=$(ldd "$PETREL" 2>/dev/null | awk '/libasan/ { print $3 }')
[[ -z $asan ]] || preload="$asan $preload"
# (and two copies define the same globals: that is the point here).  Only
# petrel gets the preload: the tools petrel_start runs (sed, grep) would
# load libpetrel and everything it links too, and under ASan that can hang.
printf '#!/usr/bin/env bash\nASAN_OPTIONS=%q LD_PRELOAD=%q exec %q "$@"\n' \
    "${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" "$preload" "$PETREL" \
    >"$LIB_TMP/petrel-preloaded"
chmod +x "$LIB_TMP/petrel-preloaded"
petrel_real=$PETREL
PETREL=$LIB_TMP/petrel-preloaded petrel_start --module ./twocopies.so
PETREL=$petrel_real
w=$(petrel_workers | head -n 1)
grep -q 'libpetrel\.so' "/proc/$w/maps" || fail "LD_PRELOAD did not load a second copy of libpetrel"
for i in 1 2 3 4 5; do
    out=$(curl_ "$BASE/two")
    expect_eq "$out" $'arena 42\ntimer fired' "GET /two with two copies of libpetrel loaded"
done
petrel_stop
ok "with a second copy of libpetrel loaded, the module still works (arena, timers, log)"

# --- petrel-mod new ----------------------------------------------------------
petrel-mod new greet >"$LIB_TMP/pm.out" || fail "petrel-mod new greet: $(cat "$LIB_TMP/pm.out")"
[[ -f greet.c ]] || fail "petrel-mod new greet wrote no greet.c"
petrel-mod build greet.c >/dev/null || fail "the starter module does not build"
petrel_start --module ./greet.so:greeting=Hi
expect_eq "$(curl_ "$BASE/greet/world")" "Hi, world!" "GET /greet/world (greeting=Hi)"
petrel_stop
# an argument it does not take: it says which, and what it takes
rc=0
"$PETREL" --module ./greet.so:greting=Hi >"$LIB_TMP/bad.out" 2>"$LIB_TMP/bad.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "module 'greet': unknown argument 'greting=Hi' (it takes greeting=TEXT)" "$LIB_TMP/bad.err" ||
    fail "the starter with an unknown argument: status $rc, $(cat "$LIB_TMP/bad.err")"
# petrel-mod run: petrel --dev with the file, from the same installation
port=$(free_port)
petrel-mod run greet.c --listen "127.0.0.1:$port" >"$LIB_TMP/run.out" 2>"$LIB_TMP/run.err" &
runpid=$!
LIB_PIDS+=("$runpid")
wait_port "$port"
expect_eq "$(curl_ "http://127.0.0.1:$port/greet/run")" "Hello, run!" "GET /greet/run (petrel-mod run)"
grep -q "dev: built ./greet.c" "$LIB_TMP/run.err" || fail "petrel-mod run: no dev build in $(cat "$LIB_TMP/run.err")"
kill -TERM "$runpid"
petrel_wait_exit "$runpid" "$(bound 15)"
[[ $PETREL_RC -eq 0 ]] || fail "petrel-mod run: exit status $PETREL_RC after SIGTERM"
flags=$(petrel-mod flags)
inc=$(sed -n 's/^-I\([^ ]*\).*/\1/p' <<<"$flags")
[[ -n $inc && $(cd "$inc" && pwd) == "$STAGE_INC" ]] || fail "petrel-mod flags: '$flags', not -I$STAGE_INC"
expect_match "$(petrel-mod --version)" "^petrel-mod \(petrel\) [0-9]" "petrel-mod --version"
rc=0
petrel-mod new greet 2>"$LIB_TMP/pm.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "greet.c exists already" "$LIB_TMP/pm.err" ||
    fail "petrel-mod new over an existing file: status $rc, $(cat "$LIB_TMP/pm.err")"
rc=0
petrel-mod new 9lives 2>"$LIB_TMP/pm.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "not a C identifier" "$LIB_TMP/pm.err" ||
    fail "petrel-mod new 9lives: status $rc, $(cat "$LIB_TMP/pm.err")"
printf 'int broken(void) { return }\n' >broken.c
rc=0
petrel-mod build broken.c 2>"$LIB_TMP/pm.err" || rc=$?
[[ $rc -eq 1 ]] && grep -q "broken.c:1" "$LIB_TMP/pm.err" && grep -q "the compiler failed" "$LIB_TMP/pm.err" ||
    fail "petrel-mod build of a broken file: status $rc, $(cat "$LIB_TMP/pm.err")"
[[ ! -e broken.so ]] || fail "petrel-mod build left a broken.so behind"
ok "petrel-mod new: a starter that builds and answers, also with petrel-mod run; refusals with a reason"

# --- bad modules -------------------------------------------------------------
cat >nodesc.c <<'EOF'
int not_a_module(void) { return 1; }
EOF
cat >oldabi.c <<'EOF'
#include <petrel.h>
static const petrel_module_t desc = {PETREL_ABI_VERSION + 98, "oldabi", NULL, NULL, NULL, NULL};
PETREL_API const petrel_module_t *petrel_module_entry = &desc;
EOF
cat >initfail.c <<'EOF'
#include <petrel.h>
static int init(petrel_server_t *srv, const char *args) { (void)srv; (void)args; return PETREL_EINVAL; }
PETREL_MODULE(initfail, NULL, init, NULL, NULL)
EOF
cat >undef.c <<'EOF'
#include <petrel.h>
int petrel_no_such_function(void);
static int init(petrel_server_t *srv, const char *args) { (void)srv; (void)args; return petrel_no_such_function(); }
PETREL_MODULE(undef, NULL, init, NULL, NULL)
EOF
cat >clash.c <<'EOF'
#include <petrel.h>
static int h(petrel_req_t *req, void *data) { (void)data; return petrel_send_status(req, 204); }
static const petrel_route_t routes[] = {{PETREL_GET, "/hello", h, NULL}, {0, NULL, NULL, NULL}};
PETREL_MODULE(clash, routes, NULL, NULL, NULL)
EOF
for m in nodesc oldabi initfail undef clash; do
    petrel-mod build "$m.c" >/dev/null || fail "petrel-mod build $m.c"
done
expect_refused "^petrel: --module './nodesc.so': no module descriptor \(petrel_module_entry\): declare the module with PETREL_MODULE" \
    --module ./nodesc.so
abi=$(sed -n 's/^#define PETREL_ABI_VERSION \([0-9]*\)$/\1/p' "$STAGE_INC/petrel.h")
[[ -n $abi ]] || fail "no PETREL_ABI_VERSION in the installed petrel.h"
expect_refused "module 'oldabi' was built for petrel ABI version $((abi + 98)), this petrel has ABI version $abi: rebuild the module against this petrel's petrel.h" \
    --module ./oldabi.so
expect_refused "^petrel: module 'initfail': init failed: invalid argument" --module ./initfail.so
expect_refused "cannot load: .*undefined symbol: petrel_no_such_function \(a petrel function this petrel does not have" \
    --module ./undef.so
expect_refused "module 'clash': route '/hello': already registered by another module" \
    --module hello --module ./clash.so
expect_refused "module 'hello' is loaded twice" --module ./hello-pc.so --module ./hello-mod.so
expect_refused "^petrel: --module './missing.so': No such file or directory" --module ./missing.so
expect_refused "^petrel: --module 'nosuch': no built-in module of that name \(built-in: hello, echo, static, wsecho, kv" \
    --module nosuch
expect_refused "^petrel: --module 'greet.c': a C source file: build it into a shared object \(petrel-mod build greet.c\).*petrel --dev" \
    --module greet.c
ok "refused with exit status 1 and a clear message: no descriptor, another ABI, init failure, undefined symbol, route clash, loaded twice, missing file, unknown name, a .c without --dev"
