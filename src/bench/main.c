/*
 * main.c -- petrel-bench: options, threads, the live progress line, the
 * human and JSON reports, and --compare.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "bench.h"
#include "grpcwire.h"

typedef struct result {
    bench_stats_t st;
    double duration_s;
    int conns;       /* connections (or per-request slots) */
    int concurrency; /* requests in flight at most */
} result_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: petrel-bench [options] URL\n"
            "       petrel-bench [options] ws://HOST[:PORT]/PATH   (WebSocket echo)\n"
            "\n"
            "  -c, --connections N     connections (default 10); with --close, concurrent\n"
            "                          requests each on its own new connection\n"
            "  -d, --duration TIME     measure for TIME (default 10s; 500ms, 10s, 2m)\n"
            "  -n, --requests N        measure exactly N requests instead\n"
            "      --warmup TIME       run this long first without measuring (default 0)\n"
            "  -t, --threads N         event-loop threads (default 1)\n"
            "  -p, --pipeline N        HTTP/1.1 requests in flight per connection (default 1)\n"
            "      --h2                h2c with prior knowledge (HTTP/2 without TLS)\n"
            "  -m, --streams N         h2c streams in flight per connection (implies --h2)\n"
            "      --close             a new TCP connection for every request\n"
            "  -X, --method METHOD     request method (default GET; POST with --body-size)\n"
            "      --body-size BYTES   send a JSON body {\"requestId\":N,\"payload\":\"x...\"} of\n"
            "                          exactly BYTES bytes (at least 47)\n"
            "  -H, --header 'N: V'     add a request header (repeatable)\n"
            "      --timeout TIME      a request (or connect) older than this fails (default 10s)\n"
            "      --expect-status N   count other statuses as check failures\n"
            "      --expect-body-size N  count responses with another body size as check failures\n"
            "      --compare           persistent vs per-request connections, HTTP/1.1 and h2c\n"
            "                          (and gRPC with --grpc, on the same server)\n"
            "      --json              print one JSON object instead of the summary\n"
            "      --fail-on-error     exit 1 if any request failed\n"
            "      --proxy v1|v2       begin every connection with a PROXY protocol header\n"
            "                          (as a load balancer in front of the server does)\n"
            "  -v, --verbose           say why connections fail\n"
            "WebSocket (a ws:// URL; a request is a message and its echo):\n"
            "  -m N                    messages in flight per connection (default 1)\n"
            "      --body-size BYTES   message size (default 32)\n"
            "      --binary            binary messages (default: text)\n"
            "      --close             a new connection (and handshake) for every message\n"
            "gRPC (--grpc; a request is a unary call of the grpcecho module, over h2c):\n"
            "      --grpc              call URL's path (default /petrel.bench.Echo/Echo); -m,\n"
            "                          --close as for h2c; answers need grpc-status 0 and the\n"
            "                          request_id and payload echoed\n"
            "      --body-size BYTES   payload size (default 0)\n"
            "      --help, --version\n");
}

static _Noreturn void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "petrel-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

static long parse_long(const char *s, const char *opt, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "petrel-bench: %s: bad number '%s' (%ld..%ld)\n", opt, s, min, max);
        exit(2);
    }
    return v;
}

static double parse_time(const char *s, const char *opt)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v))
        goto bad;
    if (*end == 0 || strcmp(end, "s") == 0)
        return v;
    if (strcmp(end, "ms") == 0)
        return v / 1000.0;
    if (strcmp(end, "m") == 0)
        return v * 60.0;
    if (strcmp(end, "h") == 0)
        return v * 3600.0;
bad:
    fprintf(stderr, "petrel-bench: %s: bad time '%s' (e.g. 500ms, 10s, 2m)\n", opt, s);
    exit(2);
}

/* http://host[:port][/path] */
static void parse_url(bench_opts_t *o, const char *url)
{
    const char *p = url;
    if (strncmp(p, "http://", 7) == 0)
        p += 7;
    else if (strncmp(p, "ws://", 5) == 0) /* WebSocket */
        p += 5, o->proto = BENCH_WS;
    else if (strstr(p, "://"))
        die("only http:// and ws:// URLs are supported (h2c: add --h2): %s", url);
    const char *slash = strchr(p, '/');
    const char *hend = slash ? slash : p + strlen(p);
    const char *hs = p, *he, *port = NULL;
    if (*p == '[') {
        he = memchr(p, ']', (size_t)(hend - p));
        if (!he)
            die("bad URL: %s", url);
        hs = p + 1;
        if (he + 1 < hend && he[1] == ':')
            port = he + 2;
    } else {
        he = memchr(p, ':', (size_t)(hend - p));
        if (he)
            port = he + 1;
        else
            he = hend;
    }
    if (he == hs || (size_t)(he - hs) >= sizeof o->host)
        die("bad host in URL: %s", url);
    memcpy(o->host, hs, (size_t)(he - hs));
    o->host[he - hs] = 0;
    if (port) {
        size_t n = (size_t)(hend - port);
        if (n == 0 || n >= sizeof o->port_str)
            die("bad port in URL: %s", url);
        memcpy(o->port_str, port, n);
        o->port_str[n] = 0;
    } else {
        strcpy(o->port_str, "80");
    }
    snprintf(o->path, sizeof o->path, "%s", slash ? slash : "/");
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    int r = getaddrinfo(o->host, o->port_str, &hints, &ai);
    if (r != 0) {
        fprintf(stderr, "petrel-bench: %s:%s: %s\n", o->host, o->port_str, gai_strerror(r));
        exit(2);
    }
    memcpy(&o->addr, ai->ai_addr, ai->ai_addrlen);
    o->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    if (*p == '[') { /* keep the brackets for the Host header */
        size_t n = strlen(o->host);
        if (n + 3 > sizeof o->host)
            die("bad host in URL: %s", url);
        memmove(o->host + 1, o->host, n);
        o->host[0] = '[';
        o->host[n + 1] = ']';
        o->host[n + 2] = 0;
    }
}

/* ------------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int run(const bench_opts_t *o, result_t *res, int progress)
{
    bench_stop = 0;
    int nt = o->threads;
    if (nt > o->conns)
        nt = o->conns;
    bench_thread_t *ths = calloc((size_t)nt, sizeof *ths);
    if (!ths)
        die("%s", "out of memory");
    uint64_t start = bench_now();
    uint64_t t_measure = start + (uint64_t)(o->warmup * 1e9);
    int rc = 0;
    for (int i = 0; i < nt; i++) {
        bench_thread_t *th = &ths[i];
        th->o = o;
        th->proto = o->proto == BENCH_H2 ? &bench_proto_h2 : &bench_proto_h1;
        if (o->proto == BENCH_WS)
            th->proto = &bench_proto_ws;
        th->id = i;
        th->ep = -1;
        th->nconns = o->conns / nt + (i < o->conns % nt);
        th->nmode = o->nreq > 0;
        th->quota = th->nmode ? o->nreq / (uint64_t)nt + ((uint64_t)i < o->nreq % (uint64_t)nt) : 0;
        th->t_measure = t_measure;
        th->t_end = th->nmode ? UINT64_MAX : t_measure + (uint64_t)(o->duration * 1e9);
        if (bench_thread_setup(th) < 0) {
            fprintf(stderr, "petrel-bench: cannot set up a thread: %s\n", strerror(errno));
            rc = -1;
        }
    }
    int started = 0;
    for (int i = 0; rc == 0 && i < nt; i++) {
        if (pthread_create(&ths[i].tid, NULL, bench_thread_main, &ths[i]) != 0) {
            fprintf(stderr, "petrel-bench: cannot start a thread\n");
            rc = -1;
            /* the ones started finish on their own (-d) or with their quota */
            break;
        }
        started++;
    }
    /* the progress line, once a second, on a terminal only */
    uint64_t next = bench_now() + 1000000000ull;
    int done = rc != 0;
    while (!done) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        done = 1;
        for (int i = 0; i < started; i++)
            if (__atomic_load_n(&ths[i].t_finish, __ATOMIC_ACQUIRE) == 0)
                done = 0;
        if (interrupted) /* finish now, keep what was measured */
            __atomic_store_n(&bench_stop, 1, __ATOMIC_RELAXED);
        uint64_t now = bench_now();
        if (progress && now >= next && !done) {
            uint64_t req = 0, err = 0;
            for (int i = 0; i < started; i++) {
                req += __atomic_load_n(&ths[i].prog_requests, __ATOMIC_RELAXED);
                err += __atomic_load_n(&ths[i].prog_errors, __ATOMIC_RELAXED);
            }
            double el = now > t_measure ? (double)(now - t_measure) / 1e9 : 0;
            if (now < t_measure)
                fprintf(stdout, "\r  warming up... %.0fs left   ", (double)(t_measure - now) / 1e9);
            else
                fprintf(stdout, "\r  %6.1fs  %llu requests  %.0f req/s  %llu errors   ", el,
                        (unsigned long long)req, el > 0 ? (double)req / el : 0.0,
                        (unsigned long long)err);
            fflush(stdout);
            next += 1000000000ull;
        }
    }
    if (progress && started) {
        fprintf(stdout, "\r%70s\r", "");
        fflush(stdout);
    }
    uint64_t finish = 0;
    memset(res, 0, sizeof *res);
    bench_hist_init(&res->st.hist);
    for (int i = 0; i < nt; i++) {
        bench_thread_t *th = &ths[i];
        if (i < started)
            pthread_join(th->tid, NULL);
        if (th->t_finish > finish)
            finish = th->t_finish;
        res->st.requests += th->st.requests;
        for (int k = 0; k < BENCH_ERR_N; k++)
            res->st.errors[k] += th->st.errors[k];
        res->st.bytes_in += th->st.bytes_in;
        res->st.bytes_out += th->st.bytes_out;
        res->st.connects += th->st.connects;
        res->st.reconnects += th->st.reconnects;
        res->st.handshakes += th->st.handshakes;
        res->st.handshake_sum += th->st.handshake_sum;
        if (th->st.handshake_max > res->st.handshake_max)
            res->st.handshake_max = th->st.handshake_max;
        bench_hist_merge(&res->st.hist, &th->st.hist);
        bench_thread_free(th);
    }
    free(ths);
    if (o->nreq > 0 || interrupted)
        res->duration_s = finish > t_measure ? (double)(finish - t_measure) / 1e9 : 0;
    else
        res->duration_s = o->duration;
    res->conns = o->conns;
    res->concurrency = o->conns * (o->per_request         ? 1
                                   : o->proto == BENCH_H2 ? o->streams
                                   : o->proto == BENCH_WS ? o->streams
                                                          : o->depth);
    return rc;
}

/* ------------------------------------------------------------------------- */

static uint64_t total_errors(const bench_stats_t *st)
{
    uint64_t n = 0;
    for (int k = 0; k < BENCH_ERR_N; k++)
        n += st->errors[k];
    return n;
}

/* a duration in ns, as wrk prints it */
static const char *fmt_time(char *buf, size_t n, double ns)
{
    if (ns < 1e3)
        snprintf(buf, n, "%.0fns", ns);
    else if (ns < 1e6)
        snprintf(buf, n, "%.2fus", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, n, "%.2fms", ns / 1e6);
    else
        snprintf(buf, n, "%.2fs", ns / 1e9);
    return buf;
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

static void print_human(const bench_opts_t *o, const result_t *r)
{
    const bench_stats_t *st = &r->st;
    const bench_hist_t *h = &st->hist;
    char a[32], b[32], c[32];
    printf("Running %s test @ %s\n", o->nreq ? "fixed-count" : "timed", o->url);
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
    printf("  Latency   %10s %10s %10s %10s\n", "Avg", "Stdev", "Min", "Max");
    printf("            %10s %10s", fmt_time(a, sizeof a, bench_hist_mean(h)),
           fmt_time(b, sizeof b, bench_hist_stdev(h)));
    printf(" %10s %10s\n", fmt_time(c, sizeof c, h->count ? (double)h->min : 0),
           fmt_time(a, sizeof a, (double)h->max));
    printf("  Latency Distribution\n");
    static const double ps[] = {50, 75, 90, 99, 99.9};
    static const char *const pn[] = {"50%", "75%", "90%", "99%", "99.9%"};
    for (int i = 0; i < 5; i++)
        printf("  %7s  %10s\n", pn[i],
               fmt_time(a, sizeof a, (double)bench_hist_percentile(h, ps[i])));
    printf("  %7s  %10s\n", "max", fmt_time(a, sizeof a, (double)h->max));
    printf("  %llu requests in %.2fs, %s read, %s written\n", (unsigned long long)st->requests,
           r->duration_s, fmt_bytes(a, sizeof a, (double)st->bytes_in),
           fmt_bytes(b, sizeof b, (double)st->bytes_out));
    if (total_errors(st)) {
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
               fmt_time(a, sizeof a, st->handshakes ? st->handshake_sum / st->handshakes : 0),
               fmt_time(b, sizeof b, (double)st->handshake_max));
    double rps = r->duration_s > 0 ? (double)st->requests / r->duration_s : 0;
    printf("Requests/sec: %12.2f\n", rps);
    printf("Transfer/sec: %12s\n",
           fmt_bytes(a, sizeof a, r->duration_s > 0 ? (double)st->bytes_in / r->duration_s : 0));
}

static void print_json_result(const bench_opts_t *o, const result_t *r, const char *extra)
{
    const bench_stats_t *st = &r->st;
    const bench_hist_t *h = &st->hist;
    double rps = r->duration_s > 0 ? (double)st->requests / r->duration_s : 0;
    printf("{\"protocol\":\"%s\",\"connection\":\"%s\",",
           o->proto == BENCH_WS   ? "websocket"
           : o->grpc              ? "grpc"
           : o->proto == BENCH_H2 ? "h2c"
                                  : "http/1.1",
           o->per_request ? "per-request" : "persistent");
    if (o->grpc)
        printf("\"method\":\"%s\",\"payload_size\":%zu,", o->path, o->body_size);
    if (o->proto == BENCH_WS)
        printf("\"message_size\":%zu,\"binary\":%s,\"in_flight\":%d,"
               "\"handshakes\":{\"count\":%llu,\"mean_us\":%.1f,\"max_us\":%.1f},",
               o->body_size, o->ws_binary ? "true" : "false", o->per_request ? 1 : o->streams,
               (unsigned long long)st->handshakes,
               st->handshakes ? st->handshake_sum / st->handshakes / 1e3 : 0.0,
               (double)st->handshake_max / 1e3);
    printf("\"connections\":%d,\"threads\":%d,\"pipeline\":%d,\"streams\":%d,", o->conns,
           o->threads, o->proto == BENCH_H1 && !o->per_request ? o->depth : 1,
           o->proto == BENCH_H2 && !o->per_request ? o->streams : 1);
    printf("\"requests\":%llu,\"duration_s\":%.6f,\"rps\":%.2f,", (unsigned long long)st->requests,
           r->duration_s, rps);
    printf("\"bytes_read\":%llu,\"bytes_written\":%llu,\"connects\":%llu,\"server_closes\":%llu,",
           (unsigned long long)st->bytes_in, (unsigned long long)st->bytes_out,
           (unsigned long long)st->connects, (unsigned long long)st->reconnects);
    printf("\"errors\":{");
    for (int k = 0; k < BENCH_ERR_N; k++)
        printf("\"%s\":%llu,", bench_err_names[k], (unsigned long long)st->errors[k]);
    printf("\"total\":%llu},", (unsigned long long)total_errors(st));
    printf("%s\"latency_us\":{\"min\":%.1f,\"mean\":%.1f,\"stdev\":%.1f,\"p50\":%.1f,\"p75\":%.1f,"
           "\"p90\":%.1f,\"p95\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f}}",
           extra, h->count ? (double)h->min / 1e3 : 0.0, bench_hist_mean(h) / 1e3,
           bench_hist_stdev(h) / 1e3, (double)bench_hist_percentile(h, 50) / 1e3,
           (double)bench_hist_percentile(h, 75) / 1e3, (double)bench_hist_percentile(h, 90) / 1e3,
           (double)bench_hist_percentile(h, 95) / 1e3, (double)bench_hist_percentile(h, 99) / 1e3,
           (double)bench_hist_percentile(h, 99.9) / 1e3, (double)h->max / 1e3);
}

/* ------------------------------------------------------------------------- */
/* --compare: persistent vs per-request, HTTP/1.1 and h2c, and with --grpc
 * gRPC calls too (a persistent channel vs a new connection per call). */

static int compare(const bench_opts_t *base, int json)
{
    struct row {
        const char *proto, *mode;
        bench_opts_t o;
        result_t r;
        int ok, skipped;
    } rows[6];
    const char *pn[3] = {"HTTP/1.1", "h2c", "gRPC"};
    const char *jn[3] = {"http/1.1", "h2c", "grpc"};
    const char *mn[2] = {"persistent", "per-request"};
    int nrows = base->grpc ? 6 : 4;
    int conc = base->conns;
    for (int i = 0; i < nrows; i++) {
        struct row *w = &rows[i];
        w->proto = pn[i / 2];
        w->mode = mn[i % 2];
        w->o = *base;
        w->o.proto = i / 2 ? BENCH_H2 : BENCH_H1;
        w->o.grpc = i / 2 == 2;
        if (w->o.grpc) { /* the echo method of the same server */
            snprintf(w->o.path, sizeof w->o.path, "%s", PETREL__GRPC_ECHO_PATH);
            w->o.method = "POST";
            w->o.expect_status = 0;
            w->o.expect_body_size = -1;
        }
        w->o.per_request = i % 2;
        w->o.depth = 1;
        if (w->o.proto == BENCH_H2 && !w->o.per_request) {
            /* the same concurrency over fewer connections when -m > 1 */
            int m = base->streams < conc ? base->streams : conc;
            w->o.streams = m;
            w->o.conns = (conc + m - 1) / m;
        } else {
            w->o.streams = 1;
            w->o.conns = conc;
        }
        memset(&w->r, 0, sizeof w->r);
        w->ok = 0;
        w->skipped = 0;
    }
    for (int i = 0; i < nrows && !interrupted; i++) {
        struct row *w = &rows[i];
        if (i % 2 == 0) {
            /* one request first, with a short timeout: a server that does not
             * speak the protocol would otherwise cost a timeout per request */
            bench_opts_t probe = w->o;
            result_t pr;
            probe.nreq = 1;
            probe.duration = 0;
            probe.warmup = 0;
            probe.conns = probe.streams = probe.threads = 1;
            if (probe.timeout > 2)
                probe.timeout = 2;
            if (run(&probe, &pr, 0) < 0)
                return 2;
            if (pr.st.requests == 0 || total_errors(&pr.st) > 0) {
                rows[i].skipped = rows[i + 1].skipped = 1;
                if (!json)
                    fprintf(stderr,
                            "petrel-bench: compare: %s: the probe request failed; "
                            "skipped%s\n",
                            w->proto, w->o.grpc ? " (is the grpcecho module loaded?)" : "");
                i++;
                continue;
            }
        }
        if (!json)
            fprintf(stderr, "petrel-bench: compare: %s %s...\n", w->proto, w->mode);
        if (run(&w->o, &w->r, 0) < 0)
            return 2;
        w->ok = w->r.st.requests > 0;
    }
    uint64_t errs = 0;
    for (int i = 0; i < nrows; i++)
        errs += total_errors(&rows[i].r.st);
    if (json) {
        printf("{\"compare\":[");
        for (int i = 0; i < nrows; i++) {
            printf(i ? ",\n  " : "\n  ");
            print_json_result(&rows[i].o, &rows[i].r,
                              rows[i].skipped ? "\"skipped\":\"the probe request failed\"," : "");
        }
        printf("\n],\"improvement\":{");
        for (int p = 0; p < nrows / 2; p++) {
            const result_t *a = &rows[2 * p].r, *b = &rows[2 * p + 1].r;
            double la = bench_hist_mean(&a->st.hist), lb = bench_hist_mean(&b->st.hist);
            double ta = a->duration_s > 0 ? a->st.requests / a->duration_s : 0;
            double tb = b->duration_s > 0 ? b->st.requests / b->duration_s : 0;
            printf("%s\"%s\":{\"avg_latency\":%.3f,\"throughput\":%.3f}", p ? "," : "", jn[p],
                   la > 0 && lb > 0 ? lb / la : 0.0, ta > 0 && tb > 0 ? ta / tb : 0.0);
        }
        printf("}%s}\n", base->grpc ? "" : ",\"grpc\":\"not measured: add --grpc\"");
        return 0;
    }
    printf("Connection reuse: %s, %s%s, concurrency %d\n", base->url,
           base->body_size ? "" : base->method, base->body_size ? "POST with a JSON body" : "",
           conc);
    if (base->body_size)
        printf("  (body %zu bytes)\n", base->body_size);
    if (base->grpc)
        printf("  (gRPC: unary %s calls over h2c, payload %zu bytes)\n", PETREL__GRPC_ECHO_PATH,
               base->body_size);
    printf("%-9s %-12s %9s %11s %10s %10s %8s %8s %8s %8s %7s\n", "protocol", "connection",
           "requests", "concurrency", "total ms", "req/s", "avg ms", "p50 ms", "p95 ms", "p99 ms",
           "errors");
    for (int i = 0; i < nrows; i++) {
        const struct row *w = &rows[i];
        const bench_hist_t *h = &w->r.st.hist;
        if (w->skipped) {
            printf("%-9s %-12s %9s   (skipped: a probe request got no response)\n", w->proto,
                   w->mode, "n/a");
            continue;
        }
        if (!w->ok) {
            printf("%-9s %-12s %9s   (no responses: %llu errors)\n", w->proto, w->mode, "n/a",
                   (unsigned long long)total_errors(&w->r.st));
            continue;
        }
        printf(
            "%-9s %-12s %9llu %11d %10.1f %10.0f %8.3f %8.3f %8.3f %8.3f %7llu\n", w->proto,
            w->mode, (unsigned long long)w->r.st.requests, conc, w->r.duration_s * 1e3,
            w->r.st.requests / w->r.duration_s, bench_hist_mean(h) / 1e6,
            (double)bench_hist_percentile(h, 50) / 1e6, (double)bench_hist_percentile(h, 95) / 1e6,
            (double)bench_hist_percentile(h, 99) / 1e6, (unsigned long long)total_errors(&w->r.st));
    }
    printf("\nPersistent vs per-request connections:\n");
    for (int p = 0; p < nrows / 2; p++) {
        const struct row *a = &rows[2 * p], *b = &rows[2 * p + 1];
        if (!a->ok || !b->ok) {
            printf("  %-9s n/a\n", pn[p]);
            continue;
        }
        double la = bench_hist_mean(&a->r.st.hist), lb = bench_hist_mean(&b->r.st.hist);
        double ta = a->r.st.requests / a->r.duration_s, tb = b->r.st.requests / b->r.duration_s;
        printf("  %-9s average latency %.2fx lower (%.1f%% less), throughput %.2fx higher\n", pn[p],
               lb / la, 100.0 * (lb - la) / lb, ta / tb);
    }
    if (!base->grpc)
        printf("  gRPC      not measured: add --grpc (the server needs the grpcecho module)\n");
    return errs ? 1 : 0;
}

/* ------------------------------------------------------------------------- */

enum {
    OPT_H2 = 256,
    OPT_CLOSE,
    OPT_WARMUP,
    OPT_BODY_SIZE,
    OPT_TIMEOUT,
    OPT_EXPECT_STATUS,
    OPT_EXPECT_BODY,
    OPT_COMPARE,
    OPT_JSON,
    OPT_FAIL,
    OPT_HELP,
    OPT_VERSION,
    OPT_BINARY,
    OPT_GRPC,
    OPT_PROXY,
};

/* The PROXY protocol header of --proxy (HAProxy's specification): a client
 * of the documentation ranges, to the server's address and port. */
static void make_proxy(bench_opts_t *o, const char *version)
{
    int v6 = o->addr.ss_family == AF_INET6;
    const struct sockaddr_in *in = (const struct sockaddr_in *)&o->addr;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&o->addr;
    unsigned port = ntohs(v6 ? in6->sin6_port : in->sin_port);
    if (strcmp(version, "v1") == 0) {
        char dst[INET6_ADDRSTRLEN];
        inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? (const void *)&in6->sin6_addr
                                              : (const void *)&in->sin_addr,
                  dst, sizeof dst);
        o->proxy_len = (size_t)snprintf(o->proxy, sizeof o->proxy, "PROXY %s %s %s 40000 %u\r\n",
                                        v6 ? "TCP6" : "TCP4", v6 ? "2001:db8::1" : "192.0.2.1",
                                        dst, port);
    } else if (strcmp(version, "v2") == 0) {
        static const char sig[12] = "\r\n\r\n\0\r\nQUIT\n";
        unsigned char *p = (unsigned char *)o->proxy;
        memcpy(p, sig, 12);
        p[12] = 0x21;              /* version 2, PROXY */
        p[13] = v6 ? 0x21 : 0x11;  /* INET6 or INET, STREAM */
        size_t alen = v6 ? 36 : 12;
        p[14] = 0;
        p[15] = (unsigned char)alen;
        unsigned char *a = p + 16;
        if (v6) {
            inet_pton(AF_INET6, "2001:db8::1", a);
            memcpy(a + 16, &in6->sin6_addr, 16);
            a += 32;
        } else {
            inet_pton(AF_INET, "192.0.2.1", a);
            memcpy(a + 4, &in->sin_addr, 4);
            a += 8;
        }
        a[0] = 40000 >> 8;
        a[1] = 40000 & 0xff;
        a[2] = (unsigned char)(port >> 8);
        a[3] = (unsigned char)port;
        o->proxy_len = 16 + alen;
    } else {
        die("--proxy: expected v1 or v2, got '%s'", version);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"connections", required_argument, NULL, 'c'},
        {"duration", required_argument, NULL, 'd'},
        {"requests", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"pipeline", required_argument, NULL, 'p'},
        {"streams", required_argument, NULL, 'm'},
        {"method", required_argument, NULL, 'X'},
        {"header", required_argument, NULL, 'H'},
        {"verbose", no_argument, NULL, 'v'},
        {"h2", no_argument, NULL, OPT_H2},
        {"close", no_argument, NULL, OPT_CLOSE},
        {"proxy", required_argument, NULL, OPT_PROXY},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"body-size", required_argument, NULL, OPT_BODY_SIZE},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"expect-status", required_argument, NULL, OPT_EXPECT_STATUS},
        {"expect-body-size", required_argument, NULL, OPT_EXPECT_BODY},
        {"compare", no_argument, NULL, OPT_COMPARE},
        {"json", no_argument, NULL, OPT_JSON},
        {"fail-on-error", no_argument, NULL, OPT_FAIL},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {"binary", no_argument, NULL, OPT_BINARY},
        {"grpc", no_argument, NULL, OPT_GRPC},
        {NULL, 0, NULL, 0},
    };
    static bench_opts_t o;
    o.conns = 10;
    o.threads = 1;
    o.depth = 1;
    o.streams = 1;
    o.timeout = 10;
    o.method = NULL;
    o.expect_body_size = -1;
    int json = 0, fail_on_error = 0, do_compare = 0, have_d = 0, have_m = 0;
    const char *proxy = NULL;
    int have_body = 0, have_p = 0, have_h2 = 0, have_expect = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:d:n:t:p:m:X:H:v", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            o.conns = (int)parse_long(optarg, "-c", 1, 1000000);
            break;
        case 'd':
            o.duration = parse_time(optarg, "-d");
            have_d = 1;
            break;
        case 'n':
            o.nreq = (uint64_t)parse_long(optarg, "-n", 1, LONG_MAX);
            break;
        case 't':
            o.threads = (int)parse_long(optarg, "-t", 1, 1024);
            break;
        case 'p':
            o.depth = (int)parse_long(optarg, "-p", 1, 65536);
            have_p = 1;
            break;
        case 'm':
            o.streams = (int)parse_long(optarg, "-m", 1, 65536);
            have_m = 1;
            break;
        case 'X':
            o.method = optarg;
            break;
        case 'H': {
            const char *colon = strchr(optarg, ':');
            if (!colon || colon == optarg)
                die("-H wants 'Name: value', got '%s'", optarg);
            bench_header_t *hs = realloc(o.headers, (size_t)(o.nheaders + 1) * sizeof *hs);
            if (!hs)
                die("%s", "out of memory");
            o.headers = hs;
            char *name = strndup(optarg, (size_t)(colon - optarg));
            const char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (!name)
                die("%s", "out of memory");
            hs[o.nheaders].name = name;
            hs[o.nheaders].value = v;
            o.nheaders++;
            break;
        }
        case 'v':
            o.verbose = 1;
            break;
        case OPT_H2:
            o.proto = BENCH_H2;
            have_h2 = 1;
            break;
        case OPT_CLOSE:
            o.per_request = 1;
            break;
        case OPT_PROXY:
            proxy = optarg;
            break;
        case OPT_WARMUP:
            o.warmup = parse_time(optarg, "--warmup");
            break;
        case OPT_BODY_SIZE:
            o.body_size = (size_t)parse_long(optarg, "--body-size", 0, 1L << 30);
            have_body = 1;
            break;
        case OPT_TIMEOUT:
            o.timeout = parse_time(optarg, "--timeout");
            break;
        case OPT_EXPECT_STATUS:
            o.expect_status = (int)parse_long(optarg, "--expect-status", 100, 599);
            have_expect = 1;
            break;
        case OPT_EXPECT_BODY:
            o.expect_body_size = parse_long(optarg, "--expect-body-size", 0, LONG_MAX);
            have_expect = 1;
            break;
        case OPT_COMPARE:
            do_compare = 1;
            break;
        case OPT_JSON:
            json = 1;
            break;
        case OPT_FAIL:
            fail_on_error = 1;
            break;
        case OPT_BINARY:
            o.ws_binary = 1;
            break;
        case OPT_GRPC:
            o.grpc = 1;
            break;
        case OPT_HELP:
            usage(stdout);
            return 0;
        case OPT_VERSION:
            printf("petrel-bench %s\n", PACKAGE_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o.url = argv[optind];
    parse_url(&o, o.url);
    if (proxy)
        make_proxy(&o, proxy);
    if (o.proto == BENCH_WS) { /* WebSocket: -m is messages in flight */
        if (have_h2 || have_p || do_compare || o.method || have_expect)
            die("%s", "--h2, -p, --compare, -X and --expect-* are for HTTP, not ws:// URLs");
        if (!have_body)
            o.body_size = 32;
        o.method = "GET";
    } else if (o.ws_binary) {
        die("%s", "--binary is for WebSocket (a ws:// URL)");
    }
    if (have_m && o.proto != BENCH_WS)
        o.proto = BENCH_H2;
    if (o.grpc && o.proto == BENCH_WS)
        die("%s", "--grpc is for http:// URLs");
    if (o.grpc && !do_compare) { /* gRPC calls: h2c, POST, the echo method */
        if (have_p || have_expect || (o.method && strcmp(o.method, "POST") != 0))
            die("%s", "--grpc goes without -p, -X and --expect-* (the answers are checked)");
        if (o.body_size > (1u << 30) - 64)
            die("%s", "--body-size: at most 1g - 64 with --grpc");
        o.proto = BENCH_H2;
        o.method = "POST";
        if (strcmp(o.path, "/") == 0)
            snprintf(o.path, sizeof o.path, "%s", PETREL__GRPC_ECHO_PATH);
    }
    if (!o.method)
        o.method = o.body_size ? "POST" : "GET";
    if (o.proto != BENCH_WS && !(o.grpc && !do_compare) && o.body_size > 0 && o.body_size < 47)
        die("%s", "--body-size: at least 47 bytes (the JSON around the payload), or 0");
    if (have_d && o.nreq)
        die("%s", "-d and -n exclude each other");
    if (!have_d && !o.nreq) {
        if (do_compare)
            o.nreq = 10000;
        else
            o.duration = 10;
    }
    if (o.duration <= 0 && !o.nreq)
        die("%s", "-d must be more than 0");
    if (o.timeout <= 0)
        die("%s", "--timeout must be more than 0");
    if (o.per_request)
        o.depth = o.streams = 1;
    if (o.proto == BENCH_H2 && o.depth > 1)
        die("%s", "-p is for HTTP/1.1; h2c uses -m");
    if (o.threads > o.conns)
        o.threads = o.conns;
    if (o.nreq && o.nreq < (uint64_t)o.threads)
        o.threads = (int)o.nreq;

    /* enough file descriptors for the connections */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)o.conns + 64) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)o.conns + 64 ? rl.rlim_max : (rlim_t)o.conns + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);

    int rc;
    if (do_compare) {
        rc = compare(&o, json);
        if (rc == 1 && !fail_on_error)
            rc = 0;
    } else {
        result_t r;
        if (run(&o, &r, !json && isatty(STDOUT_FILENO)) < 0)
            return 2;
        if (json) {
            print_json_result(&o, &r, "");
            printf("\n");
        } else {
            print_human(&o, &r);
        }
        rc = fail_on_error && total_errors(&r.st) ? 1 : 0;
    }
    for (int i = 0; i < o.nheaders; i++)
        free((char *)o.headers[i].name);
    free(o.headers);
    return rc;
}
