/*
 * fuzz_h2.c -- the HTTP/2 frame path (src/protocols/h2*.c over nghttp2): frame
 * processing, HPACK, our own RFC 9113 checks on top of nghttp2's (§8.2,
 * §8.3 pseudo-header and field rules), request dispatch and responses.
 *
 * Input: one mode byte, then frames.  Mode (low two bits):
 *   0  the client connection preface (RFC 9113 §3.4) is prepended; the
 *      fuzz bytes start with the client's SETTINGS frame;
 *   1  preface and an empty SETTINGS frame are prepended, so the fuzz bytes
 *      are frames of an established connection (HEADERS, DATA, ...);
 *   2  as 1, plus a SETTINGS ACK;
 *   3  an HTTP/1.1 request with Upgrade: h2c (RFC 7540 §3.2) followed by the
 *      preface and SETTINGS: the response to stream 1, then the frames.
 * The next bits choose the write splits (see fuzz_http1.c), the high bit a
 * half-close; bits 5 and 6 both set: zero timeouts (see fuzz_http1.c).  fuzz_server_run() asserts
 * that the server's output is well-formed frames (its SETTINGS first; known types on the right
 * streams; responses only on client streams; lengths within the limits) and that every session,
 * stream slot, connection and chunk is released once the client has closed.
 */
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SETTINGS "\x00\x00\x00\x04\x00\x00\x00\x00\x00"
#define SETTINGS_ACK "\x00\x00\x00\x04\x01\x00\x00\x00\x00"
/* HTTP2-Settings (RFC 7540 §3.2.1): a SETTINGS payload in base64url, the one
 * curl sends (MAX_CONCURRENT_STREAMS 100, INITIAL_WINDOW_SIZE, ENABLE_PUSH 0) */
#define UPGRADE                                                                                    \
    "GET /hello HTTP/1.1\r\nHost: fuzz\r\nConnection: Upgrade, HTTP2-Settings\r\n"                 \
    "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const fuzz_head_t heads[4] = {
        FUZZ_HEAD(PREFACE, FUZZ_EXPECT_H2),
        FUZZ_HEAD(PREFACE SETTINGS, FUZZ_EXPECT_H2),
        FUZZ_HEAD(PREFACE SETTINGS SETTINGS_ACK, FUZZ_EXPECT_H2),
        FUZZ_HEAD(UPGRADE PREFACE SETTINGS, FUZZ_EXPECT_H2_101),
    };
    return fuzz_server_run_heads(heads, data, size);
}
