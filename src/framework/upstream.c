/*
 * upstream.c -- calling other HTTP services (petrel_upstream_new,
 * petrel_call): the declaration in the master, then per worker a pool of
 * connections for each address, the calls waiting for one, the deadlines,
 * the circuit breakers, the connection rate and the retry budget.  The
 * wire (request head, response parsing) is http1-client.c's, or for an
 * h2c address h2-client.c's (a connection carries many calls as streams:
 * "HTTP/2 connections" below).
 *
 * Per worker: all that follows the `w_` fields of an upstream is made on
 * its first call in the worker (the struct itself was copied by fork).
 * Connections and their buffers come from a per-worker free list; a call
 * and its parsed fields live in the arena of its request (or the caller's),
 * so that a warm worker calls without touching the heap.
 *
 * Everything a call reports runs from the loop: petrel_call() only queues
 * the call and asks for the upstream's dispatch at the end of the turn.
 *
 * Why this file is over 1,000 lines: a call, its connection and its
 * address's breaker change state together at every event (a connection
 * made or refused, a response begun, cut or ended, a deadline, a cancel),
 * and each of those decides at once whether the call is retried, fails or
 * ends and whether the connection goes back to the pool; split, each part
 * would need the others' private state.  Sections, in order: declaration
 * (the master), per worker, the end of a call, breakers and tokens,
 * connections, sending, dispatch, reading, deadlines, calls.
 */
#include "protocols/h2-client.h"
#include "protocols/http1-client.h"
#include "protocols/proto.h"
#include "runtime/arena.h"
#include "runtime/list.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "petrel.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define RBUF_SIZE 16384
#define BUDGET_SECS 10
#define KICK_MS 20
#define H2_WBUF 32768
#define H2_MAX_STREAMS 100 /* per connection, below the peer's own limit */
#define H2_REFUSALS 3      /* a call not processed, sent again at most so often */
#define SB_MARK 65536      /* a streamed body: petrel_call_write() says 0 above it */
#define SB_MAX (1u << 20)  /* ... and PETREL_ENOMEM above this */
#define SEG_DATA 4064      /* a segment of its buffer: from the arena's chunks, no malloc */

/* A segment of a streamed body's buffer: bytes [off, len) not sent yet. */
typedef struct seg {
    struct seg *next;
    uint32_t off, len;
    char data[SEG_DATA];
} seg_t;

/* The breaker of an address. */
enum { BR_CLOSED, BR_OPEN, BR_PROBE };

typedef struct uaddr {
    struct sockaddr_storage sa;
    socklen_t salen;
    char label[128]; /* "10.0.0.1:8080", "unix:/run/app.sock" */
    char host[512];  /* the Host field: the URL's host[:port] */
    bool h2;         /* h2c:// or h2c+unix: (HTTP/2 with prior knowledge) */
    /* per worker */
    petrel__list_t idle; /* uconn_t, most recently used last */
    petrel__list_t live; /* h2: every connection (uconn_t), in the order opened */
    unsigned nconns, nidle, inflight;
    unsigned fails; /* in a row */
    int breaker;
    uint64_t open_until;
    double tokens; /* connects_per_sec's bucket */
    uint64_t tokens_ms;
    int mslot; /* its counts in /metrics */
} uaddr_t;

typedef struct uconn uconn_t;

/* Results of calls, in the order of petrel_upstream_calls_total's (metrics.c). */
enum { R_2XX, R_1XX_3XX, R_4XX, R_5XX, R_TIMEOUT, R_REFUSED, R_BREAKER, R_FULL, R_PROTO, R_CLOSED };

struct petrel_upstream {
    petrel_upstream_opts_t o;
    char name[33];
    uaddr_t *addrs;
    unsigned naddrs;
    /* per worker */
    bool w_ready;
    unsigned rr;
    petrel__list_t pending; /* petrel_call_t waiting for a connection */
    unsigned npending;
    petrel__list_t failed; /* petrel_call_t failed at once, told at the end of the turn */
    petrel__pending_t dispatch;
    petrel__timer_t kick; /* a dispatch later: tokens, breaker pauses */
    uint32_t budget_calls[BUDGET_SECS], budget_retries[BUDGET_SECS];
    uint64_t budget_sec;
    int mslot;                    /* its counts in /metrics */
    struct petrel_upstream *next; /* all_upstreams */
};

/* A call's state. */
enum { C_QUEUED, C_FAILED, C_CONNECTING, C_SENDING, C_WAITING, C_BODY, C_DONE };

struct petrel_call {
    petrel_upstream_t *up;
    petrel_arena_t *arena;
    petrel_req_t *req;
    petrel_call_cbs_t cbs;
    void *data;
    const char *method, *target, *authority;
    petrel_header_t *fields;
    size_t nfields;
    const void *body;
    size_t body_len;
    bool idempotent, head, post_like;
    bool te_trailers; /* `te: trailers` given: sent to an h2c upstream */
    int state;
    bool paused;
    bool headed; /* on_head ran */
    bool wrote;  /* some byte of the request was written */
    bool reused; /* its connection was reused */
    bool probe;  /* it is its address's breaker probe */
    bool cancelled;
    int fail_code;
    const char *fail_reason;
    petrel__list_t node; /* up->pending or up->failed */
    uconn_t *conn;
    uaddr_t *addr;
    petrel__timer_t timer; /* call_timeout_ms */
    uint64_t t0_ns;        /* the loop's time of petrel_call() */
    petrel_abort_cb prev_cb;
    void *prev_data;
    /* h2 */
    petrel__h2c_stream_t st;
    petrel__timer_t htimer; /* header_timeout_ms of its stream */
    unsigned refusals;      /* times it was not processed */
    /* petrel_call_upgrade(): the protocol asked for, who takes a 101's
     * connection, and that head until the parser has stopped */
    const char *upgrade;
    petrel_upgrade_cb on_upgrade;
    bool switched;
    petrel_upstream_head_t head101;
    /* petrel_call_stream(): the body as it is written, a queue of segments
     * (sq) with those drained kept for reuse (sfree) */
    bool streamed;
    bool wend;         /* petrel_call_write_end() */
    bool body_out;     /* a byte of the body went to a connection: never sent again */
    bool drain_wanted; /* a write said 0 */
    bool drain_due;
    bool short_end;  /* write_end short of body_len: the call fails from the loop */
    bool chunked;    /* HTTP/1.1: its framing */
    bool chunks;     /* a chunk was begun (its CRLF goes before the next) */
    bool term;       /* the last chunk is framed */
    int64_t slen;    /* body_len, or -1 */
    uint64_t wtotal; /* bytes written by the caller */
    size_t sn;       /* bytes held, not sent */
    size_t crem;     /* chunked: bytes of the current chunk not sent */
    seg_t *sq, *sq_tail, *sfree;
    char fr[24]; /* chunk framing not sent yet: [fr_off, fr_len) */
    uint8_t fr_off, fr_len;
    petrel_call_drain_cb drain_cb;
    petrel__pending_t kick; /* write, drain or fail from the loop */
};

/* A connection's state.  K_FREE: closed, on the free list; an event the
 * loop took for it before it closed, later in the same batch, is ignored. */
enum { K_CONNECTING, K_IDLE, K_BUSY, K_FREE };

struct uconn {
    petrel__io_t io;
    petrel__timer_t timer; /* connect, header or idle deadline */
    petrel__list_t node;   /* addr->idle, or the free list */
    petrel_upstream_t *up;
    uaddr_t *addr;
    int state;
    unsigned nreq;
    petrel_call_t *call;
    bool in_feed;   /* its parser is calling back */
    bool doomed;    /* close it once the feed returns */
    bool body_open; /* a streamed request body not complete: never reused */
    bool wdead;     /* writing failed: what was read is still heard */
    char *rbuf;
    size_t rlen, roff;
    char *wbuf;
    size_t wcap, wlen, woff, boff; /* head bytes, then body bytes written */
    void *parser;
    /* h2: the session, its streams (calls), whether it is ending them */
    petrel__h2c_t *h2;
    unsigned nstreams;
    bool closing;
};

/* Every upstream declared: they live until exit (a reload declares its
 * own; those of the generations before stay, as their workers may run). */
static petrel_upstream_t *all_upstreams;
static petrel__list_t free_conns = {&free_conns, &free_conns};
static char reason_buf[256];

/* The timer queues: one per kind and timeout, shared by the upstreams
 * with the same settings. */
enum { Q_CONNECT, Q_HEADER, Q_IDLE, Q_CALL, Q_KICK, Q_SHEADER, Q_KINDS };
typedef struct uq {
    petrel__tq_t q;
    int kind;
    uint64_t ms;
} uq_t;
#define MAX_UQ 24
static uq_t queues[MAX_UQ];
static int nqueues;

static void on_connect_expire(petrel__timer_t *t);
static void on_header_expire(petrel__timer_t *t);
static void on_idle_expire(petrel__timer_t *t);
static void on_call_expire(petrel__timer_t *t);
static void on_kick_expire(petrel__timer_t *t);
static void on_stream_header_expire(petrel__timer_t *t);
static void dispatch(petrel_upstream_t *up);
static void conn_close(uconn_t *c);
static uconn_t *h2_room(petrel_upstream_t *up, uaddr_t *a);
static void h2_attach(petrel_call_t *call, uconn_t *c);
static void h2_io(uconn_t *c, uint32_t events);
static void h2_conn_end(uconn_t *c, int code, const char *reason, bool connect);
static void h2_settle(uconn_t *c);
static void h2_flush(uconn_t *c);
static const petrel__h2c_cbs_t h2_cbs;

static petrel__tq_t *queue(int kind, uint64_t ms)
{
    static void (*const fns[Q_KINDS])(petrel__timer_t *) = {
        on_connect_expire, on_header_expire, on_idle_expire,
        on_call_expire,    on_kick_expire,   on_stream_header_expire};
    for (int i = 0; i < nqueues; i++)
        if (queues[i].kind == kind && queues[i].ms == ms)
            return &queues[i].q;
    if (nqueues == MAX_UQ || petrel__loop == NULL)
        return NULL;
    uq_t *u = &queues[nqueues];
    if (petrel__tq_init(petrel__loop, &u->q, ms, fns[kind]) < 0)
        return NULL;
    u->kind = kind;
    u->ms = ms;
    nqueues++;
    return &u->q;
}

static bool arm(petrel__timer_t *t, int kind, uint64_t ms)
{
    petrel__timer_disarm(t);
    petrel__tq_t *q = queue(kind, ms);
    if (q == NULL)
        return false;
    petrel__timer_arm(petrel__loop, t, q);
    return true;
}

/* ---- declaration (the master) ------------------------------------------ */

void petrel_upstream_opts_init(petrel_upstream_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->max_conns = 64;
    o->max_pending = 1024;
    o->connect_timeout_ms = 1000;
    o->header_timeout_ms = 10000;
    o->call_timeout_ms = 30000;
    o->idle_timeout_ms = 30000;
    o->max_requests = 10000;
    o->retry_budget_pct = 20;
    o->breaker_failures = 5;
    o->breaker_pause_ms = 5000;
    o->connects_per_sec = 100;
    o->balance = PETREL_BALANCE_ROUND_ROBIN;
}

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int add_addr(petrel_upstream_t *up, const struct sockaddr *sa, socklen_t len,
                    const char *label, const char *host, bool h2)
{
    uaddr_t *a = realloc(up->addrs, (up->naddrs + 1) * sizeof(*a));
    if (a == NULL)
        return -1;
    up->addrs = a;
    a += up->naddrs++;
    memset(a, 0, sizeof(*a));
    memcpy(&a->sa, sa, len);
    a->salen = len;
    snprintf(a->label, sizeof(a->label), "%s", label);
    snprintf(a->host, sizeof(a->host), "%s", host);
    a->h2 = h2;
    return 0;
}

/* One URL of `urls`: [s, s + n). */
static int parse_url(petrel_upstream_t *up, const char *s, size_t n, char *err, size_t errlen)
{
    char url[512];
    if (n == 0 || n >= sizeof(url)) {
        say(err, errlen, "upstream '%s': empty or too long URL", up->name);
        return -1;
    }
    memcpy(url, s, n);
    url[n] = '\0';
    bool h2 = strncmp(url, "h2c+unix:", 9) == 0 || strncmp(url, "h2c://", 6) == 0;
    if (strncmp(url, "unix:", 5) == 0 || strncmp(url, "h2c+unix:", 9) == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        const char *path = strchr(url, ':') + 1;
        if (*path == '\0' || strlen(path) >= sizeof(sun.sun_path)) {
            say(err, errlen, "upstream '%s': bad socket path in '%s'", up->name, url);
            return -1;
        }
        strcpy(sun.sun_path, path);
        return add_addr(up, (struct sockaddr *)&sun, sizeof(sun), url, "localhost", h2);
    }
    if (strncmp(url, "http://", 7) != 0 && !h2) {
        const char *colon = strstr(url, "://");
        say(err, errlen, "upstream '%s': unsupported scheme '%.*s' in '%s'", up->name,
            colon ? (int)(colon - url) : (int)n, url, url);
        return -1;
    }
    char *host = strstr(url, "://") + 3, *end = host + strcspn(host, "/?#");
    if (*end != '\0' && strcmp(end, "/") != 0) {
        say(err, errlen, "upstream '%s': a path in '%s' (give the host and port only)", up->name,
            url);
        return -1;
    }
    *end = '\0';
    char authority[512];
    snprintf(authority, sizeof(authority), "%s", host);
    const char *port = "80";
    if (*host == '[') {
        char *close = strchr(host, ']');
        if (close == NULL) {
            say(err, errlen, "upstream '%s': bad address in '%s'", up->name, url);
            return -1;
        }
        *close = '\0';
        host++;
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0') {
            say(err, errlen, "upstream '%s': bad address in '%s'", up->name, url);
            return -1;
        }
    } else {
        char *colon = strrchr(host, ':');
        if (colon) {
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (*host == '\0' || *port == '\0' || strspn(port, "0123456789") != strlen(port)) {
        say(err, errlen, "upstream '%s': bad host or port in '%s'", up->name, url);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        say(err, errlen, "upstream '%s': %s: %s", up->name, host, gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char ip[INET6_ADDRSTRLEN], label[128];
        const void *in = ai->ai_family == AF_INET6
                             ? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
                             : (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        inet_ntop(ai->ai_family, in, ip, sizeof(ip));
        snprintf(label, sizeof(label), ai->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", ip, port);
        if (add_addr(up, ai->ai_addr, ai->ai_addrlen, label, authority, h2) < 0) {
            freeaddrinfo(res);
            say(err, errlen, "upstream '%s': out of memory", up->name);
            return -1;
        }
    }
    freeaddrinfo(res);
    return 0;
}

petrel_upstream_t *petrel_upstream_new(petrel_server_t *srv, const petrel_upstream_opts_t *opts,
                                       char *err, size_t errlen)
{
    (void)srv;
    if (opts == NULL || opts->name == NULL || opts->urls == NULL) {
        say(err, errlen, "upstream: no name or no URLs");
        return NULL;
    }
    size_t nl = strlen(opts->name);
    if (nl == 0 || nl > 32 || strspn(opts->name, "abcdefghijklmnopqrstuvwxyz0123456789_") != nl) {
        say(err, errlen, "upstream '%s': a name is 1 to 32 of [a-z0-9_]", opts->name);
        return NULL;
    }
    if (petrel__loop != NULL) {
        say(err, errlen, "upstream '%s': declared from a worker (declare it in a module's init)",
            opts->name);
        return NULL;
    }
    petrel_upstream_t *up = calloc(1, sizeof(*up));
    if (up == NULL) {
        say(err, errlen, "upstream '%s': out of memory", opts->name);
        return NULL;
    }
    up->o = *opts;
    memcpy(up->name, opts->name, nl + 1);
    up->o.name = up->name;
    up->o.urls = NULL;
    if (up->o.max_conns == 0)
        up->o.max_conns = 1;
    if (up->o.connects_per_sec == 0)
        up->o.connects_per_sec = 1;
    for (const char *s = opts->urls;;) {
        while (*s == ' ')
            s++;
        size_t n = strcspn(s, ",");
        size_t m = n;
        while (m > 0 && s[m - 1] == ' ')
            m--;
        if (parse_url(up, s, m, err, errlen) < 0) {
            free(up->addrs);
            free(up);
            return NULL;
        }
        if (s[n] == '\0')
            break;
        s += n + 1;
    }
    up->mslot = petrel__metrics_upstream_slot(up->name, NULL);
    for (unsigned i = 0; i < up->naddrs; i++)
        up->addrs[i].mslot = petrel__metrics_upstream_slot(up->name, up->addrs[i].label);
    up->next = all_upstreams;
    all_upstreams = up;
    return up;
}

/* ---- per worker --------------------------------------------------------- */

static void on_dispatch(petrel__pending_t *p)
{
    dispatch(container_of(p, petrel_upstream_t, dispatch));
}

static void worker_setup(petrel_upstream_t *up)
{
    if (up->w_ready)
        return;
    up->w_ready = true;
    list_init(&up->pending);
    list_init(&up->failed);
    list_init(&up->dispatch.node);
    up->dispatch.cb = on_dispatch;
    up->kick.q = NULL;
    for (unsigned i = 0; i < up->naddrs; i++) {
        uaddr_t *a = &up->addrs[i];
        list_init(&a->idle);
        list_init(&a->live);
        a->tokens = up->o.connects_per_sec;
        a->tokens_ms = petrel__loop->now_ms;
    }
}

static void want_dispatch(petrel_upstream_t *up)
{
    petrel__pending_add(petrel__loop, &up->dispatch);
}

/* The retry budget: retries of the last BUDGET_SECS seconds against the
 * calls of the same seconds. */
static void budget_roll(petrel_upstream_t *up)
{
    uint64_t sec = petrel__loop->now_ms / 1000;
    if (sec - up->budget_sec >= BUDGET_SECS) {
        memset(up->budget_calls, 0, sizeof(up->budget_calls));
        memset(up->budget_retries, 0, sizeof(up->budget_retries));
    } else {
        for (uint64_t s = up->budget_sec + 1; s <= sec; s++) {
            up->budget_calls[s % BUDGET_SECS] = 0;
            up->budget_retries[s % BUDGET_SECS] = 0;
        }
    }
    up->budget_sec = sec;
}

static bool budget_take(petrel_upstream_t *up)
{
    if (up->o.retry_budget_pct == 0)
        return false;
    budget_roll(up);
    uint64_t calls = 0, retries = 0;
    for (int i = 0; i < BUDGET_SECS; i++) {
        calls += up->budget_calls[i];
        retries += up->budget_retries[i];
    }
    uint64_t allowed = calls * up->o.retry_budget_pct / 100;
    if (allowed < 3)
        allowed = 3;
    if (retries >= allowed)
        return false;
    up->budget_retries[up->budget_sec % BUDGET_SECS]++;
    petrel__metrics_up(up->mslot)->retries++;
    return true;
}

static bool method_is(const char *m, const char *lit)
{
    return strcmp(m, lit) == 0;
}

/* ---- the end of a call -------------------------------------------------- */

static int result_of_error(int code)
{
    switch (code) {
    case PETREL_UPSTREAM_EREFUSED:
    case PETREL_UPSTREAM_ECONNECT:
        return R_REFUSED;
    case PETREL_UPSTREAM_EHEADER:
    case PETREL_UPSTREAM_ETIMEOUT:
        return R_TIMEOUT;
    case PETREL_UPSTREAM_EBREAKER:
        return R_BREAKER;
    case PETREL_UPSTREAM_EFULL:
        return R_FULL;
    case PETREL_UPSTREAM_EPROTO:
        return R_PROTO;
    default:
        return R_CLOSED;
    }
}

/* Whether the caller still expects to hear of `call`. */
static bool listening(const petrel_call_t *call)
{
    return !call->cancelled && (call->req == NULL || petrel_req_held(call->req));
}

static void h2_unbind(petrel_call_t *call);

/* Take `call` off its connection (an h2 stream is reset unless it ended). */
static void call_unbind(petrel_call_t *call)
{
    petrel__timer_disarm(&call->htimer);
    if (call->conn && call->conn->h2) {
        h2_unbind(call);
        return;
    }
    if (call->conn)
        call->conn->call = NULL;
    call->conn = NULL;
}

/* Detach `call` from its queue, connection and timer: it is over.  Its
 * request's access log line names the address and the call's time. */
static void call_detach(petrel_call_t *call)
{
    petrel__timer_disarm(&call->timer);
    if (call->streamed)
        list_unlink(&call->kick.node); /* no write, drain nor failure to come */
    if (call->addr && listening(call) && call->req) {
        call->req->_resp->upstream = call->addr->label;
        call->req->_resp->upstream_ns = petrel__loop->now_ns - call->t0_ns;
    }
    if (call->state == C_QUEUED) {
        list_unlink(&call->node);
        call->up->npending--;
        want_dispatch(call->up);
    } else if (call->state == C_FAILED) {
        list_unlink(&call->node);
    }
    if (call->addr && call->state >= C_CONNECTING && call->state < C_DONE)
        call->addr->inflight--;
    if (call->probe && call->addr && call->addr->breaker == BR_PROBE) {
        /* the probe ended without an answer (cancelled, timed out) */
        call->addr->breaker = BR_OPEN;
        call->addr->open_until = petrel__loop->now_ms + call->up->o.breaker_pause_ms;
    }
    call->probe = false;
    call_unbind(call);
    call->state = C_DONE;
}

static void call_fail(petrel_call_t *call, int code, const char *reason)
{
    if (call->state == C_DONE)
        return;
    call_detach(call);
    petrel__metrics_up(call->up->mslot)->calls[result_of_error(code)]++;
    if (listening(call) && call->cbs.on_error)
        call->cbs.on_error(call, code, reason, call->data);
}

static const char *fmt_reason(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason_buf, sizeof(reason_buf), fmt, ap);
    va_end(ap);
    return reason_buf;
}

/* ---- breakers and tokens ------------------------------------------------ */

static void addr_failed(petrel_upstream_t *up, uaddr_t *a)
{
    a->fails++;
    if (up->o.breaker_failures == 0)
        return;
    if (a->breaker == BR_PROBE || a->fails >= up->o.breaker_failures) {
        if (a->breaker != BR_OPEN)
            petrel_log(PETREL_LOG_WARN, "upstream '%s': %s failed %u times in a row: out for %u ms",
                       up->name, a->label, a->fails, up->o.breaker_pause_ms);
        a->breaker = BR_OPEN;
        a->open_until = petrel__loop->now_ms + up->o.breaker_pause_ms;
    }
}

static void addr_ok(petrel_upstream_t *up, uaddr_t *a)
{
    if (a->breaker != BR_CLOSED)
        petrel_log(PETREL_LOG_INFO, "upstream '%s': %s answers again", up->name, a->label);
    a->fails = 0;
    a->breaker = BR_CLOSED;
}

/* Whether `a` may take a call now (its breaker), and whether it would be
 * the probe. */
static bool addr_usable(uaddr_t *a, bool *probe)
{
    *probe = false;
    if (a->breaker == BR_CLOSED)
        return true;
    if (a->breaker == BR_PROBE)
        return false; /* one probe at a time */
    if (petrel__loop->now_ms >= a->open_until) {
        *probe = true;
        return true;
    }
    return false;
}

static bool token_take(petrel_upstream_t *up, uaddr_t *a)
{
    uint64_t now = petrel__loop->now_ms;
    double rate = up->o.connects_per_sec;
    a->tokens += (double)(now - a->tokens_ms) * rate / 1000.0;
    if (a->tokens > rate)
        a->tokens = rate;
    a->tokens_ms = now;
    if (a->tokens < 1.0)
        return false;
    a->tokens -= 1.0;
    return true;
}

/* ---- connections -------------------------------------------------------- */

static void conn_io(petrel__io_t *io, uint32_t events);

static uconn_t *conn_get(void)
{
    uconn_t *c;
    if (!list_empty(&free_conns)) {
        c = container_of(free_conns.next, uconn_t, node);
        list_unlink(&c->node);
    } else {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return NULL;
        c->rbuf = malloc(RBUF_SIZE);
        c->parser = malloc(petrel__h1c_size());
        if (c->rbuf == NULL || c->parser == NULL) {
            free(c->rbuf);
            free(c->parser);
            free(c);
            return NULL;
        }
        list_init(&c->node);
    }
    c->io.fd = -1;
    c->io.cb = conn_io;
    c->timer.q = NULL;
    c->call = NULL;
    c->nreq = 0;
    c->in_feed = c->doomed = c->body_open = c->wdead = false;
    c->rlen = c->roff = 0;
    c->h2 = NULL;
    c->nstreams = 0;
    c->closing = false;
    c->wlen = c->woff = 0;
    return c;
}

static void conn_close(uconn_t *c)
{
    if (c->state == K_FREE)
        return; /* closed already */
    if (c->in_feed) {
        c->doomed = true;
        return;
    }
    uaddr_t *a = c->addr;
    if (c->h2) {
        /* streams left (a connection given up): their calls fail */
        c->closing = true;
        for (petrel__h2c_stream_t *st; (st = petrel__h2c_first(c->h2)) != NULL;)
            call_fail(st->ctx, PETREL_UPSTREAM_ECLOSED,
                      fmt_reason("%s: the connection was closed", a->label));
        petrel__h2c_free(c->h2);
        c->h2 = NULL;
        list_unlink(&c->node); /* a->live */
        if (c->state == K_IDLE)
            a->nidle--;
        c->state = K_BUSY;
    }
    petrel__timer_disarm(&c->timer);
    if (c->io.fd >= 0) {
        petrel__io_del(petrel__loop, &c->io);
        close(c->io.fd);
        c->io.fd = -1;
    }
    if (c->state == K_IDLE) {
        list_unlink(&c->node);
        a->nidle--;
    }
    a->nconns--;
    if (c->call)
        c->call->conn = NULL;
    c->call = NULL;
    c->state = K_FREE;
    list_append(&free_conns, &c->node);
    want_dispatch(c->up); /* room for a waiting call */
}

static void conn_idle(uconn_t *c)
{
    c->state = K_IDLE;
    c->call = NULL;
    c->rlen = c->roff = 0;
    list_append(&c->addr->idle, &c->node);
    c->addr->nidle++;
    petrel__io_mod(petrel__loop, &c->io, EPOLLIN); /* a close by the peer is seen */
    if (!arm(&c->timer, Q_IDLE, c->up->o.idle_timeout_ms))
        conn_close(c);
    want_dispatch(c->up);
}

static uconn_t *conn_open(petrel_upstream_t *up, uaddr_t *a, int *err)
{
    uconn_t *c = conn_get();
    if (c == NULL) {
        *err = ENOMEM;
        return NULL;
    }
    int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        c->state = K_FREE;
        list_append(&free_conns, &c->node);
        return NULL;
    }
    if (a->sa.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (a->h2) {
        if (c->wcap < H2_WBUF) {
            char *b = realloc(c->wbuf, H2_WBUF);
            if (b == NULL) {
                *err = ENOMEM;
                close(fd);
                c->state = K_FREE;
                list_append(&free_conns, &c->node);
                return NULL;
            }
            c->wbuf = b;
            c->wcap = H2_WBUF;
        }
        c->h2 = petrel__h2c_new(&h2_cbs);
        if (c->h2 == NULL) {
            *err = ENOMEM;
            close(fd);
            c->state = K_FREE;
            list_append(&free_conns, &c->node);
            return NULL;
        }
    }
    petrel__metrics_up(a->mslot)->connects++;
    if (connect(fd, (struct sockaddr *)&a->sa, a->salen) < 0 && errno != EINPROGRESS) {
        *err = errno;
        close(fd);
        petrel__h2c_free(c->h2);
        c->h2 = NULL;
        c->state = K_FREE;
        list_append(&free_conns, &c->node);
        return NULL;
    }
    c->io.fd = fd;
    c->up = up;
    c->addr = a;
    c->state = K_CONNECTING;
    if (petrel__io_add(petrel__loop, &c->io, EPOLLOUT) < 0 ||
        !arm(&c->timer, Q_CONNECT, up->o.connect_timeout_ms)) {
        *err = EIO;
        close(fd);
        c->io.fd = -1;
        petrel__h2c_free(c->h2);
        c->h2 = NULL;
        c->state = K_FREE;
        list_append(&free_conns, &c->node);
        return NULL;
    }
    a->nconns++;
    if (c->h2)
        list_append(&a->live, &c->node);
    return c;
}

/* ---- sending ------------------------------------------------------------ */

static void call_send(petrel_call_t *call);

/* A call whose connection failed before any byte of a response: sent
 * again (on another connection) when that cannot do twice what the
 * upstream did once, and the budget allows; else it fails. */
static void call_requeue(petrel_call_t *call)
{
    {
        petrel_upstream_t *up = call->up;
        if (call->addr)
            call->addr->inflight--;
        call_unbind(call);
        call->addr = NULL;
        call->wrote = false;
        call->state = C_QUEUED;
        call->chunks = call->term = false; /* none of the body went out: framed anew */
        call->crem = 0;
        call->fr_off = call->fr_len = 0;
        /* at the head of the queue: it waited already */
        call->node.next = up->pending.next;
        call->node.prev = &up->pending;
        up->pending.next->prev = &call->node;
        up->pending.next = &call->node;
        up->npending++;
        want_dispatch(up);
    }
}

static void call_retry_or_fail(petrel_call_t *call, int code, const char *reason, bool connect)
{
    bool may = connect ? call->idempotent : (call->idempotent || !call->wrote);
    if (call->body_out)
        may = false; /* a streamed body is not kept: what went out cannot go again */
    if (may && !call->probe && budget_take(call->up)) {
        call_requeue(call);
        return;
    }
    call_fail(call, code, reason);
}

static int conn_write_stream(uconn_t *c);

/* Write what is left of the request; 0, or -1 when the connection broke. */
static int conn_write(uconn_t *c)
{
    petrel_call_t *call = c->call;
    if (call->streamed)
        return conn_write_stream(c);
    while (c->woff < c->wlen || c->boff < call->body_len) {
        struct iovec iov[2];
        int n = 0;
        if (c->woff < c->wlen)
            iov[n++] = (struct iovec){c->wbuf + c->woff, c->wlen - c->woff};
        if (c->boff < call->body_len)
            iov[n++] = (struct iovec){(char *)call->body + c->boff, call->body_len - c->boff};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->io.fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                petrel__io_mod(petrel__loop, &c->io, EPOLLIN | EPOLLOUT);
                return 0;
            }
            if (errno == EINTR)
                continue;
            return -1;
        }
        call->wrote = true;
        size_t h = c->wlen - c->woff;
        if ((size_t)w <= h) {
            c->woff += (size_t)w;
        } else {
            c->woff = c->wlen;
            c->boff += (size_t)w - h;
        }
    }
    /* all written: the header deadline runs */
    call->state = C_WAITING;
    petrel__io_mod(petrel__loop, &c->io, call->paused ? 0 : EPOLLIN);
    if (!arm(&c->timer, Q_HEADER, c->up->o.header_timeout_ms))
        return -1;
    return 0;
}

/* ---- streamed bodies ------------------------------------------------------
 *
 * petrel_call_stream(): the caller writes the body into the call's buffer,
 * a queue of SEG_DATA segments from its arena; a segment drained goes to
 * the call's free list and takes the next bytes, so that a long body costs
 * what is held at once (at most SB_MAX), not its length.  Over HTTP/1.1
 * the bytes go from the segments with sendmsg (chunked: what is held when
 * a chunk begins is that chunk); over h2c nghttp2 reads them through
 * h2_on_read, its data provider deferred while the buffer is empty. */

/* Whether the caller has given the whole body. */
static bool sb_ended(const petrel_call_t *call)
{
    return (call->wend && !call->short_end) ||
           (call->slen >= 0 && call->wtotal == (uint64_t)call->slen);
}

/* `k` bytes of the buffer went to a connection. */
static void sb_drop(petrel_call_t *call, size_t k)
{
    if (k == 0)
        return;
    call->body_out = true;
    call->sn -= k;
    while (k > 0) {
        seg_t *g = call->sq;
        size_t t = g->len - g->off;
        if (t > k)
            t = k;
        g->off += (uint32_t)t;
        k -= t;
        if (g->off == g->len) { /* drained: reused */
            call->sq = g->next;
            if (call->sq == NULL)
                call->sq_tail = NULL;
            g->off = g->len = 0;
            g->next = call->sfree;
            call->sfree = g;
        }
    }
    if (call->drain_wanted && call->sn <= SB_MARK) {
        call->drain_wanted = false;
        call->drain_due = true;
        petrel__pending_add(petrel__loop, &call->kick);
    }
}

static size_t sb_take(petrel_call_t *call, char *buf, size_t len)
{
    size_t n = 0;
    for (seg_t *g = call->sq; g && n < len; g = g->next) {
        size_t t = g->len - g->off;
        if (t > len - n)
            t = len - n;
        memcpy(buf + n, g->data + g->off, t);
        n += t;
    }
    sb_drop(call, n);
    return n;
}

/* Copy `len` bytes in: 0, or PETREL_ENOMEM (the arena). */
static int sb_put(petrel_call_t *call, const char *p, size_t len)
{
    while (len > 0) {
        seg_t *g = call->sq_tail;
        if (g == NULL || g->len == SEG_DATA) {
            g = call->sfree;
            if (g)
                call->sfree = g->next;
            else if ((g = petrel_arena_alloc(call->arena, sizeof(seg_t), 8)) == NULL)
                return PETREL_ENOMEM;
            g->next = NULL;
            g->off = g->len = 0;
            if (call->sq_tail)
                call->sq_tail->next = g;
            else
                call->sq = g;
            call->sq_tail = g;
        }
        size_t t = SEG_DATA - g->len;
        if (t > len)
            t = len;
        memcpy(g->data + g->len, p, t);
        g->len += (uint32_t)t;
        p += t;
        len -= t;
        call->sn += t;
        call->wtotal += t;
    }
    return 0;
}

/* HTTP/1.1: frame what comes next of a chunked body, when nothing framed
 * is left: a chunk of what is held, or the last chunk. */
static void sb_frame(petrel_call_t *call)
{
    if (!call->chunked || call->fr_off < call->fr_len || call->crem > 0 || call->term)
        return;
    char *p = call->fr;
    if (call->sn == 0 && !sb_ended(call))
        return;
    if (call->chunks) { /* the CRLF that ends the chunk before */
        *p++ = '\r';
        *p++ = '\n';
    }
    if (call->sn > 0) {
        p += snprintf(p, 20, "%zx\r\n", call->sn);
        call->crem = call->sn;
        call->chunks = true;
    } else {
        memcpy(p, "0\r\n\r\n", 5);
        p += 5;
        call->term = true;
    }
    call->fr_off = 0;
    call->fr_len = (uint8_t)(p - call->fr);
}

/* The head, then the streamed body as it is held; the connection is
 * watched for writing only while bytes wait for it.  0, or -1 when the
 * connection broke before any byte of the body went out (as a
 * non-streamed request's write: write_failed()); after that, a broken
 * write only stops the writing: the response may be on its way (an
 * upstream that answered early and closed), the reading decides. */
static int conn_write_stream(uconn_t *c)
{
    petrel_call_t *call = c->call;
    bool blocked = false;
    while (!c->wdead) {
        sb_frame(call);
        struct iovec iov[18];
        int n = 0;
        if (c->woff < c->wlen)
            iov[n++] = (struct iovec){c->wbuf + c->woff, c->wlen - c->woff};
        if (call->fr_off < call->fr_len)
            iov[n++] = (struct iovec){call->fr + call->fr_off, call->fr_len - call->fr_off};
        size_t room = call->chunked ? call->crem : call->sn;
        for (seg_t *g = call->sq; g && room > 0 && n < 18; g = g->next) {
            size_t t = g->len - g->off;
            if (t > room)
                t = room;
            iov[n++] = (struct iovec){g->data + g->off, t};
            room -= t;
        }
        if (n == 0)
            break;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->io.fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                blocked = true;
                break;
            }
            if (errno == EINTR)
                continue;
            if (!call->body_out && !call->headed)
                return -1;
            c->wdead = true;
            break;
        }
        call->wrote = true;
        size_t k = (size_t)w, t = c->wlen - c->woff;
        if (t > k)
            t = k;
        c->woff += t;
        k -= t;
        t = (size_t)(call->fr_len - call->fr_off);
        if (t > k)
            t = k;
        call->fr_off += (uint8_t)t;
        k -= t;
        if (t > 0)
            call->body_out = true;
        if (call->chunked)
            call->crem -= k;
        sb_drop(call, k);
    }
    uint32_t ev = call->paused && call->headed ? 0 : EPOLLIN;
    bool done = !c->wdead && c->woff == c->wlen && call->fr_off == call->fr_len && call->sn == 0 &&
                sb_ended(call) && (!call->chunked || call->term);
    if (done) {
        c->body_open = false;
        if (!call->headed) { /* all written: the header deadline runs */
            call->state = C_WAITING;
            if (!arm(&c->timer, Q_HEADER, c->up->o.header_timeout_ms))
                return -1;
        }
    }
    petrel__io_mod(petrel__loop, &c->io, ev | (blocked ? EPOLLOUT : 0));
    return 0;
}

/* A response's head came for `call` (HTTP/1.1 or h2): its address answers,
 * and the call counts by the status's class. */
static void call_headed(petrel_call_t *call, int status)
{
    call->state = C_BODY;
    call->headed = true;
    if (call->probe || call->addr->breaker == BR_CLOSED)
        addr_ok(call->up, call->addr);
    call->addr->fails = 0;
    call->probe = false;
    int r = status < 200   ? R_1XX_3XX
            : status < 300 ? R_2XX
            : status < 400 ? R_1XX_3XX
            : status < 500 ? R_4XX
                           : R_5XX;
    petrel__metrics_up(call->up->mslot)->calls[r]++;
}

static int h1_on_head(void *ctx, int status, int version, const petrel_header_t *f, size_t n,
                      int64_t cl);
static int h1_on_body(void *ctx, const char *p, size_t n);
static int h1_on_end(void *ctx, const petrel_header_t *t, size_t n);
static const petrel__h1c_cbs_t h1_cbs = {h1_on_head, h1_on_body, h1_on_end};

/* The request could not be written on `c` (error `e`): a kept-alive
 * connection the upstream closed meanwhile is no failure of the address
 * (the call is sent again where that is safe); a new connection that
 * breaks under the first write is one, as a refused connect is, and
 * counts toward the address's breaker. */
static void write_failed(petrel_call_t *call, uconn_t *c, int e)
{
    bool reused = call->reused;
    uaddr_t *a = c->addr;
    conn_close(c);
    if (reused) {
        call_retry_or_fail(call, PETREL_UPSTREAM_ECLOSED,
                           fmt_reason("%s: the connection was closed", a->label), false);
        return;
    }
    addr_failed(c->up, a);
    call_fail(call, PETREL_UPSTREAM_ECLOSED, fmt_reason("write to %s: %s", a->label, strerror(e)));
}

/* Put `call` on connection `c` (connected) and start writing. */
static void call_send(petrel_call_t *call)
{
    uconn_t *c = call->conn;
    /* a chunked streamed body: its Transfer-Encoding in the slot kept after
     * the fields (not sent to h2c addresses) */
    size_t nf = call->nfields + (call->chunked ? 1 : 0);
    size_t need =
        petrel__h1c_head_size(call->method, call->target,
                              call->authority ? call->authority : c->addr->host, call->fields, nf);
    if (need > c->wcap) {
        char *b = realloc(c->wbuf, need);
        if (b == NULL) {
            conn_close(c);
            call_fail(call, PETREL_UPSTREAM_ECLOSED, "out of memory");
            return;
        }
        c->wbuf = b;
        c->wcap = need;
    }
    size_t blen = call->streamed ? (size_t)(call->slen > 0 ? call->slen : 0) : call->body_len;
    bool send_length = call->streamed ? call->slen >= 0 : call->body_len > 0 || call->post_like;
    long len = petrel__h1c_head(c->wbuf, c->wcap, call->method, call->target,
                                call->authority ? call->authority : c->addr->host, call->fields, nf,
                                blen, send_length);
    c->wlen = (size_t)len;
    c->body_open = call->streamed;
    c->wdead = false;
    c->woff = c->boff = 0;
    c->nreq++;
    call->state = C_SENDING;
    petrel__h1c_start(c->parser, call->arena, call->head, &h1_cbs, call);
    if (call->upgrade)
        petrel__h1c_upgrade(c->parser);
    c->rlen = c->roff = 0;
    if (conn_write(c) < 0)
        write_failed(call, c, errno);
}

/* Give connection `c` (free: idle or just connected) to `call`. */
static void attach(petrel_call_t *call, uconn_t *c, bool reused)
{
    if (call->state == C_QUEUED) {
        list_unlink(&call->node);
        call->up->npending--;
    }
    call->conn = c;
    call->addr = c->addr;
    call->reused = reused;
    c->addr->inflight++;
    c->call = call;
    if (c->state == K_IDLE) {
        list_unlink(&c->node);
        c->addr->nidle--;
        petrel__timer_disarm(&c->timer);
        petrel__metrics_up(c->addr->mslot)->reuses++;
    }
    if (c->state == K_CONNECTING) {
        call->state = C_CONNECTING;
        return;
    }
    c->state = K_BUSY;
    call_send(call);
}

/* ---- HTTP/2 connections --------------------------------------------------
 *
 * An h2c address's connections are all on its `live` list; each carries
 * up to H2_MAX_STREAMS calls at once (fewer if the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS says so), and a new one is opened only
 * when every open one is full.  A connection with no stream is idle (its
 * idle deadline runs); one that had a GOAWAY, or max_requests streams,
 * takes no new stream and closes when its last one ends.  A call's stream
 * is its own: its header deadline is the call's (htimer), a cancel or a
 * deadline resets the stream only.  A stream the upstream did not process
 * (REFUSED_STREAM, above a GOAWAY's last stream id, never sent: RFC 9113
 * §8.7) is sent again whatever its method, up to H2_REFUSALS times. */

/* A connection of `a` that may take a stream now, or NULL. */
static uconn_t *h2_room(petrel_upstream_t *up, uaddr_t *a)
{
    for (petrel__list_t *n = a->live.next; n != &a->live; n = n->next) {
        uconn_t *c = container_of(n, uconn_t, node);
        if (c->doomed || (up->o.max_requests && c->nreq >= up->o.max_requests))
            continue;
        if (petrel__h2c_room(c->h2, H2_MAX_STREAMS))
            return c;
    }
    return NULL;
}

/* Write what the session has framed; on a broken socket, its calls are
 * retried or fail. */
static void h2_flush(uconn_t *c)
{
    if (c->state == K_FREE || c->state == K_CONNECTING || c->in_feed || c->closing)
        return;
    for (;;) {
        if (c->woff == c->wlen) {
            c->in_feed = true; /* framing may end streams: their calls are told */
            long n = petrel__h2c_out(c->h2, c->wbuf, c->wcap);
            c->in_feed = false;
            if (c->doomed) {
                c->doomed = false;
                conn_close(c);
                return;
            }
            if (n < 0) {
                h2_conn_end(c, PETREL_UPSTREAM_EPROTO,
                            fmt_reason("%s: HTTP/2 session failed", c->addr->label), false);
                return;
            }
            c->wlen = (size_t)n;
            c->woff = 0;
            if (n == 0)
                break;
        }
        ssize_t w = send(c->io.fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                petrel__io_mod(petrel__loop, &c->io, EPOLLIN | EPOLLOUT);
                return;
            }
            if (errno == EINTR)
                continue;
            h2_conn_end(c, PETREL_UPSTREAM_ECLOSED,
                        fmt_reason("write to %s: %s", c->addr->label, strerror(errno)), false);
            return;
        }
        c->woff += (size_t)w;
    }
    petrel__io_mod(petrel__loop, &c->io, EPOLLIN);
    if (!petrel__h2c_alive(c->h2) && c->nstreams == 0)
        conn_close(c); /* the session ended (a GOAWAY sent or taken, nothing left) */
}

/* A stream of `c` is over: the connection idles, or closes once it takes
 * no more streams; what the session queued (RST_STREAM, WINDOW_UPDATE) is
 * written. */
static void h2_settle(uconn_t *c)
{
    if (c->state == K_FREE || c->closing)
        return;
    if (c->nstreams == 0 && c->state != K_CONNECTING) {
        petrel_upstream_t *up = c->up;
        if (petrel__h2c_goaway(c->h2) || (up->o.max_requests && c->nreq >= up->o.max_requests)) {
            conn_close(c);
            return;
        }
        if (c->state != K_IDLE) {
            c->state = K_IDLE;
            c->addr->nidle++;
            if (!arm(&c->timer, Q_IDLE, up->o.idle_timeout_ms)) {
                conn_close(c);
                return;
            }
        }
    }
    h2_flush(c);
    want_dispatch(c->up);
}

static void h2_unbind(petrel_call_t *call)
{
    uconn_t *c = call->conn;
    call->conn = NULL;
    petrel__h2c_forget(c->h2, &call->st);
    c->nstreams--;
    h2_settle(c);
}

/* Open `call`'s stream on `c` (connected or being connected). */
static void h2_attach(petrel_call_t *call, uconn_t *c)
{
    petrel_upstream_t *up = call->up;
    if (call->state == C_QUEUED) {
        list_unlink(&call->node);
        up->npending--;
    }
    call->conn = c;
    call->addr = c->addr;
    call->reused = c->nreq > 0;
    c->addr->inflight++;
    if (c->state == K_IDLE) {
        c->state = K_BUSY;
        c->addr->nidle--;
        petrel__timer_disarm(&c->timer);
    }
    if (call->reused)
        petrel__metrics_up(c->addr->mslot)->reuses++;
    c->nstreams++;
    c->nreq++;
    call->state = C_WAITING;
    int rc = petrel__h2c_submit(
        c->h2, &call->st, call, call->arena, call->method,
        call->authority ? call->authority : c->addr->host, call->target, call->fields,
        call->nfields, call->te_trailers, call->body,
        call->streamed ? (size_t)(call->slen > 0 ? call->slen : 0) : call->body_len,
        call->streamed ? call->slen >= 0 : call->body_len > 0 || call->post_like, call->head,
        call->streamed);
    if (rc < 0) {
        call_fail(call, PETREL_UPSTREAM_ECLOSED,
                  rc == PETREL_ENOMEM ? "out of memory" : "the connection takes no more streams");
        return;
    }
    call->st.paused = call->paused;
    h2_flush(c);
}

/* The connection is gone (or could not be made): each of its calls is sent
 * again where that is safe (as a broken HTTP/1.1 connection's would be),
 * or fails. */
static void h2_conn_end(uconn_t *c, int code, const char *reason, bool connect)
{
    c->closing = true;
    for (petrel__h2c_stream_t *st; (st = petrel__h2c_first(c->h2)) != NULL;) {
        petrel_call_t *call = st->ctx;
        call->wrote = st->sent;
        if (!call->headed)
            call_retry_or_fail(call, code, reason, connect);
        else
            call_fail(call, PETREL_UPSTREAM_ECLOSED,
                      fmt_reason("%s: closed mid-body", c->addr->label));
    }
    c->closing = false;
    conn_close(c);
}

static void h2_readable(uconn_t *c)
{
    for (;;) {
        ssize_t r = read(c->io.fd, c->rbuf, RBUF_SIZE);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            h2_conn_end(c, PETREL_UPSTREAM_ECLOSED,
                        fmt_reason("%s: %s", c->addr->label, strerror(errno)), false);
            return;
        }
        if (r == 0) {
            h2_conn_end(c, PETREL_UPSTREAM_ECLOSED,
                        fmt_reason("%s: closed before the response", c->addr->label), false);
            return;
        }
        c->in_feed = true;
        int rc = petrel__h2c_recv(c->h2, c->rbuf, (size_t)r);
        c->in_feed = false;
        if (c->doomed) {
            c->doomed = false;
            conn_close(c);
            return;
        }
        if (rc < 0) {
            addr_failed(c->up, c->addr);
            h2_conn_end(c, PETREL_UPSTREAM_EPROTO,
                        fmt_reason("%s: not a valid HTTP/2 peer", c->addr->label), false);
            return;
        }
        if ((size_t)r < RBUF_SIZE)
            break;
    }
    h2_flush(c);
}

static void h2_io(uconn_t *c, uint32_t events)
{
    if (events & EPOLLOUT)
        h2_flush(c);
    if (c->state != K_FREE && (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
        h2_readable(c);
}

static void h2_on_head(void *ctx, int status, const petrel_header_t *f, size_t n, int64_t cl)
{
    petrel_call_t *call = ctx;
    petrel__timer_disarm(&call->htimer); /* the header came */
    call_headed(call, status);
    if (listening(call) && call->cbs.on_head) {
        petrel_upstream_head_t h = {status, 20, f, n, cl};
        call->cbs.on_head(call, &h, call->data);
    }
}

static void h2_on_body(void *ctx, const char *p, size_t n)
{
    petrel_call_t *call = ctx;
    if (listening(call) && call->cbs.on_body)
        call->cbs.on_body(call, p, n, call->data);
}

static void h2_on_end(void *ctx, const petrel_header_t *t, size_t n)
{
    petrel_call_t *call = ctx;
    call_detach(call);
    if (listening(call) && call->cbs.on_end)
        call->cbs.on_end(call, t, n, call->data);
}

static void h2_on_close(void *ctx, int how, uint32_t code)
{
    petrel_call_t *call = ctx;
    const char *label = call->addr->label;
    if (how == PETREL__H2C_REFUSED && !call->headed && !call->body_out) {
        if (call->refusals++ < H2_REFUSALS && !call->probe) {
            petrel__metrics_up(call->up->mslot)->retries++;
            call_requeue(call); /* not processed: safe to send again (RFC 9113 §8.7) */
            return;
        }
        call_fail(call, PETREL_UPSTREAM_ECLOSED,
                  fmt_reason("%s: the stream was refused %u times", label, call->refusals));
        return;
    }
    addr_failed(call->up, call->addr);
    if (how == PETREL__H2C_MALFORMED)
        call_fail(call, PETREL_UPSTREAM_EPROTO, fmt_reason("%s: a malformed response", label));
    else
        call_fail(call, PETREL_UPSTREAM_ECLOSED,
                  fmt_reason("%s: the stream was reset (HTTP/2 error %u)", label, code));
}

/* The whole request is written: the header deadline runs (as over
 * HTTP/1.1), for this stream only. */
static void h2_on_sent(void *ctx)
{
    petrel_call_t *call = ctx;
    if (!call->headed)
        arm(&call->htimer, Q_SHEADER, call->up->o.header_timeout_ms);
}

static size_t sb_take(petrel_call_t *call, char *buf, size_t len);
static bool sb_ended(const petrel_call_t *call);

/* DATA of a streamed body: what the call holds, up to the window. */
static size_t h2_on_read(void *ctx, char *buf, size_t len, bool *eof)
{
    petrel_call_t *call = ctx;
    size_t k = sb_take(call, buf, len);
    *eof = call->sn == 0 && sb_ended(call);
    return k;
}

static const petrel__h2c_cbs_t h2_cbs = {h2_on_head,  h2_on_body, h2_on_end,
                                         h2_on_close, h2_on_sent, h2_on_read};

/* ---- dispatch ----------------------------------------------------------- */

/* Choose an address for the next call: NULL when every breaker is open
 * (`*all_open`) or none can take it now. */
static uaddr_t *pick(petrel_upstream_t *up, bool *all_open, bool *probe)
{
    uaddr_t *best = NULL;
    bool best_probe = false;
    *all_open = true;
    for (unsigned k = 0; k < up->naddrs; k++) {
        unsigned i = (up->rr + k) % up->naddrs;
        uaddr_t *a = &up->addrs[i];
        bool pr;
        if (a->breaker == BR_CLOSED ||
            (a->breaker == BR_OPEN && petrel__loop->now_ms >= a->open_until))
            *all_open = false;
        if (!addr_usable(a, &pr))
            continue;
        bool room = a->h2 ? h2_room(up, a) != NULL || a->nconns < up->o.max_conns
                          : a->nidle > 0 || a->nconns < up->o.max_conns;
        if (!room)
            continue;
        if (up->o.balance == PETREL_BALANCE_LEAST_PENDING) {
            if (best == NULL || a->inflight < best->inflight) {
                best = a;
                best_probe = pr;
            }
        } else {
            best = a;
            best_probe = pr;
            break;
        }
    }
    if (best && up->o.balance != PETREL_BALANCE_LEAST_PENDING)
        up->rr = (unsigned)(best - up->addrs + 1) % up->naddrs;
    *probe = best_probe;
    return best;
}

static void dispatch(petrel_upstream_t *up)
{
    /* the calls that failed in petrel_call(): told now */
    while (!list_empty(&up->failed)) {
        petrel_call_t *call = container_of(up->failed.next, petrel_call_t, node);
        call_fail(call, call->fail_code, call->fail_reason);
    }
    bool wait_tokens = false, wait_breaker = false;
    while (!list_empty(&up->pending)) {
        petrel_call_t *call = container_of(up->pending.next, petrel_call_t, node);
        bool all_open, probe;
        uaddr_t *a = pick(up, &all_open, &probe);
        if (a == NULL) {
            if (all_open) {
                call_fail(
                    call, PETREL_UPSTREAM_EBREAKER,
                    fmt_reason("upstream '%s': every address is out (circuit breaker)", up->name));
                continue;
            }
            wait_breaker = true;
            break; /* at max_conns, or a probe is out: a connection will free up */
        }
        if (a->h2) {
            uconn_t *c = h2_room(up, a);
            if (c) {
                h2_attach(call, c);
                continue;
            }
        } else if (a->nidle > 0) {
            /* the most recently used: the likeliest to be alive */
            uconn_t *c = container_of(a->idle.prev, uconn_t, node);
            attach(call, c, true);
            continue;
        }
        if (!token_take(up, a)) {
            wait_tokens = true;
            break;
        }
        int err = 0;
        uconn_t *c = conn_open(up, a, &err);
        if (probe) {
            a->breaker = BR_PROBE;
            call->probe = true;
        }
        if (c == NULL) {
            list_unlink(&call->node);
            up->npending--;
            call->state = C_CONNECTING; /* for call_retry_or_fail's bookkeeping */
            call->addr = a;
            a->inflight++;
            addr_failed(up, a);
            call_retry_or_fail(call, PETREL_UPSTREAM_EREFUSED,
                               fmt_reason("connect to %s: %s", a->label, strerror(err)), true);
            continue;
        }
        if (a->h2)
            h2_attach(call, c);
        else
            attach(call, c, false);
    }
    if ((wait_tokens || wait_breaker) && !list_empty(&up->pending) && up->kick.q == NULL)
        arm(&up->kick, Q_KICK, KICK_MS);
    /* the gauges of /metrics: every change is followed by a dispatch */
    petrel__metrics_up(up->mslot)->pending = up->npending;
    for (unsigned i = 0; i < up->naddrs; i++) {
        uaddr_t *a = &up->addrs[i];
        petrel__up_stats_t *m = petrel__metrics_up(a->mslot);
        m->open = a->nconns;
        m->idle = a->nidle;
        m->breaker_open = a->breaker != BR_CLOSED;
    }
}

static void on_kick_expire(petrel__timer_t *t)
{
    dispatch(container_of(t, petrel_upstream_t, kick));
}

/* ---- reading ------------------------------------------------------------ */

static int h1_on_head(void *ctx, int status, int version, const petrel_header_t *f, size_t n,
                      int64_t cl)
{
    petrel_call_t *call = ctx;
    uconn_t *c = call->conn;
    petrel__timer_disarm(&c->timer); /* the header came */
    call_headed(call, status);
    if (status == 101) {
        /* the parser stops after this head: conn_feed hands the
         * connection over (conn_switched) */
        call->switched = true;
        call->head101 = (petrel_upstream_head_t){status, version, f, n, 0};
        return 1;
    }
    if (listening(call) && call->cbs.on_head) {
        petrel_upstream_head_t h = {status, version, f, n, cl};
        call->cbs.on_head(call, &h, call->data);
    }
    if (call->cancelled || call->conn != c)
        return -1;
    return call->paused ? 1 : 0;
}

static int h1_on_body(void *ctx, const char *p, size_t n)
{
    petrel_call_t *call = ctx;
    uconn_t *c = call->conn;
    if (listening(call) && call->cbs.on_body)
        call->cbs.on_body(call, p, n, call->data);
    if (call->cancelled || call->conn != c)
        return -1;
    return call->paused ? 1 : 0;
}

static int h1_on_end(void *ctx, const petrel_header_t *t, size_t n)
{
    petrel_call_t *call = ctx;
    call_detach(call);
    if (listening(call) && call->cbs.on_end)
        call->cbs.on_end(call, t, n, call->data);
    return 0;
}

/* A 101 came for `call` on `c`: the connection leaves the pool for good,
 * its descriptor and the bytes read past the head go to the caller. */
static void conn_switched(uconn_t *c, petrel_call_t *call)
{
    int fd = c->io.fd;
    petrel__io_del(petrel__loop, &c->io);
    c->io.fd = -1;
    petrel__timer_disarm(&c->timer);
    call_detach(call);
    if (listening(call))
        call->on_upgrade(call, &call->head101, fd, c->rbuf + c->roff, c->rlen - c->roff,
                         call->data);
    else
        close(fd);
    conn_close(c); /* its descriptor is the caller's now: only the slot goes */
}

/* Feed the bytes in the read buffer; false when the connection is gone. */
static bool conn_feed(uconn_t *c)
{
    /* a paused parser may have an end to give with no byte left */
    while (c->roff < c->rlen || petrel__h1c_paused(c->parser)) {
        petrel_call_t *call = c->call;
        if (call == NULL || call->paused)
            return true;
        bool done;
        c->in_feed = true;
        long used = petrel__h1c_feed(c->parser, c->rbuf + c->roff, c->rlen - c->roff, &done);
        c->in_feed = false;
        if (used < 0) {
            if (call->state != C_DONE && !call->cancelled) {
                addr_failed(c->up, c->addr);
                call_fail(call, PETREL_UPSTREAM_EPROTO,
                          fmt_reason("%s: a malformed response", c->addr->label));
            }
            c->doomed = false;
            conn_close(c);
            return false;
        }
        c->roff += (size_t)used;
        if (c->doomed) {
            c->doomed = false;
            conn_close(c);
            return false;
        }
        /* a call that ended in the feed may be gone (its arena reset by
         * its request's end): only one still on `c` is looked at */
        if (done && c->call == call && call->switched) {
            conn_switched(c, call);
            return false;
        }
        if (done) {
            bool keep = petrel__h1c_keep_alive(c->parser) && c->roff == c->rlen && !c->body_open &&
                        (c->up->o.max_requests == 0 || c->nreq < c->up->o.max_requests);
            if (keep)
                conn_idle(c);
            else
                conn_close(c);
            return keep;
        }
    }
    c->rlen = c->roff = 0;
    return true;
}

static void conn_eof(uconn_t *c, int err)
{
    petrel_call_t *call = c->call;
    if (call == NULL) { /* idle: the peer closed it, nobody needs to know */
        conn_close(c);
        return;
    }
    bool started;
    c->in_feed = true;
    int rc = err ? PETREL_UPSTREAM_ECLOSED : petrel__h1c_eof(c->parser, &started);
    c->in_feed = false;
    if (err)
        started = petrel__h1c_started(c->parser);
    conn_close(c);
    if (rc == 0 || call->state == C_DONE)
        return; /* a body delimited by the close: on_end has run */
    if (!started && call->reused) {
        /* a kept-alive connection the upstream closed as we sent */
        call_retry_or_fail(call, PETREL_UPSTREAM_ECLOSED,
                           fmt_reason("%s: closed before any response", c->addr->label), false);
        return;
    }
    addr_failed(c->up, c->addr);
    call_fail(call, PETREL_UPSTREAM_ECLOSED,
              fmt_reason(call->headed ? "%s: closed mid-body" : "%s: closed before the response",
                         c->addr->label));
}

static void conn_readable(uconn_t *c)
{
    for (;;) {
        if (c->call == NULL) {
            /* idle: anything but the close is a protocol error */
            char b[64];
            ssize_t r = read(c->io.fd, b, sizeof(b));
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            conn_close(c);
            return;
        }
        if (c->call->paused)
            return;
        if (c->rlen == RBUF_SIZE)
            return;
        ssize_t r = read(c->io.fd, c->rbuf + c->rlen, RBUF_SIZE - c->rlen);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR)
                continue;
            conn_eof(c, errno);
            return;
        }
        if (r == 0) {
            conn_eof(c, 0);
            return;
        }
        c->rlen += (size_t)r;
        if (!conn_feed(c))
            return;
        if (c->state != K_BUSY)
            return;
    }
}

static void conn_connected(uconn_t *c)
{
    int e = 0;
    socklen_t len = sizeof(e);
    petrel_call_t *call = c->call;
    if (getsockopt(c->io.fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e && c->h2) {
        addr_failed(c->up, c->addr);
        h2_conn_end(c, PETREL_UPSTREAM_EREFUSED,
                    fmt_reason("connect to %s: %s", c->addr->label, strerror(e)), true);
        return;
    }
    if (e) {
        uaddr_t *a = c->addr;
        conn_close(c);
        addr_failed(c->up, a);
        if (call)
            call_retry_or_fail(call, PETREL_UPSTREAM_EREFUSED,
                               fmt_reason("connect to %s: %s", a->label, strerror(e)), true);
        return;
    }
    petrel__timer_disarm(&c->timer);
    if (c->h2) {
        c->state = K_BUSY;
        petrel__io_mod(petrel__loop, &c->io, EPOLLIN);
        h2_settle(c); /* idle if its calls went away meanwhile; writes what is queued */
        return;
    }
    if (call == NULL) { /* its call went away meanwhile */
        conn_idle(c);
        return;
    }
    c->state = K_BUSY;
    petrel__io_mod(petrel__loop, &c->io, EPOLLIN);
    call_send(call);
}

static void conn_io(petrel__io_t *io, uint32_t events)
{
    uconn_t *c = container_of(io, uconn_t, io);
    if (c->state == K_FREE)
        return; /* closed by what an earlier event of this loop turn did */
    if (c->state == K_CONNECTING) {
        conn_connected(c);
        return;
    }
    if (c->h2) {
        h2_io(c, events);
        return;
    }
    if (c->call && (c->call->state == C_SENDING || (c->body_open && !c->wdead)) &&
        (events & (EPOLLOUT | EPOLLERR))) {
        petrel_call_t *call = c->call;
        if (conn_write(c) < 0) {
            write_failed(call, c, errno);
            return;
        }
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        conn_readable(c);
}

/* ---- deadlines ---------------------------------------------------------- */

static void on_connect_expire(petrel__timer_t *t)
{
    uconn_t *c = container_of(t, uconn_t, timer);
    petrel_call_t *call = c->call;
    uaddr_t *a = c->addr;
    if (c->h2) {
        addr_failed(c->up, a);
        h2_conn_end(
            c, PETREL_UPSTREAM_ECONNECT,
            fmt_reason("connect to %s: no answer in %u ms", a->label, c->up->o.connect_timeout_ms),
            true);
        return;
    }
    conn_close(c);
    addr_failed(c->up, a);
    if (call)
        call_retry_or_fail(
            call, PETREL_UPSTREAM_ECONNECT,
            fmt_reason("connect to %s: no answer in %u ms", a->label, c->up->o.connect_timeout_ms),
            true);
}

static void on_header_expire(petrel__timer_t *t)
{
    uconn_t *c = container_of(t, uconn_t, timer);
    petrel_call_t *call = c->call;
    uaddr_t *a = c->addr;
    conn_close(c);
    addr_failed(c->up, a);
    if (call)
        call_fail(
            call, PETREL_UPSTREAM_EHEADER,
            fmt_reason("%s: no response header in %u ms", a->label, c->up->o.header_timeout_ms));
}

static void on_stream_header_expire(petrel__timer_t *t)
{
    petrel_call_t *call = container_of(t, petrel_call_t, htimer);
    uaddr_t *a = call->addr;
    addr_failed(call->up, a);
    call_fail(
        call, PETREL_UPSTREAM_EHEADER,
        fmt_reason("%s: no response header in %u ms", a->label, call->up->o.header_timeout_ms));
}

static void on_idle_expire(petrel__timer_t *t)
{
    conn_close(container_of(t, uconn_t, timer));
}

static void on_call_expire(petrel__timer_t *t)
{
    petrel_call_t *call = container_of(t, petrel_call_t, timer);
    if (call->conn && !call->conn->h2)
        conn_close(call->conn); /* mid-request: the connection cannot be reused */
    call_fail(call, PETREL_UPSTREAM_ETIMEOUT,
              fmt_reason("upstream '%s': no complete response in %u ms", call->up->name,
                         call->up->o.call_timeout_ms));
}

/* ---- calls -------------------------------------------------------------- */

static void call_on_abort(petrel_req_t *req, void *data)
{
    petrel_call_t *call = data;
    if (call->prev_cb)
        call->prev_cb(req, call->prev_data);
    petrel_call_cancel(call);
}

/* `te: trailers`, the one TE a caller may give (gRPC sends it): it goes to
 * an h2c upstream (RFC 9113 §8.2.2 allows it), not to HTTP/1.1 ones. */
static bool te_trailers(const petrel_header_t *h)
{
    return h->name.len == 2 && strncasecmp(h->name.ptr, "te", 2) == 0 && h->value.len == 8 &&
           strncasecmp(h->value.ptr, "trailers", 8) == 0;
}

/* The arena of the call is going: nobody may be told any more. */
static void call_gone(void *data)
{
    petrel_call_cancel(data);
}

static void call_kick(petrel__pending_t *p);

static petrel_call_t *call_new(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                               const petrel_call_cbs_t *cbs, void *data, const char *upgrade,
                               int64_t slen)
{
    if (up == NULL || spec == NULL || cbs == NULL || spec->method == NULL || spec->target == NULL ||
        *spec->method == '\0' || *spec->target == '\0' ||
        (spec->req == NULL && spec->arena == NULL) || petrel__loop == NULL ||
        (spec->body_len > 0 && spec->body == NULL)) {
        errno = EINVAL;
        return NULL;
    }
    for (const char *m = spec->method; *m; m++)
        if (*m < 'A' || *m > 'Z') {
            errno = EINVAL;
            return NULL;
        }
    for (const char *s = spec->target; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f) {
            errno = EINVAL;
            return NULL;
        }
    if (spec->authority)
        for (const char *s = spec->authority; *s; s++)
            if ((unsigned char)*s <= ' ') {
                errno = EINVAL;
                return NULL;
            }
    for (size_t i = 0; i < spec->nheaders; i++) {
        if (te_trailers(&spec->headers[i]))
            continue;
        if (!petrel__h1c_field_ok(&spec->headers[i])) {
            errno = EINVAL;
            return NULL;
        }
    }
    if (spec->req && !petrel_req_waiting(spec->req)) {
        errno = EINVAL; /* answered or aborted already: nobody to tell */
        return NULL;
    }
    worker_setup(up);
    petrel_arena_t *arena = spec->req ? spec->req->arena : spec->arena;
    petrel_call_t *call = petrel_arena_new(arena, petrel_call_t, 1);
    size_t nf = spec->nheaders + (upgrade ? 2 : 0) + (slen == -1 ? 1 : 0);
    petrel_header_t *f = nf ? petrel_arena_new(arena, petrel_header_t, nf) : NULL;
    if (call == NULL || (nf && f == NULL)) {
        errno = ENOMEM;
        return NULL;
    }
    call->up = up;
    call->arena = arena;
    call->cbs = *cbs;
    call->data = data;
    call->method = petrel_arena_strndup(arena, spec->method, strlen(spec->method));
    call->target = petrel_arena_strndup(arena, spec->target, strlen(spec->target));
    call->authority = spec->authority
                          ? petrel_arena_strndup(arena, spec->authority, strlen(spec->authority))
                          : NULL;
    if (call->method == NULL || call->target == NULL || (spec->authority && !call->authority)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < spec->nheaders; i++) {
        const petrel_header_t *h = &spec->headers[i];
        if (te_trailers(h)) {
            call->te_trailers = true;
            continue;
        }
        size_t j = k++;
        f[j].name.ptr = petrel_arena_strndup(arena, h->name.ptr, h->name.len);
        f[j].name.len = h->name.len;
        f[j].value.ptr = petrel_arena_strndup(arena, h->value.ptr, h->value.len);
        f[j].value.len = h->value.len;
        if (f[j].name.ptr == NULL || f[j].value.ptr == NULL) {
            errno = ENOMEM;
            return NULL;
        }
    }
    if (upgrade) {
        /* RFC 9110 §7.8: Upgrade is a hop-by-hop field, named in Connection */
        char *u = petrel_arena_strndup(arena, upgrade, strlen(upgrade));
        if (u == NULL) {
            errno = ENOMEM;
            return NULL;
        }
        f[k++] = (petrel_header_t){{"Connection", 10}, {"Upgrade", 7}};
        f[k++] = (petrel_header_t){{"Upgrade", 7}, {u, strlen(u)}};
        call->upgrade = u;
    }
    if (slen == -1) /* the slot after the fields: HTTP/1.1's framing (call_send) */
        f[k] = (petrel_header_t){{"Transfer-Encoding", 17}, {"chunked", 7}};
    call->fields = f;
    call->nfields = k;
    call->body = spec->body;
    call->body_len = spec->body_len;
    if (slen >= -1) {
        call->streamed = true;
        call->chunked = slen == -1;
        call->slen = slen;
        list_init(&call->kick.node);
        call->kick.cb = call_kick;
    }
    const char *m = call->method;
    call->head = method_is(m, "HEAD");
    call->idempotent = method_is(m, "GET") || call->head || method_is(m, "OPTIONS") ||
                       method_is(m, "PUT") || method_is(m, "DELETE") || method_is(m, "TRACE");
    call->post_like = method_is(m, "POST") || method_is(m, "PUT") || method_is(m, "PATCH");
    if (petrel_arena_defer(arena, call_gone, call) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    if (spec->req) {
        call->req = spec->req;
        call->prev_cb = petrel_req_on_abort_get(spec->req, &call->prev_data);
        petrel_req_on_abort(spec->req, call_on_abort, call);
    }
    list_init(&call->node);
    call->t0_ns = petrel__loop->now_ns;
    budget_roll(up);
    up->budget_calls[up->budget_sec % BUDGET_SECS]++;
    if (up->npending >= up->o.max_pending) {
        call->state = C_FAILED;
        call->fail_code = PETREL_UPSTREAM_EFULL;
        call->fail_reason = "too many calls wait for a connection (max_pending)";
        list_append(&up->failed, &call->node);
    } else {
        call->state = C_QUEUED;
        list_append(&up->pending, &call->node);
        up->npending++;
    }
    arm(&call->timer, Q_CALL, up->o.call_timeout_ms);
    want_dispatch(up);
    return call;
}

petrel_call_t *petrel_call(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                           const petrel_call_cbs_t *cbs, void *data)
{
    return call_new(up, spec, cbs, data, NULL, -2);
}

petrel_call_t *petrel_call_upgrade(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                                   const char *protocol, const petrel_call_cbs_t *cbs,
                                   petrel_upgrade_cb on_upgrade, void *data)
{
    /* a protocol of RFC 9110 §7.8: a token, "/" and a version allowed */
    bool ok = protocol && *protocol && on_upgrade;
    for (const char *s = protocol; ok && *s; s++)
        ok = (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
             strchr("!#$%&'*+-.^_`|~/", *s) != NULL;
    if (!ok) {
        errno = EINVAL;
        return NULL;
    }
    petrel_call_t *call = call_new(up, spec, cbs, data, protocol, -2);
    if (call)
        call->on_upgrade = on_upgrade;
    return call;
}

petrel_call_t *petrel_call_stream(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                                  int64_t body_len, const petrel_call_cbs_t *cbs, void *data)
{
    if (spec == NULL || spec->body != NULL || spec->body_len != 0 || body_len < -1) {
        errno = EINVAL;
        return NULL;
    }
    return call_new(up, spec, cbs, data, NULL, body_len);
}

/* From the loop: a write short of body_len fails the call; the bytes
 * written go on to the connection; a drain callback that is due runs. */
static void call_kick(petrel__pending_t *p)
{
    petrel_call_t *call = container_of(p, petrel_call_t, kick);
    if (call->state == C_DONE)
        return;
    uconn_t *c = call->conn;
    if (call->short_end) {
        if (c && !c->h2)
            conn_close(c); /* mid-request: the connection cannot be reused */
        call_fail(call, PETREL_UPSTREAM_EPROTO,
                  fmt_reason("the body ended after %llu of its %lld bytes",
                             (unsigned long long)call->wtotal, (long long)call->slen));
        return;
    }
    if (c && c->h2) {
        petrel__h2c_resume(c->h2, &call->st);
        if (!c->in_feed)
            h2_flush(c);
    } else if (c && c->state == K_BUSY && c->call == call && c->body_open && !c->wdead &&
               !c->in_feed && !(call->paused && call->headed)) {
        if (conn_write(c) < 0) {
            write_failed(call, c, errno);
            return;
        }
    }
    if (call->state == C_DONE || !call->drain_due)
        return;
    call->drain_due = false;
    if (call->drain_cb && listening(call))
        call->drain_cb(call, call->data);
}

/* Whether `call` takes body bytes: 0 or the error of petrel_call_write(). */
static int stream_usable(const petrel_call_t *call)
{
    if (call == NULL || !call->streamed)
        return PETREL_EINVAL;
    if (call->state == C_DONE || call->state == C_FAILED || call->cancelled || call->short_end)
        return PETREL_ESTATE;
    if (call->wend)
        return PETREL_EINVAL;
    return 0;
}

int petrel_call_write(petrel_call_t *call, const void *ptr, size_t len)
{
    int rc = stream_usable(call);
    if (rc < 0)
        return rc;
    if (call->slen >= 0 && len > (uint64_t)call->slen - call->wtotal)
        return PETREL_EINVAL;
    if (len > 0) {
        if (call->sn + len > SB_MAX)
            return PETREL_ENOMEM;
        if (ptr == NULL)
            return PETREL_EINVAL;
        if (sb_put(call, ptr, len) < 0)
            return PETREL_ENOMEM;
    }
    petrel__pending_add(petrel__loop, &call->kick);
    if (call->sn > SB_MARK) {
        call->drain_wanted = true;
        return 0;
    }
    return 1;
}

int petrel_call_write_end(petrel_call_t *call)
{
    int rc = stream_usable(call);
    if (rc < 0)
        return rc;
    call->wend = true;
    if (call->slen >= 0 && call->wtotal < (uint64_t)call->slen)
        call->short_end = true; /* on_error from the loop */
    petrel__pending_add(petrel__loop, &call->kick);
    return call->short_end ? PETREL_EINVAL : 0;
}

void petrel_call_on_drain(petrel_call_t *call, petrel_call_drain_cb cb)
{
    if (call && call->streamed)
        call->drain_cb = cb;
}

void petrel_call_pause(petrel_call_t *call, int paused)
{
    if (call == NULL || call->state == C_DONE || call->paused == (paused != 0))
        return;
    call->paused = paused != 0;
    uconn_t *c = call->conn;
    if (c && c->h2) { /* its stream's window is the backpressure */
        petrel__h2c_pause(c->h2, &call->st, call->paused);
        if (c->state != K_FREE && c->h2 && !c->in_feed)
            h2_flush(c);
        return;
    }
    if (c == NULL || c->state != K_BUSY || call->state == C_SENDING)
        return;
    if (call->paused) {
        petrel__io_mod(petrel__loop, &c->io, 0);
        return;
    }
    petrel__io_mod(petrel__loop, &c->io, EPOLLIN);
    if (c->body_open && !c->wdead)
        petrel__pending_add(petrel__loop, &call->kick); /* the rest of the body */
    if (!c->in_feed && (c->roff < c->rlen || petrel__h1c_paused(c->parser)))
        conn_feed(c); /* the bytes read before the pause, or the end they made */
}

void petrel_call_cancel(petrel_call_t *call)
{
    if (call == NULL || call->cancelled)
        return;
    call->cancelled = true;
    if (call->state == C_DONE)
        return;
    uconn_t *c = call->conn;
    int state = call->state;
    bool h2 = c && c->h2;
    call_detach(call); /* an h2 stream is reset: its connection goes on */
    if (c == NULL || h2)
        return;
    if (state == C_CONNECTING)
        return;    /* nothing sent: the connection joins the pool once made */
    conn_close(c); /* a response under way: the connection cannot be reused */
}

const char *petrel_call_address(const petrel_call_t *call)
{
    return call && call->addr ? call->addr->label : NULL;
}

const char *petrel_upstream_strerror(int error)
{
    switch (error) {
    case PETREL_UPSTREAM_EREFUSED:
        return "no connection could be made to the upstream";
    case PETREL_UPSTREAM_ECONNECT:
        return "connecting to the upstream timed out";
    case PETREL_UPSTREAM_EHEADER:
        return "the upstream sent no response header in time";
    case PETREL_UPSTREAM_ETIMEOUT:
        return "the call timed out";
    case PETREL_UPSTREAM_ECLOSED:
        return "the upstream closed the connection";
    case PETREL_UPSTREAM_EPROTO:
        return "the upstream's response is not valid HTTP";
    case PETREL_UPSTREAM_EBREAKER:
        return "the upstream is out (circuit breaker open)";
    case PETREL_UPSTREAM_EFULL:
        return "too many calls wait for the upstream";
    case PETREL_UPSTREAM_ECANCELLED:
        return "the call was cancelled";
    default:
        return "unknown upstream error";
    }
}
