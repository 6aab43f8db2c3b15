/*
 * h2-client.c -- the client side of HTTP/2 with prior knowledge on
 * nghttp2's client session (h2-client.h).  nghttp2's HTTP messaging stays
 * on: a response with a connection-specific field, a bad :status or a
 * content-length its DATA does not match is reset by nghttp2 as malformed
 * (RFC 9113 §8.1.1) and reported as such.
 *
 * Flow control is the backpressure: the automatic WINDOW_UPDATE is off;
 * each DATA frame gives its connection-level window back at once, its
 * stream-level window only once the caller has taken the bytes.  A paused
 * stream holds what comes meanwhile in its call's arena: at most its
 * window (SETTINGS_INITIAL_WINDOW_SIZE), since nothing is given back while
 * it is paused.
 */
#include "protocols/h2-client.h"
#include "protocols/h2-int.h"
#include "runtime/arena.h"
#include "runtime/sizeclass.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>

#define WINDOW 65535
#define CONN_WINDOW (1 << 20)
#define MAX_FIELDS 128

struct petrel__h2c {
    nghttp2_session *ngh;
    const petrel__h2c_cbs_t *cbs;
    petrel__list_t streams;
    const uint8_t *out; /* what mem_send gave and was not copied yet */
    size_t out_len;
    bool broken;
};

static petrel__h2c_stream_t *stream_of(nghttp2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

/* Unlink `st`: the session forgets it. */
static void unlink_stream(nghttp2_session *s, petrel__h2c_stream_t *st)
{
    list_unlink(&st->node);
    if (st->id > 0)
        nghttp2_session_set_stream_user_data(s, st->id, NULL);
    st->ctx = NULL;
}

static int add_field(petrel__h2c_stream_t *st, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        if (cap > MAX_FIELDS)
            return -1;
        petrel_header_t *f = petrel_arena_new(st->arena, petrel_header_t, cap);
        if (f == NULL)
            return -1;
        if (st->n)
            memcpy(f, st->fields, st->n * sizeof(*f));
        st->fields = f;
        st->cap = cap;
    }
    char *n = petrel_arena_strndup(st->arena, (const char *)name, nl);
    char *v = petrel_arena_strndup(st->arena, (const char *)value, vl);
    if (n == NULL || v == NULL)
        return -1;
    st->fields[st->n++] = (petrel_header_t){{n, nl}, {v, vl}};
    return 0;
}

static bool is(const uint8_t *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* RFC 9113 §8.2.2: a message with a connection-specific field is
 * malformed (nghttp2 checks this of requests, not of responses). */
static bool connection_specific(const uint8_t *name, size_t nl, const uint8_t *value, size_t vl)
{
    return is(name, nl, "connection") || is(name, nl, "keep-alive") ||
           is(name, nl, "proxy-connection") || is(name, nl, "transfer-encoding") ||
           is(name, nl, "upgrade") || (is(name, nl, "te") && !is(value, vl, "trailers"));
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    petrel__h2c_stream_t *st = stream_of(s, frame->hd.stream_id);
    if (st == NULL || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0) {
        int v = 0;
        for (size_t i = 0; i < vl && i < 3; i++)
            v = v * 10 + (value[i] - '0');
        st->status = v;
        return 0;
    }
    if (connection_specific(name, nl, value, vl)) {
        st->malformed = true;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    }
    if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
        int64_t v = 0;
        for (size_t i = 0; i < vl && i < 18; i++)
            v = v * 10 + (value[i] - '0');
        st->content_length = v;
    }
    if (add_field(st, name, nl, value, vl) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    return 0;
}

static void deliver_end(nghttp2_session *s, petrel__h2c_t *h, petrel__h2c_stream_t *st)
{
    void *ctx = st->ctx;
    petrel_header_t *t = st->headed ? st->fields : NULL;
    size_t n = st->headed ? st->n : 0;
    /* the response came before the whole request (RFC 9113 §8.1): our
     * side of the stream is reset, the rest of the body is not sent */
    if (st->id > 0 && nghttp2_session_get_stream_local_close(s, st->id) == 0)
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    unlink_stream(s, st);
    h->cbs->on_end(ctx, t, n);
}

/* A HEADERS frame of the response has all its fields; `end`: it ended the
 * stream (a response without a body: a gRPC "trailers-only" answer says
 * so, content-length 0 for the caller). */
static void headers_done(nghttp2_session *s, petrel__h2c_t *h, petrel__h2c_stream_t *st, bool end)
{
    if (st->headed)
        return; /* trailers: kept for the end */
    if (st->status < 200) {
        st->n = 0; /* an interim response: skipped */
        st->content_length = -1;
        return;
    }
    st->headed = true;
    int status = st->status;
    int64_t cl = st->content_length;
    if (st->head_request || status == 204 || status == 304 || end)
        cl = 0;
    petrel_header_t *f = st->fields;
    size_t n = st->n;
    st->fields = NULL; /* the trailers start afresh */
    st->n = st->cap = 0;
    h->cbs->on_head(st->ctx, status, f, n, cl);
    (void)s;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    petrel__h2c_t *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    petrel__h2c_stream_t *st = stream_of(s, frame->hd.stream_id);
    if (st == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS) {
        headers_done(s, h, st, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
        st = stream_of(s, frame->hd.stream_id); /* on_head may forget it */
        if (st == NULL)
            return 0;
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        st->ended = true;
        if (!st->headed) { /* END_STREAM on an interim response */
            unlink_stream(s, st);
            return 0;
        }
        if (st->held_len == 0 && !st->delivering)
            deliver_end(s, h, st);
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    (void)flags;
    petrel__h2c_t *h = ud;
    nghttp2_session_consume_connection(s, len);
    petrel__h2c_stream_t *st = stream_of(s, id);
    if (st == NULL) {
        nghttp2_session_consume_stream(s, id, len);
        return 0;
    }
    if (st->paused || st->held_len > 0 || st->delivering) {
        if (st->held == NULL)
            st->held = petrel_arena_alloc(st->arena, WINDOW, 1);
        if (st->held == NULL || st->held_len + len > WINDOW)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        memcpy(st->held + st->held_len, data, len);
        st->held_len += len;
        return 0;
    }
    st->delivering = true;
    h->cbs->on_body(st->ctx, (const char *)data, len);
    st->delivering = false;
    nghttp2_session_consume_stream(s, id, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    petrel__h2c_t *h = ud;
    petrel__h2c_stream_t *st = stream_of(s, id);
    if (st == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    if (st->ended) {
        st->id = 0; /* closed after its end, held bytes not read yet: kept */
        return 0;
    }
    void *ctx = st->ctx;
    unlink_stream(s, st);
    int how = code == NGHTTP2_REFUSED_STREAM                    ? PETREL__H2C_REFUSED
              : code == NGHTTP2_PROTOCOL_ERROR || st->malformed ? PETREL__H2C_MALFORMED
                                                                : PETREL__H2C_RESET;
    h->cbs->on_close(ctx, how, code);
    return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    petrel__h2c_t *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    petrel__h2c_stream_t *st = stream_of(s, frame->hd.stream_id);
    if (st == NULL)
        return 0;
    st->sent = true;
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        h->cbs->on_sent(st->ctx);
    return 0;
}

/* A request's HEADERS that could not go (a GOAWAY came first): never
 * sent, so never processed. */
static int on_frame_not_send(nghttp2_session *s, const nghttp2_frame *frame, int err, void *ud)
{
    (void)s;
    (void)err;
    petrel__h2c_t *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    for (petrel__list_t *n = h->streams.next; n != &h->streams; n = n->next) {
        petrel__h2c_stream_t *st = container_of(n, petrel__h2c_stream_t, node);
        if (st->id == frame->hd.stream_id) {
            void *ctx = st->ctx;
            list_unlink(&st->node);
            st->ctx = NULL;
            h->cbs->on_close(ctx, PETREL__H2C_REFUSED, NGHTTP2_REFUSED_STREAM);
            break;
        }
    }
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)src;
    (void)ud;
    petrel__h2c_stream_t *st = stream_of(s, id);
    if (st == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* forgotten: the stream is reset */
    size_t k = st->body_len - st->boff;
    if (k > len)
        k = len;
    memcpy(buf, st->body + st->boff, k);
    st->boff += k;
    if (st->boff == st->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

static ssize_t read_stream(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)src;
    petrel__h2c_t *h = ud;
    petrel__h2c_stream_t *st = stream_of(s, id);
    if (st == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* forgotten: the stream is reset */
    bool eof = false;
    size_t k = h->cbs->on_read(st->ctx, (char *)buf, len, &eof);
    if (eof)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (k == 0) {
        st->deferred = true; /* petrel__h2c_resume() when bytes come */
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)k;
}

void petrel__h2c_resume(petrel__h2c_t *h, petrel__h2c_stream_t *st)
{
    if (!st->deferred || st->ctx == NULL || st->id <= 0 || h->broken)
        return;
    st->deferred = false;
    nghttp2_session_resume_data(h->ngh, st->id);
}

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

petrel__h2c_t *petrel__h2c_new(const petrel__h2c_cbs_t *cbs)
{
    if (callbacks == NULL) {
        if (nghttp2_session_callbacks_new(&callbacks) != 0)
            return NULL;
        nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, on_frame_not_send);
    }
    if (options == NULL) {
        if (nghttp2_option_new(&options) != 0)
            return NULL;
        nghttp2_option_set_no_auto_window_update(options, 1);
        nghttp2_option_set_no_closed_streams(options, 1);
    }
    petrel__h2c_t *h = petrel__sc_calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->cbs = cbs;
    list_init(&h->streams);
    if (nghttp2_session_client_new3(&h->ngh, callbacks, h, options, &petrel__h2_mem) != 0) {
        petrel__sc_free(h);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW}};
    if (nghttp2_submit_settings(h->ngh, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(h->ngh, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        petrel__h2c_free(h);
        return NULL;
    }
    return h;
}

void petrel__h2c_free(petrel__h2c_t *h)
{
    if (h == NULL)
        return;
    while (!list_empty(&h->streams)) /* the caller's duty; never left pointing at them */
        unlink_stream(h->ngh, container_of(h->streams.next, petrel__h2c_stream_t, node));
    nghttp2_session_del(h->ngh);
    petrel__sc_free(h);
}

static char *lower(petrel_arena_t *a, const petrel_str_t *s)
{
    char *p = petrel_arena_alloc(a, s->len + 1, 1);
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < s->len; i++) {
        char c = s->ptr[i];
        p[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    p[s->len] = '\0';
    return p;
}

#define NV(n, nl, v, vl)                                                                           \
    ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), (nl), (vl), NGHTTP2_NV_FLAG_NO_COPY_NAME})

int petrel__h2c_submit(petrel__h2c_t *h, petrel__h2c_stream_t *st, void *ctx, petrel_arena_t *arena,
                       const char *method, const char *authority, const char *path,
                       const petrel_header_t *fields, size_t n, bool te_trailers, const void *body,
                       size_t body_len, bool send_length, bool head_request, bool streamed)
{
    if (h->broken || !nghttp2_session_check_request_allowed(h->ngh))
        return PETREL_EIO;
    memset(st, 0, sizeof(*st));
    st->ctx = ctx;
    st->arena = arena;
    st->head_request = head_request;
    st->content_length = -1;
    st->body = body;
    st->body_len = body_len;
    nghttp2_nv *nv = petrel_arena_new(arena, nghttp2_nv, n + 6);
    char *len = petrel_arena_alloc(arena, 24, 1);
    if (nv == NULL || len == NULL)
        return PETREL_ENOMEM;
    size_t k = 0;
    nv[k++] = NV(":method", 7, method, strlen(method));
    nv[k++] = NV(":scheme", 7, "http", 4);
    nv[k++] = NV(":authority", 10, authority, strlen(authority));
    nv[k++] = NV(":path", 5, path, strlen(path));
    for (size_t i = 0; i < n; i++) {
        char *name = lower(arena, &fields[i].name);
        if (name == NULL)
            return PETREL_ENOMEM;
        nv[k++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)fields[i].value.ptr, fields[i].name.len,
                               fields[i].value.len, NGHTTP2_NV_FLAG_NONE};
    }
    if (te_trailers)
        nv[k++] = NV("te", 2, "trailers", 8);
    if (body_len > 0 || send_length) {
        int l = snprintf(len, 24, "%zu", body_len);
        nv[k++] = NV("content-length", 14, len, (size_t)l);
    }
    nghttp2_data_provider dp = {.source = {.ptr = st},
                                .read_callback = streamed ? read_stream : read_body};
    int32_t id =
        nghttp2_submit_request(h->ngh, NULL, nv, k, body_len > 0 || streamed ? &dp : NULL, st);
    if (id < 0)
        return id == NGHTTP2_ERR_NOMEM ? PETREL_ENOMEM : PETREL_EIO;
    st->id = id;
    list_append(&h->streams, &st->node);
    return 0;
}

void petrel__h2c_forget(petrel__h2c_t *h, petrel__h2c_stream_t *st)
{
    if (st->ctx == NULL)
        return; /* forgotten already, or told its end */
    int32_t id = st->id;
    unlink_stream(h->ngh, st);
    if (id > 0 && !h->broken &&
        !(st->ended && nghttp2_session_get_stream_local_close(h->ngh, id) == 1))
        nghttp2_submit_rst_stream(h->ngh, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
}

void petrel__h2c_pause(petrel__h2c_t *h, petrel__h2c_stream_t *st, bool paused)
{
    st->paused = paused;
    if (paused || st->ctx == NULL || st->delivering)
        return;
    if (st->held_len > 0) {
        size_t n = st->held_len;
        st->delivering = true;
        h->cbs->on_body(st->ctx, st->held, n);
        st->delivering = false;
        st->held_len = 0;
        if (st->id > 0)
            nghttp2_session_consume_stream(h->ngh, st->id, n);
        if (st->ctx == NULL || st->paused)
            return;
    }
    if (st->ended)
        deliver_end(h->ngh, h, st);
}

int petrel__h2c_recv(petrel__h2c_t *h, const char *p, size_t n)
{
    ssize_t r = nghttp2_session_mem_recv(h->ngh, (const uint8_t *)p, n);
    if (r < 0) {
        h->broken = true;
        return PETREL_UPSTREAM_EPROTO;
    }
    return 0;
}

long petrel__h2c_out(petrel__h2c_t *h, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        if (h->out_len == 0) {
            const uint8_t *p;
            ssize_t r = nghttp2_session_mem_send(h->ngh, &p);
            if (r < 0) {
                h->broken = true;
                return PETREL_UPSTREAM_EPROTO;
            }
            if (r == 0)
                break;
            h->out = p;
            h->out_len = (size_t)r;
        }
        size_t k = h->out_len < cap - n ? h->out_len : cap - n;
        memcpy(buf + n, h->out, k);
        h->out += k;
        h->out_len -= k;
        n += k;
    }
    return (long)n;
}

bool petrel__h2c_room(petrel__h2c_t *h, unsigned limit)
{
    if (h->broken || !nghttp2_session_check_request_allowed(h->ngh))
        return false;
    uint32_t peer =
        nghttp2_session_get_remote_settings(h->ngh, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    size_t open = 0;
    for (petrel__list_t *n = h->streams.next; n != &h->streams; n = n->next)
        open++;
    return open < limit && open < peer;
}

bool petrel__h2c_goaway(petrel__h2c_t *h)
{
    return h->broken || !nghttp2_session_check_request_allowed(h->ngh);
}

bool petrel__h2c_alive(petrel__h2c_t *h)
{
    return !h->broken && (nghttp2_session_want_read(h->ngh) || nghttp2_session_want_write(h->ngh) ||
                          h->out_len > 0);
}

petrel__h2c_stream_t *petrel__h2c_first(petrel__h2c_t *h)
{
    return list_empty(&h->streams) ? NULL
                                   : container_of(h->streams.next, petrel__h2c_stream_t, node);
}
