#!/usr/bin/env bash
# test_h2_drain.sh -- graceful shutdown with HTTP/2 connections open: SIGTERM
# sends GOAWAY, an idle h2 connection is closed at once and petrel exits
# well before the drain timeout; an idle h2 connection also times out with
# --keepalive-timeout.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v nghttp >/dev/null || skip "nghttp not installed (apt-get install nghttp2-client)"

petrel_start --module hello --keepalive-timeout 0.5 --drain-timeout 20

nghttp -nv "$BASE/hello" >"$LIB_TMP/one" 2>&1 || fail "nghttp: $(tail -5 "$LIB_TMP/one")"
grep -q ':status: 200' "$LIB_TMP/one" || fail "no answer: $(tail -5 "$LIB_TMP/one")"
ok "request answered"

# An idle h2 connection (preface and an empty SETTINGS, then nothing) must
# get GOAWAY(NO_ERROR) and be closed after --keepalive-timeout.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00' >&3
t0=$(now)
timeout "$(bound 5)" cat <&3 >"$LIB_TMP/raw" || true
secs=$(secs_since "$t0")
fcmp "$secs < $(bound 3)" || fail "idle h2 connection not closed by the keep-alive timeout (${secs}s)"
# the last frame is a GOAWAY (type 7) with NO_ERROR
od -An -tx1 -v "$LIB_TMP/raw" | tr -d ' \n' | grep -qE '000008070000000000.{8}00000000$' ||
    fail "no GOAWAY(NO_ERROR) at the end: $(od -An -tx1 "$LIB_TMP/raw" | tail -3)"
exec 3<&-
ok "idle h2 connection: GOAWAY and close after --keepalive-timeout"

exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00' >&3
# the head of the server's SETTINGS frame: the connection is h2's now
hd=$(timeout "$(bound 5)" head -c 9 <&3 | od -An -tx1 | tr -d ' \n')
expect_match "$hd" '^[0-9a-f]{6}0400' "first frame from the server (SETTINGS)"
kill -TERM "$PETREL_PID"
timeout "$(bound 5)" cat <&3 >"$LIB_TMP/raw2" || true
exec 3<&-
od -An -tx1 -v "$LIB_TMP/raw2" | tr -d ' \n' | grep -qE '000008070000000000.{8}00000000$' ||
    fail "no GOAWAY(NO_ERROR) on SIGTERM: $(od -An -tx1 "$LIB_TMP/raw2" | tail -3)"
petrel_wait_exit "$PETREL_PID" "$(bound 10)"
expect_eq "$PETREL_RC" 0 "exit status after SIGTERM"
fcmp "$EXIT_SECS < $(bound 5)" || fail "petrel took ${EXIT_SECS}s to drain an idle h2 connection"
ok "SIGTERM: GOAWAY to an idle h2 connection, exit in ${EXIT_SECS}s (drain timeout 20s)"
