/*
 * conn.h -- the transport (conn.c): a connected socket with its read buffer,
 * output queue, timer and arena, and the contract between it and the
 * protocol that speaks on it.
 *
 * The transport knows no protocol.  A connection holds a pointer to its
 * protocol's operations (c->ops) and that protocol's state (c->proto); the
 * transport calls only through c->ops, and petrel__conn_switch() hands a
 * connection, with the bytes already read, from one protocol to the next.
 * Every connection starts with the protocol its connection set names
 * (cs->first: the server layer's selection stage, which reads the first
 * bytes and switches to HTTP/1.1 or HTTP/2).  See doc/architecture.md.
 */
#ifndef PETREL_CONN_H
#define PETREL_CONN_H

#include "runtime/arena.h"
#include "runtime/settings.h"
#include "runtime/loop.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct petrel__conn petrel__conn_t;
typedef struct petrel__outq petrel__outq_t;

/* Why a connection closes: an argument of petrel__conn_close(), counted by
 * the metrics (petrel_connections_closed_total{reason}, in this order). */
typedef enum petrel__close {
    PETREL__CLOSE_CLIENT,  /* the client closed, or ended the exchange */
    PETREL__CLOSE_TIMEOUT, /* a header, keep-alive, send or idle timeout */
    PETREL__CLOSE_LIMIT,   /* a size limit (413, 414, 431, an output budget) */
    PETREL__CLOSE_RESET,   /* the connection broke (reset, write to a closed peer) */
    PETREL__CLOSE_DRAIN,   /* the server drained (SIGTERM, a reload) */
    PETREL__CLOSE_ERROR,   /* a protocol error of the client (400, a bad PROXY header) */
    PETREL__CLOSE_N
} petrel__close_t;

/* Output: a chain of pool chunks holding segments (copied bytes, references
 * to memory, file ranges).  A connection has one, written to its socket;
 * a protocol may fill others and splice them in later (a pipelined
 * response whose turn has not come yet). */
typedef struct petrel__outbuf {
    petrel__outq_t *head, *tail;
    size_t bytes; /* queued and not written yet (backpressure: petrel_ws_buffered) */
} petrel__outbuf_t;
typedef struct petrel__conns petrel__conns_t;

/*
 * What a protocol does with a connection.  Every callback runs from the
 * loop (never from inside another protocol's callback), with the connection
 * open (PETREL__CONN_CLOSED not set), except on_close.
 */
typedef struct petrel__proto_ops {
    const char *name; /* "http/1.1", "h2", "websocket", ... for logs */
    /* The connection became this protocol's (petrel__conn_switch, or a new
     * connection): bytes already read wait in the read buffer, and the
     * socket may have more. */
    void (*start)(petrel__conn_t *c);
    /* The socket is readable, or the peer hung up. */
    void (*on_read)(petrel__conn_t *c);
    /* The output queue became empty after waiting for the socket. */
    void (*on_written)(petrel__conn_t *c);
    /* Some of the output waiting for the socket was written, some is left
     * (c->out.bytes shrank): a protocol with backpressure callbacks checks
     * their marks.  NULL: not wanted. */
    void (*on_progress)(petrel__conn_t *c);
    /* The send timeout expired: c->timer on the connection set's send
     * queue (armed by petrel__conn_flush when output waits for the socket;
     * a protocol may arm it too) ran out.  The protocol decides (it may
     * close, with the reason a timeout's).  NULL: the connection closes.
     * The protocol's own timeouts are its own queues' callbacks
     * (petrel__tq_init, petrel__conn_expire). */
    void (*on_send_timeout)(petrel__conn_t *c);
    /* Graceful shutdown (SIGTERM, or a reload retiring the worker): finish
     * what is in flight, take nothing new, close.  `close_idle`: close at
     * once when nothing is in flight (SIGTERM); else a peer that may be
     * sending its next request right now is answered first (a reload).
     * Called for every connection, once per drain. */
    void (*drain)(petrel__conn_t *c, bool close_idle);
    /* The socket is closed (petrel__conn_close): give back c->proto.
     * Requests whose handlers still hold them are detached from the
     * connection by their protocol (petrel.h, "Waiting for work the handler started").  NULL:
     * nothing to give back. */
    void (*on_close)(petrel__conn_t *c);
} petrel__proto_ops_t;

/* Transport flags (c->flags); protocols keep their own in their state. */
enum {
    PETREL__CONN_PAUSED = 1 << 0,     /* input is not wanted now (the protocol waits) */
    PETREL__CONN_WANT_WRITE = 1 << 1, /* waiting for EPOLLOUT */
    PETREL__CONN_EOF = 1 << 2,        /* the peer shut down its side */
    PETREL__CONN_CLOSED = 1 << 3,     /* fd closed, memory freed at the end of the turn */
    PETREL__CONN_RBUF_LARGE = 1 << 4, /* rbuf is a malloc'ed buffer, not a chunk */
    PETREL__CONN_LINGER = 1 << 5,     /* half-closed, reading what the peer still sends */
    PETREL__CONN_REGISTERED = 1 << 6, /* the fd is in the epoll set */
    PETREL__CONN_TIMER = 1 << 7       /* in a timeout's callback: a close now is a timeout's */
};

struct petrel__conn {
    petrel__io_t io;
    petrel__timer_t timer;
    petrel__list_t link; /* cs->all, or the free list */
    petrel__conns_t *cs;
    const petrel__proto_ops_t *ops;
    void *proto; /* the protocol's state */
    unsigned flags;
    uint8_t why; /* 1 + petrel__close_t: why it will close, said ahead (the first stands) */
    /* Input: rbuf[0, rlen) holds bytes read, [rpos, rlen) not consumed yet.
     * The protocol owns [0, rpos): HTTP/1.1 parses in place and keeps the
     * spans of a request head there; the others consume through
     * petrel__conn_input()/petrel__conn_consume(). */
    char *rbuf;
    uint32_t rcap, rlen, rpos;
    petrel__outbuf_t out; /* written to the socket in order */
    /* Bytes of pool chunks that queued and held output may take before a
     * copy fails (PETREL_ENOMEM) and the connection closes: set by the
     * protocol when it takes the connection; 0 for none (a protocol that
     * bounds its own output: flow control, a send limit). */
    size_t out_limit;
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;
};

/* The connections of a worker and the policy they run under: set up by the
 * server layer (worker.c), read by the protocols. */
struct petrel__conns {
    petrel__list_t all;
    size_t n;
    const petrel__config_t *cfg;
    struct petrel_server *srv; /* opaque here; requests carry it */
    /* the routes its requests are dispatched to (opaque here: the framework's) */
    const struct petrel__router *router;
    const petrel__proto_ops_t *first; /* the protocol of a new connection */
    /* Offered a complete HTTP/1.1 request that asks for an upgrade, before
     * it is dispatched (the server layer's choice: HTTP/2's h2c upgrade;
     * NULL: none).  0 when it took the request, PETREL_ENOTFOUND to leave
     * it to HTTP/1.1, another PETREL_E* code to close the connection. */
    int (*upgrade)(struct petrel_req *req);
    /* the transport's own timers (c->timer): --send-timeout, and the
     * lingering close; a protocol's timers are on queues of its own */
    petrel__tq_t tq_send, tq_linger;
    bool draining;
    bool quiet;           /* not counted in the metrics (the admin listener's) */
    uint64_t next_req_id; /* the last request id given (see worker.c) */
    /* A connection went away: the server layer may accept again, or end
     * its drain when none is left. */
    void (*on_gone)(petrel__conns_t *cs);
};

/* Reads of one connection per readiness while each fills the read buffer:
 * then the other connections of the loop get their turn. */
#define PETREL__READS_PER_EVENT 4

/* How long a closing connection reads what its peer still sends. */
#define PETREL__LINGER_MS 2000

/* Register the transport's timer queues of `cs` (send, linger) with the
 * loop (0, or PETREL_ELIMIT). */
int petrel__conns_init(petrel__conns_t *cs, const petrel__config_t *cfg, struct petrel_server *srv,
                       const petrel__proto_ops_t *first);

/* A new connection on socket `fd` (non-blocking), from `peer`: it starts
 * with cs->first at once (the request is usually there already).  Returns
 * 0, or PETREL_ENOMEM (the fd is closed). */
int petrel__conn_open(petrel__conns_t *cs, int fd, const struct sockaddr *peer, socklen_t len);

/* Hand the connection to another protocol, with the bytes already read:
 * disarms c->timer (its queue is the previous protocol's), sets c->ops and
 * c->proto and calls ops->start, which arms the timer of its choice. */
void petrel__conn_switch(petrel__conn_t *c, const petrel__proto_ops_t *ops, void *state);

/* Read into the read buffer (taken from the pool when there is none).
 * Returns the number of bytes read, 0 for nothing now or the end of input
 * (PETREL__CONN_EOF is set then) or a full buffer, PETREL_EIO when the connection
 * is broken. */
int petrel__conn_read(petrel__conn_t *c);
/* The bytes read and not consumed yet, and their number in *n. */
static inline const char *petrel__conn_input(const petrel__conn_t *c, size_t *n)
{
    *n = c->rlen - c->rpos;
    return c->rbuf ? c->rbuf + c->rpos : "";
}
/* `n` bytes of the input are consumed; an emptied buffer starts over. */
static inline void petrel__conn_consume(petrel__conn_t *c, size_t n)
{
    c->rpos += (uint32_t)n;
    if (c->rpos == c->rlen)
        c->rpos = c->rlen = 0;
}
/* Whether the read buffer is full (a read may have left bytes unread). */
static inline bool petrel__conn_rfull(const petrel__conn_t *c)
{
    return c->rbuf && c->rlen == c->rcap;
}
/* Move the unconsumed input to the start of the buffer (room to read). */
void petrel__conn_compact(petrel__conn_t *c);
/* Move the read buffer into a malloc'ed one of `cap` bytes (a request head
 * larger than a chunk; given back with the buffer).  `moved(arg, lo, hi, d)`
 * is called before the old buffer goes, to move pointers into [lo, hi) by
 * d bytes.  0, or PETREL_ENOMEM (nothing changed). */
int petrel__conn_rbuf_grow(petrel__conn_t *c, size_t cap,
                           void (*moved)(void *arg, const char *lo, const char *hi, ptrdiff_t d),
                           void *arg);
/* Give back the read buffer when it holds nothing unconsumed. */
void petrel__conn_idle(petrel__conn_t *c);

/* Recompute the epoll events of c from its flags (PAUSED, EOF, LINGER,
 * WANT_WRITE): set the flags, then call this. */
void petrel__conn_update_events(petrel__conn_t *c);
static inline void petrel__conn_pause(petrel__conn_t *c, bool paused)
{
    unsigned want = paused ? PETREL__CONN_PAUSED : 0;
    if ((c->flags & PETREL__CONN_PAUSED) != want) {
        c->flags ^= PETREL__CONN_PAUSED;
        petrel__conn_update_events(c);
    }
}

/* Output into `ob` (the connection's own, &c->out, or one held back).
 * Every call returns 0, PETREL_ENOMEM (past the connection's budget: its
 * arena limit counts queued and held copies), or PETREL_EIO when the
 * connection is closed. */
int petrel__ob_copy(petrel__conn_t *c, petrel__outbuf_t *ob, const void *data, size_t len);
/* Reserve `len` bytes to format into; NULL on failure. */
char *petrel__ob_reserve(petrel__conn_t *c, petrel__outbuf_t *ob, size_t len);
void petrel__ob_commit(petrel__outbuf_t *ob, size_t len);
/* A reference to memory that stays valid until it is written. */
int petrel__ob_ref(petrel__conn_t *c, petrel__outbuf_t *ob, const void *data, size_t len);
int petrel__ob_fd(petrel__conn_t *c, petrel__outbuf_t *ob, int fd, off_t off, size_t len);
/* Append held output to the connection's queue (`ob` is empty after). */
void petrel__ob_splice(petrel__conn_t *c, petrel__outbuf_t *ob);
/* Drop held output. */
void petrel__ob_release(petrel__outbuf_t *ob);

/* The same into the connection's own queue. */
static inline int petrel__out_copy(petrel__conn_t *c, const void *data, size_t len)
{
    return petrel__ob_copy(c, &c->out, data, len);
}
static inline char *petrel__out_reserve(petrel__conn_t *c, size_t len)
{
    return petrel__ob_reserve(c, &c->out, len);
}
static inline void petrel__out_commit(petrel__conn_t *c, size_t len)
{
    petrel__ob_commit(&c->out, len);
}
static inline int petrel__out_ref(petrel__conn_t *c, const void *data, size_t len)
{
    return petrel__ob_ref(c, &c->out, data, len);
}
static inline int petrel__out_fd(petrel__conn_t *c, int fd, off_t off, size_t len)
{
    return petrel__ob_fd(c, &c->out, fd, off, len);
}
/* Write what is queued.  0 (the rest waits for EPOLLOUT, with the send
 * timeout armed), or PETREL_EIO when the connection must close. */
int petrel__conn_flush(petrel__conn_t *c);
/* Write `iov` now when nothing is queued before it, and queue a copy of
 * what the socket does not take (of all of it when something is queued).
 * 0, PETREL_ENOMEM, or PETREL_EIO (the connection must close). */
int petrel__conn_writev(petrel__conn_t *c, const struct iovec *iov, int n);
static inline bool petrel__conn_out_empty(const petrel__conn_t *c)
{
    return c->out.head == NULL;
}
/* Bytes queued and not yet written. */
static inline size_t petrel__out_bytes(const petrel__conn_t *c)
{
    return c->out.bytes;
}
/* The same for held output. */
static inline size_t petrel__ob_bytes(const petrel__outbuf_t *ob)
{
    return ob->bytes;
}

/* A timer queue's callback for c->timer: run `fn` on the connection of
 * `t`, so that a close it causes (now, or a lingering close it starts)
 * counts as a timeout's. */
static inline void petrel__conn_expire(petrel__timer_t *t, void (*fn)(petrel__conn_t *c))
{
    petrel__conn_t *c = container_of(t, petrel__conn_t, timer);
    c->flags |= PETREL__CONN_TIMER;
    fn(c);
    c->flags &= ~PETREL__CONN_TIMER;
}

/* Close now, for the reason `why`: PETREL__CLOSE_CLIENT when the exchange
 * ended (the drain's, while the set drains).  A reason said ahead
 * (petrel__conn_close_why) stands before it, and a close during a
 * timeout's callback (petrel__conn_expire) is a timeout's.  The struct is
 * freed at the end of the loop turn. */
void petrel__conn_close(petrel__conn_t *c, petrel__close_t why);
/* Say ahead why `c` is going to close, when the close comes later (an
 * error response written first, output that is refused); the first reason
 * said stands. */
static inline void petrel__conn_close_why(petrel__conn_t *c, petrel__close_t why)
{
    if (c->why == 0)
        c->why = (uint8_t)(why + 1);
}
/* Close after the response: half-close, then read and drop what the peer
 * still sends for a short while, so that it reads our response instead of a
 * reset (RFC 9112 §9.6).  The protocol has given back its state first: the
 * connection belongs to the transport from here on. */
void petrel__conn_linger(petrel__conn_t *c);
/* Close after a last write: half-close first, so that the peer reads what
 * was written (an h2 GOAWAY) before it sees the end. */
void petrel__conn_end(petrel__conn_t *c);

/* The peer's address as text ("192.0.2.1", "2001:db8::1", "unix"). */
const char *petrel__conn_peer_text(const petrel__conn_t *c, char *buf, size_t len);

/* Every connection of `cs`: ops->drain (one path for SIGTERM and reloads). */
void petrel__conns_drain(petrel__conns_t *cs, bool close_idle);
/* Close every connection of `cs` (the end of a drain, or of the worker). */
void petrel__conns_close_all(petrel__conns_t *cs);
/* Free the connections closed this turn (the loop's end of turn). */
void petrel__conns_reap(void);
/* Free structs kept for reuse beyond `keep` go back to the heap (each one
 * kept may pin a heap page; worker.c, "Memory that comes back"); returns
 * the bytes freed. */
size_t petrel__conns_trim(size_t keep);

/* The connections of this worker (set by the server layer), which a
 * socket of petrel_ws_client_new() joins. */
extern petrel__conns_t *petrel__conns_worker;
/* A connection on `fd`, a socket connected by us (an upstream's, after its
 * 101), that speaks `ops` from the start: `rest` (`n` bytes, at most a
 * chunk) is its first input.  Not started: petrel__conn_begin() gives it
 * its protocol state and starts it.  NULL when out of memory (`fd` is
 * closed in every case that fails). */
petrel__conn_t *petrel__conn_wrap(petrel__conns_t *cs, int fd, const petrel__proto_ops_t *ops,
                                  const void *rest, size_t n);
void petrel__conn_begin(petrel__conn_t *c, void *state);

/* Test hook: serve one connected socket in this process's loop. */
int petrel__conn_adopt(petrel__conns_t *cs, int fd);

/* The transport's options (--max-connections, the head, keep-alive and
 * send timeouts). */
extern const struct petrel__option_table petrel__conn_option_table;

#endif /* PETREL_CONN_H */
