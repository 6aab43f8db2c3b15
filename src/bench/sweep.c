/*
 * sweep.c -- petrel-bench --sweep: latency against load.
 *
 * First the maximum rate: a closed-loop run with the same options (or the
 * rate of --sweep-max).  Then, for each step (a percentage of it), an
 * open-loop run at that rate (--rate), each for -d after --warmup, each on
 * new connections.  The result is one table row a step (a markdown table, so
 * it pastes into documents), the whole of every run in --json, and with
 * --plot the chart (plot.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

typedef struct step {
    double percent;
    bench_opts_t o;
    bench_result_t r;
} step_t;

/* "HTTP/1.1 keep-alive, 100 connections, 1 thread" and the like */
static void describe(const bench_opts_t *o, char *buf, size_t n)
{
    const char *mode = o->grpc                ? "gRPC over h2c"
                       : o->proto == BENCH_WS ? "WebSocket echo"
                       : o->proto == BENCH_H2 ? "h2c"
                                              : "HTTP/1.1";
    size_t k = (size_t)snprintf(buf, n, "%s, %d %s", mode, o->conns,
                                o->per_request ? "requests in flight, a new connection each"
                                               : "connections");
    if (k < n && !o->per_request) {
        if (o->proto == BENCH_H1 && o->depth > 1)
            k += (size_t)snprintf(buf + k, n - k, ", pipeline %d", o->depth);
        else if (o->proto != BENCH_H1 && o->streams > 1)
            k += (size_t)snprintf(buf + k, n - k, ", %d %s each", o->streams,
                                  o->proto == BENCH_WS ? "messages in flight" : "streams");
    }
    if (k < n)
        snprintf(buf + k, n - k, ", %d thread%s", o->threads, o->threads == 1 ? "" : "s");
}

static void plot_point(const step_t *s, bench_plot_point_t *p)
{
    const bench_hist_t *h = &s->r.st.hist;
    p->percent = s->percent;
    p->asked = s->o.rate;
    p->achieved = bench_achieved(&s->o, &s->r);
    p->lat[BENCH_PLOT_P50] = (double)bench_hist_percentile(h, 50);
    p->lat[BENCH_PLOT_P90] = (double)bench_hist_percentile(h, 90);
    p->lat[BENCH_PLOT_P99] = (double)bench_hist_percentile(h, 99);
    p->lat[BENCH_PLOT_P999] = (double)bench_hist_percentile(h, 99.9);
    p->lat[BENCH_PLOT_MAX] = (double)h->max;
    p->errors = bench_total_errors(&s->r.st);
    p->lag_max = (double)s->r.st.lag.max;
}

static int write_plot(const bench_opts_t *o, const step_t *steps, int n, double max,
                      const char *max_what)
{
    bench_plot_point_t *pts = calloc((size_t)(n ? n : 1), sizeof *pts);
    if (!pts) {
        fprintf(stderr, "petrel-bench: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n; i++)
        plot_point(&steps[i], &pts[i]);
    char title[600], sub[400], mode[200];
    describe(o, mode, sizeof mode);
    if (o->label)
        snprintf(title, sizeof title, "%s: latency vs load, %s", o->label, o->url);
    else
        snprintf(title, sizeof title, "Latency vs load, %s", o->url);
    snprintf(sub, sizeof sub, "%s; %g s at each rate", mode, o->duration);
    bench_plot_t p = {.title = title,
                      .subtitle = sub,
                      .max_rate = max,
                      .max_what = max_what,
                      .npoints = n,
                      .pts = pts};
    size_t len = strlen(o->plot);
    int rc = 0;
    if (strcasecmp(o->plot + len - 4, ".png") == 0) {
        const char *why = NULL;
        if (bench_plot_png(o->plot, &p, &why) < 0) {
            fprintf(stderr, "petrel-bench: --plot %s: %s\n", o->plot, why);
            rc = -1;
        }
    } else {
        FILE *f = fopen(o->plot, "w");
        if (!f || bench_plot_svg(f, &p) < 0 || fclose(f) != 0) {
            fprintf(stderr, "petrel-bench: --plot %s: %s\n", o->plot, strerror(errno));
            rc = -1;
        }
    }
    free(pts);
    return rc;
}

static void print_json(const bench_opts_t *o, const bench_opts_t *co, const bench_result_t *closed,
                       const step_t *steps, int n, double max, const char *max_what)
{
    printf("{\"sweep\":{\"url\":");
    bench_json_str(o->url);
    printf(",\"duration_s\":%.6f,\"warmup_s\":%.6f,\"max_rate\":%.2f,\"max_from\":\"%s\","
           "\"max_lag_us\":%.1f,\"steps_percent\":[",
           o->duration, o->warmup, max, max_what, o->max_lag * 1e6);
    for (int i = 0; i < o->nsteps; i++)
        printf("%s%g", i ? "," : "", o->steps[i]);
    printf("],\n\"closed_loop\":");
    if (closed)
        bench_print_json(co, closed, "");
    else
        printf("null");
    printf(",\n\"steps\":[");
    for (int i = 0; i < n; i++) {
        char extra[64];
        snprintf(extra, sizeof extra, "\"percent\":%g,", steps[i].percent);
        printf(i ? ",\n  " : "\n  ");
        bench_print_json(&steps[i].o, &steps[i].r, extra);
    }
    printf("\n]}}\n");
}

static void print_table(const bench_opts_t *o, const bench_result_t *closed, const step_t *steps,
                        int n, double max, const char *max_what)
{
    char mode[200], a[32], b[32], c[32], d[32], e[32], f[32], g[32];
    describe(o, mode, sizeof mode);
    printf("Latency vs load @ %s%s%s%s\n", o->url, o->label ? " (" : "", o->label ? o->label : "",
           o->label ? ")" : "");
    printf("  %s; %g s at each rate", mode, o->duration);
    if (o->warmup > 0)
        printf(" after %g s of warm-up", o->warmup);
    printf("\n  100 %% = %.0f requests/s, the %s", max, max_what);
    if (closed) {
        const bench_hist_t *h = &closed->st.hist;
        printf(" (closed loop: p50 %s, p99 %s from the send times, %llu errors)",
               bench_fmt_time(a, sizeof a, (double)bench_hist_percentile(h, 50)),
               bench_fmt_time(b, sizeof b, (double)bench_hist_percentile(h, 99)),
               (unsigned long long)bench_total_errors(&closed->st));
    }
    printf("\n\n");
    printf("| %5s | %11s | %14s | %9s | %9s | %9s | %9s | %9s | %7s | %6s | %10s |\n", "load",
           "asked req/s", "achieved req/s", "p50", "p90", "p99", "p99.9", "max", "p99/p50",
           "errors", "client lag");
    printf("|------:|------------:|---------------:|----------:|----------:|----------:|"
           "----------:|----------:|--------:|-------:|-----------:|\n");
    for (int i = 0; i < n; i++) {
        const step_t *s = &steps[i];
        const bench_hist_t *h = &s->r.st.hist;
        double p50 = (double)bench_hist_percentile(h, 50),
               p99 = (double)bench_hist_percentile(h, 99);
        char pct[16], ratio[16];
        snprintf(pct, sizeof pct, "%g %%", s->percent);
        if (p50 > 0)
            snprintf(ratio, sizeof ratio, "%.2fx", p99 / p50);
        else
            snprintf(ratio, sizeof ratio, "-");
        printf("| %5s | %11.0f | %14.0f | %9s | %9s | %9s | %9s | %9s | %7s | %6llu | %9s%s |\n",
               pct, s->o.rate, bench_achieved(&s->o, &s->r), bench_fmt_time(a, sizeof a, p50),
               bench_fmt_time(b, sizeof b, (double)bench_hist_percentile(h, 90)),
               bench_fmt_time(c, sizeof c, p99),
               bench_fmt_time(d, sizeof d, (double)bench_hist_percentile(h, 99.9)),
               bench_fmt_time(e, sizeof e, (double)h->max), ratio,
               (unsigned long long)bench_total_errors(&s->r.st),
               bench_fmt_time(f, sizeof f, (double)s->r.st.lag.max),
               bench_lag_exceeded(&s->o, &s->r) ? "!" : " ");
    }
    printf("\nLatency runs from each request's intended send time (open loop: a stall counts for "
           "every\nrequest due during it). Client lag: how late petrel-bench itself sent (max; ! "
           "above --max-lag %s).\n",
           bench_fmt_time(g, sizeof g, o->max_lag * 1e9));
    if (o->plot)
        printf("Chart: %s\n", o->plot);
}

int bench_sweep(const bench_opts_t *o, int json, int fail_on_error)
{
    bench_opts_t co = *o;
    co.rate = 0;
    co.sweep = 0;
    bench_result_t *closed = NULL;
    double max = o->sweep_max;
    const char *max_what = "rate of --sweep-max";
    int rc = 0;
    if (max <= 0) {
        closed = calloc(1, sizeof *closed);
        if (!closed) {
            fprintf(stderr, "petrel-bench: out of memory\n");
            return 2;
        }
        fprintf(stderr, "petrel-bench: sweep: the maximum rate (closed loop, %g s)...\n",
                co.duration);
        if (bench_run(&co, closed, 0) < 0) {
            free(closed);
            return 2;
        }
        max = bench_achieved(&co, closed);
        max_what = "closed-loop maximum";
        if (closed->st.requests == 0 || max <= 0 || bench_interrupted()) {
            fprintf(stderr,
                    "petrel-bench: sweep: the closed-loop run got no responses (%llu errors): "
                    "no maximum rate to sweep\n",
                    (unsigned long long)bench_total_errors(&closed->st));
            free(closed);
            return 2;
        }
    }
    step_t *steps = calloc((size_t)o->nsteps, sizeof *steps);
    if (!steps) {
        fprintf(stderr, "petrel-bench: out of memory\n");
        free(closed);
        return 2;
    }
    int n = 0, lagged = 0;
    uint64_t errors = closed ? bench_total_errors(&closed->st) : 0;
    for (int i = 0; i < o->nsteps && !bench_interrupted(); i++) {
        step_t *s = &steps[n];
        s->percent = o->steps[i];
        s->o = co;
        s->o.rate = max * o->steps[i] / 100.0;
        fprintf(stderr, "petrel-bench: sweep: %g %% = %.0f requests/s...\n", s->percent, s->o.rate);
        if (bench_run(&s->o, &s->r, 0) < 0) {
            rc = 2;
            break;
        }
        n++;
        errors += bench_total_errors(&s->r.st);
        if (bench_lag_exceeded(&s->o, &s->r)) {
            char what[64];
            snprintf(what, sizeof what, "sweep: at %g %%", s->percent);
            bench_lag_warning(&s->o, &s->r, what);
            lagged = 1;
        }
    }
    if (json)
        print_json(o, &co, closed, steps, n, max, max_what);
    else
        print_table(o, closed, steps, n, max, max_what);
    fflush(stdout);
    if (o->plot && n > 0 && write_plot(o, steps, n, max, max_what) < 0)
        rc = 2;
    if (rc == 0 && lagged)
        rc = 3;
    else if (rc == 0 && fail_on_error && errors)
        rc = 1;
    free(steps);
    free(closed);
    return rc;
}
