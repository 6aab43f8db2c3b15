/*
 * ws.c -- WebSocket (RFC 6455) on wslay: the only file that touches wslay.
 *
 * A route registered with petrel_ws_route_add() answers a valid opening
 * handshake (§4.2) with 101, writing it straight into the connection's
 * output, and sets c->on_upgrade: once http1.c has written the 101 and reset
 * the request scope, ws_start() takes the connection over (its io and timer
 * callbacks, c->proto), with the bytes after the request still in
 * c->rbuf[rpos, rlen).
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
 * the connection arena, one arena scope per message), answering pings, and
 * framing control frames.  Messages are dispatched after wslay_event_recv()
 * returns, never from inside it, so a handler may send or close freely.
 *
 * Output: data frames are framed here and copied into the connection's
 * output queue (pool chunks, no malloc; wslay's queue would malloc and copy
 * every message); control frames go through wslay's queue and its send
 * callback, which copies them into the same output queue at once.  Frames
 * are always written whole, so the two never interleave within a frame.
 * Instead of wslay's would-block idiom (keep messages in wslay's queue while
 * the socket is full), the connection's output queue is the buffer, with two
 * bounds: reading pauses while output is waiting for the socket (a client
 * that does not read its echoes stops being read: TCP pushes back), and a
 * send that finds more than the send limit already queued (sends from
 * timers, broadcasts) is refused and the connection closed with 1008.
 *
 * permessage-deflate (RFC 7692) is negotiated with no context takeover
 * either way, so that zlib's streams belong to the worker, not to the
 * connections (see the section below).
 *
 * Memory of an idle connection: the petrel_ws_t (malloc, a few hundred
 * bytes) and wslay's context (malloc, about 8.5 KiB: two 4 KiB buffers), on
 * top of the connection struct; the connection arena is empty (conn.c calls
 * c->on_close, so no cleanup record has to sit in it).  A message is
 * assembled in the arena, in a scope of its own, given back once on_message
 * has returned: up to 16 KiB in pool chunks (no heap call), above that in a
 * block of its own (one malloc).  The read buffer goes back to the pool
 * whenever it is empty.
 */
#include "petrel-int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <wslay/wslay.h>
#include <zlib.h>

#define WS_DEFAULT_MAX_MESSAGE (16u << 20)
#define WS_DEFAULT_IDLE_MS 30000
#define WS_DEFAULT_SEND_LIMIT (4u << 20)
#define WS_DEFLATE_MIN 32 /* smaller messages are sent as they are */

enum { OP_CONT = 0, OP_TEXT = 1, OP_BINARY = 2, OP_CLOSE = 8, OP_PING = 9, OP_PONG = 10 };

enum {
    WS_OPENING, /* 101 queued, http1.c still owns the connection */
    WS_OPEN,
    WS_CLOSING, /* our Close sent, waiting for the peer's */
    WS_DONE     /* no more frames: finish once the output is written */
};

enum {
    WS_STARTED = 1 << 0,    /* ws_begin() ran: io and input are ours */
    WS_IN_IO = 1 << 1,      /* inside our event handling: it flushes at its end */
    WS_OPENED = 1 << 2,     /* on_open was called: on_close will be */
    WS_CLOSE_CB = 1 << 3,   /* on_close was called */
    WS_CLOSE_SENT = 1 << 4, /* a Close frame is queued */
    WS_PING_SENT = 1 << 5,  /* idle: a ping went out, nothing came back yet */
    WS_MSG = 1 << 6,        /* a data message is being assembled */
    WS_MSG_TEXT = 1 << 7,
    WS_FRAME_FIN = 1 << 8,   /* the frame being fed ends its message */
    WS_MSG_DEFLATE = 1 << 9, /* the message is compressed (RFC 7692, RSV1) */
};

typedef struct ws_route {
    struct ws_route *next; /* all of them, so that they stay reachable */
    petrel_ws_handler_t h;
    void *data;
} ws_route_t;

struct petrel_ws {
    petrel__pending_t pending; /* first: loop->pending entry (start, flush) */
    petrel__conn_t *c;
    wslay_event_context_ptr wslay;
    const ws_route_t *route;
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
    /* the message being assembled */
    uint32_t utf8; /* validator state, across the frames of a text message */
    char *msg;
    size_t msg_len, msg_cap;
    petrel_arena_mark_t msg_mark;
    /* on_close arguments, kept until it runs */
    uint16_t cb_code;
    char cb_reason[124];
};

static __thread petrel__tq_t idle_q;
static ws_route_t *routes; /* every route, for the life of the process */

static void ws_start(petrel__conn_t *c);
static void ws_begin(petrel_ws_t *ws);
static void ws_advance(petrel_ws_t *ws);
static void ws_cleanup(void *p);

/* The connection (and so the ws) is gone or handed to conn.c's lingering. */
#define CONN_GONE(c) (((c)->flags & (CONN_CLOSED | CONN_LINGER)) != 0)

/* ------------------------------------------------------------------------ */
/* UTF-8 (RFC 3629): shortest forms only, no surrogates, up to U+10FFFF.    */
/* The state is 0 at a character boundary, else the number of continuation  */
/* bytes still expected and the range the next one must fall in.            */

static inline bool utf8_step(uint32_t *st, uint8_t b)
{
    uint32_t s = *st;
    if (s == 0) {
        if (b < 0x80)
            return true;
        if (b < 0xC2)
            return false; /* a continuation byte, or an overlong 2-byte form */
        if (b < 0xE0) {
            *st = 1 | 0x80u << 8 | 0xBFu << 16;
            return true;
        }
        if (b < 0xF0) {
            uint32_t lo = b == 0xE0 ? 0xA0 : 0x80; /* overlong */
            uint32_t hi = b == 0xED ? 0x9F : 0xBF; /* surrogates */
            *st = 2 | lo << 8 | hi << 16;
            return true;
        }
        if (b < 0xF5) {
            uint32_t lo = b == 0xF0 ? 0x90 : 0x80; /* overlong */
            uint32_t hi = b == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
            *st = 3 | lo << 8 | hi << 16;
            return true;
        }
        return false;
    }
    if (b < ((s >> 8) & 0xff) || b > (s >> 16))
        return false;
    uint32_t need = (s & 0xff) - 1;
    *st = need ? need | 0x80u << 8 | 0xBFu << 16 : 0;
    return true;
}

/* Feed `n` bytes to the validator; returns how many were valid (n if all). */
size_t petrel__utf8_scan(uint32_t *st, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t i = 0;
    while (i < n) {
        if (*st == 0) {
            /* ASCII runs, 8 bytes at a time */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i == n)
                break;
        }
        if (!utf8_step(st, p[i]))
            return i;
        i++;
    }
    return n;
}

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
    h[0] = (uint8_t)(0x80 | (rsv1 ? 0x40 : 0) | opcode); /* FIN; never masked (§5.1) */
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

/* Have the queued output written: at the end of our event handling, or at
 * the end of the loop turn for sends made anywhere else (a timer, another
 * connection's handler). */
static void ws_kick(petrel_ws_t *ws)
{
    if (ws->flags & WS_IN_IO)
        return;
    if (ws->state == WS_OPENING && !(ws->flags & WS_STARTED))
        return; /* http1.c writes the 101 and what follows it */
    if (list_empty(&ws->pending.node))
        list_append(&petrel__loop->pending, &ws->pending.node);
}

static ssize_t cb_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    petrel_ws_t *ws = user;
    (void)flags;
    if (petrel__out_copy(ws->c, data, len) < 0) {
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

static __thread z_stream *deflaters[16]; /* by window bits */
static __thread z_stream *inflater;
static __thread uint8_t *zbuf; /* compressed output of the message being sent */
static __thread size_t zbuf_cap;

/* The message compressed, in the worker's buffer (valid until the next
 * call); NULL when zlib fails (the message goes out uncompressed). */
static const uint8_t *deflate_message(int bits, const void *data, size_t len, size_t *out_len)
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
    size_t need = deflateBound(z, (uLong)len) + 16;
    if (need > zbuf_cap) {
        uint8_t *nb = realloc(zbuf, need);
        if (nb == NULL)
            return NULL;
        zbuf = nb;
        zbuf_cap = need;
    }
    z->next_in = (Bytef *)data;
    z->avail_in = (uInt)len;
    z->next_out = zbuf;
    z->avail_out = (uInt)zbuf_cap;
    if (deflate(z, Z_SYNC_FLUSH) != Z_OK || z->avail_in != 0)
        return NULL;
    size_t n = zbuf_cap - z->avail_out;
    if (n < 4 || memcmp(zbuf + n - 4, "\x00\x00\xff\xff", 4) != 0)
        return NULL;
    *out_len = n - 4;
    return zbuf;
}

static int ws_send(petrel_ws_t *ws, int opcode, const void *data, size_t len)
{
    if (ws == NULL || (data == NULL && len))
        return PETREL_EINVAL;
    if (ws->state != WS_OPEN && ws->state != WS_OPENING)
        return PETREL_ESTATE;
    if (opcode == OP_TEXT && !utf8_valid(data, len))
        return PETREL_EINVAL;
    petrel__conn_t *c = ws->c;
    /* the send limit: what is queued and not yet written, before this one */
    if (c->out && ws->out_hint > ws->send_limit) {
        ws->out_hint = petrel__out_bytes(c);
        if (ws->out_hint > ws->send_limit) {
            ws_fail(ws, 1008, "send queue over its limit");
            return PETREL_EIO;
        }
    }
    bool rsv1 = false;
    if (ws->deflate_bits && len >= WS_DEFLATE_MIN) {
        /* RFC 7692 §7.2.1: compressed, without the trailing 00 00 ff ff; a
         * message that does not shrink is sent as it is */
        size_t zl;
        const uint8_t *z = deflate_message(ws->deflate_bits, data, len, &zl);
        if (z && zl < len) {
            data = z;
            len = zl;
            rsv1 = true;
        }
    }
    uint8_t h[10];
    size_t hl = frame_header(h, opcode, rsv1, len);
    int rc;
    char *p = len <= 1024 ? petrel__out_reserve(c, hl + len) : NULL;
    if (p) {
        memcpy(p, h, hl);
        if (len)
            memcpy(p + hl, data, len);
        petrel__out_commit(c, hl + len);
        rc = 0;
    } else if ((rc = petrel__out_copy(c, h, hl)) == 0) {
        rc = petrel__out_copy(c, data, len);
    }
    if (rc < 0) {
        /* part of a frame may be queued: the stream cannot go on */
        ws_finish(ws, 1006, "out of memory", 0);
        return rc;
    }
    ws->out_hint += hl + len;
    ws_kick(ws);
    return 0;
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
    char *p = petrel__arena_alloc_buf(&ws->c->arena, &size);
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

/* Check the header of the next frame, at rbuf[rpos].  Everything RFC 6455
 * requires of a client's frame is checked here, before wslay sees it. */
static int scan_header(petrel_ws_t *ws)
{
    petrel__conn_t *c = ws->c;
    const uint8_t *p = (const uint8_t *)c->rbuf + c->rpos;
    size_t avail = c->rlen - c->rpos;
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
    else if (!masked)
        err = "unmasked client frame"; /* §5.1 */
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
    size_t hl = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
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
    memcpy(ws->mask, p + hl - 4, 4);
    if (op == OP_CLOSE) {
        /* handled here, whole: wslay never sees a Close */
        if (avail < hl + len)
            return SCAN_MORE;
        uint8_t pl[125];
        for (size_t i = 0; i < len; i++)
            pl[i] = p[hl + i] ^ ws->mask[i & 3];
        c->rpos += (uint32_t)(hl + len);
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
            ws->msg_mark = petrel_arena_mark(&c->arena);
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

/* wslay pulls the current frame's bytes from the read buffer; the UTF-8 of
 * a text message is checked before its bytes are handed over. */
static ssize_t cb_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    petrel_ws_t *ws = user;
    petrel__conn_t *c = ws->c;
    (void)flags;
    size_t n = c->rlen - c->rpos;
    if (n > len)
        n = len;
    if (n > ws->frame_left)
        n = (size_t)ws->frame_left;
    if (n == 0 || ws->fail_code) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    const uint8_t *src = (const uint8_t *)c->rbuf + c->rpos;
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
    c->rpos += (uint32_t)n;
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
    petrel__conn_t *c = ws->c;
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
        ws->route->h.on_message(ws, !text, m, ws->msg_len);
    }
    if (!CONN_GONE(c)) {
        /* the message scope ends */
        petrel_arena_reset(&c->arena, ws->msg_mark);
        ws->msg = NULL;
        ws->msg_len = ws->msg_cap = 0;
    }
}

/* Frames in rbuf[rpos, rlen): check, feed to wslay, deliver messages. */
static void ws_input(petrel_ws_t *ws)
{
    petrel__conn_t *c = ws->c;
    while (ws->state != WS_DONE && !CONN_GONE(c)) {
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

/* Read what the peer sent and handle it. */
static void ws_read(petrel_ws_t *ws)
{
    petrel__conn_t *c = ws->c;
    for (int turn = 0; turn < 4; turn++) {
        if (c->rbuf && c->rpos) {
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c);
            return;
        }
        if (n == 0) {
            if (c->flags & CONN_EOF) /* the peer left without a Close */
                ws_finish(ws, 1006, "connection closed without a close frame", 0);
            else if (c->rpos == c->rlen)
                petrel__conn_idle(c); /* do not hold an empty buffer */
            return;
        }
        ws->flags &= ~WS_PING_SENT;
        if (ws->state == WS_OPEN)
            petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
        ws_input(ws);
        if (CONN_GONE(c))
            return;
        if (c->rpos == c->rlen)
            petrel__conn_idle(c); /* an idle connection holds no read buffer */
        if (ws->state == WS_DONE || c->rbuf == NULL || c->rlen < c->rcap)
            return;
    }
}

/* ------------------------------------------------------------------------ */
/* Connection events                                                        */

/* After handling events: call on_close if due, write, then close, pause or
 * go on reading. */
static void ws_advance(petrel_ws_t *ws)
{
    petrel__conn_t *c = ws->c;
    if (ws->state == WS_DONE && (ws->flags & WS_OPENED) && !(ws->flags & WS_CLOSE_CB)) {
        ws->flags |= WS_CLOSE_CB;
        if (ws->route->h.on_close)
            ws->route->h.on_close(ws, ws->cb_code, ws->cb_reason);
        if (CONN_GONE(c))
            return;
    }
    if (petrel__conn_flush(c) < 0) {
        petrel__conn_close(c);
        return;
    }
    if (c->out == NULL) {
        ws->out_hint = 0;
        if (ws->state == WS_DONE) {
            /* §7.1.1: the server closes the TCP connection first; half-close
             * and drain what the peer still sends, so that it reads our
             * Close rather than a reset */
            c->on_close = NULL;
            ws_cleanup(ws);
            petrel__conn_linger(c);
            return;
        }
        if (c->flags & CONN_PAUSED) {
            c->flags &= ~CONN_PAUSED;
            petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
        }
    } else if (!(c->flags & CONN_PAUSED)) {
        /* the socket is full: stop reading until our output is written */
        c->flags |= CONN_PAUSED;
    }
    petrel__conn_update_events(c);
}

static void ws_on_io(petrel__io_t *io, uint32_t events)
{
    petrel__conn_t *c = container_of(io, petrel__conn_t, io);
    if (CONN_GONE(c))
        return;
    petrel_ws_t *ws = c->proto;
    if (!(ws->flags & WS_STARTED)) {
        ws_begin(ws);
        return; /* level-triggered: what is left comes again */
    }
    if ((events & EPOLLERR) && !(events & EPOLLIN)) {
        petrel__conn_close(c);
        return;
    }
    ws->flags |= WS_IN_IO;
    if ((events & (EPOLLIN | EPOLLHUP)) && !(c->flags & CONN_PAUSED) && ws->state != WS_DONE)
        ws_read(ws);
    if (CONN_GONE(c))
        return;
    ws->flags &= ~WS_IN_IO;
    ws_advance(ws);
}

static void ws_on_timer(petrel__timer_t *t)
{
    petrel__conn_t *c = container_of(t, petrel__conn_t, timer);
    if (CONN_GONE(c) || c->proto == NULL) {
        petrel__conn_close(c); /* the end of lingering */
        return;
    }
    petrel_ws_t *ws = c->proto;
    if (c->out || ws->state != WS_OPEN) {
        /* the peer does not read (send timeout), or does not answer our
         * Close: give up on it */
        if (ws->state != WS_DONE) {
            ws->state = WS_DONE;
            ws->cb_code = 1006;
            snprintf(ws->cb_reason, sizeof(ws->cb_reason), "%s",
                     c->out ? "send timeout" : "no close frame in time");
        }
        if (ws->flags & WS_OPENED && !(ws->flags & WS_CLOSE_CB)) {
            ws->flags |= WS_CLOSE_CB;
            if (ws->route->h.on_close)
                ws->route->h.on_close(ws, ws->cb_code, ws->cb_reason);
        }
        if (!CONN_GONE(c))
            petrel__conn_close(c);
        return;
    }
    if (!(ws->flags & WS_PING_SENT)) {
        /* idle: ask the peer whether it is still there */
        struct wslay_event_msg m = {OP_PING, (const uint8_t *)"petrel", 6};
        ws->flags |= WS_PING_SENT;
        wslay_event_queue_msg(ws->wslay, &m);
        wslay_event_send(ws->wslay);
        petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
    } else {
        ws_finish(ws, 1006, "idle timeout", 1001);
    }
    ws_advance(ws);
}

static void ws_on_pending(petrel__pending_t *p)
{
    petrel_ws_t *ws = (petrel_ws_t *)p;
    if (!(ws->flags & WS_STARTED))
        ws_begin(ws);
    else
        ws_advance(ws);
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                               */

static void ws_free(petrel_ws_t *ws)
{
    list_unlink(&ws->pending.node);
    if (ws->wslay)
        wslay_event_context_free(ws->wslay);
    free(ws);
}

/* The connection is closing (petrel__conn_close, or our own lingering). */
static void ws_cleanup(void *p)
{
    petrel_ws_t *ws = p;
    ws->state = WS_DONE; /* sends from on_close fail */
    if ((ws->flags & WS_OPENED) && !(ws->flags & WS_CLOSE_CB)) {
        ws->flags |= WS_CLOSE_CB;
        if (ws->route->h.on_close)
            ws->route->h.on_close(ws, 1006, "connection closed");
    }
    ws->c->proto = NULL;
    ws_free(ws);
}

static void ws_conn_closed(petrel__conn_t *c)
{
    ws_cleanup(c->proto);
}

/* End of the upgrade request's scope.  On the way to ws_start() http1.c has
 * cleared c->on_upgrade; when it is still set, the connection closes before
 * the 101 was written: the WebSocket never starts.  When c->proto is not
 * ours, the handshake failed before the 101 was queued. */
static void ws_req_cleanup(void *p)
{
    petrel_ws_t *ws = p;
    petrel__conn_t *c = ws->c;
    if (c->on_upgrade == ws_start) {
        c->on_upgrade = NULL;
        ws_cleanup(ws);
    } else if (c->proto != ws) {
        ws_free(ws);
    }
}

static petrel__tq_t *idle_queue(petrel_server_t *srv)
{
    petrel__loop_t *loop = petrel__loop;
    for (int i = 0; i < loop->nqueues; i++)
        if (loop->queues[i] == &idle_q)
            return &idle_q;
    uint64_t ms = srv->cfg.ws_idle_timeout_ms ? srv->cfg.ws_idle_timeout_ms : WS_DEFAULT_IDLE_MS;
    petrel__tq_init(loop, &idle_q, ms);
    for (int i = 0; i < loop->nqueues; i++)
        if (loop->queues[i] == &idle_q)
            return &idle_q;
    petrel_log(PETREL_LOG_ERROR, "websocket: no timer queue left in the loop");
    return NULL;
}

/* http1.c has written the 101 and reset the request scope: the connection
 * is ours.  Called from inside http1.c's event handling, so only the
 * switch happens here; input is handled at the end of the loop turn (or at
 * our first event), outside of http1.c. */
static void ws_start(petrel__conn_t *c)
{
    petrel_ws_t *ws = c->proto;
    c->on_close = ws_conn_closed;
    c->io.cb = ws_on_io;
    c->timer.cb = ws_on_timer;
    c->flags |= CONN_PAUSED; /* http1.c reads nothing more */
    c->flags &= ~(CONN_KEEPALIVE | CONN_HEAD_DONE | CONN_IN_VALUE | CONN_CONTINUE);
    /* messages are assembled in the arena: room for the largest, growing */
    /* room for the largest message growing, and for its inflated form */
    size_t lim = ws->max_message > (SIZE_MAX - (1 << 20)) / 5 ? 0 : 5 * ws->max_message + (1 << 20);
    if (c->arena.limit && (lim == 0 || lim > c->arena.limit))
        c->arena.limit = lim;
    petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
    if (list_empty(&ws->pending.node))
        list_append(&petrel__loop->pending, &ws->pending.node);
}

static void ws_begin(petrel_ws_t *ws)
{
    petrel__conn_t *c = ws->c;
    list_unlink(&ws->pending.node);
    ws->flags |= WS_STARTED | WS_IN_IO;
    c->flags &= ~CONN_PAUSED;
    if (ws->state == WS_OPENING)
        ws->state = WS_OPEN;
    if (c->srv->draining && ws->state == WS_OPEN) {
        send_close(ws, 1001, "server shutting down");
        ws->state = WS_CLOSING;
    }
    if (c->rbuf && c->rpos < c->rlen)
        ws_input(ws); /* frames that came with the handshake */
    if (CONN_GONE(c))
        return;
    ws->flags &= ~WS_IN_IO;
    ws_advance(ws);
}

bool petrel__ws_drain(petrel__conn_t *c)
{
    if (c->io.cb != ws_on_io || c->proto == NULL)
        return false;
    petrel_ws_t *ws = c->proto;
    if (ws->state == WS_OPEN) {
        send_close(ws, 1001, "server shutting down");
        ws->state = WS_CLOSING;
        petrel__timer_arm(petrel__loop, &c->timer, &idle_q);
        ws_kick(ws);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The opening handshake (§4.2)                                             */

/* Does a comma-separated header list (any of the fields `name`) hold `tok`? */
static bool header_has_token(const petrel_req_t *req, const char *name, const char *tok)
{
    size_t nl = strlen(name), tl = strlen(tok);
    for (size_t i = 0; i < req->nheaders; i++) {
        const petrel_header_t *h = &req->headers[i];
        if (!petrel__str_ieq(h->name.ptr, h->name.len, name, nl))
            continue;
        const char *s = h->value.ptr, *end = s + h->value.len;
        while (s < end) {
            while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
                s++;
            const char *b = s;
            while (s < end && *s != ',')
                s++;
            const char *e = s;
            while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            if (petrel__str_ieq(b, (size_t)(e - b), tok, tl))
                return true;
        }
    }
    return false;
}

static size_t header_count(const petrel_req_t *req, const char *name)
{
    size_t n = 0, nl = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++)
        if (petrel__str_ieq(req->headers[i].name.ptr, req->headers[i].name.len, name, nl))
            n++;
    return n;
}

/* The first of the server's subprotocols that the client offers. */
static const char *pick_subprotocol(const petrel_req_t *req, const char *const *ours)
{
    if (ours == NULL)
        return NULL;
    for (; *ours; ours++)
        if (header_has_token(req, "sec-websocket-protocol", *ours))
            return *ours;
    return NULL;
}

/* One offer of Sec-WebSocket-Extensions, [b, e): "permessage-deflate" with
 * parameters we can honour (RFC 7692 §7.1)?  Returns our window bits (9-15)
 * and appends the answer's parameters to `ans`, or returns 0. */
static int deflate_offer(const char *b, const char *e, char *ans, size_t cap)
{
    bool seen[4] = {false, false, false, false};
    int sbits = 15;
    const char *s = b;
    for (int i = 0; s < e; i++) {
        const char *x = s;
        while (x < e && *x != ';')
            x++;
        const char *pb = s, *pe = x;
        while (pb < pe && (*pb == ' ' || *pb == '\t'))
            pb++;
        while (pe > pb && (pe[-1] == ' ' || pe[-1] == '\t'))
            pe--;
        s = x < e ? x + 1 : e;
        if (i == 0) {
            if (!petrel__str_ieq(pb, (size_t)(pe - pb), "permessage-deflate", 18))
                return 0;
            continue;
        }
        const char *eq = memchr(pb, '=', (size_t)(pe - pb));
        const char *ne = eq ? eq : pe, *vb = eq ? eq + 1 : pe, *ve = pe;
        while (ne > pb && (ne[-1] == ' ' || ne[-1] == '\t'))
            ne--;
        while (vb < ve && (*vb == ' ' || *vb == '\t'))
            vb++;
        if (ve - vb >= 2 && *vb == '"' && ve[-1] == '"') {
            vb++;
            ve--;
        }
        static const char *const names[] = {"server_no_context_takeover",
                                            "client_no_context_takeover", "server_max_window_bits",
                                            "client_max_window_bits"};
        int k = 0;
        while (k < 4 && !petrel__str_ieq(pb, (size_t)(ne - pb), names[k], strlen(names[k])))
            k++;
        if (k == 4 || seen[k])
            return 0; /* unknown or repeated: decline this offer (§7.1) */
        seen[k] = true;
        int v = 0;
        if (eq) {
            if (k < 2 || ve - vb < 1 || ve - vb > 2 || *vb == '0')
                return 0;
            for (const char *d = vb; d < ve; d++) {
                if (*d < '0' || *d > '9')
                    return 0;
                v = v * 10 + (*d - '0');
            }
            if (v < 8 || v > 15)
                return 0;
        } else if (k == 2) {
            return 0; /* server_max_window_bits needs a value */
        }
        if (k == 2) {
            if (v < 9)
                return 0; /* zlib cannot make a raw deflate stream with 256-byte windows */
            sbits = v;
        }
    }
    /* no context takeover either way: every message stands alone */
    int n = seen[2] ? snprintf(ans, cap,
                               "permessage-deflate; server_no_context_takeover; "
                               "client_no_context_takeover; server_max_window_bits=%d",
                               sbits)
                    : snprintf(ans, cap,
                               "permessage-deflate; server_no_context_takeover; "
                               "client_no_context_takeover");
    return n > 0 && (size_t)n < cap ? sbits : 0;
}

/* The first acceptable permessage-deflate offer of the request. */
static int negotiate_deflate(const petrel_req_t *req, char *ans, size_t cap)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        const petrel_header_t *h = &req->headers[i];
        if (!petrel__str_ieq(h->name.ptr, h->name.len, "sec-websocket-extensions", 24))
            continue;
        const char *s = h->value.ptr, *end = s + h->value.len;
        while (s < end) {
            const char *x = s;
            bool q = false;
            while (x < end && (q || *x != ',')) {
                if (*x == '"')
                    q = !q;
                x++;
            }
            int bits = deflate_offer(s, x, ans, cap);
            if (bits)
                return bits;
            s = x < end ? x + 1 : end;
        }
    }
    return 0;
}

static int bad_request(petrel_req_t *req, const char *why)
{
    petrel_log(PETREL_LOG_DEBUG, "request %llu: websocket handshake refused: %s",
               (unsigned long long)req->id, why);
    char *body = petrel_arena_printf(req->arena, "400 Bad Request: %s\n", why);
    if (body == NULL)
        return 400;
    return petrel_send(req, 400, "text/plain", body, strlen(body));
}

static int ws_handshake(petrel_req_t *req, void *data)
{
    const ws_route_t *rt = data;
    petrel__conn_t *c = req->_conn;
    petrel_server_t *srv = req->server;
    if (req->version != 11)
        return bad_request(req, req->version == 20 ? "WebSocket over HTTP/2 is not supported"
                                                   : "WebSocket needs HTTP/1.1");
    if (req->method != PETREL_GET)
        return bad_request(req, "the handshake is a GET");
    if (!header_has_token(req, "upgrade", "websocket"))
        return bad_request(req, "no Upgrade: websocket");
    if (!header_has_token(req, "connection", "upgrade"))
        return bad_request(req, "no Connection: Upgrade");
    const char *key = petrel_req_header(req, "sec-websocket-key");
    uint8_t raw[18];
    if (key == NULL || header_count(req, "sec-websocket-key") != 1 ||
        petrel__base64_decode(key, strlen(key), raw, sizeof(raw)) != 16)
        return bad_request(req, "Sec-WebSocket-Key is not 16 bytes in base64");
    const char *ver = petrel_req_header(req, "sec-websocket-version");
    if (ver == NULL || strcmp(ver, "13") != 0 || header_count(req, "sec-websocket-version") != 1) {
        /* §4.2.2: the versions we speak */
        petrel_resp_header(req, "Sec-WebSocket-Version", "13");
        return petrel_send_text(req, 426, "text/plain",
                                "426 Upgrade Required: Sec-WebSocket-Version 13\n");
    }
    if (srv->draining)
        return 503;
    if (rt->h.check_origin) {
        int st = rt->h.check_origin(req, petrel_req_header(req, "origin"), rt->data);
        if (st)
            return st >= 400 && st <= 599 ? st : 403;
    }
    if (idle_queue(srv) == NULL)
        return 503;

    petrel_ws_t *ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return 503;
    list_init(&ws->pending.node);
    ws->pending.cb = ws_on_pending;
    ws->c = c;
    ws->route = rt;
    ws->data = rt->data;
    ws->state = WS_OPENING;
    ws->max_message = rt->h.max_message_size         ? rt->h.max_message_size
                      : srv->cfg.ws_max_message_size ? srv->cfg.ws_max_message_size
                                                     : WS_DEFAULT_MAX_MESSAGE;
    ws->send_limit = srv->cfg.ws_send_limit ? srv->cfg.ws_send_limit : WS_DEFAULT_SEND_LIMIT;
    ws->subprotocol = pick_subprotocol(req, rt->h.subprotocols);
    char ext[160];
    ws->deflate_bits =
        (uint8_t)(rt->h.no_compression ? 0 : negotiate_deflate(req, ext, sizeof(ext)));
    static const struct wslay_event_callbacks cbs = {
        .recv_callback = cb_recv,
        .send_callback = cb_send,
        .on_frame_recv_chunk_callback = cb_chunk,
    };
    if (wslay_event_context_server_init(&ws->wslay, &cbs, ws) != 0) {
        free(ws);
        return 503;
    }
    wslay_event_config_set_no_buffering(ws->wslay, 1);
    /* petrel checks sizes itself (scan_header, msg_inflate) */
    wslay_event_config_set_max_recv_msg_length(ws->wslay, UINT64_MAX >> 1);
    if (ws->deflate_bits)
        wslay_event_config_set_allowed_rsv_bits(ws->wslay, WSLAY_RSV1_BIT);
    if (petrel_arena_defer(req->arena, ws_req_cleanup, ws) < 0) {
        ws_free(ws);
        return 503;
    }

    /* §4.2.2: Sec-WebSocket-Accept = base64(SHA-1(key + GUID)) */
    char accept[PETREL__WS_ACCEPT_LEN + 1];
    petrel__ws_accept(key, strlen(key), accept);
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 101 Switching Protocols\r\n"
                     "Server: petrel\r\n"
                     "Date: %.29s\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n"
                     "%s%s%s"
                     "%s%s%s"
                     "\r\n",
                     petrel__loop->date, accept, ws->subprotocol ? "Sec-WebSocket-Protocol: " : "",
                     ws->subprotocol ? ws->subprotocol : "", ws->subprotocol ? "\r\n" : "",
                     ws->deflate_bits ? "Sec-WebSocket-Extensions: " : "",
                     ws->deflate_bits ? ext : "", ws->deflate_bits ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(head) || petrel__out_copy(c, head, (size_t)n) < 0)
        return PETREL_ENOMEM; /* ws_req_cleanup frees ws: c->proto is not ours */
    req->_resp->status = 101;
    req->_resp->sent = req->_resp->ended = true;
    c->proto = ws;
    c->on_upgrade = ws_start;
    ws->flags |= WS_OPENED;
    if (rt->h.on_open)
        rt->h.on_open(ws, req);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

int petrel_ws_route_add(petrel_server_t *srv, const char *pattern,
                        const petrel_ws_handler_t *handler, void *data)
{
    if (srv == NULL || pattern == NULL || handler == NULL)
        return PETREL_EINVAL;
    if (handler->subprotocols)
        for (const char *const *s = handler->subprotocols; *s; s++)
            if (**s == '\0' || strpbrk(*s, " \t,\r\n"))
                return PETREL_EINVAL;
    ws_route_t *rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return PETREL_ENOMEM;
    rt->h = *handler;
    rt->data = data;
    int rc = petrel_route_add(srv, PETREL_GET, pattern, ws_handshake, rt);
    if (rc < 0) {
        free(rt);
        return rc;
    }
    rt->next = routes;
    routes = rt;
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
        petrel__timer_arm(petrel__loop, &ws->c->timer, &idle_q);
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
