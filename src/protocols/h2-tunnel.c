/*
 * h2-tunnel.c -- RFC 8441 Extended CONNECT tunnels: a stream whose request
 * is CONNECT with :protocol websocket becomes a byte tunnel for a carrier
 * (h2.h: petrel__h2_tunnel_ops_t; ws-h2.c's).  Its DATA goes to the carrier
 * as the carrier takes it (the stream window opens as it does), what the
 * carrier writes is queued on the stream and framed from there.  A
 * request body read as it arrives (PETREL_BODY_STREAM) is taken the same
 * way: its DATA goes to its reader, its stream window opening as the
 * reader takes them.
 */
#include "protocols/h2-int.h"

#include <string.h>

static void tunnel_data_queue(h2stream_t *s);

/* A tunnel's carrier waits for its peer: what it queued does not fit in
 * the peer's window of the stream.  It is given no input meanwhile, so
 * its stream window stays shut, and only its own. */
static bool tunnel_blocked(h2conn_t *h, const h2stream_t *s)
{
    return s->sb_bytes > 0 &&
           (int64_t)s->sb_bytes >= nghttp2_session_get_stream_remote_window_size(h->ngh, s->id);
}

/* DATA after the tunnel's end (RFC 9113 §5.4.2: a stream error). */
static void tunnel_fail(h2conn_t *h, h2stream_t *s)
{
    s->flags |= PETREL__H2S_RESET;
    petrel__h2_chain_free(&s->in_head, &s->in_tail);
    s->stash_len = 0;
    nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_STREAM_CLOSED);
}

/* DATA of an Extended CONNECT stream: the connection window opens at once
 * (what the carrier does not take now is buffered: other streams go on),
 * the stream window only as the tunnel's carrier takes the bytes. */
int petrel__h2_tunnel_data(h2conn_t *h, h2stream_t *s, const uint8_t *data, size_t len)
{
    nghttp2_session_consume_connection(h->ngh, len);
    if ((s->flags & PETREL__H2S_RESET) ||
        ((s->flags & PETREL__H2S_DISPATCHED) && s->tops == NULL)) {
        /* answered without a tunnel, or reset: dropped */
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        return 0;
    }
    if (s->tops && s->in_head == NULL && s->stash_len == 0 && !tunnel_blocked(h, s)) {
        /* nothing waits before these bytes: straight to the carrier (it
         * may send -- nghttp2 takes submissions from its callbacks -- but
         * its end comes later, from the loop) */
        ssize_t k = s->tops->input(s->tctx, (const char *)data, len);
        if (k < 0) {
            tunnel_fail(h, s);
            return 0;
        }
        if (k)
            nghttp2_session_consume_stream(h->ngh, s->id, (size_t)k);
        data += k;
        len -= (size_t)k;
        if (len == 0)
            return 0;
    }
    if (petrel__h2_chain_append(&s->in_head, &s->in_tail, data, len) != len)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
    tunnel_mark(h, s);
    return 0;
}

/* Give the tunnel's carrier the DATA it has not taken (a frame header cut
 * between two buffers goes through the stash), then the peer's END_STREAM. */
static void tunnel_service(h2conn_t *h, h2stream_t *s)
{
    size_t taken = 0;
    while (s->tops && s->in_head && !(s->flags & PETREL__H2S_RESET) && !tunnel_blocked(h, s)) {
        sbuf_t *b = s->in_head;
        const char *p = b->data + b->r;
        size_t n = b->w - b->r, used;
        ssize_t k;
        if (s->stash_len) {
            size_t old = s->stash_len, add = sizeof(s->stash) - old;
            if (add > n)
                add = n;
            memcpy(s->stash + old, p, add);
            k = s->tops->input(s->tctx, (const char *)s->stash, old + add);
            if (k < 0)
                goto reset;
            if (k == 0) {
                s->stash_len = (uint8_t)(old + add);
                used = add;
            } else if ((size_t)k >= old) {
                s->stash_len = 0;
                used = (size_t)k - old;
            } else {
                memmove(s->stash, s->stash + k, old - (size_t)k);
                s->stash_len = (uint8_t)(old - (size_t)k);
                used = 0;
            }
            if (k == 0 && add == 0)
                break; /* cannot happen: a frame header is 14 bytes at most */
        } else {
            k = s->tops->input(s->tctx, p, n);
            if (k < 0)
                goto reset;
            used = (size_t)k;
            if (used < n) {
                if (b->next == NULL || n - used > sizeof(s->stash)) {
                    b->r += (uint32_t)used;
                    taken += used;
                    break; /* the rest of a frame header: more DATA completes it */
                }
                memcpy(s->stash, p + used, n - used);
                s->stash_len = (uint8_t)(n - used);
                used = n;
            }
        }
        b->r += (uint32_t)used;
        taken += used;
        if (b->r == b->w)
            petrel__h2_chain_pop(&s->in_head, &s->in_tail);
    }
    if (taken)
        nghttp2_session_consume_stream(h->ngh, s->id, taken);
    if (s->tops && s->in_head == NULL && (s->flags & PETREL__H2S_PEER_END) &&
        !(s->flags & PETREL__H2S_RESET)) {
        s->flags &= ~PETREL__H2S_PEER_END; /* told once */
        s->tops->eof(s->tctx);
    }
    return;
reset:
    tunnel_fail(h, s);
}

/* ------------------------------------------------------------------------ */
/* A request body read as it arrives (PETREL_BODY_STREAM)                   */
/*                                                                          */
/* As a tunnel's input: the connection window opens at once (other streams */
/* go on), the stream's only as the reader takes the bytes, so that a       */
/* paused reader holds at most a window of its DATA (in s->in_head).       */

/* Give a part to the reader, as a handler runs (an answer it sends is
 * framed after; the stream is not freed under it). */
static void sbody_give(h2stream_t *s, const void *p, size_t len, int end)
{
    unsigned in = s->flags & PETREL__H2S_IN_HANDLER;
    s->flags |= PETREL__H2S_IN_HANDLER;
    petrel__body_give(&s->req, p, len, end);
    s->flags = (s->flags & ~PETREL__H2S_IN_HANDLER) | in;
}

/* The reader takes parts now (it reads, unpaused). */
static inline bool sbody_taken(const h2stream_t *s)
{
    return s->resp.rbody.state == PETREL__RB_READ && !s->resp.rbody.paused;
}

/* Nobody will take them: answered, abandoned, or its end given. */
static inline bool sbody_dropped(const h2stream_t *s)
{
    return s->resp.ended || s->resp.abandoned || s->resp.rbody.state == PETREL__RB_DONE;
}

int petrel__h2_sbody_data(h2conn_t *h, h2stream_t *s, const uint8_t *data, size_t len)
{
    nghttp2_session_consume_connection(h->ngh, len);
    s->data_in += len;
    if ((s->flags & (PETREL__H2S_RESET | PETREL__H2S_CLOSED | PETREL__H2S_MALFORMED)) ||
        s->sb_end) {
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        return 0;
    }
    if ((s->pseudo & PETREL__H2P_CLEN) && s->data_in > s->req_clen) {
        /* RFC 9113 §8.1.1: malformed; the reader gets PETREL_EIO as the
         * stream closes */
        petrel_log(PETREL_LOG_DEBUG, "h2: stream %d: DATA beyond content-length", s->id);
        s->flags |= PETREL__H2S_RESET;
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    if (s->data_in > h->c->cs->cfg->max_body_size) {
        s->sb_end = PETREL_ELIMIT; /* given (and answered 413) from the loop */
        petrel__h2_chain_free(&s->in_head, &s->in_tail);
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        tunnel_mark(h, s);
        return 0;
    }
    if (sbody_dropped(s)) {
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        return 0;
    }
    if (s->in_head == NULL && sbody_taken(s)) {
        /* nothing waits before these bytes: straight from the read buffer */
        sbody_give(s, data, len, 0);
        nghttp2_session_consume_stream(h->ngh, s->id, len);
        return 0;
    }
    if (petrel__h2_chain_append(&s->in_head, &s->in_tail, data, len) != len)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
    return 0;
}

void petrel__h2_sbody_end(h2conn_t *h, h2stream_t *s)
{
    if ((s->pseudo & PETREL__H2P_CLEN) && s->data_in != s->req_clen) {
        petrel_log(PETREL_LOG_DEBUG, "h2: stream %d: content-length and DATA differ", s->id);
        s->flags |= PETREL__H2S_RESET;
        nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_PROTOCOL_ERROR);
        return;
    }
    if (!s->sb_end)
        s->sb_end = 1;
    tunnel_mark(h, s);
}

/* Give the reader what it has not taken, then the end. */
static void sbody_service(h2conn_t *h, h2stream_t *s)
{
    size_t taken = 0;
    while (s->in_head && (sbody_taken(s) || sbody_dropped(s))) {
        sbuf_t *b = s->in_head;
        size_t n = b->w - b->r;
        if (!sbody_dropped(s))
            sbody_give(s, b->data + b->r, n, 0);
        taken += n;
        petrel__h2_chain_pop(&s->in_head, &s->in_tail);
    }
    if (taken && !(s->flags & PETREL__H2S_CLOSED))
        nghttp2_session_consume_stream(h->ngh, s->id, taken);
    if (s->in_head == NULL && s->sb_end && !(s->flags & PETREL__H2S_CLOSED) &&
        (s->sb_end < 0 || sbody_taken(s) || s->resp.rbody.state == PETREL__RB_WAIT)) {
        int end = s->sb_end;
        sbody_give(s, "", 0, end);
        if (end == PETREL_ELIMIT && !(s->flags & PETREL__H2S_RESET)) {
            /* over --max-body-size: 413 if the handler has not answered,
             * else the stream is cut */
            if (!s->resp.sent) {
                petrel_send_status(&s->req, 413);
            } else if (!s->resp.ended) {
                s->flags |= PETREL__H2S_RESET;
                nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
            }
        }
    }
    petrel__h2_schedule(h); /* WINDOW_UPDATEs, an answer */
}

void petrel__h2_sbody_kick(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (s->h == NULL || !(s->flags & PETREL__H2S_SBODY) || (s->flags & PETREL__H2S_CLOSED))
        return;
    if (s->resp.rbody.paused)
        return; /* its window stays shut: DATA waits in in_head */
    /* --body-timeout counts from now (not while it waited or was paused) */
    s->body_start = petrel__loop->now_ms;
    s->sb_base = s->data_in;
    tunnel_mark(s->h, s);
    petrel__h2_schedule(s->h);
}

void petrel__h2_sbody_late(h2conn_t *h, h2stream_t *s)
{
    petrel_log(PETREL_LOG_INFO, "request %llu: %llu body bytes in %llu ms: --body-timeout",
               (unsigned long long)s->req.id, (unsigned long long)(s->data_in - s->sb_base),
               (unsigned long long)(petrel__loop->now_ms - s->body_start));
    s->sb_end = PETREL_EIO;
    petrel__h2_chain_free(&s->in_head, &s->in_tail);
    sbody_give(s, "", 0, PETREL_EIO);
    if (!s->resp.sent) {
        petrel_send_status(&s->req, 408); /* then RST_STREAM NO_ERROR (on_frame_send) */
    } else if (!s->resp.ended) {
        s->flags |= PETREL__H2S_RESET;
        nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    }
    petrel__h2_schedule(h);
}

void petrel__h2_sbody_gone(h2stream_t *s)
{
    list_unlink(&s->tlink);
    petrel__h2_chain_free(&s->in_head, &s->in_tail);
    if (s->resp.rbody.state == PETREL__RB_READ || s->resp.rbody.state == PETREL__RB_WAIT) {
        /* the stream is closed: nothing it sends goes out (PETREL_EIO) */
        unsigned dead = s->flags & PETREL__H2S_DEAD;
        s->flags |= PETREL__H2S_DEAD;
        sbody_give(s, "", 0, PETREL_EIO);
        s->flags = (s->flags & ~PETREL__H2S_DEAD) | dead;
    }
}

/* The tunnels with news, after a read or a flush.  (One whose input
 * waits for its peer's window is marked again when its output is framed.) */
void petrel__h2_tunnels_service(h2conn_t *h)
{
    while (!list_empty(&h->tready)) {
        h2stream_t *s = container_of(h->tready.next, h2stream_t, tlink);
        list_unlink(&s->tlink);
        if (s->flags & PETREL__H2S_SBODY) {
            sbody_service(h, s);
            continue;
        }
        if (s->tframed && s->tops) {
            s->tframed = 0;
            s->tops->progress(s->tctx, s->sb_bytes);
        }
        if ((s->flags & (PETREL__H2S_TEND | PETREL__H2S_TDATA | PETREL__H2S_RESET |
                         PETREL__H2S_CLOSED)) == PETREL__H2S_TEND) {
            tunnel_data_queue(s); /* the last DATA item did not end the stream */
            petrel__h2_schedule(h);
        }
        tunnel_service(h, s);
    }
}

/* The stream closes: its carrier's last call. */
void petrel__h2_tunnel_gone(h2stream_t *s)
{
    const petrel__h2_tunnel_ops_t *ops = s->tops;
    list_unlink(&s->rlink);
    list_unlink(&s->tlink);
    petrel__h2_chain_free(&s->in_head, &s->in_tail);
    if (ops) {
        s->tops = NULL;
        ops->gone(s->tctx);
    }
}

static h2stream_t *tunnel_of(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    return (s->flags & PETREL__H2S_TUNNEL) && s->tops &&
                   !(s->flags & (PETREL__H2S_CLOSED | PETREL__H2S_RESET))
               ? s
               : NULL;
}

static ssize_t tunnel_read_cb(nghttp2_session *ngh, int32_t id, uint8_t *buf, size_t length,
                              uint32_t *data_flags, nghttp2_data_source *src, void *ud);

/* Have nghttp2 frame the tunnel's queued output (its END_STREAM). */
static void tunnel_data_queue(h2stream_t *s)
{
    if (s->flags & PETREL__H2S_TDATA) {
        nghttp2_session_resume_data(s->h->ngh, s->id);
        return;
    }
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = tunnel_read_cb};
    bool eos = (s->flags & PETREL__H2S_TEND) != 0;
    if (nghttp2_submit_data(s->h->ngh, eos ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE, s->id,
                            &prd) == 0)
        s->flags |= PETREL__H2S_TDATA | (eos ? PETREL__H2S_TEOS : 0);
}

/* The tunnel's data provider (read_body): its queued output, and at its
 * end, END_STREAM. */
ssize_t petrel__h2_tunnel_read(h2stream_t *s, uint8_t *buf, size_t length, uint32_t *data_flags)
{
    size_t n = petrel__h2_sbuf_take(s, buf, length);
    if (s->sb_head) {
        /* more than a frame: nghttp2 comes back */
    } else if ((s->flags & (PETREL__H2S_TEND | PETREL__H2S_TEOS)) ==
               (PETREL__H2S_TEND | PETREL__H2S_TEOS)) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF; /* RFC 8441 §5: the tunnel's end */
    } else if (n == 0 && !(s->flags & PETREL__H2S_TEND)) {
        return NGHTTP2_ERR_DEFERRED; /* petrel__h2_tunnel_write resumes it */
    } else {
        /* all of it: this DATA item ends here and the next write (or
         * the end: petrel__h2_tunnels_service) submits another, rather than
         * nghttp2 asking again now only to be deferred -- a round of
         * its scheduler per message */
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        s->flags &= ~(PETREL__H2S_TDATA | PETREL__H2S_TEOS);
    }
    s->tframed += n; /* framed: its carrier hears of it after the flush */
    tunnel_mark(s->h, s);
    return (ssize_t)n;
}

/* The data provider of the DATA items a tunnel submits (read_body's
 * branch for tunnels). */
static ssize_t tunnel_read_cb(nghttp2_session *ngh, int32_t id, uint8_t *buf, size_t length,
                              uint32_t *data_flags, nghttp2_data_source *src, void *ud)
{
    (void)ngh, (void)id, (void)ud;
    return petrel__h2_tunnel_read(src->ptr, buf, length, data_flags);
}

int petrel__h2_tunnel_write(petrel_req_t *req, const void *h, size_t hl, const void *data,
                            size_t len)
{
    h2stream_t *s = tunnel_of(req);
    if (s == NULL || (s->flags & PETREL__H2S_TEND))
        return PETREL_EIO;
    if (petrel__h2_sbuf_append(s, h, hl) < 0 || (len && petrel__h2_sbuf_append(s, data, len) < 0))
        return PETREL_ENOMEM;
    s->bytes_out += hl + len;
    tunnel_data_queue(s);
    petrel__h2_schedule(s->h);
    return 0;
}

size_t petrel__h2_tunnel_queued(petrel_req_t *req)
{
    h2stream_t *s = tunnel_of(req);
    return s ? s->sb_bytes : 0;
}

void petrel__h2_tunnel_resume(petrel_req_t *req)
{
    h2stream_t *s = tunnel_of(req);
    if (s == NULL)
        return;
    tunnel_mark(s->h, s);
    petrel__h2_schedule(s->h);
}

void petrel__h2_tunnel_end(petrel_req_t *req)
{
    h2stream_t *s = tunnel_of(req);
    if (s == NULL || (s->flags & PETREL__H2S_TEND))
        return;
    s->flags |= PETREL__H2S_TEND;
    tunnel_data_queue(s);
    petrel__h2_schedule(s->h);
}

void petrel__h2_tunnel_reset(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    if (!(s->flags & PETREL__H2S_TUNNEL) || s->tops == NULL)
        return;
    s->tops = NULL;
    s->flags |= PETREL__H2S_RESET;
    petrel__h2_chain_free(&s->in_head, &s->in_tail);
    petrel__h2_sbuf_free_all(s);
    if (!(s->flags & PETREL__H2S_CLOSED)) {
        nghttp2_submit_rst_stream(s->h->ngh, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        petrel__h2_schedule(s->h);
    }
}

void *petrel__h2_tunnel_ctx(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    return s->tops ? s->tctx : NULL;
}

bool petrel__h2_draining(petrel_req_t *req)
{
    h2stream_t *s = container_of(req, h2stream_t, req);
    return s->h == NULL || (s->h->flags & PETREL__H2_DRAINING) || s->h->c->cs->draining;
}
