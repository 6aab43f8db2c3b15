/*
 * http1-client.h -- the client side of HTTP/1.1 (http1-client.c, on
 * llhttp): a request serialised into a buffer, a response parsed from the
 * bytes read.  The upstream client (framework/upstream.c) owns the socket
 * and the buffers; this file only knows the wire.
 */
#ifndef PETREL_HTTP1_CLIENT_H
#define PETREL_HTTP1_CLIENT_H

#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a parsed response reports.  Each callback returns 0 to go on, 1 to
 * pause the parser (petrel__h1c_feed() returns what it consumed; feed the
 * rest after), or -1 to stop it (the caller gave up the response). */
typedef struct petrel__h1c_cbs {
    int (*on_head)(void *ctx, int status, int version, const petrel_header_t *fields, size_t n,
                   int64_t content_length);
    int (*on_body)(void *ctx, const char *p, size_t n);
    int (*on_end)(void *ctx, const petrel_header_t *trailers, size_t n);
} petrel__h1c_cbs_t;

typedef struct petrel__h1c petrel__h1c_t;

/* The parser's size, for a caller that embeds it (storage aligned for a
 * pointer). */
size_t petrel__h1c_size(void);

/* Set up `p` for one response, its fields kept in `arena` (the call's);
 * `head_request`: the response has no body whatever its fields say. */
void petrel__h1c_start(petrel__h1c_t *p, petrel_arena_t *arena, bool head_request,
                       const petrel__h1c_cbs_t *cbs, void *ctx);

/* The request asks for an upgrade (after petrel__h1c_start): a 101 is
 * reported to on_head (content length 0) and ends the response, the parser
 * stopping after its empty line; the bytes after it belong to the new
 * protocol.  Without it a 101 is malformed. */
void petrel__h1c_upgrade(petrel__h1c_t *p);

/* Parse `len` bytes.  Returns the number consumed (less than `len` when a
 * callback paused the parser, or the response ended: the bytes after it
 * are not part of it), or PETREL_EPROTO (malformed or ambiguous: CL+TE,
 * two different Content-Lengths, a bad chunk), PETREL_ENOMEM (the arena),
 * PETREL_ECANCELED (a callback returned -1).  `*done` is set once the
 * response has ended. */
long petrel__h1c_feed(petrel__h1c_t *p, const char *data, size_t len, bool *done);

/* The peer closed: 0 when that ended the response (a body delimited by
 * the close; on_end has run), else PETREL_EPROTO (cut: `*started` says
 * whether any byte of the response had arrived). */
int petrel__h1c_eof(petrel__h1c_t *p, bool *started);

/* After the end: whether the connection may carry another request (no
 * `Connection: close`, HTTP/1.1 or a 1.0 keep-alive, not delimited by the
 * close). */
bool petrel__h1c_keep_alive(const petrel__h1c_t *p);

/* Whether any byte of the response (1xx included) was parsed. */
bool petrel__h1c_started(const petrel__h1c_t *p);
/* Whether a callback paused the parser: a feed (of no bytes, if none are
 * left) goes on from where it stopped, such as the end of a response whose
 * head was its last byte. */
bool petrel__h1c_paused(const petrel__h1c_t *c);

/* Serialise a request head into `buf` (`cap` bytes): request line, Host,
 * `fields`, Content-Length when `body_len` or the method takes a body,
 * the empty line.  Returns its length, or -1 when `cap` is too small (ask
 * petrel__h1c_head_size()). */
long petrel__h1c_head(char *buf, size_t cap, const char *method, const char *target,
                      const char *host, const petrel_header_t *fields, size_t n, size_t body_len,
                      bool send_length);

/* The bytes petrel__h1c_head() needs at most. */
size_t petrel__h1c_head_size(const char *method, const char *target, const char *host,
                             const petrel_header_t *fields, size_t n);

/* Whether a field name may be given by a caller (not Host, Content-Length,
 * Transfer-Encoding, nor a hop-by-hop field), and a valid token whose value
 * has no CR, LF nor NUL. */
bool petrel__h1c_field_ok(const petrel_header_t *f);

#endif /* PETREL_HTTP1_CLIENT_H */
