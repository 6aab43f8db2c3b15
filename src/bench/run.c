/*
 * run.c -- petrel-bench's per-thread event loop.
 *
 * Each thread owns an epoll instance and its share of the connections; the
 * threads share nothing but the read-only options (each has its own counters
 * and histogram, merged by main.c at the end).
 *
 * Syscalls per request are what the generator's speed is made of, so:
 * - every socket is registered once, edge-triggered, for EPOLLIN|EPOLLOUT
 *   (no epoll_ctl per request: wrk does two);
 * - the next requests are written right after the read that completed the
 *   previous ones, without waiting for EPOLLOUT; EPOLLOUT matters only after
 *   a short write;
 * - a read that does not fill the buffer drained the socket (an edge comes
 *   with any new data), so there is no read that ends in EAGAIN.
 *
 * Accounting.  A request is "started" when bench_take() allows it; it ends as
 * a response (bench_complete) or as a failure of one kind (bench_fail), never
 * both and never neither.  With -n a request is counted when it was started
 * inside the measured window (after the warm-up), so exactly N are counted;
 * with -d it is counted when it ends inside the window.
 *
 * --rate: the open loop.  Closed, a connection sends its next request when an
 * answer frees a slot, so a server that stalls is sent less meanwhile and
 * the stall shows only in the few requests in flight (coordinated omission).
 * Open, every request has an intended send time, fixed in advance (evenly
 * spaced, the threads interleaved); at that time it goes out on a connection
 * with room (round robin over the ready ring), or, if none has room, as soon
 * as one has, and its latency counts from the intended time, so a stall
 * counts for every request that should have gone out during it.  A request
 * is counted when its intended time is in the window; the run goes on after
 * the window until those requests are answered or time out (--timeout, also
 * from the intended time, also for those not sent yet).  The client's own
 * lag is how late a request went out after both its intended time and a
 * connection having room: the time this loop was busy or not running.  A
 * connection has room from the moment the answer that freed it reached the
 * kernel (its receive timestamp), not from when this loop read it: a client
 * that does not get the CPU reads late, and that is its lag too.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

const char *const bench_err_names[BENCH_ERR_N] = {
    "connect", "read", "write", "timeout", "non2xx", "check", "protocol", "grpc_status",
};

int bench_stop;

#define RETRY_NS 10000000ull /* 10 ms before connecting again after a failure */

uint64_t bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int counted(const bench_thread_t *th, uint64_t sent, uint64_t done)
{
    if (th->nmode || th->rate_mode) /* --rate: sent is the intended time */
        return sent >= th->t_measure;
    return done >= th->t_measure && done < th->t_end;
}

/* --rate: when request k of this thread is due */
static uint64_t due_at(const bench_thread_t *th, uint64_t k)
{
    return th->t0 + (uint64_t)(th->off + (long double)k * th->step);
}

/* --rate: the first request due at or after t */
static uint64_t first_due(const bench_thread_t *th, uint64_t t)
{
    long double x = t > th->t0 ? ((long double)(t - th->t0) - th->off) / th->step : 0;
    uint64_t k = x > 0 ? (uint64_t)x : 0;
    while (k > 0 && due_at(th, k - 1) >= t)
        k--;
    while (due_at(th, k) < t)
        k++;
    return k;
}

/* --rate: take the next request of the schedule; its intended time */
static uint64_t rate_take(bench_thread_t *th)
{
    uint64_t t = due_at(th, th->k_next++);
    th->inflight++;
    if (t >= th->t_measure)
        th->st.scheduled++;
    return t;
}

int bench_take_any(bench_thread_t *th, uint64_t *when)
{
    if (th->rate_mode) {
        if (th->k_next >= th->k_end)
            return 0;
        *when = rate_take(th);
        return 1;
    }
    if (!bench_take(th))
        return 0;
    *when = th->now;
    return 1;
}

/* --rate: what a connection could take now */
static unsigned rate_room(bench_conn_t *c)
{
    if (c->th->o->per_request)
        return c->state == BENCH_CONN_IDLE;
    return c->state == BENCH_CONN_OPEN ? c->th->proto->room(c) : 0;
}

void bench_rate_ready(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    if (c->in_ready)
        return; /* it has had room since c->ready_since */
    if (!rate_room(c))
        return;
    c->in_ready = 1;
    c->ready_since = th->rx_at && th->rx_at < th->now ? th->rx_at : th->now;
    th->ready[(th->ready_head + th->ready_count++) % (unsigned)th->nconns] = c;
}

int bench_take(bench_thread_t *th)
{
    uint64_t now = th->now;
    if (now < th->t_measure) { /* warm-up: not counted, no quota */
        th->inflight++;
        return 1;
    }
    if (th->nmode) {
        if (th->quota == 0)
            return 0;
        th->quota--;
    } else if (now >= th->t_end) {
        return 0;
    }
    th->inflight++;
    return 1;
}

/* a counted response's latency; --rate: also how long it waited unread */
static void record_latency(bench_thread_t *th, uint64_t sent)
{
    bench_hist_record(&th->st.hist, th->now > sent ? th->now - sent : 0);
    if (th->rx_at)
        bench_hist_record(&th->st.read_delay, th->now > th->rx_at ? th->now - th->rx_at : 0);
}

void bench_complete(bench_thread_t *th, uint64_t sent, int status, uint64_t body_len)
{
    const bench_opts_t *o = th->o;
    int kind = -1;
    if (o->expect_status ? status != o->expect_status : (status < 200 || status > 299))
        kind =
            o->expect_status && status >= 200 && status <= 299 ? BENCH_ERR_CHECK : BENCH_ERR_NON2XX;
    else if (o->expect_body_size >= 0 && body_len != (uint64_t)o->expect_body_size)
        kind = BENCH_ERR_CHECK;
    bench_complete_kind(th, sent, kind);
}

void bench_complete_kind(bench_thread_t *th, uint64_t sent, int kind)
{
    th->inflight--;
    if (th->now >= th->t_measure && th->now < th->t_end)
        th->st.done_in_window++;
    if (!counted(th, sent, th->now))
        return;
    th->st.requests++;
    record_latency(th, sent);
    if (kind >= 0)
        th->st.errors[kind]++;
}

void bench_fail(bench_thread_t *th, uint64_t sent, int kind)
{
    th->inflight--;
    if (counted(th, sent, th->now))
        th->st.errors[kind]++;
}

char *bench_out_reserve(bench_conn_t *c, size_t n)
{
    if (c->out_off > 0 && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + n > c->out_cap) {
        if (c->out_off > 0) { /* compact first */
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + n > c->out_cap) {
            size_t cap = c->out_cap ? c->out_cap : 4096;
            while (cap < c->out_len + n)
                cap *= 2;
            char *p = realloc(c->out, cap);
            if (!p) {
                fprintf(stderr, "petrel-bench: out of memory\n");
                exit(2);
            }
            c->out = p;
            c->out_cap = cap;
        }
    }
    char *p = c->out + c->out_len;
    c->out_len += n;
    return p;
}

int bench_flush(bench_conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w > 0) {
            c->out_off += (size_t)w;
            c->th->st.bytes_out += (uint64_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0; /* EPOLLOUT (edge-triggered) says when to go on */
        return -1;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* --rate: a read that also takes the kernel's receive time of the data */
static ssize_t read_stamped(bench_conn_t *c, char *buf, size_t len)
{
    bench_thread_t *th = c->th;
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(c->fd, &m, 0);
    if (n <= 0)
        return n;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_TIMESTAMPNS)
            continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(h), sizeof ts);
        int64_t real = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        uint64_t at = real > th->real_off ? (uint64_t)(real - th->real_off) : 0;
        if (at > th->rx_at)
            th->rx_at = at;
    }
    return n;
}

ssize_t bench_read(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    if (c->carry_len)
        memcpy(th->rbuf, c->carry, c->carry_len);
    for (;;) {
        ssize_t n = th->rate_mode ? read_stamped(c, th->rbuf + c->carry_len, th->rbuf_cap)
                                  : read(c->fd, th->rbuf + c->carry_len, th->rbuf_cap);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC, ns: for the receive timestamps */
static int64_t real_offset(void)
{
    struct timespec r, m;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    return ((int64_t)r.tv_sec - m.tv_sec) * 1000000000 + (r.tv_nsec - m.tv_nsec);
}

int bench_carry(bench_conn_t *c, const char *rest, size_t left)
{
    c->carry_len = 0;
    if (left == 0)
        return 0;
    if (left > c->carry_cap) {
        char *p = realloc(c->carry, left);
        if (!p)
            return -1;
        c->carry = p;
        c->carry_cap = left;
    }
    memcpy(c->carry, rest, left);
    c->carry_len = left;
    return 0;
}

int bench_read_all(bench_conn_t *c, bench_consume_fn *consume, bench_peer_closed_fn *peer_closed)
{
    bench_thread_t *th = c->th;
    for (;;) {
        ssize_t n = bench_read(c);
        if (n < 0) {
            if (errno == EAGAIN)
                return 0;
            return peer_closed(c, errno);
        }
        th->now = bench_now();
        if (n == 0)
            return peer_closed(c, 0);
        th->st.bytes_in += (uint64_t)n;
        size_t len = c->carry_len + (size_t)n;
        ssize_t used = consume(c, th->rbuf, len);
        if (used < 0)
            return -1;
        if (bench_carry(c, th->rbuf + used, len - (size_t)used) < 0) {
            if (th->o->verbose)
                fprintf(stderr, "petrel-bench: out of memory\n");
            bench_conn_close(c, BENCH_ERR_READ, BENCH_REOPEN_LATER);
            return -1;
        }
        if ((size_t)n < th->rbuf_cap && !c->hup)
            return 0; /* drained: edge-triggered epoll reports new data */
    }
}

static void conn_open(bench_conn_t *c);
static void conn_connect(bench_conn_t *c);

/* Retry a failed connection later, or give up when nothing is left to do. */
static void conn_retry(bench_conn_t *c)
{
    c->state = BENCH_CONN_RETRY;
    c->retry_at = c->th->now + RETRY_NS;
    c->th->retrying++;
}

static void connect_failed(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    uint64_t t;
    if (th->o->per_request) {
        th->proto->closed(c, BENCH_ERR_CONNECT); /* the request taken for it */
    } else if (bench_take_any(th, &t)) {
        bench_fail(th, t, BENCH_ERR_CONNECT); /* one request's worth */
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->out_off = c->out_len = 0;
    conn_retry(c);
}

void bench_conn_close(bench_conn_t *c, int kind, int reopen)
{
    bench_thread_t *th = c->th;
    th->proto->closed(c, kind);
    if (c->fd >= 0) {
        close(c->fd); /* also leaves the epoll set */
        c->fd = -1;
    }
    c->out_off = c->out_len = 0;
    c->carry_len = 0;
    bench_h1p_init(&c->parser);
    c->parser.head_only = strcmp(th->o->method, "HEAD") == 0;
    c->state = BENCH_CONN_IDLE;
    if (!reopen)
        return;
    if (reopen == BENCH_REOPEN_LATER)
        conn_retry(c); /* broken: do not hammer the server */
    else
        conn_open(c);
}

static void connected(bench_conn_t *c)
{
    c->state = BENCH_CONN_OPEN;
    c->th->st.connects++;
    if (c->th->o->proxy_len) /* before anything the protocol sends */
        memcpy(bench_out_reserve(c, c->th->o->proxy_len), c->th->o->proxy, c->th->o->proxy_len);
    c->th->proto->start(c);
}

static void conn_open(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    const bench_opts_t *o = th->o;
    c->state = BENCH_CONN_IDLE;
    if (th->rate_mode) {
        if (th->k_next >= th->k_end)
            return;           /* the schedule is done */
        if (o->per_request) { /* it connects when the schedule sends on it */
            bench_rate_ready(c);
            return;
        }
    } else if (o->per_request) {
        if (!bench_take(th))
            return; /* done: the connection stays closed */
        th->proto->take_one(c, th->now);
    } else if (th->nmode && th->now >= th->t_measure && th->quota == 0) {
        return;
    } else if (!th->nmode && th->now >= th->t_end) {
        return;
    }
    conn_connect(c);
}

/* connect c (non-blocking); a failure is counted and retried */
static void conn_connect(bench_conn_t *c)
{
    bench_thread_t *th = c->th;
    const bench_opts_t *o = th->o;
    c->conn_start = th->now;
    int fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (o->verbose)
            fprintf(stderr, "petrel-bench: socket: %s\n", strerror(errno));
        c->fd = -1;
        connect_failed(c);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (th->rate_mode) /* when answers come in: see bench_rate_ready */
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    c->fd = fd;
    int r = connect(fd, (const struct sockaddr *)&o->addr, o->addrlen);
    if (r < 0 && errno != EINPROGRESS) {
        if (o->verbose)
            fprintf(stderr, "petrel-bench: connect: %s\n", strerror(errno));
        connect_failed(c);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(th->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        connect_failed(c);
        return;
    }
    if (r == 0) {
        connected(c);
    } else {
        c->state = BENCH_CONN_CONNECTING;
    }
}

static void on_event(bench_conn_t *c, uint32_t ev)
{
    if (c->state == BENCH_CONN_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            if (c->th->o->verbose)
                fprintf(stderr, "petrel-bench: connect: %s\n", strerror(err));
            connect_failed(c);
            return;
        }
        if (!(ev & (EPOLLOUT | EPOLLIN)))
            return;
        connected(c);
        if (c->state != BENCH_CONN_OPEN || !(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)))
            return;
    }
    if (c->state != BENCH_CONN_OPEN)
        return;
    if ((ev & EPOLLOUT) && c->out_off < c->out_len) {
        if (bench_flush(c) < 0) {
            bench_conn_close(c, BENCH_ERR_WRITE, BENCH_REOPEN_LATER);
            return;
        }
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        /* with the FIN in the same edge as the data, a short read does not
         * mean drained: the EOF is still to be read, and no edge will come */
        c->hup = (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
        c->th->proto->readable(c);
    }
}

/* Requests older than --timeout fail; so do connects. */
static void check_timeouts(bench_thread_t *th)
{
    uint64_t limit = (uint64_t)(th->o->timeout * 1e9);
    for (int i = 0; i < th->nconns; i++) {
        bench_conn_t *c = &th->conns[i];
        if (c->state == BENCH_CONN_CONNECTING) {
            if (th->now - c->conn_start > limit) {
                uint64_t t;
                if (th->o->per_request) {
                    bench_conn_close(c, BENCH_ERR_TIMEOUT, BENCH_REOPEN_NOW);
                } else {
                    if (bench_take_any(th, &t))
                        bench_fail(th, t, BENCH_ERR_TIMEOUT);
                    bench_conn_close(c, -1, BENCH_REOPEN_NOW);
                }
            }
        } else if (c->state == BENCH_CONN_OPEN) {
            uint64_t t = th->proto->oldest(c);
            if (t && th->now > t && th->now - t > limit)
                bench_conn_close(c, BENCH_ERR_TIMEOUT, BENCH_REOPEN_NOW);
        }
    }
    /* --rate: requests that waited longer than that fail without being
     * sent.  If a connection had room meanwhile, this loop did not get to
     * send them: that is its lag (at least as long as the wait). */
    while (th->rate_mode && th->k_next < th->k_end) {
        uint64_t due = due_at(th, th->k_next);
        if (due >= th->now || th->now - due <= limit)
            break;
        uint64_t t = rate_take(th);
        if (t >= th->t_measure) {
            th->st.unsent++;
            if (th->ready_count > 0) {
                uint64_t since = th->ready[th->ready_head]->ready_since;
                uint64_t from = t > since ? t : since;
                bench_hist_record(&th->st.lag, th->now > from ? th->now - from : 0);
            }
        }
        bench_fail(th, t, BENCH_ERR_TIMEOUT);
    }
}

/* --rate: send what is due, one request at a time to the connections with
 * room, round robin; then write each connection's new requests at once. */
static void rate_dispatch(bench_thread_t *th)
{
    const bench_opts_t *o = th->o;
    unsigned n = (unsigned)th->nconns;
    th->now = bench_now();
    while (th->k_next < th->k_end && th->ready_count > 0) {
        if (due_at(th, th->k_next) > th->now)
            break;
        bench_conn_t *c = th->ready[th->ready_head];
        th->ready_head = (th->ready_head + 1) % n;
        th->ready_count--;
        c->in_ready = 0;
        if (!rate_room(c))
            continue; /* it was closed, or filled up, since */
        uint64_t t = rate_take(th);
        if (t >= th->t_measure) {
            uint64_t from = t > c->ready_since ? t : c->ready_since;
            bench_hist_record(&th->st.lag, th->now > from ? th->now - from : 0);
            if (c->ready_since > t)
                th->st.queued++; /* no connection had room at its time */
        }
        if (o->per_request) {
            th->proto->take_one(c, t);
            conn_connect(c);
            th->now = bench_now();
            continue;
        }
        th->proto->send(c, t);
        if (!c->dirty) {
            c->dirty = 1;
            th->dirty[th->ndirty++] = c;
        }
        if (rate_room(c)) { /* to the back of the ring, still ready since then */
            c->in_ready = 1;
            th->ready[(th->ready_head + th->ready_count++) % n] = c;
        }
    }
    for (unsigned i = 0; i < th->ndirty; i++) {
        bench_conn_t *c = th->dirty[i];
        c->dirty = 0;
        if (c->state == BENCH_CONN_OPEN)
            th->proto->push(c);
    }
    th->ndirty = 0;
}

static void run_retries(bench_thread_t *th)
{
    for (int i = 0; i < th->nconns && th->retrying > 0; i++) {
        bench_conn_t *c = &th->conns[i];
        if (c->state == BENCH_CONN_RETRY && c->retry_at <= th->now) {
            th->retrying--;
            conn_open(c);
        }
    }
}

int bench_thread_setup(bench_thread_t *th)
{
    th->ep = epoll_create1(EPOLL_CLOEXEC);
    if (th->ep < 0)
        return -1;
    th->rbuf_cap = 256 * 1024;
    th->rbuf = malloc(th->rbuf_cap + 64 * 1024); /* + room for carried bytes */
    th->conns = calloc((size_t)th->nconns, sizeof *th->conns);
    if (!th->rbuf || !th->conns)
        return -1;
    bench_hist_init(&th->st.hist);
    unsigned ring = 1;
    while (ring < (unsigned)th->o->depth)
        ring <<= 1;
    for (int i = 0; i < th->nconns; i++) {
        bench_conn_t *c = &th->conns[i];
        c->th = th;
        c->fd = -1;
        c->ring_mask = ring - 1;
        c->ring = calloc(ring, sizeof *c->ring);
        if (!c->ring)
            return -1;
        bench_h1p_init(&c->parser);
        c->parser.head_only = strcmp(th->o->method, "HEAD") == 0;
    }
    if (th->proto->prepare && th->proto->prepare(th) < 0)
        return -1;
    if (th->o->rate > 0) {
        /* request k of thread i is request k * nthreads + i of the run, due
         * at t0 + that / rate */
        th->rate_mode = 1;
        th->step = 1e9L * (long double)th->nthreads / (long double)th->o->rate;
        th->off = 1e9L * (long double)th->id / (long double)th->o->rate;
        th->k_next = 0;
        th->k_end = th->nmode ? first_due(th, th->t_measure) + th->quota : first_due(th, th->t_end);
        th->ready = calloc((size_t)th->nconns, sizeof *th->ready);
        th->dirty = calloc((size_t)th->nconns, sizeof *th->dirty);
        if (!th->ready || !th->dirty)
            return -1;
    }
    bench_hist_init(&th->st.lag);
    bench_hist_init(&th->st.read_delay);
    return 0;
}

void bench_thread_free(bench_thread_t *th)
{
    for (int i = 0; th->conns && i < th->nconns; i++) {
        bench_conn_t *c = &th->conns[i];
        if (th->proto && th->proto->conn_free)
            th->proto->conn_free(c);
        if (c->fd >= 0)
            close(c->fd);
        free(c->ring);
        free(c->out);
        free(c->carry);
    }
    free(th->conns);
    if (th->proto && th->proto->release)
        th->proto->release(th);
    free(th->rbuf);
    free(th->req);
    free(th->ready);
    free(th->dirty);
    if (th->ep >= 0)
        close(th->ep);
}

/* epoll_wait for up to ns nanoseconds: epoll_pwait2 where the kernel has it
 * (the schedule of --rate needs better than epoll_wait's milliseconds) */
static int wait_events(int ep, struct epoll_event *evs, int max, uint64_t ns)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
    static int no_pwait2;
    if (!__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        int n = epoll_pwait2(ep, evs, max, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        __atomic_store_n(&no_pwait2, 1, __ATOMIC_RELAXED);
    }
#endif
    return epoll_wait(ep, evs, max, (int)((ns + 999999) / 1000000));
}

void *bench_thread_main(void *arg)
{
    bench_thread_t *th = arg;
    struct epoll_event evs[256];
    uint64_t tick =
        th->o->timeout * 1e9 / 10 < 100e6 ? (uint64_t)(th->o->timeout * 1e9 / 10) : 100000000ull;
    if (th->rate_mode) /* wake at the intended times, not up to 50 us after */
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    th->real_off = real_offset();
    th->now = bench_now();
    uint64_t next_tick = th->now + tick;
    for (int i = 0; i < th->nconns; i++)
        conn_open(&th->conns[i]);
    for (;;) {
        th->now = bench_now();
        if (th->rate_mode) {
            if (th->k_next >= th->k_end && th->inflight == 0)
                break;
        } else if (!th->nmode && th->now >= th->t_end) {
            break;
        }
        if (__atomic_load_n(&bench_stop, __ATOMIC_RELAXED))
            break;
        if (th->nmode && !th->rate_mode && th->now >= th->t_measure && th->quota == 0 &&
            th->inflight == 0)
            break;
        uint64_t wake = next_tick;
        if (!th->nmode && th->t_end < wake && th->t_end > th->now)
            wake = th->t_end;
        if (th->now < th->t_measure && th->t_measure < wake)
            wake = th->t_measure; /* the warm-up ends: connections may be waiting */
        if (th->retrying > 0 && th->now + RETRY_NS / 10 < wake)
            wake = th->now + RETRY_NS / 10;
        if (th->rate_mode && th->ready_count > 0 && th->k_next < th->k_end) {
            /* sleep until --spin before the next request is due, then poll:
             * waking from a sleep takes tens of microseconds on some
             * machines, and that would be added to every latency */
            uint64_t due = due_at(th, th->k_next), spin = (uint64_t)(th->o->spin * 1e9);
            due = due > spin ? due - spin : 0;
            if (due < wake)
                wake = due;
        }
        int n = wait_events(th->ep, evs, 256, wake > th->now ? wake - th->now : 0);
        th->now = bench_now();
        for (int i = 0; i < n; i++) {
            th->rx_at = 0;
            on_event(evs[i].data.ptr, evs[i].events);
        }
        th->rx_at = 0;
        if (th->retrying > 0)
            run_retries(th);
        if (th->now >= next_tick) {
            next_tick = th->now + tick;
            check_timeouts(th);
            th->real_off = real_offset();
        }
        if (th->rate_mode)
            rate_dispatch(th);
        uint64_t errs = 0;
        for (int k = 0; k < BENCH_ERR_N; k++)
            errs += th->st.errors[k];
        __atomic_store_n(&th->prog_requests, th->st.requests, __ATOMIC_RELAXED);
        __atomic_store_n(&th->prog_errors, errs, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < th->nconns; i++) {
        bench_conn_t *c = &th->conns[i];
        if (c->fd >= 0) {
            th->proto->closed(c, -2); /* the run is over: nothing is counted */
            close(c->fd);
            c->fd = -1;
        }
    }
    __atomic_store_n(&th->t_finish, th->now, __ATOMIC_RELEASE);
    return NULL;
}

/* {"requestId":ID,"payload":"xxx"}: the payload fills up to size. */
static const char json_a[] = "{\"requestId\":";
static const char json_b[] = ",\"payload\":\"";
static const char json_c[] = "\"}";

static size_t u64_digits(uint64_t v, char *buf)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

size_t bench_json_min_size(uint64_t id)
{
    char d[24];
    return sizeof json_a - 1 + u64_digits(id, d) + sizeof json_b - 1 + sizeof json_c - 1;
}

size_t bench_json_body(char *dst, size_t size, uint64_t id)
{
    char *p = dst;
    memcpy(p, json_a, sizeof json_a - 1);
    p += sizeof json_a - 1;
    p += u64_digits(id, p);
    memcpy(p, json_b, sizeof json_b - 1);
    p += sizeof json_b - 1;
    size_t fixed = (size_t)(p - dst) + sizeof json_c - 1;
    if (size > fixed) {
        memset(p, 'x', size - fixed);
        p += size - fixed;
    }
    memcpy(p, json_c, sizeof json_c - 1);
    p += sizeof json_c - 1;
    return (size_t)(p - dst);
}
