/*
 * main.c -- petrel-bench: options, threads, the live progress line, and
 * --compare (the reports are in report.c, --sweep in sweep.c).
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
#include "grpc/grpcwire.h"

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
            "Open loop (latency at a given load, without coordinated omission):\n"
            "  -R, --rate R            send R requests/s in all (e.g. 5000, 20k), each at its\n"
            "                          own intended time on a connection with room; latency\n"
            "                          counts from the intended time (also -m streams, messages)\n"
            "      --max-lag TIME      fail (exit 3) when the client itself sent a request later\n"
            "                          than this after it was due (default 10ms; 0: report only)\n"
            "      --spin TIME         poll, not sleep, for this long before each send is due\n"
            "                          (default 1ms: a late wake-up would add to latencies)\n"
            "      --sweep             find the maximum rate (closed loop), then run -d at each\n"
            "                          step of it; print a table of the latency per load\n"
            "      --sweep-steps LIST  percent of the maximum (default 10,25,50,75,80,90,95,100)\n"
            "      --sweep-max R       take R as the maximum (no closed-loop run)\n"
            "      --plot FILE         with --sweep: the latency-vs-load chart, .svg or .png\n"
            "      --label NAME        name the server in reports and charts\n"
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

/* a rate: requests per second, e.g. 500, 2.5, 20k, 1.5m */
static double parse_rate(const char *s, const char *opt)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != s && (*end == 'k' || *end == 'K'))
        v *= 1e3, end++;
    else if (end != s && (*end == 'm' || *end == 'M'))
        v *= 1e6, end++;
    if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 1e9) {
        fprintf(stderr,
                "petrel-bench: %s: bad rate '%s' (requests per second, more than 0 and at "
                "most 1000m: e.g. 500, 20k, 1.5m)\n",
                opt, s);
        exit(2);
    }
    return v;
}

/* --sweep-steps: percentages, increasing */
static void parse_steps(bench_opts_t *o, const char *s)
{
    const char *p = s;
    o->nsteps = 0;
    for (;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v <= 0 || v > 1000 ||
            (o->nsteps > 0 && v <= o->steps[o->nsteps - 1]) ||
            o->nsteps == (int)(sizeof o->steps / sizeof o->steps[0]) || (*end && *end != ','))
            die("--sweep-steps: want up to 32 increasing percentages above 0 (at most 1000), "
                "comma-separated, e.g. 10,50,90,100; got '%s'",
                s);
        o->steps[o->nsteps++] = v;
        if (!*end)
            return;
        p = end + 1;
    }
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
    if (strcmp(end, "us") == 0)
        return v / 1e6;
    if (strcmp(end, "m") == 0)
        return v * 60.0;
    if (strcmp(end, "h") == 0)
        return v * 3600.0;
bad:
    fprintf(stderr, "petrel-bench: %s: bad time '%s' (e.g. 100us, 500ms, 10s, 2m)\n", opt, s);
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

int bench_interrupted(void)
{
    return interrupted != 0;
}

int bench_run(const bench_opts_t *o, bench_result_t *res, int progress)
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
        th->nthreads = nt;
        th->t0 = start; /* --rate: the schedule starts with the warm-up */
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
    bench_hist_init(&res->st.lag);
    bench_hist_init(&res->st.read_delay);
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
        res->st.done_in_window += th->st.done_in_window;
        res->st.scheduled += th->st.scheduled;
        res->st.queued += th->st.queued;
        res->st.unsent += th->st.unsent;
        bench_hist_merge(&res->st.lag, &th->st.lag);
        bench_hist_merge(&res->st.read_delay, &th->st.read_delay);
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
/* --compare: persistent vs per-request, HTTP/1.1 and h2c, and with --grpc
 * gRPC calls too (a persistent channel vs a new connection per call). */

static int compare(const bench_opts_t *base, int json)
{
    struct row {
        const char *proto, *mode;
        bench_opts_t o;
        bench_result_t r;
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
            bench_result_t pr;
            probe.nreq = 1;
            probe.duration = 0;
            probe.warmup = 0;
            probe.conns = probe.streams = probe.threads = 1;
            if (probe.timeout > 2)
                probe.timeout = 2;
            if (bench_run(&probe, &pr, 0) < 0)
                return 2;
            if (pr.st.requests == 0 || bench_total_errors(&pr.st) > 0) {
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
        if (bench_run(&w->o, &w->r, 0) < 0)
            return 2;
        w->ok = w->r.st.requests > 0;
    }
    uint64_t errs = 0;
    for (int i = 0; i < nrows; i++)
        errs += bench_total_errors(&rows[i].r.st);
    if (json) {
        printf("{\"compare\":[");
        for (int i = 0; i < nrows; i++) {
            printf(i ? ",\n  " : "\n  ");
            bench_print_json(&rows[i].o, &rows[i].r,
                             rows[i].skipped ? "\"skipped\":\"the probe request failed\"," : "");
        }
        printf("\n],\"improvement\":{");
        for (int p = 0; p < nrows / 2; p++) {
            const bench_result_t *a = &rows[2 * p].r, *b = &rows[2 * p + 1].r;
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
                   (unsigned long long)bench_total_errors(&w->r.st));
            continue;
        }
        printf("%-9s %-12s %9llu %11d %10.1f %10.0f %8.3f %8.3f %8.3f %8.3f %7llu\n", w->proto,
               w->mode, (unsigned long long)w->r.st.requests, conc, w->r.duration_s * 1e3,
               w->r.st.requests / w->r.duration_s, bench_hist_mean(h) / 1e6,
               (double)bench_hist_percentile(h, 50) / 1e6,
               (double)bench_hist_percentile(h, 95) / 1e6,
               (double)bench_hist_percentile(h, 99) / 1e6,
               (unsigned long long)bench_total_errors(&w->r.st));
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
    OPT_MAX_LAG,
    OPT_SPIN,
    OPT_SWEEP,
    OPT_SWEEP_STEPS,
    OPT_SWEEP_MAX,
    OPT_PLOT,
    OPT_LABEL,
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
        inet_ntop(v6 ? AF_INET6 : AF_INET,
                  v6 ? (const void *)&in6->sin6_addr : (const void *)&in->sin_addr, dst,
                  sizeof dst);
        o->proxy_len =
            (size_t)snprintf(o->proxy, sizeof o->proxy, "PROXY %s %s %s 40000 %u\r\n",
                             v6 ? "TCP6" : "TCP4", v6 ? "2001:db8::1" : "192.0.2.1", dst, port);
    } else if (strcmp(version, "v2") == 0) {
        static const char sig[12] = "\r\n\r\n\0\r\nQUIT\n";
        unsigned char *p = (unsigned char *)o->proxy;
        memcpy(p, sig, 12);
        p[12] = 0x21;             /* version 2, PROXY */
        p[13] = v6 ? 0x21 : 0x11; /* INET6 or INET, STREAM */
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
        {"rate", required_argument, NULL, 'R'},
        {"max-lag", required_argument, NULL, OPT_MAX_LAG},
        {"spin", required_argument, NULL, OPT_SPIN},
        {"sweep", no_argument, NULL, OPT_SWEEP},
        {"sweep-steps", required_argument, NULL, OPT_SWEEP_STEPS},
        {"sweep-max", required_argument, NULL, OPT_SWEEP_MAX},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"label", required_argument, NULL, OPT_LABEL},
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
    o.max_lag = 0.010;
    o.spin = 1e-3;
    static const double default_steps[] = {10, 25, 50, 75, 80, 90, 95, 100};
    o.nsteps = (int)(sizeof default_steps / sizeof default_steps[0]);
    memcpy(o.steps, default_steps, sizeof default_steps);
    int json = 0, fail_on_error = 0, do_compare = 0, have_d = 0, have_m = 0;
    const char *proxy = NULL;
    int have_body = 0, have_p = 0, have_h2 = 0, have_expect = 0, have_sweep_opt = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:d:n:t:p:m:X:H:vR:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'R':
            o.rate = parse_rate(optarg, "--rate");
            break;
        case OPT_MAX_LAG:
            o.max_lag = parse_time(optarg, "--max-lag");
            break;
        case OPT_SPIN:
            o.spin = parse_time(optarg, "--spin");
            if (o.spin > 0.1)
                die("--spin: at most 100ms, got '%s'", optarg);
            break;
        case OPT_SWEEP:
            o.sweep = 1;
            break;
        case OPT_SWEEP_STEPS:
            parse_steps(&o, optarg);
            have_sweep_opt = 1;
            break;
        case OPT_SWEEP_MAX:
            o.sweep_max = parse_rate(optarg, "--sweep-max");
            have_sweep_opt = 1;
            break;
        case OPT_PLOT:
            o.plot = optarg;
            have_sweep_opt = 1;
            break;
        case OPT_LABEL:
            o.label = optarg;
            break;
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
    if (have_sweep_opt && !o.sweep)
        die("%s", "--sweep-steps, --sweep-max and --plot go with --sweep");
    if (o.sweep && o.rate > 0)
        die("%s", "--rate and --sweep exclude each other (--sweep chooses the rates; "
                  "--sweep-max sets its 100 %)");
    if ((o.sweep || o.rate > 0) && do_compare)
        die("%s", "--compare is closed-loop: it goes without --rate and --sweep");
    if (o.sweep && o.nreq)
        die("%s", "--sweep runs each rate for -d: it goes without -n");
    if (o.plot) {
        size_t n = strlen(o.plot);
        int svg = n > 4 && strcasecmp(o.plot + n - 4, ".svg") == 0;
        int png = n > 4 && strcasecmp(o.plot + n - 4, ".png") == 0;
        if (!svg && !png)
            die("--plot: '%s': the file name must end in .svg or .png", o.plot);
        const char *why = png ? bench_plot_png_missing() : NULL;
        if (why)
            die("--plot: %s", why);
        int existed = access(o.plot, F_OK) == 0;
        FILE *f = fopen(o.plot, "a"); /* fail now, not after the sweep */
        if (!f) {
            fprintf(stderr, "petrel-bench: --plot: %s: %s\n", o.plot, strerror(errno));
            return 2;
        }
        fclose(f);
        if (!existed)
            unlink(o.plot);
    }
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
    } else if (o.sweep) {
        rc = bench_sweep(&o, json, fail_on_error);
    } else {
        bench_result_t r;
        if (bench_run(&o, &r, !json && isatty(STDOUT_FILENO)) < 0)
            return 2;
        if (json) {
            bench_print_json(&o, &r, "");
            printf("\n");
        } else {
            bench_print_human(&o, &r);
        }
        rc = fail_on_error && bench_total_errors(&r.st) ? 1 : 0;
        if (bench_lag_exceeded(&o, &r)) {
            bench_lag_warning(&o, &r, NULL);
            rc = 3;
        }
    }
    for (int i = 0; i < o.nheaders; i++)
        free((char *)o.headers[i].name);
    free(o.headers);
    return rc;
}
