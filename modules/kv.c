/*
 * kv.c -- a small JSON key-value API, written only against <petrel.h>: path
 * parameters, query parameters, request bodies, module arguments, per-route
 * data, per-worker state and error statuses, in one file to copy from.
 *
 *   GET    /kv            {"count":2,"keys":["a","b"],"truncated":false}
 *                           ?prefix=P  only the keys that start with P
 *                           ?limit=N   at most N keys, 1 to 1000 (default 100)
 *   GET    /kv/:key       the stored JSON value (200), or 404
 *   PUT    /kv/:key       store the body, one JSON value: 201 (a new key, with
 *                         {"key":K,"bytes":N}) or 204 (replaced)
 *   DELETE /kv/:key       204, or 404
 *   HEAD works wherever GET does; other methods get 405 with Allow.
 *
 * Errors have a JSON body too, {"error":"...","status":N}: 400 (a body that
 * is not JSON, a bad ?limit, a key longer than 256 bytes), 404 (no such
 * key), 413 (a value over max_value), 415 (a Content-Type other than
 * application/json) and 507 (max_keys reached).
 *
 * Arguments, --module kv:ARGS with ARGS comma-separated NAME=VALUE:
 *   prefix=/api      serve at /api/kv and /api/kv/:key (default: /kv)
 *   max_keys=N       keys per worker (default 10000)
 *   max_value=BYTES  largest value (default 65536)
 *
 * The store lives in each worker process: worker_init creates it and
 * worker_fini frees it.  Workers share nothing, so with --workers N each has
 * its own store, and a client may see a key on one connection and not on the
 * next; a reload or a worker restart starts with an empty store.  Run it with
 * --workers 1 (the default) to use it as one store; a real service would
 * keep its data in a database.
 */
#include <petrel.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KV_MAX_KEY 256
#define KV_MAX_LIMIT 1000
#define JSON_MAX_DEPTH 64

/* ------------------------------------------------------------------------ */
/* Configuration: parsed by init in the master, inherited by the workers.   */

typedef struct kv_conf {
    size_t max_keys;
    size_t max_value;
} kv_conf_t;

static kv_conf_t conf;

/* ------------------------------------------------------------------------ */
/* The store of this worker: a hash table of heap entries.                  */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    size_t klen, vlen;
    char *value; /* points into data, after the key */
    char data[]; /* key, NUL, value, NUL */
} entry_t;

typedef struct store {
    entry_t **tab;
    size_t size; /* power of two */
    size_t count;
} store_t;

static store_t *store;

static uint64_t hash_of(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static entry_t **find(const char *key, size_t klen, uint64_t h)
{
    entry_t **p = &store->tab[h & (store->size - 1)];
    while (*p && !((*p)->hash == h && (*p)->klen == klen && memcmp((*p)->data, key, klen) == 0))
        p = &(*p)->next;
    return p;
}

static int grow(void)
{
    size_t size = store->size * 2;
    entry_t **tab = calloc(size, sizeof(*tab));
    if (tab == NULL)
        return PETREL_ENOMEM;
    for (size_t i = 0; i < store->size; i++)
        for (entry_t *e = store->tab[i], *next; e; e = next) {
            next = e->next;
            e->next = tab[e->hash & (size - 1)];
            tab[e->hash & (size - 1)] = e;
        }
    free(store->tab);
    store->tab = tab;
    store->size = size;
    return 0;
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    store = calloc(1, sizeof(*store));
    if (store == NULL || (store->tab = calloc(64, sizeof(entry_t *))) == NULL) {
        free(store);
        store = NULL;
        return PETREL_ENOMEM;
    }
    store->size = 64;
    return 0;
}

static void worker_fini(petrel_server_t *srv)
{
    (void)srv;
    if (store == NULL)
        return;
    for (size_t i = 0; i < store->size; i++)
        for (entry_t *e = store->tab[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(store->tab);
    free(store);
    store = NULL;
}

/* ------------------------------------------------------------------------ */
/* JSON: a validator for request bodies, an escaper for keys.               */

typedef struct json {
    const char *p, *end;
    int depth;
} json_t;

static void ws(json_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int json_value(json_t *j);

static int json_string(json_t *j)
{
    j->p++; /* the opening quote */
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"')
            return 0;
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (j->p >= j->end)
                return -1;
            char e = *j->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (j->p >= j->end || hexval(*j->p++) < 0)
                        return -1;
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return -1;
            }
        }
    }
    return -1;
}

static int json_number(json_t *j)
{
    const char *p = j->p, *end = j->end;
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return -1;
    if (p < end && *p == '.') {
        if (++p >= end || *p < '0' || *p > '9')
            return -1;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            return -1;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    return 0;
}

static int json_word(json_t *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return -1;
    j->p += n;
    return 0;
}

/* object or array: `close` is '}' or ']' */
static int json_container(json_t *j, char close)
{
    if (++j->depth > JSON_MAX_DEPTH)
        return -1;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return 0;
    }
    for (;;) {
        ws(j);
        if (close == '}') {
            if (j->p >= j->end || *j->p != '"' || json_string(j) < 0)
                return -1;
            ws(j);
            if (j->p >= j->end || *j->p++ != ':')
                return -1;
        }
        if (json_value(j) < 0)
            return -1;
        ws(j);
        if (j->p >= j->end)
            return -1;
        char c = *j->p++;
        if (c == close) {
            j->depth--;
            return 0;
        }
        if (c != ',')
            return -1;
    }
}

static int json_value(json_t *j)
{
    ws(j);
    if (j->p >= j->end)
        return -1;
    switch (*j->p) {
    case '{':
        return json_container(j, '}');
    case '[':
        return json_container(j, ']');
    case '"':
        return json_string(j);
    case 't':
        return json_word(j, "true");
    case 'f':
        return json_word(j, "false");
    case 'n':
        return json_word(j, "null");
    default:
        return json_number(j);
    }
}

/* Is [s, s+n) exactly one JSON value (RFC 8259), with optional whitespace? */
static int json_valid(const char *s, size_t n)
{
    json_t j = {s, s + n, 0};
    if (json_value(&j) < 0)
        return 0;
    ws(&j);
    return j.p == j.end;
}

/* Write `s` as a JSON string (with quotes) at `out`, which has room for
 * json_quoted_len(s) bytes; returns the end. */
static size_t json_quoted_len(const char *s)
{
    size_t n = 2;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        n += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;
    }
    return n;
}

static char *json_quote(char *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    *out++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *out++ = '\\';
            *out++ = (char)c;
        } else if (c < 0x20) {
            memcpy(out, "\\u00", 4);
            out[4] = hex[c >> 4];
            out[5] = hex[c & 15];
            out += 6;
        } else {
            *out++ = (char)c;
        }
    }
    *out++ = '"';
    return out;
}

/* ------------------------------------------------------------------------ */
/* Handlers                                                                 */

/* An error with a JSON body.  `msg` is one of ours: no quotes to escape.
 * The body is formatted into the request arena, which lives until the
 * response has been written. */
static int fail(petrel_req_t *req, int status, const char *msg)
{
    char *body = petrel_arena_printf(req->arena, "{\"error\":\"%s\",\"status\":%d}\n", msg, status);
    if (body == NULL)
        return PETREL_ENOMEM; /* petrel answers 500 */
    return petrel_send(req, status, "application/json", body, strlen(body));
}

/* The key of /kv/:key: the router has percent-decoded it. */
static const char *key_of(petrel_req_t *req, size_t *len)
{
    const char *key = petrel_req_param(req, "key");
    *len = key ? strlen(key) : 0;
    return key;
}

static int kv_get(petrel_req_t *req, void *data)
{
    (void)data;
    size_t klen;
    const char *key = key_of(req, &klen);
    entry_t *e = *find(key, klen, hash_of(key, klen));
    if (e == NULL)
        return fail(req, 404, "no such key");
    /* A copy, not the entry itself: petrel_send() does not copy a large
     * body, and a PUT or DELETE on another connection of this worker could
     * free the entry before the response has been written. */
    return petrel_send_copy(req, 200, "application/json", e->value, e->vlen);
}

static int kv_put(petrel_req_t *req, void *data)
{
    const kv_conf_t *cf = data; /* the route's data: set when init added the route */
    size_t klen;
    const char *key = key_of(req, &klen);
    if (klen > KV_MAX_KEY)
        return fail(req, 400, "key longer than 256 bytes");
    const char *type = petrel_req_header(req, "content-type");
    if (type && (strncasecmp(type, "application/json", 16) != 0 ||
                 (type[16] != '\0' && type[16] != ';' && type[16] != ' ')))
        return fail(req, 415, "the body must be application/json");
    if (req->body.len > cf->max_value)
        return fail(req, 413, "value too large");
    if (!json_valid(req->body.ptr, req->body.len))
        return fail(req, 400, "the body is not one JSON value");

    uint64_t h = hash_of(key, klen);
    entry_t **slot = find(key, klen, h);
    entry_t *old = *slot;
    if (old == NULL && store->count >= cf->max_keys)
        return fail(req, 507, "the store is full");
    entry_t *e = malloc(sizeof(*e) + klen + 1 + req->body.len + 1);
    if (e == NULL)
        return fail(req, 507, "out of memory");
    e->hash = h;
    e->klen = klen;
    e->vlen = req->body.len;
    memcpy(e->data, key, klen + 1);
    e->value = e->data + klen + 1;
    memcpy(e->value, req->body.ptr, req->body.len);
    e->value[e->vlen] = '\0';
    if (old) {
        e->next = old->next;
        *slot = e;
        free(old);
        return petrel_send(req, 204, NULL, NULL, 0);
    }
    e->next = NULL;
    *slot = e;
    if (++store->count > store->size / 4 * 3)
        grow(); /* on failure the table only gets slower */
    char *body = petrel_arena_alloc(req->arena, json_quoted_len(key) + 48, 1);
    if (body == NULL)
        return PETREL_ENOMEM;
    memcpy(body, "{\"key\":", 7);
    char *p = json_quote(body + 7, key);
    p += sprintf(p, ",\"bytes\":%zu}\n", e->vlen);
    petrel_resp_header(req, "Location", req->path.ptr); /* refused (and left out) if odd */
    return petrel_send(req, 201, "application/json", body, (size_t)(p - body));
}

static int kv_delete(petrel_req_t *req, void *data)
{
    (void)data;
    size_t klen;
    const char *key = key_of(req, &klen);
    entry_t **slot = find(key, klen, hash_of(key, klen));
    entry_t *e = *slot;
    if (e == NULL)
        return fail(req, 404, "no such key");
    *slot = e->next;
    store->count--;
    free(e);
    return petrel_send(req, 204, NULL, NULL, 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int kv_list(petrel_req_t *req, void *data)
{
    (void)data;
    const char *prefix = petrel_req_query(req, "prefix"); /* NULL when absent */
    const char *limit_s = petrel_req_query(req, "limit");
    if (prefix == NULL)
        prefix = "";
    size_t plen = strlen(prefix);
    long limit = 100;
    if (limit_s) {
        char *end;
        errno = 0;
        limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end || errno || limit < 1 || limit > KV_MAX_LIMIT)
            return fail(req, 400, "limit must be a number from 1 to 1000");
    }
    /* The matching keys, sorted: pointers into the store are fine here, as
     * the body is formatted (copied) before the handler returns. */
    const char **keys = petrel_arena_new(req->arena, const char *, store->count + 1);
    if (keys == NULL)
        return PETREL_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < store->size; i++)
        for (entry_t *e = store->tab[i]; e; e = e->next)
            if (e->klen >= plen && memcmp(e->data, prefix, plen) == 0)
                keys[n++] = e->data;
    qsort(keys, n, sizeof(*keys), cmp_str);
    bool truncated = n > (size_t)limit;
    if (truncated)
        n = (size_t)limit;
    size_t size = 64;
    for (size_t i = 0; i < n; i++)
        size += json_quoted_len(keys[i]) + 1;
    char *body = petrel_arena_alloc(req->arena, size, 1);
    if (body == NULL)
        return PETREL_ENOMEM;
    char *p = body + sprintf(body, "{\"count\":%zu,\"keys\":[", n);
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p = json_quote(p, keys[i]);
    }
    p += sprintf(p, "],\"truncated\":%s}\n", truncated ? "true" : "false");
    return petrel_send(req, 200, "application/json", body, (size_t)(p - body));
}

/* ------------------------------------------------------------------------ */
/* Init: arguments, then the routes at the configured prefix.               */

/* A size argument (petrel_parse_size()'s syntax: "10000", "64k"), from 1. */
static int parse_size(const char *v, size_t len, size_t *out)
{
    char buf[32];
    size_t n;
    if (len >= sizeof(buf))
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (petrel_parse_size(buf, &n) < 0 || n == 0)
        return -1;
    *out = n;
    return 0;
}

static int init(petrel_server_t *srv, const char *args)
{
    /* init runs again on each reload: start from the defaults every time */
    conf.max_keys = 10000;
    conf.max_value = 65536;
    char prefix[128] = "";
    for (const char *p = args; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t nl = eq ? (size_t)(eq - p) : n;
        const char *v = eq ? eq + 1 : p + n;
        size_t vl = (size_t)(p + n - v);
        if (eq && nl == 6 && memcmp(p, "prefix", 6) == 0 && vl < sizeof(prefix) &&
            (vl == 0 || v[0] == '/') && memchr(v, ':', vl) == NULL && memchr(v, '*', vl) == NULL) {
            memcpy(prefix, v, vl);
            prefix[vl] = '\0';
            if (vl && prefix[vl - 1] == '/')
                prefix[vl - 1] = '\0';
        } else if (eq && nl == 8 && memcmp(p, "max_keys", 8) == 0 &&
                   parse_size(v, vl, &conf.max_keys) == 0) {
        } else if (eq && nl == 9 && memcmp(p, "max_value", 9) == 0 &&
                   parse_size(v, vl, &conf.max_value) == 0) {
        } else {
            petrel_log(PETREL_LOG_ERROR,
                       "module 'kv': bad argument '%.*s' (expected prefix=/PATH, max_keys=N, "
                       "max_value=BYTES, separated by commas)",
                       (int)n, p);
            return PETREL_EINVAL;
        }
        p += n + (comma != NULL);
    }
    /* The router copies the patterns; the handler gets `&conf` as data. */
    static const struct {
        int methods;
        const char *suffix;
        petrel_handler_t handler;
    } routes[] = {
        {PETREL_GET, "/kv", kv_list},
        {PETREL_GET, "/kv/:key", kv_get},
        {PETREL_PUT, "/kv/:key", kv_put},
        {PETREL_DELETE, "/kv/:key", kv_delete},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        char *pattern = malloc(strlen(prefix) + strlen(routes[i].suffix) + 1);
        if (pattern == NULL)
            return PETREL_ENOMEM;
        strcpy(pattern, prefix);
        strcat(pattern, routes[i].suffix);
        int rc = petrel_route_add(srv, routes[i].methods, pattern, routes[i].handler, &conf);
        if (rc < 0)
            petrel_log(PETREL_LOG_ERROR, "module 'kv': route %s: %s", pattern, petrel_strerror(rc));
        free(pattern);
        if (rc < 0)
            return rc;
    }
    petrel_log(PETREL_LOG_DEBUG, "module 'kv': %s/kv, max_keys %zu, max_value %zu", prefix,
               conf.max_keys, conf.max_value);
    return 0;
}

PETREL_MODULE(kv, NULL, init, worker_init, worker_fini)
