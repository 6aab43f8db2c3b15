/*
 * body.c -- a request body read as it arrives (PETREL_BODY_STREAM routes):
 * petrel_body_read(), petrel_body_pause(), petrel_body_length().
 *
 * The protocol that streams a body (HTTP/1.1) parses it only while the
 * callback takes it (proto.h, petrel__body_flows()) and gives each part
 * from its read buffer (petrel__body_give()); a protocol that gives bodies
 * whole (no ops->body_start), and a request that had no body, get their
 * body from here in one part, from the loop.
 */
#include "framework/body.h"
#include "protocols/proto.h"

#include <stdlib.h>
#include <string.h>

/* The declared length of a body given whole: its content-length, else its
 * size when it had none (0), else unknown. */
static int64_t declared(const petrel_req_t *req, size_t got)
{
    /* (not petrel_req_header(): request.c calls this file) */
    const char *cl = NULL;
    for (size_t i = 0; i < req->nheaders && cl == NULL; i++)
        if (petrel__str_ieq(req->headers[i].name.ptr, req->headers[i].name.len, "content-length",
                            14))
            cl = req->headers[i].value.ptr;
    if (cl) {
        char *e;
        unsigned long long v = strtoull(cl, &e, 10);
        if (*e == '\0' && e != cl)
            return (int64_t)v;
    }
    return got ? -1 : 0;
}

void petrel__body_routed(petrel_req_t *req)
{
    petrel__rbody_t *b = &req->_resp->rbody;
    if (b->state == PETREL__RB_WAIT)
        return; /* the protocol streams it (it set the length) */
    /* the protocol has it whole: given in one part from here */
    b->state = PETREL__RB_WAIT;
    b->paused = false;
    b->whole = true;
    b->end = 1;
    b->length = declared(req, req->body.len);
    b->rest = req->body;
    req->body.ptr = "";
    req->body.len = 0;
}

static void give_whole(petrel__pending_t *p)
{
    petrel__rbody_t *b = container_of(p, petrel__rbody_t, pending);
    petrel_resp_t *resp = container_of(b, petrel_resp_t, rbody);
    petrel_req_t *req = resp->req;
    if (b->state != PETREL__RB_READ)
        return;
    if (b->paused && !resp->ended && !resp->abandoned)
        return; /* petrel_body_pause(req, 0) asks again */
    petrel_str_t rest = b->rest;
    int end = b->end;
    b->rest.len = 0;
    if (end > 0 && rest.len) {
        /* the body, then its end: the callback may pause between them */
        b->end = 1;
        petrel__body_give(req, rest.ptr, rest.len, 0);
        if (b->state == PETREL__RB_READ && !(b->paused && !resp->ended))
            petrel__body_give(req, "", 0, 1);
        return;
    }
    petrel__body_give(req, "", 0, end);
}

static void pending_off(void *arg)
{
    petrel__rbody_t *b = arg;
    if (!list_empty(&b->pending.node))
        list_unlink(&b->pending.node);
    b->state = PETREL__RB_DONE;
}

int petrel_body_read(petrel_req_t *req, petrel_body_cb cb, void *data)
{
    if (req == NULL || cb == NULL)
        return PETREL_EINVAL;
    petrel__rbody_t *b = &req->_resp->rbody;
    if (b->state != PETREL__RB_WAIT)
        return PETREL_EINVAL;
    list_init(&b->pending.node);
    /* the pending call must not outlive the request */
    if (petrel_arena_defer(req->arena, pending_off, b) < 0)
        return PETREL_ENOMEM;
    b->cb = cb;
    b->data = data;
    b->state = PETREL__RB_READ;
    if (b->whole || b->end || req->_proto->body_start == NULL) {
        b->pending.cb = give_whole;
        petrel__pending_add(petrel__loop, &b->pending);
        return 0;
    }
    req->_proto->body_start(req);
    return 0;
}

void petrel_body_pause(petrel_req_t *req, int paused)
{
    if (req == NULL)
        return;
    petrel__rbody_t *b = &req->_resp->rbody;
    if ((b->state != PETREL__RB_READ && b->state != PETREL__RB_WAIT) || b->paused == (paused != 0))
        return;
    b->paused = paused != 0;
    if (b->state != PETREL__RB_READ)
        return;
    if (b->whole || b->end || req->_proto->body_pause == NULL) {
        if (!b->paused)
            petrel__pending_add(petrel__loop, &b->pending);
        return;
    }
    req->_proto->body_pause(req);
}

int64_t petrel_body_length(const petrel_req_t *req)
{
    if (req == NULL || req->_resp->rbody.state == PETREL__RB_NONE)
        return req && req->body.len ? (int64_t)req->body.len : 0;
    return req->_resp->rbody.length;
}
