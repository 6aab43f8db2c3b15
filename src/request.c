/*
 * request.c -- the protocol-neutral request: methods, path normalisation,
 * header, parameter and query look-ups, and dispatch through the router.
 */
#include "proto.h"
#include "router.h"

#include <string.h>

/* RFC 9110 §5.6.2 tchar */
const uint8_t petrel__tchar[256] = {
    ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['!'] = 1, ['#'] = 1, ['$'] = 1,
    ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1,
    ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

static const struct {
    const char *name;
    size_t len;
    int bit;
} methods[] = {
    {"GET", 3, PETREL_GET},       {"HEAD", 4, PETREL_HEAD},   {"POST", 4, PETREL_POST},
    {"PUT", 3, PETREL_PUT},       {"DELETE", 6, PETREL_DELETE}, {"PATCH", 5, PETREL_PATCH},
    {"OPTIONS", 7, PETREL_OPTIONS},
};

int petrel__method_from_name(const char *s, size_t len)
{
    if (len == 3 && s[0] == 'G' && s[1] == 'E' && s[2] == 'T')
        return PETREL_GET;
    for (size_t i = 1; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (methods[i].len == len && memcmp(methods[i].name, s, len) == 0)
            return methods[i].bit;
    return 0;
}

size_t petrel__methods_format(int bits, char *buf, size_t len)
{
    size_t n = 0;
    if (len == 0)
        return 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (!(bits & methods[i].bit))
            continue;
        size_t need = methods[i].len + (n ? 2 : 0);
        if (n + need + 1 > len)
            break;
        if (n) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        memcpy(buf + n, methods[i].name, methods[i].len);
        n += methods[i].len;
        buf[n] = '\0';
    }
    return n;
}

bool petrel__str_ieq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y && (x | 0x20) != (y | 0x20))
            return false;
        if (x != y && !((x | 0x20) >= 'a' && (x | 0x20) <= 'z'))
            return false;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

ssize_t petrel__pct_decode(const char *in, size_t len, char *out, bool plus)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= len || (h = hexval(in[i + 1])) < 0 || (l = hexval(in[i + 2])) < 0)
                return PETREL_EINVAL;
            c = (char)(h << 4 | l);
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

/*
 * Decode, then resolve "." and ".." segments (RFC 3986 §5.2.4) and merge
 * repeated slashes.  A path that would climb above the root, or that holds a
 * NUL byte once decoded, is refused: no route and no file may be reached by
 * spelling a path differently.
 */
ssize_t petrel__path_normalize(const char *in, size_t len, char *out)
{
    if (len == 0 || in[0] != '/')
        return PETREL_EINVAL;
    ssize_t n = petrel__pct_decode(in, len, out, false);
    if (n < 0 || memchr(out, '\0', (size_t)n))
        return PETREL_EINVAL;
    size_t r = 0, w = 0, end = (size_t)n;
    while (r < end) {
        /* out[r] == '/' here */
        size_t s = r + 1;
        while (s < end && out[s] == '/')
            s++; /* merge slashes */
        size_t e = s;
        while (e < end && out[e] != '/')
            e++;
        size_t seg = e - s;
        if (seg == 1 && out[s] == '.') {
            if (e == end)
                out[w++] = '/';
        } else if (seg == 2 && out[s] == '.' && out[s + 1] == '.') {
            if (w == 0)
                return PETREL_EINVAL; /* above the root */
            while (w > 0 && out[--w] != '/')
                ;
            if (e == end)
                out[w++] = '/';
        } else {
            out[w++] = '/';
            memmove(out + w, out + s, seg);
            w += seg;
        }
        r = e;
    }
    if (w == 0)
        out[w++] = '/';
    out[w] = '\0';
    return (ssize_t)w;
}

const char *petrel_req_header(const petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        if (petrel__str_ieq(req->headers[i].name.ptr, req->headers[i].name.len, name, n))
            return req->headers[i].value.ptr;
    return NULL;
}

const char *petrel_req_param(const petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nparams; i++)
        if (req->params[i].name.len == n && memcmp(req->params[i].name.ptr, name, n) == 0)
            return req->params[i].value.ptr;
    return NULL;
}

const char *petrel_req_query(petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    const char *p = req->query.ptr;
    if (p == NULL)
        return NULL; /* no query: NULL + 0 would be undefined */
    const char *end = p + req->query.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *ke = eq ? eq : e;
        char *key = petrel_arena_alloc(req->arena, (size_t)(ke - p) + 1, 1);
        if (key == NULL)
            return NULL;
        ssize_t kl = petrel__pct_decode(p, (size_t)(ke - p), key, true);
        if (kl == (ssize_t)n && memcmp(key, name, n) == 0) {
            const char *v = eq ? eq + 1 : e;
            char *val = petrel_arena_alloc(req->arena, (size_t)(e - v) + 1, 1);
            if (val == NULL || petrel__pct_decode(v, (size_t)(e - v), val, true) < 0)
                return NULL;
            return val;
        }
        p = amp ? amp + 1 : end;
    }
    return NULL;
}

bool petrel__list_has_token(const char *s, size_t n, const char *tok, size_t tlen)
{
    const char *end = s + n;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
            s++;
        const char *b = s;
        while (s < end && *s != ',')
            s++;
        const char *e = s;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (petrel__str_ieq(b, (size_t)(e - b), tok, tlen))
            return true;
    }
    return false;
}

const char *petrel_req_peer(petrel_req_t *req) { return req->_proto->peer(req); }

void petrel__req_dispatch(petrel_req_t *req)
{
    petrel__match_t m;
    if (req->path.len == 1 && req->path.ptr[0] == '*') {
        /* OPTIONS * (RFC 9110 §9.3.7): the server's capabilities */
        char allow[96];
        petrel__methods_format(PETREL_ANY, allow, sizeof(allow));
        petrel_resp_header(req, "Allow", allow);
        petrel_send(req, 204, NULL, "", 0);
        return;
    }
    int st = petrel__router_match(petrel__server_routes(req->server), req->method, req->path.ptr, req->path.len,
                                  req->arena, &m);
    if (st) {
        if (st == 405) {
            char allow[96];
            petrel__methods_format(m.allowed, allow, sizeof(allow));
            petrel_resp_header(req, "Allow", allow);
        }
        petrel_send_status(req, st);
        return;
    }
    req->params = m.params;
    req->nparams = m.nparams;
    req->route_data = m.data;
    int rc = m.handler(req, m.data);
    petrel_resp_t *resp = req->_resp;
    if (rc == 0 && resp->sent)
        return; /* answered, or streaming (ended by the handler, later) */
    if (rc >= 200 && rc <= 599 && !resp->sent) {
        petrel_send_status(req, rc);
        return;
    }
    const char *m_ = req->method_name.ptr, *p_ = req->path.ptr;
    unsigned long long id = (unsigned long long)req->id;
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "request %llu %s %s: handler failed: %s", id, m_, p_,
                   petrel_strerror(rc));
    else if (rc == 0)
        petrel_log(PETREL_LOG_ERROR, "request %llu %s %s: handler returned 0 without responding",
                   id, m_, p_);
    else if (resp->sent)
        petrel_log(PETREL_LOG_ERROR,
                   "request %llu %s %s: handler returned %d after starting its response", id, m_,
                   p_, rc);
    else
        petrel_log(PETREL_LOG_ERROR,
                   "request %llu %s %s: handler returned %d, which is not a status it may "
                   "send (200-599)",
                   id, m_, p_, rc);
    if (!resp->sent)
        petrel_send_status(req, 500);
    else if (!resp->ended)
        petrel_stream_end(req);
}
