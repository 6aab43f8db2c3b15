/*
 * cli.c -- the command line of `petrel` (petrel_main), kept in the library
 * so that a program with modules of its own can embed the same command.
 */
#include "config.h"
#include "runtime/log.h"
#include "framework/pubsub.h"
#include "runtime/metrics.h"
#include "protocols/h2.h"
#include "protocols/proto.h"
#include "protocols/ws.h"
#include "runtime/proxy.h"
#include "runtime/sdnotify.h"
#include "server/options.h"
#include "server/server.h"
#include "runtime/fault.h"

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

/*
 * The options of the built-in modules (petrel_option_t, <petrel.h>) join
 * these: each module's table is turned into one of petrel's
 * (server/options.c) and listed in --help in a section of its own; the
 * values given are applied to the module each time it loads (module.c).
 * A module named by --module more than once is loaded once, with its
 * arguments joined by ';'; one that an option of it loads (--root) is
 * loaded first, unless --module names it.
 */

/* A CALL option's status for "done, exit 0" (--help, --version). */
#define EXIT_DONE 1000

/* The state of one command line: what the options of this file collect
 * beside the configuration. */
typedef struct cli {
    petrel_server_t *srv;
    const char **modules;
    int nmodules;
    const char *pid_file;
    petrel__cli_tables_t t;         /* petrel's options and the modules' */
    const petrel_module_t **loaded; /* the modules an option of them loads */
    int nloaded;
} cli_t;

static int set_listen(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)cfg;
    cli_t *cl = ctx;
    char err[512];
    bool admin = strcmp(flag, "--admin-listen") == 0;
    if ((admin ? petrel__server_add_admin : petrel__server_add_listen)(cl->srv, value, err,
                                                                       sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        return 2;
    }
    return 0;
}

static int set_module(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)cfg, (void)flag;
    cli_t *cl = ctx;
    cl->modules[cl->nmodules++] = value;
    return 0;
}

static int set_workers(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)flag, (void)ctx;
    if (strcmp(value, "auto") == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->workers = n > 0 ? (int)n : 1;
        return 0;
    }
    char *end;
    long n = strtol(value, &end, 10);
    if (*value == '\0' || *end || n < 1 || n > 1024)
        return PETREL_EINVAL;
    cfg->workers = (int)n;
    return 0;
}

static int set_pid_file(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)cfg, (void)flag;
    ((cli_t *)ctx)->pid_file = value;
    return 0;
}

static int show_help(petrel__config_t *cfg, const char *flag, const char *value, void *ctx);

/* The parts the program names for --version (petrel_version_add). */
static const char *version_lines[16];
static int nversion_lines;

PETREL_API int petrel_version_add(const char *line)
{
    if (line == NULL)
        return PETREL_EINVAL;
    if (nversion_lines == (int)(sizeof(version_lines) / sizeof(version_lines[0])))
        return PETREL_ELIMIT;
    version_lines[nversion_lines++] = line;
    return 0;
}

static int show_version(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)cfg, (void)flag, (void)value, (void)ctx;
    printf("petrel %s (module ABI %d)\n", PACKAGE_VERSION, PETREL_ABI_VERSION);
    printf("  systemd: socket activation and readiness notification (built in, no libsystemd)\n");
    for (int i = 0; i < nversion_lines; i++)
        printf("  %s\n", version_lines[i]);
    return EXIT_DONE;
}

/* The options of the command line itself (runtime/options.h): the
 * addresses, the modules, workers; the server's own are server.c's. */
static const petrel__option_t cli_options[] = {
    {.name = "listen",
     .value = "ADDR:PORT",
     .kind = PETREL__OPT_CALL,
     .set = set_listen,
     .help = "listen here (repeatable; default 127.0.0.1:8080)"},
    {.name = "module",
     .value = "NAME|PATH.so|PATH.c[:ARGS]",
     .kind = PETREL__OPT_CALL,
     .set = set_module,
     .help = "load a built-in module or a module file (repeatable);\n"
             "PATH.c with --dev; SIGHUP loads the module files again"},
    {.name = "workers",
     .value = "N|auto",
     .kind = PETREL__OPT_CALL,
     .set = set_workers,
     .expect = "a number from 1 to 1024 or 'auto'",
     .help = "worker processes (default 1; auto: one per CPU)"},
    {.name = NULL},
};
static const petrel__option_table_t cli_table = {"command line", NULL, cli_options};

static const petrel__option_t meta_options[] = {
    {.name = "help", .kind = PETREL__OPT_CALL, .set = show_help, .help = ""},
    {.name = "version", .kind = PETREL__OPT_CALL, .set = show_version},
    {.name = NULL},
};
static const petrel__option_table_t meta_table = {"command line", NULL, meta_options};

static const petrel__option_t cli_deploy_options[] = {
    {.name = "admin-listen",
     .value = "ADDR:PORT",
     .kind = PETREL__OPT_CALL,
     .set = set_listen,
     .help = "serve /livez, /readyz and /metrics there (repeatable;\ndefault: none)"},
    {.name = "pid-file",
     .value = "FILE",
     .kind = PETREL__OPT_CALL,
     .set = set_pid_file,
     .help = "write the master's pid to FILE (removed at exit)"},
    {.name = NULL},
};
static const petrel__option_table_t cli_deploy_table = {"command line", NULL, cli_deploy_options};

/* Every option, in the order of --help. */
const petrel__option_table_t *const petrel__option_tables[] = {
    &cli_table,
    &petrel__server_option_table,
    &petrel__request_option_table,
    &petrel__conn_option_table,
    &petrel__h2_option_table,
    &petrel__ws_option_table,
    &petrel__pubsub_option_table,
    &meta_table,
    &petrel__proxy_option_table,
    &cli_deploy_table,
    &petrel__server_deploy_option_table,
    &petrel__server_fault_option_table,
    NULL,
};

/* `petrel --help`: the tables' text.  doc/petrel.1 and README.md's
 * synopsis say the same (tests/integration/test_doc_options.sh). */
static void usage(FILE *f, const petrel__option_table_t *const *tables)
{
    fprintf(f, "usage: petrel [options]\n\n");
    petrel__options_help(f, tables);
    fprintf(f, "\n"
               "SIGUSR1 opens the log files again (after logrotate moved them).  Sockets passed\n"
               "by systemd (LISTEN_FDS) serve their --listen or --admin-listen address, or are\n"
               "listeners of their own (named \"admin\": an admin listener).\n"
               "Sizes take k, m or g suffixes; times may have a fraction (0.5).  See petrel(1).\n");
}

static int show_help(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)cfg, (void)flag, (void)value;
    usage(stdout, ((cli_t *)ctx)->t.all);
    return EXIT_DONE;
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

/* Raise the soft descriptor limit to the hard one: connections need fds. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The modules that petrel ships apart from libpetrel, by the option that
 * loads them: a program that embeds petrel without one is told how to
 * have it when that option is given. */
static const struct {
    const char *option, *module, *library;
} apart[] = {{"root", "static", "libpetrel-static"}};

/* What the --module options and the options that load a module build
 * into a server: run by petrel_main at start-up, and by the master again,
 * into a fresh router, for each reload (SIGHUP, --dev). */
typedef struct setup_args {
    const char **modules;
    int nmodules;
} setup_args_t;

static int setup(petrel_server_t *srv, void *ctx, char *err, size_t errlen)
{
    const setup_args_t *a = ctx;
    for (int i = 0; i < a->nmodules; i++) {
        int e = petrel__server_load_module(srv, a->modules[i], err, errlen);
        if (e < 0)
            return e;
    }
    return 0;
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

/* The names of the options given, in argv order without repeats: a flag
 * that applies to another one can be told so. */
typedef struct given {
    const petrel__option_t *opt[64];
    int n;
} given_t;

static bool was_given(const given_t *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->opt[i]->name, name) == 0)
            return true;
    return false;
}

/* An option that no table has: one of a module this program lacks is
 * told how to have it (status 1), any other is a usage error. */
static int unknown(const char *flag)
{
    size_t n = strcspn(flag, "=");
    for (size_t i = 0; i < sizeof(apart) / sizeof(apart[0]); i++)
        if (n == strlen(apart[i].option) + 2 && strncmp(flag + 2, apart[i].option, n - 2) == 0) {
            fprintf(stderr,
                    "petrel: --%s: this program has no built-in module '%s', which serves "
                    "--%s (link %s and add petrel_module_%s to its built-in modules)\n",
                    apart[i].option, apart[i].module, apart[i].option, apart[i].library,
                    apart[i].module);
            return 1;
        }
    fprintf(stderr, "petrel: unknown option '%s' (see petrel --help)\n", flag);
    return 2;
}

/* A module's option, given: kept for each load of the module, and the
 * module loaded if the option does that. */
static int module_option(cli_t *cl, const petrel__option_t *opt, const char *value)
{
    if (petrel__module_option_given(opt->module, opt->name, value) < 0)
        return PETREL_ENOMEM;
    const petrel_module_t *m = petrel__builtin_of(opt->module, NULL);
    if (!opt->loads || m == NULL)
        return 0;
    for (int i = 0; i < cl->nloaded; i++)
        if (cl->loaded[i] == m)
            return 0;
    cl->loaded[cl->nloaded++] = m;
    return 0;
}

/* Parse argv into srv->cfg and `cl` with the option tables: 0, EXIT_DONE
 * (--help, --version), or an exit status after saying what was wrong. */
static int parse_args(int argc, char **argv, cli_t *cl, given_t *g)
{
    size_t n = petrel__options_count(cl->t.all);
    struct option *lo = calloc(n + 1, sizeof(*lo));
    if (lo == NULL) {
        fprintf(stderr, "petrel: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const petrel__option_t *o = petrel__option_at(cl->t.all, i);
        lo[i] = (struct option){o->name, o->value ? required_argument : no_argument, NULL,
                                (int)(256 + i)};
    }
    int rc = 0, o, li;
    char flag[64];
    opterr = 0;
    optind = 1;
    while (rc == 0 && (li = -1, o = getopt_long(argc, argv, ":", lo, &li)) != -1) {
        /* the flag's own name, whether given as "--x v" or "--x=v" */
        if (li >= 0)
            snprintf(flag, sizeof(flag), "--%s", lo[li].name);
        else
            snprintf(flag, sizeof(flag), "%s", argv[optind - 1]);
        if (o == ':') {
            fprintf(stderr, "petrel: %s needs a value (see petrel --help)\n", flag);
            rc = 2;
        } else if (o < 256 || (size_t)(o - 256) >= n) {
            rc = unknown(flag);
        } else {
            const petrel__option_t *opt = petrel__option_at(cl->t.all, (size_t)(o - 256));
            if (!was_given(g, opt->name) && g->n < (int)(sizeof(g->opt) / sizeof(g->opt[0])))
                g->opt[g->n++] = opt;
            rc = petrel__option_set(&cl->srv->cfg, opt, flag, optarg, cl);
            if (rc == 0 && opt->module)
                rc = module_option(cl, opt, optarg);
            if (rc < 0)
                rc = rc == PETREL_ENOMEM ? (fprintf(stderr, "petrel: out of memory\n"), 1)
                                         : bad(flag, optarg ? optarg : "", opt->expect);
        }
    }
    free(lo);
    if (rc == 0 && optind < argc) {
        fprintf(stderr, "petrel: unexpected argument '%s' (see petrel --help)\n", argv[optind]);
        rc = 2;
    }
    return rc;
}

/* The options of a module given without the option that loads it (the
 * options of the module static without --root): "--a, --b and --c apply
 * to --root, and there is none". */
static void warn_without_loader(const cli_t *cl, const given_t *g)
{
    for (int t = 0; t < cl->t.nmods; t++) {
        const petrel__option_t *loader = NULL;
        for (const petrel__option_t *o = cl->t.mods[t].opts; o->name && !loader; o++)
            loader = o->loads ? o : NULL;
        if (loader == NULL)
            continue;
        char names[256];
        size_t len = 0;
        int n = 0, k = 0;
        bool loaded = false;
        for (int i = 0; i < g->n; i++) {
            bool mine = g->opt[i]->module && strcmp(g->opt[i]->module, loader->module) == 0;
            loaded |= mine && g->opt[i]->loads;
            n += mine && !g->opt[i]->loads;
        }
        for (int i = 0; i < g->n && !loaded; i++) {
            if (!g->opt[i]->module || strcmp(g->opt[i]->module, loader->module) != 0)
                continue;
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s--%s",
                                    k == 0       ? ""
                                    : k + 1 == n ? " and "
                                                 : ", ",
                                    g->opt[i]->name);
            k++;
        }
        if (!loaded && n)
            petrel_log(PETREL_LOG_WARN, "%s appl%s to --%s, and there is none", names,
                       n == 1 ? "ies" : "y", loader->name);
    }
}

/* What the options say together, and the logs: 0, or an exit status
 * after saying what is wrong (or warnings for options that apply to one
 * not given). */
static int check_args(cli_t *cl, const given_t *g)
{
    petrel__config_t *cfg = &cl->srv->cfg;
    char err[1024];
    petrel__log_level = cfg->log_level;
    if (cfg->pubsub_redis_prefix && cfg->pubsub_redis == NULL)
        petrel_log(PETREL_LOG_WARN, "--pubsub-redis-prefix applies to --pubsub-redis, and there "
                                    "is none");
    if (cfg->pubsub_redis &&
        petrel__pubsub_bridge_config(cfg->pubsub_redis, cfg->pubsub_redis_prefix, err,
                                     sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        return 2;
    }
    if (cfg->trusted && !cfg->proxy_protocol) {
        fprintf(stderr, "petrel: --trusted-proxies: applies to --proxy-protocol, which is not "
                        "given\n");
        return 2;
    }
    if (cfg->error_log && petrel__elog_open(cfg->error_log) < 0) {
        fprintf(stderr, "petrel: --error-log '%s': %s\n", cfg->error_log, strerror(errno));
        return 1;
    }
    if (was_given(g, "max-proxy-header-size") && !cfg->proxy_protocol)
        petrel_log(PETREL_LOG_WARN,
                   "--max-proxy-header-size applies to --proxy-protocol, which is not given");
    if (was_given(g, "access-log-format") && cfg->access_log == NULL)
        petrel_log(PETREL_LOG_WARN, "--access-log-format applies to --access-log, which is not "
                                    "given");
    warn_without_loader(cl, g);
    return 0;
}

/* The listening sockets (systemd's, else the default address), the shared
 * counters: 0 or an exit status. */
static int prepare_listeners(petrel_server_t *srv)
{
    char err[512];
    /* socket activation: systemd's sockets, and no default address besides */
    if (inherit_sockets(srv) < 0)
        return 1;
    if (!has_public_listen(srv) &&
        petrel__server_add_listen(srv, "127.0.0.1:8080", err, sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        return 1;
    }
    /* the counters in shared memory, before the modules register theirs */
    if (petrel__server_has_admin(srv) && petrel__metrics_init(srv->cfg.workers) < 0) {
        fprintf(stderr, "petrel: --admin-listen: cannot map the shared counters: %s\n",
                strerror(errno));
        return 1;
    }
    return 0;
}

/* The modules to load, in cl->modules (module.c: petrel__module_specs):
 * 0 or an exit status. */
static int prepare_modules(cli_t *cl, char **joined)
{
    const char **mods = calloc((size_t)(cl->nmodules + cl->nloaded) + 1, sizeof(*mods));
    int n = mods ? petrel__module_specs(cl->modules, cl->nmodules, cl->loaded, cl->nloaded, mods,
                                        joined)
                 : -1;
    if (n < 0) {
        free(mods);
        fprintf(stderr, "petrel: out of memory\n");
        return 1;
    }
    free(cl->modules);
    cl->modules = mods;
    cl->nmodules = n;
    return 0;
}

/* The access log and the pid file: 0 or an exit status. */
static int open_outputs(cli_t *cl, bool *pid_written)
{
    const petrel__config_t *cfg = &cl->srv->cfg;
    if (cfg->access_log) {
        if (petrel__alog_open(cfg->access_log) < 0) {
            fprintf(stderr, "petrel: --access-log '%s': %s\n", cfg->access_log, strerror(errno));
            return 1;
        }
        petrel__alog_format = cfg->access_log_format;
    }
    if (cl->pid_file) {
        FILE *f = fopen(cl->pid_file, "w");
        if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
            fprintf(stderr, "petrel: --pid-file '%s': %s\n", cl->pid_file, strerror(errno));
            return 1;
        }
        *pid_written = true;
    }
    return 0;
}

/* No module to load: "no --module and no --root" (the options that load
 * one): every request gets 404. */
static void warn_nothing(const cli_t *cl)
{
    char names[256] = "no --module";
    size_t len = strlen(names);
    for (int t = 0; t < cl->t.nmods; t++)
        for (const petrel__option_t *o = cl->t.mods[t].opts; o->name; o++)
            if (o->loads && len < sizeof(names))
                len += (size_t)snprintf(names + len, sizeof(names) - len, " and no --%s", o->name);
    petrel_log(PETREL_LOG_WARN, "%s: every request gets 404", names);
}

int petrel_main(int argc, char **argv, const petrel_module_t *const *builtins)
{
    petrel_server_t *srv = petrel__server_new();
    cli_t cl = {.srv = srv, .modules = calloc((size_t)argc + 1, sizeof(char *))};
    given_t given = {.n = 0};
    char **joined = calloc((size_t)argc + 1, sizeof(char *)), err[1024];
    bool pid_written = false;
    if (srv == NULL || cl.modules == NULL || joined == NULL) {
        fprintf(stderr, "petrel: out of memory\n");
        free(cl.modules);
        free(joined);
        petrel__server_free(srv);
        return 1;
    }
    petrel__set_builtins(builtins);
    int nb = 0;
    while (builtins && builtins[nb])
        nb++;
    cl.loaded = calloc((size_t)nb + 1, sizeof(*cl.loaded));
    int rc = cl.loaded ? petrel__cli_tables_make(&cl.t, petrel__option_tables, builtins, argc, argv)
                       : (fprintf(stderr, "petrel: out of memory\n"), 1);
    if (rc == 0 && (rc = parse_args(argc, argv, &cl, &given)) == 0 &&
        (rc = check_args(&cl, &given)) == 0 && (rc = prepare_listeners(srv)) == 0 &&
        (rc = prepare_modules(&cl, joined)) == 0) {
        /* the modules: now, and again on each reload (SIGHUP, --dev) */
        setup_args_t sargs = {cl.modules, cl.nmodules};
        srv->setup = setup;
        srv->setup_ctx = &sargs;
        /* the workers' slots (the watchdog, crash reports), and the trial of
         * the modules: a module that crashes in its init stops petrel with a
         * word */
        if (petrel__fault_init(srv->cfg.workers) < 0) {
            fprintf(stderr, "petrel: cannot map the workers' slots: %s\n", strerror(errno));
            rc = 1;
        } else if (petrel__setup_trial(srv, err, sizeof(err)) < 0 ||
                   setup(srv, &sargs, err, sizeof(err)) < 0) {
            fprintf(stderr, "petrel: %s\n", err);
            rc = 1;
        } else {
            if (cl.nmodules == 0)
                warn_nothing(&cl);
            if ((rc = open_outputs(&cl, &pid_written)) == 0) {
                raise_nofile();
                signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write is an EPIPE, not a death */
                rc = petrel__master_run(srv);
            }
        }
    }
    for (int i = 0; joined[i]; i++)
        free(joined[i]);
    free(joined);
    petrel__cli_tables_free(&cl.t);
    free(cl.loaded);
    petrel__module_options_forget();
    if (pid_written)
        unlink(cl.pid_file);
    free(cl.modules);
    free((void *)srv->cfg.trusted);
    petrel__server_free(srv);
    return rc == EXIT_DONE ? 0 : rc;
}
