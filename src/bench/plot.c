/*
 * plot.c -- petrel-bench's latency-vs-load chart (--sweep --plot FILE).
 *
 * x: the rate asked (requests per second, linear, from 0); y: latency on a
 * log scale (percentiles of a run span decades); one line per percentile
 * (p50, p90, p99, p99.9, max), named at its right end; a dashed vertical
 * line at the 100 % rate; each step's percentage above its points.
 *
 * SVG is written here, as text: self-contained (no scripts, no fonts to
 * fetch: the generic sans-serif family), readable in any browser.  Every
 * point is a <circle class="pt"> whose data-* attributes carry its figures
 * exactly as the JSON report prints them (rates with 2 decimals, latency in
 * microseconds with 1) and whose <title> says them in words; the axis ticks
 * carry data-value, so a test can check both the numbers and where they are
 * drawn.  PNG is drawn by gnuplot (pngcairo) from the same figures, ticks
 * and labels.
 */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BENCH_HIST_ONLY
#include "bench.h"

extern char **environ;

const char *const bench_plot_pct_names[BENCH_PLOT_NPCT] = {"p50", "p90", "p99", "p99.9", "max"};

/* the lines: colour, width, dashes */
static const struct {
    const char *color;
    double width;
    const char *dash; /* SVG stroke-dasharray, NULL: solid */
    int gp_dash;      /* gnuplot dashtype */
} style[BENCH_PLOT_NPCT] = {
    {"#1f77b4", 2, NULL, 1},  {"#2ca02c", 2, NULL, 1},    {"#d62728", 3, NULL, 1},
    {"#9467bd", 2, "7 3", 2}, {"#6b6b6b", 1.5, "2 3", 3},
};

/* geometry */
enum { W = 900, H = 560, PX0 = 84, PX1 = 760, PY0 = 92, PY1 = 470 };

#define MAXTICKS 64

typedef struct axes {
    double xmax;     /* requests per second at PX1 */
    double ylo, yhi; /* ns at PY1 and PY0 */
    int nx, ny;
    double xt[MAXTICKS];  /* x ticks */
    double yt[MAXTICKS];  /* y ticks */
    int ymajor[MAXTICKS]; /* labelled (else a light grid line only) */
} axes_t;

static double nice_step(double range, int n)
{
    double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
}

/* the 1-2-5 value at or below (down) or at or above (!down) v */
static double ladder(double v, int down)
{
    double mag = pow(10, floor(log10(v)));
    static const double m[] = {1, 2, 5, 10};
    if (down) {
        double r = mag;
        for (int i = 0; i < 4; i++)
            if (m[i] * mag <= v * (1 + 1e-9))
                r = m[i] * mag;
        return r;
    }
    for (int i = 0; i < 4; i++)
        if (m[i] * mag >= v * (1 - 1e-9))
            return m[i] * mag;
    return 10 * mag;
}

static void make_axes(const bench_plot_t *p, axes_t *a)
{
    double xdata = p->max_rate, lo = INFINITY, hi = 0;
    for (int i = 0; i < p->npoints; i++) {
        const bench_plot_point_t *q = &p->pts[i];
        if (q->asked > xdata)
            xdata = q->asked;
        for (int k = 0; k < BENCH_PLOT_NPCT; k++) {
            double v = q->lat[k] > 1 ? q->lat[k] : 1;
            if (v < lo)
                lo = v;
            if (v > hi)
                hi = v;
        }
    }
    if (xdata <= 0)
        xdata = 1;
    double step = nice_step(xdata * 1.04, 6);
    a->xmax = ceil(xdata * 1.04 / step) * step;
    a->nx = 0;
    for (double x = 0; x <= a->xmax * (1 + 1e-9) && a->nx < MAXTICKS; x += step)
        a->xt[a->nx++] = x;
    if (!(hi > 0)) /* no points */
        lo = 1e4, hi = 1e6;
    a->ylo = ladder(lo / 1.15, 1);
    a->yhi = ladder(hi * 1.15, 0);
    if (a->yhi / a->ylo < 10)
        a->yhi = ladder(a->ylo * 10, 0);
    int decades = (int)ceil(log10(a->yhi / a->ylo) - 1e-9);
    a->ny = 0;
    for (double mag = pow(10, floor(log10(a->ylo) + 1e-9)); mag <= a->yhi * (1 + 1e-9); mag *= 10) {
        static const double m[] = {1, 2, 5};
        for (int i = 0; i < 3 && a->ny < MAXTICKS; i++) {
            double v = m[i] * mag;
            if (v < a->ylo * (1 - 1e-9) || v > a->yhi * (1 + 1e-9))
                continue;
            a->yt[a->ny] = v;
            a->ymajor[a->ny] = i == 0 || decades <= 3;
            a->ny++;
        }
    }
}

static double xpos(const axes_t *a, double v)
{
    return PX0 + v / a->xmax * (PX1 - PX0);
}

static double ypos(const axes_t *a, double ns)
{
    if (ns < 1)
        ns = 1;
    return PY1 - (log(ns) - log(a->ylo)) / (log(a->yhi) - log(a->ylo)) * (PY1 - PY0);
}

/* 20k, 2.5k, 1.2M, 500 */
static const char *fmt_rate(char *buf, size_t n, double v)
{
    if (v >= 1e6)
        snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%gk", v / 1e3);
    else
        snprintf(buf, n, "%g", v);
    return buf;
}

/* 51,234 */
static const char *fmt_count(char *buf, size_t n, double v)
{
    char t[32];
    snprintf(t, sizeof t, "%.0f", v);
    size_t len = strlen(t), k = 0;
    for (size_t i = 0; i < len && k + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = t[i];
    }
    buf[k] = 0;
    return buf;
}

/* a latency, ns: 850 ns, 12.5 µs, 3.2 ms, 1.25 s */
static const char *fmt_lat(char *buf, size_t n, double ns)
{
    return bench_fmt_ns(buf, n, ns, 1);
}

/* text for XML content and attribute values */
static void xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (e)
            fputs(e, f);
        else if ((unsigned char)*s >= 0x20 || *s == '\t')
            fputc(*s, f);
    }
}

/* the y of the label at the right end of each line, moved apart so that
 * none overlaps (at least 15 px between), in the order of the lines */
static void label_positions(const axes_t *a, const bench_plot_t *p, double *ly)
{
    const bench_plot_point_t *last = &p->pts[p->npoints - 1];
    int order[BENCH_PLOT_NPCT];
    for (int k = 0; k < BENCH_PLOT_NPCT; k++) {
        ly[k] = ypos(a, last->lat[k]);
        order[k] = k;
    }
    for (int i = 1; i < BENCH_PLOT_NPCT; i++) /* by y, top first */
        for (int j = i; j > 0 && ly[order[j]] < ly[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 1; i < BENCH_PLOT_NPCT; i++)
        if (ly[order[i]] < ly[order[i - 1]] + 15)
            ly[order[i]] = ly[order[i - 1]] + 15;
    double over = ly[order[BENCH_PLOT_NPCT - 1]] - (PY1 + 10);
    if (over > 0)
        for (int i = 0; i < BENCH_PLOT_NPCT; i++)
            ly[i] -= over;
}

static void grid_line(FILE *f, double x1, double y1, double x2, double y2, const char *color)
{
    fprintf(f,
            "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
            "stroke-width=\"1\"/>\n",
            x1, y1, x2, y2, color);
}

int bench_plot_svg(FILE *f, const bench_plot_t *p)
{
    axes_t a;
    make_axes(p, &a);
    char b1[64], b2[64], b3[64], b4[64];
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" "
            "data-max-rate=\"%.2f\" data-points=\"%d\">\n",
            W, H, W, H, p->max_rate, p->npoints);
    fprintf(f, "<title>");
    xml(f, p->title);
    fprintf(f, "</title>\n<desc>Latency percentiles (log scale) against the rate of requests "
               "asked; each point is one run at a fixed rate, latency measured from each "
               "request's intended send time.</desc>\n");
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    /* titles */
    fprintf(f, "<text x=\"%d\" y=\"30\" font-size=\"17\" font-weight=\"bold\" fill=\"#222\">", PX0);
    xml(f, p->title);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"52\" font-size=\"13\" fill=\"#444\">", PX0);
    xml(f, p->subtitle);
    fprintf(f, "</text>\n");
    /* grid and ticks */
    fprintf(f, "<g class=\"yaxis\">\n");
    for (int i = 0; i < a.ny; i++) {
        double y = ypos(&a, a.yt[i]);
        grid_line(f, PX0, y, PX1, y, a.ymajor[i] ? "#d0d0d0" : "#ececec");
        if (a.ymajor[i])
            fprintf(f,
                    "<text class=\"ytick\" data-value=\"%.0f\" x=\"%d\" y=\"%.2f\" "
                    "text-anchor=\"end\" fill=\"#333\">%s</text>\n",
                    a.yt[i], PX0 - 8, y + 4, fmt_lat(b1, sizeof b1, a.yt[i]));
    }
    fprintf(f, "</g>\n<g class=\"xaxis\">\n");
    for (int i = 0; i < a.nx; i++) {
        double x = xpos(&a, a.xt[i]);
        grid_line(f, x, PY0, x, PY1, "#ececec");
        fprintf(f,
                "<text class=\"xtick\" data-value=\"%.0f\" x=\"%.2f\" y=\"%d\" "
                "text-anchor=\"middle\" fill=\"#333\">%s</text>\n",
                a.xt[i], x, PY1 + 18, fmt_rate(b1, sizeof b1, a.xt[i]));
    }
    fprintf(f, "</g>\n");
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
            PX0, PY0, PX1 - PX0, PY1 - PY0);
    /* axis titles */
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#222\">requests per second "
            "asked (open loop: sent at fixed intervals, whatever the answers)</text>\n",
            (PX0 + PX1) / 2, PY1 + 42);
    fprintf(f,
            "<text x=\"20\" y=\"%d\" text-anchor=\"middle\" fill=\"#222\" "
            "transform=\"rotate(-90 20 %d)\">latency, log scale (from the intended send "
            "time)</text>\n",
            (PY0 + PY1) / 2, (PY0 + PY1) / 2);
    /* the 100 % rate */
    if (p->max_rate > 0) {
        double x = xpos(&a, p->max_rate);
        fprintf(f,
                "<line class=\"max-rate\" data-value=\"%.2f\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" "
                "y2=\"%d\" stroke=\"#444\" stroke-width=\"1.2\" stroke-dasharray=\"5 4\"/>\n",
                p->max_rate, x, PY0, x, PY1);
        fprintf(f,
                "<text x=\"%.2f\" y=\"%d\" text-anchor=\"end\" font-size=\"11\" fill=\"#444\">"
                "100 %% = %s req/s, ",
                x - 4, PY1 - 8, fmt_count(b1, sizeof b1, p->max_rate));
        xml(f, p->max_what ? p->max_what : "the maximum");
        fprintf(f, "</text>\n");
    }
    /* the steps' percentages, above the plot (skipped where they would collide) */
    double lastx = -100;
    for (int i = p->npoints - 1; i >= 0; i--) {
        double x = xpos(&a, p->pts[i].asked);
        if (lastx - x < 30 && i != p->npoints - 1)
            continue;
        fprintf(f,
                "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\" "
                "fill=\"#666\">%g %%</text>\n",
                x, PY0 - 8, p->pts[i].percent);
        lastx = x;
    }
    /* errors: a red mark under the axis */
    for (int i = 0; i < p->npoints; i++) {
        if (!p->pts[i].errors)
            continue;
        double x = xpos(&a, p->pts[i].asked);
        fprintf(f,
                "<path class=\"errors\" data-errors=\"%llu\" d=\"M%.2f %d l-5 9 h10 z\" "
                "fill=\"#d62728\"><title>%llu errors at %g %%</title></path>\n",
                (unsigned long long)p->pts[i].errors, x, PY1 + 22,
                (unsigned long long)p->pts[i].errors, p->pts[i].percent);
    }
    /* the lines, p50 first (the others are drawn over it) */
    double ly[BENCH_PLOT_NPCT];
    if (p->npoints > 0)
        label_positions(&a, p, ly);
    for (int k = 0; k < BENCH_PLOT_NPCT && p->npoints > 0; k++) {
        fprintf(f, "<g class=\"series\" data-series=\"%s\">\n", bench_plot_pct_names[k]);
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%g\"%s%s%s points=\"",
                style[k].color, style[k].width, style[k].dash ? " stroke-dasharray=\"" : "",
                style[k].dash ? style[k].dash : "", style[k].dash ? "\"" : "");
        for (int i = 0; i < p->npoints; i++)
            fprintf(f, "%s%.2f,%.2f", i ? " " : "", xpos(&a, p->pts[i].asked),
                    ypos(&a, p->pts[i].lat[k]));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < p->npoints; i++) {
            const bench_plot_point_t *q = &p->pts[i];
            fprintf(f,
                    "<circle class=\"pt\" data-series=\"%s\" data-percent=\"%g\" "
                    "data-asked=\"%.2f\" data-achieved=\"%.2f\" data-latency-us=\"%.1f\" "
                    "data-errors=\"%llu\" cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\" "
                    "stroke=\"#fff\" stroke-width=\"1\">",
                    bench_plot_pct_names[k], q->percent, q->asked, q->achieved, q->lat[k] / 1e3,
                    (unsigned long long)q->errors, xpos(&a, q->asked), ypos(&a, q->lat[k]),
                    style[k].color);
            fprintf(f,
                    "<title>%s %s at %g %% (%s req/s asked, %s achieved; %llu errors, client "
                    "lag up to %s)</title></circle>\n",
                    bench_plot_pct_names[k], fmt_lat(b1, sizeof b1, q->lat[k]), q->percent,
                    fmt_count(b2, sizeof b2, q->asked), fmt_count(b3, sizeof b3, q->achieved),
                    (unsigned long long)q->errors, fmt_lat(b4, sizeof b4, q->lag_max));
        }
        double x = xpos(&a, p->pts[p->npoints - 1].asked);
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.2f\" fill=\"%s\" font-weight=\"bold\">%s</text>\n"
                "</g>\n",
                x + 10, ly[k] + 4, style[k].color, bench_plot_pct_names[k]);
    }
    /* footnote */
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#666\">Each point: one run at a "
            "fixed rate. Latency counts from when each request was due, so a server stall "
            "counts</text>\n<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#666\">for every "
            "request due during it (no coordinated omission).</text>\n",
            PX0, H - 26, PX0, H - 12);
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------- */
/* PNG, by gnuplot */

static int find_gnuplot(char *path, size_t n)
{
    const char *env = getenv("PATH");
    const char *s = env && *env ? env : "/usr/bin:/bin";
    while (*s) {
        const char *e = strchr(s, ':');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len > 0 && len + 9 < n) {
            memcpy(path, s, len);
            memcpy(path + len, "/gnuplot", 9);
            if (access(path, X_OK) == 0)
                return 0;
        }
        s += len + (e ? 1 : 0);
    }
    return -1;
}

const char *bench_plot_png_missing(void)
{
    char path[4096];
    if (find_gnuplot(path, sizeof path) < 0)
        return "a .png chart is drawn by gnuplot, which is not on PATH (Debian package "
               "gnuplot-nox); or write an .svg";
    return NULL;
}

/* a gnuplot string in single quotes: '' for ' */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('\'', f);
}

int bench_plot_png(const char *path, const bench_plot_t *p, const char **why)
{
    char gp[4096];
    if (find_gnuplot(gp, sizeof gp) < 0) {
        *why = bench_plot_png_missing();
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/petrel-bench-plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        *why = strerror(errno);
        return -1;
    }
    char data[4200], script[4200];
    snprintf(data, sizeof data, "%s/points.dat", dir);
    snprintf(script, sizeof script, "%s/chart.gp", dir);
    int rc = -1;
    FILE *f = fopen(data, "w");
    if (!f) {
        *why = strerror(errno);
        goto out;
    }
    for (int i = 0; i < p->npoints; i++) {
        fprintf(f, "%.2f", p->pts[i].asked);
        for (int k = 0; k < BENCH_PLOT_NPCT; k++)
            fprintf(f, " %.1f", p->pts[i].lat[k] > 1 ? p->pts[i].lat[k] : 1);
        fprintf(f, " %g\n", p->pts[i].percent);
    }
    if (fclose(f) != 0) {
        *why = strerror(errno);
        goto out;
    }
    axes_t a;
    make_axes(p, &a);
    char b1[64];
    f = fopen(script, "w");
    if (!f) {
        *why = strerror(errno);
        goto out;
    }
    fprintf(f, "set terminal pngcairo size %d,%d font 'sans,10' background '#ffffff'\n", W, H);
    fprintf(f, "set output ");
    gp_str(f, path);
    fprintf(f, "\nset encoding utf8\nset title ");
    {
        char t[1100];
        snprintf(t, sizeof t, "%s\\n%s", p->title, p->subtitle);
        /* a double-quoted string, for the line break */
        fputc('"', f);
        for (const char *s = t; *s; s++) {
            if (*s == '"' || (*s == '\\' && s[1] != 'n'))
                fputc('\\', f);
            fputc(*s, f);
        }
        fputc('"', f);
    }
    fprintf(f, "\nset logscale y\nset yrange [%g:%g]\nset xrange [0:%g]\n", a.ylo, a.yhi, a.xmax);
    fprintf(f, "set ytics (");
    int first = 1;
    for (int i = 0; i < a.ny; i++) {
        fprintf(f, "%s", first ? "" : ", ");
        first = 0;
        if (a.ymajor[i])
            fprintf(f, "'%s' %g", fmt_lat(b1, sizeof b1, a.yt[i]), a.yt[i]);
        else
            fprintf(f, "'' %g 1", a.yt[i]);
    }
    fprintf(f, ")\nset xtics (");
    for (int i = 0; i < a.nx; i++)
        fprintf(f, "%s'%s' %g", i ? ", " : "", fmt_rate(b1, sizeof b1, a.xt[i]), a.xt[i]);
    fprintf(f, ")\nset grid xtics ytics mytics lc rgb '#dddddd'\n");
    fprintf(f, "set xlabel 'requests per second asked (open loop: sent at fixed intervals, "
               "whatever the answers)'\n");
    fprintf(f, "set ylabel 'latency, log scale (from the intended send time)'\n");
    fprintf(f, "set key outside right top title 'percentile'\n");
    if (p->max_rate > 0) {
        fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#444444'\n",
                p->max_rate, p->max_rate);
        char lab[200];
        snprintf(lab, sizeof lab, "100 %% = %s req/s, %s", fmt_count(b1, sizeof b1, p->max_rate),
                 p->max_what ? p->max_what : "the maximum");
        fprintf(f, "set label ");
        gp_str(f, lab);
        fprintf(f, " at %g, graph 0.04 right offset -1,0 font 'sans,9'\n", p->max_rate);
    }
    fprintf(f, "plot ");
    for (int k = 0; k < BENCH_PLOT_NPCT; k++) {
        fprintf(f, "%s", k ? ", \\\n     " : "");
        gp_str(f, data);
        fprintf(f, " using 1:%d with linespoints pt 7 ps 0.8 lw %g dt %d lc rgb '%s' title '%s'",
                k + 2, style[k].width, style[k].gp_dash, style[k].color, bench_plot_pct_names[k]);
    }
    fprintf(f, ", \\\n     ");
    gp_str(f, data);
    fprintf(f,
            " using 1:%d:(sprintf('%%g %%%%', $7)) with labels offset 0,1 font 'sans,8' "
            "tc rgb '#666666' notitle\n",
            2 + BENCH_PLOT_P50);
    if (fclose(f) != 0) {
        *why = strerror(errno);
        goto out;
    }
    pid_t pid;
    char *argv[] = {gp, script, NULL};
    int err = posix_spawn(&pid, gp, NULL, NULL, argv, environ);
    if (err) {
        *why = strerror(err);
        goto out;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            *why = strerror(errno);
            goto out;
        }
    struct stat sb;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        *why = "gnuplot failed (its message is above)";
    else if (stat(path, &sb) < 0 || sb.st_size == 0)
        *why = "gnuplot wrote no chart";
    else
        rc = 0;
out:
    unlink(data);
    unlink(script);
    rmdir(dir);
    return rc;
}
