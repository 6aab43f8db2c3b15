#!/usr/bin/env bash
# test_bench_sweep.sh -- petrel-bench --sweep and --plot against the real
# petrel:
#   - --json carries the closed-loop run that found the maximum and one open
#     run per step, each at its percentage of that maximum;
#   - the chart is well-formed SVG (parsed by Python's xml.etree), has no
#     scripts and nothing to fetch, and its numbers are the report's: each
#     point carries the JSON's figures exactly and is drawn where the axis
#     ticks put its value; with the human output, the same for the table;
#   - --plot FILE.png is a valid PNG (signature, chunk CRCs, 900 x 560) drawn
#     by gnuplot, and without gnuplot on PATH it is refused naming the
#     Debian package;
#   - --sweep-max skips the closed-loop run; refused combinations, a chart
#     that cannot be written and a server that answers nothing exit 2 with a
#     message, before any load for the first two.
#
# Standalone: env PETREL (petrel binary), top_builddir; exit 0 pass, 77 skip.
set -euo pipefail

. "$(dirname "$0")/bench_lib.sh"

start_petrel

# check_svg SVG [JSON|TABLE FILE]: the chart against the report
check_svg() {
    $PY - "$@" <<'EOF' || fail "chart $1 does not match the report"
import json, math, re, sys
import xml.etree.ElementTree as ET

svg, kind, report = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(svg, encoding="utf-8").read()
for bad in ("<script", "href=", "@import", "url(", "<foreignObject"):
    assert bad not in text, "the chart has " + bad
root = ET.fromstring(text)
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
assert root.find(ns + "title") is not None
series = ["p50", "p90", "p99", "p99.9", "max"]
npoints = int(root.get("data-points"))
pts = [e for e in root.iter(ns + "circle") if e.get("class") == "pt"]
assert len(pts) == 5 * npoints, (len(pts), npoints)

# where the ticks put values: x linear, y logarithmic
def ticks(cls, coord):
    t = [(float(e.get("data-value")), float(e.get(coord))) for e in root.iter(ns + "text")
         if e.get("class") == cls]
    assert len(t) >= 2, cls
    return t
xt = ticks("xtick", "x")
yt = [(v, y - 4) for v, y in ticks("ytick", "y")]  # labels sit 4 px below their line
(xa, pa), (xb, pb) = xt[0], xt[-1]
(ya, qa), (yb, qb) = yt[0], yt[-1]
def xat(v): return pa + (v - xa) * (pb - pa) / (xb - xa)
def yat(v): return qa + (math.log(v) - math.log(ya)) * (qb - qa) / (math.log(yb) - math.log(ya))
for e in pts:
    assert abs(float(e.get("cx")) - xat(float(e.get("data-asked")))) < 0.02, "x of a point"
    # the attribute is rounded to 0.1 us, the point drawn at the exact value
    lat = max(float(e.get("data-latency-us")) * 1e3, 1)
    tol = 0.05 + 60 / lat * abs(qb - qa) / abs(math.log(yb) - math.log(ya))
    assert abs(float(e.get("cy")) - yat(lat)) < tol, "y of a point"
    assert e.find(ns + "title") is not None and e.get("data-series") in series
# each line goes through its points, in order
for g in root.iter(ns + "g"):
    if g.get("class") != "series":
        continue
    poly = g.find(ns + "polyline").get("points").split()
    mine = [e for e in g.iter(ns + "circle")]
    assert [p.split(",") for p in poly] == [[e.get("cx"), e.get("cy")] for e in mine]

def point(s, pct):
    m = [e for e in pts if e.get("data-series") == s and float(e.get("data-percent")) == pct]
    assert len(m) == 1, (s, pct)
    return m[0]

if kind == "json":
    j = json.load(open(report))["sweep"]
    steps = j["steps"]
    assert len(steps) == npoints
    assert "%.2f" % j["max_rate"] == root.get("data-max-rate")
    keys = {"p50": "p50", "p90": "p90", "p99": "p99", "p99.9": "p999", "max": "max"}
    for st in steps:
        for s in series:
            e = point(s, st["percent"])
            assert e.get("data-latency-us") == "%.1f" % st["latency_us"][keys[s]], (s, st["percent"])
            assert e.get("data-asked") == "%.2f" % st["rate"]["asked"]
            assert e.get("data-achieved") == "%.2f" % st["rate"]["achieved"]
            assert e.get("data-errors") == str(st["errors"]["total"])
else:  # the markdown table of the human report
    unit = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}
    def us(cell):
        m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", cell.strip())
        return float(m.group(1)) * unit[m.group(2)], 0.006 * unit[m.group(2)]
    rows = [l for l in open(report) if re.match(r"\| +[0-9.]+ % \|", l)]
    assert len(rows) == npoints, rows
    for l in rows:
        c = [x.strip() for x in l.strip().strip("|").split("|")]
        pct = float(c[0].split()[0])
        for i, s in enumerate(series):
            v, tol = us(c[3 + i])
            got = float(point(s, pct).get("data-latency-us"))
            assert abs(got - v) <= tol + 0.05, (s, pct, got, v)
        assert abs(float(point("p50", pct).get("data-asked")) - float(c[1])) <= 0.5
        assert abs(float(point("p50", pct).get("data-achieved")) - float(c[2])) <= 0.5
print("chart ok:", npoints, "points")
EOF
}

# 1. JSON and SVG: the closed loop, then 20, 50 and 80 % of it
bench --sweep --sweep-steps 20,50,80 -c 4 -d 300ms --max-lag 0 --label 'petrel & <co>' \
    --json --plot "$TMP/s.svg" "$URL/hello" >"$TMP/s.json" 2>"$TMP/s.err" || fail "sweep exited $?"
$PY - "$TMP/s.json" <<'EOF' || fail "sweep JSON"
import json, sys
j = json.load(open(sys.argv[1]))["sweep"]
c = j["closed_loop"]
assert c["loop"] == "closed" and c["requests"] > 0 and c["errors"]["total"] == 0
assert abs(j["max_rate"] - c["rps"]) < 0.01, (j["max_rate"], c["rps"])
assert j["max_from"] == "closed-loop maximum" and j["steps_percent"] == [20, 50, 80]
assert [s["percent"] for s in j["steps"]] == [20, 50, 80]
for s in j["steps"]:
    assert s["loop"] == "open" and s["label"] == "petrel & <co>"
    assert abs(s["rate"]["asked"] - j["max_rate"] * s["percent"] / 100) < 0.01
    assert s["requests"] == s["rate"]["scheduled"] > 0 and s["errors"]["total"] == 0
    assert 0 < s["latency_us"]["p50"] <= s["latency_us"]["p99"] <= s["latency_us"]["max"]
EOF
grep -q 'sweep: 80 % = ' "$TMP/s.err" || fail "no progress on stderr"
check_svg "$TMP/s.svg" json "$TMP/s.json"
grep -q 'petrel &amp; &lt;co&gt;' "$TMP/s.svg" || fail "the label is not escaped in the chart"

# 2. the human table and its chart
bench --sweep --sweep-steps 25,75 -c 4 -d 300ms --max-lag 0 --plot "$TMP/t.svg" "$URL/hello" \
    >"$TMP/t.txt" 2>/dev/null || fail "human sweep exited $?"
grep -q '^| *load | asked req/s | achieved req/s |' "$TMP/t.txt" || fail "no table header"
grep -q "^Chart: $TMP/t.svg" "$TMP/t.txt" || fail "the chart is not named"
check_svg "$TMP/t.svg" table "$TMP/t.txt"

# 3. --sweep-max: no closed loop, the rates are fractions of the given one
bench --sweep --sweep-max 2000 --sweep-steps 50,100 -c 4 -d 500ms --max-lag 0 --json \
    "$URL/hello" >"$TMP/m.json" 2>/dev/null || fail "--sweep-max exited $?"
$PY - "$TMP/m.json" <<'EOF' || fail "--sweep-max JSON"
import json, sys
j = json.load(open(sys.argv[1]))["sweep"]
assert j["closed_loop"] is None and j["max_rate"] == 2000
for s, want in zip(j["steps"], (1000, 2000)):
    assert s["rate"]["asked"] == want and abs(s["rate"]["achieved"] - want) <= want * 0.02, s["rate"]
EOF

# 4. PNG, by gnuplot
if command -v gnuplot >/dev/null; then
    bench --sweep --sweep-steps 50,90 -c 4 -d 200ms --max-lag 0 --plot "$TMP/p.png" "$URL/hello" \
        >/dev/null 2>"$TMP/p.err" || fail "PNG sweep exited $?"
    $PY - "$TMP/p.png" <<'EOF' || fail "not a valid PNG"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n"
pos, kinds = 8, []
while pos < len(b):
    n, = struct.unpack(">I", b[pos:pos + 4])
    kind, data = b[pos + 4:pos + 8], b[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", b[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + data) == crc, kind
    kinds.append(kind)
    if kind == b"IHDR":
        assert struct.unpack(">II", data[:8]) == (900, 560)
    pos += 12 + n
assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
EOF
else
    echo "gnuplot not found: the PNG itself is not checked"
fi
rc=0
PATH=/nonexistent "$BENCH" --sweep --plot "$TMP/q.png" "$URL/hello" >/dev/null 2>"$TMP/q.err" || rc=$?
expect "$rc" 2 "--plot .png without gnuplot"
grep -q 'gnuplot-nox' "$TMP/q.err" || fail "no package named: $(cat "$TMP/q.err")"
[[ ! -e $TMP/q.png ]] || fail "a chart file was left behind"

# 5. refused before any load (exit 2, the flag named)
refused "--sweep runs each rate for -d" --sweep -n 100 "$URL/hello"
refused "go with --sweep" --plot "$TMP/x.svg" "$URL/hello"
refused "go with --sweep" --sweep-max 100 "$URL/hello"
refused "must end in .svg or .png" --sweep --plot "$TMP/x.txt" "$URL/hello"
refused "--plot: $TMP/no/x.svg: No such file or directory" --sweep --plot "$TMP/no/x.svg" "$URL/hello"
refused "--sweep-steps: want up to 32 increasing" --sweep --sweep-steps 50,20 "$URL/hello"
refused "--sweep-steps: want up to 32 increasing" --sweep --sweep-steps 0,20 "$URL/hello"
refused "--sweep-steps: want up to 32 increasing" --sweep --sweep-steps 10,x "$URL/hello"
refused "--sweep-steps: want up to 32 increasing" --sweep --sweep-steps 100,1001 "$URL/hello"
refused "--sweep-steps: want up to 32 increasing" --sweep --sweep-steps "$(seq -s, 1 33)" "$URL/hello"
refused "--sweep-max: bad rate" --sweep --sweep-max 0 "$URL/hello"
stop_petrel

# 6. nothing answers: no maximum, exit 2, and no chart
rc=0
bench --sweep -c 2 -d 300ms --plot "$TMP/d.svg" "$URL/hello" >/dev/null 2>"$TMP/d.err" || rc=$?
expect "$rc" 2 "sweep against a closed port"
grep -q 'no maximum rate to sweep' "$TMP/d.err" || fail "said: $(cat "$TMP/d.err")"
[[ ! -e $TMP/d.svg ]] || fail "a chart of nothing was written"
echo "PASS: test_bench_sweep"
