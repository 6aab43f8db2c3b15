#!/usr/bin/env bash
# An installed petrel works wherever its tree is, and right after the
# install:
#  - `make install prefix=DIR` (GNU's install-time prefix, no DESTDIR):
#    petrel.pc names DIR's directories (its paths are relative to itself),
#    petrel-mod builds against DIR's header, a program linked through
#    pkg-config links and runs, a module built with petrel-mod loads into
#    DIR's petrel; DIR is not in the loader's path, so no ldconfig runs;
#  - nothing is written outside DIR: the systemd units go to
#    DIR/lib/systemd/system, petrel.service's ExecStart is DIR/bin/petrel
#    (written at install time);
#  - the same tree moved elsewhere: the same, from the new place (petrel-mod
#    run starts the petrel beside it);
#  - make uninstall prefix=DIR leaves no file and no directory of petrel's;
#  (into the loader's path, with ldconfig: test_install_ldconfig.sh)
#  - the README's list of what `make install` installs names every program
#    and manual page installed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"

mod_needs
mod_prog
cp "$top_srcdir/modules/hello.c" "$LIB_TMP/hello.c"

# check_tree DIR WHAT: the installed tree DIR works from where it is
check_tree() {
    local dir=$1 what=$2 pc pcdir inc libdir out w
    pc=$(find "$dir" -name petrel.pc -path '*/pkgconfig/*' | head -n 1)
    [[ -n $pc ]] || fail "$what: no petrel.pc under $dir"
    pcdir=${pc%/*}
    inc=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=includedir petrel)
    libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir petrel)
    [[ -f $inc/petrel.h ]] || fail "$what: petrel.pc's includedir $inc has no petrel.h"
    [[ -f $libdir/libpetrel.so.0 ]] || fail "$what: petrel.pc's libdir $libdir has no libpetrel.so.0"
    [[ $(cd "$inc" && pwd -P) == "$(cd "$dir" && pwd -P)"/* ]] ||
        fail "$what: petrel.pc's includedir $inc is not in $dir"

    # a program linked through pkg-config (DIR is not in the loader's path:
    # an rpath, as libtool's note after the install says)
    # shellcheck disable=SC2046 # pkg-config prints word lists
    cc $SAN -o "$LIB_TMP/prog" "$LIB_TMP/prog.c" \
        $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs petrel) -Wl,-rpath,"$libdir" ||
        fail "$what: cc prog.c \$(pkg-config --cflags --libs petrel) failed"
    out=$("$LIB_TMP/prog" 2>&1) || fail "$what: the program linked with libpetrel: $out"
    expect_eq "$out" "libpetrel says: not found" "$what: the program's output"

    # petrel-mod of the tree: its header, its petrel
    out=$(cd "$LIB_TMP" && "$dir/bin/petrel-mod" flags) || fail "$what: petrel-mod flags: $out"
    w=$(sed -n 's/^-I\([^ ]*\).*/\1/p' <<<"$out")
    [[ -n $w && $(cd "$w" && pwd -P) == "$(cd "$inc" && pwd -P)" ]] ||
        fail "$what: petrel-mod flags says '$out', not the tree's include directory $inc"
    (cd "$LIB_TMP" && "$dir/bin/petrel-mod" build -o hello-tree.so hello.c) >"$LIB_TMP/pm.out" 2>&1 ||
        fail "$what: petrel-mod build hello.c: $(cat "$LIB_TMP/pm.out")"
    PETREL=$dir/bin/petrel petrel_start --module "$LIB_TMP/hello-tree.so"
    expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "$what: GET /hello from a module built by petrel-mod"
    petrel_stop

    # petrel-mod run: the petrel of the same tree (exec: same pid)
    local port pid exe
    port=$(free_port)
    (cd "$LIB_TMP" && exec "$dir/bin/petrel-mod" run hello.c --listen "127.0.0.1:$port") \
        >"$LIB_TMP/run.out" 2>"$LIB_TMP/run.err" &
    pid=$!
    LIB_PIDS+=("$pid")
    wait_port "$port"
    exe=$(readlink "/proc/$pid/exe")
    [[ $exe == "$(cd "$dir/bin" && pwd -P)/petrel" ]] ||
        fail "$what: petrel-mod run started $exe, not the tree's petrel"
    expect_eq "$(curl_ "http://127.0.0.1:$port/hello")" "Hello World!" "$what: petrel-mod run hello.c"
    kill -TERM "$pid"
    petrel_wait_exit "$pid" "$(bound 15)"
    [[ $PETREL_RC -eq 0 ]] || fail "$what: petrel-mod run: exit status $PETREL_RC after SIGTERM"
}

# --- make install prefix=DIR, then the tree moved --------------------------
tree=$LIB_TMP/p1
mod_make install prefix="$tree" >"$LIB_TMP/install-prefix.log" 2>&1 ||
    fail "make install prefix=$tree: $(tail -n 20 "$LIB_TMP/install-prefix.log")"
! grep -q "dynamic loader's path" "$LIB_TMP/install-prefix.log" ||
    fail "make install prefix=$tree ran ldconfig: $(grep ldconfig "$LIB_TMP/install-prefix.log")"
check_tree "$tree" "make install prefix=DIR"
ok "make install prefix=DIR: petrel.pc, petrel-mod, petrel and a program linked through pkg-config use DIR"

# nothing is written outside DIR (automake quotes every destination it
# makes or installs to; the systemd units once went to configure's
# /lib/systemd/system), and petrel.service starts DIR's petrel
# (a unit directory given to configure is where it was told to go)
unitdir=$(sed -n 's/^systemdsystemunitdir = //p' "$top_builddir/Makefile")
outside=$(grep -o "'/[^']*'" "$LIB_TMP/install-prefix.log" | tr -d "'" | grep -v "^$tree/" |
    { if [[ $unitdir == /* ]]; then grep -v "^$unitdir"; else cat; fi; } | sort -u || true)
[[ -z $outside ]] || fail "make install prefix=$tree wrote outside it: $outside"
unit=$tree/lib/systemd/system/petrel.service
[[ $unitdir == /* ]] && unit=$unitdir/petrel.service
[[ -f $unit && -f ${unit%/*}/petrel.socket ]] ||
    fail "make install prefix=DIR: no petrel.service and petrel.socket under DIR/lib/systemd/system"
grep -q "^ExecStart=$tree/bin/petrel " "$unit" ||
    fail "petrel.service of make install prefix=DIR: $(grep ExecStart "$unit"), not $tree/bin/petrel"
ok "make install prefix=DIR: nothing outside DIR; the units in DIR/lib/systemd/system, ExecStart=DIR/bin/petrel"

mkdir -p "$LIB_TMP/elsewhere"
mv "$tree" "$LIB_TMP/elsewhere/moved"
check_tree "$LIB_TMP/elsewhere/moved" "the moved tree"
ok "the installed tree moved elsewhere works from there"

# --- make uninstall takes back all that install made ------------------------
tree2=$LIB_TMP/p2
mod_make install prefix="$tree2" >"$LIB_TMP/install-2.log" 2>&1 ||
    fail "make install prefix=$tree2: $(tail -n 20 "$LIB_TMP/install-2.log")"
mod_make uninstall prefix="$tree2" >"$LIB_TMP/uninstall.log" 2>&1 ||
    fail "make uninstall prefix=$tree2: $(tail -n 20 "$LIB_TMP/uninstall.log")"
left=$(find "$tree2" ! -type d; find "$tree2" -type d -name '*petrel*')
[[ -z $left ]] || fail "make uninstall left: $left"
ok "make uninstall prefix=DIR: no file left, and no directory of petrel's own (include/petrel)"

# --- the README lists what make install installs ---------------------------
readme=$(awk '/^`make install` installs/ { p = 1 } p && /^$/ { exit } p' "$top_srcdir/README.md")
[[ -n $readme ]] || fail "README.md has no paragraph beginning '\`make install\` installs'"
readme=$(tr '\n' ' ' <<<"$readme")
for f in "$LIB_TMP/elsewhere/moved"/bin/*; do
    [[ $readme == *"\`${f##*/}\`"* ]] || fail "README's list of what make install installs omits ${f##*/}"
done
for f in "$LIB_TMP/elsewhere/moved"/share/man/man1/*.1; do
    n=${f##*/}
    [[ $readme == *"${n%.1}(1)"* ]] || fail "README's list of what make install installs omits ${n%.1}(1)"
done
for w in libpetrel petrel.h petrel.pc 'libpetrel(3)'; do
    [[ $readme == *"$w"* ]] || fail "README's list of what make install installs omits $w"
done
ok "README's list of what make install installs names every program and man page"
