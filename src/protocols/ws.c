/*
 * ws.c -- the WebSocket engine (RFC 6455) on wslay: the only file that
 * touches wslay.
 *
 * The engine runs on a carrier it does not own (ws.h): bytes come in
 * through petrel__ws_input() and frames go out through the carrier's
 * operations.  The carriers are ws-h1.c (an HTTP/1.1 connection after its
 * 101) and ws-h2.c (an HTTP/2 stream, RFC 8441); the opening handshake is
 * the framework's (framework/ws-handshake.c).
 *
 * Input: petrel checks every frame header itself before wslay sees it
 * (scan_header), and hands wslay one frame at a time through the recv
 * callback.  wslay 1.1.1 is lenient in places where RFC 6455 says MUST: a
 * fragmented or over-long control frame or a non-minimal length gets a Close
 * without a status code instead of 1002; a Close with a one-byte payload is
 * answered as if it had none; a text message's UTF-8 and its size are only
 * checked per frame when messages are not buffered.  So the scanner refuses
 * those before wslay sees them, validates the UTF-8 of text (across frames,
 * on the masked bytes, before handing them over), counts message sizes, and
 * handles Close frames itself (§5.5.1, §7.4).  What is left to wslay:
 * unmasking, payload delivery (no buffering: petrel reassembles messages in
 * the carrier's arena, one arena scope per message), answering pings, and
 * framing control frames.  Messages are dispatched after wslay_event_recv()
 * returns, never from inside it, so a handler may send or close freely.
 *
 * Output: data frames are framed here and copied into the carrier's queue
 * (pool chunks, no malloc; wslay's queue would malloc and copy every
 * message); control frames go through wslay's queue and its send callback,
 * which copies them into the same queue at once.  Frames are always queued
 * whole, so the two never interleave within a frame.  Instead of wslay's
 * would-block idiom, the carrier's queue is the buffer, with two bounds:
 * the carrier stops reading while output waits for the peer (TCP pushes
 * back), and a send that finds more than the send limit already queued
 * (sends from timers, broadcasts) is refused and the WebSocket closed with
 * 1008.
 *
 * permessage-deflate (RFC 7692) is negotiated with no context takeover
 * either way, so that zlib's streams belong to the worker, not to the
 * connections (see the section below).
 *
 * Memory of an idle WebSocket: the petrel_ws_t (malloc, a few hundred
 * bytes) and wslay's context (malloc, about 8.5 KiB: two 4 KiB buffers), on
 * top of the carrier; its arena is empty.  A message is assembled in the
 * arena, in a scope of its own, given back once on_message has returned:
 * up to 16 KiB in pool chunks (no heap call), above that in a block of its
 * own (one malloc).
 *
 * Why this file is over 1,000 lines: it is the one file that touches
 * wslay, and the RFC 6455 checks wslay skips, permessage-deflate, the
 * message arena, backpressure and the frames shared by publish/subscribe
 * all sit between wslay's callbacks and the carrier; split, each part
 * would reach into the engine's state.
 */
#include "protocols/ws.h"
#include "runtime/options.h"

#include "runtime/arena.h"
#include "protocols/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <wslay/wslay.h>
#include <zlib.h>

#define WS_DEFAULT_MAX_MESSAGE (16u << 20)
#define WS_DEFAULT_IDLE_MS 30000
#define WS_DEFAULT_SEND_LIMIT (4u << 20)
#define WS_DEFLATE_MIN 32  /* smaller messages are sent as they are */
#define WS_STAGED 8        /* shared frames (runs of them) a connection refers to */
#define WS_SHARED_MAX 4096 /* a larger published frame is copied to each connection */
/* A longer message is deflated in two steps: its first WS_DEFLATE_PROBE
 * bytes, then the rest, only when those shrank by 1/32 at least.  Level-1
 * deflate of incompressible data (media, compressed or encrypted files) is
 * slow for nothing: the echo of 16 MiB of random bytes took 0.35 s of the
 * worker (tests/ws-bench/deflate_cpu.py), a loop turn that its other
 * connections wait through; 0.04 s with the probe.  Compressible data pays
 * a sync flush, 5 bytes. */
#define WS_DEFLATE_PROBE 16384

enum { OP_CONT = 0, OP_TEXT = 1, OP_BINARY = 2, OP_CLOSE = 8, OP_PING = 9, OP_PONG = 10 };

enum {
    WS_OPENING, /* handshake answered, the carrier not started yet */
    WS_OPEN,
    WS_CLOSING, /* our Close sent, waiting for the peer's */
    WS_DONE     /* no more frames: finish once the output is written */
};

enum {
    WS_STARTED = 1 << 0,    /* petrel__ws_start() ran: timers are ours */
    WS_OPENED = 1 << 2,     /* on_open was called: on_close will be */
    WS_CLOSE_CB = 1 << 3,   /* on_close was called */
    WS_CLOSE_SENT = 1 << 4, /* a Close frame is queued */
    WS_PING_SENT = 1 << 5,  /* idle: a ping went out, nothing came back yet */
    WS_MSG = 1 << 6,        /* a data message is being assembled */
    WS_MSG_TEXT = 1 << 7,
    WS_FRAME_FIN = 1 << 8,   /* the frame being fed ends its message */
    WS_MSG_DEFLATE = 1 << 9, /* the message is compressed (RFC 7692, RSV1) */
};

/* A message that arrives below the minimum rate (--body-timeout plus one
 * second per --body-min-rate bytes: the rule of HTTP/1.1 request bodies,
 * petrel__body_late) is refused with 1008 and the connection ends: a peer
 * trickling a fragmented message, or one large frame, holds no connection
 * and no message buffer for long.  Checked as its bytes arrive, and while
 * it is in progress the timer checks it every msg_q period (a peer that
 * stalls mid-message); between messages the idle timer applies. */

struct petrel_ws {
    const petrel__ws_carrier_t *cops;
    void *t;               /* the carrier's own pointer */
    petrel_arena_t arena;  /* messages are assembled here, a scope each */
    petrel__timer_t timer; /* idle ping, Close wait, no progress on output,
                            * the deadline of a message in progress */
    const petrel__config_t *cfg;
    petrel__pending_t pending; /* for the carrier (ws.h) */
    unsigned carrier_flags;    /* for the carrier (ws.h) */
    wslay_event_context_ptr wslay;
    const petrel__ws_route_t *route; /* &own */
    petrel__ws_route_t own;          /* the endpoint's handler and data, copied */
    bool client;                     /* the client side (petrel_ws_client_new): masks */
    bool read_paused;                /* petrel_ws_pause() */
    void *data;
    const char *subprotocol;
    int state;
    unsigned flags;
    size_t max_message;
    size_t send_limit;
    size_t out_hint;      /* bytes queued since the output was last empty: >= queued */
    uint8_t deflate_bits; /* permessage-deflate: our LZ77 window (9-15); 0: off */
    /* the frame being fed to wslay (scan_header) */
    uint64_t frame_left;  /* bytes of it (header and payload) not handed over yet */
    uint64_t payload_off; /* payload bytes handed over */
    uint8_t hdr_left;     /* header bytes not handed over yet */
    uint8_t frame_op;
    uint8_t mask[4];
    uint16_t fail_code; /* set by the recv callback: fail once wslay returns */
    /* the input being consumed (petrel__ws_input) */
    const uint8_t *in;
    size_t in_len, in_pos;
    /* the message being assembled */
    uint32_t utf8; /* validator state, across the frames of a text message */
    char *msg;
    size_t msg_len, msg_cap;
    uint64_t msg_start; /* ms: when its first frame header arrived */
    petrel_arena_mark_t msg_mark;
    /* on_close arguments, kept until it runs */
    uint16_t cb_code;
    char cb_reason[124];
    /* backpressure: petrel_ws_on_drain() */
    petrel_ws_drain_cb drain_cb;
    void *drain_data;
    size_t drain_mark;
    petrel__pending_t drain_pending; /* the callback runs from the loop */
    bool drop;                       /* --ws-send-overflow drop */
    /* publish/subscribe (pubsub.c): its subscriptions, and what drops them */
    void *pubsub;
    void (*pubsub_gone)(petrel_ws_t *ws);
    /* frames shared with other connections (a published message), not
     * copied: written by the carrier at the end of the turn (or copied into
     * its queue then) */
    struct iovec staged[WS_STAGED];
    uint8_t nstaged;
    size_t staged_bytes;
    petrel__list_t staged_link; /* staged_all */
};

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel__tq_t idle_q;
static petrel__tq_t msg_q;

/* The same over masked payload bytes, `off` bytes into the payload. */
static size_t utf8_scan_masked(uint32_t *st, const uint8_t *p, size_t n, const uint8_t mask[4],
                               uint64_t off)
{
    uint8_t tmp[512];
    uint8_t m[8];
    for (int j = 0; j < 8; j++)
        m[j] = mask[(off + (uint64_t)j) & 3];
    uint64_t mw;
    memcpy(&mw, m, 8);
    size_t done = 0;
    while (done < n) {
        size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp), j = 0;
        for (; j + 8 <= k; j += 8) { /* sizeof(tmp) is a multiple of 4: the mask stays aligned */
            uint64_t w;
            memcpy(&w, p + done + j, 8);
            w ^= mw;
            memcpy(tmp + j, &w, 8);
        }
        for (; j < k; j++)
            tmp[j] = p[done + j] ^ m[j & 7];
        size_t v = petrel__utf8_scan(st, tmp, k);
        if (v < k)
            return done + v;
        done += k;
    }
    return n;
}

static bool utf8_valid(const void *p, size_t n)
{
    uint32_t st = 0;
    return petrel__utf8_scan(&st, p, n) == n && st == 0;
}

/* ------------------------------------------------------------------------ */
/* Close codes (RFC 6455 §7.4, IANA registry)                               */

/* Codes a peer may send: the defined ones and the private range.  1004,
 * 1005, 1006 and 1015 are reserved or never on the wire; 1016-2999 are not
 * assigned; below 1000 is not used. */
static bool close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

static size_t frame_header(uint8_t *h, int opcode, bool rsv1, uint64_t len)
{
    h[0] = (uint8_t)(0x80 | (rsv1 ? 0x40 : 0) | opcode); /* FIN; a server's never masked (§5.1) */
    if (len < 126) {
        h[1] = (uint8_t)len;
        return 2;
    }
    if (len < 65536) {
        h[1] = 126;
        h[2] = (uint8_t)(len >> 8);
        h[3] = (uint8_t)len;
        return 4;
    }
    h[1] = 127;
    for (int i = 0; i < 8; i++)
        h[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

/* ------------------------------------------------------------------------ */
/* The client side (petrel_ws_client_new): every frame it sends is masked   */
/* with a fresh key from a strong source of entropy (§5.3, §10.3).          */

static uint8_t mask_pool[256]; /* getrandom() bytes, used four at a time */
static size_t mask_left;
static uint8_t *mbuf; /* the masked payload of the frame being queued (grown, kept) */
static size_t mbuf_cap;

static int mask_key(uint8_t key[4])
{
    if (mask_left < 4) {
        ssize_t n = getrandom(mask_pool, sizeof(mask_pool), 0);
        if (n != (ssize_t)sizeof(mask_pool))
            return -1;
        mask_left = sizeof(mask_pool);
    }
    mask_left -= 4;
    memcpy(key, mask_pool + mask_left, 4);
    return 0;
}

static int cb_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
    (void)user;
    for (size_t i = 0; i < len; i += 4) {
        uint8_t k[4];
        if (mask_key(k) < 0) {
            wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
        memcpy(buf + i, k, len - i < 4 ? len - i : 4);
    }
    return 0;
}

/* A client's frame: the mask bit and key after the header `h` (of `hl`
 * bytes, room for 4 more), the payload masked into mbuf.  The header's new
 * length, or 0 when out of memory or entropy. */
static size_t mask_frame(uint8_t *h, size_t hl, const void *data, size_t len, const void **out)
{
    uint8_t key[4];
    if (len > mbuf_cap) {
        uint8_t *nb = realloc(mbuf, len);
        if (nb == NULL)
            return 0;
        mbuf = nb;
        mbuf_cap = len;
    }
    if (mask_key(key) < 0)
        return 0;
    h[1] |= 0x80;
    memcpy(h + hl, key, 4);
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        mbuf[i] = p[i] ^ key[i & 3];
    *out = mbuf;
    return hl + 4;
}

/* Bytes for the peer not written yet: the carrier's queue, and the shared
 * frames the carrier has not taken yet. */
static size_t ws_queued(const petrel_ws_t *ws)
{
    return ws->cops->queued(ws->t) + ws->staged_bytes;
}

/* Have the carrier come back to write (never from inside this call). */
static void ws_kick(petrel_ws_t *ws)
{
    if (ws->flags & WS_STARTED)
        ws->cops->kick(ws->t);
    /* before the start, the carrier writes what is queued when it starts */
}

static int unstage(petrel_ws_t *ws);

static ssize_t cb_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    petrel_ws_t *ws = user;
    (void)flags;
    if ((ws->nstaged && unstage(ws) < 0) || ws->cops->write(ws->t, data, len, NULL, 0) < 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    ws->out_hint += len;
    return (ssize_t)len;
}

/* Queue a Close frame (code 0: none) through wslay; it is framed at once. */
static void send_close(petrel_ws_t *ws, unsigned code, const char *reason)
{
    if (ws->flags & WS_CLOSE_SENT)
        return;
    size_t rl = reason ? strlen(reason) : 0;
    if (rl > 123)
        rl = 123;
    ws->flags |= WS_CLOSE_SENT;
    wslay_event_queue_close(ws->wslay, (uint16_t)code, (const uint8_t *)reason, code ? rl : 0);
    wslay_event_send(ws->wslay);
}

/* Stop: no more frames are read or delivered.  on_close gets code/reason
 * (ws_advance calls it); a Close frame with `send_code` goes out first unless
 * one went already.  The connection closes once the output is written. */
static void ws_finish(petrel_ws_t *ws, unsigned cb_code, const char *reason, unsigned send_code)
{
    if (ws->state == WS_DONE)
        return;
    if (send_code)
        send_close(ws, send_code, reason);
    ws->state = WS_DONE;
    ws->cb_code = (uint16_t)cb_code;
    snprintf(ws->cb_reason, sizeof(ws->cb_reason), "%s", reason ? reason : "");
    ws_kick(ws);
}

/* _Fail the WebSocket Connection_ (§7.1.7): Close with `code`, then close. */
static void ws_fail(petrel_ws_t *ws, unsigned code, const char *reason)
{
    petrel_log(PETREL_LOG_DEBUG, "websocket: closing with %u: %s", code, reason);
    ws_finish(ws, code, reason, code);
}

/* ------------------------------------------------------------------------ */
/* permessage-deflate (RFC 7692)                                            */
/*                                                                          */
/* Negotiated with no context takeover both ways, so that every message is */
/* compressed on its own: one deflate stream (per window size) and one      */
/* inflate stream serve every connection of the worker, reset per message,  */
/* and an idle connection holds no zlib memory.                             */

static z_stream *deflaters[16]; /* by window bits */
static z_stream *inflater;
static uint8_t *zbuf; /* compressed output of the message being sent */
static size_t zbuf_cap;

/* The message compressed into *buf (grown as needed; valid until the next
 * call with it); NULL when its first WS_DEFLATE_PROBE bytes do not shrink
 * or zlib fails (the message goes out uncompressed). */
static const uint8_t *deflate_message(int bits, const void *data, size_t len, uint8_t **buf,
                                      size_t *cap, size_t *out_len)
{
    z_stream *z = deflaters[bits];
    if (z == NULL) {
        if ((z = calloc(1, sizeof(*z))) == NULL)
            return NULL;
        /* raw deflate (negative bits), level 1: a server's CPU first */
        if (deflateInit2(z, 1, Z_DEFLATED, -bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(z);
            return NULL;
        }
        deflaters[bits] = z;
    } else if (deflateReset(z) != Z_OK) {
        return NULL;
    }
    size_t need = deflateBound(z, (uLong)len) + 32; /* + the probe's sync flush */
    if (need > *cap) {
        uint8_t *nb = realloc(*buf, need);
        if (nb == NULL)
            return NULL;
        *buf = nb;
        *cap = need;
    }
    z->next_in = (Bytef *)data;
    z->avail_in = (uInt)len;
    z->next_out = *buf;
    z->avail_out = (uInt)*cap;
    if (len > WS_DEFLATE_PROBE) {
        z->avail_in = WS_DEFLATE_PROBE;
        if (deflate(z, Z_SYNC_FLUSH) != Z_OK || z->avail_in != 0 ||
            *cap - z->avail_out > WS_DEFLATE_PROBE - WS_DEFLATE_PROBE / 32)
            return NULL;
        z->avail_in = (uInt)(len - WS_DEFLATE_PROBE);
    }
    if (deflate(z, Z_SYNC_FLUSH) != Z_OK || z->avail_in != 0)
        return NULL;
    size_t n = *cap - z->avail_out;
    if (n < 4 || memcmp(*buf + n - 4, "\x00\x00\xff\xff", 4) != 0)
        return NULL;
    *out_len = n - 4;
    return *buf;
}

/* May a data frame be queued now?  0; PETREL_ESTATE when closing or
 * closed; past the send limit (what is queued and not yet written, before
 * this frame), PETREL_EIO after failing the connection with 1008, or
 * PETREL_ELIMIT for a frame dropped by --ws-send-overflow drop. */
static int send_allowed(petrel_ws_t *ws)
{
    if (ws->state != WS_OPEN && ws->state != WS_OPENING)
        return PETREL_ESTATE;
    if (ws->out_hint > ws->send_limit) {
        ws->out_hint = ws_queued(ws);
        if (ws->out_hint > ws->send_limit) {
            if (ws->drop)
                return PETREL_ELIMIT; /* the caller counts it (pubsub.c: `dropped`) */
            ws_fail(ws, 1008, "send queue over its limit");
            return PETREL_EIO;
        }
    }
    return 0;
}

/* Queue a whole frame and have the carrier write it. */
static int queue_frame(petrel_ws_t *ws, const uint8_t *h, size_t hl, const void *data, size_t len)
{
    int rc = ws->nstaged ? unstage(ws) : 0; /* the shared frames go first */
    if (rc == 0)
        rc = ws->cops->write(ws->t, h, hl, data, len);
    if (rc < 0) {
        /* part of a frame may be queued: the stream cannot go on */
        ws_finish(ws, 1006, "out of memory", 0);
        return rc;
    }
    ws->out_hint += hl + len;
    ws_kick(ws);
    return 0;
}

static int ws_send(petrel_ws_t *ws, int opcode, const void *data, size_t len)
{
    if (ws == NULL || (data == NULL && len))
        return PETREL_EINVAL;
    if (ws->state != WS_OPEN && ws->state != WS_OPENING)
        return PETREL_ESTATE;
    if (opcode == OP_TEXT && !utf8_valid(data, len))
        return PETREL_EINVAL;
    int rc = send_allowed(ws);
    if (rc < 0)
        return rc;
    bool rsv1 = false;
    if (ws->deflate_bits && len >= WS_DEFLATE_MIN) {
        /* RFC 7692 §7.2.1: compressed, without the trailing 00 00 ff ff; a
         * message that does not shrink is sent as it is */
        size_t zl;
        const uint8_t *z = deflate_message(ws->deflate_bits, data, len, &zbuf, &zbuf_cap, &zl);
        if (z && zl < len) {
            data = z;
            len = zl;
            rsv1 = true;
        }
    }
    uint8_t h[14];
    size_t hl = frame_header(h, opcode, rsv1, len);
    if (ws->client && (hl = mask_frame(h, hl, data, len, &data)) == 0)
        return PETREL_ENOMEM;
    petrel__count(PETREL__C_WS_MSG_OUT, 1);
    return queue_frame(ws, h, hl, data, len);
}

/* ------------------------------------------------------------------------ */
/* A message framed once for many connections (ws.h, pubsub.c)              */
/*                                                                          */
/* A frame of up to WS_SHARED_MAX bytes is made once, in the turn arena (per */
/* worker, emptied at the end of each loop turn), and each connection whose */
/* carrier has nothing queued refers to it (`staged`: consecutive frames    */
/* make one run) instead of copying it.  The carrier writes the runs with    */
/* one writev when it comes back at the end of the turn, and copies into    */
/* its queue only what the socket does not take.  Anything else the engine */
/* queues copies the runs first (order), and so does the end of the turn    */
/* for a carrier that has not come back: the arena may then go.             */

/* The compressed forms of the message being fanned out, by window bits:
 * per worker, reused from message to message (no heap call once grown). */
static uint8_t *mz_buf[16];
static size_t mz_cap[16];

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel_arena_t turn_arena;
static petrel__pending_t turn_end;
static petrel__list_t staged_all;
static bool turn_ready;

/* Copy the runs into the carrier's queue. */
static int unstage(petrel_ws_t *ws)
{
    int rc = 0;
    for (unsigned i = 0; i < ws->nstaged && rc == 0; i++)
        rc = ws->cops->write(ws->t, ws->staged[i].iov_base, ws->staged[i].iov_len, NULL, 0);
    ws->nstaged = 0;
    ws->staged_bytes = 0;
    list_unlink(&ws->staged_link);
    return rc;
}

static void on_turn_end(petrel__pending_t *p)
{
    (void)p;
    while (!list_empty(&staged_all)) {
        petrel_ws_t *ws = container_of(staged_all.next, petrel_ws_t, staged_link);
        if (unstage(ws) < 0)
            ws_finish(ws, 1006, "out of memory", 0);
    }
    petrel__arena_clear(&turn_arena);
}

/* A frame in the turn arena: `h` then `len` bytes of `data`; NULL when it
 * is too large to share (or out of memory: it is copied then). */
static uint8_t *turn_frame(const uint8_t *h, size_t hl, const void *data, size_t len)
{
    if (hl + len > WS_SHARED_MAX)
        return NULL;
    if (!turn_ready) {
        petrel__arena_init(&turn_arena, &petrel__pool, 0);
        list_init(&staged_all);
        list_init(&turn_end.node);
        turn_end.cb = on_turn_end;
        turn_ready = true;
    }
    uint8_t *f = petrel_arena_alloc(&turn_arena, hl + len, 1);
    if (f) {
        memcpy(f, h, hl);
        memcpy(f + hl, data, len);
    }
    return f;
}

void petrel__ws_msg_done(petrel__ws_msg_t *m)
{
    (void)m;
    if (turn_ready && !list_empty(&staged_all)) {
        /* after the carriers kicked so far: they write their runs first */
        list_unlink(&turn_end.node);
        petrel__pending_add(petrel__loop, &turn_end);
    } else if (turn_ready && list_empty(&turn_end.node) && !petrel__arena_is_empty(&turn_arena)) {
        petrel__pending_add(petrel__loop, &turn_end); /* the arena goes all the same */
    }
}

void petrel__ws_msg_fini(void)
{
    if (turn_ready) {
        list_unlink(&turn_end.node);
        on_turn_end(&turn_end);
    }
    for (int i = 0; i < 16; i++) {
        free(mz_buf[i]);
        mz_buf[i] = NULL;
        mz_cap[i] = 0;
    }
}

void petrel__ws_msg_init(petrel__ws_msg_t *m, int binary, const void *data, size_t len)
{
    m->data = data;
    m->len = len;
    m->opcode = binary ? OP_BINARY : OP_TEXT;
    m->hl = (uint8_t)frame_header(m->h, m->opcode, false, len);
    m->frame = turn_frame(m->h, m->hl, data, len);
    memset(m->z, 0, sizeof(m->z));
}

/* Queue a frame made once: refer to it when the carrier can write it with
 * what it has, else copy it. */
static int send_shared(petrel_ws_t *ws, const uint8_t *frame, const uint8_t *h, size_t hl,
                       const void *data, size_t len)
{
    size_t fl = hl + len;
    if (frame == NULL || ws->cops->writev == NULL || !(ws->flags & WS_STARTED) ||
        (ws->nstaged == 0 && ws->cops->queued(ws->t) > 0))
        return queue_frame(ws, h, hl, data, len);
    struct iovec *last = ws->nstaged ? &ws->staged[ws->nstaged - 1] : NULL;
    if (last && (uint8_t *)last->iov_base + last->iov_len == frame) {
        last->iov_len += fl; /* the next frame of the same run */
    } else if (ws->nstaged < WS_STAGED) {
        ws->staged[ws->nstaged++] = (struct iovec){(void *)frame, fl};
        if (ws->nstaged == 1)
            list_append(&staged_all, &ws->staged_link);
    } else {
        return queue_frame(ws, h, hl, data, len); /* copies the runs, then this */
    }
    ws->staged_bytes += fl;
    ws->out_hint += fl;
    petrel__count(PETREL__C_WS_MSG_OUT, 1);
    ws_kick(ws);
    return 0;
}

int petrel__ws_msg_send(petrel_ws_t *ws, petrel__ws_msg_t *m)
{
    if (ws->client)
        return PETREL_ESTATE; /* shared frames are a server's: not masked */
    int rc = send_allowed(ws);
    if (rc < 0)
        return rc;
    unsigned bits = ws->deflate_bits;
    if (bits == 0 || m->len < WS_DEFLATE_MIN)
        return send_shared(ws, m->frame, m->h, m->hl, m->data, m->len);
    petrel__ws_zmsg_t *z = &m->z[bits];
    if (z->state == 0) {
        /* compressed once per window size, then shared (no context
         * takeover: every message stands alone) */
        size_t zl;
        const uint8_t *p =
            deflate_message((int)bits, m->data, m->len, &mz_buf[bits], &mz_cap[bits], &zl);
        if (p && zl < m->len) {
            z->state = 1;
            z->data = p;
            z->len = zl;
            z->hl = (uint8_t)frame_header(z->h, m->opcode, true, zl);
            z->frame = turn_frame(z->h, z->hl, p, zl);
        } else {
            z->state = 2; /* sent as it is */
        }
    }
    if (z->state == 2)
        return send_shared(ws, m->frame, m->h, m->hl, m->data, m->len);
    return send_shared(ws, z->frame, z->h, z->hl, z->data, z->len);
}

int petrel__ws_flush_staged(petrel_ws_t *ws)
{
    if (ws->nstaged == 0)
        return 0;
    int rc = ws->cops->writev(ws->t, ws->staged, ws->nstaged);
    ws->nstaged = 0;
    ws->staged_bytes = 0;
    list_unlink(&ws->staged_link);
    if (rc < 0)
        ws_finish(ws, 1006, "out of memory", 0);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Input                                                                    */

enum { SCAN_MORE, SCAN_FRAME, SCAN_STOP };

/* Message memory: `*cap` bytes and a NUL in the message scope of the
 * arena; *cap may come back larger (a whole pool chunk, so that messages up
 * to 16 KiB make no heap call). */
static char *msg_alloc(petrel_ws_t *ws, size_t *cap)
{
    size_t size = *cap + 1;
    char *p = petrel__arena_alloc_buf(&ws->arena, &size);
    if (p)
        *cap = size - 1;
    return p;
}

/* Grow the message buffer to hold `need` bytes (plus a NUL). */
static bool msg_reserve(petrel_ws_t *ws, size_t need, bool exact)
{
    if (need <= ws->msg_cap && ws->msg)
        return true;
    size_t cap = need;
    if (!exact) {
        cap = ws->msg_cap * 2 > 256 ? ws->msg_cap * 2 : 256;
        if (cap < need)
            cap = need;
        if (cap > ws->max_message)
            cap = ws->max_message > need ? ws->max_message : need;
    }
    char *p = msg_alloc(ws, &cap);
    if (p == NULL)
        return false;
    if (ws->msg_len)
        memcpy(p, ws->msg, ws->msg_len);
    ws->msg = p;
    ws->msg_cap = cap;
    return true;
}

/* Inflate the assembled message (RFC 7692 §7.2.2) into a new buffer of the
 * message scope.  Returns 0, or the Close code to fail with. */
static unsigned msg_inflate(petrel_ws_t *ws)
{
    z_stream *z = inflater;
    if (z == NULL) {
        if ((z = calloc(1, sizeof(*z))) == NULL)
            return 1011;
        if (inflateInit2(z, -15) != Z_OK) {
            free(z);
            return 1011;
        }
        inflater = z;
    } else if (inflateReset(z) != Z_OK) {
        return 1011;
    }
    static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
    size_t cap = ws->msg_len * 4 > 256 ? ws->msg_len * 4 : 256;
    if (cap > ws->max_message)
        cap = ws->max_message;
    char *out = msg_alloc(ws, &cap);
    size_t len = 0;
    if (out == NULL)
        return 1011;
    bool ended = false;
    for (int part = 0; part < 2 && !ended; part++) {
        z->next_in = part == 0 ? (Bytef *)ws->msg : (Bytef *)tail;
        z->avail_in = part == 0 ? (uInt)ws->msg_len : 4;
        for (;;) {
            if (len == cap) {
                /* full: one byte over the limit is enough to know */
                if (cap > ws->max_message)
                    return 1009;
                size_t ncap = cap * 2 < ws->max_message + 1 ? cap * 2 : ws->max_message + 1;
                char *nb = msg_alloc(ws, &ncap);
                if (nb == NULL)
                    return 1011;
                memcpy(nb, out, len);
                out = nb;
                cap = ncap;
            }
            z->next_out = (Bytef *)out + len;
            z->avail_out = (uInt)(cap - len);
            int rc = inflate(z, Z_SYNC_FLUSH);
            len = cap - z->avail_out;
            if (rc == Z_STREAM_END) {
                /* a final block: nothing may follow it but our tail */
                ended = true;
                if (z->avail_in && part == 0)
                    return 1007;
                break;
            }
            if (rc == Z_BUF_ERROR && z->avail_out)
                break; /* all input used */
            if (rc != Z_OK && rc != Z_BUF_ERROR)
                return 1007;
            if (z->avail_out)
                break; /* all input used, all output out */
        }
    }
    if (len > ws->max_message)
        return 1009;
    ws->msg = out;
    ws->msg_len = len;
    ws->msg_cap = cap;
    return 0;
}

/* A Close frame from the peer, unmasked (§5.5.1, §7.1.5, §7.4). */
static void on_close_frame(petrel_ws_t *ws, const uint8_t *p, size_t len)
{
    unsigned code = 1005; /* no status code in the frame */
    if (len == 1) {
        ws_fail(ws, 1002, "close frame with a 1-byte payload");
        return;
    }
    if (len >= 2) {
        code = (unsigned)p[0] << 8 | p[1];
        if (!close_code_valid(code)) {
            ws_fail(ws, 1002, "invalid close code");
            return;
        }
        if (!utf8_valid(p + 2, len - 2)) {
            ws_fail(ws, 1007, "close reason is not UTF-8");
            return;
        }
    }
    /* answer with the same code (none for none), unless ours went first */
    if (!(ws->flags & WS_CLOSE_SENT)) {
        ws->flags |= WS_CLOSE_SENT;
        wslay_event_queue_close(ws->wslay, code == 1005 ? 0 : (uint16_t)code, NULL, 0);
        wslay_event_send(ws->wslay);
    }
    char reason[124];
    size_t rl = len > 2 ? len - 2 : 0;
    memcpy(reason, p + 2 * (len >= 2), rl);
    reason[rl] = '\0';
    ws_finish(ws, code, reason, 0);
}

/* Check the header of the next frame, at the input position.  Everything
 * RFC 6455 requires of a client's frame is checked here, before wslay sees
 * it. */
static int scan_header(petrel_ws_t *ws)
{
    const uint8_t *p = ws->in + ws->in_pos;
    size_t avail = ws->in_len - ws->in_pos;
    if (avail < 2)
        return SCAN_MORE;
    bool fin = p[0] & 0x80, masked = p[1] & 0x80;
    unsigned rsv = p[0] & 0x70, op = p[0] & 0x0f, len7 = p[1] & 0x7f;
    bool ctrl = op & 0x08;
    const char *err = NULL;
    bool rsv1 = rsv == 0x40 && ws->deflate_bits && (op == OP_TEXT || op == OP_BINARY);
    if (rsv && !rsv1)
        err = rsv == 0x40 && ws->deflate_bits ? "RSV1 on a frame other than a message's first"
                                              : "reserved bits set without an extension"; /* §5.2 */
    else if (op > OP_BINARY && op != OP_CLOSE && op != OP_PING && op != OP_PONG)
        err = "unknown opcode";
    else if (!masked && !ws->client)
        err = "unmasked client frame"; /* §5.1 */
    else if (masked && ws->client)
        err = "masked server frame"; /* §5.1 */
    else if (ctrl && !fin)
        err = "fragmented control frame"; /* §5.5 */
    else if (ctrl && len7 > 125)
        err = "control frame over 125 bytes";
    else if (op == OP_CONT && !(ws->flags & WS_MSG))
        err = "continuation frame without a message"; /* §5.4 */
    else if ((op == OP_TEXT || op == OP_BINARY) && (ws->flags & WS_MSG))
        err = "new message inside a fragmented one";
    if (err) {
        ws_fail(ws, 1002, err);
        return SCAN_STOP;
    }
    size_t hl = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (ws->client ? 0 : 4);
    if (avail < hl)
        return SCAN_MORE;
    uint64_t len = len7;
    if (len7 == 126) {
        len = (uint64_t)p[2] << 8 | p[3];
        if (len < 126)
            err = "length not in its shortest form"; /* §5.2 */
    } else if (len7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        if (len >> 63)
            err = "length with its most significant bit set";
        else if (len < 65536)
            err = "length not in its shortest form";
    }
    if (err) {
        ws_fail(ws, 1002, err);
        return SCAN_STOP;
    }
    if (ws->client)
        memset(ws->mask, 0, 4);
    else
        memcpy(ws->mask, p + hl - 4, 4);
    if (op == OP_CLOSE) {
        /* handled here, whole: wslay never sees a Close */
        if (avail < hl + len)
            return SCAN_MORE;
        uint8_t pl[125];
        for (size_t i = 0; i < len; i++)
            pl[i] = p[hl + i] ^ ws->mask[i & 3];
        ws->in_pos += hl + len;
        on_close_frame(ws, pl, (size_t)len);
        return SCAN_STOP;
    }
    if (!ctrl) {
        if (op != OP_CONT) {
            ws->flags |= WS_MSG;
            ws->flags = (ws->flags & ~(WS_MSG_TEXT | WS_MSG_DEFLATE)) |
                        (op == OP_TEXT ? WS_MSG_TEXT : 0) | (rsv1 ? WS_MSG_DEFLATE : 0);
            ws->utf8 = 0;
            ws->msg = NULL;
            ws->msg_len = ws->msg_cap = 0;
            ws->msg_mark = petrel_arena_mark(&ws->arena);
            ws->msg_start = petrel__loop->now_ms;
        }
        /* a compressed message may be a little larger than the limit as it
         * came (deflate adds 5 bytes per stored block when it cannot
         * shrink, up to one per 16 KiB): the limit holds once inflated */
        size_t max = ws->max_message;
        if (ws->flags & WS_MSG_DEFLATE)
            max += (max >> 8) + 1024;
        if (len > max - ws->msg_len) {
            ws_fail(ws, 1009, "message over the size limit");
            return SCAN_STOP;
        }
        /* a text message must not end inside a character: an empty last
         * frame is checked here, a non-empty one as it is handed over */
        if (fin && len == 0 && (ws->flags & WS_MSG_TEXT) && !(ws->flags & WS_MSG_DEFLATE) &&
            ws->utf8 != 0) {
            ws_fail(ws, 1007, "text message is not UTF-8");
            return SCAN_STOP;
        }
        if (ws->state != WS_DONE && ws->state != WS_CLOSING &&
            !msg_reserve(ws, ws->msg_len + (size_t)len, fin && op != OP_CONT)) {
            ws_fail(ws, 1011, "out of memory for the message");
            return SCAN_STOP;
        }
    }
    ws->flags = (ws->flags & ~WS_FRAME_FIN) | (fin && !ctrl ? WS_FRAME_FIN : 0);
    ws->frame_op = (uint8_t)op;
    ws->frame_left = hl + len;
    ws->hdr_left = (uint8_t)hl;
    ws->payload_off = 0;
    return SCAN_FRAME;
}

/* wslay pulls the current frame's bytes from the input; the UTF-8 of a
 * text message is checked before its bytes are handed over. */
static ssize_t cb_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    petrel_ws_t *ws = user;
    (void)flags;
    size_t n = ws->in_len - ws->in_pos;
    if (n > len)
        n = len;
    if (n > ws->frame_left)
        n = (size_t)ws->frame_left;
    if (n == 0 || ws->fail_code) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    const uint8_t *src = ws->in + ws->in_pos;
    size_t h = n < ws->hdr_left ? n : ws->hdr_left, pl = n - h;
    if (pl && (ws->flags & (WS_MSG_TEXT | WS_MSG_DEFLATE)) == WS_MSG_TEXT &&
        (ws->frame_op == OP_TEXT || ws->frame_op == OP_CONT)) {
        size_t ok = utf8_scan_masked(&ws->utf8, src + h, pl, ws->mask, ws->payload_off);
        if (ok == pl && pl == ws->frame_left - h && (ws->flags & WS_FRAME_FIN) && ws->utf8)
            ok = pl - 1; /* the message would end inside a character */
        if (ok < pl) {
            ws->fail_code = 1007;
            pl = ok;
            n = h + pl;
            if (n == 0) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
            }
        }
    }
    memcpy(buf, src, n);
    ws->in_pos += n;
    ws->frame_left -= n;
    ws->hdr_left = (uint8_t)(ws->hdr_left - h);
    ws->payload_off += pl;
    return (ssize_t)n;
}

/* Unmasked payload of the frame being fed: data frames are assembled. */
static void cb_chunk(wslay_event_context_ptr ctx,
                     const struct wslay_event_on_frame_recv_chunk_arg *a, void *user)
{
    petrel_ws_t *ws = user;
    (void)ctx;
    if (ws->frame_op > OP_BINARY || ws->msg == NULL || a->data_length == 0)
        return; /* control frames are wslay's; a closing connection drops data */
    if (a->data_length > ws->msg_cap - ws->msg_len)
        return; /* cannot happen: scan_header reserved the frame's length */
    memcpy(ws->msg + ws->msg_len, a->data, a->data_length);
    ws->msg_len += a->data_length;
}

static void dispatch(petrel_ws_t *ws)
{
    bool text = ws->flags & WS_MSG_TEXT;
    if ((ws->flags & WS_MSG_DEFLATE) && ws->state == WS_OPEN) {
        unsigned code = msg_inflate(ws);
        if (code == 0 && text && !utf8_valid(ws->msg, ws->msg_len))
            code = 1007;
        if (code) {
            ws->flags &= ~(WS_MSG | WS_MSG_TEXT | WS_MSG_DEFLATE);
            ws_fail(ws, code,
                    code == 1009   ? "message over the size limit"
                    : code == 1007 ? "invalid compressed or UTF-8 data"
                                   : "out of memory for the message");
            return; /* the arena scope goes with the connection */
        }
    }
    ws->flags &= ~(WS_MSG | WS_MSG_TEXT | WS_MSG_DEFLATE);
    if (ws->state == WS_OPEN && ws->route->h.on_message) {
        char *m = ws->msg ? ws->msg : (char *)"";
        if (ws->msg)
            m[ws->msg_len] = '\0';
        petrel__count(PETREL__C_WS_MSG_IN, 1);
        ws->route->h.on_message(ws, !text, m, ws->msg_len);
    }
    /* the message scope ends */
    petrel_arena_reset(&ws->arena, ws->msg_mark);
    ws->msg = NULL;
    ws->msg_len = ws->msg_cap = 0;
}

/* Frames in the input: check, feed to wslay, deliver messages. */
static void ws_input(petrel_ws_t *ws)
{
    while (ws->state != WS_DONE) {
        if (ws->frame_left == 0) {
            int r = scan_header(ws);
            if (r != SCAN_FRAME)
                return;
        }
        int rv = wslay_event_recv(ws->wslay);
        if (wslay_event_want_write(ws->wslay))
            wslay_event_send(ws->wslay); /* the pong of a ping */
        if (ws->fail_code) {
            ws_fail(ws, ws->fail_code, "text message is not UTF-8");
            return;
        }
        if (rv != 0 || !wslay_event_get_read_enabled(ws->wslay)) {
            /* Cannot happen with checked frames, short of memory; wslay
             * queued a Close of its own then. */
            ws->flags |= WS_CLOSE_SENT;
            wslay_event_send(ws->wslay);
            ws_finish(ws, 1011, "wslay failed", 0);
            return;
        }
        if (ws->frame_left)
            return; /* the rest of the frame has not arrived */
        if ((ws->flags & WS_FRAME_FIN) && ws->frame_op <= OP_BINARY)
            dispatch(ws);
    }
}

/* Arm the timer of an open WebSocket: the deadline checks of a message in
 * progress, else the idle timer. */
static void arm_open(petrel_ws_t *ws)
{
    petrel__timer_arm(petrel__loop, &ws->timer, (ws->flags & WS_MSG) ? &msg_q : &idle_q);
}

/* Whether the message in progress is past its deadline: then it is refused
 * (RFC 6455 §7.4.1: 1008, a message that violates the server's policy) and
 * the connection failed (§7.1.7). */
static bool msg_late(petrel_ws_t *ws)
{
    if (ws->state != WS_OPEN || !(ws->flags & WS_MSG) ||
        !petrel__body_late(ws->cfg, ws->msg_start, ws->msg_len, petrel__loop->now_ms))
        return false;
    petrel_log(PETREL_LOG_INFO,
               "websocket: a message of %zu bytes so far took %llu ms (see --body-timeout, "
               "--body-min-rate): closing with 1008",
               ws->msg_len, (unsigned long long)(petrel__loop->now_ms - ws->msg_start));
    ws_fail(ws, 1008, "message too slow");
    return true;
}

size_t petrel__ws_input(petrel_ws_t *ws, const char *p, size_t n)
{
    ws->flags &= ~WS_PING_SENT;
    ws->in = (const uint8_t *)p;
    ws->in_len = n;
    ws->in_pos = 0;
    ws_input(ws);
    if (!msg_late(ws) && ws->state == WS_OPEN)
        arm_open(ws);
    size_t used = ws->state == WS_DONE ? n : ws->in_pos; /* after the end, input is dropped */
    ws->in = NULL;
    ws->in_len = ws->in_pos = 0;
    return used;
}

void petrel__ws_eof(petrel_ws_t *ws)
{
    ws_finish(ws, 1006, "connection closed without a close frame", 0);
}

bool petrel__ws_reading(const petrel_ws_t *ws)
{
    return ws->state != WS_DONE;
}

bool petrel__ws_open(const petrel_ws_t *ws)
{
    return ws->state == WS_OPEN || ws->state == WS_OPENING;
}

void petrel__ws_written(petrel_ws_t *ws, bool after_wait)
{
    /* a peer that took what was sent is there: the idle time starts over
     * (a subscriber that only receives is not idle while it reads) */
    if ((after_wait || ws->out_hint) && ws->state == WS_OPEN)
        arm_open(ws);
    ws->out_hint = 0;
    petrel__ws_progress(ws);
}

void petrel__ws_peer_read(petrel_ws_t *ws)
{
    if (ws->state == WS_OPEN)
        arm_open(ws);
    petrel__ws_progress(ws);
}

/* ------------------------------------------------------------------------ */
/* Backpressure (petrel_ws_on_drain)                                        */

void petrel__ws_progress(petrel_ws_t *ws)
{
    if (ws->drain_cb && ws_queued(ws) <= ws->drain_mark)
        petrel__pending_add(petrel__loop, &ws->drain_pending);
}

/* From the loop, at the end of the turn in which the queue drained. */
static void drain_run(petrel__pending_t *p)
{
    petrel_ws_t *ws = container_of(p, petrel_ws_t, drain_pending);
    petrel_ws_drain_cb cb = ws->drain_cb;
    if (cb == NULL || (ws->state != WS_OPEN && ws->state != WS_OPENING) ||
        ws_queued(ws) > ws->drain_mark)
        return; /* cancelled, closing, or refilled meanwhile: a later write tells */
    ws->drain_cb = NULL;
    cb(ws, ws->drain_data);
}

/* No more sends: subscriptions and a drain callback go. */
static void ws_detach(petrel_ws_t *ws)
{
    if (ws->nstaged && ws->state != WS_DONE)
        unstage(ws); /* the carrier may still write them (a Close follows) */
    ws->nstaged = 0;
    ws->staged_bytes = 0;
    list_unlink(&ws->staged_link);
    ws->drain_cb = NULL;
    list_unlink(&ws->drain_pending.node);
    if (ws->pubsub && ws->pubsub_gone)
        ws->pubsub_gone(ws);
}

static void call_on_close(petrel_ws_t *ws)
{
    if ((ws->flags & WS_OPENED) && !(ws->flags & WS_CLOSE_CB)) {
        ws->flags |= WS_CLOSE_CB;
        ws_detach(ws);
        petrel__gauge_add(PETREL__G_WS_OPEN, -1);
        if (ws->route->h.on_close)
            ws->route->h.on_close(ws, ws->cb_code, ws->cb_reason);
    }
}

void petrel__ws_advance(petrel_ws_t *ws)
{
    if (ws->state == WS_DONE)
        call_on_close(ws);
}

/* The idle timer: a ping after silence, a Close after more of it; and
 * giving up on a peer that does not read or does not answer our Close. */
static void ws_on_timer(petrel__timer_t *t)
{
    petrel_ws_t *ws = container_of(t, petrel_ws_t, timer);
    if (ws->state == WS_OPEN && (ws->flags & WS_MSG)) {
        /* a message in progress: its deadline, not the idle time */
        if (msg_late(ws))
            ws_kick(ws);
        else
            petrel__timer_arm(petrel__loop, &ws->timer, &msg_q);
        return;
    }
    bool stuck = ws->out_hint && ws->cops->queued(ws->t) > 0;
    if (stuck || ws->state != WS_OPEN) {
        /* the peer does not read (send timeout), or does not answer our
         * Close: give up on it */
        if (ws->state != WS_DONE) {
            ws->state = WS_DONE;
            ws->cb_code = 1006;
            snprintf(ws->cb_reason, sizeof(ws->cb_reason), "%s",
                     stuck ? "send timeout" : "no close frame in time");
        }
        call_on_close(ws);
        ws->cops->abort(ws->t); /* the carrier lets go of ws */
        return;
    }
    if (!(ws->flags & WS_PING_SENT)) {
        /* idle: ask the peer whether it is still there */
        struct wslay_event_msg m = {OP_PING, (const uint8_t *)"petrel", 6};
        ws->flags |= WS_PING_SENT;
        wslay_event_queue_msg(ws->wslay, &m);
        wslay_event_send(ws->wslay);
        petrel__timer_arm(petrel__loop, &ws->timer, &idle_q);
    } else {
        ws_finish(ws, 1006, "idle timeout", 1001);
    }
    ws_kick(ws);
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                               */

void petrel__ws_free(petrel_ws_t *ws)
{
    ws_detach(ws);
    petrel__arena_clear(&ws->arena);
    list_unlink(&ws->pending.node);
    petrel__timer_disarm(&ws->timer);
    if (ws->wslay)
        wslay_event_context_free(ws->wslay);
    free(ws);
}

void petrel__ws_gone(petrel_ws_t *ws)
{
    if (ws->state != WS_DONE) {
        ws->state = WS_DONE; /* sends from on_close fail */
        ws->cb_code = 1006;
        snprintf(ws->cb_reason, sizeof(ws->cb_reason), "connection closed");
    }
    call_on_close(ws);
    petrel__ws_free(ws);
}

static petrel__tq_t *idle_queue(const petrel__config_t *cfg)
{
    petrel__loop_t *loop = petrel__loop;
    uint64_t ms = cfg->ws_idle_timeout_ms ? cfg->ws_idle_timeout_ms : WS_DEFAULT_IDLE_MS;
    if (!petrel__tq_registered(loop, &idle_q) &&
        petrel__tq_init(loop, &idle_q, ms, ws_on_timer) < 0)
        return NULL;
    /* a message's deadline is checked this often (sooner when
     * --body-timeout is shorter) */
    uint64_t check =
        cfg->body_timeout_ms < PETREL__BODY_CHECK_MS ? cfg->body_timeout_ms : PETREL__BODY_CHECK_MS;
    if (!petrel__tq_registered(loop, &msg_q) &&
        petrel__tq_init(loop, &msg_q, check ? check : 1, ws_on_timer) < 0)
        return NULL;
    return &idle_q;
}

static petrel_ws_t *ws_new(const petrel__ws_route_t *rt, const petrel__config_t *cfg,
                           const char *subprotocol, int deflate_bits,
                           const petrel__ws_carrier_t *ops, void *t, bool client)
{
    if (idle_queue(cfg) == NULL)
        return NULL;
    petrel_ws_t *ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return NULL;
    list_init(&ws->pending.node);
    list_init(&ws->drain_pending.node);
    ws->drain_pending.cb = drain_run;
    list_init(&ws->staged_link);
    list_init(&ws->timer.node);
    ws->cops = ops;
    ws->t = t;
    ws->own = *rt;
    ws->route = &ws->own;
    ws->cfg = cfg;
    ws->data = rt->data;
    ws->state = WS_OPENING;
    ws->max_message = rt->h.max_message_size     ? rt->h.max_message_size
                      : cfg->ws_max_message_size ? cfg->ws_max_message_size
                                                 : WS_DEFAULT_MAX_MESSAGE;
    ws->send_limit = cfg->ws_send_limit ? cfg->ws_send_limit : WS_DEFAULT_SEND_LIMIT;
    ws->drop = cfg->ws_send_overflow_drop;
    /* room for the largest message growing, and for its inflated form */
    size_t lim = ws->max_message > (SIZE_MAX - (1 << 20)) / 5 ? 0 : 5 * ws->max_message + (1 << 20);
    petrel__arena_init(&ws->arena, &petrel__pool, lim);
    ws->subprotocol = subprotocol;
    ws->deflate_bits = (uint8_t)deflate_bits;
    static const struct wslay_event_callbacks cbs = {
        .recv_callback = cb_recv,
        .send_callback = cb_send,
        .genmask_callback = cb_genmask,
        .on_frame_recv_chunk_callback = cb_chunk,
    };
    ws->client = client;
    if ((client ? wslay_event_context_client_init(&ws->wslay, &cbs, ws)
                : wslay_event_context_server_init(&ws->wslay, &cbs, ws)) != 0) {
        free(ws);
        return NULL;
    }
    wslay_event_config_set_no_buffering(ws->wslay, 1);
    /* petrel checks sizes itself (scan_header, msg_inflate) */
    wslay_event_config_set_max_recv_msg_length(ws->wslay, UINT64_MAX >> 1);
    if (ws->deflate_bits)
        wslay_event_config_set_allowed_rsv_bits(ws->wslay, WSLAY_RSV1_BIT);
    return ws;
}

petrel_ws_t *petrel__ws_new(const petrel__ws_route_t *rt, const petrel__config_t *cfg,
                            const char *subprotocol, int deflate_bits,
                            const petrel__ws_carrier_t *ops, void *t)
{
    return ws_new(rt, cfg, subprotocol, deflate_bits, ops, t, false);
}

petrel_ws_t *petrel__ws_new_client(const petrel__ws_route_t *rt, const petrel__config_t *cfg,
                                   const petrel__ws_carrier_t *ops, void *t)
{
    return ws_new(rt, cfg, NULL, 0, ops, t, true);
}

bool petrel__ws_paused(const petrel_ws_t *ws)
{
    return ws->read_paused;
}

void petrel__ws_opened(petrel_ws_t *ws)
{
    ws->flags |= WS_OPENED;
    petrel__count(PETREL__C_WS_OPENED, 1);
    petrel__gauge_add(PETREL__G_WS_OPEN, 1);
}

void petrel__ws_start(petrel_ws_t *ws, bool draining)
{
    ws->flags |= WS_STARTED;
    if (ws->state == WS_OPENING)
        ws->state = WS_OPEN;
    petrel__timer_arm(petrel__loop, &ws->timer, &idle_q);
    if (draining)
        petrel__ws_drain(ws);
}

void petrel__ws_drain(petrel_ws_t *ws)
{
    if (ws->state == WS_OPEN) {
        send_close(ws, 1001, "server shutting down");
        ws->state = WS_CLOSING;
        petrel__timer_arm(petrel__loop, &ws->timer, &idle_q);
        ws_kick(ws);
    }
}

petrel__pending_t *petrel__ws_pending(petrel_ws_t *ws)
{
    return &ws->pending;
}
unsigned *petrel__ws_carrier_flags(petrel_ws_t *ws)
{
    return &ws->carrier_flags;
}
petrel_ws_t *petrel__ws_of_pending(petrel__pending_t *p)
{
    return container_of(p, petrel_ws_t, pending);
}
void *petrel__ws_carrier(const petrel_ws_t *ws)
{
    return ws->t;
}
void **petrel__ws_pubsub(petrel_ws_t *ws)
{
    return &ws->pubsub;
}
void petrel__ws_pubsub_attach(petrel_ws_t *ws, void (*gone)(petrel_ws_t *ws))
{
    ws->pubsub_gone = gone;
}
petrel_arena_t *petrel__ws_arena(petrel_ws_t *ws)
{
    return &ws->arena;
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

int petrel_ws_pause(petrel_ws_t *ws, int paused)
{
    if (ws == NULL)
        return PETREL_EINVAL;
    if (ws->state == WS_DONE)
        return PETREL_ESTATE;
    if (ws->read_paused != (paused != 0)) {
        ws->read_paused = paused != 0;
        ws_kick(ws); /* the carrier comes back and reads, or stops */
    }
    return 0;
}

int petrel_ws_send_text(petrel_ws_t *ws, const char *text, size_t len)
{
    return ws_send(ws, OP_TEXT, text, len);
}

int petrel_ws_send_binary(petrel_ws_t *ws, const void *data, size_t len)
{
    return ws_send(ws, OP_BINARY, data, len);
}

int petrel_ws_close(petrel_ws_t *ws, int code, const char *reason)
{
    if (ws == NULL)
        return PETREL_EINVAL;
    size_t rl = reason ? strlen(reason) : 0;
    if (code == 0 ? rl != 0 : !close_code_valid((unsigned)code))
        return PETREL_EINVAL;
    if (rl > 123 || !utf8_valid(reason, rl))
        return PETREL_EINVAL;
    if (ws->state != WS_OPEN && ws->state != WS_OPENING)
        return PETREL_ESTATE;
    send_close(ws, (unsigned)code, reason);
    ws->state = WS_CLOSING;
    if (ws->flags & WS_STARTED)
        petrel__timer_arm(petrel__loop, &ws->timer, &idle_q);
    ws_kick(ws);
    return 0;
}

void *petrel_ws_get_data(const petrel_ws_t *ws)
{
    return ws ? ws->data : NULL;
}

void petrel_ws_set_data(petrel_ws_t *ws, void *data)
{
    if (ws)
        ws->data = data;
}

const char *petrel_ws_subprotocol(const petrel_ws_t *ws)
{
    return ws ? ws->subprotocol : NULL;
}

size_t petrel_ws_buffered(const petrel_ws_t *ws)
{
    return ws && ws->cops ? ws_queued(ws) : 0;
}

int petrel_ws_on_drain(petrel_ws_t *ws, size_t mark, petrel_ws_drain_cb cb, void *data)
{
    if (ws == NULL)
        return PETREL_EINVAL;
    if (cb == NULL) {
        ws->drain_cb = NULL;
        list_unlink(&ws->drain_pending.node);
        return 0;
    }
    if (ws->state != WS_OPEN && ws->state != WS_OPENING)
        return PETREL_ESTATE;
    if (ws_queued(ws) <= mark) {
        ws->drain_cb = NULL; /* a callback set before is replaced: by none */
        list_unlink(&ws->drain_pending.node);
        return 1;
    }
    ws->drain_cb = cb;
    ws->drain_data = data;
    ws->drain_mark = mark;
    return 0;
}

/* The options of WebSocket (runtime/options.h); 0 in a field is its default. */
static const char *const ws_overflow[] = {"close", "drop", NULL};
static const petrel__option_t ws_options[] = {
    {.name = "ws-max-message-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(ws_max_message_size),
     .min = 1,
     .max = 1ull << 31,
     .expect = "a size from 1 byte to 2g (e.g. 16m)",
     .help = "largest WebSocket message (default 16m) -> close 1009"},
    {.name = "ws-idle-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(ws_idle_timeout_ms),
     .min = 1,
     .expect = "a number of seconds greater than 0 (e.g. 30 or 0.5)",
     .help = "WebSocket silence before a ping, then a close (default 30)"},
    {.name = "ws-send-limit",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(ws_send_limit),
     .min = 1,
     .max = 1ull << 31,
     .expect = "a size from 1 byte to 2g (e.g. 16m)",
     .help = "WebSocket output queued past this: close 1008 (default 4m)"},
    {.name = "ws-send-overflow",
     .value = "close|drop",
     .kind = PETREL__OPT_CHOICE,
     PETREL__OPT_FIELD(ws_send_overflow_drop),
     .choices = ws_overflow,
     .expect = "close or drop",
     .help = "past --ws-send-limit: close 1008, or drop the message\n(default close)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__ws_option_table = {"websocket", NULL, ws_options};
