/*
 * ws.c -- petrel-bench's WebSocket echo client (RFC 6455): each connection
 * does the opening handshake (§4.1), then keeps up to -m messages in flight,
 * each a masked frame with its own mask key (§5.3), and checks every echo:
 * an unmasked frame of the same type carrying the same payload.  A message's
 * latency runs from the write of its frame to the read that completed its
 * echo; the handshake is timed apart (connect to 101).  With --close, each
 * message gets a new connection: connect, handshake, one message, Close, and
 * the message's latency runs from the connect, as for HTTP --close.
 *
 * Accounting: a message is a request.  A handshake that fails costs one
 * message's worth of errors (non2xx for another status than 101, protocol for
 * a bad 101), as a failed connect does.  Echoes that come back wrong are
 * counted and are check errors; frames that break RFC 6455 (masked, reserved
 * bits or opcodes, an echo of nothing) and a Close from the server fail what
 * is in flight as protocol errors; a server that closes the TCP connection
 * fails them as read errors.  At the end of the run every open connection
 * sends a Close (1000) and waits briefly for the server's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "bench.h"

#define MAX_HEAD 8192              /* the longest 101 response head accepted */
#define FINAL_WAIT_NS 500000000ull /* at the end, for the server's Close (per thread) */

enum { PH_NONE, PH_HANDSHAKE, PH_OPEN, PH_CLOSING, PH_FINAL };

typedef struct wsmsg {
    uint64_t sent; /* ns */
    uint64_t id;
} wsmsg_t;

typedef struct wsconn {
    int phase;
    char accept[29];   /* the Sec-WebSocket-Accept expected */
    uint64_t close_at; /* PH_CLOSING: when the Close was sent */
    wsmsg_t *ring;     /* messages in flight, oldest first */
    unsigned head, count, cap;
    unsigned unsent; /* --close: the message taken before the handshake */
    /* the frame being read */
    int in_payload; /* its header was read; f_left payload bytes follow */
    uint64_t f_left;
    bench_wsf_t f;
    /* the message being read (data frames, maybe fragmented) */
    int msg_open;
    int msg_bad; /* wrong type or payload */
    uint64_t msg_off;
} wsconn_t;

/* Per thread, in th->req. */
typedef struct wsshared {
    char *hs; /* the handshake request up to the key line */
    size_t hs_len;
    uint64_t rng[2]; /* xorshift128+ for keys and masks, seeded by getrandom */
    uint64_t final_deadline;
} wsshared_t;

static wsshared_t *shared_of(bench_thread_t *th)
{
    return (wsshared_t *)th->req;
}

static uint64_t rnd(wsshared_t *sh)
{
    uint64_t s1 = sh->rng[0];
    const uint64_t s0 = sh->rng[1];
    sh->rng[0] = s0;
    s1 ^= s1 << 23;
    sh->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return sh->rng[1] + s0;
}

static void trouble(bench_conn_t *c, const char *why)
{
    if (c->th->o->verbose)
        fprintf(stderr, "petrel-bench: websocket: %s\n", why);
}

static int ws_prepare(bench_thread_t *th)
{
    const bench_opts_t *o = th->o;
    wsshared_t *sh = calloc(1, sizeof *sh);
    if (!sh)
        return -1;
    th->req = (char *)sh;
    if (getrandom(sh->rng, sizeof sh->rng, 0) != (ssize_t)sizeof sh->rng)
        sh->rng[0] = bench_now() ^ ((uint64_t)th->id << 32), sh->rng[1] = 0x9e3779b97f4a7c15ull;
    if ((sh->rng[0] | sh->rng[1]) == 0)
        sh->rng[1] = 1;
    size_t n, cap;
    char *h = bench_h1_head(o, "GET",
                            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Version: 13\r\n",
                            &n, &cap);
    if (!h)
        return -1;
    sh->hs = h;
    sh->hs_len = n;
    return 0;
}

static void ws_conn_free(bench_conn_t *c)
{
    wsconn_t *w = c->ws;
    if (!w)
        return;
    free(w->ring);
    free(w);
    c->ws = NULL;
}

static void ws_release(bench_thread_t *th)
{
    wsshared_t *sh = shared_of(th);
    if (!sh)
        return;
    free(sh->hs);
    free(sh);
    th->req = NULL;
}

static wsconn_t *conn_state(bench_conn_t *c)
{
    if (c->ws)
        return c->ws;
    const bench_opts_t *o = c->th->o;
    wsconn_t *w = calloc(1, sizeof *w);
    if (!w) {
        fprintf(stderr, "petrel-bench: out of memory\n");
        exit(2);
    }
    w->cap = o->per_request ? 1 : (unsigned)o->streams;
    w->ring = calloc(w->cap, sizeof *w->ring);
    if (!w->ring) {
        fprintf(stderr, "petrel-bench: out of memory\n");
        exit(2);
    }
    c->ws = w;
    return w;
}

static void ring_push(wsconn_t *w, uint64_t sent, uint64_t id)
{
    wsmsg_t *m = &w->ring[(w->head + w->count) % w->cap];
    m->sent = sent;
    m->id = id;
    w->count++;
}

static wsmsg_t ring_pop(wsconn_t *w)
{
    wsmsg_t m = w->ring[w->head];
    w->head = (w->head + 1) % w->cap;
    w->count--;
    return m;
}

static uint64_t next_id(bench_thread_t *th)
{
    return th->seq++ * (uint64_t)th->o->threads + (uint64_t)th->id;
}

/* Append a masked frame (a fresh mask key, §5.3) to c->out. */
static void put_frame(bench_conn_t *c, int opcode, const uint8_t *payload, size_t len, uint64_t id)
{
    bench_thread_t *th = c->th;
    uint64_t r = rnd(shared_of(th));
    uint8_t mask[4] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16), (uint8_t)(r >> 24)};
    uint8_t hdr[14];
    size_t hl = bench_ws_header(hdr, opcode, len, mask);
    uint8_t *p = (uint8_t *)bench_out_reserve(c, hl + len);
    memcpy(p, hdr, hl);
    if (payload)
        memcpy(p + hl, payload, len);
    else
        bench_ws_payload(p + hl, len, id, th->o->ws_binary);
    bench_ws_mask(p + hl, len, mask, 0);
}

static void put_message(bench_conn_t *c, uint64_t id)
{
    const bench_opts_t *o = c->th->o;
    put_frame(c, o->ws_binary ? BENCH_WS_BINARY : BENCH_WS_TEXT, NULL, o->body_size, id);
}

static void put_close(bench_conn_t *c)
{
    static const uint8_t code[2] = {1000 >> 8, 1000 & 255}; /* normal closure, §7.4.1 */
    put_frame(c, BENCH_WS_CLOSE, code, 2, 0);
}

/* Keep -m messages in flight (--rate: say there is room; the schedule sends). */
static void fill(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    if (th->rate_mode) {
        bench_rate_ready(c);
        return;
    }
    while (w->count < w->cap && bench_take(th)) {
        uint64_t id = next_id(th);
        put_message(c, id);
        ring_push(w, th->now, id);
    }
}

static unsigned ws_room(bench_conn_t *c)
{
    wsconn_t *w = c->ws;
    return w && w->phase == PH_OPEN ? w->cap - w->count : 0;
}

static void ws_send(bench_conn_t *c, uint64_t due)
{
    uint64_t id = next_id(c->th);
    put_message(c, id);
    ring_push(c->ws, due, id);
}

static int ws_push(bench_conn_t *c)
{
    if (bench_flush(c) < 0) {
        trouble(c, strerror(errno));
        bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
        return -1;
    }
    return 0;
}

static int ws_start(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    wsshared_t *sh = shared_of(th);
    wsconn_t *w = conn_state(c);
    w->phase = PH_HANDSHAKE;
    w->in_payload = w->msg_open = 0;
    uint8_t raw[16];
    uint64_t a = rnd(sh), b = rnd(sh);
    memcpy(raw, &a, 8);
    memcpy(raw + 8, &b, 8);
    char key[32];
    petrel__base64_encode(raw, sizeof raw, key);
    petrel__ws_accept(key, strlen(key), w->accept);
    char *p = bench_out_reserve(c, sh->hs_len + 19 + 24 + 4);
    memcpy(p, sh->hs, sh->hs_len);
    memcpy(p + sh->hs_len, "Sec-WebSocket-Key: ", 19);
    memcpy(p + sh->hs_len + 19, key, 24);
    memcpy(p + sh->hs_len + 43, "\r\n\r\n", 4);
    return ws_push(c);
}

static void ws_take_one(bench_conn_t *c, uint64_t when)
{
    wsconn_t *w = conn_state(c);
    ring_push(w, when, next_id(c->th));
    w->unsent = 1;
}

/* The end of the run: Close (1000), and wait a little for the server's. */
static void final_close(bench_conn_t *c);

static void ws_closed(bench_conn_t *c, int kind)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    if (!w)
        return;
    uint64_t t;
    if (w->phase == PH_HANDSHAKE && kind >= 0 && !th->o->per_request && bench_take_any(th, &t))
        bench_fail(th, t, kind); /* a failed handshake costs one message */
    while (w->count > 0) {
        wsmsg_t m = ring_pop(w);
        if (kind >= 0)
            bench_fail(th, m.sent, kind);
        else
            th->inflight--;
    }
    w->head = 0;
    w->unsent = 0;
    if (kind == -2 && w->phase == PH_OPEN && c->fd >= 0)
        final_close(c);
    w->phase = PH_NONE;
}

static uint64_t ws_oldest(bench_conn_t *c)
{
    wsconn_t *w = c->ws;
    if (!w)
        return 0;
    if (w->phase == PH_HANDSHAKE)
        return c->conn_start;
    if (w->phase == PH_CLOSING)
        return w->close_at;
    return w->count ? w->ring[w->head].sent : 0;
}

/* A frame that breaks the protocol: the connection is unusable. */
static int protocol_error(bench_conn_t *c, const char *why)
{
    trouble(c, why);
    if (((wsconn_t *)c->ws)->phase == PH_FINAL)
        return -1; /* the run is over: just stop reading */
    bench_conn_close(c, BENCH_ERR_PROTOCOL, BENCH_REOPEN_LATER);
    return -1;
}

/* An echo completed. */
static int message_done(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    w->msg_open = 0;
    if (w->phase != PH_OPEN)
        return 0; /* after our Close: not counted */
    wsmsg_t m = ring_pop(w);
    int bad = w->msg_bad || w->msg_off != th->o->body_size;
    if (bad)
        trouble(c, "an echo that differs from the message");
    bench_complete_kind(th, m.sent, bad ? BENCH_ERR_CHECK : -1);
    if (th->o->per_request) { /* the message's connection is done: close it */
        put_close(c);
        w->phase = PH_CLOSING;
        w->close_at = th->now;
    }
    return 0;
}

/* Frames in buf[0, len): returns the bytes consumed, or -1 when the
 * connection was closed (or, in PH_FINAL, the server's Close came). */
static ssize_t frames(bench_conn_t *c, const uint8_t *buf, size_t len)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    size_t pos = 0;
    while (pos < len) {
        if (!w->in_payload) {
            const char *why;
            int h = bench_ws_parse(buf + pos, len - pos, &w->f, &why);
            if (h == 0)
                break;
            if (h < 0)
                return protocol_error(c, why);
            if (w->f.masked)
                return protocol_error(c, "a masked frame from the server (RFC 6455 5.1)");
            if (w->f.opcode >= 8) { /* control frames are read whole (at most 125 bytes) */
                if (len - pos < (size_t)h + w->f.len)
                    break;
                const uint8_t *pl = buf + pos + h;
                size_t pn = (size_t)w->f.len;
                pos += (size_t)h + pn;
                if (w->f.opcode == BENCH_WS_PING && w->phase != PH_FINAL) {
                    put_frame(c, BENCH_WS_PONG, pl, pn, 0); /* §5.5.2 */
                } else if (w->f.opcode == BENCH_WS_CLOSE) {
                    if (w->phase == PH_FINAL)
                        return -1;
                    if (w->phase == PH_CLOSING) { /* the answer to ours */
                        bench_conn_close(c, -1, BENCH_REOPEN_NOW);
                        return -1;
                    }
                    trouble(c, "the server sent a Close");
                    if (!th->o->per_request)
                        th->st.reconnects++;
                    bench_conn_close(c, BENCH_ERR_PROTOCOL, BENCH_REOPEN_NOW);
                    return -1;
                }
                continue;
            }
            pos += (size_t)h;
            if (w->f.opcode == BENCH_WS_CONT) {
                if (!w->msg_open)
                    return protocol_error(c, "a continuation frame without a message");
            } else {
                if (w->msg_open)
                    return protocol_error(c, "a new message inside a fragmented one");
                if (w->phase == PH_OPEN && w->count == 0)
                    return protocol_error(c, "an echo of no message");
                w->msg_open = 1;
                w->msg_off = 0;
                w->msg_bad = w->f.opcode != (th->o->ws_binary ? BENCH_WS_BINARY : BENCH_WS_TEXT);
            }
            w->in_payload = 1;
            w->f_left = w->f.len;
        }
        size_t k = len - pos < w->f_left ? len - pos : (size_t)w->f_left;
        if (k > 0 && w->phase == PH_OPEN && !w->msg_bad) {
            const wsmsg_t *m = &w->ring[w->head];
            if (w->msg_off + k > th->o->body_size ||
                !bench_ws_payload_check(buf + pos, k, w->msg_off, m->id, th->o->ws_binary))
                w->msg_bad = 1;
        }
        pos += k;
        w->msg_off += k;
        w->f_left -= k;
        if (w->f_left > 0)
            break;
        w->in_payload = 0;
        if (w->f.fin)
            message_done(c);
    }
    return (ssize_t)pos;
}

/* The 101 in buf[0, len): returns the bytes of the head, 0 when it is not
 * all there, -1 when the connection was closed. */
static ssize_t handshake(bench_conn_t *c, const char *buf, size_t len)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    const char *e = memmem(buf, len < MAX_HEAD ? len : MAX_HEAD, "\r\n\r\n", 4);
    if (!e) {
        if (len >= MAX_HEAD)
            return protocol_error(c, "a response head over 8 KiB");
        return 0;
    }
    size_t n = (size_t)(e + 4 - buf);
    int status;
    const char *why;
    int r = bench_ws_check_head(buf, n, w->accept, &status, &why);
    if (r == BENCH_WS_HS_STATUS) {
        if (th->o->verbose)
            fprintf(stderr, "petrel-bench: websocket: handshake answered with %d\n", status);
        bench_conn_close(c, BENCH_ERR_NON2XX, BENCH_REOPEN_LATER);
        return -1;
    }
    if (r != BENCH_WS_HS_OK)
        return protocol_error(c, why);
    w->phase = PH_OPEN;
    uint64_t t = th->now - c->conn_start;
    th->st.handshakes++;
    th->st.handshake_sum += (double)t;
    if (t > th->st.handshake_max)
        th->st.handshake_max = t;
    if (w->unsent) { /* --close: the message taken with the connection */
        w->unsent = 0;
        put_message(c, w->ring[w->head].id);
    }
    return (ssize_t)n;
}

/* Bytes read (after the carried ones) in buf[0, len): the bytes consumed,
 * -1 when the connection was closed (or, in PH_FINAL, is done). */
static ssize_t consume(bench_conn_t *c, char *buf, size_t len)
{
    wsconn_t *w = c->ws;
    size_t pos = 0;
    if (w->phase == PH_HANDSHAKE) {
        ssize_t h = handshake(c, buf, len);
        if (h < 0)
            return -1;
        pos = (size_t)h;
    }
    if (w->phase != PH_HANDSHAKE && pos < len) {
        ssize_t f = frames(c, (const uint8_t *)buf + pos, len - pos);
        if (f < 0)
            return -1;
        pos += (size_t)f;
    }
    return (ssize_t)pos;
}

/* The server closed the connection (err 0), or reading it failed (errno). */
static int peer_closed(bench_conn_t *c, int err)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    if (!err && w->phase == PH_CLOSING) { /* closed after our Close: fine */
        bench_conn_close(c, -1, BENCH_REOPEN_NOW);
        return -1;
    }
    if (err)
        trouble(c, strerror(err));
    else
        trouble(c, w->phase == PH_HANDSHAKE ? "connection closed during the handshake"
                                            : "connection closed by the server");
    if (!th->o->per_request && w->phase == PH_OPEN)
        th->st.reconnects++;
    bench_conn_close(c, BENCH_ERR_READ,
                     err || w->phase == PH_HANDSHAKE ? BENCH_REOPEN_LATER : BENCH_REOPEN_NOW);
    return -1;
}

static int ws_readable(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    wsconn_t *w = c->ws;
    if (bench_read_all(c, consume, peer_closed) < 0)
        return -1;
    if (w->phase == PH_OPEN && !th->o->per_request)
        fill(c);
    return c->out_len > c->out_off ? ws_push(c) : 0;
}

static void final_close(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    wsshared_t *sh = shared_of(th);
    wsconn_t *w = c->ws;
    uint64_t now = bench_now();
    if (sh->final_deadline == 0) {
        uint64_t t = (uint64_t)(th->o->timeout * 1e9);
        sh->final_deadline = now + (t < FINAL_WAIT_NS ? t : FINAL_WAIT_NS);
    }
    w->phase = PH_FINAL;
    put_close(c);
    if (bench_flush(c) < 0)
        return;
    while ((now = bench_now()) < sh->final_deadline) {
        if (c->out_off < c->out_len) { /* the Close did not fit: wait to write */
            struct pollfd pw = {.fd = c->fd, .events = POLLOUT};
            if (poll(&pw, 1, (int)((sh->final_deadline - now) / 1000000 + 1)) <= 0)
                return;
            if (bench_flush(c) < 0)
                return;
            continue;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, (int)((sh->final_deadline - now) / 1000000 + 1)) <= 0)
            return;
        ssize_t n = bench_read(c);
        if (n < 0 && errno == EAGAIN)
            continue;
        if (n <= 0)
            return;
        size_t len = c->carry_len + (size_t)n;
        ssize_t f = consume(c, th->rbuf, len);
        if (f < 0 || bench_carry(c, th->rbuf + f, len - (size_t)f) < 0)
            return; /* the server's Close (or a broken frame): done */
    }
}

const bench_proto_t bench_proto_ws = {
    .prepare = ws_prepare,
    .start = ws_start,
    .readable = ws_readable,
    .closed = ws_closed,
    .oldest = ws_oldest,
    .take_one = ws_take_one,
    .room = ws_room,
    .send = ws_send,
    .push = ws_push,
    .conn_free = ws_conn_free,
    .release = ws_release,
};
