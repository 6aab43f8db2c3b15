#!/usr/bin/env bash
# The static module for programs that embed petrel: `make install` installs
# libpetrel-static.a, <petrel/static.h> and petrel-static.pc, and libpetrel
# itself has no static module (no petrel_static_mount).  A program that
# calls petrel_main() with petrel_module_static in its built-in table,
# built with `pkg-config --cflags --libs petrel-static` against the
# installed libpetrel.so (so the module uses the public API only), serves
# --root and --module static; one without the module refuses --root with a
# message that says why.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"

mod_install
work=$LIB_TMP/work
mkdir -p "$work/www"
cd "$work"
printf 'embedded\n' >www/index.html
printf 'plain\n' >www/NOTES

for f in "$STAGE_INC/petrel/static.h" "$STAGE_LIB/libpetrel-static.a" \
    "$STAGE_LIB/pkgconfig/petrel-static.pc"; do
    [[ -e $f ]] || fail "not installed: $f"
done
if command -v nm >/dev/null; then
    nm -D --defined-only "$STAGE_LIB/libpetrel.so.0" >"$LIB_TMP/syms"
    grep -q ' petrel_main$' "$LIB_TMP/syms" || fail "nm -D found no petrel_main in libpetrel.so"
    ! grep -q 'petrel_static_\|grpc' "$LIB_TMP/syms" ||
        fail "libpetrel.so exports the static module or the gRPC wire code: $(grep 'static\|grpc' "$LIB_TMP/syms")"
    grep -q ' petrel_range_parse$' "$LIB_TMP/syms" || fail "libpetrel.so lacks the HTTP semantics"
fi
ok "installed: libpetrel-static.a, petrel/static.h, petrel-static.pc; libpetrel.so has no static module"

cat >embed.c <<'EOF'
/* A program with petrel's command line and the static module built in. */
#include <petrel.h>
#include <petrel/static.h>

static const petrel_module_t *const builtins[] = {&petrel_module_static, NULL};

int main(int argc, char **argv)
{
    return petrel_main(argc, argv, builtins);
}
EOF
cat >bare.c <<'EOF'
/* The same program without the static module. */
#include <petrel.h>

static const petrel_module_t *const builtins[] = {NULL};

int main(int argc, char **argv)
{
    return petrel_main(argc, argv, builtins);
}
EOF
# a build with the sanitizers installs instrumented objects: link them so
san=()
[[ ${PETREL_SANITIZERS:-no} == yes ]] && san=(-fsanitize=address,undefined)
# shellcheck disable=SC2046 # pkg-config prints word lists
cc -Wall -Werror "${san[@]}" embed.c $(pkg-config --cflags --libs petrel-static) -o embed ||
    fail "cc embed.c \$(pkg-config --cflags --libs petrel-static) failed"
# shellcheck disable=SC2046
cc -Wall -Werror "${san[@]}" bare.c $(pkg-config --cflags --libs petrel) -o bare ||
    fail "cc bare.c failed"
export LD_LIBRARY_PATH=$STAGE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the embedding programs are the server here: petrel_start runs $PETREL
PETREL=$work/embed
petrel_start --root "$work/www" --default-type text/plain --module "static:/again=$work/www"
expect_eq "$(curl_ "$BASE/")" embedded "GET / from the embedding program"
curl_ -D "$LIB_TMP/h" -o /dev/null "$BASE/again/NOTES"
expect_eq "$(header_value "$LIB_TMP/h" Content-Type)" application/octet-stream "the second mount's own default"
curl_ -D "$LIB_TMP/h" -o /dev/null "$BASE/NOTES"
expect_eq "$(header_value "$LIB_TMP/h" Content-Type)" text/plain "--default-type on --root"
petrel_stop
ok "a program linked with libpetrel-static serves --root and --module static"

rc=0
timeout "$(bound 20)" ./bare --listen 127.0.0.1:0 --root "$work/www" >"$LIB_TMP/bare.out" \
    2>"$LIB_TMP/bare.err" </dev/null || rc=$?
err=$(cat "$LIB_TMP/bare.err")
[[ $rc -eq 1 && $err == *"no built-in module 'static'"*"libpetrel-static"* ]] ||
    fail "a program without the static module, --root: status $rc, '$err'"
ok "a program without the static module refuses --root: $err"
