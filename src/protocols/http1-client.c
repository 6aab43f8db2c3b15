/*
 * http1-client.c -- the client side of HTTP/1.1 on llhttp (HTTP_RESPONSE
 * mode): the request head serialised, the response parsed.  Interim 1xx
 * responses are skipped, a response to HEAD has no body, ambiguous
 * framing (Content-Length with Transfer-Encoding, two different
 * Content-Lengths, a bad chunk) is an error.  Fields and trailers are
 * copied into the caller's arena; body bytes are handed on where they lie.
 */
#include "protocols/http1-client.h"
#include "runtime/arena.h"
#include "runtime/syntax.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 128

struct petrel__h1c {
    llhttp_t parser;
    llhttp_settings_t settings;
    petrel_arena_t *arena;
    const petrel__h1c_cbs_t *cbs;
    void *ctx;
    petrel_header_t *fields;
    size_t n, cap;
    bool in_value;     /* the last span was a value's */
    bool head_request; /* the request was HEAD */
    bool interim;      /* the message being parsed is a 1xx */
    bool upgrade;      /* the request asked for an upgrade: a 101 ends the response */
    bool switched;     /* a 101 came: the connection is no longer HTTP */
    bool headed;       /* on_head ran */
    bool ended;
    bool started;
    bool cl_seen, te_seen, cl_bad;
    uint64_t cl;
    int err; /* PETREL_ENOMEM, PETREL_UPSTREAM_EPROTO */
};

size_t petrel__h1c_size(void)
{
    return sizeof(petrel__h1c_t);
}

static petrel__h1c_t *of(llhttp_t *p)
{
    return (petrel__h1c_t *)p; /* the parser is the first member */
}

/* Append [at, at + len) to the string `s` (in the arena). */
static int grow(petrel__h1c_t *c, petrel_str_t *s, const char *at, size_t len)
{
    char *p = petrel_arena_alloc(c->arena, s->len + len + 1, 1);
    if (p == NULL) {
        c->err = PETREL_ENOMEM;
        return -1;
    }
    if (s->len) /* a name or value split across reads */
        memcpy(p, s->ptr, s->len);
    memcpy(p + s->len, at, len);
    p[s->len + len] = '\0';
    s->ptr = p;
    s->len += len;
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    petrel__h1c_t *c = of(p);
    c->started = true;
    c->n = 0;
    c->in_value = false;
    c->cl_seen = c->te_seen = c->cl_bad = false;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    petrel__h1c_t *c = of(p);
    if (c->n == 0 || c->in_value) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 16;
            if (cap > MAX_FIELDS) {
                c->err = PETREL_UPSTREAM_EPROTO;
                return -1;
            }
            petrel_header_t *f = petrel_arena_new(c->arena, petrel_header_t, cap);
            if (f == NULL) {
                c->err = PETREL_ENOMEM;
                return -1;
            }
            if (c->n)
                memcpy(f, c->fields, c->n * sizeof(*f));
            c->fields = f;
            c->cap = cap;
        }
        c->fields[c->n++] = (petrel_header_t){{"", 0}, {"", 0}};
        c->in_value = false;
    }
    return grow(c, &c->fields[c->n - 1].name, at, len);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    petrel__h1c_t *c = of(p);
    c->in_value = true;
    return grow(c, &c->fields[c->n - 1].value, at, len);
}

/* `lit` a literal: its length is known at compile time, and a field of
 * another length costs no call. */
static bool is(const petrel_str_t *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->len == n && petrel__str_ieq(s->ptr, s->len, lit, n);
}

/* RFC 9112 §6.3: a Content-Length beside Transfer-Encoding, or two that
 * differ, make the framing ambiguous (a smuggling vector): refused. */
static int on_header_value_complete(llhttp_t *p)
{
    petrel__h1c_t *c = of(p);
    petrel_header_t *f = &c->fields[c->n - 1];
    if (is(&f->name, "content-length")) {
        uint64_t v = 0;
        size_t i = 0;
        for (; i < f->value.len && f->value.ptr[i] >= '0' && f->value.ptr[i] <= '9'; i++)
            v = v * 10 + (uint64_t)(f->value.ptr[i] - '0');
        if (i == 0 || i != f->value.len || (c->cl_seen && v != c->cl))
            c->cl_bad = true;
        c->cl_seen = true;
        c->cl = v;
    } else if (is(&f->name, "transfer-encoding")) {
        c->te_seen = true;
    }
    if (c->cl_bad || (c->cl_seen && c->te_seen)) {
        c->err = PETREL_UPSTREAM_EPROTO;
        return -1;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    petrel__h1c_t *c = of(p);
    int status = p->status_code;
    if (status < 100 || status > 599 || (status == 101 && !c->upgrade)) {
        c->err = PETREL_UPSTREAM_EPROTO;
        return -1;
    }
    if (status == 101) {
        /* RFC 9110 §15.2.2: the connection speaks the new protocol right
         * after the empty line; the parser stops there, its bytes are the
         * caller's */
        c->headed = c->ended = c->switched = true;
        int version = p->http_major * 10 + p->http_minor;
        if (c->cbs->on_head(c->ctx, status, version == 10 ? 10 : 11, c->fields, c->n, 0) < 0)
            return -1;
        return HPE_PAUSED;
    }
    if (status < 200) {
        c->interim = true; /* skipped: the response follows */
        return 0;
    }
    c->interim = false;
    c->headed = true;
    bool body = !c->head_request && petrel__status_has_body(status);
    int64_t cl = -1;
    if (!body)
        cl = 0;
    else if (c->cl_seen)
        cl = (int64_t)c->cl;
    int version = p->http_major * 10 + p->http_minor;
    int rc = c->cbs->on_head(c->ctx, status, version == 10 ? 10 : 11, c->fields, c->n, cl);
    c->n = 0;
    c->cap = 0;
    c->fields = NULL;
    c->in_value = false;
    if (rc < 0)
        return -1;
    if (rc > 0)
        return body ? HPE_PAUSED : 1; /* llhttp: 1 is "no body" */
    return body ? 0 : 1;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    petrel__h1c_t *c = of(p);
    int rc = c->cbs->on_body(c->ctx, at, len);
    return rc < 0 ? -1 : rc > 0 ? HPE_PAUSED : 0;
}

static int on_message_complete(llhttp_t *p)
{
    petrel__h1c_t *c = of(p);
    if (c->interim) {
        c->interim = false;
        return 0;
    }
    c->ended = true;
    int rc = c->cbs->on_end(c->ctx, c->fields, c->n); /* the trailers, if any */
    if (rc < 0)
        return -1;
    return HPE_PAUSED; /* what follows is not this response's */
}

void petrel__h1c_start(petrel__h1c_t *c, petrel_arena_t *arena, bool head_request,
                       const petrel__h1c_cbs_t *cbs, void *ctx)
{
    memset(c, 0, sizeof(*c));
    llhttp_settings_init(&c->settings);
    c->settings.on_message_begin = on_message_begin;
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_header_value_complete = on_header_value_complete;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
    c->arena = arena;
    c->cbs = cbs;
    c->ctx = ctx;
    c->head_request = head_request;
}

long petrel__h1c_feed(petrel__h1c_t *c, const char *data, size_t len, bool *done)
{
    *done = c->ended;
    if (c->ended)
        return 0;
    if (llhttp_get_errno(&c->parser) == HPE_PAUSED)
        llhttp_resume(&c->parser);
    llhttp_errno_t e = llhttp_execute(&c->parser, data, len);
    *done = c->ended;
    if (e == HPE_OK)
        return (long)len;
    if (e == HPE_PAUSED)
        return (long)(llhttp_get_error_pos(&c->parser) - data);
    if (c->err)
        return c->err;
    if (e == HPE_USER || e == HPE_CB_HEADERS_COMPLETE || e == HPE_CB_MESSAGE_COMPLETE)
        return PETREL_UPSTREAM_ECANCELLED;
    return PETREL_UPSTREAM_EPROTO;
}

int petrel__h1c_eof(petrel__h1c_t *c, bool *started)
{
    *started = c->started;
    if (c->ended)
        return 0;
    if (!c->headed || !llhttp_message_needs_eof(&c->parser))
        return PETREL_UPSTREAM_EPROTO;
    if (llhttp_get_errno(&c->parser) == HPE_PAUSED)
        llhttp_resume(&c->parser);
    llhttp_errno_t e = llhttp_finish(&c->parser);
    return c->ended && (e == HPE_OK || e == HPE_PAUSED) ? 0 : PETREL_UPSTREAM_EPROTO;
}

bool petrel__h1c_keep_alive(const petrel__h1c_t *c)
{
    return c->ended && !c->switched && llhttp_should_keep_alive(&c->parser);
}

void petrel__h1c_upgrade(petrel__h1c_t *c)
{
    c->upgrade = true;
}

bool petrel__h1c_started(const petrel__h1c_t *c)
{
    return c->started;
}

bool petrel__h1c_paused(const petrel__h1c_t *c)
{
    return llhttp_get_errno(&c->parser) == HPE_PAUSED;
}

/* Host, Content-Length, Transfer-Encoding, Connection, Keep-Alive, TE,
 * Trailer, Upgrade, Proxy-Connection: by length first. */
static bool hop_by_hop(const petrel_str_t *n)
{
    switch (n->len) {
    case 2:
        return is(n, "te");
    case 4:
        return is(n, "host");
    case 7:
        return is(n, "trailer") || is(n, "upgrade");
    case 10:
        return is(n, "connection") || is(n, "keep-alive");
    case 14:
        return is(n, "content-length");
    case 16:
        return is(n, "proxy-connection");
    case 17:
        return is(n, "transfer-encoding");
    }
    return false;
}

bool petrel__h1c_field_ok(const petrel_header_t *f)
{
    if (!petrel__all_of(f->name.ptr, f->name.len, PETREL__CC_TCHAR) || hop_by_hop(&f->name))
        return false;
    /* three memchr() (vector code) cost less than a test of each byte */
    const char *v = f->value.ptr;
    size_t n = f->value.len;
    return !memchr(v, '\r', n) && !memchr(v, '\n', n) && !memchr(v, '\0', n);
}

size_t petrel__h1c_head_size(const char *method, const char *target, const char *host,
                             const petrel_header_t *fields, size_t n)
{
    size_t z = strlen(method) + strlen(target) + strlen(host) + 64 + 40;
    for (size_t i = 0; i < n; i++)
        z += fields[i].name.len + fields[i].value.len + 4;
    return z;
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

long petrel__h1c_head(char *buf, size_t cap, const char *method, const char *target,
                      const char *host, const petrel_header_t *fields, size_t n, size_t body_len,
                      bool send_length)
{
    if (cap < petrel__h1c_head_size(method, target, host, fields, n))
        return -1;
    char *p = buf;
    p = put(p, method, strlen(method));
    *p++ = ' ';
    p = put(p, target, strlen(target));
    p = put(p, " HTTP/1.1\r\nHost: ", 17);
    p = put(p, host, strlen(host));
    p = put(p, "\r\n", 2);
    for (size_t i = 0; i < n; i++) {
        p = put(p, fields[i].name.ptr, fields[i].name.len);
        p = put(p, ": ", 2);
        p = put(p, fields[i].value.ptr, fields[i].value.len);
        p = put(p, "\r\n", 2);
    }
    if (send_length) {
        p = put(p, "Content-Length: ", 16);
        p = petrel__put_u64(p, body_len);
        p = put(p, "\r\n", 2);
    }
    p = put(p, "\r\n", 2);
    return (long)(p - buf);
}
