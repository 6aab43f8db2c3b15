/*
 * cli.c -- the command line of `petrel` (petrel_main), kept in the library
 * so that a program with modules of its own can embed the same command.
 */
#include "config.h"
#include "runtime/log.h"
#include "framework/pubsub.h"
#include "runtime/metrics.h"
#include "protocols/proto.h"
#include "runtime/proxy.h"
#include "runtime/sdnotify.h"
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The option summary of `petrel --help`.  README.md's synopsis and
 * doc/petrel.1 say the same (option names, their values, defaults):
 * tests/integration/test_doc_options.sh compares the three and the option
 * table below. */
static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: petrel [options]\n"
        "\n"
        "  --listen ADDR:PORT      listen here (repeatable; default 127.0.0.1:8080)\n"
        "  --module NAME|PATH.so|PATH.c[:ARGS]\n"
        "                          load a built-in module or a module file (repeatable);\n"
        "                          PATH.c with --dev; SIGHUP loads the module files again\n"
        "  --dev                   development: a --module PATH.c is built with cc, and a\n"
        "                          module file that changes is rebuilt and reloaded\n"
        "  --root DIR              serve the files of DIR at / (the built-in module static)\n"
        "  --autoindex             list directories without index.html (with --root)\n"
        "  --cache-control VALUE   Cache-Control of static files (default: none)\n"
        "  --default-type TYPE     Content-Type of files of unknown or no extension\n"
        "                          (default application/octet-stream)\n"
        "  --static-cache-size BYTES\n"
        "                          memory of the static file cache, per worker (default 64m)\n"
        "  --static-max-file-in-memory BYTES\n"
        "                          files up to this size are cached in memory (default 64k)\n"
        "  --workers N|auto        worker processes (default 1; auto: one per CPU)\n"
        "  --log-level error|warn|info|debug\n"
        "                          what the error log says (default info)\n"
        "  --access-log FILE|-     write an access log, see --access-log-format (default: none)\n"
        "  --max-header-size BYTES\n"
        "                          request header section limit (default 16k) -> 431\n"
        "  --max-uri-size BYTES    request target limit (default 8k) -> 414\n"
        "  --max-body-size BYTES   request body limit (default 16m) -> 413\n"
        "  --max-connections N     connections per worker (default 10000)\n"
        "  --max-pipelined N       HTTP/1.1 requests of a connection handled at once (default 16)\n"
        "  --header-timeout SECONDS\n"
        "                          time to receive a request head (default 10)\n"
        "  --keepalive-timeout SECONDS\n"
        "                          idle time between requests (default 60)\n"
        "  --send-timeout SECONDS  time without write progress (default 60)\n"
        "  --drain-timeout SECONDS\n"
        "                          graceful shutdown limit (default 10)\n"
        "  --handler-timeout SECONDS\n"
        "                          time a request waits for its handler (default 30) -> 504\n"
        "  --body-timeout SECONDS  time for a request body or WebSocket message, plus 1 s\n"
        "                          per --body-min-rate bytes received (default 20) -> 408\n"
        "  --body-min-rate BYTES   bytes per second that earn a body more time (default 1k)\n"
        "  --h2-max-concurrent-streams N\n"
        "                          HTTP/2 streams per connection (default 128)\n"
        "  --h2-initial-window-size BYTES\n"
        "                          HTTP/2 flow-control window for request bodies (default 1m)\n"
        "  --h2-max-header-list-size BYTES\n"
        "                          HTTP/2 request header list limit (default: --max-header-size)\n"
        "  --h2-output-budget BYTES\n"
        "                          HTTP/2 response bytes queued, all connections of a worker\n"
        "                          (default 64m)\n"
        "  --h2-max-resets N       stream resets an h2 connection may cause at once (RST_STREAM\n"
        "                          sent or received), then ENHANCE_YOUR_CALM (default 1000)\n"
        "  --h2-reset-rate N       resets per second that refill them (default 33)\n"
        "  --ws-max-message-size BYTES\n"
        "                          largest WebSocket message (default 16m) -> close 1009\n"
        "  --ws-idle-timeout SECONDS\n"
        "                          WebSocket silence before a ping, then a close (default 30)\n"
        "  --ws-send-limit BYTES   WebSocket output queued past this: close 1008 (default 4m)\n"
        "  --ws-send-overflow close|drop\n"
        "                          past --ws-send-limit: close 1008, or drop the message\n"
        "                          (default close)\n"
        "  --pubsub-max-topic-size BYTES\n"
        "                          longest publish/subscribe topic name (default 256)\n"
        "  --pubsub-max-message-size BYTES\n"
        "                          largest published message (default 64k)\n"
        "  --pubsub-max-subscriptions N\n"
        "                          topics per WebSocket (default 64)\n"
        "  --pubsub-max-subscribers N\n"
        "                          WebSockets per topic, per worker (default 100000)\n"
        "  --pubsub-ring-size BYTES\n"
        "                          shared memory per worker for the others (default 4m)\n"
        "  --pubsub-redis HOST:PORT|unix:PATH\n"
        "                          publish/subscribe across instances through Redis\n"
        "                          (default: none)\n"
        "  --pubsub-redis-prefix PREFIX\n"
        "                          Redis channel of a topic: PREFIX + topic (default petrel:)\n"
        "  --help, --version\n"
        "\n"
        "Behind a load balancer, under systemd (doc/deployment.md):\n"
        "  --proxy-protocol        every connection of the --listen addresses starts with a\n"
        "                          PROXY protocol header (v1 or v2) naming the client\n"
        "  --trusted-proxies CIDR[,CIDR...]\n"
        "                          with --proxy-protocol, accept connections only from these\n"
        "                          addresses (default: any)\n"
        "  --max-proxy-header-size BYTES\n"
        "                          largest PROXY v2 header, TLVs included (default 4k)\n"
        "  --admin-listen ADDR:PORT\n"
        "                          serve /livez, /readyz and /metrics there (repeatable;\n"
        "                          default: none)\n"
        "  --admin-max-connections N\n"
        "                          connections per worker on the admin listener (default 256)\n"
        "  --drain-delay SECONDS   on SIGTERM, /readyz answers 503 this long before the\n"
        "                          listeners close (default 0)\n"
        "  --access-log-format combined|json\n"
        "                          format of --access-log lines (default combined)\n"
        "  --error-log FILE        write the error log to FILE instead of standard error\n"
        "  --pid-file FILE         write the master's pid to FILE (removed at exit)\n"
        "\n"
        "SIGUSR1 opens the log files again (after logrotate moved them).  Sockets passed\n"
        "by systemd (LISTEN_FDS) serve their --listen or --admin-listen address, or are\n"
        "listeners of their own (named \"admin\": an admin listener).\n"
        "Sizes take k, m or g suffixes; times may have a fraction (0.5).  See petrel(1).\n");
}

static int bad(const char *flag, const char *value, const char *expect)
{
    /* the value as given, its control characters escaped: one line */
    fprintf(stderr, "petrel: %s: expected %s, got '", flag, expect);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
    fprintf(stderr, "' (see petrel --help)\n");
    return 2;
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return false;
    unsigned long long mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    }
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mul || v * mul > (1ull << 40))
        return false;
    *out = (size_t)(v * mul);
    return true;
}

/* Seconds, a fraction allowed, up to a year; 0 only when `zero_ok` (NaN
 * and infinities are not numbers of seconds). */
static bool parse_secs(const char *s, bool zero_ok, uint64_t *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno || !(v >= 0 && v <= 86400.0 * 365) ||
        (v == 0 && !zero_ok))
        return false;
    *ms = (uint64_t)(v * 1000.0 + 0.5);
    if (*ms == 0 && v > 0)
        *ms = 1;
    return true;
}

enum {
    OPT_LISTEN = 256,
    OPT_ROOT,
    OPT_MODULE,
    OPT_WORKERS,
    OPT_LOG_LEVEL,
    OPT_ACCESS_LOG,
    OPT_MAX_HEADER,
    OPT_MAX_URI,
    OPT_MAX_BODY,
    OPT_MAX_CONN,
    OPT_HEADER_TO,
    OPT_KEEPALIVE_TO,
    OPT_SEND_TO,
    OPT_DRAIN_TO,
    OPT_HANDLER_TO,
    OPT_MAX_PIPELINED,
    OPT_BODY_TO,
    OPT_BODY_RATE,
    OPT_HELP,
    OPT_VERSION,
    OPT_H2_STREAMS,
    OPT_H2_WINDOW,
    OPT_H2_HEADER_LIST,
    OPT_H2_OUTPUT,
    OPT_H2_RESETS,
    OPT_H2_RESET_RATE
};

/* modules (module.c) */
enum { OPT_DEV = 768 };

/* WebSocket (ws.c) */
enum { OPT_WS_MAX_MESSAGE = 1024, OPT_WS_IDLE_TO, OPT_WS_SEND_LIMIT, OPT_WS_SEND_OVERFLOW };

/* publish/subscribe (pubsub.c, redis.c) */
enum {
    OPT_PS_MAX_TOPIC = 1280,
    OPT_PS_MAX_MESSAGE,
    OPT_PS_MAX_SUBSCRIPTIONS,
    OPT_PS_MAX_SUBSCRIBERS,
    OPT_PS_RING_SIZE,
    OPT_PS_REDIS,
    OPT_PS_REDIS_PREFIX
};

/* static files (--root: the static module, modules/static/) */
enum {
    OPT_AUTOINDEX = 512,
    OPT_CACHE_CONTROL,
    OPT_STATIC_CACHE_SIZE,
    OPT_STATIC_MAX_IN_MEMORY,
    OPT_DEFAULT_TYPE
};

/* production: PROXY protocol, admin listener, logs (proxy.c, admin.c, log.c) */
enum {
    OPT_PROXY = 1536,
    OPT_TRUSTED,
    OPT_MAX_PROXY,
    OPT_ADMIN,
    OPT_DRAIN_DELAY,
    OPT_ALOG_FORMAT,
    OPT_ERROR_LOG,
    OPT_PID_FILE,
    OPT_ADMIN_MAX_CONN
};

static const struct option opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"root", required_argument, NULL, OPT_ROOT},
    {"autoindex", no_argument, NULL, OPT_AUTOINDEX},
    {"cache-control", required_argument, NULL, OPT_CACHE_CONTROL},
    {"static-cache-size", required_argument, NULL, OPT_STATIC_CACHE_SIZE},
    {"static-max-file-in-memory", required_argument, NULL, OPT_STATIC_MAX_IN_MEMORY},
    {"default-type", required_argument, NULL, OPT_DEFAULT_TYPE},
    {"module", required_argument, NULL, OPT_MODULE},
    {"dev", no_argument, NULL, OPT_DEV},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"max-header-size", required_argument, NULL, OPT_MAX_HEADER},
    {"max-uri-size", required_argument, NULL, OPT_MAX_URI},
    {"max-body-size", required_argument, NULL, OPT_MAX_BODY},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {"max-pipelined", required_argument, NULL, OPT_MAX_PIPELINED},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TO},
    {"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE_TO},
    {"send-timeout", required_argument, NULL, OPT_SEND_TO},
    {"drain-timeout", required_argument, NULL, OPT_DRAIN_TO},
    {"handler-timeout", required_argument, NULL, OPT_HANDLER_TO},
    {"body-timeout", required_argument, NULL, OPT_BODY_TO},
    {"body-min-rate", required_argument, NULL, OPT_BODY_RATE},
    {"h2-max-concurrent-streams", required_argument, NULL, OPT_H2_STREAMS},
    {"h2-initial-window-size", required_argument, NULL, OPT_H2_WINDOW},
    {"h2-max-header-list-size", required_argument, NULL, OPT_H2_HEADER_LIST},
    {"h2-output-budget", required_argument, NULL, OPT_H2_OUTPUT},
    {"h2-max-resets", required_argument, NULL, OPT_H2_RESETS},
    {"h2-reset-rate", required_argument, NULL, OPT_H2_RESET_RATE},
    {"ws-max-message-size", required_argument, NULL, OPT_WS_MAX_MESSAGE},
    {"ws-idle-timeout", required_argument, NULL, OPT_WS_IDLE_TO},
    {"ws-send-limit", required_argument, NULL, OPT_WS_SEND_LIMIT},
    {"ws-send-overflow", required_argument, NULL, OPT_WS_SEND_OVERFLOW},
    {"pubsub-max-topic-size", required_argument, NULL, OPT_PS_MAX_TOPIC},
    {"pubsub-max-message-size", required_argument, NULL, OPT_PS_MAX_MESSAGE},
    {"pubsub-max-subscriptions", required_argument, NULL, OPT_PS_MAX_SUBSCRIPTIONS},
    {"pubsub-max-subscribers", required_argument, NULL, OPT_PS_MAX_SUBSCRIBERS},
    {"pubsub-ring-size", required_argument, NULL, OPT_PS_RING_SIZE},
    {"pubsub-redis", required_argument, NULL, OPT_PS_REDIS},
    {"pubsub-redis-prefix", required_argument, NULL, OPT_PS_REDIS_PREFIX},
    {"proxy-protocol", no_argument, NULL, OPT_PROXY},
    {"trusted-proxies", required_argument, NULL, OPT_TRUSTED},
    {"max-proxy-header-size", required_argument, NULL, OPT_MAX_PROXY},
    {"admin-listen", required_argument, NULL, OPT_ADMIN},
    {"admin-max-connections", required_argument, NULL, OPT_ADMIN_MAX_CONN},
    {"drain-delay", required_argument, NULL, OPT_DRAIN_DELAY},
    {"access-log-format", required_argument, NULL, OPT_ALOG_FORMAT},
    {"error-log", required_argument, NULL, OPT_ERROR_LOG},
    {"pid-file", required_argument, NULL, OPT_PID_FILE},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Raise the soft descriptor limit to the hard one: connections need fds. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/*
 * --root DIR is the built-in module `static` with a mount of DIR at "/":
 * its options become the module's arguments (modules/static/mount.c,
 * petrel(1)): static:/="DIR",autoindex,cache-control="VALUE",...  The
 * module is loaded once, so the mounts of --module static:ARGS join it
 * (static:/="DIR";ARGS).  libpetrel has no static module of its own: a
 * program whose built-in table lacks it cannot serve --root.
 */
typedef struct root_opts {
    bool autoindex;
    const char *cache_control, *default_type;
    const char *cache_size, *max_in_memory; /* checked sizes, as given */
    const char *flags[8];                   /* the options given, for a warning without --root */
    int nflags;
} root_opts_t;

static bool is_static_spec(const char *spec)
{
    return strncmp(spec, "static", 6) == 0 && (spec[6] == '\0' || spec[6] == ':');
}

/* Append `s` to `out` as a quoted string of the module's arguments,
 * NUL-terminated; returns its length. */
static size_t put_quoted(char *out, const char *s)
{
    size_t o = 0;
    out[o++] = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = *s;
    }
    out[o++] = '"';
    out[o] = '\0';
    return o;
}

/* The static module's spec for --root DIR (`root`; NULL: none) and the
 * --module static specs of modules[0, n), malloc'ed: with --root, those
 * are taken out of the list; without it, two or more of them are joined in
 * the place of the first.  NULL with *n unchanged when there is nothing to
 * join, or out of memory. */
static char *static_spec(const char *root, const root_opts_t *ro, const char **modules, int *n)
{
    size_t len = 64, count = 0;
    const char *vals[] = {root, ro->cache_control, ro->default_type, ro->cache_size,
                          ro->max_in_memory};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
        len += vals[i] ? 32 + 2 * strlen(vals[i]) : 0;
    for (int i = 0; i < *n; i++)
        if (is_static_spec(modules[i])) {
            len += strlen(modules[i]) + 1;
            count++;
        }
    if (root == NULL && count < 2)
        return NULL;
    char *spec = malloc(len), *p = spec;
    if (spec == NULL)
        return NULL;
    p += sprintf(p, "static:");
    if (root) {
        p += sprintf(p, "/=");
        p += put_quoted(p, root);
        if (ro->autoindex)
            p += sprintf(p, ",autoindex");
        if (ro->cache_control) {
            p += sprintf(p, ",cache-control=");
            p += put_quoted(p, ro->cache_control);
        }
        if (ro->default_type) {
            p += sprintf(p, ",default-type=");
            p += put_quoted(p, ro->default_type);
        }
        if (ro->cache_size)
            p += sprintf(p, ",cache-size=%s", ro->cache_size);
        if (ro->max_in_memory)
            p += sprintf(p, ",max-file-in-memory=%s", ro->max_in_memory);
    }
    int k = 0, first = -1;
    for (int i = 0; i < *n; i++) {
        if (!is_static_spec(modules[i])) {
            modules[k++] = modules[i];
            continue;
        }
        const char *args = modules[i][6] == ':' ? modules[i] + 7 : "";
        if (*args)
            p += sprintf(p, "%s%s", p[-1] == ':' ? "" : ";", args);
        if (root == NULL && first < 0)
            modules[first = k++] = NULL; /* the place of the joined spec */
    }
    *n = k;
    if (first >= 0)
        modules[first] = spec;
    return spec;
}

/* What --root and the --module options build into a server: run by
 * petrel_main at start-up, and by the master again, into a fresh router,
 * for each reload (SIGHUP, --dev). */
typedef struct setup_args {
    const char *root_spec; /* the static module with --root's mount, or NULL */
    const char **modules;
    int nmodules;
} setup_args_t;

static int setup(petrel_server_t *srv, void *ctx, char *err, size_t errlen)
{
    const setup_args_t *a = ctx;
    const char *root = srv->cfg.root;
    if (root) {
        struct stat st;
        errno = 0;
        if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode) || access(root, R_OK | X_OK) < 0) {
            snprintf(err, errlen, "--root '%s': %s", root,
                     errno ? strerror(errno) : "not a readable directory");
            return PETREL_ENOTFOUND;
        }
        int e = petrel__server_load_module(srv, a->root_spec, err, errlen);
        if (e < 0) {
            char why[512];
            snprintf(why, sizeof(why), "%s", err);
            snprintf(err, errlen, "--root '%s': %s", root, why);
            return e;
        }
    }
    for (int i = 0; i < a->nmodules; i++) {
        int e = petrel__server_load_module(srv, a->modules[i], err, errlen);
        if (e < 0)
            return e;
    }
    return 0;
}

/* --trusted-proxies CIDR[,CIDR...]: a list of the heap (freed by the caller). */
static petrel__cidr_t *parse_trusted(const char *s, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    petrel__cidr_t *list = calloc(cap, sizeof(*list));
    if (list == NULL)
        return NULL;
    *n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (petrel__cidr_parse(p, len, &list[*n]) < 0) {
            free(list);
            return NULL;
        }
        (*n)++;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return list;
}

/* The sockets systemd passed (socket activation): they serve before any
 * default address is bound.  -1 on error (said), else how many. */
static int inherit_sockets(petrel_server_t *srv)
{
    const char *names[256];
    char err[256];
    int n = petrel__sd_listen_fds(names, 256, err, sizeof(err));
    if (n < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = PETREL__LISTEN_FDS_START + i;
        const char *name = names[i]; /* (n <= 256: more is an error above) */
        if (!petrel__sd_is_listener(fd)) {
            fprintf(stderr,
                    "petrel: descriptor %d from systemd (LISTEN_FDS) is not a listening "
                    "stream socket (petrel.socket wants ListenStream=)\n",
                    fd);
            return -1;
        }
        if (petrel__server_inherit(srv, fd, name, err, sizeof(err)) < 0) {
            fprintf(stderr, "petrel: %s\n", err);
            return -1;
        }
    }
    return n;
}

static bool has_public_listen(const petrel_server_t *srv)
{
    for (int i = 0; i < srv->nlistens; i++)
        if (!srv->listens[i].admin)
            return true;
    return false;
}

int petrel_main(int argc, char **argv, const petrel_module_t *const *builtins)
{
    petrel_server_t *srv = petrel__server_new();
    if (srv == NULL) {
        fprintf(stderr, "petrel: out of memory\n");
        return 1;
    }
    petrel__set_builtins(builtins);
    petrel__config_t *cfg = &srv->cfg;
    root_opts_t ro; /* --root and the static options */
    memset(&ro, 0, sizeof(ro));
    char *root_spec = NULL;
    const char **modules = calloc((size_t)argc + 1, sizeof(char *));
    int nmodules = 0, rc = 0;
    petrel__cidr_t *trusted = NULL;
    const char *trusted_flag = NULL, *max_proxy_flag = NULL, *pid_file = NULL;
    bool pid_written = false, alog_format_given = false;
    char err[1024];
    opterr = 0;
    optind = 1;
    int o;
    int li = -1;
    char flagbuf[64];
    while ((li = -1, o = getopt_long(argc, argv, ":", opts, &li)) != -1) {
        /* the flag's own name, whether given as "--x v" or "--x=v" */
        const char *flag = argv[optind - 1];
        if (li >= 0) {
            snprintf(flagbuf, sizeof(flagbuf), "--%s", opts[li].name);
            flag = flagbuf;
        }
        if (o >= OPT_AUTOINDEX && o <= OPT_DEFAULT_TYPE) {
            /* a static option: its name (static storage), once */
            int k = 0;
            while (k < ro.nflags && ro.flags[k] != opts[li].name)
                k++;
            if (k == ro.nflags && k < (int)(sizeof(ro.flags) / sizeof(ro.flags[0])))
                ro.flags[ro.nflags++] = opts[li].name;
        }
        switch (o) {
        case OPT_LISTEN:
        case OPT_ADMIN:
            if ((o == OPT_ADMIN ? petrel__server_add_admin
                                : petrel__server_add_listen)(srv, optarg, err, sizeof(err)) < 0) {
                fprintf(stderr, "petrel: %s\n", err);
                rc = 2;
                goto out;
            }
            break;
        case OPT_ROOT:
            cfg->root = optarg;
            break;
        case OPT_AUTOINDEX:
            ro.autoindex = true;
            break;
        case OPT_CACHE_CONTROL:
        case OPT_DEFAULT_TYPE: {
            bool ctl = false;
            for (const char *c = optarg; *c; c++)
                ctl = ctl || ((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f;
            if (ctl || (o == OPT_DEFAULT_TYPE && (*optarg == '\0' || !strchr(optarg, '/')))) {
                rc = bad(flag, optarg,
                         o == OPT_CACHE_CONTROL ? "a header value without CR, LF or controls"
                                                : "a media type, e.g. 'text/plain; charset=utf-8'");
                goto out;
            }
            if (o == OPT_CACHE_CONTROL)
                ro.cache_control = optarg;
            else
                ro.default_type = optarg;
            break;
        }
        case OPT_STATIC_CACHE_SIZE:
        case OPT_STATIC_MAX_IN_MEMORY: {
            size_t v;
            if (!parse_size(optarg, &v)) {
                rc = bad(flag, optarg, "a size in bytes, 0 or more (e.g. 64m)");
                goto out;
            }
            if (o == OPT_STATIC_CACHE_SIZE)
                ro.cache_size = optarg;
            else
                ro.max_in_memory = optarg;
            break;
        }
        case OPT_MODULE:
            modules[nmodules++] = optarg;
            break;
        case OPT_DEV:
            cfg->dev = true;
            break;
        case OPT_WORKERS:
            if (strcmp(optarg, "auto") == 0) {
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                cfg->workers = n > 0 ? (int)n : 1;
            } else {
                char *end;
                long n = strtol(optarg, &end, 10);
                if (*optarg == '\0' || *end || n < 1 || n > 1024) {
                    rc = bad("--workers", optarg, "a number from 1 to 1024 or 'auto'");
                    goto out;
                }
                cfg->workers = (int)n;
            }
            break;
        case OPT_LOG_LEVEL: {
            static const char *const names[] = {"error", "warn", "info", "debug"};
            int l = -1;
            for (int i = 0; i < 4; i++)
                if (strcmp(optarg, names[i]) == 0)
                    l = i;
            if (l < 0) {
                rc = bad("--log-level", optarg, "error, warn, info or debug");
                goto out;
            }
            cfg->log_level = l;
            break;
        }
        case OPT_ACCESS_LOG:
            cfg->access_log = optarg;
            break;
        case OPT_MAX_HEADER:
        case OPT_MAX_URI:
        case OPT_MAX_BODY: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 ||
                v > (o == OPT_MAX_BODY ? (1ull << 36) : (1u << 20))) {
                rc = bad(flag, optarg,
                         o == OPT_MAX_BODY ? "a size from 1 byte to 64g (e.g. 16m)"
                                           : "a size from 1 byte to 1m (e.g. 16k)");
                goto out;
            }
            if (o == OPT_MAX_HEADER)
                cfg->max_header_size = v;
            else if (o == OPT_MAX_URI)
                cfg->max_uri_size = v;
            else
                cfg->max_body_size = v;
            break;
        }
        case OPT_MAX_PIPELINED: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > 1024) {
                rc = bad(flag, optarg, "a number of requests from 1 to 1024");
                goto out;
            }
            cfg->max_pipelined = (unsigned)v;
            break;
        }
        case OPT_MAX_CONN: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > 10000000) {
                rc = bad(flag, optarg, "a number of connections from 1 to 10000000");
                goto out;
            }
            cfg->max_connections = v;
            break;
        }
        case OPT_BODY_RATE: {
            size_t v;
            if (!parse_size(optarg, &v)) {
                rc = bad(flag, optarg, "a number of bytes per second, 0 or more (e.g. 1k)");
                goto out;
            }
            cfg->body_min_rate = v;
            break;
        }
        case OPT_HEADER_TO:
        case OPT_KEEPALIVE_TO:
        case OPT_SEND_TO:
        case OPT_DRAIN_TO:
        case OPT_BODY_TO:
        case OPT_HANDLER_TO: {
            uint64_t ms;
            if (!parse_secs(optarg, false, &ms)) {
                rc = bad(flag, optarg, "a number of seconds greater than 0 (e.g. 10 or 0.5)");
                goto out;
            }
            if (o == OPT_HEADER_TO)
                cfg->header_timeout_ms = ms;
            else if (o == OPT_KEEPALIVE_TO)
                cfg->keepalive_timeout_ms = ms;
            else if (o == OPT_SEND_TO)
                cfg->send_timeout_ms = ms;
            else if (o == OPT_HANDLER_TO)
                cfg->handler_timeout_ms = ms;
            else if (o == OPT_BODY_TO)
                cfg->body_timeout_ms = ms;
            else
                cfg->drain_timeout_ms = ms;
            break;
        }
        case OPT_H2_STREAMS:
        case OPT_H2_WINDOW:
        case OPT_H2_HEADER_LIST: {
            /* HTTP/2 settings (RFC 9113 §6.5.2); 0 in the config means the default */
            size_t v;
            size_t max = o == OPT_H2_STREAMS ? 1000000 : o == OPT_H2_WINDOW ? 0x7fffffff : 1u << 24;
            if (!parse_size(optarg, &v) || v > max || v < (o == OPT_H2_WINDOW ? 65535 : 1)) {
                rc = bad(o == OPT_H2_STREAMS  ? "--h2-max-concurrent-streams"
                         : o == OPT_H2_WINDOW ? "--h2-initial-window-size"
                                              : "--h2-max-header-list-size",
                         optarg,
                         o == OPT_H2_STREAMS  ? "a number of streams from 1 to 1000000"
                         : o == OPT_H2_WINDOW ? "a size from 65535 to 2147483647 bytes"
                                              : "a size from 1 byte to 16m");
                goto out;
            }
            if (o == OPT_H2_STREAMS)
                cfg->h2_max_concurrent_streams = (uint32_t)v;
            else if (o == OPT_H2_WINDOW)
                cfg->h2_initial_window_size = (uint32_t)v;
            else
                cfg->h2_max_header_list_size = v;
            break;
        }
        case OPT_H2_OUTPUT: {
            /* every connection may queue one frame past it: at least 1 MiB */
            size_t v;
            if (!parse_size(optarg, &v) || v < (1u << 20) || v > (1ull << 40)) {
                rc = bad("--h2-output-budget", optarg, "a size from 1m to 1t");
                goto out;
            }
            cfg->h2_output_budget = v;
            break;
        }
        case OPT_H2_RESETS:
        case OPT_H2_RESET_RATE: {
            /* the rapid-reset defence (CVE-2023-44487): a bucket of resets */
            size_t v;
            if (!parse_size(optarg, &v) || v > 1000000 || (o == OPT_H2_RESETS && v == 0)) {
                rc = bad(flag, optarg,
                         o == OPT_H2_RESETS ? "a number of resets from 1 to 1000000"
                                            : "a number of resets per second from 0 to 1000000");
                goto out;
            }
            if (o == OPT_H2_RESETS)
                cfg->h2_reset_burst = (uint32_t)v;
            else
                cfg->h2_reset_rate = (uint32_t)v;
            break;
        }
        case OPT_WS_MAX_MESSAGE:
        case OPT_WS_SEND_LIMIT: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > (1ull << 31)) {
                rc = bad(o == OPT_WS_MAX_MESSAGE ? "--ws-max-message-size" : "--ws-send-limit",
                         optarg, "a size from 1 byte to 2g (e.g. 16m)");
                goto out;
            }
            if (o == OPT_WS_MAX_MESSAGE)
                cfg->ws_max_message_size = v;
            else
                cfg->ws_send_limit = v;
            break;
        }
        case OPT_WS_IDLE_TO:
            if (!parse_secs(optarg, false, &cfg->ws_idle_timeout_ms)) {
                rc = bad("--ws-idle-timeout", optarg,
                         "a number of seconds greater than 0 (e.g. 30 or 0.5)");
                goto out;
            }
            break;
        case OPT_WS_SEND_OVERFLOW:
            if (strcmp(optarg, "close") != 0 && strcmp(optarg, "drop") != 0) {
                rc = bad("--ws-send-overflow", optarg, "close or drop");
                goto out;
            }
            cfg->ws_send_overflow_drop = strcmp(optarg, "drop") == 0;
            break;
        case OPT_PS_MAX_TOPIC:
        case OPT_PS_MAX_MESSAGE:
        case OPT_PS_MAX_SUBSCRIPTIONS:
        case OPT_PS_MAX_SUBSCRIBERS:
        case OPT_PS_RING_SIZE: {
            size_t v;
            static const struct {
                size_t max;
                const char *expect;
            } lim[] = {
                {65535, "a size from 1 to 65535 bytes (e.g. 256)"},
                {1u << 28, "a size from 1 byte to 256m (e.g. 64k)"},
                {65536, "a number of topics from 1 to 65536"},
                {10000000, "a number of WebSockets from 1 to 10000000"},
                {1u << 30, "a power of two from 64k to 1g (e.g. 4m)"},
            };
            int k = o - OPT_PS_MAX_TOPIC;
            bool okv = parse_size(optarg, &v) && v >= 1 && v <= lim[k].max;
            if (okv && o == OPT_PS_RING_SIZE)
                okv = v >= (64u << 10) && (v & (v - 1)) == 0;
            if (!okv) {
                rc = bad(flag, optarg, lim[k].expect);
                goto out;
            }
            if (o == OPT_PS_MAX_TOPIC)
                cfg->pubsub_max_topic_size = v;
            else if (o == OPT_PS_MAX_MESSAGE)
                cfg->pubsub_max_message_size = v;
            else if (o == OPT_PS_MAX_SUBSCRIPTIONS)
                cfg->pubsub_max_subscriptions = v;
            else if (o == OPT_PS_MAX_SUBSCRIBERS)
                cfg->pubsub_max_subscribers = v;
            else
                cfg->pubsub_ring_size = v;
            break;
        }
        case OPT_PS_REDIS:
            cfg->pubsub_redis = optarg;
            break;
        case OPT_PS_REDIS_PREFIX: {
            size_t n = strlen(optarg);
            bool ctl = false;
            for (const char *c = optarg; *c; c++)
                ctl = ctl || (unsigned char)*c < 0x20 || *c == 0x7f;
            if (n > 127 || ctl) {
                rc = bad(flag, optarg, "up to 127 bytes without control characters");
                goto out;
            }
            cfg->pubsub_redis_prefix = optarg;
            break;
        }
        case OPT_PROXY:
            cfg->proxy_protocol = true;
            break;
        case OPT_TRUSTED:
            free(trusted);
            trusted = parse_trusted(optarg, &cfg->ntrusted);
            if (trusted == NULL) {
                rc = bad(flag, optarg,
                         "a comma-separated list of addresses or CIDR blocks "
                         "(e.g. 10.0.0.0/8,2001:db8::/32)");
                goto out;
            }
            cfg->trusted = trusted;
            trusted_flag = flag;
            break;
        case OPT_MAX_PROXY: {
            size_t v;
            if (!parse_size(optarg, &v) || v < PETREL__PROXY_MAX_MIN || v > PETREL__PROXY_MAX_MAX) {
                rc = bad(flag, optarg, "a size from 232 bytes to 16k");
                goto out;
            }
            cfg->max_proxy_header_size = v;
            max_proxy_flag = flag;
            break;
        }
        case OPT_ADMIN_MAX_CONN: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > 100000) {
                rc = bad(flag, optarg, "a number of connections from 1 to 100000");
                goto out;
            }
            cfg->admin_max_connections = v;
            break;
        }
        case OPT_DRAIN_DELAY:
            if (!parse_secs(optarg, true, &cfg->drain_delay_ms)) {
                rc = bad(flag, optarg, "a number of seconds, 0 or more (e.g. 5 or 0.5)");
                goto out;
            }
            break;
        case OPT_ALOG_FORMAT:
            if (strcmp(optarg, "combined") == 0)
                cfg->access_log_format = PETREL__ALOG_COMBINED;
            else if (strcmp(optarg, "json") == 0)
                cfg->access_log_format = PETREL__ALOG_JSON;
            else {
                rc = bad(flag, optarg, "combined or json");
                goto out;
            }
            alog_format_given = true;
            break;
        case OPT_ERROR_LOG:
            cfg->error_log = optarg;
            break;
        case OPT_PID_FILE:
            pid_file = optarg;
            break;
        case OPT_HELP:
            usage(stdout);
            goto out;
        case OPT_VERSION:
            printf("petrel %s (module ABI %d; %s bridge)\n", PACKAGE_VERSION, PETREL_ABI_VERSION,
                   petrel__pubsub_bridge_name() ? petrel__pubsub_bridge_name() : "no Redis");
            goto out;
        case ':':
            fprintf(stderr, "petrel: %s needs a value (see petrel --help)\n", flag);
            rc = 2;
            goto out;
        default:
            fprintf(stderr, "petrel: unknown option '%s' (see petrel --help)\n", flag);
            rc = 2;
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "petrel: unexpected argument '%s' (see petrel --help)\n", argv[optind]);
        rc = 2;
        goto out;
    }
    petrel__log_level = cfg->log_level;
    if (cfg->pubsub_redis_prefix && cfg->pubsub_redis == NULL)
        petrel_log(PETREL_LOG_WARN, "--pubsub-redis-prefix applies to --pubsub-redis, and there "
                                    "is none");
    if (cfg->pubsub_redis &&
        petrel__pubsub_bridge_config(cfg->pubsub_redis, cfg->pubsub_redis_prefix, err,
                                     sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        rc = 2;
        goto out;
    }
    if (trusted_flag && !cfg->proxy_protocol) {
        fprintf(stderr, "petrel: %s: applies to --proxy-protocol, which is not given\n",
                trusted_flag);
        rc = 2;
        goto out;
    }
    if (cfg->error_log && petrel__elog_open(cfg->error_log) < 0) {
        fprintf(stderr, "petrel: --error-log '%s': %s\n", cfg->error_log, strerror(errno));
        rc = 1;
        goto out;
    }
    if (max_proxy_flag && !cfg->proxy_protocol)
        petrel_log(PETREL_LOG_WARN, "%s applies to --proxy-protocol, which is not given",
                   max_proxy_flag);
    if (alog_format_given && cfg->access_log == NULL)
        petrel_log(PETREL_LOG_WARN, "--access-log-format applies to --access-log, which is not "
                                    "given");
    /* socket activation: systemd's sockets, and no default address besides */
    if (inherit_sockets(srv) < 0) {
        rc = 1;
        goto out;
    }
    if (!has_public_listen(srv) &&
        petrel__server_add_listen(srv, "127.0.0.1:8080", err, sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        rc = 1;
        goto out;
    }
    /* the counters in shared memory, before the modules register theirs */
    if (petrel__server_has_admin(srv) && petrel__metrics_init(cfg->workers) < 0) {
        fprintf(stderr, "petrel: --admin-listen: cannot map the shared counters: %s\n",
                strerror(errno));
        rc = 1;
        goto out;
    }
    if (ro.nflags && cfg->root == NULL) {
        char names[256];
        size_t n = 0;
        for (int k = 0; k < ro.nflags; k++)
            n += (size_t)snprintf(names + n, sizeof(names) - n, "%s--%s",
                                  k == 0               ? ""
                                  : k + 1 == ro.nflags ? " and "
                                                       : ", ",
                                  ro.flags[k]);
        petrel_log(PETREL_LOG_WARN, "%s appl%s to --root, and there is none", names,
                   ro.nflags == 1 ? "ies" : "y");
    }
    if (cfg->root) {
        bool have = false;
        for (const petrel_module_t *const *b = builtins; b && *b && !have; b++)
            have = strcmp((*b)->name, "static") == 0;
        if (!have) {
            fprintf(stderr,
                    "petrel: --root '%s': this program has no built-in module 'static', which "
                    "serves --root (link libpetrel-static and add petrel_module_static to its "
                    "built-in modules)\n",
                    cfg->root);
            rc = 1;
            goto out;
        }
    }
    int nstatic = 0;
    for (int i = 0; i < nmodules; i++)
        nstatic += is_static_spec(modules[i]);
    if ((cfg->root || nstatic > 1) &&
        (root_spec = static_spec(cfg->root, &ro, modules, &nmodules)) == NULL) {
        fprintf(stderr, "petrel: out of memory\n");
        rc = 1;
        goto out;
    }
    /* --root and --module: now, and again on each reload (SIGHUP, --dev) */
    setup_args_t sargs = {cfg->root ? root_spec : NULL, modules, nmodules};
    srv->setup = setup;
    srv->setup_ctx = &sargs;
    if (setup(srv, &sargs, err, sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        rc = 1;
        goto out;
    }
    if (nmodules == 0 && cfg->root == NULL)
        petrel_log(PETREL_LOG_WARN, "no --module and no --root: every request gets 404");
    if (cfg->access_log) {
        int e = petrel__alog_open(cfg->access_log);
        if (e < 0) {
            fprintf(stderr, "petrel: --access-log '%s': %s\n", cfg->access_log, strerror(errno));
            rc = 1;
            goto out;
        }
        petrel__alog_format = cfg->access_log_format;
    }
    if (pid_file) {
        FILE *f = fopen(pid_file, "w");
        if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            fprintf(stderr, "petrel: --pid-file '%s': %s\n", pid_file, strerror(errno));
            rc = 1;
            goto out;
        }
        pid_written = true;
    }
    raise_nofile();
    signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write is an EPIPE, not a death */
    rc = petrel__master_run(srv);
out:
    free(root_spec);
    if (pid_written)
        unlink(pid_file);
    free(modules);
    free(trusted);
    petrel__server_free(srv);
    return rc;
}
