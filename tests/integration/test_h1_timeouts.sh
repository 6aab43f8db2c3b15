#!/usr/bin/env bash
# Timeouts: --header-timeout bounds the whole request head (a stalled client
# and a client trickling a byte every 0.3 s are both cut off after about a
# second), a stalled body is cut off by --body-timeout (here 1 s too), other
# clients are served all the while, and --keepalive-timeout closes idle
# keep-alive connections.
. "$(dirname "$0")/lib.sh"

petrel_start --module hello --module echo --header-timeout 1 --keepalive-timeout 1 --body-timeout 1

pyrun <<'EOF'
import select
import socket
import threading
import time
from petrel_client import *

LO, HI = 0.8, bound(3.0)   # "closed after ~1 s": not early, not much later
results = {}


def stalled(name, data):
    """Send data, then nothing; time until the server closes."""
    c = Conn()
    t0 = time.monotonic()
    if data:
        c.send(data)
    got, _ = c.wait_eof(8)
    results[name] = (time.monotonic() - t0, got)
    c.close()


def trickle():
    """A request head one byte every 0.3 s, never ending."""
    c = Conn()
    data = b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    t0 = time.monotonic()
    got, sent = b"", 0
    while time.monotonic() - t0 < bound(8):
        try:
            c.sock.send(data[sent:sent + 1])
            sent += 1
        except OSError:
            break
        r, _, _ = select.select([c.sock], [], [], 0.3)
        if r:
            try:
                d = c.sock.recv(65536)
            except OSError:
                break
            if not d:
                break
            got += d
    results["trickle"] = (time.monotonic() - t0, got, sent)
    c.close()


threads = [
    threading.Thread(target=stalled, args=("half head", b"GET /hello HTTP/1.1\r\nHost: x\r\n")),
    threading.Thread(target=stalled, args=("nothing", b"")),
    threading.Thread(target=stalled, args=("half body",
                     b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")),
    threading.Thread(target=trickle),
]
for t in threads:
    t.start()

# Meanwhile other clients are served, promptly: new connections, and a
# keep-alive connection used every 0.2 s (activity keeps it open past the
# 1 s keep-alive timeout).
ka = Conn()
t0 = time.monotonic()
n = 0
while any(t.is_alive() for t in threads):
    t1 = time.monotonic()
    check_hello(what="a new connection while others stall")
    ka.send(request("GET", "/hello"))
    r = ka.read_response()
    last_response = time.monotonic()
    check(r.status == 200 and r.body == b"Hello World!", "keep-alive request %d: %r" % (n, r))
    dt = time.monotonic() - t1
    check(dt < bound(0.5), "two requests took %.2fs while other clients stalled" % dt)
    n += 1
    time.sleep(0.2)
    check(time.monotonic() - t0 < bound(15), "the stalled clients were not cut off")
for t in threads:
    t.join()
ok("%d requests on new connections and on a busy keep-alive connection (%.1fs), "
   "all served in under 0.5s while other clients stalled" % (2 * n, time.monotonic() - t0))

# RFC 9110 §15.5.9: 408 for a request head that did not arrive in time.
secs, got = results["half head"]
check(LO <= secs <= HI, "half a request head: closed after %.2fs, want %.1f-%.1fs" % (secs, LO, HI))
check(got.startswith(b"HTTP/1.1 408 "), "half a request head: got %r, want a 408" % got[:100])
ok("half a request head, then nothing: 408 and closed after %.2fs" % secs)

# A listener with TCP_DEFER_ACCEPT hands a silent connection to petrel only
# after a second or so, when the header timeout starts: allow for that.
secs, got = results["nothing"]
check(LO <= secs <= HI + 1.5, "a silent connection: closed after %.2fs, want %.1f-%.1fs"
      % (secs, LO, HI + 1.5))
check(got == b"" or got.startswith(b"HTTP/1.1 408 "), "a silent connection: got %r" % got[:100])
ok("a connection that sends nothing: closed after %.2fs" % secs)

secs, got, sent = results["trickle"]
check(LO <= secs <= HI, "a head trickled a byte per 0.3 s: cut off after %.2fs (%d bytes sent), "
      "want %.1f-%.1fs: the timeout must bound the whole head" % (secs, sent, LO, HI))
check(got == b"" or got.startswith(b"HTTP/1.1 408 "), "trickling client: got %r" % got[:100])
ok("a head trickled a byte every 0.3 s: cut off after %.2fs (%d bytes)" % (secs, sent))

secs, got = results["half body"]
check(LO <= secs <= HI, "half a body, then nothing: closed after %.2fs, want %.1f-%.1fs" % (secs, LO, HI))
check(got == b"" or got.startswith(b"HTTP/1.1 408 "), "half a body: got %r" % got[:100])
ok("half a body, then nothing: closed after %.2fs" % secs)

# --keepalive-timeout 1: the idle keep-alive connection is closed, without
# a response (RFC 9112 §9.5 lets a server close an idle connection).
got, _ = ka.wait_eof(8)
secs = time.monotonic() - last_response
check(LO <= secs <= HI, "idle keep-alive connection closed after %.2fs, want %.1f-%.1fs" % (secs, LO, HI))
check(got == b"", "idle keep-alive connection: got %r" % got[:100])
ok("an idle keep-alive connection is closed after %.2fs" % secs)

# An idle HTTP/1.0 keep-alive connection too, and one that had pipelined
# requests.
c = Conn()
c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 3)
for i in range(3):
    check(c.read_response().status == 200, "HTTP/1.0 keep-alive request %d" % i)
last_response = time.monotonic()
got, _ = c.wait_eof(8)
secs = time.monotonic() - last_response
check(LO <= secs <= HI and got == b"", "idle HTTP/1.0 keep-alive connection: closed after %.2fs, got %r"
      % (secs, got))
ok("an idle HTTP/1.0 keep-alive connection after 3 pipelined requests is closed after %.2fs" % secs)
EOF

petrel_stop
ok "SIGTERM: exit status 0"
