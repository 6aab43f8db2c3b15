/*
 * h2-int.h -- what the h2 files (h2*.c) share: the connection and stream
 * state, their flags, and the functions one file calls in another.
 * Private to them; other layers include h2.h.
 */
#ifndef PETREL_H2_INT_H
#define PETREL_H2_INT_H

#include "protocols/h2.h"

#include <nghttp2/nghttp2.h>
#include <string.h>

#define SCRATCH 1024          /* request head bytes kept in the stream slot */
#define NHDR_INLINE 16        /* request headers in the slot; more go to the arena */
#define COPY_MAX 4096         /* bodies up to this are copied into DATA frames */
#define OUT_HIGH (256u << 10) /* output queued per connection before writing */
#define H2_DEFAULT_OUTPUT_BUDGET ((size_t)64 << 20) /* all connections of a worker */
#define SLOTS_KEPT 1024                             /* free stream slots kept per worker */
#define RST_RING 32    /* streams we reset lately (RFC 9113 §5.1.1 check) */
#define VCACHE 8       /* field values known valid, per connection (on_header) */
#define VCACHE_MAX 256 /* ... of this length at most */

/* stream flags */
enum {
    PETREL__H2S_HEAD_DONE = 1 << 0,  /* request head complete */
    PETREL__H2S_REQ_DONE = 1 << 1,   /* END_STREAM received */
    PETREL__H2S_DISPATCHED = 1 << 2, /* handed to the handler (or answered with an error) */
    PETREL__H2S_IN_HANDLER = 1 << 3,
    PETREL__H2S_CLOSED = 1 << 4,     /* nghttp2 closed the stream */
    PETREL__H2S_DEAD = 1 << 5,       /* orphan: the response can no longer be sent */
    PETREL__H2S_REFS = 1 << 6,       /* the output queue refers to the stream's memory or file */
    PETREL__H2S_DISCARD = 1 << 7,    /* ignore the rest of the request body */
    PETREL__H2S_READY = 1 << 8,      /* on h->ready */
    PETREL__H2S_RESET = 1 << 9,      /* reset by us for output over the budget: writes fail */
    PETREL__H2S_ABORTING = 1 << 10,  /* its abort callback is running: not freed under it */
    PETREL__H2S_XCONNECT = 1 << 11,  /* Extended CONNECT, :protocol websocket (RFC 8441 §4) */
    PETREL__H2S_TUNNEL = 1 << 12,    /* made a tunnel (petrel__h2_tunnel): DATA both ways */
    PETREL__H2S_PEER_END = 1 << 13,  /* a tunnel's peer sent END_STREAM (told after its bytes) */
    PETREL__H2S_TEND = 1 << 14,      /* a tunnel ended by us: END_STREAM after its output */
    PETREL__H2S_TDATA = 1 << 15,     /* a tunnel's DATA is queued in nghttp2 (read_body) */
    PETREL__H2S_TEOS = 1 << 16,      /* ... and its EOF is the stream's END_STREAM */
    PETREL__H2S_MALFORMED = 1 << 17, /* reset as malformed (RFC 9113 §8.1.1): never passed on */
    PETREL__H2S_TRAILERS = 1 << 18,  /* its trailer section is being received */
    PETREL__H2S_SBODY = 1 << 19,     /* dispatched at its head: its body read as it arrives */
};

/* what a request's head has had (RFC 9113 §8.3, checked by petrel: nghttp2's
 * HTTP messaging layer is off, nghttp2_option_set_no_http_messaging) */
enum {
    PETREL__H2P_METHOD = 1 << 0,
    PETREL__H2P_PATH = 1 << 1,
    PETREL__H2P_SCHEME = 1 << 2,
    PETREL__H2P_AUTHORITY = 1 << 3,
    PETREL__H2P_PROTOCOL = 1 << 4,
    PETREL__H2P_FIELD = 1 << 5, /* a regular field: no pseudo-header field after it */
    PETREL__H2P_HOST = 1 << 6,
    PETREL__H2P_CLEN = 1 << 7,     /* content-length */
    PETREL__H2P_PRIORITY = 1 << 8, /* a valid priority field (RFC 9218 §5) */
};

/* connection flags */
enum {
    PETREL__H2_BUSY = 1 << 0,     /* reading/dispatching: a flush follows anyway */
    PETREL__H2_MORE = 1 << 1,     /* the last flush stopped at OUT_HIGH */
    PETREL__H2_CLOSE = 1 << 2,    /* close once the output is written */
    PETREL__H2_DRAINING = 1 << 3, /* GOAWAY for a graceful shutdown sent */
    PETREL__H2_TIMEDOUT = 1 << 4, /* the idle/header timeout fired: GOAWAY sent */
    PETREL__H2_NOTICE = 1 << 5,   /* shutdown notice and PING sent, final GOAWAY not yet */
    PETREL__H2_ACTIVE = 1 << 6,   /* a stream closed since the last flush: not idle */
    PETREL__H2_OVER = 1 << 7,     /* output over the budget: GOAWAY sent, no new streams */
    PETREL__H2_WAITING = 1 << 8,  /* on out_waiting: the worker's output budget is spent */
    PETREL__H2_IDLE = 1 << 9,     /* no stream: the idle stage of the keep-alive timeout */
};

/* Blocks of the session that an idle connection need not keep resident. */
#define IDLE_BLKS 4
/* the frame buffer holds a frame of the smallest SETTINGS_MAX_FRAME_SIZE */
#define FRAMEBUF_MIN 16384

typedef struct h2conn h2conn_t;

/* A streamed body not yet framed: pool chunks, copied out as frames go. */
typedef struct sbuf {
    struct sbuf *next;
    uint32_t r, w;
    char data[];
} sbuf_t;
#define SBUF_CAP ((uint32_t)(PETREL_CHUNK_SIZE - sizeof(sbuf_t)))

typedef struct h2stream {
    petrel__list_t link;  /* h->streams, h->zombies, or the free list */
    petrel__list_t rlink; /* h->ready, or h->tunnels */
    petrel__list_t tlink; /* h->tready: a tunnel with something to tell its carrier */
    h2conn_t *h;          /* NULL once the connection is gone (orphan) */
    int32_t id;
    unsigned flags;
    uint16_t err; /* status to answer instead of dispatching */
    uint16_t hdr_cap;
    uint16_t pseudo;    /* P_* */
    uint8_t extpri;     /* the priority field's urgency | incremental << 7 */
    uint8_t ncookies;   /* cookie fields, to concatenate (up to 2) */
    uint16_t nfields;   /* fields of the head so far */
    uint64_t req_clen;  /* the request's content-length, if PETREL__H2P_CLEN */
    uint64_t data_in;   /* DATA payload received */
    const char *expect; /* the Expect field, if any */
    uint32_t hdr_bytes; /* RFC 9113 §6.5.2 accounting: name + value + 32 */
    uint32_t scr_used;
    size_t body_cap;
    size_t sent;   /* body bytes handed to nghttp2 */
    size_t nc_off; /* offset of the body bytes of the pending NO_COPY frame */
    uint64_t bytes_out;
    uint64_t body_start; /* ms: the request head complete, its body to come */
    sbuf_t *sb_head, *sb_tail;
    size_t sb_bytes;       /* streamed body bytes in sb_head..: not framed yet */
    const char *host;      /* the Host header, if any */
    petrel_str_t protocol; /* :protocol (RFC 8441 §4), if any */
    /* a tunnel (RFC 8441): its carrier, and the DATA it has not taken yet */
    const petrel__h2_tunnel_ops_t *tops;
    void *tctx;
    sbuf_t *in_head, *in_tail;
    size_t tframed;    /* output framed since its carrier was last told */
    int sb_end;        /* a streamed body's end to give after its DATA (1, PETREL_E*) */
    uint64_t sb_base;  /* its data_in when its reader last took it up (body_start then) */
    uint8_t stash_len; /* an incomplete frame header across two buffers */
    uint8_t stash[15];
    petrel_req_t req;
    petrel_resp_t resp;
    petrel_arena_t arena;
    char status[4];
    char clen[24];
    petrel_header_t hdrs[NHDR_INLINE];
    char scratch[SCRATCH];
} h2stream_t;

struct h2conn {
    petrel__pending_t pending; /* first: loop->pending entry */
    nghttp2_session *ngh;
    petrel__conn_t *c;
    h2stream_t *cur;        /* the stream whose request head is being received */
    petrel__list_t streams; /* live slots of this connection (open or orphan) */
    petrel__list_t ready;   /* complete requests to dispatch */
    petrel__list_t zombies; /* closed streams whose memory the output still reads */
    petrel__list_t tunnels; /* streams made tunnels (their rlink) */
    petrel__list_t tready;  /* of these, and Extended CONNECTs, with news (tlink) */
    size_t queued;          /* bytes serialized in this flush */
    size_t buffered;        /* streamed body bytes waiting in sbufs, all streams */
    size_t out_counted;     /* of the output queue, bytes counted in out_total */
    petrel__list_t wlink;   /* out_waiting */
    uint32_t nstreams;      /* streams open in nghttp2 */
    uint32_t ntunnels;      /* of these, tunnels (RFC 8441) */
    uint32_t nxconnect;     /* of these, Extended CONNECTs (tunnels or not yet) */
    uint32_t hdr_limit;     /* bytes of a request head (RFC 9113 §6.5.2 accounting) */
    uint32_t nrecv;         /* of these, requests not complete yet */
    int32_t max_seen;       /* highest stream id a client HEADERS used */
    int32_t scan_max;       /* highest HEADERS stream id the frame scanner saw */
    uint64_t opened;        /* bit k: stream scan_max - 2k was opened by the client */
    int32_t rst[RST_RING];  /* streams we sent RST_STREAM for, lately */
    unsigned rst_pos;
    uint32_t resets;    /* reset tokens left (--h2-max-resets, --h2-reset-rate) */
    uint64_t resets_ms; /* when they were last refilled */
    uint32_t fskip;     /* input bytes before the next frame header */
    uint8_t fhn;        /* bytes of that header gathered (withheld from nghttp2) */
    uint8_t fhd[14];    /* a frame header (and a PRIORITY frame's payload) */
    unsigned flags;
    /* paged blocks the session made when created (see h2_idle_release) */
    void *idle_blk[IDLE_BLKS];
    uint8_t nidle_blk;
    uint8_t framebuf; /* index of the outbound frame buffer, or IDLE_BLKS */
    /* the values of the last request's first fields, by position, that
     * were found valid, held (nghttp2_rcbuf_incref): HPACK hands the same
     * buffer for a value the client's table repeats, so the next request's
     * :authority or user-agent at the same place is not checked again.
     * This relies on nghttp2's inflater handing on the buffer of the
     * dynamic table's entry for an indexed field (undocumented; nghttp2
     * 1.52 does): check_h2.c:value_cache_rcbuf fails if it stops.  Worth
     * 240 of 9,247 instructions per h2c request, 2.6 % (doc/benchmarks.md). */
    nghttp2_rcbuf *vok[VCACHE];
    uint8_t vok_kind[VCACHE];
};

/* The h2 files call each other bottom up, without circles
 * (tests/check_layers.py): the files below h2.c (the session) call only
 * each other, in the order of the sections below, and what they need of
 * the session's state is inline here; what stands on the session
 * (h2-upgrade.c) comes last. */

/* Leave the connection's output for the end of the turn. */
static inline void petrel__h2_schedule(h2conn_t *h)
{
    if (h->flags & PETREL__H2_BUSY)
        return; /* the read path flushes when it is done */
    if (list_empty(&h->pending.node))
        list_append(&petrel__loop->pending, &h->pending.node);
}

/* Bytes for the request head: the slot's scratch area, then the arena. */
static inline char *petrel__h2_scratch_dup(h2stream_t *s, const uint8_t *p, size_t n)
{
    char *d;
    if (s->scr_used + n + 1 <= SCRATCH) {
        d = s->scratch + s->scr_used;
        s->scr_used += (uint32_t)(n + 1);
    } else if ((d = petrel_arena_alloc(&s->arena, n + 1, 1)) == NULL) {
        return NULL;
    }
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

/* Field names in lowercase (RFC 9113 §8.2.1). */
static inline void petrel__h2_lower(petrel_str_t *n)
{
    char *p = (char *)n->ptr;
    for (size_t i = 0; i < n->len; i++)
        if (p[i] >= 'A' && p[i] <= 'Z')
            p[i] = (char)(p[i] | 0x20);
}

/* h2-buf.c: chains of pool chunks */

/* Streamed bytes in chains of pool chunks (a stream's output, a tunnel's
 * input): append (the bytes appended: fewer when out of memory), drop the
 * head chunk once read, drop all. */
size_t petrel__h2_chain_append(sbuf_t **head, sbuf_t **tail, const void *data, size_t len);
/* h2.c: nghttp2's allocator, the size classes of sizeclass.c (the server's
 * sessions and the upstream client's, h2-client.c). */
extern nghttp2_mem petrel__h2_mem;

void petrel__h2_chain_pop(sbuf_t **head, sbuf_t **tail);
void petrel__h2_chain_free(sbuf_t **head, sbuf_t **tail);
/* A stream's output: queue bytes (0 or PETREL_ENOMEM); take up to `length`. */
int petrel__h2_sbuf_append(h2stream_t *s, const void *data, size_t len);
size_t petrel__h2_sbuf_take(h2stream_t *s, uint8_t *buf, size_t length);
/* Drop the streamed output not framed yet. */
void petrel__h2_sbuf_free_all(h2stream_t *s);

/* h2-budget.c: the output budget */

/* Whether `h` may frame more output now: 0, or why not (1: its own queue
 * is full, 2: the worker's budget is spent). */
int petrel__h2_out_full(const h2conn_t *h);
/* Wait for room in the worker's budget. */
void petrel__h2_out_wait(h2conn_t *h);
/* The worker's count of `h`'s queue is now `now` bytes. */
void petrel__h2_out_sync(h2conn_t *h, size_t now);
/* True when `len` more streamed bytes on `s` pass the connection's cap:
 * the stream was reset. */
bool petrel__h2_out_refuse(h2stream_t *s, size_t len);

/* h2-scan.c: the frame scanner and the reset limits */

/* Hand input to nghttp2, split before the frames petrel judges first. */
int petrel__h2_recv_frames(h2conn_t *h, const uint8_t *p, size_t n);
/* nghttp2's on_begin_frame callback: stream ids that go backwards. */
int petrel__h2_on_begin_frame(nghttp2_session *ngh, const nghttp2_frame_hd *hd, void *ud);
/* We sent RST_STREAM on stream `id`: its frames are ignored for a while. */
void petrel__h2_remember_reset(h2conn_t *h, int32_t id);
/* One reset out of the bucket; false when it is empty (ENHANCE_YOUR_CALM). */
bool petrel__h2_reset_token(h2conn_t *h);
/* End the connection with ENHANCE_YOUR_CALM (RFC 9113 §7). */
void petrel__h2_calm_down(h2conn_t *h, const char *what);

/* h2-fields.c: RFC 9113 §8, the request's fields */

/* nghttp2's on_header callback: each field checked and kept. */
int petrel__h2_on_header(nghttp2_session *ngh, const nghttp2_frame *frame, nghttp2_rcbuf *rname,
                         nghttp2_rcbuf *rvalue, uint8_t flags, void *ud);
/* The request head is complete: checked as a whole; method, path, body buffer. */
void petrel__h2_head_done(h2conn_t *h, h2stream_t *s, bool end_stream);
/* At the end of a request, its DATA adds up to its content-length (else it
 * is malformed: false). */
bool petrel__h2_body_complete(h2conn_t *h, h2stream_t *s);
/* A malformed request: RST_STREAM PROTOCOL_ERROR, never passed on. */
void petrel__h2_malformed(h2conn_t *h, h2stream_t *s, const char *why);
/* Let go of the values held by the cache of values known valid. */
void petrel__h2_values_drop(h2conn_t *h);

/* h2-tunnel.c: RFC 8441 tunnels */

/* The tunnel has news for its carrier (input, the peer's end, output
 * framed): tunnels_service() comes to it. */
static inline void tunnel_mark(h2conn_t *h, h2stream_t *s)
{
    if (list_empty(&s->tlink))
        list_append(&h->tready, &s->tlink);
}

/* DATA of a request whose body is read as it arrives (on_data_chunk's);
 * its END_STREAM (on_frame_recv's); its reader may take more (body_start,
 * body_pause); the stream closes. */
int petrel__h2_sbody_data(h2conn_t *h, h2stream_t *s, const uint8_t *data, size_t len);
void petrel__h2_sbody_end(h2conn_t *h, h2stream_t *s);
void petrel__h2_sbody_kick(petrel_req_t *req);
void petrel__h2_sbody_gone(h2stream_t *s);
/* A streamed body past --body-timeout while its reader takes it: the reader
 * gets PETREL_EIO, the request 408 unless answered, else the stream is cut. */
void petrel__h2_sbody_late(h2conn_t *h, h2stream_t *s);

/* DATA on an Extended CONNECT stream (on_data_chunk's). */
int petrel__h2_tunnel_data(h2conn_t *h, h2stream_t *s, const uint8_t *data, size_t len);
/* The tunnel's output for a DATA frame (read_body's). */
ssize_t petrel__h2_tunnel_read(h2stream_t *s, uint8_t *buf, size_t length, uint32_t *data_flags);
/* Tell the tunnels with news, after a read or a flush. */
void petrel__h2_tunnels_service(h2conn_t *h);
/* The stream closes: its carrier's last call. */
void petrel__h2_tunnel_gone(h2stream_t *s);

/* h2.c: the session (for h2-upgrade.c) */

/* A stream slot for stream `id` of `h`, and its return. */
h2stream_t *petrel__h2_stream_new(h2conn_t *h, int32_t id);
void petrel__h2_stream_free(h2stream_t *s);
/* The stream's request is complete: to be dispatched after the read. */
void petrel__h2_make_ready(h2conn_t *h, h2stream_t *s);
/* A session for `c` (not attached yet: c->proto is set by the switch), and
 * its end before it was attached. */
h2conn_t *petrel__h2_session_new(petrel__conn_t *c);
void petrel__h2_session_free(h2conn_t *h);

#endif /* PETREL_H2_INT_H */
