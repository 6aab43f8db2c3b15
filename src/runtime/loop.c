/*
 * loop.c -- the epoll event loop of a worker, its clock and its timers.
 *
 * Level-triggered epoll: a connection reads once per readiness and answers
 * everything it read with one writev, so a batch of pipelined requests costs
 * one read and one write.  The clock is read once per loop turn (a request's
 * duration starts at the turn that read its first bytes); the Date
 * header string is formatted when the second changes.
 */
#include "runtime/loop.h"

#include "petrel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

petrel__loop_t *petrel__loop;

static const char month[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void petrel__loop_update_time(petrel__loop_t *loop)
{
    loop->now_ns = petrel__clock_ns();
    loop->now_ms = loop->now_ns / 1000000;
    time_t now = time(NULL);
    if (now != loop->now_sec) {
        struct tm tm;
        loop->now_sec = now;
        gmtime_r(&now, &tm);
        petrel_http_date_format(now, loop->date); /* RFC 9110 §5.6.7 IMF-fixdate */
        snprintf(loop->log_time, sizeof(loop->log_time), "%02d/%s/%04d:%02d:%02d:%02d +0000",
                 tm.tm_mday, month[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    }
}

int petrel__loop_init(petrel__loop_t *loop)
{
    memset(loop, 0, sizeof(*loop));
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0)
        return PETREL_EIO;
    list_init(&loop->pending);
    list_init(&loop->user_timers);
    list_init(&loop->dead_watches);
    petrel__loop_update_time(loop);
    return 0;
}

static void watches_reap(petrel__loop_t *loop);

void petrel__loop_fini(petrel__loop_t *loop)
{
    watches_reap(loop);
    if (loop->epfd >= 0)
        close(loop->epfd);
    loop->epfd = -1;
}

int petrel__io_add(petrel__loop_t *loop, petrel__io_t *io, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, io->fd, &ev) < 0)
        return PETREL_EIO;
    io->events = events;
    return 0;
}

int petrel__io_mod(petrel__loop_t *loop, petrel__io_t *io, uint32_t events)
{
    if (io->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return PETREL_EIO;
    io->events = events;
    return 0;
}

void petrel__io_del(petrel__loop_t *loop, petrel__io_t *io)
{
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->events = 0;
}

int petrel__tq_init(petrel__loop_t *loop, petrel__tq_t *q, uint64_t timeout_ms,
                    void (*on_expire)(petrel__timer_t *t))
{
    list_init(&q->list);
    q->timeout_ms = timeout_ms;
    q->on_expire = on_expire;
    if (petrel__tq_registered(loop, q))
        return 0;
    if (loop->nqueues == PETREL__LOOP_MAX_TQ) {
        petrel_log(PETREL_LOG_ERROR, "event loop: no room for another timer queue (%d)",
                   PETREL__LOOP_MAX_TQ);
        return PETREL_ELIMIT;
    }
    loop->queues[loop->nqueues++] = q;
    return 0;
}

bool petrel__tq_registered(const petrel__loop_t *loop, const petrel__tq_t *q)
{
    for (int i = 0; i < loop->nqueues; i++)
        if (loop->queues[i] == q)
            return true;
    return false;
}

void petrel__timer_arm(petrel__loop_t *loop, petrel__timer_t *t, petrel__tq_t *q)
{
    if (t->q)
        list_unlink(&t->node);
    t->q = q;
    t->deadline = loop->now_ms + q->timeout_ms;
    list_append(&q->list, &t->node);
}

struct petrel_timer {
    petrel__list_t node;
    uint64_t deadline;
    void (*cb)(void *data);
    void *data;
};

/* petrel_turn_work_t is petrel__pending_t with its fields hidden. */
_Static_assert(sizeof(petrel_turn_work_t) == sizeof(petrel__pending_t) &&
                   offsetof(petrel_turn_work_t, _cb) == offsetof(petrel__pending_t, cb),
               "petrel_turn_work_t and petrel__pending_t differ");

void petrel_turn_work_init(petrel_turn_work_t *w, void (*cb)(petrel_turn_work_t *w))
{
    petrel__pending_t *p = (petrel__pending_t *)w;
    list_init(&p->node);
    w->_cb = cb;
}

void petrel_turn_work_add(petrel_turn_work_t *w)
{
    if (petrel__loop)
        petrel__pending_add(petrel__loop, (petrel__pending_t *)w);
}

void petrel_turn_work_del(petrel_turn_work_t *w)
{
    list_unlink(&((petrel__pending_t *)w)->node);
}

uint64_t petrel_loop_now_ms(void)
{
    return petrel__loop ? petrel__loop->now_ms : 0;
}

petrel_timer_t *petrel_timer_start(uint64_t ms, void (*cb)(void *data), void *data)
{
    petrel__loop_t *loop = petrel__loop;
    if (loop == NULL || cb == NULL)
        return NULL;
    petrel_timer_t *t = malloc(sizeof(*t));
    if (t == NULL)
        return NULL;
    t->deadline = loop->now_ms + ms;
    t->cb = cb;
    t->data = data;
    /* user timers are few: keep them sorted, walking from the latest */
    petrel__list_t *pos = loop->user_timers.prev;
    while (pos != &loop->user_timers &&
           container_of(pos, petrel_timer_t, node)->deadline > t->deadline)
        pos = pos->prev;
    t->node.prev = pos;
    t->node.next = pos->next;
    pos->next->prev = &t->node;
    pos->next = &t->node;
    return t;
}

void petrel_timer_stop(petrel_timer_t *t)
{
    if (t) {
        list_unlink(&t->node);
        free(t);
    }
}

/* ------------------------------------------------------------------------ */
/* Watched descriptors (petrel.h)                                           */

struct petrel_watch {
    petrel__io_t io;
    petrel__list_t dead; /* on loop->dead_watches once stopped */
    bool stopped;
    petrel_watch_cb cb;
    void *data;
};

static uint32_t epoll_events(int events)
{
    return ((events & PETREL_WATCH_READ) ? EPOLLIN : 0) |
           ((events & PETREL_WATCH_WRITE) ? EPOLLOUT : 0);
}

static void watch_io(petrel__io_t *io, uint32_t ev)
{
    petrel_watch_t *w = container_of(io, petrel_watch_t, io);
    if (w->stopped)
        return; /* stopped earlier in this turn */
    int events = ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) ? PETREL_WATCH_READ : 0) |
                 ((ev & EPOLLOUT) ? PETREL_WATCH_WRITE : 0);
    /* a hang-up or an error while only writing is watched: let the
     * callback find out by writing */
    if ((ev & (EPOLLHUP | EPOLLERR)) && !(io->events & EPOLLIN))
        events |= PETREL_WATCH_WRITE;
    w->cb(w, io->fd, events, w->data);
}

petrel_watch_t *petrel_watch_start(int fd, int events, petrel_watch_cb cb, void *data)
{
    petrel__loop_t *loop = petrel__loop;
    if (loop == NULL || cb == NULL || fd < 0) {
        errno = EINVAL;
        return NULL;
    }
    petrel_watch_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->io.fd = fd;
    w->io.cb = watch_io;
    w->cb = cb;
    w->data = data;
    list_init(&w->dead);
    /* registered even with no events, so that petrel_watch_set() is a MOD */
    struct epoll_event ev = {.events = epoll_events(events), .data.ptr = &w->io};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int e = errno;
        free(w);
        errno = e;
        return NULL;
    }
    w->io.events = ev.events;
    return w;
}

int petrel_watch_set(petrel_watch_t *w, int events)
{
    if (w == NULL || w->stopped)
        return PETREL_EINVAL;
    uint32_t ev = epoll_events(events);
    if (ev == w->io.events)
        return 0;
    struct epoll_event e = {.events = ev, .data.ptr = &w->io};
    if (epoll_ctl(petrel__loop->epfd, EPOLL_CTL_MOD, w->io.fd, &e) < 0)
        return PETREL_EIO;
    w->io.events = ev;
    return 0;
}

void petrel_watch_stop(petrel_watch_t *w)
{
    if (w == NULL || w->stopped)
        return;
    w->stopped = true;
    epoll_ctl(petrel__loop->epfd, EPOLL_CTL_DEL, w->io.fd, NULL);
    /* an event for it may still be in this turn's batch: freed at its end */
    list_append(&petrel__loop->dead_watches, &w->dead);
}

static void watches_reap(petrel__loop_t *loop)
{
    while (!list_empty(&loop->dead_watches)) {
        petrel_watch_t *w = container_of(loop->dead_watches.next, petrel_watch_t, dead);
        list_unlink(&w->dead);
        free(w);
    }
}

/* Milliseconds until the earliest deadline, -1 if none. */
static int next_timeout(petrel__loop_t *loop)
{
    uint64_t best = UINT64_MAX;
    if (!list_empty(&loop->user_timers))
        best = container_of(loop->user_timers.next, petrel_timer_t, node)->deadline;
    for (int i = 0; i < loop->nqueues; i++) {
        petrel__list_t *l = &loop->queues[i]->list;
        if (!list_empty(l)) {
            petrel__timer_t *t = container_of(l->next, petrel__timer_t, node);
            if (t->deadline < best)
                best = t->deadline;
        }
    }
    if (best == UINT64_MAX)
        return -1;
    if (best <= loop->now_ms)
        return 0;
    uint64_t d = best - loop->now_ms;
    /* now_ms is truncated: round up so that the deadline has passed. */
    return d > 86400000 ? 86400000 : (int)d + 1;
}

static void expire(petrel__loop_t *loop)
{
    while (!list_empty(&loop->user_timers)) {
        petrel_timer_t *t = container_of(loop->user_timers.next, petrel_timer_t, node);
        if (t->deadline > loop->now_ms)
            break;
        list_unlink(&t->node);
        void (*cb)(void *) = t->cb;
        void *data = t->data;
        free(t);
        cb(data);
    }
    for (int i = 0; i < loop->nqueues; i++) {
        petrel__tq_t *q = loop->queues[i];
        petrel__list_t *l = &q->list;
        while (!list_empty(l)) {
            petrel__timer_t *t = container_of(l->next, petrel__timer_t, node);
            if (t->deadline > loop->now_ms)
                break;
            petrel__timer_disarm(t);
            q->on_expire(t);
        }
    }
}

int petrel__loop_run_once(petrel__loop_t *loop, int max_wait_ms)
{
    struct epoll_event evs[256];
    petrel__loop = loop;
    int tmo = next_timeout(loop);
    if (max_wait_ms >= 0 && (tmo < 0 || tmo > max_wait_ms))
        tmo = max_wait_ms;
    if (loop->busy)
        __atomic_store_n(loop->busy, 0, __ATOMIC_RELAXED);
    int n = epoll_wait(loop->epfd, evs, 256, tmo);
    if (n < 0 && errno != EINTR)
        return PETREL_EIO;
    petrel__loop_update_time(loop);
    if (loop->busy)
        __atomic_store_n(loop->busy, loop->now_ms, __ATOMIC_RELAXED);
    for (int i = 0; i < n; i++) {
        petrel__io_t *io = evs[i].data.ptr;
        io->cb(io, evs[i].events);
    }
    expire(loop);
    /* what the events and timers left for the end of the turn (h2 writes
     * its connections once each, WebSocket sends from elsewhere) */
    while (!list_empty(&loop->pending)) {
        petrel__pending_t *p = container_of(loop->pending.next, petrel__pending_t, node);
        list_unlink(&p->node);
        p->cb(p);
    }
    if (loop->on_tick)
        loop->on_tick(loop);
    watches_reap(loop);
    return n < 0 ? 0 : n;
}

int petrel__loop_run(petrel__loop_t *loop)
{
    while (!loop->stop)
        if (petrel__loop_run_once(loop, -1) < 0)
            return PETREL_EIO;
    return 0;
}
