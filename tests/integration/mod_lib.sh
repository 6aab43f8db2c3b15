# mod_lib.sh -- helpers of the module tests (test_mod_*.sh), sourced after
# lib.sh.
#
#   mod_install   install the build tree into $LIB_TMP/stage with
#                 `make install DESTDIR=...` and point the environment at it:
#                 PATH (its bin first), PKG_CONFIG_PATH (its petrel.pc names
#                 the staged header: its paths are relative to itself),
#                 MANPATH; sets STAGE_PREFIX, STAGE_BIN, STAGE_INC,
#                 STAGE_LIB, STAGE_MAN and PETREL (the installed petrel).
#                 Skips the test (77) when there is no build tree to install
#                 from, no cc or no pkg-config.
#   mod_needs     skip the test (77) when there is no build tree to install
#                 from, no cc or no pkg-config; clear the compiler and
#                 pkg-config variables of the environment
#   mod_prog      write $LIB_TMP/prog.c, a program that calls into libpetrel
#                 (it prints "libpetrel says: not found"), and set SAN, the
#                 flags to link it under the sanitizers (or none)
#   mod_make ARG...  make -C $top_builddir ARG..., on its own (not a part of
#                 the make running the tests), one at a time (a lock in the
#                 build tree: tests install from it side by side)
#   expect_refused OUT-PATTERN PETREL-ARG...
#                 petrel with these arguments exits with status 1 at start-up
#                 and its standard error matches OUT-PATTERN (an ERE).

mod_needs() {
    [[ -n ${top_builddir:-} && -f $top_builddir/Makefile ]] ||
        skip "no build tree to install from (top_builddir is not set)"
    command -v cc >/dev/null || skip "no C compiler (cc)"
    command -v pkg-config >/dev/null || skip "no pkg-config"
    unset CFLAGS LDFLAGS LIBS CC PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
}

mod_prog() {
    SAN=
    [[ $PETREL_SANITIZERS != yes ]] || SAN=-fsanitize=address,undefined
    cat >"$LIB_TMP/prog.c" <<'EOF'
/* A program linked with libpetrel: it calls into the library. */
#include <petrel.h>
#include <stdio.h>

int main(void)
{
    printf("libpetrel says: %s\n", petrel_strerror(PETREL_ENOTFOUND));
    return 0;
}
EOF
}

mod_install() {
    mod_needs
    local stage=$LIB_TMP/stage prefix pc
    mod_make install DESTDIR="$stage" >"$LIB_TMP/install.log" 2>&1 ||
        fail "make install DESTDIR=$stage failed: $(tail -n 20 "$LIB_TMP/install.log")"
    pc=$(find "$stage" -name petrel.pc -path '*/pkgconfig/*' | head -n 1)
    [[ -n $pc ]] || fail "no petrel.pc installed under $stage"
    # ${pcfiledir}/../.. and so on: the directories where they are now
    prefix=$(PKG_CONFIG_PATH=${pc%/*} pkg-config --variable=prefix petrel)
    STAGE_PREFIX=$(cd "$prefix" && pwd) || fail "petrel.pc's prefix $prefix is not a directory"
    STAGE_BIN=$STAGE_PREFIX/bin
    STAGE_INC=$(cd "$(PKG_CONFIG_PATH=${pc%/*} pkg-config --variable=includedir petrel)" && pwd) ||
        fail "petrel.pc's includedir is not a directory"
    STAGE_LIB=$(dirname "$(dirname "$pc")")
    STAGE_MAN=$STAGE_PREFIX/share/man
    [[ -x $STAGE_BIN/petrel ]] || fail "no $STAGE_BIN/petrel after make install"
    PATH=$STAGE_BIN:$PATH
    PKG_CONFIG_PATH=$(dirname "$pc")
    MANPATH=$STAGE_MAN
    PETREL=$STAGE_BIN/petrel
    export PATH PKG_CONFIG_PATH MANPATH PETREL
}

mod_make() {
    (unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
     exec 8>>"$top_builddir/tests/integration/.lock-install"
     flock 8
     make -s -C "$top_builddir" "$@")
}

expect_refused() {
    local want=$1 rc=0
    shift
    timeout "$(bound 20)" "$PETREL" --listen 127.0.0.1:0 "$@" >"$LIB_TMP/refused.out" \
        2>"$LIB_TMP/refused.err" </dev/null || rc=$?
    local err
    err=$(cat "$LIB_TMP/refused.err")
    [[ $rc -eq 1 ]] || fail "petrel $*: exit status $rc, want 1 (stderr: $err)"
    [[ $err =~ $want ]] || fail "petrel $*: stderr '$err' does not match /$want/"
    [[ $err != *"listening on"* ]] || fail "petrel $*: listened before refusing: $err"
}
