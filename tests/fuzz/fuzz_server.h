/*
 * fuzz_server.h -- the in-process server shared by the connection harnesses
 * (fuzz_http1.c, fuzz_h2.c, fuzz_ws.c).
 *
 * One server per process, made on the first input and kept: the built-in
 * hello, echo and wsecho modules, a static mount over a small temporary
 * root, and a few routes of our own (a streamed response with a trailer, a
 * parameter route, a wildcard route that reports what it saw).  Its worker
 * loop runs in the fuzzing process without a listener, exactly as in
 * tests/check_http1.c: each input gets a socketpair whose server end is
 * adopted by the real connection code (petrel__conn_adopt), and the loop is
 * turned a bounded number of times.
 */
#ifndef FUZZ_SERVER_H
#define FUZZ_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Make the server on the first call; later calls do nothing. */
void fuzz_server_init(void);

/*
 * Serve one connection: write `head` (may be NULL) in one piece, then
 * `data` in pieces whose sizes come from `split` (0: one write), turning the
 * loop and reading what the server writes in between; shut down the write
 * side if `half_close`; let the server finish; close the client end; and
 * check that the connection was released: no connection, stream, session or
 * pool chunk is left over (abort() otherwise, so the fuzzer reports it).
 * `zero_timeouts`: every timer queue of the loop (header, keep-alive, send,
 * linger, WebSocket idle, ...) times out at once for this connection (from
 * its start, or once `head` is served), so that each timeout fires in
 * whatever state the input has reached.
 * `expect`: how any output must begin (RFC 9112 §4, RFC 9113 §3.4).  In
 * every mode, nothing outside the static root (reachable through symlinks
 * in it) may be opened or read.
 */
enum fuzz_expect {
    FUZZ_EXPECT_HTTP1,      /* "HTTP/1.1 " */
    FUZZ_EXPECT_PARSED,     /* "HTTP/1.1 ", and responses that llhttp parses (up
                             * to a 101): well-formed, correctly framed */
    FUZZ_EXPECT_101,        /* "HTTP/1.1 101 " */
    FUZZ_EXPECT_WS,         /* "HTTP/1.1 101 ", then well-formed server frames
                             * (RFC 6455 §5): unmasked, known opcodes, minimal
                             * lengths, no RSV bit, short unfragmented control
                             * frames, valid Close codes, nothing after a Close */
    FUZZ_EXPECT_WS_DEFLATE, /* the same, RSV1 allowed on a message's first
                             * frame (RFC 7692 §6) */
    FUZZ_EXPECT_H2,         /* a SETTINGS frame on stream 0, then well-formed
                             * frames (RFC 9113 §4.1, §6): known types, each on
                             * stream 0 or not as its type requires, responses
                             * on client (odd) streams only, at most 16384 bytes
                             * unless the client allowed more */
    FUZZ_EXPECT_H2_101      /* "HTTP/1.1 101 ", then frames as above */
};
void fuzz_server_run(const void *head, size_t head_len, const uint8_t *data, size_t len,
                     uint8_t split, bool half_close, enum fuzz_expect expect, bool zero_timeouts);

/* One of four fixed heads of a connection, and what its output must be. */
typedef struct fuzz_head {
    const char *s;
    size_t len;
    enum fuzz_expect expect;
} fuzz_head_t;
/* FUZZ_HEAD("literal", FUZZ_EXPECT_...): an initializer of a fuzz_head_t */
#define FUZZ_HEAD(s, expect)                                                                       \
    {                                                                                              \
        (s), sizeof(s) - 1, (expect)                                                               \
    }

/*
 * One input of a harness whose connections begin with one of four heads
 * (fuzz_h2.c, fuzz_ws.c): a mode byte, then the data written after the head.
 * Mode bits 0-1 choose the head, bits 2-6 the write splits, bit 7 a
 * half-close; bits 5 and 6 both set: zero timeouts.  Returns 0 (libFuzzer's
 * "keep the input").
 */
int fuzz_server_run_heads(const fuzz_head_t heads[4], const uint8_t *data, size_t size);

#endif /* FUZZ_SERVER_H */
