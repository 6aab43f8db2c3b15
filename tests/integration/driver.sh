#!/usr/bin/env bash
# driver.sh -- automake's test driver for the integration tests (and any
# other .sh/.py entry of TESTS): one test, with a time limit, its output in
# its .log, its result in its .trs and on the console with the reason of a
# skip or a failure:
#   PASS: tests/integration/test_h1_curl.sh (3.1s)
#   SKIP: tests/integration/test_h1_wrk.sh (wrk is not installed ...)
#   FAIL: tests/integration/test_h1_raw.sh (exit status 1, 4.0s: error: ...)
#
# Exit status of a test: 0 pass, 77 skip (the test must print why, on a line
# "skip: REASON" or "SKIP: REASON", as lib.sh's skip does: a skip without a
# reason is an error), 99 hard error, anything else fail; past the time
# limit (INTEGRATION_TIMEOUT seconds, default 120 or the test's own line
# "# driver: time limit SECSs", tripled when
# PETREL_SANITIZERS=yes) the test and everything it started are killed and
# it fails.
#
# A test named in PETREL_TESTS_ALONE (file names, e.g. "test_fault_conns.sh")
# runs alone: it waits for the tests under way to end, and the others wait
# for it (a lock in the build tree: flock, shared or exclusive).  For tests
# whose bounds count on the machine not being loaded by another test.
#
# Called by make (Makefile.am: SH_LOG_DRIVER, PY_LOG_DRIVER) as
#   driver.sh --test-name NAME --log-file LOG --trs-file TRS
#             [--color-tests yes|no] [--expect-failure yes|no]
#             [--enable-hard-errors yes|no] [--OPTION VALUE]... -- COMMAND...
set -u

name= log= trs= color=no expect_failure=no hard_errors=yes
while (($#)); do
    case $1 in
    --test-name) name=$2 ;;
    --log-file) log=$2 ;;
    --trs-file) trs=$2 ;;
    --color-tests) color=$2 ;;
    --expect-failure) expect_failure=$2 ;;
    --enable-hard-errors) hard_errors=$2 ;;
    --) shift; break ;;
    --*) ;; # an option of a newer automake (all take a value)
    *) break ;;
    esac
    shift 2
done
if [[ -z $name || -z $log || -z $trs || $# -eq 0 ]]; then
    echo "driver.sh: usage: driver.sh --test-name NAME --log-file LOG --trs-file TRS -- COMMAND..." >&2
    exit 2
fi

# A test that needs longer says so in a line of its own, e.g.
# "# driver: time limit 900s" (test_deb.sh builds packages).
own_limit=$(sed -n 's/^# driver: time limit \([0-9][0-9]*\)s.*/\1/p' "${!#}" 2>/dev/null | head -n 1)
limit=${INTEGRATION_TIMEOUT:-${own_limit:-120}}
[[ ${PETREL_SANITIZERS:-no} == yes ]] && limit=$((limit * 3))

# make interrupted: leave no half-written result behind
trap 'rm -f "$log" "$trs"; exit 130' INT
trap 'rm -f "$log" "$trs"; exit 143' TERM

: >"$log"
lock=${top_builddir:-.}/tests/integration/.lock
if mkdir -p "${lock%/*}" 2>/dev/null && exec 9>>"$lock" && command -v flock >/dev/null; then
    if [[ " ${PETREL_TESTS_ALONE:-} " == *" ${name##*/} "* ]]; then
        echo "# runs alone (PETREL_TESTS_ALONE): waiting for the other tests" >>"$log"
        flock -x 9
    else
        flock -s 9
    fi
fi
t0=$EPOCHREALTIME
# timeout(1) puts the test in a process group of its own and signals all of
# it, so whatever the test started goes too.
timeout -k 10 "$limit" "$@" </dev/null >>"$log" 2>&1
rc=$?
secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

# the first line of the log that says why (at most 240 characters)
first_line() {
    grep -m 1 -E "$1" "$log" | sed -E "s/$1//" | cut -c 1-240
}

why=
case $rc in
0)
    res=PASS
    [[ $expect_failure == yes ]] && res=XPASS
    why="${secs}s"
    ;;
77)
    res=SKIP
    why=$(first_line '^(skip|SKIP): *')
    if [[ -z $why ]]; then
        res=ERROR
        why="exit status 77 (skip) without a line 'skip: REASON'"
    fi
    ;;
99)
    res=ERROR
    [[ $hard_errors == no ]] && res=FAIL
    why="exit status 99, ${secs}s"
    ;;
*)
    res=FAIL
    [[ $expect_failure == yes ]] && res=XFAIL
    if ((rc == 124 || rc == 137)); then
        why="killed after the time limit of ${limit}s (INTEGRATION_TIMEOUT)"
    else
        why="exit status $rc, ${secs}s"
    fi
    err=$(first_line '^(error|FAIL): *')
    [[ -n $err ]] && why="$why: $err"
    ;;
esac
printf '%s: %s (%s)\n' "$res" "$name" "$why" >>"$log"

if [[ $color == yes ]]; then
    case $res in
    PASS) c=$'\e[0;32m' ;;
    SKIP) c=$'\e[1;34m' ;;
    XFAIL) c=$'\e[1;32m' ;;
    ERROR) c=$'\e[0;35m' ;;
    *) c=$'\e[0;31m' ;;
    esac
    printf '%s%s\e[m: %s (%s)\n' "$c" "$res" "$name" "$why"
else
    printf '%s: %s (%s)\n' "$res" "$name" "$why"
fi

case $res in
PASS | XFAIL | SKIP) recheck=no ;;
*) recheck=yes ;;
esac
copy=yes
[[ $res == PASS ]] && copy=no
printf ':test-result: %s\n:global-test-result: %s\n:recheck: %s\n:copy-in-global-log: %s\n' \
    "$res" "$res" "$recheck" "$copy" >"$trs"
exit 0
