#!/usr/bin/env bash
# --admin-listen: /metrics in the Prometheus text format, parsed by a real
# Prometheus text parser (python3-prometheus-client), for an instance of two
# workers; /livez and /readyz.
#
# Checked:
#   - the counts match the traffic made, summed over both workers: requests
#     by protocol, method and status class (HTTP/1.1, HTTP/2, 404, POST),
#     connections accepted and closed, h2 streams, WebSocket connections and
#     messages both ways, static cache hits and misses (a module's metrics);
#   - the format: every family's # TYPE once, no two samples with the same
#     name and labels, histogram buckets cumulative with +Inf equal to
#     _count, the duration and arena high-water histograms counting every
#     request once;
#   - scrapes of the admin port (and its connections) are not counted;
#   - counters never go backwards: scraped again and again while the
#     instance reloads (SIGHUP) and after a worker is killed and restarted,
#     with petrel_reloads_total, petrel_module_generation and
#     petrel_worker_restarts_total saying so.
. "$(dirname "$0")/lib.sh"

py_needs prometheus_client
py_needs h2

WWW=$LIB_TMP/www
mkdir -p "$WWW"
printf 'one\n' >"$WWW/a.txt"
printf 'two\n' >"$WWW/b.txt"

petrel_start --workers 2 --module hello --module echo --module wsecho --root "$WWW" \
    --admin-listen 127.0.0.1:0
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT PETREL_ERR

pyrun <<'PYEOF'
import os, re, signal, socket, threading, time
import h2.config, h2.connection, h2.events
from prometheus_client.parser import text_string_to_metric_families
from petrel_client import Conn, request, check, ok, fail, bound, petrel_pid
from petrel_fault import ws_open, ws_frame, ws_read

ADMIN = int(os.environ["ADMIN_PORT"])
ERR = os.environ["PETREL_ERR"]

def scrape():
    c = Conn(ADMIN)
    c.send(request("GET", "/metrics"))
    r = c.read_response()
    c.close()
    check(r.status == 200, "/metrics: %r" % r)
    check(r.header("content-type") == "text/plain; version=0.0.4; charset=utf-8",
          "/metrics content type %r" % r.header("content-type"))
    return r.body.decode()

def parse(text):
    """{(sample name, sorted labels): value}, after the format checks."""
    types = re.findall(r"^# TYPE (\S+) ", text, re.M)
    dup = {t for t in types if types.count(t) > 1}
    check(not dup, "# TYPE more than once: %s" % dup)
    samples = {}
    for fam in text_string_to_metric_families(text):
        buckets = []
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            check(key not in samples, "two samples %r" % (key,))
            samples[key] = s.value
            if s.name.endswith("_bucket"):
                buckets.append(s.value)
        if fam.type == "histogram":
            check(buckets == sorted(buckets), "%s: buckets not cumulative: %r" % (fam.name, buckets))
            inf = samples[(fam.name + "_bucket", (("le", "+Inf"),))]
            check(inf == samples[(fam.name + "_count", ())],
                  "%s: +Inf %r != _count %r" % (fam.name, inf, samples[(fam.name + "_count", ())]))
    return samples

def v(s, name, **labels):
    return s.get((name, tuple(sorted(labels.items()))), 0)

def requests(s, **labels):
    return sum(val for (n, ls), val in s.items() if n == "petrel_requests_total"
               and all(dict(ls).get(k) == w for k, w in labels.items()))

base = parse(scrape())
check(v(base, "petrel_requests_total") == 0 and requests(base) == 0, "requests before any: %r" % base)
check(v(base, "petrel_workers") == 2, "petrel_workers %r" % v(base, "petrel_workers"))

# --- traffic --------------------------------------------------------------
conns = 0
for i in range(20):                      # 20 connections, 3 requests each
    c = Conn()
    conns += 1
    c.send(request("GET", "/hello") + request("GET", "/hello") + request("GET", "/nothing"))
    for k in range(3):
        r = c.read_response()
        check(r.status == (404 if k == 2 else 200), "h1: %r" % r)
    c.close()
for i in range(7):
    c = Conn()
    conns += 1
    c.send(request("POST", "/echo", body=b"x" * 3000))
    check(c.read_response(method="POST").status == 200, "POST /echo")
    c.close()
for name in ("a.txt", "b.txt", "a.txt", "a.txt"):   # static: misses then hits
    c = Conn()
    conns += 1
    c.send(request("GET", "/" + name))
    check(c.read_response().status == 200, "GET /" + name)
    c.close()
# h2c: 2 connections x 5 streams
for k in range(2):
    c = Conn()
    conns += 1
    h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    h.initiate_connection()
    for i in range(5):
        h.send_headers(h.get_next_available_stream_id(),
                       [(":method", "GET"), (":scheme", "http"), (":authority", "x"),
                        (":path", "/hello")], end_stream=True)
    c.send(h.data_to_send())
    ended = 0
    while ended < 5:
        data = c.sock.recv(65536)
        check(data, "h2 connection closed early")
        for ev in h.receive_data(data):
            ended += isinstance(ev, h2.events.StreamEnded)
        c.send(h.data_to_send())
    c.close()
# a WebSocket with 9 messages each way
w = ws_open("/ws")
conns += 1
for i in range(9):
    w.send(ws_frame(1, b"m%d" % i))
    op, payload = ws_read(w)
    check(op == 1 and payload == b"m%d" % i, "ws echo %d" % i)
w.send(ws_frame(8, b"\x03\xe8"))
ws_read(w)
w.close()

# let the workers close what was closed (the last FIN is read at their pace)
deadline = time.monotonic() + bound(5)
while True:
    s = parse(scrape())
    if v(s, "petrel_connections_open") == 0 or time.monotonic() > deadline:
        break
    time.sleep(0.05)

check(requests(s, protocol="HTTP/1.1", method="GET", status="2xx") == 40 + 4,
      "HTTP/1.1 GET 2xx: %r" % requests(s, protocol="HTTP/1.1", method="GET", status="2xx"))
check(requests(s, protocol="HTTP/1.1", method="GET", status="1xx") == 1, "the 101 of the WebSocket")
check(requests(s, protocol="HTTP/1.1", method="GET", status="4xx") == 20, "HTTP/1.1 404s")
check(requests(s, protocol="HTTP/1.1", method="POST", status="2xx") == 7, "POSTs")
check(requests(s, protocol="HTTP/2", method="GET", status="2xx") == 10, "h2 requests")
total = 40 + 4 + 1 + 20 + 7 + 10
check(requests(s) == total, "all requests: %r, want %d" % (requests(s), total))
check(v(s, "petrel_request_duration_seconds_count") == total, "duration _count")
check(v(s, "petrel_request_arena_bytes_count") == total, "arena _count")
check(v(s, "petrel_request_arena_bytes_sum") > 7 * 3000, "arena sum: the POST bodies live there")
# (the test harness's connection that waited for the port is in `base`)
conns += v(base, "petrel_connections_accepted_total")
check(v(s, "petrel_connections_accepted_total") == conns,
      "accepted %r, want %d" % (v(s, "petrel_connections_accepted_total"), conns))
closed = sum(val for (n, ls), val in s.items() if n == "petrel_connections_closed_total")
check(closed == conns, "closed %r, want %d" % (closed, conns))
check(v(s, "petrel_connections_open") == 0, "open %r" % v(s, "petrel_connections_open"))
check(v(s, "petrel_h2_streams_total") == 10, "h2 streams %r" % v(s, "petrel_h2_streams_total"))
check(v(s, "petrel_websocket_connections_total") == 1, "ws connections")
check(v(s, "petrel_websocket_messages_total", direction="in") == 9, "ws messages in")
check(v(s, "petrel_websocket_messages_total", direction="out") == 9, "ws messages out")
check(v(s, "petrel_static_cache_misses_total") >= 2, "static misses %r" % v(s, "petrel_static_cache_misses_total"))
check(v(s, "petrel_static_cache_hits_total") >= 1, "static hits")
check(v(s, "petrel_static_cache_bytes") > 0, "static cache bytes")
check(v(s, "petrel_received_bytes_total") > 7 * 3000, "bytes in")
check(v(s, "petrel_sent_bytes_total") > 7 * 3000, "bytes out")
ok("counts match the traffic, summed over 2 workers: %d requests on %d connections" % (total, conns))

# scrapes are not counted
for i in range(5):
    scrape()
s2 = parse(scrape())
check(requests(s2) == total and v(s2, "petrel_connections_accepted_total") == conns,
      "scrapes were counted: %r requests" % requests(s2))
ok("scrapes of the admin port are not counted")

# a file both workers have cached: each look-up is a hit
for i in range(6):
    c = Conn()
    c.send(request("GET", "/a.txt"))
    check(c.read_response().status == 200, "GET /a.txt")
    c.close()
s3 = parse(scrape())
check(v(s3, "petrel_static_cache_misses_total") - v(s2, "petrel_static_cache_misses_total") <= 1
      and v(s3, "petrel_static_cache_hits_total") - v(s2, "petrel_static_cache_hits_total") >= 5,
      "static cache: %r hits, %r misses for 6 look-ups of a cached file"
      % (v(s3, "petrel_static_cache_hits_total") - v(s2, "petrel_static_cache_hits_total"),
         v(s3, "petrel_static_cache_misses_total") - v(s2, "petrel_static_cache_misses_total")))
ok("the static module's metrics (petrel_metric_counter) count its cache")
total = requests(s3)

# --- never backwards: a reload and a killed worker, scraped all along -----
stop = threading.Event()
seen = []
errors = []
def scraper():
    prev = None
    while not stop.is_set():
        try:
            cur = parse(scrape())
        except SystemExit:
            errors.append("a scrape failed")
            return
        except Exception as e:  # a connection refused while workers change
            errors.append(repr(e))
            continue
        if prev:
            for key, val in prev.items():
                if key[0].endswith(("_total", "_count", "_sum", "_bucket")) and cur.get(key, 0) < val:
                    errors.append("%r went from %r to %r" % (key, val, cur.get(key, 0)))
        prev = cur
        seen.append(cur)
def load():
    while not stop.is_set():
        try:
            c = Conn()
            c.send(request("GET", "/hello") + request("GET", "/hello", [("Connection", "close")]))
            c.read_response(); c.read_response()
            c.close()
        except Exception:
            pass
threads = [threading.Thread(target=scraper), threading.Thread(target=load)]
for t in threads:
    t.start()
time.sleep(0.5)
os.kill(petrel_pid(), signal.SIGHUP)
deadline = time.monotonic() + bound(20)
while "generation 1 serving" not in open(ERR).read():
    check(time.monotonic() < deadline, "the reload did not complete")
    time.sleep(0.05)
time.sleep(0.5)
workers = [int(p) for p in os.popen("pgrep -P %d" % petrel_pid()).read().split()]
check(workers, "no workers")
os.kill(workers[0], signal.SIGKILL)
deadline = time.monotonic() + bound(20)
while "restarting it" not in open(ERR).read():
    check(time.monotonic() < deadline, "the killed worker was not restarted")
    time.sleep(0.05)
time.sleep(1.5)
stop.set()
for t in threads:
    t.join()
check(not [e for e in errors if "went from" in e], "counters went backwards: %s" % errors[:5])
check(len(seen) > 20, "only %d scrapes" % len(seen))
last = parse(scrape())
check(v(last, "petrel_reloads_total", result="ok") == 1, "reloads ok %r" % v(last, "petrel_reloads_total", result="ok"))
check(v(last, "petrel_module_generation") == 1, "generation")
check(v(last, "petrel_worker_restarts_total") == 1, "restarts %r" % v(last, "petrel_worker_restarts_total"))
check(requests(last) >= total, "requests went back: %r < %d" % (requests(last), total))
ok("%d scrapes across a reload and a killed worker: no counter went backwards" % len(seen))

# --- /livez and /readyz ---------------------------------------------------
for path, body in (("/livez", b"ok\n"), ("/readyz", b"ready\n")):
    c = Conn(ADMIN)
    c.send(request("GET", path))
    r = c.read_response()
    check(r.status == 200 and r.body == body, "%s: %r" % (path, r))
    c.close()
ok("/livez and /readyz answer 200")
PYEOF
petrel_stop

# --- the admin listener's limits: --admin-max-connections (per worker),
# and a request body over 1 KiB (413, RFC 9110 §15.5.14) ---------------------
petrel_start --workers 1 --module hello --admin-listen 127.0.0.1:0 --admin-max-connections 2
ADMIN_PORT=$(petrel_admin_port)
export ADMIN_PORT
pyrun <<'PYEOF'
import os, select, socket, time
from petrel_client import Conn, request, check, ok, bound

ADMIN = int(os.environ["ADMIN_PORT"])
held = []
for i in range(2):
    c = Conn(ADMIN)
    c.send(request("GET", "/livez"))
    check(c.read_response().status == 200, "held connection %d" % i)
    held.append(c)
# a third is not served while the two stay open (the kernel queues it)
s = socket.create_connection(("127.0.0.1", ADMIN))
s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
r, _, _ = select.select([s], [], [], 0.5)
check(not r, "a third admin connection was served past --admin-max-connections 2")
held.pop().close()
r, _, _ = select.select([s], [], [], bound(5))
check(r and s.recv(4096).startswith(b"HTTP/1.1 200 "),
      "the third admin connection was not served once one closed")
s.close()
ok("--admin-max-connections 2: a third connection waits until one closes")
for c in held:
    c.close()

c = Conn(ADMIN)
c.send(request("POST", "/livez", body=b"x" * 2048))
r = c.read_response()
check(r.status == 413, "a 2 KiB body to the admin listener: %r" % r)
c.close()
ok("a body over 1 KiB to the admin listener: 413")
PYEOF
petrel_stop
