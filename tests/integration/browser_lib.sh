# browser_lib.sh -- Debian's Chromium for the browser tests, sourced after
# lib.sh: its own command-line modes, as a user runs them, no driver.
#
#   chromium_needs            skip the test (77) without /usr/bin/chromium
#                             (or $CHROMIUM)
#   chromium_selftest URL NAME [SECS]
#                             run `chromium --headless --screenshot
#                             --dump-dom URL` (within SECS, default 60,
#                             times the sanitizer factor): NAME.html is the
#                             DOM after the load event, NAME.png the
#                             screenshot, NAME.err what Chromium said, in
#                             $LIB_TMP; fails the test when Chromium does.
#                             Pages hold their load event until their
#                             verdict is in (examples/www/ws.html says how).
#                             CHROMIUM_FLAGS: more flags (words), e.g.
#                             --ignore-certificate-errors for a test's own
#                             certificate.

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

chromium_needs() {
    [[ -x $CHROMIUM ]] ||
        skip "no Chromium at $CHROMIUM (apt-get install chromium, or ./bootstrap --test)"
}

chromium_selftest() {
    local url=$1 out=$LIB_TMP/$2 secs=${3:-60} rc=0 flags=()
    # as root, Chromium refuses to start without --no-sandbox
    [[ $(id -u) -ne 0 ]] || flags+=(--no-sandbox)
    # no network beyond loopback here: no background requests, no updates
    flags+=(--disable-gpu --disable-dev-shm-usage --no-first-run --disable-sync
        --disable-background-networking --disable-component-update
        --user-data-dir="$LIB_TMP/profile-$2" --window-size=800,600)
    # shellcheck disable=SC2206
    flags+=(${CHROMIUM_FLAGS:-})
    # Chromium keeps its crash reports and caches under HOME: keep them here
    HOME=$LIB_TMP timeout "$(bound "$secs")" "$CHROMIUM" --headless "${flags[@]}" \
        --screenshot="$out.png" --dump-dom "$url" >"$out.html" 2>"$out.err" || rc=$?
    if [[ $rc -ne 0 || ! -s $out.html ]]; then
        sed 's/^/    chromium: /' "$out.err" >&2
        fail "$CHROMIUM --headless --screenshot --dump-dom $url: exit status $rc"
    fi
    [[ -s $out.png ]] || fail "Chromium wrote no screenshot for $url: $(tail -n 5 "$out.err")"
}
