/*
 * h2.c -- HTTP/2 over cleartext (RFC 9113) on nghttp2: the session.
 *
 * The h2 files (h2*.c, h2-int.h) are the one unit that touches nghttp2,
 * one file per job:
 *   h2.c         the session: nghttp2's callbacks, the stream slots, the
 *                dispatch of requests, the response operations and their
 *                data providers, framing and flushing, timeouts, shutdown
 *   h2-fields.c  RFC 9113 §8: the request's fields, checked by petrel
 *   h2-scan.c    the frame scanner ahead of nghttp2, the reset limits
 *   h2-tunnel.c  RFC 8441 Extended CONNECT tunnels
 *   h2-budget.c  the output budget of the worker's h2 connections
 *   h2-buf.c     streamed bytes in chains of pool chunks
 *   h2-upgrade.c the h2c upgrade from HTTP/1.1 (RFC 7540 §3.2)
 * They call each other bottom up (h2-int.h says the order).
 *
 * A connection comes here (petrel__h2_ops) when its first bytes are the
 * connection preface (prior knowledge: the entry stage switches it) or after
 * an HTTP/1.1 request with `Upgrade: h2c` (petrel__h2_upgrade, the
 * connection set's upgrade).  c->proto is then our state (h2conn_t).
 *
 * The path of a request:
 *   read -> the frame scanner (petrel__h2_recv_frames: the checks nghttp2
 *   skips in petrel's modes, doc/conformance.md) -> nghttp2_session_mem_recv
 *   -> callbacks fill a stream slot (the petrel_req_t with its own arena;
 *   each field checked by petrel__h2_on_header) -> at END_STREAM the stream
 *   joins the `ready` list -> after mem_recv returns, each ready request is
 *   dispatched to its handler (outside nghttp2's callbacks, like http1.c
 *   pauses llhttp) -> the handler's response is submitted
 *   (nghttp2_submit_response with a data provider) ->
 *   nghttp2_session_mem_send frames everything queued into the
 *   connection's output queue -> ONE write for all the streams.
 *
 * Output is gathered per connection and per loop turn: after a read, the
 * responses of every request of that read go out with one writev; responses
 * produced outside a read (a streamed body written from a timer, another
 * connection's handler) put the connection on loop->pending, flushed once at
 * the end of the turn (worker.c's on_tick).
 *
 * Why this file is over 1,000 lines: what is left in it works on one
 * state, the session and its streams, from nghttp2's callbacks: a
 * stream's slot is made in one callback, filled in others, answered
 * through the response operations, framed by the data providers and
 * freed in on_stream_close or by the connection's end, and each of these
 * steps reads the flags the others set.  The jobs that stand on their own
 * are in the files above.
 *
 * Memory:
 *   - h2conn_t is malloc'ed when the connection turns to h2 and freed, with
 *     the session, when the connection closes (h2_on_close): the
 *     connection arena stays empty, so an idle h2 connection holds no pool
 *     chunk.
 *   - nghttp2 allocates through a counting nghttp2_mem: a per-worker
 *     size-class free list in front of malloc (it frees and reallocates
 *     constantly, so never a bump arena).
 *   - Idle: the conn struct, the h2conn_t and the nghttp2 session; the read
 *     buffer goes back to the pool after each read.  Idle PETREL__IDLE_MS,
 *     the pages of the session's frame buffer and empty stream map go back
 *     to the kernel (h2_idle_release).
 *   - A stream is a slot from a per-worker free list (malloc'ed only while
 *     the list is empty): the request, the response, the stream arena and a
 *     1 KiB scratch area for the request head.  The arena takes a pool chunk
 *     only when something allocates from it (a body, a response header, a
 *     long head), so GET /hello allocates nothing.
 *   - A stream slot is recycled when nghttp2 closes the stream, except (a)
 *     when frames of its body that refer to its memory (or its file) are
 *     still in the output queue: it waits on the `zombies` list until the
 *     queue is empty; (b) when its handler is still streaming a response
 *     (the peer reset the stream, or the connection closed): it becomes an
 *     orphan, petrel_stream_write() returns PETREL_EIO, and
 *     petrel_stream_end() frees it.
 */
#include "protocols/h2-int.h"
#include "runtime/options.h"

#include "protocols/http1.h"
#include "framework/router.h"
#include "runtime/sizeclass.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define H2_DEFAULT_MAX_STREAMS 128
#define H2_DEFAULT_WINDOW (1u << 20)

static const petrel_proto_t h2_proto;
static void h2_flush(h2conn_t *h);

/* ------------------------------------------------------------------------ */
/* nghttp2's allocator                                                      */

/* nghttp2 allocates and frees a few small blocks per stream (the stream,
 * outbound items, the copied header array, HPACK entries): the size-class
 * free lists of sizeclass.c recycle them, like the chunk pool, so that
 * after warm-up the h2 request path makes no heap call.
 *
 * The blocks of a page or more that a session makes when it is created
 * are paged blocks of sizeclass.c, noted in the h2conn_t (session_new):
 * the stream map (4 KiB, all zeros while no stream is open) and the
 * outbound frame buffer (nghttp2 1.52's aob.framebufs: one chunk of 9 + 1
 * + 16384 bytes, kept for the life of the session and reset after each
 * frame is sent: nothing in it outlives the frame).  An idle connection
 * gives their pages back (h2_idle_release). */
static void *mem_malloc(size_t size, void *ud)
{
    (void)ud;
    return petrel__sc_malloc(size);
}

static void mem_free(void *p, void *ud)
{
    (void)ud;
    petrel__sc_free(p);
}

static void *mem_calloc(size_t n, size_t size, void *ud)
{
    (void)ud;
    return petrel__sc_calloc(n, size);
}

static void *mem_realloc(void *p, size_t size, void *ud)
{
    (void)ud;
    return petrel__sc_realloc(p, size);
}

nghttp2_mem petrel__h2_mem = {NULL, mem_malloc, mem_free, mem_calloc, mem_realloc};

static petrel__h2_stats_t stats;
petrel__h2_timers_t petrel__h2_timers;

void petrel__h2_stats(petrel__h2_stats_t *st)
{
    petrel__sc_stats_t sc;
    petrel__sc_stats(&sc);
    *st = stats;
    st->ng_ops = sc.ops;
    st->ng_calls = sc.calls;
    st->ng_bytes = sc.bytes;
    st->conn_bytes = sizeof(h2conn_t);
}

/* ------------------------------------------------------------------------ */
/* Stream slots                                                             */

static petrel__list_t slot_free;
static size_t slot_nfree;

h2stream_t *petrel__h2_stream_new(h2conn_t *h, int32_t id)
{
    h2stream_t *s;
    if (slot_free.next == NULL)
        list_init(&slot_free);
    if (!list_empty(&slot_free)) {
        s = container_of(slot_free.next, h2stream_t, link);
        list_unlink(&s->link);
        slot_nfree--;
    } else {
        s = malloc(sizeof(*s));
        if (s == NULL)
            return NULL;
        stats.slot_mallocs++;
    }
    stats.streams++;
    petrel__conns_t *cs = h->c->cs;
    /* the response, the arena and the scratch are set up by their own
     * init functions or written before they are read */
    memset(s, 0, offsetof(h2stream_t, resp));
    list_init(&s->rlink);
    list_init(&s->tlink);
    list_append(&h->streams, &s->link);
    s->h = h;
    s->id = id;
    s->hdr_cap = NHDR_INLINE;
    petrel__arena_init(&s->arena, &petrel__pool, petrel__conn_budget(cs->cfg));
    petrel_req_t *r = &s->req;
    r->version = 20;
    r->headers = s->hdrs;
    r->arena = &s->arena;
    r->server = cs->srv;
    r->id = ++cs->next_req_id;
    r->_proto = &h2_proto;
    r->_conn = h->c;
    r->_resp = &s->resp;
    petrel__resp_init(&s->resp, r);
    petrel__req_started(r, 0);
    petrel__count(PETREL__C_H2_STREAMS, 1);
    petrel__gauge_add(PETREL__G_H2_STREAMS_OPEN, 1);
    return s;
}

/* Give the slot back: its arena (cleanups first: a file is closed there). */
void petrel__h2_stream_free(h2stream_t *s)
{
    list_unlink(&s->link);
    list_unlink(&s->rlink);
    list_unlink(&s->tlink);
    if (s->sb_head)
        petrel__h2_sbuf_free_all(s);
    if (s->in_head)
        petrel__h2_chain_free(&s->in_head, &s->in_tail);
    stats.arena_mallocs += s->arena.mallocs;
    petrel__arena_clear(&s->arena);
    stats.streams--;
    petrel__gauge_add(PETREL__G_H2_STREAMS_OPEN, -1);
    if (slot_nfree < SLOTS_KEPT) {
        list_append(&slot_free, &s->link);
        slot_nfree++;
    } else {
        free(s);
    }
}

size_t petrel__h2_trim(size_t keep)
{
    size_t n = 0;
    for (; slot_nfree > keep; n++) {
        petrel__list_t *l = slot_free.next;
        list_unlink(l);
        slot_nfree--;
        free(container_of(l, h2stream_t, link));
    }
    return n * sizeof(h2stream_t);
}

static void zombies_release(h2conn_t *h)
{
    while (!list_empty(&h->zombies))
        petrel__h2_stream_free(container_of(h->zombies.next, h2stream_t, link));
}

static void on_pending(petrel__pending_t *p)
{
    h2_flush((h2conn_t *)p);
}

/* ------------------------------------------------------------------------ */
/* The request                                                              */

/* The open stream `id` of the connection, or NULL: nghttp2's stream user
 * data.  (A table of open streams in front of nghttp2's stream map saved
 * 68 of 9,013 instructions per h2c request, 0.75 %: not kept.) */
static inline h2stream_t *stream_of(h2conn_t *h, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h->ngh, id);
}

static int on_begin_headers(nghttp2_session *ngh, const nghttp2_frame *frame, void *ud)
{
    h2conn_t *h = ud;
    h->cur = NULL;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        /* the trailer section of a request: checked (§8.1), not kept (as
         * in HTTP/1.1) */
        h2stream_t *s = stream_of(h, frame->hd.stream_id);
        if (s && !(s->flags & PETREL__H2S_MALFORMED) && !(s->flags & PETREL__H2S_XCONNECT)) {
            s->flags |= PETREL__H2S_TRAILERS;
            h->cur = s;
        }
        return 0;
    }
    h2stream_t *s = petrel__h2_stream_new(h, frame->hd.stream_id);
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
    nghttp2_session_set_stream_user_data(ngh, s->id, s);
    h->nstreams++;
    h->nrecv++;
    h->cur = s;
    return 0;
}

void petrel__h2_make_ready(h2conn_t *h, h2stream_t *s)
{
    if (!(s->flags & (PETREL__H2S_READY | PETREL__H2S_DISPATCHED))) {
        s->flags |= PETREL__H2S_READY;
        list_append(&h->ready, &s->rlink);
    }
}

static void req_done(h2conn_t *h, h2stream_t *s)
{
    if (s->flags & PETREL__H2S_REQ_DONE)
        return;
    s->flags |= PETREL__H2S_REQ_DONE;
    h->nrecv--;
    petrel__h2_make_ready(h, s);
}

/* RFC 9113 §6.8: the second GOAWAY of a graceful shutdown, with the last
 * stream processed; streams up to it complete, later ones are refused. */
static void final_goaway(h2conn_t *h)
{
    h->flags &= ~PETREL__H2_NOTICE;
    nghttp2_submit_goaway(h->ngh, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h->ngh), NGHTTP2_NO_ERROR, NULL,
                          0);
}

static int on_frame_recv(nghttp2_session *ngh, const nghttp2_frame *frame, void *ud)
{
    h2conn_t *h = ud;
    bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
        h2stream_t *s = h->cur;
        if (s == NULL || s->id != frame->hd.stream_id)
            s = stream_of(h, frame->hd.stream_id);
        h->cur = NULL;
        if (s == NULL || (s->flags & PETREL__H2S_MALFORMED))
            return 0;
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
            /* §8.1: a trailer section ends the stream */
            s->flags &= ~PETREL__H2S_TRAILERS;
            if (!end) {
                petrel__h2_malformed(h, s, "a trailer section without END_STREAM");
                return 0;
            }
        } else {
            petrel__h2_head_done(h, s, end);
            if (s->flags & PETREL__H2S_MALFORMED)
                return 0;
            if (s->pseudo & PETREL__H2P_PRIORITY) {
                /* RFC 9218 §5: the priority field, as nghttp2's own
                 * messaging layer would have applied it */
                nghttp2_extpri pri = {s->extpri & 7, s->extpri >> 7};
                nghttp2_session_change_extpri_stream_priority(ngh, s->id, &pri, 0);
            }
            if (s->err) {
                petrel__h2_make_ready(h, s); /* answer at once; the body is not read */
            } else if (unlikely(!end && petrel__router_streams(h->c->cs->router)) &&
                       !(s->flags & PETREL__H2S_XCONNECT) &&
                       petrel__req_streams(&s->req, h->c->cs->router)) {
                /* PETREL_BODY_STREAM: dispatched now, its DATA given as it
                 * comes (h2-tunnel.c) */
                petrel__rbody_t *b = &s->resp.rbody;
                b->state = PETREL__RB_WAIT;
                b->paused = b->whole = false;
                b->end = 0;
                b->length = (s->pseudo & PETREL__H2P_CLEN) ? (int64_t)s->req_clen : -1;
                s->sb_end = 0;
                s->sb_base = 0;
                s->flags |= PETREL__H2S_SBODY;
                petrel__h2_make_ready(h, s);
            } else if (s->flags & PETREL__H2S_XCONNECT) {
                /* RFC 8441 §4: the head is the whole request; DATA is the
                 * tunnel's (buffered until the handler answers) */
                if (end)
                    s->flags |= PETREL__H2S_PEER_END;
                req_done(h, s);
            }
        }
        if (end && (s->flags & PETREL__H2S_SBODY)) {
            petrel__h2_sbody_end(h, s);
            req_done(h, s);
            break;
        }
        if (end && !(s->flags & PETREL__H2S_XCONNECT) && !petrel__h2_body_complete(h, s))
            return 0;
        if (end)
            req_done(h, s);
        break;
    }
    case NGHTTP2_DATA:
        if (end) {
            h2stream_t *s = stream_of(h, frame->hd.stream_id);
            if (s && (s->flags & PETREL__H2S_XCONNECT)) {
                s->flags |= PETREL__H2S_PEER_END; /* told to the tunnel after its bytes */
                tunnel_mark(h, s);
            } else if (s && (s->flags & PETREL__H2S_SBODY)) {
                petrel__h2_sbody_end(h, s);
                req_done(h, s);
            } else if (s && !(s->flags & PETREL__H2S_MALFORMED) && petrel__h2_body_complete(h, s)) {
                req_done(h, s);
            }
        }
        break;
    case NGHTTP2_RST_STREAM:
        if (!petrel__h2_reset_token(h))
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        break;
    case NGHTTP2_PING:
        /* the ACK of the PING sent with the shutdown notice: every stream
         * the client opened before it saw the notice has arrived */
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && (h->flags & PETREL__H2_NOTICE))
            final_goaway(h);
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ngh, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    h2conn_t *h = ud;
    h2stream_t *s = stream_of(h, id);
    if (s && (s->flags & (PETREL__H2S_XCONNECT | PETREL__H2S_SBODY))) {
        if (s->flags & PETREL__H2S_SBODY)
            return petrel__h2_sbody_data(h, s, data, len);
        return petrel__h2_tunnel_data(h, s, data, len);
    }
    /* the window of a request body opens as it is read (RFC 9113 §5.2:
     * WINDOW_UPDATE is ours to send: nghttp2_option_set_no_auto_window_update) */
    nghttp2_session_consume(ngh, id, len);
    if (s == NULL || (s->flags & PETREL__H2S_MALFORMED))
        return 0;
    s->data_in += len;
    if ((s->pseudo & PETREL__H2P_CLEN) && s->data_in > s->req_clen && !s->err) {
        petrel__h2_malformed(h, s, "DATA beyond content-length");
        return 0;
    }
    if ((s->flags & PETREL__H2S_DISCARD) || s->err || s->resp.sent)
        return 0;
    petrel_req_t *r = &s->req;
    size_t need = r->body.len + len, max = h->c->cs->cfg->max_body_size;
    if (need > s->body_cap) {
        if (need > max) {
            s->err = 413;
            s->flags |= PETREL__H2S_DISCARD;
            petrel__h2_make_ready(h, s);
            return 0;
        }
        /* a body without content-length (gRPC's): a quarter chunk first,
         * then whole pool chunks up to 16 KiB, then doubling */
        size_t ncap = s->body_cap ? s->body_cap * 2 : PETREL_CHUNK_SIZE / 4 - 2;
        while (ncap < need)
            ncap *= 2;
        if (ncap > max)
            ncap = max;
        size_t size = ncap + 1;
        char *nb = petrel__arena_alloc_buf(&s->arena, &size);
        ncap = size - 1;
        if (nb == NULL) {
            s->err = 413;
            s->flags |= PETREL__H2S_DISCARD;
            petrel__h2_make_ready(h, s);
            return 0;
        }
        if (r->body.len)
            memcpy(nb, r->body.ptr, r->body.len);
        r->body.ptr = nb;
        s->body_cap = ncap;
    }
    memcpy((char *)r->body.ptr + r->body.len, data, len);
    r->body.len += len;
    return 0;
}

static int on_frame_send(nghttp2_session *ngh, const nghttp2_frame *frame, void *ud)
{
    h2conn_t *h = ud;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        petrel__h2_remember_reset(h, frame->hd.stream_id);
        return 0;
    }
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && (h->nrecv || h->nxconnect) &&
        (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS)) {
        /* RFC 9113 §8.1: the response is complete before the request: ask
         * the client to stop sending, without error. */
        h2stream_t *s = stream_of(h, frame->hd.stream_id);
        /* (an Extended CONNECT answered without a tunnel counts as a
         * request still arriving; a tunnel ends with END_STREAM both ways,
         * never with a reset: RFC 8441 §5) */
        if (s && (!(s->flags & PETREL__H2S_REQ_DONE) ||
                  (s->flags & (PETREL__H2S_XCONNECT | PETREL__H2S_TUNNEL | PETREL__H2S_PEER_END)) ==
                      PETREL__H2S_XCONNECT))
            nghttp2_submit_rst_stream(ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ngh, int32_t id, uint32_t error_code, void *ud)
{
    (void)error_code;
    h2conn_t *h = ud;
    h2stream_t *s = stream_of(h, id);
    if (s == NULL)
        return 0;
    if (!(s->flags & PETREL__H2S_REQ_DONE))
        h->nrecv--;
    h->nstreams--;
    if (s->flags & PETREL__H2S_TUNNEL)
        h->ntunnels--;
    if (s->flags & PETREL__H2S_XCONNECT)
        h->nxconnect--;
    h->flags |= PETREL__H2_ACTIVE;
    s->flags |= PETREL__H2S_CLOSED | PETREL__H2S_REQ_DONE;
    list_unlink(&s->rlink);
    s->flags &= ~PETREL__H2S_READY;
    if (h->cur == s)
        h->cur = NULL;
    if (s->flags & PETREL__H2S_XCONNECT)
        petrel__h2_tunnel_gone(s); /* (its lists and input are a tunnel's only) */
    if (unlikely(s->flags & PETREL__H2S_SBODY)) {
        petrel__h2_sbody_gone(s);           /* a body not complete: PETREL_EIO */
        s->flags &= ~PETREL__H2S_MALFORMED; /* (a bad trailer): it was passed on */
    }
    /* a malformed request was never passed on: neither logged nor counted */
    if (!(s->flags & PETREL__H2S_MALFORMED)) {
        if ((s->flags & PETREL__H2S_DISPATCHED) && !s->resp.ended && !s->resp.sent)
            s->resp.status = 499; /* the client left before the response: as nginx logs it */
        if (s->resp.sent || (s->flags & PETREL__H2S_DISPATCHED))
            petrel__req_finished(&s->req, s->bytes_out);
    }
    if ((s->flags & (PETREL__H2S_DISPATCHED | PETREL__H2S_MALFORMED)) == PETREL__H2S_DISPATCHED) {
        /* a handler still at work (waiting, streaming): it is told, and the
         * slot stays until it lets go (h2_release) */
        s->flags |= PETREL__H2S_ABORTING;
        bool held = petrel__req_abort(&s->req);
        s->flags &= ~PETREL__H2S_ABORTING;
        if (held || (s->flags & PETREL__H2S_IN_HANDLER)) {
            s->flags |= PETREL__H2S_DEAD;
            return 0;
        }
    }
    if ((s->flags & PETREL__H2S_REFS) && !petrel__conn_out_empty(h->c)) {
        list_unlink(&s->link);
        list_append(&h->zombies, &s->link);
        return 0;
    }
    petrel__h2_stream_free(s);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The response                                                             */

/* Fields a handler may add that HTTP/2 forbids (RFC 9113 §8.2.2); petrel's
 * own (connection, keep-alive, upgrade, transfer-encoding) are refused by
 * response.c already. */
static bool connection_specific(const petrel_str_t *n)
{
    return (n->len == 16 && memcmp(n->ptr, "proxy-connection", 16) == 0) ||
           (n->len == 2 && memcmp(n->ptr, "te", 2) == 0);
}

#define NV_STATIC (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)
static inline void nv_set(nghttp2_nv *nv, const char *n, size_t nl, const char *v, size_t vl,
                          uint8_t fl)
{
    nv->name = (uint8_t *)n;
    nv->namelen = nl;
    nv->value = (uint8_t *)v;
    nv->valuelen = vl;
    nv->flags = fl;
}
#define NV(nv, n, v, vl, fl) nv_set(nv, n, sizeof(n) - 1, v, vl, fl)

/* Trailers as a last HEADERS frame; false when there are none. */
static bool submit_trailers(h2stream_t *s)
{
    size_t n = 0;
    for (petrel__rheader_t *t = s->resp.trailers; t; t = t->next)
        n++;
    if (n == 0)
        return false;
    nghttp2_nv stackv[16], *nv = stackv;
    if (n > 16 && (nv = petrel_arena_alloc(&s->arena, n * sizeof(*nv), 0)) == NULL)
        return false;
    size_t i = 0;
    for (petrel__rheader_t *t = s->resp.trailers; t; t = t->next) {
        petrel__h2_lower(&t->name);
        if (connection_specific(&t->name))
            continue;
        nv[i].name = (uint8_t *)t->name.ptr;
        nv[i].namelen = t->name.len;
        nv[i].value = (uint8_t *)t->value.ptr;
        nv[i].valuelen = t->value.len;
        nv[i].flags = NV_STATIC;
        i++;
    }
    return i && nghttp2_submit_trailer(s->h->ngh, s->id, nv, i) == 0;
}

static ssize_t read_body(nghttp2_session *ngh, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *src, void *ud)
{
    (void)ngh, (void)id, (void)ud;
    h2stream_t *s = src->ptr;
    petrel_resp_t *r = &s->resp;
    size_t n;
    if (s->flags & PETREL__H2S_TUNNEL)
        return petrel__h2_tunnel_read(s, buf, length, data_flags);
    if (r->body_kind == PETREL__BODY_STREAM) {
        n = petrel__h2_sbuf_take(s, buf, length);
        if (s->sb_head == NULL && r->ended) {
            *data_flags |= NGHTTP2_DATA_FLAG_EOF;
            if (s->req.method != PETREL_HEAD && submit_trailers(s))
                *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        } else if (n == 0) {
            return NGHTTP2_ERR_DEFERRED; /* petrel_stream_write resumes it */
        }
        return (ssize_t)n;
    }
    n = r->len - s->sent;
    if (n > length)
        n = length;
    if (r->body_kind == PETREL__BODY_MEM) {
        if (r->len > COPY_MAX) {
            *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
            s->nc_off = s->sent;
        } else {
            memcpy(buf, (const char *)r->body + s->sent, n);
        }
    } else if (r->len > COPY_MAX) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY; /* sendfile from the output queue */
        s->nc_off = s->sent;
    } else {
        ssize_t k;
        do
            k = pread(r->fd, buf, n, r->offset + (off_t)s->sent);
        while (k < 0 && errno == EINTR);
        if (k != (ssize_t)n) {
            petrel_log(PETREL_LOG_ERROR, "request %llu: reading the body file: %s",
                       (unsigned long long)s->req.id, k < 0 ? strerror(errno) : "short read");
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
        }
    }
    s->sent += n;
    if (s->sent == r->len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* A NO_COPY DATA frame: its header copied, its payload referred to (memory
 * that lives as long as the stream slot, or the file: sendfile). */
static int send_data(nghttp2_session *ngh, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *src, void *ud)
{
    (void)ngh, (void)frame;
    h2conn_t *h = ud;
    h2stream_t *s = src->ptr;
    petrel_resp_t *r = &s->resp;
    petrel__conn_t *c = h->c;
    int rc = petrel__out_copy(c, framehd, 9);
    if (rc == 0) {
        if (r->body_kind == PETREL__BODY_MEM)
            rc = petrel__out_ref(c, (const char *)r->body + s->nc_off, length);
        else
            rc = petrel__out_fd(c, r->fd, r->offset + (off_t)s->nc_off, length);
    }
    if (rc < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    s->flags |= PETREL__H2S_REFS;
    h->queued += 9 + length;
    /* nghttp2 frames NO_COPY DATA of every stream in one mem_send call, as
     * far as the windows allow: stop it at the bound */
    return petrel__h2_out_full(h) ? NGHTTP2_ERR_PAUSE : 0;
}

static int h2_send(petrel_req_t *req, petrel_resp_t *r)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (s->flags & PETREL__H2S_DEAD)
        return PETREL_EIO;
    h2conn_t *h = s->h;
    size_t n = 5;
    for (petrel__rheader_t *x = r->headers; x; x = x->next)
        n++;
    nghttp2_nv stackv[32], *nv = stackv;
    if (n > 32 && (nv = petrel_arena_alloc(req->arena, n * sizeof(*nv), 0)) == NULL)
        return PETREL_ENOMEM;
    size_t i = 0;
    int st = r->status;
    if (st == 200) {
        NV(&nv[i++], ":status", "200", 3, NV_STATIC);
    } else {
        s->status[0] = (char)('0' + st / 100);
        s->status[1] = (char)('0' + st / 10 % 10);
        s->status[2] = (char)('0' + st % 10);
        NV(&nv[i++], ":status", s->status, 3, NV_STATIC);
    }
    bool body_allowed = petrel__status_has_body(st);
    if (r->type)
        NV(&nv[i++], "content-type", r->type, strlen(r->type), NGHTTP2_NV_FLAG_NO_COPY_NAME);
    if (r->body_kind != PETREL__BODY_STREAM && body_allowed) {
        size_t cl = (size_t)(petrel__put_u64(s->clen, r->len) - s->clen);
        NV(&nv[i++], "content-length", s->clen, cl, NV_STATIC);
    }
    /* loop->date changes in place once a second: always a valid date */
    NV(&nv[i++], "date", petrel__loop->date, 29, NV_STATIC);
    NV(&nv[i++], "server", "petrel", 6, NV_STATIC);
    for (petrel__rheader_t *x = r->headers; x; x = x->next) {
        petrel__h2_lower(&x->name); /* RFC 9113 §8.2.1; the copy is the request's */
        if (connection_specific(&x->name))
            continue;
        nv[i].name = (uint8_t *)x->name.ptr;
        nv[i].namelen = x->name.len;
        nv[i].value = (uint8_t *)x->value.ptr;
        nv[i].valuelen = x->value.len;
        nv[i].flags = NV_STATIC;
        i++;
    }
    bool send_body = body_allowed && req->method != PETREL_HEAD;
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_body};
    bool with_data = r->body_kind == PETREL__BODY_STREAM || (send_body && r->len > 0);
    int rv = nghttp2_submit_response(h->ngh, s->id, nv, i, with_data ? &prd : NULL);
    if (rv < 0) {
        petrel_req_log(&s->req, PETREL_LOG_DEBUG, "h2: stream %d: submit_response: %s", s->id,
                       nghttp2_strerror(rv));
        return rv == NGHTTP2_ERR_NOMEM ? PETREL_ENOMEM : PETREL_ESTATE;
    }
    if (r->body_kind != PETREL__BODY_STREAM && send_body)
        s->bytes_out = r->len;
    petrel__h2_schedule(h);
    return 0;
}

static int h2_stream_write(petrel_req_t *req, const void *data, size_t len)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (s->flags & (PETREL__H2S_DEAD | PETREL__H2S_RESET))
        return PETREL_EIO;
    if (req->method == PETREL_HEAD || !petrel__status_has_body(s->resp.status) || len == 0)
        return 0;
    if (petrel__h2_out_refuse(s, len))
        return PETREL_ENOMEM;
    if (petrel__h2_sbuf_append(s, data, len) < 0)
        return PETREL_ENOMEM;
    s->bytes_out += len;
    nghttp2_session_resume_data(s->h->ngh, s->id);
    petrel__h2_schedule(s->h);
    return 0;
}

static int h2_stream_end(petrel_req_t *req, petrel_resp_t *r)
{
    (void)r;
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (s->flags & PETREL__H2S_DEAD)
        return PETREL_EIO;
    nghttp2_session_resume_data(s->h->ngh, s->id);
    petrel__h2_schedule(s->h);
    return 0;
}

static const char *h2_peer(petrel_req_t *req)
{
    petrel__conn_t *c = req->_conn;
    char buf[64];
    const char *p = c ? petrel__conn_peer_text(c, buf, sizeof(buf)) : "-";
    return petrel_arena_strndup(req->arena, p, strlen(p));
}

/* The handler let go of an abandoned request (petrel.h, "Waiting for work the handler started"). */
static void h2_release(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if ((s->flags & PETREL__H2S_DEAD) &&
        !(s->flags & (PETREL__H2S_IN_HANDLER | PETREL__H2S_ABORTING)))
        petrel__h2_stream_free(s);
    /* else the stream is still open, or its handler is running: freed
     * when nghttp2 closes it, or when the handler returns */
}

/* The handler failed after starting its response: RST_STREAM
 * (RFC 9113 §8.1: a response that cannot complete), so that the client
 * never takes it for a whole one. */
static void h2_broken(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (s->flags & (PETREL__H2S_DEAD | PETREL__H2S_RESET))
        return;
    s->flags |= PETREL__H2S_RESET;
    petrel__h2_sbuf_free_all(s);
    nghttp2_submit_rst_stream(s->h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    petrel__h2_schedule(s->h);
}

/* Backpressure: streamed bytes the peer's window (or the connection's
 * output) has not taken yet. */
static size_t h2_buffered(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    return (s->flags & (PETREL__H2S_DEAD | PETREL__H2S_RESET)) ? 0 : s->sb_bytes;
}

static const petrel_proto_t h2_proto = {
    "h2",       h2_send,   h2_stream_write, h2_stream_end,         h2_peer,
    h2_release, h2_broken, h2_buffered,     petrel__h2_sbody_kick, petrel__h2_sbody_kick,
};

int petrel__h2_tunnel(petrel_req_t *req, const petrel__h2_tunnel_ops_t *ops, void *ctx)
{
    if (req == NULL || req->_proto != &h2_proto || ops == NULL)
        return PETREL_EINVAL;
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (!(s->flags & PETREL__H2S_XCONNECT))
        return PETREL_EINVAL;
    if ((s->flags & (PETREL__H2S_DEAD | PETREL__H2S_CLOSED | PETREL__H2S_TUNNEL)) || s->resp.sent ||
        s->h == NULL)
        return PETREL_ESTATE;
    /* RFC 8441 §5: 200 (a data provider: no END_STREAM), no content-length */
    s->flags |= PETREL__H2S_TUNNEL;
    int rc = petrel_stream_begin(req, 200, NULL);
    if (rc < 0) {
        s->flags &= ~PETREL__H2S_TUNNEL;
        return rc;
    }
    s->resp.ended = true; /* the tunnel writes from now on, not the handler */
    s->flags |= PETREL__H2S_TDATA | PETREL__H2S_TEOS; /* the response's data provider (read_body) */
    s->tops = ops;
    s->tctx = ctx;
    list_append(&s->h->tunnels, &s->rlink);
    s->h->ntunnels++;
    if (s->in_head || (s->flags & PETREL__H2S_PEER_END))
        tunnel_mark(s->h, s); /* DATA that came with the request */
    return 0;
}

/* Run the handlers of the requests that are complete. */
static void dispatch_ready(h2conn_t *h)
{
    while (!list_empty(&h->ready)) {
        h2stream_t *s = container_of(h->ready.next, h2stream_t, rlink);
        list_unlink(&s->rlink);
        s->flags =
            (s->flags & ~PETREL__H2S_READY) | PETREL__H2S_DISPATCHED | PETREL__H2S_IN_HANDLER;
        petrel_req_t *r = &s->req;
        if (r->body.ptr)
            ((char *)r->body.ptr)[r->body.len] = '\0';
        else
            r->body.ptr = "";
        if (s->err)
            petrel_send_status(r, s->err);
        else
            petrel__req_dispatch(r, h->c->cs->router);
        s->flags &= ~PETREL__H2S_IN_HANDLER;
        if ((s->flags & PETREL__H2S_DEAD) && !s->resp.holds)
            petrel__h2_stream_free(s); /* the stream was reset while its handler ran */
    }
}

/* ------------------------------------------------------------------------ */
/* The connection                                                           */

/* Serialize what nghttp2 has into the output queue, while there is room
 * (out_full).  Stopped by the connection's own queue: PETREL__H2_MORE (the queue's
 * drain calls h2_flush again); by the worker's budget: PETREL__H2_WAITING. */
static int produce(h2conn_t *h)
{
    h->queued = 0;
    h->flags &= ~PETREL__H2_MORE;
    for (;;) {
        int full = petrel__h2_out_full(h);
        if (full == 1) {
            h->flags |= PETREL__H2_MORE;
            return 0;
        }
        if (full == 2) {
            if (!(h->flags & PETREL__H2_WAITING)) {
                petrel__h2_out_wait(h);
                stats.out_waits++;
            }
            return 0;
        }
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->ngh, &data);
        if (n < 0) {
            petrel_log(PETREL_LOG_DEBUG, "h2: mem_send: %s", nghttp2_strerror((int)n));
            return -1;
        }
        if (n == 0) {
            if (petrel__h2_out_full(h))
                continue; /* paused by send_data: more may wait */
            return 0;
        }
        if (petrel__out_copy(h->c, data, (size_t)n) < 0)
            return -1;
        h->queued += (size_t)n;
    }
}

static void conn_done(petrel__conn_t *c)
{
    petrel__conn_end(c); /* the peer reads the GOAWAY before it sees the end */
}

/* Does a response wait for the peer to open its window?  (Called only when
 * no request is arriving and the output is written.) */
static bool blocked_on_peer(h2conn_t *h)
{
    if (h->buffered)
        return true;
    if (h->nstreams == h->ntunnels)
        return false; /* tunnels wait on their own (their carriers' timers) */
    for (petrel__list_t *l = h->streams.next; l != &h->streams; l = l->next) {
        h2stream_t *s = container_of(l, h2stream_t, link);
        const petrel_resp_t *r = &s->resp;
        if (r->sent && !(s->flags & PETREL__H2S_CLOSED) && r->body_kind != PETREL__BODY_STREAM &&
            r->body_kind != PETREL__BODY_NONE && s->sent < r->len)
            return true;
    }
    return false;
}

/* Frame, write, then decide what the connection waits for. */
static void h2_flush(h2conn_t *h)
{
    petrel__conn_t *c = h->c;
    petrel__conns_t *cs = c->cs;
    list_unlink(&h->pending.node);
    petrel__conn_idle(c); /* an empty read buffer goes back to the pool */
    size_t buffered = h->buffered;
    for (;;) {
        if (produce(h) < 0 || petrel__conn_flush(c) < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        if (!petrel__conn_out_empty(c))
            break; /* EPOLLOUT calls us again */
        zombies_release(h);
        if (!(h->flags & PETREL__H2_MORE))
            break;
    }
    petrel__h2_out_sync(h, petrel__out_bytes(c));
    petrel__h2_tunnels_service(h); /* output framed: their input may go on */
    if (h->buffered < buffered) {
        /* streamed bytes were framed: producers waiting for them to drain */
        for (petrel__list_t *l = h->streams.next; l != &h->streams; l = l->next) {
            h2stream_t *s = container_of(l, h2stream_t, link);
            if (s->resp.drain_cb)
                petrel__resp_progress(&s->resp, s->sb_bytes);
        }
    }
    bool empty = petrel__conn_out_empty(c);
    if (empty && ((h->flags & PETREL__H2_CLOSE) ||
                  (!nghttp2_session_want_read(h->ngh) && !nghttp2_session_want_write(h->ngh)))) {
        conn_done(c);
        return;
    }
    /* Read no more requests while the peer does not read the answers. */
    petrel__conn_pause(c, !empty);
    if (c->flags & PETREL__CONN_CLOSED)
        return;
    if (!empty)
        return; /* the send timeout is armed */
    if (h->nstreams == 0) {
        /* draining: the PING's answer is awaited for as long as a
         * lingering close waits for the peer's last bytes.  Else the idle
         * time counts from the last request (a connection whose requests
         * are all answered within each turn is never idle), in two stages
         * as HTTP/1.1's: idle PETREL__IDLE_MS, the connection gives back
         * memory (h2_idle_release), then waits out the rest of the
         * keep-alive timeout. */
        if (h->flags & PETREL__H2_NOTICE) {
            if (c->timer.q != &petrel__h2_timers.notice || (h->flags & PETREL__H2_ACTIVE))
                petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.notice);
        } else if ((c->timer.q != &petrel__h2_timers.idle &&
                    c->timer.q != &petrel__h2_timers.keepalive_rest) ||
                   (h->flags & PETREL__H2_ACTIVE)) {
            h->flags |= PETREL__H2_IDLE;
            petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.idle);
        }
    } else if (h->cur || !list_empty(&h->ready)) {
        /* a request head arriving, or an upgrade waiting for the client's
         * preface */
        petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.header);
    } else if (h->nrecv > 0) {
        /* request bodies arriving: each has --body-timeout plus a second per
         * --body-min-rate bytes received (body_check); the check is not
         * pushed back by the traffic of other streams */
        if (c->timer.q != &petrel__h2_timers.body_check)
            petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.body_check);
    } else if (blocked_on_peer(h)) {
        /* response bytes wait for the peer's flow-control window: a peer
         * that keeps it shut (SETTINGS_INITIAL_WINDOW_SIZE 0) gets the send
         * timeout, as one that does not read (counted from the last
         * bytes it let through) */
        if (c->timer.q != &cs->tq_send || h->queued)
            petrel__timer_arm(petrel__loop, &c->timer, &cs->tq_send);
    } else {
        petrel__timer_disarm(&c->timer); /* handlers at work */
    }
    h->flags &= ~PETREL__H2_ACTIVE;
}

/* Feed bytes to nghttp2 and run the handlers of the complete requests. */
static int feed(h2conn_t *h, const char *p, size_t n)
{
    h->flags |= PETREL__H2_BUSY;
    int rv = petrel__h2_recv_frames(h, (const uint8_t *)p, n);
    if (rv >= 0) {
        dispatch_ready(h);
        petrel__h2_tunnels_service(h); /* DATA for the tunnels, outside nghttp2's callbacks */
    }
    h->flags &= ~PETREL__H2_BUSY;
    if (rv < 0) {
        petrel_log(PETREL_LOG_DEBUG, "h2: %s", nghttp2_strerror(rv));
        if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
            petrel__h2_calm_down(h,
                                 nghttp2_strerror(rv)); /* PING, SETTINGS or CONTINUATION flood */
        else
            nghttp2_session_terminate_session(
                h->ngh, rv == NGHTTP2_ERR_NOMEM ? NGHTTP2_INTERNAL_ERROR : NGHTTP2_PROTOCOL_ERROR);
        h->flags |= PETREL__H2_CLOSE;
        return -1;
    }
    return 0;
}

static void h2_read(h2conn_t *h)
{
    petrel__conn_t *c = h->c;
    for (int turn = 0; turn < PETREL__READS_PER_EVENT; turn++) {
        int n = petrel__conn_read(c);
        if (n < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        if (n == 0)
            break; /* EAGAIN, or EOF: h2_flush closes when the streams are done */
        size_t avail;
        bool full = petrel__conn_rfull(c);
        const char *p = petrel__conn_input(c, &avail);
        petrel__conn_consume(c, avail); /* nghttp2 consumes everything it is given */
        if (feed(h, p, avail) < 0 || !full)
            break;
    }
    if (c->flags & PETREL__CONN_EOF) {
        /* RFC 9113 has no half-closed connection: write what is queued,
         * then close (streams still at work become orphans). */
        h->flags |= PETREL__H2_CLOSE;
        petrel__conn_update_events(c);
    }
}

static void h2_on_read(petrel__conn_t *c)
{
    h2conn_t *h = c->proto;
    if (!(c->flags & (PETREL__CONN_EOF | PETREL__CONN_PAUSED)) && !(h->flags & PETREL__H2_CLOSE)) {
        h2_read(h);
        if (c->flags & PETREL__CONN_CLOSED)
            return;
    }
    h2_flush(h);
}

static void h2_on_written(petrel__conn_t *c)
{
    h2_flush(c->proto);
}

/* Part of the queue was written: the worker's count follows (connections
 * waiting for room may go on). */
static void h2_on_progress(petrel__conn_t *c)
{
    if (c->proto)
        petrel__h2_out_sync(c->proto, petrel__out_bytes(c));
}

/* Idle PETREL__IDLE_MS (no stream, nothing to write, nothing queued in
 * nghttp2): the pages of the outbound frame buffer go back to the kernel,
 * and those of the other large session blocks that hold only zeros (the
 * empty stream map).  HPACK state and settings stay as they are. */
static void h2_idle_release(h2conn_t *h)
{
    for (unsigned i = 0; i < h->nidle_blk; i++)
        stats.idle_released += petrel__sc_discard(
            h->idle_blk[i], i == h->framebuf && !nghttp2_session_want_write(h->ngh));
}

/* The body of each request still arriving against its moving deadline
 * (petrel__body_late, as HTTP/1.1's): a late one is answered 408 (RFC 9110
 * §15.5.9) and its stream reset with NO_ERROR once the answer is sent
 * (on_frame_send; RFC 9113 §8.1), the other streams go on.  False when no
 * body is arriving (the timeout is the connection's). */
static bool body_check(h2conn_t *h)
{
    const petrel__config_t *cfg = h->c->cs->cfg;
    uint64_t now = petrel__loop->now_ms;
    bool arriving = false, late = false;
    for (petrel__list_t *l = h->streams.next; l != &h->streams; l = l->next) {
        h2stream_t *s = container_of(l, h2stream_t, link);
        if (unlikely((s->flags & (PETREL__H2S_SBODY | PETREL__H2S_REQ_DONE | PETREL__H2S_CLOSED |
                                  PETREL__H2S_RESET)) == PETREL__H2S_SBODY) &&
            !s->sb_end) {
            /* a body read as it arrives: its time runs while its reader takes it */
            arriving = true;
            if (s->resp.rbody.state == PETREL__RB_READ && !s->resp.rbody.paused && !s->resp.ended &&
                petrel__body_late(cfg, s->body_start, s->data_in - s->sb_base, now)) {
                petrel__h2_sbody_late(h, s);
                late = true;
            }
            continue;
        }
        if ((s->flags & (PETREL__H2S_HEAD_DONE | PETREL__H2S_REQ_DONE | PETREL__H2S_DISPATCHED |
                         PETREL__H2S_DISCARD)) != PETREL__H2S_HEAD_DONE ||
            s->err)
            continue;
        arriving = true;
        if (!petrel__body_late(cfg, s->body_start, s->req.body.len, now))
            continue;
        petrel_log(PETREL_LOG_INFO,
                   "request %llu: %zu body bytes in %llu ms, under --body-min-rate: 408",
                   (unsigned long long)s->req.id, s->req.body.len,
                   (unsigned long long)(now - s->body_start));
        s->err = 408;
        s->flags |= PETREL__H2S_DISCARD;
        petrel__h2_make_ready(h, s);
        late = true;
    }
    if (late) {
        h->flags |= PETREL__H2_BUSY;
        dispatch_ready(h);
        h->flags &= ~PETREL__H2_BUSY;
    }
    return arriving;
}

static void h2_on_timeout(petrel__conn_t *c)
{
    h2conn_t *h = c->proto;
    if ((h->flags & PETREL__H2_IDLE) &&
        !(h->flags &
          (PETREL__H2_NOTICE | PETREL__H2_TIMEDOUT | PETREL__H2_CLOSE | PETREL__H2_MORE)) &&
        h->nstreams == 0 && petrel__conn_out_empty(c)) {
        h->flags &= ~PETREL__H2_IDLE;
        h2_idle_release(h);
        petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.keepalive_rest);
        return;
    }
    h->flags &= ~PETREL__H2_IDLE;
    if (h->nrecv > 0 && !h->cur && list_empty(&h->ready) && petrel__conn_out_empty(c) &&
        !(h->flags & (PETREL__H2_NOTICE | PETREL__H2_TIMEDOUT)) && body_check(h)) {
        if (c->timer.q == NULL)
            petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.body_check);
        h2_flush(h);
        return;
    }
    if ((h->flags & PETREL__H2_NOTICE) && petrel__conn_out_empty(c)) {
        final_goaway(h); /* the PING of the shutdown notice was not answered */
        h2_flush(h);
        return;
    }
    if (!petrel__conn_out_empty(c) || (h->flags & PETREL__H2_TIMEDOUT)) {
        petrel__conn_close(c, PETREL__CLOSE_TIMEOUT); /* the peer does not read */
        return;
    }
    /* idle, or a request that does not arrive: say goodbye and close */
    petrel__conn_close_why(c, PETREL__CLOSE_TIMEOUT);
    h->flags |= PETREL__H2_TIMEDOUT | PETREL__H2_CLOSE;
    nghttp2_session_terminate_session(h->ngh, NGHTTP2_NO_ERROR);
    h2_flush(h);
    if (!(c->flags & PETREL__CONN_CLOSED))
        petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_send);
}

/* The connection closes: streams whose handler still streams become
 * orphans, the others go back, the session and the h2conn_t go. */
static void h2_on_close(petrel__conn_t *c)
{
    h2conn_t *h = c->proto;
    if (h == NULL)
        return;
    list_unlink(&h->pending.node);
    list_unlink(&h->wlink);
    petrel__h2_out_sync(h, 0);
    zombies_release(h);
    while (!list_empty(&h->streams)) {
        h2stream_t *s = container_of(h->streams.next, h2stream_t, link);
        petrel__h2_tunnel_gone(s); /* a WebSocket's 1006 */
        if ((s->flags & PETREL__H2S_DISPATCHED) && !(s->flags & PETREL__H2S_DEAD)) {
            /* a handler still at work: it is told (petrel.h, "Waiting for work the handler
             * started") */
            if (!s->resp.ended && !s->resp.sent) {
                s->resp.status = 499;
                petrel__req_finished(&s->req, s->bytes_out);
            } else if (!s->resp.ended || (s->flags & PETREL__H2S_TUNNEL)) {
                petrel__req_finished(&s->req, s->bytes_out); /* (a tunnel ends here) */
            }
            s->flags |= PETREL__H2S_ABORTING;
            bool held = petrel__req_abort(&s->req);
            s->flags &= ~PETREL__H2S_ABORTING;
            if (held) {
                s->flags |= PETREL__H2S_DEAD;
            }
        }
        if (s->flags & PETREL__H2S_DEAD && s->resp.holds) {
            /* detached: freed when its handler lets go (h2_release) */
            list_unlink(&s->link);
            list_unlink(&s->rlink);
            s->h = NULL;
            s->req._conn = NULL;
            petrel__h2_sbuf_free_all(s);
            continue;
        }
        petrel__h2_stream_free(s);
    }
    petrel__h2_values_drop(h);
    nghttp2_session_del(h->ngh);
    stats.sessions--;
    c->proto = NULL;
    free(h);
}

static void h2_drain(petrel__conn_t *c, bool close_idle)
{
    (void)close_idle; /* an h2 connection is told, idle or not */
    h2conn_t *h = c->proto;
    if (!(h->flags & PETREL__H2_DRAINING)) {
        /* RFC 9113 §6.8, in two steps: a GOAWAY with the largest stream id
         * (stop opening streams) and a PING; once the PING is acknowledged
         * (one round trip: requests in flight have arrived), the final
         * GOAWAY with the last stream processed.  A client that does not
         * answer the PING (nghttp2 clients with no stream open do not) gets
         * the final GOAWAY from h2_on_timeout, 2 s after its last stream. */
        h->flags |= PETREL__H2_DRAINING | PETREL__H2_NOTICE;
        static const uint8_t opaque[8] = "petrel-d";
        if (nghttp2_submit_shutdown_notice(h->ngh) != 0 ||
            nghttp2_submit_ping(h->ngh, NGHTTP2_FLAG_NONE, opaque) != 0)
            final_goaway(h);
        /* the tunnels close as their protocol says (WebSocket: Close 1001) */
        for (petrel__list_t *l = h->tunnels.next; l != &h->tunnels; l = l->next) {
            h2stream_t *s = container_of(l, h2stream_t, rlink);
            if (s->tops)
                s->tops->drain(s->tctx);
        }
        h2_flush(h);
    }
}

/* ------------------------------------------------------------------------ */
/* Taking over a connection                                                 */

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static int setup_once(const petrel__config_t *cfg)
{
    if (callbacks)
        return 0;
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return PETREL_ENOMEM;
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, petrel__h2_on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cb, petrel__h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_data);
    if (nghttp2_option_new(&options) != 0) {
        nghttp2_session_callbacks_del(cb);
        return PETREL_ENOMEM;
    }
    /* closed streams are not kept for the RFC 7540 priority tree */
    nghttp2_option_set_no_closed_streams(options, 1);
    /* nghttp2's own reset limit (GOAWAY INTERNAL_ERROR) stays behind
     * petrel's (reset_token: ENHANCE_YOUR_CALM), as a backstop */
    nghttp2_option_set_stream_reset_rate_limit(options, 2 * (uint64_t)cfg->h2_reset_burst,
                                               2 * (uint64_t)cfg->h2_reset_rate);
    /* WINDOW_UPDATE as petrel reads: a request body at once, a tunnel's
     * DATA as its carrier takes it (tunnel_data) */
    nghttp2_option_set_no_auto_window_update(options, 1);
    /* RFC 9113 §8's rules are petrel's (on_header, head_done,
     * body_complete): one pass over each field, with HTTP/1.1's tables */
    nghttp2_option_set_no_http_messaging(options, 1);
    callbacks = cb;
    return 0;
}

void petrel__h2_session_free(h2conn_t *h)
{
    petrel__h2_values_drop(h);
    nghttp2_session_del(h->ngh);
    stats.sessions--;
    free(h);
}

/* The session's paged blocks (see "nghttp2's allocator"): the one of more
 * than FRAMEBUF_MIN bytes is the frame buffer, if there is exactly one. */
static void note_blocks(h2conn_t *h, uint64_t mark)
{
    unsigned nbig = 0;
    size_t bytes;
    void *p;
    h->framebuf = IDLE_BLKS;
    for (unsigned i = 0; (p = petrel__sc_paged_since(mark, i, &bytes)) != NULL; i++) {
        if (i == IDLE_BLKS) {
            h->nidle_blk = 0; /* not the session we know: leave it alone */
            return;
        }
        if (bytes > FRAMEBUF_MIN) {
            h->framebuf = (uint8_t)i;
            nbig++;
        }
        h->idle_blk[h->nidle_blk++] = p;
    }
    if (nbig != 1)
        h->framebuf = IDLE_BLKS; /* which block is the frame buffer is not known */
}

/* A session for `c` (not attached yet: c->proto is set by the switch). */
h2conn_t *petrel__h2_session_new(petrel__conn_t *c)
{
    const petrel__config_t *cfg = c->cs->cfg;
    if (setup_once(cfg) < 0)
        return NULL;
    h2conn_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    uint64_t mark = petrel__sc_paged_count();
    if (nghttp2_session_server_new3(&h->ngh, callbacks, h, options, &petrel__h2_mem) != 0) {
        free(h);
        return NULL;
    }
    note_blocks(h, mark);
    stats.sessions++;
    h->c = c;
    h->fskip = 24; /* the client's connection preface (RFC 9113 §3.4) */
    h->resets = cfg->h2_reset_burst;
    h->resets_ms = petrel__loop->now_ms;
    h->pending.cb = on_pending;
    list_init(&h->pending.node);
    list_init(&h->streams);
    list_init(&h->ready);
    list_init(&h->zombies);
    list_init(&h->wlink);
    list_init(&h->tunnels);
    list_init(&h->tready);
    uint32_t window = cfg->h2_initial_window_size ? cfg->h2_initial_window_size : H2_DEFAULT_WINDOW;
    size_t hl = cfg->h2_max_header_list_size ? cfg->h2_max_header_list_size : cfg->max_header_size;
    h->hdr_limit = hl > UINT32_MAX ? UINT32_MAX : (uint32_t)hl;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
         cfg->h2_max_concurrent_streams ? cfg->h2_max_concurrent_streams : H2_DEFAULT_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)(hl > UINT32_MAX ? UINT32_MAX : hl)},
        /* RFC 9218 priorities (urgency queues) instead of the RFC 7540 tree */
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
        /* RFC 8441 §3: Extended CONNECT (WebSocket routes) */
        {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
    };
    /* the connection window follows the stream window */
    if (nghttp2_submit_settings(h->ngh, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        (window > 65535 && nghttp2_session_set_local_window_size(h->ngh, NGHTTP2_FLAG_NONE, 0,
                                                                 (int32_t)window) != 0)) {
        petrel__h2_session_free(h);
        return NULL;
    }
    return h;
}

/* The connection is ours: prior knowledge (the entry stage saw the
 * preface; c->proto is NULL) or an h2c upgrade (petrel__h2_upgrade made
 * the session).  The bytes already read are the client's preface and what
 * followed it. */
static void h2_start(petrel__conn_t *c)
{
    c->out_limit = 0; /* flow control, and the streamed-output cap, bound it */
    /* until the first flush decides what the connection waits for */
    petrel__timer_arm(petrel__loop, &c->timer, &petrel__h2_timers.header);
    h2conn_t *h = c->proto;
    if (h == NULL && (h = petrel__h2_session_new(c)) == NULL) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    c->proto = h;
    size_t n;
    const char *p = petrel__conn_input(c, &n);
    petrel__conn_consume(c, n);
    if (n)
        feed(h, p, n);
    /* written at the end of the turn, with whatever else it produces */
    petrel__h2_schedule(h);
}

/* Every timeout of a connection expires into h2_on_timeout(), which reads
 * the state of the session (the send timeout's too, the transport's). */
static void h2_expire(petrel__timer_t *t)
{
    petrel__conn_expire(t, h2_on_timeout);
}

int petrel__h2_worker_init(const petrel__config_t *cfg)
{
    uint64_t ka = cfg->keepalive_timeout_ms, idle = ka < PETREL__IDLE_MS ? ka : PETREL__IDLE_MS;
    petrel__loop_t *loop = petrel__loop;
    int rc;
    if ((rc = petrel__tq_init(loop, &petrel__h2_timers.header, cfg->header_timeout_ms, h2_expire)) <
            0 ||
        (rc = petrel__tq_init(loop, &petrel__h2_timers.idle, idle, h2_expire)) < 0 ||
        (rc = petrel__tq_init(loop, &petrel__h2_timers.keepalive_rest, ka - idle, h2_expire)) < 0 ||
        (rc = petrel__tq_init(loop, &petrel__h2_timers.body_check, PETREL__BODY_CHECK_MS,
                              h2_expire)) < 0 ||
        (rc = petrel__tq_init(loop, &petrel__h2_timers.notice, PETREL__LINGER_MS, h2_expire)) < 0)
        return rc;
    return 0;
}

const petrel__proto_ops_t petrel__h2_ops = {
    .name = "h2",
    .start = h2_start,
    .on_read = h2_on_read,
    .on_written = h2_on_written,
    .on_progress = h2_on_progress,
    .on_send_timeout = h2_on_timeout,
    .drain = h2_drain,
    .on_close = h2_on_close,
};
/* The options of HTTP/2 (runtime/options.h); 0 in a field is its default. */
static const petrel__option_t h2_options[] = {
    {.name = "h2-max-concurrent-streams",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_max_concurrent_streams),
     .min = 1,
     .max = 1000000,
     .expect = "a number of streams from 1 to 1000000",
     .help = "HTTP/2 streams per connection (default 128)"},
    {.name = "h2-initial-window-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_initial_window_size),
     .min = 65535,
     .max = 0x7fffffff,
     .expect = "a size from 65535 to 2147483647 bytes",
     .help = "HTTP/2 flow-control window for request bodies (default 1m)"},
    {.name = "h2-max-header-list-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_max_header_list_size),
     .min = 1,
     .max = 1u << 24,
     .expect = "a size from 1 byte to 16m",
     .help = "HTTP/2 request header list limit (default: --max-header-size)"},
    /* every connection may queue one frame past it: at least 1 MiB */
    {.name = "h2-output-budget",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_output_budget),
     .min = 1u << 20,
     .max = 1ull << 40,
     .expect = "a size from 1m to 1t",
     .help = "HTTP/2 response bytes queued, all connections of a worker\n(default 64m)"},
    /* the rapid-reset defence (CVE-2023-44487): a bucket of resets (nghttp2
     * 1.52's own defaults) */
    {.name = "h2-max-resets",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_reset_burst),
     .min = 1,
     .max = 1000000,
     .def = 1000,
     .expect = "a number of resets from 1 to 1000000",
     .help = "stream resets an h2 connection may cause at once (RST_STREAM\n"
             "sent or received), then ENHANCE_YOUR_CALM (default 1000)"},
    {.name = "h2-reset-rate",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(h2_reset_rate),
     .min = 0,
     .max = 1000000,
     .def = 33,
     .expect = "a number of resets per second from 0 to 1000000",
     .help = "resets per second that refill them (default 33)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__h2_option_table = {"h2", NULL, h2_options};
