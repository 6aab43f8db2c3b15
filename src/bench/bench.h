/*
 * bench.h -- petrel-bench, petrel's load generator: declarations shared by
 * its files (never installed).
 *
 *   hist.c     log-bucketed latency histogram (HDR-style)
 *   h1parse.c  incremental HTTP/1.1 response parser
 *   run.c      one epoll loop per thread: connections, timing, accounting,
 *              the read loop (bytes carried between reads) of all the modes,
 *              and the open-loop schedule of --rate
 *   h1.c       HTTP/1.1 client (keep-alive, pipelining, connection per request)
 *   h2.c       h2c client (prior knowledge) on nghttp2's client session
 *   wsframe.c  WebSocket without sockets: SHA-1, base64, the 101 check, frames
 *   ws.c       WebSocket echo client (RFC 6455)
 *   grpc.c     gRPC echo calls (--grpc): request messages, answer checks;
 *              carried by h2.c, bytes by ../grpcwire.c (shared with grpcecho)
 *   report.c   the human and JSON reports of one run
 *   sweep.c    --sweep: the maximum rate, then a run at each fraction of it
 *   plot.c     --plot: the latency-vs-load chart (SVG, or PNG by gnuplot)
 *   main.c     options, threads, --compare
 *
 * hist.c, h1parse.c and plot.c depend on nothing else, so
 * tests/check_bench.c links them alone; wsframe.c needs only h1parse.c
 * (bench_has_token), which tests/check_bench_ws.c links with it.
 */
#ifndef PETREL_BENCH_H
#define PETREL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* ------------------------------------------------------------------------- */
/* Histogram: values in nanoseconds, exact below 2 * BENCH_HIST_SUB, then each
 * power of two is split into BENCH_HIST_SUB buckets (relative error < 1/128).
 * Values at or above 2^BENCH_HIST_MAXBITS are clamped (about 4.9 hours). */

#define BENCH_HIST_SUB_BITS 7
#define BENCH_HIST_SUB (1u << BENCH_HIST_SUB_BITS)
#define BENCH_HIST_MAXBITS 44
#define BENCH_HIST_BUCKETS (BENCH_HIST_SUB * (BENCH_HIST_MAXBITS - BENCH_HIST_SUB_BITS + 1))

typedef struct bench_hist {
    uint64_t count;
    uint64_t min, max; /* exact; min is UINT64_MAX while empty */
    /* for mean and standard deviation: exact integers (values are below
     * 2^44 after clamping, so the squares of 2^40 of them still fit 128
     * bits), so merging the threads' histograms gives the figures one
     * histogram of all the values would */
    unsigned __int128 sum, sumsq;
    uint64_t buckets[BENCH_HIST_BUCKETS];
} bench_hist_t;

void bench_hist_init(bench_hist_t *h);
void bench_hist_record(bench_hist_t *h, uint64_t v);
void bench_hist_merge(bench_hist_t *into, const bench_hist_t *from);
/* The value at percentile p (0 < p <= 100): the highest value of the bucket
 * holding it, never above max.  0 when empty. */
uint64_t bench_hist_percentile(const bench_hist_t *h, double p);
double bench_hist_mean(const bench_hist_t *h);
/* A duration in ns, in its unit: "1.23ms" (reports, wrk's style), or with
 * chart "1.23 ms" (3 significant digits, µs for microseconds); returns buf. */
const char *bench_fmt_ns(char *buf, size_t n, double ns, int chart);
double bench_hist_stdev(const bench_hist_t *h);
/* Bucket arithmetic, exposed for the tests. */
unsigned bench_hist_index(uint64_t v);
uint64_t bench_hist_bucket_low(unsigned idx);
uint64_t bench_hist_bucket_high(unsigned idx);

/* ------------------------------------------------------------------------- */
/* HTTP/1.1 response parser.  Incremental: the caller passes the bytes it has;
 * the parser consumes whole response heads (all or nothing), whole chunk-size
 * and trailer lines, and any amount of body.  Bytes it did not consume must be
 * passed again, followed by new ones. */

enum {
    BENCH_H1P_ERROR = -1, /* malformed response: the connection is unusable */
    BENCH_H1P_MORE = 0,   /* consumed what it could; needs more bytes */
    BENCH_H1P_DONE = 1,   /* a response ended at buf + *used */
};

enum {
    BENCH_H1P_HEAD = 0,
    BENCH_H1P_BODY_CL,
    BENCH_H1P_CHUNK_SIZE,
    BENCH_H1P_CHUNK_DATA,
    BENCH_H1P_CHUNK_CRLF,
    BENCH_H1P_TRAILER,
    BENCH_H1P_BODY_EOF,
};

typedef struct bench_h1p {
    int state;
    int head_only;   /* set by the caller: responses to HEAD have no body */
    size_t max_head; /* longest head accepted (default 64 KiB) */
    /* the response being parsed, valid after DONE until the next call */
    int status;
    int minor; /* HTTP/1.minor */
    int close; /* the server closes the connection after it */
    int chunked;
    int64_t content_length; /* -1: not given */
    uint64_t remaining;     /* body or chunk bytes still expected */
    uint64_t body_len;      /* body bytes seen */
    const char *error;      /* why, after ERROR */
} bench_h1p_t;

void bench_h1p_init(bench_h1p_t *p);
int bench_h1p_parse(bench_h1p_t *p, const char *buf, size_t len, size_t *used);
/* The peer closed the connection: DONE if that ends a body delimited by the
 * close, MORE if no response was in progress (given that the caller has no
 * unconsumed bytes), ERROR if a response was cut short. */
int bench_h1p_eof(bench_h1p_t *p);
/* True while inside a response (some of it has been consumed). */
int bench_h1p_busy(const bench_h1p_t *p);
/* Does the comma-separated header value v[0, n) hold the token tok (lower
 * case; compared without case, RFC 9110 §5.6.1)? */
int bench_has_token(const char *v, size_t n, const char *tok);

/* ------------------------------------------------------------------------- */
/* Errors, by kind.  connect/read/write/timeout are requests that got no
 * response; non2xx and check are responses that came back but are counted
 * as failures (they are also in the request count). */

enum {
    BENCH_ERR_CONNECT,
    BENCH_ERR_READ,
    BENCH_ERR_WRITE,
    BENCH_ERR_TIMEOUT,
    BENCH_ERR_NON2XX,
    BENCH_ERR_CHECK,
    BENCH_ERR_PROTOCOL, /* WebSocket: a frame or 101 that breaks RFC 6455 */
    BENCH_ERR_GRPC,     /* gRPC: an answer whose grpc-status is not 0 (OK) */
    BENCH_ERR_N,
};
extern const char *const bench_err_names[BENCH_ERR_N];

/* ------------------------------------------------------------------------- */
/* WebSocket pieces without sockets (wsframe.c). */

/* The key and the accept value: the server's SHA-1 and base64 (wskey.h). */
#include "runtime/wskey.h"

/* The server's answer to the opening handshake, a whole head (through the
 * empty line): OK for a 101 with Upgrade, Connection and the right accept;
 * STATUS for another status (*status); BAD with *why otherwise. */
enum { BENCH_WS_HS_OK = 0, BENCH_WS_HS_STATUS = 1, BENCH_WS_HS_BAD = 2 };
int bench_ws_check_head(const char *head, size_t len, const char *accept, int *status,
                        const char **why);

enum {
    BENCH_WS_CONT = 0,
    BENCH_WS_TEXT = 1,
    BENCH_WS_BINARY = 2,
    BENCH_WS_CLOSE = 8,
    BENCH_WS_PING = 9,
    BENCH_WS_PONG = 10
};

typedef struct bench_wsf {
    int fin, rsv, opcode, masked;
    uint64_t len;
    uint8_t mask[4];
} bench_wsf_t;

/* A final frame's header (at most 14 bytes) into dst, masked with mask
 * unless it is NULL; returns its length. */
size_t bench_ws_header(uint8_t *dst, int opcode, uint64_t len, const uint8_t *mask);
/* XOR n bytes with mask, the first of them at payload offset `offset`. */
void bench_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset);
/* Parse a frame header: its length, 0 when more bytes are needed, -1 (*why)
 * when it breaks RFC 6455 §5.2 (reserved bits or opcodes, a long or
 * fragmented control frame, a length not in its shortest form).  Masking is
 * reported in f->masked, for the caller to judge. */
int bench_ws_parse(const uint8_t *p, size_t n, bench_wsf_t *f, const char **why);
/* The payload of message `id`, and the check of n echoed bytes at offset off */
void bench_ws_payload(uint8_t *dst, size_t size, uint64_t id, int binary);
int bench_ws_payload_check(const uint8_t *p, size_t n, uint64_t off, uint64_t id, int binary);

/* ------------------------------------------------------------------------- */
/* The latency-vs-load chart (plot.c): one point per rate of a sweep. */

enum {
    BENCH_PLOT_P50,
    BENCH_PLOT_P90,
    BENCH_PLOT_P99,
    BENCH_PLOT_P999,
    BENCH_PLOT_MAX,
    BENCH_PLOT_NPCT
};
extern const char *const bench_plot_pct_names[BENCH_PLOT_NPCT]; /* "p50" ... "max" */

typedef struct bench_plot_point {
    double percent;              /* of the maximum rate */
    double asked, achieved;      /* requests per second */
    double lat[BENCH_PLOT_NPCT]; /* ns */
    uint64_t errors;
    double lag_max; /* the client's own lag, ns */
} bench_plot_point_t;

typedef struct bench_plot {
    const char *title;    /* first line, e.g. the label and the URL */
    const char *subtitle; /* second line, e.g. the mode and connections */
    double max_rate;      /* the 100 % rate */
    const char *max_what; /* how it was found, e.g. "closed-loop maximum" */
    int npoints;
    const bench_plot_point_t *pts; /* in increasing order of asked rate */
} bench_plot_t;

/* The chart as a self-contained SVG document (no scripts, no fonts to fetch;
 * every point carries its figures in data-* attributes and a <title>).
 * Returns 0, or -1 when writing failed. */
int bench_plot_svg(FILE *f, const bench_plot_t *p);
/* The chart as a PNG drawn by gnuplot (pngcairo); 0, or -1 with *why. */
int bench_plot_png(const char *path, const bench_plot_t *p, const char **why);
/* Is gnuplot there for bench_plot_png?  NULL, or why not. */
const char *bench_plot_png_missing(void);

#ifndef BENCH_HIST_ONLY /* the rest is the load generator itself */

#include <pthread.h>
#include <sys/types.h>

typedef enum { BENCH_H1, BENCH_H2, BENCH_WS } bench_proto_kind_t;

typedef struct bench_header {
    const char *name, *value;
} bench_header_t;

/* One run's settings; main.c fills it in. */
typedef struct bench_opts {
    const char *url;
    char host[256]; /* as in the URL (authority without the port) */
    char port_str[8];
    char path[2048];
    struct sockaddr_storage addr;
    socklen_t addrlen;

    bench_proto_kind_t proto;
    int per_request; /* --close: a new connection per request */
    int conns;       /* -c */
    int threads;     /* -t */
    int depth;       /* -p, HTTP/1.1 pipelining */
    int streams;     /* -m, h2 streams per connection */
    double duration; /* -d seconds, 0 with -n */
    uint64_t nreq;   /* -n, 0 with -d */
    double warmup;   /* --warmup seconds */
    double timeout;  /* --timeout seconds */
    const char *method;
    size_t body_size; /* --body-size: a JSON body of exactly this size */
    bench_header_t *headers;
    int nheaders;
    int ws_binary;     /* WebSocket: --binary messages (else text) */
    int grpc;          /* --grpc: unary gRPC calls over h2c (proto BENCH_H2) */
    int expect_status; /* --expect-status, 0: any 2xx */
    /* --proxy v1|v2: a PROXY protocol header sent first on every connection,
     * as a load balancer does (the client 192.0.2.1:40000 or [2001:db8::1]) */
    char proxy[64];
    size_t proxy_len;
    int64_t expect_body_size; /* --expect-body-size, -1: not checked */
    int verbose;
    /* --rate: requests per second, all threads together, sent on an
     * open-loop schedule; 0: closed loop */
    double rate;
    double max_lag; /* --max-lag seconds: more of the client's own lag fails the run */
    double spin;    /* --spin seconds: poll instead of sleeping this long before a send */
    /* --sweep */
    int sweep;
    double sweep_max; /* --sweep-max: the 100 % rate, 0: measured closed-loop */
    int nsteps;
    double steps[32];  /* --sweep-steps, percent */
    const char *plot;  /* --plot FILE.svg|FILE.png */
    const char *label; /* --label: names the server in reports and charts */
} bench_opts_t;

typedef struct bench_stats {
    uint64_t requests; /* responses counted (in the measured window) */
    uint64_t errors[BENCH_ERR_N];
    uint64_t bytes_in, bytes_out;
    uint64_t connects;   /* successful connections (all phases) */
    uint64_t reconnects; /* keep-alive connections the server closed */
    bench_hist_t hist;   /* latency of counted responses, ns */
    /* WebSocket: opening handshakes done, their time (connect to 101), ns */
    uint64_t handshakes, handshake_max;
    double handshake_sum;
    /* --rate: responses that came inside the window (the achieved rate);
     * requests whose intended send time is in the window; of those, the ones
     * that found no connection with room at that time (sent late, latency
     * counted from the intended time), and the ones failed as timeouts
     * before they could be sent; the client's own lag of each one sent (how
     * late after both its intended time and a connection having room) */
    uint64_t done_in_window;
    uint64_t scheduled, queued, unsent;
    bench_hist_t lag;
    /* --rate: how long each counted answer waited in the kernel before this
     * client read it (from its receive timestamp), ns: the client's share
     * of the latency on the way back */
    bench_hist_t read_delay;
} bench_stats_t;

struct bench_thread;
struct bench_conn;

/* What a protocol does with a connection (h1.c, h2.c). */
typedef struct bench_proto {
    /* once per thread, before any connection: prebuild requests */
    int (*prepare)(struct bench_thread *th);
    /* connected: set up and send the first requests; -1 closes (errors counted) */
    int (*start)(struct bench_conn *c);
    /* readable (or hung up): -1 when the connection was closed inside */
    int (*readable)(struct bench_conn *c);
    /* the connection goes away: fail what is in flight with kind (or, with
     * kind < 0, nothing should be in flight), free per-connection state */
    void (*closed)(struct bench_conn *c, int kind);
    /* send time of the oldest request in flight, 0 when none */
    uint64_t (*oldest)(struct bench_conn *c);
    /* per-request mode: a request was taken for this new connection at `when` */
    void (*take_one)(struct bench_conn *c, uint64_t when);
    /* --rate (persistent connections): how many requests c could take now;
     * append one request, intended at `due` (its latency counts from then),
     * to c's output without writing it; write what was appended (-1 when c
     * was closed, its requests failed) */
    unsigned (*room)(struct bench_conn *c);
    void (*send)(struct bench_conn *c, uint64_t due);
    int (*push)(struct bench_conn *c);
    /* at the end, for each connection: free its per-connection state */
    void (*conn_free)(struct bench_conn *c);
    /* once per thread, after conn_free: free what prepare made */
    void (*release)(struct bench_thread *th);
} bench_proto_t;

enum { BENCH_CONN_IDLE, BENCH_CONN_CONNECTING, BENCH_CONN_OPEN, BENCH_CONN_RETRY };

typedef struct bench_conn {
    struct bench_thread *th;
    int fd;
    int state;
    int hup;             /* the last event said the peer closed: read until EOF */
    uint64_t conn_start; /* ns, when connect() was called */
    uint64_t retry_at;   /* BENCH_CONN_RETRY: when to connect again */
    /* output not yet written */
    char *out;
    size_t out_len, out_off, out_cap;
    /* h1: send times of the requests in flight, a ring of ring_mask + 1 */
    uint64_t *ring;
    unsigned ring_head, ring_count, ring_mask;
    char *carry; /* unparsed bytes kept between reads */
    size_t carry_len, carry_cap;
    bench_h1p_t parser;
    void *h2; /* h2.c's per-connection state */
    void *ws; /* ws.c's per-connection state */
    /* --rate: in the thread's ready ring (since ready_since); appended to
     * by the schedule and not yet written */
    int in_ready, dirty;
    uint64_t ready_since;
} bench_conn_t;

typedef struct bench_thread {
    const bench_opts_t *o;
    const bench_proto_t *proto;
    int id;
    int nthreads;
    int ep;
    int nconns;
    bench_conn_t *conns;
    uint64_t now;       /* ns, CLOCK_MONOTONIC */
    uint64_t t_measure; /* start of the measured window (after warm-up) */
    uint64_t t_end;     /* end of it with -d, UINT64_MAX with -n */
    uint64_t quota;     /* -n: requests still to start in the window */
    int nmode;
    uint64_t inflight; /* requests started and not yet finished */
    int retrying;      /* connections waiting to connect again */
    uint64_t t_finish; /* when the thread finished */
    uint64_t seq;      /* request ids */
    char *rbuf;
    size_t rbuf_cap;
    /* prebuilt HTTP/1.1 requests (h1.c) */
    char *req;      /* depth copies of a GET, or the head of a POST */
    size_t req_len; /* length of one copy (GET) or of the head (POST) */
    bench_stats_t st;
    /* --rate: this thread's open-loop schedule.  Its request k is due at
     * t0 + off + k * step ns (the threads' requests interleave); k_next is
     * the next one to send, k_end the end (the first not in the run).
     * Connections with room wait in the ready ring (round robin); dirty
     * lists those with requests appended and not yet written. */
    int rate_mode;
    uint64_t t0;
    long double step, off;
    uint64_t k_next, k_end;
    bench_conn_t **ready;
    unsigned ready_head, ready_count;
    bench_conn_t **dirty;
    unsigned ndirty;
    /* --rate: when the bytes of the reads of the event being handled came
     * in (the kernel's receive time, SO_TIMESTAMPNS; 0: unknown), on
     * CLOCK_MONOTONIC, which is CLOCK_REALTIME - real_off */
    uint64_t rx_at;
    int64_t real_off;
    /* progress, read by the main thread */
    uint64_t prog_requests, prog_errors;
    pthread_t tid;
    int setup_error;
} bench_thread_t;

extern const bench_proto_t bench_proto_h1;
extern const bench_proto_t bench_proto_h2;
extern const bench_proto_t bench_proto_ws;

uint64_t bench_now(void);
extern int bench_stop; /* set (atomically) by main.c on SIGINT: threads finish */

/* One run's figures, the threads' merged (main.c). */
typedef struct bench_result {
    bench_stats_t st;
    double duration_s;
    int conns;       /* connections (or per-request slots) */
    int concurrency; /* requests in flight at most */
} bench_result_t;

/* main.c: one run with o; 0, or -1 when it could not be set up (said on
 * stderr).  progress: the live line on stdout.  bench_interrupted: SIGINT
 * came (the run returned early with what it measured). */
int bench_run(const bench_opts_t *o, bench_result_t *res, int progress);
int bench_interrupted(void);

/* report.c */
uint64_t bench_total_errors(const bench_stats_t *st);
double bench_achieved(const bench_opts_t *o, const bench_result_t *r); /* req/s */
int bench_lag_exceeded(const bench_opts_t *o, const bench_result_t *r);
const char *bench_fmt_time(char *buf, size_t n, double ns); /* as wrk: 1.23ms */
void bench_print_human(const bench_opts_t *o, const bench_result_t *r);
/* s as a JSON string (quoted, escaped) on stdout */
void bench_json_str(const char *s);
/* one JSON object, with extra (members and a comma, or "") before latency_us */
void bench_print_json(const bench_opts_t *o, const bench_result_t *r, const char *extra);
/* --rate: what petrel-bench says on stderr when the client fell behind */
void bench_lag_warning(const bench_opts_t *o, const bench_result_t *r, const char *what);

/* sweep.c: --sweep; the exit status (1: errors and fail_on_error; 3: the
 * client fell behind at some rate; 2: nothing could be measured) */
int bench_sweep(const bench_opts_t *o, int json, int fail_on_error);

/* run.c: the loop; returns 0, or -1 if the thread could not be set up */
int bench_thread_setup(bench_thread_t *th);
void *bench_thread_main(void *arg);
void bench_thread_free(bench_thread_t *th);

/* run.c, for the protocols */
int bench_take(bench_thread_t *th); /* may a new request start now? (takes it) */
/* One request's worth for a failure that happened before any was sent (a
 * connect, a handshake): takes the next request (closed loop: if one may
 * start now; --rate: the next of the schedule) and its time in *when;
 * 0 when there is none left. */
int bench_take_any(bench_thread_t *th, uint64_t *when);
/* --rate: c may have room for requests (checked with proto->room); if so,
 * the schedule sends them */
void bench_rate_ready(bench_conn_t *c);
void bench_complete(bench_thread_t *th, uint64_t sent, int status, uint64_t body_len);
void bench_fail(bench_thread_t *th, uint64_t sent, int kind);
/* A response (WebSocket: an echo) that came back; kind >= 0: it is also
 * counted as an error of that kind (a wrong echo: BENCH_ERR_CHECK) */
void bench_complete_kind(bench_thread_t *th, uint64_t sent, int kind);
int bench_flush(bench_conn_t *c);                   /* write c->out; -1 on error (not closed) */
char *bench_out_reserve(bench_conn_t *c, size_t n); /* room for n bytes at the end of out */
/* Close c: what is in flight fails with kind (kind < 0: nothing is counted);
 * then connect again now (BENCH_REOPEN_NOW), after a short delay
 * (BENCH_REOPEN_LATER, after an error) or not at all (0). */
enum { BENCH_REOPEN_NOW = 1, BENCH_REOPEN_LATER = 2 };
void bench_conn_close(bench_conn_t *c, int kind, int reopen);

/* Reading.  bench_read: one read() into th->rbuf after the bytes carried
 * from the last one (copied to its start); returns the new bytes (the data
 * is th->rbuf[0, c->carry_len + n)), 0 at EOF, -1 with errno (EAGAIN: none
 * there; EINTR is retried).  bench_carry: keep rest[0, left) for the next
 * read (c->carry_len is 0 without); -1 when out of memory (nothing kept).
 * bench_read_all: read until drained, handing each buffer to consume (the
 * bytes it used; what it leaves is carried; -1: it closed c), or the end to
 * peer_closed (err: an errno, 0 at EOF; it closes c and returns -1).
 * Returns 0, or -1 when c was closed. */
typedef ssize_t bench_consume_fn(bench_conn_t *c, char *buf, size_t len);
typedef int bench_peer_closed_fn(bench_conn_t *c, int err);
ssize_t bench_read(bench_conn_t *c);
int bench_carry(bench_conn_t *c, const char *rest, size_t left);
int bench_read_all(bench_conn_t *c, bench_consume_fn *consume, bench_peer_closed_fn *peer_closed);

/* h1.c: a request head without its end: "METHOD path HTTP/1.1", Host (unless
 * a -H header gives one), the lines of extra (NULL: none), the -H headers;
 * NUL-terminated, in a malloc'd buffer of *cap bytes with at least 3 KiB
 * free after the *len written.  NULL when out of memory. */
char *bench_h1_head(const bench_opts_t *o, const char *method, const char *extra, size_t *len,
                    size_t *cap);

/* The request body of --body-size: {"requestId":ID,"payload":"xxx..."} of
 * exactly size bytes (or the shortest such JSON if size is smaller). */
size_t bench_json_body(char *dst, size_t size, uint64_t id);
size_t bench_json_min_size(uint64_t id);

/* grpc.c: the request of call `id`, a gRPC message (prefix + EchoMessage with
 * request_id and a payload of `payload` bytes 'x'), at most
 * bench_grpc_request_max(payload) bytes; returns its length.  The check of
 * an answer's DATA: 0, or -1 with *why (a static string). */
size_t bench_grpc_request_max(size_t payload);
size_t bench_grpc_request(uint8_t *dst, size_t payload, uint64_t id);
int bench_grpc_check(const uint8_t *body, size_t len, uint64_t id, size_t payload,
                     const char **why);

#endif /* BENCH_HIST_ONLY */
#endif
