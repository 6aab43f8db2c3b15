#!/usr/bin/env bash
# Graceful shutdown (petrel(1), SIGNALS): SIGTERM under load answers every
# request it answers completely and exits 0 promptly; a request in flight
# when SIGTERM comes is finished (its body arrives after the signal) while
# idle connections are closed and new ones refused; --drain-timeout bounds
# the wait for a client that never finishes.
. "$(dirname "$0")/lib.sh"

# --- SIGTERM under load -----------------------------------------------------
petrel_start --module hello --module echo --workers 2
pyrun <<'EOF'
import os
import socket
import threading
import time
from petrel_client import *

master = petrel_pid()
lock = threading.Lock()
stats = {"complete": 0, "after_term": 0, "no_response": 0, "reconnects": 0}
errors = []
term_at = None
stop = threading.Event()
BODY = bytes(range(256)) * 120   # 30 KB: responses that take a few writes


def note(key, n=1):
    with lock:
        stats[key] += n
        if term_at is not None and key == "complete":
            stats["after_term"] += n


def expect_ok(r, want_body, what):
    if r.status != 200 or r.body != want_body:
        errors.append("%s: wrong response %r" % (what, r))


def client(kind, idx):
    """kind: 'keepalive' (one request at a time), 'pipeline' (4 per write)
    or 'new' (a connection per request).  Runs until the server is gone."""
    c = None
    i = 0
    while not stop.is_set():
        if c is None:
            try:
                c = Conn(timeout=5)
            except OSError:
                return  # refused: the server is gone (or going)
            note("reconnects")
        batch = 4 if kind == "pipeline" else 1
        wants, data = [], b""
        for k in range(batch):
            i += 1
            if i % 2:
                data += request("GET", "/hello")
                wants.append(b"Hello World!")
            else:
                body = b"%s-%d-%d|" % (kind.encode(), idx, i) + BODY
                data += request("POST", "/echo", [("Content-Type", "application/x-t")], body)
                wants.append(body)
        try:
            c.send(data)
        except OSError:
            note("no_response", batch)
            c.close()
            c = None
            continue
        for k, want in enumerate(wants):
            try:
                r = c.read_response()
            except NoResponse:
                # closed before this response began: allowed during a drain
                note("no_response", batch - k)
                c.close()
                c = None
                break
            except Incomplete as e:
                errors.append("%s client %d: %s" % (kind, idx, e))
                c.close()
                c = None
                break
            except socket.timeout:
                errors.append("%s client %d: no response within 5 s" % (kind, idx))
                c.close()
                c = None
                break
            expect_ok(r, want, "%s client %d request %d" % (kind, idx, i))
            note("complete")
            if r.closes():
                note("no_response", batch - k - 1)
                c.close()
                c = None
                break
        if c is not None and kind == "new":
            c.close()
            c = None


threads = [threading.Thread(target=client, args=(kind, i))
           for i, kind in enumerate(["keepalive"] * 6 + ["pipeline"] * 2 + ["new"] * 2)]
for t in threads:
    t.start()

t0 = time.monotonic()
while stats["complete"] < 2000 and time.monotonic() - t0 < bound(20) and not errors:
    time.sleep(0.01)
check(stats["complete"] >= 200, "only %d responses before SIGTERM" % stats["complete"])
with lock:
    term_at = time.monotonic()
    before = stats["complete"]
os.kill(master, 15)


def master_gone():
    try:
        with open("/proc/%d/stat" % master) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


wait_until(master_gone, 15, "the master to exit after SIGTERM")
exit_secs = time.monotonic() - term_at
stop.set()
for t in threads:
    t.join(bound(10))
check(not any(t.is_alive() for t in threads), "client threads still running")
check(not errors, "%d bad responses under SIGTERM, first ones:\n  %s"
      % (len(errors), "\n  ".join(errors[:5])))
ok("SIGTERM under load (2 workers, 10 clients): %d complete responses, %d of them after "
   "SIGTERM, %d requests unanswered (connection closed first), none partial"
   % (stats["complete"], stats["after_term"], stats["no_response"]))
check(exit_secs < bound(3), "the master took %.2fs to exit after SIGTERM" % exit_secs)
ok("the master exited %.2fs after SIGTERM" % exit_secs)
EOF
petrel_wait_exit "$PETREL_PID" "$(bound 15)"
expect_eq "$PETREL_RC" 0 "exit status after SIGTERM under load"
ok "exit status 0 after SIGTERM under load"
# A graceful shutdown is not an error: nothing at level error in the log.
# (Checked at the end, so that the other drain checks run anyway.)
drain_errors=$(grep '\[error\]' "$PETREL_ERR" | head -n 5 || true)
[[ -n $drain_errors ]] && printf 'not ok - errors logged during the drain under load:\n%s\n' "$drain_errors" ||
    ok "no error logged during the drain under load"

# --- a request in flight finishes after SIGTERM ----------------------------
petrel_start --module hello --module echo
pyrun <<'EOF'
import time
from petrel_client import *

idle = Conn()
idle.send(request("GET", "/hello"))
check(idle.read_response().status == 200, "GET on the idle connection")

slow = Conn()
slow.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
          b"Content-Length: 10\r\n\r\nhello")
wait_server_read(slow)
t0 = time.monotonic()
sigterm()

# Draining: new connections are refused, the idle keep-alive one is closed.
wait_until(refused, 5, "new connections to be refused after SIGTERM")
got, secs = idle.wait_eof(5)
check(got == b"", "the idle connection got %r" % got[:100])
ok("after SIGTERM: new connections refused, the idle keep-alive connection closed")
check(slow.is_open(0.1), "the connection with a request in flight was closed at SIGTERM")

slow.send(b"12345")
r = slow.read_response()
check(r.status == 200 and r.body == b"hello12345",
      "the request in flight: got %r, want 200 hello12345" % r)
check(r.header("content-type") == "text/plain", "Content-Type %r" % r.header("content-type"))
check(r.closes(), "the response during the drain lacks Connection: close (RFC 9112 §9.6)")
got, _ = slow.wait_eof(5)
check(got == b"", "bytes after the drained response: %r" % got[:100])
ok("a POST whose body was half sent at SIGTERM got its complete response (%.2fs after SIGTERM), "
   "with Connection: close, then the close" % (time.monotonic() - t0))
EOF
petrel_wait_exit "$PETREL_PID" "$(bound 5)"
expect_eq "$PETREL_RC" 0 "exit status after draining a request in flight"
ok "exit status 0, ${EXIT_SECS}s after the response"

# --- --drain-timeout 1 with stalled clients --------------------------------
petrel_start --module hello --module echo --drain-timeout 1
pyrun "$LIB_TMP/ready" <<'EOF' &
import os
import sys
import time
from petrel_client import *

head = Conn()
head.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
body = Conn()
body.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf")
for c in (head, body):
    wait_server_read(c)
open(sys.argv[1], "w").close()
t0 = time.monotonic()
for name, c in (("half a head", head), ("half a body", body)):
    got, _ = c.wait_eof(10)
    secs = time.monotonic() - t0
    check(secs < bound(4), "%s: closed %.2fs after it was ready" % (name, secs))
    ok("stalled client with %s closed by the drain (%.2fs)" % (name, secs))
EOF
client=$!
LIB_BG+=("$client")
wait_for "$(bound 10)" test -e "$LIB_TMP/ready"
kill -TERM "$PETREL_PID"
petrel_wait_exit "$PETREL_PID" "$(bound 8)"
expect_eq "$PETREL_RC" 0 "exit status after the drain timeout"
fcmp "$EXIT_SECS >= 0.8 && $EXIT_SECS <= $(bound 3)" ||
    fail "--drain-timeout 1 with stalled clients: exited after ${EXIT_SECS}s, want 1-3s"
ok "--drain-timeout 1 with two stalled clients: exit status 0 after ${EXIT_SECS}s"
wait "$client" || fail "the stalled clients' checks failed"

[[ -z $drain_errors ]] || fail "errors logged during the graceful shutdown under load: $drain_errors"
