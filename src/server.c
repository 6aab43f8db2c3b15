/*
 * server.c -- the server object: configuration defaults, listening
 * addresses, routes and modules.
 */
#include "server.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void petrel__config_defaults(petrel__config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_header_size = 16384;
    cfg->max_uri_size = 8192;
    cfg->max_body_size = 16u << 20;
    cfg->max_connections = 10000;
    cfg->max_pipelined = 16;
    cfg->header_timeout_ms = 10000;
    cfg->keepalive_timeout_ms = 60000;
    cfg->send_timeout_ms = 60000;
    cfg->drain_timeout_ms = 10000;
    cfg->handler_timeout_ms = 30000;
    cfg->body_timeout_ms = 20000;
    cfg->body_min_rate = 1024;
    cfg->workers = 1;
    cfg->log_level = PETREL_LOG_INFO;
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
    if (methods & ~PETREL_ANY)
        return PETREL_EINVAL; /* PETREL__CONNECT is WebSocket's own */
    return petrel__router_add(srv->router, methods, pattern, handler, data);
}

int petrel__route_add_owned(petrel_server_t *srv, int methods, const char *pattern,
                            petrel_handler_t handler, void *data, void (*free_data)(void *))
{
    int rc = petrel__router_own(srv->router, data, free_data);
    return rc < 0 ? rc : petrel__router_add(srv->router, methods, pattern, handler, data);
}

const petrel__router_t *petrel__server_routes(const petrel_server_t *srv) { return srv->router; }

/* "ADDR:PORT", "[V6]:PORT", "*:PORT" or "PORT". */
int petrel__server_add_listen(petrel_server_t *srv, const char *spec, char *err, size_t errlen)
{
    char host[256] = "";
    const char *port;
    const char *colon = strrchr(spec, ':');
    if (colon == NULL) {
        port = spec;
        strcpy(host, "0.0.0.0");
    } else {
        size_t hl = (size_t)(colon - spec);
        if (hl >= sizeof(host)) {
            snprintf(err, errlen, "--listen '%s': address too long", spec);
            return PETREL_EINVAL;
        }
        memcpy(host, spec, hl);
        host[hl] = '\0';
        port = colon + 1;
        if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        if (strcmp(host, "*") == 0 || host[0] == '\0')
            strcpy(host, "0.0.0.0");
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || p < 0 || p > 65535) {
        snprintf(err, errlen, "--listen '%s': expected ADDR:PORT with a port from 0 to 65535",
                 spec);
        return PETREL_EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "--listen '%s': cannot resolve '%s': %s", spec, host,
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
    snprintf(l->text, sizeof(l->text), "%s", spec);
    freeaddrinfo(res);
    return 0;
}

