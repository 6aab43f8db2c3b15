/*
 * ws-handshake.c -- WebSocket endpoints: the opening handshake over HTTP/1.1
 * (RFC 6455 §4.2), and the HTTP/1.1 connection as the engine's carrier once
 * its 101 is written.
 *
 * An endpoint is a GET route whose handler checks the handshake, picks a
 * subprotocol and negotiates permessage-deflate (RFC 7692), makes the engine
 * (ws.c) and switches the connection with petrel__http1_upgrade(), the one
 * way out of HTTP/1.1.  From then on the connection's protocol is
 * ws_conn_ops below: it reads into the connection's buffer, feeds the
 * engine, and writes what the engine queued.
 */
#include "protocols/ws.h"

#include "runtime/conn.h"
#include "protocols/http1.h"
#include "protocols/proto.h"
#include "framework/router.h"
#include "runtime/wskey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    petrel__conn_close(t);
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
        petrel__conn_close(c);
        return;
    }
    if (!petrel__conn_out_empty(c)) {
        petrel__conn_pause(c, true); /* stop reading until our output is written */
        petrel__ws_progress(ws);
        return;
    }
    bool waited = (c->flags & CONN_PAUSED) != 0;
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
    petrel__conn_pause(c, false);
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
    for (int turn = 0;
         turn < PETREL__READS_PER_EVENT && !(c->flags & CONN_PAUSED) && petrel__ws_reading(ws);
         turn++) {
        petrel__conn_compact(c);
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c);
            return;
        }
        if (n == 0) {
            if (c->flags & CONN_EOF)
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
    petrel__conn_close(c);
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
    *f |= WC_STARTED | WC_IN_IO;
    c->flags &= ~CONN_PAUSED;
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
    .on_timeout = wc_timeout,
    .drain = wc_drain,
    .on_close = wc_closed,
    .bounds_output = true, /* --ws-send-limit */
};

/* ------------------------------------------------------------------------ */
/* The opening handshake (§4.2)                                             */

/* Does a comma-separated header list (any of the fields `name`) hold `tok`? */
static bool header_has_token(const petrel_req_t *req, const char *name, const char *tok)
{
    size_t nl = strlen(name), tl = strlen(tok);
    for (size_t i = 0; i < req->nheaders; i++) {
        const petrel_header_t *h = &req->headers[i];
        if (petrel__str_ieq(h->name.ptr, h->name.len, name, nl) &&
            petrel__list_has_token(h->value.ptr, h->value.len, tok, tl))
            return true;
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

/* The answer is queued: on_open; over HTTP/2 the engine starts now (over
 * HTTP/1.1, once the connection is switched: wc_start). */
static int ws_opened(petrel_ws_t *ws, const petrel__ws_route_t *rt, petrel_req_t *req, bool h2)
{
    petrel__ws_opened(ws);
    if (rt->h.on_open)
        rt->h.on_open(ws, req);
    if (h2)
        petrel__ws_h2_start(ws);
    return 0;
}

static int ws_handshake(petrel_req_t *req, void *data)
{
    const petrel__ws_route_t *rt = data;
    /* HTTP/2: an Extended CONNECT with :protocol websocket (RFC 8441 §4;
     * h2-fields.c lets no other protocol reach a route).  §5: no Upgrade,
     * Connection nor Sec-WebSocket-Key/-Accept there. */
    bool h2 = req->method == PETREL__CONNECT;
    petrel__conn_t *c = h2 ? req->_conn : petrel__http1_conn(req);
    const char *key = NULL;
    if (!h2) {
        if (req->version != 11 || c == NULL)
            return bad_request(req, req->version == 20
                                        ? "WebSocket over HTTP/2 is an Extended CONNECT (RFC 8441)"
                                        : "WebSocket needs HTTP/1.1");
        if (req->method != PETREL_GET)
            return bad_request(req, "the handshake is a GET");
        if (!header_has_token(req, "upgrade", "websocket"))
            return bad_request(req, "no Upgrade: websocket");
        if (!header_has_token(req, "connection", "upgrade"))
            return bad_request(req, "no Connection: Upgrade");
        key = petrel_req_header(req, "sec-websocket-key");
        uint8_t raw[18];
        if (key == NULL || header_count(req, "sec-websocket-key") != 1 ||
            petrel__base64_decode(key, strlen(key), raw, sizeof(raw)) != 16)
            return bad_request(req, "Sec-WebSocket-Key is not 16 bytes in base64");
    }
    const char *ver = petrel_req_header(req, "sec-websocket-version");
    if (ver == NULL || strcmp(ver, "13") != 0 || header_count(req, "sec-websocket-version") != 1) {
        /* §4.2.2: the versions we speak */
        petrel_resp_header(req, "Sec-WebSocket-Version", "13");
        return petrel_send_text(req, 426, "text/plain",
                                "426 Upgrade Required: Sec-WebSocket-Version 13\n");
    }
    if (c->cs->draining)
        return 503;
    if (rt->h.check_origin) {
        int st = rt->h.check_origin(req, petrel_req_header(req, "origin"), rt->data);
        if (st)
            return st >= 400 && st <= 599 ? st : 403;
    }
    const char *sub = pick_subprotocol(req, rt->h.subprotocols);
    char ext[160];
    int bits = rt->h.no_compression ? 0 : negotiate_deflate(req, ext, sizeof(ext));
    petrel_ws_t *ws;
    if (h2) {
        int rc = petrel__ws_h2_accept(req, rt, sub, bits, ext, &ws);
        if (rc)
            return rc;
        return ws_opened(ws, rt, req, true);
    }
    ws = petrel__ws_new(rt, c->cs->cfg, sub, bits, &wc_carrier, c);
    if (ws == NULL)
        return 503;

    /* §4.2.2: Sec-WebSocket-Accept = base64(SHA-1(key + GUID)) */
    char accept[PETREL__WS_ACCEPT_LEN + 1];
    petrel__ws_accept(key, strlen(key), accept);
    petrel_header_t fields[3];
    size_t nf = 0;
    fields[nf++] = (petrel_header_t){{"Sec-WebSocket-Accept", 20}, {accept, strlen(accept)}};
    if (sub)
        fields[nf++] = (petrel_header_t){{"Sec-WebSocket-Protocol", 22}, {sub, strlen(sub)}};
    if (bits)
        fields[nf++] = (petrel_header_t){{"Sec-WebSocket-Extensions", 24}, {ext, strlen(ext)}};
    int rc = petrel__http1_upgrade(req, "websocket", fields, nf, &ws_conn_ops, ws);
    if (rc < 0) {
        petrel__ws_free(ws);
        return rc;
    }
    return ws_opened(ws, rt, req, false);
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
    petrel__ws_route_t *rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return PETREL_ENOMEM;
    rt->h = *handler;
    rt->data = data;
    /* the route's router frees it (a reload drops the old generation's) */
    /* GET: HTTP/1.1's Upgrade; PETREL__CONNECT: HTTP/2's Extended CONNECT */
    return petrel__route_add_owned(srv, PETREL_GET | PETREL__CONNECT, pattern, ws_handshake, rt,
                                   free);
}
