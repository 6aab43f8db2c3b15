/*
 * proto.h -- the contract between the protocols (http1.c, h2.c, ws.c) and
 * the framework above them (request.c, response.c, router.c, accesslog.c).
 *
 * A protocol builds a petrel_req_t (in an arena scope of its own), reports
 * its start to petrel__req_started(), hands it to petrel__req_dispatch()
 * and reports its end to petrel__req_finished();
 * the request API answers through req->_proto, the protocol's response
 * operations.  Handlers never learn which protocol carried a request.
 */
#ifndef PETREL_PROTO_H
#define PETREL_PROTO_H

#include "runtime/arena.h"
#include "runtime/log.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "petrel.h"
#include "runtime/settings.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------------------ */
/* The response of a request                                                */

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
};

/* Reset a response before its request is dispatched. */
static inline void petrel__resp_init(petrel_resp_t *r, petrel_req_t *req)
{
    r->req = req;
    r->status = 0;
    r->type = NULL;
    r->body_kind = BODY_NONE;
    r->sent = r->ended = false;
    r->holds = r->abandoned = r->timed_out = false;
    r->on_abort = NULL;
    r->headers = r->trailers = NULL;
    r->headers_tail = &r->headers;
    r->trailers_tail = &r->trailers;
    r->timer.q = NULL;
    list_init(&r->timer.node);
    list_init(&r->held);
    r->drain_cb = NULL;
    list_init(&r->drain_pending.node);
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
    /* Headers and, unless BODY_STREAM, the whole body: frame and queue. */
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
};

/* ------------------------------------------------------------------------ */
/* What the framework does for a protocol                                   */

/* Route and run the handler for a request whose head and body are
 * complete.  When it returns, the response may be complete, streaming,
 * waiting (resp->holds: the handler answers later), or (a handler error)
 * have been completed with 500. */
void petrel__req_dispatch(petrel_req_t *req);
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

/* ------------------------------------------------------------------------ */
/* HTTP helpers shared by the protocols and the framework (request.c,       */
/* response.c)                                                              */

/* Map a method name to a PETREL_* bit; 0 for any other. */
int petrel__method_from_name(const char *s, size_t len);
/* Comma-separated list of methods for an Allow header, into `buf`. */
size_t petrel__methods_format(int methods, char *buf, size_t len);
/*
 * Percent-decode `in` and remove dot-segments into `out` (capacity len + 1,
 * NUL-terminated).  Returns the length, or PETREL_EINVAL for a path that is
 * not acceptable (not starting with '/', %00, bad escape, climbing above
 * the root).
 */
ssize_t petrel__path_normalize(const char *in, size_t len, char *out);
/* Percent-decode (with '+' as space when `plus`); returns the length or
 * PETREL_EINVAL. */
ssize_t petrel__pct_decode(const char *in, size_t len, char *out, bool plus);
bool petrel__str_ieq(const char *a, size_t alen, const char *b, size_t blen);
/* Is `tok` (any case) one of the comma-separated tokens of [s, s + n)? */
bool petrel__list_has_token(const char *s, size_t n, const char *tok, size_t tlen);
/* The classes of a byte (petrel__cclass): */
enum {
    PETREL__CC_TCHAR = 1 << 0,  /* a token's (RFC 9110 §5.6.2 tchar) */
    PETREL__CC_LNAME = 1 << 1,  /* an HTTP/2 field name's: tchar but uppercase (RFC 9113 §8.2.1) */
    PETREL__CC_VALUE = 1 << 2,  /* a field value's: VCHAR, SP, HTAB, obs-text (RFC 9110 §5.5) */
    PETREL__CC_TARGET = 1 << 3, /* a request target's: VCHAR (RFC 9112 §3.2) */
    PETREL__CC_HOST = 1 << 4,   /* a reg-name's or IPv4 address's (RFC 3986 §3.2.2) */
    PETREL__CC_SCHEME = 1 << 5, /* a URI scheme's, after its first letter (RFC 3986 §3.1) */
};
extern const uint8_t petrel__cclass[256];
/* Is [s, s + n) a valid Host or :authority: uri-host [ ":" port ] (RFC 9110 §7.2)? */
bool petrel__host_valid(const char *s, size_t n);
/* Are all n bytes at s of class `cls` (and n > 0)? */
static inline bool petrel__all_of(const char *s, size_t n, uint8_t cls)
{
    uint8_t acc = cls;
    for (size_t i = 0; i < n; i++)
        acc &= petrel__cclass[(unsigned char)s[i]];
    return n > 0 && acc;
}

/* RFC 9110 §6.4.1, §15.3.5, §15.4.5: 1xx, 204 and 304 carry no content. */
static inline bool petrel__status_has_body(int status)
{
    return !(status < 200 || status == 204 || status == 304);
}
/* The default body for a status: "404 Not Found\n". */
size_t petrel__status_body(int status, char *buf, size_t len);
/* "HTTP/1.1 404 Not Found\r\n" for known statuses, formatted otherwise. */
size_t petrel__status_line(int status, char *buf, size_t len);

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

#endif /* PETREL_PROTO_H */
