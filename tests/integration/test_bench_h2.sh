#!/usr/bin/env bash
# test_bench_h2.sh -- petrel-bench's h2c mode against the real petrel: exact
# counts (petrel's access log), -m streams, POST /echo bodies checked by size,
# --close, and the h2c rows of --compare.  Skips (77) while petrel does not
# answer h2c with prior knowledge (probed with curl --http2-prior-knowledge).
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"


command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
start_petrel
ver=$(curl -s -m 5 --http2-prior-knowledge -o /dev/null -w '%{http_version}' "$URL/hello" || true)
if [[ $ver != 2 ]]; then
    stop_petrel
    echo "SKIP: petrel does not answer h2c with prior knowledge yet (curl: '$ver')"
    exit 77
fi

# 1. 4 connections x 8 streams
bench -c 4 -m 8 -n 2000 --expect-body-size 12 --json --fail-on-error "$URL/hello" >"$TMP/r1" ||
    fail "h2c run exited $?"
expect "$(jget "$TMP/r1" requests)" 2000 "h2c requests"
expect "$(jget "$TMP/r1" connects)" 4 "h2c connections"
# 2. POST /echo, bodies echoed with their size, two threads
bench -t 2 -c 4 -m 4 -n 400 --body-size 700 --expect-body-size 700 --json --fail-on-error \
    "$URL/echo" >"$TMP/r2" || fail "h2c POST exited $?"
expect "$(jget "$TMP/r2" requests)" 400 "h2c POST requests"
# 3. per request
bench --h2 --close -c 4 -n 200 --json --fail-on-error "$URL/hello" >"$TMP/r3" ||
    fail "h2c --close exited $?"
expect "$(jget "$TMP/r3" requests)" 200 "h2c --close requests"
expect "$(jget "$TMP/r3" connects)" 200 "h2c --close connections"
stop_petrel
# the curl probe is one more GET /hello
expect "$(grep -c '"GET /hello ' "$TMP/access.log" || true)" 2201 "server count of GET /hello"
expect "$(grep -c '"POST /echo ' "$TMP/access.log" || true)" 400 "server count of POST /echo"

start_petrel
# 4. --compare: all four rows
bench -c 4 -n 300 --compare --body-size 128 --expect-body-size 128 --json "$URL/echo" \
    >"$TMP/r4" || fail "--compare exited $?"
$PY - "$TMP/r4" <<'PYEOF' || fail "--compare JSON: $(cat "$TMP/r4")"
import json, sys
rows = json.load(open(sys.argv[1]))["compare"]
for r in rows:
    assert "skipped" not in r and r["requests"] == 300 and r["errors"]["total"] == 0, r
PYEOF
stop_petrel
echo "PASS: test_bench_h2"
