/*
 * router.c -- method + path -> handler, over a tree of path segments.
 *
 * Each node has static children (exact segments), at most one parameter
 * child (":name") and at most one wildcard ("*", last segment only).
 * Matching prefers exact over parameter over wildcard and backtracks, so
 * "/kv/all" and "/kv/:key" coexist.  A node keeps one handler per method.
 */
#include "framework/router.h"

#include "protocols/proto.h"

#include <stdlib.h>
#include <string.h>

#define NMETHODS 9 /* PETREL_ANY's 7, PETREL__CONNECT and PETREL_OTHER */
#define MAX_PARAMS 16

typedef struct node {
    char *seg;
    size_t seglen;
    struct node **kids;
    size_t nkids;
    struct node *param;
    char *param_name;
    struct node *wild;
    int methods; /* bits with a handler */
    petrel_handler_t handler[NMETHODS];
    void *data[NMETHODS];
    petrel__route_info_t info[NMETHODS];
} node_t;

typedef struct owned {
    struct owned *next;
    void *data;
    void (*free_data)(void *);
} owned_t;

struct petrel__router {
    petrel__router_head_t head; /* first: proto.h reads it */
    node_t root;
    owned_t *owned; /* route data the router frees */
    int methods;    /* of all its routes */
};

const char *petrel__router_module;

static int bit_index(int bit)
{
    return __builtin_ctz((unsigned)bit);
}

petrel__router_t *petrel__router_new(void)
{
    return calloc(1, sizeof(petrel__router_t));
}

static void node_free(node_t *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        node_free(n->kids[i]);
        free(n->kids[i]);
    }
    free(n->kids);
    if (n->param) {
        node_free(n->param);
        free(n->param);
    }
    if (n->wild) {
        node_free(n->wild);
        free(n->wild);
    }
    free(n->seg);
    free(n->param_name);
    for (int i = 0; i < NMETHODS; i++) {
        free(n->info[i].pattern);
        free(n->info[i].module);
    }
}

void petrel__router_free(petrel__router_t *r)
{
    if (r) {
        node_free(&r->root);
        while (r->owned) {
            owned_t *o = r->owned;
            r->owned = o->next;
            o->free_data(o->data);
            free(o);
        }
        free(r);
    }
}

int petrel__router_own(petrel__router_t *r, void *data, void (*free_data)(void *))
{
    owned_t *o = malloc(sizeof(*o));
    if (o == NULL) {
        free_data(data);
        return PETREL_ENOMEM;
    }
    o->data = data;
    o->free_data = free_data;
    o->next = r->owned;
    r->owned = o;
    return 0;
}

static node_t *child_static(node_t *n, const char *s, size_t len, bool create)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (n->kids[i]->seglen == len && memcmp(n->kids[i]->seg, s, len) == 0)
            return n->kids[i];
    if (!create)
        return NULL;
    node_t **k = realloc(n->kids, (n->nkids + 1) * sizeof(*k));
    if (k == NULL)
        return NULL;
    n->kids = k;
    node_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->seg = malloc(len + 1)) == NULL) {
        free(c);
        return NULL;
    }
    memcpy(c->seg, s, len);
    c->seg[len] = '\0';
    c->seglen = len;
    n->kids[n->nkids++] = c;
    return c;
}

int petrel__router_add(petrel__router_t *r, int methods, const char *pattern,
                       petrel_handler_t handler, void *data)
{
    int stream = methods & PETREL_BODY_STREAM;
    methods &= ~PETREL_BODY_STREAM;
    if (pattern == NULL || pattern[0] != '/' || handler == NULL || methods == 0 ||
        (methods & ~(PETREL_ANY | PETREL__CONNECT | PETREL_OTHER)) ||
        (stream && (methods & PETREL__CONNECT)))
        return PETREL_EINVAL;
    node_t *n = &r->root;
    const char *p = pattern + 1;
    int nparams = 0;
    for (const char *x = pattern; *x; x++)
        if ((*x == ':' || *x == '*') && x[-1] == '/')
            nparams++;
    if (nparams > MAX_PARAMS)
        return PETREL_EINVAL; /* could never match */
    if (*p == '\0')
        goto leaf; /* "/" */
    for (;;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 1 && p[0] == '*') {
            if (e)
                return PETREL_EINVAL; /* the wildcard must be last */
            if (n->wild == NULL && (n->wild = calloc(1, sizeof(node_t))) == NULL)
                return PETREL_ENOMEM;
            n = n->wild;
            break;
        }
        if (len > 0 && p[0] == ':') {
            if (len == 1)
                return PETREL_EINVAL;
            if (n->param == NULL) {
                if ((n->param = calloc(1, sizeof(node_t))) == NULL)
                    return PETREL_ENOMEM;
                n->param_name = strndup(p + 1, len - 1);
                if (n->param_name == NULL)
                    return PETREL_ENOMEM;
            } else if (strlen(n->param_name) != len - 1 ||
                       memcmp(n->param_name, p + 1, len - 1) != 0) {
                return PETREL_EINVAL; /* "/a/:x" and "/a/:y" would be ambiguous */
            }
            n = n->param;
        } else {
            n = child_static(n, p, len, true);
            if (n == NULL)
                return PETREL_ENOMEM;
        }
        if (e == NULL)
            break;
        p = e + 1;
    }
leaf:
    if (n->methods & methods)
        return PETREL_ESTATE;
    for (int m = methods; m; m &= m - 1) {
        int i = bit_index(m & -m);
        n->handler[i] = handler;
        n->data[i] = data;
        /* for crash reports only: without memory, a report says "?" */
        n->info[i].pattern = strdup(pattern);
        n->info[i].module = petrel__router_module ? strdup(petrel__router_module) : NULL;
        n->info[i].stream = stream != 0;
    }
    n->methods |= methods;
    if (stream)
        r->head.streams = true;
    r->methods |= methods;
    return 0;
}

typedef struct search {
    int method;
    int allowed;
    petrel_param_t params[MAX_PARAMS];
    size_t nparams;
    const char *path;
} search_t;

/* The handler index of node n for the method, or -1 (HEAD falls back to GET). */
static int pick(const node_t *n, int method)
{
    if (n->methods & method)
        return bit_index(method);
    if (method == PETREL_HEAD && (n->methods & PETREL_GET))
        return bit_index(PETREL_GET);
    return -1;
}

static const node_t *walk(const node_t *n, search_t *s, const char *p, const char *end, int *hi)
{
    if (p == end) {
        /* the path ends at this node */
        if (n->methods) {
            int i = pick(n, s->method);
            if (i >= 0) {
                *hi = i;
                return n;
            }
            s->allowed |= n->methods;
        }
        return NULL;
    }
    /* p points at '/' */
    const char *seg = p + 1, *e = seg;
    while (e < end && *e != '/')
        e++;
    size_t len = (size_t)(e - seg);
    for (size_t i = 0; i < n->nkids; i++) {
        const node_t *k = n->kids[i];
        if (k->seglen == len && memcmp(k->seg, seg, len) == 0) {
            const node_t *r = walk(k, s, e, end, hi);
            if (r)
                return r;
            break;
        }
    }
    if (n->param && len > 0 && s->nparams < MAX_PARAMS) {
        petrel_param_t *pp = &s->params[s->nparams++];
        pp->name.ptr = n->param_name;
        pp->name.len = strlen(n->param_name);
        pp->value.ptr = seg;
        pp->value.len = len;
        const node_t *r = walk(n->param, s, e, end, hi);
        if (r)
            return r;
        s->nparams--;
    }
    if (n->wild && n->wild->methods && s->nparams < MAX_PARAMS) {
        int i = pick(n->wild, s->method);
        if (i >= 0) {
            petrel_param_t *pp = &s->params[s->nparams++];
            pp->name.ptr = "*";
            pp->name.len = 1;
            pp->value.ptr = seg;
            pp->value.len = (size_t)(end - seg);
            *hi = i;
            return n->wild;
        }
        s->allowed |= n->wild->methods;
    }
    return NULL;
}

/* The common case first: a path of exact segments only.  walk() tries
 * exact children first too, so when this finds a handler, walk() would
 * have found the same one; when it does not, walk() decides (parameters,
 * wildcards, backtracking, 404 and 405). */
static const node_t *walk_exact(const node_t *n, const char *p, const char *end, int method,
                                int *hi)
{
    while (p < end) {
        const char *seg = p + 1; /* p points at '/' */
        size_t left = (size_t)(end - seg);
        const node_t *next = NULL;
        for (size_t i = 0; i < n->nkids; i++) {
            const node_t *k = n->kids[i];
            size_t len = k->seglen, j = 0;
            /* the child's segment, then '/' or the end (no scan for the
             * segment's end: most children fail at once) */
            if (len > left || (len < left && seg[len] != '/'))
                continue;
            while (j < len && k->seg[j] == seg[j])
                j++;
            if (j == len) {
                next = k;
                break;
            }
        }
        if (next == NULL)
            return NULL;
        n = next;
        p = seg + next->seglen;
    }
    int i = pick(n, method);
    if (i < 0)
        return NULL;
    *hi = i;
    return n;
}

int petrel__router_match(const petrel__router_t *r, int method, const char *path, size_t len,
                         petrel_arena_t *a, petrel__match_t *m)
{
    int hi = -1;
    if (method == PETREL_OTHER && !(r->methods & PETREL_OTHER)) {
        /* a method no route of the server takes (RFC 9110 §9.1) */
        m->handler = NULL;
        m->info = NULL;
        m->data = NULL;
        m->params = NULL;
        m->nparams = 0;
        m->allowed = 0;
        return 501;
    }
    search_t s;
    s.method = method;
    s.allowed = 0;
    s.nparams = 0;
    s.path = path;
    const char *end = path + len;
    const node_t *n = len > 1 ? walk_exact(&r->root, path, end, method, &hi) : NULL;
    /* "/" is the root itself; "/a" walks to "a" */
    if (len == 1 && path[0] == '/')
        n = walk(&r->root, &s, end, end, &hi); /* "/" itself */
    if (n == NULL)
        n = walk(&r->root, &s, path, end, &hi);
    m->params = NULL;
    m->nparams = 0;
    if (n == NULL) {
        m->handler = NULL;
        m->info = NULL;
        m->data = NULL;
        m->allowed = s.allowed;
        if (s.allowed & PETREL_GET)
            m->allowed |= PETREL_HEAD;
        return s.allowed ? 405 : 404;
    }
    m->handler = n->handler[hi];
    m->info = &n->info[hi];
    m->data = n->data[hi];
    m->allowed = n->methods;
    if (s.nparams) {
        petrel_param_t *ps = petrel_arena_alloc(a, s.nparams * sizeof(*ps), 0);
        if (ps == NULL)
            return 503;
        for (size_t i = 0; i < s.nparams; i++) {
            ps[i].name = s.params[i].name;
            ps[i].value.ptr = petrel_arena_strndup(a, s.params[i].value.ptr, s.params[i].value.len);
            ps[i].value.len = s.params[i].value.len;
            if (ps[i].value.ptr == NULL)
                return 503;
        }
        m->params = ps;
        m->nparams = s.nparams;
    }
    return 0;
}
