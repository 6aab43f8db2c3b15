#!/usr/bin/env bash
# The static module as a module (modules/static/, not part of libpetrel):
# --root DIR is the built-in module static with a mount at /, its options
# passed as the module's arguments; --default-type; --module static with
# options and quoted values; --root and several --module static mounts in
# one load; a bad option refused at start-up; a module file (.so) that
# mounts a directory with petrel_static_mount() of <petrel/static.h>, which
# the petrel binary exports; and a reload (SIGHUP) serving the same mounts.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
D="$T/two words, one comma"
mkdir -p "$W/sub" "$D" "$T/other"
printf 'no extension\n' >"$W/README"
printf 'text\n' >"$W/a.txt"
printf 'x' >"$W/data.unknownext"
printf 'in D\n' >"$D/d.txt"
printf 'in D, no extension\n' >"$D/LICENSE"
printf 'other\n' >"$T/other/o.txt"

# has_header FILE NAME: the head in FILE (curl -D) has a field NAME
has_header() { tr -d '\r' <"$1" | grep -qi "^$2:"; }

# --- --default-type (nginx's default_type) -------------------------------------
petrel_start --root "$W"
curl_ -D "$T/h" -o /dev/null "$BASE/README"
expect_eq "$(header_value "$T/h" Content-Type)" application/octet-stream "no extension: the default"
petrel_stop
petrel_start --root "$W" --default-type 'text/plain; charset=utf-8'
for f in README data.unknownext; do
    curl_ -D "$T/h" -o /dev/null "$BASE/$f"
    expect_eq "$(header_value "$T/h" Content-Type)" "text/plain; charset=utf-8" "--default-type: $f"
done
curl_ -D "$T/h" -o /dev/null "$BASE/a.txt"
expect_eq "$(header_value "$T/h" Content-Type)" "text/plain; charset=utf-8" "a known extension keeps its type"
petrel_stop
ok "--default-type sets the type of files without a known extension"

# --- --module static with options; with --root, in one load -------------------
# a directory whose name holds a comma and spaces, quoted; options of its own
petrel_start --root "$W" --cache-control no-cache \
    --module "static:/d=\"$D\",autoindex,default-type=\"text/markdown; charset=utf-8\",cache-control=\"public, max-age=60\"" \
    --module "static:o=$T/other;/o2/=$T/other,index=o.txt"
curl_ -D "$T/h" -o "$T/b" "$BASE/d/d.txt"
expect_eq "$(cat "$T/b")" "in D" "GET /d/d.txt"
expect_eq "$(header_value "$T/h" Cache-Control)" "public, max-age=60" "the mount's own Cache-Control"
curl_ -D "$T/h" -o /dev/null "$BASE/d/LICENSE"
expect_eq "$(header_value "$T/h" Content-Type)" "text/markdown; charset=utf-8" "the mount's default-type"
curl_ -D "$T/h" -o "$T/b" "$BASE/d/"
expect_eq "$(status_of "$T/h")" 200 "the mount's autoindex"
grep -qF '<a href="./LICENSE">LICENSE</a>' "$T/b" || fail "the listing of /d/: $(cat "$T/b")"
curl_ -D "$T/h" -o /dev/null "$BASE/a.txt"
expect_eq "$(header_value "$T/h" Cache-Control)" "no-cache" "--root keeps its --cache-control"
curl_ -D "$T/h" -o /dev/null "$BASE/sub/"
expect_eq "$(status_of "$T/h")" 404 "--root has no --autoindex: its own options only"
expect_eq "$(curl_ "$BASE/o/o.txt")" other "static:o=DIR (prefix without its slash)"
expect_eq "$(curl_ "$BASE/o2/")" other "a second mount of the same spec (;), index=o.txt"
grep -q "module 'static'.*loaded twice" "$PETREL_ERR" && fail "loaded twice: $(cat "$PETREL_ERR")"
# a reload sets the same mounts up again
kill -HUP "$PETREL_PID"
wait_for "$(bound 20)" grep -q "generation 1 serving" "$PETREL_ERR"
expect_eq "$(curl_ "$BASE/d/d.txt")" "in D" "GET /d/d.txt after SIGHUP"
expect_eq "$(curl_ "$BASE/a.txt")" "text" "GET /a.txt (--root) after SIGHUP"
petrel_stop
ok "--root and two --module static specs (three mounts, quoted values) in one load, and after a reload"

# --- bad arguments of the module: refused at start-up, naming the cause ---------
check_refused() {
    local needle=$1 rc=0
    shift
    timeout -k 2 "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
    [[ $rc -eq 1 ]] || fail "petrel $*: status $rc, want 1: $(cat "$T/err")"
    grep -qF -- "$needle" "$T/err" || fail "petrel $*: the message does not say '$needle': $(cat "$T/err")"
}
check_refused "option 'autoindx'" --module "static:/x=$W,autoindx"
check_refused "option 'cache-size=lots'" --module "static:/x=$W,cache-size=lots"
check_refused "option 'default-type=plain'" --module "static:/x=$W,default-type=plain"
check_refused "closing '\"'" --module "static:/x=\"$W"
check_refused "not a readable directory" --module "static:/x=$T/none"
check_refused "a mount without a directory" --module "static:/x="
ok "bad module arguments and --default-type are refused with a message naming them"

# --- a module file that mounts with petrel_static_mount() -------------------------
if command -v cc >/dev/null; then
    cat >"$T/mnt.c" <<'EOF'
/* Mounts a directory from its init, with options of its own. */
#include <petrel.h>
#include <petrel/static.h>

static int init(petrel_server_t *srv, const char *args)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.default_type = "text/x-mounted";
    int rc = petrel_static_mount(srv, "/m/", args, &o);
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "mnt: %s: %s", args, petrel_strerror(rc));
    return rc;
}

PETREL_MODULE(mnt, NULL, init, NULL, NULL)
EOF
    cc -shared -fPIC -Wall -Werror -I"$top_srcdir/include" -o "$T/mnt.so" "$T/mnt.c" ||
        fail "cc mnt.c failed"
    petrel_start --module "$T/mnt.so:$W"
    curl_ -D "$T/h" -o "$T/b" "$BASE/m/README"
    expect_eq "$(cat "$T/b")" "no extension" "GET /m/README from the module's mount"
    expect_eq "$(header_value "$T/h" Content-Type)" "text/x-mounted" "its default_type"
    petrel_stop
    ok "a module file mounts a directory with petrel_static_mount() (exported by petrel)"
else
    ok "no C compiler (cc): the module file mounting a directory is not tried"
fi
