#!/usr/bin/env bash
# The proxy module streams: a 50 MB response through a client that reads
# slowly, the worker's resident memory bounded meanwhile (backpressure:
# the upstream is not read while --proxy-buffer bytes wait for the
# client), the bytes whole at the end; the same over h2c; the trailers of
# a chunked response forwarded (RFC 9110 §6.5, RFC 9112 §7.1.2); and
# connections to the upstream reused (far fewer than the requests); a
# client that leaves (waiting, or midway through the body) has its call
# cancelled and the upstream connection closed.
# Without backpressure the slow client's output would pass the
# connection's budget and petrel would close it: the whole body arriving
# is the proof, the RSS the measure.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/proxy_lib.sh"
proxy_needs
upstream_start
T=$LIB_TMP

petrel_start --workers 1 --proxy-buffer 256k --module "proxy:/p=$UP"
WORKER=$(petrel_worker)

# --- reuse: one connection serves many requests ---------------------------------
c0=$(up_stat conns)
for i in $(seq 1 40); do
    curl_ -o /dev/null "$BASE/p/ok?$i"
done
c1=$(up_stat conns)
conns=$((c1 - c0 - 1)) # the second up_stat's own
((conns <= 4)) || fail "40 requests took $conns connections to the upstream"
ok "40 requests, $conns upstream connection(s)"

# --- trailers of a chunked response -----------------------------------------------
curl_ --raw -H 'TE: trailers' -o "$T/raw" "$BASE/p/chunked"
tr -d '\r' <"$T/raw" | grep -qi '^x-up-trailer: done$' ||
    fail "HTTP/1.1 with TE: trailers: no X-Up-Trailer in $(tr '\r\n' '  ' <"$T/raw")"
nghttp_=$(command -v nghttp || true)
if [[ -n $nghttp_ ]]; then
    "$nghttp_" -v "$BASE/p/chunked" >"$T/nghttp" 2>&1 || true
    grep -qi 'x-up-trailer: done' "$T/nghttp" || fail "h2c: no X-Up-Trailer ($(tail -n 20 "$T/nghttp"))"
fi
ok "trailers forwarded"

# --- 50 MB through a slow reader, RSS bounded --------------------------------------
N=$((50 << 20))
rss0=$(rss_kb "$WORKER")
pyrun "$PORT" "$N" "$WORKER" "$rss0" <<'EOF'
import os, socket, sys, time
port, n, worker, rss0 = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def rss():
    for l in open("/proc/%s/status" % worker):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.sendall(b"GET /p/big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % n)
got, peak, t0, raw = 0, 0, time.time(), b""
while b"\r\n\r\n" not in raw:
    raw += s.recv(65536)
head, _, rest = raw.partition(b"\r\n\r\n")
assert head.startswith(b"HTTP/1.1 200"), head
# chunked: count the body bytes by the chunk sizes
buf, body, done = rest, 0, False
slow_until = 16 << 20  # the first 16 MB slowly (5 ms a read)
while not done:
    while True:
        i = buf.find(b"\r\n")
        if i < 0:
            break
        size = int(buf[:i].split(b";")[0], 16)
        if size == 0:
            done = True
            break
        if len(buf) < i + 2 + size + 2:
            break
        body += size
        buf = buf[i + 2 + size + 2:]
    if done:
        break
    d = s.recv(65536)
    assert d, "closed after %d bytes" % body
    buf += d
    if body < slow_until:
        time.sleep(0.005)
        peak = max(peak, rss())
s.close()
print("body %d bytes in %.1fs; worker RSS %d KiB before, %d KiB at most while slow"
      % (body, time.time() - t0, rss0, peak))
assert body == n, "got %d bytes, want %d" % (body, n)
limit = 16 * 1024 * int(os.environ.get("LIB_SCALE", "1"))  # sanitizers: more
assert peak - rss0 < limit, "the worker grew by %d KiB for a slow client" % (peak - rss0)
EOF
ok "50 MB streamed to a slow reader, the worker's RSS bounded"

# --- the client goes away: the call is cancelled, its connection closed -----------
# up_conns: connections from petrel to the upstream (established)
up_conns() { ss -Htn state established "( dport = :$UP_PORT )" | wc -l; }
fewer_than() { (($(up_conns) < $1)); }
n0=$(pyrun "$PORT" "$UP_PORT" <<'EOF'
import socket, subprocess, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /p/slow?ms=3000 HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(0.3)
print(subprocess.run(["ss", "-Htn", "state", "established", "( dport = :%s )" % sys.argv[2]],
                     capture_output=True, text=True).stdout.count("\n"))
s.close()
EOF
)
t0=$EPOCHREALTIME
# the call's connection goes at once, long before the upstream answers
wait_for "$(bound 2)" fewer_than "$n0"
ok "a client that leaves while its request waits: the upstream connection closed in $(secs_since "$t0")s"
n0=$(pyrun "$PORT" "$N" "$UP_PORT" <<'EOF'
import socket, subprocess, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /p/big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % int(sys.argv[2]))
got = 0
while got < 1 << 20:
    got += len(s.recv(65536))
print(subprocess.run(["ss", "-Htn", "state", "established", "( dport = :%s )" % sys.argv[3]],
                     capture_output=True, text=True).stdout.count("\n"))
s.close()
EOF
)
wait_for "$(bound 2)" fewer_than "$n0"
ok "a client that leaves midway through 50 MB: the upstream connection closed"
expect_eq "$(curl_ "$BASE/p/ok")" ok "after the clients left"

got=$(curl_ --http2-prior-knowledge -o /dev/null -w '%{size_download} %{http_code}' "$BASE/p/big?n=$N")
expect_eq "$got" "$N 200" "h2c: 50 MB through the proxy"
ok "h2c: 50 MB through the proxy"
petrel_stop
