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
 * The request body is forwarded as it arrives (the mount's routes take it
 * in parts, PETREL_BODY_STREAM), with the client's framing kept: a body of
 * known length up to 64 KiB is gathered first and sent with the request
 * (one write, and a call that may be sent again); a larger one, or one of
 * unknown length, goes into a call that takes it in parts
 * (petrel_call_stream()), the client's reads paused while the call holds
 * 64 KiB unsent.
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
    petrel_call_spec_t spec; /* what to send (its strings in the request's arena) */
    /* the request body: gathered whole (small, of known length) before
     * the call, or streamed into it */
    char *in;
    size_t in_len, in_cap;
    bool streamed;    /* the call takes the body as it arrives */
    bool body_paused; /* the client's body waits for the call's buffer */
    bool body_done;   /* the client's body has ended (or failed) */
} fwd_t;

/* ------------------------------------------------------------------------ */
/* Fields                                                                    */

/* Does n equal `lit` of length l, in any case?  `lit` is a field name in
 * lowercase: letters, digits and '-', each with bit 0x20 set, so setting
 * that bit in n's bytes lowercases its letters and leaves the others; of
 * what it could confuse, only control bytes, which no field name has
 * (the protocols refuse them), would compare equal: eight bytes at a
 * time. */
static bool name_eq(petrel_str_t n, const char *lit, size_t l)
{
    if (n.len != l)
        return false;
    size_t i = 0;
    for (; i + 8 <= l; i += 8) {
        uint64_t a, b;
        memcpy(&a, n.ptr + i, 8);
        memcpy(&b, lit + i, 8);
        if ((a | UINT64_C(0x2020202020202020)) != b)
            return false;
    }
    for (; i < l; i++)
        if (((unsigned char)n.ptr[i] | 0x20) != (unsigned char)lit[i])
            return false;
    return true;
}

#define NAME_IS(n, lit) name_eq(n, lit, sizeof(lit) - 1)

static bool name_is(petrel_str_t n, const char *lit)
{
    return name_eq(n, lit, strlen(lit));
}

/* The fields the proxy treats apart, by name: one test of the length, then
 * at most two comparisons, rather than a comparison with each name. */
enum {
    F_OTHER,
    /* RFC 9110 §7.6.1: hop-by-hop, or written by petrel on the next hop */
    F_CONNECTION,
    F_KEEP_ALIVE,
    F_PROXY_CONNECTION,
    F_TE,
    F_TRANSFER_ENCODING,
    F_UPGRADE,
    F_CONTENT_LENGTH,
    F_HTTP2_SETTINGS,
    F_HOP_LAST = F_HTTP2_SETTINGS,
    /* end-to-end, each with a rule of its own */
    F_HOST,
    F_VIA,
    F_X_FORWARDED_FOR,
    F_X_FORWARDED_PROTO,
    F_FORWARDED,
    F_EXPECT,
    F_COOKIE,
    F_DATE,
    F_SERVER,
    F_CONTENT_TYPE,
};

static int field_kind(petrel_str_t n)
{
    switch (n.len) {
    case 2:
        return NAME_IS(n, "te") ? F_TE : F_OTHER;
    case 3:
        return NAME_IS(n, "via") ? F_VIA : F_OTHER;
    case 4:
        return NAME_IS(n, "host") ? F_HOST : NAME_IS(n, "date") ? F_DATE : F_OTHER;
    case 6:
        return NAME_IS(n, "cookie")   ? F_COOKIE
               : NAME_IS(n, "expect") ? F_EXPECT
               : NAME_IS(n, "server") ? F_SERVER
                                      : F_OTHER;
    case 7:
        return NAME_IS(n, "upgrade") ? F_UPGRADE : F_OTHER;
    case 9:
        return NAME_IS(n, "forwarded") ? F_FORWARDED : F_OTHER;
    case 10:
        return NAME_IS(n, "connection")   ? F_CONNECTION
               : NAME_IS(n, "keep-alive") ? F_KEEP_ALIVE
                                          : F_OTHER;
    case 12:
        return NAME_IS(n, "content-type") ? F_CONTENT_TYPE : F_OTHER;
    case 14:
        return NAME_IS(n, "content-length")   ? F_CONTENT_LENGTH
               : NAME_IS(n, "http2-settings") ? F_HTTP2_SETTINGS
                                              : F_OTHER;
    case 15:
        return NAME_IS(n, "x-forwarded-for") ? F_X_FORWARDED_FOR : F_OTHER;
    case 16:
        return NAME_IS(n, "proxy-connection") ? F_PROXY_CONNECTION : F_OTHER;
    case 17:
        return NAME_IS(n, "x-forwarded-proto")   ? F_X_FORWARDED_PROTO
               : NAME_IS(n, "transfer-encoding") ? F_TRANSFER_ENCODING
                                                 : F_OTHER;
    }
    return F_OTHER;
}

/* The tokens of the Connection fields of a list of fields (RFC 9110 §7.6.1):
 * the names of more hop-by-hop fields.  In `arena`; *n of them. */
static petrel_str_t *connection_tokens(petrel_arena_t *arena, const petrel_header_t *h, size_t nh,
                                       size_t *n)
{
    size_t cap = 0;
    for (size_t i = 0; i < nh; i++)
        if (NAME_IS(h[i].name, "connection")) {
            cap++;
            for (const char *p = h[i].value.ptr; *p; p++)
                cap += *p == ',';
        }
    *n = 0;
    if (cap == 0)
        return NULL;
    petrel_str_t *t = petrel_arena_new(arena, petrel_str_t, cap);
    if (t == NULL)
        return NULL;
    for (size_t i = 0; i < nh; i++) {
        if (!NAME_IS(h[i].name, "connection"))
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
 * writes itself on the next hop; `kind` is field_kind(n). */
static bool hop_by_hop(petrel_str_t n, int kind, const petrel_str_t *tok, size_t ntok)
{
    if (kind != F_OTHER && kind <= F_HOP_LAST)
        return true;
    for (size_t i = 0; i < ntok; i++)
        if (n.len == tok[i].len && strncasecmp(n.ptr, tok[i].ptr, n.len) == 0)
            return true;
    return false;
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* "a, b" + ", " + add; the fields `name` of h in their order, then `add`
 * (of length alen; with none, a trailing `sep` the caller takes off). */
static char *joined(petrel_arena_t *a, const petrel_header_t *h, size_t nh, const char *name,
                    const char *sep, const char *add, size_t alen)
{
    size_t len = alen + 1, slen = strlen(sep);
    for (size_t i = 0; i < nh; i++)
        if (name_is(h[i].name, name))
            len += h[i].value.len + slen;
    char *out = petrel_arena_alloc(a, len, 1), *p = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < nh; i++) {
        if (!name_is(h[i].name, name) || h[i].value.len == 0)
            continue;
        p = put(p, h[i].value.ptr, h[i].value.len);
        p = put(p, sep, slen);
    }
    memcpy(p, add, alen + 1);
    return out;
}

/* The value of a field (its name a literal) appended to by petrel: the
 * received ones joined before `add` when there are any, else `add`. */
static petrel_header_t appended(petrel_arena_t *a, const petrel_header_t *h, size_t nh,
                                bool received, const char *name, const char *lname, const char *add,
                                size_t alen)
{
    petrel_header_t f = {{(char *)name, strlen(name)}, {(char *)add, alen}};
    if (received) {
        f.value.ptr = joined(a, h, nh, lname, ", ", add, alen);
        f.value.len = f.value.ptr ? strlen(f.value.ptr) : 0;
    }
    return f;
}

/* Whether a TE field's value lists "trailers". */
static bool has_trailers(petrel_str_t v)
{
    for (size_t i = 0; i + 8 <= v.len; i++)
        if (strncasecmp(v.ptr + i, "trailers", 8) == 0 &&
            (i == 0 || strchr(" ,\t", v.ptr[i - 1])) &&
            (i + 8 == v.len || strchr(" ,;\t", v.ptr[i + 8])))
            return true;
    return false;
}

/* RFC 9110 §7.6.3: the protocol of the hop received, and petrel. */
static petrel_str_t via_value(int version)
{
    if (version == 20)
        return (petrel_str_t){"2 petrel", 8};
    if (version == 10)
        return (petrel_str_t){"1.0 petrel", 10};
    return (petrel_str_t){"1.1 petrel", 10};
}

/* The Forwarded element of this hop (RFC 7239 §4): for= the client's
 * address (§6: an IPv6 address in brackets, quoted; not an IP: unknown),
 * proto=, and host= the request's authority as a quoted-string (RFC 9110
 * §5.6.4) when it has one.  In `a`; *len its length. */
static char *forwarded(petrel_arena_t *a, const char *peer, size_t plen, bool ip, bool v6,
                       petrel_str_t host, size_t *len)
{
    char *out = petrel_arena_alloc(
        a, sizeof("for=\"[]\";proto=http;host=\"\"") + plen + 2 * host.len + sizeof("unknown"), 1);
    if (out == NULL)
        return NULL;
    char *p = put(out, "for=", 4);
    if (!ip)
        p = put(p, "unknown", 7);
    else if (v6) {
        p = put(p, "\"[", 2);
        p = put(p, peer, plen);
        p = put(p, "]\"", 2);
    } else
        p = put(p, peer, plen);
    p = put(p, ";proto=http", 11);
    if (host.len) {
        p = put(p, ";host=\"", 7);
        for (size_t i = 0; i < host.len; i++) {
            if (host.ptr[i] == '"' || host.ptr[i] == '\\')
                *p++ = '\\';
            *p++ = host.ptr[i];
        }
        *p++ = '"';
    }
    *p = '\0';
    *len = (size_t)(p - out);
    return out;
}

/* The fields of the upstream request: the client's but the hop-by-hop ones
 * (and Host, which the call sets), the Cookie fields of HTTP/2 joined into
 * one (RFC 9113 §8.2.3), then Via, X-Forwarded-For, X-Forwarded-Proto and
 * Forwarded with the client's address, each after the ones received. */
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
    bool cookie = false, via = false, xff = false, fwd = false, te = false;
    for (size_t i = 0; i < nh; i++) {
        petrel_str_t name = h[i].name;
        int kind = field_kind(name);
        if (kind == F_TE) {
            /* the one TE that crosses: "trailers" (gRPC clients send it, gRPC
             * servers want it); the upstream client passes it on to an h2c
             * upstream only (RFC 9113 §8.2.2 allows it there) */
            if (!te && has_trailers(h[i].value))
                out[n++] = (petrel_header_t){{(char *)"TE", 2}, {(char *)"trailers", 8}};
            te = true;
            continue;
        }
        via |= kind == F_VIA;
        xff |= kind == F_X_FORWARDED_FOR;
        fwd |= kind == F_FORWARDED;
        if (name.len == 0 || name.ptr[0] == ':' || hop_by_hop(name, kind, tok, ntok) ||
            kind == F_HOST || kind == F_VIA || kind == F_X_FORWARDED_FOR ||
            kind == F_X_FORWARDED_PROTO || kind == F_FORWARDED ||
            kind == F_EXPECT) /* petrel answered it: the body is here */
            continue;
        if (u && (name_is(name, "sec-websocket-key") || name_is(name, "sec-websocket-version") ||
                  name_is(name, "sec-websocket-extensions")))
            continue; /* this hop's handshake: the upgrade's own fields */
        if (kind == F_COOKIE) {
            if (cookie)
                continue;
            cookie = true;
            char *c = joined(a, h, nh, "cookie", "; ", "", 0);
            if (c == NULL)
                return NULL;
            size_t cl = strlen(c);
            while (cl >= 2 && c[cl - 2] == ';' && c[cl - 1] == ' ')
                c[cl -= 2] = '\0';
            out[n++] = (petrel_header_t){{"Cookie", 6}, {c, cl}};
            continue;
        }
        out[n++] = h[i];
    }
    size_t plen = strlen(peer), flen = 0;
    bool ip = strcmp(peer, "unix") != 0, v6 = memchr(peer, ':', plen) != NULL;
    char *f = forwarded(a, peer, plen, ip, v6, req->authority, &flen);
    petrel_str_t v = via_value(req->version);
    out[n] = appended(a, h, nh, via, "Via", "via", v.ptr, v.len);
    out[n + 1] = appended(a, h, nh, xff, "X-Forwarded-For", "x-forwarded-for",
                          ip ? peer : "unknown", ip ? plen : 7);
    out[n + 2] = (petrel_header_t){{"X-Forwarded-Proto", 17}, {"http", 4}};
    out[n + 3] = appended(a, h, nh, fwd, "Forwarded", "forwarded", f ? f : "", flen);
    if (f == NULL || out[n].value.ptr == NULL || out[n + 1].value.ptr == NULL ||
        out[n + 3].value.ptr == NULL)
        return NULL;
    n += 4;
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
    if (st->body_paused) {
        /* the rest of the client's body has nowhere to go: petrel reads
         * it to its end and drops it */
        st->body_paused = false;
        petrel_body_pause(st->req, 0);
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

/* The response's fields for the client: the hop-by-hop ones left out, and
 * petrel's own (Date, Server), Via appended to (RFC 9110 §7.6.3).  The
 * fields are the call's, in the request's arena: not copied. */
static bool response_fields(fwd_t *st, const petrel_upstream_head_t *head)
{
    petrel_req_t *req = st->req;
    petrel_arena_t *a = req->arena;
    size_t ntok;
    petrel_str_t *tok = connection_tokens(a, head->headers, head->nheaders, &ntok);
    st->fields = petrel_arena_new(a, petrel_header_t, head->nheaders + 1);
    if (st->fields == NULL)
        return false;
    bool via = false;
    for (size_t i = 0; i < head->nheaders; i++) {
        const petrel_header_t *h = &head->headers[i];
        int kind = field_kind(h->name);
        via |= kind == F_VIA;
        if (hop_by_hop(h->name, kind, tok, ntok) || kind == F_VIA || kind == F_DATE ||
            kind == F_SERVER)
            continue;
        if (kind == F_CONTENT_TYPE) {
            if (st->type == NULL)
                st->type = h->value.ptr;
            continue;
        }
        st->fields[st->nfields++] = *h;
    }
    petrel_str_t v = via_value(head->version);
    petrel_header_t *f = &st->fields[st->nfields++];
    *f = appended(a, head->headers, head->nheaders, via, "Via", "via", v.ptr, v.len);
    return f->value.ptr != NULL;
}

/* The Content-Length of the response to a HEAD (that of the GET): -1 when
 * it has none, or not one valid value. */
static int64_t head_length(const petrel_upstream_head_t *head)
{
    int64_t len = -1;
    for (size_t i = 0; i < head->nheaders; i++) {
        if (!NAME_IS(head->headers[i].name, "content-length"))
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
    if (has_body && length >= 0 && req->method == PETREL_HEAD) {
        /* the Content-Length a GET would get, whatever its size (RFC 9110
         * §9.3.2): petrel sends the fields of a body of that length, and
         * no body (the protocols never read a HEAD response's bytes) */
        static const char none[1];
        st->whole = (char *)none;
        st->whole_len = (size_t)length;
        return;
    }
    if (has_body && length >= 0 && (uint64_t)length <= PETREL__PROXY_WHOLE) {
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
        if (!hop_by_hop(trailers[i].name, field_kind(trailers[i].name), tok, ntok))
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

/* ------------------------------------------------------------------------ */
/* The request body                                                          */

/* The call's buffer has room again: the client's body goes on. */
static void drained(petrel_call_t *call, void *data)
{
    (void)call;
    fwd_t *st = data;
    if (st->body_paused && !st->body_done) {
        st->body_paused = false;
        petrel_body_pause(st->req, 0);
    }
}

/* A part of the client's body, into the call.  The call may have ended
 * first (an upstream that answered without reading it all, or failed):
 * the rest is dropped, and the server reads it to its end. */
/* The client's body will not complete (too large, malformed, too slow, or
 * the client gone): the upstream must not take a request cut short as
 * whole (cancel closes its connection).  petrel answers the request itself
 * (413, 400, 408) or aborts it (on_abort lets it go): nothing of ours may
 * run after, not even an end already queued. */
static void body_failed(fwd_t *st)
{
    st->body_done = true;
    petrel_turn_work_del(&st->finish);
    if (st->end == END_NONE)
        st->end = END_CUT;
    if (st->call) {
        petrel_call_cancel(st->call);
        st->call = NULL;
    }
}

static void body_part(petrel_req_t *req, const void *ptr, size_t len, int end, void *data)
{
    fwd_t *st = data;
    if (end < 0) {
        body_failed(st);
        return;
    }
    if (end != 0)
        st->body_done = true;
    if (st->call == NULL || st->end != END_NONE)
        return;
    int rc = len ? petrel_call_write(st->call, ptr, len) : 1;
    if (rc == 0 && end == 0) {
        st->body_paused = true;
        petrel_body_pause(req, 1);
    }
    if (rc >= 0 && end == 1)
        rc = petrel_call_write_end(st->call);
    if (rc < 0 && rc != PETREL_ESTATE) {
        /* (PETREL_ESTATE: the call has ended or failed, and says so
         * through its own callbacks) */
        petrel_call_cancel(st->call);
        st->call = NULL;
        finish(st, END_STATUS, 502);
    }
}

static petrel_call_t *start_call(fwd_t *st, const petrel_call_spec_t *spec, int64_t stream_len)
{
    const mount_t *m = st->m;
    if (!st->streamed)
        return petrel_call(m->up, spec, &cbs, st);
    petrel_call_t *call = petrel_call_stream(m->up, spec, stream_len, &cbs, st);
    if (call)
        petrel_call_on_drain(call, drained);
    return call;
}

/* Registers the request's abort callback once the call exists: the client
 * library's (it cancels the call) runs from ours, which also lets the
 * request go.  A handler's return value. */
static int call_made(fwd_t *st)
{
    petrel_req_t *req = st->req;
    if (st->call == NULL)
        return 503;
    st->lib_abort = petrel_req_on_abort_get(req, &st->lib_abort_data);
    if (petrel_req_on_abort(req, on_abort, st) < 0) {
        petrel_call_cancel(st->call);
        st->call = NULL;
        return 503;
    }
    return PETREL_LATER;
}

/* A small body of known length, gathered whole, then the call with it:
 * one write to the upstream, and a call that may be sent again. */
static void body_gather(petrel_req_t *req, const void *ptr, size_t len, int end, void *data)
{
    fwd_t *st = data;
    if (end < 0) {
        body_failed(st);
        return;
    }
    if (st->end != END_NONE)
        return;
    if (len > st->in_cap - st->in_len) {
        finish(st, END_STATUS, 400); /* more than its declared length */
        return;
    }
    memcpy(st->in + st->in_len, ptr, len);
    st->in_len += len;
    if (end == 0)
        return;
    st->spec.body = st->in;
    st->spec.body_len = st->in_len;
    st->call = start_call(st, &st->spec, 0);
    if (call_made(st) != PETREL_LATER)
        finish(st, END_STATUS, 503);
    (void)req;
}

int petrel__proxy_forward(petrel_req_t *req, const mount_t *m, const petrel__proxy_upgrade_t *u)
{
    fwd_t *st = petrel_arena_calloc(req->arena, 1, sizeof(*st));
    if (st == NULL)
        return 503;
    st->req = req;
    st->m = m;
    petrel_turn_work_init(&st->finish, finish_run);
    if (u) {
        st->up_cb = u->cb;
        st->up_data = u->data;
    }
    /* What to send, checked before any of the body is read */
    size_t nfields = 0;
    st->spec = (petrel_call_spec_t){
        .method = u ? "GET" : req->method_name.ptr, /* RFC 8441's CONNECT too */
        .target = upstream_target(req, m),
        .authority = m->host_rewrite || req->authority.len == 0 ? NULL : req->authority.ptr,
        .headers = request_fields(req, &nfields, u),
        .req = req,
    };
    st->spec.nheaders = nfields;
    if (st->spec.target == NULL)
        return 400;
    if (st->spec.headers == NULL)
        return 503;
    /* The body as it arrives (the mount's routes stream): none, a small
     * one of known length gathered first, or a call that takes it in parts
     * with the client's framing (Content-Length, or chunked) kept. */
    int64_t blen = u ? 0 : petrel_body_length(req);
    if (blen > 0 && blen <= PETREL__PROXY_WHOLE) {
        st->in = petrel_arena_alloc(req->arena, (size_t)blen, 1);
        st->in_cap = (size_t)blen;
        if (st->in == NULL)
            return 503;
        if (petrel_body_read(req, body_gather, st) < 0)
            return 500;
        /* the call is made when the body has arrived; until then the
         * request's abort lets it go */
        if (petrel_req_on_abort(req, on_abort, st) < 0)
            return 503;
        return PETREL_LATER;
    }
    st->streamed = blen != 0;
    st->call = u ? petrel_call_upgrade(m->up, &st->spec, u->protocol, &cbs, on_upgrade, st)
                 : start_call(st, &st->spec, blen);
    int rc = call_made(st);
    if (rc == PETREL_LATER && st->streamed && petrel_body_read(req, body_part, st) < 0) {
        petrel_call_cancel(st->call);
        st->call = NULL;
        finish(st, END_STATUS, 500);
    }
    return rc;
}
