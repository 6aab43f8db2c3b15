/*
 * hist.c -- petrel-bench's latency histogram.
 *
 * HDR-style log-linear buckets over nanoseconds: every value below
 * 2 * BENCH_HIST_SUB (256 ns) has its own bucket; above that, each power of two
 * [2^k, 2^(k+1)) is split into BENCH_HIST_SUB (128) equal buckets, so a bucket
 * is never wider than 1/128 of its values (< 0.8 %, well under a microsecond
 * up to 128 us).  Recording is an index computation and an increment; merging
 * threads' histograms is a sum of integers, exact: the merged histogram is
 * the one a single thread would have recorded (buckets, count, min, max, sum
 * and sum of squares alike).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#define BENCH_HIST_ONLY
#include "bench.h"

void bench_hist_init(bench_hist_t *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

unsigned bench_hist_index(uint64_t v)
{
    if (v >= (UINT64_C(1) << BENCH_HIST_MAXBITS))
        v = (UINT64_C(1) << BENCH_HIST_MAXBITS) - 1;
    if (v < 2 * BENCH_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - BENCH_HIST_SUB_BITS;
    return BENCH_HIST_SUB * (shift + 1) + (unsigned)(v >> shift) - BENCH_HIST_SUB;
}

uint64_t bench_hist_bucket_low(unsigned idx)
{
    if (idx < 2 * BENCH_HIST_SUB)
        return idx;
    unsigned shift = idx / BENCH_HIST_SUB - 1;
    uint64_t top = idx % BENCH_HIST_SUB + BENCH_HIST_SUB;
    return top << shift;
}

uint64_t bench_hist_bucket_high(unsigned idx)
{
    if (idx < 2 * BENCH_HIST_SUB)
        return idx;
    unsigned shift = idx / BENCH_HIST_SUB - 1;
    uint64_t top = idx % BENCH_HIST_SUB + BENCH_HIST_SUB;
    return ((top + 1) << shift) - 1;
}

void bench_hist_record(bench_hist_t *h, uint64_t v)
{
    h->buckets[bench_hist_index(v)]++;
    h->count++;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    if (v >= (UINT64_C(1) << BENCH_HIST_MAXBITS)) /* as its bucket: clamped */
        v = (UINT64_C(1) << BENCH_HIST_MAXBITS) - 1;
    h->sum += v;
    h->sumsq += (unsigned __int128)v * v;
}

void bench_hist_merge(bench_hist_t *into, const bench_hist_t *from)
{
    if (from->count == 0)
        return;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    into->sum += from->sum;
    into->sumsq += from->sumsq;
}

uint64_t bench_hist_percentile(const bench_hist_t *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p >= 100.0)
        return h->max;
    /* the rank of the value, 1-based: the smallest value with at least
     * p % of the values at or below it */
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = bench_hist_bucket_high(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max;
}

double bench_hist_mean(const bench_hist_t *h)
{
    return h->count ? (double)((long double)h->sum / (long double)h->count) : 0.0;
}

double bench_hist_stdev(const bench_hist_t *h)
{
    if (h->count < 2)
        return 0.0;
    /* n * variance = sumsq - sum^2 / n; with sum = q * n + r that is
     * sumsq - q^2 * n - 2 * q * r - r^2 / n, all but the last term exact
     * integers (q^2 * n + 2 * q * r <= sum^2 / n <= sumsq) */
    unsigned __int128 n = h->count, q = h->sum / n, r = h->sum % n;
    unsigned __int128 d = h->sumsq - q * q * n - 2 * q * r;
    long double var =
        ((long double)d - (long double)r * (long double)r / (long double)n) / (long double)n;
    return var > 0 ? (double)sqrtl(var) : 0.0;
}

const char *bench_fmt_ns(char *buf, size_t n, double ns, int chart)
{
    static const char *const unit[2][4] = {{"ns", "us", "ms", "s"},
                                           {" ns", " \xc2\xb5s", " ms", " s"}};
    int u = ns < 1e3 ? 0 : ns < 1e6 ? 1 : ns < 1e9 ? 2 : 3;
    double v = ns / (u == 0 ? 1 : u == 1 ? 1e3 : u == 2 ? 1e6 : 1e9);
    if (chart)
        snprintf(buf, n, "%.3g%s", v, unit[1][u]);
    else
        snprintf(buf, n, "%.*f%s", u ? 2 : 0, v, unit[0][u]);
    return buf;
}
