/*
 * server.c -- the server object: configuration defaults, listening
 * addresses, routes and modules.
 */
#include "server/server.h"

#include "runtime/proxy.h"
#include "framework/pubsub.h"
#include "protocols/h2.h"
#include "protocols/proto.h"
#include "protocols/ws.h"
#include "server/options.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The server's own options (runtime/options.h); the command line's
 * (addresses, modules, workers) are cli.c's. */
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const alog_formats[] = {"combined", "json", NULL};

static const petrel__option_t server_options[] = {
    {.name = "dev",
     .kind = PETREL__OPT_FLAG,
     PETREL__OPT_FIELD(dev),
     .help = "development: a --module PATH.c is built with cc, and a\n"
             "module file that changes is rebuilt and reloaded"},
    {.name = "log-level",
     .value = "error|warn|info|debug",
     .kind = PETREL__OPT_CHOICE,
     PETREL__OPT_FIELD(log_level),
     .choices = log_levels,
     .def = PETREL_LOG_INFO,
     .expect = "error, warn, info or debug",
     .help = "what the error log says (default info)"},
    {.name = "access-log",
     .value = "FILE|-",
     .kind = PETREL__OPT_TEXT,
     PETREL__OPT_FIELD(access_log),
     .help = "write an access log, see --access-log-format (default: none)"},
    {.name = "drain-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(drain_timeout_ms),
     .min = 1,
     .def = 10000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "graceful shutdown limit (default 10)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__server_option_table = {"server", NULL, server_options};

static const petrel__option_t server_deploy_options[] = {
    {.name = "admin-max-connections",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(admin_max_connections),
     .min = 1,
     .max = 100000,
     .def = 256,
     .expect = "a number of connections from 1 to 100000",
     .help = "connections per worker on the admin listener (default 256)"},
    {.name = "drain-delay",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(drain_delay_ms),
     .min = 0,
     .expect = "a number of seconds, 0 or more (e.g. 5 or 0.5)",
     .help = "on SIGTERM, /readyz answers 503 this long before the\n"
             "listeners close (default 0)"},
    {.name = "access-log-format",
     .value = "combined|json",
     .kind = PETREL__OPT_CHOICE,
     PETREL__OPT_FIELD(access_log_format),
     .choices = alog_formats,
     .expect = "combined or json",
     .help = "format of --access-log lines (default combined)"},
    {.name = "error-log",
     .value = "FILE",
     .kind = PETREL__OPT_TEXT,
     PETREL__OPT_FIELD(error_log),
     .help = "write the error log to FILE instead of standard error"},
    /* memory that comes back (worker.c) */
    {.name = "memory-reserve",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(memory_reserve),
     .min = 0,
     .max = (uint64_t)1 << 30,
     .def = 256 << 10,
     .expect = "a size from 0 to 1g (e.g. 256k)",
     .help = "free memory a worker keeps for the next burst once idle;\n"
             "the rest goes back to the kernel (default 256k)"},
    {.name = "memory-release-delay",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(memory_release_delay_ms),
     .min = 1,
     .def = 1000,
     .expect = "a number of seconds greater than 0 (e.g. 1 or 0.5)",
     .help = "free memory unused this long goes back to the kernel\n"
             "(default 1)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__server_deploy_option_table = {"server", NULL,
                                                                   server_deploy_options};

/* What petrel does when a handler goes wrong (worker.c, fault.c). */
static const petrel__option_t server_fault_options[] = {
    {.name = "init-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(init_timeout_ms),
     .min = 1,
     .def = 30000,
     .expect = "a number of seconds greater than 0 (e.g. 30 or 0.5)",
     .help = "time for loading the modules and running their init, in\n"
             "a trial process first (default 30)"},
    {.name = "watchdog-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(watchdog_timeout_ms),
     .min = 0,
     .def = 5000,
     .expect = "a number of seconds, 0 (off) or more (e.g. 5 or 0.5)",
     .help = "a worker whose loop turn lasts longer is killed and\n"
             "replaced (default 5; 0: no watchdog)"},
    {.name = "restart-limit",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(restart_limit),
     .min = 0,
     .max = 1000000,
     .def = 5,
     .expect = "a number of failures from 0 (no limit) to 1000000",
     .help = "a worker failing to start N times in a row stops petrel\n"
             "(default 5; 0: no limit)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__server_fault_option_table = {
    "server", "When a handler goes wrong (doc/guide.md):", server_fault_options};

/* The tables whose defaults make a configuration. */
static const petrel__option_table_t *const default_tables[] = {
    &petrel__server_option_table,       &petrel__server_deploy_option_table,
    &petrel__request_option_table,      &petrel__conn_option_table,
    &petrel__h2_option_table,           &petrel__ws_option_table,
    &petrel__pubsub_option_table,       &petrel__proxy_option_table,
    &petrel__server_fault_option_table, NULL,
};

void petrel__config_defaults(petrel__config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    petrel__options_defaults(cfg, default_tables);
    cfg->workers = 1; /* --workers (cli.c) */
}

petrel_server_t *petrel__server_new(void)
{
    petrel_server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL)
        return NULL;
    petrel__config_defaults(&srv->cfg);
    srv->router = petrel__router_new();
    if (srv->router == NULL) {
        free(srv);
        return NULL;
    }
    return srv;
}

void petrel__server_free(petrel_server_t *srv)
{
    if (srv == NULL)
        return;
    petrel__router_free(srv->router);
    free(srv->listens);
    free(srv->modules);
    free(srv->listeners);
    for (int i = 0; i < srv->nmodules; i++)
        if (srv->module_handles && srv->module_handles[i])
            dlclose(srv->module_handles[i]);
    free(srv->module_handles);
    free(srv);
}

int petrel_route_add(petrel_server_t *srv, int methods, const char *pattern,
                     petrel_handler_t handler, void *data)
{
    if (methods & ~(PETREL_ANY | PETREL_WS_CONNECT | PETREL_OTHER | PETREL_BODY_STREAM))
        return PETREL_EINVAL;
    return petrel__router_add(srv->router, methods, pattern, handler, data);
}

int petrel_ws_route_add(petrel_server_t *srv, const char *pattern,
                        const petrel_ws_handler_t *handler, void *data)
{
    if (srv == NULL || pattern == NULL || handler == NULL)
        return PETREL_EINVAL;
    petrel_handler_t fn;
    void *rt;
    int rc = petrel__ws_route_make(handler, data, &fn, &rt);
    /* the router owns the route's data (a reload drops the old generation's) */
    if (rc < 0 || (rc = petrel__router_own(srv->router, rt, free)) < 0)
        return rc;
    /* GET: HTTP/1.1's Upgrade; PETREL__CONNECT: HTTP/2's Extended CONNECT */
    return petrel__router_add(srv->router, PETREL_GET | PETREL__CONNECT, pattern, fn, rt);
}

/* "ADDR:PORT", "[V6]:PORT" or "*:PORT" (every IPv4 interface, said so).
 * A bare "PORT" or ":PORT" is refused: it used to mean every interface,
 * which quietly exposed a server its operator may have meant for this host
 * only (the default, without --listen, is the loopback address). */
static int add_listen(petrel_server_t *srv, const char *spec, bool admin, char *err, size_t errlen)
{
    const char *flag = admin ? "--admin-listen" : "--listen";
    char host[256] = "";
    const char *port;
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || colon == spec) {
        const char *p = colon ? colon + 1 : spec;
        snprintf(err, errlen,
                 "%s '%s': no address: give ADDR:PORT, e.g. 127.0.0.1:%s (this host only) or "
                 "0.0.0.0:%s (every interface)",
                 flag, spec, *p ? p : "8080", *p ? p : "8080");
        return PETREL_EINVAL;
    } else {
        size_t hl = (size_t)(colon - spec);
        if (hl >= sizeof(host)) {
            snprintf(err, errlen, "%s '%s': address too long", flag, spec);
            return PETREL_EINVAL;
        }
        memcpy(host, spec, hl);
        host[hl] = '\0';
        port = colon + 1;
        if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        if (strcmp(host, "*") == 0)
            strcpy(host, "0.0.0.0");
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || p < 0 || p > 65535) {
        snprintf(err, errlen, "%s '%s': expected ADDR:PORT with a port from 0 to 65535", flag,
                 spec);
        return PETREL_EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "%s '%s': cannot resolve '%s': %s", flag, spec, host,
                 gai_strerror(rc));
        return PETREL_EINVAL;
    }
    petrel__listen_t *ls = realloc(srv->listens, (size_t)(srv->nlistens + 1) * sizeof(*ls));
    if (ls == NULL) {
        freeaddrinfo(res);
        return PETREL_ENOMEM;
    }
    srv->listens = ls;
    petrel__listen_t *l = &ls[srv->nlistens++];
    memset(l, 0, sizeof(*l));
    memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
    l->addrlen = res->ai_addrlen;
    l->fd = l->hold_fd = -1;
    l->admin = admin;
    l->inherited = -1;
    snprintf(l->text, sizeof(l->text), "%s", spec);
    freeaddrinfo(res);
    return 0;
}

int petrel__server_add_listen(petrel_server_t *srv, const char *spec, char *err, size_t errlen)
{
    return add_listen(srv, spec, false, err, errlen);
}

int petrel__server_add_admin(petrel_server_t *srv, const char *spec, char *err, size_t errlen)
{
    return add_listen(srv, spec, true, err, errlen);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
    return false;
}

int petrel__server_inherit(petrel_server_t *srv, int fd, const char *name, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "socket from systemd (descriptor %d): %s", fd, strerror(errno));
        return PETREL_EINVAL;
    }
    /* the socket of a --listen or --admin-listen address, or a new one */
    for (int i = 0; i < srv->nlistens; i++) {
        petrel__listen_t *l = &srv->listens[i];
        if (l->inherited < 0 && same_addr(&l->addr, &ss)) {
            l->inherited = fd;
            return 0;
        }
    }
    petrel__listen_t *ls = realloc(srv->listens, (size_t)(srv->nlistens + 1) * sizeof(*ls));
    if (ls == NULL)
        return PETREL_ENOMEM;
    srv->listens = ls;
    petrel__listen_t *l = &ls[srv->nlistens++];
    memset(l, 0, sizeof(*l));
    memcpy(&l->addr, &ss, sizeof(ss));
    l->addrlen = sl;
    l->fd = l->hold_fd = -1;
    l->inherited = fd;
    l->admin = strcmp(name, "admin") == 0;
    snprintf(l->text, sizeof(l->text), "systemd socket %d%s%s", fd, name[0] ? " " : "", name);
    return 0;
}

bool petrel__server_has_admin(const petrel_server_t *srv)
{
    for (int i = 0; i < srv->nlistens; i++)
        if (srv->listens[i].admin)
            return true;
    return false;
}
