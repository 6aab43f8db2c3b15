/*
 * h2-fields.c -- the request's fields, checked by petrel (RFC 9113 §8:
 * nghttp2's HTTP messaging layer is off, nghttp2_option_set_no_http_messaging):
 * each field in one pass as it is decoded (petrel__h2_on_header: names and
 * values with the byte classes HTTP/1.1 shares, petrel__cclass; the
 * pseudo-header fields, §8.3; connection-specific fields, §8.2.2;
 * content-length; RFC 9218's priority field), then the head as a whole
 * (petrel__h2_head_done: §8.3.1, §8.5, RFC 8441 §4, Host and :authority,
 * the path, cookies, Expect), and the body against content-length
 * (§8.1.1).  A request that breaks a rule is malformed: a stream error,
 * never passed on.  doc/conformance.md has the rules and their tests.
 */
#include "protocols/h2-int.h"

#include "framework/router.h"

#include <string.h>

/* RFC 9113 §8.1.1: a malformed request is a stream error of type
 * PROTOCOL_ERROR and is never passed on; the rest of its field block is
 * still decoded by nghttp2 (the HPACK state is the connection's). */
void petrel__h2_malformed(h2conn_t *h, h2stream_t *s, const char *why)
{
    petrel_log(PETREL_LOG_DEBUG, "h2: stream %d: malformed request (%s): PROTOCOL_ERROR", s->id,
               why);
    nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_PROTOCOL_ERROR);
    s->flags |= PETREL__H2S_MALFORMED | PETREL__H2S_DISCARD | PETREL__H2S_DISPATCHED;
    if (h->cur == s)
        h->cur = NULL;
}

static inline bool ows(uint8_t c)
{
    return c == ' ' || c == '\t';
}

/* RFC 9110 §5.5, RFC 9113 §8.2.1: a field value is VCHAR, SP, HTAB and
 * obs-text (no NUL, CR, LF or other control), and neither starts nor ends
 * with SP or HTAB.  Empty is a value. */
static inline bool value_ok(const uint8_t *v, size_t n)
{
    return n == 0 ||
           (!ows(v[0]) && !ows(v[n - 1]) && petrel__all_of((const char *)v, n, PETREL__CC_VALUE));
}

/* RFC 9218 §4: the priority field's urgency (u=0..7) and incremental (i,
 * i=?1, i=?0), into s->extpri; other members and parameters are ignored.
 * False when u or i is not one of these. */
static bool priority_parse(h2stream_t *s, const uint8_t *v, size_t n)
{
    unsigned u = 3, inc = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (ows(v[i]) || v[i] == ','))
            i++;
        size_t k = i;
        while (i < n && v[i] != ',' && v[i] != ';' && !ows(v[i]))
            i++;
        const uint8_t *m = v + k;
        size_t ml = i - k;
        if (ml == 3 && m[0] == 'u' && m[1] == '=' && m[2] >= '0' && m[2] <= '7')
            u = (unsigned)(m[2] - '0');
        else if (ml == 1 && m[0] == 'i')
            inc = 1;
        else if (ml == 4 && memcmp(m, "i=?", 3) == 0 && (m[3] == '0' || m[3] == '1'))
            inc = (unsigned)(m[3] - '0');
        else if (ml && (m[0] == 'u' || m[0] == 'i') && (ml == 1 || m[1] == '='))
            return false;
        while (i < n && v[i] != ',') /* a member's parameters */
            i++;
    }
    s->extpri = (uint8_t)(u | inc << 7);
    return true;
}

/* The checks of a value, for the cache of values known valid (vok). */
enum { V_FIELD = 1, V_HOST, V_TARGET, V_TOKEN };

void petrel__h2_values_drop(h2conn_t *h)
{
    for (unsigned i = 0; i < VCACHE; i++)
        if (h->vok[i]) {
            nghttp2_rcbuf_decref(h->vok[i]);
            h->vok[i] = NULL;
        }
}

/* Does the value, the request's field number i, pass the check `kind`?
 * Known when the same buffer passed it at the same place in the last
 * request (h->vok: what this relies on is said there). */
static inline __attribute__((always_inline)) bool
value_check(h2conn_t *h, unsigned i, nghttp2_rcbuf *rv, const uint8_t *v, size_t n, uint8_t kind)
{
    if (i < VCACHE && h->vok[i] == rv && h->vok_kind[i] == kind)
        return true;
    bool ok;
    switch (kind) {
    case V_HOST:
        ok = petrel__host_valid((const char *)v, n); /* no userinfo (§8.3.1) */
        break;
    case V_TARGET:
        /* (:path is never indexed by HPACK: it is not kept) */
        return petrel__all_of((const char *)v, n, PETREL__CC_TARGET);
    case V_TOKEN:
        ok = petrel__all_of((const char *)v, n, PETREL__CC_TCHAR);
        break;
    default:
        ok = value_ok(v, n);
    }
    if (ok && i < VCACHE && n <= VCACHE_MAX) {
        if (h->vok[i])
            nghttp2_rcbuf_decref(h->vok[i]);
        nghttp2_rcbuf_incref(rv);
        h->vok[i] = rv;
        h->vok_kind[i] = kind;
    }
    return ok;
}

/* A field of a request's head (or trailer section): checked here, where
 * nghttp2 checks nothing in petrel's mode (its HTTP messaging is off): the
 * rules of RFC 9113 §8.2 and §8.3 and the field syntax of RFC 9110 §5,
 * shared with HTTP/1.1 (petrel__cclass).  Kept in the stream's scratch. */
int petrel__h2_on_header(nghttp2_session *ngh, const nghttp2_frame *frame, nghttp2_rcbuf *rname,
                         nghttp2_rcbuf *rvalue, uint8_t flags, void *ud)
{
    (void)ngh, (void)frame, (void)flags;
    h2conn_t *h = ud;
    h2stream_t *s = h->cur;
    if (s == NULL || s->err)
        return 0;
    nghttp2_vec nb = nghttp2_rcbuf_get_buf(rname), vb = nghttp2_rcbuf_get_buf(rvalue);
    const uint8_t *name = nb.base, *value = vb.base;
    size_t namelen = nb.len, valuelen = vb.len;
    const char *vs = (const char *)value;
    unsigned fi = s->nfields++;
    bool static_name = false;
    /* the regular fields petrel looks at */
    enum { F_OTHER, F_CONN, F_HOST, F_CLEN, F_COOKIE, F_EXPECT, F_PRIORITY } kind = F_OTHER;
    if (namelen == 0) {
        petrel__h2_malformed(h, s, "an empty field name");
        return 0;
    }
    if (name[0] == ':') {
        /* §8.3: only the request pseudo-header fields, once each, before
         * the regular fields, never in trailers; values not empty */
        unsigned bit = 0;
        if (namelen == 7 && memcmp(name, ":method", 7) == 0)
            bit = value_check(h, fi, rvalue, value, valuelen, V_TOKEN) ? PETREL__H2P_METHOD : 0;
        else if (namelen == 5 && memcmp(name, ":path", 5) == 0)
            bit = value_check(h, fi, rvalue, value, valuelen, V_TARGET) ? PETREL__H2P_PATH : 0;
        else if (namelen == 7 && memcmp(name, ":scheme", 7) == 0)
            bit = (valuelen == 4 && memcmp(value, "http", 4) == 0) ||
                          (valuelen && ((value[0] | 0x20) >= 'a' && (value[0] | 0x20) <= 'z') &&
                           petrel__all_of(vs, valuelen, PETREL__CC_SCHEME))
                      ? PETREL__H2P_SCHEME
                      : 0; /* RFC 3986 §3.1 */
        else if (namelen == 10 && memcmp(name, ":authority", 10) == 0)
            bit = value_check(h, fi, rvalue, value, valuelen, V_HOST) ? PETREL__H2P_AUTHORITY : 0;
        else if (namelen == 9 && memcmp(name, ":protocol", 9) == 0)
            bit = value_check(h, fi, rvalue, value, valuelen, V_TOKEN) ? PETREL__H2P_PROTOCOL
                                                                       : 0; /* RFC 8441 §4 */
        if (bit == 0 || (s->pseudo & (bit | PETREL__H2P_FIELD)) ||
            (s->flags & PETREL__H2S_TRAILERS)) {
            petrel__h2_malformed(h, s, "a pseudo-header field");
            return 0;
        }
        s->pseudo |= (uint16_t)bit;
    } else {
        /* §8.2.1: a token in lowercase; §8.2.2: no connection-specific
         * field, TE only "trailers" */
        static_name = nghttp2_rcbuf_is_static(rname);
        if (!(static_name || petrel__all_of((const char *)name, namelen, PETREL__CC_LNAME)) ||
            !value_check(h, fi, rvalue, value, valuelen, V_FIELD)) {
            petrel__h2_malformed(h, s, "a field name or value");
            return 0;
        }
        s->pseudo |= PETREL__H2P_FIELD;
        switch (namelen) {
        case 2:
            if (memcmp(name, "te", 2) == 0 && !petrel__str_ieq(vs, valuelen, "trailers", 8))
                kind = F_CONN;
            break;
        case 4:
            if (memcmp(name, "host", 4) == 0)
                kind = F_HOST;
            break;
        case 6:
            if (memcmp(name, "cookie", 6) == 0)
                kind = F_COOKIE;
            else if (memcmp(name, "expect", 6) == 0)
                kind = F_EXPECT;
            break;
        case 7:
            if (memcmp(name, "upgrade", 7) == 0)
                kind = F_CONN;
            break;
        case 8:
            if (memcmp(name, "priority", 8) == 0)
                kind = F_PRIORITY;
            break;
        case 10:
            if (memcmp(name, "connection", 10) == 0 || memcmp(name, "keep-alive", 10) == 0)
                kind = F_CONN;
            break;
        case 14:
            if (memcmp(name, "content-length", 14) == 0)
                kind = F_CLEN;
            break;
        case 16:
            if (memcmp(name, "proxy-connection", 16) == 0)
                kind = F_CONN;
            break;
        case 17:
            if (memcmp(name, "transfer-encoding", 17) == 0)
                kind = F_CONN;
            break;
        }
        if (kind == F_CONN) {
            petrel__h2_malformed(h, s, "a connection-specific field");
            return 0;
        }
        if (s->flags & PETREL__H2S_TRAILERS)
            return 0; /* checked, not kept */
        if (kind == F_HOST) {
            /* one Host, a valid one (RFC 9110 §7.2) */
            if ((s->pseudo & PETREL__H2P_HOST) ||
                !value_check(h, fi, rvalue, value, valuelen, V_HOST)) {
                petrel__h2_malformed(h, s, "host");
                return 0;
            }
            s->pseudo |= PETREL__H2P_HOST;
        } else if (kind == F_CLEN) {
            /* RFC 9110 §8.6: 1*DIGIT; a second one is refused (as nghttp2
             * did), and the DATA must add up to it (§8.1.1).  A number past
             * 19 digits stays UINT64_MAX: over --max-body-size (413) */
            uint64_t n = 0;
            bool ok = valuelen > 0 && !(s->pseudo & PETREL__H2P_CLEN);
            for (size_t i = 0; ok && i < valuelen; i++) {
                ok = value[i] >= '0' && value[i] <= '9';
                uint64_t d = (uint64_t)(value[i] - '0');
                n = n > (UINT64_MAX - d) / 10 ? UINT64_MAX : n * 10 + d;
            }
            if (!ok) {
                petrel__h2_malformed(h, s, "content-length");
                return 0;
            }
            s->pseudo |= PETREL__H2P_CLEN;
            s->req_clen = n;
        } else if (kind == F_PRIORITY) {
            if (!(s->pseudo & PETREL__H2P_PRIORITY) && priority_parse(s, value, valuelen))
                s->pseudo |= PETREL__H2P_PRIORITY;
        }
    }
    s->hdr_bytes += (uint32_t)(namelen + valuelen + 32);
    if (s->hdr_bytes > h->hdr_limit) {
        s->err = 431; /* RFC 9113 §10.5.1; the block is still decoded (HPACK state) */
        return 0;
    }
    if (name[0] == ':' && name[1] == 's')
        return 0; /* :scheme: checked, not kept */
    petrel_req_t *r = &s->req;
    /* nghttp2's static table (RFC 7541 Appendix A) is C strings: kept as they are */
    char *v = nghttp2_rcbuf_is_static(rvalue) ? (char *)value
                                              : petrel__h2_scratch_dup(s, value, valuelen);
    if (v == NULL) {
        s->err = 431;
        return 0;
    }
    if (name[0] == ':') {
        petrel_str_t *dst = name[1] == 'm'   ? &r->method_name
                            : name[1] == 'a' ? &r->authority
                            : name[2] == 'a' ? &r->target
                                             : &s->protocol;
        dst->ptr = v;
        dst->len = valuelen;
        return 0;
    }
    if (r->nheaders == s->hdr_cap) {
        size_t ncap = (size_t)s->hdr_cap * 2;
        petrel_header_t *nh = petrel_arena_alloc(&s->arena, ncap * sizeof(*nh), 0);
        if (nh == NULL || ncap > UINT16_MAX) {
            s->err = 431;
            return 0;
        }
        memcpy(nh, r->headers, r->nheaders * sizeof(*nh));
        r->headers = nh;
        s->hdr_cap = (uint16_t)ncap;
    }
    char *n = static_name ? (char *)name : petrel__h2_scratch_dup(s, name, namelen);
    if (n == NULL) {
        s->err = 431;
        return 0;
    }
    petrel_header_t *hd = &r->headers[r->nheaders++];
    hd->name.ptr = n;
    hd->name.len = namelen;
    hd->value.ptr = v;
    hd->value.len = valuelen;
    if (kind == F_HOST)
        s->host = v;
    else if (kind == F_COOKIE && s->ncookies < 2)
        s->ncookies++;
    else if (kind == F_EXPECT)
        s->expect = v;
    return 0;
}

/* The path of :path (RFC 9113 §8.3.1: origin-form, or "*" for OPTIONS). */
static int parse_path(h2stream_t *s)
{
    petrel_req_t *r = &s->req;
    const char *t = r->target.ptr, *end = t + r->target.len;
    if (r->target.len == 1 && t[0] == '*') {
        if (r->method != PETREL_OPTIONS)
            return 400;
        r->path = r->target;
        return 0;
    }
    if (r->target.len == 0 || t[0] != '/')
        return 400;
    bool clean;
    size_t plen = petrel__target_split(r, t, end, &clean);
    if (clean && plen == (size_t)(end - t)) {
        r->path = r->target; /* NUL-terminated already */
        return 0;
    }
    char *out = NULL;
    if (s->scr_used + plen + 1 <= SCRATCH) {
        out = s->scratch + s->scr_used;
        s->scr_used += (uint32_t)(plen + 1);
    } else if ((out = petrel_arena_alloc(&s->arena, plen + 1, 1)) == NULL) {
        return 503;
    }
    ssize_t n = petrel__path_normalize(t, plen, out);
    if (n < 0)
        return 400;
    r->path.ptr = out;
    r->path.len = (size_t)n;
    return 0;
}

/* RFC 9113 §8.2.3: the cookie fields of a request (a client may send each
 * cookie-pair as its own field, for HPACK) are concatenated with "; "
 * before the application sees them, so that petrel_req_header() returns
 * them all, as for HTTP/1.1.  The first keeps its place; 0 or a status. */
static int merge_cookies(h2stream_t *s)
{
    petrel_req_t *r = &s->req;
    size_t len = 0, first = SIZE_MAX;
    for (size_t i = 0; i < r->nheaders; i++) {
        petrel_header_t *hd = &r->headers[i];
        if (hd->name.len == 6 && memcmp(hd->name.ptr, "cookie", 6) == 0) {
            len += hd->value.len + 2;
            if (first == SIZE_MAX)
                first = i;
        }
    }
    char *v = petrel_arena_alloc(&s->arena, len - 1, 1);
    if (v == NULL)
        return 431;
    size_t o = 0, n = first;
    for (size_t i = first; i < r->nheaders; i++) {
        petrel_header_t *hd = &r->headers[i];
        if (hd->name.len == 6 && memcmp(hd->name.ptr, "cookie", 6) == 0) {
            if (o) {
                memcpy(v + o, "; ", 2);
                o += 2;
            }
            memcpy(v + o, hd->value.ptr, hd->value.len);
            o += hd->value.len;
            if (i != first)
                continue; /* dropped: merged into the first */
        }
        r->headers[n++] = *hd;
    }
    v[o] = '\0';
    r->headers[first].value.ptr = v;
    r->headers[first].value.len = o;
    r->nheaders = n;
    return 0;
}

/* The request head is complete: method, path, body buffer. */
void petrel__h2_head_done(h2conn_t *h, h2stream_t *s, bool end_stream)
{
    petrel_req_t *r = &s->req;
    const petrel__config_t *cfg = h->c->cs->cfg;
    s->flags |= PETREL__H2S_HEAD_DONE;
    if (!end_stream)
        s->body_start = petrel__loop->now_ms;
    if (s->err)
        return;
    /* RFC 9113 §8.3.1: :method, :scheme and :path, exactly once each
     * (on_header saw to once); §8.5: CONNECT has :authority and neither
     * :scheme nor :path; RFC 8441 §4: :protocol only with CONNECT, which
     * then has all four. */
    unsigned p = s->pseudo, all = PETREL__H2P_METHOD | PETREL__H2P_SCHEME | PETREL__H2P_PATH;
    bool connect = r->method_name.len == 7 && memcmp(r->method_name.ptr, "CONNECT", 7) == 0;
    if (!(p & PETREL__H2P_METHOD) ||
        ((p & PETREL__H2P_PROTOCOL)
             ? !connect || (p & (all | PETREL__H2P_AUTHORITY)) != (all | PETREL__H2P_AUTHORITY)
         : connect ? (p & (PETREL__H2P_SCHEME | PETREL__H2P_PATH | PETREL__H2P_AUTHORITY)) !=
                         PETREL__H2P_AUTHORITY
                   : (p & all) != all)) {
        petrel__h2_malformed(h, s, "pseudo-header fields missing");
        return;
    }
    if (connect && !(p & PETREL__H2P_PROTOCOL)) {
        s->err = 501; /* a tunnel to a host: not implemented (RFC 9110 §9.3.6) */
        return;
    }
    if (s->protocol.ptr) {
        /* RFC 8441 §4: only WebSocket is spoken here; another protocol is
         * not implemented (RFC 9110 §15.6.2), and a CONNECT without
         * :protocol never opens a tunnel. */
        if (!petrel__str_ieq(s->protocol.ptr, s->protocol.len, "websocket", 9)) {
            s->err = 501;
            return;
        }
        r->method = PETREL__CONNECT;
        s->flags |= PETREL__H2S_XCONNECT;
        h->nxconnect++;
    } else {
        r->method = petrel__method_from_name(r->method_name.ptr, r->method_name.len);
    }
    if (r->method == 0)
        r->method = PETREL_OTHER; /* the router decides: 501 where no route takes it */
    if (r->authority.ptr == NULL && s->host) {
        r->authority.ptr = s->host; /* RFC 9113 §8.3.1: Host stands in for :authority */
        r->authority.len = strlen(s->host);
    } else if (s->host && r->authority.ptr &&
               !petrel__str_ieq(s->host, strlen(s->host), r->authority.ptr, r->authority.len)) {
        /* §8.3.1: a Host that names another entity makes the request malformed */
        petrel__h2_malformed(h, s, "host and :authority differ");
        return;
    }
    int st = parse_path(s);
    if (st) {
        s->err = (uint16_t)st;
        return;
    }
    const char *expect = s->expect;
    if (s->ncookies > 1 && (st = merge_cookies(s)) != 0) {
        s->err = (uint16_t)st;
        return;
    }
    if (expect && !petrel__str_ieq(expect, strlen(expect), "100-continue", 12)) {
        s->err = 417;
        return;
    }
    if (s->pseudo & PETREL__H2P_CLEN) {
        /* checked in on_header; the DATA is held to it (data_arrived) */
        uint64_t n = s->req_clen;
        if (n > cfg->max_body_size) {
            s->err = 413;
            return;
        }
        if (n > 0) {
            size_t size = (size_t)n + 1;
            char *b = petrel__arena_alloc_buf(&s->arena, &size);
            if (b == NULL) {
                s->err = 503;
                return;
            }
            r->body.ptr = b;
            s->body_cap = size - 1;
        }
    }
    if (expect && !end_stream) {
        /* RFC 9110 §10.1.1: 100 (Continue) as an interim HEADERS frame */
        static const nghttp2_nv cont[] = {
            {(uint8_t *)":status", (uint8_t *)"100", 7, 3,
             NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}};
        nghttp2_submit_headers(h->ngh, NGHTTP2_FLAG_NONE, s->id, NULL, cont, 1, NULL);
    }
}

/* RFC 9113 §8.1.1: at the end of a request, its DATA adds up to its
 * content-length; else it is malformed. */
bool petrel__h2_body_complete(h2conn_t *h, h2stream_t *s)
{
    if ((s->pseudo & PETREL__H2P_CLEN) && s->data_in != s->req_clen && !s->err) {
        petrel__h2_malformed(h, s, "content-length and DATA differ");
        return false;
    }
    return true;
}
