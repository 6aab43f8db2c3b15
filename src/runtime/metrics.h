/*
 * metrics.h -- the counters of a petrel instance (metrics.c).
 *
 * Every worker process counts into a block of its own in memory shared by
 * the master and all its workers (mapped by the master before it forks):
 * one writer per block, so a count is a plain increment -- no lock, no
 * atomic instruction on the request path.  Whoever serves /metrics (any
 * worker, on the admin listener) sums the blocks.  When a worker exits
 * (a reload retires it, it crashes, it is killed), the master adds its
 * counters to a block of retired counts before the worker's block is given
 * to another worker, under a sequence counter that readers check, so a sum
 * never counts a worker twice or not at all: counters never go backwards
 * while the master runs.  Gauges (connections open now, ...) are not
 * carried over: a worker that is gone has none.
 *
 * Without shared memory (no --admin-listen, or a test that serves a socket
 * in its own process) the counts go to a block private to the process, at
 * the same cost.
 */
#ifndef PETREL_METRICS_H
#define PETREL_METRICS_H

#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The reasons a connection closes (petrel_connections_closed_total{reason}):
 * petrel__close_t of the transport (conn.h), counted in this order. */
#define PETREL__METRICS_CLOSE_N 6

/* Why the PROXY stage closed a connection. */
enum {
    PETREL__PROXY_REJ_UNTRUSTED, /* the peer is not in --trusted-proxies */
    PETREL__PROXY_REJ_INVALID,   /* no header, or not a valid one */
    PETREL__PROXY_REJ_TIMEOUT,   /* not complete within --header-timeout */
    PETREL__PROXY_REJ_EOF,       /* the peer closed before it was complete */
    PETREL__PROXY_REJ_N
};

/* Request labels: protocol (by version), method, status class. */
#define PETREL__M_PROTOS 3  /* HTTP/1.0, HTTP/1.1, HTTP/2 */
#define PETREL__M_METHODS 8 /* GET HEAD POST PUT DELETE PATCH OPTIONS other */
#define PETREL__M_CLASSES 5 /* 1xx .. 5xx */
/* Request duration: buckets of less than 2^(14 + i) ns (16.4 µs .. 17.2 s),
 * then +Inf. */
#define PETREL__M_DUR_BOUNDS 21
#define PETREL__M_DUR_SHIFT 14
/* A slot for every bucket index a 64-bit value can give (no clamping on the
 * request path: the exposition adds the ones past the bounds to +Inf). */
#define PETREL__M_DUR_SLOTS (64 - PETREL__M_DUR_SHIFT + 1)
/* Arena high-water: buckets of less than 2^(8 + 2i) bytes (256 B .. 64 MiB),
 * then +Inf. */
#define PETREL__M_ARENA_BOUNDS 10
#define PETREL__M_ARENA_SLOTS 33
/* Metrics registered by modules (petrel_metric_counter/gauge). */
#define PETREL__M_USER_MAX 64
/* Readiness checks a worker may report down (petrel_ready_set). */
#define PETREL__M_CHECKS 8
#define PETREL__M_CHECK_NAME 32

/* Counters of a worker (summed over the instance, carried over when a
 * worker exits).  Arrays are laid out one after another. */
enum {
    PETREL__C_CONN_ACCEPTED,
    PETREL__C_CONN_CLOSED, /* + petrel__close_t (conn.h) */
    PETREL__C_BYTES_IN = PETREL__C_CONN_CLOSED + PETREL__METRICS_CLOSE_N,
    PETREL__C_BYTES_OUT,
    PETREL__C_H2_STREAMS,
    PETREL__C_WS_OPENED,
    PETREL__C_WS_MSG_IN, /* then _OUT: a pair, in this order */
    PETREL__C_WS_MSG_OUT,
    PETREL__C_PROXY_V1, /* then _V2 */
    PETREL__C_PROXY_V2,
    PETREL__C_PROXY_REJECTED, /* + PETREL__PROXY_REJ_* */
    /* the caches of the worker (cache.c), all together */
    PETREL__C_CACHE_HITS = PETREL__C_PROXY_REJECTED + PETREL__PROXY_REJ_N,
    PETREL__C_CACHE_MISSES,
    PETREL__C_CACHE_EVICTIONS,
    PETREL__C_CACHE_EXPIRED,
    PETREL__C_CACHE_LOADS,
    PETREL__C_CACHE_LOAD_FAILURES,
    PETREL__C_DUR_SUM_NS,
    PETREL__C_DUR, /* + bucket */
    PETREL__C_ARENA_SUM = PETREL__C_DUR + PETREL__M_DUR_SLOTS,
    PETREL__C_ARENA, /* + bucket */
    PETREL__C_REQUESTS = PETREL__C_ARENA + PETREL__M_ARENA_SLOTS,
    PETREL__C_N = PETREL__C_REQUESTS + PETREL__M_PROTOS * PETREL__M_METHODS * PETREL__M_CLASSES
};

/* Gauges of a worker (summed over the workers alive). */
enum {
    PETREL__G_CONN_OPEN,
    PETREL__G_H2_STREAMS_OPEN,
    PETREL__G_WS_OPEN,
    PETREL__G_CACHE_ENTRIES, /* entries holding a value, in all the caches */
    PETREL__G_N
};

/* The upstream client's counts (framework/upstream.c): one slot per
 * upstream (its calls) and one per address of it (its connections),
 * registered in the master by petrel__metrics_upstream_slot(). */
#define PETREL__M_UP_SLOTS 48
#define PETREL__M_UP_RESULTS 10 /* see petrel__metrics_up_results in metrics.c */
typedef struct petrel__up_stats {
    uint64_t calls[PETREL__M_UP_RESULTS]; /* the upstream's slot: by result */
    uint64_t retries;                     /* the upstream's slot */
    uint64_t connects, reuses;            /* an address's slot */
    int64_t pending;                      /* gauge, the upstream's slot */
    int64_t open, idle, breaker_open;     /* gauges, an address's slot */
} petrel__up_stats_t;

typedef struct petrel__stats {
    uint64_t c[PETREL__C_N];
    petrel__up_stats_t up[PETREL__M_UP_SLOTS];
    int64_t g[PETREL__G_N];
    int64_t user[PETREL__M_USER_MAX];
    /* not counts: checks its modules report down */
    struct {
        char name[PETREL__M_CHECK_NAME];
        uint8_t down;
    } checks[PETREL__M_CHECKS];
} petrel__stats_t;

/* The block of this process. */
extern petrel__stats_t *petrel__stats;
/* Whether requests are counted (an admin listener serves the counts). */
extern bool petrel__metrics_on;
/* Whether a request's duration and arena high-water are measured, and what
 * for: the counts, the access log (petrel__req_started/finished, proto.h). */
enum { PETREL__MEASURE_COUNT = 1, PETREL__MEASURE_LOG = 2 };
extern unsigned petrel__req_measure;

static inline void petrel__count(unsigned counter, uint64_t n)
{
    petrel__stats->c[counter] += n;
}
static inline void petrel__gauge_add(unsigned gauge, int64_t n)
{
    petrel__stats->g[gauge] += n;
}

/* One request done: `version` 10, 11 or 20, `method` a PETREL_* bit (0:
 * another), `status`, its duration (ns) and its arena's high-water mark.
 * On the path of every request: a few increments, no call, no loop.  The
 * histograms' buckets are powers of two (le = 2^k - 1: v < 2^k), so that a
 * bucket is a bit count. */
static inline void petrel__metrics_request(int version, int method, int status, uint64_t dur_ns,
                                           uint64_t arena_high)
{
    uint64_t *c = petrel__stats->c;
    unsigned p = version == 11 ? 1 : version == 20 ? 2 : 0;
    unsigned m = (unsigned)__builtin_ctz((unsigned)method | 0x80); /* 7: another */
    /* (s * 41) >> 12 is s / 100 for 100 <= s <= 599; a status out of that
     * range (there is none) lands in a class, not outside the array */
    static const uint8_t cls[8] = {4, 0, 1, 2, 3, 4, 4, 4};
    unsigned k = cls[((unsigned)status * 41 >> 12) & 7];
    c[PETREL__C_REQUESTS + (p * PETREL__M_METHODS + m) * PETREL__M_CLASSES + k]++;
    /* the number of bits of dur_ns >> 14 (0 for 0), at most 50 */
    c[PETREL__C_DUR + 63 - __builtin_clzll((dur_ns >> (PETREL__M_DUR_SHIFT - 1)) | 1)]++;
    c[PETREL__C_DUR_SUM_NS] += dur_ns;
    /* half the bits of arena_high >> 8, rounded up: at most 32 */
    c[PETREL__C_ARENA + (64 - __builtin_clzll((arena_high >> 7) | 1)) / 2]++;
    c[PETREL__C_ARENA_SUM] += arena_high;
}

/* ------------------------------------------------------------------------ */
/* The master's side                                                        */

/* Map the shared blocks for `workers` workers (called once by the master,
 * before the modules' init: petrel_metric_counter() writes names there).
 * 0, or PETREL_ENOMEM. */
int petrel__metrics_init(int workers);
/* A block for a worker about to be forked: its index, or -1 when all are
 * taken (the worker then counts into a private block, unreported). */
int petrel__metrics_block_take(void);
/* The fork made worker `pid` with block `idx` (pid 0: the fork failed,
 * the block is free again). */
void petrel__metrics_block_owner(int idx, pid_t pid);
/* In the new worker: count into block `idx` (-1: a private one). */
void petrel__metrics_block_enter(int idx);
/* Worker `pid` exited: its counters join the retired ones, its block is
 * free. */
void petrel__metrics_worker_gone(pid_t pid);

/* In a process that must not touch the shared counters (the trial of a
 * generation): from now on, its registrations and counts are its own. */
void petrel__metrics_detach(void);

/* Figures of the instance that the master keeps. */
enum {
    PETREL__I_RESTARTS,     /* workers that died and were restarted */
    PETREL__I_RELOADS_OK,   /* reloads that made new workers serve */
    PETREL__I_RELOADS_FAIL, /* reloads that failed (the old workers stayed) */
    PETREL__I_GENERATION,   /* the generation of modules served (a gauge) */
    PETREL__I_WORKERS,      /* workers serving (a gauge) */
    PETREL__I_DRAINING,     /* 1 from SIGTERM on: /readyz answers 503 */
    PETREL__I_CRASHES,      /* workers killed by a fault of their own (SIGSEGV, ...) */
    PETREL__I_WATCHDOG,     /* workers the watchdog killed (a loop turn too long) */
    PETREL__I_GAVE_UP,      /* 1: a worker failed to start --restart-limit times in a row */
    PETREL__I_WANTED,       /* workers the instance should have (--workers) */
    PETREL__I_N
};
/* A worker died of a fault (`watchdog`: killed by the watchdog) in the
 * code of `module` ("" or NULL: none known): counted by module. */
void petrel__metrics_fault(const char *module, bool watchdog);
void petrel__metrics_instance_set(unsigned what, uint64_t v);
void petrel__metrics_instance_add(unsigned what, uint64_t n);
uint64_t petrel__metrics_instance_get(unsigned what);

/* ------------------------------------------------------------------------ */
/* The reader's side (the admin listener)                                  */

/* The Prometheus text exposition (format 0.0.4) of the whole instance,
 * in `a`; NULL when out of memory. */
/* In the master: the slot of the counts of upstream `name` (`address`
 * NULL: the upstream's own), the same one when asked again (a reload);
 * -1 when all are taken (then nothing is counted). */
int petrel__metrics_upstream_slot(const char *name, const char *address);
/* The counts of slot `i` of this process (never NULL: a slot of -1 counts
 * into a scratch entry). */
petrel__up_stats_t *petrel__metrics_up(int i);

char *petrel__metrics_text(petrel_arena_t *a, size_t *len);
/* Whether the instance is ready: not draining, and no worker reports a
 * check down.  Otherwise false, with the reason (NUL-terminated) in `why`. */
bool petrel__metrics_ready(char *why, size_t len);

#endif /* PETREL_METRICS_H */
