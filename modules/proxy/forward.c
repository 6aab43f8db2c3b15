/*
 * forward.c -- one request forwarded to an upstream, its response back.
 *
 * The upstream request is made by petrel's upstream client from the parsed
 * request (method, target, fields, body): the client's bytes are never
 * copied through, so whatever framing the client tried, the upstream sees
 * one well-formed request or none.  The fields are filtered both ways
 * (RFC 9110 §7.6.1: Connection, the fields it names and the other
 * hop-by-hop fields go; §7.6.3: Via is added), and the client's address is
 * passed on (X-Forwarded-For, X-Forwarded-Proto, Forwarded of RFC 7239).
 *
 * The response is streamed to the client as it arrives, with backpressure:
 * past the mount's buffer of bytes waiting for the client the call is
 * paused, and resumed when half of them are written.  What ends the
 * request (the end of the body, a failure, a status of our own) is done
 * from the end of the loop turn, out of the client's callbacks: ending the
 * request frees its arena, where the call lives.
 */
#ifndef PETREL_BUILTIN_MODULE
#define PETREL_BUILTIN_MODULE 1
#endif
#include "proxy.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef petrel__proxy_mount_t mount_t;

/* A response body up to this size, of known length, is sent whole (with
 * its Content-Length) rather than streamed. */
#define PETREL__PROXY_WHOLE 65536

/* How a forwarded request ends, at the end of the loop turn. */
enum { END_NONE, END_STREAM, END_CUT, END_STATUS, END_WHOLE };

typedef struct fwd {
    petrel_req_t *req;
    const mount_t *m;
    petrel_call_t *call;       /* NULL once its last callback ran, or cancelled */
    petrel_abort_cb lib_abort; /* the upstream client's, called from ours */
    void *lib_abort_data;
    petrel_turn_work_t finish;
    int end;    /* END_*, set once */
    int status; /* END_STATUS: what to answer */
    unsigned retry_after;
    bool started; /* the streamed response has begun */
    bool paused;
    /* the response's head, for the client */
    const char *type;
    petrel_header_t *fields;
    size_t nfields;
    /* a small body of known length, gathered whole: END_WHOLE */
    char *whole;
    size_t whole_cap, whole_len;
    /* an upgrade (websocket.c): who takes a 101 */
    petrel_upgrade_cb up_cb;
    void *up_data;
} fwd_t;

/* ------------------------------------------------------------------------ */
/* Fields                                                                    */

static bool name_is(petrel_str_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n.len == l && strncasecmp(n.ptr, lit, l) == 0;
}

/* The tokens of the Connection fields of a list of fields (RFC 9110 §7.6.1):
 * the names of more hop-by-hop fields.  In `arena`; *n of them. */
static petrel_str_t *connection_tokens(petrel_arena_t *arena, const petrel_header_t *h, size_t nh,
                                       size_t *n)
{
    size_t cap = 0;
    for (size_t i = 0; i < nh; i++)
        if (name_is(h[i].name, "connection"))
            for (const char *p = h[i].value.ptr; *p; p++)
                cap += *p == ',';
    for (size_t i = 0; i < nh; i++)
        cap += name_is(h[i].name, "connection");
    *n = 0;
    if (cap == 0)
        return NULL;
    petrel_str_t *t = petrel_arena_new(arena, petrel_str_t, cap);
    if (t == NULL)
        return NULL;
    for (size_t i = 0; i < nh; i++) {
        if (!name_is(h[i].name, "connection"))
            continue;
        const char *p = h[i].value.ptr;
        while (*p) {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            const char *s = p;
            while (*p && *p != ',')
                p++;
            const char *e = p;
            while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            if (e > s && *n < cap)
                t[(*n)++] = (petrel_str_t){(char *)s, (size_t)(e - s)};
        }
    }
    return t;
}

/* A field that does not cross a proxy (RFC 9110 §7.6.1), or that petrel
 * writes itself on the next hop. */
static bool hop_by_hop(petrel_str_t n, const petrel_str_t *tok, size_t ntok)
{
    static const char *const fixed[] = {
        "connection", "keep-alive",     "proxy-connection", "te", "transfer-encoding",
        "upgrade",    "content-length", "http2-settings",   NULL,
    };
    for (const char *const *f = fixed; *f; f++)
        if (name_is(n, *f))
            return true;
    for (size_t i = 0; i < ntok; i++)
        if (n.len == tok[i].len && strncasecmp(n.ptr, tok[i].ptr, n.len) == 0)
            return true;
    return false;
}

/* "a, b" + ", " + add; the fields `name` of h in their order, then `add`. */
static char *joined(petrel_arena_t *a, const petrel_header_t *h, size_t nh, const char *name,
                    const char *sep, const char *add)
{
    size_t len = strlen(add) + 1;
    for (size_t i = 0; i < nh; i++)
        if (name_is(h[i].name, name))
            len += h[i].value.len + strlen(sep);
    char *out = petrel_arena_alloc(a, len, 1), *p = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < nh; i++) {
        if (!name_is(h[i].name, name) || h[i].value.len == 0)
            continue;
        memcpy(p, h[i].value.ptr, h[i].value.len);
        p += h[i].value.len;
        if (*add) {
            memcpy(p, sep, strlen(sep));
            p += strlen(sep);
        }
    }
    strcpy(p, add);
    return out;
}

static const char *via_version(int version)
{
    return version == 20 ? "2" : version == 10 ? "1.0" : "1.1";
}

/* A quoted-string of RFC 9110 §5.6.4. */
static char *quoted(petrel_arena_t *a, const char *s)
{
    size_t n = strlen(s);
    char *q = petrel_arena_alloc(a, 2 * n + 3, 1), *p = q;
    if (q == NULL)
        return NULL;
    *p++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            *p++ = '\\';
        *p++ = *s;
    }
    *p++ = '"';
    *p = '\0';
    return q;
}

static petrel_header_t field(const char *name, const char *value)
{
    return (petrel_header_t){{(char *)name, strlen(name)}, {(char *)value, strlen(value)}};
}

/* The fields of the upstream request: the client's but the hop-by-hop ones
 * (and Host, which the call sets), the Cookie fields of HTTP/2 joined into
 * one (RFC 9113 §8.2.3), then Via, X-Forwarded-For, X-Forwarded-Proto and
 * Forwarded with the client's address. */
static petrel_header_t *request_fields(petrel_req_t *req, size_t *count,
                                       const petrel__proxy_upgrade_t *u)
{
    petrel_arena_t *a = req->arena;
    const petrel_header_t *h = req->headers;
    size_t nh = req->nheaders, ntok;
    petrel_str_t *tok = connection_tokens(a, h, nh, &ntok);
    petrel_header_t *out = petrel_arena_new(a, petrel_header_t, nh + 5 + (u ? u->nfields : 0));
    const char *peer = petrel_req_peer(req);
    if (out == NULL || peer == NULL)
        return NULL;
    size_t n = 0;
    bool cookie = false;
    for (size_t i = 0; i < nh; i++) {
        petrel_str_t name = h[i].name;
        if (name.len == 0 || name.ptr[0] == ':' || hop_by_hop(name, tok, ntok) ||
            name_is(name, "host") || name_is(name, "via") || name_is(name, "x-forwarded-for") ||
            name_is(name, "x-forwarded-proto") || name_is(name, "forwarded") ||
            name_is(name, "expect")) /* petrel answered it: the body is here */
            continue;
        if (u && (name_is(name, "sec-websocket-key") || name_is(name, "sec-websocket-version") ||
                  name_is(name, "sec-websocket-extensions")))
            continue; /* this hop's handshake: the upgrade's own fields */
        if (name_is(name, "cookie")) {
            if (cookie)
                continue;
            cookie = true;
            char *c = joined(a, h, nh, "cookie", "; ", "");
            if (c == NULL)
                return NULL;
            size_t cl = strlen(c);
            while (cl >= 2 && c[cl - 2] == ';' && c[cl - 1] == ' ')
                c[cl -= 2] = '\0';
            out[n++] = field("Cookie", c);
            continue;
        }
        out[n++] = h[i];
    }
    /* RFC 9110 §7.6.3 */
    char *via = petrel_arena_printf(a, "%s petrel", via_version(req->version));
    /* RFC 7239 §6: an IPv6 address in brackets, quoted; not an IP: unknown */
    bool v6 = strchr(peer, ':') != NULL, ip = strcmp(peer, "unix") != 0;
    char *node = !ip ? "unknown" : v6 ? petrel_arena_printf(a, "\"[%s]\"", peer) : (char *)peer;
    char *host = req->authority.len ? quoted(a, req->authority.ptr) : NULL;
    char *fwd = node ? petrel_arena_printf(a, "for=%s;proto=http%s%s", node, host ? ";host=" : "",
                                           host ? host : "")
                     : NULL;
    if (via == NULL || fwd == NULL)
        return NULL;
    const char *v = joined(a, h, nh, "via", ", ", via);
    const char *x = joined(a, h, nh, "x-forwarded-for", ", ", ip ? peer : "unknown");
    const char *f = joined(a, h, nh, "forwarded", ", ", fwd);
    if (v == NULL || x == NULL || f == NULL)
        return NULL;
    out[n++] = field("Via", v);
    out[n++] = field("X-Forwarded-For", x);
    out[n++] = field("X-Forwarded-Proto", "http");
    out[n++] = field("Forwarded", f);
    for (size_t i = 0; u && i < u->nfields; i++)
        out[n++] = u->fields[i];
    *count = n;
    return out;
}

/* The upstream request's target: origin-form (from an absolute-form
 * target, its path and query), without the mount's prefix when it strips
 * it.  NULL: a target that does not start with the prefix as written
 * (percent-encoded in it): 400. */
static const char *upstream_target(petrel_req_t *req, const mount_t *m)
{
    const char *t = req->target.ptr;
    if (t[0] != '/') {
        const char *s = strstr(t, "://");
        if (s == NULL)
            return NULL;
        t = s + 3 + strcspn(s + 3, "/?");
        if (*t != '/')
            t = petrel_arena_printf(req->arena, "/%s", t);
        if (t == NULL)
            return NULL;
    }
    if (!m->strip || m->plen == 0)
        return t;
    if (strncmp(t, m->prefix, m->plen) != 0 ||
        (t[m->plen] != '\0' && t[m->plen] != '/' && t[m->plen] != '?'))
        return NULL;
    t += m->plen;
    if (*t == '/')
        return t;
    return petrel_arena_printf(req->arena, "/%s", t);
}

/* ------------------------------------------------------------------------ */
/* Ending                                                                    */

/* The fields for the client, once its response starts (a field petrel
 * refuses, one it writes itself, is left out). */
static void add_fields(fwd_t *st)
{
    for (size_t i = 0; i < st->nfields; i++)
        petrel_resp_header(st->req, st->fields[i].name.ptr, st->fields[i].value.ptr);
}

/* End of the loop turn: end the request as decided (the call is over or
 * cancelled by then).  `req` and this state go with it. */
static void finish_run(petrel_turn_work_t *w)
{
    fwd_t *st = (fwd_t *)((char *)w - offsetof(fwd_t, finish));
    petrel_req_t *req = st->req;
    if (st->call) {
        petrel_call_cancel(st->call);
        st->call = NULL;
    }
    switch (st->end) {
    case END_STREAM:
        petrel_stream_end(req);
        break;
    case END_CUT:
        petrel_stream_abort(req);
        break;
    case END_WHOLE:
        add_fields(st);
        petrel_send(req, st->status, st->type, st->whole, st->whole_len);
        break;
    case END_STATUS:
        if (st->started) {
            petrel_stream_abort(req);
            break;
        }
        if (st->retry_after) {
            char ra[16];
            snprintf(ra, sizeof(ra), "%u", st->retry_after);
            petrel_resp_header(req, "Retry-After", ra);
        }
        petrel_send_status(req, st->status);
        break;
    }
}

static void finish(fwd_t *st, int end, int status)
{
    if (st->end != END_NONE)
        return;
    st->end = end;
    if (end == END_STATUS)
        st->status = status;
    if (st->call && !st->paused) {
        petrel_call_pause(st->call, 1); /* nothing more until the end of the turn */
        st->paused = true;
    }
    petrel_turn_work_add(&st->finish);
}

/* The client went away: the call is cancelled (by the client library's own
 * abort callback when it has one, else here), then the request let go. */
static void on_abort(petrel_req_t *req, void *data)
{
    fwd_t *st = data;
    petrel_turn_work_del(&st->finish);
    if (st->call) {
        if (st->lib_abort)
            st->lib_abort(req, st->lib_abort_data);
        else
            petrel_call_cancel(st->call);
        st->call = NULL;
    }
    if (st->started)
        petrel_stream_end(req); /* PETREL_EIO: lets go */
    else
        petrel_send_status(req, 502); /* PETREL_EIO: lets go */
}

/* ------------------------------------------------------------------------ */
/* The response                                                              */

/* The response's fields for the client, copied into the request's arena:
 * the hop-by-hop ones left out, and petrel's own (Date, Server), Via
 * appended to (RFC 9110 §7.6.3). */
static bool response_fields(fwd_t *st, const petrel_upstream_head_t *head)
{
    petrel_req_t *req = st->req;
    petrel_arena_t *a = req->arena;
    size_t ntok;
    petrel_str_t *tok = connection_tokens(a, head->headers, head->nheaders, &ntok);
    st->fields = petrel_arena_new(a, petrel_header_t, head->nheaders + 1);
    if (st->fields == NULL)
        return false;
    for (size_t i = 0; i < head->nheaders; i++) {
        const petrel_header_t *h = &head->headers[i];
        if (hop_by_hop(h->name, tok, ntok) || name_is(h->name, "via") || name_is(h->name, "date") ||
            name_is(h->name, "server"))
            continue;
        if (name_is(h->name, "content-type")) {
            if (st->type == NULL &&
                (st->type = petrel_arena_strndup(a, h->value.ptr, h->value.len)) == NULL)
                return false;
            continue;
        }
        petrel_header_t *f = &st->fields[st->nfields++];
        f->name.ptr = petrel_arena_strndup(a, h->name.ptr, h->name.len);
        f->value.ptr = petrel_arena_strndup(a, h->value.ptr, h->value.len);
        f->name.len = h->name.len;
        f->value.len = h->value.len;
        if (f->name.ptr == NULL || f->value.ptr == NULL)
            return false;
    }
    char *via = petrel_arena_printf(a, "%s petrel", head->version == 10 ? "1.0" : "1.1");
    const char *v = via ? joined(a, head->headers, head->nheaders, "via", ", ", via) : NULL;
    if (v == NULL)
        return false;
    st->fields[st->nfields++] = field("Via", v);
    return true;
}

/* The Content-Length of the response to a HEAD (that of the GET): -1 when
 * it has none, or not one valid value. */
static int64_t head_length(const petrel_upstream_head_t *head)
{
    int64_t len = -1;
    for (size_t i = 0; i < head->nheaders; i++) {
        if (!name_is(head->headers[i].name, "content-length"))
            continue;
        const char *v = head->headers[i].value.ptr;
        int64_t n = 0;
        if (*v == '\0' || len >= 0)
            return -1;
        for (; *v; v++) {
            if (*v < '0' || *v > '9' || n > INT64_MAX / 10 - 10)
                return -1;
            n = n * 10 + (*v - '0');
        }
        len = n;
    }
    return len;
}

static void on_head(petrel_call_t *call, const petrel_upstream_head_t *head, void *data)
{
    fwd_t *st = data;
    petrel_req_t *req = st->req;
    if (!response_fields(st, head)) {
        finish(st, END_STATUS, 503);
        return;
    }
    st->status = head->status;
    /* the upstream's address, for the request's line in the access log
     * (matched by the request id) */
    const char *addr = petrel_call_address(call);
    petrel_req_log(req, PETREL_LOG_DEBUG, "proxy %s %s: upstream %s: %d", req->method_name.ptr,
                   req->target.ptr, addr ? addr : "-", head->status);
    /* a small body of known length is gathered and sent whole, with its
     * Content-Length; the rest is streamed (chunked over HTTP/1.1) */
    bool has_body = head->status != 204 && head->status != 304;
    int64_t length = head->content_length;
    if (req->method == PETREL_HEAD)
        length = head_length(head); /* the client reports 0: no body follows */
    if (has_body && length >= 0 && (uint64_t)length <= PETREL__PROXY_WHOLE) {
        if (req->method == PETREL_HEAD) {
            /* the Content-Length a GET would get: petrel sends the fields
             * of a body of that length, and no body */
            static const char none[PETREL__PROXY_WHOLE];
            st->whole = (char *)none;
            st->whole_len = (size_t)length;
            return;
        }
        st->whole = petrel_arena_alloc(req->arena, (size_t)head->content_length + 1, 1);
        if (st->whole) {
            st->whole_cap = (size_t)head->content_length;
            return;
        }
    }
    add_fields(st);
    if (petrel_stream_begin(req, head->status, st->type) < 0) {
        finish(st, END_STATUS, 502);
        return;
    }
    st->started = true;
}

static void resume(petrel_req_t *req, void *data)
{
    (void)req;
    fwd_t *st = data;
    if (st->call && st->paused && st->end == END_NONE) {
        st->paused = false;
        petrel_call_pause(st->call, 0);
    }
}

static void on_body(petrel_call_t *call, const void *ptr, size_t len, void *data)
{
    fwd_t *st = data;
    petrel_req_t *req = st->req;
    if (st->end != END_NONE)
        return;
    if (st->whole) {
        if (len > st->whole_cap - st->whole_len) {
            finish(st, END_STATUS, 502); /* more than its Content-Length */
            return;
        }
        memcpy(st->whole + st->whole_len, ptr, len);
        st->whole_len += len;
        return;
    }
    if (!st->started)
        return;
    if (petrel_stream_write(req, ptr, len) < 0) {
        finish(st, END_STREAM, 0); /* the client is gone or cut off */
        return;
    }
    if (petrel_stream_buffered(req) > st->m->buffer && !st->paused) {
        petrel_call_pause(call, 1);
        st->paused = true;
        if (petrel_stream_on_drain(req, st->m->buffer / 2, resume, st) == 1)
            resume(req, st);
    }
}

static void on_end(petrel_call_t *call, const petrel_header_t *trailers, size_t ntrailers,
                   void *data)
{
    (void)call;
    fwd_t *st = data;
    st->call = NULL; /* its last callback */
    if (st->end != END_NONE)
        return;
    if (st->whole) {
        finish(st, END_WHOLE, 0);
        return;
    }
    if (!st->started) {
        finish(st, END_STATUS, 502);
        return;
    }
    size_t ntok;
    petrel_str_t *tok = connection_tokens(st->req->arena, trailers, ntrailers, &ntok);
    for (size_t i = 0; i < ntrailers; i++)
        if (!hop_by_hop(trailers[i].name, tok, ntok))
            petrel_resp_trailer(st->req, trailers[i].name.ptr, trailers[i].value.ptr);
    finish(st, END_STREAM, 0);
}

static void on_error(petrel_call_t *call, int error, const char *reason, void *data)
{
    fwd_t *st = data;
    const char *addr = petrel_call_address(call);
    st->call = NULL; /* its last callback */
    int status = 502;
    switch (error) {
    case PETREL_UPSTREAM_ECONNECT:
    case PETREL_UPSTREAM_EHEADER:
    case PETREL_UPSTREAM_ETIMEOUT:
        status = 504;
        break;
    case PETREL_UPSTREAM_EBREAKER:
        status = 503;
        st->retry_after = st->m->retry_after;
        break;
    case PETREL_UPSTREAM_EFULL:
        status = 503;
        st->retry_after = 1;
        break;
    }
    petrel_req_log(st->req, PETREL_LOG_WARN, "proxy %s %s: upstream %s: %s (%s)%s",
                   st->req->method_name.ptr, st->req->target.ptr, addr ? addr : "-",
                   petrel_upstream_strerror(error), reason ? reason : "",
                   st->started ? ": response cut" : "");
    finish(st, st->started ? END_CUT : END_STATUS, status);
}

static const petrel_call_cbs_t cbs = {on_head, on_body, on_end, on_error};

/* A 101: the call's last callback; the request is the upgrade's now. */
static void on_upgrade(petrel_call_t *call, const petrel_upstream_head_t *head, int fd,
                       const void *rest, size_t rest_len, void *data)
{
    fwd_t *st = data;
    st->call = NULL;
    st->up_cb(call, head, fd, rest, rest_len, st->up_data);
}

/* ------------------------------------------------------------------------ */

int petrel__proxy_handle(petrel_req_t *req, void *data)
{
    const mount_t *m = data;
    if (petrel__proxy_ws_wanted(req))
        return petrel__proxy_ws(req, m);
    return petrel__proxy_forward(req, m, NULL);
}

int petrel__proxy_forward(petrel_req_t *req, const mount_t *m, const petrel__proxy_upgrade_t *u)
{
    const char *target = upstream_target(req, m);
    if (target == NULL)
        return 400;
    size_t nfields = 0;
    petrel_header_t *fields = request_fields(req, &nfields, u);
    fwd_t *st = petrel_arena_calloc(req->arena, 1, sizeof(*st));
    if (fields == NULL || st == NULL)
        return 503;
    st->req = req;
    st->m = m;
    petrel_turn_work_init(&st->finish, finish_run);
    petrel_call_spec_t spec = {
        .method = u ? "GET" : req->method_name.ptr, /* RFC 8441's CONNECT too */
        .target = target,
        .authority = m->host_rewrite || req->authority.len == 0 ? NULL : req->authority.ptr,
        .headers = fields,
        .nheaders = nfields,
        .body = req->body.ptr,
        .body_len = req->body.len,
        .req = req,
    };
    if (u) {
        st->up_cb = u->cb;
        st->up_data = u->data;
    }
    st->call = u ? petrel_call_upgrade(m->up, &spec, u->protocol, &cbs, on_upgrade, st)
                 : petrel_call(m->up, &spec, &cbs, st);
    if (st->call == NULL)
        return 503;
    /* the client library's abort callback (it cancels the call) runs from
     * ours, which also lets the request go */
    st->lib_abort = petrel_req_on_abort_get(req, &st->lib_abort_data);
    if (petrel_req_on_abort(req, on_abort, st) < 0) {
        petrel_call_cancel(st->call);
        return 503;
    }
    return PETREL_LATER;
}
