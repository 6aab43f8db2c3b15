/*
 * http1.h -- HTTP/1.1 (http1.c, on llhttp).
 */
#ifndef PETREL_HTTP1_H
#define PETREL_HTTP1_H

#include "runtime/conn.h"
#include "protocols/proto.h"

/* The protocol of a connection that speaks HTTP/1.1 (the entry stage
 * switches to it): requests are parsed from the bytes in the read buffer. */
extern const petrel__proto_ops_t petrel__http1_ops;

/* Per worker: register HTTP/1.1's timer queues with the loop, their
 * timeouts from `cfg` (0, or PETREL_ELIMIT). */
int petrel__http1_worker_init(const petrel__config_t *cfg);

/*
 * A complete request carrying an Upgrade header field is offered to its
 * connection set's upgrade (cs->upgrade: HTTP/2's, for `Upgrade: h2c`)
 * before it is dispatched; one that is not taken is dispatched as any
 * other (a WebSocket handler calls petrel__http1_upgrade).
 */

/*
 * Every protocol switch of HTTP/1.1 goes through here (RFC 9110 §7.8):
 * queue "101 Switching Protocols" with `Upgrade: protocol`, `Connection:
 * Upgrade` and the `nfields` extra fields, and once the request's handling
 * returns, end its scope and hand the connection, with the bytes after the
 * request still in its read buffer, to `ops` with `state`
 * (petrel__conn_switch).  `req` stays valid until the caller returns.
 * Returns 0; PETREL_ESTATE when `req` is not an HTTP/1.1 request or already
 * answered; PETREL_ENOMEM (nothing was queued, `state` is still the
 * caller's).
 */
int petrel__http1_upgrade(petrel_req_t *req, const char *protocol, const petrel_header_t *fields,
                          size_t nfields, const petrel__proto_ops_t *ops, void *state);
/* After petrel__http1_upgrade() outside the request's handler (a waiting
 * request, answered from a callback): the request ends and the connection
 * switches now -- `req` is gone after.  Nothing from within the handler
 * (the switch follows its return). */
void petrel__http1_upgraded(petrel_req_t *req);

/* The connection that carries an HTTP/1.1 request (NULL when it is gone). */
petrel__conn_t *petrel__http1_conn(const petrel_req_t *req);

/* Counters of this worker's HTTP/1.1 side, for tests and benchmarks. */
typedef struct petrel__http1_stats {
    size_t states;          /* HTTP/1.1 states in use (connections with a request) */
    uint64_t state_mallocs; /* states malloc'ed (the free list was empty) */
    size_t slots;           /* request slots in use (parsed, in flight, held) */
    uint64_t slot_mallocs;  /* slots malloc'ed (the free list was empty) */
} petrel__http1_stats_t;
void petrel__http1_stats(petrel__http1_stats_t *st);
/* Free states and request slots kept for reuse beyond `keep` of each go
 * back to the heap (worker.c, "Memory that comes back"); returns the bytes
 * freed. */
size_t petrel__http1_trim(size_t keep);

#endif /* PETREL_HTTP1_H */
