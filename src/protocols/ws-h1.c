/*
 * ws-h1.c -- WebSocket over HTTP/1.1 (RFC 6455): the connection, once its
 * 101 is written, as the engine's carrier.
 *
 * The handshake (framework/ws-handshake.c) checks the request, makes the
 * engine here with petrel__ws_h1_new() and switches the connection with
 * petrel__ws_h1_switch(), through petrel__http1_upgrade(), the one way out
 * of HTTP/1.1.  From then on the connection's protocol is ws_conn_ops
 * below: it reads into the connection's buffer, feeds the engine (ws.c),
 * and writes what the engine queued.
 *
 * The carrier's pointer is the connection; the engine is its protocol
 * state (c->proto).
 *
 * The same carrier serves the client side of a WebSocket
 * (petrel_ws_client_new): a socket petrel connected to an upstream, whose
 * handshake the upstream client did (petrel_call_upgrade), made a
 * connection of the worker's, with the engine in client mode.
 */
#include "protocols/ws-carrier.h"

#include "runtime/conn.h"
#include "protocols/http1.h"
#include "runtime/syntax.h"
#include "runtime/wskey.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The connection as carrier                                                */

enum {
    WC_STARTED = 1 << 0, /* the connection is switched: output is ours to write */
    WC_IN_IO = 1 << 1    /* inside our event handling: it writes at its end */
};

static int wc_write(void *t, const void *h, size_t hl, const void *data, size_t len)
{
    petrel__conn_t *c = t;
    char *p = hl + len <= 1024 ? petrel__out_reserve(c, hl + len) : NULL;
    if (p) {
        memcpy(p, h, hl);
        if (len)
            memcpy(p + hl, data, len);
        petrel__out_commit(c, hl + len);
        return 0;
    }
    int rc = petrel__out_copy(c, h, hl);
    return rc < 0 || len == 0 ? rc : petrel__out_copy(c, data, len);
}

static size_t wc_queued(void *t)
{
    return petrel__out_bytes(t);
}

static int wc_writev(void *t, const struct iovec *iov, int n)
{
    return petrel__conn_writev(t, iov, n);
}

static void wc_kick(void *t)
{
    petrel__conn_t *c = t;
    petrel_ws_t *ws = c->proto;
    unsigned f = *petrel__ws_carrier_flags(ws);
    if ((f & WC_STARTED) && !(f & WC_IN_IO))
        petrel__pending_add(petrel__loop, petrel__ws_pending(ws));
}

static void wc_abort(void *t)
{
    petrel__conn_close(t, PETREL__CLOSE_CLIENT);
}

static const petrel__ws_carrier_t wc_carrier = {
    .write = wc_write,
    .queued = wc_queued,
    .kick = wc_kick,
    .abort = wc_abort,
    .writev = wc_writev,
};

/* After handling events: on_close if due, write, then linger, pause or go
 * on reading. */
static void wc_advance(petrel__conn_t *c)
{
    petrel_ws_t *ws = c->proto;
    list_unlink(&petrel__ws_pending(ws)->node);
    petrel__ws_advance(ws);
    if (petrel__ws_flush_staged(ws) == PETREL_EIO || petrel__conn_flush(c) < 0) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    if (!petrel__conn_out_empty(c)) {
        petrel__conn_pause(c, true); /* stop reading until our output is written */
        petrel__ws_progress(ws);
        return;
    }
    bool waited = (c->flags & PETREL__CONN_PAUSED) != 0;
    if (!petrel__ws_reading(ws)) {
        /* §7.1.1: the server closes the TCP connection first; half-close
         * and drain what the peer still sends, so that it reads our Close
         * rather than a reset */
        c->proto = NULL;
        petrel__ws_gone(ws);
        petrel__conn_linger(c);
        return;
    }
    petrel__ws_written(ws, waited);
    petrel__conn_pause(c, petrel__ws_paused(ws)); /* petrel_ws_pause() */
}

static void wc_on_pending(petrel__pending_t *p)
{
    petrel_ws_t *ws = petrel__ws_of_pending(p);
    wc_advance(petrel__ws_carrier(ws));
}

/* Frames in the read buffer, to the engine. */
static void wc_input(petrel__conn_t *c, petrel_ws_t *ws)
{
    size_t n;
    const char *p = petrel__conn_input(c, &n);
    if (n)
        petrel__conn_consume(c, petrel__ws_input(ws, p, n));
}

static void wc_read(petrel__conn_t *c)
{
    petrel_ws_t *ws = c->proto;
    unsigned *f = petrel__ws_carrier_flags(ws);
    *f |= WC_IN_IO;
    for (int turn = 0; turn < PETREL__READS_PER_EVENT && !(c->flags & PETREL__CONN_PAUSED) &&
                       petrel__ws_reading(ws);
         turn++) {
        petrel__conn_compact(c);
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        if (n == 0) {
            if (c->flags & PETREL__CONN_EOF)
                petrel__ws_eof(ws); /* the peer left without a Close */
            break;
        }
        wc_input(c, ws);
        if (c->rbuf == NULL || c->rlen < c->rcap)
            break; /* a read that did not fill the buffer got everything there was */
    }
    petrel__conn_idle(c); /* an idle WebSocket holds no read buffer */
    *f &= ~WC_IN_IO;
    wc_advance(c);
}

static void wc_written(petrel__conn_t *c)
{
    wc_advance(c);
}

static void wc_progress(petrel__conn_t *c)
{
    petrel__ws_peer_read(c->proto);
}

/* The send timeout: the peer does not read what we write. */
static void wc_timeout(petrel__conn_t *c)
{
    petrel__conn_close(c, PETREL__CLOSE_TIMEOUT);
}

static void wc_drain(petrel__conn_t *c, bool close_idle)
{
    (void)close_idle; /* a WebSocket is told, idle or not */
    petrel__ws_drain(c->proto);
}

static void wc_closed(petrel__conn_t *c)
{
    if (c->proto) {
        petrel__ws_gone(c->proto);
        c->proto = NULL;
    }
}

/* HTTP/1.1 switched the connection (its 101 is queued, the request scope
 * over): frames that came with the handshake wait in the read buffer. */
static void wc_start(petrel__conn_t *c)
{
    petrel_ws_t *ws = c->proto;
    unsigned *f = petrel__ws_carrier_flags(ws);
    petrel__ws_pending(ws)->cb = wc_on_pending;
    c->out_limit = 0; /* --ws-send-limit bounds it */
    *f |= WC_STARTED | WC_IN_IO;
    c->flags &= ~PETREL__CONN_PAUSED;
    petrel__ws_start(ws, c->cs->draining);
    wc_input(c, ws);
    *f &= ~WC_IN_IO;
    wc_advance(c);
}

static const petrel__proto_ops_t ws_conn_ops = {
    .name = "websocket",
    .start = wc_start,
    .on_read = wc_read,
    .on_written = wc_written,
    .on_progress = wc_progress,
    .on_send_timeout = wc_timeout,
    .drain = wc_drain,
    .on_close = wc_closed,
};

/* ------------------------------------------------------------------------ */
/* For the handshake                                                        */

petrel_ws_t *petrel__ws_h1_new(petrel__conn_t *c, const petrel__ws_route_t *rt, const char *sub,
                               int bits)
{
    return petrel__ws_new(rt, c->cs->cfg, sub, bits, &wc_carrier, c);
}

int petrel__ws_h1_switch(petrel_req_t *req, petrel_ws_t *ws, const petrel_header_t *fields,
                         size_t nfields)
{
    return petrel__http1_upgrade(req, "websocket", fields, nfields, &ws_conn_ops, ws);
}

/* ------------------------------------------------------------------------ */
/* The client side                                                          */

/* The end of the turn of petrel_ws_client_new(): the connection starts
 * (wc_start), the bytes that came with the 101 first, so that no callback
 * runs before the caller has the WebSocket. */
static void wc_client_start(petrel__pending_t *p)
{
    petrel_ws_t *ws = petrel__ws_of_pending(p);
    petrel__conn_begin(petrel__ws_carrier(ws), ws);
}

int petrel_ws_client_key(char key[25])
{
    uint8_t raw[16];
    if (key == NULL || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return PETREL_EIO;
    petrel__base64_encode(raw, sizeof(raw), key);
    return 0;
}

/* The fields `name` of a head: how many, and the last one's value. */
static size_t head_field(const petrel_upstream_head_t *head, const char *name, petrel_str_t *v)
{
    size_t n = 0;
    for (size_t i = 0; i < head->nheaders; i++)
        if (petrel__str_ieq(head->headers[i].name.ptr, head->headers[i].name.len, name,
                            strlen(name))) {
            *v = head->headers[i].value;
            n++;
        }
    return n;
}

/* RFC 6455 §4.1: what the client checks of the server's answer to its
 * handshake with `key`, offering no extension. */
static bool head_valid(const petrel_upstream_head_t *head, const char *key)
{
    petrel_str_t v = {"", 0};
    char accept[PETREL__WS_ACCEPT_LEN + 1];
    if (head->status != 101 || head_field(head, "upgrade", &v) != 1 ||
        !petrel__list_has_token(v.ptr, v.len, "websocket", 9))
        return false;
    bool conn = false;
    for (size_t i = 0; i < head->nheaders; i++)
        if (petrel__str_ieq(head->headers[i].name.ptr, head->headers[i].name.len, "connection", 10))
            conn = conn || petrel__list_has_token(head->headers[i].value.ptr,
                                                  head->headers[i].value.len, "upgrade", 7);
    if (!conn || head_field(head, "sec-websocket-accept", &v) != 1)
        return false;
    petrel__ws_accept(key, strlen(key), accept);
    if (v.len != PETREL__WS_ACCEPT_LEN || memcmp(v.ptr, accept, v.len) != 0)
        return false;
    return head_field(head, "sec-websocket-extensions", &v) == 0; /* none was offered */
}

petrel_ws_t *petrel_ws_client_new(int fd, const void *rest, size_t rest_len,
                                  const petrel_upstream_head_t *head, const char *key,
                                  const petrel_ws_handler_t *handler, void *data)
{
    if (fd < 0 || handler == NULL || (rest == NULL && rest_len) || head == NULL || key == NULL) {
        if (fd >= 0)
            close(fd);
        errno = EINVAL;
        return NULL;
    }
    if (!head_valid(head, key)) {
        close(fd);
        errno = EPROTO;
        return NULL;
    }
    petrel__conn_t *c = petrel__conn_wrap(petrel__conns_worker, fd, &ws_conn_ops, rest, rest_len);
    if (c == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    petrel__ws_route_t rt = {*handler, data};
    petrel_ws_t *ws = petrel__ws_new_client(&rt, c->cs->cfg, &wc_carrier, c);
    if (ws == NULL) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        errno = ENOMEM;
        return NULL;
    }
    petrel__ws_opened(ws);
    c->proto = ws; /* for a drain or a close before the start */
    petrel__ws_pending(ws)->cb = wc_client_start;
    petrel__pending_add(petrel__loop, petrel__ws_pending(ws));
    return ws;
}
