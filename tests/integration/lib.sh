# lib.sh -- helpers for the integration tests (sourced by tests/integration/test_*.sh).
#
# A test is a bash script that sources this file, starts the real petrel
# binary with petrel_start (127.0.0.1, a port of the kernel's choice, no
# fixed sleeps: it waits until the port accepts), talks to it with real
# clients (curl, wrk, raw sockets through Python) and stops it with
# petrel_stop, which checks that SIGTERM ends it with status 0 (a test that
# would pass with a petrel still running fails).  Everything it starts is
# killed and its temporary directory removed when it exits, however it exits.
# Background helpers a test starts itself go in LIB_BG to be killed too.
#
# Exit status of a test: 0 pass, 77 skip, anything else fail.
#
# The environment (set by `make check`, see Makefile.am, or by run.sh):
#   PETREL             the petrel binary (default: $top_builddir/src/petrel,
#                      else ../../build/src/petrel from this directory)
#   PETREL_SANITIZERS  yes under ASan/UBSan: time bounds are multiplied by 3
#   PETREL_PYTHON      the Python 3 to use (default /usr/bin/python3)
#   KEEP_TMP=1         keep the temporary directory (its path is printed)
#
# Functions (all bounded in time; a failed check ends the test with status 1):
#   petrel_start [OPTION]...   start petrel; sets PETREL_PID PORT PETREL_HOST BASE
#                              (http://HOST:PORT) PETREL_ERR PETREL_OUT
#   petrel_stop [PID [SECS]]   SIGTERM, wait, require exit status 0 and no worker left
#   petrel_wait_exit PID SECS  wait for an exit already under way; sets PETREL_RC, EXIT_SECS
#   petrel_workers [PID]       the worker pids of a master, one a line
#   wait_port PORT [HOST]      wait until HOST (127.0.0.1):PORT accepts connections
#   wait_for SECS CMD...       poll CMD until it succeeds (20 ms steps), or fail
#   pyrun [ARG]...             run Python from stdin with the petrel_client module
#   curl_ ARG...               curl without config files or proxies, bounded
#   fail MSG / skip MSG / ok MSG
#   expect_eq GOT WANT WHAT, expect_match STRING ERE WHAT, expect_no_match STRING ERE WHAT
#   header_value FILE NAME, status_of FILE   (from a `curl -D FILE` head)
#   now, secs_since T0, fcmp 'EXPR' (awk float comparison)
#   bound SECS                 SECS times the sanitizer factor

set -eEuo pipefail
shopt -s inherit_errexit
shopt -s nullglob

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${top_srcdir:=$(cd "$LIB_DIR/../.." && pwd)}"
if [[ -z ${PETREL:-} ]]; then
    if [[ -n ${top_builddir:-} ]]; then
        PETREL=$top_builddir/src/petrel
    else
        PETREL=$LIB_DIR/../../build/src/petrel
    fi
fi
[[ $PETREL == /* ]] || PETREL=$PWD/$PETREL
: "${PETREL_SANITIZERS:=no}"
if [[ -z ${PETREL_PYTHON:-} ]]; then
    if [[ -x /usr/bin/python3 ]]; then PETREL_PYTHON=/usr/bin/python3; else PETREL_PYTHON=python3; fi
fi
PY=$PETREL_PYTHON
export PETREL PETREL_SANITIZERS PETREL_PYTHON top_srcdir

LIB_SCALE=1
[[ $PETREL_SANITIZERS == yes ]] && LIB_SCALE=3
export LIB_SCALE

# Only loopback, never through a proxy.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
export PYTHONDONTWRITEBYTECODE=1

LIB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/petrel-it.XXXXXX")
LIB_PIDS=()    # petrel masters started here
LIB_BG=()      # other background processes to kill at exit
LIB_NSTART=0
PETREL_PID=
PORT=
BASE=

# ---------------------------------------------------------------------------
# Reporting

ok() { printf 'ok - %s\n' "$*"; }

fail() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

skip() {
    printf 'skip: %s\n' "$*"
    exit 77
}

lib_on_err() {
    local i where=
    for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
        where+=" ${BASH_SOURCE[i]##*/}:${BASH_LINENO[i - 1]}"
    done
    printf 'error: command failed with status %s: %s (at%s)\n' "$1" "$2" "$where" >&2
}

# The pids of every process below $1 (children first, then theirs).
lib_descendants() {
    local p
    for p in $(pgrep -P "$1" 2>/dev/null || true); do
        echo "$p"
        lib_descendants "$p"
    done
}

lib_cleanup() {
    local rc=$? pid p f kids
    trap - ERR
    set +e
    for pid in "${LIB_BG[@]}" "${LIB_PIDS[@]}"; do
        if lib_alive "$pid"; then
            # the master first, so that it cannot restart the workers
            kids=$(lib_descendants "$pid")
            kill -KILL "$pid" 2>/dev/null
            for p in $kids; do kill -KILL "$p" 2>/dev/null; done
            # a test that passes has stopped its petrels (and seen them exit 0)
            if [[ $rc -eq 0 && " ${LIB_PIDS[*]} " == *" $pid "* ]]; then
                printf 'error: petrel (pid %s) was still running at the end of the test\n' "$pid" >&2
                rc=1
            fi
        fi
        wait "$pid" 2>/dev/null
    done
    if [[ $rc -ne 0 && $rc -ne 77 ]]; then
        for f in "$LIB_TMP"/petrel.*.err; do
            printf -- '--- %s (last 40 lines) ---\n' "${f##*/}" >&2
            tail -n 40 "$f" >&2
        done
    fi
    if [[ ${KEEP_TMP:-0} == 1 ]]; then
        printf 'kept %s\n' "$LIB_TMP" >&2
    else
        rm -rf "$LIB_TMP"
    fi
    exit "$rc"
}

trap lib_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'lib_on_err "$?" "$BASH_COMMAND"' ERR

# ---------------------------------------------------------------------------
# Time

now() { printf '%s\n' "$EPOCHREALTIME"; }
secs_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }'; }
fcmp() { awk "BEGIN { exit !($1) }"; }
bound() { awk -v a="$1" -v s="$LIB_SCALE" 'BEGIN { print a * s }'; }

# wait_for SECS CMD...: run CMD every 20 ms until it succeeds; fail after SECS.
wait_for() {
    local secs=$1 t0=$EPOCHREALTIME
    shift
    until "$@"; do
        fcmp "$(secs_since "$t0") < $secs" || fail "timed out after ${secs}s waiting for: $*"
        sleep 0.02
    done
}

# ---------------------------------------------------------------------------
# Checks

expect_eq() {
    [[ $1 == "$2" ]] || fail "$3: got '$1', want '$2'"
}

expect_match() {
    [[ $1 =~ $2 ]] || fail "$3: '$1' does not match /$2/"
}

expect_no_match() {
    [[ ! $1 =~ $2 ]] || fail "$3: '$1' matches /$2/"
}

# header_value FILE NAME: the value of the first field NAME (any case) of the
# last response head in FILE (curl -D output), without CR; fails if none.
header_value() {
    awk -v n="$2" 'BEGIN { n = tolower(n) }
        /^HTTP\// { v = ""; found = 0 }
        { sub(/\r$/, "") }
        !found && index($0, ":") && tolower(substr($0, 1, index($0, ":") - 1)) == n {
            v = substr($0, index($0, ":") + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v); found = 1 }
        END { if (!found) exit 1; print v }' "$1" || fail "no $2 header in $(tr -d '\r' <"$1")"
}

# status_of FILE: the status code of the last response head in FILE.
status_of() {
    awk '/^HTTP\// { s = $2 } END { print s }' "$1"
}

# ---------------------------------------------------------------------------
# Processes

# lib_alive PID: the process exists and is not a zombie.
lib_alive() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [[ ${s%% *} != Z ]]
}

petrel_workers() {
    pgrep -P "${1:-$PETREL_PID}" 2>/dev/null || true
}

# can_connect PORT [HOST]: a TCP connection to HOST (default 127.0.0.1)
# port PORT is accepted (and closed).
can_connect() {
    (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null
}

# wait_port PORT [HOST]: wait until HOST:PORT accepts connections.
wait_port() {
    wait_for "$(bound 10)" can_connect "$1" "${2:-127.0.0.1}"
}

# free_port: a port nobody listens on right now (for the rare test that must
# name it; petrel_start lets the kernel choose).
free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# lib_log_addr: "HOST PORT" of the first "listening on HOST:PORT" log line.
lib_log_addr() {
    sed -n 's/.* listening on \[*\([^]]*\)\]*:\([0-9][0-9]*\) with .*/\1 \2/p' "$PETREL_ERR" | head -n 1
}

# petrel_start [OPTION]...: start petrel in the background with these options
# plus --listen 127.0.0.1:0 (unless a --listen is given), and wait until it
# accepts connections.  The kernel's choice of port is read from the log
# line "listening on ADDR:PORT"; with --log-level error or warn (no such
# line) a free port is chosen beforehand instead.
petrel_start() {
    local listen=yes quiet=no prev='' a port='' host=127.0.0.1 addr t0
    for a in "$@"; do
        case $a in
        --listen | --listen=*) listen=no ;;
        --log-level=error | --log-level=warn) quiet=yes ;;
        error | warn) [[ $prev == --log-level ]] && quiet=yes ;;
        esac
        prev=$a
    done
    local args=("$@")
    if [[ $listen == yes ]]; then
        if [[ $quiet == yes ]]; then
            port=$(free_port)
            args=(--listen "127.0.0.1:$port" "${args[@]}")
        else
            args=(--listen 127.0.0.1:0 "${args[@]}")
        fi
    fi
    LIB_NSTART=$((LIB_NSTART + 1))
    PETREL_ERR=$LIB_TMP/petrel.$LIB_NSTART.err
    PETREL_OUT=$LIB_TMP/petrel.$LIB_NSTART.out
    [[ -x $PETREL ]] || fail "no petrel binary at $PETREL (build it, or set PETREL)"
    "$PETREL" "${args[@]}" >"$PETREL_OUT" 2>"$PETREL_ERR" </dev/null &
    PETREL_PID=$!
    LIB_PIDS+=("$PETREL_PID")
    t0=$EPOCHREALTIME
    if [[ -z $port ]]; then
        until addr=$(lib_log_addr) && [[ -n $addr ]]; do
            lib_alive "$PETREL_PID" || {
                cat "$PETREL_ERR" >&2
                fail "petrel $* exited at start-up"
            }
            fcmp "$(secs_since "$t0") < $(bound 10)" ||
                fail "petrel $* did not log 'listening on' within $(bound 10)s"
            sleep 0.02
        done
        host=${addr% *}
        port=${addr#* }
    fi
    PORT=$port
    PETREL_HOST=$host
    if [[ $host == *:* ]]; then BASE=http://[$host]:$PORT; else BASE=http://$host:$PORT; fi
    export PORT BASE PETREL_PID PETREL_HOST
    wait_port "$PORT" "$host"
    lib_alive "$PETREL_PID" || fail "petrel $* exited at start-up"
}

# petrel_wait_exit PID SECS: wait for PID (a petrel started here) to exit;
# sets PETREL_RC and EXIT_SECS (seconds waited).  Fails after SECS.
petrel_wait_exit() {
    local pid=$1 secs=$2 t0=$EPOCHREALTIME
    while lib_alive "$pid"; do
        fcmp "$(secs_since "$t0") < $secs" || fail "petrel (pid $pid) still running after ${secs}s"
        sleep 0.02
    done
    EXIT_SECS=$(secs_since "$t0")
    PETREL_RC=0
    wait "$pid" || PETREL_RC=$?
}

# petrel_stop [PID [SECS]]: SIGTERM petrel, require that it exits with status
# 0 within SECS (default: 15, the default drain timeout and some) and that
# its workers are gone with it.
petrel_stop() {
    local pid=${1:-$PETREL_PID} secs=${2:-$(bound 15)} w workers
    workers=$(petrel_workers "$pid")
    lib_alive "$pid" || fail "petrel (pid $pid) is not running any more"
    kill -TERM "$pid"
    petrel_wait_exit "$pid" "$secs"
    [[ $PETREL_RC -eq 0 ]] || fail "petrel exited with status $PETREL_RC after SIGTERM, want 0"
    for w in $workers; do
        ! lib_alive "$w" || fail "worker $w of petrel $pid outlived it"
    done
}

# curl_ ARG...: curl, ignoring ~/.curlrc and proxies, silent but showing
# errors, bounded in time.
curl_() {
    curl -q -sS --noproxy '*' --max-time "$(bound 20)" "$@"
}

# ---------------------------------------------------------------------------
# Python: pyrun runs a script from stdin (pyrun <<'EOF' ... EOF) with the
# module petrel_client importable and PORT/PETREL_PID in its environment.

mkdir -p "$LIB_TMP/py"
cat >"$LIB_TMP/py/petrel_client.py" <<'PYEOF'
"""Raw-socket HTTP/1.1 client helpers for petrel's integration tests."""
import os
import signal
import socket
import sys
import time

SCALE = float(os.environ.get("LIB_SCALE", "1"))
PORT = int(os.environ["PORT"]) if os.environ.get("PORT") else None


def ok(msg):
    print("ok - " + msg, flush=True)


def fail(msg):
    sys.stderr.write("error: " + msg + "\n")
    sys.stderr.flush()
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def bound(secs):
    return secs * SCALE


class NoResponse(Exception):
    """The connection ended before any byte of a response."""


class Incomplete(Exception):
    """The connection ended in the middle of a response."""

    def __init__(self, partial):
        super().__init__("connection closed mid-response after %d bytes: %r"
                         % (len(partial), partial[:200]))
        self.partial = partial


class Response:
    def __init__(self, version, status, reason, headers, body, raw):
        self.version, self.status, self.reason = version, status, reason
        self.headers = headers  # [(lower-case name, value)]
        self.body, self.raw = body, raw

    def header(self, name):
        vals = self.all(name)
        return vals[0] if vals else None

    def all(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n == name]

    def closes(self):
        return any(t.strip().lower() == "close"
                   for v in self.all("connection") for t in v.split(","))

    def __repr__(self):
        return "<%s %d %r>" % (self.version, self.status, self.raw[:300])


def request(method, target, headers=None, body=b"", version="HTTP/1.1", host="127.0.0.1"):
    """The bytes of a request; headers is a list of (name, value); a Host
    header is added unless headers has one or host is None."""
    if isinstance(body, str):
        body = body.encode()
    hs = list(headers or [])
    names = {n.lower() for n, _ in hs}
    if host is not None and "host" not in names:
        hs.insert(0, ("Host", host))
    if body and "content-length" not in names and "transfer-encoding" not in names:
        hs.append(("Content-Length", str(len(body))))
    head = "%s %s %s\r\n" % (method, target, version)
    head += "".join("%s: %s\r\n" % (n, v) for n, v in hs)
    return head.encode("latin-1") + b"\r\n" + body


class Conn:
    def __init__(self, port=None, timeout=10):
        self.port = port or PORT
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=bound(timeout))
        self.buf = b""
        self.eof = False

    def local_port(self):
        return self.sock.getsockname()[1]

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def settimeout(self, secs):
        self.sock.settimeout(bound(secs))

    def _fill(self):
        if self.eof:
            return False
        try:
            d = self.sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            d = b""
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def _take(self, n):
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def read_response(self, method="GET", interim=False):
        """Read one response; 1xx responses are skipped unless interim.
        Raises NoResponse, Incomplete, or socket.timeout."""
        raw = b""
        while True:
            start = len(raw)
            while b"\r\n\r\n" not in self.buf:
                if not self._fill():
                    if raw or self.buf:
                        raise Incomplete(raw + self.buf)
                    raise NoResponse()
            i = self.buf.index(b"\r\n\r\n") + 4
            head = self._take(i)
            raw += head
            lines = head[:-4].decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
                raise Incomplete(raw)  # not a status line: garbage
            version, status = parts[0], int(parts[1])
            reason = parts[2] if len(parts) > 2 else ""
            headers = []
            for ln in lines[1:]:
                n, _, v = ln.partition(":")
                headers.append((n.strip().lower(), v.strip()))
            if 100 <= status < 200 and status != 101:
                if interim:
                    return Response(version, status, reason, headers, b"", raw[start:])
                continue
            break
        r = Response(version, status, reason, headers, b"", raw)
        te = (r.header("transfer-encoding") or "").lower()
        cl = r.header("content-length")
        if method == "HEAD" or status in (204, 304):
            return r
        if "chunked" in te:
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill():
                        raise Incomplete(raw + self.buf)
                i = self.buf.index(b"\r\n")
                line = self._take(i + 2)
                raw += line
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while not self.buf.startswith(b"\r\n") and b"\r\n\r\n" not in self.buf:
                        if not self._fill():
                            raise Incomplete(raw + self.buf)
                    if self.buf.startswith(b"\r\n"):
                        raw += self._take(2)
                    else:
                        raw += self._take(self.buf.index(b"\r\n\r\n") + 4)
                    break
                while len(self.buf) < size + 2:
                    if not self._fill():
                        raise Incomplete(raw + self.buf)
                chunk = self._take(size + 2)
                raw += chunk
                body += chunk[:-2]
            r.body = body
        elif cl is not None:
            n = int(cl)
            while len(self.buf) < n:
                if not self._fill():
                    raise Incomplete(raw + self.buf)
            r.body = self._take(n)
            raw += r.body
        else:
            while self._fill():
                pass
            r.body = self._take(len(self.buf))
            raw += r.body
        r.raw = raw
        return r

    def wait_eof(self, timeout=5):
        """Wait until the peer closes; returns (bytes received meanwhile,
        seconds waited).  Fails the test after timeout seconds."""
        t0 = time.monotonic()
        got = self._take(len(self.buf))
        self.sock.settimeout(0.05)
        try:
            while time.monotonic() - t0 < bound(timeout):
                try:
                    d = self.sock.recv(1 << 16)
                except socket.timeout:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    d = b""
                if not d:
                    self.eof = True
                    return got, time.monotonic() - t0
                got += d
            fail("connection still open after %.1fs (received %r)" % (bound(timeout), got[:200]))
        finally:
            self.sock.settimeout(bound(10))

    def is_open(self, wait=0.2):
        """True when the peer has not closed within `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            d = self.sock.recv(1, socket.MSG_PEEK)
            return bool(d)
        except socket.timeout:
            return True
        except (ConnectionResetError, BrokenPipeError):
            return False
        finally:
            self.sock.settimeout(bound(10))

    def close(self):
        self.sock.close()


def server_has_read(conn, port=None):
    """True when the server side of conn has read everything sent to it:
    its receive queue in /proc/net/tcp is empty."""
    port = port or conn.port
    lp = "%04X" % port
    rp = "%04X" % conn.local_port()
    found = False
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fs = line.split()
            if fs[1].endswith(":" + lp) and fs[2].endswith(":" + rp):
                found = True
                if int(fs[4].split(":")[1], 16) != 0:
                    return False
    return found


def wait_until(pred, timeout, what):
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > bound(timeout):
            fail("timed out after %.1fs waiting for %s" % (bound(timeout), what))
        time.sleep(0.01)


def wait_server_read(conn, timeout=5):
    wait_until(lambda: server_has_read(conn), timeout, "the server to read what was sent")


def refused(port=None):
    try:
        s = socket.create_connection(("127.0.0.1", port or PORT), timeout=1)
    except (ConnectionRefusedError, socket.timeout, OSError):
        return True
    s.close()
    return False


def get(target="/hello", port=None, headers=None):
    c = Conn(port)
    try:
        c.send(request("GET", target, headers))
        return c.read_response()
    finally:
        c.close()


def check_hello(port=None, what="a new connection"):
    r = get("/hello", port)
    check(r.status == 200 and r.body == b"Hello World!",
          "GET /hello on %s: got %r" % (what, r))


def petrel_pid():
    return int(os.environ["PETREL_PID"])


def sigterm(pid=None):
    os.kill(pid or petrel_pid(), signal.SIGTERM)
PYEOF

pyrun() {
    PYTHONPATH=$LIB_TMP/py${PYTHONPATH:+:$PYTHONPATH} "$PY" - "$@"
}
