#!/usr/bin/env bash
# test_bench_ws.sh -- petrel-bench's WebSocket echo mode (ws:// URLs).
#   Against petrel's wsecho: exact message counts, -m messages in flight,
#   threads, text and binary, a 64-bit frame length, --close (a connection
#   and a handshake per message), a timed run; the handshakes are the
#   server's own count (its access log has one 101 per connection).
#   Against a small Python WebSocket server that counts the messages it
#   echoes and checks what the client sends (RFC 6455: a valid opening
#   handshake, §4.1; every client frame masked with its own key, §5.3; a
#   Close 1000 at the end, §7.4.1), then misbehaves one way at a time:
#   every message ends as an echo or as exactly one error of the right kind.
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

# 1. petrel wsecho, 8 connections x 4 in flight, 2 threads: exactly 4000
start_petrel --module wsecho
WS=ws://127.0.0.1:$PORT/ws
bench -c 8 -t 2 -m 4 -n 4000 --json --fail-on-error "$WS" >"$TMP/r1" || fail "ws run exited $?"
expect "$(jget "$TMP/r1" protocol)" websocket "protocol"
expect "$(jget "$TMP/r1" requests)" 4000 "messages"
expect "$(jget "$TMP/r1" errors.total)" 0 "errors"
expect "$(jget "$TMP/r1" connects)" 8 "connections"
expect "$(jget "$TMP/r1" handshakes.count)" 8 "handshakes"
expect "$(jget "$TMP/r1" in_flight)" 4 "in flight"
expect_latency "$TMP/r1"
# 32-byte text frames: 2 + 4 (mask) + 32 bytes out, 2 + 32 back, per message
out=$(jget "$TMP/r1" bytes_written)
in=$(jget "$TMP/r1" bytes_read)
((out >= 4000 * 38 && in >= 4000 * 34)) || fail "bytes: written $out read $in"

# 2. binary messages of 70000 bytes (a 64-bit length, RFC 6455 §5.2)
bench -c 2 -n 60 --binary --body-size 70000 --json --fail-on-error "$WS" >"$TMP/r2" ||
    fail "binary run exited $?"
expect "$(jget "$TMP/r2" requests)" 60 "binary messages"
expect "$(jget "$TMP/r2" binary)" True "binary"
# and empty text messages
bench -c 2 -n 20 --body-size 0 --json --fail-on-error "$WS" >"$TMP/r2b" || fail "empty run exited $?"
expect "$(jget "$TMP/r2b" requests)" 20 "empty messages"

# 3. --close: a connection, a handshake and a Close per message
bench -c 4 -n 200 --close --json --fail-on-error "$WS" >"$TMP/r3" || fail "--close exited $?"
expect "$(jget "$TMP/r3" requests)" 200 "--close messages"
expect "$(jget "$TMP/r3" connection)" per-request "--close mode"
expect "$(jget "$TMP/r3" handshakes.count)" 200 "--close handshakes"

# 4. a timed run with a warm-up, and the human summary (no progress line in a pipe)
bench -c 4 -d 500ms --warmup 200ms "$WS" >"$TMP/r4" || fail "timed run exited $?"
grep -q '^Requests/sec:' "$TMP/r4" || fail "no Requests/sec line"
grep -q 'WebSocket echo, 32-byte text messages' "$TMP/r4" || fail "no mode line"
grep -q 'WebSocket handshakes' "$TMP/r4" || fail "no handshake line"
if grep -q $'\r' "$TMP/r4"; then fail "progress line written to a pipe"; fi

# 5. a route that is not a WebSocket: 404 for every handshake, counted as non2xx
rc=0
bench -c 2 -n 10 --json --fail-on-error "ws://127.0.0.1:$PORT/hello" >"$TMP/r5" || rc=$?
expect "$rc" 1 "--fail-on-error exit status"
expect "$(jget "$TMP/r5" errors.non2xx)" 10 "non-101 handshakes"
expect "$(jget "$TMP/r5" requests)" 0 "messages without a handshake"

# the server's own count of handshakes: 8 + 2 + 2 + 200 (+ the timed run's 4)
stop_petrel
expect "$(grep -c '"GET /ws HTTP/1.1" 101' "$TMP/access.log" || true)" 216 "server count of 101s"

# ---------------------------------------------------------------------------
{
    cat <<'PYEOF'
# srv.py MODE PORTFILE LOGFILE: a WebSocket server, a thread per connection.
#   echo       echo every message; log "msg" per echo, "close CODE" per Close
#   closeafter echo 3 messages per connection, then close the TCP connection
#   closeframe echo 1 message per connection, then send a Close (1001)
#   masked     echo with masked frames (a server MUST NOT mask, RFC 6455 §5.1)
#   wrong      echo the payload with its last byte changed
#   badaccept  101 with a wrong Sec-WebSocket-Accept
#   silent     complete the handshake, never echo
#   hugehead   a 101 head of more than 8 KiB (petrel-bench's limit)
#   garbage    not HTTP at all
# Every client frame is checked: masked, a mask key not seen before on the
# connection (§5.3); the handshake: GET, Upgrade, Connection, version 13, a
# 16-byte key (§4.1).  A violation is logged as "bad ...".
import base64, hashlib, os, socket, struct, sys, threading
mode, portfile, logfile = sys.argv[1:4]
lock = threading.Lock()
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def log(s):
    with lock:
        with open(logfile, "a") as f:
            f.write(s + "\n")
def recvn(c, buf, n):
    while len(buf) < n:
        d = c.recv(65536)
        if not d:
            raise EOFError
        buf += d
    return buf
def frame(op, payload, mask=None):
    n = len(payload)
    b1 = 0x80 if mask else 0
    if n < 126:
        h = struct.pack("!BB", 0x80 | op, b1 | n)
    elif n < 65536:
        h = struct.pack("!BBH", 0x80 | op, b1 | 126, n)
    else:
        h = struct.pack("!BBQ", 0x80 | op, b1 | 127, n)
    if mask:
        payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        return h + mask + payload
    return h + payload
def serve(c):
    buf = b""
    buf = recvn(c, buf, 4)
    while b"\r\n\r\n" not in buf:
        buf = recvn(c, buf, len(buf) + 1)
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    hs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    key = hs.get("sec-websocket-key", "")
    if (not lines[0].startswith("GET ") or hs.get("upgrade", "").lower() != "websocket"
            or "upgrade" not in hs.get("connection", "").lower()
            or hs.get("sec-websocket-version") != "13" or len(base64.b64decode(key)) != 16):
        log("bad handshake %r" % hs)
    acc = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    if mode == "badaccept":
        acc = acc[::-1]
    if mode == "garbage":
        c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        return
    if mode == "hugehead":
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n" + b"X-Pad: " + b"p" * 9000 + b"\r\n")
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % acc).encode())
    masks = set()
    n = 0
    while True:
        buf = recvn(c, buf, 2)
        b0, b1 = buf[0], buf[1]
        ln, pos = b1 & 127, 2
        if ln == 126:
            buf = recvn(c, buf, 4); ln = struct.unpack("!H", buf[2:4])[0]; pos = 4
        elif ln == 127:
            buf = recvn(c, buf, 10); ln = struct.unpack("!Q", buf[2:10])[0]; pos = 10
        if not b1 & 0x80:
            log("bad unmasked client frame")
            return
        buf = recvn(c, buf, pos + 4 + ln)
        mask = buf[pos:pos + 4]
        if mask in masks:
            log("bad mask key reused")
        masks.add(mask)
        data = bytes(b ^ mask[i & 3] for i, b in enumerate(buf[pos + 4:pos + 4 + ln]))
        buf = buf[pos + 4 + ln:]
        op = b0 & 15
        if op == 8:
            log("close %d" % struct.unpack("!H", data[:2])[0])
            c.sendall(frame(8, data[:2]))
            return
        if mode == "silent":
            continue
        if mode == "wrong":
            data = data[:-1] + bytes([data[-1] ^ 1])
        c.sendall(frame(op, data, os.urandom(4) if mode == "masked" else None))
        n += 1
        log("msg")
        if mode == "closeafter" and n == 3:
            return
        if mode == "closeframe" and n == 1:
            c.sendall(frame(8, struct.pack("!H", 1001)))
            return
PYEOF
    stub_serve_py
} >"$TMP/srv.py"

start_srv() {
    : >"$TMP/log"
    stub_start "$1" "$TMP/log"
    WS=ws://127.0.0.1:$STUB_PORT/
}
stop_srv() { stub_stop; }
nlog() { grep -c "^$1" "$TMP/log" || true; }
no_bad() { if grep -q '^bad' "$TMP/log"; then fail "$1: $(grep '^bad' "$TMP/log" | head -3)"; fi; }

# echo_run WHAT FILE MESSAGES CLOSES BENCH-OPTION...: a run against the echo
# server with --fail-on-error: MESSAGES messages in the report and in the
# server's count, CLOSES Close 1000 (RFC 6455 §7.4.1), nothing bad
echo_run() {
    local what=$1 file=$2 msgs=$3 closes=$4 i
    shift 4
    start_srv echo
    bench "$@" --json --fail-on-error "$WS" >"$file" || fail "$what: exit $?"
    # the Closes come after the report, the last ones may still be on their
    # way to the server: wait for the server to log them (bounded)
    for ((i = 0; i < 250 * SCALE; i++)); do [[ $(nlog close) == "$closes" ]] && break; sleep 0.02; done
    stop_srv
    expect "$(jget "$file" requests)" "$msgs" "$what: messages"
    expect "$(nlog msg)" "$msgs" "$what: server count of messages"
    expect "$(grep -c '^close 1000$' "$TMP/log" || true)" "$closes" "$what: Close 1000s"
    no_bad "$what"
}
# 6. the server's count of messages; every frame masked with a fresh key;
#    a Close 1000 from every connection at the end
echo_run echo "$TMP/r6" 300 3 -c 3 -m 2 -n 300
#    ... and with --close: a connection, a message and a Close 1000 each
echo_run "echo --close" "$TMP/r6b" 30 30 -c 3 -n 30 --close

# 7. a server that closes the TCP connection after 3 messages: the messages
#    in flight are lost (read errors), the connections come back
start_srv closeafter
bench -c 2 -m 2 -n 100 --json "$WS" >"$TMP/r7" || fail "closeafter: exit $?"
stop_srv
req=$(jget "$TMP/r7" requests)
err=$(jget "$TMP/r7" errors.total)
expect "$((req + err))" 100 "closeafter: messages + errors"
((err > 0)) || fail "closeafter: no errors counted"
expect "$(($(jget "$TMP/r7" errors.read) + $(jget "$TMP/r7" errors.write)))" "$err" "closeafter: kinds"
((req <= $(nlog msg))) || fail "closeafter: counted $req, the server echoed $(nlog msg)"
(($(jget "$TMP/r7" server_closes) > 0)) || fail "closeafter: no server closes"
no_bad "closeafter"

# 8. a Close from the server while messages are in flight: protocol errors
start_srv closeframe
bench -c 2 -m 2 -n 40 --json "$WS" >"$TMP/r8" || fail "closeframe: exit $?"
stop_srv
req=$(jget "$TMP/r8" requests)
expect "$((req + $(jget "$TMP/r8" errors.protocol)))" 40 "closeframe: messages + protocol errors"
(($(jget "$TMP/r8" errors.protocol) > 0)) || fail "closeframe: no protocol errors"

# 9. masked frames from the server (RFC 6455 §5.1): protocol errors, no echo counted
start_srv masked
bench -c 2 -n 20 --json "$WS" >"$TMP/r9" || fail "masked: exit $?"
stop_srv
expect "$(jget "$TMP/r9" errors.protocol)" 20 "masked: protocol errors"
expect "$(jget "$TMP/r9" requests)" 0 "masked: messages"

# 10. wrong echoes: counted, and each a check error
start_srv wrong
rc=0
bench -c 2 -n 50 --json --fail-on-error "$WS" >"$TMP/r10" || rc=$?
stop_srv
expect "$rc" 1 "wrong: --fail-on-error exit status"
expect "$(jget "$TMP/r10" requests)" 50 "wrong: messages"
expect "$(jget "$TMP/r10" errors.check)" 50 "wrong: check errors"

# 11. a 101 with the wrong Sec-WebSocket-Accept (§4.1): protocol errors
start_srv badaccept
bench -c 2 -n 10 --json "$WS" >"$TMP/r11" || fail "badaccept: exit $?"
stop_srv
expect "$(jget "$TMP/r11" errors.protocol)" 10 "badaccept: protocol errors"
expect "$(jget "$TMP/r11" handshakes.count)" 0 "badaccept: handshakes"
expect "$(nlog msg)" 0 "badaccept: messages sent after a bad 101"

# 11b. a head over 8 KiB, and a server that does not speak HTTP: protocol errors
for m in hugehead garbage; do
    start_srv $m
    bench -c 2 -n 6 --json "$WS" >"$TMP/r11$m" || fail "$m: exit $?"
    stop_srv
    expect "$(jget "$TMP/r11$m" errors.protocol)" 6 "$m: protocol errors"
    expect "$(jget "$TMP/r11$m" requests)" 0 "$m: messages"
done

# 12. a server that never echoes: timeouts, in bounded time
start_srv silent
t0=$(date +%s%N)
bench -c 2 -m 2 -n 4 --timeout 300ms --json "$WS" >"$TMP/r12" || fail "silent: exit $?"
t1=$(date +%s%N)
stop_srv
expect "$(jget "$TMP/r12" errors.timeout)" 4 "silent: timeouts"
(((t1 - t0) / 1000000 < 5000 * SCALE)) || fail "silent: took $(((t1 - t0) / 1000000)) ms"

# 13. nothing listens: connect errors; --close too
URLX=ws://127.0.0.1:$(free_port)/
bench -c 2 -n 10 --json "$URLX" >"$TMP/r13" || fail "connect: exit $?"
expect "$(jget "$TMP/r13" errors.connect)" 10 "connect errors"
bench -c 2 -n 10 --close --json "$URLX" >"$TMP/r13b" || fail "connect --close: exit $?"
expect "$(jget "$TMP/r13b" errors.connect)" 10 "--close connect errors"

# 14. bad usage exits 2
for args in "--binary http://127.0.0.1:1/" "-p 2 ws://127.0.0.1:1/" "--h2 ws://127.0.0.1:1/" \
    "--compare ws://127.0.0.1:1/" "--expect-status 200 ws://127.0.0.1:1/" "wss://127.0.0.1:1/"; do
    rc=0
    # shellcheck disable=SC2086
    "$BENCH" -n 1 $args >/dev/null 2>&1 || rc=$?
    expect "$rc" 2 "usage error: $args"
done
echo "PASS: test_bench_ws"
