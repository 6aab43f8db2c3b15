/*
 * fuzz_http1.c -- the HTTP/1.1 request path, bytes in and responses out,
 * through the real connection code (src/runtime/conn.c, src/protocols/http1.c, llhttp, the
 * router, the built-in modules and the static handler).
 *
 * Input: one mode byte, then the bytes the client sends.  The mode byte's
 * high bit asks for a half-close (shutdown(SHUT_WR)) after the last byte;
 * when bits 5 and 6 are both set, every timeout is zero (each timer fires
 * in whatever state the input has reached: header, keep-alive, send,
 * linger); the low seven bits choose how the bytes are split into writes
 * (0: one write),
 * so that the parser meets every boundary: inside a method, a header name, a
 * chunk size, a CRLF (RFC 9112 §2, §7.1).
 *
 * Asserted by fuzz_server_run(): no crash or sanitizer report, the server
 * consumes its input, what it writes starts with a status line and parses
 * as HTTP/1.1 responses (llhttp, as a client reads them), and once the
 * client has closed, the connection, its arena and every pool chunk it
 * held are released.
 */
#include "fuzz_server.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    /* a status line first, unless the bytes are the HTTP/2 preface
     * (prior knowledge, RFC 9113 §3.3): the server's SETTINGS then */
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    bool h2 =
        size - 1 >= sizeof(preface) - 1 && memcmp(data + 1, preface, sizeof(preface) - 1) == 0;
    /* and responses a client parses, unless one may answer a HEAD (its
     * Content-Length describes a body that is not sent, RFC 9110 §9.3.2:
     * a response parser cannot tell) */
    bool head = memmem(data + 1, size - 1, "HEAD", 4) != NULL;
    fuzz_server_run(NULL, 0, data + 1, size - 1, mode & 0x7f, (mode & 0x80) != 0,
                    h2     ? FUZZ_EXPECT_H2
                    : head ? FUZZ_EXPECT_HTTP1
                           : FUZZ_EXPECT_PARSED,
                    (mode & 0x60) == 0x60);
    return 0;
}
