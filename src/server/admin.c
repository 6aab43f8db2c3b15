/*
 * admin.c -- the admin listener (--admin-listen): /livez, /readyz and
 * /metrics, served by every worker on sockets of their own.
 *
 * Its connections are a connection set of their own, with a router and
 * settings of their own (a server object that only this file fills): the
 * same HTTP/1.1 and h2c as the public listeners, but never a PROXY header,
 * never drained with them -- the admin port answers until the worker exits
 * -- and not counted in the metrics or written to the access log (a scrape
 * or a balancer's health check is not traffic).
 *
 *   /livez    200 while the process runs (it answers, so it lives).
 *   /readyz   200 while the instance takes traffic; 503 from the moment a
 *             drain starts (SIGTERM: before the listeners close, see
 *             --drain-delay) and while a module reports a check down
 *             (petrel_ready_set), naming why.
 *   /metrics  the Prometheus text format (0.0.4) of the whole instance.
 */
#include "server/server.h"

#include "runtime/metrics.h"
#include "protocols/h2.h"
#include "protocols/proto.h"

#include <string.h>

#define TEXT "text/plain; charset=utf-8"
#define PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

/* Its requests are three GETs without a body: a larger one is 413.  Its
 * connections are --admin-max-connections per worker. */
#define ADMIN_MAX_BODY 1024

static int livez(petrel_req_t *req, void *data)
{
    (void)data;
    petrel_resp_header(req, "Cache-Control", "no-store");
    return petrel_send(req, 200, TEXT, "ok\n", 3);
}

static int readyz(petrel_req_t *req, void *data)
{
    (void)data;
    char why[96];
    petrel_resp_header(req, "Cache-Control", "no-store");
    if (petrel__metrics_ready(why, sizeof(why)))
        return petrel_send(req, 200, TEXT, "ready\n", 6);
    const char *body = petrel_arena_printf(req->arena, "not ready: %s\n", why);
    if (body == NULL)
        return 503;
    return petrel_send(req, 503, TEXT, body, strlen(body));
}

static int metrics(petrel_req_t *req, void *data)
{
    (void)data;
    size_t len;
    const char *text = petrel__metrics_text(req->arena, &len);
    if (text == NULL)
        return 503;
    petrel_resp_header(req, "Cache-Control", "no-store");
    return petrel_send(req, 200, PROMETHEUS, text, len);
}

static void on_admin_gone(petrel__conns_t *cs)
{
    petrel__listen_on_gone(cs->srv->main);
}

int petrel__admin_init(petrel_server_t *srv)
{
    petrel_server_t *a = petrel__server_new();
    if (a == NULL)
        return PETREL_ENOMEM;
    a->cfg = srv->cfg;
    a->cfg.proxy_protocol = false;
    a->cfg.trusted = NULL;
    a->cfg.ntrusted = 0;
    a->cfg.max_connections = srv->cfg.admin_max_connections;
    a->cfg.max_body_size = ADMIN_MAX_BODY;
    a->main = srv;
    int rc;
    if ((rc = petrel_route_add(a, PETREL_GET, "/livez", livez, NULL)) < 0 ||
        (rc = petrel_route_add(a, PETREL_GET, "/readyz", readyz, NULL)) < 0 ||
        (rc = petrel_route_add(a, PETREL_GET, "/metrics", metrics, NULL)) < 0 ||
        (rc = petrel__conns_init(&a->conns, &a->cfg, a, &petrel__entry_ops)) < 0) {
        petrel__server_free(a);
        return rc;
    }
    a->conns.quiet = true;
    a->conns.router = a->router;
    a->conns.upgrade = petrel__h2_upgrade;
    a->conns.on_gone = on_admin_gone;
    srv->admin = a;
    petrel__quiet_server = a;
    return 0;
}

void petrel__admin_fini(petrel_server_t *srv)
{
    if (srv->admin == NULL)
        return;
    srv->admin->conns.on_gone = NULL;
    petrel__conns_close_all(&srv->admin->conns);
    petrel__conns_reap();
    petrel__quiet_server = NULL;
    petrel__server_free(srv->admin);
    srv->admin = NULL;
}
