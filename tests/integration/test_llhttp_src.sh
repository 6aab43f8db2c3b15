#!/usr/bin/env bash
# llhttp's C sources taken out of Debian's node-llhttp package without
# installing it (README: `apt-get download node-llhttp && dpkg-deb -x`,
# so that nodejs and its packages are not installed for three C files):
# `configure --with-llhttp-src=DIR/usr/share/llhttp` finds the sources
# there and llhttp.h in DIR/usr/share/include/llhttp, the package's
# layout, before any system copy.  The layout is copied from the installed
# package (no network here).
. "$(dirname "$0")/lib.sh"

[[ -f /usr/share/llhttp/llhttp.c && -f /usr/share/include/llhttp/llhttp.h ]] ||
    skip "no llhttp sources in /usr/share/llhttp (apt-get install node-llhttp)"
[[ -x $top_srcdir/configure ]] || skip "no configure in $top_srcdir (run ./bootstrap)"
[[ -f $top_srcdir/config.status ]] &&
    skip "the source tree is configured in place: configure cannot run in another directory"

deb=$LIB_TMP/llhttp-deb
mkdir -p "$deb/usr/share/include" "$LIB_TMP/build"
cp -r /usr/share/llhttp "$deb/usr/share/llhttp"
cp -r /usr/share/include/llhttp "$deb/usr/share/include/llhttp"
(cd "$LIB_TMP/build" && "$top_srcdir/configure" --with-llhttp-src="$deb/usr/share/llhttp" \
    --without-redis --without-pgsql) >"$LIB_TMP/configure.out" 2>&1 ||
    fail "configure --with-llhttp-src=$deb/usr/share/llhttp: $(tail -n 5 "$LIB_TMP/configure.out")"
expect_match "$(grep 'checking for the llhttp C sources' "$LIB_TMP/configure.out")" \
    "\.\.\. $deb/usr/share/llhttp\$" "the sources configure found"
expect_match "$(grep 'checking for llhttp.h' "$LIB_TMP/configure.out")" \
    "\.\.\. $deb/usr/share/include/llhttp\$" "the llhttp.h configure found"
ok "configure --with-llhttp-src=DIR/usr/share/llhttp: the sources and llhttp.h of the package's layout in DIR"
