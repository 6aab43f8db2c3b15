/*
 * conn.c -- the transport: accepted sockets with their read buffer, output
 * queue, timer and arena.  What the bytes mean is the business of the
 * protocol the connection is handed to (c->ops, conn.h); this file calls
 * nothing else.
 *
 * Memory of an idle keep-alive connection is the conn struct alone: the read
 * buffer, the output queue and the arena's chunks go back to the worker's
 * pool as soon as a protocol has nothing buffered, and HTTP/1.1 gives back
 * its state between requests.
 */
#include "runtime/conn.h"
#include "runtime/metrics.h"
#include "runtime/options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

/* Connection structs kept for reuse beyond the live ones. */
#define CONN_FREE_MAX 1024
/* Lingering: bytes dropped per read, reads per readiness. */
#define LINGER_BUF 4096
#define LINGER_READS 16

/* ------------------------------------------------------------------------ */
/* Output queue: segments and copied bytes share pool chunks.              */

#define OUT_SEGS 32  /* segments per chunk of the output queue */
#define IOV_BATCH 64 /* iovecs per writev */

enum { SEG_MEM, SEG_FD };

typedef struct petrel__oseg {
    int kind; /* SEG_MEM or SEG_FD */
    const char *ptr;
    size_t len;
    int fd;
    off_t off;
} petrel__oseg_t;

struct petrel__outq {
    petrel__outq_t *next;
    uint32_t seq;         /* chunks queued before it since the queue was empty */
    uint32_t first, nseg; /* segments [first, nseg) not yet written */
    uint32_t used, cap;   /* bytes of data[] used */
    petrel__oseg_t seg[OUT_SEGS];
    char data[];
};

static petrel__outq_t *outq_new(petrel__outbuf_t *ob)
{
    petrel__outq_t *q = petrel__chunk_get(&petrel__pool);
    if (q == NULL)
        return NULL;
    q->next = NULL;
    q->seq = ob->tail ? ob->tail->seq + 1 : 0;
    q->first = q->nseg = 0;
    q->used = 0;
    q->cap = PETREL_CHUNK_SIZE - (uint32_t)sizeof(*q);
    if (ob->tail)
        ob->tail->next = q;
    else
        ob->head = q;
    ob->tail = q;
    return q;
}

static petrel__outq_t *outq_tail_with(petrel__outbuf_t *ob, uint32_t bytes)
{
    petrel__outq_t *q = ob->tail;
    if (q == NULL || q->nseg == OUT_SEGS || q->cap - q->used < bytes)
        q = outq_new(ob);
    return q;
}

char *petrel__ob_reserve(petrel__conn_t *c, petrel__outbuf_t *ob, size_t len)
{
    if (len > PETREL_CHUNK_SIZE - sizeof(petrel__outq_t) || (c->flags & PETREL__CONN_CLOSED))
        return NULL;
    petrel__outq_t *q = outq_tail_with(ob, (uint32_t)len);
    return q ? q->data + q->used : NULL;
}

static inline void ob_commit(petrel__outbuf_t *ob, size_t len)
{
    petrel__outq_t *q = ob->tail;
    char *p = q->data + q->used;
    petrel__oseg_t *last = q->nseg > q->first ? &q->seg[q->nseg - 1] : NULL;
    if (last && last->kind == SEG_MEM && last->ptr + last->len == p) {
        last->len += len;
    } else {
        petrel__oseg_t *s = &q->seg[q->nseg++];
        s->kind = SEG_MEM;
        s->ptr = p;
        s->len = len;
    }
    q->used += (uint32_t)len;
    ob->bytes += len;
}

void petrel__ob_commit(petrel__outbuf_t *ob, size_t len)
{
    ob_commit(ob, len);
}

/* Chunks of `ob`, from the sequence numbers of its ends. */
static size_t ob_chunks(const petrel__outbuf_t *ob)
{
    return ob->head ? (size_t)ob->tail->seq - ob->head->seq + 1 : 0;
}

/* Copies queued on a connection count toward the bound its protocol set
 * (c->out_limit; HTTP/1.1's is its memory budget, from --max-body-size and
 * --max-header-size): a streamed response produced faster than the peer
 * reads -- or not read at all -- fails with PETREL_ENOMEM there instead of
 * growing without bound.  (h2 and WebSocket bound their own output: flow
 * control, --ws-send-limit.)  Output held back for a later turn (`ob` is
 * not the connection's queue) counts with the queue. */
static bool out_over_budget(petrel__conn_t *c, const petrel__outbuf_t *ob)
{
    size_t limit = c->out_limit;
    if (limit == 0 || ob->head == NULL)
        return false;
    size_t queued =
        (ob_chunks(ob) + 1 + (ob == &c->out ? 0 : ob_chunks(&c->out))) * PETREL_CHUNK_SIZE;
    if (queued <= limit)
        return false;
    petrel_log(PETREL_LOG_WARN,
               "%zu bytes of output queued for a peer that does not read "
               "them (limit %zu, see --max-body-size): closing",
               queued, limit);
    petrel__conn_close_why(c, PETREL__CLOSE_LIMIT);
    return true;
}

int petrel__ob_copy(petrel__conn_t *c, petrel__outbuf_t *ob, const void *data, size_t len)
{
    const char *d = data;
    if (c->flags & PETREL__CONN_CLOSED)
        return PETREL_EIO; /* a streamed response whose peer is gone */
    petrel__outq_t *t = ob->tail;
    if (t && t->nseg < OUT_SEGS && t->cap - t->used >= len) {
        /* the common case: it fits in the last chunk */
        memcpy(t->data + t->used, d, len);
        ob_commit(ob, len);
        return 0;
    }
    while (len > 0) {
        petrel__outq_t *q = ob->tail;
        if (q == NULL || q->nseg == OUT_SEGS || q->used == q->cap)
            if (out_over_budget(c, ob) || (q = outq_new(ob)) == NULL)
                return PETREL_ENOMEM;
        size_t n = q->cap - q->used;
        if (n > len)
            n = len;
        memcpy(q->data + q->used, d, n);
        ob_commit(ob, n);
        d += n;
        len -= n;
    }
    return 0;
}

static int out_seg(petrel__conn_t *c, petrel__outbuf_t *ob, int kind, const void *ptr, size_t len,
                   int fd, off_t off)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return PETREL_EIO;
    petrel__outq_t *q = outq_tail_with(ob, 0);
    if (q == NULL)
        return PETREL_ENOMEM;
    petrel__oseg_t *s = &q->seg[q->nseg++];
    s->kind = kind;
    s->ptr = ptr;
    s->len = len;
    s->fd = fd;
    s->off = off;
    ob->bytes += len;
    return 0;
}

int petrel__ob_ref(petrel__conn_t *c, petrel__outbuf_t *ob, const void *data, size_t len)
{
    return len ? out_seg(c, ob, SEG_MEM, data, len, -1, 0) : 0;
}

int petrel__ob_fd(petrel__conn_t *c, petrel__outbuf_t *ob, int fd, off_t off, size_t len)
{
    return len ? out_seg(c, ob, SEG_FD, NULL, len, fd, off) : 0;
}

void petrel__ob_release(petrel__outbuf_t *ob)
{
    while (ob->head) {
        petrel__outq_t *q = ob->head;
        ob->head = q->next;
        petrel__chunk_put(&petrel__pool, q);
    }
    ob->tail = NULL;
    ob->bytes = 0;
}

void petrel__ob_splice(petrel__conn_t *c, petrel__outbuf_t *ob)
{
    if (ob->head == NULL)
        return;
    if (c->flags & PETREL__CONN_CLOSED) {
        petrel__ob_release(ob);
        return;
    }
    uint32_t seq = c->out.tail ? c->out.tail->seq + 1 : 0;
    for (petrel__outq_t *q = ob->head; q; q = q->next)
        q->seq = seq++;
    if (c->out.tail)
        c->out.tail->next = ob->head;
    else
        c->out.head = ob->head;
    c->out.tail = ob->tail;
    c->out.bytes += ob->bytes;
    ob->head = ob->tail = NULL;
    ob->bytes = 0;
}

static void out_release(petrel__conn_t *c)
{
    petrel__ob_release(&c->out);
}

/* Drop `n` written bytes from the head of the queue. */
static void out_advance(petrel__conn_t *c, size_t n)
{
    c->out.bytes -= n;
    while (n > 0 && c->out.head) {
        petrel__outq_t *q = c->out.head;
        petrel__oseg_t *s = &q->seg[q->first];
        if (n < s->len) {
            s->len -= n;
            if (s->kind == SEG_MEM)
                s->ptr += n;
            else
                s->off += (off_t)n;
            return;
        }
        n -= s->len;
        if (++q->first == q->nseg) {
            c->out.head = q->next;
            if (c->out.head == NULL)
                c->out.tail = NULL;
            petrel__chunk_put(&petrel__pool, q);
        }
    }
}

static void set_events(petrel__conn_t *c)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return;
    uint32_t ev = 0;
    if (!(c->flags & (PETREL__CONN_PAUSED | PETREL__CONN_EOF)) || (c->flags & PETREL__CONN_LINGER))
        ev |= EPOLLIN;
    if (c->flags & PETREL__CONN_WANT_WRITE)
        ev |= EPOLLOUT;
    if (!(c->flags & PETREL__CONN_REGISTERED)) {
        /* registered on first need: a connection answered and closed within
         * its first read never costs an epoll_ctl */
        if (ev == 0)
            return;
        if (petrel__io_add(petrel__loop, &c->io, ev) < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        c->flags |= PETREL__CONN_REGISTERED;
        return;
    }
    if (petrel__io_mod(petrel__loop, &c->io, ev) < 0)
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
}

void petrel__conn_update_events(petrel__conn_t *c)
{
    set_events(c);
}

int petrel__conn_flush(petrel__conn_t *c)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return PETREL_EIO;
    bool progress = false;
    while (c->out.head) {
        petrel__outq_t *q = c->out.head;
        petrel__oseg_t *s = &q->seg[q->first];
        ssize_t w;
        size_t want;
        if (s->kind == SEG_FD) {
            off_t off = s->off;
            want = s->len;
            w = sendfile(c->io.fd, s->fd, &off, want);
            if (w == 0) {
                /* the file shrank under us: the response cannot be completed */
                return PETREL_EIO;
            }
        } else {
            struct iovec iov[IOV_BATCH];
            int n = 0;
            bool more = false;
            want = 0;
            for (petrel__outq_t *p = q; p && n < IOV_BATCH; p = p->next) {
                for (uint32_t i = p->first; i < p->nseg && n < IOV_BATCH; i++) {
                    if (p->seg[i].kind != SEG_MEM) {
                        more = true;
                        goto gathered;
                    }
                    iov[n].iov_base = (void *)p->seg[i].ptr;
                    iov[n].iov_len = p->seg[i].len;
                    want += p->seg[i].len;
                    n++;
                }
            }
        gathered:
            if (more) {
                /* a file follows: MSG_MORE lets the head share a TCP segment
                 * with the first file bytes despite TCP_NODELAY (what nginx
                 * gets from tcp_nopush, without its two setsockopt calls) */
                struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
                w = sendmsg(c->io.fd, &mh, MSG_MORE | MSG_NOSIGNAL);
            } else {
                w = n == 1 ? write(c->io.fd, iov[0].iov_base, iov[0].iov_len)
                           : writev(c->io.fd, iov, n);
            }
        }
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            petrel__conn_close_why(c, PETREL__CLOSE_RESET);
            return PETREL_EIO;
        }
        if (!c->cs->quiet)
            petrel__count(PETREL__C_BYTES_OUT, (uint64_t)w);
        out_advance(c, (size_t)w);
        progress = true;
        if ((size_t)w < want)
            break; /* the socket buffer is full: wait for EPOLLOUT */
    }
    if (c->out.head) {
        if (!(c->flags & PETREL__CONN_WANT_WRITE)) {
            c->flags |= PETREL__CONN_WANT_WRITE;
            set_events(c);
        }
        /* --send-timeout is time without write progress: a flush that
         * wrote nothing (a producer adding to a queue the peer does not
         * read) leaves the deadline where it was */
        if (progress || c->timer.q != &c->cs->tq_send)
            petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_send);
        return 0;
    }
    if (c->flags & PETREL__CONN_WANT_WRITE) {
        c->flags &= ~PETREL__CONN_WANT_WRITE;
        set_events(c);
    }
    return 0;
}

int petrel__conn_writev(petrel__conn_t *c, const struct iovec *iov, int n)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return PETREL_EIO;
    size_t done = 0;
    if (c->out.head == NULL) {
        ssize_t w;
        do
            w = n == 1 ? write(c->io.fd, iov[0].iov_base, iov[0].iov_len)
                       : writev(c->io.fd, iov, n);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return PETREL_EIO;
        done = w > 0 ? (size_t)w : 0;
    }
    for (int i = 0; i < n; i++) {
        size_t len = iov[i].iov_len;
        if (done >= len) {
            done -= len;
            continue;
        }
        int rc = petrel__out_copy(c, (const char *)iov[i].iov_base + done, len - done);
        if (rc < 0)
            return rc;
        done = 0;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */

int petrel__conn_read(petrel__conn_t *c)
{
    if (c->rbuf == NULL) {
        c->rbuf = petrel__chunk_get(&petrel__pool);
        if (c->rbuf == NULL)
            return PETREL_EIO;
        c->rcap = PETREL_CHUNK_SIZE;
        c->rlen = c->rpos = 0;
    }
    if (c->rlen == c->rcap)
        return 0;
    for (;;) {
        ssize_t n = read(c->io.fd, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (n > 0) {
            c->rlen += (uint32_t)n;
            if (!c->cs->quiet)
                petrel__count(PETREL__C_BYTES_IN, (uint64_t)n);
            return (int)n;
        }
        if (n == 0) {
            c->flags |= PETREL__CONN_EOF;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        petrel__conn_close_why(c, PETREL__CLOSE_RESET);
        return PETREL_EIO;
    }
}

void petrel__conn_compact(petrel__conn_t *c)
{
    if (c->rbuf && c->rpos) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
}

int petrel__conn_rbuf_grow(petrel__conn_t *c, size_t cap,
                           void (*moved)(void *arg, const char *lo, const char *hi, ptrdiff_t d),
                           void *arg)
{
    if (cap <= c->rcap || cap > UINT32_MAX)
        return PETREL_EINVAL;
    char *nb = malloc(cap);
    if (nb == NULL)
        return PETREL_ENOMEM;
    memcpy(nb, c->rbuf, c->rlen);
    moved(arg, c->rbuf, c->rbuf + c->rlen, nb - c->rbuf);
    if (c->flags & PETREL__CONN_RBUF_LARGE)
        free(c->rbuf);
    else
        petrel__chunk_put(&petrel__pool, c->rbuf);
    c->rbuf = nb;
    c->rcap = (uint32_t)cap;
    c->flags |= PETREL__CONN_RBUF_LARGE;
    return 0;
}

static void rbuf_release(petrel__conn_t *c)
{
    if (c->rbuf == NULL)
        return;
    if (c->flags & PETREL__CONN_RBUF_LARGE)
        free(c->rbuf);
    else
        petrel__chunk_put(&petrel__pool, c->rbuf);
    c->rbuf = NULL;
    c->flags &= ~PETREL__CONN_RBUF_LARGE;
    c->rcap = c->rlen = c->rpos = 0;
}

void petrel__conn_idle(petrel__conn_t *c)
{
    if (c->rpos == c->rlen)
        rbuf_release(c);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */

static void on_io(petrel__io_t *io, uint32_t events)
{
    petrel__conn_t *c = container_of(io, petrel__conn_t, io);
    if (c->flags & PETREL__CONN_CLOSED)
        return;
    if (events & EPOLLOUT) {
        size_t before = c->out.bytes;
        if (petrel__conn_flush(c) < 0) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        if (c->out.head == NULL) {
            if (c->ops->on_written)
                c->ops->on_written(c);
        } else if (c->out.bytes < before && c->ops->on_progress) {
            c->ops->on_progress(c);
        }
        if (c->flags & PETREL__CONN_CLOSED)
            return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if ((events & EPOLLERR) && !(events & EPOLLIN)) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return;
        }
        c->ops->on_read(c);
    }
}

/* --send-timeout: the protocol decides (its output may be written by now,
 * or it bounds what it waits for itself); only a close or a lingering
 * close it starts now is a timeout's. */
static void send_expired(petrel__conn_t *c)
{
    if (c->ops->on_send_timeout)
        c->ops->on_send_timeout(c);
    else
        petrel__conn_close(c, PETREL__CLOSE_TIMEOUT);
}

static void on_send_timer(petrel__timer_t *t)
{
    petrel__conn_expire(t, send_expired);
}

/* A lingering close ends as planned: not a timeout's. */
static void on_linger_timer(petrel__timer_t *t)
{
    petrel__conn_close(container_of(t, petrel__conn_t, timer), PETREL__CLOSE_CLIENT);
}

void petrel__conn_switch(petrel__conn_t *c, const petrel__proto_ops_t *ops, void *state)
{
    petrel__timer_disarm(&c->timer);
    c->ops = ops;
    c->proto = state;
    ops->start(c);
}

/* ------------------------------------------------------------------------ */
/* Lingering close: a protocol of its own                                   */

static void linger_read(petrel__conn_t *c)
{
    char buf[LINGER_BUF];
    for (int i = 0; i < LINGER_READS; i++) {
        ssize_t n = read(c->io.fd, buf, sizeof(buf));
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        break; /* EOF or error: the peer has read what it wanted */
    }
    petrel__conn_close(c, PETREL__CLOSE_CLIENT);
}

static void linger_start(petrel__conn_t *c)
{
    (void)c;
}

static void linger_drain(petrel__conn_t *c, bool close_idle)
{
    (void)c, (void)close_idle; /* it closes by itself within PETREL__LINGER_MS */
}

static const petrel__proto_ops_t linger_ops = {
    .name = "linger", .start = linger_start, .on_read = linger_read, .drain = linger_drain,
    /* its only timer is the linger queue's: the connection closes */
};

void petrel__conn_linger(petrel__conn_t *c)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return;
    if (c->flags & PETREL__CONN_TIMER)
        petrel__conn_close_why(c, PETREL__CLOSE_TIMEOUT);
    shutdown(c->io.fd, SHUT_WR);
    if (c->flags & PETREL__CONN_EOF) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    c->ops = &linger_ops;
    c->proto = NULL;
    out_release(c);
    rbuf_release(c);
    c->flags |= PETREL__CONN_LINGER;
    c->flags &= ~PETREL__CONN_WANT_WRITE;
    set_events(c);
    petrel__timer_arm(petrel__loop, &c->timer, &c->cs->tq_linger);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel__list_t conn_free;
static size_t conn_nfree;
static petrel__list_t *conn_dead; /* closed this turn: freed at its end */

static void conn_bury(petrel__conn_t *c)
{
    /* freed at the end of the loop turn: a later event of this turn may
     * still carry a pointer to it */
    c->link.next = conn_dead;
    conn_dead = &c->link;
}

_Static_assert(PETREL__CLOSE_N == PETREL__METRICS_CLOSE_N,
               "petrel__close_t and the metrics differ");

void petrel__conn_close(petrel__conn_t *c, petrel__close_t why)
{
    if (c->flags & PETREL__CONN_CLOSED)
        return;
    petrel__conns_t *cs = c->cs;
    if (c->flags & PETREL__CONN_TIMER)
        petrel__conn_close_why(c, PETREL__CLOSE_TIMEOUT);
    c->flags |= PETREL__CONN_CLOSED;
    c->flags &= ~PETREL__CONN_WANT_WRITE;
    petrel__timer_disarm(&c->timer);
    /* no EPOLL_CTL_DEL: closing the only descriptor of the socket removes it */
    close(c->io.fd);
    c->io.fd = -1;
    /* the protocol gives back its state */
    if (c->ops->on_close)
        c->ops->on_close(c);
    out_release(c);
    rbuf_release(c);
    list_unlink(&c->link);
    cs->n--;
    if (!cs->quiet) {
        if (c->why)
            why = (petrel__close_t)(c->why - 1);
        else if (why == PETREL__CLOSE_CLIENT && cs->draining)
            why = PETREL__CLOSE_DRAIN;
        petrel__count(PETREL__C_CONN_CLOSED + why, 1);
        petrel__gauge_add(PETREL__G_CONN_OPEN, -1);
    }
    conn_bury(c);
    if (cs->on_gone)
        cs->on_gone(cs);
}

void petrel__conn_end(petrel__conn_t *c)
{
    if (!(c->flags & PETREL__CONN_CLOSED))
        shutdown(c->io.fd, SHUT_WR);
    petrel__conn_close(c, PETREL__CLOSE_CLIENT);
}


void petrel__conns_reap(void)
{
    while (conn_dead) {
        petrel__list_t *l = conn_dead;
        conn_dead = l->next;
        petrel__conn_t *c = container_of(l, petrel__conn_t, link);
        if (conn_free.next == NULL)
            list_init(&conn_free);
        if (conn_nfree < CONN_FREE_MAX) {
            list_append(&conn_free, &c->link);
            conn_nfree++;
        } else {
            free(c);
        }
    }
}

size_t petrel__conns_trim(size_t keep)
{
    size_t n = 0;
    for (; conn_nfree > keep; n++) {
        petrel__list_t *l = conn_free.next;
        list_unlink(l);
        conn_nfree--;
        free(container_of(l, petrel__conn_t, link));
    }
    return n * sizeof(petrel__conn_t);
}

int petrel__conns_init(petrel__conns_t *cs, const petrel__config_t *cfg, struct petrel_server *srv,
                       const petrel__proto_ops_t *first)
{
    memset(cs, 0, sizeof(*cs));
    list_init(&cs->all);
    cs->cfg = cfg;
    cs->srv = srv;
    cs->first = first;
    int rc;
    if ((rc = petrel__tq_init(petrel__loop, &cs->tq_send, cfg->send_timeout_ms, on_send_timer)) <
            0 ||
        (rc = petrel__tq_init(petrel__loop, &cs->tq_linger, PETREL__LINGER_MS, on_linger_timer)) <
            0)
        return rc;
    return 0;
}

static petrel__conn_t *conn_new(petrel__conns_t *cs, int fd)
{
    petrel__conn_t *c;
    if (conn_free.next == NULL)
        list_init(&conn_free);
    if (!list_empty(&conn_free)) {
        c = container_of(conn_free.next, petrel__conn_t, link);
        list_unlink(&c->link);
        conn_nfree--;
    } else if ((c = malloc(sizeof(*c))) == NULL) {
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    c->io.fd = fd;
    c->io.cb = on_io;
    list_init(&c->timer.node);
    c->cs = cs;
    c->ops = cs->first;
    list_append(&cs->all, &c->link);
    cs->n++;
    if (!cs->quiet) {
        petrel__count(PETREL__C_CONN_ACCEPTED, 1);
        petrel__gauge_add(PETREL__G_CONN_OPEN, 1);
    }
    return c;
}

/* The first protocol reads at once: with TCP_DEFER_ACCEPT the request is
 * usually there already, and a request answered within this first read
 * needs no epoll call. */
static void conn_start(petrel__conn_t *c)
{
    c->ops->start(c);
    if (!(c->flags & (PETREL__CONN_CLOSED | PETREL__CONN_REGISTERED)))
        set_events(c);
}

int petrel__conn_open(petrel__conns_t *cs, int fd, const struct sockaddr *peer, socklen_t len)
{
    petrel__conn_t *c = conn_new(cs, fd);
    if (c == NULL) {
        close(fd);
        return PETREL_ENOMEM;
    }
    memcpy(&c->peer, peer, len < sizeof(c->peer) ? len : sizeof(c->peer));
    conn_start(c);
    return 0;
}

petrel__conns_t *petrel__conns_worker;

petrel__conn_t *petrel__conn_wrap(petrel__conns_t *cs, int fd, const petrel__proto_ops_t *ops,
                                  const void *rest, size_t n)
{
    petrel__conn_t *c = cs && n <= PETREL_CHUNK_SIZE ? conn_new(cs, fd) : NULL;
    if (c == NULL) {
        close(fd);
        return NULL;
    }
    c->ops = ops; /* its on_close sees no state until petrel__conn_begin() */
    socklen_t len = sizeof(c->peer);
    if (getpeername(fd, &c->peer.sa, &len) < 0)
        c->peer.sa.sa_family = AF_UNSPEC;
    if (n) {
        c->rbuf = petrel__chunk_get(&petrel__pool);
        if (c->rbuf == NULL) {
            petrel__conn_close(c, PETREL__CLOSE_CLIENT);
            return NULL;
        }
        c->rcap = PETREL_CHUNK_SIZE;
        memcpy(c->rbuf, rest, n);
        c->rlen = (uint32_t)n;
    }
    return c;
}

void petrel__conn_begin(petrel__conn_t *c, void *state)
{
    c->proto = state;
    conn_start(c);
}

int petrel__conn_adopt(petrel__conns_t *cs, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    struct sockaddr sa = {.sa_family = AF_UNIX};
    return petrel__conn_open(cs, fd, &sa, sizeof(sa));
}

/* An IPv4 address in dotted decimal, as inet_ntop() writes it (which
 * formats with sprintf: a tenth of a proxied request's instructions). */
static const char *ipv4_text(const struct in_addr *in, char *buf, size_t len)
{
    if (len < INET_ADDRSTRLEN)
        return NULL;
    const unsigned char *b = (const unsigned char *)&in->s_addr;
    char *p = buf;
    for (int i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (v >= 100)
            *p++ = (char)('0' + v / 100);
        if (v >= 10)
            *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
        *p++ = '.';
    }
    p[-1] = '\0';
    return buf;
}

const char *petrel__conn_peer_text(const petrel__conn_t *c, char *buf, size_t len)
{
    const char *s = NULL;
    if (c->peer.sa.sa_family == AF_INET)
        s = ipv4_text(&c->peer.in.sin_addr, buf, len);
    else if (c->peer.sa.sa_family == AF_INET6)
        s = inet_ntop(AF_INET6, &c->peer.in6.sin6_addr, buf, (socklen_t)len);
    else if (c->peer.sa.sa_family == AF_UNIX)
        s = "unix";
    return s ? s : "-";
}

void petrel__conns_drain(petrel__conns_t *cs, bool close_idle)
{
    cs->draining = true;
    petrel__list_t *l = cs->all.next;
    while (l != &cs->all) {
        petrel__conn_t *c = container_of(l, petrel__conn_t, link);
        l = l->next; /* c may close */
        if (c->ops->drain)
            c->ops->drain(c, close_idle);
    }
}

void petrel__conns_close_all(petrel__conns_t *cs)
{
    while (!list_empty(&cs->all))
        petrel__conn_close(container_of(cs->all.next, petrel__conn_t, link), PETREL__CLOSE_CLIENT);
}

/* The options of the transport (runtime/options.h). */
static const petrel__option_t conn_options[] = {
    {.name = "max-connections",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_connections),
     .min = 1,
     .max = 10000000,
     .def = 10000,
     .expect = "a number of connections from 1 to 10000000",
     .help = "connections per worker (default 10000)"},
    {.name = "header-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(header_timeout_ms),
     .min = 1,
     .def = 10000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "time to receive a request head (default 10)"},
    {.name = "keepalive-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(keepalive_timeout_ms),
     .min = 1,
     .def = 60000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "idle time between requests (default 60)"},
    {.name = "send-timeout",
     .value = "SECONDS",
     .kind = PETREL__OPT_SECS,
     PETREL__OPT_FIELD(send_timeout_ms),
     .min = 1,
     .def = 60000,
     .expect = "a number of seconds greater than 0 (e.g. 10 or 0.5)",
     .help = "time without write progress (default 60)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__conn_option_table = {"connections", NULL, conn_options};
