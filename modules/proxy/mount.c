/*
 * mount.c -- the reverse-proxy module: its argument, its options, its routes.
 *
 * `--module proxy:PREFIX=URL[,URL...][,OPTION...][;PREFIX=...]` forwards
 * every request whose path is PREFIX or below it to the upstream service
 * at the URLs (forward.c).  Each mount declares its upstream
 * (petrel_upstream_new(), in the master: the workers each keep a pool of
 * connections to it).  A built-in module keeps its statics across reloads:
 * init frees the mounts of the previous load (the workers that use them are
 * other processes, with their own copy).
 */
#ifndef PETREL_BUILTIN_MODULE
#define PETREL_BUILTIN_MODULE 1 /* a built-in module: petrel_module_proxy */
#endif
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef petrel__proxy_mount_t mount_t;

/* The module's options (petrel_option_t): defaults of every mount. */
typedef struct proxy_conf {
    size_t buffer;
} proxy_conf_t;

static proxy_conf_t conf;

static const petrel_option_t options[] = {
    {.name = "proxy-buffer",
     .value = "BYTES",
     .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(proxy_conf_t, buffer),
     .min = 4096,
     .max = (uint64_t)64 << 20,
     .def = (uint64_t)256 << 10,
     .expect = "a size from 4k to 64m",
     .help = "response bytes of a proxied request that may wait for a slow client\n"
             "before the upstream is no longer read (default 256k)"},
    {.name = NULL},
};

static mount_t **mounts;
static unsigned nmounts;

static void mounts_free(void)
{
    for (unsigned i = 0; i < nmounts; i++) {
        free(mounts[i]->prefix);
        free(mounts[i]);
    }
    free(mounts);
    mounts = NULL;
    nmounts = 0;
}

static bool uint_arg(const char *s, uint64_t max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *s == '-' || *end || errno || v > max)
        return false;
    *out = (unsigned)v;
    return true;
}

/* Seconds, a fraction allowed ("0.5"), up to a day, into milliseconds (at
 * least 1). */
static bool secs_arg(const char *s, unsigned *ms)
{
    uint64_t v;
    if (petrel_parse_duration(s, &v) < 0 || v == 0 || v > 86400000)
        return false;
    *ms = (unsigned)v;
    return true;
}

/* A size from 4k to 64m. */
static bool size_arg(const char *s, size_t *out)
{
    size_t v;
    if (petrel_parse_size(s, &v) < 0 || v < 4096 || v > ((size_t)64 << 20))
        return false;
    *out = v;
    return true;
}

static bool onoff(const char *v, bool has, bool *out)
{
    if (!has || strcmp(v, "on") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
        *out = true;
    else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
        *out = false;
    else
        return false;
    return true;
}

/* One OPTION of a mount. */
static bool option(const char *name, const char *v, bool has, mount_t *m, petrel_upstream_opts_t *o)
{
    bool ok = has;
    if (strcmp(name, "strip") == 0)
        ok = onoff(v, has, &m->strip);
    else if (strcmp(name, "host") == 0)
        ok = has && (strcmp(v, "keep") == 0 || strcmp(v, "rewrite") == 0),
        m->host_rewrite = has && strcmp(v, "rewrite") == 0;
    else if (strcmp(name, "buffer") == 0)
        ok = has && size_arg(v, &m->buffer);
    else if (strcmp(name, "ws-max-message") == 0)
        ok = has && size_arg(v, &m->ws_max_message);
    else if (strcmp(name, "ws-max-tunnels") == 0)
        ok = has && uint_arg(v, 1000000, &m->ws_max_tunnels) && m->ws_max_tunnels > 0;
    else if (strcmp(name, "name") == 0)
        o->name = v;
    else if (strcmp(name, "max-conns") == 0)
        ok = has && uint_arg(v, 100000, &o->max_conns) && o->max_conns > 0;
    else if (strcmp(name, "max-pending") == 0)
        ok = has && uint_arg(v, 1000000, &o->max_pending);
    else if (strcmp(name, "connect-timeout") == 0)
        ok = has && secs_arg(v, &o->connect_timeout_ms);
    else if (strcmp(name, "header-timeout") == 0)
        ok = has && secs_arg(v, &o->header_timeout_ms);
    else if (strcmp(name, "timeout") == 0)
        ok = has && secs_arg(v, &o->call_timeout_ms);
    else if (strcmp(name, "idle-timeout") == 0)
        ok = has && secs_arg(v, &o->idle_timeout_ms);
    else if (strcmp(name, "max-requests") == 0)
        ok = has && uint_arg(v, UINT32_MAX, &o->max_requests);
    else if (strcmp(name, "retry-budget") == 0)
        ok = has && uint_arg(v, 100, &o->retry_budget_pct);
    else if (strcmp(name, "breaker-failures") == 0)
        ok = has && uint_arg(v, 1000000, &o->breaker_failures) && o->breaker_failures > 0;
    else if (strcmp(name, "breaker-pause") == 0)
        ok = has && secs_arg(v, &o->breaker_pause_ms);
    else if (strcmp(name, "connects-per-sec") == 0)
        ok = has && uint_arg(v, 1000000, &o->connects_per_sec) && o->connects_per_sec > 0;
    else if (strcmp(name, "balance") == 0) {
        ok = has && (strcmp(v, "round-robin") == 0 || strcmp(v, "least-pending") == 0);
        o->balance = strcmp(v, "least-pending") == 0 ? PETREL_BALANCE_LEAST_PENDING
                                                     : PETREL_BALANCE_ROUND_ROBIN;
    } else
        ok = false;
    if (!ok)
        petrel_log(PETREL_LOG_ERROR,
                   "module 'proxy': option '%s%s%s': expected strip[=on|off], host=keep|rewrite, "
                   "buffer=BYTES, ws-max-message=BYTES, ws-max-tunnels=N, name=NAME, "
                   "max-conns=N, max-pending=N, connect-timeout=SECS, "
                   "header-timeout=SECS, timeout=SECS, idle-timeout=SECS, max-requests=N, "
                   "retry-budget=PCT, breaker-failures=N, breaker-pause=SECS, "
                   "connects-per-sec=N or balance=round-robin|least-pending",
                   name, has ? "=" : "", has ? v : "");
    return ok;
}

/* A prefix the router takes literally: "/" or "/a/b", no parameter,
 * wildcard or dot segment. */
static bool prefix_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    for (const char *s = p + 1; *s;) {
        const char *e = strchrnul(s, '/');
        size_t n = (size_t)(e - s);
        if (n == 0 && *e)
            return false;
        if (n && (s[0] == ':' || s[0] == '*' || (n == 1 && s[0] == '.') ||
                  (n == 2 && s[0] == '.' && s[1] == '.')))
            return false;
        if (memchr(s, '?', n) || memchr(s, '#', n) || memchr(s, '%', n))
            return false;
        s = *e ? e + 1 : e;
    }
    return true;
}

static bool is_url(const char *s)
{
    return strstr(s, "://") != NULL || strncmp(s, "unix:", 5) == 0 ||
           strncmp(s, "h2c+unix:", 9) == 0;
}

/* One MOUNT, in place: PREFIX=URL[,URL...][,OPTION...]. */
/* A mount's routes: every method, its body read as it arrives (forwarded
 * in parts), and RFC 8441's CONNECT for WebSocket (whose DATA is the
 * tunnel's, not a body: a route of its own). */
static int mount_routes(petrel_server_t *srv, const char *pattern, petrel__proxy_mount_t *m)
{
    int rc = petrel_route_add(srv, PETREL_ANY | PETREL_OTHER | PETREL_BODY_STREAM, pattern,
                              petrel__proxy_handle, m);
    if (rc == 0)
        rc = petrel_route_add(srv, PETREL_WS_CONNECT, pattern, petrel__proxy_handle, m);
    return rc;
}

static int mount_arg(petrel_server_t *srv, char *arg)
{
    char *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg) {
        petrel_log(PETREL_LOG_ERROR,
                   "module 'proxy': '%s': expected PREFIX=URL[,URL...]"
                   "[,OPTION...]",
                   arg);
        return PETREL_EINVAL;
    }
    *eq = '\0';
    char prefix[1024];
    /* petrel's --module parser takes a '/' before the first ':' for a file
     * name: the prefix may leave out its leading slash */
    snprintf(prefix, sizeof(prefix), "%s%s", arg[0] == '/' ? "" : "/", arg);
    size_t pl = strlen(prefix);
    while (pl > 1 && prefix[pl - 1] == '/')
        prefix[--pl] = '\0';
    if (!prefix_ok(prefix)) {
        petrel_log(PETREL_LOG_ERROR, "module 'proxy': '%s': not a plain path prefix", prefix);
        return PETREL_EINVAL;
    }
    mount_t *m = calloc(1, sizeof(*m));
    char *urls = malloc(strlen(eq + 1) + 1);
    mount_t **ms = realloc(mounts, (nmounts + 1) * sizeof(*ms));
    if (ms)
        mounts = ms;
    if (m == NULL || urls == NULL || ms == NULL) {
        free(m);
        free(urls);
        return PETREL_ENOMEM;
    }
    m->prefix = strdup(pl == 1 ? "" : prefix);
    m->plen = pl == 1 ? 0 : pl;
    m->buffer = conf.buffer ? conf.buffer : (size_t)256 << 10;
    m->ws_max_message = 0; /* --ws-max-message-size */
    m->ws_max_tunnels = 10000;
    petrel_upstream_opts_t o;
    petrel_upstream_opts_init(&o);
    /* the whole exchange, the time the body takes to reach a slow client
     * included (the client has no deadline between reads): longer than a
     * call's default */
    o.call_timeout_ms = 300000;
    char name[33];
    snprintf(name, sizeof(name), "proxy%u", nmounts);
    o.name = name;
    *urls = '\0';
    int rc = 0;
    for (char *el = eq + 1, *next; el && rc == 0; el = next) {
        next = strchr(el, ',');
        if (next)
            *next++ = '\0';
        while (*el == ' ')
            el++;
        if (*el == '\0')
            continue;
        if (is_url(el)) {
            if (*urls)
                strcat(urls, ",");
            strcat(urls, el);
            continue;
        }
        char *v = strchr(el, '=');
        if (v)
            *v++ = '\0';
        if (!option(el, v ? v : "", v != NULL, m, &o))
            rc = PETREL_EINVAL;
    }
    if (rc == 0 && *urls == '\0') {
        petrel_log(PETREL_LOG_ERROR, "module 'proxy': mount '%s' without a URL", prefix);
        rc = PETREL_EINVAL;
    }
    if (rc == 0 && m->prefix == NULL)
        rc = PETREL_ENOMEM;
    if (rc == 0) {
        o.urls = urls;
        char err[256] = "";
        m->up = petrel_upstream_new(srv, &o, err, sizeof(err));
        if (m->up == NULL) {
            petrel_log(PETREL_LOG_ERROR, "module 'proxy': mount '%s': %s", prefix,
                       *err ? err : "cannot declare its upstream");
            rc = PETREL_EINVAL;
        }
    }
    unsigned pause = o.breaker_pause_ms ? o.breaker_pause_ms : 5000;
    m->retry_after = (pause + 999) / 1000;
    free(urls);
    if (rc < 0) {
        free(m->prefix);
        free(m);
        return rc;
    }
    mounts[nmounts++] = m;
    /* PREFIX and everything below it (for "/": the wildcard alone) */
    char pat[1040];
    snprintf(pat, sizeof(pat), "%s/*", m->prefix);
    rc = mount_routes(srv, pat, m);
    if (rc == 0 && m->plen)
        rc = mount_routes(srv, m->prefix, m);
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "module 'proxy': cannot route '%s': %s", prefix,
                   rc == PETREL_ESTATE ? "another route serves that prefix already"
                                       : petrel_strerror(rc));
    else
        petrel_log(PETREL_LOG_DEBUG, "proxy: %s -> %s", prefix, eq + 1);
    return rc;
}

static int module_init(petrel_server_t *srv, const char *args)
{
    mounts_free();
    if (*args == '\0') {
        petrel_log(PETREL_LOG_ERROR, "module 'proxy': expected --module "
                                     "proxy:PREFIX=URL[,URL...][,OPTION...][;PREFIX=...]");
        return PETREL_EINVAL;
    }
    char *copy = strdup(args);
    if (copy == NULL)
        return PETREL_ENOMEM;
    int rc = 0;
    for (char *p = copy, *next; p && rc == 0; p = next) {
        next = strchr(p, ';');
        if (next)
            *next++ = '\0';
        while (*p == ' ')
            p++;
        if (*p)
            rc = mount_arg(srv, p);
    }
    free(copy);
    return rc;
}

PETREL_MODULE_WITH_OPTIONS(proxy, NULL, module_init, NULL, NULL, options, &conf)
