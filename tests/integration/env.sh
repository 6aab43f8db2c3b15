# env.sh -- the environment of the integration tests, sourced by lib.sh and
# run.sh: where the source tree, the build tree, petrel and Python are.
# What is set already (by make check: Makefile.am) is kept; run by hand,
# the build tree is the source tree after the README's in-tree build, else
# build/ in it.  Exports top_srcdir, top_builddir (when found), PETREL
# (absolute), PETREL_SANITIZERS (default no) and PETREL_PYTHON (default
# Debian's /usr/bin/python3, which sees the python3-* packages).

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
if [[ -z ${top_builddir:-} ]]; then
    for d in "$top_srcdir" "$top_srcdir/build"; do
        if [[ -f $d/Makefile && -x $d/src/petrel ]]; then
            top_builddir=$d
            break
        fi
    done
fi
: "${PETREL:=${top_builddir:-$top_srcdir}/src/petrel}"
[[ $PETREL == /* ]] || PETREL=$PWD/$PETREL
: "${PETREL_SANITIZERS:=no}"
if [[ -z ${PETREL_PYTHON:-} ]]; then
    if [[ -x /usr/bin/python3 ]]; then PETREL_PYTHON=/usr/bin/python3; else PETREL_PYTHON=python3; fi
fi
export PETREL PETREL_SANITIZERS PETREL_PYTHON top_srcdir
if [[ -n ${top_builddir:-} ]]; then export top_builddir; fi
