/*
 * wskey.h -- SHA-1 (FIPS 180-4), base64 (RFC 4648 §4) and the
 * Sec-WebSocket-Accept of the WebSocket opening handshake (RFC 6455 §4.2.2,
 * §1.3).  Never installed.
 *
 * Shared by the server (src/ws.c, which checks a client's key and answers
 * with the accept value) and petrel-bench (src/bench/ws.c, which sends a key
 * and checks the server's answer); it depends on nothing but the C library,
 * so both link src/wskey.c as it is.
 */
#ifndef PETREL_WSKEY_H
#define PETREL_WSKEY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/** SHA-1 of `len` bytes. */
void petrel__sha1(const void *data, size_t len, uint8_t out[20]);

/** Standard alphabet with padding; writes 4 * ceil(len / 3) chars and a NUL,
 *  returns the chars written (without the NUL). */
size_t petrel__base64_encode(const void *data, size_t len, char *out);

/** Strict: padded, canonical; returns the length decoded, or -1. */
ssize_t petrel__base64_decode(const char *s, size_t len, uint8_t *out, size_t cap);

/** The length of a Sec-WebSocket-Accept value: base64 of 20 bytes. */
#define PETREL__WS_ACCEPT_LEN 28

/** Sec-WebSocket-Accept for the key `key` (`klen` bytes): base64(SHA-1(key +
 *  "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), NUL-terminated in `out`. */
void petrel__ws_accept(const char *key, size_t klen, char out[PETREL__WS_ACCEPT_LEN + 1]);

#endif
