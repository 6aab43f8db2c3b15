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
# Exit status of a test: 0 pass, 77 skip (with a line "skip: REASON": see
# skip), anything else fail.  `make check` runs each test as an entry of its
# own through driver.sh; one by hand, after a build:
#   make check TESTS=tests/integration/test_h1_curl.sh   (output: its .log)
#   tests/integration/test_h1_curl.sh                    (output: the terminal)
#
# The environment (set by `make check`, see Makefile.am, or by run.sh):
#   PETREL             the petrel binary (default: $top_builddir/src/petrel)
#   top_builddir       the build tree (default: the source tree when it holds
#                      a build, as after the README's commands, else its build/)
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
#   petrel_admin_port          the admin listener's port (--admin-listen 127.0.0.1:0) in
#                              $PETREL_ERR, or fail
#   wait_port PORT [HOST]      wait until HOST (127.0.0.1):PORT accepts connections
#   wait_for SECS CMD...       poll CMD until it succeeds (20 ms steps), or fail
#   pyrun [ARG]...             run Python from stdin with the petrel_client module
#   curl_ ARG...               curl without config files or proxies, bounded
#   fail MSG / skip MSG / ok MSG
#   py_needs MODULE [PACKAGE]  skip without the Python module (Debian's PACKAGE)
#   bench_needs                set BENCH to the petrel-bench binary, or skip
#   sbin_cmd NAME              the program NAME on PATH or in /usr/sbin, or nothing
#   expect_eq GOT WANT WHAT, expect_match STRING ERE WHAT, expect_no_match STRING ERE WHAT
#   header_value FILE NAME, status_of FILE   (from a `curl -D FILE` head)
#   now, secs_since T0, fcmp 'EXPR' (awk float comparison)
#   bound SECS                 SECS times the sanitizer factor

set -eEuo pipefail
shopt -s inherit_errexit
shopt -s nullglob

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$LIB_DIR/env.sh"
PY=$PETREL_PYTHON

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
# Begin valgrind block: PETREL_VALGRIND=1 runs every petrel under valgrind.
#
# `make check-valgrind` sets it (see Makefile.am).  $PETREL becomes a wrapper
# script that execs `valgrind --tool=memcheck ... PETREL ARG...` (exec: the
# same pid, so signals, exit status and the workers' parent are petrel's own);
# petrel_start also wraps a $PETREL that a test replaced by another petrel
# binary.  Each process, the master and every forked worker, writes its own
# log, $LIB_TMP/vg/vg.PID.log.  When the test ends (lib_cleanup), every log
# that reached valgrind's summary must say "ERROR SUMMARY: 0 errors" --
# definite and indirect leaks count as errors (--errors-for-leak-kinds); a
# process killed with SIGKILL writes no summary and is not checked.  Time
# bounds (bound, LIB_SCALE) are multiplied by PETREL_VALGRIND_SCALE
# (default 10) instead of the sanitizer factor.
#   PETREL_VALGRIND=1        run petrel under valgrind memcheck
#   PETREL_VALGRIND_SCALE    time factor under valgrind (default 10)
#   VALGRIND                 the valgrind command (default valgrind)
#   PETREL_VALGRIND_SUPP     suppressions (default tests/valgrind.supp)
: "${PETREL_VALGRIND:=0}"
LIB_VG_DIR=
LIB_VG_ARGV=()
if [[ $PETREL_VALGRIND == 1 ]]; then
    if ! command -v "${VALGRIND:-valgrind}" >/dev/null; then
        printf 'error: PETREL_VALGRIND=1 but no %s\n' "${VALGRIND:-valgrind}" >&2
        rm -rf "$LIB_TMP"
        exit 1
    fi
    LIB_SCALE=${PETREL_VALGRIND_SCALE:-10}
    export LIB_SCALE
    LIB_VG_DIR=$LIB_TMP/vg
    mkdir -p "$LIB_VG_DIR"
    chmod 1777 "$LIB_VG_DIR" # a test may run petrel as another user
    : "${PETREL_VALGRIND_SUPP:=$top_srcdir/tests/valgrind.supp}"
    LIB_VG_ARGV=("${VALGRIND:-valgrind}" --tool=memcheck --leak-check=full
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
        --error-exitcode=97 --num-callers=30 --log-file="$LIB_VG_DIR/vg.%p.log")
    [[ -f $PETREL_VALGRIND_SUPP ]] && LIB_VG_ARGV+=(--suppressions="$PETREL_VALGRIND_SUPP")
    {
        printf '#!/bin/sh\nexec'
        printf ' %q' "${LIB_VG_ARGV[@]}" "$PETREL"
        printf ' "$@"\n'
    } >"$LIB_TMP/petrel-vg"
    chmod 755 "$LIB_TMP/petrel-vg"
    # tests that find petrel-bench next to $PETREL look for $PETREL_BENCH first
    if [[ -z ${PETREL_BENCH:-} && -x ${PETREL%/*}/bench/petrel-bench ]]; then
        PETREL_BENCH=${PETREL%/*}/bench/petrel-bench
        export PETREL_BENCH
    fi
    PETREL=$LIB_TMP/petrel-vg
    export PETREL
fi

# lib_vg_run: the command that starts $PETREL, in LIB_VG_RUN: under valgrind,
# a $PETREL that is an ELF binary (not the wrapper) gets the valgrind prefix;
# otherwise it is $PETREL alone.
lib_vg_run() {
    LIB_VG_RUN=("$PETREL")
    [[ -n $LIB_VG_DIR && $PETREL != "$LIB_TMP/petrel-vg" ]] || return 0
    if [[ $(head -c 4 "$PETREL" 2>/dev/null | tail -c 3) == ELF ]]; then
        LIB_VG_RUN=("${LIB_VG_ARGV[@]}" "$PETREL")
    fi
}

# lib_vg_check: 0 when no valgrind log of this test reports an error; else
# print those logs and return 1.
lib_vg_check() {
    local f bad=0
    [[ -n $LIB_VG_DIR ]] || return 0
    for f in "$LIB_VG_DIR"/vg.*.log; do
        if grep -q 'ERROR SUMMARY: [1-9]' "$f"; then
            printf -- '--- valgrind: %s (first 150 lines) ---\n' "${f##*/}" >&2
            head -n 150 "$f" >&2
            bad=1
        fi
    done
    return "$bad"
}
# End valgrind block.

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

# sbin_cmd NAME: the program NAME on PATH, else in /usr/sbin (not on every
# user's PATH); prints nothing when there is none.
sbin_cmd() {
    command -v "$1" || { [[ -x /usr/sbin/$1 ]] && echo "/usr/sbin/$1"; } || true
}

# bench_needs: set BENCH to petrel-bench ($PETREL_BENCH, else the one next
# to $PETREL, else the build tree's), or skip.
bench_needs() {
    for BENCH in "${PETREL_BENCH:-}" "${PETREL%/*}/bench/petrel-bench" \
        "${top_builddir:-$top_srcdir}/src/bench/petrel-bench"; do
        [[ -n $BENCH && -x $BENCH ]] && return 0
    done
    skip "no petrel-bench (\$PETREL_BENCH, next to $PETREL or in the build tree; make builds it)"
}

# py_needs MODULE [PACKAGE]: skip without the Python module MODULE of $PY,
# naming the Debian package (python3-MODULE, '_' as '-', unless given).
py_needs() {
    local pkg=${2:-python3-${1//_/-}}
    "$PY" -c "import $1" 2>/dev/null || skip "$pkg is not installed (apt-get install $pkg)"
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
    lib_vg_check || { [[ $rc -ne 0 ]] || rc=1; } # valgrind block
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

# petrel_admin_port: the port of the admin listener that the last petrel_start
# logged (--admin-listen 127.0.0.1:0 picks one), or fail.
petrel_admin_port() {
    local p
    p=$(sed -n 's/.* admin listener .* on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$PETREL_ERR" | head -n 1)
    [[ -n $p ]] || fail "no admin listener line in $PETREL_ERR"
    echo "$p"
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
# line) a free port is chosen beforehand instead.  Under the sanitizers or
# valgrind (LIB_SCALE > 1) the watchdog's default of 5 s is scaled like every
# other bound, unless a --watchdog-timeout is given: the loop turn that
# deflates a 16 MiB WebSocket message took 5.3 s under valgrind, and the
# watchdog killed a worker that was not stuck.
petrel_start() {
    local listen=yes quiet=no wd=yes prev='' a port='' host=127.0.0.1 addr t0
    for a in "$@"; do
        case $a in
        --listen | --listen=*) listen=no ;;
        --watchdog-timeout | --watchdog-timeout=*) wd=no ;;
        --log-level=error | --log-level=warn) quiet=yes ;;
        error | warn) [[ $prev == --log-level ]] && quiet=yes ;;
        esac
        prev=$a
    done
    local args=("$@")
    [[ $wd == no || $LIB_SCALE == 1 ]] || args=(--watchdog-timeout "$(bound 5)" "${args[@]}")
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
    lib_vg_run # valgrind block
    "${LIB_VG_RUN[@]}" "${args[@]}" >"$PETREL_OUT" 2>"$PETREL_ERR" </dev/null &
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
    # a sanitizer report that did not change the exit status (a worker's,
    # or UBSan's without halt_on_error) still fails the test
    fault_sanitizer_check
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


def recv_all(sock):
    """Read sock until the peer closes it; what was read.  Errors (a reset,
    a timeout) propagate."""
    data = b""
    while True:
        d = sock.recv(1 << 16)
        if not d:
            return data
        data += d


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


def load_until(stopfile, result, path, prefix, keepalive=6, oneshot=0):
    """Requests GET `path` from `keepalive` clients on persistent connections
    and `oneshot` clients with a connection per request, until `stopfile`
    exists; each answer must be 200 with a body starting with `prefix`.
    Writes "OK ERRORS" and the first 20 errors to `result`."""
    import http.client
    import threading

    lock = threading.Lock()
    stats = {"ok": 0}
    errors = []

    def note(good, what):
        with lock:
            if good:
                stats["ok"] += 1
            else:
                errors.append(what)

    def persistent(idx):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=bound(10))
        n = 0
        while not os.path.exists(stopfile):
            n += 1
            try:
                c.request("GET", path)
                r = c.getresponse()
                got = r.read()
                good = r.status == 200 and got.startswith(prefix)
                if r.will_close:
                    c.close()
            except Exception as e:
                good, got = False, repr(e)
                c.close()
            note(good, "keep-alive client %d, request %d: %r" % (idx, n, got))

    def single(idx):
        n = 0
        while not os.path.exists(stopfile):
            n += 1
            try:
                c = Conn(timeout=10)
                c.send(request("GET", path, [("Connection", "close")]))
                r = c.read_response()
                c.close()
                good, got = r.status == 200 and r.body.startswith(prefix), r
            except Exception as e:
                good, got = False, repr(e)
            note(good, "one-shot client %d, request %d: %s" % (idx, n, got))

    threads = [threading.Thread(target=persistent, args=(i,)) for i in range(keepalive)]
    threads += [threading.Thread(target=single, args=(i,)) for i in range(oneshot)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(result, "w") as f:
        f.write("%d %d\n" % (stats["ok"], len(errors)))
        for e in errors[:20]:
            f.write(e + "\n")

PYEOF

pyrun() {
    PYTHONPATH=$LIB_TMP/py${PYTHONPATH:+:$PYTHONPATH} "$PY" - "$@"
}

# ---------------------------------------------------------------------------
# Fault injection (test_fault_*.sh): process accounting and raw clients.
#
#   fd_count PID               open descriptors of PID
#   rss_kb PID                 resident memory of PID (VmRSS, KiB)
#   cpu_ticks PID              user+system CPU time of PID, in clock ticks
#   fault_sanitizer_check      fail on a sanitizer report in any petrel log
#   petrel_worker [PID]        the one worker of a --workers 1 petrel
#   petrel_start_nofile N [OPTION]...  petrel_start with at most N descriptors
#   fault_setup                skip without cc or python3-h2, make the static
#                              root $LIB_TMP/www, fault_stream_module $LIB_TMP
#   fault_stream_module DIR    write DIR/stream.c, a module for --dev --module:
#                              GET /stream?kb=N streams N KiB of 'x' in 64 KiB
#                              writes from a 1 ms timer (a producer that does
#                              not look at the peer), and stops writing when
#                              petrel_stream_write fails; &bs=BYTES&ms=MS for
#                              smaller writes less often, after &fast=KB
#                              written as fast as before
#   Python: `from petrel_fault import *` (with pyrun) adds rst(sock) (SO_LINGER
#   0 then close: the peer gets a RST), fds/sockets/rss_kb/cpu_ticks(pid), cpu_used(pid, secs),
#   wait_fds(pid, n, secs, what), slurp(conn) (read to EOF, fast), ws_open(path) and ws_frame/ws_read (raw
#   RFC 6455 frames), h2_open() (an h2 library connection on a raw socket),
#   Many(n, request_bytes) (n connections at once on one selector).

fd_count() {
    local n
    n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l) || return 1
    echo "$n"
}

rss_kb() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# fault_sanitizer_check: fail if any petrel started by this test wrote a
# sanitizer report (a worker's leak report at exit does not change the
# master's exit status).
fault_sanitizer_check() {
    local f
    for f in "$LIB_TMP"/petrel.*.err; do
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            fail "sanitizer report in ${f##*/}: $(grep -m 3 -E 'Sanitizer|runtime error' "$f")"
        fi
    done
}

cpu_ticks() {
    local s
    s=$(cat "/proc/$1/stat") || return 1
    s=${s##*) }
    # after the command name: field 3 is the state, 14 utime, 15 stime
    awk '{ print $12 + $13 }' <<<"$s"
}

# nworkers N [PID]: the master (PETREL_PID) has N children.  For wait_for,
# which runs its command again each time: `wait_for S test "$(...)" -eq N`
# would count once, before the wait.
nworkers() {
    [[ $(petrel_workers "${2:-$PETREL_PID}" | wc -l) -eq $1 ]]
}

# has_worker [PID]: the master has a child
has_worker() {
    [[ -n $(petrel_workers "${1:-$PETREL_PID}") ]]
}

petrel_worker() {
    local w
    wait_for "$(bound 10)" has_worker "${1:-$PETREL_PID}"
    w=$(petrel_workers "${1:-$PETREL_PID}" | head -n 1)
    echo "$w"
}

# petrel_start_nofile N [OPTION]...: petrel_start under prlimit --nofile=N
# (soft and hard), so the server runs out of descriptors at N.
petrel_start_nofile() {
    local n=$1 w=$LIB_TMP/petrel-nofile-$1
    shift
    command -v prlimit >/dev/null || skip "no prlimit (util-linux)"
    printf '#!/bin/sh\nexec prlimit --nofile=%s:%s "%s" "$@"\n' "$n" "$n" "$PETREL" >"$w"
    chmod +x "$w"
    PETREL=$w petrel_start "$@"
}

# fault_setup: skip without cc (for the streaming module) or python3-h2;
# make the static root $LIB_TMP/www and write $LIB_TMP/stream.c
fault_setup() {
    command -v cc >/dev/null || skip "no C compiler (cc) for the streaming module"
    py_needs h2
    mkdir -p "$LIB_TMP/www"
    fault_stream_module "$LIB_TMP"
}

fault_stream_module() {
    cat >"$1/stream.c" <<'EOF'
#include <petrel.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    petrel_req_t *req;
    size_t left, bs, fast;
    unsigned ms;
} job_t;

static char block[65536];

static void tick(void *data)
{
    job_t *j = data;
    size_t bs = j->fast ? sizeof(block) : j->bs;
    size_t n = j->left < bs ? j->left : bs;
    int rc = petrel_stream_write(j->req, block, n);
    j->left -= n;
    j->fast = j->fast > n ? j->fast - n : 0;
    if (rc < 0 || j->left == 0 || petrel_timer_start(j->fast ? 1 : j->ms, tick, j) == NULL) {
        petrel_req_t *req = j->req;
        free(j);
        petrel_stream_end(req);
    }
}

static int stream(petrel_req_t *req, void *data)
{
    (void)data;
    const char *kb = petrel_req_query(req, "kb"), *bs = petrel_req_query(req, "bs"),
               *ms = petrel_req_query(req, "ms"), *fast = petrel_req_query(req, "fast");
    job_t *j = malloc(sizeof(*j));
    if (j == NULL)
        return 500;
    memset(block, 'x', sizeof(block));
    j->req = req;
    j->left = (size_t)strtoul(kb ? kb : "1024", NULL, 10) * 1024;
    j->bs = bs ? (size_t)strtoul(bs, NULL, 10) : sizeof(block);
    if (j->bs == 0 || j->bs > sizeof(block))
        j->bs = sizeof(block);
    j->ms = ms ? (unsigned)strtoul(ms, NULL, 10) : 1;
    j->fast = fast ? (size_t)strtoul(fast, NULL, 10) * 1024 : 0;
    if (petrel_stream_begin(req, 200, "application/octet-stream") < 0) {
        free(j);
        return 500;
    }
    tick(j);
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/stream", stream, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(faultstream, routes, NULL, NULL, NULL)
EOF
}

cat >"$LIB_TMP/py/petrel_fault.py" <<'PYEOF'
"""Fault-injection helpers for petrel's integration tests."""
import base64
import os
import socket
import struct
import time

from petrel_client import Conn, bound, fail, request


def rst(sock):
    """Close with SO_LINGER 0: the kernel sends RST, not FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def sockets(pid):
    """The descriptors of pid that are sockets."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def fd_list(pid):
    out = []
    for fd in sorted(os.listdir("/proc/%d/fd" % pid), key=int):
        try:
            out.append("%s->%s" % (fd, os.readlink("/proc/%d/fd/%s" % (pid, fd))))
        except OSError:
            pass
    return out


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fs = s[s.rindex(")") + 2:].split()
    return int(fs[11]) + int(fs[12])


def cpu_used(pid, secs=2):
    """Clock ticks of CPU pid uses in secs (a measurement window, not a wait
    for the server)."""
    t0 = cpu_ticks(pid)
    time.sleep(secs)
    return cpu_ticks(pid) - t0


def wait_fds(pid, n, secs, what):
    """Wait until pid has at most n descriptors open; fail after secs."""
    t0 = time.monotonic()
    while fds(pid) > n:
        if time.monotonic() - t0 > bound(secs):
            fail("%s: the worker has %d descriptors, baseline %d, after %.1fs: %s"
                 % (what, fds(pid), n, bound(secs), " ".join(fd_list(pid))))
        time.sleep(0.02)
    return time.monotonic() - t0


def slurp(c, timeout=30):
    """Read until the peer closes, into one buffer (Conn's reads copy the
    whole buffer at each step: too slow for many MiB); c.read_response()
    then parses what was read."""
    buf = bytearray(c.buf)
    chunk = bytearray(1 << 20)
    c.sock.settimeout(bound(timeout))
    while True:
        try:
            n = c.sock.recv_into(chunk)
        except (ConnectionResetError, BrokenPipeError):
            n = 0
        if n == 0:
            break
        buf += chunk[:n]
    c.buf = bytes(buf)
    c.eof = True


def ws_open(path="/ws", port=None):
    """A WebSocket (RFC 6455 §4.1) on a raw socket: returns the Conn."""
    c = Conn(port)
    key = base64.b64encode(os.urandom(16)).decode()
    c.send(request("GET", path, [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                 ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]))
    while b"\r\n\r\n" not in c.buf:
        if not c._fill():
            fail("WebSocket handshake: connection closed: %r" % c.buf)
    head = c._take(c.buf.index(b"\r\n\r\n") + 4)
    if not head.startswith(b"HTTP/1.1 101"):
        fail("WebSocket handshake: %r" % head)
    return c


def ws_frame(opcode, payload, fin=True, mask=True, length=None):
    """A client frame (RFC 6455 §5.2); length overrides the announced length."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | opcode
    mbit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_read(c):
    """One server frame: (opcode, payload)."""
    def need(k):
        while len(c.buf) < k:
            if not c._fill():
                fail("WebSocket: connection closed mid-frame")
    need(2)
    b0, b1 = c.buf[0], c.buf[1]
    n, off = b1 & 0x7F, 2
    if n == 126:
        need(4)
        n, off = struct.unpack("!H", c.buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, off = struct.unpack("!Q", c.buf[2:10])[0], 10
    need(off + n)
    c._take(off)
    return b0 & 0x0F, c._take(n)


class Many:
    """n connections opened at once (non-blocking connects), each sending
    req and reading one response (with Content-Length) on one selector.
    run() may be called again to go on; the sockets stay open until
    close().  status[i] is the status of connection i, None while pending,
    or an error string."""

    def __init__(self, n, req, port=None):
        import selectors
        self.sel = selectors.DefaultSelector()
        self.req = req
        self.status = [None] * n
        self.socks = []
        self.bufs = [b""] * n
        addr = ("127.0.0.1", port or int(os.environ["PORT"]))
        for i in range(n):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(addr)
            except BlockingIOError:
                pass
            except OSError as e:
                self.status[i] = "connect: %s" % e
                self.socks.append(s)
                continue
            self.socks.append(s)
            self.sel.register(s, selectors.EVENT_WRITE, i)

    def pending(self):
        return sum(1 for st in self.status if st is None)

    def served(self):
        return [i for i, st in enumerate(self.status) if st == 200]

    def errors(self):
        return [(i, st) for i, st in enumerate(self.status) if isinstance(st, str)]

    def _done(self, i, st):
        self.status[i] = st
        self.sel.unregister(self.socks[i])

    def run(self, secs, until=None):
        """Serve events for up to secs seconds, or until no connection is
        pending, or until until() is true."""
        import selectors
        t0 = time.monotonic()
        while self.pending() and time.monotonic() - t0 < secs and not (until and until()):
            for key, ev in self.sel.select(0.05):
                i, s = key.data, key.fileobj
                if ev & selectors.EVENT_WRITE:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self._done(i, "connect: %s" % os.strerror(err))
                        continue
                    try:
                        s.send(self.req)
                    except OSError as e:
                        self._done(i, "send: %s" % e)
                        continue
                    self.sel.modify(s, selectors.EVENT_READ, i)
                    continue
                try:
                    d = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as e:
                    self._done(i, "recv: %s" % e)
                    continue
                if not d:
                    self._done(i, "closed after %r" % self.bufs[i][:60])
                    continue
                b = self.bufs[i] = self.bufs[i] + d
                end = b.find(b"\r\n\r\n")
                if end < 0:
                    continue
                head = b[:end].decode("latin-1").lower()
                cl = 0
                for line in head.split("\r\n")[1:]:
                    if line.startswith("content-length:"):
                        cl = int(line.split(":", 1)[1])
                if len(b) >= end + 4 + cl:
                    self._done(i, int(head.split()[1]))
                    self.bufs[i] = b""
        return self.pending()

    def close(self, idx=None):
        for i in (range(len(self.socks)) if idx is None else idx):
            try:
                self.sel.unregister(self.socks[i])
            except (KeyError, ValueError):
                pass
            self.socks[i].close()


def h2_open(port=None, window=None):
    """An h2c connection with prior knowledge (RFC 9113 §3.3) on a raw socket.
    Returns (Conn, h2 connection); window sets SETTINGS_INITIAL_WINDOW_SIZE."""
    import h2.config
    import h2.connection
    import h2.settings
    c = Conn(port)
    h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    h.initiate_connection()
    if window is not None:
        h.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    c.send(h.data_to_send())
    return c, h


def h2_get(c, h, path, sid=None):
    sid = sid or h.get_next_available_stream_id()
    h.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"),
                         (":path", path)], end_stream=True)
    c.send(h.data_to_send())
    return sid
PYEOF
