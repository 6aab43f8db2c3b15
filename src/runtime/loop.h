/*
 * loop.h -- the event loop of a worker (loop.c): epoll, the clock, timers
 * and the work left for the end of a loop turn.
 */
#ifndef PETREL_LOOP_H
#define PETREL_LOOP_H

#include "runtime/list.h"

#include <stdint.h>
#include <time.h>

typedef struct petrel__loop petrel__loop_t;
typedef struct petrel__io petrel__io_t;

/* A file descriptor watched by the loop; embed it and set cb. */
struct petrel__io {
    int fd;
    uint32_t events; /* EPOLLIN/EPOLLOUT currently registered */
    void (*cb)(petrel__io_t *io, uint32_t events);
};

/*
 * Timers with a fixed timeout per queue: every timer of a queue has the same
 * timeout, so appending at the tail keeps the queue sorted by deadline, and
 * arming, disarming and expiring are O(1) (no heap, no scan).  A loop holds
 * PETREL__LOOP_MAX_TQ queues.  A queue belongs to the code that arms timers
 * on it, and its expiry callback is that code's: which timeout fired is the
 * queue whose callback runs, never a question to the timer.
 */
typedef struct petrel__timer petrel__timer_t;

typedef struct petrel__tq {
    petrel__list_t list;
    uint64_t timeout_ms;
    /* `t` expired (it is disarmed first: the callback may arm it again) */
    void (*on_expire)(petrel__timer_t *t);
} petrel__tq_t;

struct petrel__timer {
    petrel__list_t node;
    uint64_t deadline; /* ms, monotonic */
    petrel__tq_t *q;
};

/* Work for the end of the loop turn (loop->pending): h2 gathers the frames
 * of all its streams and writes them once per turn, WebSocket sends made
 * outside the connection's own events are written there.  The loop runs
 * (and unlinks) every entry after the timers of the turn. */
typedef struct petrel__pending {
    petrel__list_t node;
    void (*cb)(struct petrel__pending *p);
} petrel__pending_t;

#define PETREL__LOOP_MAX_TQ 32

struct petrel__loop {
    int epfd;
    bool stop;
    uint64_t now_ms;   /* monotonic ms, refreshed once per loop turn */
    uint64_t now_ns;   /* the same instant in ns (request durations start here) */
    time_t now_sec;    /* wall clock seconds of `date` */
    char date[32];     /* "Sun, 06 Nov 1994 08:49:37 GMT", once a second */
    char log_time[32]; /* "06/Nov/1994:08:49:37 +0000" for the access log */
    petrel__tq_t *queues[PETREL__LOOP_MAX_TQ];
    int nqueues;
    void (*on_tick)(petrel__loop_t *loop); /* once per loop turn, after the pending work */
    petrel__list_t pending;                /* petrel__pending_t, for the end of the turn */
    petrel__list_t user_timers;            /* petrel_timer_start(), by deadline */
    petrel__list_t dead_watches;           /* petrel_watch_stop() this turn: freed at its end */
    /* the watchdog's word (fault.h, busy_ms), NULL for none: the time the
     * turn began, 0 while the loop waits for events */
    uint64_t *busy;
};

int petrel__loop_init(petrel__loop_t *loop);
void petrel__loop_fini(petrel__loop_t *loop);
int petrel__loop_run(petrel__loop_t *loop);
/* One turn: wait at most max_wait_ms (-1: until the next timer), handle the
 * events, the timers and the pending work.  Returns the number of events, or
 * PETREL_EIO. */
int petrel__loop_run_once(petrel__loop_t *loop, int max_wait_ms);
void petrel__loop_update_time(petrel__loop_t *loop);
int petrel__io_add(petrel__loop_t *loop, petrel__io_t *io, uint32_t events);
int petrel__io_mod(petrel__loop_t *loop, petrel__io_t *io, uint32_t events);
void petrel__io_del(petrel__loop_t *loop, petrel__io_t *io);
/* Register a timer queue with the loop: its timers expire `timeout_ms`
 * after they are armed, and `on_expire` is called for each.  Again for a
 * registered queue: its timeout and callback change (no new slot).
 * PETREL_ELIMIT (and an error log line) when the loop has no room for
 * another: a queue that is not registered would never fire. */
int petrel__tq_init(petrel__loop_t *loop, petrel__tq_t *q, uint64_t timeout_ms,
                    void (*on_expire)(petrel__timer_t *t));
/* Whether `q` is registered with `loop`. */
bool petrel__tq_registered(const petrel__loop_t *loop, const petrel__tq_t *q);
void petrel__timer_arm(petrel__loop_t *loop, petrel__timer_t *t, petrel__tq_t *q);
static inline void petrel__timer_disarm(petrel__timer_t *t)
{
    if (t->q) {
        list_unlink(&t->node);
        t->q = NULL;
    }
}
/* Have `p` run at the end of this loop turn (once, however often asked). */
static inline void petrel__pending_add(petrel__loop_t *loop, petrel__pending_t *p)
{
    if (list_empty(&p->node))
        list_append(&loop->pending, &p->node);
}

/* Monotonic ns now (not the loop turn's time): the end of a request. */
static inline uint64_t petrel__clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* The loop of this worker process. */
extern petrel__loop_t *petrel__loop;

#endif /* PETREL_LOOP_H */
