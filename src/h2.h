/*
 * h2.h -- HTTP/2 over cleartext (h2.c, on nghttp2).
 */
#ifndef PETREL_H2_H
#define PETREL_H2_H

#include "conn.h"
#include "proto.h"

/* Prior knowledge (RFC 9113 §3.3): the connection preface waits in the
 * read buffer when a connection is switched to this protocol. */
extern const petrel__proto_ops_t petrel__h2_ops;

/* The HTTP/1.1 upgrade hook for `Upgrade: h2c` (RFC 7540 §3.2): a complete
 * request with `Upgrade: h2c`, one HTTP2-Settings and `Connection: Upgrade,
 * HTTP2-Settings` is answered with 101, the connection becomes an h2 session
 * and the request (copied) is answered as stream 1.  Returns 0;
 * PETREL_ENOTFOUND when it is not such a request (nothing done: HTTP/1.1
 * answers it); another PETREL_E* code: the connection must be closed. */
int petrel__h2_upgrade(petrel_req_t *req);

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
} petrel__h2_stats_t;
void petrel__h2_stats(petrel__h2_stats_t *st);

#endif /* PETREL_H2_H */
