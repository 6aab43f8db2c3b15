#!/usr/bin/env bash
# The chat example in real browsers (examples/chat/: its module, built as a
# module file, and its page): two petrel instances of two workers each,
# joined by a real Redis, and six headless Chromium pages, three on each
# instance, all in one room.  Each page (index.html?selftest) waits until
# the six members are present and ready (presence crosses the instances
# too), sends its messages, and waits for those of everyone; it passes
# when it got every member's messages once each and in the order they were
# sent.  Here, each page's report (JSON in its DOM) is checked again: the
# same six members everywhere, every message of each once and in order,
# and the pages spread over more than one worker process.
#
# Chromium's own command line (--headless --dump-dom, the page holding its
# load event until its verdict), no driver; skips (77) without Chromium,
# redis-server or the built chat module.
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/browser_lib.sh"
. "$LIB_DIR/redis_lib.sh"

chromium_needs
redis_needs
CHAT=${top_builddir:-}/examples/chat/.libs/chat.so
[[ -n ${top_builddir:-} && -f $CHAT ]] || skip "no $CHAT (make check builds it)"
WWW=$top_srcdir/examples/chat
[[ -f $WWW/index.html ]] || fail "no $WWW/index.html"

redis_start
common=(--root "$WWW" --module "$CHAT" --workers 2 --pubsub-redis "127.0.0.1:$REDIS_PORT")
petrel_start "${common[@]}"
A_PID=$PETREL_PID A_BASE=$BASE
petrel_start "${common[@]}"
B_PID=$PETREL_PID B_BASE=$BASE
expect_match "$(curl_ "$A_BASE/")" 'petrel chat' "the page is served"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -d 'hello' "$A_BASE/chat/say?room=lobby&user=curl")" \
    202 "POST /chat/say (a message from an HTTP client)"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -d 'hello' "$A_BASE/chat/say?room=a%20b&user=curl")" \
    400 "POST /chat/say to a room with a space"

PAGES=6 N=15
pids=()
for ((k = 1; k <= PAGES; k++)); do
    base=$A_BASE
    ((k % 2)) || base=$B_BASE
    chromium_selftest "$base/index.html?selftest&room=browsers&user=user$k&peers=$PAGES&n=$N&timeout=$(bound 90)" \
        "page$k" 120 &
    pids+=($!)
done
t0=$(now)
for p in "${pids[@]}"; do
    wait "$p" || fail "a Chromium page failed (see above)"
done
secs=$(secs_since "$t0")

pyrun "$LIB_TMP" "$PAGES" "$N" <<'PYEOF'
import html, json, re, sys
from petrel_client import ok, fail, check

tmp, pages, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reports = []
for k in range(1, pages + 1):
    dom = open("%s/page%d.html" % (tmp, k), encoding="utf-8").read()
    m = re.search(r'<output id="result">(.*?)</output>', dom)
    verdict = html.unescape(m.group(1)) if m else "(none)"
    check(verdict.startswith("PASS"), "page %d: %s; log: %s" % (
        k, verdict, [html.unescape(x) for x in re.findall(r'<div class="[a-z]*">(.*?)</div>', dom)][-5:]))
    r = re.search(r'<pre id="report">(.*?)</pre>', dom, flags=re.S)
    check(r, "page %d has no report" % k)
    reports.append(json.loads(html.unescape(r.group(1))))
ids = sorted(r["id"] for r in reports)
check(len(set(ids)) == pages, "every page has an id of its own: %s" % ids)
for r in reports:
    check(sorted(r["members"]) == ids, "%s saw members %s, want %s" % (r["user"], r["members"], ids))
    check(sorted(r["received"]) == ids, "%s heard from %s" % (r["user"], sorted(r["received"])))
    for sender, seqs in r["received"].items():
        check(seqs == list(range(1, n + 1)),
              "%s got from %s: %s" % (r["user"], sender, seqs))
workers = sorted({r["pid"] for r in reports})
check(len(workers) >= 2, "all pages on one worker: %s" % workers)
ok("%d pages agree: %d members, %d messages from each, once and in order, at every page; "
   "their connections on %d worker processes %s" % (pages, pages, n, len(workers), workers))
PYEOF
ok "six headless Chromium pages on two instances (four workers) joined by Redis: PASS in ${secs}s"

a=$(curl_ "$A_BASE/chat/stats")
b=$(curl_ "$B_BASE/chat/stats")
expect_match "$a" '"redis":1' "A's bridge is up"
expect_match "$b" '"redis":1' "B's bridge is up"
ok "A: $a"
ok "B: $b"

# the check can fail: a page waiting for a member who never comes says so
chromium_selftest "$A_BASE/index.html?selftest&room=alone&user=lonely&peers=2&n=3&timeout=$(bound 4)" \
    alone 60
v=$(sed -n 's/.*<output id="result">\([^<]*\)<.*/\1/p' "$LIB_TMP/alone.html")
expect_match "$v" '^FAIL no verdict within' "a page alone in its room"
ok "a page whose peers never come: '$v'"

petrel_stop "$A_PID"
petrel_stop "$B_PID"
redis_stop
