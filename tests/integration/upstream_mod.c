/*
 * upstream_mod.c -- the module of test_upstream*.sh: GET or POST /up/PATH
 * calls the upstream "t" (UPT_URLS, options in UPT_OPTS "name=value,...")
 * with PATH and the query, and answers what it got:
 *   200 "status S\nx-test V\nbody B\ntrailer T\n" (the upstream's status,
 *       its X-Test field, its body, its X-Trailer trailer), or
 *   502 (504 for the deadlines, 503 for the breaker and a full queue)
 *       "error CODE NAME: REASON\n", and "after head" when the call failed
 *       after on_head.
 * GET /cancel/PATH makes a call and cancels it at once, then answers 200.
 * GET /cancel-later/PATH makes a call, cancels it 100 ms later (its request
 * sent by then) and answers 200 "cancelled".
 * POST /grpc/PATH is /up/PATH as a gRPC call: content-type application/grpc
 * and te: trailers sent, the body as given (the 5-byte prefix and the
 * message), and a last line "grpc-status S" (from the trailers, or from the
 * header of a trailers-only answer).
 * GET or POST /pause/PATH is /up/PATH with the response paused from on_head to
 * 100 ms later.
 * POST /stream/PATH?n=N[&part=P][&chunked=1][&short=K][&cancel=M][&put=1]
 * [&tick=1] calls PATH with a body of N bytes made as it is sent
 * (petrel_call_stream(): byte i is ALPHA[i % 61]), written in parts of P
 * bytes (16384 by default, at most that), waiting for the drain callback
 * when a write says 0 (tick=1: a part per 1 ms timer); chunked=1 sends it
 * chunked, else with its length; short=K declares N but writes N - K;
 * cancel=M cancels the call once M bytes are written and answers 200
 * "cancelled after W"; put=1 sends a PUT.  It answers 200
 * "status S\nbody B\nwrote W\nwaits D\nafter R\n" (W the bytes written, D
 * the times it waited for a drain, R what a write said after the end of
 * the response when the body was not all written, else 0), or the error
 * of /up/PATH followed by "wrote W\nwend R\n" (R: petrel_call_write_end()).
 * POST /grpc-wrap/PATH is /grpc/PATH with the body wrapped as one gRPC
 * message: an EchoMessage (modules/grpcecho.c) whose request_id is the
 * body's "requestId" and whose payload is the body (petrel-bench's JSON
 * POST bodies, for tools/upstream-bench.sh's gRPC rows).
 */
#include <petrel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static petrel_upstream_t *up;

typedef struct got {
    petrel_req_t *req;
    petrel_call_t *call;
    /* /stream/ */
    size_t n, part, sent, cancel;
    int waits, after, wend, werr;
    bool tick, ended, greedy;
    petrel_timer_t *timer;
    int pause;
    bool grpc;
    int status;
    char grpc_status[16];
    char xtest[64];
    char trailer[64];
    char *body;
    size_t len, cap;
} got_t;

static void resume(void *data)
{
    got_t *g = data;
    petrel_call_pause(g->call, 0);
}

static void on_head(petrel_call_t *call, const petrel_upstream_head_t *h, void *data)
{
    got_t *g = data;
    if (g->pause && petrel_timer_start(100, resume, g) != NULL)
        petrel_call_pause(call, 1);
    g->status = h->status;
    for (size_t i = 0; i < h->nheaders; i++) {
        if (h->headers[i].name.len == 11 &&
            strncasecmp(h->headers[i].name.ptr, "grpc-status", 11) == 0)
            snprintf(g->grpc_status, sizeof(g->grpc_status), "%.*s", (int)h->headers[i].value.len,
                     h->headers[i].value.ptr);
        if (h->headers[i].name.len == 6 && strncasecmp(h->headers[i].name.ptr, "x-test", 6) == 0)
            snprintf(g->xtest, sizeof(g->xtest), "%.*s", (int)h->headers[i].value.len,
                     h->headers[i].value.ptr);
    }
}

static void on_body(petrel_call_t *call, const void *p, size_t n, void *data)
{
    (void)call;
    got_t *g = data;
    if (g->len + n + 1 > g->cap) {
        size_t cap = (g->len + n + 1) * 2;
        char *b = petrel_arena_alloc(g->req->arena, cap, 1);
        if (b == NULL)
            return;
        if (g->len)
            memcpy(b, g->body, g->len);
        g->body = b;
        g->cap = cap;
    }
    memcpy(g->body + g->len, p, n);
    g->len += n;
    g->body[g->len] = '\0';
}

static void on_end(petrel_call_t *call, const petrel_header_t *t, size_t n, void *data)
{
    (void)call;
    got_t *g = data;
    for (size_t i = 0; i < n; i++) {
        if (t[i].name.len == 9 && strncasecmp(t[i].name.ptr, "x-trailer", 9) == 0)
            snprintf(g->trailer, sizeof(g->trailer), "%.*s", (int)t[i].value.len, t[i].value.ptr);
        if (t[i].name.len == 11 && strncasecmp(t[i].name.ptr, "grpc-status", 11) == 0)
            snprintf(g->grpc_status, sizeof(g->grpc_status), "%.*s", (int)t[i].value.len,
                     t[i].value.ptr);
    }
    if (g->grpc && g->body) { /* binary: in hex */
        char *hex = petrel_arena_alloc(g->req->arena, 2 * g->len + 1, 1);
        if (hex == NULL) {
            petrel_send_status(g->req, 500);
            return;
        }
        for (size_t i = 0; i < g->len; i++)
            sprintf(hex + 2 * i, "%02x", (unsigned char)g->body[i]);
        g->body = hex;
        g->len *= 2;
    }
    size_t cap = g->len + 256;
    char *out = petrel_arena_alloc(g->req->arena, cap, 1);
    if (out == NULL) {
        petrel_send_status(g->req, 500);
        return;
    }
    int k = snprintf(out, cap, "status %d\nx-test %s\nbody %s\ntrailer %s\n", g->status, g->xtest,
                     g->body ? g->body : "", g->trailer);
    if (g->grpc)
        k += snprintf(out + k, cap - (size_t)k, "grpc-status %s\n", g->grpc_status);
    petrel_send(g->req, 200, "text/plain", out, (size_t)k);
}

static void on_error(petrel_call_t *call, int error, const char *reason, void *data)
{
    (void)call;
    got_t *g = data;
    char out[512];
    int status = 502;
    if (error == PETREL_UPSTREAM_EHEADER || error == PETREL_UPSTREAM_ETIMEOUT ||
        error == PETREL_UPSTREAM_ECONNECT)
        status = 504;
    else if (error == PETREL_UPSTREAM_EBREAKER || error == PETREL_UPSTREAM_EFULL)
        status = 503;
    int k = snprintf(out, sizeof(out), "error %d %s: %s%s\n", error,
                     petrel_upstream_strerror(error), reason, g->status ? " after head" : "");
    char *copy = petrel_arena_alloc(g->req->arena, (size_t)k, 1);
    if (copy == NULL) {
        petrel_send_status(g->req, 500);
        return;
    }
    memcpy(copy, out, (size_t)k);
    petrel_send(g->req, status, "text/plain", copy, (size_t)k);
}

static const petrel_call_cbs_t cbs = {on_head, on_body, on_end, on_error};

static char *target_of(petrel_req_t *req)
{
    const char *rest = petrel_req_param(req, "*");
    size_t n = strlen(rest ? rest : "") + req->query.len + 3;
    char *t = petrel_arena_alloc(req->arena, n, 1);
    if (t)
        snprintf(t, n, "/%s%s%.*s", rest ? rest : "", req->query.len ? "?" : "",
                 (int)req->query.len, req->query.ptr);
    return t;
}

static size_t varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

/* The body as a length-prefixed EchoMessage {1: requestId, 2: the body}. */
static petrel_str_t grpc_wrap(petrel_req_t *req)
{
    petrel_str_t out = {NULL, 0};
    const char *b = req->body.ptr, *id = b ? strstr(b, "\"requestId\":") : NULL;
    uint8_t *m = petrel_arena_alloc(req->arena, req->body.len + 32, 1);
    if (m == NULL)
        return out;
    size_t n = 5;
    m[n++] = 0x08;
    n += varint(m + n, id ? strtoull(id + 12, NULL, 10) : 0);
    m[n++] = 0x12;
    n += varint(m + n, req->body.len);
    if (req->body.len)
        memcpy(m + n, b, req->body.len);
    n += req->body.len;
    uint32_t len = (uint32_t)(n - 5);
    m[0] = 0;
    m[1] = (uint8_t)(len >> 24);
    m[2] = (uint8_t)(len >> 16);
    m[3] = (uint8_t)(len >> 8);
    m[4] = (uint8_t)len;
    out.ptr = (const char *)m;
    out.len = n;
    return out;
}

static int call_it(petrel_req_t *req, void *data)
{
    got_t *g = petrel_arena_new(req->arena, got_t, 1);
    char *target = target_of(req);
    if (g == NULL || target == NULL)
        return PETREL_ENOMEM;
    g->req = req;
    static const petrel_header_t fields[] = {{{"X-From", 6}, {"petrel", 6}}};
    static const petrel_header_t grpc_fields[] = {
        {{"content-type", 12}, {"application/grpc", 16}},
        {{"te", 2}, {"trailers", 8}},
    };
    petrel_call_spec_t spec = {0};
    spec.method = req->method == PETREL_POST ? "POST" : "GET";
    spec.target = target;
    bool wrap = data != NULL && strcmp(data, "grpc-wrap") == 0;
    g->grpc = wrap || (data != NULL && strcmp(data, "grpc") == 0);
    spec.headers = g->grpc ? grpc_fields : fields;
    spec.nheaders = g->grpc ? 2 : 1;
    spec.body = req->body.ptr;
    spec.body_len = req->body.len;
    if (wrap) {
        petrel_str_t m = grpc_wrap(req);
        if (m.ptr == NULL)
            return PETREL_ENOMEM;
        spec.body = m.ptr;
        spec.body_len = m.len;
    }
    spec.req = req;
    g->pause = data != NULL && strcmp(data, "pause") == 0;
    g->call = petrel_call(up, &spec, &cbs, g);
    if (g->call == NULL)
        return 500;
    return PETREL_LATER;
}

static int cancel_it(petrel_req_t *req, void *data)
{
    (void)data;
    got_t *g = petrel_arena_new(req->arena, got_t, 1);
    char *target = target_of(req);
    if (g == NULL || target == NULL)
        return PETREL_ENOMEM;
    g->req = req;
    petrel_call_spec_t spec = {0};
    spec.method = "GET";
    spec.target = target;
    spec.req = req;
    petrel_call_t *call = petrel_call(up, &spec, &cbs, g);
    if (call == NULL)
        return 500;
    petrel_call_cancel(call);
    return petrel_send(req, 200, "text/plain", "cancelled\n", 10);
}

static void cancel_now(void *data)
{
    got_t *g = data;
    petrel_call_cancel(g->call);
    petrel_send(g->req, 200, "text/plain", "cancelled\n", 10);
}

static int cancel_later(petrel_req_t *req, void *data)
{
    (void)data;
    got_t *g = petrel_arena_new(req->arena, got_t, 1);
    char *target = target_of(req);
    if (g == NULL || target == NULL)
        return PETREL_ENOMEM;
    g->req = req;
    petrel_call_spec_t spec = {0};
    spec.method = "GET";
    spec.target = target;
    spec.req = req;
    g->call = petrel_call(up, &spec, &cbs, g);
    if (g->call == NULL || petrel_timer_start(100, cancel_now, g) == NULL)
        return 500;
    return PETREL_LATER;
}

/* ---- /stream/: a body written as the call runs ---------------------------- */

static const char ALPHA[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy";
static char pattern[16384 + 64];

static void pump(got_t *g);

static void on_tick(void *data)
{
    got_t *g = data;
    g->timer = NULL;
    pump(g);
}

static void on_drain(petrel_call_t *call, void *data)
{
    (void)call;
    pump(data);
}

/* The call cancelled, answered with one line ("cancelled after N"). */
static void cancel_with(got_t *g, const char *what, int rc)
{
    petrel_call_cancel(g->call);
    char *out = petrel_arena_alloc(g->req->arena, 80, 1);
    int len = out ? snprintf(out, 80, "%s %d after %zu\n", what, rc, g->sent) : 0;
    petrel_send(g->req, out ? 200 : 500, "text/plain", out, (size_t)len);
}

/* Write parts until a write says 0 (the drain callback goes on), then the
 * end.  greedy=1: a caller that ignores 0 and keeps writing. */
static void pump(got_t *g)
{
    while (g->sent < g->n) {
        size_t k = g->n - g->sent < g->part ? g->n - g->sent : g->part;
        int rc = petrel_call_write(g->call, pattern + g->sent % 61, k);
        if (rc < 0) {
            g->werr = rc;
            if (g->greedy)
                cancel_with(g, "refused", rc);
            return;
        }
        g->sent += k;
        if (g->cancel && g->sent >= g->cancel) {
            cancel_with(g, "cancelled", 0);
            return;
        }
        if (rc == 0 && !g->greedy) {
            g->waits++;
            return;
        }
        if (g->tick && g->sent < g->n) {
            g->timer = petrel_timer_start(1, on_tick, g);
            if (g->timer != NULL)
                return;
        }
    }
    if (!g->ended) {
        g->ended = true;
        g->wend = petrel_call_write_end(g->call);
    }
}

static void stream_over(got_t *g)
{
    if (g->timer)
        petrel_timer_stop(g->timer);
    g->timer = NULL;
}

static void s_on_end(petrel_call_t *call, const petrel_header_t *t, size_t n, void *data)
{
    (void)t, (void)n;
    got_t *g = data;
    stream_over(g);
    if (g->sent < g->n)
        g->after = petrel_call_write(call, "x", 1);
    size_t cap = g->len + 256;
    char *out = petrel_arena_alloc(g->req->arena, cap, 1);
    if (out == NULL) {
        petrel_send_status(g->req, 500);
        return;
    }
    int k = snprintf(out, cap, "status %d\nbody %s\nwrote %zu\nwaits %d\nafter %d\n", g->status,
                     g->body ? g->body : "", g->sent, g->waits, g->after);
    petrel_send(g->req, 200, "text/plain", out, (size_t)k);
}

static void s_on_error(petrel_call_t *call, int error, const char *reason, void *data)
{
    (void)call;
    got_t *g = data;
    stream_over(g);
    char out[640];
    int k = snprintf(out, sizeof(out), "error %d %s: %s%s\nwrote %zu\nwend %d\n", error,
                     petrel_upstream_strerror(error), reason, g->status ? " after head" : "",
                     g->sent, g->wend);
    char *copy = petrel_arena_alloc(g->req->arena, (size_t)k, 1);
    if (copy == NULL) {
        petrel_send_status(g->req, 500);
        return;
    }
    memcpy(copy, out, (size_t)k);
    petrel_send(g->req, 502, "text/plain", copy, (size_t)k);
}

static const petrel_call_cbs_t s_cbs = {on_head, on_body, s_on_end, s_on_error};

/* The value of `name` in the request's query, or 0. */
static size_t qnum(petrel_req_t *req, const char *name)
{
    size_t nl = strlen(name);
    const char *q = req->query.ptr, *end = q + req->query.len;
    while (q && q < end) {
        if ((size_t)(end - q) > nl && strncmp(q, name, nl) == 0 && q[nl] == '=')
            return (size_t)strtoull(q + nl + 1, NULL, 10);
        q = memchr(q, '&', (size_t)(end - q));
        if (q)
            q++;
    }
    return 0;
}

static void on_stream_abort(petrel_req_t *req, void *data)
{
    (void)req;
    stream_over(data);
}

static int stream_it(petrel_req_t *req, void *data)
{
    (void)data;
    got_t *g = petrel_arena_new(req->arena, got_t, 1);
    char *target = target_of(req);
    if (g == NULL || target == NULL)
        return PETREL_ENOMEM;
    g->req = req;
    g->n = qnum(req, "n");
    g->part = qnum(req, "part");
    if (g->part == 0 || g->part > 16384)
        g->part = 16384;
    g->cancel = qnum(req, "cancel");
    g->tick = qnum(req, "tick") != 0;
    g->greedy = qnum(req, "greedy") != 0;
    size_t shortk = qnum(req, "short");
    petrel_req_on_abort(req, on_stream_abort, g);
    petrel_call_spec_t spec = {0};
    spec.method = qnum(req, "put") ? "PUT" : "POST";
    spec.target = target;
    spec.req = req;
    int64_t len = qnum(req, "chunked") ? -1 : (int64_t)g->n;
    if (shortk <= g->n)
        g->n -= shortk;
    g->call = petrel_call_stream(up, &spec, len, &s_cbs, g);
    if (g->call == NULL)
        return 500;
    petrel_call_on_drain(g->call, on_drain);
    pump(g);
    return PETREL_LATER;
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)args;
    petrel_upstream_opts_t o;
    petrel_upstream_opts_init(&o);
    o.name = "t";
    o.urls = getenv("UPT_URLS");
    const char *opts = getenv("UPT_OPTS");
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", opts ? opts : "");
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        char *eq = strchr(s, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        unsigned v = (unsigned)strtoul(eq + 1, NULL, 10);
        if (!strcmp(s, "max_conns"))
            o.max_conns = v;
        else if (!strcmp(s, "max_pending"))
            o.max_pending = v;
        else if (!strcmp(s, "connect_timeout_ms"))
            o.connect_timeout_ms = v;
        else if (!strcmp(s, "header_timeout_ms"))
            o.header_timeout_ms = v;
        else if (!strcmp(s, "call_timeout_ms"))
            o.call_timeout_ms = v;
        else if (!strcmp(s, "idle_timeout_ms"))
            o.idle_timeout_ms = v;
        else if (!strcmp(s, "max_requests"))
            o.max_requests = v;
        else if (!strcmp(s, "retry_budget_pct"))
            o.retry_budget_pct = v;
        else if (!strcmp(s, "breaker_failures"))
            o.breaker_failures = v;
        else if (!strcmp(s, "breaker_pause_ms"))
            o.breaker_pause_ms = v;
        else if (!strcmp(s, "connects_per_sec"))
            o.connects_per_sec = v;
        else if (!strcmp(s, "balance"))
            o.balance = (int)v;
    }
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = ALPHA[i % 61];
    char err[256];
    up = petrel_upstream_new(srv, &o, err, sizeof(err));
    if (up == NULL) {
        petrel_log(PETREL_LOG_ERROR, "%s", err);
        return PETREL_EINVAL;
    }
    return 0;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/up/*", call_it, NULL},
    {PETREL_POST, "/up/*", call_it, NULL},
    {PETREL_GET, "/cancel/*", cancel_it, NULL},
    {PETREL_GET, "/cancel-later/*", cancel_later, NULL},
    {PETREL_GET, "/pause/*", call_it, "pause"},
    {PETREL_POST, "/pause/*", call_it, "pause"},
    {PETREL_POST, "/grpc/*", call_it, "grpc"},
    {PETREL_POST, "/grpc-wrap/*", call_it, "grpc-wrap"},
    {PETREL_POST, "/stream/*", stream_it, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(upt, routes, init, NULL, NULL)
