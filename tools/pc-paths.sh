#!/bin/sh
# pc-paths.sh -- the directory lines of petrel.pc, relative to the directory
# petrel.pc is installed in (pkg-config's ${pcfiledir}), so that the
# installed tree can be moved:
#
#   tools/pc-paths.sh PREFIX PKGCONFIGDIR EXEC_PREFIX LIBDIR INCLUDEDIR
#
# prints prefix=, exec_prefix=, libdir= and includedir= lines: prefix is
# ${pcfiledir}/.. up to PREFIX, and each other directory ${prefix}/... when
# it is below PREFIX (else absolute, and that one does not move).  Run by
# make (Makefile.am) with its installation directories.
set -eu

if [ $# -ne 5 ]; then
    echo "usage: $0 PREFIX PKGCONFIGDIR EXEC_PREFIX LIBDIR INCLUDEDIR" >&2
    exit 2
fi
prefix=${1%/}
pcdir=${2%/}

# under DIR PATH: PATH below DIR, as ${prefix}/REST; else PATH itself
under() {
    case $2 in
    "$1") printf '%s\n' '${prefix}' ;;
    "$1"/*) printf '%s/%s\n' '${prefix}' "${2#"$1"/}" ;;
    *) printf '%s\n' "$2" ;;
    esac
}

case $pcdir in
"$prefix"/*)
    # one .. per component of PKGCONFIGDIR below PREFIX
    up=$(printf '%s\n' "${pcdir#"$prefix"/}" | sed -e 's|[^/][^/]*|..|g')
    echo "prefix=\${pcfiledir}/$up"
    ;;
*)
    echo "prefix=$prefix"
    ;;
esac
echo "exec_prefix=$(under "$prefix" "${3%/}")"
# libdir and includedir below exec_prefix or prefix
echo "libdir=$(under "$prefix" "${4%/}")"
echo "includedir=$(under "$prefix" "${5%/}")"
echo
