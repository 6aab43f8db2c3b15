/*
 * websocket.c -- WebSocket through the reverse proxy: an opening handshake
 * under a mount's prefix, from an HTTP/1.1 client (RFC 6455 §4) or an h2c
 * client's Extended CONNECT (RFC 8441), forwarded to the upstream as an
 * HTTP/1.1 Upgrade (RFC 9110 §7.8), then the messages relayed both ways.
 *
 * The relay is of messages, not bytes.  Each side is a WebSocket of its
 * own, run by petrel's engine: the client's accepted by petrel
 * (petrel_ws_accept(), once the upstream has said 101), the upstream's in
 * the client's role (petrel_ws_client_new(): masked frames, RFC 6455
 * §5.3).  A byte tunnel would only serve HTTP/1.1 clients (an RFC 8441
 * stream is not the upstream's framing) and would let either peer send
 * the other anything; a message relay checks every frame on both sides,
 * bounds messages by size, and lets each hop negotiate its own extensions:
 * permessage-deflate is negotiated by petrel with the client as for its own
 * endpoints, and none is offered to the upstream (the messages are relayed
 * inflated).  The upstream's handshake is this hop's own (a fresh
 * Sec-WebSocket-Key, Sec-WebSocket-Version 13); the client's
 * Sec-WebSocket-Protocol is passed on, and the subprotocol the upstream
 * picks (one the client offered, or the answer is refused) is the
 * client's.
 *
 * The upstream connection is the upstream client's (petrel_call_upgrade):
 * its breaker, connection rate, deadlines and balancing apply up to the
 * 101, after which the connection is the tunnel's and never goes back to
 * the pool.  An answer other than 101 is forwarded as any response
 * (forward.c: 403 stays 403); a failure to connect is a 502, no answer in
 * time a 504.
 *
 * Backpressure, both ways: a message is sent on as it arrives; once the
 * side it goes to has more than the mount's buffer queued, the side it
 * came from is paused (petrel_ws_pause) until the queue is down to half.
 * So a tunnel holds at most, per direction, the buffer, one message of
 * the size limit being assembled and one read buffer (16 KiB), on top of
 * the two engines (a few KiB each).
 *
 * Closing: a Close from either side is passed on with its code and reason
 * (1005, no code, as a Close without one; 1006, the peer gone without a
 * Close, as 1001); the tunnel's state goes when both sides have closed.
 */
#ifndef PETREL_BUILTIN_MODULE
#define PETREL_BUILTIN_MODULE 1
#endif
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef petrel__proxy_mount_t mount_t;

typedef struct tunnel {
    const mount_t *m;
    petrel_req_t *req; /* until the client's handshake is answered */
    char key[25];      /* our Sec-WebSocket-Key to the upstream */
    char *sub;         /* the subprotocol, or NULL (heap) */
    petrel_ws_t *down; /* the client's side, from on_open to on_close */
    petrel_ws_t *up;   /* the upstream's side, until its on_close */
    bool live;         /* past the 101: the WebSockets own it */
    bool down_done, up_done;
} tunnel_t;

/* Tunnels of this worker (the mounts' ws-max-tunnels). */
static unsigned ntunnels;

/* Does the comma-separated list `v` hold `tok` (case-insensitive)? */
static bool has_token(const char *v, const char *tok)
{
    size_t tl = strlen(tok);
    while (v && *v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - v) == tl && strncasecmp(v, tok, tl) == 0)
            return true;
        v = e;
    }
    return false;
}

bool petrel__proxy_ws_wanted(const petrel_req_t *req)
{
    if (req->method == PETREL_WS_CONNECT)
        return true; /* RFC 8441: only :protocol websocket reaches a route */
    /* RFC 9110 §7.8: an Upgrade the Connection field does not name is a
     * stray hop-by-hop field, dropped as the others are, not a handshake */
    return req->method == PETREL_GET &&
           has_token(petrel_req_header((petrel_req_t *)req, "upgrade"), "websocket") &&
           has_token(petrel_req_header((petrel_req_t *)req, "connection"), "upgrade");
}

static void tunnel_free(tunnel_t *t)
{
    ntunnels--;
    free(t->sub);
    free(t);
}

/* The request's arena goes: a tunnel that never got its 101 with it, and
 * one whose both sides closed before it went. */
static void tunnel_unused(void *data)
{
    tunnel_t *t = data;
    t->req = NULL;
    if (!t->live || (t->up_done && t->down_done))
        tunnel_free(t);
}

/* Both sides have closed: the tunnel goes, unless its request's arena,
 * which holds tunnel_unused(), is still there (then it goes with it). */
static void tunnel_done(tunnel_t *t)
{
    if (t->req == NULL)
        tunnel_free(t);
}

/* ------------------------------------------------------------------------ */
/* The relay                                                                 */

/* A Close of one side, for the other (RFC 6455 §7.4.1): its code as it
 * came but for those never sent in a frame. */
static void pass_close(petrel_ws_t *to, int code, const char *reason)
{
    if (to == NULL)
        return;
    petrel_ws_pause(to, 0); /* it may wait for the side that is gone: it reads the Close answer */
    if (code == 1005)
        petrel_ws_close(to, 0, NULL);
    else if (code == 1006 || petrel_ws_close(to, code, reason) < 0)
        petrel_ws_close(to, 1001, "the other side went away");
}

static void resume_down(petrel_ws_t *ws, void *data)
{
    (void)ws;
    tunnel_t *t = data;
    if (t->down)
        petrel_ws_pause(t->down, 0);
}

static void resume_up(petrel_ws_t *ws, void *data)
{
    (void)ws;
    tunnel_t *t = data;
    if (t->up)
        petrel_ws_pause(t->up, 0);
}

/* Send a message from `from` on `to`; past the buffer, `from` waits. */
static void relay(tunnel_t *t, petrel_ws_t *from, petrel_ws_t *to, int binary, const void *data,
                  size_t len, petrel_ws_drain_cb resume)
{
    if (to == NULL)
        return; /* the other side is closing: dropped */
    int rc = binary ? petrel_ws_send_binary(to, data, len) : petrel_ws_send_text(to, data, len);
    if (rc < 0)
        return; /* closing, or closed over its send limit: its on_close follows */
    if (petrel_ws_buffered(to) > t->m->buffer &&
        petrel_ws_on_drain(to, t->m->buffer / 2, resume, t) == 0)
        petrel_ws_pause(from, 1);
}

static void down_open(petrel_ws_t *ws, petrel_req_t *req)
{
    (void)req;
    tunnel_t *t = petrel_ws_get_data(ws);
    t->down = ws;
}

static void down_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    tunnel_t *t = petrel_ws_get_data(ws);
    relay(t, ws, t->up, binary, data, len, resume_down);
}

static void down_close(petrel_ws_t *ws, int code, const char *reason)
{
    tunnel_t *t = petrel_ws_get_data(ws);
    t->down = NULL;
    t->down_done = true;
    pass_close(t->up, code, reason);
    if (t->up_done)
        tunnel_done(t);
}

static void up_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    tunnel_t *t = petrel_ws_get_data(ws);
    relay(t, ws, t->down, binary, data, len, resume_up);
}

static void up_close(petrel_ws_t *ws, int code, const char *reason)
{
    tunnel_t *t = petrel_ws_get_data(ws);
    t->up = NULL;
    t->up_done = true;
    pass_close(t->down, code, reason);
    if (t->down_done)
        tunnel_done(t);
}

/* ------------------------------------------------------------------------ */
/* The handshake                                                             */

static void abort_none(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
}

/* The subprotocol the upstream picked: NULL for none; "" when it is not
 * one the client offered (RFC 6455 §4.1: the handshake fails). */
static const char *picked(petrel_req_t *req, const petrel_upstream_head_t *head)
{
    const char *sub = NULL;
    for (size_t i = 0; i < head->nheaders; i++)
        if (head->headers[i].name.len == 22 &&
            strncasecmp(head->headers[i].name.ptr, "sec-websocket-protocol", 22) == 0)
            sub = sub ? "" : head->headers[i].value.ptr;
    if (sub == NULL || *sub == '\0' || strchr(sub, ','))
        return sub ? "" : NULL;
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name.len == 22 &&
            strncasecmp(req->headers[i].name.ptr, "sec-websocket-protocol", 22) == 0 &&
            has_token(req->headers[i].value.ptr, sub))
            return sub;
    return "";
}

/* The upstream said 101: both sides become WebSockets. */
static void on_upgrade(petrel_call_t *call, const petrel_upstream_head_t *head, int fd,
                       const void *rest, size_t rest_len, void *data)
{
    tunnel_t *t = data;
    petrel_req_t *req = t->req;
    const char *addr = petrel_call_address(call);
    /* forward.c's abort callback goes with the call: the request is
     * answered below, whatever happens */
    petrel_req_on_abort(req, abort_none, NULL);
    const char *sub = picked(req, head);
    if (sub && (*sub == '\0' || (t->sub = strdup(sub)) == NULL)) {
        petrel_req_log(req, PETREL_LOG_WARN, "proxy websocket %s: upstream %s: %s", req->target.ptr,
                       addr ? addr : "-",
                       *sub ? "out of memory" : "a subprotocol the client did not offer");
        close(fd);
        petrel_send_status(req, 502);
        return;
    }
    static const petrel_ws_handler_t up_h = {.on_message = up_message, .on_close = up_close};
    petrel_ws_handler_t uh = up_h;
    uh.max_message_size = t->m->ws_max_message;
    t->up = petrel_ws_client_new(fd, rest, rest_len, head, t->key, &uh, t);
    if (t->up == NULL) {
        petrel_req_log(req, PETREL_LOG_WARN,
                       "proxy websocket %s: upstream %s: its 101 does not accept the handshake "
                       "(RFC 6455 §4.1)",
                       req->target.ptr, addr ? addr : "-");
        petrel_send_status(req, 502);
        return;
    }
    t->live = true;
    petrel_ws_handler_t dh = {.on_open = down_open,
                              .on_message = down_message,
                              .on_close = down_close,
                              .max_message_size = t->m->ws_max_message};
    int rc = petrel_ws_accept(req, &dh, t, t->sub);
    if (rc != 0) {
        /* the client's side never opened: the upstream's alone ends it */
        t->down_done = true;
        petrel_ws_close(t->up, 1001, "the client went away");
        petrel_send_status(req, rc >= 400 && rc <= 599 ? rc : 502);
    }
}

int petrel__proxy_ws(petrel_req_t *req, const mount_t *m)
{
    int st = petrel_ws_check(req);
    if (st != 0)
        return st; /* 400, 426 with Sec-WebSocket-Version */
    if (ntunnels >= m->ws_max_tunnels) {
        petrel_req_log(req, PETREL_LOG_WARN,
                       "proxy websocket %s: %u tunnels in this worker already (ws-max-tunnels)",
                       req->target.ptr, ntunnels);
        petrel_resp_header(req, "Retry-After", "1");
        return 503;
    }
    tunnel_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return 503;
    ntunnels++;
    t->m = m;
    t->req = req;
    if (petrel_ws_client_key(t->key) < 0 || petrel_arena_defer(req->arena, tunnel_unused, t) < 0) {
        tunnel_free(t);
        return 503;
    }
    /* RFC 6455 §4.1: this hop's handshake; the client's subprotocols go
     * on with its other fields (forward.c) */
    petrel_header_t *f = petrel_arena_new(req->arena, petrel_header_t, 2);
    if (f == NULL)
        return 503;
    f[0] = (petrel_header_t){{"Sec-WebSocket-Key", 17}, {t->key, strlen(t->key)}};
    f[1] = (petrel_header_t){{"Sec-WebSocket-Version", 21}, {"13", 2}};
    petrel__proxy_upgrade_t u = {"websocket", f, 2, on_upgrade, t};
    return petrel__proxy_forward(req, m, &u);
}
