/*
 * fuzz_path.c -- request-target path decoding and routing (src/framework/request.c
 * petrel__path_normalize, src/framework/router.c petrel__router_match) against a fixed
 * route table with exact, parameter (":name") and wildcard ("*") routes.
 *
 * Input: one byte choosing the method, then the raw path.  Asserted:
 *   - a normalised path is absolute, NUL-terminated at its length, holds no
 *     NUL, no "//", no "/./" or "/../" and does not end in "/." or "/.."
 *     (RFC 3986 §5.2.4 remove_dot_segments; no file or route may be reached
 *     by spelling a path differently); it is never longer than the input;
 *   - normalising it again (when it holds no '%') gives it back unchanged;
 *   - a match names a route whose pattern does match the path (checked by an
 *     independent matcher below), with parameters that are the path's own
 *     segments; 404/405 only when no route of that method matches;
 *   - inputs live in buffers of exactly their size, so AddressSanitizer
 *     catches any read past the end, by the normaliser or by the router,
 *     which is also given the raw, un-normalised bytes.
 */
#include "runtime/arena.h"
#include "framework/router.h"
#include "protocols/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
    int methods;
    const char *pattern;
} routes[] = {
    {PETREL_GET, "/"},
    {PETREL_GET, "/hello"},
    {PETREL_POST, "/echo"},
    {PETREL_GET | PETREL_PUT | PETREL_DELETE, "/kv/:key"},
    {PETREL_GET, "/kv/all"},
    {PETREL_GET, "/a/:x/b/:y"},
    {PETREL_GET, "/a/:x/c"},
    {PETREL_GET | PETREL_HEAD, "/files/*"},
    {PETREL_ANY, "/any/*"},
    {PETREL_GET, "/deep/a/b/c/d/e/f"},
    {PETREL_GET, "/w/:a/:b/:c/:d/:e/:f/:g/:h/:i/:j/:k/:l/:m/:n/:o/*"},
    {PETREL_GET, "/p/:a/:b/:c/:d/:e/:f/:g/:h/:i/:j/:k/:l/:m/:n/:o/:p"},
    {PETREL_OPTIONS, "/x.y/%41"},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static int method_bits[] = {PETREL_GET,    PETREL_HEAD,  PETREL_POST,   PETREL_PUT,
                            PETREL_DELETE, PETREL_PATCH, PETREL_OPTIONS};

static petrel__router_t *router;
static int tags[NROUTES];

static int dummy(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 0;
}

__attribute__((noreturn)) static void fail(const char *what, const char *path, size_t len)
{
    fprintf(stderr, "fuzz_path: %s: '%.*s'\n", what, (int)len, path);
    abort();
}

/* Does `pattern` match path[0, len)?  Segment by segment: a literal, a
 * parameter (any non-empty segment), or a final "*" (the rest).  The router
 * caps the parameters it records at 16 per match. */
static bool pattern_matches(const char *pattern, const char *path, size_t len, size_t *nparams)
{
    const char *p = pattern, *s = path, *end = path + len;
    *nparams = 0;
    if (strcmp(pattern, "/") == 0)
        return len == 1 && path[0] == '/';
    while (*p) {
        /* both at '/' */
        if (s >= end || *s != '/' || *p != '/')
            return false;
        p++;
        s++;
        const char *pe = strchr(p, '/');
        size_t pl = pe ? (size_t)(pe - p) : strlen(p);
        const char *se = memchr(s, '/', (size_t)(end - s));
        size_t sl = se ? (size_t)(se - s) : (size_t)(end - s);
        if (pl == 1 && p[0] == '*') {
            (*nparams)++;
            return true;
        }
        if (p[0] == ':') {
            if (sl == 0)
                return false;
            (*nparams)++;
        } else if (pl != sl || memcmp(p, s, pl) != 0) {
            return false;
        }
        p += pl;
        s += sl;
    }
    return s == end;
}

static void check_match(int method, const char *path, size_t len)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 1 << 20);
    petrel__match_t m;
    int rc = petrel__router_match(router, method, path, len, &a, &m);
    /* what the table says */
    int expect = 404;
    for (size_t i = 0; i < NROUTES; i++) {
        size_t np;
        if (!pattern_matches(routes[i].pattern, path, len, &np) || np > 16)
            continue;
        int ms = routes[i].methods | ((routes[i].methods & PETREL_GET) ? PETREL_HEAD : 0);
        if (ms & method) {
            expect = 0;
            break;
        }
        expect = 405;
    }
    if (rc == 0) {
        if (m.handler != dummy || m.data == NULL)
            fail("matched without a handler", path, len);
        size_t i = (size_t)((int *)m.data - tags);
        size_t np;
        if (i >= NROUTES || !pattern_matches(routes[i].pattern, path, len, &np))
            fail("matched a route whose pattern does not match", path, len);
        if (m.nparams != np)
            fail("wrong number of parameters", path, len);
        for (size_t k = 0; k < m.nparams; k++) {
            const petrel_param_t *pp = &m.params[k];
            if (pp->value.ptr[pp->value.len] != '\0' ||
                memmem(path, len, pp->value.ptr, pp->value.len) == NULL)
                fail("a parameter is not a piece of the path", path, len);
            if (strcmp(pp->name.ptr, "*") != 0 && memchr(pp->value.ptr, '/', pp->value.len))
                fail("a parameter holds a '/'", path, len);
        }
    } else if (rc == 405) {
        if (m.allowed == 0 || (m.allowed & method))
            fail("405 with a wrong Allow set", path, len);
    } else if (rc != 404) {
        fail("unexpected status", path, len);
    }
    if (rc != expect && !(rc == 405 && expect == 404))
        fail(rc == 0 ? "matched what the table does not" : "missed a route of the table", path,
             len);
    petrel__arena_clear(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (router == NULL) {
        petrel__pool_init(&petrel__pool, 16);
        router = petrel__router_new();
        for (size_t i = 0; i < NROUTES; i++)
            if (petrel__router_add(router, routes[i].methods, routes[i].pattern, dummy, &tags[i]) <
                0)
                fail("petrel__router_add", routes[i].pattern, strlen(routes[i].pattern));
    }
    if (size < 1)
        return 0;
    int method = method_bits[data[0] % 7];
    size_t len = size - 1;
    char *in = malloc(len ? len : 1);
    char *out = malloc(len + 1);
    memcpy(in, data + 1, len);

    /* the router never reads past the bytes it is given, normalised or not */
    if (len > 0 && in[0] == '/') {
        petrel_arena_t a;
        petrel__arena_init(&a, &petrel__pool, 1 << 20);
        petrel__match_t m;
        petrel__router_match(router, method, in, len, &a, &m);
        petrel__arena_clear(&a);
    }

    ssize_t n = petrel__path_normalize(in, len, out);
    if (n >= 0) {
        size_t l = (size_t)n;
        if (l > len || out[l] != '\0' || strlen(out) != l)
            fail("bad length or NUL", out, l);
        if (out[0] != '/')
            fail("not absolute", out, l);
        if (memmem(out, l, "//", 2) || memmem(out, l, "/./", 3) || memmem(out, l, "/../", 4))
            fail("not normalised", out, l);
        if ((l >= 2 && memcmp(out + l - 2, "/.", 2) == 0) ||
            (l >= 3 && memcmp(out + l - 3, "/..", 3) == 0))
            fail("ends in a dot-segment", out, l);
        if (memchr(out, '%', l) == NULL) {
            char *again = malloc(l + 1);
            ssize_t n2 = petrel__path_normalize(out, l, again);
            if (n2 != n || memcmp(again, out, l) != 0)
                fail("normalising twice changes it", out, l);
            free(again);
        }
        char *exact = malloc(l);
        memcpy(exact, out, l);
        check_match(method, exact, l);
        free(exact);
    }
    free(in);
    free(out);
    return 0;
}
