/*
 * h2.c -- petrel-bench's h2c client (HTTP/2 over cleartext, prior knowledge)
 * on nghttp2's client session: up to -m streams in flight per connection, or
 * (--close) a new connection for each request.
 *
 * nghttp2 is used through its memory interface: bytes read are handed to
 * nghttp2_session_mem_recv(), and everything the session wants to send after
 * a read (new requests, window updates, SETTINGS acks) is gathered with
 * nghttp2_session_mem_send() into the connection's output and written with
 * one write().
 *
 * With --grpc each request is a unary gRPC call (grpc.c makes the message):
 * POST with content-type application/grpc and te: trailers, and an answer
 * counts as good only with :status 200, grpc-status 0 (in the trailers, or
 * in the head of a trailers-only answer) and the message echoed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "bench.h"

typedef struct h2stream {
    int in_use;
    int32_t id; /* 0 until submitted */
    int status;
    uint64_t sent; /* ns */
    uint64_t body_len;
    size_t body_off;  /* request body bytes already given to nghttp2 */
    size_t body_size; /* of this request */
    struct h2conn *hc;
    /* --grpc: the call's id, its grpc-status (-1: none yet), the answer's DATA */
    uint64_t call_id;
    int grpc_status;
    uint8_t *rbuf;
    size_t rlen, rcap;
} h2stream_t;

typedef struct h2conn {
    nghttp2_session *s;
    bench_conn_t *c;
    int active; /* streams in use */
    int goaway; /* no new streams on this connection */
    int nslots;
    h2stream_t *slots;
} h2conn_t;

/* Per thread: the header block and the body (the JSON of --body-size, whose
 * requestId is rewritten for each request into each stream's own copy). */
typedef struct h2shared {
    nghttp2_nv *nva;
    size_t nvlen;
    nghttp2_session_callbacks *cbs;
    char **bodies; /* per connection x slot, or NULL without a body */
    size_t nbodies;
    char **names; /* lower-cased -H names */
    char authority[300];
    char clen[24];
} h2shared_t;

static h2shared_t *shared_of(bench_thread_t *th)
{
    return (h2shared_t *)th->req;
}

static h2stream_t *slot_of(nghttp2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

/* grpc-status: 1 to 2 digits (0-16 are defined); -2 for anything else */
static int grpc_status_of(const uint8_t *v, size_t n)
{
    if (n < 1 || n > 2 || v[0] < '0' || v[0] > '9' || (n == 2 && (v[1] < '0' || v[1] > '9')))
        return -2;
    return n == 1 ? v[0] - '0' : (v[0] - '0') * 10 + (v[1] - '0');
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        h2stream_t *st = slot_of(s, f->hd.stream_id);
        if (st)
            st->grpc_status = grpc_status_of(value, valuelen);
        return 0;
    }
    if (namelen != 7 || memcmp(name, ":status", 7) != 0)
        return 0;
    h2stream_t *st = slot_of(s, f->hd.stream_id);
    if (st && valuelen == 3)
        st->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    h2stream_t *st = slot_of(s, id);
    if (!st)
        return 0;
    st->body_len += len;
    h2conn_t *hc = ud;
    if (hc->c->th->o->grpc && st->body_len <= st->rcap) { /* longer: wrong anyway */
        memcpy(st->rbuf + st->rlen, data, len);
        st->rlen += len;
    }
    return 0;
}

/* --grpc: judge a call's answer (bench_complete_kind: -1 good, else a kind) */
static int grpc_verdict(h2stream_t *st, const bench_opts_t *o, const char **why)
{
    if (st->status != 200) {
        *why = "HTTP status not 200";
        return BENCH_ERR_NON2XX;
    }
    if (st->grpc_status == -1) {
        *why = "no grpc-status";
        return BENCH_ERR_CHECK;
    }
    if (st->grpc_status != 0) {
        *why = "grpc-status not 0 (OK)";
        return BENCH_ERR_GRPC;
    }
    if (st->body_len != st->rlen) {
        *why = "answer longer than the request";
        return BENCH_ERR_CHECK;
    }
    return bench_grpc_check(st->rbuf, st->rlen, st->call_id, o->body_size, why) < 0
               ? BENCH_ERR_CHECK
               : -1;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    h2conn_t *hc = ud;
    if (f->hd.type == NGHTTP2_GOAWAY)
        hc->goaway = 1;
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
    h2conn_t *hc = ud;
    h2stream_t *st = slot_of(s, id);
    if (!st || !st->in_use)
        return 0;
    bench_thread_t *th = hc->c->th;
    if (error_code == NGHTTP2_NO_ERROR && st->status && th->o->grpc) {
        const char *why = NULL;
        int kind = grpc_verdict(st, th->o, &why);
        if (kind >= 0 && th->o->verbose)
            fprintf(stderr, "petrel-bench: gRPC call %llu: %s (status %d, grpc-status %d)\n",
                    (unsigned long long)st->call_id, why, st->status, st->grpc_status);
        bench_complete_kind(th, st->sent, kind);
    } else if (error_code == NGHTTP2_NO_ERROR && st->status) {
        bench_complete(th, st->sent, st->status, st->body_len);
    } else {
        if (th->o->verbose)
            fprintf(stderr, "petrel-bench: stream %d closed: %s\n", id,
                    nghttp2_http2_strerror(error_code));
        bench_fail(th, st->sent, BENCH_ERR_READ);
    }
    st->in_use = 0;
    hc->active--;
    return 0;
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    h2stream_t *st = src->ptr;
    h2conn_t *hc = st->hc;
    bench_thread_t *th = hc->c->th;
    const char *body = shared_of(th)->bodies[(hc->c - th->conns) * hc->nslots + (st - hc->slots)];
    size_t left = st->body_size - st->body_off;
    size_t k = left < length ? left : length;
    memcpy(buf, body + st->body_off, k);
    st->body_off += k;
    if (st->body_off == st->body_size)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

static int h2_prepare(bench_thread_t *th)
{
    const bench_opts_t *o = th->o;
    h2shared_t *sh = calloc(1, sizeof *sh);
    if (!sh)
        return -1;
    th->req = (char *)sh;
    if (strcmp(o->port_str, "80") == 0)
        snprintf(sh->authority, sizeof sh->authority, "%s", o->host);
    else
        snprintf(sh->authority, sizeof sh->authority, "%s:%s", o->host, o->port_str);
    sh->nva = calloc((size_t)o->nheaders + 8, sizeof *sh->nva);
    sh->names = calloc((size_t)o->nheaders + 1, sizeof *sh->names);
    if (!sh->nva || !sh->names)
        return -1;
#define NV(n, v)                                                                                   \
    do {                                                                                           \
        nghttp2_nv *x = &sh->nva[sh->nvlen++];                                                     \
        x->name = (uint8_t *)(n);                                                                  \
        x->namelen = strlen(n);                                                                    \
        x->value = (uint8_t *)(v);                                                                 \
        x->valuelen = strlen(v);                                                                   \
        x->flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;                   \
    } while (0)
    NV(":method", o->method);
    NV(":scheme", "http");
    NV(":authority", sh->authority);
    NV(":path", o->path);
    if (o->grpc) { /* gRPC over HTTP/2 (PROTOCOL-HTTP2.md): no content-length */
        NV("content-type", "application/grpc");
        NV("te", "trailers");
    }
    int has_type = o->grpc;
    for (int i = 0; i < o->nheaders; i++) {
        const char *n = o->headers[i].name;
        if (strcasecmp(n, "host") == 0 || strcasecmp(n, "connection") == 0)
            continue; /* :authority; and no connection-specific headers in h2 */
        if (strcasecmp(n, "content-type") == 0)
            has_type = 1;
        char *lc = strdup(n); /* h2 header names are lower case */
        if (!lc)
            return -1;
        for (char *q = lc; *q; q++)
            if (*q >= 'A' && *q <= 'Z')
                *q = (char)(*q + 32);
        sh->names[i] = lc;
        NV(lc, o->headers[i].value);
    }
    if (o->body_size > 0 || o->grpc) {
        size_t size = o->body_size;
        if (o->grpc) {
            size = bench_grpc_request_max(o->body_size);
        } else {
            if (!has_type)
                NV("content-type", "application/json");
            snprintf(sh->clen, sizeof sh->clen, "%zu", o->body_size);
            NV("content-length", sh->clen);
        }
        size_t n = (size_t)th->nconns * (size_t)(o->per_request ? 1 : o->streams);
        sh->bodies = calloc(n, sizeof *sh->bodies);
        if (!sh->bodies)
            return -1;
        sh->nbodies = n;
        for (size_t i = 0; i < n; i++)
            if (!(sh->bodies[i] = malloc(size)))
                return -1;
    }
#undef NV
    if (nghttp2_session_callbacks_new(&sh->cbs) != 0)
        return -1;
    nghttp2_session_callbacks_set_on_header_callback(sh->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(sh->cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(sh->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(sh->cbs, on_stream_close);
    return 0;
}

static void free_conn_state(h2conn_t *hc)
{
    for (int i = 0; i < hc->nslots; i++)
        free(hc->slots[i].rbuf);
    free(hc->slots);
    free(hc);
}

static h2conn_t *conn_state(bench_conn_t *c)
{
    if (c->h2)
        return c->h2;
    int n = c->th->o->per_request ? 1 : c->th->o->streams;
    h2conn_t *hc = calloc(1, sizeof *hc);
    if (!hc)
        return NULL;
    hc->slots = calloc((size_t)n, sizeof *hc->slots);
    if (!hc->slots) {
        free(hc);
        return NULL;
    }
    hc->nslots = n;
    hc->c = c;
    for (int i = 0; i < n; i++)
        hc->slots[i].hc = hc;
    c->h2 = hc;
    if (c->th->o->grpc) { /* room for the expected answer: the request, echoed */
        size_t cap = bench_grpc_request_max(c->th->o->body_size) + 16;
        for (int i = 0; i < n; i++)
            if (!(hc->slots[i].rbuf = malloc(cap))) {
                c->h2 = NULL;
                free_conn_state(hc);
                return NULL;
            } else {
                hc->slots[i].rcap = cap;
            }
    }
    return hc;
}

/* Submit the request of slot st. */
static int submit(h2conn_t *hc, h2stream_t *st)
{
    bench_thread_t *th = hc->c->th;
    const bench_opts_t *o = th->o;
    h2shared_t *sh = shared_of(th);
    nghttp2_data_provider prd, *pp = NULL;
    if (o->body_size > 0 || o->grpc) {
        char *body = sh->bodies[(hc->c - th->conns) * hc->nslots + (st - hc->slots)];
        uint64_t id = th->seq++ * (uint64_t)o->threads + (uint64_t)th->id;
        if (o->grpc) {
            st->body_size = bench_grpc_request((uint8_t *)body, o->body_size, id);
            st->call_id = id;
            st->grpc_status = -1;
            st->rlen = 0;
        } else {
            bench_json_body(body, o->body_size, id);
            st->body_size = o->body_size;
        }
        st->body_off = 0;
        prd.source.ptr = st;
        prd.read_callback = body_read;
        pp = &prd;
    }
    st->status = 0;
    st->body_len = 0;
    int32_t id = nghttp2_submit_request(hc->s, NULL, sh->nva, sh->nvlen, pp, st);
    if (id < 0)
        return -1;
    st->id = id;
    return 0;
}

/* Everything nghttp2 wants to send, into c->out, then one write. */
static int pump(bench_conn_t *c)
{
    h2conn_t *hc = c->h2;
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(hc->s, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        memcpy(bench_out_reserve(c, (size_t)n), data, (size_t)n);
    }
    return bench_flush(c);
}

/* Start a request on the free slot st, its latency counted from `sent`; a
 * submit that fails is a write error and retires the connection. */
static void start_stream(h2conn_t *hc, h2stream_t *st, uint64_t sent)
{
    st->in_use = 1;
    st->sent = sent;
    hc->active++;
    if (submit(hc, st) < 0) {
        st->in_use = 0;
        hc->active--;
        bench_fail(hc->c->th, sent, BENCH_ERR_WRITE);
        hc->goaway = 1; /* e.g. stream ids used up: connect again */
    }
}

/* Keep -m streams in flight (--rate: say there is room; the schedule sends). */
static void fill(h2conn_t *hc)
{
    bench_thread_t *th = hc->c->th;
    if (th->rate_mode) {
        bench_rate_ready(hc->c);
        return;
    }
    for (int i = 0; i < hc->nslots && !hc->goaway; i++) {
        h2stream_t *st = &hc->slots[i];
        if (st->in_use)
            continue;
        if (!bench_take(th))
            return;
        start_stream(hc, st, th->now);
    }
}

/* A connection told to go away (or out of stream ids) with nothing left in
 * flight: connect again.  -1 when c was closed. */
static int reopen_after_goaway(bench_conn_t *c)
{
    h2conn_t *hc = c->h2;
    if (!hc->goaway || hc->active > 0)
        return 0;
    c->th->st.reconnects++;
    bench_conn_close(c, -1, BENCH_REOPEN_NOW);
    return -1;
}

static unsigned h2_room(bench_conn_t *c)
{
    h2conn_t *hc = c->h2;
    return hc && hc->s && !hc->goaway ? (unsigned)(hc->nslots - hc->active) : 0;
}

static void h2_send(bench_conn_t *c, uint64_t due)
{
    h2conn_t *hc = c->h2;
    for (int i = 0; i < hc->nslots; i++) {
        if (!hc->slots[i].in_use) {
            start_stream(hc, &hc->slots[i], due);
            return;
        }
    }
}

static int h2_push(bench_conn_t *c)
{
    if (pump(c) < 0) {
        bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
        return -1;
    }
    return reopen_after_goaway(c);
}

static int h2_start(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    h2conn_t *hc = conn_state(c);
    if (!hc || nghttp2_session_client_new(&hc->s, shared_of(th)->cbs, hc) != 0) {
        bench_conn_close(c, BENCH_ERR_CONNECT, 0);
        return -1;
    }
    hc->goaway = 0;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (1u << 24)},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(hc->s, NGHTTP2_FLAG_NONE, 0, 1 << 26);
    if (th->o->per_request) {
        /* the request was taken (and timed) when the connection was opened */
        h2stream_t *st = &hc->slots[0];
        if (submit(hc, st) < 0) {
            bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
            return -1;
        }
    } else {
        fill(hc);
    }
    if (pump(c) < 0) {
        bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
        return -1;
    }
    return 0;
}

static void h2_take_one(bench_conn_t *c, uint64_t when)
{
    h2conn_t *hc = conn_state(c);
    if (!hc) {
        fprintf(stderr, "petrel-bench: out of memory\n");
        exit(2);
    }
    h2stream_t *st = &hc->slots[0];
    st->in_use = 1;
    st->sent = when;
    st->id = 0;
    hc->active = 1;
}

static void h2_closed(bench_conn_t *c, int kind)
{
    h2conn_t *hc = c->h2;
    if (!hc)
        return;
    bench_thread_t *th = c->th;
    if (hc->s) {
        nghttp2_session_del(hc->s); /* calls no stream-close callbacks */
        hc->s = NULL;
    }
    for (int i = 0; i < hc->nslots; i++) {
        h2stream_t *st = &hc->slots[i];
        if (!st->in_use)
            continue;
        if (kind >= 0)
            bench_fail(th, st->sent, kind);
        else
            th->inflight--;
        st->in_use = 0;
    }
    hc->active = 0;
}

static uint64_t h2_oldest(bench_conn_t *c)
{
    h2conn_t *hc = c->h2;
    uint64_t t = 0;
    if (!hc)
        return 0;
    for (int i = 0; i < hc->nslots; i++)
        if (hc->slots[i].in_use && (t == 0 || hc->slots[i].sent < t))
            t = hc->slots[i].sent;
    return t;
}

/* The server closed the connection (err 0), or reading it failed (errno). */
static int peer_closed(bench_conn_t *c, int err)
{
    bench_thread_t *th = c->th;
    h2conn_t *hc = c->h2;
    if (err) {
        if (th->o->verbose)
            fprintf(stderr, "petrel-bench: read: %s\n", strerror(err));
        bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
        return -1;
    }
    if (!th->o->per_request || hc->active > 0)
        th->st.reconnects += !th->o->per_request;
    bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_NOW);
    return -1;
}

/* nghttp2 takes all it is given (nothing is ever carried), or fails. */
static ssize_t consume(bench_conn_t *c, char *buf, size_t len)
{
    h2conn_t *hc = c->h2;
    ssize_t r = nghttp2_session_mem_recv(hc->s, (const uint8_t *)buf, len);
    if (r < 0) {
        if (c->th->o->verbose)
            fprintf(stderr, "petrel-bench: h2: %s\n", nghttp2_strerror((int)r));
        bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
        return -1;
    }
    return r;
}

static int h2_readable(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    h2conn_t *hc = c->h2;
    if (bench_read_all(c, consume, peer_closed) < 0)
        return -1;
    if (th->o->per_request) {
        if (hc->active == 0) { /* answered: this connection's work is done */
            bench_conn_close(c, -1, BENCH_REOPEN_NOW);
            return -1;
        }
    } else {
        fill(hc);
        if (reopen_after_goaway(c) < 0)
            return -1;
    }
    if (pump(c) < 0) {
        bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
        return -1;
    }
    if (!nghttp2_session_want_read(hc->s) && !nghttp2_session_want_write(hc->s)) {
        bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_NOW);
        return -1;
    }
    return 0;
}

static void h2_conn_free(bench_conn_t *c)
{
    h2conn_t *hc = c->h2;
    if (!hc)
        return;
    if (hc->s)
        nghttp2_session_del(hc->s);
    free_conn_state(hc);
    c->h2 = NULL;
}

static void h2_release(bench_thread_t *th)
{
    h2shared_t *sh = shared_of(th);
    if (!sh)
        return;
    for (size_t i = 0; sh->bodies && i < sh->nbodies; i++)
        free(sh->bodies[i]);
    free(sh->bodies);
    for (int i = 0; sh->names && i < th->o->nheaders; i++)
        free(sh->names[i]);
    free(sh->names);
    free(sh->nva);
    if (sh->cbs)
        nghttp2_session_callbacks_del(sh->cbs);
    free(sh);
    th->req = NULL;
}

const bench_proto_t bench_proto_h2 = {
    .prepare = h2_prepare,
    .start = h2_start,
    .readable = h2_readable,
    .closed = h2_closed,
    .oldest = h2_oldest,
    .take_one = h2_take_one,
    .room = h2_room,
    .send = h2_send,
    .push = h2_push,
    .conn_free = h2_conn_free,
    .release = h2_release,
};
