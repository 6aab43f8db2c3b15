#!/usr/bin/env bash
# run.sh -- run the libFuzzer harnesses of tests/fuzz (built by `make fuzz`).
#
#   run.sh fuzz SECONDS [HARNESS...]   fuzz each harness for SECONDS on a
#                                      copy of its seed corpus
#   run.sh regress [HARNESS...]        run each harness once over its seed
#                                      corpus (a plain regression test)
#
# Environment: FUZZ_BIN (directory of the built harnesses, default: this
# script's directory), FUZZ_SRC (tests/fuzz of the source tree, for the
# corpora and dictionaries; default: this script's directory), FUZZ_WORK
# (where the corpus copies, logs and crash artifacts go; default: a new
# temporary directory, removed after a run that passed unless FUZZ_KEEP is
# set), FUZZ_JOBS (harnesses run at the same time, default 1).
# Exits non-zero when any harness finds a crash, a leak, a
# timeout or a sanitizer report, and prints its log and the input.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
FUZZ_BIN=${FUZZ_BIN:-$here}
FUZZ_SRC=${FUZZ_SRC:-$here}
ALL="fuzz_http1 fuzz_h2 fuzz_ws fuzz_path fuzz_static_path fuzz_range fuzz_grpc fuzz_proxy"

usage() {
    sed -n '4,8s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

mode=${1:-}
[[ -n $mode ]] || usage
shift
seconds=0
if [[ $mode == fuzz ]]; then
    seconds=${1:-}
    [[ $seconds =~ ^[0-9]+$ ]] || usage
    shift
elif [[ $mode != regress ]]; then
    usage
fi
harnesses=${*:-$ALL}

work=${FUZZ_WORK:-}
keep=${FUZZ_KEEP:-}
if [[ -z $work ]]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/petrel-fuzz-run.XXXXXX")
else
    keep=1
    mkdir -p "$work"
fi

# Sanitizer settings: every report is fatal; leaks are detected.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# corpus name of a harness: fuzz_http1 -> http1
corpus_of() { echo "${1#fuzz_}"; }

run_one() {
    local h=$1 name bin corpus dict log rc args
    name=$(corpus_of "$h")
    bin=$FUZZ_BIN/$h
    corpus=$FUZZ_SRC/corpus/$name
    dict=$FUZZ_SRC/$name.dict
    log=$work/$h.log
    if [[ ! -x $bin ]]; then
        echo "FAIL: $h: $bin not built (make fuzz)" >&2
        return 1
    fi
    args=(-timeout=10 -rss_limit_mb=2560 -print_final_stats=1 "-artifact_prefix=$work/$h-")
    [[ -f $dict ]] && args+=("-dict=$dict")
    if [[ $mode == regress ]]; then
        "$bin" "${args[@]}" -runs=0 "$corpus" >"$log" 2>&1
        rc=$?
    else
        rm -rf "$work/corpus-$name"
        mkdir -p "$work/corpus-$name"
        cp "$corpus"/* "$work/corpus-$name/" 2>/dev/null
        "$bin" "${args[@]}" -max_total_time="$seconds" "$work/corpus-$name" >"$log" 2>&1
        rc=$?
    fi
    if [[ $rc -ne 0 ]] || grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\|libFuzzer\)\|runtime error:' "$log"; then
        echo "FAIL: $h (exit $rc); log: $log"
        tail -n 60 "$log"
        for a in "$work/$h"-*; do
            [[ -e $a ]] && echo "input: $a" && od -A d -c "$a" | head -n 20
        done
        return 1
    fi
    local stats
    stats=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -n 1)
    echo "PASS: $h: ${stats:-no stats}"
    return 0
}

failed=0
jobs=${FUZZ_JOBS:-1}
if [[ $jobs -le 1 ]]; then
    for h in $harnesses; do
        run_one "$h" || failed=1
    done
else
    pids=()
    for h in $harnesses; do
        run_one "$h" >"$work/$h.result" 2>&1 &
        pids+=($!)
        while (($(jobs -rp | wc -l) >= jobs)); do
            wait -n || true
        done
    done
    for p in "${pids[@]}"; do
        wait "$p" || failed=1
    done
    for h in $harnesses; do
        cat "$work/$h.result"
    done
fi
if [[ $failed -eq 0 && -z $keep ]]; then
    rm -rf "$work"
else
    echo "logs, corpora and crash inputs: $work"
fi
exit $failed
