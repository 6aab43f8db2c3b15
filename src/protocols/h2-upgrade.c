/*
 * h2-upgrade.c -- HTTP/1.1's `Upgrade: h2c` (RFC 7540 §3.2): the 101, the
 * session started with the client's HTTP2-Settings, and the request made
 * stream 1 of it.  Reached through the connection set's upgrade (cs->upgrade, h2.h).
 */
#include "protocols/h2-int.h"

#include "protocols/http1.h"

/* RFC 4648 §5 base64url (the HTTP2-Settings token68), '=' padding allowed. */
static ssize_t b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        int v;
        if (ch >= 'A' && ch <= 'Z')
            v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z')
            v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9')
            v = ch - '0' + 52;
        else if (ch == '-' || ch == '+')
            v = 62;
        else if (ch == '_' || ch == '/')
            v = 63;
        else if (ch == '=')
            break;
        else
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)o;
}

static bool has_token(const char *list, const char *tok)
{
    return petrel__list_has_token(list, strlen(list), tok, strlen(tok));
}

static bool copy_str(h2stream_t *s, petrel_str_t *dst, const petrel_str_t *src)
{
    if (src->ptr == NULL) {
        dst->ptr = NULL;
        dst->len = 0;
        return true;
    }
    dst->ptr = petrel__h2_scratch_dup(s, (const uint8_t *)src->ptr, src->len);
    dst->len = src->len;
    return dst->ptr != NULL;
}

/*
 * RFC 7540 §3.2 (h2c upgrade): `req` is a complete HTTP/1.1 request with
 * `Upgrade: h2c`, one HTTP2-Settings and `Connection: Upgrade,
 * HTTP2-Settings`.  Answer 101, start the session with the client's
 * settings, and make the request stream 1 (half-closed remote) of it.  The
 * HTTP/1.1 request scope is ended here; the bytes after the request are
 * the client's preface.  Returns PETREL_ENOTFOUND (nothing done: HTTP/1.1
 * goes on) when the request is not a valid h2c upgrade.
 */
int petrel__h2_upgrade(petrel_req_t *req)
{
    petrel__conn_t *c = petrel__http1_conn(req);
    if (c == NULL)
        return PETREL_ENOTFOUND;
    const char *up = NULL, *conn = NULL, *settings = NULL;
    int nsettings = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        petrel_header_t *hd = &req->headers[i];
        if (petrel__str_ieq(hd->name.ptr, hd->name.len, "upgrade", 7))
            up = hd->value.ptr;
        else if (petrel__str_ieq(hd->name.ptr, hd->name.len, "connection", 10))
            conn = hd->value.ptr;
        else if (petrel__str_ieq(hd->name.ptr, hd->name.len, "http2-settings", 14)) {
            settings = hd->value.ptr;
            nsettings++;
        }
    }
    if (req->version != 11 || c->cs->draining || up == NULL || !has_token(up, "h2c") ||
        nsettings != 1 || conn == NULL || !has_token(conn, "upgrade") ||
        !has_token(conn, "http2-settings"))
        return PETREL_ENOTFOUND;
    uint8_t payload[256];
    ssize_t plen = b64url_decode(settings, strlen(settings), payload, sizeof(payload));
    if (plen < 0 || plen % 6)
        return PETREL_ENOTFOUND; /* answered as HTTP/1.1 */

    /* First the request, out of the HTTP/1.1 scope into a stream slot (held
     * by a stand-in connection state until the session exists). */
    h2conn_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.c = c;
    list_init(&tmp.streams);
    h2stream_t *s = petrel__h2_stream_new(&tmp, 1);
    if (s == NULL)
        return PETREL_ENOTFOUND;
    petrel_req_t *r = &s->req;
    r->method = req->method;
    r->version = req->version; /* received as HTTP/1.1, answered over h2 */
    if (!copy_str(s, &r->method_name, &req->method_name) ||
        !copy_str(s, &r->target, &req->target) || !copy_str(s, &r->path, &req->path) ||
        !copy_str(s, &r->query, &req->query) || !copy_str(s, &r->authority, &req->authority))
        goto fallback;
    for (size_t i = 0; i < req->nheaders; i++) {
        petrel_header_t *hd = &req->headers[i];
        if (petrel__str_ieq(hd->name.ptr, hd->name.len, "connection", 10) ||
            petrel__str_ieq(hd->name.ptr, hd->name.len, "upgrade", 7) ||
            petrel__str_ieq(hd->name.ptr, hd->name.len, "http2-settings", 14) ||
            petrel__str_ieq(hd->name.ptr, hd->name.len, "keep-alive", 10))
            continue; /* hop-by-hop: not part of the request on stream 1 */
        if (r->nheaders == s->hdr_cap) {
            size_t ncap = (size_t)s->hdr_cap * 2;
            petrel_header_t *nh = petrel_arena_alloc(&s->arena, ncap * sizeof(*nh), 0);
            if (nh == NULL)
                goto fallback;
            memcpy(nh, r->headers, r->nheaders * sizeof(*nh));
            r->headers = nh;
            s->hdr_cap = (uint16_t)ncap;
        }
        petrel_header_t *d = &r->headers[r->nheaders];
        if (!copy_str(s, &d->name, &hd->name) || !copy_str(s, &d->value, &hd->value))
            goto fallback;
        petrel__h2_lower(&d->name);
        r->nheaders++;
    }
    if (req->body.len) {
        char *b = petrel_arena_alloc(&s->arena, req->body.len + 1, 1);
        if (b == NULL)
            goto fallback;
        memcpy(b, req->body.ptr, req->body.len);
        r->body.ptr = b;
        r->body.len = req->body.len;
    }
    s->flags |= PETREL__H2S_HEAD_DONE | PETREL__H2S_REQ_DONE;

    h2conn_t *h = petrel__h2_session_new(c);
    if (h == NULL)
        goto fail;
    if (nghttp2_session_upgrade2(h->ngh, payload, (size_t)plen, r->method == PETREL_HEAD, s) != 0 ||
        petrel__http1_upgrade(req, "h2c", NULL, 0, &petrel__h2_ops, h) < 0) {
        petrel__h2_session_free(h);
        goto fail;
    }
    list_unlink(&s->link);
    list_append(&h->streams, &s->link);
    s->h = h; /* (stream 1's user data: nghttp2_session_upgrade2) */
    h->max_seen = h->scan_max = 1;
    h->opened = 1;
    h->nstreams++;
    /* Stream 1 is answered once the client's preface has arrived (the next
     * feed dispatches it): a response sent with the 101 may not fit in what
     * a client buffers after it (curl keeps 32 KiB).  HTTP/1.1 switches the
     * connection to h2_start once this returns. */
    petrel__h2_make_ready(h, s);
    return 0;
fail:
    petrel__h2_stream_free(s);
    return PETREL_ENOMEM; /* http1.c closes the connection */
fallback:
    petrel__h2_stream_free(s); /* answered as HTTP/1.1 */
    return PETREL_ENOTFOUND;
}
