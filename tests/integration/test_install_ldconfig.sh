#!/usr/bin/env bash
# make install into a directory of the dynamic loader's path runs ldconfig,
# so that a program linked with `pkg-config --cflags --libs petrel` runs
# right after the install (issue: "libpetrel.so.0: cannot open shared
# object file" until someone ran ldconfig).  In a private mount namespace,
# so that nothing of this machine changes: a tmpfs on /usr/local, a copy of
# /etc (the loader's cache /etc/ld.so.cache is replaced by a rename, so its
# directory must be writable) and a scratch directory for ldconfig's aux
# cache.  There, as root (the namespace's):
#  - make install prefix=/usr/local DESTDIR=...: no ldconfig;
#  - make install prefix=/usr/local: ldconfig runs, and the program links
#    through pkg-config (its default search path) and runs;
#  - with the loader's cache of before the install the same program does
#    not start (so the test can fail);
#  - make uninstall prefix=/usr/local: ldconfig runs again, and its cache
#    lists no libpetrel.
# Skips (77) where no private mount namespace can be made (not root and no
# user namespaces; or in a chroot, whose / is not a mount point).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"

mod_needs
mod_prog

# --- into the loader's path: ldconfig, in a private mount namespace -------
ns=()
if unshare --mount --propagation private true 2>"$LIB_TMP/unshare.err"; then
    ns=(unshare --mount --propagation private)
elif unshare --user --map-root-user --mount --propagation private true 2>>"$LIB_TMP/unshare.err"; then
    ns=(unshare --user --map-root-user --mount --propagation private)
else
    skip "no private mount namespace (to install into /usr/local, not the machine's): $(paste -sd";" "$LIB_TMP/unshare.err")"
fi
[[ -d /usr/local ]] || skip "no /usr/local to mount a tmpfs on"

cat >"$LIB_TMP/in-ns.sh" <<'EOF'
set -eu
T=$1
PATH=$PATH:/sbin:/usr/sbin
# nothing of the machine changes: /usr/local is a tmpfs, /etc a copy (the
# loader's cache /etc/ld.so.cache is replaced by a rename, so its directory
# must be writable), and ldconfig's aux cache a scratch directory
mount -t tmpfs petrel-test /usr/local
mkdir -p "$T/etc" "$T/ldconfig-aux"
cp -a /etc/. "$T/etc/" 2>/dev/null || true
mount --bind "$T/etc" /etc
if [ -d /var/cache/ldconfig ]; then mount --bind "$T/ldconfig-aux" /var/cache/ldconfig; fi
ldconfig
cp /etc/ld.so.cache "$T/cache-before"

# DESTDIR staging: no ldconfig
mod_make install prefix=/usr/local DESTDIR="$T/stage" >"$T/install-destdir.log" 2>&1
if grep -q "dynamic loader's path" "$T/install-destdir.log"; then
    echo "error: make install DESTDIR=... ran ldconfig" >&2
    exit 1
fi

mod_make install prefix=/usr/local >"$T/install.log" 2>&1
grep "dynamic loader's path" "$T/install.log" ||
    { echo "error: make install into /usr/local ran no ldconfig" >&2; exit 1; }
# shellcheck disable=SC2046
cc $SAN -o "$T/prog-usr" "$T/prog.c" $(pkg-config --cflags --libs petrel)
echo "pkg-config --libs petrel: $(pkg-config --libs petrel)"
"$T/prog-usr"
# the loader's cache of before the install: the program cannot start
cp "$T/cache-before" /etc/ld.so.cache
if "$T/prog-usr" >"$T/before.out" 2>&1; then
    echo "error: the program runs with the loader's cache of before the install" >&2
    exit 1
fi
echo "with the cache of before: $(cat "$T/before.out")"
# make uninstall: the loader's cache forgets libpetrel
ldconfig
ldconfig -p | grep -q libpetrel || { echo "error: libpetrel not in the loader's cache after the install" >&2; exit 1; }
mod_make uninstall prefix=/usr/local >"$T/uninstall.log" 2>&1
if ldconfig -p | grep libpetrel; then
    echo "error: the loader's cache still lists libpetrel after make uninstall" >&2
    exit 1
fi
echo "after make uninstall: no libpetrel in ldconfig -p"
EOF
export -f mod_make
out=$(SAN=$SAN "${ns[@]}" bash "$LIB_TMP/in-ns.sh" "$LIB_TMP" 2>&1) ||
    fail "make install into /usr/local (in a mount namespace): $out
$(tail -n 20 "$LIB_TMP/install.log" 2>/dev/null)"
sed 's/^/    /' <<<"$out"
expect_match "$out" 'libpetrel says: not found' "the program linked through pkg-config, right after the install"
expect_match "$out" 'libpetrel.so.0: cannot open shared object file' "the same program with the cache of before"
ok "make install into /usr/local runs ldconfig: a program linked through pkg-config runs at once (not with DESTDIR)"
expect_match "$out" 'after make uninstall: no libpetrel in ldconfig -p' "make uninstall from /usr/local"
ok "make uninstall from /usr/local runs ldconfig: the loader's cache no longer lists libpetrel"
