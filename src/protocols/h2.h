/*
 * h2.h -- HTTP/2 over cleartext (the h2 files, h2*.c, on nghttp2; h2.c
 * lists them).
 */
#ifndef PETREL_H2_H
#define PETREL_H2_H

#include "runtime/conn.h"
#include "protocols/proto.h"

/* Prior knowledge (RFC 9113 §3.3): the connection preface waits in the
 * read buffer when a connection is switched to this protocol. */
extern const petrel__proto_ops_t petrel__h2_ops;

/* The timeouts of HTTP/2 on c->timer (per worker; a test may shorten
 * them): a request head arriving or the client's preface after an upgrade
 * (--header-timeout), the idle stage of the keep-alive timeout and its
 * rest, the checks of the bodies arriving (--body-timeout), and the wait
 * for the answer to the PING of a shutdown notice (as long as a lingering
 * close).  The send timeout is the transport's (cs->tq_send). */
typedef struct petrel__h2_timers {
    petrel__tq_t header, idle, keepalive_rest, body_check, notice;
} petrel__h2_timers_t;
extern petrel__h2_timers_t petrel__h2_timers;

/* Per worker: register the queues of petrel__h2_timers with the loop,
 * their timeouts from `cfg` (0, or PETREL_ELIMIT). */
int petrel__h2_worker_init(const petrel__config_t *cfg);

/* The upgrade to h2c (RFC 7540 §3.2) that the server gives its connection
 * sets (cs->upgrade), offered by HTTP/1.1: a complete
 * request with `Upgrade: h2c`, one HTTP2-Settings and `Connection: Upgrade,
 * HTTP2-Settings` is answered with 101, the connection becomes an h2 session
 * and the request (copied) is answered as stream 1.  Returns 0;
 * PETREL_ENOTFOUND when it is not such a request (nothing done: HTTP/1.1
 * answers it); another PETREL_E* code: the connection must be closed. */
int petrel__h2_upgrade(petrel_req_t *req);

/*
 * Tunnels (RFC 8441 Extended CONNECT): a stream whose request is
 * `:method CONNECT` with `:protocol websocket` reaches the routes registered
 * for PETREL__CONNECT (router.h); the route's handler may turn the stream
 * into a byte tunnel with petrel__h2_tunnel().  The stream's DATA then
 * carries bytes both ways until each side sends END_STREAM.
 *
 * Flow control is the backpressure: DATA returns its connection-level window
 * as soon as it is buffered, its stream-level window only once the carrier
 * has taken the bytes; the carrier is given input while what it queued fits
 * in the peer's stream window (a carrier whose peer does not read stops
 * taking input, and its peer stops sending on that stream only).
 */
typedef struct petrel__h2_tunnel_ops {
    /* Bytes from the peer: returns how many were taken (the rest is offered
     * again, with more, later), or -1: the carrier wants no more input
     * (DATA after its end): the stream is reset (STREAM_CLOSED). */
    ssize_t (*input)(void *ctx, const char *p, size_t n);
    /* The peer sent END_STREAM, after all its bytes were taken. */
    void (*eof)(void *ctx);
    /* What the carrier queued was framed: `left` bytes wait for the peer's
     * window (0: all of it went). */
    void (*progress)(void *ctx, size_t left);
    /* Graceful shutdown of the server (the connection's GOAWAY is sent). */
    void (*drain)(void *ctx);
    /* The stream is gone (reset by either side, the connection closed, or
     * both sides ended it): the last call; the tunnel is no more. */
    void (*gone)(void *ctx);
} petrel__h2_tunnel_ops_t;

/* Answer an Extended CONNECT request with 200 (its header fields added
 * with petrel_resp_header() before) and make the stream a tunnel for
 * `ops`/`ctx`.  0; PETREL_EINVAL when `req` is not such a request;
 * PETREL_ESTATE when it was answered already or its stream is gone;
 * PETREL_ENOMEM. */
int petrel__h2_tunnel(petrel_req_t *req, const petrel__h2_tunnel_ops_t *ops, void *ctx);
/* Queue `hl` + `len` bytes (copied) on a tunnel.  0, PETREL_EIO (the
 * stream is gone or ended) or PETREL_ENOMEM. */
int petrel__h2_tunnel_write(petrel_req_t *req, const void *h, size_t hl, const void *data,
                            size_t len);
/* Bytes queued on a tunnel, not framed yet. */
size_t petrel__h2_tunnel_queued(petrel_req_t *req);
/* End our side: END_STREAM after what is queued.  `gone` follows once the
 * peer has ended its side too (or reset the stream). */
void petrel__h2_tunnel_end(petrel_req_t *req);
/* The carrier takes input again (it refused some): the tunnel gives it
 * what it holds, from the loop. */
void petrel__h2_tunnel_resume(petrel_req_t *req);
/* Give up at once: RST_STREAM (CANCEL).  No more calls to the ops (not
 * even `gone`). */
void petrel__h2_tunnel_reset(petrel_req_t *req);
/* The tunnel's context (NULL once it was reset or is gone). */
void *petrel__h2_tunnel_ctx(petrel_req_t *req);
/* Whether the server is shutting down (the tunnel's connection drains). */
bool petrel__h2_draining(petrel_req_t *req);

/* Counters of this worker's h2 side, for tests and benchmarks. */
typedef struct petrel__h2_stats {
    uint64_t ng_ops;        /* nghttp2 allocator calls (malloc, calloc, realloc, free) */
    uint64_t ng_calls;      /* of these, calls that reached the heap (the size-class
                             * free list in front of it was empty or full) */
    size_t ng_bytes;        /* bytes nghttp2 holds now (blocks, headers included) */
    uint64_t slot_mallocs;  /* stream slots malloc'ed (the free list was empty) */
    size_t sessions;        /* live h2 sessions */
    size_t streams;         /* live stream slots (open, zombie or orphan) */
    size_t conn_bytes;      /* petrel's h2 state of one connection (malloc'ed) */
    uint64_t arena_mallocs; /* heap calls of the stream arenas (pool chunks, large blocks) */
    uint64_t out_waits;     /* times a connection waited for the worker's output budget */
    uint64_t idle_released; /* bytes of session pages idle connections gave back */
} petrel__h2_stats_t;
void petrel__h2_stats(petrel__h2_stats_t *st);
/* Free stream slots kept for reuse beyond `keep` go back to the heap
 * (worker.c, "Memory that comes back"); returns the bytes freed. */
size_t petrel__h2_trim(size_t keep);

/* The options of HTTP/2 (--h2-*). */
extern const struct petrel__option_table petrel__h2_option_table;

#endif /* PETREL_H2_H */
