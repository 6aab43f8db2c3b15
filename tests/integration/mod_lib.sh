# mod_lib.sh -- helpers of the module tests (test_mod_*.sh), sourced after
# lib.sh.
#
#   mod_install   install the build tree into $LIB_TMP/stage with
#                 `make install DESTDIR=...` and point the environment at it:
#                 PATH (its bin first), PKG_CONFIG_PATH and
#                 PKG_CONFIG_SYSROOT_DIR (so `pkg-config --cflags petrel`
#                 names the staged header), MANPATH; sets STAGE_PREFIX,
#                 STAGE_BIN, STAGE_INC, STAGE_LIB, STAGE_MAN and PETREL (the
#                 installed petrel).  Skips the test (77) when there is no
#                 build tree to install from, no cc or no pkg-config.
#   expect_refused OUT-PATTERN PETREL-ARG...
#                 petrel with these arguments exits with status 1 at start-up
#                 and its standard error matches OUT-PATTERN (an ERE).

mod_install() {
    [[ -n ${top_builddir:-} && -f $top_builddir/Makefile ]] ||
        skip "no build tree to install from (top_builddir is not set)"
    command -v cc >/dev/null || skip "no C compiler (cc)"
    command -v pkg-config >/dev/null || skip "no pkg-config"
    local stage=$LIB_TMP/stage prefix pc
    # a make of its own, not a part of the make running the tests
    (unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
     make -s -C "$top_builddir" install DESTDIR="$stage") >"$LIB_TMP/install.log" 2>&1 ||
        fail "make install DESTDIR=$stage failed: $(tail -n 20 "$LIB_TMP/install.log")"
    pc=$(find "$stage" -name petrel.pc -path '*/pkgconfig/*' | head -n 1)
    [[ -n $pc ]] || fail "no petrel.pc installed under $stage"
    prefix=$(sed -n 's/^prefix=//p' "$pc")
    STAGE_PREFIX=$stage$prefix
    STAGE_BIN=$STAGE_PREFIX/bin
    STAGE_INC=$STAGE_PREFIX/include
    STAGE_LIB=$(dirname "$(dirname "$pc")")
    STAGE_MAN=$STAGE_PREFIX/share/man
    [[ -x $STAGE_BIN/petrel ]] || fail "no $STAGE_BIN/petrel after make install"
    PATH=$STAGE_BIN:$PATH
    PKG_CONFIG_PATH=$(dirname "$pc")
    PKG_CONFIG_SYSROOT_DIR=$stage
    MANPATH=$STAGE_MAN
    PETREL=$STAGE_BIN/petrel
    export PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR MANPATH PETREL
    unset CFLAGS LDFLAGS LIBS CC
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
