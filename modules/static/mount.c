/*
 * mount.c -- static mounts and the static module.
 *
 * petrel_static_mount() serves the files below a directory at a URL
 * prefix.  A mount lives as long as the process: the master makes it in a
 * module's init, the workers inherit it (and its directory descriptor), and
 * each worker keeps a cache of it (cache.c), freed by the module's
 * worker_fini.  A reload (SIGHUP, --dev) runs the inits again into a fresh
 * router; a mount of the same prefix, directory and options is used again
 * then, rather than opened a second time.
 *
 * The module: `--module static:[PREFIX=]DIR[,OPTION...][;MOUNT...]`, and
 * its options (petrel_option_t, <petrel.h>): `--root DIR`, which loads it
 * with a mount at "/", and the options of that mount, --autoindex,
 * --cache-control, --default-type, --static-cache-size and
 * --static-max-file-in-memory.
 */
#ifndef PETREL_BUILTIN_MODULE
#define PETREL_BUILTIN_MODULE 1 /* a built-in module: petrel_module_static */
#endif
#include "static.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef petrel__static_mount_t mount_t;

static mount_t **mounts;
unsigned petrel__static_nmounts;

void petrel_static_opts_init(petrel_static_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->index = "index.html";
    o->autoindex = 0;
    o->cache_control = NULL;
    o->precompressed = 1;
    o->cache_size = (size_t)64 << 20;
    o->max_file_in_memory = (size_t)64 << 10;
    o->max_open_files = 1024;
    o->revalidate_ms = 1000;
    o->default_type = NULL;
}

static char *dup_or_null(const char *s, bool *fail)
{
    if (s == NULL || *s == '\0')
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *fail = true;
    return d;
}

static void mount_free(mount_t *m)
{
    if (m->rootfd >= 0)
        close(m->rootfd);
    free(m->prefix);
    free(m->dir);
    free(m->root_real);
    free(m->index);
    free(m->cache_control);
    free(m->default_type);
    free(m);
}

void petrel__static_reset(void)
{
    for (unsigned i = 0; i < petrel__static_nmounts; i++)
        mount_free(mounts[i]);
    free(mounts);
    mounts = NULL;
    petrel__static_nmounts = 0;
}

/* A prefix the router takes literally: segments that are not parameters,
 * wildcards or dot segments. */
static bool prefix_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    for (const char *s = p + 1; *s;) {
        const char *e = strchrnul(s, '/');
        size_t n = (size_t)(e - s);
        if (n == 0 && *e)
            return false; /* "//" */
        if (n && (s[0] == ':' || (n == 1 && s[0] == '*') || (n == 1 && s[0] == '.') ||
                  (n == 2 && s[0] == '.' && s[1] == '.')))
            return false;
        if (memchr(s, '\\', n) || memchr(s, '?', n) || memchr(s, '#', n))
            return false;
        s = *e ? e + 1 : e;
    }
    return true;
}

/* A header value: no control characters (CR, LF, NUL, ...) but HTAB. */
static bool value_ok(const char *v)
{
    for (; v && *v; v++)
        if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
            return false;
    return true;
}

/* PREFIX* serves; PREFIX without its slash redirects to it. */
static int add_routes(petrel_server_t *srv, mount_t *m)
{
    char *pat = malloc(m->plen + 2);
    if (pat == NULL)
        return PETREL_ENOMEM;
    memcpy(pat, m->prefix, m->plen);
    memcpy(pat + m->plen, "*", 2);
    int rc = petrel_route_add(srv, PETREL_GET | PETREL_HEAD, pat, petrel__static_handle, m);
    if (rc == 0 && m->plen > 1) {
        pat[m->plen - 1] = '\0';
        /* may exist already: fine */
        petrel_route_add(srv, PETREL_GET | PETREL_HEAD, pat, petrel__static_handle, m);
    }
    free(pat);
    return rc;
}

static bool str_same(const char *a, const char *b)
{
    if (a == NULL || *a == '\0')
        return b == NULL || *b == '\0';
    return b && strcmp(a, b) == 0;
}

/* The mount of the same prefix, directory and options made before (a
 * reload -- SIGHUP, --dev -- sets the server up again into a fresh router):
 * it is used again rather than duplicated with another descriptor. */
static mount_t *mount_find(const char *prefix, const char *dir, const petrel_static_opts_t *o)
{
    size_t pl = strlen(prefix);
    if (pl && prefix[pl - 1] == '/')
        pl--;
    struct stat st, rst;
    if (stat(dir, &st) < 0)
        return NULL;
    for (unsigned i = 0; i < petrel__static_nmounts; i++) {
        mount_t *m = mounts[i];
        if (m->plen - 1 != pl || memcmp(m->prefix, prefix, pl) != 0 || strcmp(m->dir, dir) != 0 ||
            !str_same(m->index, o->index) || !str_same(m->cache_control, o->cache_control) ||
            !str_same(m->default_type, o->default_type) || m->autoindex != (o->autoindex != 0) ||
            m->precompressed != (o->precompressed != 0) || m->cache_size != o->cache_size ||
            m->max_in_memory != o->max_file_in_memory || m->max_fds != o->max_open_files ||
            m->revalidate_ms != o->revalidate_ms)
            continue;
        if (fstat(m->rootfd, &rst) == 0 && rst.st_dev == st.st_dev && rst.st_ino == st.st_ino)
            return m;
    }
    return NULL;
}

int petrel_static_mount(petrel_server_t *srv, const char *prefix, const char *dir,
                        const petrel_static_opts_t *opts)
{
    petrel_static_opts_t defaults;
    if (opts == NULL) {
        petrel_static_opts_init(&defaults);
        opts = &defaults;
    }
    if (srv == NULL || prefix == NULL || dir == NULL || !prefix_ok(prefix))
        return PETREL_EINVAL;
    petrel__static_metrics(srv);
    if (opts->index && (strchr(opts->index, '/') || strcmp(opts->index, ".") == 0 ||
                        strcmp(opts->index, "..") == 0))
        return PETREL_EINVAL;
    if (!value_ok(opts->cache_control) || !value_ok(opts->default_type))
        return PETREL_EINVAL;
    mount_t *same = mount_find(prefix, dir, opts);
    if (same)
        return add_routes(srv, same);
    int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0 || access(dir, X_OK) < 0) {
        if (rootfd >= 0)
            close(rootfd);
        return PETREL_ENOTFOUND;
    }
    mount_t *m = calloc(1, sizeof(*m));
    mount_t **ms = realloc(mounts, (petrel__static_nmounts + 1) * sizeof(*ms));
    if (ms)
        mounts = ms;
    if (m == NULL || ms == NULL) {
        free(m);
        close(rootfd);
        return PETREL_ENOMEM;
    }
    bool fail = false;
    size_t pl = strlen(prefix);
    bool slash = prefix[pl - 1] == '/';
    m->rootfd = rootfd;
    m->prefix = malloc(pl + 3);
    if (m->prefix) {
        memcpy(m->prefix, prefix, pl);
        if (!slash)
            m->prefix[pl++] = '/';
        m->prefix[pl] = '\0';
        m->plen = pl;
    }
    m->dir = strdup(dir);
    m->root_real = realpath(dir, NULL);
    m->index = dup_or_null(opts->index, &fail);
    m->index_len = m->index ? strlen(m->index) : 0;
    m->cache_control = dup_or_null(opts->cache_control, &fail);
    m->default_type = opts->default_type && *opts->default_type
                          ? strdup(opts->default_type)
                          : strdup("application/octet-stream");
    m->autoindex = opts->autoindex != 0;
    m->precompressed = opts->precompressed != 0;
    m->cache_size = opts->cache_size;
    m->max_in_memory = opts->max_file_in_memory;
    m->max_fds = opts->max_open_files;
    m->revalidate_ms = opts->revalidate_ms;
    if (fail || m->prefix == NULL || m->dir == NULL || m->root_real == NULL ||
        m->default_type == NULL) {
        mount_free(m);
        return PETREL_ENOMEM;
    }
    petrel__static_hash_seed();
    int rc = add_routes(srv, m);
    if (rc < 0) {
        mount_free(m);
        return rc;
    }
    m->id = petrel__static_nmounts;
    mounts[petrel__static_nmounts++] = m;
    petrel_log(PETREL_LOG_DEBUG, "static: %s -> %s (%s)", m->prefix, m->root_real,
               petrel__static_have_openat2(rootfd) ? "openat2" : "component walk");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The module: --module static:[PREFIX=]DIR[,OPTION...][;MOUNT...]          */

/*
 * One word of the arguments at *pp: a "quoted string" (with \" and \\), or
 * the characters up to one of `stops` or the end.  Unescaped in place into
 * `out` (which may be the same buffer, behind the reading position).
 * Returns the word's end in `out` (NUL-terminated), NULL on an unterminated
 * quote.
 */
static char *word(char **pp, const char *stops, char *out)
{
    char *p = *pp;
    if (*p == '"') {
        for (p++; *p != '"'; p++) {
            if (*p == '\0')
                return NULL;
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                p++;
            *out++ = *p;
        }
        p++;
    } else {
        while (*p && !strchr(stops, *p))
            *out++ = *p++;
    }
    *pp = p;
    *out = '\0';
    return out;
}

static bool bool_arg(const char *s, int *out)
{
    if (*s == '\0' || strcmp(s, "on") == 0 || strcmp(s, "1") == 0 || strcmp(s, "yes") == 0)
        *out = 1;
    else if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0 || strcmp(s, "no") == 0)
        *out = 0;
    else
        return false;
    return true;
}

/* One OPTION of a mount into `o`; false (with a message) when it is none. */
static bool option(char *name, char *value, bool has_value, petrel_static_opts_t *o)
{
    size_t v = 0;
    int b;
    if (strcmp(name, "autoindex") == 0 && bool_arg(value, &b))
        o->autoindex = b;
    else if (strcmp(name, "precompressed") == 0 && bool_arg(value, &b))
        o->precompressed = b;
    else if (strcmp(name, "index") == 0 && has_value)
        o->index = value;
    else if (strcmp(name, "cache-control") == 0 && has_value)
        o->cache_control = value;
    else if (strcmp(name, "default-type") == 0 && has_value && strchr(value, '/'))
        o->default_type = value;
    else if (strcmp(name, "cache-size") == 0 && petrel_parse_size(value, &v) == 0)
        o->cache_size = v;
    else if (strcmp(name, "max-file-in-memory") == 0 && petrel_parse_size(value, &v) == 0)
        o->max_file_in_memory = v;
    else if (strcmp(name, "max-open-files") == 0 && petrel_parse_size(value, &v) == 0 &&
             v <= 1000000)
        o->max_open_files = v;
    else if (strcmp(name, "revalidate-ms") == 0 && petrel_parse_size(value, &v) == 0 &&
             v <= 86400000)
        o->revalidate_ms = (unsigned)v;
    else {
        petrel_log(PETREL_LOG_ERROR,
                   "module 'static': option '%s%s%s': expected autoindex[=on|off], "
                   "precompressed=on|off, index=NAME, cache-control=VALUE, default-type=TYPE, "
                   "cache-size=BYTES, max-file-in-memory=BYTES, max-open-files=N or "
                   "revalidate-ms=MS",
                   name, has_value ? "=" : "", has_value ? value : "");
        return false;
    }
    return true;
}

/* One MOUNT: [PREFIX=]DIR[,OPTION...], up to a ';' or the end. */
static int mount_arg(petrel_server_t *srv, char **pp, char *buf)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    /* the prefix may leave out its leading slash: petrel's --module parser
     * takes a spec with a '/' before its first ':' for a file name */
    char *prefix = buf, *dir;
    *prefix = '/';
    char *end = word(pp, "=,;", prefix + 1);
    if (end == NULL)
        goto unterminated;
    if (**pp == '=') {
        (*pp)++;
        char *start = prefix[1] == '/' ? prefix + 1 : prefix;
        memmove(buf, start, (size_t)(end - start) + 1);
        prefix = buf;
        dir = buf + (end - start) + 1;
        if ((end = word(pp, ",;", dir)) == NULL)
            goto unterminated;
    } else {
        dir = prefix + 1;
        prefix = "/";
    }
    if (*dir == '\0') {
        petrel_log(PETREL_LOG_ERROR, "module 'static': a mount without a directory: expected "
                                     "--module static:[PREFIX=]DIR[,OPTION...]");
        return PETREL_EINVAL;
    }
    char *next = end + 1;
    while (**pp == ',') {
        (*pp)++;
        while (**pp == ' ')
            (*pp)++;
        char *name = next;
        if ((end = word(pp, "=,;", name)) == NULL)
            goto unterminated;
        char *value = end + 1;
        bool has_value = **pp == '=';
        *value = '\0';
        if (has_value) {
            (*pp)++;
            if ((end = word(pp, ",;", value)) == NULL)
                goto unterminated;
        } else {
            end = value;
        }
        next = end + 1;
        if (*name == '\0' && !has_value)
            continue; /* an empty element */
        if (!option(name, value, has_value, &o))
            return PETREL_EINVAL;
    }
    int rc = petrel_static_mount(srv, prefix, dir, &o);
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "module 'static': cannot mount '%s' at '%s': %s", dir, prefix,
                   rc == PETREL_ENOTFOUND ? "not a readable directory"
                   : rc == PETREL_ESTATE  ? "another route serves that prefix already"
                   : rc == PETREL_EINVAL  ? "invalid prefix or option"
                                          : petrel_strerror(rc));
    return rc;
unterminated:
    petrel_log(PETREL_LOG_ERROR, "module 'static': a quoted string without its closing '\"'");
    return PETREL_EINVAL;
}

/* The module's options: --root DIR and the options of its mount. */
typedef struct root_conf {
    const char *root;
    int autoindex;
    const char *cache_control, *default_type;
    size_t cache_size, max_file_in_memory;
} root_conf_t;

static root_conf_t conf;

static bool has_control(const char *s)
{
    for (const char *c = s; *c; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
            return true;
    return false;
}

static int check_cache_control(void *config, const char *value)
{
    (void)config;
    return has_control(value) ? PETREL_EINVAL : 0;
}

static int check_type(void *config, const char *value)
{
    (void)config;
    return has_control(value) || !strchr(value, '/') ? PETREL_EINVAL : 0;
}

static const petrel_option_t options[] = {
    {.name = "root",
     .value = "DIR",
     .kind = PETREL_OPTION_DIR,
     .offset = offsetof(root_conf_t, root),
     .flags = PETREL_OPTION_LOADS,
     .help = "serve the files of DIR at / (the built-in module static)"},
    {.name = "autoindex",
     .kind = PETREL_OPTION_FLAG,
     .offset = offsetof(root_conf_t, autoindex),
     .help = "list directories without index.html (with --root)"},
    {.name = "cache-control",
     .value = "VALUE",
     .kind = PETREL_OPTION_TEXT,
     .offset = offsetof(root_conf_t, cache_control),
     .set = check_cache_control,
     .expect = "a header value without CR, LF or controls",
     .help = "Cache-Control of static files (default: none)"},
    {.name = "default-type",
     .value = "TYPE",
     .kind = PETREL_OPTION_TEXT,
     .offset = offsetof(root_conf_t, default_type),
     .set = check_type,
     .expect = "a media type, e.g. 'text/plain; charset=utf-8'",
     .help = "Content-Type of files of unknown or no extension\n"
             "(default application/octet-stream)"},
    {.name = "static-cache-size",
     .value = "BYTES",
     .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(root_conf_t, cache_size),
     .def = (size_t)64 << 20,
     .expect = "a size in bytes, 0 or more (e.g. 64m)",
     .help = "memory of the static file cache, per worker (default 64m)"},
    {.name = "static-max-file-in-memory",
     .value = "BYTES",
     .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(root_conf_t, max_file_in_memory),
     .def = (size_t)64 << 10,
     .expect = "a size in bytes, 0 or more (e.g. 64m)",
     .help = "files up to this size are cached in memory (default 64k)"},
    {.name = NULL},
};

/* --root DIR: a mount at "/" with the options given. */
static int mount_root(petrel_server_t *srv)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.autoindex = conf.autoindex;
    o.cache_control = conf.cache_control;
    o.default_type = conf.default_type;
    o.cache_size = conf.cache_size;
    o.max_file_in_memory = conf.max_file_in_memory;
    int rc = petrel_static_mount(srv, "/", conf.root, &o);
    if (rc < 0)
        petrel_log(
            PETREL_LOG_ERROR, "module 'static': cannot mount --root '%s' at '/': %s", conf.root,
            rc == PETREL_ESTATE ? "another route serves that prefix already" : petrel_strerror(rc));
    return rc;
}

static int module_init(petrel_server_t *srv, const char *args)
{
    if (conf.root) {
        int rc = mount_root(srv);
        if (rc < 0 || *args == '\0')
            return rc;
    } else if (*args == '\0') {
        petrel_log(PETREL_LOG_ERROR,
                   "module 'static': expected --module static:[PREFIX=]DIR[,OPTION...]");
        return PETREL_EINVAL;
    }
    /* words are unescaped into a buffer of their own: the words, each with
     * its NUL (in place of the separator before the next), the '/' a
     * prefix may need and an empty value: at most n + 3 bytes */
    size_t n = strlen(args);
    char *copy = malloc(2 * n + 8);
    if (copy == NULL)
        return PETREL_ENOMEM;
    char *p = memcpy(copy, args, n + 1), *buf = copy + n + 1;
    int rc = 0;
    while (rc == 0) {
        rc = mount_arg(srv, &p, buf);
        if (rc < 0 || *p == '\0')
            break;
        if (*p != ';') {
            petrel_log(PETREL_LOG_ERROR,
                       "module 'static': unexpected '%s' (quote a value "
                       "that holds ',' or ';')",
                       p);
            rc = PETREL_EINVAL;
            break;
        }
        do
            p++;
        while (*p == ' ');
    }
    free(copy);
    return rc;
}

static void module_worker_fini(petrel_server_t *srv)
{
    (void)srv;
    petrel__static_worker_fini();
}

PETREL_MODULE_WITH_OPTIONS(static, NULL, module_init, NULL, module_worker_fini, options, &conf)
