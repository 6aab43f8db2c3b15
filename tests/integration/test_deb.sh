#!/usr/bin/env bash
# The Debian packages of debian/ (debian/README.source), built, installed,
# used and purged on this machine:
#  - a copy of the checkout (git's files: the source tree is not written
#    to) builds with `dpkg-buildpackage -us -uc -b` (nocheck: the unit
#    suites ran in this make check), into the seven packages;
#  - lintian reports no error;
#  - libpetrel0 and libpetrel-dev pull no libpq and no hiredis (only
#    libpetrel-pg-dev and libpetrel-redis-dev do);
#  - `dpkg -i` of them all: the system user petrel exists, the units pass
#    `systemd-analyze verify` (with the package's drop-in: User=petrel, no
#    DynamicUser), petrel.socket is enabled, /etc/default/petrel is there;
#    systemd is not PID 1 in CI, so the service is not started: the
#    installed /usr/bin/petrel is run by hand, with a module that the
#    installed petrel-mod built against the installed libpetrel-dev, and
#    curl asks it; a program linked with `pkg-config --libs petrel` runs on
#    libpetrel0's libpetrel.so.0;
#  - the README's "Install the Debian packages" gives the two commands;
#  - `dpkg --purge` of them all leaves nothing: no file dpkg listed, no
#    user or group petrel, no /etc/default/petrel, no /var/log/petrel, no
#    enablement link.
# Root only (CI's throwaway machine): it installs into the machine.  Runs
# once per CI run: skipped under the sanitizers and in make distcheck.
# driver: time limit 1200s
. "$(dirname "$0")/lib.sh"

# the README's third way in names the commands this test runs
grep -qxF './bootstrap --deb && dpkg-buildpackage -us -uc -b' "$top_srcdir/README.md" ||
    fail "README.md does not give the command that builds the packages"
grep -qE '^apt install \.\./petrel_\*\.deb' "$top_srcdir/README.md" ||
    fail "README.md does not give the command that installs the packages"

[[ $PETREL_SANITIZERS != yes ]] ||
    skip "the sanitizer build: the packages are built and installed once per CI run, by the plain build's make check"
[[ $(id -u) -eq 0 ]] || skip "not root: the test installs the packages into this machine with dpkg -i (CI runs as root)"
for c in dpkg-buildpackage dh lintian fakeroot git; do
    command -v "$c" >/dev/null || skip "no $c: ./bootstrap --deb installs what building the packages needs"
done
src=$(cd "$top_srcdir" && pwd -P)
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    [[ $(cd "$(git -C "$src" rev-parse --show-toplevel)" && pwd -P) == "$src" ]] ||
    skip "not a git checkout but a distribution tree (make distcheck): the packages are built by the checkout's own make check"
[[ -f $src/debian/control ]] || skip "no debian/control in $src"
missing=$(cd "$src" && dpkg-checkbuilddeps 2>&1) ||
    skip "build dependencies missing ($missing): ./bootstrap --deb"
pkgs=(petrel petrel-bench libpetrel0 libpetrel-dev libpetrel-pg-dev libpetrel-redis-dev libpetrel-static-dev)
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ -z $st || $st == not-installed ]] ||
        skip "the package $p is already on this machine ($st): the test would replace and purge it"
done
getent passwd petrel >/dev/null && skip "a user petrel exists already: the test would remove it at the purge"

# --- build, in a copy of the checkout ---------------------------------------
# (by hand, PETREL_DEBS=DIR takes the packages and .changes a build before
# left in DIR instead: the rest of the test in two minutes)
if [[ -n ${PETREL_DEBS:-} ]]; then
    work=$PETREL_DEBS
    build_secs="no time (PETREL_DEBS=$work)"
else
    work=$LIB_TMP/build
    mkdir -p "$work/petrel"
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$work/petrel" -xf -
    t0=$(now)
    (cd "$work/petrel" && unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES &&
        DEB_BUILD_OPTIONS="nocheck parallel=${JOBS:-2}" dpkg-buildpackage -us -uc -b) \
        >"$LIB_TMP/build.log" 2>&1 ||
        fail "dpkg-buildpackage -us -uc -b: $(tail -n 30 "$LIB_TMP/build.log")"
    build_secs="$(secs_since "$t0")s"
fi
debs=()
for p in "${pkgs[@]}"; do
    d=("$work/${p}_"*.deb)
    ((${#d[@]} == 1)) || fail "dpkg-buildpackage made no package $p: $(ls "$work")"
    debs+=("${d[0]}")
done
ok "dpkg-buildpackage -us -uc -b: ${pkgs[*]} in $build_secs"

# --- lintian -------------------------------------------------------------------
rc=0
lintian --fail-on error "$work"/petrel_*.changes >"$LIB_TMP/lintian.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || fail "lintian: status $rc: $(grep -E '^E:' "$LIB_TMP/lintian.out" || tail -n 20 "$LIB_TMP/lintian.out")"
! grep -q '^E:' "$LIB_TMP/lintian.out" || fail "lintian: $(grep '^E:' "$LIB_TMP/lintian.out")"
warnings=$(sed -n 's/^W: /; /p' "$LIB_TMP/lintian.out" | tr -d '\n')
ok "lintian: no error ($(grep -c '^W:' "$LIB_TMP/lintian.out" || true) warnings$warnings)"

# --- what each package pulls ---------------------------------------------------
for p in libpetrel0 libpetrel-dev; do
    deps=$(dpkg-deb -f "$work/${p}_"*.deb Depends)
    expect_no_match "$deps" 'libpq|hiredis' "$p's Depends"
done
expect_match "$(dpkg-deb -f "$work"/libpetrel-pg-dev_*.deb Depends)" 'libpq-dev' "libpetrel-pg-dev's Depends"
expect_match "$(dpkg-deb -f "$work"/libpetrel-redis-dev_*.deb Depends)" 'libhiredis-dev' \
    "libpetrel-redis-dev's Depends"
ok "libpetrel0 and libpetrel-dev depend on neither libpq nor hiredis; the pool's and the bridge's -dev do"

# --- install ---------------------------------------------------------------------
# The machine's libraries and headers change from here to the purge: the
# other tests of this make check wait (driver.sh's lock, taken exclusive).
if { true >&9; } 2>/dev/null; then flock -x 9; fi
installed=no
deb_purge() {
    dpkg --purge "${pkgs[@]}" >"$LIB_TMP/purge.log" 2>&1
}
deb_cleanup() {
    local rc=$?
    trap - ERR
    [[ $installed == no ]] || deb_purge || true
    return $rc
}
trap 'deb_cleanup; lib_cleanup' EXIT
installed=yes
DEBIAN_FRONTEND=noninteractive dpkg -i "${debs[@]}" >"$LIB_TMP/install.log" 2>&1 ||
    fail "dpkg -i: $(tail -n 30 "$LIB_TMP/install.log")"
: >"$LIB_TMP/files"
for p in "${pkgs[@]}"; do
    dpkg -L "$p" >>"$LIB_TMP/files" || fail "dpkg -L $p"
done
ok "dpkg -i: $(wc -l <"$LIB_TMP/files") paths"

# the user, the units, the defaults
getent passwd petrel >/dev/null || fail "no user petrel after dpkg -i"
getent group petrel >/dev/null || fail "no group petrel after dpkg -i"
[[ $(getent passwd petrel | cut -d: -f3) -lt 1000 ]] || fail "petrel is not a system user: $(getent passwd petrel)"
[[ -f /etc/default/petrel ]] || fail "no /etc/default/petrel"
unitdir=/lib/systemd/system
for u in petrel.service petrel.socket petrel.service.d/debian.conf; do
    [[ -f $unitdir/$u ]] || fail "no $unitdir/$u"
done
expect_match "$(cat "$unitdir/petrel.service.d/debian.conf")" $'User=petrel\nGroup=petrel' "the drop-in"
expect_match "$(sed -n 's/^ExecStart=//p' "$unitdir/petrel.service")" '^/usr/bin/petrel ' "petrel.service's ExecStart"
[[ -L /etc/systemd/system/sockets.target.wants/petrel.socket ]] ||
    fail "petrel.socket is not enabled (no /etc/systemd/system/sockets.target.wants/petrel.socket)"
if command -v systemd-analyze >/dev/null; then
    # verify reads the unit files and their drop-ins, the ExecStart binary,
    # the directives; it needs no running systemd
    systemd-analyze verify "$unitdir/petrel.socket" "$unitdir/petrel.service" >"$LIB_TMP/verify.out" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$LIB_TMP/verify.out")"
    ! grep -i 'petrel' "$LIB_TMP/verify.out" ||
        fail "systemd-analyze verify says of petrel's units: $(grep -i petrel "$LIB_TMP/verify.out")"
    verified="systemd-analyze verify passes them"
else
    verified="no systemd-analyze here: not verified"
fi
if [[ -d /run/systemd/system ]]; then
    systemctl is-enabled petrel.socket >/dev/null || fail "systemctl is-enabled petrel.socket"
    verified+="; systemd runs: petrel.socket is enabled"
fi
ok "user and group petrel (uid $(id -u petrel)), the units with User=petrel, petrel.socket enabled, /etc/default/petrel; $verified"

# the installed library, petrel-mod and petrel
unset PKG_CONFIG_PATH CFLAGS LDFLAGS LIBS CC
cat >"$LIB_TMP/prog.c" <<'EOF'
#include <petrel.h>
#include <stdio.h>

int main(void)
{
    printf("libpetrel says: %s\n", petrel_strerror(PETREL_ENOTFOUND));
    return 0;
}
EOF
# shellcheck disable=SC2046 # pkg-config prints word lists
cc -o "$LIB_TMP/prog" "$LIB_TMP/prog.c" $(pkg-config --cflags --libs petrel) ||
    fail "cc prog.c \$(pkg-config --cflags --libs petrel) against the installed libpetrel-dev"
expect_eq "$("$LIB_TMP/prog")" "libpetrel says: not found" "a program on the installed libpetrel.so.0"
expect_match "$(ldd "$LIB_TMP/prog")" 'libpetrel\.so\.0 => (/usr)?/lib/[^ ]*/libpetrel\.so\.0' "the program's libpetrel"
cp "$top_srcdir/modules/hello.c" "$LIB_TMP/hello.c"
expect_eq "$(command -v petrel-mod)" /usr/bin/petrel-mod "petrel-mod on PATH"
(cd "$LIB_TMP" && /usr/bin/petrel-mod build -o hello.so hello.c) >"$LIB_TMP/pm.out" 2>&1 ||
    fail "petrel-mod build hello.c: $(cat "$LIB_TMP/pm.out")"
PETREL=/usr/bin/petrel petrel_start --module "$LIB_TMP/hello.so"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "GET /hello from the installed petrel with a module of the installed petrel-mod"
petrel_stop
man -w petrel >/dev/null 2>&1 || ! command -v man >/dev/null || fail "man -w petrel: no page"
ok "the installed petrel-mod builds a module against the installed headers, /usr/bin/petrel serves it; a program runs on libpetrel.so.0"

# --- purge -------------------------------------------------------------------------
deb_purge || fail "dpkg --purge: $(tail -n 30 "$LIB_TMP/purge.log")"
installed=no
left=()
while IFS= read -r f; do
    [[ -e $f && ! -d $f ]] && left+=("$f")
done <"$LIB_TMP/files"
((${#left[@]} == 0)) || fail "files of the packages left after the purge: ${left[*]}"
for d in /usr/include/petrel "$unitdir/petrel.service.d" /usr/share/doc/petrel /usr/share/doc/libpetrel-dev \
    /etc/default/petrel /var/log/petrel /etc/systemd/system/sockets.target.wants/petrel.socket \
    /etc/logrotate.d/petrel; do
    [[ ! -e $d && ! -L $d ]] || fail "$d is left after the purge"
done
! getent passwd petrel >/dev/null || fail "the user petrel is left after the purge"
! getent group petrel >/dev/null || fail "the group petrel is left after the purge"
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ -z $st || $st == not-installed ]] || fail "dpkg still knows $p after the purge: $st"
done
ok "dpkg --purge: no file, directory, user, group, conffile or link of the packages left"
