#!/usr/bin/env bash
# test_fault_signals.sh -- signals under load (petrel-bench driving HTTP/1.1
# and h2c), beyond test_workers_restart.sh and test_workers_drain.sh (which
# signal a server under light or small-response load):
#  1. kill -9 of one of two workers while petrel-bench runs: the other worker
#     keeps its pid and keeps serving (new connections are answered while the
#     master restarts the dead one), a new worker appears, and the load loses
#     at most the requests that were on the killed worker's connections.
#  2. SIGTERM while petrel-bench runs and large responses are in flight
#     (32 MiB static files, streamed bodies, h2c streams): every request the
#     server had read before the signal gets its complete response, the
#     load sees no truncated or malformed response, and petrel exits 0.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_needs
fault_setup

www=$LIB_TMP/www
head -c $((32 << 20)) /dev/urandom >"$www/big.bin"

# bench_json FILE KEY...: a number from petrel-bench's --json output
bench_json() {
    "$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[k]
print(v)' "$@"
}

# bench_bg NAME H1-CONNECTIONS H2-CONNECTIONS DURATION: two petrel-bench
# loads on $BASE/hello in the background, HTTP/1.1 and h2c (8 streams a
# connection), --json into $LIB_TMP/NAME-h1.json and NAME-h2.json (stderr
# in NAME-h1.err, NAME-h2.err); their pids in b1 and b2
bench_bg() {
    "$BENCH" -c "$2" -d "$4" --json "$BASE/hello" >"$LIB_TMP/$1-h1.json" 2>"$LIB_TMP/$1-h1.err" &
    b1=$!
    LIB_BG+=("$b1")
    "$BENCH" --h2 -c "$3" -m 8 -d "$4" --json "$BASE/hello" >"$LIB_TMP/$1-h2.json" 2>"$LIB_TMP/$1-h2.err" &
    b2=$!
    LIB_BG+=("$b2")
}

# --- 1. kill -9 of a worker under load ------------------------------------------
petrel_start --workers 2 --module hello --module echo
master=$PETREL_PID
wait_for "$(bound 10)" nworkers 2
mapfile -t workers < <(petrel_workers)
victim=${workers[0]} survivor=${workers[1]}
dur=$((4 * LIB_SCALE))
bench_bg kill 32 4 "${dur}s"
# kill once the load is on both workers
on_both() {
    local w n
    for w in "$victim" "$survivor"; do
        n=$(ls -l "/proc/$w/fd" 2>/dev/null | grep -c socket:) || return 1
        [[ $n -ge 2 ]] || return 1
    done
}
wait_for "$(bound 10)" on_both
t_kill=$(now)
kill -KILL "$victim"
VICTIM=$victim SURVIVOR=$survivor pyrun <<'EOF'
import os
import time
from petrel_client import *

survivor = int(os.environ["SURVIVOR"])
t0 = time.monotonic()
for i in range(100):
    try:
        c = Conn(timeout=10)
        c.send(request("POST", "/echo", body=b"during the restart %d" % i))
        r = c.read_response()
    except Exception as e:
        fail("request %d right after kill -9: %r" % (i, e))
    check(r.status == 200 and r.body == b"during the restart %d" % i, "request %d: %r" % (i, r))
    c.close()
check(os.path.exists("/proc/%d" % survivor), "the surviving worker %d died" % survivor)
ok("100 new connections right after kill -9 answered (%.2fs); worker %d still up"
   % (time.monotonic() - t0, survivor))
EOF
new_worker() {
    local w
    w=$(petrel_workers "$master") || return 1
    [[ $(wc -l <<<"$w") -eq 2 ]] && ! grep -qx "$victim" <<<"$w" && grep -qx "$survivor" <<<"$w"
}
wait_for "$(bound 10)" new_worker
ok "the master restarted the killed worker ($(secs_since "$t_kill")s), worker $survivor kept its pid"
wait "$b1" || fail "petrel-bench (HTTP/1.1) failed: $(cat "$LIB_TMP/kill-h1.err")"
wait "$b2" || fail "petrel-bench (h2c) failed: $(cat "$LIB_TMP/kill-h2.err")"
for p in h1 h2; do
    f=$LIB_TMP/kill-$p.json
    reqs=$(bench_json "$f" requests)
    errs=$(bench_json "$f" errors total)
    bad=$(($(bench_json "$f" errors protocol) + $(bench_json "$f" errors non2xx)))
    # a connection on the killed worker loses what it had in flight: at most
    # one request per HTTP/1.1 connection, 8 streams per h2c connection
    max=32
    [[ $bad -eq 0 ]] || fail "$p: $bad malformed or non-2xx responses under kill -9: $(cat "$f")"
    [[ $errs -le $max ]] || fail "$p: $errs failed requests under kill -9, want <= $max: $(cat "$f")"
    [[ $reqs -ge 1000 ]] || fail "$p: only $reqs requests in ${dur}s: $(cat "$f")"
    ok "petrel-bench $p under kill -9: $reqs requests, $errs lost with the killed worker (<= $max)"
done
grep -q "killed by signal 9" "$PETREL_ERR" || fail "no 'killed by signal 9' in the log"
petrel_stop "$master"
ok "SIGTERM after the restart: exit status 0, no worker left"

# --- 2. SIGTERM with large responses in flight ------------------------------------
petrel_start --workers 2 --module hello --module echo --root "$www" \
    --dev --module "$LIB_TMP/stream.c" --drain-timeout "$((20 * LIB_SCALE))"
dur=$((30 * LIB_SCALE)) # cut short by the SIGTERM
bench_bg term 16 2 "${dur}s"
WWW=$www pyrun <<'EOF'
import os
import socket
import threading
import time
from petrel_client import *
from petrel_fault import *

BIG = open(os.path.join(os.environ["WWW"], "big.bin"), "rb").read()
master = petrel_pid()
errors = []
done = []
started = threading.Barrier(13)


def h1(path, want_len, want=None):
    """HTTP/1.0: the body ends at the close (a streamed one is not chunked),
    read into one buffer (the clients must keep up with the server)."""
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=bound(30))
        s.sendall(b"GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
        buf = bytearray()
        chunk = bytearray(1 << 20)
        waited = False
        while True:
            if not waited and len(buf) >= 65536:
                started.wait()  # the server is answering: now SIGTERM
                waited = True
            n = s.recv_into(chunk)
            if n == 0:
                break
            buf += chunk[:n]
        s.close()
        end = buf.find(b"\r\n\r\n")
        status = int(buf[9:12]) if end > 0 else 0
        body = bytes(buf[end + 4:])
        if not waited:
            errors.append("%s: the response ended before SIGTERM" % path)
        elif status != 200 or len(body) != want_len or (want is not None and body != want):
            errors.append("%s: status %d, %d bytes, want %d" % (path, status, len(body), want_len))
        else:
            done.append(path)
    except Exception as e:
        errors.append("%s: %r" % (path, e))


def h2(path, nstreams, want_len):
    """Windows opened wide first; then frames are counted by hand (python-h2
    refuses frames that follow a GOAWAY, which RFC 9113 §6.8 allows)."""
    try:
        c, h = h2_open(window=(1 << 31) - 1)
        h.increment_flow_control_window((1 << 31) - 1 - 65535)
        c.send(h.data_to_send())
        sids = [h2_get(c, h, path) for _ in range(nstreams)]
        got = {sid: 0 for sid in sids}
        ended = set()
        goaway = False
        waited = False
        buf = bytearray(c._take(len(c.buf)))
        while len(ended) < nstreams:
            if not waited and sum(got.values()) >= 65536:
                started.wait()
                waited = True
            d = c.sock.recv(1 << 20)
            if not d:
                raise Exception("h2 %s: connection closed, got %r" % (path, got))
            buf += d
            while len(buf) >= 9:
                n = int.from_bytes(buf[0:3], "big")
                if len(buf) < 9 + n:
                    break
                t, fl, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                if t == 0:  # DATA
                    got[sid] += n - ((1 + buf[9]) if fl & 0x8 else 0)
                    if fl & 0x1:
                        ended.add(sid)
                elif t == 1 and fl & 0x1:  # HEADERS with END_STREAM
                    ended.add(sid)
                elif t == 3:
                    raise Exception("h2 %s: stream %d reset" % (path, sid))
                elif t == 7:
                    goaway = True
                del buf[:9 + n]
        # the GOAWAY may follow the last DATA frame (a slow server, under
        # valgrind, takes SIGTERM after it queued every response): read on
        # until the server closes the connection, which it does after it
        while not goaway:
            d = c.sock.recv(1 << 20)
            if not d:
                break
            buf += d
            while len(buf) >= 9:
                n = int.from_bytes(buf[0:3], "big")
                if len(buf) < 9 + n:
                    break
                goaway = goaway or buf[3] == 7
                del buf[:9 + n]
        bad = {sid: n for sid, n in got.items() if n != want_len}
        if not waited:
            errors.append("h2 %s: the responses ended before SIGTERM" % path)
        elif bad:
            errors.append("h2 %s: bodies %r, want %d" % (path, bad, want_len))
        elif not goaway:
            errors.append("h2 %s: no GOAWAY after SIGTERM (RFC 9113 §6.8)" % path)
        else:
            done.append("h2 " + path)
    except Exception as e:
        errors.append("%r" % e)


threads = []
for i in range(4):
    threads.append(threading.Thread(target=h1, args=("/big.bin", len(BIG), BIG)))
    threads.append(threading.Thread(target=h1, args=("/stream?kb=16384", 16 << 20)))
for i in range(2):
    threads.append(threading.Thread(target=h2, args=("/big.bin", 3, len(BIG))))
    threads.append(threading.Thread(target=h2, args=("/stream?kb=8192", 3, 8 << 20)))
for t in threads:
    t.start()
started.wait()  # every response has begun
t0 = time.monotonic()
sigterm()
for t in threads:
    t.join(bound(60))
check(not any(t.is_alive() for t in threads), "clients still waiting 60 s after SIGTERM")
check(not errors, "responses in flight at SIGTERM: %s" % "\n  ".join(errors))
ok("SIGTERM with %d large responses in flight (HTTP/1.1 and h2c, static and streamed): all "
   "complete, %.2fs after the signal" % (len(done), time.monotonic() - t0))
EOF
petrel_wait_exit "$PETREL_PID" "$(bound 30)"
expect_eq "$PETREL_RC" 0 "exit status after SIGTERM under load"
ok "petrel exited with status 0 after the drain"
# the server is gone: stop the load (SIGINT: petrel-bench prints its results)
kill -INT "$b1" "$b2" 2>/dev/null || true
wait "$b1" || true # refused connections after the exit are errors for petrel-bench
wait "$b2" || true
for p in h1 h2; do
    f=$LIB_TMP/term-$p.json
    [[ -s $f ]] || fail "no JSON from petrel-bench $p: $(cat "$LIB_TMP/term-$p.err")"
    reqs=$(bench_json "$f" requests)
    bad=$(($(bench_json "$f" errors protocol) + $(bench_json "$f" errors non2xx) + $(bench_json "$f" errors timeout)))
    [[ $bad -eq 0 ]] || fail "petrel-bench $p: $bad malformed, non-2xx or timed-out responses around SIGTERM: $(cat "$f")"
    ok "petrel-bench $p around SIGTERM: $reqs requests, no malformed response and no timeout ($(bench_json "$f" errors total) errors: connections refused or closed by the drain)"
done
fault_sanitizer_check
ok "no sanitizer report"
