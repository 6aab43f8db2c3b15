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
#include "http1.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ_IN_HANDLER 1u
#define REQ_TE_TRAILERS 2u
#define MAX_HEADERS 128
#define COPY_BODY_MAX 4096 /* smaller bodies are copied next to the headers */
#define H1_FREE_MAX 1024   /* free states kept for reuse */

/* Flags of the exchange in progress (h1->flags). */
enum {
    H1_KEEPALIVE = 1 << 0,  /* the current request allows another one */
    H1_CLOSING = 1 << 1,    /* close once the output is written */
    H1_WAIT = 1 << 2,       /* parsing waits for the output or a streamed response */
    H1_IN_PROCESS = 1 << 3, /* inside process(): it flushes at its end */
    H1_OUT_REFS = 1 << 4,   /* the output refers to request-scope memory */
    H1_HEAD_DONE = 1 << 5,  /* headers of the current request complete */
    H1_IN_VALUE = 1 << 6,   /* the parser is inside a header value */
    H1_CONTINUE = 1 << 7,   /* 100 Continue may be sent for this request */
    H1_ERROR = 1 << 8,      /* closing after an error response */
    H1_ORPHAN = 1 << 9      /* the connection closed under a streamed response */
};

typedef struct h1 {
    struct h1 *next_free;
    petrel__conn_t *c;
    unsigned flags;
    petrel_req_t *req; /* the request being parsed or answered */
    petrel_arena_mark_t req_mark;
    uint32_t head_start; /* rbuf offset of the current request's head */
    uint32_t hdr_bytes;  /* header section bytes so far */
    uint32_t body_end;   /* rbuf offset after the last body bytes, or UINT32_MAX */
    uint16_t err_status; /* status for an HPE_USER error */
    uint16_t hdr_cap;    /* capacity of req->headers */
    uint8_t host_count;
    uint8_t te_chunked;
    size_t body_cap;
    uint64_t bytes_out; /* body bytes of the current response, for the log */
    /* a protocol switch waiting for the request's handling to return */
    const petrel__proto_ops_t *up_ops;
    void *up_state;
    llhttp_t parser;
} h1_t;

static const petrel_proto_t h1_proto;
static const llhttp_settings_t settings;
static void process(h1_t *h1);
static void after_output(h1_t *h1);
static void h1_written(petrel__conn_t *c);

/* ------------------------------------------------------------------------ */
/* States: a per-worker free list (doc/architecture.md, "Processes")       */

static h1_t *h1_free;
static size_t h1_nfree;
static petrel__http1_stats_t stats;
static petrel__http1_upgrade_hook_t upgrade_hook;

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
    h1->flags = 0;
    h1->req = NULL;
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

/* The connection is idle (no request, nothing buffered either way): it
 * gives back its read buffer and its HTTP/1.1 state. */
static void h1_idle(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel__conn_idle(c);
    if (c->rbuf == NULL) {
        c->proto = NULL;
        h1_put(h1);
    }
}

void petrel__http1_stats(petrel__http1_stats_t *st) { *st = stats; }

void petrel__http1_set_upgrade_hook(petrel__http1_upgrade_hook_t hook) { upgrade_hook = hook; }

/* Input is wanted unless the exchange waits or is closing. */
static void h1_events(h1_t *h1)
{
    petrel__conn_pause(h1->c, (h1->flags & (H1_WAIT | H1_CLOSING)) != 0);
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

/* Make room at the end of a full read buffer.  Returns 0, or a status. */
static int rbuf_make_room(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    const petrel__config_t *cfg = c->cs->cfg;
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
    if ((c->flags & CONN_RBUF_LARGE) || big <= c->rcap)
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

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    h1_t *h1 = H1(p);
    if (h1->flags & H1_HEAD_DONE)
        return 0;
    h1->hdr_bytes += (uint32_t)len;
    if (h1->hdr_bytes > h1->c->cs->cfg->max_header_size)
        return fail(h1, 431);
    petrel_req_t *r = h1->req;
    return span_add(&r->headers[r->nheaders - 1].value, at, len) ? 0 : fail(h1, 400);
}

static inline bool is_ows(char ch) { return ch == ' ' || ch == '\t'; }

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

/* Bytes allowed in a reg-name or IPv4 host (RFC 3986 §3.2.2): unreserved,
 * sub-delims and '%' of pct-encoded. */
static const uint8_t host_char[256] = {
    ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1,
    ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
    ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, ['%'] = 1,
};

/* RFC 9110 §7.2: Host = uri-host [ ":" port ]; reg-name, IPv4 or IP-literal. */
static bool host_valid(const char *s, size_t n)
{
    if (n == 0)
        return false;
    size_t i = 0;
    if (s[0] == '[') {
        for (i = 1; i < n && s[i] != ']'; i++) {
            char ch = s[i];
            if (!(ch == ':' || ch == '.' || (ch >= '0' && ch <= '9') ||
                  ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') || ch == 'v' || ch == 'V'))
                return false;
        }
        if (i == n || i == 1)
            return false;
        i++;
    } else {
        while (i < n && host_char[(unsigned char)s[i]])
            i++;
    }
    if (i < n) {
        if (s[i] != ':')
            return false;
        for (i++; i < n; i++)
            if (s[i] < '0' || s[i] > '9')
                return false;
    }
    return true;
}

static int on_header_value_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    if (h1->flags & H1_HEAD_DONE)
        return 0;
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
    /* RFC 9110 §5.1, RFC 9112 §5.1: a field name is a token, with no
     * whitespace before the colon (llhttp 8.1 lets some through) */
    for (size_t i = 0; i < h->name.len; i++)
        if (!petrel__tchar[(unsigned char)h->name.ptr[i]])
            return fail(h1, 400);
    switch (h->name.len) {
    case 4:
        if (NAME_IS(h, "host")) {
            h1->host_count++;
            r->authority = h->value;
            if (!host_valid(h->value.ptr, h->value.len))
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
        if (!host_valid(a, (size_t)(ae - a)) || memchr(a, '@', (size_t)(ae - a)))
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

static int on_headers_complete(llhttp_t *p)
{
    h1_t *h1 = H1(p);
    petrel_req_t *r = h1->req;
    const petrel__config_t *cfg = h1->c->cs->cfg;
    h1->flags |= H1_HEAD_DONE;
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
    if (r->method == 0)
        return fail(h1, 501); /* RFC 9110 §9.1 */
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
    } else if (p->content_length > 0) {
        if (p->content_length > cfg->max_body_size)
            return fail(h1, 413);
        char *b = petrel_arena_alloc(r->arena, (size_t)p->content_length + 1, 1);
        if (b == NULL)
            return fail(h1, 503);
        r->body.ptr = b;
        h1->body_cap = (size_t)p->content_length;
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

static const llhttp_settings_t settings = {
    .on_method = on_method,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
    .on_chunk_complete = on_chunk_complete,
};

/* ------------------------------------------------------------------------ */
/* Request life cycle                                                       */

static petrel_req_t *req_begin(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1->req_mark = petrel_arena_mark(&c->arena);
    struct {
        petrel_req_t req;
        petrel_resp_t resp;
        petrel_header_t headers[16];
    } *m = petrel_arena_alloc(&c->arena, sizeof(*m), 16);
    if (m == NULL)
        return NULL;
    petrel_req_t *r = &m->req;
    memset(r, 0, sizeof(*r));
    r->headers = m->headers;
    r->arena = &c->arena;
    r->server = c->cs->srv;
    r->id = ++c->cs->next_req_id;
    r->_proto = &h1_proto;
    r->_conn = h1;
    r->_resp = &m->resp;
    petrel__resp_init(&m->resp);
    petrel__req_started(r, h1->req_mark._bytes);
    h1->req = r;
    h1->hdr_cap = 16;
    h1->body_cap = 0;
    h1->body_end = UINT32_MAX;
    h1->hdr_bytes = 0;
    h1->host_count = 0;
    h1->te_chunked = 0;
    h1->err_status = 0;
    h1->bytes_out = 0;
    h1->head_start = c->rpos;
    h1->flags = (h1->flags & ~(H1_HEAD_DONE | H1_IN_VALUE | H1_CONTINUE | H1_OUT_REFS)) |
                H1_KEEPALIVE;
    petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_header);
    return r;
}

/* The response has been written (or dropped): end the request scope. */
static void req_end(h1_t *h1)
{
    h1->req = NULL;
    h1->flags &= ~(H1_OUT_REFS | H1_WAIT);
    petrel_arena_reset(&h1->c->arena, h1->req_mark);
}

/* A streamed response whose connection closed under it has ended: the
 * state and the connection struct it kept go. */
static void orphan_end(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel__req_finished(h1->req, h1->bytes_out);
    req_end(h1);
    h1_put(h1);
    petrel__conn_release(c);
}

/* The whole response is queued. */
static void request_done(h1_t *h1)
{
    petrel_req_t *r = h1->req;
    petrel__req_finished(r, h1->bytes_out);
    if (!(h1->flags & H1_KEEPALIVE) || h1->c->cs->draining)
        h1->flags |= H1_CLOSING;
    if (h1->flags & H1_OUT_REFS)
        h1->flags |= H1_WAIT; /* the output still reads request memory */
    else
        req_end(h1);
}

/* Send an error status for a request that failed to parse, then close. */
static void send_error(h1_t *h1, int status)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    h1->flags &= ~H1_KEEPALIVE;
    h1->flags |= H1_ERROR;
    petrel__conn_close_why(c, status == 413 || status == 414 || status == 431 ? PETREL__CLOSE_LIMIT
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
        r->method_name.ptr = petrel_arena_strndup(&c->arena, s, ml);
        r->method_name.len = r->method_name.ptr ? ml : 0;
        r->target.ptr = petrel_arena_strndup(&c->arena, t, tl);
        r->target.len = r->target.ptr ? tl : 0;
        r->nheaders = 0;
        r->method = 0; /* a HEAD that failed mid-head still gets a body */
    }
    if (petrel_send_status(r, status) < 0)
        h1->flags |= H1_CLOSING;
    request_done(h1);
}

static int status_for_error(h1_t *h1, llhttp_errno_t e)
{
    petrel__conn_t *c = h1->c;
    if (h1->err_status)
        return h1->err_status;
    switch (e) {
    case HPE_INVALID_METHOD: {
        /* A well-formed token we do not know: 501 (RFC 9110 §9.1). */
        const char *s = c->rbuf + h1->head_start, *end = c->rbuf + c->rlen;
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        if (sp == NULL || sp == s)
            return 400;
        for (const char *p = s; p < sp; p++)
            if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= '0' && *p <= '9') || strchr("!#$%&'*+-.^_`|~", *p)))
                return 400;
        return 501;
    }
    case HPE_INVALID_VERSION: {
        /* 505 only for a well-formed "HTTP/d.d" of another major version
         * (RFC 9110 §15.6.6); anything else is a malformed line: 400 */
        const char *s = c->rbuf + h1->head_start, *end = c->rbuf + c->rlen;
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (eol == NULL)
            return 400;
        const char *v = eol - (eol > s && eol[-1] == '\r' ? 1 : 0) - 8;
        if (v > s && v[-1] == ' ' && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' &&
            v[5] <= '9' && v[5] != '1' && v[6] == '.' && v[7] >= '0' && v[7] <= '9')
            return 505;
        return 400;
    }
    case HPE_INVALID_TRANSFER_ENCODING:
        return 400; /* "chunked" not last or repeated: RFC 9112 §6.3 */
    default:
        return 400;
    }
}

/* The request switched protocols (petrel__http1_upgrade): its scope ends
 * and the connection, with the bytes after the request, goes on. */
static void switch_protocol(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    const petrel__proto_ops_t *ops = h1->up_ops;
    void *state = h1->up_state;
    req_end(h1);
    h1_put(h1);
    petrel__timer_disarm(&c->timer);
    petrel__conn_switch(c, ops, state);
}

/* A complete request: run it.  Returns false when the connection is no
 * longer HTTP/1.1's (switched, or closed). */
static bool request_ready(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    petrel_req_t *r = h1->req;
    if (unlikely(h1->parser.upgrade) && upgrade_hook) {
        /* `Upgrade: h2c` (RFC 7540 §3.2) is the hook's, and switches */
        int rc = upgrade_hook(r);
        if (rc != PETREL_ENOTFOUND) {
            if (rc < 0) {
                petrel__conn_close(c);
                return false;
            }
            switch_protocol(h1); /* the request is answered (and logged) on the new side */
            return false;
        }
    }
    if (c->cs->draining)
        h1->flags &= ~H1_KEEPALIVE;
    petrel__timer_disarm(&c->timer); /* the head timeout is over; writes have their own */
    r->_flags |= REQ_IN_HANDLER;
    petrel__req_dispatch(r);
    r->_flags &= ~REQ_IN_HANDLER;
    if (c->flags & CONN_CLOSED)
        return false;
    if (h1->up_ops) {
        petrel__req_finished(r, 0);
        switch_protocol(h1);
        return false;
    }
    if (r->_resp->ended)
        request_done(h1);
    else
        h1->flags |= H1_WAIT; /* a streamed response: wait for its end */
    return true;
}

static void process(h1_t *h1)
{
    petrel__conn_t *c = h1->c;
    h1->flags |= H1_IN_PROCESS;
    while (!(h1->flags & (H1_WAIT | H1_CLOSING)) && c->rpos < c->rlen) {
        if (h1->req == NULL) {
            /* skip the empty lines RFC 9112 §2.2 allows before a request */
            while (c->rpos < c->rlen && (c->rbuf[c->rpos] == '\r' || c->rbuf[c->rpos] == '\n'))
                c->rpos++;
            if (c->rpos == c->rlen)
                break;
            if (req_begin(h1) == NULL) {
                petrel__conn_close(c);
                return;
            }
        }
        const char *start = c->rbuf + c->rpos;
        llhttp_errno_t e = llhttp_execute(&h1->parser, start, c->rlen - c->rpos);
        if (e == HPE_OK) {
            c->rpos = c->rlen;
            break;
        }
        if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
            c->rpos = (uint32_t)(llhttp_get_error_pos(&h1->parser) - c->rbuf);
            if (e == HPE_PAUSED)
                llhttp_resume(&h1->parser);
            else
                h1->flags &= ~H1_KEEPALIVE; /* see on_headers_complete */
            if (!request_ready(h1))
                return; /* h1 is gone */
            if (e == HPE_PAUSED_UPGRADE)
                break;
            continue;
        }
        int status = status_for_error(h1, e);
        petrel_log(PETREL_LOG_DEBUG, "request %llu: %s (%s) -> %d",
                   (unsigned long long)h1->req->id, llhttp_errno_name(e),
                   llhttp_get_error_reason(&h1->parser), status);
        c->rpos = c->rlen;
        send_error(h1, status);
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
        petrel__conn_close(c);
        return;
    }
    if (!petrel__conn_out_empty(c))
        return; /* EPOLLOUT calls h1_written */
    h1_written(c);
}

static void h1_written(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL)
        return;
    if ((h1->flags & H1_WAIT) && h1->req && h1->req->_resp->ended)
        req_end(h1);
    if (h1->flags & H1_CLOSING) {
        if (h1->req == NULL || h1->req->_resp->ended) {
            /* RFC 9112 §9.6: half-close first so the peer reads the whole
             * response; linger when it may still be sending (an error cut
             * its request short, or more requests are buffered). */
            bool linger = (h1->flags & H1_ERROR) || c->rpos < c->rlen;
            if (h1->req)
                req_end(h1);
            c->proto = NULL;
            h1_put(h1);
            if (linger)
                petrel__conn_linger(c);
            else
                petrel__conn_close(c); /* nothing unread: close sends FIN */
        }
        return;
    }
    if (h1->req == NULL) {
        if (c->rpos < c->rlen && !(h1->flags & H1_IN_PROCESS)) {
            process(h1); /* pipelined requests that waited for the output */
            return;
        }
        if (c->flags & CONN_EOF) {
            petrel__conn_close(c);
            return;
        }
        petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_keepalive);
        c->flags &= ~CONN_PAUSED;
        if (!(h1->flags & H1_IN_PROCESS))
            h1_idle(h1);
        petrel__conn_update_events(c);
    } else if ((h1->flags & H1_HEAD_DONE) && !(h1->flags & H1_WAIT)) {
        h1_events(h1);
    }
}

static void h1_read(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL && (h1 = h1_get(c)) == NULL) {
        petrel__conn_close(c);
        return;
    }
    if (h1->flags & (H1_WAIT | H1_CLOSING)) {
        /* not now: stop polling for input until the output is written */
        h1_events(h1);
        return;
    }
    for (int turn = 0; turn < PETREL__READS_PER_EVENT; turn++) {
        if (c->rbuf && c->rlen == c->rcap) {
            int st = rbuf_make_room(h1);
            if (st) {
                c->rpos = c->rlen;
                send_error(h1, st);
                after_output(h1);
                return;
            }
        }
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c);
            return;
        }
        if (n == 0) {
            if (!(c->flags & CONN_EOF)) {
                if (h1->req == NULL)
                    h1_idle(h1); /* EAGAIN: do not hold an empty buffer */
                return;
            }
            /* The peer is done sending.  A request cut short is dropped;
             * answers already queued are still written. */
            if (h1->req && !h1->req->_resp->sent) {
                petrel__conn_close(c);
                return;
            }
            h1->flags |= H1_CLOSING;
            if (h1->req == NULL && petrel__conn_out_empty(c)) {
                petrel__conn_close(c);
                return;
            }
            h1_events(h1);
            return;
        }
        if (h1->req && (h1->flags & H1_HEAD_DONE))
            petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_header); /* body progress */
        process(h1);
        /* a read that did not fill the buffer got everything there was */
        if (c->proto != h1 || (c->flags & CONN_CLOSED) || (h1->flags & (H1_WAIT | H1_CLOSING)) ||
            c->rbuf == NULL || c->rlen < c->rcap)
            return;
    }
}

/* The entry stage switched the connection here with its first bytes. */
static void h1_start(petrel__conn_t *c)
{
    h1_t *h1 = c->proto ? c->proto : h1_get(c);
    if (h1 == NULL) {
        petrel__conn_close(c);
        return;
    }
    if (c->rpos < c->rlen) {
        process(h1);
        if (c->proto != h1 || (c->flags & CONN_CLOSED) || c->rbuf == NULL || c->rlen < c->rcap)
            return;
    }
    h1_read(c); /* a full buffer: the socket may have more */
}

static void h1_timeout(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 && h1->req && !h1->req->_resp->sent && petrel__conn_out_empty(c)) {
        /* RFC 9110 §15.5.9: 408 for a request that did not arrive in time;
         * written, then closed as after any error response (lingering, so
         * that the client reads it rather than a reset) */
        c->rpos = c->rlen;
        send_error(h1, 408);
        after_output(h1);
        return;
    }
    petrel__conn_close(c);
}

static void h1_drain(petrel__conn_t *c, bool close_idle)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL || (h1->req == NULL && petrel__conn_out_empty(c) && c->rpos == c->rlen)) {
        /* idle: close now (SIGTERM), or answer one more request with
         * Connection: close, or close at the keep-alive timeout (a reload:
         * the client may be sending its next request right now) */
        if (close_idle)
            petrel__conn_close(c);
        return;
    }
    h1->flags &= ~H1_KEEPALIVE;
}

static bool h1_closed(petrel__conn_t *c)
{
    h1_t *h1 = c->proto;
    if (h1 == NULL)
        return false;
    petrel_req_t *r = h1->req;
    if (r && r->_resp->body_kind == BODY_STREAM && r->_resp->sent && !r->_resp->ended) {
        /* A streamed response cut short (the peer reset, a send timeout):
         * its handler still holds the request and may write from a timer,
         * so the state, the connection struct and its arena stay until the
         * handler ends the stream; writes fail with PETREL_EIO meanwhile
         * (the same contract as an orphaned h2 stream). */
        h1->flags |= H1_ORPHAN;
        return true;
    }
    c->proto = NULL;
    h1_put(h1);
    return false;
}

const petrel__proto_ops_t petrel__http1_ops = {
    .name = "http/1.1",
    .start = h1_start,
    .on_read = h1_read,
    .on_written = h1_written,
    .on_timeout = h1_timeout,
    .drain = h1_drain,
    .on_close = h1_closed,
};

/* ------------------------------------------------------------------------ */
/* Upgrades                                                                 */

petrel__conn_t *petrel__http1_conn(const petrel_req_t *req)
{
    if (req->_proto != &h1_proto)
        return NULL;
    h1_t *h1 = req->_conn;
    return (h1->flags & H1_ORPHAN) ? NULL : h1->c;
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
    h1_t *h1 = req->_conn;
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
    if (petrel__out_copy(h1->c, buf, (size_t)(p - buf)) < 0)
        return PETREL_ENOMEM;
    req->_resp->status = 101;
    req->_resp->sent = req->_resp->ended = true;
    h1->up_ops = ops;
    h1->up_state = state;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */

/* A response that could not be queued whole leaves the byte stream in an
 * unknown state: never reuse the connection after it. */
static int broken(h1_t *h1, int rc)
{
    if (rc < 0) {
        h1->flags &= ~H1_KEEPALIVE;
        h1->flags |= H1_CLOSING | H1_ERROR;
    }
    return rc;
}

static int h1_send(petrel_req_t *req, petrel_resp_t *r)
{
    h1_t *h1 = req->_conn;
    petrel__conn_t *c = h1->c;
    petrel__loop_t *loop = petrel__loop;
    bool stream = r->body_kind == BODY_STREAM;
    bool body_allowed = petrel__status_has_body(r->status);
    if (c->cs->draining)
        h1->flags &= ~H1_KEEPALIVE;
    if (stream && req->version == 10)
        h1->flags &= ~H1_KEEPALIVE; /* the body ends when the connection does */
    bool keep = (h1->flags & H1_KEEPALIVE) != 0;

    size_t tlen = r->type ? strlen(r->type) : 0;
    size_t need = 64 + 48 + 16 + tlen + 24 + 40 + 32;
    for (petrel__rheader_t *h = r->headers; h; h = h->next)
        need += h->name.len + h->value.len + 4;
    char *buf = petrel__out_reserve(c, need);
    char *heap = NULL;
    if (buf == NULL) {
        buf = heap = petrel_arena_alloc(&c->arena, need, 1);
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
        if (petrel__out_copy(c, heap, (size_t)(p - heap)) < 0)
            return broken(h1, PETREL_ENOMEM);
    } else {
        petrel__out_commit(c, (size_t)(p - buf));
    }

    bool send_body = body_allowed && req->method != PETREL_HEAD;
    if (!stream && send_body && r->len) {
        int rc;
        if (r->body_kind == BODY_FD) {
            rc = petrel__out_fd(c, r->fd, r->offset, r->len);
            h1->flags |= H1_OUT_REFS;
        } else if (r->len <= COPY_BODY_MAX) {
            rc = petrel__out_copy(c, r->body, r->len);
        } else {
            rc = petrel__out_ref(c, r->body, r->len);
            h1->flags |= H1_OUT_REFS;
        }
        if (rc < 0)
            return broken(h1, rc);
        h1->bytes_out = r->len;
    }
    return 0;
}

static int h1_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    h1_t *h1 = req->_conn;
    petrel__conn_t *c = h1->c;
    if (h1->flags & H1_ORPHAN)
        return PETREL_EIO;
    if (req->method == PETREL_HEAD || !petrel__status_has_body(req->_resp->status) || len == 0)
        return 0;
    int rc;
    if (req->version == 11) {
        char hdr[24];
        int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
        if ((rc = petrel__out_copy(c, hdr, (size_t)n)) < 0 ||
            (rc = petrel__out_copy(c, data, len)) < 0 || (rc = petrel__out_copy(c, "\r\n", 2)) < 0)
            return broken(h1, rc);
    } else if ((rc = petrel__out_copy(c, data, len)) < 0) {
        return broken(h1, rc);
    }
    h1->bytes_out += len;
    if (!(h1->flags & H1_IN_PROCESS) && !(req->_flags & REQ_IN_HANDLER))
        after_output(h1);
    return 0;
}

static int h1_stream_end(petrel_req_t *req, petrel_resp_t *r)
{
    h1_t *h1 = req->_conn;
    petrel__conn_t *c = h1->c;
    if (h1->flags & H1_ORPHAN) {
        orphan_end(h1);
        return PETREL_EIO;
    }
    int rc = 0;
    if (req->version == 11 && req->method != PETREL_HEAD && petrel__status_has_body(r->status)) {
        rc = petrel__out_copy(c, "0\r\n", 3);
        if (rc == 0 && (req->_flags & REQ_TE_TRAILERS)) {
            /* RFC 9112 §7.1.2: trailers only to a client that said TE: trailers */
            for (petrel__rheader_t *h = r->trailers; h && rc == 0; h = h->next) {
                rc = petrel__out_copy(c, h->name.ptr, h->name.len);
                if (rc == 0)
                    rc = petrel__out_copy(c, ": ", 2);
                if (rc == 0)
                    rc = petrel__out_copy(c, h->value.ptr, h->value.len);
                if (rc == 0)
                    rc = petrel__out_copy(c, "\r\n", 2);
            }
        }
        if (rc == 0)
            rc = petrel__out_copy(c, "\r\n", 2);
    }
    if (rc < 0)
        broken(h1, rc);
    if (req->_flags & REQ_IN_HANDLER)
        return rc; /* request_ready() finishes it */
    request_done(h1);
    if (!(h1->flags & H1_IN_PROCESS))
        after_output(h1);
    return broken(h1, rc);
}

static const char *h1_peer(petrel_req_t *req)
{
    h1_t *h1 = req->_conn;
    char buf[64];
    const char *s = petrel__conn_peer_text(h1->c, buf, sizeof(buf));
    return petrel_arena_strndup(req->arena, s, strlen(s));
}

static const petrel_proto_t h1_proto = {
    "http/1.1", h1_send, h1_stream_write, h1_stream_end, h1_peer,
};
