/*
 * petrel-int.h -- declarations shared between libpetrel's files.  Never
 * installed, never exported: non-static internals are named petrel__x and
 * have hidden visibility (the library is built with -fvisibility=hidden).
 */
#ifndef PETREL_INT_H
#define PETREL_INT_H

#include "petrel.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

/* ------------------------------------------------------------------------ */
/* Lists: intrusive, doubly linked, circular with a head node.              */

typedef struct petrel__list {
    struct petrel__list *prev, *next;
} petrel__list_t;

static inline void list_init(petrel__list_t *l) { l->prev = l->next = l; }
static inline bool list_empty(const petrel__list_t *l) { return l->next == l; }
static inline void list_unlink(petrel__list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline void list_append(petrel__list_t *l, petrel__list_t *n)
{
    n->prev = l->prev;
    n->next = l;
    l->prev->next = n;
    l->prev = n;
}

/* ------------------------------------------------------------------------ */
/* Chunk pool and arena (arena.c)                                           */

#define PETREL_CHUNK_SIZE 16384

typedef struct petrel__chunk {
    struct petrel__chunk *next;
    size_t size; /* usable bytes after the header */
} petrel__chunk_t;

/* One per worker (thread-local): free chunks, recycled without malloc. */
typedef struct petrel__pool {
    petrel__chunk_t *free;
    size_t nfree;
    size_t max_free;    /* chunks kept beyond this are given back to the heap */
    size_t live;        /* chunks handed out and not returned */
    uint64_t mallocs;   /* heap calls for chunks */
} petrel__pool_t;

struct petrel_arena {
    petrel__chunk_t *chunk; /* current (newest) chunk; older ones linked by next */
    char *pos, *end;
    void *defer;            /* newest cleanup */
    void *large;            /* newest large block */
    size_t bytes;           /* bytes handed out (incl. large) */
    size_t bytes_high;
    size_t limit;           /* 0 = no limit */
    size_t nchunks;
    uint64_t mallocs;
    petrel__pool_t *pool;
};

extern __thread petrel__pool_t petrel__pool;

void petrel__pool_init(petrel__pool_t *p, size_t max_free);
void petrel__pool_fini(petrel__pool_t *p);
/* A chunk of PETREL_CHUNK_SIZE usable bytes; NULL if the heap is exhausted. */
void *petrel__chunk_get(petrel__pool_t *p);
void petrel__chunk_put(petrel__pool_t *p, void *data);

void petrel__arena_init(petrel_arena_t *a, petrel__pool_t *pool, size_t limit);
/* Runs every cleanup and gives all memory back: the arena is empty again. */
void petrel__arena_clear(petrel_arena_t *a);
/* A buffer of at least *size bytes in the current scope of `a`, for data
 * that grows (a request body, a WebSocket message).  A size the arena would
 * malloc (over a quarter of a chunk) but a pool chunk holds takes a whole
 * chunk instead, given back by a cleanup of the scope: *size then becomes
 * PETREL_CHUNK_SIZE.  NULL when out of memory or over the arena's limit. */
void *petrel__arena_alloc_buf(petrel_arena_t *a, size_t *size);
static inline bool petrel__arena_is_empty(const petrel_arena_t *a)
{
    return a->chunk == NULL && a->large == NULL && a->defer == NULL;
}

/* ------------------------------------------------------------------------ */
/* Time and the event loop (loop.c)                                         */

typedef struct petrel__loop petrel__loop_t;
typedef struct petrel__io petrel__io_t;

/* A file descriptor watched by the loop; embed it and set cb. */
struct petrel__io {
    int fd;
    uint32_t events; /* EPOLLIN/EPOLLOUT currently registered */
    void (*cb)(petrel__io_t *io, uint32_t events);
};

/*
 * Timers with a fixed timeout per queue: every timer of a queue has the same
 * timeout, so appending at the tail keeps the queue sorted by deadline, and
 * arming, disarming and expiring are O(1) (no heap, no scan).
 */
typedef struct petrel__tq {
    petrel__list_t list;
    uint64_t timeout_ms;
} petrel__tq_t;

typedef struct petrel__timer {
    petrel__list_t node;
    uint64_t deadline; /* ms, monotonic */
    petrel__tq_t *q;
    void (*cb)(struct petrel__timer *t);
} petrel__timer_t;

struct petrel__loop {
    int epfd;
    bool stop;
    uint64_t now_ms;      /* monotonic ms, refreshed once per loop turn */
    time_t now_sec;       /* wall clock seconds of `date` */
    char date[32];        /* "Sun, 06 Nov 1994 08:49:37 GMT", once a second */
    char log_time[32];    /* "06/Nov/1994:08:49:37 +0000" for the access log */
    petrel__tq_t *queues[8];
    int nqueues;
    void (*on_tick)(petrel__loop_t *loop); /* once per loop turn, after events */
    petrel__list_t pending;                /* conns with work for the end of the turn */
    petrel__list_t user_timers;            /* petrel_timer_start(), by deadline */
};

int petrel__loop_init(petrel__loop_t *loop);
void petrel__loop_fini(petrel__loop_t *loop);
int petrel__loop_run(petrel__loop_t *loop);
/* One turn: wait at most max_wait_ms (-1: until the next timer), handle the
 * events and timers.  Returns the number of events, or PETREL_EIO. */
int petrel__loop_run_once(petrel__loop_t *loop, int max_wait_ms);
void petrel__loop_update_time(petrel__loop_t *loop);
int petrel__io_add(petrel__loop_t *loop, petrel__io_t *io, uint32_t events);
int petrel__io_mod(petrel__loop_t *loop, petrel__io_t *io, uint32_t events);
void petrel__io_del(petrel__loop_t *loop, petrel__io_t *io);
void petrel__tq_init(petrel__loop_t *loop, petrel__tq_t *q, uint64_t timeout_ms);
void petrel__timer_arm(petrel__loop_t *loop, petrel__timer_t *t, petrel__tq_t *q);
static inline void petrel__timer_disarm(petrel__timer_t *t)
{
    if (t->q) {
        list_unlink(&t->node);
        t->q = NULL;
    }
}

/* The loop of this worker (one per thread). */
extern __thread petrel__loop_t *petrel__loop;

/* ------------------------------------------------------------------------ */
/* Configuration and server (server.c)                                      */

typedef struct petrel__listen {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[64];
    int fd;        /* the worker's listening socket */
    int hold_fd;   /* the master's bound (not listening) socket: holds the port */
} petrel__listen_t;

typedef struct petrel__config {
    size_t max_header_size;  /* whole request head, bytes */
    size_t max_uri_size;
    size_t max_body_size;
    size_t max_connections;  /* per worker */
    uint64_t header_timeout_ms;
    uint64_t keepalive_timeout_ms;
    uint64_t send_timeout_ms;
    uint64_t drain_timeout_ms;
    int workers;
    int log_level;
    const char *access_log;  /* NULL: off */
    const char *root;
    /* HTTP/2 (h2.c); 0 means the default */
    uint32_t h2_max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS (128) */
    uint32_t h2_initial_window_size;    /* SETTINGS_INITIAL_WINDOW_SIZE (1 MiB) */
    size_t h2_max_header_list_size;     /* SETTINGS_MAX_HEADER_LIST_SIZE (max_header_size) */
    /* WebSocket (ws.c); 0 means the default */
    size_t ws_max_message_size;         /* larger messages: close 1009 (16 MiB) */
    uint64_t ws_idle_timeout_ms;        /* silence before a ping, then a close (30 s) */
    size_t ws_send_limit;               /* output queued past this: close 1008 (4 MiB) */
    bool dev;                /* --dev: build .c modules, rebuild and reload on change */
} petrel__config_t;

/* The memory budget of a connection (HTTP/1.1: its arena limit, which
 * queued output counts toward) and of an h2 stream's arena, and the cap of
 * the streamed output an h2 connection may hold: twice --max-body-size plus
 * twice --max-header-size plus 1 MiB. */
static inline size_t petrel__conn_budget(const petrel__config_t *cfg)
{
    return 2 * cfg->max_body_size + 2 * cfg->max_header_size + (1 << 20);
}

typedef struct petrel__router petrel__router_t;

struct petrel_server {
    petrel__config_t cfg;
    petrel__listen_t *listens;
    int nlistens;
    petrel__router_t *router;
    const petrel_module_t **modules;
    int nmodules;
    void **module_handles;
    /* reload (SIGHUP, --dev): the master builds a new generation of routes
     * and modules with setup(), then replaces its workers with new ones */
    int (*setup)(petrel_server_t *srv, void *ctx, char *err, size_t errlen);
    void *setup_ctx;
    unsigned generation; /* 0 at start-up, +1 for each reload attempt */
    /* worker state */
    petrel__loop_t loop;
    petrel__tq_t tq_header, tq_keepalive, tq_send, tq_drain, tq_linger;
    petrel__io_t *listen_ios;
    size_t nconns;
    bool draining;
    bool accept_paused;
    uint64_t next_req_id;
    petrel__list_t conns; /* all connections of this worker */
};

void petrel__config_defaults(petrel__config_t *cfg);
petrel_server_t *petrel__server_new(void);
void petrel__server_free(petrel_server_t *srv);
int petrel__server_add_listen(petrel_server_t *srv, const char *spec, char *err, size_t errlen);
void petrel__set_builtins(const petrel_module_t *const *table);
int petrel__server_load_module(petrel_server_t *srv, const char *spec, char *err, size_t errlen);

/* module.c: reload and --dev.  A module file loaded again on a reload is
 * loaded from a private copy (dlopen would return the copy already loaded
 * under the same name); --dev builds module sources into the same private
 * directory, removed at exit. */
void petrel__module_unload(void *handle); /* dlclose, and remove its private copy */
/* inotify on the module files (--dev): the fd, or -1 */
int petrel__dev_watch_start(void);
/* Read the pending events of the watch fd; true when a module file (or a
 * header beside a module source) changed, with its name in `what`. */
bool petrel__dev_watch_read(int fd, char *what, size_t len);

/* ------------------------------------------------------------------------ */
/* Router (router.c)                                                        */

typedef struct petrel__match {
    petrel_handler_t handler;
    void *data;
    int allowed;          /* methods the path has, when the method does not match */
    petrel_param_t *params;
    size_t nparams;
} petrel__match_t;

petrel__router_t *petrel__router_new(void);
void petrel__router_free(petrel__router_t *r);
int petrel__router_add(petrel__router_t *r, int methods, const char *pattern,
                       petrel_handler_t handler, void *data);
/*
 * Match a normalised path.  Returns 0 with m->handler set, 404 when no route
 * has the path, 405 with m->allowed when the path exists for other methods.
 * Parameters are allocated from `a`.  HEAD falls back to GET.
 */
int petrel__router_match(const petrel__router_t *r, int method, const char *path, size_t len,
                         petrel_arena_t *a, petrel__match_t *m);

/* ------------------------------------------------------------------------ */
/* Requests (request.c)                                                     */

/* Map a method name to a PETREL_* bit; 0 for any other. */
int petrel__method_from_name(const char *s, size_t len);
/* Comma-separated list of methods for an Allow header, into `buf`. */
size_t petrel__methods_format(int methods, char *buf, size_t len);
/*
 * Percent-decode `in` and remove dot-segments into `out` (capacity len + 1,
 * NUL-terminated).  Returns the length, or -1 for a path that is not
 * acceptable (not starting with '/', %00, bad escape, climbing above the root).
 */
ssize_t petrel__path_normalize(const char *in, size_t len, char *out);
/* RFC 9110 §6.4.1, §15.3.5, §15.4.5: 1xx, 204 and 304 carry no content. */
static inline bool petrel__status_has_body(int status)
{
    return !(status < 200 || status == 204 || status == 304);
}
/* `v` in decimal at p (no NUL); returns the end. */
static inline char *petrel__put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}
/* One pass over an origin-form request target [t, end) (HTTP/1.1 and h2):
 * sets r->query when there is a '?', returns the path's length, and tells
 * in *clean whether the path can be used as it is (no '%', "/." or "//" to
 * decode or resolve). */
static inline size_t petrel__target_split(petrel_req_t *r, const char *t, const char *end,
                                          bool *clean)
{
    const char *q = NULL;
    *clean = true;
    for (const char *x = t; x < end; x++) {
        if (*x == '?') {
            q = x;
            break;
        }
        if (*x == '%' || (*x == '/' && x + 1 < end && (x[1] == '.' || x[1] == '/')))
            *clean = false;
    }
    if (q) {
        r->query.ptr = q + 1;
        r->query.len = (size_t)(end - q - 1);
    }
    return (size_t)((q ? q : end) - t);
}
/* Percent-decode (with '+' as space when `plus`); returns the length or -1. */
ssize_t petrel__pct_decode(const char *in, size_t len, char *out, bool plus);
bool petrel__str_ieq(const char *a, size_t alen, const char *b, size_t blen);
/* 1 for the bytes of a token (RFC 9110 §5.6.2 tchar) */
extern const uint8_t petrel__tchar[256];
/* Route and run the handler for a request whose head and body are complete. */
void petrel__req_dispatch(petrel_req_t *req);

/* ------------------------------------------------------------------------ */
/* Responses (response.c) and protocol modules                              */

typedef struct petrel__rheader {
    struct petrel__rheader *next;
    petrel_str_t name, value;
} petrel__rheader_t;

enum { BODY_NONE, BODY_MEM, BODY_FD, BODY_STREAM };

struct petrel_resp {
    int status;
    const char *type;
    petrel__rheader_t *headers, **headers_tail;
    petrel__rheader_t *trailers, **trailers_tail;
    int body_kind;
    const void *body;
    size_t len;
    int fd;
    off_t offset;
    bool close_fd;
    bool sent;      /* headers handed to the protocol module */
    bool ended;     /* the whole response handed over */
};

/* What a protocol module does with a response; the request API calls these. */
struct petrel_proto {
    const char *name;
    /* Headers and, unless BODY_STREAM, the whole body: frame and queue. */
    int (*send)(petrel_req_t *req, petrel_resp_t *resp);
    int (*stream_write)(petrel_req_t *req, const void *data, size_t len);
    int (*stream_end)(petrel_req_t *req, petrel_resp_t *resp);
    const char *(*peer)(petrel_req_t *req);
};

/* The default body for a status: "404 Not Found\n". */
size_t petrel__status_body(int status, char *buf, size_t len);
/* "HTTP/1.1 404 Not Found\r\n" for known statuses, formatted otherwise. */
size_t petrel__status_line(int status, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Connections and HTTP/1.1 (conn.c, http1.c)                                */

typedef struct petrel__conn petrel__conn_t;
typedef struct petrel__outq petrel__outq_t;

#include <llhttp.h>

enum {
    CONN_KEEPALIVE = 1 << 0,   /* the current request allows another one */
    CONN_CLOSING = 1 << 1,     /* close once the output is written */
    CONN_PAUSED = 1 << 2,      /* parsing waits for the output to drain */
    CONN_IN_PROCESS = 1 << 3,  /* inside process(): flush at its end */
    CONN_OUT_REFS = 1 << 4,    /* the output refers to request-scope memory */
    CONN_HEAD_DONE = 1 << 5,   /* headers of the current request complete */
    CONN_EOF = 1 << 6,         /* the peer shut down its side */
    CONN_CLOSED = 1 << 7,      /* fd closed, memory freed at the end of the turn */
    CONN_RBUF_LARGE = 1 << 8,  /* rbuf is a malloc'ed buffer, not a chunk */
    CONN_IN_VALUE = 1 << 9,    /* the parser is inside a header value */
    CONN_CONTINUE = 1 << 10,   /* 100 Continue may be sent for this request */
    CONN_WANT_WRITE = 1 << 11, /* waiting for EPOLLOUT */
    CONN_STARTED = 1 << 12,    /* the protocol of the connection is known */
    CONN_LINGER = 1 << 13,     /* half-closed, reading what the peer still sends */
    CONN_ERROR = 1 << 14,      /* closing after an error response */
    CONN_REGISTERED = 1 << 15  /* the fd is in the epoll set */
};

struct petrel__conn {
    petrel__io_t io;
    petrel__timer_t timer;
    petrel__list_t link;       /* srv->conns, or the free list */
    petrel_server_t *srv;
    unsigned flags;
    /* input: rbuf[0, rlen) holds bytes read, [rpos, rlen) not parsed yet;
     * the head of the current request starts at head_start */
    char *rbuf;
    uint32_t rcap, rlen, rpos, head_start;
    /* output */
    petrel__outq_t *out, *out_tail;
    /* the current request */
    petrel_req_t *req;
    petrel_arena_mark_t req_mark;
    uint32_t hdr_bytes;        /* header section bytes so far */
    uint32_t body_end;         /* rbuf offset after the last body bytes, or UINT32_MAX */
    uint16_t err_status;       /* status for an HPE_USER error */
    uint16_t hdr_cap;          /* capacity of req->headers */
    uint8_t host_count;
    uint8_t te_chunked;
    size_t body_cap;
    uint64_t bytes_out;        /* body bytes of the current response, for the log */
    void *proto;               /* state of another protocol after a takeover (h2, ws) */
    /* Set by a handler that answered 101 (ws.c, h2.c): called once the
     * response is written; the connection then belongs to that protocol,
     * with any bytes after the request still in rbuf[rpos, rlen). */
    void (*on_upgrade)(petrel__conn_t *c);
    /* Set by a protocol whose state lives outside the connection arena
     * (ws.c): called by petrel__conn_close once the fd is closed, before
     * the arena is cleared.  A protocol that hands the connection to
     * petrel__conn_linger() clears it first. */
    void (*on_close)(petrel__conn_t *c);
    petrel_arena_t arena;
    llhttp_t parser;
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
};

/* conn.c */
void petrel__conn_close(petrel__conn_t *c);
bool petrel__conn_out_empty(const petrel__conn_t *c);
void petrel__conn_idle(petrel__conn_t *c);  /* give back the empty read buffer */
/* Close after the response: half-close, then read and drop what the peer
 * still sends for a short while, so that it reads our response instead of a
 * reset (RFC 9112 §9.6). */
void petrel__conn_linger(petrel__conn_t *c);
void petrel__conn_reap(void);               /* free conns closed this turn */
/* Recompute the epoll events of c from its flags (PAUSED, CLOSING, EOF,
 * LINGER, WANT_WRITE): set the flags, then call this. */
void petrel__conn_update_events(petrel__conn_t *c);
int petrel__conn_read(petrel__conn_t *c); /* >0 bytes, 0 EOF/again, <0 close */
/* h2.c: a connection whose first bytes are the HTTP/2 preface (RFC 9113
 * §3.4) is handed over, with its read buffer; returns 0, or <0 to close. */
int petrel__h2_takeover(petrel__conn_t *c);
/* h2.c: a complete HTTP/1.1 request with `Upgrade: h2c`, one HTTP2-Settings
 * and `Connection: Upgrade, HTTP2-Settings` (RFC 7540 §3.2): answer 101, the
 * connection becomes an h2 session and `req` (copied; its HTTP/1.1 scope is
 * ended) is answered as stream 1.  Returns 0; PETREL_ENOTFOUND when it is not
 * such a request (nothing done: HTTP/1.1 answers it); another <0: the
 * connection must be closed. */
int petrel__h2_upgrade(petrel__conn_t *c, petrel_req_t *req);
/* h2.c: graceful shutdown of an h2 connection (GOAWAY, finish open streams,
 * close).  Returns false when `c` is not an h2 connection. */
bool petrel__h2_drain(petrel__conn_t *c);
/* ws.c: graceful shutdown of a WebSocket connection (Close 1001, wait for
 * the peer's Close, close).  Returns false when `c` is not one. */
bool petrel__ws_drain(petrel__conn_t *c);
/* h2.c: counters of this worker's h2 side, for tests and benchmarks. */
typedef struct petrel__h2_stats {
    uint64_t ng_ops;       /* nghttp2 allocator calls (malloc, calloc, realloc, free) */
    uint64_t ng_calls;     /* of these, calls that reached the heap (the size-class
                            * free list in front of it was empty or full) */
    size_t ng_bytes;       /* bytes nghttp2 holds now (blocks, headers included) */
    uint64_t slot_mallocs; /* stream slots malloc'ed (the free list was empty) */
    size_t sessions;       /* live h2 sessions */
    size_t streams;        /* live stream slots (open, zombie or orphan) */
    size_t conn_bytes;     /* petrel's h2 state of one connection (malloc'ed) */
    uint64_t arena_mallocs; /* heap calls of the stream arenas (pool chunks, large blocks) */
} petrel__h2_stats_t;
void petrel__h2_stats(petrel__h2_stats_t *st);

/* Work for the end of the loop turn (loop->pending): h2 gathers the frames of
 * all its streams and writes them once per turn.  worker.c's on_tick runs
 * (and unlinks) every entry. */
typedef struct petrel__pending {
    petrel__list_t node;
    void (*cb)(struct petrel__pending *p);
} petrel__pending_t;

/* http1.c */
void petrel__http1_init_conn(petrel__conn_t *c);
void petrel__http1_on_read(petrel__conn_t *c);
void petrel__http1_on_flushed(petrel__conn_t *c);
void petrel__http1_on_timeout(petrel__conn_t *c);
bool petrel__http1_idle(const petrel__conn_t *c);

/* Output segments of a connection, in pool chunks (conn.c). */
typedef struct petrel__oseg {
    int kind;  /* BODY_MEM or BODY_FD */
    const char *ptr;
    size_t len;
    int fd;
    off_t off;
} petrel__oseg_t;

int petrel__listen_start(petrel_server_t *srv);
void petrel__listen_stop(petrel_server_t *srv);
void petrel__conn_close_idle(petrel_server_t *srv);

/* Bytes into the connection's output: copied into the output buffer. */
int petrel__out_copy(petrel__conn_t *c, const void *data, size_t len);
/* Reserve `len` bytes in the output buffer to format into; NULL on failure. */
char *petrel__out_reserve(petrel__conn_t *c, size_t len);
void petrel__out_commit(petrel__conn_t *c, size_t len);
/* A reference to memory that outlives the request or lives in its arena. */
int petrel__out_ref(petrel__conn_t *c, const void *data, size_t len);
int petrel__out_fd(petrel__conn_t *c, int fd, off_t off, size_t len);
/* Try to write what is queued; returns 0, or -1 when the conn must close. */
int petrel__conn_flush(petrel__conn_t *c);
/* Bytes queued and not yet written (a walk of the queue: ws.c's send limit
 * calls it only when its own upper bound passes the limit). */
size_t petrel__out_bytes(const petrel__conn_t *c);

/* Test hook: serve one connected socket in this process's loop. */
int petrel__conn_adopt(petrel_server_t *srv, int fd);

/* ------------------------------------------------------------------------ */
/* Workers and logging (worker.c, log.c)                                    */

int petrel__worker_init(petrel_server_t *srv);
int petrel__worker_run(petrel_server_t *srv);
void petrel__worker_fini(petrel_server_t *srv);
int petrel__master_run(petrel_server_t *srv);

extern int petrel__log_level;
int petrel__access_log_open(const char *path);
void petrel__access_log_flush(void);
void petrel__access_log(petrel_req_t *req, int status, uint64_t bytes);
extern bool petrel__access_log_on;


/* ------------------------------------------------------------------------ */
/* WebSocket helpers (ws.c), exposed for tests/check_ws.c                   */

/* SHA-1, base64 and the handshake's accept value: wskey.h */
#include "wskey.h"
/* UTF-8 validator (RFC 3629) over pieces: *st starts at 0 and is 0 again at a
 * character boundary; returns how many bytes were valid (n when all). */
size_t petrel__utf8_scan(uint32_t *st, const void *data, size_t n);

#endif /* PETREL_INT_H */
