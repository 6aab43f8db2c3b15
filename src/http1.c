/*
 * http1.c -- HTTP/1.1 (RFC 9112) on llhttp: the only file that touches it.
 *
 * The parser runs over the connection's read buffer and pauses at the end of
 * each message, so handlers run outside llhttp's callbacks.  Strings of the
 * request head (method, target, header names and values) are spans of the
 * read buffer, NUL-terminated in place once the head is complete; the buffer
 * does not move under them (compaction and growth rebase the spans).
 * Responses of a whole batch of pipelined requests are gathered in the
 * output queue and written with one writev at the end of the batch.
 */
#include "petrel-int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ_IN_HANDLER 1u
#define REQ_TE_TRAILERS 2u
#define MAX_HEADERS 128
#define COPY_BODY_MAX 4096 /* smaller bodies are copied next to the headers */

static const petrel_proto_t h1_proto;
static void process(petrel__conn_t *c);
static void after_output(petrel__conn_t *c);

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
static void rebase(petrel__conn_t *c, const char *lo, const char *hi, ptrdiff_t d)
{
    petrel_req_t *r = c->req;
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
static int rbuf_make_room(petrel__conn_t *c)
{
    petrel__config_t *cfg = &c->srv->cfg;
    if (c->req == NULL) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = c->head_start = 0;
        return 0;
    }
    uint32_t keep_end = c->rpos;
    c->body_end = UINT32_MAX;
    if (c->flags & CONN_HEAD_DONE) {
        /* keep through the end of the last span of the head */
        const char *e = c->req->target.ptr + c->req->target.len;
        for (size_t i = 0; i < c->req->nheaders; i++) {
            const char *v = c->req->headers[i].value.ptr + c->req->headers[i].value.len;
            if (v > e)
                e = v;
        }
        keep_end = (uint32_t)(e + 1 - c->rbuf);
    }
    uint32_t keep = keep_end - c->head_start, unparsed = c->rlen - c->rpos;
    if (c->head_start > 0) {
        char *lo = c->rbuf + c->head_start;
        memmove(c->rbuf, lo, keep);
        rebase(c, lo, lo + keep, -(ptrdiff_t)c->head_start);
        c->head_start = 0;
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
        return c->req->target.len > cfg->max_uri_size ? 414 : 431;
    char *nb = malloc(big);
    if (nb == NULL)
        return 503;
    memcpy(nb, c->rbuf, c->rlen);
    rebase(c, c->rbuf, c->rbuf + c->rlen, nb - c->rbuf);
    petrel__chunk_put(&petrel__pool, c->rbuf);
    c->rbuf = nb;
    c->rcap = (uint32_t)big;
    c->flags |= CONN_RBUF_LARGE;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Parser callbacks                                                         */

#define CONN(p) ((petrel__conn_t *)(p)->data)

static int fail(petrel__conn_t *c, int status)
{
    c->err_status = (uint16_t)status;
    return HPE_USER;
}

static int on_method(llhttp_t *p, const char *at, size_t len)
{
    return span_add(&CONN(p)->req->method_name, at, len) ? 0 : fail(CONN(p), 400);
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    petrel__conn_t *c = CONN(p);
    if (!span_add(&c->req->target, at, len))
        return fail(c, 400);
    if (c->req->target.len > c->srv->cfg.max_uri_size)
        return fail(c, 414);
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    petrel__conn_t *c = CONN(p);
    petrel_req_t *r = c->req;
    if (c->flags & CONN_HEAD_DONE)
        return 0; /* a trailer field of a chunked body: not merged */
    c->hdr_bytes += (uint32_t)len;
    if (c->hdr_bytes > c->srv->cfg.max_header_size)
        return fail(c, 431);
    if (!(c->flags & CONN_IN_VALUE)) {
        c->flags |= CONN_IN_VALUE;
        if (r->nheaders == c->hdr_cap) {
            size_t ncap = (size_t)c->hdr_cap * 2;
            if (ncap > MAX_HEADERS)
                return fail(c, 431);
            petrel_header_t *nh = petrel_arena_alloc(&c->arena, ncap * sizeof(*nh), 0);
            if (nh == NULL)
                return fail(c, 503);
            memcpy(nh, r->headers, r->nheaders * sizeof(*nh));
            r->headers = nh;
            c->hdr_cap = (uint16_t)ncap;
        }
        petrel_header_t *h = &r->headers[r->nheaders++];
        h->name.ptr = h->value.ptr = NULL;
        h->name.len = h->value.len = 0;
    }
    return span_add(&r->headers[r->nheaders - 1].name, at, len) ? 0 : fail(c, 400);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    petrel__conn_t *c = CONN(p);
    if (c->flags & CONN_HEAD_DONE)
        return 0;
    c->hdr_bytes += (uint32_t)len;
    if (c->hdr_bytes > c->srv->cfg.max_header_size)
        return fail(c, 431);
    return span_add(&c->req->headers[c->req->nheaders - 1].value, at, len) ? 0 : fail(c, 400);
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
    petrel__conn_t *c = CONN(p);
    if (c->flags & CONN_HEAD_DONE)
        return 0;
    c->flags &= ~CONN_IN_VALUE;
    petrel_header_t *h = &c->req->headers[c->req->nheaders - 1];
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
    c->hdr_bytes += 4; /* ": " and CRLF */
    /* RFC 9110 §5.1, RFC 9112 §5.1: a field name is a token, with no
     * whitespace before the colon (llhttp 8.1 lets some through) */
    for (size_t i = 0; i < h->name.len; i++)
        if (!petrel__tchar[(unsigned char)h->name.ptr[i]])
            return fail(c, 400);
    switch (h->name.len) {
    case 4:
        if (NAME_IS(h, "host")) {
            c->host_count++;
            c->req->authority = h->value;
            if (!host_valid(h->value.ptr, h->value.len))
                return fail(c, 400);
        }
        break;
    case 6:
        if (NAME_IS(h, "expect")) {
            /* RFC 9110 §10.1.1: 100-continue is the only expectation */
            if (!petrel__str_ieq(h->value.ptr, h->value.len, "100-continue", 12))
                return fail(c, 417);
            c->flags |= CONN_CONTINUE;
        }
        break;
    case 2:
        if (NAME_IS(h, "te")) {
            const char *s = h->value.ptr, *e = s + h->value.len;
            petrel_str_t tok;
            while (next_token(&s, e, &tok))
                if (tok.len >= 8 && petrel__str_ieq(tok.ptr, 8, "trailers", 8))
                    c->req->_flags |= REQ_TE_TRAILERS;
        }
        break;
    case 17:
        if (NAME_IS(h, "transfer-encoding")) {
            /* RFC 9112 §6.1: chunked must be the final coding and appear once;
             * a coding we do not implement gets 501. */
            const char *s = h->value.ptr, *e = s + h->value.len;
            petrel_str_t tok;
            while (next_token(&s, e, &tok)) {
                if (c->te_chunked)
                    return fail(c, 400); /* something after chunked */
                if (petrel__str_ieq(tok.ptr, tok.len, "chunked", 7))
                    c->te_chunked = 1;
                else
                    return fail(c, 501);
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
static int parse_target(petrel__conn_t *c, petrel_req_t *r)
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
        r->authority.ptr = petrel_arena_strndup(&c->arena, a, (size_t)(ae - a));
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
    char *out = petrel_arena_alloc(&c->arena, plen + 1, 1);
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
    petrel__conn_t *c = CONN(p);
    petrel_req_t *r = c->req;
    petrel__config_t *cfg = &c->srv->cfg;
    c->flags |= CONN_HEAD_DONE;
    nul_terminate(&r->method_name);
    nul_terminate(&r->target);
    for (size_t i = 0; i < r->nheaders; i++) {
        nul_terminate(&r->headers[i].name);
        nul_terminate(&r->headers[i].value);
    }
    if (p->http_major != 1)
        return fail(c, 505);
    r->version = p->http_minor == 0 ? 10 : 11;
    r->method = petrel__method_from_name(r->method_name.ptr, r->method_name.len);
    if (r->method == 0)
        return fail(c, 501); /* RFC 9110 §9.1 */
    /* RFC 9112 §3.2: exactly one valid Host in HTTP/1.1 (any number of
     * invalid ones were refused above); never two. */
    if (c->host_count > 1 || (c->host_count == 0 && r->version == 11))
        return fail(c, 400);
    /* RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty. */
    if (c->te_chunked && r->version == 10)
        return fail(c, 400);
    int st = parse_target(c, r);
    if (st)
        return fail(c, st);
    c->body_cap = 0;
    if (p->flags & F_CHUNKED) {
        c->body_cap = 0;
    } else if (p->content_length > 0) {
        if (p->content_length > cfg->max_body_size)
            return fail(c, 413);
        char *b = petrel_arena_alloc(&c->arena, (size_t)p->content_length + 1, 1);
        if (b == NULL)
            return fail(c, 503);
        r->body.ptr = b;
        c->body_cap = (size_t)p->content_length;
    }
    if ((c->flags & CONN_CONTINUE) && r->version == 11 &&
        ((p->flags & F_CHUNKED) || p->content_length > 0)) {
        /* RFC 9110 §10.1.1; never to an HTTP/1.0 client */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        petrel__out_copy(c, cont, sizeof(cont) - 1);
    }
    if (p->upgrade) {
        /* Upgrades are not spoken here (yet): answer the request as plain
         * HTTP/1.1 and close, since bytes after it may be another protocol. */
        c->flags &= ~CONN_KEEPALIVE;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    petrel__conn_t *c = CONN(p);
    petrel_req_t *r = c->req;
    size_t need = r->body.len + len;
    if (need > c->body_cap) {
        if (need > c->srv->cfg.max_body_size)
            return fail(c, 413);
        size_t ncap = c->body_cap ? c->body_cap * 2 : 4096;
        while (ncap < need)
            ncap *= 2;
        if (ncap > c->srv->cfg.max_body_size)
            ncap = c->srv->cfg.max_body_size;
        char *nb = petrel_arena_alloc(&c->arena, ncap + 1, 1);
        if (nb == NULL)
            return fail(c, 503);
        if (r->body.len)
            memcpy(nb, r->body.ptr, r->body.len);
        r->body.ptr = nb;
        c->body_cap = ncap;
    }
    memcpy((char *)r->body.ptr + r->body.len, at, len);
    r->body.len += len;
    c->body_end = (uint32_t)(at + len - c->rbuf);
    return 0;
}

/* RFC 9112 §7.1: chunk data is followed by CRLF.  llhttp 8.1 does not insist,
 * so a smuggled "5\r\nhelloXX" would pass: check it where the bytes are. */
static int on_chunk_complete(llhttp_t *p)
{
    petrel__conn_t *c = CONN(p);
    uint32_t e = c->body_end;
    if (p->content_length == 0 && e != UINT32_MAX && e + 2 <= c->rlen &&
        (c->rbuf[e] != '\r' || c->rbuf[e + 1] != '\n'))
        return fail(c, 400);
    c->body_end = UINT32_MAX;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    petrel__conn_t *c = CONN(p);
    petrel_req_t *r = c->req;
    if (r->body.ptr)
        ((char *)r->body.ptr)[r->body.len] = '\0';
    else
        r->body.ptr = "";
    if (!llhttp_should_keep_alive(p))
        c->flags &= ~CONN_KEEPALIVE;
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

void petrel__http1_init_conn(petrel__conn_t *c)
{
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
}

static petrel_req_t *req_begin(petrel__conn_t *c)
{
    c->req_mark = petrel_arena_mark(&c->arena);
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
    r->server = c->srv;
    r->id = ++c->srv->next_req_id;
    r->_proto = &h1_proto;
    r->_conn = c;
    r->_resp = &m->resp;
    m->resp.status = 0;
    m->resp.body_kind = BODY_NONE; /* read by petrel__conn_close before any send */
    m->resp.sent = m->resp.ended = false;
    m->resp.headers = m->resp.trailers = NULL;
    m->resp.headers_tail = &m->resp.headers;
    m->resp.trailers_tail = &m->resp.trailers;
    c->req = r;
    c->hdr_cap = 16;
    c->body_cap = 0;
    c->body_end = UINT32_MAX;
    c->hdr_bytes = 0;
    c->host_count = 0;
    c->te_chunked = 0;
    c->err_status = 0;
    c->bytes_out = 0;
    c->head_start = c->rpos;
    c->flags = (c->flags & ~(CONN_HEAD_DONE | CONN_IN_VALUE | CONN_CONTINUE | CONN_OUT_REFS)) |
               CONN_KEEPALIVE;
    petrel__timer_arm(petrel__loop, &c->timer, &c->srv->tq_header);
    return r;
}

/* The response has been written (or dropped): end the request scope. */
static void req_end(petrel__conn_t *c)
{
    c->req = NULL;
    c->flags &= ~(CONN_OUT_REFS | CONN_PAUSED);
    petrel_arena_reset(&c->arena, c->req_mark);
}

/* The whole response is queued. */
static void request_done(petrel__conn_t *c)
{
    petrel_req_t *r = c->req;
    if (petrel__access_log_on)
        petrel__access_log(r, r->_resp->status, c->bytes_out);
    if (c->on_upgrade) {
        c->flags |= CONN_PAUSED; /* the switch happens once the 101 is written */
        return;
    }
    if (!(c->flags & CONN_KEEPALIVE) || c->srv->draining)
        c->flags |= CONN_CLOSING;
    if (c->flags & CONN_OUT_REFS)
        c->flags |= CONN_PAUSED; /* the output still reads request memory */
    else
        req_end(c);
}

/* Send an error status for a request that failed to parse, then close. */
static void send_error(petrel__conn_t *c, int status)
{
    petrel_req_t *r = c->req;
    c->flags &= ~CONN_KEEPALIVE;
    c->flags |= CONN_ERROR;
    if (r->_resp->sent) {
        c->flags |= CONN_CLOSING;
        return;
    }
    if (r->version == 0)
        r->version = 11;
    if (!(c->flags & CONN_HEAD_DONE)) {
        /* The head is incomplete: its spans are not NUL-terminated.  Take
         * method and target from the raw request line (for the log), and
         * forget the headers. */
        const char *s = c->rbuf + c->head_start, *end = c->rbuf + c->rlen;
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
        c->flags |= CONN_CLOSING;
    request_done(c);
}

static int status_for_error(petrel__conn_t *c, llhttp_errno_t e)
{
    if (c->err_status)
        return c->err_status;
    switch (e) {
    case HPE_INVALID_METHOD: {
        /* A well-formed token we do not know: 501 (RFC 9110 §9.1). */
        const char *s = c->rbuf + c->head_start, *end = c->rbuf + c->rlen;
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
        const char *s = c->rbuf + c->head_start, *end = c->rbuf + c->rlen;
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

static void request_ready(petrel__conn_t *c)
{
    petrel_req_t *r = c->req;
    /* h2 (RFC 7540 §3.2): a complete request with `Upgrade: h2c` is answered
     * with 101 and becomes stream 1 of an h2 session that takes the
     * connection over (h2.c); PETREL_ENOTFOUND: not an h2c upgrade. */
    if (unlikely(c->parser.upgrade)) {
        int rc = petrel__h2_upgrade(c, r);
        if (rc != PETREL_ENOTFOUND) {
            if (rc < 0)
                petrel__conn_close(c);
            return;
        }
    }
    if (c->srv->draining)
        c->flags &= ~CONN_KEEPALIVE;
    petrel__timer_disarm(&c->timer); /* the head timeout is over; writes have their own */
    r->_flags |= REQ_IN_HANDLER;
    petrel__req_dispatch(r);
    r->_flags &= ~REQ_IN_HANDLER;
    if (r->_resp->ended)
        request_done(c);
    else
        c->flags |= CONN_PAUSED; /* a streamed response: wait for its end */
}

/* RFC 9113 §3.4: prior knowledge starts with the connection preface. */
static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* Returns true when the connection has been handed to another protocol or
 * must wait for more bytes to know. */
static bool sniff(petrel__conn_t *c)
{
    size_t n = c->rlen - c->rpos, want = sizeof(h2_preface) - 1;
    if (c->rbuf[c->rpos] != 'P')
        goto http1;
    if (memcmp(c->rbuf + c->rpos, h2_preface, n < want ? n : want) != 0)
        goto http1;
    if (n < want)
        return true; /* a prefix of the preface so far */
    c->flags |= CONN_STARTED;
    if (petrel__h2_takeover(c) < 0)
        petrel__conn_close(c);
    return true;
http1:
    c->flags |= CONN_STARTED;
    return false;
}

static void process(petrel__conn_t *c)
{
    if (unlikely(!(c->flags & CONN_STARTED)) && c->rpos < c->rlen && sniff(c))
        return;
    c->flags |= CONN_IN_PROCESS;
    while (!(c->flags & (CONN_PAUSED | CONN_CLOSING | CONN_CLOSED)) && c->rpos < c->rlen) {
        if (c->req == NULL) {
            /* skip the empty lines RFC 9112 §2.2 allows before a request */
            while (c->rpos < c->rlen && (c->rbuf[c->rpos] == '\r' || c->rbuf[c->rpos] == '\n'))
                c->rpos++;
            if (c->rpos == c->rlen)
                break;
            if (req_begin(c) == NULL) {
                petrel__conn_close(c);
                return;
            }
        }
        const char *start = c->rbuf + c->rpos;
        llhttp_errno_t e = llhttp_execute(&c->parser, start, c->rlen - c->rpos);
        if (e == HPE_OK) {
            c->rpos = c->rlen;
            break;
        }
        if (e == HPE_PAUSED) {
            c->rpos = (uint32_t)(llhttp_get_error_pos(&c->parser) - c->rbuf);
            llhttp_resume(&c->parser);
            request_ready(c);
            continue;
        }
        if (e == HPE_PAUSED_UPGRADE) {
            /* bytes after an Upgrade request belong to the new protocol, if
             * the handler took it (c->on_upgrade); else we close after it */
            c->rpos = (uint32_t)(llhttp_get_error_pos(&c->parser) - c->rbuf);
            c->flags &= ~CONN_KEEPALIVE;
            request_ready(c);
            break;
        }
        int status = status_for_error(c, e);
        petrel_log(PETREL_LOG_DEBUG, "request %llu: %s (%s) -> %d",
                   (unsigned long long)c->req->id, llhttp_errno_name(e),
                   llhttp_get_error_reason(&c->parser), status);
        c->rpos = c->rlen;
        send_error(c, status);
        break;
    }
    c->flags &= ~CONN_IN_PROCESS;
    if (!(c->flags & CONN_CLOSED))
        after_output(c);
}

/* After queuing output: write it, then close, go idle or wait. */
static void after_output(petrel__conn_t *c)
{
    if (petrel__conn_flush(c) < 0) {
        petrel__conn_close(c);
        return;
    }
    if (!petrel__conn_out_empty(c))
        return; /* EPOLLOUT will call petrel__http1_on_flushed */
    petrel__http1_on_flushed(c);
}

void petrel__http1_on_flushed(petrel__conn_t *c)
{
    if (c->on_upgrade && c->req && c->req->_resp->ended) {
        void (*cb)(petrel__conn_t *) = c->on_upgrade;
        c->on_upgrade = NULL;
        req_end(c);
        cb(c);
        return;
    }
    if ((c->flags & CONN_PAUSED) && c->req && c->req->_resp->ended)
        req_end(c);
    if (c->flags & CONN_CLOSING) {
        if (c->req == NULL || c->req->_resp->ended) {
            /* RFC 9112 §9.6: half-close first so the peer reads the whole
             * response; linger when it may still be sending (an error cut
             * its request short, or more requests are buffered). */
            if ((c->flags & CONN_ERROR) || c->rpos < c->rlen) {
                petrel__conn_linger(c);
            } else {
                petrel__conn_close(c); /* nothing unread: close sends FIN */
            }
        }
        return;
    }
    if (c->req == NULL) {
        if (c->rpos < c->rlen && !(c->flags & CONN_IN_PROCESS)) {
            process(c); /* pipelined requests that waited for the output */
            return;
        }
        if (c->flags & CONN_EOF) {
            petrel__conn_close(c);
            return;
        }
        petrel__conn_idle(c);
        petrel__timer_arm(petrel__loop, &c->timer, &c->srv->tq_keepalive);
        petrel__conn_update_events(c);
    } else if (c->flags & CONN_HEAD_DONE && !(c->flags & CONN_PAUSED)) {
        petrel__conn_update_events(c);
    }
}

void petrel__http1_on_read(petrel__conn_t *c)
{
    if (c->flags & (CONN_PAUSED | CONN_CLOSING)) {
        /* not now: stop polling for input until the output is written */
        petrel__conn_update_events(c);
        return;
    }
    for (int turn = 0; turn < 4; turn++) {
        if (c->rbuf && c->rlen == c->rcap) {
            int st = rbuf_make_room(c);
            if (st) {
                c->rpos = c->rlen;
                send_error(c, st);
                after_output(c);
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
                if (c->req == NULL)
                    petrel__conn_idle(c); /* EAGAIN: do not hold an empty buffer */
                return;
            }
            /* The peer is done sending.  A request cut short is dropped;
             * answers already queued are still written. */
            if (c->req && !c->req->_resp->sent) {
                petrel__conn_close(c);
                return;
            }
            c->flags |= CONN_CLOSING;
            if (c->req == NULL && petrel__conn_out_empty(c)) {
                petrel__conn_close(c);
                return;
            }
            petrel__conn_update_events(c);
            return;
        }
        if (c->req && (c->flags & CONN_HEAD_DONE))
            petrel__timer_arm(petrel__loop, &c->timer, &c->srv->tq_header); /* body progress */
        process(c);
        /* a read that did not fill the buffer got everything there was */
        if ((c->flags & (CONN_CLOSED | CONN_PAUSED | CONN_CLOSING)) || c->rbuf == NULL ||
            c->rlen < c->rcap)
            return;
    }
}

void petrel__http1_on_timeout(petrel__conn_t *c)
{
    if (c->req && !c->req->_resp->sent && petrel__conn_out_empty(c)) {
        /* RFC 9110 §15.5.9: 408 for a request that did not arrive in time */
        c->rpos = c->rlen;
        send_error(c, 408);
        after_output(c);
        if (!(c->flags & CONN_CLOSED))
            petrel__conn_close(c);
        return;
    }
    petrel__conn_close(c);
}

bool petrel__http1_idle(const petrel__conn_t *c)
{
    return c->req == NULL && petrel__conn_out_empty(c);
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}
#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

/* A response that could not be queued whole leaves the byte stream in an
 * unknown state: never reuse the connection after it. */
static int broken(petrel__conn_t *c, int rc)
{
    if (rc < 0) {
        c->flags &= ~CONN_KEEPALIVE;
        c->flags |= CONN_CLOSING | CONN_ERROR;
    }
    return rc;
}

static int h1_send(petrel_req_t *req, petrel_resp_t *r)
{
    petrel__conn_t *c = req->_conn;
    petrel__loop_t *loop = petrel__loop;
    bool stream = r->body_kind == BODY_STREAM;
    bool body_allowed = petrel__status_has_body(r->status);
    if (c->srv->draining)
        c->flags &= ~CONN_KEEPALIVE;
    if (stream && req->version == 10)
        c->flags &= ~CONN_KEEPALIVE; /* the body ends when the connection does */
    bool keep = (c->flags & CONN_KEEPALIVE) != 0;

    size_t tlen = r->type ? strlen(r->type) : 0;
    size_t need = 64 + 48 + 16 + tlen + 24 + 40 + 32;
    for (petrel__rheader_t *h = r->headers; h; h = h->next)
        need += h->name.len + h->value.len + 4;
    char *buf = petrel__out_reserve(c, need);
    char *heap = NULL;
    if (buf == NULL) {
        buf = heap = petrel_arena_alloc(&c->arena, need, 1);
        if (buf == NULL)
            return broken(c, PETREL_ENOMEM);
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
            return broken(c, PETREL_ENOMEM);
    } else {
        petrel__out_commit(c, (size_t)(p - buf));
    }

    bool send_body = body_allowed && req->method != PETREL_HEAD;
    if (!stream && send_body && r->len) {
        int rc;
        if (r->body_kind == BODY_FD) {
            rc = petrel__out_fd(c, r->fd, r->offset, r->len);
            c->flags |= CONN_OUT_REFS;
        } else if (r->len <= COPY_BODY_MAX) {
            rc = petrel__out_copy(c, r->body, r->len);
        } else {
            rc = petrel__out_ref(c, r->body, r->len);
            c->flags |= CONN_OUT_REFS;
        }
        if (rc < 0)
            return broken(c, rc);
        c->bytes_out = r->len;
    }
    return 0;
}

static int h1_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    petrel__conn_t *c = req->_conn;
    if (req->method == PETREL_HEAD || !petrel__status_has_body(req->_resp->status) || len == 0)
        return 0;
    int rc;
    if (req->version == 11) {
        char hdr[24];
        int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
        if ((rc = petrel__out_copy(c, hdr, (size_t)n)) < 0 ||
            (rc = petrel__out_copy(c, data, len)) < 0 || (rc = petrel__out_copy(c, "\r\n", 2)) < 0)
            return broken(c, rc);
    } else if ((rc = petrel__out_copy(c, data, len)) < 0) {
        return broken(c, rc);
    }
    c->bytes_out += len;
    if (!(c->flags & CONN_IN_PROCESS) && !(req->_flags & REQ_IN_HANDLER))
        after_output(c);
    return 0;
}

static int h1_stream_end(petrel_req_t *req, petrel_resp_t *r)
{
    petrel__conn_t *c = req->_conn;
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
        broken(c, rc);
    if (req->_flags & REQ_IN_HANDLER)
        return rc; /* request_ready() finishes it */
    request_done(c);
    if (!(c->flags & CONN_IN_PROCESS))
        after_output(c);
    return broken(c, rc);
}

static const char *h1_peer(petrel_req_t *req)
{
    petrel__conn_t *c = req->_conn;
    char buf[INET6_ADDRSTRLEN];
    const char *s = "unix";
    if (c->peer.sa.sa_family == AF_INET)
        s = inet_ntop(AF_INET, &c->peer.in.sin_addr, buf, sizeof(buf));
    else if (c->peer.sa.sa_family == AF_INET6)
        s = inet_ntop(AF_INET6, &c->peer.in6.sin6_addr, buf, sizeof(buf));
    return petrel_arena_strndup(req->arena, s ? s : "-", strlen(s ? s : "-"));
}

static const petrel_proto_t h1_proto = {
    "http/1.1", h1_send, h1_stream_write, h1_stream_end, h1_peer,
};
