/*
 * response.c -- the protocol-neutral response API.  It records status,
 * headers and body on the request, then hands them to the protocol module
 * that carried the request (req->_proto: http1.c or h2.c).  Also the
 * waiting of requests whose handler answers later (petrel.h, "Waiting for work the handler
 * started"): the handler timeout, aborts, and the requests a handler still holds.
 */
#include "protocols/proto.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Field names are tokens; values have no CR, LF or NUL (RFC 9110 §5.5). */
static bool field_ok(const char *name, size_t nl, const char *value, size_t vl)
{
    if (!petrel__all_of(name, nl, PETREL__CC_TCHAR))
        return false;
    for (size_t i = 0; i < vl; i++)
        if (value[i] == '\r' || value[i] == '\n')
            return false;
    return true;
}

/* Fields petrel writes itself, by length first: most names are not. */
static bool reserved(const char *name, size_t n)
{
#define IS(lit) petrel__str_ieq(name, n, lit, sizeof(lit) - 1)
    switch (n) {
    case 4:
        return IS("date");
    case 6:
        return IS("server");
    case 7:
        return IS("upgrade");
    case 10:
        return IS("connection") || IS("keep-alive");
    case 14:
        return IS("content-length");
    case 17:
        return IS("transfer-encoding");
    default:
        return false;
    }
#undef IS
}

static int add_field(petrel_req_t *req, petrel__rheader_t ***tail, const char *name,
                     const char *value)
{
    if (name == NULL || value == NULL)
        return PETREL_EINVAL;
    size_t nl = strlen(name), vl = strlen(value);
    if (!field_ok(name, nl, value, vl) || reserved(name, nl))
        return PETREL_EINVAL;
    /* one block: the list node, then name and value, NUL-terminated */
    petrel__rheader_t *h = petrel_arena_alloc(req->arena, sizeof(*h) + nl + vl + 2, 0);
    if (h == NULL)
        return PETREL_ENOMEM;
    char *p = (char *)(h + 1);
    memcpy(p, name, nl + 1);
    memcpy(p + nl + 1, value, vl + 1);
    h->name.ptr = p;
    h->name.len = nl;
    h->value.ptr = p + nl + 1;
    h->value.len = vl;
    h->next = NULL;
    **tail = h;
    *tail = &h->next;
    return 0;
}

int petrel_resp_header(petrel_req_t *req, const char *name, const char *value)
{
    if (req->_resp->sent)
        return PETREL_ESTATE;
    return add_field(req, &req->_resp->headers_tail, name, value);
}

int petrel_resp_trailer(petrel_req_t *req, const char *name, const char *value)
{
    if (req->_resp->ended)
        return PETREL_ESTATE;
    return add_field(req, &req->_resp->trailers_tail, name, value);
}

void petrel__req_release(petrel_req_t *req);

/* A sending call on an abandoned request (petrel.h, "Waiting for work the handler started"): the
 * handler lets go of it. */
static int gone(petrel_req_t *req)
{
    petrel__req_release(req);
    return PETREL_EIO;
}

static int start(petrel_req_t *req, int status, const char *type, int kind)
{
    petrel_resp_t *r = req->_resp;
    if (r->abandoned)
        return gone(req);
    if (r->sent)
        return PETREL_ESTATE;
    if (status < 200 || status > 599)
        return PETREL_EINVAL; /* 1xx are petrel's own (100 Continue, 101) */
    r->status = status;
    r->type = type;
    r->body_kind = kind;
    r->sent = true;
    petrel__timer_disarm(&r->timer); /* no longer waiting */
    return 0;
}

int petrel_send(petrel_req_t *req, int status, const char *type, const void *body, size_t len)
{
    int rc = start(req, status, type, PETREL__BODY_MEM);
    if (rc < 0)
        return rc;
    petrel_resp_t *r = req->_resp;
    r->body = body;
    r->len = len;
    r->ended = true;
    r->holds = r->timed_out; /* after a 504 of its own, petrel keeps it for the handler */
    return req->_proto->send(req, r);
}

int petrel_send_text(petrel_req_t *req, int status, const char *type, const char *text)
{
    return petrel_send(req, status, type, text, strlen(text));
}

int petrel_send_copy(petrel_req_t *req, int status, const char *type, const void *body, size_t len)
{
    if (req->_resp->abandoned)
        return gone(req);
    void *p = petrel_arena_alloc(req->arena, len ? len : 1, 1);
    if (p == NULL)
        return PETREL_ENOMEM;
    memcpy(p, body, len);
    return petrel_send(req, status, type, p, len);
}

static void close_fd(void *p)
{
    close((int)(intptr_t)p);
}

int petrel_send_fd(petrel_req_t *req, int status, const char *type, int fd, off_t offset,
                   size_t len, int close_when_done)
{
    if (req->_resp->abandoned) {
        if (close_when_done)
            close(fd);
        return gone(req);
    }
    if (close_when_done && petrel_arena_defer(req->arena, close_fd, (void *)(intptr_t)fd) < 0) {
        close(fd);
        return PETREL_ENOMEM;
    }
    int rc = start(req, status, type, PETREL__BODY_FD);
    if (rc < 0)
        return rc;
    petrel_resp_t *r = req->_resp;
    r->fd = fd;
    r->offset = offset;
    r->len = len;
    r->close_fd = close_when_done != 0;
    r->ended = true;
    r->holds = r->timed_out; /* after a 504 of its own, petrel keeps it for the handler */
    return req->_proto->send(req, r);
}

int petrel_send_status(petrel_req_t *req, int status)
{
    char buf[96];
    size_t n = petrel__status_body(status, buf, sizeof(buf));
    if (status == 204 || status == 304)
        n = 0;
    return petrel_send_copy(req, status, n ? "text/plain; charset=utf-8" : NULL, buf, n);
}

int petrel_stream_begin(petrel_req_t *req, int status, const char *type)
{
    int rc = start(req, status, type, PETREL__BODY_STREAM);
    if (rc < 0)
        return rc;
    return req->_proto->send(req, req->_resp);
}

int petrel_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    petrel_resp_t *r = req->_resp;
    if (r->abandoned)
        return PETREL_EIO; /* the handler lets go with petrel_stream_end() */
    if (!r->sent || r->ended || r->body_kind != PETREL__BODY_STREAM)
        return PETREL_ESTATE;
    uint64_t outer = petrel__log_req; /* what it logs is about this request */
    petrel__log_req = req->id;
    int rc = req->_proto->stream_write(req, data, len);
    petrel__log_req = outer;
    return rc;
}

int petrel_stream_end(petrel_req_t *req)
{
    petrel_resp_t *r = req->_resp;
    if (r->abandoned)
        return gone(req);
    if (!r->sent || r->ended || r->body_kind != PETREL__BODY_STREAM)
        return PETREL_ESTATE;
    petrel__resp_drain_off(r);
    r->ended = true;
    r->holds = r->timed_out; /* after a 504 of its own, petrel keeps it for the handler */
    uint64_t outer = petrel__log_req;
    petrel__log_req = req->id;
    int rc = req->_proto->stream_end(req, r);
    petrel__log_req = outer;
    return rc;
}

int petrel_stream_abort(petrel_req_t *req)
{
    if (req == NULL)
        return PETREL_EINVAL;
    petrel_resp_t *r = req->_resp;
    if (r->abandoned)
        return gone(req);
    if (!r->sent || r->ended || r->body_kind != PETREL__BODY_STREAM)
        return PETREL_ESTATE;
    /* as a handler that fails after starting its stream (request.c): the
     * protocol cuts it, so that the client never takes it for whole */
    petrel__resp_drain_off(r);
    r->ended = true;
    r->holds = r->timed_out;
    uint64_t outer = petrel__log_req;
    petrel__log_req = req->id;
    req->_proto->broken(req);
    petrel__log_req = outer;
    return 0;
}

/* Backpressure (petrel.h: petrel_stream_on_drain) */

static bool streaming(const petrel_resp_t *r)
{
    return r->sent && !r->ended && !r->abandoned && r->body_kind == PETREL__BODY_STREAM;
}

size_t petrel_stream_buffered(petrel_req_t *req)
{
    return req && streaming(req->_resp) ? req->_proto->buffered(req) : 0;
}

/* From the loop, at the end of the turn in which the output drained. */
static void drain_run(petrel__pending_t *p)
{
    petrel_resp_t *r = container_of(p, petrel_resp_t, drain_pending);
    petrel_stream_drain_cb cb = r->drain_cb;
    if (cb == NULL || !streaming(r) || r->req->_proto->buffered(r->req) > r->drain_mark)
        return; /* cancelled, over, or refilled meanwhile: a later write tells */
    r->drain_cb = NULL;
    cb(r->req, r->drain_data);
}

int petrel_stream_on_drain(petrel_req_t *req, size_t mark, petrel_stream_drain_cb cb, void *data)
{
    if (req == NULL)
        return PETREL_EINVAL;
    petrel_resp_t *r = req->_resp;
    if (cb == NULL) {
        petrel__resp_drain_off(r);
        return 0;
    }
    if (r->abandoned)
        return PETREL_EIO;
    if (!streaming(r))
        return PETREL_ESTATE;
    if (req->_proto->buffered(req) <= mark) {
        petrel__resp_drain_off(r); /* a callback set before is replaced: by none */
        return 1;
    }
    r->drain_cb = cb;
    r->drain_data = data;
    r->drain_mark = mark;
    r->drain_pending.cb = drain_run;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Waiting (petrel.h, "Waiting for work the handler started"): the handler  */
/* timeout, aborts, and the requests a handler still holds after an abort.  */

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel__tq_t handler_q; /* --handler-timeout */
static petrel__list_t held;    /* abandoned requests their handler still holds */

static void on_handler_timer(petrel__timer_t *t)
{
    petrel_resp_t *r = container_of(t, petrel_resp_t, timer);
    petrel_req_t *req = r->req;
    if (r->abandoned) {
        /* the handler had its time to let go of an aborted request */
        petrel__req_release(req);
        return;
    }
    /* --handler-timeout counts from the end of the request's body, as for
     * a body read whole before the handler runs: while a streamed body is
     * still being read (an upload through the proxy) the handler gets the
     * time again, and its end starts it anew (petrel__body_give).  A
     * body that stops arriving has --body-timeout; one the handler pauses,
     * the handler's own deadlines. */
    if (r->rbody.state == PETREL__RB_READ) {
        petrel__timer_arm(petrel__loop, &r->timer, &handler_q);
        return;
    }
    /* a waiting request past --handler-timeout: 504 (RFC 9110 §15.6.5),
     * then it is aborted like one whose client left */
    petrel_log(PETREL_LOG_WARN,
               "request %llu %s %s: no response from its handler within "
               "--handler-timeout: 504",
               (unsigned long long)req->id, req->method_name.ptr, req->path.ptr);
    r->timed_out = true; /* the handler still has it: its next call lets go */
    petrel_send_status(req, 504);
    petrel__req_abort(req);
}

void petrel__req_wait(petrel_req_t *req)
{
    petrel_resp_t *r = req->_resp;
    r->holds = true;
    petrel__timer_arm(petrel__loop, &r->timer, &handler_q);
}

int petrel__req_worker_init(const petrel__config_t *cfg)
{
    list_init(&held);
    return petrel__tq_init(petrel__loop, &handler_q, cfg->handler_timeout_ms, on_handler_timer);
}

bool petrel__req_abort(petrel_req_t *req)
{
    petrel_resp_t *r = req->_resp;
    petrel__resp_drain_off(r);
    if (!r->holds)
        return false; /* complete, or the handler returned without holding it */
    if (!r->abandoned) {
        r->abandoned = true;
        petrel__timer_disarm(&r->timer);
        petrel_abort_cb cb = r->on_abort;
        r->on_abort = NULL;
        if (cb)
            cb(req, r->abort_data);
        if (!r->holds)
            return false; /* it let go from its abort callback */
    }
    /* kept until the handler's next sending call, or --handler-timeout */
    if (list_empty(&r->held)) {
        petrel__timer_arm(petrel__loop, &r->timer, &handler_q);
        list_append(&held, &r->held);
    }
    return true;
}

void petrel__req_release(petrel_req_t *req)
{
    petrel_resp_t *r = req->_resp;
    r->holds = false;
    petrel__timer_disarm(&r->timer);
    list_unlink(&r->held);
    req->_proto->release(req);
}

void petrel__req_worker_fini(void)
{
    if (held.next == NULL)
        return;
    while (!list_empty(&held))
        petrel__req_release(container_of(held.next, petrel_resp_t, held)->req);
}

int petrel_req_on_abort(petrel_req_t *req, petrel_abort_cb cb, void *data)
{
    petrel_resp_t *r = req->_resp;
    if (r->abandoned || (r->ended && !r->holds))
        return PETREL_ESTATE;
    r->on_abort = cb;
    r->abort_data = data;
    return 0;
}

int petrel_req_waiting(const petrel_req_t *req)
{
    const petrel_resp_t *rs = req->_resp;
    return !rs->abandoned && (!rs->ended || rs->holds);
}

int petrel_req_held(const petrel_req_t *req)
{
    return req->_resp->holds;
}

petrel_abort_cb petrel_req_on_abort_get(const petrel_req_t *req, void **data)
{
    const petrel_resp_t *rs = req->_resp;
    if (data)
        *data = rs->on_abort ? rs->abort_data : NULL;
    return rs->on_abort;
}

int petrel_req_aborted(const petrel_req_t *req)
{
    return req->_resp->abandoned;
}
