/*
 * ws-carrier.h -- the carriers of the WebSocket engine, for the handshake.
 *
 * The handshake (framework/ws-handshake.c) decides whether a request
 * becomes a WebSocket; what carries it once it has is a protocol of its
 * own, beside the one it came on: ws-h1.c takes over an HTTP/1.1
 * connection after its 101, ws-h2.c an HTTP/2 stream opened with Extended
 * CONNECT (RFC 8441).  Each makes the engine (ws.c) on itself, then
 * switches when the handshake has its answer ready.  When the switch
 * fails, the handshake frees the engine (petrel__ws_free()).
 */
#ifndef PETREL_WS_CARRIER_H
#define PETREL_WS_CARRIER_H

#include "protocols/ws.h"
#include "runtime/conn.h"
#include "petrel.h"

#include <stddef.h>

/* HTTP/1.1 (ws-h1.c).  A new engine whose carrier is `c`, the connection
 * of the handshake's request; NULL when out of memory. */
petrel_ws_t *petrel__ws_h1_new(petrel__conn_t *c, const petrel__ws_route_t *rt, const char *sub,
                               int bits);
/* Answer 101 with the handshake's `fields` (Sec-WebSocket-Accept and what
 * was negotiated) and switch the connection to the engine
 * (petrel__http1_upgrade()); it starts once the 101 is queued.  0 or a
 * PETREL_E* code. */
int petrel__ws_h1_switch(petrel_req_t *req, petrel_ws_t *ws, const petrel_header_t *fields,
                         size_t nfields);

/* HTTP/2 (ws-h2.c).  A new engine whose carrier is the stream of `req`,
 * an Extended CONNECT; NULL when out of memory. */
petrel_ws_t *petrel__ws_h2_new(petrel_req_t *req, const petrel__ws_route_t *rt, const char *sub,
                               int bits);
/* Answer 200 (with the response fields the handshake added) and make the
 * stream a tunnel for the engine.  0 or a PETREL_E* code. */
int petrel__ws_h2_switch(petrel_req_t *req, petrel_ws_t *ws);
/* After on_open: the engine starts. */
void petrel__ws_h2_start(petrel_ws_t *ws);

#endif /* PETREL_WS_CARRIER_H */
