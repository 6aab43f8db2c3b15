/*
 * report.c -- petrel-bench's reports of one run: the human summary (wrk's
 * layout) and the JSON object, with the open-loop figures of --rate (the
 * rate asked and achieved, the schedule, the client's own lag).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

uint64_t bench_total_errors(const bench_stats_t *st)
{
    uint64_t n = 0;
    for (int k = 0; k < BENCH_ERR_N; k++)
        n += st->errors[k];
    return n;
}

/* Closed loop: the responses counted over the window.  Open loop: the
 * responses that came inside the window (those of the requests due in it,
 * which the report counts, may finish after it). */
double bench_achieved(const bench_opts_t *o, const bench_result_t *r)
{
    if (r->duration_s <= 0)
        return 0;
    if (o->rate > 0 && !o->nreq)
        return (double)r->st.done_in_window / r->duration_s;
    return (double)r->st.requests / r->duration_s;
}

int bench_lag_exceeded(const bench_opts_t *o, const bench_result_t *r)
{
    return o->rate > 0 && o->max_lag > 0 && r->st.lag.count > 0 &&
           (double)r->st.lag.max > o->max_lag * 1e9;
}

/* a duration in ns, as wrk prints it */
const char *bench_fmt_time(char *buf, size_t n, double ns)
{
    return bench_fmt_ns(buf, n, ns, 0);
}

static const char *fmt_bytes(char *buf, size_t n, double b)
{
    if (b < 1024)
        snprintf(buf, n, "%.0fB", b);
    else if (b < 1024 * 1024)
        snprintf(buf, n, "%.2fKB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2fMB", b / 1024 / 1024);
    else
        snprintf(buf, n, "%.2fGB", b / 1024 / 1024 / 1024);
    return buf;
}

static const char *mode_name(const bench_opts_t *o)
{
    if (o->grpc)
        return o->per_request ? "gRPC over h2c, a new connection per call"
                              : "gRPC over h2c, one channel per connection";
    if (o->proto == BENCH_WS)
        return o->per_request ? "WebSocket, a new connection per message" : "WebSocket echo";
    if (o->proto == BENCH_H2)
        return o->per_request ? "h2c, a new connection per request" : "h2c, prior knowledge";
    return o->per_request ? "HTTP/1.1, a new connection per request" : "HTTP/1.1 keep-alive";
}

void bench_lag_warning(const bench_opts_t *o, const bench_result_t *r, const char *what)
{
    char a[32], b[32];
    fprintf(stderr,
            "petrel-bench: %s%sthe client fell behind its own schedule by up to %s (more than "
            "--max-lag %s): its core was busy or taken away, so latencies include up to that "
            "much of its own delay; give it a core of its own (taskset), more threads (-t), or "
            "ask a lower --rate\n",
            what ? what : "", what ? ": " : "", bench_fmt_time(a, sizeof a, (double)r->st.lag.max),
            bench_fmt_time(b, sizeof b, o->max_lag * 1e9));
}

void bench_print_human(const bench_opts_t *o, const bench_result_t *r)
{
    const bench_stats_t *st = &r->st;
    const bench_hist_t *h = &st->hist;
    char a[32], b[32], c[32];
    printf("Running %s test @ %s%s%s%s\n", o->nreq ? "fixed-count" : "timed", o->url,
           o->label ? " (" : "", o->label ? o->label : "", o->label ? ")" : "");
    printf("  %d thread%s and %d connections (%s", o->threads, o->threads == 1 ? "" : "s", o->conns,
           mode_name(o));
    if (o->proto == BENCH_H1 && !o->per_request && o->depth > 1)
        printf(", pipeline %d", o->depth);
    if (o->proto == BENCH_H2 && !o->per_request)
        printf(", %d stream%s each", o->streams, o->streams == 1 ? "" : "s");
    if (o->grpc)
        printf(", %zu-byte payloads", o->body_size);
    if (o->proto == BENCH_WS)
        printf(", %zu-byte %s messages, %d in flight each", o->body_size,
               o->ws_binary ? "binary" : "text", o->per_request ? 1 : o->streams);
    printf(")\n");
    if (o->rate > 0)
        printf("  Open loop at %.2f requests/s: latency runs from each request's intended send "
               "time\n",
               o->rate);
    printf("  Latency   %10s %10s %10s %10s\n", "Avg", "Stdev", "Min", "Max");
    printf("            %10s %10s", bench_fmt_time(a, sizeof a, bench_hist_mean(h)),
           bench_fmt_time(b, sizeof b, bench_hist_stdev(h)));
    printf(" %10s %10s\n", bench_fmt_time(c, sizeof c, h->count ? (double)h->min : 0),
           bench_fmt_time(a, sizeof a, (double)h->max));
    printf("  Latency Distribution\n");
    static const double ps[] = {50, 75, 90, 99, 99.9};
    static const char *const pn[] = {"50%", "75%", "90%", "99%", "99.9%"};
    for (int i = 0; i < 5; i++)
        printf("  %7s  %10s\n", pn[i],
               bench_fmt_time(a, sizeof a, (double)bench_hist_percentile(h, ps[i])));
    printf("  %7s  %10s\n", "max", bench_fmt_time(a, sizeof a, (double)h->max));
    printf("  %llu requests in %.2fs, %s read, %s written\n", (unsigned long long)st->requests,
           r->duration_s, fmt_bytes(a, sizeof a, (double)st->bytes_in),
           fmt_bytes(b, sizeof b, (double)st->bytes_out));
    if (bench_total_errors(st)) {
        printf("  Errors:");
        for (int k = 0; k < BENCH_ERR_N; k++)
            printf(" %s %llu%s", bench_err_names[k], (unsigned long long)st->errors[k],
                   k + 1 < BENCH_ERR_N ? "," : "\n");
    }
    if (st->reconnects)
        printf("  Connections closed by the server: %llu\n", (unsigned long long)st->reconnects);
    if (o->proto == BENCH_WS)
        printf("  %llu WebSocket handshakes (connect to 101): avg %s, max %s\n",
               (unsigned long long)st->handshakes,
               bench_fmt_time(a, sizeof a,
                              st->handshakes ? st->handshake_sum / (double)st->handshakes : 0),
               bench_fmt_time(b, sizeof b, (double)st->handshake_max));
    if (o->rate > 0) {
        const bench_hist_t *l = &st->lag;
        printf("  Rate asked %.2f/s, achieved %.2f/s (responses inside the window)\n", o->rate,
               bench_achieved(o, r));
        printf("  Schedule: %llu requests due, %llu sent late for want of a connection with "
               "room, %llu failed unsent\n",
               (unsigned long long)st->scheduled, (unsigned long long)st->queued,
               (unsigned long long)st->unsent);
        printf("  Client lag: p50 %s, p99 %s, max %s",
               bench_fmt_time(a, sizeof a, (double)bench_hist_percentile(l, 50)),
               bench_fmt_time(b, sizeof b, (double)bench_hist_percentile(l, 99)),
               bench_fmt_time(c, sizeof c, (double)l->max));
        if (o->max_lag > 0)
            printf(" (bound %s%s)", bench_fmt_time(a, sizeof a, o->max_lag * 1e9),
                   bench_lag_exceeded(o, r) ? ", EXCEEDED" : "");
        printf("\n");
        const bench_hist_t *d = &st->read_delay;
        printf("  Answers unread in the client's socket: p50 %s, p99 %s, max %s\n",
               bench_fmt_time(a, sizeof a, (double)bench_hist_percentile(d, 50)),
               bench_fmt_time(b, sizeof b, (double)bench_hist_percentile(d, 99)),
               bench_fmt_time(c, sizeof c, (double)d->max));
    }
    double rps = bench_achieved(o, r);
    printf("Requests/sec: %12.2f\n", rps);
    printf("Transfer/sec: %12s\n",
           fmt_bytes(a, sizeof a, r->duration_s > 0 ? (double)st->bytes_in / r->duration_s : 0));
}

void bench_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

void bench_print_json(const bench_opts_t *o, const bench_result_t *r, const char *extra)
{
    const bench_stats_t *st = &r->st;
    const bench_hist_t *h = &st->hist;
    printf("{\"protocol\":\"%s\",\"connection\":\"%s\",",
           o->proto == BENCH_WS   ? "websocket"
           : o->grpc              ? "grpc"
           : o->proto == BENCH_H2 ? "h2c"
                                  : "http/1.1",
           o->per_request ? "per-request" : "persistent");
    if (o->label) {
        printf("\"label\":");
        bench_json_str(o->label);
        printf(",");
    }
    if (o->grpc)
        printf("\"method\":\"%s\",\"payload_size\":%zu,", o->path, o->body_size);
    if (o->proto == BENCH_WS)
        printf("\"message_size\":%zu,\"binary\":%s,\"in_flight\":%d,"
               "\"handshakes\":{\"count\":%llu,\"mean_us\":%.1f,\"max_us\":%.1f},",
               o->body_size, o->ws_binary ? "true" : "false", o->per_request ? 1 : o->streams,
               (unsigned long long)st->handshakes,
               st->handshakes ? st->handshake_sum / (double)st->handshakes / 1e3 : 0.0,
               (double)st->handshake_max / 1e3);
    printf("\"connections\":%d,\"threads\":%d,\"pipeline\":%d,\"streams\":%d,", o->conns,
           o->threads, o->proto == BENCH_H1 && !o->per_request ? o->depth : 1,
           o->proto == BENCH_H2 && !o->per_request ? o->streams : 1);
    printf("\"loop\":\"%s\",", o->rate > 0 ? "open" : "closed");
    printf("\"requests\":%llu,\"duration_s\":%.6f,\"rps\":%.2f,", (unsigned long long)st->requests,
           r->duration_s, bench_achieved(o, r));
    if (o->rate > 0) {
        const bench_hist_t *l = &st->lag;
        printf("\"rate\":{\"asked\":%.2f,\"achieved\":%.2f,\"scheduled\":%llu,\"queued\":%llu,"
               "\"unsent\":%llu},",
               o->rate, bench_achieved(o, r), (unsigned long long)st->scheduled,
               (unsigned long long)st->queued, (unsigned long long)st->unsent);
        printf("\"lag_us\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f,\"bound\":%.1f,"
               "\"exceeded\":%s},",
               (double)bench_hist_percentile(l, 50) / 1e3,
               (double)bench_hist_percentile(l, 99) / 1e3, (double)l->max / 1e3, o->max_lag * 1e6,
               bench_lag_exceeded(o, r) ? "true" : "false");
        const bench_hist_t *d = &st->read_delay;
        printf("\"read_delay_us\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f},",
               (double)bench_hist_percentile(d, 50) / 1e3,
               (double)bench_hist_percentile(d, 99) / 1e3, (double)d->max / 1e3);
    }
    printf("\"bytes_read\":%llu,\"bytes_written\":%llu,\"connects\":%llu,\"server_closes\":%llu,",
           (unsigned long long)st->bytes_in, (unsigned long long)st->bytes_out,
           (unsigned long long)st->connects, (unsigned long long)st->reconnects);
    printf("\"errors\":{");
    for (int k = 0; k < BENCH_ERR_N; k++)
        printf("\"%s\":%llu,", bench_err_names[k], (unsigned long long)st->errors[k]);
    printf("\"total\":%llu},", (unsigned long long)bench_total_errors(st));
    printf("%s\"latency_us\":{\"min\":%.1f,\"mean\":%.1f,\"stdev\":%.1f,\"p50\":%.1f,\"p75\":%.1f,"
           "\"p90\":%.1f,\"p95\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f}}",
           extra, h->count ? (double)h->min / 1e3 : 0.0, bench_hist_mean(h) / 1e3,
           bench_hist_stdev(h) / 1e3, (double)bench_hist_percentile(h, 50) / 1e3,
           (double)bench_hist_percentile(h, 75) / 1e3, (double)bench_hist_percentile(h, 90) / 1e3,
           (double)bench_hist_percentile(h, 95) / 1e3, (double)bench_hist_percentile(h, 99) / 1e3,
           (double)bench_hist_percentile(h, 99.9) / 1e3, (double)h->max / 1e3);
}
