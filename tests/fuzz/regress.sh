#!/usr/bin/env bash
# regress.sh -- `make check` (configured with --enable-fuzzing): every
# libFuzzer harness of tests/fuzz over its seed corpus, once.
set -euo pipefail
: "${top_srcdir:?}" "${top_builddir:?}"
FUZZ_BIN="$top_builddir/tests/fuzz" FUZZ_SRC="$top_srcdir/tests/fuzz" \
    exec bash "$top_srcdir/tests/fuzz/run.sh" regress
