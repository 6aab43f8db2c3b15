#!/usr/bin/env bash
# WebSocket in a real browser, the way a user checks a deployment: petrel
# serves examples/www (the static handler, --root) with the wsecho module at
# /ws, and Debian's Chromium, headless, loads ws.html?selftest with
#   chromium --headless --screenshot=FILE --dump-dom URL
# The page echoes text and binary messages up to 1 MiB, checks that
# permessage-deflate was negotiated, sends 100 messages in flight and closes
# with 4321, and holds its load event until the verdict is in (an open()ed
# iframe), so both the DOM and the screenshot show the end: the verdict
# text, and the whole page green (PASS) or red (FAIL), read here from the
# PNG's pixels.  Without the wsecho module the same page must say FAIL, in
# red: the check can fail.
#
# No driver between the test and the browser: Chromium's own command-line
# modes, as a user would run them (stock Debian 12 has no Node.js that a
# browser-automation package of today supports, and needs none here).
# Skips (77) without /usr/bin/chromium (apt-get install chromium;
# ./bootstrap --test installs it).
. "$(dirname "$0")/lib.sh"
. "$LIB_DIR/browser_lib.sh"

chromium_needs
WWW=$top_srcdir/examples/www
[[ -f $WWW/ws.html ]] || fail "no $WWW/ws.html"

# page_report NAME: the verdict and the log lines of the page; the colour of
# the screenshot's corners and centre (green, red, white or other)
page_report() {
    pyrun "$LIB_TMP/$1.html" "$LIB_TMP/$1.png" <<'PYEOF'
import html, re, struct, sys, zlib

dom = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<output id="result">(.*?)</output>', dom)
print("verdict:", html.unescape(m.group(1)) if m else "(none)")
for line in re.findall(r'<div class="[a-z]+">(.*?)</div>', dom):
    print("log:", html.unescape(line))


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, "PNG type %d/%d" % (depth, ctype)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, [[tuple(r[x * bpp:x * bpp + 3]) for x in range(w)] for r in rows]


def colour(rgb):
    r, g, b = rgb
    if g > 100 and r < 80 and b < 90:
        return "green"
    if r > 150 and g < 80 and b < 80:
        return "red"
    if min(rgb) > 240:
        return "white"
    return "other"


w, h, px = png_pixels(sys.argv[2])
# the corners and the left margin: the page background (the log box is white)
spots = [(2, 2), (w - 30, 2), (2, h - 30), (2, h // 2)]
print("screenshot: %dx%d, %s" % (w, h, " ".join(colour(px[y][x]) for x, y in spots)))
PYEOF
}

# --- the self-test passes, and the screenshot shows it ---------------------
petrel_start --root "$WWW" --module wsecho
expect_match "$(curl_ "$BASE/ws.html")" 'WebSocket echo' "ws.html is served"
expect_match "$(curl_ "$BASE/")" 'ws.html\?selftest' "the index links the self-test"
t0=$(now)
chromium_selftest "$BASE/ws.html?selftest" pass
secs=$(secs_since "$t0")
report=$(page_report pass)
sed 's/^/    /' <<<"$report"
expect_match "$report" $'verdict: PASS 11 checks' "the page's verdict (DOM after the load event)"
expect_match "$report" $'log: extensions: permessage-deflate' "permessage-deflate negotiated"
expect_match "$report" $'log: close: code 4321, clean true' "the closing handshake"
expect_match "$report" $'screenshot: 800x600, green green green green' "the screenshot"
# the interactive echo's state ("connecting…") is not shown beside the verdict
state=$(grep -o '<span id="state">[^<]*' "$LIB_TMP/pass.html" || true)
[[ -z $state ]] || fail "the self-test's page shows the interactive echo's state: $state"
petrel_stop
ok "headless Chromium: ws.html?selftest PASS in ${secs}s, the screenshot is green, no 'connecting…' beside it"

# --- without the WebSocket endpoint: FAIL, red, and the page still ends ----
petrel_start --root "$WWW"
chromium_selftest "$BASE/ws.html?selftest&timeout=$(bound 10)" fail
report=$(page_report fail)
sed 's/^/    /' <<<"$report"
expect_match "$report" $'verdict: FAIL cannot connect to ws://' "the verdict without /ws"
expect_match "$report" $'screenshot: 800x600, red red red red' "the screenshot without /ws"
petrel_stop
ok "without the wsecho module the self-test says FAIL and the screenshot is red"
