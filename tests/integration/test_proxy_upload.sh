#!/usr/bin/env bash
# The proxy module streams request bodies (RFC 9110 §7.6: the proxy
# forwards the message; the issue's "never a whole body in memory"): a
# 100 MB upload to an upstream that reads slowly passes through with the
# worker's resident memory bounded (the client's reads are paused while
# the call holds its buffer), the bytes whole at the upstream (count and
# SHA-256); the client's framing kept (Content-Length stays
# Content-Length, chunked stays chunked: RFC 9112 §6); the same from an
# h2c client; a small body gathered and sent with its request; an
# upstream that answers before reading the body (413) answered to the
# client, the rest of the client's body dropped, never taken as a request
# (the next request on the connection answered by the upstream as one
# request); a client that stops mid-body: the upstream's request is cut,
# never completed; an upload longer than --handler-timeout answered, the
# timeout counting from the end of the body.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
T=$LIB_TMP

rm -f "$T/sinkport"
"$PY" "$LIB_DIR/upload_sink.py" "$T/sinkport" 2>"$T/sink.err" &
LIB_BG+=($!)
wait_for "$(bound 10)" test -s "$T/sinkport"
SINK=http://127.0.0.1:$(cat "$T/sinkport")
sink_stat() {
    curl_ "$SINK/__stats" | "$PY" -c "import json, sys; print(json.load(sys.stdin)['$1'])"
}
field() { "$PY" -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }

petrel_start --workers 1 --max-body-size 256m --module "proxy:/up=$SINK"
WORKER=$(petrel_worker)

N=$((100 << 20))
head -c "$N" /dev/urandom >"$T/big"
SHA=$(sha256sum "$T/big" | cut -d' ' -f1)

# --- 100 MB over HTTP/1.1 to a slow upstream: RSS bounded -------------------------
rss0=$(rss_kb "$WORKER")
out=$(pyrun "$PORT" "$T/big" "$WORKER" "$rss0" <<'PYEOF'
import os, socket, sys, threading, time
port, path, worker, rss0 = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
n = os.path.getsize(path)

def rss():
    for l in open("/proc/%s/status" % worker):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

peak = [rss0]
done = threading.Event()
def watch():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"PUT /up/sink?rate=%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
          % (40 << 20, n))
t0 = time.time()
with open(path, "rb") as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        s.sendall(b)
raw = b""
while b"\r\n\r\n" not in raw:
    d = s.recv(65536)
    assert d, "closed without a response"
    raw += d
head, _, body = raw.partition(b"\r\n\r\n")
cl = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
while len(body) < cl:
    body += s.recv(65536)
done.set()
s.close()
limit = 16 * 1024 * int(os.environ.get("LIB_SCALE", "1"))  # sanitizers: more
sys.stderr.write("100 MB up in %.1fs; worker RSS %d KiB before, %d KiB at most\n"
                 % (time.time() - t0, rss0, peak[0]))
assert head.startswith(b"HTTP/1.1 200"), head
assert peak[0] - rss0 < limit, "the worker grew by %d KiB for a slow upstream" % (peak[0] - rss0)
print(body.decode())
PYEOF
)
expect_eq "$(field bytes <<<"$out")" "$N" "bytes at the upstream"
expect_eq "$(field sha256 <<<"$out")" "$SHA" "SHA-256 at the upstream"
expect_eq "$(field framing <<<"$out") $(field declared <<<"$out")" "cl $N" "the framing kept"
ok "100 MB uploaded through the proxy to a slow upstream, the worker's RSS bounded, the bytes whole"

# --- chunked stays chunked ----------------------------------------------------------
head -c $((3 << 20)) "$T/big" >"$T/mid"
out=$(curl_ -H 'Transfer-Encoding: chunked' --data-binary @"$T/mid" "$BASE/up/sink")
expect_eq "$(field framing <<<"$out") $(field bytes <<<"$out")" "chunked $((3 << 20))" "chunked upload"
expect_eq "$(field sha256 <<<"$out")" "$(sha256sum "$T/mid" | cut -d' ' -f1)" "chunked SHA-256"
ok "a chunked upload forwarded chunked, whole"

# --- a small body: gathered, sent with its request ---------------------------------
out=$(curl_ --data-binary 'hello, upstream' "$BASE/up/sink")
expect_eq "$(field framing <<<"$out") $(field bytes <<<"$out")" "cl 15" "small body"
ok "a small body forwarded with its Content-Length"

# --- h2c: 100 MB, RSS bounded ------------------------------------------------------
rss0=$(rss_kb "$WORKER")
(
    peak=$rss0
    while [[ ! -e $T/h2done ]]; do
        r=$(rss_kb "$WORKER")
        ((r > peak)) && peak=$r && echo "$peak" >"$T/h2peak"
        sleep 0.05
    done
) &
LIB_BG+=($!)
out=$(curl_ --http2-prior-knowledge -T "$T/big" "$BASE/up/sink?rate=$((40 << 20))")
touch "$T/h2done"
peak=$(cat "$T/h2peak" 2>/dev/null || echo "$rss0")
expect_eq "$(field bytes <<<"$out")" "$N" "h2c: bytes at the upstream"
expect_eq "$(field sha256 <<<"$out")" "$SHA" "h2c: SHA-256 at the upstream"
((peak - rss0 < 16384 * LIB_SCALE)) || fail "h2c: the worker grew by $((peak - rss0)) KiB"
ok "h2c: 100 MB uploaded through the proxy, RSS $rss0 KiB before, $peak KiB at most"

# --- the upstream answers before the body: 413 to the client, the rest dropped -----
# The client's body holds what would be a request if it were taken as one.
req0=$(sink_stat requests)
out=$(pyrun "$PORT" <<'PYEOF'
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
smuggled = b"GET /up/sink HTTP/1.1\r\nHost: x\r\n\r\n"
body = smuggled * 40000  # 1.4 MB: more than the proxy gathers
s.sendall(b"POST /up/early HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
try:
    s.sendall(body)
    s.sendall(b"GET /up/sink HTTP/1.1\r\nHost: x\r\n\r\n")
except OSError:
    pass  # (a server may close after its answer rather than read the rest)
s.settimeout(5)
raw = b""
while raw.count(b"HTTP/1.1 ") < 2 or not raw.endswith(b"}"):
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d:
        break
    raw += d
print(raw.count(b"HTTP/1.1 "), raw.split(b"\r\n")[0].decode(),
      raw.rsplit(b"HTTP/1.1 ", 1)[-1].split(b"\r\n")[0].decode())
PYEOF
)
req1=$(sink_stat requests)
# the 413, then the GET after the body answered on the same connection;
# the upstream saw those two, never the 40,000 requests of the body
expect_eq "$out" "2 HTTP/1.1 413 Content Too Large 200 OK" "an upstream's early 413, then the next request"
expect_eq "$((req1 - req0))" 2 "requests at the upstream"
ok "an upstream that answers before the body: the client gets its 413, the rest of the body dropped, the next request on the connection answered; the upstream saw 2 requests"

# --- a client that stops mid-body: the upstream's request is cut --------------------
cut0=$(sink_stat cut)
pyrun "$PORT" <<'PYEOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"PUT /up/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 300000)
time.sleep(0.3)
s.close()
PYEOF
cut_more() { (($(sink_stat cut) > cut0)); }
wait_for "$(bound 5)" cut_more
ok "a client that stops mid-body: the upstream's request cut, not completed"
expect_eq "$(curl_ --data-binary 'after' "$BASE/up/sink" | field bytes)" 5 "after the cut"
petrel_stop

# --- an upload longer than --handler-timeout: the timeout counts from the
# end of the body, as for a body read whole before the handler ------------
petrel_start --workers 1 --max-body-size 256m --handler-timeout 1 --module "proxy:/up=$SINK"
t0=$EPOCHREALTIME
out=$(curl_ -T "$T/big" "$BASE/up/sink?rate=$((40 << 20))")
expect_eq "$(field bytes <<<"$out")" "$N" "an upload of $(secs_since "$t0")s with --handler-timeout 1"
ok "a 100 MB upload of $(secs_since "$t0")s through the proxy with --handler-timeout 1: whole, not 504"
# an upstream that never answers: 504 one --handler-timeout after the
# body's end (it came up to twice that when the timeout only looked at
# the body's end as it expired: 1.91 s)
pyrun <<'PYEOF'
import socket, time
from petrel_client import PORT, bound, check, ok
s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
s.sendall(b"PUT /up/mute HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n")
for i in range(3):  # 2.1 s of upload, past the timeout
    time.sleep(0.7)
    s.sendall(b"x" * 100000)
end = time.time()
line = s.recv(4096).split(b"\r\n")[0].decode()
took = time.time() - end
check(line.startswith("HTTP/1.1 504") and 0.95 <= took <= 1.0 + bound(0.5),
      "an upstream that never answered: %r %.2f s after the body's end, want 504 after 1 s"
      % (line, took))
ok("an upstream that never answers: 504 %.2f s after the body's end (--handler-timeout 1)" % took)
PYEOF
petrel_stop
