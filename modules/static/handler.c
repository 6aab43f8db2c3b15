/*
 * handler.c -- the request handler of a static mount.
 *
 * The request path comes from the router percent-decoded and with its dot
 * segments resolved (a path above "/" was refused with 400).  The part after
 * the prefix is the key of the worker's cache (cache.c), which resolves it
 * beneath the root (resolve.c).  A file is answered with the HTTP semantics
 * of <petrel.h>, as any module can: the precompressed variant chosen from
 * Accept-Encoding, then the preconditions (304, 412), then Range and
 * If-Range (206, 416).  Its bytes come from memory or from the cached
 * descriptor (sendfile on HTTP/1.1), and the response holds a reference to
 * the entry until it has been written.
 */
#include "static.h"

#include <stdio.h>
#include <string.h>

typedef petrel__static_mount_t mount_t;
typedef petrel__static_entry_t entry_t;
typedef petrel__static_cache_t cache_t;

/* clang-format off */
static const uint8_t uri_plain[256] = {
    ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1,
    ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
    ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['@'] = 1, ['/'] = 1,
};
/* clang-format on */

size_t petrel__static_uri_encode(const char *in, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (uri_plain[c]) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

/* 301 to the path with a slash added, the query kept. */
static int redirect_slash(petrel_req_t *req)
{
    size_t n = req->path.len;
    char *loc = petrel_arena_alloc(req->arena, 3 * n + 3 + req->query.len, 1);
    if (loc == NULL)
        return 503;
    size_t o = petrel__static_uri_encode(req->path.ptr, n, loc);
    loc[o++] = '/';
    if (req->query.len) {
        loc[o++] = '?';
        memcpy(loc + o, req->query.ptr, req->query.len);
        o += req->query.len;
    }
    loc[o] = '\0';
    if (petrel_resp_header(req, "Location", loc) < 0)
        return 400;
    return 301;
}

static void release_cb(void *p)
{
    petrel__static_entry_release(p);
}

/* The precompressed variant of `e` to send, with a reference, or NULL (the
 * entry itself).  Sets *enc to its Content-Encoding. */
static entry_t *pick_variant(petrel_req_t *req, cache_t *c, const entry_t *e, uint64_t now,
                             const char **enc)
{
    static const char *const names[] = {"br", "gzip"};
    static const char *const ext[] = {".br", ".gz"};
    const char *avail[2];
    int which[2];
    size_t n = 0;
    if (e->variants & PETREL__ENC_BR)
        avail[n] = names[0], which[n++] = 0;
    if (e->variants & PETREL__ENC_GZIP)
        avail[n] = names[1], which[n++] = 1;
    int pick = petrel_accept_encoding(petrel_req_header(req, "accept-encoding"), avail, n);
    if (pick < 0 || e->fslen + 3 > REL_MAX)
        return NULL;
    char key[REL_MAX + 4];
    memcpy(key, e->fspath, e->fslen);
    memcpy(key + e->fslen, ext[which[pick]], 3);
    entry_t *v = petrel__static_cache_get(c, key, e->fslen + 3, now);
    if (v && v->kind == K_FILE) {
        *enc = names[which[pick]];
        return v;
    }
    if (v)
        petrel__static_entry_release(v);
    return NULL;
}

/* Serve a file entry; consumes the caller's reference to `e`. */
static int serve_file(petrel_req_t *req, const mount_t *m, cache_t *c, entry_t *e, uint64_t now)
{
    entry_t *b = e; /* the representation sent: e or a precompressed variant */
    const char *enc = NULL;
    if (e->variants) {
        entry_t *v = pick_variant(req, c, e, now, &enc);
        if (v)
            b = v;
    }
    const char *type = e->type;
    bool vary = e->variants != 0;
    if (b != e)
        petrel__static_entry_release(e); /* type is not e's: it outlives e */

    petrel_conditions_t cond;
    petrel_req_conditions(req, &cond);
    int rc = 0, status = 200;
    int pre = petrel_preconditions(&cond, b->etag, b->mtime);
    if (pre == 412) {
        rc = 412;
        goto done;
    }
    petrel_range_t r = {0, b->size};
    char crange[72];
    if (pre == 0 && cond.range) {
        int s = petrel_range_select(&cond, b->size, b->etag, b->mtime, &r);
        if (s == 416) {
            snprintf(crange, sizeof(crange), "bytes */%llu", (unsigned long long)b->size);
            petrel_resp_header(req, "Content-Range", crange);
            rc = 416;
            goto done;
        }
        if (s == 206) {
            status = 206;
            snprintf(crange, sizeof(crange), "bytes %llu-%llu/%llu", (unsigned long long)r.off,
                     (unsigned long long)(r.off + r.len - 1), (unsigned long long)b->size);
        }
    }
    if (petrel_resp_header(req, "Last-Modified", b->last_modified) < 0 ||
        petrel_resp_header(req, "ETag", b->etag) < 0 ||
        (m->cache_control && petrel_resp_header(req, "Cache-Control", m->cache_control) < 0) ||
        (vary && petrel_resp_header(req, "Vary", "Accept-Encoding") < 0) ||
        (enc && petrel_resp_header(req, "Content-Encoding", enc) < 0)) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    if (pre == 304) {
        rc = petrel_send(req, 304, NULL, NULL, 0);
        goto done;
    }
    if (petrel_resp_header(req, "Accept-Ranges", "bytes") < 0 ||
        (status == 206 && petrel_resp_header(req, "Content-Range", crange) < 0)) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    /* The body refers to the entry (its bytes or its descriptor) until the
     * response has been written: the reference goes with the request. */
    if (petrel_arena_defer(req->arena, release_cb, b) < 0) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    if (b->data)
        return petrel_send(req, status, type, b->data + r.off, (size_t)r.len);
    return petrel_send_fd(req, status, type, b->fd, (off_t)r.off, (size_t)r.len, 0);
done:
    petrel__static_entry_release(b);
    return rc;
}

int petrel__static_handle(petrel_req_t *req, void *data)
{
    mount_t *m = data;
    const char *path = req->path.ptr;
    size_t plen = req->path.len;
    if (unlikely(plen < m->plen || memcmp(path, m->prefix, m->plen) != 0)) {
        /* the route of the prefix without its slash */
        if (plen + 1 == m->plen && memcmp(path, m->prefix, plen) == 0)
            return redirect_slash(req);
        return 404;
    }
    const char *rel = path + m->plen;
    size_t rlen = plen - m->plen;
    if (unlikely(rlen > REL_MAX))
        return 414;
    if (unlikely(memchr(rel, '\\', rlen) || memchr(rel, '\0', rlen)))
        return 400;
    cache_t *c = petrel__static_cache_of(m);
    if (unlikely(c == NULL))
        return 503;
    uint64_t now = petrel__static_now_ms();
    entry_t *e = petrel__static_cache_get(c, rel, rlen, now);
    if (unlikely(e == NULL))
        return 503;
    if (likely(e->kind == K_FILE))
        return serve_file(req, m, c, e, now);
    int kind = e->kind;
    petrel__static_entry_release(e);
    switch (kind) {
    case K_DIR:
        return redirect_slash(req);
    case K_NOINDEX:
        return m->autoindex ? petrel__static_listing(req, m, rel, rlen) : 404;
    case K_FORBIDDEN:
        return 403;
    default:
        return 404;
    }
}
