/*
 * http1.c -- HTTP/1.1 (RFC 9112) on llhttp: the only file that touches it.
 *
 * A connection speaks HTTP/1.1 once the entry stage has switched it here.
 * Its HTTP/1.1 state (h1_t: the llhttp parser, the request being parsed,
 * the flags of the exchange) comes from a per-worker free list when bytes
 * arrive and goes back to it when the connection is idle again, so an idle
 * keep-alive connection holds only the transport's struct.
 *
 * The parser runs over the connection's read buffer and pauses at the end of
 * each message, so handlers run outside llhttp's callbacks.  Strings of the
 * request head (method, target, header names and values) are spans of the
 * read buffer, NUL-terminated in place once the head is complete; the buffer
 * does not move under them (compaction and growth rebase the spans).
 * Responses of a whole batch of pipelined requests are gathered in the
 * output queue and written with one writev at the end of the batch.
 *
 * Every protocol switch (`Upgrade: h2c`, WebSocket) goes through
 * petrel__http1_upgrade(): one place writes the 101 and hands the connection
 * on, with the bytes already read.
 *
 * Why this file is over 1,000 lines: it is all of HTTP/1.1 -- the parser
 * callbacks with the checks llhttp 8.1 leaves to us, the request life cycle,
 * the upgrades and the response framing -- around one private state (h1_t)
 * that embeds llhttp's parser.  Splitting it would put that state, and so
 * llhttp, into a second file.  Sections, in order: states, spans of the
 * read buffer, parser callbacks, request life cycle, the protocol's
 * operations, upgrades, responses.
 */
#include "protocols/http1.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ_IN_HANDLER 1u
#define REQ_TE_TRAILERS 2u
#define MAX_HEADERS 128
#define COPY_BODY_MAX 4096 /* smaller bodies are copied next to the headers */
#define H1_FREE_MAX 1024   /* free states and request slots kept for reuse */

/* Flags of a connection's HTTP/1.1 exchange (h1->flags). */
enum {
    H1_KEEPALIVE = 1 << 0,  /* the request being parsed allows another one */
    H1_CLOSING = 1 << 1,    /* close once the requests in flight are answered */
    H1_IN_PROCESS = 1 << 3, /* inside process(): it flushes at its end */
    H1_HEAD_DONE = 1 << 5,  /* headers of the request being parsed complete */
    H1_IN_VALUE = 1 << 6,   /* the parser is inside a header value */
    H1_CONTINUE = 1 << 7,   /* 100 Continue may be sent for this request */
    H1_ERROR = 1 << 8,      /* closing after an error response */
    H1_LAST = 1 << 9,       /* parse no more requests (Connection: close, an upgrade) */
    H1_IDLE = 1 << 10,      /* kept-alive and idle: the state goes at the idle timer */
    H1_TABS = 1 << 11,      /* the unparsed bytes may hold an HTAB (ows_tabs) */
    /* why the parser paused in a streamed body (PETREL_BODY_STREAM) */
    H1_SHEAD = 1 << 12,    /* its head is complete: dispatch it */
    H1_PART = 1 << 13,     /* a part of it (h1->part): to the callback */
    H1_BODY_END = 1 << 14, /* its end */
    H1_NUDGE = 1 << 15     /* after a part, llhttp has a step to take without input */
};

/* A request and its response: a slot of its own, so that a request may wait
 * for its handler (PETREL_LATER) while the ones after it are read and
 * answered; responses still leave in request order. */
typedef struct h1req {
    struct h1req *next;        /* the connection's in-flight list, or the free list */
    petrel__list_t link;       /* h1->zombies or h1->held */
    struct h1 *h1;             /* NULL once detached from its connection */
    unsigned flags;            /* R_* */
    uint64_t bytes_out;        /* body bytes of the response, for the log */
    petrel__outbuf_t held_out; /* its output while an earlier request is in flight */
    petrel_arena_t arena;      /* the request scope */
    petrel_req_t req;
    petrel_resp_t resp;
    petrel_header_t headers[16];
} h1req_t;

enum {
    R_FIFO = 1 << 0,    /* dispatched, on h1's in-flight list */
    R_DONE = 1 << 1,    /* its response is queued whole (and logged) */
    R_REFS = 1 << 2,    /* its output refers to its memory */
    R_CLOSE = 1 << 3,   /* the connection ends after its response */
    R_ZOMBIE = 1 << 4,  /* answered; its output still refers to its memory */
    R_HELD = 1 << 5,    /* answered or abandoned; its handler still holds it */
    R_UPGRADE = 1 << 6, /* answered with 101: the protocol switches after it */
    R_COPIED = 1 << 7,  /* its head was copied out of the read buffer */
    R_BODY = 1 << 8     /* dispatched at its head: its body is being parsed (h1->req) */
};

#define SLOT(r) container_of(r, h1req_t, req)

typedef struct h1 {
    struct h1 *next_free;
    petrel__conn_t *c;
    unsigned flags;
    petrel_req_t *req;      /* the request being parsed (its slot: SLOT(req)) */
    h1req_t *first, *last;  /* dispatched and not yet answered, in order */
    unsigned inflight;      /* slots on that list */
    petrel__list_t zombies; /* answered, their output not written yet */
    uint32_t head_start;    /* rbuf offset of the head of the request being parsed */
    uint32_t hdr_bytes;     /* header section bytes so far */
    uint32_t body_end;      /* rbuf offset after the last body bytes, or UINT32_MAX */
    uint16_t err_status;    /* status for an HPE_USER error */
    uint16_t hdr_cap;       /* capacity of req->headers */
    uint8_t host_count;
    uint8_t te_chunked;
    size_t body_cap;
    size_t ext_bytes;    /* chunk extension bytes of the body so far */
    uint64_t body_start; /* ms: when the head was complete (the body deadline) */
    /* a body read as it arrives (R_BODY) */
    uint64_t body_got;   /* bytes since body_start (the moving deadline) */
    uint64_t body_total; /* bytes of it so far (--max-body-size) */
    const char *part;    /* the part to give, in the read buffer */
    size_t part_len;
    /* a protocol switch for after the upgrade request's response */
    const petrel__proto_ops_t *up_ops;
    void *up_state;
    llhttp_t parser;
} h1_t;

static const petrel_proto_t h1_proto;
static const llhttp_settings_t settings;
static void process(h1_t *h1);
static void after_output(h1_t *h1);
static void h1_written(petrel__conn_t *c);
static void slot_free(h1req_t *s);

/* ------------------------------------------------------------------------ */
/* States and slots: per-worker free lists (doc/architecture.md,           */
/* "Processes")                                                             */

static h1_t *h1_free;
static size_t h1_nfree;
static h1req_t *slot_free_list;
static size_t slot_nfree;
static petrel__http1_stats_t stats;
/* The timeouts of HTTP/1.1, on c->timer: the head of a request
 * (--header-timeout), the idle stage of the keep-alive timeout and its
 * rest, a body's first deadline (--body-timeout) and the checks of its
 * moving deadline.  Every one expires into h1_timeout(), which reads the
 * state of the exchange.  (The send timeout is the transport's.) */
static petrel__tq_t header_q, idle_q, keepalive_rest_q, body_q, body_check_q;

/* A parser as llhttp_init() leaves it: copied into each new state, which
 * costs a fraction of initialising one (a state is taken per request on a
 * keep-alive connection that goes idle in between). */
static llhttp_t parser_template;
static bool parser_template_ready;

static h1_t *h1_get(petrel__conn_t *c)
{
    if (unlikely(!parser_template_ready)) {
        llhttp_init(&parser_template, HTTP_REQUEST, &settings);
        parser_template_ready = true;
    }
    h1_t *h1 = h1_free;
    if (h1) {
        h1_free = h1->next_free;
        h1_nfree--;
    } else if ((h1 = malloc(sizeof(*h1))) != NULL) {
        stats.state_mallocs++;
    } else {
        return NULL;
    }
    stats.states++;
    h1->c = c;
    h1->flags = H1_TABS; /* its first bytes are not scanned yet */
    h1->req = NULL;
    h1->first = h1->last = NULL;
    h1->inflight = 0;
    list_init(&h1->zombies);
    h1->head_start = 0;
    h1->up_ops = NULL;
    h1->parser = parser_template;
    h1->parser.data = h1;
    c->proto = h1;
    return h1;
}

static void h1_put(h1_t *h1)
{
    stats.states--;
    if (h1_nfree < H1_FREE_MAX) {
        h1->next_free = h1_free;
        h1_free = h1;
        h1_nfree++;
    } else {
        free(h1);
    }
}

/* Nothing of the exchange is left: no request parsed, in flight, held or
 * waiting for its output. */
static bool h1_empty(const h1_t *h1)
{
    return h1->req == NULL && h1->first == NULL && list_empty(&h1->zombies);
}

/* A kept-alive connection that stayed idle PETREL__IDLE_MS gives back its
 * HTTP/1.1 state (its read buffer went back as soon as it was empty): an
 * idle connection is the transport's struct alone, while one that is busy
 * keeps its state from one request to the next. */
static void h1_idle_release(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel__conn_idle(c);
    if (c->rbuf == NULL) {
        c->proto = NULL;
        h1_put(h1);
    }
}

void petrel__http1_stats(petrel__http1_stats_t *st)
{
    *st = stats;
}

size_t petrel__http1_trim(size_t keep)
{
    size_t n = 0;
    for (; h1_nfree > keep; n += sizeof(h1_t), h1_nfree--) {
        h1_t *h1 = h1_free;
        h1_free = h1->next_free;
        free(h1);
    }
    for (; slot_nfree > keep; n += sizeof(h1req_t), slot_nfree--) {
        h1req_t *s = slot_free_list;
        slot_free_list = s->next;
        free(s);
    }
    return n;
}

/* Input is wanted unless the exchange is closing (or takes no new request
 * and none is arriving), waits for output that refers to request memory,
 * or has as many requests in flight as allowed. */
static inline bool want_input(const h1_t *h1)
{
    if (likely(h1->inflight == 0 && !(h1->flags & (H1_CLOSING | H1_LAST)) &&
               list_empty(&h1->zombies)))
        return true;
    if ((h1->flags & H1_CLOSING) || ((h1->flags & H1_LAST) && h1->req == NULL))
        return false;
    if (h1->req && h1->req->_resp->rbody.state != PETREL__RB_NONE &&
        !petrel__body_flows(h1->req->_resp))
        return false; /* a streamed body: not read while nobody takes it */
    return list_empty(&h1->zombies) && h1->inflight < h1->c->cs->cfg->max_pipelined;
}

static void h1_events(h1_t *h1)
{
    petrel__conn_pause(h1->c, !want_input(h1));
}

/* ------------------------------------------------------------------------ */
/* Spans of the read buffer                                                 */

/* Extend a span; false when the new piece does not continue it (llhttp
 * reports an obs-fold as a second piece: RFC 9112 §5.2 lets us refuse). */
static inline bool span_add(petrel_str_t *s, const char *at, size_t len)
{
    if (s->ptr == NULL)
        s->ptr = at;
    else if (s->ptr + s->len != at)
        return false;
    s->len += len;
    return true;
}

static inline void rebase_str(petrel_str_t *s, const char *lo, const char *hi, ptrdiff_t d)
{
    if (s->ptr >= lo && s->ptr <= hi)
        s->ptr += d;
}

/* The read buffer moved from [lo, hi) by d bytes: move the spans with it. */
static void rebase(void *arg, const char *lo, const char *hi, ptrdiff_t d)
{
    petrel_req_t *r = ((h1_t *)arg)->req;
    if (r == NULL)
        return;
    rebase_str(&r->method_name, lo, hi, d);
    rebase_str(&r->target, lo, hi, d);
    rebase_str(&r->path, lo, hi, d);
    rebase_str(&r->query, lo, hi, d);
    rebase_str(&r->authority, lo, hi, d);
    for (size_t i = 0; i < r->nheaders; i++) {
        rebase_str(&r->headers[i].name, lo, hi, d);
        rebase_str(&r->headers[i].value, lo, hi, d);
    }
}

/* Make room at the end of a full read buffer.  Returns 0, a status, or -1
 * when it cannot move: requests in flight (or an answered one whose output
 * refers to its head) keep their heads there until they are done. */
static int rbuf_make_room(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    const petrel__config_t *cfg = c->cs->cfg;
    if (h1->req && (SLOT(h1->req)->flags & R_BODY) && list_empty(&h1->zombies) &&
        (h1->first == NULL || h1->first == SLOT(h1->req))) {
        /* a streamed body: its head was copied out, the parsed bytes are
         * given: only the unparsed ones stay */
        petrel__conn_compact(c);
        h1->head_start = 0;
        h1->body_end = UINT32_MAX;
        return 0;
    }
    if (h1->first || !list_empty(&h1->zombies))
        return -1;
    if (h1->req == NULL) {
        petrel__conn_compact(c);
        h1->head_start = 0;
        return 0;
    }
    uint32_t keep_end = c->rpos;
    h1->body_end = UINT32_MAX;
    if (h1->flags & H1_HEAD_DONE) {
        /* keep through the end of the last span of the head */
        const char *e = h1->req->target.ptr + h1->req->target.len;
        for (size_t i = 0; i < h1->req->nheaders; i++) {
            const char *v = h1->req->headers[i].value.ptr + h1->req->headers[i].value.len;
            if (v > e)
                e = v;
        }
        keep_end = (uint32_t)(e + 1 - c->rbuf);
    }
    uint32_t keep = keep_end - h1->head_start, unparsed = c->rlen - c->rpos;
    if (h1->head_start > 0) {
        char *lo = c->rbuf + h1->head_start;
        memmove(c->rbuf, lo, keep);
        rebase(h1, lo, lo + keep, -(ptrdiff_t)h1->head_start);
        h1->head_start = 0;
    }
    memmove(c->rbuf + keep, c->rbuf + c->rpos, unparsed);
    c->rpos = keep;
    c->rlen = keep + unparsed;
    if (c->rlen < c->rcap)
        return 0;
    /* A head larger than a chunk: move it to a buffer of the largest size
     * the limits allow. */
    size_t big = cfg->max_header_size + cfg->max_uri_size + 1024;
    if ((c->flags & PETREL__CONN_RBUF_LARGE) || big <= c->rcap)
        return h1->req->target.len > cfg->max_uri_size ? 414 : 431;
    if (petrel__conn_rbuf_grow(c, big, rebase, h1) < 0)
        return 503;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Parser callbacks                                                         */

#define H1(p) ((h1_t *)(p)->data)

static int fail(h1_t *h1, int status)
{
    h1->err_status = (uint16_t)status;
    return HPE_USER;
}

static int on_method(llhttp_t *p, const char *at, size_t len)
{
    return span_add(&H1(p)->req->method_name, at, len) ? 0 : fail(H1(p), 400);
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    if (!span_add(&h1->req->target, at, len))
        return fail(h1, 400);
    if (h1->req->target.len > h1->c->cs->cfg->max_uri_size)
        return fail(h1, 414);
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    petrel_req_t *r = h1->req;
    if (h1->flags & H1_HEAD_DONE)
        return 0; /* a trailer field of a chunked body: not merged */
    h1->hdr_bytes += (uint32_t)len;
    if (h1->hdr_bytes > h1->c->cs->cfg->max_header_size)
        return fail(h1, 431);
    if (!(h1->flags & H1_IN_VALUE)) {
        h1->flags |= H1_IN_VALUE;
        if (r->nheaders == h1->hdr_cap) {
            size_t ncap = (size_t)h1->hdr_cap * 2;
            if (ncap > MAX_HEADERS)
                return fail(h1, 431);
            petrel_header_t *nh = petrel_arena_alloc(r->arena, ncap * sizeof(*nh), 0);
            if (nh == NULL)
                return fail(h1, 503);
            memcpy(nh, r->headers, r->nheaders * sizeof(*nh));
            r->headers = nh;
            h1->hdr_cap = (uint16_t)ncap;
        }
        petrel_header_t *h = &r->headers[r->nheaders++];
        h->name.ptr = h->value.ptr = NULL;
        h->name.len = h->value.len = 0;
    }
    return span_add(&r->headers[r->nheaders - 1].name, at, len) ? 0 : fail(h1, 400);
}

/* The first piece of a value that begins on a line of its own: llhttp
 * gives no piece for the empty part before an obs-fold ("Name:\r\n v"),
 * so span_add() cannot see the fold; the bytes between the name and the
 * value can (its colon, spaces, and here a line break).  Refused as every
 * other obs-fold is (RFC 9112 §5.2). */
static bool folded(const petrel_header_t *h, const char *at)
{
    for (const char *q = h->name.ptr + h->name.len; q < at; q++)
        if (*q == '\r' || *q == '\n')
            return true;
    return false;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    if (h1->flags & H1_HEAD_DONE)
        return 0;
    if (!(h1->flags & H1_IN_VALUE))
        return fail(h1, 400); /* ": v": an empty field name (RFC 9110 §5.1) */
    h1->hdr_bytes += (uint32_t)len;
    if (h1->hdr_bytes > h1->c->cs->cfg->max_header_size)
        return fail(h1, 431);
    petrel_req_t *r = h1->req;
    petrel_header_t *h = &r->headers[r->nheaders - 1];
    if (len == 0)
        return 0; /* after an empty value, llhttp gives an empty piece past its line */
    if (h->value.ptr == NULL && folded(h, at))
        return fail(h1, 400);
    return span_add(&h->value, at, len) ? 0 : fail(h1, 400);
}

static inline bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

#define NAME_IS(h, lit) petrel__str_ieq((h)->name.ptr, (h)->name.len, lit, sizeof(lit) - 1)

/* A token of a comma-separated list, trimmed; returns false at the end. */
static bool next_token(const char **s, const char *end, petrel_str_t *tok)
{
    const char *p = *s;
    while (p < end && (is_ows(*p) || *p == ','))
        p++;
    if (p >= end)
        return false;
    const char *b = p;
    while (p < end && *p != ',')
        p++;
    const char *e = p;
    while (e > b && is_ows(e[-1]))
        e--;
    tok->ptr = b;
    tok->len = (size_t)(e - b);
    *s = p;
    return true;
}

static int on_header_value_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    if (h1->flags & H1_HEAD_DONE)
        return 0;
    if (!(h1->flags & H1_IN_VALUE))
        return fail(h1, 400); /* ":" alone: an empty field name (RFC 9110 §5.1) */
    h1->flags &= ~H1_IN_VALUE;
    petrel_req_t *r = h1->req;
    petrel_header_t *h = &r->headers[r->nheaders - 1];
    if (h->value.ptr == NULL) {
        h->value.ptr = "";
    } else {
        while (h->value.len && is_ows(h->value.ptr[h->value.len - 1]))
            h->value.len--;
        while (h->value.len && is_ows(h->value.ptr[0])) {
            h->value.ptr++;
            h->value.len--;
        }
    }
    h1->hdr_bytes += 4; /* ": " and CRLF */
    /* RFC 9110 §5.1, RFC 9112 §5.1: a field name is a token (one
     * character at least), with no whitespace before the colon (llhttp
     * 8.1 lets some through, and an empty name) */
    if (!petrel__all_of(h->name.ptr, h->name.len, PETREL__CC_TCHAR))
        return fail(h1, 400);
    switch (h->name.len) {
    case 4:
        if (NAME_IS(h, "host")) {
            h1->host_count++;
            r->authority = h->value;
            if (!petrel__host_valid(h->value.ptr, h->value.len))
                return fail(h1, 400);
        }
        break;
    case 6:
        if (NAME_IS(h, "expect")) {
            /* RFC 9110 §10.1.1: 100-continue is the only expectation */
            if (!petrel__str_ieq(h->value.ptr, h->value.len, "100-continue", 12))
                return fail(h1, 417);
            h1->flags |= H1_CONTINUE;
        }
        break;
    case 2:
        if (NAME_IS(h, "te")) {
            const char *s = h->value.ptr, *e = s + h->value.len;
            petrel_str_t tok;
            while (next_token(&s, e, &tok))
                if (tok.len >= 8 && petrel__str_ieq(tok.ptr, 8, "trailers", 8))
                    r->_flags |= REQ_TE_TRAILERS;
        }
        break;
    case 17:
        if (NAME_IS(h, "transfer-encoding")) {
            /* RFC 9112 §6.1: chunked must be the final coding and appear once;
             * a coding we do not implement gets 501. */
            const char *s = h->value.ptr, *e = s + h->value.len;
            petrel_str_t tok;
            while (next_token(&s, e, &tok)) {
                if (h1->te_chunked)
                    return fail(h1, 400); /* something after chunked */
                if (petrel__str_ieq(tok.ptr, tok.len, "chunked", 7))
                    h1->te_chunked = 1;
                else
                    return fail(h1, 501);
            }
        }
        break;
    }
    return 0;
}

static void nul_terminate(petrel_str_t *s)
{
    if (s->ptr && s->len)
        ((char *)s->ptr)[s->len] = '\0';
}

/* RFC 9112 §3.2: origin-form, absolute-form, asterisk-form. */
static int parse_target(petrel_req_t *r)
{
    const char *t = r->target.ptr, *end = t + r->target.len;
    if (r->target.len == 0)
        return 400;
    if (t[0] == '*' && r->target.len == 1) {
        if (r->method != PETREL_OPTIONS)
            return 400;
        r->path.ptr = "*";
        r->path.len = 1;
        return 0;
    }
    if (t[0] != '/') {
        /* absolute-form: scheme "://" authority path-abempty [ "?" query ] */
        const char *s = memchr(t, ':', r->target.len);
        if (s == NULL || end - s < 3 || s[1] != '/' || s[2] != '/')
            return 400;
        if (!(petrel__str_ieq(t, (size_t)(s - t), "http", 4) ||
              petrel__str_ieq(t, (size_t)(s - t), "https", 5)))
            return 400;
        const char *a = s + 3, *ae = a;
        while (ae < end && *ae != '/' && *ae != '?')
            ae++;
        if (!petrel__host_valid(a, (size_t)(ae - a)) || memchr(a, '@', (size_t)(ae - a)))
            return 400;
        /* RFC 9112 §3.2.2: the target's authority replaces Host */
        r->authority.ptr = petrel_arena_strndup(r->arena, a, (size_t)(ae - a));
        r->authority.len = (size_t)(ae - a);
        t = ae;
        if (t == end || *t == '?') {
            const char *q = t;
            r->path.ptr = "/";
            r->path.len = 1;
            if (q < end) {
                r->query.ptr = q + 1;
                r->query.len = (size_t)(end - q - 1);
            }
            return 0;
        }
    }
    /* One pass: find the query, and whether the path needs decoding or
     * resolving ('%', "/.", "//"). */
    bool clean;
    size_t plen = petrel__target_split(r, t, end, &clean);
    /* Fast path: the path ends the target, so it is NUL-terminated in place. */
    if (clean && plen == (size_t)(end - t) && t == r->target.ptr) {
        r->path.ptr = t;
        r->path.len = plen;
        return 0;
    }
    char *out = petrel_arena_alloc(r->arena, plen + 1, 1);
    if (out == NULL)
        return 503;
    ssize_t n = petrel__path_normalize(t, plen, out);
    if (n < 0)
        return 400;
    r->path.ptr = out;
    r->path.len = (size_t)n;
    return 0;
}

static const llhttp_settings_t stream_settings;

/* A request with a body, on a server with PETREL_BODY_STREAM routes: does
 * its route take the body as it arrives?  Then the parser gives the body
 * to stream_settings' callbacks (until body_end_settings()). */
static __attribute__((noinline)) bool stream_head_check(h1_t *h1, llhttp_t *p)
{
    petrel_req_t *r = h1->req;
    if (p->upgrade || !petrel__req_streams(r, h1->c->cs->router))
        return false;
    petrel__rbody_t *b = &r->_resp->rbody;
    b->state = PETREL__RB_WAIT;
    b->paused = b->whole = false;
    b->end = 0;
    b->length = (p->flags & F_CHUNKED) ? -1 : (int64_t)p->content_length;
    h1->body_total = h1->body_got = 0;
    h1->flags |= H1_SHEAD;
    p->settings = (void *)&stream_settings;
    return true;
}

static int on_headers_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    petrel_req_t *r = h1->req;
    const petrel__config_t *cfg = h1->c->cs->cfg;
    h1->flags |= H1_HEAD_DONE;
    h1->body_start = petrel__loop->now_ms;
    nul_terminate(&r->method_name);
    nul_terminate(&r->target);
    for (size_t i = 0; i < r->nheaders; i++) {
        nul_terminate(&r->headers[i].name);
        nul_terminate(&r->headers[i].value);
    }
    if (p->http_major != 1)
        return fail(h1, 505);
    r->version = p->http_minor == 0 ? 10 : 11;
    r->method = petrel__method_from_name(r->method_name.ptr, r->method_name.len);
    if (r->method == 0) {
        if (p->method == HTTP_CONNECT)
            return fail(h1, 501); /* a tunnel to a host (RFC 9110 §9.3.6) */
        r->method = PETREL_OTHER; /* the router decides: 501 where no route takes it */
    }
    /* RFC 9112 §3.2: exactly one valid Host in HTTP/1.1 (any number of
     * invalid ones were refused above); never two. */
    if (h1->host_count > 1 || (h1->host_count == 0 && r->version == 11))
        return fail(h1, 400);
    /* RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty. */
    if (h1->te_chunked && r->version == 10)
        return fail(h1, 400);
    int st = parse_target(r);
    if (st)
        return fail(h1, st);
    h1->body_cap = 0;
    if (p->flags & F_CHUNKED) {
        h1->body_cap = 0;
        if (unlikely(petrel__router_streams(h1->c->cs->router)) && stream_head_check(h1, p))
            return HPE_PAUSED; /* process() dispatches it */
    } else if (p->content_length > 0) {
        if (p->content_length > cfg->max_body_size)
            return fail(h1, 413); /* (before the handler of a streamed request too) */
        if (unlikely(petrel__router_streams(h1->c->cs->router)) && stream_head_check(h1, p))
            return HPE_PAUSED;
        char *b = petrel_arena_alloc(r->arena, (size_t)p->content_length + 1, 1);
        if (b == NULL)
            return fail(h1, 503);
        r->body.ptr = b;
        h1->body_cap = (size_t)p->content_length;
    }
    if ((p->flags & F_CHUNKED) || p->content_length > 0) {
        /* the body has --body-timeout, moving with what arrives */
        petrel__timer_arm(petrel__loop, &h1->c->timer, &body_q);
    }
    if ((h1->flags & H1_CONTINUE) && r->version == 11 &&
        ((p->flags & F_CHUNKED) || p->content_length > 0)) {
        /* RFC 9110 §10.1.1; never to an HTTP/1.0 client */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        petrel__out_copy(h1->c, cont, sizeof(cont) - 1);
    }
    if (p->upgrade) {
        /* Bytes after an upgrade request are another protocol's, if the
         * request is switched (petrel__http1_upgrade); else the connection
         * closes after it. */
        h1->flags &= ~H1_KEEPALIVE;
    }
    return 0;
}

/* A part of a streamed body: paused for process() to give it (the
 * callback runs outside llhttp), or dropped when nobody takes it. */
static __attribute__((noinline)) int body_part(h1_t *h1, const char *at, size_t len)
{
    h1->body_total += len;
    h1->body_got += len;
    h1->body_end = (uint32_t)(at + len - h1->c->rbuf);
    if (h1->body_total > h1->c->cs->cfg->max_body_size)
        return fail(h1, 413);
    if (h1->req->_resp->rbody.state != PETREL__RB_READ || len == 0)
        return 0;
    h1->part = at;
    h1->part_len = len;
    h1->flags |= H1_PART;
    return HPE_PAUSED;
}

static int on_stream_body(llhttp_t *p, const char *at, size_t len)
{
    return body_part(H1(p), at, len);
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    petrel_req_t *r = h1->req;
    size_t need = r->body.len + len, max = h1->c->cs->cfg->max_body_size;
    if (need > h1->body_cap) {
        if (need > max)
            return fail(h1, 413);
        size_t ncap = h1->body_cap ? h1->body_cap * 2 : 4096;
        while (ncap < need)
            ncap *= 2;
        if (ncap > max)
            ncap = max;
        char *nb = petrel_arena_alloc(r->arena, ncap + 1, 1);
        if (nb == NULL)
            return fail(h1, 503);
        if (r->body.len)
            memcpy(nb, r->body.ptr, r->body.len);
        r->body.ptr = nb;
        h1->body_cap = ncap;
    }
    memcpy((char *)r->body.ptr + r->body.len, at, len);
    r->body.len += len;
    h1->body_end = (uint32_t)(at + len - h1->c->rbuf);
    return 0;
}

/* RFC 9112 §7.1.1: chunk extensions are bounded like a header section:
 * their bytes over the whole body count toward --max-header-size (llhttp
 * reads them without a limit: CVE-2024-22019 in Node.js, CVE-2023-39326 in
 * Go were this). */
static int on_chunk_ext(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    (void)at;
    h1->ext_bytes += len;
    if (h1->ext_bytes > h1->c->cs->cfg->max_header_size)
        return fail(h1, 400);
    return 0;
}

/* RFC 9112 §7.1: chunk data is followed by CRLF.  llhttp 8.1 does not insist,
 * so a smuggled "5\r\nhelloXX" would pass: check it where the bytes are. */
static int on_chunk_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    petrel__conn_t *c = h1->c;
    uint32_t e = h1->body_end;
    if (p->content_length == 0 && e != UINT32_MAX && e + 2 <= c->rlen &&
        (c->rbuf[e] != '\r' || c->rbuf[e + 1] != '\n'))
        return fail(h1, 400);
    h1->body_end = UINT32_MAX;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    petrel_req_t *r = h1->req;
    if (r->body.ptr)
        ((char *)r->body.ptr)[r->body.len] = '\0';
    else
        r->body.ptr = "";
    if (!llhttp_should_keep_alive(p))
        h1->flags &= ~H1_KEEPALIVE;
    return HPE_PAUSED;
}

/* The end of a streamed body: process() gives it; the parser's callbacks
 * are the usual ones again for the next request. */
static int on_stream_message_complete(llhttp_t *p)
{
    H1(p)->flags |= H1_BODY_END;
    p->settings = (void *)&settings;
    return HPE_PAUSED;
}

/* The parser's callbacks: a body read whole (settings), or given as it
 * arrives (stream_settings, while a streamed body is parsed:
 * stream_head_check()); the rest the same. */
#define H1_SETTINGS(body_cb, complete_cb)                                                          \
    {                                                                                              \
        .on_method = on_method, .on_url = on_url, .on_header_field = on_header_field,              \
        .on_header_value = on_header_value, .on_header_value_complete = on_header_value_complete,  \
        .on_headers_complete = on_headers_complete, .on_body = body_cb,                            \
        .on_message_complete = complete_cb, .on_chunk_complete = on_chunk_complete,                \
        .on_chunk_extension_name = on_chunk_ext, .on_chunk_extension_value = on_chunk_ext,         \
    }
static const llhttp_settings_t settings = H1_SETTINGS(on_body, on_message_complete);
static const llhttp_settings_t stream_settings =
    H1_SETTINGS(on_stream_body, on_stream_message_complete);

/* ------------------------------------------------------------------------ */
/* Request slots                                                            */

static h1req_t *slot_get(h1_t *h1)
{
    h1req_t *s = slot_free_list;
    if (s) {
        slot_free_list = s->next;
        slot_nfree--;
    } else if ((s = malloc(sizeof(*s))) != NULL) {
        stats.slot_mallocs++;
    } else {
        return NULL;
    }
    stats.slots++;
    petrel__conns_t *cs = h1->c->cs;
    s->next = NULL;
    list_init(&s->link);
    s->h1 = h1;
    s->flags = 0;
    s->bytes_out = 0;
    s->held_out.head = s->held_out.tail = NULL;
    s->held_out.bytes = 0;
    petrel__arena_init(&s->arena, &petrel__pool, petrel__conn_budget(cs->cfg));
    petrel_req_t *r = &s->req;
    memset(r, 0, sizeof(*r));
    r->headers = s->headers;
    r->arena = &s->arena;
    r->server = cs->srv;
    r->id = ++cs->next_req_id;
    r->_proto = &h1_proto;
    r->_conn = s;
    r->_resp = &s->resp;
    petrel__resp_init(&s->resp, r);
    return s;
}

static void slot_free(h1req_t *s)
{
    petrel__arena_clear(&s->arena); /* cleanups first: a file is closed there */
    if (unlikely(s->held_out.head != NULL))
        petrel__ob_release(&s->held_out);
    list_unlink(&s->link);
    stats.slots--;
    if (slot_nfree < H1_FREE_MAX) {
        s->next = slot_free_list;
        slot_free_list = s;
        slot_nfree++;
    } else {
        free(s);
    }
}

/* Where the response of `s` goes: the connection's queue when its turn has
 * come (every request before it answered), else held back. */
static petrel__outbuf_t *slot_ob(h1req_t *s)
{
    return s == s->h1->first ? &s->h1->c->out : &s->held_out;
}

static void str_out(petrel_arena_t *a, petrel_str_t *str, const char *lo, const char *hi)
{
    if (str->ptr && str->ptr >= lo && str->ptr < hi) {
        char *p = petrel_arena_strndup(a, str->ptr, str->len);
        str->ptr = p ? p : "";
        str->len = p ? str->len : 0;
    }
}

/* The handler holds `s` beyond the connection's care (petrel.h, "Waiting for work the handler
 * started": it was aborted, or answered 504 by petrel): its head is copied out of the read buffer,
 * which goes on without it, and it is freed by ops->release. */
static void slot_copy_head(h1req_t *s)
{
    petrel__conn_t *c = s->h1->c;
    if (c->rbuf && !(s->flags & R_COPIED)) {
        const char *lo = c->rbuf, *hi = c->rbuf + c->rcap;
        petrel_req_t *r = &s->req;
        str_out(r->arena, &r->method_name, lo, hi);
        str_out(r->arena, &r->target, lo, hi);
        str_out(r->arena, &r->path, lo, hi);
        str_out(r->arena, &r->query, lo, hi);
        str_out(r->arena, &r->authority, lo, hi);
        for (size_t i = 0; i < r->nheaders; i++) {
            str_out(r->arena, &r->headers[i].name, lo, hi);
            str_out(r->arena, &r->headers[i].value, lo, hi);
        }
        for (size_t i = 0; i < r->nparams; i++)
            str_out(r->arena, &r->params[i].value, lo, hi);
        s->flags |= R_COPIED;
    }
}

static void slot_hold(h1req_t *s)
{
    slot_copy_head(s);
    list_unlink(&s->link);
    s->flags = (s->flags & ~(R_FIFO | R_ZOMBIE)) | R_HELD;
    petrel__ob_release(&s->held_out);
    s->h1 = NULL;
}

/* The handler let go of an abandoned request, or its time is up. */
static void h1_release(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    if (s->h1 == NULL)
        slot_free(s);
    /* else it is still on its connection's list: freed at its turn */
}

/* ------------------------------------------------------------------------ */
/* Request life cycle                                                       */

static petrel_req_t *req_begin(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1req_t *s = slot_get(h1);
    if (s == NULL)
        return NULL;
    h1->req = &s->req;
    petrel__req_started(&s->req, 0);
    h1->hdr_cap = 16;
    h1->body_cap = 0;
    h1->body_end = UINT32_MAX;
    h1->hdr_bytes = 0;
    h1->host_count = 0;
    h1->te_chunked = 0;
    h1->err_status = 0;
    h1->ext_bytes = 0;
    h1->head_start = c->rpos;
    h1->flags = (h1->flags & ~(H1_HEAD_DONE | H1_IN_VALUE | H1_CONTINUE | H1_IDLE)) | H1_KEEPALIVE;
    petrel__timer_arm(petrel__loop, &c->timer, &header_q);
    return &s->req;
}

/* The request being parsed joins the in-flight list: its response goes out
 * after the ones before it. */
static h1req_t *fifo_push(h1_t *h1)
{
    h1req_t *s = SLOT(h1->req);
    h1->req = NULL;
    s->flags |= R_FIFO;
    if (!(h1->flags & H1_KEEPALIVE) || h1->c->cs->draining)
        s->flags |= R_CLOSE;
    if (h1->last)
        h1->last->next = s;
    else
        h1->first = s;
    h1->last = s;
    h1->inflight++;
    return s;
}

static void switch_protocol(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    const petrel__proto_ops_t *ops = h1->up_ops;
    void *state = h1->up_state;
    c->proto = NULL;
    h1_put(h1);
    petrel__timer_disarm(&c->timer);
    petrel__conn_switch(c, ops, state);
}

/* The requests from `from` to the end of the in-flight list will not be
 * answered on this connection (it ends before them): abandoned, their
 * abort callbacks run (petrel.h, "Waiting for work the handler started"). */
static void abandon_from(h1_t *h1, h1req_t *from)
{
    h1req_t **pp = &h1->first, *prev = NULL;
    while (*pp && *pp != from) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = NULL;
    h1->last = prev;
    while (from) {
        h1req_t *s = from;
        from = s->next;
        h1->inflight--;
        s->flags &= ~R_FIFO;
        if (!(s->flags & R_DONE)) {
            if (!s->resp.sent)
                s->resp.status = 499; /* the client left first: as nginx logs it */
            petrel__req_finished(&s->req, s->bytes_out);
        }
        if (petrel__req_abort(&s->req))
            slot_hold(s);
        else
            slot_free(s);
    }
}

/* Answered requests at the head of the list leave it, in order; the next
 * one's held output joins the queue.  Returns false when the connection
 * is no longer HTTP/1.1's (an upgrade switched it). */
static __attribute__((noinline)) bool advance_slow(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1req_t *s;
    while ((s = h1->first) != NULL && (s->flags & R_DONE)) {
        h1->first = s->next;
        if (h1->first == NULL)
            h1->last = NULL;
        h1->inflight--;
        s->flags &= ~R_FIFO;
        bool last = s->flags & R_CLOSE;
        if (s->flags & R_REFS) {
            s->flags |= R_ZOMBIE; /* freed once the output is written */
            list_append(&h1->zombies, &s->link);
        } else if (s->flags & R_BODY) {
            /* answered, its body still arriving: freed at its end */
        } else if (s->resp.holds) {
            slot_hold(s);
        } else {
            slot_free(s);
        }
        if (last) {
            /* the connection ends after this response: nothing follows it */
            h1->flags |= H1_CLOSING;
            if (h1->first)
                abandon_from(h1, h1->first);
            break;
        }
        if (h1->first)
            petrel__ob_splice(c, &h1->first->held_out);
    }
    if (h1->up_ops && h1->first == NULL && h1->req == NULL && list_empty(&h1->zombies)) {
        switch_protocol(h1);
        return false;
    }
    return true;
}

static inline bool advance(h1_t *h1)
{
    h1req_t *s = h1->first;
    if (likely(h1->up_ops == NULL)) {
        if (s == NULL)
            return true;
        /* the common case: the one request in flight, answered by copies */
        if (likely(s->next == NULL && (s->flags & (R_DONE | R_REFS | R_CLOSE | R_BODY)) == R_DONE &&
                   !s->resp.holds)) {
            h1->first = h1->last = NULL;
            h1->inflight = 0;
            slot_free(s);
            return true;
        }
    }
    return advance_slow(h1);
}

/* The response of `s` is queued whole.  Returns false when the connection
 * is no longer HTTP/1.1's. */
static bool request_done(h1req_t *s)
{
    s->flags |= R_DONE;
    petrel__req_finished(&s->req, s->bytes_out);
    return advance(s->h1);
}

/* Send an error status for the request being parsed, after the ones in
 * flight, then close. */
static void send_error(h1_t *h1, int status)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    h1->flags &= ~H1_KEEPALIVE;
    h1->flags |= H1_ERROR | H1_LAST;
    petrel__conn_close_why(c, status == 408 ? PETREL__CLOSE_TIMEOUT
                              : status == 413 || status == 414 || status == 431
                                  ? PETREL__CLOSE_LIMIT
                                  : PETREL__CLOSE_ERROR);
    if (r->_resp->sent) {
        h1->flags |= H1_CLOSING;
        return;
    }
    if (r->version == 0)
        r->version = 11;
    if (!(h1->flags & H1_HEAD_DONE)) {
        /* The head is incomplete: its spans are not NUL-terminated.  Take
         * method and target from the raw request line (for the log), and
         * forget the headers. */
        const char *s = c->rbuf + h1->head_start, *end = c->rbuf + c->rlen;
        const char *sp1 = memchr(s, ' ', (size_t)(end - s));
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (eol == NULL)
            eol = end;
        if (sp1 == NULL || sp1 > eol)
            sp1 = eol;
        const char *t = sp1 < eol ? sp1 + 1 : eol;
        const char *sp2 = memchr(t, ' ', (size_t)(eol - t));
        const char *te = sp2 ? sp2 : (eol > t && eol[-1] == '\r' ? eol - 1 : eol);
        size_t ml = (size_t)(sp1 - s) > 32 ? 32 : (size_t)(sp1 - s);
        size_t tl = (size_t)(te - t) > 1024 ? 1024 : (size_t)(te - t);
        r->method_name.ptr = petrel_arena_strndup(r->arena, s, ml);
        r->method_name.len = r->method_name.ptr ? ml : 0;
        r->target.ptr = petrel_arena_strndup(r->arena, t, tl);
        r->target.len = r->target.ptr ? tl : 0;
        r->nheaders = 0;
        r->method = 0; /* a HEAD that failed mid-head still gets a body */
    }
    fifo_push(h1);
    if (petrel_send_status(r, status) < 0)
        h1->flags |= H1_CLOSING;
}

/* "HTTP/" DIGIT "." DIGIT at `v` (RFC 9112 §2.3; 8 bytes there). */
static bool http_version(const char *v)
{
    return memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' &&
           v[7] <= '9';
}

static int status_for_error(h1_t *h1, llhttp_errno_t e)
{
    petrel__conn_t *c = h1->c;
    if (h1->err_status)
        return h1->err_status;
    switch (e) {
    case HPE_INVALID_METHOD: {
        /* A method we do not know on a well-formed request line: 501 (RFC
         * 9110 §9.1); a line that is not "method SP target SP HTTP/d.d"
         * (an invalid connection preface, say) is malformed: 400 (RFC 9112
         * §3).  llhttp stops at the method: the rest is judged here, when
         * the line has arrived (else the method alone decides). */
        const char *s = c->rbuf + h1->head_start, *end = c->rbuf + c->rlen;
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        if (sp == NULL || !petrel__all_of(s, (size_t)(sp - s), PETREL__CC_TCHAR))
            return 400; /* the method is a token (RFC 9110 §9.1) */
        const char *eol = memchr(sp, '\n', (size_t)(end - sp));
        if (eol == NULL)
            return 501;
        const char *le = eol > sp && eol[-1] == '\r' ? eol - 1 : eol;
        const char *t = sp + 1, *sp2 = t;
        while (sp2 < le && (unsigned char)*sp2 > ' ' && *sp2 != 0x7f)
            sp2++;
        const char *v = sp2 + 1;
        if (sp2 == t || sp2 >= le || *sp2 != ' ' || le - v != 8 || !http_version(v))
            return 400;
        return 501;
    }
    case HPE_INVALID_VERSION: {
        /* 505 only for a well-formed "HTTP/d.d" of another major version
         * (RFC 9110 §15.6.6); anything else is a malformed line: 400.
         * "PRI * HTTP/2.0" is the start of the HTTP/2 connection preface
         * (RFC 9113 §3.4), made to fail as an HTTP/1.1 request: one the
         * entry stage did not take (cut short, or wrong after its first
         * line) is an invalid request line, 400 (RFC 9112 §3). */
        const char *s = c->rbuf + h1->head_start, *end = c->rbuf + c->rlen;
        if ((size_t)(end - s) >= 14 && memcmp(s, "PRI * HTTP/2.0", 14) == 0)
            return 400;
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (eol == NULL)
            return 400;
        const char *v = eol - (eol > s && eol[-1] == '\r' ? 1 : 0) - 8;
        if (v > s && v[-1] == ' ' && http_version(v) && v[5] != '1')
            return 505;
        return 400;
    }
    case HPE_INVALID_TRANSFER_ENCODING:
        return 400; /* "chunked" not last or repeated: RFC 9112 §6.3 */
    default:
        return 400;
    }
}

/* A complete request: run it.  Returns false when the connection is no
 * longer HTTP/1.1's (switched, or closed). */
static bool request_ready(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    h1req_t *s = fifo_push(h1);
    if (unlikely(h1->parser.upgrade) && c->cs->upgrade && h1->first == s) {
        /* `Upgrade: h2c` (RFC 7540 §3.2) is HTTP/2's: it answers 101 and
         * the request is answered (and logged) on the new side */
        int rc = c->cs->upgrade(r);
        if (rc != PETREL_ENOTFOUND) {
            if (rc < 0) {
                petrel__conn_close(c, PETREL__CLOSE_CLIENT);
                return false;
            }
            s->flags |= R_DONE;
            return advance(h1);
        }
    }
    petrel__timer_disarm(&c->timer); /* the head timeout is over; writes have their own */
    r->_flags |= REQ_IN_HANDLER;
    petrel__req_dispatch(r, c->cs->router);
    if (c->flags & PETREL__CONN_CLOSED)
        return false;
    r->_flags &= ~REQ_IN_HANDLER;
    if (r->_resp->ended)
        return request_done(s);
    return true; /* waiting, or streaming: the handler answers later */
}

/* ------------------------------------------------------------------------ */
/* A request body read as it arrives (PETREL_BODY_STREAM)                   */
/*                                                                          */
/* Such a request is dispatched at its head: its slot joins the in-flight   */
/* list (its response goes out in turn) and stays h1->req while its body is */
/* parsed (R_BODY), its head copied out of the read buffer so that the      */
/* buffer moves on under the body.  The parser runs over the body only      */
/* while the callback takes it, unpaused (petrel__body_flows()): else the   */
/* connection is not read, and the client's sending blocks.  Once the       */
/* response is complete, the rest of the body is read and dropped, so that  */
/* it is never parsed as a request.                                         */

static void h1_broken(petrel_req_t *req);

/* --body-timeout runs while the body flows (from when it flows again). */
static void body_timer(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    bool on = c->timer.q == &body_q || c->timer.q == &body_check_q;
    if (!petrel__body_flows(h1->req->_resp)) {
        if (on)
            petrel__timer_disarm(&c->timer);
    } else if (!on) {
        h1->body_start = petrel__loop->now_ms;
        h1->body_got = 0;
        petrel__timer_arm(petrel__loop, &c->timer, &body_q);
    }
}

/* Give a part (or the end) to the callback; a response it completed is
 * done.  Returns false when the connection is no longer HTTP/1.1's. */
static bool give(h1req_t *s, const void *p, size_t len, int end)
{
    petrel_req_t *r = &s->req;
    r->_flags |= REQ_IN_HANDLER; /* its answer is finished here */
    petrel__body_give(r, p, len, end);
    r->_flags &= ~REQ_IN_HANDLER;
    if (s->resp.ended && (s->flags & R_FIFO) && !(s->flags & R_DONE))
        return request_done(s);
    return true;
}

/* The head of a streamed request: run its handler now. */
static bool stream_head(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    h1req_t *s = SLOT(r);
    if (!llhttp_should_keep_alive(&h1->parser))
        h1->flags &= ~H1_KEEPALIVE;
    slot_copy_head(s);
    r->body.ptr = "";
    r->body.len = 0;
    s->flags |= R_BODY;
    fifo_push(h1);
    h1->req = r; /* still being parsed */
    petrel__timer_disarm(&c->timer);
    r->_flags |= REQ_IN_HANDLER;
    petrel__req_dispatch(r, c->cs->router);
    if (c->flags & PETREL__CONN_CLOSED)
        return false;
    r->_flags &= ~REQ_IN_HANDLER;
    if (h1->req == r)
        body_timer(h1);
    if (r->_resp->ended && !(s->flags & R_DONE))
        return request_done(s);
    return true;
}

/* The body ended: the slot is the connection's list's (or freed, when its
 * response is done). */
static bool body_done(h1_t *h1)
{
    h1req_t *s = SLOT(h1->req);
    h1->req = NULL;
    petrel__timer_disarm(&h1->c->timer);
    bool ok = give(s, "", 0, 1);
    s->flags &= ~R_BODY;
    if (!ok)
        return false;
    if (!(s->flags & (R_FIFO | R_ZOMBIE | R_HELD))) {
        if (s->resp.holds)
            slot_hold(s);
        else
            slot_free(s);
    }
    return true;
}

static bool body_step(h1_t *h1);

/* Run llhttp's step that takes no input (see body_step).  Returns false
 * when the connection is no longer HTTP/1.1's. */
static bool body_nudge(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1->flags &= ~H1_NUDGE;
    llhttp_errno_t e = llhttp_execute(&h1->parser, c->rbuf + c->rpos, 0);
    if (e == HPE_PAUSED) {
        llhttp_resume(&h1->parser);
        if (h1->flags & (H1_SHEAD | H1_PART | H1_BODY_END))
            return body_step(h1);
    }
    return true;
}

/* Why the parser paused in a streamed body. */
static __attribute__((noinline, cold)) bool body_step(h1_t *h1)
{
    unsigned f = h1->flags;
    h1->flags &= ~(H1_SHEAD | H1_PART | H1_BODY_END | H1_NUDGE);
    if (f & H1_SHEAD)
        return stream_head(h1);
    if (f & H1_PART) {
        if (!give(SLOT(h1->req), h1->part, h1->part_len, 0))
            return false;
        /* llhttp paused in a part's callback resumes at the step after it
         * (the end of a Content-Length body: on_message_complete), which
         * takes no input: it must run even when no byte follows */
        if (h1->c->rpos == h1->c->rlen && h1->req && (SLOT(h1->req)->flags & R_BODY)) {
            if (petrel__body_flows(h1->req->_resp))
                return body_nudge(h1);
            h1->flags |= H1_NUDGE; /* when it flows again (body_resume) */
        }
        return true;
    }
    return body_done(h1);
}

/* A streamed body will not complete (over --max-body-size: 413,
 * --body-timeout: 408, a malformed body: 400): the callback gets `err`,
 * the request is answered `status` if it was not, and the connection
 * closes after it. */
static void body_abort(h1_t *h1, int status, int err)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    h1req_t *s = SLOT(r);
    h1->req = NULL;
    c->rpos = c->rlen;
    h1->flags = (h1->flags & ~(H1_KEEPALIVE | H1_NUDGE)) | H1_LAST | H1_ERROR;
    h1->parser.settings = (void *)&settings;
    petrel__conn_close_why(c, status == 408   ? PETREL__CLOSE_TIMEOUT
                              : status == 413 ? PETREL__CLOSE_LIMIT
                                              : PETREL__CLOSE_ERROR);
    petrel__timer_disarm(&c->timer);
    if (s->flags & R_FIFO)
        s->flags |= R_CLOSE;
    r->_flags |= REQ_IN_HANDLER;
    petrel__body_give(r, "", 0, err);
    r->_flags &= ~REQ_IN_HANDLER;
    s->flags &= ~R_BODY;
    if (s->flags & R_FIFO) {
        if (!s->resp.sent) {
            petrel_send_status(r, status);
        } else if (!s->resp.ended) {
            petrel__resp_drain_off(&s->resp);
            s->resp.ended = true;
            h1_broken(r);
        } else if (!(s->flags & R_DONE)) {
            request_done(s);
        }
        return;
    }
    h1->flags |= H1_CLOSING; /* answered: the connection ends after it */
    if (!(s->flags & (R_ZOMBIE | R_HELD))) {
        if (s->resp.holds)
            slot_hold(s);
        else
            slot_free(s);
    }
}

/* The request being parsed will not complete: the connection ends.  A
 * streamed body's callback gets PETREL_EIO (its answer, if any, is not
 * finished from here: the connection's end takes care of the slot). */
static void req_drop(h1_t *h1)
{
    h1req_t *s = SLOT(h1->req);
    h1->req = NULL;
    h1->flags &= ~H1_NUDGE;
    h1->parser.settings = (void *)&settings;
    if (likely(!(s->flags & R_BODY))) {
        slot_free(s);
        return;
    }
    s->req._flags |= REQ_IN_HANDLER;
    petrel__body_give(&s->req, "", 0, PETREL_EIO);
    s->req._flags &= ~REQ_IN_HANDLER;
    s->flags &= ~R_BODY;
    if (!(s->flags & (R_FIFO | R_ZOMBIE | R_HELD))) {
        if (s->resp.holds)
            slot_hold(s);
        else
            slot_free(s);
    }
}

/* The streamed body being parsed may go on, with bytes to parse. */
static inline bool body_ready(const h1_t *h1)
{
    return h1->req && (SLOT(h1->req)->flags & R_BODY) && h1->c->rpos < h1->c->rlen &&
           !(h1->flags & H1_IN_PROCESS) && petrel__body_flows(h1->req->_resp);
}

/* Output was written: a streamed body answered or taken again flows, with
 * its timeout. */
static __attribute__((noinline, cold)) void body_resume(h1_t *h1)
{
    body_timer(h1);
    if ((h1->flags & (H1_NUDGE | H1_IN_PROCESS)) == H1_NUDGE &&
        petrel__body_flows(h1->req->_resp)) {
        if (!body_nudge(h1))
            return;
        if (h1->c->proto != h1)
            return;
        if (!(h1->flags & H1_IN_PROCESS))
            after_output(h1); /* the answer its end may have queued */
        return;
    }
    if (body_ready(h1))
        process(h1);
}

/* From the loop: the body of a request flows again (petrel_body_read(),
 * petrel_body_pause(req, 0)). */
static void h1_kick(petrel__pending_t *p)
{
    petrel__rbody_t *b = container_of(p, petrel__rbody_t, pending);
    petrel_resp_t *resp = container_of(b, petrel_resp_t, rbody);
    h1req_t *s = SLOT(resp->req);
    h1_t *h1 = s->h1;
    if (h1 == NULL || h1->req != &s->req || !(s->flags & R_BODY))
        return;
    body_timer(h1);
    if (h1->flags & H1_IN_PROCESS)
        h1_events(h1);
    else
        after_output(h1); /* the 100 Continue; then h1_written parses on */
}

static void h1_body_start(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    petrel__rbody_t *b = &req->_resp->rbody;
    if (h1 && h1->req == req && (h1->flags & H1_CONTINUE)) {
        /* RFC 9110 §10.1.1: the client waits for it before the body; it
         * goes out when the handler reads, in the order of the responses */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        h1->flags &= ~H1_CONTINUE;
        if (req->version == 11)
            petrel__ob_copy(h1->c, slot_ob(s), cont, sizeof(cont) - 1);
    }
    b->pending.cb = h1_kick;
    petrel__pending_add(petrel__loop, &b->pending);
}

static void h1_body_pause(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    if (h1 == NULL || h1->req != req)
        return;
    if (req->_resp->rbody.paused) {
        body_timer(h1);
        h1_events(h1);
        return;
    }
    req->_resp->rbody.pending.cb = h1_kick;
    petrel__pending_add(petrel__loop, &req->_resp->rbody.pending);
}

/* RFC 9112 §5.1, RFC 9110 §5.5: optional whitespace around a field value
 * is SP or HTAB, and not part of the value.  llhttp 8.1 takes a trailing
 * HTAB as part of Content-Length and Transfer-Encoding (400) and of
 * Connection ("close\t" is not "close"): each HTAB of the head being
 * parsed that is leading or trailing OWS becomes a SP, which llhttp skips
 * like any OWS.  Returns how many of the `n` bytes at `p` llhttp may have
 * now: up to a HTAB whose role the bytes read so far cannot tell (the end
 * of its line has not arrived). */
static __attribute__((noinline)) size_t ows_tabs(const char *lo, char *p, size_t n, char *tab)
{
    char *end = p + n;
    char *head_end = memmem(p, n, "\r\n\r\n", 4);
    char *limit = head_end ? head_end + 2 : end;
    while (tab && tab < limit) {
        char *b = tab, *e = tab;
        while (b > lo && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        while (e < end && (*e == ' ' || *e == '\t'))
            e++;
        if (e == end && !head_end)
            return b > p ? (size_t)(b - p) : 0; /* known once its line ends */
        /* leading: right after the colon that ends the field name */
        const char *ls = memrchr(lo, '\n', (size_t)(b - lo));
        ls = ls ? ls + 1 : lo;
        const char *colon = memchr(ls, ':', (size_t)(b - ls));
        bool leading = colon && colon == b - 1 && ls != lo;
        bool trailing = *e == '\r' || *e == '\n';
        if (leading || trailing)
            for (char *x = b; x < e; x++)
                *x = ' ';
        tab = e < limit ? memchr(e, '\t', (size_t)(limit - e)) : NULL;
    }
    return n;
}

static void process(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1->flags |= H1_IN_PROCESS;
    while (c->rpos < c->rlen && !(h1->flags & H1_CLOSING)) {
        if (h1->req == NULL) {
            if (!want_input(h1))
                break;
            /* skip the empty lines RFC 9112 §2.2 allows before a request */
            while (c->rpos < c->rlen && (c->rbuf[c->rpos] == '\r' || c->rbuf[c->rpos] == '\n'))
                c->rpos++;
            if (c->rpos == c->rlen)
                break;
            if (req_begin(h1) == NULL) {
                petrel__conn_close(c, PETREL__CLOSE_CLIENT);
                return;
            }
        } else if (unlikely(h1->req->_resp->rbody.state != PETREL__RB_NONE) &&
                   !petrel__body_flows(h1->req->_resp)) {
            break; /* a streamed body nobody takes now */
        }
        char *start = c->rbuf + c->rpos;
        size_t n = c->rlen - c->rpos;
        if ((h1->flags & (H1_HEAD_DONE | H1_TABS)) == H1_TABS) {
            /* scanned again only while an HTAB may be left: once per read
             * when there is none (h1_read), not once per pipelined request */
            char *tab = memchr(start, '\t', n);
            if (unlikely(tab != NULL)) {
                n = ows_tabs(c->rbuf + h1->head_start, start, n, tab);
                if (n == 0)
                    break; /* wait for the rest of the line */
            } else {
                h1->flags &= ~H1_TABS;
            }
        }
        llhttp_errno_t e = llhttp_execute(&h1->parser, start, n);
        if (e == HPE_OK) {
            c->rpos += (uint32_t)n;
            if (c->rpos < c->rlen)
                continue; /* the rest of a line held back for its HTAB */
            break;
        }
        if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
            c->rpos = (uint32_t)(llhttp_get_error_pos(&h1->parser) - c->rbuf);
            if (e == HPE_PAUSED) {
                llhttp_resume(&h1->parser);
            } else {
                /* the bytes after an upgrade request are another
                 * protocol's if it switches (petrel__http1_upgrade), else
                 * the connection closes after it: read no more requests */
                h1->flags &= ~H1_KEEPALIVE;
                h1->flags |= H1_LAST;
            }
            if (unlikely(h1->flags & (H1_SHEAD | H1_PART | H1_BODY_END))) {
                if (!body_step(h1))
                    return; /* h1 is gone */
                continue;
            }
            if (!request_ready(h1))
                return; /* h1 is gone */
            continue;
        }
        int status = status_for_error(h1, e);
        petrel_log(PETREL_LOG_DEBUG, "request %llu: %s (%s) -> %d", (unsigned long long)h1->req->id,
                   llhttp_errno_name(e), llhttp_get_error_reason(&h1->parser), status);
        c->rpos = c->rlen;
        if (unlikely(SLOT(h1->req)->flags & R_BODY))
            body_abort(h1, status, status == 413 ? PETREL_ELIMIT : PETREL_EIO);
        else
            send_error(h1, status);
        if (c->proto != h1)
            return;
        break;
    }
    h1->flags &= ~H1_IN_PROCESS;
    after_output(h1);
}

/* After queuing output: write it, then close, go idle or wait. */
static void after_output(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    if (petrel__conn_flush(c) < 0) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    if (!petrel__conn_out_empty(c))
        return; /* EPOLLOUT calls h1_written */
    h1_written(c);
}

/* Close after the requests in flight: half-close first so the peer reads
 * the whole response (RFC 9112 §9.6); linger when it may still be sending
 * (an error cut its request short, or more requests are buffered). */
static void h1_close_now(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    bool linger = (h1->flags & H1_ERROR) || c->rpos < c->rlen || h1->req;
    if (h1->req)
        req_drop(h1); /* a request after the last: not answered */
    c->proto = NULL;
    h1_put(h1);
    if (linger)
        petrel__conn_linger(c);
    else
        petrel__conn_close(c, PETREL__CLOSE_CLIENT); /* nothing unread: close sends FIN */
}

/* Backpressure: bytes a response waits for, with those ahead of it. */
static size_t slot_buffered(const h1req_t *s)
{
    const h1_t *h1 = s->h1;
    size_t n = h1->c->out.bytes;
    for (const h1req_t *x = h1->first; x && x != s; x = x->next)
        n += x == h1->first ? 0 : petrel__ob_bytes(&x->held_out);
    return s == h1->first ? n : n + petrel__ob_bytes(&s->held_out);
}

static size_t h1_buffered(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    return s->h1 ? slot_buffered(s) : 0;
}

/* Output was written: streamed responses waiting for their queue to drain. */
static void drain_check(h1_t *h1)
{
    for (h1req_t *s = h1->first; s; s = s->next)
        if (unlikely(s->resp.drain_cb != NULL))
            petrel__resp_progress(&s->resp, slot_buffered(s));
}

static void h1_progress(petrel__conn_t *c)
{
    if (c->proto)
        drain_check(c->proto);
}

static void h1_written(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL)
        return;
    drain_check(h1);
    /* the output referring to answered requests' memory is written */
    while (!list_empty(&h1->zombies)) {
        h1req_t *s = container_of(h1->zombies.next, h1req_t, link);
        list_unlink(&s->link);
        s->flags &= ~R_ZOMBIE;
        if (unlikely(s->flags & R_BODY))
            continue; /* its body still arriving: freed at its end */
        if (s->resp.holds)
            slot_hold(s);
        else
            slot_free(s);
    }
    if (!advance(h1))
        return;
    if (h1->first != NULL) {
        /* requests in flight: read on (pipelined ones) unless at the limit */
        h1_events(h1);
        if (h1->req == NULL && c->rpos < c->rlen && want_input(h1) && !(h1->flags & H1_IN_PROCESS))
            process(h1);
        else if (unlikely(h1->req && (SLOT(h1->req)->flags & R_BODY)))
            body_resume(h1);
        return;
    }
    if (h1->flags & H1_CLOSING) {
        h1_close_now(h1);
        return;
    }
    if (h1->req == NULL) {
        if (c->rpos < c->rlen && !(h1->flags & H1_IN_PROCESS)) {
            process(h1); /* pipelined requests that waited for the output */
            return;
        }
        if (c->flags & PETREL__CONN_EOF) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        h1->flags |= H1_IDLE;
        petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
        c->flags &= ~PETREL__CONN_PAUSED;
        petrel__conn_idle(c); /* an empty read buffer goes back at once */
        petrel__conn_update_events(c);
    } else {
        h1_events(h1); /* a request still arriving */
        if (unlikely(SLOT(h1->req)->flags & R_BODY))
            body_resume(h1);
    }
}

static void h1_read(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL && (h1 = h1_get(c)) == NULL) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    if (!want_input(h1)) {
        /* not now: stop polling for input until requests are answered */
        h1_events(h1);
        return;
    }
    for (int turn = 0; turn < PETREL__READS_PER_EVENT; turn++) {
        if (c->rbuf && c->rlen == c->rcap) {
            int st = rbuf_make_room(h1);
            if (st < 0) {
                /* full, and requests in flight read their heads from it:
                 * read on once they are answered */
                petrel__conn_pause(c, true);
                return;
            }
            if (st) {
                c->rpos = c->rlen;
                send_error(h1, st);
                if (c->proto == h1)
                    after_output(h1);
                return;
            }
        }
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        if (n > 0 && memchr(c->rbuf + c->rlen - (uint32_t)n, '\t', (size_t)n))
            h1->flags |= H1_TABS;
        if (n == 0) {
            if (!(c->flags & PETREL__CONN_EOF)) {
                if (h1_empty(h1))
                    petrel__conn_idle(c); /* EAGAIN: do not hold an empty buffer */
                return;
            }
            /* The peer is done sending.  A request cut short is dropped;
             * requests waiting for their handler are abandoned (a client
             * that shuts down its side has gone, for an HTTP server, as
             * nginx sees it); responses begun or queued are still written,
             * then we close. */
            if (h1->req)
                req_drop(h1);
            h1req_t *w = h1->first;
            if (w && w->resp.ended && !(w->flags & R_DONE) && !request_done(w))
                return; /* a streamed request answered by its callback */
            w = h1->first;
            while (w && w->resp.sent)
                w = w->next;
            if (w)
                abandon_from(h1, w);
            h1->flags |= H1_CLOSING;
            if (h1->first == NULL && petrel__conn_out_empty(c)) {
                petrel__conn_close(c, PETREL__CLOSE_CLIENT);
                return;
            }
            h1_events(h1);
            return;
        }
        process(h1);
        /* a read that did not fill the buffer got everything there was */
        if (c->proto != h1 || (c->flags & PETREL__CONN_CLOSED) || !want_input(h1) ||
            c->rbuf == NULL || c->rlen < c->rcap)
            return;
    }
}

/* The entry stage switched the connection here with its first bytes. */
static void h1_start(petrel__conn_t *c)
{
    /* its output counts toward the connection's memory budget */
    c->out_limit = petrel__conn_budget(c->cs->cfg);
    petrel__timer_arm(petrel__loop, &c->timer, &header_q); /* the head of its first request */
    h1_t *h1 = c->proto ? c->proto : h1_get(c);
    if (h1 == NULL) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    h1->flags |= H1_TABS; /* bytes read before: not scanned */
    if (c->rpos < c->rlen) {
        process(h1);
        if (c->proto != h1 || (c->flags & PETREL__CONN_CLOSED) || c->rbuf == NULL ||
            c->rlen < c->rcap)
            return;
    }
    h1_read(c); /* a full buffer: the socket may have more */
}

static void h1_timeout(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 && h1->req && (h1->flags & H1_HEAD_DONE) && petrel__conn_out_empty(c)) {
        /* a body arriving: late only past its moving deadline */
        const petrel__config_t *cfg = c->cs->cfg;
        uint64_t got =
            ((SLOT(h1->req)->flags & R_BODY) ? h1->body_got : h1->req->body.len) + h1->ext_bytes;
        if (!petrel__body_late(cfg, h1->body_start, got, petrel__loop->now_ms)) {
            petrel__timer_arm(petrel__loop, &c->timer, &body_check_q);
            return;
        }
        petrel_log(PETREL_LOG_INFO,
                   "request %llu: %zu body bytes in %llu ms, under --body-min-rate: 408",
                   (unsigned long long)h1->req->id, (size_t)got,
                   (unsigned long long)(petrel__loop->now_ms - h1->body_start));
    }
    if (h1 && (h1->flags & H1_IDLE) && h1_empty(h1)) {
        /* idle for PETREL__IDLE_MS: the state goes; the rest of the
         * keep-alive timeout follows */
        h1_idle_release(h1);
        petrel__timer_arm(petrel__loop, &c->timer, &keepalive_rest_q);
        return;
    }
    if (h1 && h1->req && petrel__conn_out_empty(c)) {
        /* RFC 9110 §15.5.9: 408 for a request that did not arrive in time;
         * written, then closed as after any error response (lingering, so
         * that the client reads it rather than a reset) */
        c->rpos = c->rlen;
        if (SLOT(h1->req)->flags & R_BODY)
            body_abort(h1, 408, PETREL_EIO);
        else
            send_error(h1, 408);
        if (c->proto == h1)
            after_output(h1);
        return;
    }
    petrel__conn_close(c, PETREL__CLOSE_TIMEOUT);
}

static void h1_expire(petrel__timer_t *t)
{
    petrel__conn_expire(t, h1_timeout);
}

int petrel__http1_worker_init(const petrel__config_t *cfg)
{
    uint64_t ka = cfg->keepalive_timeout_ms, idle = ka < PETREL__IDLE_MS ? ka : PETREL__IDLE_MS;
    int rc;
    if ((rc = petrel__tq_init(petrel__loop, &header_q, cfg->header_timeout_ms, h1_expire)) < 0 ||
        (rc = petrel__tq_init(petrel__loop, &idle_q, idle, h1_expire)) < 0 ||
        (rc = petrel__tq_init(petrel__loop, &keepalive_rest_q, ka - idle, h1_expire)) < 0 ||
        (rc = petrel__tq_init(petrel__loop, &body_q, cfg->body_timeout_ms, h1_expire)) < 0 ||
        (rc = petrel__tq_init(petrel__loop, &body_check_q, PETREL__BODY_CHECK_MS, h1_expire)) < 0)
        return rc;
    return 0;
}

static void h1_drain(petrel__conn_t *c, bool close_idle)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL ||
        (h1->req == NULL && h1->first == NULL && petrel__conn_out_empty(c) && c->rpos == c->rlen)) {
        /* idle: close now (SIGTERM), or answer one more request with
         * Connection: close, or close at the keep-alive timeout (a reload:
         * the client may be sending its next request right now) */
        if (close_idle)
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    /* no new requests: the last one in progress says Connection: close */
    h1->flags = (h1->flags & ~H1_KEEPALIVE) | H1_LAST;
    if (h1->req == NULL) {
        if (h1->last && !h1->last->resp.sent)
            h1->last->flags |= R_CLOSE;
        else
            h1->flags |= H1_CLOSING;
    }
}

/* The connection is closing: the requests in flight are abandoned (their
 * abort callbacks run); those their handlers still hold are detached and
 * freed when the handlers let go. */
static void h1_closed(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL)
        return;
    if (h1->req)
        req_drop(h1);
    h1req_t *s;
    if (h1->first)
        abandon_from(h1, h1->first);
    while (!list_empty(&h1->zombies)) {
        s = container_of(h1->zombies.next, h1req_t, link);
        if (s->resp.holds)
            slot_hold(s);
        else
            slot_free(s);
    }
    c->proto = NULL;
    h1_put(h1);
}

const petrel__proto_ops_t petrel__http1_ops = {
    .name = "http/1.1",
    .start = h1_start,
    .on_read = h1_read,
    .on_written = h1_written,
    .on_progress = h1_progress,
    .on_send_timeout = h1_timeout,
    .drain = h1_drain,
    .on_close = h1_closed,
};

/* ------------------------------------------------------------------------ */
/* Upgrades                                                                 */

petrel__conn_t *petrel__http1_conn(const petrel_req_t *req)
{
    if (req->_proto != &h1_proto)
        return NULL;
    h1req_t *s = SLOT(req);
    return s->h1 ? s->h1->c : NULL;
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}
#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

int petrel__http1_upgrade(petrel_req_t *req, const char *protocol, const petrel_header_t *fields,
                          size_t nfields, const petrel__proto_ops_t *ops, void *state)
{
    if (req->_proto != &h1_proto || req->version != 11 || req->_resp->sent)
        return PETREL_ESTATE;
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    if (h1 == NULL || h1->up_ops || !(s->flags & R_FIFO))
        return PETREL_ESTATE;
    size_t pl = strlen(protocol), need = 64 + 48 + 40 + 24 + pl;
    for (size_t i = 0; i < nfields; i++)
        need += fields[i].name.len + fields[i].value.len + 4;
    char *buf = petrel_arena_alloc(req->arena, need, 1);
    if (buf == NULL)
        return PETREL_ENOMEM;
    char *p = buf;
    p += petrel__status_line(101, p, 64);
    p = PUT_LIT(p, "Server: petrel\r\nDate: ");
    p = put(p, petrel__loop->date, 29);
    p = PUT_LIT(p, "\r\nConnection: Upgrade\r\nUpgrade: ");
    p = put(p, protocol, pl);
    p = PUT_LIT(p, "\r\n");
    for (size_t i = 0; i < nfields; i++) {
        p = put(p, fields[i].name.ptr, fields[i].name.len);
        p = PUT_LIT(p, ": ");
        p = put(p, fields[i].value.ptr, fields[i].value.len);
        p = PUT_LIT(p, "\r\n");
    }
    p = PUT_LIT(p, "\r\n");
    if (petrel__ob_copy(h1->c, slot_ob(s), buf, (size_t)(p - buf)) < 0)
        return PETREL_ENOMEM;
    req->_resp->status = 101;
    req->_resp->sent = req->_resp->ended = true;
    s->flags |= R_UPGRADE;
    /* the bytes after it are the next protocol's: no more requests */
    h1->flags = (h1->flags & ~H1_KEEPALIVE) | H1_LAST;
    h1->up_ops = ops;
    h1->up_state = state;
    return 0;
}

static void answered(h1req_t *s, bool complete);

void petrel__http1_upgraded(petrel_req_t *req)
{
    if (req->_proto == &h1_proto && !(req->_flags & REQ_IN_HANDLER) &&
        (SLOT(req)->flags & R_UPGRADE))
        answered(SLOT(req), true);
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */

/* A response that could not be queued whole leaves the byte stream in an
 * unknown state: never reuse the connection after it. */
static int broken(h1_t *h1, int rc)
{
    if (rc < 0) {
        h1->flags &= ~H1_KEEPALIVE;
        h1->flags |= H1_CLOSING | H1_ERROR | H1_LAST;
    }
    return rc;
}

/* Outside the handler's own call: the response is complete (or has more
 * to write now): write it. */
static void answered(h1req_t *s, bool complete)
{
    h1_t *h1 = s->h1;
    if (complete && !request_done(s))
        return; /* switched */
    if (!(h1->flags & H1_IN_PROCESS))
        after_output(h1);
}

static int h1_send(petrel_req_t *req, petrel_resp_t *r)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    petrel__conn_t *c = h1->c;
    petrel__outbuf_t *ob = slot_ob(s);
    petrel__loop_t *loop = petrel__loop;
    bool stream = r->body_kind == PETREL__BODY_STREAM;
    bool body_allowed = petrel__status_has_body(r->status);
    /* draining: the last request in progress says Connection: close */
    if (c->cs->draining && s == h1->last && h1->req == NULL)
        s->flags |= R_CLOSE;
    if (stream && req->version == 10)
        s->flags |= R_CLOSE; /* the body ends when the connection does */
    if (unlikely(s->flags & R_BODY) && (h1->flags & H1_CONTINUE) && h1->req == req)
        s->flags |= R_CLOSE; /* answered before its 100 Continue: the client may
                                never send the body (RFC 9110 §10.1.1) */
    bool keep = !(s->flags & R_CLOSE);

    size_t tlen = r->type ? strlen(r->type) : 0;
    size_t need = 64 + 48 + 16 + tlen + 24 + 40 + 32;
    for (petrel__rheader_t *h = r->headers; h; h = h->next)
        need += h->name.len + h->value.len + 4;
    char *buf = petrel__ob_reserve(c, ob, need);
    char *heap = NULL;
    if (buf == NULL) {
        buf = heap = petrel_arena_alloc(req->arena, need, 1);
        if (buf == NULL)
            return broken(h1, PETREL_ENOMEM);
    }
    char *p = buf;
    p += petrel__status_line(r->status, p, 64);
    p = PUT_LIT(p, "Server: petrel\r\nDate: ");
    p = put(p, loop->date, 29);
    p = PUT_LIT(p, "\r\n");
    if (tlen) {
        p = PUT_LIT(p, "Content-Type: ");
        p = put(p, r->type, tlen);
        p = PUT_LIT(p, "\r\n");
    }
    for (petrel__rheader_t *h = r->headers; h; h = h->next) {
        p = put(p, h->name.ptr, h->name.len);
        p = PUT_LIT(p, ": ");
        p = put(p, h->value.ptr, h->value.len);
        p = PUT_LIT(p, "\r\n");
    }
    if (stream) {
        if (req->version == 11 && body_allowed)
            p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    } else if (body_allowed) {
        p = PUT_LIT(p, "Content-Length: ");
        p = petrel__put_u64(p, r->len);
        p = PUT_LIT(p, "\r\n");
    }
    if (!keep)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (req->version == 10)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    if (heap) {
        if (petrel__ob_copy(c, ob, heap, (size_t)(p - heap)) < 0)
            return broken(h1, PETREL_ENOMEM);
    } else {
        petrel__ob_commit(ob, (size_t)(p - buf));
    }

    bool send_body = body_allowed && req->method != PETREL_HEAD;
    if (!stream && send_body && r->len) {
        int rc;
        if (r->body_kind == PETREL__BODY_FD) {
            rc = petrel__ob_fd(c, ob, r->fd, r->offset, r->len);
            s->flags |= R_REFS;
        } else if (r->len <= COPY_BODY_MAX) {
            rc = petrel__ob_copy(c, ob, r->body, r->len);
        } else {
            rc = petrel__ob_ref(c, ob, r->body, r->len);
            s->flags |= R_REFS;
        }
        if (rc < 0)
            return broken(h1, rc);
        s->bytes_out = r->len;
    }
    if (!(req->_flags & REQ_IN_HANDLER))
        answered(s, !stream); /* a waiting request answered from a callback */
    return 0;
}

static int h1_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    petrel__conn_t *c = h1->c;
    petrel__outbuf_t *ob = slot_ob(s);
    if (req->method == PETREL_HEAD || !petrel__status_has_body(req->_resp->status) || len == 0)
        return 0;
    int rc;
    if (req->version == 11) {
        char hdr[24];
        int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
        if ((rc = petrel__ob_copy(c, ob, hdr, (size_t)n)) < 0 ||
            (rc = petrel__ob_copy(c, ob, data, len)) < 0 ||
            (rc = petrel__ob_copy(c, ob, "\r\n", 2)) < 0)
            return broken(h1, rc);
    } else if ((rc = petrel__ob_copy(c, ob, data, len)) < 0) {
        return broken(h1, rc);
    }
    s->bytes_out += len;
    if (!(req->_flags & REQ_IN_HANDLER) && s == h1->first)
        answered(s, false);
    return 0;
}

static int h1_stream_end(petrel_req_t *req, petrel_resp_t *r)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    petrel__conn_t *c = h1->c;
    petrel__outbuf_t *ob = slot_ob(s);
    int rc = 0;
    if (req->version == 11 && req->method != PETREL_HEAD && petrel__status_has_body(r->status)) {
        rc = petrel__ob_copy(c, ob, "0\r\n", 3);
        if (rc == 0 && (req->_flags & REQ_TE_TRAILERS)) {
            /* RFC 9112 §7.1.2: trailers only to a client that said TE: trailers */
            for (petrel__rheader_t *h = r->trailers; h && rc == 0; h = h->next) {
                rc = petrel__ob_copy(c, ob, h->name.ptr, h->name.len);
                if (rc == 0)
                    rc = petrel__ob_copy(c, ob, ": ", 2);
                if (rc == 0)
                    rc = petrel__ob_copy(c, ob, h->value.ptr, h->value.len);
                if (rc == 0)
                    rc = petrel__ob_copy(c, ob, "\r\n", 2);
            }
        }
        if (rc == 0)
            rc = petrel__ob_copy(c, ob, "\r\n", 2);
    }
    if (rc < 0)
        broken(h1, rc);
    if (req->_flags & REQ_IN_HANDLER)
        return rc; /* request_ready() finishes it */
    answered(s, true);
    return rc;
}

/* The handler failed after starting its response: no terminating chunk,
 * and the connection ends after what was sent, so that the client sees the
 * response is incomplete (RFC 9112 §8). */
static void h1_broken(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    h1_t *h1 = s->h1;
    s->flags |= R_CLOSE;
    h1->flags |= H1_ERROR | H1_LAST;
    if (!(req->_flags & REQ_IN_HANDLER))
        answered(s, true);
}

static const char *h1_peer(petrel_req_t *req)
{
    h1req_t *s = SLOT(req);
    char buf[64];
    const char *p = s->h1 ? petrel__conn_peer_text(s->h1->c, buf, sizeof(buf)) : "-";
    return petrel_arena_strndup(req->arena, p, strlen(p));
}

static const petrel_proto_t h1_proto = {
    "http/1.1", h1_send,   h1_stream_write, h1_stream_end, h1_peer,
    h1_release, h1_broken, h1_buffered,     h1_body_start, h1_body_pause,
};
