#!/usr/bin/env bash
# test_bench_grpc.sh -- petrel-bench --grpc against the real petrel with the
# grpcecho module: exact counts (the calls petrel-bench reports are the ones
# petrel's access log shows), -m streams, payloads echoed, --close (a new
# connection per call), answers that fail the check counted by kind
# (grpc-status not 0, no grpc-status, HTTP status), and the gRPC rows of
# --compare --grpc.  gRPC over HTTP/2: PROTOCOL-HTTP2.md of grpc/grpc (an
# answer is :status 200 and grpc-status in the trailers, 0 meaning OK).
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

G=/petrel.bench.Echo/Echo
start_petrel --module grpcecho

# 1. 4 connections x 8 streams, 300-byte payloads, two threads
bench -t 2 -c 4 -m 8 -n 2000 --grpc --body-size 300 --json --fail-on-error "$URL" >"$TMP/r1" ||
    fail "--grpc run exited $?: $(cat "$TMP/r1")"
expect "$(jget "$TMP/r1" protocol)" grpc "protocol"
expect "$(jget "$TMP/r1" requests)" 2000 "gRPC calls"
expect "$(jget "$TMP/r1" errors.total)" 0 "gRPC errors"
expect "$(jget "$TMP/r1" connects)" 4 "gRPC connections"
expect "$(jget "$TMP/r1" method)" "$G" "default method"
# 2. a new connection per call, empty payloads
bench --grpc --close -c 3 -n 150 --json --fail-on-error "$URL$G" >"$TMP/r2" ||
    fail "--grpc --close exited $?"
expect "$(jget "$TMP/r2" requests)" 150 "gRPC --close calls"
expect "$(jget "$TMP/r2" connects)" 150 "gRPC --close connections"
# 3. a payload of several DATA frames (16384 bytes each, RFC 9113 §4.2)
bench --grpc -c 2 -m 2 -n 40 --body-size 100000 --json --fail-on-error "$URL" >"$TMP/r3" ||
    fail "--grpc 100000-byte payloads exited $?"
expect "$(jget "$TMP/r3" requests)" 40 "large payload calls"

# 4. answers that fail: each counted once, as a response, by kind
#    another method of the service: grpc-status 12 (UNIMPLEMENTED)
bench --grpc -c 2 -n 30 --json "$URL/petrel.bench.Echo/Nope" >"$TMP/r4" || fail "Nope exited $?"
expect "$(jget "$TMP/r4" requests)" 30 "UNIMPLEMENTED calls answered"
expect "$(jget "$TMP/r4" errors.grpc_status)" 30 "UNIMPLEMENTED counted as grpc_status"
#    POST /echo answers 200 with the request as it came and no grpc-status
bench --grpc -c 2 -n 20 --body-size 10 --json "$URL/echo" >"$TMP/r5" || fail "/echo exited $?"
expect "$(jget "$TMP/r5" errors.check)" 20 "no grpc-status counted as check"
#    no such path: 404
bench --grpc -c 2 -n 10 --json "$URL/nowhere" >"$TMP/r6" || fail "/nowhere exited $?"
expect "$(jget "$TMP/r6" errors.non2xx)" 10 "404 counted as non2xx"
#    a payload over the module's limit (max_message, default 4 MiB):
#    RESOURCE_EXHAUSTED, and --fail-on-error says so
rc=0
bench --grpc -c 1 -n 2 --body-size 5000000 --json --fail-on-error "$URL" >"$TMP/r7" || rc=$?
expect "$rc" 1 "--fail-on-error exit status"
expect "$(jget "$TMP/r7" errors.grpc_status)" 2 "RESOURCE_EXHAUSTED counted as grpc_status"

# bad combinations are refused before any connection
for args in "--grpc -p 2" "--grpc -X GET" "--grpc --expect-status 200"; do
    # shellcheck disable=SC2086
    if "$BENCH" $args -n 1 "$URL" >/dev/null 2>"$TMP/e"; then fail "accepted: $args"; fi
    grep -q -- "--grpc" "$TMP/e" || fail "$args: no message naming --grpc: $(cat "$TMP/e")"
done
stop_petrel
# the server's own count of each method
expect "$(grep -c "\"POST $G " "$TMP/access.log" || true)" $((2000 + 150 + 40 + 2)) \
    "server count of $G"
expect "$(grep -c '"POST /petrel.bench.Echo/Nope ' "$TMP/access.log" || true)" 30 \
    "server count of Nope"

# 5. --compare --grpc: six rows, two of them gRPC, all clean
start_petrel --module grpcecho
bench -c 4 -n 300 --compare --grpc --body-size 128 --json "$URL/echo" >"$TMP/c" ||
    fail "--compare --grpc exited $?"
$PY - "$TMP/c" <<'PYEOF' || fail "--compare --grpc JSON: $(cat "$TMP/c")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["compare"]
assert [(r["protocol"], r["connection"]) for r in rows] == [
    (p, c) for p in ("http/1.1", "h2c", "grpc") for c in ("persistent", "per-request")], rows
for r in rows:
    assert "skipped" not in r and r["requests"] == 300 and r["errors"]["total"] == 0, r
assert rows[5]["connects"] == 300 and rows[4]["connects"] == 4, rows[4:]
assert rows[4]["payload_size"] == 128 and rows[4]["method"] == "/petrel.bench.Echo/Echo", rows[4]
assert set(d["improvement"]) == {"http/1.1", "h2c", "grpc"}, d["improvement"]
PYEOF
bench -c 2 -n 50 --compare --grpc "$URL/hello" >"$TMP/ct" 2>"$TMP/ce" || fail "--compare text exited $?"
grep -q '^gRPC      persistent ' "$TMP/ct" || fail "no gRPC persistent row: $(cat "$TMP/ct")"
grep -q '^gRPC      per-request ' "$TMP/ct" || fail "no gRPC per-request row: $(cat "$TMP/ct")"
grep -q '^  gRPC      average latency' "$TMP/ct" || fail "no gRPC ratio: $(cat "$TMP/ct")"
stop_petrel

# 6. without the module the gRPC rows are skipped (the probe fails), not an error
start_petrel
bench -c 2 -n 50 --compare --grpc --json "$URL/hello" >"$TMP/s" || fail "skip exited $?"
$PY - "$TMP/s" <<'PYEOF' || fail "--compare without grpcecho: $(cat "$TMP/s")"
import json, sys
rows = json.load(open(sys.argv[1]))["compare"]
assert all("skipped" not in r for r in rows[:4]) and all("skipped" in r for r in rows[4:]), rows
PYEOF
stop_petrel
echo "PASS: test_bench_grpc"
