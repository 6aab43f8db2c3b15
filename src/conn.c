/*
 * conn.c -- connections: accepting, the read buffer, the output queue,
 * timeouts and closing.  The protocol (http1.c) decides what the bytes mean.
 *
 * Memory of an idle keep-alive connection is the conn struct alone: the read
 * buffer, the output queue and the arena's chunks go back to the worker's
 * pool as soon as a request is done and nothing is buffered.
 */
#include "petrel-int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Output queue: segments and copied bytes share pool chunks.              */

#define OUT_SEGS 32
#define IOV_BATCH 64

struct petrel__outq {
    petrel__outq_t *next;
    uint32_t seq;         /* chunks queued before it since the queue was empty */
    uint32_t first, nseg; /* segments [first, nseg) not yet written */
    uint32_t used, cap;   /* bytes of data[] used */
    petrel__oseg_t seg[OUT_SEGS];
    char data[];
};

static petrel__outq_t *outq_new(petrel__conn_t *c)
{
    petrel__outq_t *q = petrel__chunk_get(&petrel__pool);
    if (q == NULL)
        return NULL;
    q->next = NULL;
    q->seq = c->out_tail ? c->out_tail->seq + 1 : 0;
    q->first = q->nseg = 0;
    q->used = 0;
    q->cap = PETREL_CHUNK_SIZE - (uint32_t)sizeof(*q);
    if (c->out_tail)
        c->out_tail->next = q;
    else
        c->out = q;
    c->out_tail = q;
    return q;
}

static petrel__outq_t *outq_tail_with(petrel__conn_t *c, uint32_t bytes)
{
    petrel__outq_t *q = c->out_tail;
    if (q == NULL || q->nseg == OUT_SEGS || q->cap - q->used < bytes)
        q = outq_new(c);
    return q;
}

char *petrel__out_reserve(petrel__conn_t *c, size_t len)
{
    if (len > PETREL_CHUNK_SIZE - sizeof(petrel__outq_t) || (c->flags & CONN_CLOSED))
        return NULL;
    petrel__outq_t *q = outq_tail_with(c, (uint32_t)len);
    return q ? q->data + q->used : NULL;
}

void petrel__out_commit(petrel__conn_t *c, size_t len)
{
    petrel__outq_t *q = c->out_tail;
    char *p = q->data + q->used;
    petrel__oseg_t *last = q->nseg > q->first ? &q->seg[q->nseg - 1] : NULL;
    if (last && last->kind == BODY_MEM && last->ptr + last->len == p) {
        last->len += len;
    } else {
        petrel__oseg_t *s = &q->seg[q->nseg++];
        s->kind = BODY_MEM;
        s->ptr = p;
        s->len = len;
    }
    q->used += (uint32_t)len;
}

/* Copies queued on an HTTP/1.1 connection count toward its memory budget,
 * the arena's limit (from --max-body-size and --max-header-size): a streamed
 * response produced faster than the peer reads -- or not read at all --
 * fails with PETREL_ENOMEM there instead of growing without bound.  (h2 and
 * WebSocket bound their own output: flow control, --ws-send-limit.) */
static bool out_over_budget(petrel__conn_t *c)
{
    size_t limit = c->arena.limit;
    if (limit == 0 || c->proto || c->out == NULL)
        return false;
    size_t queued = ((size_t)c->out_tail->seq - c->out->seq + 2) * PETREL_CHUNK_SIZE;
    if (queued + c->arena.bytes <= limit)
        return false;
    if (!(c->flags & CONN_ERROR))
        petrel_log(PETREL_LOG_WARN, "%zu bytes of output queued for a peer that does not read "
                                    "them (limit %zu, see --max-body-size): closing",
                   queued, limit);
    return true;
}

int petrel__out_copy(petrel__conn_t *c, const void *data, size_t len)
{
    const char *d = data;
    if (c->flags & CONN_CLOSED)
        return PETREL_EIO; /* a streamed response whose peer is gone */
    while (len > 0) {
        petrel__outq_t *q = c->out_tail;
        if (q == NULL || q->nseg == OUT_SEGS || q->used == q->cap)
            if (out_over_budget(c) || (q = outq_new(c)) == NULL)
                return PETREL_ENOMEM;
        size_t n = q->cap - q->used;
        if (n > len)
            n = len;
        memcpy(q->data + q->used, d, n);
        petrel__out_commit(c, n);
        d += n;
        len -= n;
    }
    return 0;
}

static int out_seg(petrel__conn_t *c, int kind, const void *ptr, size_t len, int fd, off_t off)
{
    if (c->flags & CONN_CLOSED)
        return PETREL_EIO;
    petrel__outq_t *q = outq_tail_with(c, 0);
    if (q == NULL)
        return PETREL_ENOMEM;
    petrel__oseg_t *s = &q->seg[q->nseg++];
    s->kind = kind;
    s->ptr = ptr;
    s->len = len;
    s->fd = fd;
    s->off = off;
    return 0;
}

int petrel__out_ref(petrel__conn_t *c, const void *data, size_t len)
{
    return len ? out_seg(c, BODY_MEM, data, len, -1, 0) : 0;
}

int petrel__out_fd(petrel__conn_t *c, int fd, off_t off, size_t len)
{
    return len ? out_seg(c, BODY_FD, NULL, len, fd, off) : 0;
}

static void out_release(petrel__conn_t *c)
{
    while (c->out) {
        petrel__outq_t *q = c->out;
        c->out = q->next;
        petrel__chunk_put(&petrel__pool, q);
    }
    c->out_tail = NULL;
}

/* Drop `n` written bytes from the head of the queue. */
static void out_advance(petrel__conn_t *c, size_t n)
{
    while (n > 0 && c->out) {
        petrel__outq_t *q = c->out;
        petrel__oseg_t *s = &q->seg[q->first];
        if (n < s->len) {
            s->len -= n;
            if (s->kind == BODY_MEM)
                s->ptr += n;
            else
                s->off += (off_t)n;
            return;
        }
        n -= s->len;
        if (++q->first == q->nseg) {
            c->out = q->next;
            if (c->out == NULL)
                c->out_tail = NULL;
            petrel__chunk_put(&petrel__pool, q);
        }
    }
}

static void set_events(petrel__conn_t *c)
{
    if (c->flags & CONN_CLOSED)
        return;
    uint32_t ev = 0;
    if (!(c->flags & (CONN_PAUSED | CONN_CLOSING | CONN_EOF)) || (c->flags & CONN_LINGER))
        ev |= EPOLLIN;
    if (c->flags & CONN_WANT_WRITE)
        ev |= EPOLLOUT;
    if (!(c->flags & CONN_REGISTERED)) {
        /* registered on first need: a connection answered and closed within
         * its first read never costs an epoll_ctl */
        if (ev == 0)
            return;
        if (petrel__io_add(petrel__loop, &c->io, ev) < 0) {
            petrel__conn_close(c);
            return;
        }
        c->flags |= CONN_REGISTERED;
        return;
    }
    if (petrel__io_mod(petrel__loop, &c->io, ev) < 0)
        petrel__conn_close(c);
}

void petrel__conn_update_events(petrel__conn_t *c) { set_events(c); }

int petrel__conn_flush(petrel__conn_t *c)
{
    if (c->flags & CONN_CLOSED)
        return -1;
    while (c->out) {
        petrel__outq_t *q = c->out;
        petrel__oseg_t *s = &q->seg[q->first];
        ssize_t w;
        size_t want;
        if (s->kind == BODY_FD) {
            off_t off = s->off;
            want = s->len;
            w = sendfile(c->io.fd, s->fd, &off, want);
            if (w == 0) {
                /* the file shrank under us: the response cannot be completed */
                return -1;
            }
        } else {
            struct iovec iov[IOV_BATCH];
            int n = 0;
            bool more = false;
            want = 0;
            for (petrel__outq_t *p = q; p && n < IOV_BATCH; p = p->next) {
                for (uint32_t i = p->first; i < p->nseg && n < IOV_BATCH; i++) {
                    if (p->seg[i].kind != BODY_MEM) {
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
            return -1;
        }
        out_advance(c, (size_t)w);
        if ((size_t)w < want)
            break; /* the socket buffer is full: wait for EPOLLOUT */
    }
    if (c->out) {
        if (!(c->flags & CONN_WANT_WRITE)) {
            c->flags |= CONN_WANT_WRITE;
            set_events(c);
        }
        petrel__timer_arm(petrel__loop, &c->timer, &c->srv->tq_send);
        return 0;
    }
    if (c->flags & CONN_WANT_WRITE) {
        c->flags &= ~CONN_WANT_WRITE;
        set_events(c);
    }
    return 0;
}

bool petrel__conn_out_empty(const petrel__conn_t *c) { return c->out == NULL; }

/* For ws.c's send limit: a walk, called only when its own bound is passed. */
size_t petrel__out_bytes(const petrel__conn_t *c)
{
    size_t n = 0;
    for (const petrel__outq_t *q = c->out; q; q = q->next)
        for (uint32_t i = q->first; i < q->nseg; i++)
            n += q->seg[i].len;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */

int petrel__conn_read(petrel__conn_t *c)
{
    if (c->rbuf == NULL) {
        c->rbuf = petrel__chunk_get(&petrel__pool);
        if (c->rbuf == NULL)
            return -1;
        c->rcap = PETREL_CHUNK_SIZE;
        c->rlen = c->rpos = c->head_start = 0;
    }
    if (c->rlen == c->rcap)
        return 0;
    for (;;) {
        ssize_t n = read(c->io.fd, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (n > 0) {
            c->rlen += (uint32_t)n;
            return (int)n;
        }
        if (n == 0) {
            c->flags |= CONN_EOF;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -1;
    }
}

/* Give back the read buffer when it holds nothing. */
static void rbuf_release(petrel__conn_t *c)
{
    if (c->rbuf == NULL)
        return;
    if (c->flags & CONN_RBUF_LARGE)
        free(c->rbuf);
    else
        petrel__chunk_put(&petrel__pool, c->rbuf);
    c->rbuf = NULL;
    c->flags &= ~CONN_RBUF_LARGE;
    c->rcap = c->rlen = c->rpos = c->head_start = 0;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

static __thread petrel__list_t conn_free;
static __thread size_t conn_nfree;
static __thread petrel__list_t *conn_dead; /* closed this turn: freed at its end */

static void on_io(petrel__io_t *io, uint32_t events)
{
    petrel__conn_t *c = container_of(io, petrel__conn_t, io);
    if (c->flags & CONN_CLOSED)
        return;
    if (events & EPOLLOUT) {
        if (petrel__conn_flush(c) < 0) {
            petrel__conn_close(c);
            return;
        }
        if (c->out == NULL)
            petrel__http1_on_flushed(c);
        if (c->flags & CONN_CLOSED)
            return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if ((events & EPOLLERR) && !(events & EPOLLIN)) {
            petrel__conn_close(c);
            return;
        }
        petrel__http1_on_read(c);
    }
}

static void on_timer(petrel__timer_t *t)
{
    petrel__conn_t *c = container_of(t, petrel__conn_t, timer);
    if (c->flags & CONN_LINGER)
        petrel__conn_close(c);
    else
        petrel__http1_on_timeout(c);
}

static void on_linger(petrel__io_t *io, uint32_t events)
{
    petrel__conn_t *c = container_of(io, petrel__conn_t, io);
    char buf[4096];
    (void)events;
    for (int i = 0; i < 16; i++) {
        ssize_t n = read(io->fd, buf, sizeof(buf));
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        break; /* EOF or error: the peer has read what it wanted */
    }
    petrel__conn_close(c);
}

void petrel__conn_linger(petrel__conn_t *c)
{
    if (c->flags & CONN_CLOSED)
        return;
    shutdown(c->io.fd, SHUT_WR);
    if (c->flags & CONN_EOF) {
        petrel__conn_close(c);
        return;
    }
    c->req = NULL;
    petrel__arena_clear(&c->arena);
    out_release(c);
    rbuf_release(c);
    c->flags |= CONN_LINGER;
    c->flags &= ~CONN_WANT_WRITE;
    c->io.cb = on_linger;
    set_events(c);
    petrel__timer_arm(petrel__loop, &c->timer, &c->srv->tq_linger);
}

/* An HTTP/1.1 streamed response cut short (the peer reset, a send timeout):
 * its handler still holds the request and may write from a timer, so the
 * connection struct and its arena stay until the handler ends the stream;
 * writes fail with PETREL_EIO meanwhile (the same contract as an orphaned
 * h2 stream, doc/arena-and-lifetimes.md).  Freeing them at once let a late
 * petrel_stream_write() land in whatever connection reused the struct. */
static void orphan_done(void *data)
{
    petrel__conn_t *c = data;
    /* called from the request's arena reset: free at the end of the turn */
    c->link.next = conn_dead ? conn_dead : NULL;
    conn_dead = &c->link;
}

static bool streaming(const petrel__conn_t *c)
{
    const petrel_req_t *r = c->req;
    return r && r->_resp && r->_resp->body_kind == BODY_STREAM && r->_resp->sent &&
           !r->_resp->ended;
}

void petrel__conn_close(petrel__conn_t *c)
{
    if (c->flags & CONN_CLOSED)
        return;
    petrel_server_t *srv = c->srv;
    c->flags |= CONN_CLOSED;
    c->flags &= ~CONN_WANT_WRITE;
    petrel__timer_disarm(&c->timer);
    /* no EPOLL_CTL_DEL: closing the only descriptor of the socket removes it */
    close(c->io.fd);
    c->io.fd = -1;
    bool orphan = streaming(c) && !c->on_close;
    if (c->req && !orphan)
        c->req = NULL;
    if (c->on_close) {
        /* ws.c: its state is not in the arena, so that an idle WebSocket
         * holds no arena chunk */
        void (*cb)(petrel__conn_t *) = c->on_close;
        c->on_close = NULL;
        cb(c);
    }
    out_release(c);
    rbuf_release(c);
    list_unlink(&c->link);
    srv->nconns--;
    if (orphan) {
        /* the request's end resets the arena to its mark, which runs this */
        if (petrel_arena_defer(&c->arena, orphan_done, c) < 0)
            petrel_log(PETREL_LOG_ERROR, "out of memory: a streamed response cut short "
                                         "keeps its connection's memory");
    } else {
        petrel__arena_clear(&c->arena);
        /* freed at the end of the loop turn: a later event of this turn may
         * still carry a pointer to it */
        c->link.next = conn_dead ? conn_dead : NULL;
        conn_dead = &c->link;
    }
    if (srv->accept_paused && !srv->draining && srv->nconns < srv->cfg.max_connections)
        petrel__listen_start(srv);
    if (srv->draining && srv->nconns == 0)
        srv->loop.stop = true;
}

static void conn_reap(void)
{
    while (conn_dead) {
        petrel__list_t *l = conn_dead;
        conn_dead = l->next;
        petrel__conn_t *c = container_of(l, petrel__conn_t, link);
        petrel__arena_clear(&c->arena); /* an orphan's; a no-op for the others */
        if (conn_free.next == NULL)
            list_init(&conn_free);
        if (conn_nfree < 1024) {
            list_append(&conn_free, &c->link);
            conn_nfree++;
        } else {
            free(c);
        }
    }
}

/* Read at once: with TCP_DEFER_ACCEPT the request is usually there already,
 * and a request answered within this first read needs no epoll call. */
static void conn_start(petrel__conn_t *c)
{
    petrel__http1_on_read(c);
    if (!(c->flags & (CONN_CLOSED | CONN_REGISTERED)))
        set_events(c);
}

static petrel__conn_t *conn_new(petrel_server_t *srv, int fd)
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
    memset(c, 0, offsetof(petrel__conn_t, parser));
    c->io.fd = fd;
    c->io.cb = on_io;
    c->timer.cb = on_timer;
    list_init(&c->timer.node);
    c->srv = srv;
    petrel__arena_init(&c->arena, &petrel__pool,
                       petrel__conn_budget(&srv->cfg));
    petrel__http1_init_conn(c);
    list_append(&srv->conns, &c->link);
    srv->nconns++;
    petrel__timer_arm(petrel__loop, &c->timer, &srv->tq_header);
    return c;
}

int petrel__conn_adopt(petrel_server_t *srv, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    petrel__conn_t *c = conn_new(srv, fd);
    if (c == NULL)
        return PETREL_ENOMEM;
    c->peer.in.sin_family = AF_UNIX;
    conn_start(c);
    return 0;
}

/* Called by http1.c when a request is done and nothing is buffered. */
void petrel__conn_idle(petrel__conn_t *c)
{
    if (c->rpos == c->rlen)
        rbuf_release(c);
}

void petrel__conn_reap(void) { conn_reap(); }

/* ------------------------------------------------------------------------ */
/* Accepting                                                                */

typedef struct listener {
    petrel__io_t io;
    petrel_server_t *srv;
} listener_t;

static __thread petrel__timer_t accept_retry;
static __thread petrel__tq_t accept_retry_q;
static __thread unsigned accept_failures; /* EMFILE and the like since the last accept */

static void on_accept(petrel__io_t *io, uint32_t events)
{
    (void)events;
    listener_t *l = (listener_t *)io;
    petrel_server_t *srv = l->srv;
    if (srv->draining || io->fd < 0)
        return; /* an event of this turn for a listener we just closed */
    for (int i = 0; i < 64; i++) {
        if (srv->nconns >= srv->cfg.max_connections) {
            /* stop accepting until a connection goes away */
            petrel__listen_stop(srv);
            srv->accept_paused = true;
            return;
        }
        union {
            struct sockaddr sa;
            struct sockaddr_in6 in6;
        } addr;
        socklen_t alen = sizeof(addr);
        int fd = accept4(io->fd, &addr.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop polling the listener for a moment,
                 * keep serving the connections we have (no busy loop).  Said
                 * once per episode, not at every retry. */
                if (accept_failures++ == 0)
                    petrel_log(PETREL_LOG_WARN,
                               "accept: %s; pausing accepts, retrying every 100 ms and "
                               "whenever a connection closes",
                               strerror(errno));
                petrel__listen_stop(srv);
                srv->accept_paused = true;
                petrel__timer_arm(petrel__loop, &accept_retry, &accept_retry_q);
                return;
            }
            petrel_log(PETREL_LOG_ERROR, "accept: %s", strerror(errno));
            return;
        }
        if (accept_failures) {
            petrel_log(PETREL_LOG_INFO, "accept: resumed after %u failed attempts",
                       accept_failures);
            accept_failures = 0;
        }
        /* TCP_NODELAY is inherited from the listening socket */
        petrel__conn_t *c = conn_new(srv, fd);
        if (c == NULL) {
            close(fd);
            continue;
        }
        memcpy(&c->peer, &addr, alen < sizeof(c->peer) ? alen : sizeof(c->peer));
        conn_start(c);
    }
}

static __thread petrel_server_t *retry_srv;

static void on_accept_retry_fire(petrel__timer_t *t)
{
    (void)t;
    if (retry_srv && !retry_srv->draining && retry_srv->accept_paused &&
        retry_srv->nconns < retry_srv->cfg.max_connections)
        petrel__listen_start(retry_srv);
}

int petrel__listen_start(petrel_server_t *srv)
{
    if (srv->listen_ios == NULL) {
        listener_t *ls = calloc((size_t)srv->nlistens, sizeof(*ls));
        if (ls == NULL)
            return PETREL_ENOMEM;
        for (int i = 0; i < srv->nlistens; i++) {
            ls[i].io.fd = srv->listens[i].fd;
            ls[i].io.cb = on_accept;
            ls[i].srv = srv;
        }
        srv->listen_ios = &ls[0].io;
        retry_srv = srv;
        accept_retry.cb = on_accept_retry_fire;
        list_init(&accept_retry.node);
        petrel__tq_init(petrel__loop, &accept_retry_q, 100);
    }
    listener_t *ls = (listener_t *)srv->listen_ios;
    for (int i = 0; i < srv->nlistens; i++)
        if (ls[i].io.fd >= 0 && ls[i].io.events == 0)
            petrel__io_add(petrel__loop, &ls[i].io, EPOLLIN);
    srv->accept_paused = false;
    return 0;
}

void petrel__listen_stop(petrel_server_t *srv)
{
    listener_t *ls = (listener_t *)srv->listen_ios;
    if (ls == NULL)
        return;
    for (int i = 0; i < srv->nlistens; i++)
        if (ls[i].io.fd >= 0 && ls[i].io.events)
            petrel__io_del(petrel__loop, &ls[i].io);
}

/* Close every connection that has no request in flight (drain). */
void petrel__conn_close_idle(petrel_server_t *srv)
{
    petrel__list_t *l = srv->conns.next;
    while (l != &srv->conns) {
        petrel__conn_t *c = container_of(l, petrel__conn_t, link);
        l = l->next;
        /* h2: GOAWAY, finish the open streams, then close (h2.c);
         * ws: Close 1001, wait for the peer's Close, then close (ws.c) */
        if (c->proto && (petrel__h2_drain(c) || petrel__ws_drain(c)))
            continue;
        if (petrel__http1_idle(c))
            petrel__conn_close(c);
        else
            c->flags &= ~CONN_KEEPALIVE;
    }
}
