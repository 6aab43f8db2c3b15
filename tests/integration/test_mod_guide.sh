#!/usr/bin/env bash
# doc/guide.md cannot rot: install petrel into a temporary prefix, then run
# every code block of the guide in order, in an empty directory, on a free
# port instead of 8080 (the conventions are in the comment at the top of
# the guide): C files are written and compiled with -Werror, commands run,
# servers started and stopped (by their --pid-file, never pkill), console
# transcripts compared exactly.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"
. "$(dirname "$0")/pg_lib.sh"

guide=$top_srcdir/doc/guide.md
[[ -f $guide ]] || fail "no $guide"
# its servers are signalled by their --pid-file: a pkill by command line
# can end another petrel on a shared machine
! grep -n 'pkill' "$guide" ||
    fail "doc/guide.md signals a server with pkill (use --pid-file and kill \"\$(cat petrel.pid)\")"
mod_install
command -v curl >/dev/null || skip "no curl"
"$PY" -c 'import websockets' 2>/dev/null ||
    skip "python3-websockets is not installed (the guide's WebSocket client)"
# the guide's `python3` is Debian's (with python3-websockets)
mkdir -p "$LIB_TMP/pybin"
ln -s "$(command -v "$PY")" "$LIB_TMP/pybin/python3"
PATH=$LIB_TMP/pybin:$PATH
work=$LIB_TMP/guide
mkdir -p "$work"
PORT=$(free_port)
export PORT
# The chapter marked <!-- postgresql ... --> needs a database server: one
# of the test's own, named by the PG* variables of its blocks; without
# PostgreSQL its blocks are skipped, and the summary says so.
GUIDE_PG=
if pg_available; then
    pg_start
    psql_ -d postgres -c "CREATE DATABASE guide"
    export PGDATABASE=guide
else
    GUIDE_PG="no PostgreSQL: $PG_WHY"
fi
export GUIDE_PG

pyrun "$guide" "$work" <<'EOF'
import os
import re
import signal
import socket
import subprocess
import sys
import time
from petrel_client import *

guide, work = sys.argv[1], sys.argv[2]
port = os.environ["PORT"]
os.chdir(work)

# --- the blocks -------------------------------------------------------------
blocks = []
lines = open(guide, encoding="utf-8").read().split("\n")
i = 0
in_comment = False
pg_chapter = False   # in a chapter marked <!-- postgresql ... -->
pg_skipped = 0
while i < len(lines):
    ln = lines[i]
    if ln.startswith("## "):
        pg_chapter = False
    if ln.startswith("<!-- postgresql"):
        pg_chapter = True
    if ln.startswith("<!--"):
        in_comment = True
    if in_comment:
        in_comment = "-->" not in ln
        i += 1
        continue
    m = re.match(r"^```(\S*)\s*(.*)$", ln)
    if m and m.group(1):
        lang, info, start = m.group(1), m.group(2).strip(), i + 1
        body = []
        i += 1
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        check(i < len(lines), "guide line %d: the block never ends" % start)
        if pg_chapter and os.environ.get("GUIDE_PG"):
            pg_skipped += 1
        else:
            blocks.append((start, lang, info, "\n".join(body) + "\n"))
    i += 1
check(len(blocks) > 20, "only %d code blocks found in the guide" % len(blocks))


def where(b):
    return "guide line %d (```%s %s)" % (b[0], b[1], b[2])


def on_port(text):
    return text.replace("8080", port)


server = None        # (Popen, log path, block)
server_log_len = 0   # lines of "reload: generation N serving" seen
dev_files = set()    # files the running --dev server watches
dirty = set()        # C files written since they were last compiled
ran = {"c": 0, "py": 0, "sh": 0, "server": 0, "console": 0, "install": 0, "text": 0}


def reloads():
    if server is None:
        return 0
    with open(server[1], errors="replace") as f:
        return len(re.findall(r"reload: generation \d+ serving", f.read()))


def wait_reload(before, b):
    t0 = time.monotonic()
    while reloads() <= before:
        if time.monotonic() - t0 > bound(30):
            fail("%s: no reload logged within %.0fs: %s" % (where(b), bound(30),
                                                              open(server[1]).read()[-2000:]))
        time.sleep(0.02)


def compile_dirty(b):
    for f in sorted(dirty):
        cflags = subprocess.run(["pkg-config", "--cflags", "petrel"], capture_output=True,
                                text=True, check=True).stdout.split()
        r = subprocess.run(["cc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror"] + cflags + [f],
                           capture_output=True, text=True)
        check(r.returncode == 0, "%s: %s does not compile cleanly:\n%s" % (where(b), f, r.stderr))
    dirty.clear()


def run_sh(script, b):
    path = os.path.join(work, ".block.sh")
    with open(path, "w") as f:
        f.write("set -e\n" + script)
    r = subprocess.run(["bash", path], capture_output=True, text=True, timeout=bound(120))
    return r


def stop_check():
    """The server was told to stop: it must exit with status 0."""
    global server
    if server is None:
        return
    p, log, b = server
    try:
        rc = p.wait(timeout=bound(20))
    except subprocess.TimeoutExpired:
        fail("%s: the server did not stop" % where(b))
    check(rc == 0, "%s: the server exited with status %d: %s" % (where(b), rc, open(log).read()[-2000:]))
    server = None


timing = []
for b in blocks:
    start, lang, info, text = b
    t_block = time.monotonic()
    timing.append((start, lang, info, t_block))
    if lang == "c":
        m = re.match(r"^(\S+\.c)( \+)?$", info)
        check(m, "%s: a C block needs a file name (```c FILE or ```c FILE +)" % where(b))
        name, append = m.group(1), bool(m.group(2))
        check(not append or os.path.exists(name), "%s: appends to %s, which is not there" % (where(b), name))
        before = reloads()
        # an editor's save: write another file, rename it over
        tmp = name + ".tmp"
        old = open(name).read() if append else ""
        with open(tmp, "w") as f:
            f.write(old + text)
        os.rename(tmp, name)
        dirty.add(name)
        if name in dev_files and server and server[0].poll() is None:
            wait_reload(before, b)
        ran["c"] += 1
    elif lang == "py":
        check(re.match(r"^\S+\.py$", info), "%s: a Python block needs a file name (```py FILE)" % where(b))
        with open(info, "w") as f:
            f.write(text)
        ran["py"] += 1
    elif lang == "sh" and info == "install":
        ran["install"] += 1  # done already: make install DESTDIR=... (mod_install)
    elif lang == "sh" and info == "server":
        compile_dirty(b)
        check(server is None or server[0].poll() is not None,
              "%s: starts a server while the one of %s still runs" % (where(b), where(server[2]) if server else ""))
        stop_check()
        cmd = on_port(text.strip())
        log = os.path.join(work, ".server.%d.log" % start)
        p = subprocess.Popen(["bash", "-c", "exec " + cmd], stdout=open(log + ".out", "w"),
                             stderr=open(log, "w"), stdin=subprocess.DEVNULL)
        server = (p, log, b)
        dev_files = set(re.findall(r"--module \./(\S+?\.c)\b", cmd)) if "--dev" in cmd else set()
        t0 = time.monotonic()
        while True:
            check(p.poll() is None, "%s: the server exited with status %s: %s" % (where(b), p.returncode, open(log).read()[-2000:]))
            try:
                socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
                break
            except OSError:
                pass
            check(time.monotonic() - t0 < bound(30), "%s: the server does not listen" % where(b))
            time.sleep(0.02)
        ran["server"] += 1
    elif lang == "sh":
        check(info == "", "%s: unknown sh block kind '%s'" % (where(b), info))
        compile_dirty(b)
        before = reloads()
        script = on_port(text)
        r = run_sh(script, b)
        check(r.returncode == 0, "%s: exit status %d:\n%s\n%s" % (where(b), r.returncode, r.stdout, r.stderr))
        if re.search(r"(pkill|kill) -HUP", script):
            wait_reload(before, b)
        elif re.search(r"(pkill|kill)\b", script):
            stop_check()
        ran["sh"] += 1
    elif lang == "console":
        compile_dirty(b)
        cmds = []
        for ln in text.rstrip("\n").split("\n"):
            if ln.startswith("$ "):
                cmds.append([ln[2:], []])
            else:
                check(cmds, "%s: output before any command: %r" % (where(b), ln))
                cmds[-1][1].append(ln)
        for cmd, want in cmds:
            r = run_sh(on_port(cmd) + "\n", b)
            got = r.stdout.rstrip("\n").split("\n") if r.stdout else []
            check(r.returncode == 0, "%s: $ %s: exit status %d: %s" % (where(b), cmd, r.returncode, r.stderr))
            check(got == want, "%s: $ %s:\n got: %r\nwant: %r" % (where(b), cmd, got, want))
        ran["console"] += 1
    elif lang == "text":
        ran["text"] += 1
    else:
        fail("%s: unknown block language '%s'" % (where(b), lang))

check(server is None or server[0].poll() is not None,
      "the guide ends with its server (%s) still running" % (where(server[2]) if server else ""))
stop_check()
compile_dirty(blocks[-1])
if os.environ.get("GUIDE_TIMING"):
    for k, (start, lang, info, t) in enumerate(timing):
        end = timing[k + 1][3] if k + 1 < len(timing) else time.monotonic()
        print("line %d %s %s: %.2fs" % (start, lang, info, end - t))
ok("doc/guide.md: %d blocks ran: %s" % (len(blocks), ", ".join("%d %s" % (v, k) for k, v in sorted(ran.items()))))
if pg_skipped:
    print("note: %d blocks of the PostgreSQL chapter not run (%s)" % (pg_skipped, os.environ["GUIDE_PG"]))
EOF
