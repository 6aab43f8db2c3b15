/*
 * ws.h -- the WebSocket engine (ws.c, on wslay) and what carries it.
 *
 * The engine speaks RFC 6455 over a byte stream it does not own: its
 * carrier.  Bytes come in through petrel__ws_input(), go out through the
 * carrier's operations, and the engine keeps its own timer and assembles
 * messages in an arena of its own.  Today's carrier is an HTTP/1.1
 * connection after its 101 (ws-h1.c), or an HTTP/2 stream opened with
 * Extended CONNECT (RFC 8441, ws-h2.c); ws-carrier.h is what the handshake
 * (framework/ws-handshake.c) asks of them.
 */
#ifndef PETREL_WS_H
#define PETREL_WS_H

#include "runtime/settings.h"
#include "runtime/loop.h"
#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A registered endpoint (petrel_ws_route_add): the handler and its data,
 * owned by the router that holds the route. */
typedef struct petrel__ws_route {
    petrel_ws_handler_t h;
    void *data;
} petrel__ws_route_t;

/* What carries a WebSocket.  `t` is the carrier's own pointer. */
typedef struct petrel__ws_carrier {
    /* Queue a frame: `hl` header bytes, then `len` payload bytes (both
     * copied).  0, PETREL_ENOMEM or PETREL_EIO. */
    int (*write)(void *t, const void *h, size_t hl, const void *data, size_t len);
    /* Bytes queued and not written yet (exact: a walk, called rarely). */
    size_t (*queued)(void *t);
    /* Come back: write what is queued, end the stream if the engine is
     * done -- at the end of the carrier's own event handling, or of the
     * loop turn; never from inside this call. */
    void (*kick)(void *t);
    /* Give up at once (a send timeout, no Close in time): close now; the
     * carrier calls petrel__ws_gone() (on_close has run). */
    void (*abort)(void *t);
    /* Optional (NULL: frames shared by many connections are copied): write
     * these bytes now, when nothing is queued before them, and queue a copy
     * of what the peer does not take.  0, PETREL_ENOMEM or PETREL_EIO.  A
     * carrier that has it calls petrel__ws_flush_staged() before it writes. */
    int (*writev)(void *t, const struct iovec *iov, int n);
} petrel__ws_carrier_t;

/* A new engine for an accepted handshake, on carrier `ops`/`t`.  Sends are
 * allowed from here on (on_open may send: the frames follow the
 * handshake's answer) and written once the carrier starts it.  NULL when
 * out of memory. */
petrel_ws_t *petrel__ws_new(const petrel__ws_route_t *rt, const petrel__config_t *cfg,
                            const char *subprotocol, int deflate_bits,
                            const petrel__ws_carrier_t *ops, void *t);
/* The same for the client side of a WebSocket whose handshake is done
 * (petrel_ws_client_new): frames it sends are masked, those it receives
 * must not be (RFC 6455 §5.1); no subprotocol, no extension. */
petrel_ws_t *petrel__ws_new_client(const petrel__ws_route_t *rt, const petrel__config_t *cfg,
                                   const petrel__ws_carrier_t *ops, void *t);
/* Whether the user paused reading (petrel_ws_pause()): the carrier reads
 * no input meanwhile, and comes back (kick) when it changes. */
bool petrel__ws_paused(const petrel_ws_t *ws);
/* Free an engine that never started (the handshake failed after it was
 * made); on_close is not called. */
void petrel__ws_free(petrel_ws_t *ws);
/* on_open has been called: on_close will be. */
void petrel__ws_opened(petrel_ws_t *ws);
/* The stream is live (the carrier is switched): timers run.  `draining`:
 * the server is shutting down (Close 1001 at once). */
void petrel__ws_start(petrel_ws_t *ws, bool draining);
/* Bytes from the peer: returns how many were consumed (the rest is an
 * incomplete frame header; offer it again with more).  Messages are
 * delivered, pings answered, the Close handshake run from here.  Never
 * frees the engine (sends are written by the carrier, later). */
size_t petrel__ws_input(petrel_ws_t *ws, const char *p, size_t n);
/* The peer ended its side without a Close (1006). */
void petrel__ws_eof(petrel_ws_t *ws);
/* The carrier's queue is empty; `after_wait`: it had waited for the peer.
 * The idle timer starts over when anything was written. */
void petrel__ws_written(petrel_ws_t *ws, bool after_wait);
/* Whether the engine still reads (its Close handshake is not over).  A
 * carrier whose engine is done ends the stream once its output is
 * written, then calls petrel__ws_gone(). */
bool petrel__ws_reading(const petrel_ws_t *ws);
/* Whether messages may be sent (not closing or closed). */
bool petrel__ws_open(const petrel_ws_t *ws);
/* Graceful shutdown: Close 1001, wait for the peer's Close. */
void petrel__ws_drain(petrel_ws_t *ws);
/* Run on_close if it is due: after input, before the carrier writes. */
void petrel__ws_advance(petrel_ws_t *ws);
/* The carrier lets go (closed, reset, finished): on_close (1006 when it had
 * not run), and the engine is freed. */
void petrel__ws_gone(petrel_ws_t *ws);
/* For the carrier's use: an entry for the end of the loop turn and a few
 * flags, kept in the engine so that a carrier needs no state of its own. */
petrel__pending_t *petrel__ws_pending(petrel_ws_t *ws);
unsigned *petrel__ws_carrier_flags(petrel_ws_t *ws);
petrel_ws_t *petrel__ws_of_pending(petrel__pending_t *p);
void *petrel__ws_carrier(const petrel_ws_t *ws);
/* Its message arena (for tests). */
petrel_arena_t *petrel__ws_arena(petrel_ws_t *ws);
/* The queue may have shrunk: a drain callback whose mark is reached runs
 * at the end of the turn. */
void petrel__ws_progress(petrel_ws_t *ws);
/* The peer took some of the queue, not all (all: petrel__ws_written): it
 * reads, so it is not idle nor stuck; and petrel__ws_progress(). */
void petrel__ws_peer_read(petrel_ws_t *ws);

/* ------------------------------------------------------------------------ */
/* One message for many connections (publish/subscribe, pubsub.c): framed   */
/* once, compressed once per window size (permessage-deflate without       */
/* context takeover makes every compressed message stand alone), then      */
/* queued on each connection.                                               */

typedef struct petrel__ws_zmsg {
    const uint8_t *data; /* the compressed payload (a worker buffer) */
    size_t len;
    const uint8_t *frame; /* header and payload, for sharing (or NULL) */
    uint8_t h[10], hl;
    uint8_t state; /* 0: not made yet, 1: made, 2: does not shrink (sent as it is) */
} petrel__ws_zmsg_t;

typedef struct petrel__ws_msg {
    const void *data;
    size_t len;
    uint8_t opcode;
    uint8_t h[10], hl;
    const uint8_t *frame;    /* header and payload, for sharing (or NULL) */
    petrel__ws_zmsg_t z[16]; /* by window bits, 9-15 */
} petrel__ws_msg_t;

/* Frame `data` (a text message's UTF-8 checked by the caller).  `data`
 * must stay valid, and no other message may be made, while it is sent.
 * A frame of up to 4 KiB is made once, in a per-worker arena of the loop
 * turn, and connections whose carrier can write it with nothing before it
 * refer to it instead of copying it (see ws.c). */
void petrel__ws_msg_init(petrel__ws_msg_t *m, int binary, const void *data, size_t len);
/* Queue the message on `ws`: 0, PETREL_ESTATE (closing or closed), PETREL_EIO
 * (over the send limit: closed with 1008), PETREL_ELIMIT (over the send
 * limit, dropped: --ws-send-overflow drop), PETREL_ENOMEM. */
int petrel__ws_msg_send(petrel_ws_t *ws, petrel__ws_msg_t *m);
/* The message was sent to every connection it goes to: the end of the
 * turn (which copies what the carriers did not write, then empties the
 * arena) is due after the carriers it kicked. */
void petrel__ws_msg_done(petrel__ws_msg_t *m);
/* For the carrier (with `writev`): write the shared frames of `ws` (before
 * its own writing).  0, or a negative code (the engine is finished then). */
int petrel__ws_flush_staged(petrel_ws_t *ws);
/* The end of a worker: the turn arena and the compression buffers go. */
void petrel__ws_msg_fini(void);

/* pubsub.c's place in the engine: its subscriptions, and the callback of
 * this connection that drops them when it can send no more (before
 * on_close, or when it is freed), given when the first one is made. */
void **petrel__ws_pubsub(petrel_ws_t *ws);
void petrel__ws_pubsub_attach(petrel_ws_t *ws, void (*gone)(petrel_ws_t *ws));

/* The options of WebSocket (--ws-*). */
extern const struct petrel__option_table petrel__ws_option_table;

#endif /* PETREL_WS_H */
