/*
 * check_bench.c -- unit tests of petrel-bench's histogram (src/bench/hist.c),
 * HTTP/1.1 response parser (src/bench/h1parse.c) and latency-vs-load chart
 * (src/bench/plot.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_HIST_ONLY
#include "bench/bench.h"

/* ------------------------------------------------------------------------- */
/* histogram */

static bench_hist_t *new_hist(void)
{
    bench_hist_t *h = malloc(sizeof *h);
    ck_assert_ptr_nonnull(h);
    bench_hist_init(h);
    return h;
}

START_TEST(hist_empty)
{
    bench_hist_t *h = new_hist();
    ck_assert_uint_eq(h->count, 0);
    ck_assert_uint_eq(bench_hist_percentile(h, 50), 0);
    ck_assert_uint_eq(bench_hist_percentile(h, 100), 0);
    ck_assert(bench_hist_mean(h) == 0.0);
    ck_assert(bench_hist_stdev(h) == 0.0);
    free(h);
}
END_TEST

START_TEST(hist_index_continuous)
{
    /* buckets tile the value range without gaps or overlaps */
    for (unsigned i = 0; i + 1 < BENCH_HIST_BUCKETS; i++) {
        ck_assert_uint_eq(bench_hist_bucket_high(i) + 1, bench_hist_bucket_low(i + 1));
        ck_assert_uint_eq(bench_hist_index(bench_hist_bucket_low(i)), i);
        ck_assert_uint_eq(bench_hist_index(bench_hist_bucket_high(i)), i);
    }
    /* exact below 256, relative width below 1/128 above */
    for (uint64_t v = 0; v < 256; v++)
        ck_assert_uint_eq(bench_hist_bucket_low(bench_hist_index(v)),
                          bench_hist_bucket_high(bench_hist_index(v)));
    for (uint64_t v = 256; v < (UINT64_C(1) << 40); v = v * 3 + 1) {
        unsigned i = bench_hist_index(v);
        ck_assert(bench_hist_bucket_low(i) <= v && v <= bench_hist_bucket_high(i));
        uint64_t w = bench_hist_bucket_high(i) - bench_hist_bucket_low(i) + 1;
        ck_assert(w * 128 <= bench_hist_bucket_low(i));
    }
    /* huge values are clamped into the last bucket */
    ck_assert_uint_eq(bench_hist_index(UINT64_MAX), BENCH_HIST_BUCKETS - 1);
}
END_TEST

START_TEST(hist_exact_small)
{
    bench_hist_t *h = new_hist();
    for (uint64_t v = 1; v <= 100; v++)
        bench_hist_record(h, v);
    ck_assert_uint_eq(h->count, 100);
    ck_assert_uint_eq(h->min, 1);
    ck_assert_uint_eq(h->max, 100);
    ck_assert_uint_eq(bench_hist_percentile(h, 50), 50);
    ck_assert_uint_eq(bench_hist_percentile(h, 90), 90);
    ck_assert_uint_eq(bench_hist_percentile(h, 99), 99);
    ck_assert_uint_eq(bench_hist_percentile(h, 99.9), 100);
    ck_assert_uint_eq(bench_hist_percentile(h, 100), 100);
    ck_assert_uint_eq(bench_hist_percentile(h, 0.001), 1);
    ck_assert(bench_hist_mean(h) == 50.5);
    ck_assert(bench_hist_stdev(h) > 28.8 && bench_hist_stdev(h) < 28.9);
    free(h);
}
END_TEST

START_TEST(hist_percentiles_within_precision)
{
    /* microseconds to seconds, in ns: 1..1000000 us uniformly */
    bench_hist_t *h = new_hist();
    for (uint64_t us = 1; us <= 1000000; us++)
        bench_hist_record(h, us * 1000);
    static const double ps[] = {50, 75, 90, 99, 99.9};
    for (int i = 0; i < 5; i++) {
        double want = ps[i] / 100.0 * 1e9;
        double got = (double)bench_hist_percentile(h, ps[i]);
        ck_assert_msg(got >= want && got <= want * (1 + 1.0 / 128), "p%g: got %.0f want %.0f",
                      ps[i], got, want);
    }
    ck_assert_uint_eq(bench_hist_percentile(h, 100), 1000000000ull);
    free(h);
}
END_TEST

START_TEST(hist_percentile_never_above_max)
{
    bench_hist_t *h = new_hist();
    bench_hist_record(h, 1000001); /* in a bucket that reaches above it */
    ck_assert_uint_eq(bench_hist_percentile(h, 50), 1000001);
    ck_assert_uint_eq(bench_hist_percentile(h, 99.9), 1000001);
    free(h);
}
END_TEST

START_TEST(hist_merge)
{
    bench_hist_t *a = new_hist(), *b = new_hist(), *all = new_hist();
    for (uint64_t v = 1; v <= 5000; v++) {
        bench_hist_record(v % 2 ? a : b, v * 37);
        bench_hist_record(all, v * 37);
    }
    bench_hist_t *empty = new_hist();
    bench_hist_merge(a, empty);
    bench_hist_merge(a, b);
    ck_assert_uint_eq(a->count, all->count);
    ck_assert_uint_eq(a->min, all->min);
    ck_assert_uint_eq(a->max, all->max);
    ck_assert_mem_eq(a->buckets, all->buckets, sizeof a->buckets);
    ck_assert_uint_eq(bench_hist_percentile(a, 99), bench_hist_percentile(all, 99));
    /* merging into an empty one keeps min right */
    bench_hist_merge(empty, b);
    ck_assert_uint_eq(empty->min, b->min);
    free(a);
    free(b);
    free(all);
    free(empty);
}
END_TEST

START_TEST(hist_merge_exact)
{
    /* many threads' histograms of large, uneven values merge into exactly
     * the one histogram of all the values: sums included, so the mean and
     * standard deviation too (floating-point sums would differ by order) */
    enum { T = 7 };
    bench_hist_t *part[T], *all = new_hist(), *merged = new_hist();
    for (int t = 0; t < T; t++)
        part[t] = new_hist();
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;        /* xorshift64 */
        uint64_t v = i % 1000 == 0 ? x >> 22 : x >> 40; /* up to ~4400 s, mostly ~16 ms */
        bench_hist_record(part[i % T], v);
        bench_hist_record(all, v);
    }
    for (int t = T - 1; t >= 0; t--) /* in another order than recorded */
        bench_hist_merge(merged, part[t]);
    ck_assert_mem_eq(merged, all, sizeof *all);
    ck_assert(bench_hist_mean(merged) == bench_hist_mean(all));
    ck_assert(bench_hist_stdev(merged) == bench_hist_stdev(all));
    ck_assert(bench_hist_percentile(merged, 99.9) == bench_hist_percentile(all, 99.9));
    for (int t = 0; t < T; t++)
        free(part[t]);
    free(all);
    free(merged);
}
END_TEST

START_TEST(hist_mean_stdev_exact)
{
    bench_hist_t *h = new_hist();
    /* two values a stdev apart around a large mean: the variance of the
     * integers is exact, where E[x^2] - E[x]^2 in doubles would cancel */
    uint64_t base = UINT64_C(1) << 42;
    for (int i = 0; i < 1000; i++) {
        bench_hist_record(h, base + 1000);
        bench_hist_record(h, base - 1000);
    }
    ck_assert(bench_hist_mean(h) == (double)base);
    double sd = bench_hist_stdev(h);
    ck_assert_msg(sd > 999.9 && sd < 1000.1, "stdev %f", sd);
    /* a value above the clamp counts as the clamp in the sums, as in its bucket */
    bench_hist_t *c = new_hist();
    bench_hist_record(c, UINT64_MAX);
    ck_assert(bench_hist_mean(c) == (double)((UINT64_C(1) << BENCH_HIST_MAXBITS) - 1));
    ck_assert_uint_eq(c->max, UINT64_MAX);
    free(c);
    free(h);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* parser */

typedef struct got {
    int n;
    int status[16];
    uint64_t body[16];
    int close[16];
    int err;
} got_t;

/* Feed `in` to a parser in pieces of `step` bytes, as a connection would:
 * unconsumed bytes are kept and passed again with the next piece. */
static got_t feed(const char *in, size_t step, int head_only, int eof)
{
    got_t g = {0};
    bench_h1p_t p;
    bench_h1p_init(&p);
    p.head_only = head_only;
    size_t total = strlen(in), fed = 0;
    char *buf = malloc(total + 1);
    size_t have = 0;
    while (fed < total) {
        size_t k = total - fed < step ? total - fed : step;
        memcpy(buf + have, in + fed, k);
        have += k;
        fed += k;
        size_t pos = 0;
        while (pos < have) {
            size_t used;
            int r = bench_h1p_parse(&p, buf + pos, have - pos, &used);
            pos += used;
            if (r == BENCH_H1P_ERROR) {
                g.err = 1;
                free(buf);
                return g;
            }
            if (r == BENCH_H1P_MORE)
                break;
            ck_assert_int_lt(g.n, 16);
            g.status[g.n] = p.status;
            g.body[g.n] = p.body_len;
            g.close[g.n] = p.close;
            g.n++;
        }
        memmove(buf, buf + pos, have - pos);
        have -= pos;
    }
    if (eof) {
        int r = bench_h1p_eof(&p);
        if (r == BENCH_H1P_DONE && have == 0) {
            g.status[g.n] = p.status;
            g.body[g.n] = p.body_len;
            g.close[g.n] = 1;
            g.n++;
        } else if (r == BENCH_H1P_ERROR || have > 0) {
            g.err = 1;
        }
    }
    free(buf);
    return g;
}

static const size_t steps[] = {1, 2, 3, 7, 64, 100000};
#define NSTEPS (sizeof steps / sizeof steps[0])

START_TEST(parse_content_length)
{
    const char *in = "HTTP/1.1 200 OK\r\nServer: limit\r\nContent-Type: text/plain\r\n"
                     "Content-Length: 12\r\n\r\nHello World!";
    for (size_t i = 0; i < NSTEPS; i++) {
        got_t g = feed(in, steps[i], 0, 0);
        ck_assert_int_eq(g.err, 0);
        ck_assert_int_eq(g.n, 1);
        ck_assert_int_eq(g.status[0], 200);
        ck_assert_uint_eq(g.body[0], 12);
        ck_assert_int_eq(g.close[0], 0);
    }
}
END_TEST

START_TEST(parse_pipelined)
{
    const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
                     "HTTP/1.1 404 Not Found\r\ncontent-length:0\r\n\r\n"
                     "HTTP/1.1 201 Created\nCONTENT-LENGTH:  5 \n\nhello"
                     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nz";
    for (size_t i = 0; i < NSTEPS; i++) {
        got_t g = feed(in, steps[i], 0, 0);
        ck_assert_int_eq(g.err, 0);
        ck_assert_int_eq(g.n, 4);
        ck_assert_int_eq(g.status[0], 200);
        ck_assert_uint_eq(g.body[0], 3);
        ck_assert_int_eq(g.status[1], 404);
        ck_assert_uint_eq(g.body[1], 0);
        ck_assert_int_eq(g.status[2], 201);
        ck_assert_uint_eq(g.body[2], 5);
        ck_assert_int_eq(g.close[2], 0);
        ck_assert_int_eq(g.close[3], 1);
    }
}
END_TEST

START_TEST(parse_chunked)
{
    const char *in = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n"
                     "1A;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                     "0\r\nX-Trailer: yes\r\n\r\n"
                     "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
                     "3\nabc\n0\n\n";
    for (size_t i = 0; i < NSTEPS; i++) {
        got_t g = feed(in, steps[i], 0, 0);
        ck_assert_int_eq(g.err, 0);
        ck_assert_int_eq(g.n, 2);
        ck_assert_uint_eq(g.body[0], 31);
        ck_assert_uint_eq(g.body[1], 3);
    }
}
END_TEST

START_TEST(parse_no_body)
{
    /* 204 and 304 have no body whatever they say; 1xx is skipped */
    const char *in = "HTTP/1.1 204 No Content\r\n\r\n"
                     "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n"
                     "HTTP/1.1 100 Continue\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    for (size_t i = 0; i < NSTEPS; i++) {
        got_t g = feed(in, steps[i], 0, 0);
        ck_assert_int_eq(g.err, 0);
        ck_assert_int_eq(g.n, 3);
        ck_assert_int_eq(g.status[0], 204);
        ck_assert_int_eq(g.status[1], 304);
        ck_assert_uint_eq(g.body[1], 0);
        ck_assert_int_eq(g.status[2], 200);
        ck_assert_uint_eq(g.body[2], 2);
    }
    /* the response to HEAD */
    got_t g = feed("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"
                   "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                   5, 1, 0);
    ck_assert_int_eq(g.err, 0);
    ck_assert_int_eq(g.n, 2);
    ck_assert_uint_eq(g.body[0], 0);
}
END_TEST

START_TEST(parse_http10_and_eof_body)
{
    /* HTTP/1.0 closes unless it says keep-alive */
    got_t g = feed("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 3, 0, 0);
    ck_assert_int_eq(g.n, 1);
    ck_assert_int_eq(g.close[0], 1);
    g = feed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", 3, 0, 0);
    ck_assert_int_eq(g.n, 1);
    ck_assert_int_eq(g.close[0], 0);
    g = feed("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", 4, 0,
             0);
    ck_assert_int_eq(g.close[0], 1);
    /* no length: the body ends with the connection */
    for (size_t i = 0; i < NSTEPS; i++) {
        g = feed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", steps[i], 0,
                 1);
        ck_assert_int_eq(g.err, 0);
        ck_assert_int_eq(g.n, 1);
        ck_assert_uint_eq(g.body[0], 13);
    }
    /* cut short: an error at EOF */
    g = feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 100, 0, 1);
    ck_assert_int_eq(g.err, 1);
    g = feed("HTTP/1.1 200 OK\r\nContent-Len", 100, 0, 1);
    ck_assert_int_eq(g.err, 1);
    g = feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 100, 0, 1);
    ck_assert_int_eq(g.err, 1);
    /* EOF between responses is not an error */
    g = feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 100, 0, 1);
    ck_assert_int_eq(g.err, 0);
    ck_assert_int_eq(g.n, 1);
}
END_TEST

START_TEST(parse_errors)
{
    static const char *const bad[] = {
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        "garbage\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t s = 0; s < NSTEPS; s++)
            ck_assert_msg(feed(bad[i], steps[s], 0, 0).err == 1, "accepted: %s", bad[i]);
    /* a head that never ends */
    bench_h1p_t p;
    bench_h1p_init(&p);
    p.max_head = 1024;
    char big[2048];
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', sizeof big - 20);
    size_t used;
    ck_assert_int_eq(bench_h1p_parse(&p, big, 500, &used), BENCH_H1P_MORE);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(bench_h1p_parse(&p, big, sizeof big, &used), BENCH_H1P_ERROR);
    ck_assert_ptr_nonnull(p.error);
}
END_TEST

START_TEST(parse_large_body_counted_not_buffered)
{
    /* a 1 MiB body passed in 4 KiB reads: consumed as it comes */
    bench_h1p_t p;
    bench_h1p_init(&p);
    const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n";
    size_t used;
    ck_assert_int_eq(bench_h1p_parse(&p, head, strlen(head), &used), BENCH_H1P_MORE);
    ck_assert_uint_eq(used, strlen(head));
    static char chunk[4096];
    for (int i = 0; i < 255; i++) {
        ck_assert_int_eq(bench_h1p_parse(&p, chunk, sizeof chunk, &used), BENCH_H1P_MORE);
        ck_assert_uint_eq(used, sizeof chunk);
    }
    ck_assert_int_eq(bench_h1p_parse(&p, chunk, sizeof chunk, &used), BENCH_H1P_DONE);
    ck_assert_uint_eq(p.body_len, 1048576);
    ck_assert_int_eq(bench_h1p_busy(&p), 0);
}
END_TEST

START_TEST(has_token_lists)
{
    /* RFC 9110 §5.6.1: a list of tokens, separated by commas with optional
     * white space, empty elements allowed; tokens compare without case
     * (Connection options, §7.6.1) */
    const char *v = " Keep-Alive ,, \tUpgrade\t,close";
    ck_assert_int_eq(bench_has_token(v, strlen(v), "keep-alive"), 1);
    ck_assert_int_eq(bench_has_token(v, strlen(v), "upgrade"), 1);
    ck_assert_int_eq(bench_has_token(v, strlen(v), "close"), 1);
    /* only whole elements: no prefix, no suffix, no element across a comma */
    ck_assert_int_eq(bench_has_token(v, strlen(v), "keep"), 0);
    ck_assert_int_eq(bench_has_token(v, strlen(v), "clos"), 0);
    ck_assert_int_eq(bench_has_token("closed", 6, "close"), 0);
    ck_assert_int_eq(bench_has_token("a, b c", 6, "b"), 0);
    /* the length bounds the value: "close" past n is not seen */
    ck_assert_int_eq(bench_has_token("x, close", 3, "close"), 0);
    ck_assert_int_eq(bench_has_token("", 0, "close"), 0);
    ck_assert_int_eq(bench_has_token(" , ,", 4, "close"), 0);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* chart */

static char *svg_of(const bench_plot_t *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(bench_plot_svg(f, p), 0);
    fclose(f);
    return buf;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++)
        n++;
    return n;
}

static bench_plot_point_t pt(double pct, double max, double p50)
{
    bench_plot_point_t q = {.percent = pct, .asked = max * pct / 100, .achieved = max * pct / 100};
    q.lat[BENCH_PLOT_P50] = p50;
    q.lat[BENCH_PLOT_P90] = p50 * 1.5;
    q.lat[BENCH_PLOT_P99] = p50 * 3;
    q.lat[BENCH_PLOT_P999] = p50 * 10;
    q.lat[BENCH_PLOT_MAX] = p50 * 40;
    return q;
}

/* the value of attribute `name` in the element starting at e */
static double attr(const char *e, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *end = strchr(e, '>');
    const char *a = strstr(e, key);
    ck_assert_msg(a && a < end, "no %s", name);
    return strtod(a + strlen(key), NULL);
}

START_TEST(plot_svg_points_and_axes)
{
    bench_plot_point_t pts[4] = {pt(10, 50000, 40e3), pt(50, 50000, 45e3), pt(90, 50000, 90e3),
                                 pt(100, 50000, 25e6)};
    pts[3].errors = 7;
    bench_plot_t p = {.title = "a <b> & \"c\"",
                      .subtitle = "HTTP/1.1",
                      .max_rate = 50000,
                      .max_what = "closed-loop maximum",
                      .npoints = 4,
                      .pts = pts};
    char *s = svg_of(&p);
    ck_assert_ptr_nonnull(strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    ck_assert_ptr_nonnull(strstr(s, "a &lt;b&gt; &amp; &quot;c&quot;"));
    ck_assert_ptr_null(strstr(s, "<b>"));
    ck_assert_ptr_null(strstr(s, "<script"));
    ck_assert_int_eq(count(s, "<circle class=\"pt\""), 4 * BENCH_PLOT_NPCT);
    ck_assert_int_eq(count(s, "<polyline"), BENCH_PLOT_NPCT);
    ck_assert_int_eq(count(s, "class=\"errors\" data-errors=\"7\""), 1);
    ck_assert_int_eq(count(s, "<svg"), 1);
    ck_assert_int_eq(count(s, "</svg>"), 1);
    ck_assert_ptr_nonnull(strstr(s, "100 % = 50,000 req/s, closed-loop maximum"));
    ck_assert_ptr_nonnull(strstr(s,
                                 "data-series=\"p99\" data-percent=\"90\" data-asked=\"45000.00\" "
                                 "data-achieved=\"45000.00\" data-latency-us=\"270.0\""));
    /* every point inside the plot area; the y ticks cover 40 us .. 1 s */
    double lo = 1e18, hi = 0;
    for (const char *e = s; (e = strstr(e, "<text class=\"ytick\"")); e++) {
        double v = attr(e, "data-value");
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    ck_assert(lo <= 40e3 * 10 && hi >= 25e6 * 40 / 10); /* labelled: within a decade */
    for (const char *e = s; (e = strstr(e, "<circle class=\"pt\"")); e++) {
        double x = attr(e, "cx"), y = attr(e, "cy");
        ck_assert(x >= 84 && x <= 760 && y >= 92 && y <= 470);
    }
    /* higher percentiles of a point are drawn higher up (smaller y) */
    const char *a = strstr(s, "data-series=\"p50\" data-percent=\"50\"");
    const char *b = strstr(s, "data-series=\"max\" data-percent=\"50\"");
    ck_assert(a && b && attr(b, "cy") < attr(a, "cy"));
    free(s);
}
END_TEST

START_TEST(plot_svg_labels_apart)
{
    /* all five lines end at the same latency: their names must not overlap */
    bench_plot_point_t q = pt(100, 1000, 1e6);
    for (int k = 0; k < BENCH_PLOT_NPCT; k++)
        q.lat[k] = 1e6;
    bench_plot_t p = {.title = "t", .subtitle = "s", .max_rate = 1000, .npoints = 1, .pts = &q};
    char *s = svg_of(&p);
    double ys[BENCH_PLOT_NPCT];
    int n = 0;
    /* the names at the lines' ends: <text x=".." y=".." fill=".." font-weight="bold">p50 */
    for (const char *e = s; (e = strstr(e, "font-weight=\"bold\">")); e++) {
        const char *t = e;
        while (t > s && strncmp(t, "<text", 5) != 0)
            t--;
        ck_assert_int_lt(n, BENCH_PLOT_NPCT);
        ys[n++] = attr(t, "y");
    }
    ck_assert_int_eq(n, BENCH_PLOT_NPCT);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            ck_assert_msg(ys[i] - ys[j] >= 14.9 || ys[j] - ys[i] >= 14.9,
                          "labels %d and %d at %g, %g", i, j, ys[i], ys[j]);
    free(s);
}
END_TEST

START_TEST(plot_png_needs_gnuplot)
{
    const char *path = getenv("PATH");
    char *saved = path ? strdup(path) : NULL;
    setenv("PATH", "/nonexistent", 1);
    const char *why = bench_plot_png_missing();
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_nonnull(strstr(why, "gnuplot-nox"));
    bench_plot_point_t q = pt(50, 100, 1e5);
    bench_plot_t p = {.title = "t", .subtitle = "s", .max_rate = 100, .npoints = 1, .pts = &q};
    why = NULL;
    ck_assert_int_eq(bench_plot_png("/nonexistent/x.png", &p, &why), -1);
    ck_assert_ptr_nonnull(why);
    if (saved)
        setenv("PATH", saved, 1);
    free(saved);
}
END_TEST

static Suite *bench_suite(void)
{
    Suite *s = suite_create("bench");
    TCase *h = tcase_create("hist");
    tcase_add_test(h, hist_empty);
    tcase_add_test(h, hist_index_continuous);
    tcase_add_test(h, hist_exact_small);
    tcase_add_test(h, hist_percentiles_within_precision);
    tcase_add_test(h, hist_percentile_never_above_max);
    tcase_add_test(h, hist_merge);
    tcase_add_test(h, hist_merge_exact);
    tcase_add_test(h, hist_mean_stdev_exact);
    suite_add_tcase(s, h);
    TCase *c = tcase_create("plot");
    tcase_add_test(c, plot_svg_points_and_axes);
    tcase_add_test(c, plot_svg_labels_apart);
    tcase_add_test(c, plot_png_needs_gnuplot);
    suite_add_tcase(s, c);
    TCase *p = tcase_create("h1parse");
    tcase_add_test(p, parse_content_length);
    tcase_add_test(p, parse_pipelined);
    tcase_add_test(p, parse_chunked);
    tcase_add_test(p, parse_no_body);
    tcase_add_test(p, parse_http10_and_eof_body);
    tcase_add_test(p, parse_errors);
    tcase_add_test(p, parse_large_body_counted_not_buffered);
    tcase_add_test(p, has_token_lists);
    suite_add_tcase(s, p);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bench_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
