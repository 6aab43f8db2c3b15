/*
 * h1.c -- petrel-bench's HTTP/1.1 client: keep-alive with a pipeline of up to
 * -p requests per connection, or (--close) one new connection per request.
 *
 * The pipeline is a sliding window: after each read, as many new requests are
 * written (in one write) as responses were completed, so a connection keeps
 * -p requests in flight all the time (wrk writes a batch of -p and waits for
 * all of them).  The send time of every request is kept in a ring, so each
 * response's latency is measured from its own request's send time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

static int has_header(const bench_opts_t *o, const char *name)
{
    for (int i = 0; i < o->nheaders; i++)
        if (strcasecmp(o->headers[i].name, name) == 0)
            return 1;
    return 0;
}

char *bench_h1_head(const bench_opts_t *o, const char *method, const char *extra, size_t *len,
                    size_t *cap)
{
    size_t c = 4096 + strlen(method) + strlen(o->path) + (extra ? strlen(extra) : 0);
    for (int i = 0; i < o->nheaders; i++)
        c += strlen(o->headers[i].name) + strlen(o->headers[i].value) + 4;
    char *head = malloc(c);
    if (!head)
        return NULL;
    size_t n = (size_t)snprintf(head, c, "%s %s HTTP/1.1\r\n", method, o->path);
    if (!has_header(o, "host")) {
        if (strcmp(o->port_str, "80") == 0)
            n += (size_t)snprintf(head + n, c - n, "Host: %s\r\n", o->host);
        else
            n += (size_t)snprintf(head + n, c - n, "Host: %s:%s\r\n", o->host, o->port_str);
    }
    if (extra)
        n += (size_t)snprintf(head + n, c - n, "%s", extra);
    for (int i = 0; i < o->nheaders; i++)
        n += (size_t)snprintf(head + n, c - n, "%s: %s\r\n", o->headers[i].name,
                              o->headers[i].value);
    if (n >= c) {
        free(head);
        return NULL;
    }
    *len = n;
    *cap = c;
    return head;
}

/* The request head (and for GET, depth copies of the whole request). */
static int h1_prepare(bench_thread_t *th)
{
    const bench_opts_t *o = th->o;
    size_t n, cap;
    char *head = bench_h1_head(o, o->method, NULL, &n, &cap);
    if (!head)
        return -1;
    if (o->per_request && !has_header(o, "connection"))
        n += (size_t)snprintf(head + n, cap - n, "Connection: close\r\n");
    if (o->body_size > 0) {
        if (!has_header(o, "content-type"))
            n += (size_t)snprintf(head + n, cap - n, "Content-Type: application/json\r\n");
        n += (size_t)snprintf(head + n, cap - n, "Content-Length: %zu\r\n", o->body_size);
    } else if (strcmp(o->method, "POST") == 0 || strcmp(o->method, "PUT") == 0) {
        n += (size_t)snprintf(head + n, cap - n, "Content-Length: 0\r\n");
    }
    n += (size_t)snprintf(head + n, cap - n, "\r\n");
    if (n >= cap) {
        free(head);
        return -1;
    }
    if (o->body_size > 0) {
        th->req = head;
        th->req_len = n;
        return 0;
    }
    int depth = o->per_request ? 1 : o->depth;
    th->req = malloc(n * (size_t)depth);
    if (!th->req) {
        free(head);
        return -1;
    }
    for (int i = 0; i < depth; i++)
        memcpy(th->req + (size_t)i * n, head, n);
    th->req_len = n;
    free(head);
    return 0;
}

/* Append k requests to c->out. */
static void put_requests(bench_conn_t *c, unsigned k)
{
    bench_thread_t *th = c->th;
    const bench_opts_t *o = th->o;
    if (o->body_size == 0) {
        memcpy(bench_out_reserve(c, k * th->req_len), th->req, k * th->req_len);
        return;
    }
    for (unsigned i = 0; i < k; i++) {
        char *p = bench_out_reserve(c, th->req_len + o->body_size);
        memcpy(p, th->req, th->req_len);
        uint64_t id = th->seq++ * (uint64_t)o->threads + (uint64_t)th->id;
        bench_json_body(p + th->req_len, o->body_size, id);
    }
}

static void ring_push(bench_conn_t *c, uint64_t t)
{
    c->ring[(c->ring_head + c->ring_count) & c->ring_mask] = t;
    c->ring_count++;
}

static uint64_t ring_pop(bench_conn_t *c)
{
    uint64_t t = c->ring[c->ring_head];
    c->ring_head = (c->ring_head + 1) & c->ring_mask;
    c->ring_count--;
    return t;
}

/* Write what was appended; a failed write closes c (-1). */
static int h1_push(bench_conn_t *c)
{
    if (bench_flush(c) < 0) {
        bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
        return -1;
    }
    return 0;
}

/* Keep the pipeline full (--rate: say there is room; the schedule sends). */
static void fill(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    if (th->rate_mode) {
        bench_rate_ready(c);
        return;
    }
    unsigned room = (unsigned)th->o->depth - c->ring_count;
    unsigned k = 0;
    while (k < room && bench_take(th))
        k++;
    if (k == 0)
        return;
    put_requests(c, k);
    for (unsigned i = 0; i < k; i++)
        ring_push(c, th->now);
    h1_push(c);
}

static int h1_start(bench_conn_t *c)
{
    if (c->th->o->per_request) {
        /* the request was taken (and timed) when the connection was opened */
        put_requests(c, 1);
        return h1_push(c);
    }
    fill(c);
    return 0;
}

static void h1_take_one(bench_conn_t *c, uint64_t when)
{
    ring_push(c, when);
}

static unsigned h1_room(bench_conn_t *c)
{
    return (unsigned)c->th->o->depth - c->ring_count;
}

static void h1_send(bench_conn_t *c, uint64_t due)
{
    put_requests(c, 1);
    ring_push(c, due);
}

static void h1_closed(bench_conn_t *c, int kind)
{
    while (c->ring_count > 0) {
        uint64_t t = ring_pop(c);
        if (kind >= 0)
            bench_fail(c->th, t, kind);
        else
            c->th->inflight--;
    }
    c->ring_head = 0;
}

static uint64_t h1_oldest(bench_conn_t *c)
{
    return c->ring_count ? c->ring[c->ring_head] : 0;
}

static void trouble(bench_conn_t *c, const char *why)
{
    if (c->th->o->verbose)
        fprintf(stderr, "petrel-bench: %s\n", why);
}

/* The server closed the connection (err 0), or reading it failed (errno). */
static int peer_closed(bench_conn_t *c, int err)
{
    bench_thread_t *th = c->th;
    if (err) {
        trouble(c, strerror(err));
        if (!th->o->per_request)
            th->st.reconnects++;
        bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
        return -1;
    }
    int r = bench_h1p_eof(&c->parser);
    if (r == BENCH_H1P_DONE && c->carry_len == 0 && c->ring_count > 0) {
        bench_complete(th, ring_pop(c), c->parser.status, c->parser.body_len);
    } else if (r == BENCH_H1P_ERROR || c->carry_len > 0) {
        trouble(c, "connection closed inside a response");
    }
    if (!th->o->per_request)
        th->st.reconnects++;
    /* what is still in flight will never be answered */
    bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_NOW);
    return -1;
}

/* Responses in buf[0, len): the bytes consumed, -1 when c was closed. */
static ssize_t consume(bench_conn_t *c, char *buf, size_t len)
{
    bench_thread_t *th = c->th;
    size_t pos = 0;
    while (pos < len) {
        size_t used;
        int r = bench_h1p_parse(&c->parser, buf + pos, len - pos, &used);
        pos += used;
        if (r == BENCH_H1P_MORE)
            break;
        if (r == BENCH_H1P_ERROR) {
            trouble(c, c->parser.error);
            bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
            return -1;
        }
        if (c->ring_count == 0) {
            trouble(c, "a response to no request");
            bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
            return -1;
        }
        bench_complete(th, ring_pop(c), c->parser.status, c->parser.body_len);
        if (c->parser.close) {
            /* per request: the end; keep-alive: the rest in flight is lost */
            if (!th->o->per_request)
                th->st.reconnects++;
            bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_NOW);
            return -1;
        }
    }
    return (ssize_t)pos;
}

static int h1_readable(bench_conn_t *c)
{
    if (bench_read_all(c, consume, peer_closed) < 0)
        return -1;
    if (!c->th->o->per_request)
        fill(c);
    return 0;
}

const bench_proto_t bench_proto_h1 = {
    .prepare = h1_prepare,
    .start = h1_start,
    .readable = h1_readable,
    .closed = h1_closed,
    .oldest = h1_oldest,
    .take_one = h1_take_one,
    .room = h1_room,
    .send = h1_send,
    .push = h1_push,
};
