#!/usr/bin/env bash
# Static files: nothing outside the root, ever.  Traversal attempts sent
# verbatim (curl --path-as-is and raw sockets): "..", "%2e%2e", encoded
# slashes and backslashes, NUL, "//"; symlinks leading out of the root (not
# followed) and inside it (followed); a FIFO, a device node and a socket are
# not served and do not block the worker.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
mkdir -p "$W/sub/deeper" "$T/outside"
printf 'SECRET-OUTSIDE\n' >"$T/secret.txt"
printf 'SECRET-OUTSIDE\n' >"$T/outside/secret.txt"
printf 'inside\n' >"$W/in.txt"
printf 'deep\n' >"$W/sub/deeper/d.txt"
ln -s ../secret.txt "$W/up"
ln -s "$T/secret.txt" "$W/abs-out"
ln -s /etc/passwd "$W/passwd"
ln -s ../outside "$W/outdir"
ln -s ../../secret.txt "$W/sub/up2"
ln -s in.txt "$W/rel-in"
ln -s "$W/in.txt" "$W/abs-in"
ln -s sub "$W/subdir"
ln -s ../in.txt "$W/sub/back"
ln -s /proc/self/root/etc/passwd "$W/magic"
mkfifo "$W/fifo"

petrel_start --root "$W" --module hello

# no_escape WHAT CURL-ARG...: a 400, 403 or 404, and no secret in the body
no_escape() {
    local what=$1 code
    shift
    code=$(curl_ --path-as-is -o "$T/b" -w '%{http_code}' "$@")
    [[ $code == 400 || $code == 403 || $code == 404 ]] || fail "$what: status $code"
    ! grep -q -e SECRET -e 'root:' "$T/b" || fail "$what: leaked $(head -c 100 "$T/b")"
}

for p in \
    '/../secret.txt' '/../../../../etc/passwd' '/sub/../../secret.txt' \
    '/%2e%2e/secret.txt' '/%2E%2E/%2e%2e/etc/passwd' '/.%2e/secret.txt' '/%2e./secret.txt' \
    '/%2e%2e%2fsecret.txt' '/sub%2f..%2f..%2fsecret.txt' '/..%2f..%2fetc%2fpasswd' \
    '/..%5csecret.txt' '/sub\..\..\secret.txt' '/%5c..%5c..%5csecret.txt' \
    '/in.txt%00.html' '/%00' '//etc/passwd' '///../secret.txt' '/./../secret.txt' \
    '/%252e%252e/secret.txt' '/%c0%ae%c0%ae/secret.txt' \
    '/up' '/abs-out' '/passwd' '/outdir/secret.txt' '/sub/up2' '/magic' \
    '/subdir/../up' '/subdir/../../secret.txt'; do
    no_escape "GET $p" "$BASE$p"
done
ok "traversal spellings and escaping symlinks: 400/403/404, nothing leaked"

# Raw bytes curl would not send: a target with a backslash, NUL, absolute-form.
pyrun <<'EOF'
from petrel_client import *
for target in [b"/..\\secret.txt", b"/in.txt\x00", b"/sub/..%2F..%2Fsecret.txt",
               b"http://127.0.0.1/../secret.txt", b"/%2e%2e%5csecret.txt"]:
    c = Conn()
    c.send(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        r = c.read_response()
        check(r.status in (400, 403, 404), "%r: status %d" % (target, r.status))
        check(b"SECRET" not in r.body and b"root:" not in r.body, "%r: leaked" % target)
    except (NoResponse, Incomplete):
        pass  # closed without an answer: nothing leaked either
    c.close()
ok("raw targets with backslashes, NUL, absolute-form")
EOF

# Symlinks that stay inside are followed.
expect_eq "$(curl_ "$BASE/rel-in")" inside "relative symlink inside"
expect_eq "$(curl_ "$BASE/abs-in")" inside "absolute symlink to a file inside"
expect_eq "$(curl_ "$BASE/subdir/deeper/d.txt")" deep "symlinked directory inside"
expect_eq "$(curl_ "$BASE/sub/back")" inside "symlink climbing back inside"
ok "symlinks that stay inside the root are followed"

# Not regular files: a FIFO (opening it for reading would block), a device,
# a socket.  The worker must keep serving (no blocking open).
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/fifo")" 404 "FIFO"
if mknod "$W/null" c 1 3 2>/dev/null; then
    expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/null")" 404 "device node"
    dev=device
else
    dev="device (skipped: no CAP_MKNOD)"
fi
"$PY" -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$W/sock"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/sock")" 404 "socket"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "the worker still answers"
ok "FIFO, $dev and socket: 404, the worker not blocked"
petrel_stop
