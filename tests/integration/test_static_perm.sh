#!/usr/bin/env bash
# Static files: permission denied is 403.  Root reads any file whatever its
# mode (CAP_DAC_OVERRIDE), so when the tests run as root petrel is started
# as the user nobody (setpriv); without setpriv, or without a user nobody
# that can reach the binary, the test is skipped.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
mkdir -p "$W/locked" "$W/open"
printf 'readable\n' >"$W/open/ok.txt"
printf 'private\n' >"$W/private.txt"
printf 'inside a locked directory\n' >"$W/locked/f.txt"
printf '<p>locked index</p>\n' >"$W/locked/index.html"
chmod 755 "$T" "$W" "$W/open"
chmod 644 "$W/open/ok.txt"
chmod 000 "$W/private.txt"
chmod 700 "$W/locked" # owner only: no search permission for nobody

if [[ $(id -u) -eq 0 ]]; then
    command -v setpriv >/dev/null || skip "running as root and no setpriv to drop to nobody"
    id nobody >/dev/null 2>&1 || skip "running as root and no user nobody"
    group=$(id -gn nobody)
    setpriv --reuid=nobody --regid="$group" --clear-groups test -x "$PETREL" ||
        skip "nobody cannot execute $PETREL"
    setpriv --reuid=nobody --regid="$group" --clear-groups test -r "$W/open/ok.txt" ||
        skip "nobody cannot reach $W"
    # petrel_start runs $PETREL: make that a wrapper that drops to nobody (exec:
    # same pid, so SIGTERM and the exit status are petrel's own).
    cat >"$T/as-nobody" <<EOF
#!/bin/sh
exec setpriv --reuid=nobody --regid=$group --clear-groups "$PETREL" "\$@"
EOF
    chmod 755 "$T/as-nobody"
    PETREL=$T/as-nobody
    who=nobody
else
    who=$(id -un)
fi

petrel_start --root "$W" --module hello --autoindex
expect_eq "$(curl_ "$BASE/open/ok.txt")" readable "a readable file (as $who)"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/private.txt")" 403 "mode 000 file"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/locked/f.txt")" 403 "file in a directory without search permission"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/locked/")" 403 "directory without search permission"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/nope.txt")" 404 "missing file (not 403)"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "the worker still answers"
ok "permission denied is 403 (petrel running as $who)"
petrel_stop
