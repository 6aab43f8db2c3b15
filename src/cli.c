/*
 * cli.c -- the command line of `petrel` (petrel_main), kept in the library
 * so that a program with modules of its own can embed the same command.
 */
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "proto.h"
#include "proxy.h"
#include "sdnotify.h"
#include "server.h"

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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: petrel [options]\n"
            "\n"
            "  --listen ADDR:PORT      listen here (repeatable; default 127.0.0.1:8080)\n"
            "  --root DIR              serve the files of DIR at /\n"
            "  --autoindex             list directories without index.html (with --root)\n"
            "  --cache-control VALUE   Cache-Control of static files (default: none)\n"
            "  --static-cache-size BYTES\n"
            "                          memory of the static file cache, per worker (default 64m)\n"
            "  --static-max-file-in-memory BYTES\n"
            "                          files up to this size are cached in memory (default 64k)\n"
            "  --module NAME|PATH.so[:ARGS]\n"
            "                          load a built-in module or a module file (repeatable);\n"
            "                          SIGHUP loads the module files again, without a pause\n"
            "  --dev                   development: a --module PATH.c is built with cc, and a\n"
            "                          module file that changes is rebuilt and reloaded\n"
            "  --workers N|auto        worker processes (default 1; auto: one per CPU)\n"
            "  --log-level LEVEL       error, warn, info (default) or debug\n"
            "  --access-log FILE|-     write an access log in the combined format\n"
            "  --max-header-size BYTES request header section limit (default 16k) -> 431\n"
            "  --max-uri-size BYTES    request target limit (default 8k) -> 414\n"
            "  --max-body-size BYTES   request body limit (default 16m) -> 413\n"
            "  --max-connections N     connections per worker (default 10000)\n"
            "  --header-timeout SEC    time to receive a request head (default 10)\n"
            "  --keepalive-timeout SEC idle time between requests (default 60)\n"
            "  --send-timeout SEC      time without write progress (default 60)\n"
            "  --drain-timeout SEC     graceful shutdown limit (default 10)\n"
            "  --h2-max-concurrent-streams N\n"
            "                          HTTP/2 streams per connection (default 128)\n"
            "  --h2-initial-window-size BYTES\n"
            "                          HTTP/2 flow-control window for request bodies (default 1m)\n"
            "  --h2-max-header-list-size BYTES\n"
            "                          HTTP/2 request header list limit (default: --max-header-size)\n"
            "  --ws-max-message-size BYTES\n"
            "                          largest WebSocket message (default 16m) -> close 1009\n"
            "  --ws-idle-timeout SEC   WebSocket silence before a ping, then a close (default 30)\n"
            "  --ws-send-limit BYTES   WebSocket output queued past this: close 1008 (default 4m)\n"
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
            "  --drain-delay SEC       on SIGTERM, /readyz answers 503 this long before the\n"
            "                          listeners close (default 0)\n"
            "  --access-log-format combined|json\n"
            "                          format of --access-log lines (default combined)\n"
            "  --error-log FILE        write the error log to FILE instead of standard error\n"
            "  --pid-file FILE         write the master's pid to FILE (removed at exit)\n"
            "SIGUSR1 opens the log files again (after logrotate moved them).  Sockets passed\n"
            "by systemd (LISTEN_FDS) serve their --listen or --admin-listen address, or are\n"
            "listeners of their own (named \"admin\": an admin listener).\n"
            "  --help, --version\n"
            "\n"
            "Sizes take k, m or g suffixes; times may have a fraction (0.5).\n");
}

static int bad(const char *flag, const char *value, const char *expect)
{
    fprintf(stderr, "petrel: %s: expected %s, got '%s' (see petrel --help)\n", flag, expect,
            value);
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
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    }
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mul || v * mul > (1ull << 40))
        return false;
    *out = (size_t)(v * mul);
    return true;
}

static bool parse_secs(const char *s, uint64_t *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno || v <= 0 || v > 86400.0 * 365)
        return false;
    *ms = (uint64_t)(v * 1000.0 + 0.5);
    if (*ms == 0)
        *ms = 1;
    return true;
}

enum {
    OPT_LISTEN = 256, OPT_ROOT, OPT_MODULE, OPT_WORKERS, OPT_LOG_LEVEL, OPT_ACCESS_LOG,
    OPT_MAX_HEADER, OPT_MAX_URI, OPT_MAX_BODY, OPT_MAX_CONN, OPT_HEADER_TO, OPT_KEEPALIVE_TO,
    OPT_SEND_TO, OPT_DRAIN_TO, OPT_HELP, OPT_VERSION,
    OPT_H2_STREAMS, OPT_H2_WINDOW, OPT_H2_HEADER_LIST
};

/* modules (module.c) */
enum { OPT_DEV = 768 };

/* WebSocket (ws.c) */
enum { OPT_WS_MAX_MESSAGE = 1024, OPT_WS_IDLE_TO, OPT_WS_SEND_LIMIT };

/* production: PROXY protocol, admin listener, logs (proxy.c, admin.c, log.c) */
enum {
    OPT_PROXY = 1280, OPT_TRUSTED, OPT_MAX_PROXY, OPT_ADMIN, OPT_DRAIN_DELAY, OPT_ALOG_FORMAT,
    OPT_ERROR_LOG, OPT_PID_FILE
};

/* static files (--root, modules/static.c) */
enum { OPT_AUTOINDEX = 512, OPT_CACHE_CONTROL, OPT_STATIC_CACHE_SIZE, OPT_STATIC_MAX_IN_MEMORY };

static const struct option opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"root", required_argument, NULL, OPT_ROOT},
    {"autoindex", no_argument, NULL, OPT_AUTOINDEX},
    {"cache-control", required_argument, NULL, OPT_CACHE_CONTROL},
    {"static-cache-size", required_argument, NULL, OPT_STATIC_CACHE_SIZE},
    {"static-max-file-in-memory", required_argument, NULL, OPT_STATIC_MAX_IN_MEMORY},
    {"module", required_argument, NULL, OPT_MODULE},
    {"dev", no_argument, NULL, OPT_DEV},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"max-header-size", required_argument, NULL, OPT_MAX_HEADER},
    {"max-uri-size", required_argument, NULL, OPT_MAX_URI},
    {"max-body-size", required_argument, NULL, OPT_MAX_BODY},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TO},
    {"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE_TO},
    {"send-timeout", required_argument, NULL, OPT_SEND_TO},
    {"drain-timeout", required_argument, NULL, OPT_DRAIN_TO},
    {"h2-max-concurrent-streams", required_argument, NULL, OPT_H2_STREAMS},
    {"h2-initial-window-size", required_argument, NULL, OPT_H2_WINDOW},
    {"h2-max-header-list-size", required_argument, NULL, OPT_H2_HEADER_LIST},
    {"ws-max-message-size", required_argument, NULL, OPT_WS_MAX_MESSAGE},
    {"ws-idle-timeout", required_argument, NULL, OPT_WS_IDLE_TO},
    {"ws-send-limit", required_argument, NULL, OPT_WS_SEND_LIMIT},
    {"proxy-protocol", no_argument, NULL, OPT_PROXY},
    {"trusted-proxies", required_argument, NULL, OPT_TRUSTED},
    {"max-proxy-header-size", required_argument, NULL, OPT_MAX_PROXY},
    {"admin-listen", required_argument, NULL, OPT_ADMIN},
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

/* What --root and the --module options build into a server: run by
 * petrel_main at start-up, and by the master again, into a fresh router,
 * for each reload (SIGHUP, --dev). */
typedef struct setup_args {
    const petrel_static_opts_t *sopts;
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
        int e = petrel_static_mount(srv, "/", root, a->sopts);
        if (e < 0) {
            snprintf(err, errlen, "--root '%s': %s", root,
                     e == PETREL_ENOTFOUND ? "not a readable directory"
                     : e == PETREL_ESTATE  ? "a module already serves every path (/*)"
                                           : petrel_strerror(e));
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
        const char *name = i < 256 ? names[i] : "";
        if (!petrel__sd_is_listener(fd)) {
            fprintf(stderr, "petrel: descriptor %d from systemd (LISTEN_FDS) is not a listening "
                            "stream socket (petrel.socket wants ListenStream=)\n", fd);
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
    petrel_static_opts_t sopts; /* --root and the static options */
    petrel_static_opts_init(&sopts);
    const char *static_flag = NULL; /* a static option given, for a warning without --root */
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
        case OPT_ROOT: cfg->root = optarg; break;
        case OPT_AUTOINDEX: sopts.autoindex = 1; static_flag = flag; break;
        case OPT_CACHE_CONTROL:
            if (strpbrk(optarg, "\r\n")) {
                rc = bad(flag, optarg, "a header value without CR or LF");
                goto out;
            }
            sopts.cache_control = optarg;
            static_flag = flag;
            break;
        case OPT_STATIC_CACHE_SIZE:
        case OPT_STATIC_MAX_IN_MEMORY: {
            size_t v;
            if (!parse_size(optarg, &v)) {
                rc = bad(flag, optarg, "a size in bytes, 0 or more (e.g. 64m)");
                goto out;
            }
            if (o == OPT_STATIC_CACHE_SIZE)
                sopts.cache_size = v;
            else
                sopts.max_file_in_memory = v;
            static_flag = flag;
            break;
        }
        case OPT_MODULE: modules[nmodules++] = optarg; break;
        case OPT_DEV: cfg->dev = true; break;
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
        case OPT_ACCESS_LOG: cfg->access_log = optarg; break;
        case OPT_MAX_HEADER:
        case OPT_MAX_URI:
        case OPT_MAX_BODY: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > (o == OPT_MAX_BODY ? (1ull << 36) : (1u << 20))) {
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
        case OPT_MAX_CONN: {
            size_t v;
            if (!parse_size(optarg, &v) || v == 0 || v > 10000000) {
                rc = bad(flag, optarg, "a number of connections from 1 to 10000000");
                goto out;
            }
            cfg->max_connections = v;
            break;
        }
        case OPT_HEADER_TO:
        case OPT_KEEPALIVE_TO:
        case OPT_SEND_TO:
        case OPT_DRAIN_TO: {
            uint64_t ms;
            if (!parse_secs(optarg, &ms)) {
                rc = bad(flag, optarg, "a number of seconds greater than 0 (e.g. 10 or 0.5)");
                goto out;
            }
            if (o == OPT_HEADER_TO)
                cfg->header_timeout_ms = ms;
            else if (o == OPT_KEEPALIVE_TO)
                cfg->keepalive_timeout_ms = ms;
            else if (o == OPT_SEND_TO)
                cfg->send_timeout_ms = ms;
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
            if (!parse_secs(optarg, &cfg->ws_idle_timeout_ms)) {
                rc = bad("--ws-idle-timeout", optarg,
                         "a number of seconds greater than 0 (e.g. 30 or 0.5)");
                goto out;
            }
            break;
        case OPT_PROXY: cfg->proxy_protocol = true; break;
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
        case OPT_DRAIN_DELAY:
            if (strcmp(optarg, "0") == 0)
                cfg->drain_delay_ms = 0;
            else if (!parse_secs(optarg, &cfg->drain_delay_ms)) {
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
        case OPT_ERROR_LOG: cfg->error_log = optarg; break;
        case OPT_PID_FILE: pid_file = optarg; break;
        case OPT_HELP: usage(stdout); goto out;
        case OPT_VERSION: printf("petrel %s (module ABI %d)\n", PACKAGE_VERSION, PETREL_ABI_VERSION); goto out;
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
    if (static_flag && cfg->root == NULL)
        petrel_log(PETREL_LOG_WARN, "%s applies to --root, and there is none", static_flag);
    /* --root and --module: now, and again on each reload (SIGHUP, --dev) */
    setup_args_t sargs = {&sopts, modules, nmodules};
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
    if (pid_written)
        unlink(pid_file);
    free(modules);
    free(trusted);
    petrel__server_free(srv);
    return rc;
}
