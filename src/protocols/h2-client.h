/*
 * h2-client.h -- the client side of HTTP/2 with prior knowledge (RFC 9113
 * §3.3), on nghttp2's client session (h2-client.c): requests submitted as
 * streams, responses parsed from the bytes read, the frames to write
 * produced into a buffer.  The upstream client (framework/upstream.c) owns
 * the socket, the buffers and the pool; this file only knows the wire.
 *
 * A stream's state (petrel__h2c_stream_t) is the caller's, embedded in its
 * call: it is in the session's list from petrel__h2c_submit() to the last
 * callback or petrel__h2c_forget(), after which the session never touches
 * it (nor its arena) again.  nghttp2's own memory comes from the per-worker
 * size-class free lists (sizeclass.h), as the server side's does.
 */
#ifndef PETREL_H2_CLIENT_H
#define PETREL_H2_CLIENT_H

#include "petrel.h"
#include "runtime/list.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a stream closed without a complete response (on_close's `how`). */
enum {
    PETREL__H2C_REFUSED = 1, /* not processed: REFUSED_STREAM, above a GOAWAY's last
                              * stream, or never sent (RFC 9113 §8.7): safe to retry */
    PETREL__H2C_RESET,       /* reset by the peer (or the connection was lost) */
    PETREL__H2C_MALFORMED    /* a response that is not valid HTTP/2 (RFC 9113 §8.1.1) */
};

/* What a session reports of its streams; `ctx` is the stream's.  After a
 * callback, the session looks at the stream again only if it was not
 * forgotten meanwhile. */
typedef struct petrel__h2c_cbs {
    void (*on_head)(void *ctx, int status, const petrel_header_t *fields, size_t n,
                    int64_t content_length);
    void (*on_body)(void *ctx, const char *p, size_t n);
    void (*on_end)(void *ctx, const petrel_header_t *trailers, size_t n);
    void (*on_close)(void *ctx, int how, uint32_t error_code);
    /* The whole request went out (its END_STREAM). */
    void (*on_sent)(void *ctx);
    /* A streamed body (petrel__h2c_submit's `streamed`): copy up to `len`
     * bytes into `buf`, set `*eof` with the last; 0 bytes and no end: the
     * body waits (petrel__h2c_resume() when there is more). */
    size_t (*on_read)(void *ctx, char *buf, size_t len, bool *eof);
} petrel__h2c_cbs_t;

typedef struct petrel__h2c petrel__h2c_t;

typedef struct petrel__h2c_stream {
    petrel__list_t node; /* the session's streams */
    void *ctx;
    petrel_arena_t *arena;
    int32_t id;
    bool head_request;
    bool sent;   /* its HEADERS frame went out */
    bool headed; /* on_head ran */
    bool ended;  /* END_STREAM came (on_end runs once the held bytes are read) */
    bool paused;
    bool delivering;
    bool malformed; /* a field it may not have: reset */
    bool deferred;  /* its streamed body waits for bytes */
    int status;
    int64_t content_length;
    const char *body;
    size_t body_len, boff;
    petrel_header_t *fields; /* the response's, then the trailers */
    size_t n, cap;
    char *held; /* DATA that came while paused (at most the stream's window) */
    size_t held_len;
} petrel__h2c_stream_t;

/* A new session (its SETTINGS queued); NULL when out of memory. */
petrel__h2c_t *petrel__h2c_new(const petrel__h2c_cbs_t *cbs);
/* Free it; its streams must have been forgotten. */
void petrel__h2c_free(petrel__h2c_t *h);

/* Submit a request: the stream `st` (the caller's storage, its fields and
 * names copied into `arena`), lower-cased fields, `te: trailers` when
 * `te_trailers`, a content-length when
 * `body_len` or `send_length`, the body (not copied: kept until the
 * stream ends), or with `streamed` a body read from on_read as it comes.
 * 0; PETREL_ENOMEM; PETREL_EIO (the session takes no more streams). */
int petrel__h2c_submit(petrel__h2c_t *h, petrel__h2c_stream_t *st, void *ctx, petrel_arena_t *arena,
                       const char *method, const char *authority, const char *path,
                       const petrel_header_t *fields, size_t n, bool te_trailers, const void *body,
                       size_t body_len, bool send_length, bool head_request, bool streamed);

/* A streamed body that waited has more (or its end): DATA frames go on. */
void petrel__h2c_resume(petrel__h2c_t *h, petrel__h2c_stream_t *st);

/* The stream is no longer the caller's concern: unlinked, no more
 * callbacks; RST_STREAM (CANCEL) unless both sides had ended it. */
void petrel__h2c_forget(petrel__h2c_t *h, petrel__h2c_stream_t *st);

/* Stop or resume handing on the stream's DATA: while paused, what comes is
 * held and the stream's window is not given back (the peer stops once it
 * is used); resuming hands on what was held (and the end, if it came). */
void petrel__h2c_pause(petrel__h2c_t *h, petrel__h2c_stream_t *st, bool paused);

/* The bytes read: 0, or PETREL_UPSTREAM_EPROTO (the connection is broken: a
 * connection error was queued, write what petrel__h2c_out() gives and
 * close). */
int petrel__h2c_recv(petrel__h2c_t *h, const char *p, size_t n);

/* Frames to write, up to `cap` bytes into `buf`: the count (0: nothing),
 * or PETREL_EPROTO. */
long petrel__h2c_out(petrel__h2c_t *h, char *buf, size_t cap);

/* Whether the session may open another stream (no GOAWAY came, fewer than
 * `limit` and the peer's SETTINGS_MAX_CONCURRENT_STREAMS are open). */
bool petrel__h2c_room(petrel__h2c_t *h, unsigned limit);
/* Whether a GOAWAY came (the connection takes no new streams). */
bool petrel__h2c_goaway(petrel__h2c_t *h);
/* Whether the session has anything left to do (read or write). */
bool petrel__h2c_alive(petrel__h2c_t *h);
/* The first stream of the session (to end them all), or NULL. */
petrel__h2c_stream_t *petrel__h2c_first(petrel__h2c_t *h);

#endif /* PETREL_H2_CLIENT_H */
