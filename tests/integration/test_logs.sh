#!/usr/bin/env bash
# Logs for operations:
#   - --access-log-format json: one JSON object per line (RFC 8259, parsed by
#     Python's json), with the fields a log pipeline wants, typed; quotes,
#     backslashes, control bytes and bytes that are not UTF-8 from the client
#     escaped or replaced, never breaking a line; request ids unique;
#   - every error-log line about a request carries its id -- a handler's
#     petrel_log(), a handler's failure, petrel_req_log() from a timer -- and
#     it is the JSON log's request_id of that request;
#   - SIGUSR1 opens the access and error logs again (--error-log), in the
#     master and in each of the workers: after the files are moved, every
#     worker writes to the new ones and nothing after the signal goes to the
#     old ones;
#   - examples/logrotate/petrel, run by the real logrotate (Debian's), with
#     --pid-file: rotated files, the server writing on into new ones.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc) for the test module"

T=$LIB_TMP
mkdir -p "$T/logs"
cat >"$T/logmod.c" <<'EOF'
#include <petrel.h>

/* GET /log: a handler that logs; GET /fail: a handler that fails;
 * GET /later: a streamed answer ended from a timer, which logs about it. */
static int log_here(petrel_req_t *req, void *data)
{
    (void)data;
    petrel_log(PETREL_LOG_WARN, "a line from the handler of %s", req->path.ptr);
    return petrel_send_text(req, 200, "text/plain", "logged\n");
}

static int fail_here(petrel_req_t *req, void *data)
{
    (void)req, (void)data;
    return PETREL_EIO;
}

static void later(void *data)
{
    petrel_req_t *req = data;
    petrel_req_log(req, PETREL_LOG_WARN, "a line from a timer");
    petrel_stream_write(req, "late\n", 5);
    petrel_stream_end(req);
}

static int later_here(petrel_req_t *req, void *data)
{
    (void)data;
    if (petrel_stream_begin(req, 200, "text/plain") < 0 || !petrel_timer_start(10, later, req))
        return 500;
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/log", log_here, NULL},
    {PETREL_GET, "/fail", fail_here, NULL},
    {PETREL_GET, "/later", later_here, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(logmod, routes, NULL, NULL, NULL)
EOF

ALOG=$T/logs/access.log
ELOG=$T/logs/error.log
PIDF=$T/petrel.pid
# --error-log: the log lines go to the file, not to standard error (where
# petrel_start looks for the port): started here
PORT=$(free_port)
BASE=http://127.0.0.1:$PORT
lib_vg_run
"${LIB_VG_RUN[@]}" --listen "127.0.0.1:$PORT" --workers 2 --dev --module "$T/logmod.c" \
    --module hello --access-log "$ALOG" --access-log-format json --error-log "$ELOG" \
    --pid-file "$PIDF" >"$T/petrel.logs.out" 2>"$T/petrel.logs.err" </dev/null &
PETREL_PID=$!
LIB_PIDS+=("$PETREL_PID")
export PORT BASE PETREL_PID ALOG ELOG
wait_port "$PORT"
until [[ $(petrel_workers | wc -l) -eq 2 ]]; do sleep 0.02; done
[[ $(cat "$PIDF") == "$PETREL_PID" ]] || fail "--pid-file holds '$(cat "$PIDF")', not $PETREL_PID"
grep -q 'listening on 127.0.0.1:' "$ELOG" || fail "the error log is not in --error-log: $(cat "$ELOG")"
[[ ! -s $T/petrel.logs.err ]] || fail "standard error is not empty: $(cat "$T/petrel.logs.err")"

pyrun <<'PYEOF'
import json, os, re, time
from petrel_client import Conn, request, check, ok, fail

ALOG, ELOG = os.environ["ALOG"], os.environ["ELOG"]

def get(target, headers=None):
    c = Conn()
    c.send(request("GET", target, headers))
    r = c.read_response()
    c.close()
    return r

evil_ua = b'a"b\\c\td \xc3\xa9 \xff\xfe \xe2\x82'   # quote, backslash, tab, UTF-8, not UTF-8
c = Conn()
c.send(b"GET /hello?q=%22x%22 HTTP/1.1\r\nHost: x\r\nUser-Agent: " + evil_ua +
       b"\r\nReferer: http://example.com/\r\n\r\n")
check(c.read_response().status == 200, "the request with an odd user agent")
c.close()
c = Conn()   # a control byte in the target: 400, and its line is JSON still
c.send(b"GET /x\x01\"y HTTP/1.1\r\nHost: x\r\n\r\n")
check(c.read_response().status == 400, "a control byte in the target")
c.close()
for t in ("/log", "/fail", "/later", "/hello"):
    get(t)
time.sleep(1.3)   # written within a second
lines = open(ALOG, "rb").read().splitlines()
recs = []
for l in lines:
    try:
        recs.append(json.loads(l.decode("utf-8")))
    except Exception as e:
        fail("not a JSON line (%s): %r" % (e, l))
fields = {"time": str, "client": str, "method": str, "target": str, "protocol": str,
          "status": int, "bytes": int, "duration_us": int, "arena_bytes": int,
          "request_id": str, "user_agent": (str, type(None)), "referer": (str, type(None))}
for r in recs:
    for k, t in fields.items():
        check(k in r and isinstance(r[k], t), "field %s of %r" % (k, r))
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"]), "time %r" % r["time"])
odd = [r for r in recs if r["target"].startswith("/hello?q=")][0]
check(odd["user_agent"] == 'a"b\\c\td \u00e9 \ufffd\ufffd \ufffd\ufffd',
      "user agent: %r" % odd["user_agent"])
bad = [r for r in recs if r["status"] == 400]
check(len(bad) == 1 and bad[0]["target"] == '/x\x01"y', "the 400's line: %r" % bad)
check(odd["referer"] == "http://example.com/" and odd["protocol"] == "HTTP/1.1", "%r" % odd)
check(odd["client"] == "127.0.0.1" and odd["status"] == 200 and odd["bytes"] == 12, "%r" % odd)
ids = [r["request_id"] for r in recs]
check(len(set(ids)) == len(ids), "request ids repeat: %r" % ids)
ok("JSON access log: %d lines, typed fields, escaped, unique request ids" % len(recs))

by_target = {r["target"]: r for r in recs}
elog = open(ELOG).read()
def line_with(text):
    m = [l for l in elog.splitlines() if text in l]
    check(m, "no error-log line with %r in:\n%s" % (text, elog))
    return m[0]
for target, text in (("/log", "a line from the handler of /log"),
                     ("/fail", "handler failed"),
                     ("/later", "a line from a timer")):
    rid = by_target[target]["request_id"]
    l = line_with(text)
    check(("request %s" % rid) in l, "%s: %r does not carry request_id %s" % (target, l, rid))
check(by_target["/fail"]["status"] == 500, "the failing handler's status")
ok("error-log lines about a request carry its request_id (handler, failure, timer)")
PYEOF

# --- SIGUSR1 in every worker ---------------------------------------------
workers=$(petrel_workers)
mv "$ALOG" "$ALOG.1"
mv "$ELOG" "$ELOG.1"
kill -USR1 "$PETREL_PID"
t0=$(now)
until [[ -e $ALOG && -e $ELOG ]]; do
    fcmp "$(secs_since "$t0") < $(bound 5)" || fail "SIGUSR1: the logs were not opened again"
    sleep 0.02
done
sleep 0.3 # every worker has read its signal
before=$(wc -l <"$ALOG.1")
pyrun <<'PYEOF'
from petrel_client import Conn, request, check
for i in range(60):       # new connections: both workers get some
    c = Conn()
    c.send(request("GET", "/hello?after"))
    check(c.read_response().status == 200, "after SIGUSR1")
    c.close()
PYEOF
grep -q 'SIGUSR1: log files opened again' "$ELOG" || fail "the master does not write the new error log"
# (the workers write their access log out within a second)
all_after() { [[ $(grep -c '/hello?after' "$ALOG") -eq 60 ]]; }
wait_for "$(bound 5)" all_after
[[ $(wc -l <"$ALOG.1") -eq $before ]] || fail "lines went to the moved access log after SIGUSR1"
after=$(grep -c '/hello?after' "$ALOG" || true)
[[ $after -eq 60 ]] || fail "$after of 60 lines in the new access log"
# each worker (its request ids: worker number * 10^12 + n) wrote there
nw=$(grep -o '"request_id":"[0-9]*"' "$ALOG" | sed 's/.*"\([0-9]*\)"$/\1/' |
    awk '{ print int($1 / 1000000000000) }' | sort -u | wc -l)
[[ $nw -eq 2 ]] || fail "$nw worker(s) wrote the new access log, want 2 ($workers)"
ok "SIGUSR1: the master and both workers write the new files; nothing more went to the old ones"

# --- the logrotate snippet, run by logrotate -------------------------------
LR=$(sbin_cmd logrotate)
if [[ -n $LR ]]; then
    sed -e "s|/var/log/petrel|$T/logs|g" -e "s|/run/petrel/petrel.pid|$PIDF|g" \
        "$top_srcdir/examples/logrotate/petrel" >"$T/logrotate.conf"
    chmod 644 "$T/logrotate.conf"
    rm -f "$ALOG.1" "$ELOG.1"
    "$LR" -f -s "$T/logrotate.state" "$T/logrotate.conf" >"$T/logrotate.out" 2>&1 ||
        fail "logrotate failed: $(cat "$T/logrotate.out")"
    [[ -s $ALOG.1 ]] || fail "logrotate did not rotate the access log: $(ls "$T/logs")"
    t0=$(now)
    until [[ -e $ALOG ]]; do
        fcmp "$(secs_since "$t0") < $(bound 5)" || fail "no new access log after logrotate"
        sleep 0.02
    done
    sleep 0.3
    curl_ -o /dev/null "$BASE/hello?rotated"
    wait_for "$(bound 5)" grep -q 'hello?rotated' "$ALOG"
    grep -q 'hello?rotated' "$ALOG" || fail "no line in the new access log after logrotate"
    ! grep -q 'hello?rotated' "$ALOG.1" || fail "a line went to the rotated file"
    ok "examples/logrotate/petrel with logrotate: rotated, petrel writes on into new files"
fi
petrel_stop
[[ ! -e $PIDF ]] || fail "--pid-file was not removed at exit"
[[ -n $LR ]] || skip "no logrotate (apt-get install logrotate): examples/logrotate/petrel not run (the rest passed)"
