#!/usr/bin/env bash
# --proxy-protocol: the PROXY protocol header (HAProxy's specification, "The
# PROXY protocol", v1 text and v2 binary) in front of HTTP/1.1 and h2c.
#
# Checked, against the real petrel with raw sockets:
#   - the client address of a v1 (TCP4, TCP6) or v2 (INET, INET6, with TLVs)
#     header is the client's in the access log (petrel_req_peer) for every
#     keep-alive request and every h2 stream of its connection;
#   - v2 LOCAL and v1 UNKNOWN (a line of 107 bytes) keep the socket's own
#     address; a header split across TCP segments is accepted;
#   - bad input: no header, each malformed v1 or v2 header, a v2 length past
#     --max-proxy-header-size, an unknown family or command, a v2 TLV that
#     runs past the header or is cut short: the connection
#     is closed without a byte of answer, with exactly one log line, and
#     nothing is served on it;
#   - a header that does not complete (cut short, or trickled byte by byte)
#     is closed at the header timeout with one log line;
#   - --trusted-proxies: a connection from elsewhere is closed before its
#     header is read, and the address in that header is never logged;
#   - the admin listener never expects a header; the metrics count headers
#     and refusals;
#   - a connection accepted whose header is not complete when SIGTERM comes
#     is in flight: it is answered (Connection: close), then petrel exits.
. "$(dirname "$0")/lib.sh"

py_needs h2

ALOG=$LIB_TMP/access.log

petrel_start --module hello --proxy-protocol --header-timeout 1 --access-log "$ALOG" \
    --access-log-format json --admin-listen 127.0.0.1:0 --log-level info
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT ALOG PETREL_ERR

pyrun <<'PYEOF'
import json, os, socket, struct, time
import h2.config, h2.connection, h2.events
from petrel_client import Conn, request, check, ok, fail, bound

ALOG, ERR = os.environ["ALOG"], os.environ["PETREL_ERR"]
ADMIN = int(os.environ["ADMIN_PORT"])
SIG = b"\r\n\r\n\x00\r\nQUIT\n"

def v2(cmd, fam, body):
    return SIG + bytes([0x20 | cmd, fam]) + struct.pack("!H", len(body)) + body

def inet(src, dst, sport, dport):
    return socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)

def inet6(src, dst, sport, dport):
    return (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
            + struct.pack("!HH", sport, dport))

def log_lines():
    with open(ERR, errors="replace") as f:
        return [l for l in f if "PROXY protocol:" in l]

def access():
    # the access log is flushed within a second
    time.sleep(1.2)
    with open(ALOG) as f:
        return [json.loads(l) for l in f]

# --- the client's address, for every request of the connection ------------
c = Conn()
c.send(b"PROXY TCP4 203.0.113.9 198.51.100.2 56324 80\r\n" +
       request("GET", "/hello?v1a") + request("GET", "/hello?v1b"))
for i in range(2):
    r = c.read_response()
    check(r.status == 200 and r.body == b"Hello World!", "v1 keep-alive request %d: %r" % (i, r))
c.send(request("GET", "/hello?v1c"))  # a later segment, same connection
check(c.read_response().status == 200, "v1: a later request")
c.close()

c = Conn()
c.send(b"PROXY TCP6 2001:db8::7 2001:db8::1 40000 443\r\n" + request("GET", "/hello?v1six"))
check(c.read_response().status == 200, "v1 TCP6")
c.close()

# v2 INET6 with TLVs (ALPN, AUTHORITY, NOOP), then h2c with three streams
tlvs = b"\x01\x00\x02h2" + b"\x02\x00\x0bexample.com" + b"\x04\x00\x03\x00\x00\x00"
c = Conn()
c.send(v2(1, 0x21, inet6("2001:db8::42", "2001:db8::1", 1234, 80) + tlvs))
h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
h.initiate_connection()
sids = []
for i in range(3):
    sid = h.get_next_available_stream_id()
    h.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "x"),
                         (":path", "/hello?h2s%d" % i)], end_stream=True)
    sids.append(sid)
c.send(h.data_to_send())
done = set()
c.settimeout(10)
while len(done) < 3:
    data = c.sock.recv(65536)
    check(data, "h2: the connection closed with %d of 3 streams answered" % len(done))
    for ev in h.receive_data(data):
        if isinstance(ev, h2.events.StreamEnded):
            done.add(ev.stream_id)
    c.send(h.data_to_send())
c.close()

# v2 INET, and a header that comes one byte at a time (well within the
# header timeout), the request in the same segment as its last byte
hdr = v2(1, 0x11, inet("192.0.2.77", "198.51.100.2", 5000, 80))
c = Conn()
for b in hdr[:-1]:
    c.send(bytes([b]))
    time.sleep(0.01)
c.send(hdr[-1:] + request("GET", "/hello?split"))
check(c.read_response().status == 200, "v2 split across %d segments" % len(hdr))
c.close()

# v2 LOCAL (a balancer's health check) and v1 UNKNOWN: the socket's address
c = Conn()
c.send(v2(0, 0x00, b"") + request("GET", "/hello?local"))
check(c.read_response().status == 200, "v2 LOCAL")
c.close()
unknown = b"PROXY UNKNOWN " + b"x" * 91 + b"\r\n"
check(len(unknown) == 107, "the UNKNOWN line is 107 bytes")
c = Conn()
c.send(unknown + request("GET", "/hello?unknown"))
check(c.read_response().status == 200, "v1 UNKNOWN of 107 bytes")
c.close()

want = {"/hello?v1a": "203.0.113.9", "/hello?v1b": "203.0.113.9", "/hello?v1c": "203.0.113.9",
        "/hello?v1six": "2001:db8::7", "/hello?h2s0": "2001:db8::42",
        "/hello?h2s1": "2001:db8::42", "/hello?h2s2": "2001:db8::42",
        "/hello?split": "192.0.2.77", "/hello?local": "127.0.0.1",
        "/hello?unknown": "127.0.0.1"}
got = {l["target"]: l["client"] for l in access()}
for t, addr in want.items():
    check(got.get(t) == addr, "%s: client %r in the access log, want %r" % (t, got.get(t), addr))
ok("the PROXY header's client is the client of every request and h2 stream (%d)" % len(want))

# --- bad input: closed, one log line each, nothing served -----------------
bad = {
    "no header": request("GET", "/hello?bad"),
    "HTTP/2 preface without a header": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "v1 LF only": b"PROXY TCP4 192.0.2.1 192.0.2.2 1 2\n",
    "v1 two spaces": b"PROXY TCP4  192.0.2.1 192.0.2.2 1 2\r\n",
    "v1 leading zero in a port": b"PROXY TCP4 192.0.2.1 192.0.2.2 01 2\r\n",
    "v1 port 65536": b"PROXY TCP4 192.0.2.1 192.0.2.2 65536 2\r\n",
    "v1 leading zero in an IPv4 octet": b"PROXY TCP4 192.0.2.01 192.0.2.2 1 2\r\n",
    "v1 IPv6 group of 5 digits": b"PROXY TCP6 2001:0db8::00001 ::1 1 2\r\n",
    "v1 IPv6 in TCP4": b"PROXY TCP4 ::1 ::1 1 2\r\n",
    "v1 without CRLF in 107 bytes": b"PROXY UNKNOWN " + b"x" * 100 + b"\r\n",
    "v1 unknown protocol": b"PROXY UDP4 192.0.2.1 192.0.2.2 1 2\r\n",
    "v2 version 1": SIG + b"\x11\x11\x00\x0c" + inet("192.0.2.1", "192.0.2.2", 1, 2),
    "v2 command 2": SIG + b"\x22\x11\x00\x0c" + inet("192.0.2.1", "192.0.2.2", 1, 2),
    "v2 family 4": SIG + b"\x21\x41\x00\x0c" + inet("192.0.2.1", "192.0.2.2", 1, 2),
    "v2 transport 3": SIG + b"\x21\x13\x00\x0c" + inet("192.0.2.1", "192.0.2.2", 1, 2),
    "v2 length short of INET6 addresses": SIG + b"\x21\x21\x00\x0c" + b"\x00" * 12,
    "v2 length past the limit": SIG + b"\x21\x11\x13\x88" + b"\x00" * 100,
    # TLVs must stay within the header: a NOOP claiming 64 bytes (3 there),
    # and a TLV cut short after 2 bytes of its type and length
    "v2 TLV past the header's length": SIG + b"\x21\x11\x00\x12"
    + inet("192.0.2.1", "192.0.2.2", 1, 2) + b"\x04\x00\x40\x00\x00\x00"
    + request("GET", "/hello?bad-tlv"),
    "v2 TLV cut short": SIG + b"\x21\x11\x00\x0e" + inet("192.0.2.1", "192.0.2.2", 1, 2)
    + b"\x04\x00",
}
before = len(log_lines())
for what, data in bad.items():
    c = Conn()
    c.send(data)
    c.sock.shutdown(socket.SHUT_WR)
    got, _ = c.wait_eof(5)
    check(got == b"", "%s: answered %r" % (what, got[:100]))
    c.close()
time.sleep(0.3)
lines = log_lines()[before:]
check(len(lines) == len(bad), "%d malformed headers made %d log lines: %s"
      % (len(bad), len(lines), "".join(lines)))
check(not any("?bad" in l["target"] for l in access()), "a request without header was served")
ok("%d kinds of bad header: closed without an answer, one log line each" % len(bad))

# --- the header timeout: cut short, or trickled ---------------------------
before = len(log_lines())
c = Conn()
c.send(b"PROXY TCP4 192.0.2.1")
t0 = time.monotonic()
c.settimeout(10)
check(c.sock.recv(100) == b"", "a header cut short got an answer")
took = time.monotonic() - t0
check(0.8 <= took <= bound(3), "a header cut short was closed after %.2fs, want ~1s" % took)
c.close()
c = Conn()
t0 = time.monotonic()
closed = False
for b in b"PROXY TCP4 192.0.2.1 192.0.2.2 1 2\r\n":
    try:
        c.send(bytes([b]))
    except (BrokenPipeError, ConnectionResetError):
        closed = True
        break
    time.sleep(0.1)
if not closed:
    c.settimeout(5)
    try:
        closed = c.sock.recv(100) == b""
    except ConnectionResetError:
        closed = True
check(closed, "a header trickled over %.1fs was not closed" % (time.monotonic() - t0))
c.close()
time.sleep(0.2)
lines = log_lines()[before:]
check(len(lines) == 2 and all("header timeout" in l for l in lines),
      "the header timeout: %r" % lines)
ok("a header cut short or trickled is closed at the header timeout, one line each")

# --- the admin listener takes no header; the metrics count ----------------
c = Conn(ADMIN)
c.send(request("GET", "/metrics"))
r = c.read_response()
check(r.status == 200, "admin /metrics: %r" % r)
m = {}
for line in r.body.decode().splitlines():
    if line and not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
check(m['petrel_proxy_headers_total{version="1"}'] >= 3, "v1 headers: %r" % m)
check(m['petrel_proxy_headers_total{version="2"}'] >= 3, "v2 headers: %r" % m)
check(m['petrel_proxy_rejected_total{reason="invalid"}'] >= len(bad), "invalid: %r" % m)
check(m['petrel_proxy_rejected_total{reason="timeout"}'] == 2, "timeouts: %r" % m)
ok("the admin listener answers without a PROXY header; the metrics count headers and refusals")
PYEOF

petrel_stop

# --- a connection in its PROXY stage when SIGTERM comes is in flight ------
petrel_start --module hello --proxy-protocol --access-log "$ALOG" --access-log-format json
pyrun <<'PYEOF'
import os, signal, time
from petrel_client import Conn, request, check, ok, petrel_pid
c = Conn()
c.send(b"PROXY TCP4 192.0.2.5 ")
time.sleep(0.2)
os.kill(petrel_pid(), signal.SIGTERM)
time.sleep(0.3)
c.send(b"192.0.2.6 1 2\r\n" + request("GET", "/hello?drain"))
r = c.read_response()
check(r.status == 200 and r.closes(), "in the drain: %r" % r)
ok("a connection in its PROXY stage at SIGTERM is in flight: answered with Connection: close")
PYEOF
petrel_wait_exit "$PETREL_PID" "$(bound 15)"
[[ $PETREL_RC -eq 0 ]] || fail "petrel exited with $PETREL_RC after SIGTERM"
grep -q '"client":"192.0.2.5"' "$ALOG" || fail "the drained request is not in the access log"

# --- --trusted-proxies ----------------------------------------------------
petrel_start --module hello --proxy-protocol --trusted-proxies 192.0.2.0/24,2001:db8::/32 \
    --access-log "$ALOG.2"
pyrun <<'PYEOF'
import socket
from petrel_client import Conn, request, check, ok
c = Conn()
c.send(b"PROXY TCP4 198.18.0.77 192.0.2.2 4444 80\r\n" + request("GET", "/hello?untrusted"))
c.settimeout(5)
try:
    got = c.sock.recv(100)
except ConnectionResetError:
    got = b""
check(got == b"", "an untrusted peer was answered: %r" % got)
ok("a connection from outside --trusted-proxies is closed")
PYEOF
sleep 0.3
grep -q 'PROXY protocol: connection from 127.0.0.1 closed: not a trusted proxy' "$PETREL_ERR" ||
    fail "no log line for the untrusted peer: $(cat "$PETREL_ERR")"
if grep -q '198\.18\.0\.77' "$PETREL_ERR" "$ALOG.2" "$ALOG" 2>/dev/null; then
    fail "the address of an untrusted peer's PROXY header was logged"
fi
ok "the untrusted peer's header address is in no log"
petrel_stop

petrel_start --module hello --proxy-protocol --trusted-proxies 127.0.0.0/8 --access-log "$ALOG.3" \
    --max-proxy-header-size 300
pyrun <<'PYEOF'
import socket, struct
from petrel_client import Conn, request, check, ok
c = Conn()
c.send(b"PROXY TCP4 198.18.0.78 192.0.2.2 4444 80\r\n" + request("GET", "/hello?trusted"))
check(c.read_response().status == 200, "a trusted proxy")
ok("a connection from --trusted-proxies is served")
# --max-proxy-header-size 300: a v2 header of 300 bytes passes, 301 does not
def v2(total):
    addr = socket.inet_aton("192.0.2.9") + socket.inet_aton("192.0.2.1") + struct.pack("!HH", 1, 2)
    tlv_len = total - 16 - 12 - 3
    body = addr + b"\x04" + struct.pack("!H", tlv_len) + b"\x00" * tlv_len  # a NOOP TLV
    return b"\r\n\r\n\x00\r\nQUIT\n\x21\x11" + struct.pack("!H", len(body)) + body
c = Conn()
c.send(v2(300) + request("GET", "/hello?max"))
check(c.read_response().status == 200, "a v2 header of exactly --max-proxy-header-size")
c.close()
c = Conn()
c.send(v2(301) + request("GET", "/hello?over"))
c.settimeout(5)
check(c.sock.recv(100) == b"", "a v2 header over --max-proxy-header-size was answered")
ok("--max-proxy-header-size 300: 300 bytes pass, 301 are refused")
PYEOF
petrel_stop
grep -q '^198\.18\.0\.78 - - .*"GET /hello?trusted HTTP/1.1" 200' "$ALOG.3" ||
    fail "the combined log does not name the client: $(cat "$ALOG.3")"
ok "the combined access log names the client of a trusted proxy"

# --- petrel-bench --proxy (a PROXY header before each connection's first bytes)
# (the last part: without petrel-bench the test skips after the rest passed)
bench_needs
petrel_start --module hello --proxy-protocol --access-log "$ALOG.4"
for v in v1 v2; do
    "$BENCH" --proxy "$v" -c 3 -n 60 --close --json --fail-on-error "$BASE/hello" >"$LIB_TMP/b.json" ||
        fail "petrel-bench --proxy $v --close failed: $(cat "$LIB_TMP/b.json")"
    "$BENCH" --proxy "$v" --h2 -c 2 -m 4 -n 60 --json --fail-on-error "$BASE/hello" >"$LIB_TMP/b.json" ||
        fail "petrel-bench --proxy $v --h2 failed: $(cat "$LIB_TMP/b.json")"
done
petrel_stop
n=$(grep -c '^192\.0\.2\.1 - - ' "$ALOG.4" || true)
[[ $n -eq 240 ]] || fail "$n of 240 requests logged with petrel-bench's PROXY client 192.0.2.1"
ok "petrel-bench --proxy v1 and v2 (--close and h2c): every request carries the client it names"
