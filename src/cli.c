/*
 * cli.c -- the command line of `petrel` (petrel_main), kept in the library
 * so that a program with modules of its own can embed the same command.
 */
#include "config.h"
#include "petrel-int.h"

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
            "  --module NAME|PATH.so[:ARGS]\n"
            "                          load a built-in module or a module file (repeatable)\n"
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
    OPT_SEND_TO, OPT_DRAIN_TO, OPT_HELP, OPT_VERSION
};

static const struct option opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"root", required_argument, NULL, OPT_ROOT},
    {"module", required_argument, NULL, OPT_MODULE},
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

int petrel_main(int argc, char **argv, const petrel_module_t *const *builtins)
{
    petrel_server_t *srv = petrel__server_new();
    if (srv == NULL) {
        fprintf(stderr, "petrel: out of memory\n");
        return 1;
    }
    petrel__set_builtins(builtins);
    petrel__config_t *cfg = &srv->cfg;
    const char **modules = calloc((size_t)argc + 1, sizeof(char *));
    int nmodules = 0, rc = 0;
    char err[1024];
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        const char *flag = argv[optind - 1];
        switch (o) {
        case OPT_LISTEN:
            if (petrel__server_add_listen(srv, optarg, err, sizeof(err)) < 0) {
                fprintf(stderr, "petrel: %s\n", err);
                rc = 2;
                goto out;
            }
            break;
        case OPT_ROOT: cfg->root = optarg; break;
        case OPT_MODULE: modules[nmodules++] = optarg; break;
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
    if (srv->nlistens == 0 && petrel__server_add_listen(srv, "127.0.0.1:8080", err, sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        rc = 1;
        goto out;
    }
    if (cfg->root) {
        struct stat st;
        if (stat(cfg->root, &st) < 0 || !S_ISDIR(st.st_mode) || access(cfg->root, R_OK | X_OK) < 0) {
            fprintf(stderr, "petrel: --root '%s': %s\n", cfg->root,
                    errno && !(errno == 0) ? strerror(errno) : "not a readable directory");
            rc = 1;
            goto out;
        }
        fprintf(stderr,
                "petrel: --root: the static file handler is not part of this build yet "
                "(serve files from a module with petrel_send_fd)\n");
        rc = 1;
        goto out;
    }
    for (int i = 0; i < nmodules; i++)
        if (petrel__server_load_module(srv, modules[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "petrel: %s\n", err);
            rc = 1;
            goto out;
        }
    if (nmodules == 0 && cfg->root == NULL)
        petrel_log(PETREL_LOG_WARN, "no --module and no --root: every request gets 404");
    if (cfg->access_log) {
        int e = petrel__access_log_open(cfg->access_log);
        if (e < 0) {
            fprintf(stderr, "petrel: --access-log '%s': %s\n", cfg->access_log, strerror(-e));
            rc = 1;
            goto out;
        }
    }
    raise_nofile();
    signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write is an EPIPE, not a death */
    rc = petrel__master_run(srv);
out:
    free(modules);
    petrel__server_free(srv);
    return rc;
}
