/*
 * proto.h -- the contract between the protocols (http1.c, h2.c, ws.c) and
 * the framework above them (request.c, response.c, router.c, accesslog.c).
 *
 * A protocol builds a petrel_req_t (in an arena scope of its own), reports
 * its start to petrel__req_started(), hands it to petrel__req_dispatch()
 * and reports its end to petrel__req_finished();
 * the request API answers through req->_proto, the protocol's response
 * operations.  Handlers never learn which protocol carried a request.
 *
 * These are the only calls a protocol makes up into the framework
 * (tests/check_layers.py allows exactly them, each with its reason):
 * petrel__req_dispatch(), petrel__req_abort(), petrel__req_finished() (with
 * petrel__req_log() and petrel__quiet_server inline), petrel__req_streams()
 * (at a request's head, with a streaming router), and two of the
 * public response calls, petrel_send_status() (a protocol refuses a request
 * it has parsed) and petrel_stream_begin() (the 200 of an RFC 8441 tunnel).
 */
#ifndef PETREL_PROTO_H
#define PETREL_PROTO_H

#include "runtime/arena.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "petrel.h"
#include "runtime/settings.h"
#include "runtime/syntax.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------------------ */
/* The response of a request                                                */

typedef struct petrel__rheader {
    struct petrel__rheader *next;
    petrel_str_t name, value;
} petrel__rheader_t;

enum { PETREL__BODY_NONE, PETREL__BODY_MEM, PETREL__BODY_FD, PETREL__BODY_STREAM };

/* A request body read as it arrives (PETREL_BODY_STREAM routes; body.c). */
enum {
    PETREL__RB_NONE, /* not a streamed request (the body is req->body) */
    PETREL__RB_WAIT, /* streamed: petrel_body_read() not called yet */
    PETREL__RB_READ, /* the callback takes the parts */
    PETREL__RB_DONE  /* its last call (a non-zero end) was made */
};
typedef struct petrel__rbody {
    uint8_t state;     /* PETREL__RB_* */
    bool paused;       /* petrel_body_pause() */
    bool whole;        /* the protocol gave the body whole (in `rest`): body.c gives it */
    int end;           /* how the body ended before petrel_body_read(): 1 or a PETREL_E* */
    int64_t length;    /* petrel_body_length() */
    petrel_str_t rest; /* the body given whole (or nothing) */
    petrel_body_cb cb;
    void *data;
    petrel__pending_t pending; /* parts from the loop (the protocol's, or body.c's) */
} petrel__rbody_t;

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
    bool sent;  /* headers handed to the protocol */
    bool ended; /* the whole response handed over */
    /* waiting (petrel.h, "Waiting for work the handler started") */
    bool holds;     /* the handler holds the request beyond its return */
    bool abandoned; /* aborted: nothing more goes to the client */
    bool timed_out; /* petrel answered 504 for a handler that did not */
    petrel_abort_cb on_abort;
    void *abort_data;
    petrel_req_t *req;     /* the request it answers */
    petrel__timer_t timer; /* --handler-timeout: while waiting, then after an abort */
    petrel__list_t held;   /* the worker's abandoned requests the handler still holds */
    /* backpressure of a streamed response: petrel_stream_on_drain() */
    petrel_stream_drain_cb drain_cb;
    void *drain_data;
    size_t drain_mark;
    petrel__pending_t drain_pending; /* the callback runs from the loop */
    /* a request body read as it arrives (PETREL_BODY_STREAM) */
    petrel__rbody_t rbody;
    /* the last upstream call made for it (upstream.c), for the access log */
    const char *upstream; /* its address's label: static while the worker runs */
    uint64_t upstream_ns; /* from the call to its end or failure */
};

/* Reset a response before its request is dispatched. */
static inline void petrel__resp_init(petrel_resp_t *r, petrel_req_t *req)
{
    r->req = req;
    r->status = 0;
    r->type = NULL;
    r->body_kind = PETREL__BODY_NONE;
    r->sent = r->ended = false;
    r->holds = r->abandoned = r->timed_out = false;
    r->upstream = NULL;
    r->upstream_ns = 0;
    r->on_abort = NULL;
    r->headers = r->trailers = NULL;
    r->headers_tail = &r->headers;
    r->trailers_tail = &r->trailers;
    r->timer.q = NULL;
    list_init(&r->timer.node);
    list_init(&r->held);
    r->drain_cb = NULL;
    list_init(&r->drain_pending.node);
    r->rbody.state = PETREL__RB_NONE;
}

/* A part of a streamed body arrived (petrel_body_cb's `end`): to the
 * callback when it reads; the end is kept for it when it has not asked
 * yet; nothing after the end. */
static inline void petrel__body_give(petrel_req_t *req, const void *p, size_t len, int end)
{
    petrel__rbody_t *b = &req->_resp->rbody;
    if (b->state == PETREL__RB_WAIT) {
        if (end && !b->end)
            b->end = end;
        return;
    }
    if (b->state != PETREL__RB_READ)
        return;
    if (end) {
        b->state = PETREL__RB_DONE;
        /* --handler-timeout counts from now: the timer of a handler that
         * waits (response.c's, in its queue) starts again */
        petrel_resp_t *r = req->_resp;
        if (r->timer.q && r->holds && !r->abandoned)
            petrel__timer_arm(petrel__loop, &r->timer, r->timer.q);
    }
    b->cb(req, p, len, end, b->data);
}

/* The body of a streamed request may be read now: the callback reads and
 * is not paused, or nobody will read it (the response is complete, or the
 * request abandoned) and it is dropped. */
static inline bool petrel__body_flows(const petrel_resp_t *r)
{
    return r->ended || r->abandoned ||
           (r->rbody.state != PETREL__RB_WAIT &&
            !(r->rbody.state == PETREL__RB_READ && r->rbody.paused));
}

/* The protocol wrote some of a streamed response's output (`buffered`
 * bytes are left for it: its ops->buffered): a drain callback whose mark
 * is reached runs at the end of the loop turn. */
static inline void petrel__resp_progress(petrel_resp_t *r, size_t buffered)
{
    if (r->drain_cb && buffered <= r->drain_mark)
        petrel__pending_add(petrel__loop, &r->drain_pending);
}

/* The response can send no more (ended, aborted, broken): no drain callback.
 * (A response that was only zeroed, never petrel__resp_init()ed, has none.) */
static inline void petrel__resp_drain_off(petrel_resp_t *r)
{
    r->drain_cb = NULL;
    if (r->drain_pending.node.next)
        list_unlink(&r->drain_pending.node);
}

/* What a protocol does with a response; the request API calls these. */
struct petrel_proto {
    const char *name;
    /* Headers and, unless PETREL__BODY_STREAM, the whole body: frame and queue. */
    int (*send)(petrel_req_t *req, petrel_resp_t *resp);
    int (*stream_write)(petrel_req_t *req, const void *data, size_t len);
    int (*stream_end)(petrel_req_t *req, petrel_resp_t *resp);
    /* The peer's address as text, in the request arena. */
    const char *(*peer)(petrel_req_t *req);
    /* The handler let go of an abandoned request (or its time to do so is
     * up): the protocol frees it once its own work with it is done. */
    void (*release)(petrel_req_t *req);
    /* The handler failed after starting a streamed response: end it so
     * that the client sees it incomplete (never as a complete message). */
    void (*broken)(petrel_req_t *req);
    /* Bytes of a streamed response queued and not written yet (with what
     * the connection must write before them).  The protocol calls
     * petrel__resp_progress() when they shrink. */
    size_t (*buffered)(petrel_req_t *req);
    /* petrel_body_read() was called for a request whose body the protocol
     * streams (rbody.state was PETREL__RB_WAIT when dispatched): give the
     * parts to petrel__body_give(), from the loop.  NULL: the protocol
     * gives bodies whole (body.c then gives it in one part). */
    void (*body_start)(petrel_req_t *req);
    /* rbody.paused changed. */
    void (*body_pause)(petrel_req_t *req);
};

/* The first member of the framework's router (router.c), read by a
 * protocol at a request's head: does any route of it stream bodies? */
typedef struct petrel__router_head {
    bool streams;
} petrel__router_head_t;

/* ------------------------------------------------------------------------ */
/* What the framework does for a protocol                                   */

/* Route (in `routes`: the connection set's, cs->router) and run the handler
 * for a request whose head and body are complete.  When it returns, the response may be complete,
 * streaming, waiting (resp->holds: the handler answers later), or (a handler error) have been
 * completed with 500. */
struct petrel__router;
void petrel__req_dispatch(petrel_req_t *req, const struct petrel__router *routes);
/* At the head of a request with a body: does the route it goes to take
 * its body as it arrives (PETREL_BODY_STREAM)?  Ask only when
 * petrel__router_streams(): a router without such routes costs nothing. */
bool petrel__req_streams(petrel_req_t *req, const struct petrel__router *routes);
static inline bool petrel__router_streams(const struct petrel__router *routes)
{
    return ((const petrel__router_head_t *)(const void *)routes)->streams;
}
/* The client of a dispatched request is gone (the connection closed or
 * was reset, RST_STREAM) before its response was complete: it is
 * abandoned and its abort callback runs.  Returns true when the handler
 * still holds the request: the protocol keeps it (detached from the
 * connection) until ops->release; false when it may free it now. */
bool petrel__req_abort(petrel_req_t *req);
/* The handler returned PETREL_LATER: the request waits, within
 * --handler-timeout. */
void petrel__req_wait(petrel_req_t *req);
/* The handler let go of an abandoned request, or its time to do so is
 * up: ops->release. */
void petrel__req_release(petrel_req_t *req);
/* Per worker: register the handler-timeout queue (0, or PETREL_ELIMIT);
 * at the end, release every abandoned request a handler still holds. */
int petrel__req_worker_init(const petrel__config_t *cfg);
void petrel__req_worker_fini(void);
/* The access log formats (--access-log-format; accesslog.c). */
enum { PETREL__ALOG_COMBINED, PETREL__ALOG_JSON };
extern int petrel__alog_format;
/* The admin listener's server: its requests are neither logged nor
 * counted (set by the server layer; NULL: none). */
extern petrel_server_t *petrel__quiet_server;

/* A request begins (its first bytes were read; `req->arena` held `base`
 * bytes when its scope began): its start time and the base of its memory. */
static inline void petrel__req_started(petrel_req_t *req, size_t base)
{
    if (petrel__req_measure) {
        req->_t0 = petrel__loop->now_ns;
        req->_a0 = base;
    }
}
/* The access log line of a request, with its duration (ns) and arena
 * high-water. */
void petrel__req_log(petrel_req_t *req, uint64_t bytes, uint64_t dur_ns, uint64_t arena_high);
/* The response of `req` is complete (queued whole), with `bytes` of body:
 * every protocol calls this once per request it started.  Its counts and
 * its access log line; the admin listener's requests have neither.  On the
 * path of every request: inline, one clock read. */
__attribute__((always_inline)) static inline void petrel__req_finished(petrel_req_t *req,
                                                                       uint64_t bytes)
{
    unsigned measure = petrel__req_measure;
    if (!measure || req->server == petrel__quiet_server)
        return;
    uint64_t dur = petrel__clock_ns() - req->_t0;
    /* a request's scope only grows (nothing is freed in an arena but by a
     * reset to a mark), so what it holds at the end is its high-water mark
     * -- unless its handler rewound marks of its own */
    uint64_t high = req->arena->bytes - req->_a0;
    if (measure & PETREL__MEASURE_COUNT)
        petrel__metrics_request(req->version, req->method, req->_resp->status, dur, high);
    if (measure & PETREL__MEASURE_LOG)
        petrel__req_log(req, bytes, dur, high);
}

/* The options of a request's limits (request.c: sizes of its parts,
 * pipelining, the handler and body timeouts). */
extern const struct petrel__option_table petrel__request_option_table;

#endif /* PETREL_PROTO_H */
