#!/bin/sh
# ldconfig-hook.sh -- after `make install` (Makefile.am, install-exec-hook)
# and `make uninstall` (uninstall-hook):
#
#   tools/ldconfig-hook.sh DESTDIR LIBDIR [uninstall]
#
# When libpetrel went into a directory the dynamic loader searches (one of
# ldconfig's directories, such as /usr/local/lib on Debian), the loader's
# cache must be updated before a program linked with -lpetrel finds
# libpetrel.so.0: as root, run ldconfig; as another user, say so.  Nothing
# for a DESTDIR staging install (the files are not in place yet) or for a
# LIBDIR outside the loader's path (such a program needs -Wl,-rpath or
# LD_LIBRARY_PATH, as libtool's note after the install says).  After an
# uninstall, the same where the install did: the cache forgets libpetrel.
set -u

destdir=$1
libdir=$2
what=${3:-install}
[ -z "$destdir" ] || exit 0
ldconfig=
for d in $(printf '%s' "$PATH" | tr ':' ' ') /sbin /usr/sbin; do
    if [ -x "$d/ldconfig" ]; then
        ldconfig=$d/ldconfig
        break
    fi
done
[ -n "$ldconfig" ] || exit 0
real=$(cd "$libdir" 2>/dev/null && pwd -P) || exit 0

# ldconfig -v lists the directories it scans ("DIR: (from FILE:LINE)"); -N
# and -X: without touching the cache or the links
in_path=no
for d in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
    if [ "$(cd "$d" 2>/dev/null && pwd -P)" = "$real" ]; then
        in_path=yes
        break
    fi
done
[ $in_path = yes ] || exit 0

if [ "$what" = uninstall ]; then
    if [ "$(id -u)" = 0 ]; then
        echo " $ldconfig    # $libdir is in the dynamic loader's path: its cache forgets libpetrel"
        "$ldconfig" || echo "warning: $ldconfig failed: its cache still lists libpetrel" >&2
    else
        echo "note: $libdir is in the dynamic loader's path: run ldconfig as root, or"
        echo "      its cache keeps listing the removed libpetrel.so.0"
    fi
elif [ "$(id -u)" = 0 ]; then
    echo " $ldconfig    # $libdir is in the dynamic loader's path: update its cache"
    "$ldconfig" || echo "warning: $ldconfig failed: run it before linking with -lpetrel" >&2
else
    echo "note: $libdir is in the dynamic loader's path: run ldconfig as root, or"
    echo "      programs linked with -lpetrel will not find libpetrel.so.0 yet"
fi
exit 0
