/*
 * wsecho.c -- GET /ws: a WebSocket endpoint that echoes every message as it
 * came (text stays text, binary stays binary).  The closing handshake,
 * pings and every protocol check are petrel's (src/protocols/ws.c): a client's Close
 * is answered with the same code.
 *
 * The message memory is valid during on_message only; sending copies it, so
 * the echo needs nothing else.
 */
#include <petrel.h>

static void on_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    if (binary)
        petrel_ws_send_binary(ws, data, len);
    else
        petrel_ws_send_text(ws, data, len);
}

static const petrel_ws_handler_t echo = {
    .on_message = on_message,
};

static int init(petrel_server_t *srv, const char *args)
{
    (void)args;
    return petrel_ws_route_add(srv, "/ws", &echo, NULL);
}

PETREL_MODULE(wsecho, NULL, init, NULL, NULL)
