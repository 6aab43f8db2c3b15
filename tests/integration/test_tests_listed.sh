#!/usr/bin/env bash
# Every integration test of this directory runs in `make check`: each
# tests/integration/test_*.sh and test_*.py is an entry of INTEGRATION_TESTS
# in Makefile.am (make passes the list in PETREL_INTEGRATION_TESTS), and each
# entry of the list exists.
. "$(dirname "$0")/lib.sh"

[[ -n ${PETREL_INTEGRATION_TESTS:-} ]] ||
    skip "PETREL_INTEGRATION_TESTS is not set (make check sets it from Makefile.am)"
listed=" $PETREL_INTEGRATION_TESTS "
missing=()
for f in "$top_srcdir"/tests/integration/test_*.sh "$top_srcdir"/tests/integration/test_*.py; do
    rel=tests/integration/${f##*/}
    [[ $listed == *" $rel "* ]] || missing+=("$rel")
done
((${#missing[@]} == 0)) ||
    fail "not in INTEGRATION_TESTS of Makefile.am (so make check never runs them): ${missing[*]}"
n=0
for rel in $PETREL_INTEGRATION_TESTS; do
    [[ -f $top_srcdir/$rel ]] || fail "INTEGRATION_TESTS of Makefile.am lists $rel, which does not exist"
    [[ -x $top_srcdir/$rel ]] || fail "$rel is not executable (chmod +x: it can be run by hand)"
    n=$((n + 1))
done
ok "the $n integration tests of tests/integration are all in INTEGRATION_TESTS, and executable"
