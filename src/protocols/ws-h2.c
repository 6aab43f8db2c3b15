/*
 * ws-h2.c -- WebSocket over HTTP/2 (RFC 8441): the stream of an Extended
 * CONNECT (`:method CONNECT`, `:protocol websocket`) as the engine's
 * carrier.
 *
 * The handshake (framework/ws-handshake.c) makes the checks of HTTP/1.1
 * but for what RFC 8441 §5 drops: no Upgrade or Connection, no
 * Sec-WebSocket-Key nor -Accept (the :protocol pseudo-header stands in for
 * them).  It makes the engine here with petrel__ws_h2_new(), adds its
 * response fields, and petrel__ws_h2_switch() answers 200 and makes the
 * stream (h2-tunnel.c's tunnel) carry the frames both ways, whatever the DATA
 * frames' boundaries.  The close is the engine's Close handshake, then
 * END_STREAM both ways; a reset of the stream or the end of the connection
 * is a 1006 for the handler; the stream's flow control paces the peer
 * (h2.h, "Tunnels").
 *
 * The carrier's pointer is the stream's request; the engine is the
 * tunnel's context.
 */
#include "protocols/ws-carrier.h"

#include "runtime/conn.h"
#include "protocols/h2.h"

enum {
    WH_ENDED = 1 << 0,   /* END_STREAM queued after the engine's last frame */
    WH_WAITING = 1 << 1, /* output waited for the peer's window */
    WH_HELD = 1 << 2,    /* input refused while paused (petrel_ws_pause) */
};

static petrel_ws_t *engine(void *t)
{
    return petrel__h2_tunnel_ctx(t);
}

static int wh_write(void *t, const void *h, size_t hl, const void *data, size_t len)
{
    return petrel__h2_tunnel_write(t, h, hl, data, len);
}

static size_t wh_queued(void *t)
{
    return petrel__h2_tunnel_queued(t);
}

static void wh_kick(void *t)
{
    petrel_ws_t *ws = engine(t);
    if (ws)
        petrel__pending_add(petrel__loop, petrel__ws_pending(ws));
}

/* Give up (send timeout, no Close in time): RST_STREAM, and the engine goes. */
static void wh_abort(void *t)
{
    petrel_ws_t *ws = engine(t);
    petrel__h2_tunnel_reset(t);
    if (ws)
        petrel__ws_gone(ws);
}

static const petrel__ws_carrier_t wh_carrier = {
    .write = wh_write,
    .queued = wh_queued,
    .kick = wh_kick,
    .abort = wh_abort,
};

/* At the end of the turn: on_close if due; once the engine is done, our
 * END_STREAM follows its last frame (the stream closes when the peer's
 * END_STREAM arrives: then the engine goes). */
static void wh_on_pending(petrel__pending_t *p)
{
    petrel_ws_t *ws = petrel__ws_of_pending(p);
    petrel__ws_advance(ws);
    unsigned *f = petrel__ws_carrier_flags(ws);
    if ((*f & WH_HELD) && !petrel__ws_paused(ws)) {
        *f &= ~WH_HELD;
        petrel__h2_tunnel_resume(petrel__ws_carrier(ws)); /* the DATA it holds */
    }
    if (!petrel__ws_reading(ws) && !(*f & WH_ENDED)) {
        *f |= WH_ENDED;
        petrel__h2_tunnel_end(petrel__ws_carrier(ws));
    }
}

/* ------------------------------------------------------------------------ */
/* What the stream tells                                                    */

static ssize_t wh_input(void *ctx, const char *p, size_t n)
{
    petrel_ws_t *ws = ctx;
    if (!petrel__ws_reading(ws))
        return -1; /* DATA after the WebSocket closed: a stream error */
    if (petrel__ws_paused(ws)) {
        /* held by the stream, whose window stays shut meanwhile */
        *petrel__ws_carrier_flags(ws) |= WH_HELD;
        return 0;
    }
    return (ssize_t)petrel__ws_input(ws, p, n);
}

static void wh_eof(void *ctx)
{
    petrel__ws_eof(ctx); /* END_STREAM before a Close: 1006 */
}

static void wh_progress(void *ctx, size_t left)
{
    petrel_ws_t *ws = ctx;
    unsigned *f = petrel__ws_carrier_flags(ws);
    if (left == 0) {
        bool waited = (*f & WH_WAITING) != 0;
        *f &= ~WH_WAITING;
        petrel__ws_written(ws, waited);
    } else {
        *f |= WH_WAITING;
        petrel__ws_peer_read(ws);
    }
}

static void wh_drain(void *ctx)
{
    petrel__ws_drain(ctx);
}

static void wh_gone(void *ctx)
{
    petrel__ws_gone(ctx);
}

static const petrel__h2_tunnel_ops_t wh_ops = {
    .input = wh_input,
    .eof = wh_eof,
    .progress = wh_progress,
    .drain = wh_drain,
    .gone = wh_gone,
};

/* ------------------------------------------------------------------------ */
/* For the handshake                                                        */

petrel_ws_t *petrel__ws_h2_new(petrel_req_t *req, const petrel__ws_route_t *rt, const char *sub,
                               int bits)
{
    petrel__conn_t *c = req->_conn;
    petrel_ws_t *ws = petrel__ws_new(rt, c->cs->cfg, sub, bits, &wh_carrier, req);
    if (ws)
        petrel__ws_pending(ws)->cb = wh_on_pending;
    return ws;
}

int petrel__ws_h2_switch(petrel_req_t *req, petrel_ws_t *ws)
{
    return petrel__h2_tunnel(req, &wh_ops, ws);
}

void petrel__ws_h2_start(petrel_ws_t *ws)
{
    petrel_req_t *req = petrel__ws_carrier(ws);
    petrel__ws_start(ws, petrel__h2_draining(req));
    wh_kick(req); /* on_open may have closed it already */
}
