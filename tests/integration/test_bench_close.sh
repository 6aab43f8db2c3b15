#!/usr/bin/env bash
# test_bench_close.sh -- petrel-bench --close (a new TCP connection for each
# request) and --compare against the real petrel: exact counts, one connection
# per request, POST bodies, and the --compare table's HTTP/1.1 rows.
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

start_petrel

# 1. GET, 5 concurrent requests, each on its own connection
bench -c 5 -n 300 --close --json --fail-on-error "$URL/hello" >"$TMP/r1" ||
    fail "--close run exited $?"
expect "$(jget "$TMP/r1" requests)" 300 "--close requests"
expect "$(jget "$TMP/r1" connects)" 300 "--close connections"
expect "$(jget "$TMP/r1" connection)" per-request "--close mode"
expect "$(jget "$TMP/r1" errors.total)" 0 "--close errors"

# 2. POST /echo, per request, two threads
bench -c 4 -t 2 -n 101 --close --body-size 200 --expect-body-size 200 --json --fail-on-error \
    "$URL/echo" >"$TMP/r2" || fail "--close POST exited $?"
expect "$(jget "$TMP/r2" requests)" 101 "--close POST requests"
expect "$(jget "$TMP/r2" connects)" 101 "--close POST connections"

# 3. timed
bench -c 3 -d 500ms --close --json --fail-on-error "$URL/hello?timed" >"$TMP/r3" ||
    fail "--close timed exited $?"
n3=$(jget "$TMP/r3" requests)
((n3 > 20)) || fail "--close timed: only $n3 requests"

stop_petrel
expect "$(grep -c '"GET /hello HTTP/1.1"' "$TMP/access.log" || true)" 300 "server count of GET /hello"
expect "$(grep -c '"POST /echo HTTP/1.1"' "$TMP/access.log" || true)" 101 "server count of POST /echo"

start_petrel

# 4. --compare: persistent vs per-request; the HTTP/1.1 rows must be complete
#    (h2c rows are there too; they count errors while petrel lacks h2)
bench -c 4 -n 400 --compare --body-size 128 --expect-body-size 128 --json "$URL/echo" \
    >"$TMP/r4" || fail "--compare exited $?"
$PY - "$TMP/r4" <<'PYEOF' || fail "--compare JSON: $(cat "$TMP/r4")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["compare"]
assert [(r["protocol"], r["connection"]) for r in rows] == [
    ("http/1.1", "persistent"), ("http/1.1", "per-request"),
    ("h2c", "persistent"), ("h2c", "per-request")], rows
for r in rows[:2]:
    assert r["requests"] == 400 and r["errors"]["total"] == 0, r
assert rows[0]["connects"] == 4 and rows[1]["connects"] == 400, rows
assert d["improvement"]["http/1.1"]["throughput"] > 0
PYEOF
bench -c 4 -n 200 --compare "$URL/hello" >"$TMP/r5" 2>"$TMP/r5.err" || fail "--compare table exited $?"
grep -q '^HTTP/1.1  persistent' "$TMP/r5" || fail "no persistent row: $(cat "$TMP/r5")"
grep -q '^HTTP/1.1  per-request' "$TMP/r5" || fail "no per-request row"
grep -q 'gRPC' "$TMP/r5" || fail "no gRPC note"
stop_petrel
echo "PASS: test_bench_close"
