/*
 * request.c -- the protocol-neutral request: header, parameter and query
 * look-ups, and dispatch through the router.
 */
#include "protocols/proto.h"
#include "framework/body.h"
#include "framework/router.h"
#include "runtime/fault.h"
#include "runtime/options.h"

#include <string.h>

const char *petrel_req_header(const petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        if (petrel__str_ieq(req->headers[i].name.ptr, req->headers[i].name.len, name, n))
            return req->headers[i].value.ptr;
    return NULL;
}

const char *petrel_req_param(const petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nparams; i++)
        if (req->params[i].name.len == n && memcmp(req->params[i].name.ptr, name, n) == 0)
            return req->params[i].value.ptr;
    return NULL;
}

const char *petrel_req_query(petrel_req_t *req, const char *name)
{
    size_t n = strlen(name);
    const char *p = req->query.ptr;
    if (p == NULL)
        return NULL; /* no query: NULL + 0 would be undefined */
    const char *end = p + req->query.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *ke = eq ? eq : e;
        char *key = petrel_arena_alloc(req->arena, (size_t)(ke - p) + 1, 1);
        if (key == NULL)
            return NULL;
        ssize_t kl = petrel__pct_decode(p, (size_t)(ke - p), key, true);
        if (kl == (ssize_t)n && memcmp(key, name, n) == 0) {
            const char *v = eq ? eq + 1 : e;
            char *val = petrel_arena_alloc(req->arena, (size_t)(e - v) + 1, 1);
            if (val == NULL || petrel__pct_decode(v, (size_t)(e - v), val, true) < 0)
                return NULL;
            return val;
        }
        p = amp ? amp + 1 : end;
    }
    return NULL;
}

const char *petrel_req_peer(petrel_req_t *req)
{
    return req->_proto->peer(req);
}

bool petrel__req_streams(petrel_req_t *req, const petrel__router_t *routes)
{
    petrel__match_t m;
    if (req->path.len == 1 && req->path.ptr[0] == '*')
        return false;
    return petrel__router_match(routes, req->method, req->path.ptr, req->path.len, req->arena,
                                &m) == 0 &&
           m.info->stream;
}

void petrel__req_dispatch(petrel_req_t *req, const petrel__router_t *routes)
{
    petrel__match_t m;
    if (req->path.len == 1 && req->path.ptr[0] == '*') {
        /* OPTIONS * (RFC 9110 §9.3.7): the server's capabilities */
        char allow[96];
        petrel__methods_format(PETREL_ANY, allow, sizeof(allow));
        petrel_resp_header(req, "Allow", allow);
        petrel_send(req, 204, NULL, "", 0);
        return;
    }
    int st =
        petrel__router_match(routes, req->method, req->path.ptr, req->path.len, req->arena, &m);
    if (st) {
        if (st == 405) {
            char allow[96];
            petrel__methods_format(m.allowed, allow, sizeof(allow));
            petrel_resp_header(req, "Allow", allow);
        }
        petrel_send_status(req, st);
        return;
    }
    req->params = m.params;
    req->nparams = m.nparams;
    req->route_data = m.data;
    if (unlikely(m.info->stream))
        petrel__body_routed(req);
    uint64_t outer = petrel__log_req; /* petrel_log() lines of the handler carry its id */
    petrel__log_req = req->id;
    /* a crash or the watchdog names the request (fault.h): two pointers,
     * set around the call */
    const petrel_req_t *outer_req = petrel__fault_req;
    const petrel__route_info_t *outer_route = petrel__fault_route;
    petrel__fault_route = m.info;
    petrel__fault_req = req;
    int rc = m.handler(req, m.data);
    petrel__fault_req = outer_req;
    petrel__fault_route = outer_route;
    petrel__log_req = outer;
    petrel_resp_t *resp = req->_resp;
    if ((rc == 0 || rc == PETREL_LATER) && resp->sent) {
        /* answered, or streaming: the handler ends the stream later */
        resp->holds = !resp->ended;
        return;
    }
    if (rc == PETREL_LATER) {
        petrel__req_wait(req); /* it answers later, within --handler-timeout */
        return;
    }
    if (rc >= 200 && rc <= 599 && !resp->sent) {
        petrel_send_status(req, rc);
        return;
    }
    const char *m_ = req->method_name.ptr, *p_ = req->path.ptr;
    unsigned long long id = (unsigned long long)req->id;
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "request %llu %s %s: handler failed: %s", id, m_, p_,
                   petrel_strerror(rc));
    else if (rc == 0)
        petrel_log(PETREL_LOG_ERROR, "request %llu %s %s: handler returned 0 without responding",
                   id, m_, p_);
    else if (resp->sent)
        petrel_log(PETREL_LOG_ERROR,
                   "request %llu %s %s: handler returned %d after starting its response", id, m_,
                   p_, rc);
    else
        petrel_log(PETREL_LOG_ERROR,
                   "request %llu %s %s: handler returned %d, which is not a status it may "
                   "send (200-599) nor PETREL_LATER",
                   id, m_, p_, rc);
    if (!resp->sent) {
        petrel_send_status(req, 500);
    } else if (!resp->ended && rc < 0) {
        petrel__resp_drain_off(resp);
        resp->ended = true;
        req->_proto->broken(req);
    } else if (!resp->ended) {
        petrel_stream_end(req);
    }
}

/* The options of a request's limits (runtime/options.h). */
static const petrel__option_t request_options[] = {
    {.name = "max-header-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_header_size),
     .min = 1,
     .max = 1u << 20,
     .def = 16384,
     .expect = "a size from 1 byte to 1m (e.g. 16k)",
     .help = "request header section limit (default 16k) -> 431"},
    {.name = "max-uri-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_uri_size),
     .min = 1,
     .max = 1u << 20,
     .def = 8192,
     .expect = "a size from 1 byte to 1m (e.g. 16k)",
     .help = "request target limit (default 8k) -> 414"},
    {.name = "max-body-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_body_size),
     .min = 1,
     .max = 1ull << 36,
     .def = 16u << 20,
     .expect = "a size from 1 byte to 64g (e.g. 16m)",
     .help = "request body limit (default 16m) -> 413"},
    {.name = "max-pipelined",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_pipelined),
     .min = 1,
     .max = 1024,
     .def = 16,
     .expect = "a number of requests from 1 to 1024",
     .help = "HTTP/1.1 requests of a connection handled at once (default 16)"},
    {.name = "handler-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(handler_timeout_ms),
     .min = 1,
     .def = 30000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "time a request waits for its handler (default 30) -> 504"},
    {.name = "body-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(body_timeout_ms),
     .min = 1,
     .def = 10000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "time for a request body or WebSocket message, plus 1 s\n"
             "per --body-min-rate bytes received (default 10) -> 408"},
    {.name = "body-min-rate",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(body_min_rate),
     .min = 0,
     .max = 1ull << 40,
     .def = 1024,
     .expect = "a number of bytes per second, 0 or more (e.g. 1k)",
     .help = "bytes per second that earn a body more time (default 1k)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__request_option_table = {"requests", NULL, request_options};
