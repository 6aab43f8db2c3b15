#!/usr/bin/env bash
# Static files: the cache against changes on disk.  petrel checks a cached
# entry against the disk at most once a second (revalidate_ms = 1000), so a
# file rewritten, replaced, deleted or created is served fresh at most ~1 s
# after the change: the test waits until 1.1 s after each change (a
# computed wait, not polling) and then requires the new state, for a small
# file (kept in memory) and a large one (sent from a cached descriptor).  A
# file truncated while it is being sent ends that response early without
# harming the worker.  And a cached small file costs no file syscall
# (strace -c on the worker).
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
mkdir -p "$W"
printf 'version one\n' >"$W/small.txt"
head -c 300000 /dev/zero | tr '\0' 'a' >"$W/large.txt"
head -c $((32 << 20)) /dev/zero | tr '\0' 'z' >"$W/huge.txt"
printf 'gone soon\n' >"$W/doomed.txt"

petrel_start --root "$W" --module hello
worker=$(petrel_workers)

# after_bound T0: wait until 1.1 s after T0 (the documented bound is 1 s)
after_bound() {
    local left
    left=$(awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { d = a + 1.1 - b; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$left"
}

get() { curl_ -o "$T/b" -w '%{http_code}' "$BASE$1"; }

# --- rewritten in place, same size and another size -------------------------------
expect_eq "$(get /small.txt)" 200 "small, first"
cmp -s "$T/b" "$W/small.txt" || fail "small: first body"
expect_eq "$(get /large.txt)" 200 "large, first"
cmp -s "$T/b" "$W/large.txt" || fail "large: first body"
expect_eq "$(get /doomed.txt)" 200 "doomed, first"
expect_eq "$(get /later.txt)" 404 "later, before it exists"
t0=$EPOCHREALTIME
printf 'version two\n' >"$W/small.txt"                        # same size, in place
head -c 250000 /dev/zero | tr '\0' 'b' >"$W/large.txt"        # smaller, in place
rm "$W/doomed.txt"
printf 'created\n' >"$W/later.txt"
code=$(get /small.txt)                                        # may still be the old one
[[ $code == 200 ]] || fail "small right after the change: $code"
grep -qx 'version one\|version two' "$T/b" || fail "small right after the change: $(cat "$T/b")"
after_bound "$t0"
expect_eq "$(get /small.txt)" 200 "small, after the bound"
cmp -s "$T/b" "$W/small.txt" || fail "small after the bound: '$(cat "$T/b")'"
expect_eq "$(get /large.txt)" 200 "large, after the bound"
cmp -s "$T/b" "$W/large.txt" || fail "large after the bound: $(stat -c %s "$T/b") bytes"
expect_eq "$(get /doomed.txt)" 404 "deleted file, after the bound"
expect_eq "$(get /later.txt)" 200 "created file, after the bound"
ok "rewritten in place (small and large), deleted, created: fresh within 1.1 s"

# --- replaced by rename ---------------------------------------------------------
printf 'replacement for small\n' >"$T/new-small"
head -c 310000 /dev/zero | tr '\0' 'c' >"$T/new-large"
t0=$EPOCHREALTIME
mv "$T/new-small" "$W/small.txt"
mv "$T/new-large" "$W/large.txt"
after_bound "$t0"
expect_eq "$(get /small.txt)" 200 "small, replaced"
cmp -s "$T/b" "$W/small.txt" || fail "small replaced: '$(cat "$T/b")'"
expect_eq "$(get /large.txt)" 200 "large, replaced"
cmp -s "$T/b" "$W/large.txt" || fail "large replaced: $(stat -c %s "$T/b") bytes"
curl_ -D "$T/h" -o /dev/null "$BASE/large.txt"
expect_eq "$(header_value "$T/h" ETag)" "$(printf '"%x-%x"' "$(stat -c %Y "$W/large.txt")" 310000)" "ETag of the replacement"
ok "replaced by rename: fresh within 1.1 s, with a new ETag"

# --- truncated while being sent ------------------------------------------------------
# (a client with a small receive buffer, so that most of the file is still
# to be read from the disk when it shrinks)
expect_eq "$(get /huge.txt)" 200 "huge, whole (cached descriptor)"
pyrun "$W/huge.txt" <<'EOF'
import os, socket, sys
from petrel_client import *
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
s.settimeout(bound(20))
s.connect(("127.0.0.1", PORT))
s.sendall(request("GET", "/huge.txt"))
got = b""
while len(got) < 65536:
    d = s.recv(65536)
    check(d, "closed before the truncation")
    got += d
check(got.startswith(b"HTTP/1.1 200 ") and b"Content-Length: 33554432\r\n" in got, "head: %r" % got[:200])
os.truncate(sys.argv[1], 1000)
n = len(got)
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    n += len(d)
check(n < 33554432, "got %d bytes: the whole file?" % n)
ok("a file truncated while being sent: the connection closes after %d of 33554432 bytes" % n)
EOF
expect_eq "$(petrel_workers)" "$worker" "the same worker after the truncation"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "the worker still answers"
ok "the worker lives on"

# --- no file syscall for a cached small file ------------------------------------------
if ! command -v strace >/dev/null; then
    ok "strace not installed: the syscall count is not checked"
else
    expect_eq "$(get /small.txt)" 200 "warm-up"
    strace -f -c -o "$T/strace" -p "$worker" 2>"$T/strace-err" &
    spid=$!
    LIB_BG+=("$spid")
    wait_for "$(bound 10)" grep -q "Process $worker attached" "$T/strace-err"
    t0=$EPOCHREALTIME
    pyrun <<'EOF'
from petrel_client import *
c = Conn()
for i in range(300):
    c.send(request("GET", "/small.txt"))
    r = c.read_response()
    check(r.status == 200 and r.body == b"replacement for small\n", "request %d: %r" % (i, r))
c.close()
EOF
    secs=$(secs_since "$t0")
    kill -INT "$spid"
    wait "$spid" || true
    count() { awk -v s="$1" '$NF == s { print $4; found = 1 } END { if (!found) print 0 }' "$T/strace"; }
    for sc in openat open pread64 fstat; do
        expect_eq "$(count $sc)" 0 "$sc calls for 300 cached requests"
    done
    stats=$(($(count newfstatat) + $(count statx) + $(count stat)))
    allowed=$(awk -v s="$secs" 'BEGIN { printf "%d", 3 * (int(s) + 2) }')
    [[ $stats -le $allowed ]] || fail "$stats stat calls in ${secs}s for 300 cached requests (at most $allowed)"
    ok "300 cached requests in ${secs}s: no open, read or fstat of the file, $stats revalidation stat(s)"
fi
petrel_stop
