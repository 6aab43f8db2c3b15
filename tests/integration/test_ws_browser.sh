#!/usr/bin/env bash
# WebSocket in a real browser: petrel serves examples/ws/index.html with its
# static handler (--root) and the wsecho module at /ws; headless Chromium
# (Debian's chromium package, driven by playwright-core from
# tests/ws-browser/node_modules) loads the page, which echoes text and binary
# messages up to 1 MiB, 100 messages in flight, and closes with 4321; the
# test asserts the page's verdict.  Skips (77) without chromium, node or
# tests/ws-browser/node_modules (cd tests/ws-browser && npm ci), or when
# --root is not available.
. "$(dirname "$0")/lib.sh"

BROWSER_DIR=$top_srcdir/tests/ws-browser
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $CHROMIUM ]] || skip "no Chromium at $CHROMIUM (apt-get install chromium)"
command -v node >/dev/null || skip "no node (apt-get install nodejs)"
[[ -d $BROWSER_DIR/node_modules/playwright-core ]] ||
    skip "no playwright-core in $BROWSER_DIR/node_modules (cd tests/ws-browser && npm ci)"
"$PETREL" --root "$top_srcdir/examples/ws" --listen 127.0.0.1:0 --help >/dev/null 2>&1 ||
    skip "this petrel has no --root (static files)"

petrel_start --root "$top_srcdir/examples/ws" --module wsecho
expect_match "$(curl_ "$BASE/")" 'WebSocket echo' "the page is served at /"

export CHROMIUM BROWSER_TIMEOUT_MS=$(($(bound 30) * 1000))
# Chromium writes its profile and crash reports under HOME: keep them here.
HOME=$LIB_TMP node "$BROWSER_DIR/browser.mjs" "$BASE/" >"$LIB_TMP/browser.out" 2>&1 && rc=0 || rc=$?
sed 's/^/    /' "$LIB_TMP/browser.out"
[[ $rc -ne 2 ]] || skip "Chromium does not start here (see above)"
[[ $rc -eq 0 ]] || fail "the page's self-test did not pass"
ok "headless Chromium: $(grep '^verdict:' "$LIB_TMP/browser.out")"
petrel_stop
