#!/usr/bin/env bash
# run.sh -- run every integration test of this directory against the real
# petrel binary: each tests/integration/test_*.sh (with bash) and test_*.py
# (with Python 3) as a separate process, one after the other, each with a
# time limit.  Prints PASS/FAIL/SKIP per test (a test that exits 77 is
# skipped), the output of the tests that failed, and a last line
#   integration: N passed, M failed, K skipped
# Exit status: 0 when none failed, 1 otherwise.
#
# `make check` runs each test as an entry of its own (Makefile.am,
# driver.sh); this runs several of them in one go, by hand or under
# valgrind (`make check-valgrind-integration` runs it with PETREL,
# top_srcdir, top_builddir and PETREL_SANITIZERS set).  By hand:
#   tests/integration/run.sh                   # all of them
#   tests/integration/run.sh h1_errors cli     # the tests whose names contain these
# Environment: PETREL (default: src/petrel of the build tree, which is the
# source tree after the README's in-tree build, else its build/),
# INTEGRATION_TIMEOUT (seconds per test, default 120, tripled under the
# sanitizers), PETREL_PYTHON (default /usr/bin/python3), KEEP_TMP=1,
# VERBOSE=1 (print the output of passing tests too).

set -uo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

. "$here/env.sh"

limit=${INTEGRATION_TIMEOUT:-120}
[[ $PETREL_SANITIZERS == yes ]] && limit=$((limit * 3))

passed=0
failed=0
skipped=0
summary() {
    echo "integration: $passed passed, $failed failed, $skipped skipped"
}

if [[ ! -x $PETREL ]]; then
    echo "FAIL: petrel binary ($PETREL is not an executable; build it, or set PETREL)"
    failed=1
    summary
    exit 1
fi

tests=()
for f in "$here"/test_*.sh "$here"/test_*.py; do
    name=${f##*/}
    if [[ $# -gt 0 ]]; then
        want=no
        for pat in "$@"; do [[ $name == *"$pat"* ]] && want=yes; done
        [[ $want == yes ]] || continue
    fi
    tests+=("$f")
done
mapfile -t tests < <(printf '%s\n' "${tests[@]}" | LC_ALL=C sort)

logdir=$(mktemp -d "${TMPDIR:-/tmp}/petrel-run.XXXXXX")
trap 'rm -rf "$logdir"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

echo "# integration tests: ${#tests[@]}, ${limit}s each, petrel $PETREL"
for f in "${tests[@]}"; do
    [[ -n $f ]] || continue
    name=${f##*/}
    log=$logdir/$name.log
    case $f in
    *.py) cmd=("$PETREL_PYTHON" "$f") ;;
    *) cmd=(bash "$f") ;;
    esac
    t0=$EPOCHREALTIME
    # timeout(1) runs the test in a process group of its own and signals all
    # of it, so whatever the test started goes too.
    timeout -k 10 "$limit" "${cmd[@]}" </dev/null >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0)
        passed=$((passed + 1))
        echo "PASS: $name (${secs}s)"
        [[ ${VERBOSE:-0} == 1 ]] && sed 's/^/    /' "$log"
        ;;
    77)
        skipped=$((skipped + 1))
        echo "SKIP: $name ($(grep -m1 -E '^(skip|SKIP):' "$log" | sed -E 's/^(skip|SKIP): *//'))"
        ;;
    *)
        failed=$((failed + 1))
        why="exit status $rc"
        [[ $rc -eq 124 || $rc -eq 137 ]] && why="timed out after ${limit}s"
        echo "FAIL: $name ($why, ${secs}s)"
        echo "---- output of $name ----"
        sed 's/^/    /' "$log"
        echo "---- end of $name ----"
        ;;
    esac
done

summary
[[ $failed -eq 0 ]]
