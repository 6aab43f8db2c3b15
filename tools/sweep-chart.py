#!/usr/bin/python3
"""sweep-chart.py -- several servers' `petrel-bench --sweep --json` outputs in
one latency-vs-load chart (SVG, written directly) and markdown tables.

    tools/sweep-chart.py [--title T] [--svg OUT.svg] [--md OUT.md] [--runs runs.tsv]
                         NAME=FILE.json ...

NAME names the server; give a NAME more than once to join its sweeps (e.g.
one from its own maximum and one at another server's rates): its curve then
runs through all their steps, ordered by the rate asked.  The chart has one
panel per percentile (p50, p99, p99.9), the rate asked on x (linear, from 0),
the latency on y (log scale, the same in every panel), one line per server,
and a dashed vertical line at each server's closed-loop maximum.  Steps with
errors have a red ring, steps where the client lagged past its bound a black
cross; every point has a <title> with its figures.

The markdown has, per sweep, the table petrel-bench prints, then one table
at the rates all sweeps share (p50 / p99 per server) when there are any.
With --runs (the runs.tsv of tools/sweep-peers.sh, whose joined sweeps are
named PROTOCOL.SERVER.PHASE.json), the tables get a column with the share
of the pinned cores that other processes took during each step's run.
Only the Python standard library is used.
"""
import argparse
import json
import math
import sys
from html import escape

PANELS = [("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")]
COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#6b6b6b", "#8c564b"]
W, H = 1200, 520
PW, PH = 310, 340  # one panel's plot area
X0, Y0, GAP = 80, 100, 85  # first panel's left, top; gap between panels


def fmt_time(us):
    if us < 1000:
        return "%.0f µs" % us if us >= 10 else "%.1f µs" % us
    if us < 1e6:
        return "%.2f ms" % (us / 1e3) if us < 1e4 else "%.1f ms" % (us / 1e3)
    return "%.2f s" % (us / 1e6)


def tick_label(us):
    if us < 1000:
        return "%g µs" % us
    if us < 1e6:
        return "%g ms" % (us / 1e3)
    return "%g s" % (us / 1e6)


def fmt_rate(r):
    return "{:,.0f}".format(r)


def load(arg):
    if "=" not in arg:
        sys.exit("sweep-chart.py: '%s': expected NAME=FILE.json" % arg)
    name, path = arg.split("=", 1)
    try:
        with open(path) as f:
            sw = json.load(f)["sweep"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit("sweep-chart.py: %s: not a petrel-bench --sweep --json output (%s)" % (path, e))
    return name, path, sw


def step_row(st):
    lat = st["latency_us"]
    return {
        "percent": st["percent"],
        "asked": st["rate"]["asked"],
        "achieved": st["rate"]["achieved"],
        "p50": lat["p50"],
        "p90": lat["p90"],
        "p99": lat["p99"],
        "p999": lat["p999"],
        "max": lat["max"],
        "errors": st["errors"]["total"],
        "lag_max": st["lag_us"]["max"],
        "lagged": st["lag_us"]["exceeded"],
    }


def load_runs(path):
    """(protocol, server, phase, percent) -> noise % of the last attempt"""
    noise = {}
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            noise[(r["protocol"], r["server"], r["phase"], r["step_pct"])] = r["noise_pct"]
    return noise


def md_sweep(name, path, sw, noise=None):
    out = []
    key = path.rsplit("/", 1)[-1].split(".")[:3]
    closed = sw.get("closed_loop")
    if closed:
        head = "closed-loop maximum %s req/s (p50 %s, p99 %s, %d errors)" % (
            fmt_rate(sw["max_rate"]), fmt_time(closed["latency_us"]["p50"]),
            fmt_time(closed["latency_us"]["p99"]), closed["errors"]["total"])
    else:
        head = "100 %% = %s req/s (--sweep-max)" % fmt_rate(sw["max_rate"])
    out.append("**%s** (%s): %s; %g s at each rate" % (name, path.rsplit("/", 1)[-1], head,
                                                       sw["duration_s"]))
    out.append("")
    out.append("| load | asked req/s | achieved req/s | p50 | p90 | p99 | p99.9 | max "
               "| p99/p50 | errors | client lag |" + (" other procs |" if noise else ""))
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if noise else ""))
    for st in sw["steps"]:
        r = step_row(st)
        ratio = "%.2fx" % (r["p99"] / r["p50"]) if r["p50"] > 0 else "-"
        out.append("| %g %% | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s%s |" % (
            r["percent"], fmt_rate(r["asked"]), fmt_rate(r["achieved"]), fmt_time(r["p50"]),
            fmt_time(r["p90"]), fmt_time(r["p99"]), fmt_time(r["p999"]), fmt_time(r["max"]),
            ratio, r["errors"], fmt_time(r["lag_max"]), " !" if r["lagged"] else "")
            + (" %s %% |" % noise.get((key[0], key[1], key[2], "%g" % r["percent"]), "?")
               if noise else ""))
    out.append("")
    return out


def md_common(sweeps):
    """p50 / p99 per server at the rates asked in more than one server's sweeps"""
    by_rate = {}
    names = []
    for name, _, sw in sweeps:
        if name not in names:
            names.append(name)
        for st in sw["steps"]:
            key = round(st["rate"]["asked"])
            by_rate.setdefault(key, {})[name] = step_row(st)
    common = [k for k in sorted(by_rate) if len(by_rate[k]) == len(names)]
    if len(names) < 2 or not common:
        return []
    out = ["At the same rates (p50 / p99; **bold**: the lowest p99):", ""]
    out.append("| asked req/s | " + " | ".join(names) + " |")
    out.append("|---:|" + "---:|" * len(names))
    for k in common:
        row = by_rate[k]
        best = min(row[n]["p99"] for n in names)
        cells = []
        for n in names:
            r = row[n]
            p99 = fmt_time(r["p99"])
            if r["p99"] == best:
                p99 = "**%s**" % p99
            cells.append("%s / %s%s" % (fmt_time(r["p50"]), p99,
                                        " (%d err)" % r["errors"] if r["errors"] else ""))
        out.append("| %s | %s |" % (fmt_rate(k), " | ".join(cells)))
    out.append("")
    return out


def nice_step(span, n):
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    for f in (1, 2, 2.5, 5, 10):
        if raw <= f * mag:
            return f * mag
    return 10 * mag


def svg(title, sweeps):
    series = {}  # name -> list of step rows, by rate
    maxes = {}  # name -> closed-loop maximum
    for name, _, sw in sweeps:
        series.setdefault(name, [])
        series[name] += [step_row(st) for st in sw["steps"]]
        if sw.get("closed_loop"):
            maxes[name] = sw["max_rate"]
    for name in series:
        series[name].sort(key=lambda r: r["asked"])
    names = list(series)
    color = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    rows = [r for n in names for r in series[n]]
    if not rows:
        sys.exit("sweep-chart.py: no steps to draw")
    xmax_data = max([r["asked"] for r in rows] + list(maxes.values()))
    xstep = nice_step(xmax_data, 5)
    xmax = math.ceil(xmax_data * 1.02 / xstep) * xstep
    vals = [r[k] for r in rows for k, _ in PANELS if r[k] > 0]
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    if hi <= lo:
        hi = lo * 10

    def xpos(px, x):
        return px + PW * x / xmax

    def ypos(y):
        y = max(y, lo)
        return Y0 + PH * (1 - (math.log10(y) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

    o = []
    o.append('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
             'font-family="sans-serif" font-size="12">' % (W, H, W, H))
    o.append('<rect width="100%" height="100%" fill="white"/>')
    o.append('<text x="%d" y="28" font-size="17" font-weight="bold">%s</text>' % (X0, escape(title)))
    d0 = sweeps[0][2]
    o.append('<text x="%d" y="50" fill="#444">Open loop (petrel-bench --rate): latency from each '
             "request's intended send time; %g s at each rate. Dashed: each server's closed-loop "
             "maximum.</text>" % (X0, d0["duration_s"]))
    # legend
    lx = X0
    for n in names:
        o.append('<line x1="%d" y1="70" x2="%d" y2="70" stroke="%s" stroke-width="3"/>'
                 % (lx, lx + 24, color[n]))
        label = n + (" (max %s req/s)" % fmt_rate(maxes[n]) if n in maxes else "")
        o.append('<text x="%d" y="74">%s</text>' % (lx + 30, escape(label)))
        lx += 40 + 7 * len(label)
    o.append('<circle cx="%d" cy="70" r="5" fill="none" stroke="red" stroke-width="2"/>'
             '<text x="%d" y="74">errors</text>' % (lx, lx + 10))
    lx += 70
    o.append('<path d="M%d 66 l8 8 m0 -8 l-8 8" stroke="black" stroke-width="1.5"/>'
             '<text x="%d" y="74">client lag above its bound</text>' % (lx - 4, lx + 10))
    for i, (key, label) in enumerate(PANELS):
        px = X0 + i * (PW + GAP)
        o.append('<g class="panel" data-percentile="%s">' % label)
        o.append('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>'
                 % (px + PW / 2 - 15, Y0 - 8, label))
        # y grid: decades labelled, 2 and 5 light
        d = math.log10(lo)
        while d <= math.log10(hi) + 1e-9:
            for m in (1, 2, 5):
                v = m * 10 ** d
                if v < lo * 0.999 or v > hi * 1.001:
                    continue
                y = ypos(v)
                o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>'
                         % (px, y, px + PW, y, "#ccc" if m == 1 else "#eee"))
                if m == 1 or (hi / lo <= 1e3):
                    o.append('<text x="%d" y="%.1f" text-anchor="end" fill="#333">%s</text>'
                             % (px - 4, y + 4, tick_label(v)))
            d += 1
        x = 0.0
        while x <= xmax + 1e-9:
            xp = xpos(px, x)
            o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>'
                     % (xp, Y0, xp, Y0 + PH))
            o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>'
                     % (xp, Y0 + PH + 16, "%gk" % (x / 1000) if x else "0"))
            x += xstep
        o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>'
                 % (px, Y0, PW, PH))
        o.append('<text x="%d" y="%d" text-anchor="middle">requests/s asked</text>'
                 % (px + PW / 2, Y0 + PH + 36))
        for n in names:
            if n in maxes:
                xp = xpos(px, maxes[n])
                o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" '
                         'stroke-dasharray="5 4" stroke-width="1.2"/>'
                         % (xp, Y0, xp, Y0 + PH, color[n]))
        for n in names:
            pts = [(xpos(px, r["asked"]), ypos(r[key]), r) for r in series[n] if r[key] > 0]
            if not pts:
                continue
            o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                     % (color[n], " ".join("%.1f,%.1f" % (a, b) for a, b, _ in pts)))
            for a, b, r in pts:
                tip = "%s at %s req/s asked (%g %% of its sweep), %s achieved: %s %s%s" % (
                    n, fmt_rate(r["asked"]), r["percent"], fmt_rate(r["achieved"]), label,
                    fmt_time(r[key]), ", %d errors" % r["errors"] if r["errors"] else "")
                o.append('<circle class="pt" cx="%.1f" cy="%.1f" r="3" fill="%s" '
                         'data-series="%s" data-percentile="%s" data-asked="%.2f" '
                         'data-latency-us="%.1f" data-errors="%d"><title>%s</title></circle>'
                         % (a, b, color[n], escape(n), label, r["asked"], r[key], r["errors"],
                            escape(tip)))
                if r["errors"]:
                    o.append('<circle cx="%.1f" cy="%.1f" r="6" fill="none" stroke="red" '
                             'stroke-width="2"/>' % (a, b))
                if r["lagged"]:
                    o.append('<path d="M%.1f %.1f l8 8 m0 -8 l-8 8" stroke="black" '
                             'stroke-width="1.5"/>' % (a - 4, b - 4))
        o.append("</g>")
    o.append('<text x="%d" y="%d" fill="#444">latency (log scale), the same scale in every '
             "panel</text>" % (X0, H - 12))
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--title", default="Latency vs load")
    ap.add_argument("--svg")
    ap.add_argument("--md")
    ap.add_argument("--runs")
    ap.add_argument("sweeps", nargs="+", metavar="NAME=FILE.json")
    a = ap.parse_args()
    sweeps = [load(s) for s in a.sweeps]
    md = []
    noise = load_runs(a.runs) if a.runs else None
    for s in sweeps:
        md += md_sweep(*s, noise=noise)
    md += md_common(sweeps)
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(md))
    else:
        print("\n".join(md))
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(a.title, sweeps))


if __name__ == "__main__":
    main()
