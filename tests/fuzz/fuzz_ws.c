/*
 * fuzz_ws.c -- the WebSocket frame path (src/protocols/ws.c over wslay, the wsecho
 * module): an HTTP/1.1 Upgrade handshake to /ws (RFC 6455 §4.1), then the
 * fuzz bytes as client frames: masking (§5.3), fragmentation and control
 * frames (§5.4, §5.5), Close codes and UTF-8 (§5.5.1, §8.1), message size
 * limit, and permessage-deflate (RFC 7692) when negotiated.
 *
 * Input: one mode byte, then frames.  Mode bit 0: offer permessage-deflate
 * in the handshake (bit 1: with client_max_window_bits and
 * server_no_context_takeover, so both of the server's context modes run);
 * bits 2-6 choose the write splits (see fuzz_http1.c); bit 7 a half-close;
 * bits 5 and 6 both set: zero timeouts, so the idle ping and close and the
 * closing handshake's timer fire (see fuzz_http1.c).
 * fuzz_server_run() asserts that what the server sends is a 101 and then
 * well-formed server frames (unmasked, minimal lengths, no RSV bit but
 * RSV1 with permessage-deflate, short unfragmented control frames, valid
 * Close codes, nothing after its Close), and that the connection and all
 * its memory are released once the client has closed.
 */
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HANDSHAKE                                                                                  \
    "GET /ws HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"              \
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
#define DEFLATE "Sec-WebSocket-Extensions: permessage-deflate\r\n"
#define DEFLATE2                                                                                   \
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits; "                       \
    "server_no_context_takeover\r\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const fuzz_head_t heads[4] = {
        FUZZ_HEAD(HANDSHAKE "\r\n", FUZZ_EXPECT_WS),
        FUZZ_HEAD(HANDSHAKE DEFLATE "\r\n", FUZZ_EXPECT_WS_DEFLATE),
        FUZZ_HEAD(HANDSHAKE "\r\n", FUZZ_EXPECT_WS),
        FUZZ_HEAD(HANDSHAKE DEFLATE2 "\r\n", FUZZ_EXPECT_WS_DEFLATE),
    };
    return fuzz_server_run_heads(heads, data, size);
}
