/*
 * response.c -- the protocol-neutral response API.  It records status,
 * headers and body on the request, then hands them to the protocol module
 * that carried the request (req->_proto: http1.c or h2.c).
 */
#include "proto.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Field names are tokens; values have no CR, LF or NUL (RFC 9110 §5.5). */
static bool field_ok(const char *name, size_t nl, const char *value, size_t vl)
{
    if (nl == 0)
        return false;
    for (size_t i = 0; i < nl; i++)
        if (!petrel__tchar[(unsigned char)name[i]])
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
    case 4: return IS("date");
    case 6: return IS("server");
    case 7: return IS("upgrade");
    case 10: return IS("connection") || IS("keep-alive");
    case 14: return IS("content-length");
    case 17: return IS("transfer-encoding");
    default: return false;
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

static int start(petrel_req_t *req, int status, const char *type, int kind)
{
    petrel_resp_t *r = req->_resp;
    if (r->sent)
        return PETREL_ESTATE;
    if (status < 200 || status > 599)
        return PETREL_EINVAL; /* 1xx are petrel's own (100 Continue, 101) */
    r->status = status;
    r->type = type;
    r->body_kind = kind;
    r->sent = true;
    return 0;
}

int petrel_send(petrel_req_t *req, int status, const char *type, const void *body, size_t len)
{
    int rc = start(req, status, type, BODY_MEM);
    if (rc < 0)
        return rc;
    petrel_resp_t *r = req->_resp;
    r->body = body;
    r->len = len;
    r->ended = true;
    return req->_proto->send(req, r);
}

int petrel_send_text(petrel_req_t *req, int status, const char *type, const char *text)
{
    return petrel_send(req, status, type, text, strlen(text));
}

int petrel_send_copy(petrel_req_t *req, int status, const char *type, const void *body,
                     size_t len)
{
    void *p = petrel_arena_alloc(req->arena, len ? len : 1, 1);
    if (p == NULL)
        return PETREL_ENOMEM;
    memcpy(p, body, len);
    return petrel_send(req, status, type, p, len);
}

static void close_fd(void *p) { close((int)(intptr_t)p); }

int petrel_send_fd(petrel_req_t *req, int status, const char *type, int fd, off_t offset,
                   size_t len, int close_when_done)
{
    if (close_when_done && petrel_arena_defer(req->arena, close_fd, (void *)(intptr_t)fd) < 0) {
        close(fd);
        return PETREL_ENOMEM;
    }
    int rc = start(req, status, type, BODY_FD);
    if (rc < 0)
        return rc;
    petrel_resp_t *r = req->_resp;
    r->fd = fd;
    r->offset = offset;
    r->len = len;
    r->close_fd = close_when_done != 0;
    r->ended = true;
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
    int rc = start(req, status, type, BODY_STREAM);
    if (rc < 0)
        return rc;
    return req->_proto->send(req, req->_resp);
}

int petrel_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    petrel_resp_t *r = req->_resp;
    if (!r->sent || r->ended || r->body_kind != BODY_STREAM)
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
    if (!r->sent || r->ended || r->body_kind != BODY_STREAM)
        return PETREL_ESTATE;
    r->ended = true;
    uint64_t outer = petrel__log_req;
    petrel__log_req = req->id;
    int rc = req->_proto->stream_end(req, r);
    petrel__log_req = outer;
    return rc;
}
