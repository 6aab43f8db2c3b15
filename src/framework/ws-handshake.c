/*
 * ws-handshake.c -- WebSocket endpoints: the opening handshake (RFC 6455
 * §4.2 over HTTP/1.1, RFC 8441 over HTTP/2).
 *
 * An endpoint is a route whose handler checks the handshake, asks the
 * route's origin check, picks a subprotocol and negotiates
 * permessage-deflate (RFC 7692).  Then it calls down into the carrier of
 * the request's protocol (protocols/ws-carrier.h): over HTTP/1.1 it makes
 * the engine and switches the connection after a 101 with
 * Sec-WebSocket-Accept (ws-h1.c); over HTTP/2 it makes the engine and
 * turns the Extended CONNECT's stream into a tunnel after a 200 (ws-h2.c).
 * The handler's on_open runs once the answer is queued.
 */
#include "protocols/ws-carrier.h"

#include "runtime/conn.h"
#include "protocols/http1.h"
#include "protocols/proto.h"
#include "framework/router.h"
#include "runtime/wskey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * HTTP/1.1, once the connection is switched: ws-h1.c's wc_start). */
static int ws_opened(petrel_ws_t *ws, const petrel__ws_route_t *rt, petrel_req_t *req, bool h2)
{
    petrel__ws_opened(ws);
    if (rt->h.on_open)
        rt->h.on_open(ws, req);
    if (h2)
        petrel__ws_h2_start(ws);
    return 0;
}

/* The checks of an opening handshake (RFC 6455 §4.2.1; RFC 8441 §4, §5:
 * an Extended CONNECT with :protocol websocket -- h2-fields.c lets no
 * other protocol reach a route -- without Upgrade, Connection nor
 * Sec-WebSocket-Key).  0, 400 with `*why`, or 426. */
static int handshake_check(petrel_req_t *req, const char **why)
{
    bool h2 = req->method == PETREL__CONNECT;
    petrel__conn_t *c = h2 ? req->_conn : petrel__http1_conn(req);
    if (!h2) {
        *why = NULL;
        if (req->version != 11 || c == NULL)
            *why = req->version == 20 ? "WebSocket over HTTP/2 is an Extended CONNECT (RFC 8441)"
                                      : "WebSocket needs HTTP/1.1";
        else if (req->method != PETREL_GET)
            *why = "the handshake is a GET";
        else if (!header_has_token(req, "upgrade", "websocket"))
            *why = "no Upgrade: websocket";
        else if (!header_has_token(req, "connection", "upgrade"))
            *why = "no Connection: Upgrade";
        if (*why)
            return 400;
        const char *key = petrel_req_header(req, "sec-websocket-key");
        uint8_t raw[18];
        if (key == NULL || header_count(req, "sec-websocket-key") != 1 ||
            petrel__base64_decode(key, strlen(key), raw, sizeof(raw)) != 16) {
            *why = "Sec-WebSocket-Key is not 16 bytes in base64";
            return 400;
        }
    }
    const char *ver = petrel_req_header(req, "sec-websocket-version");
    if (ver == NULL || strcmp(ver, "13") != 0 || header_count(req, "sec-websocket-version") != 1) {
        /* §4.2.2: the versions we speak */
        petrel_resp_header(req, "Sec-WebSocket-Version", "13");
        return 426;
    }
    return 0;
}

/* Accept a checked handshake for endpoint `rt` with subprotocol `sub`: the
 * engine on the request's carrier, the answer queued, on_open.  0, or an
 * HTTP status or PETREL_E* code (nothing sent). */
static int handshake_accept(petrel_req_t *req, const petrel__ws_route_t *rt, const char *sub)
{
    bool h2 = req->method == PETREL__CONNECT;
    petrel__conn_t *c = h2 ? req->_conn : petrel__http1_conn(req);
    const char *key = h2 ? NULL : petrel_req_header(req, "sec-websocket-key");
    char ext[160];
    int bits = rt->h.no_compression ? 0 : negotiate_deflate(req, ext, sizeof(ext));
    if (h2) {
        petrel_ws_t *ws = petrel__ws_h2_new(req, rt, sub, bits);
        if (ws == NULL)
            return 503;
        /* RFC 8441 §5: no Sec-WebSocket-Accept; the rest as RFC 6455 §4.2.2 */
        if ((sub && petrel_resp_header(req, "sec-websocket-protocol", sub) < 0) ||
            (bits && petrel_resp_header(req, "sec-websocket-extensions", ext) < 0)) {
            petrel__ws_free(ws);
            return 503;
        }
        int rc = petrel__ws_h2_switch(req, ws);
        if (rc < 0) {
            petrel__ws_free(ws);
            return rc;
        }
        return ws_opened(ws, rt, req, true);
    }
    petrel_ws_t *ws = petrel__ws_h1_new(c, rt, sub, bits);
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
    int rc = petrel__ws_h1_switch(req, ws, fields, nf);
    if (rc < 0) {
        petrel__ws_free(ws);
        return rc;
    }
    ws_opened(ws, rt, req, false);
    petrel__http1_upgraded(req); /* from a callback: the switch, now */
    return 0;
}

static int ws_handshake(petrel_req_t *req, void *data)
{
    const petrel__ws_route_t *rt = data;
    const char *why = NULL;
    int st = handshake_check(req, &why);
    if (st == 400)
        return bad_request(req, why);
    if (st == 426)
        return petrel_send_text(req, 426, "text/plain",
                                "426 Upgrade Required: Sec-WebSocket-Version 13\n");
    bool h2 = req->method == PETREL__CONNECT;
    petrel__conn_t *c = h2 ? req->_conn : petrel__http1_conn(req);
    if (c->cs->draining)
        return 503;
    if (rt->h.check_origin) {
        st = rt->h.check_origin(req, petrel_req_header(req, "origin"), rt->data);
        if (st)
            return st >= 400 && st <= 599 ? st : 403;
    }
    return handshake_accept(req, rt, pick_subprotocol(req, rt->h.subprotocols));
}

int petrel_ws_check(petrel_req_t *req)
{
    const char *why = NULL;
    if (req == NULL)
        return PETREL_EINVAL;
    int st = handshake_check(req, &why);
    if (why)
        petrel_log(PETREL_LOG_DEBUG, "request %llu: websocket handshake refused: %s",
                   (unsigned long long)req->id, why);
    return st;
}

int petrel_ws_accept(petrel_req_t *req, const petrel_ws_handler_t *handler, void *data,
                     const char *subprotocol)
{
    if (req == NULL || handler == NULL || !petrel_req_waiting(req))
        return PETREL_EINVAL;
    const char *why = NULL;
    int st = handshake_check(req, &why);
    if (st)
        return st;
    bool h2 = req->method == PETREL__CONNECT;
    petrel__conn_t *c = h2 ? req->_conn : petrel__http1_conn(req);
    if (c->cs->draining)
        return 503;
    petrel__ws_route_t rt = {*handler, data}; /* copied by the engine */
    return handshake_accept(req, &rt, subprotocol);
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

int petrel__ws_route_make(const petrel_ws_handler_t *handler, void *data, petrel_handler_t *fn,
                          void **out)
{
    if (handler->subprotocols)
        for (const char *const *s = handler->subprotocols; *s; s++)
            if (**s == '\0' || strpbrk(*s, " \t,\r\n"))
                return PETREL_EINVAL;
    petrel__ws_route_t *rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return PETREL_ENOMEM;
    rt->h = *handler;
    rt->data = data;
    *fn = ws_handshake;
    *out = rt;
    return 0;
}
