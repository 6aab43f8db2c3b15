/*
 * pgsql.c -- a per-worker PostgreSQL connection pool on libpq's
 * non-blocking API (petrel.h, "PostgreSQL connection pool").  The one file
 * that touches libpq, and the library libpetrel-pg (<petrel/pg.h>), beside
 * libpetrel: written against petrel's public API only, as a module is.
 *
 * Each connection runs in pipeline mode.  A batch is one transaction: a
 * query on its own (the default), or the queries a request made between
 * petrel_pg_tx_begin() and petrel_pg_tx_end().  A batch goes out whole,
 * its queries and then its Sync, so that no two batches ever share a
 * transaction: one request's failure never touches another's queries.
 * Many batches are in flight on a connection at once (pipeline mode), and
 * the server answers them in order; a connection keeps the batches it sent
 * in `sent`, and a cursor says which query of the oldest the next result
 * belongs to.  A batch's results are held until its Sync arrives, then its
 * callbacks run in order.  A batch that failed for a reason that running
 * it again cures (a serialization failure, a deadlock, a cancel meant for
 * another batch) is run again, a bounded number of times, before anyone
 * saw its results: it was rolled back whole.
 *
 * No heap allocation per query after warm-up: batches and queries come
 * from the pool's free lists, with the copies of their parameters in
 * buffers that they keep; the record that ties a batch to its request (to
 * learn that the request ended or was aborted) lives in the request arena.
 * libpq allocates each PGresult (doc/benchmarks.md has the count).
 *
 * libpq may close its socket inside a call (a lost connection; the next
 * address during a connect), and the number may be reused at once by the
 * next socket anyone opens: a watch is stopped right after the libpq call
 * that made its descriptor go, before anything else runs (sync_fd()).
 *
 * Why this file is over 1,000 lines: it is the one file that touches
 * libpq; the pool, the batches and their transactions, the retries and
 * the cancels share one connection state machine.
 */
#include <petrel.h>
#include <petrel/pg.h>

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The pool's lists: intrusive, circular, doubly linked, with a head node
 * (the library is written against petrel's public API only: it has lists
 * of its own). */
typedef struct pglist {
    struct pglist *prev, *next;
} pglist_t;

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

static inline void list_init(pglist_t *l)
{
    l->prev = l->next = l;
}

static inline bool list_empty(const pglist_t *l)
{
    return l->next == l;
}

static inline void list_unlink(pglist_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

static inline void list_append(pglist_t *l, pglist_t *n)
{
    n->prev = l->prev;
    n->next = l;
    l->prev->next = n;
    l->prev = n;
}

/* What a callback gets (libpq's PGresult is struct pg_result). */
struct petrel_pg_result {
    int status;
    const char *sqlstate;
    const char *message;
    const struct pg_result *res;
    petrel_pg_t *pool;
};

#ifdef HAVE_PGSQL
#include <libpq-fe.h>

enum { C_DOWN, C_CONNECTING, C_READY };
enum { B_FREE, B_QUEUED, B_SENT, B_DELIVERING, B_CANCELING };

/* Batches run again at most this often (40001, 40P01, cancel races). */
#define PG_MAX_RETRIES 2
/* After its answer, a cancel may still land on the backend this long: a
 * batch that fails with 57014 meanwhile is run again. */
#define PG_CANCEL_GRACE_MS 250

typedef struct pgbatch pgbatch_t;

/* A query of a batch.  Its SQL text (for petrel_pg_query) and parameters
 * are copied into `buf`, which it keeps for the next query that uses it. */
typedef struct pgq {
    struct pgq *next; /* in its batch, in order; in the free list */
    const petrel_pg_stmt_t *stmt;
    const char *sql; /* petrel_pg_query: the text, in buf */
    petrel_pg_cb cb;
    void *data;
    PGresult *res; /* held until the batch's Sync */
    int nparams;
    bool prep; /* a Prepare of stmt goes before it on the wire */
    bool bin;  /* its parameters are binary (petrel_pg_exec_bin): pl and pf say so */
    const char **pv;
    int *pl, *pf; /* lengths and formats (1) of binary parameters */
    size_t pvcap;
    char *buf;
    size_t cap;
} pgq_t;

/* The record of a batch in its request's arena: the request ended
 * (link_gone, an arena cleanup) or was aborted (pg_on_abort, the abort
 * callback, which chains the one registered before). */
typedef struct pglink {
    petrel_pg_t *pool;
    pgbatch_t *batch; /* NULL once it called back, or was dropped */
    petrel_abort_cb prev_cb;
    void *prev_data;
} pglink_t;

typedef struct pgconn pgconn_t;

struct pgbatch {
    pglist_t node; /* pool->queue, conn->sent, or the free list */
    pgq_t *first, *last;
    unsigned nq;
    int state;
    pgq_t *cur;    /* the query the next result is for (NULL: the Sync) */
    bool cur_prep; /* ... for its Prepare */
    pgconn_t *conn;
    petrel_req_t *req; /* NULL: none, or it ended */
    pglink_t *link;
    uint64_t req_id;
    bool for_req;  /* made for a request (which may have ended since) */
    bool internal; /* the pool's own (a cancel) */
    bool canceled; /* its request was aborted: results dropped */
    bool exposed;  /* a cancel meant for another batch may hit it */
    unsigned retries;
    pgq_t *failed;    /* the query whose error failed the batch */
    pgbatch_t *cnext; /* petrel_pg_cancel's list */
};

struct pgconn {
    petrel_pg_t *pool;
    unsigned idx;
    PGconn *pg;
    petrel_watch_t *w;
    int fd;
    int wev;
    int state;
    pglist_t sent;         /* batches sent, oldest first: the oldest runs */
    pgbatch_t *cancel_for; /* the batch a server-side cancel was sent for */
    unsigned nq;           /* queries in flight */
    unsigned char *prepared;
    unsigned nprepared;
    petrel_timer_t *timer; /* connect timeout, or the wait before reconnecting */
    unsigned backoff_ms;
    bool broken;        /* a send failed: failed at the end of the turn */
    bool flush;         /* bytes wait in libpq's buffer: flushed at the end of the turn */
    bool canceller;     /* the pool's connection for cancels only */
    bool cancel_wanted; /* a cancel for it waits for the canceller */
    unsigned cancel_out;
    uint64_t cancel_until;
    char err[200];
};

struct petrel_pg_stmt {
    char name[24];
    char *sql;
    unsigned idx;
    int result_format; /* 1: PETREL_PG_BINARY_RESULTS */
};

struct petrel_pg {
    pglist_t node; /* `pools` */
    petrel_pg_opts_t o;
    char *conninfo;
    pgconn_t *conns; /* o.connections of them, and the canceller */
    pglist_t queue;
    unsigned queued;
    bool tx_open;         /* petrel_pg_tx_begin() ... petrel_pg_tx_end() */
    petrel_req_t *tx_req; /* ... for this request (NULL: the module's own) */
    pgbatch_t *tx;        /* its queries so far (NULL: none yet) */
    pglist_t free_batches;
    pgq_t *free_q;
    petrel_pg_stmt_t **stmts;
    unsigned nstmts, capstmts;
    petrel_turn_work_t turn;
    unsigned ready;
    bool down; /* no connection, and the last attempt failed */
    petrel_pg_stats_t st;
};

/* The open pools of this worker: an abort callback checks that its pool
 * is still one. */
static pglist_t pools = {&pools, &pools};

static void conn_connect(pgconn_t *c);
static void conn_lost(pgconn_t *c, const char *why);
static void dispatch(petrel_pg_t *p);
static void server_cancel(pgconn_t *c, pgbatch_t *b);
static void cancels_send(petrel_pg_t *p);
static void deliver(petrel_pg_t *p, pgbatch_t *b, int status, const char *sqlstate,
                    const char *msg);
static void tx_close(petrel_pg_t *p);

/* ------------------------------------------------------------------------ */
/* Free lists                                                               */

static pgq_t *q_get(petrel_pg_t *p)
{
    pgq_t *q = p->free_q;
    if (q) {
        p->free_q = q->next;
    } else if ((q = calloc(1, sizeof(*q))) == NULL) {
        return NULL;
    }
    q->next = NULL;
    q->res = NULL;
    q->prep = false;
    q->bin = false;
    return q;
}

static void q_put(petrel_pg_t *p, pgq_t *q)
{
    if (q->res) {
        PQclear(q->res);
        q->res = NULL;
    }
    q->next = p->free_q;
    p->free_q = q;
}

/* Room in q for `need` bytes and n parameters (lengths and formats too). */
static int q_room(pgq_t *q, size_t need, int n)
{
    if (need > q->cap) {
        /* a power of two, 512 at least: a query that reuses q needs a
         * bigger buffer seldom (the free list hands out queries of every
         * kind: an UPDATE's arrays after many small SELECTs; two int4[]
         * of 20 in binary are 360 bytes) */
        size_t cap = 512;
        while (cap < need)
            cap *= 2;
        char *b = realloc(q->buf, cap);
        if (b == NULL)
            return PETREL_ENOMEM;
        q->buf = b;
        q->cap = cap;
    }
    if ((size_t)n > q->pvcap) {
        size_t cap = n < 4 ? 4 : (size_t)n;
        const char **pv = realloc(q->pv, cap * sizeof(*pv));
        if (pv == NULL)
            return PETREL_ENOMEM;
        q->pv = pv;
        int *pl = realloc(q->pl, cap * sizeof(*pl));
        if (pl == NULL)
            return PETREL_ENOMEM;
        q->pl = pl;
        int *pf = realloc(q->pf, cap * sizeof(*pf));
        if (pf == NULL)
            return PETREL_ENOMEM;
        q->pf = pf;
        q->pvcap = cap;
    }
    return 0;
}

/* Copy the SQL text (or NULL) and the parameters into q's buffers. */
static int q_fill(pgq_t *q, const char *sql, int n, const char *const *params)
{
    size_t need = sql ? strlen(sql) + 1 : 0;
    for (int i = 0; i < n; i++)
        if (params[i])
            need += strlen(params[i]) + 1;
    if (q_room(q, need, n) < 0)
        return PETREL_ENOMEM;
    char *w = q->buf;
    q->sql = NULL;
    if (sql) {
        size_t l = strlen(sql) + 1;
        memcpy(w, sql, l);
        q->sql = w;
        w += l;
    }
    for (int i = 0; i < n; i++) {
        if (params[i] == NULL) {
            q->pv[i] = NULL;
            continue;
        }
        size_t l = strlen(params[i]) + 1;
        memcpy(w, params[i], l);
        q->pv[i] = w;
        w += l;
    }
    q->nparams = n;
    q->bin = false;
    return 0;
}

/* Copy binary parameters (bytes and lengths; ptr NULL: SQL NULL) into q. */
static int q_fill_bin(pgq_t *q, int n, const petrel_str_t *params)
{
    size_t need = 0;
    for (int i = 0; i < n; i++)
        if (params[i].ptr)
            need += params[i].len;
    if (q_room(q, need ? need : 1, n) < 0) /* a buffer: an empty value is not NULL */
        return PETREL_ENOMEM;
    char *w = q->buf;
    q->sql = NULL;
    for (int i = 0; i < n; i++) {
        q->pf[i] = 1;
        if (params[i].ptr == NULL) {
            q->pv[i] = NULL;
            q->pl[i] = 0;
            continue;
        }
        if (params[i].len)
            memcpy(w, params[i].ptr, params[i].len);
        q->pv[i] = w;
        q->pl[i] = (int)params[i].len;
        w += params[i].len;
    }
    q->nparams = n;
    q->bin = true;
    return 0;
}

static pgbatch_t *b_get(petrel_pg_t *p)
{
    pgbatch_t *b;
    if (!list_empty(&p->free_batches)) {
        b = container_of(p->free_batches.next, pgbatch_t, node);
        list_unlink(&b->node);
    } else if ((b = malloc(sizeof(*b))) == NULL) {
        return NULL;
    }
    memset(b, 0, sizeof(*b));
    list_init(&b->node);
    return b;
}

/* Back to the free list, with its queries; b is unlinked from everything
 * but its request's record, which lets go of it here. */
static void b_put(petrel_pg_t *p, pgbatch_t *b)
{
    pgq_t *q = b->first;
    while (q) {
        pgq_t *n = q->next;
        q_put(p, q);
        q = n;
    }
    if (b->link)
        b->link->batch = NULL;
    b->first = b->last = NULL;
    b->link = NULL;
    b->req = NULL;
    b->state = B_FREE;
    list_append(&p->free_batches, &b->node);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */

/* libpq's message, on one line: its newlines and tabs as single spaces. */
static void set_err(pgconn_t *c, const char *msg)
{
    if (msg == NULL || *msg == '\0')
        msg = "connection failed";
    size_t n = 0;
    for (; *msg && n + 1 < sizeof(c->err); msg++) {
        char ch = (*msg == '\n' || *msg == '\t') ? ' ' : *msg;
        if (ch == ' ' && (n == 0 || c->err[n - 1] == ' '))
            continue;
        c->err[n++] = ch;
    }
    while (n && c->err[n - 1] == ' ')
        n--;
    c->err[n] = '\0';
}

/* libpq's socket changed or went away inside the last call: stop watching
 * the old one before anything else can open a descriptor of that number. */
static bool sync_fd(pgconn_t *c)
{
    int fd = c->pg ? PQsocket(c->pg) : -1;
    if (fd == c->fd && c->w)
        return true;
    if (c->w)
        petrel_watch_stop(c->w);
    c->w = NULL;
    c->fd = fd;
    return false;
}

static void conn_watch_cb(petrel_watch_t *w, int fd, int events, void *data);

/* Watch c->fd for `events`; a new watch when the descriptor changed. */
static int conn_watch(pgconn_t *c, int events)
{
    if (!sync_fd(c)) {
        if (c->fd < 0)
            return PETREL_EIO;
        c->w = petrel_watch_start(c->fd, events, conn_watch_cb, c);
        if (c->w == NULL)
            return PETREL_ENOMEM;
        c->wev = events;
        return 0;
    }
    if (events != c->wev) {
        if (petrel_watch_set(c->w, events) < 0)
            return PETREL_EIO;
        c->wev = events;
    }
    return 0;
}

static void conn_drop(pgconn_t *c)
{
    if (c->w)
        petrel_watch_stop(c->w);
    c->w = NULL;
    c->fd = -1;
    if (c->pg)
        PQfinish(c->pg);
    c->pg = NULL;
    if (c->timer)
        petrel_timer_stop(c->timer);
    c->timer = NULL;
    if (c->state == C_READY && !c->canceller)
        c->pool->ready--;
    c->state = C_DOWN;
    c->cancel_for = NULL;
    c->broken = false;
    c->flush = false;
    c->cancel_out = 0;
    if (c->prepared)
        memset(c->prepared, 0, c->nprepared);
}

/* Every queued batch fails: no connection can be made for now. */
static void fail_queue(petrel_pg_t *p, const char *why)
{
    while (!list_empty(&p->queue)) {
        pgbatch_t *b = container_of(p->queue.next, pgbatch_t, node);
        list_unlink(&b->node);
        p->queued -= b->nq;
        deliver(p, b, PETREL_PG_EUNAVAILABLE, "08001", why);
    }
}

static void on_reconnect(void *data)
{
    pgconn_t *c = data;
    c->timer = NULL;
    conn_connect(c);
}

static void conn_retry_later(pgconn_t *c)
{
    petrel_pg_t *p = c->pool;
    unsigned lo = p->o.reconnect_min_ms, hi = p->o.reconnect_max_ms;
    c->backoff_ms = c->backoff_ms == 0 ? lo : c->backoff_ms * 2;
    if (c->backoff_ms > hi)
        c->backoff_ms = hi;
    c->timer = petrel_timer_start(c->backoff_ms, on_reconnect, c);
    if (c->timer == NULL) /* out of memory: try again now rather than never */
        petrel_log(PETREL_LOG_ERROR, "pg: connection %u: no timer to reconnect with", c->idx);
}

/* The pool as a whole: down when no connection is up and an attempt to
 * make one just failed.  Logged once per outage. */
static void pool_check_down(petrel_pg_t *p, const char *why)
{
    if (p->ready > 0 || p->down)
        return;
    p->down = true;
    petrel_log(PETREL_LOG_ERROR,
               "pg: the database is unavailable: %s; reconnecting every %u ms "
               "at most",
               why, p->o.reconnect_max_ms);
    fail_queue(p, why);
}

static void conn_attempt_failed(pgconn_t *c, const char *why)
{
    petrel_pg_t *p = c->pool;
    set_err(c, why);
    p->st.failures++;
    petrel_log(PETREL_LOG_DEBUG, "pg: connection %u: %s", c->idx, c->err);
    conn_drop(c);
    if (c->canceller) { /* made again when a cancel needs it */
        c->backoff_ms = 0;
        return;
    }
    pool_check_down(p, c->err);
    conn_retry_later(c);
}

static void on_connect_timeout(void *data)
{
    pgconn_t *c = data;
    c->timer = NULL;
    char why[64];
    snprintf(why, sizeof(why), "no connection within %u ms", c->pool->o.connect_timeout_ms);
    conn_attempt_failed(c, why);
}

static void conn_ready(pgconn_t *c)
{
    petrel_pg_t *p = c->pool;
    if (c->timer)
        petrel_timer_stop(c->timer);
    c->timer = NULL;
    if (PQsetnonblocking(c->pg, 1) != 0 || PQenterPipelineMode(c->pg) != 1) {
        conn_attempt_failed(c, PQerrorMessage(c->pg));
        return;
    }
    if (conn_watch(c, PETREL_WATCH_READ) < 0) {
        conn_attempt_failed(c, "cannot watch the connection's socket");
        return;
    }
    c->state = C_READY;
    c->backoff_ms = 0;
    p->st.connects++;
    if (c->canceller) {
        cancels_send(p);
        return;
    }
    p->ready++;
    if (p->down) {
        p->down = false;
        petrel_log(PETREL_LOG_INFO, "pg: the database is available again");
    }
    petrel_log(PETREL_LOG_DEBUG, "pg: connection %u ready (backend %d)", c->idx,
               PQbackendPID(c->pg));
    dispatch(p);
}

static void conn_poll(pgconn_t *c)
{
    PostgresPollingStatusType st = PQconnectPoll(c->pg);
    /* libpq may have moved to another socket (the next address): watch
     * the new one, never the number of the old */
    if (c->w) {
        petrel_watch_stop(c->w);
        c->w = NULL;
    }
    c->fd = -1;
    switch (st) {
    case PGRES_POLLING_OK:
        conn_ready(c);
        return;
    case PGRES_POLLING_READING:
    case PGRES_POLLING_WRITING:
        if (conn_watch(c, st == PGRES_POLLING_READING ? PETREL_WATCH_READ : PETREL_WATCH_WRITE) < 0)
            conn_attempt_failed(c, "cannot watch the connection's socket");
        return;
    default:
        conn_attempt_failed(c, PQerrorMessage(c->pg));
        return;
    }
}

static void conn_connect(pgconn_t *c)
{
    petrel_pg_t *p = c->pool;
    c->pg = PQconnectStart(p->conninfo);
    if (c->pg == NULL) {
        conn_attempt_failed(c, "out of memory");
        return;
    }
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        conn_attempt_failed(c, PQerrorMessage(c->pg));
        return;
    }
    c->state = C_CONNECTING;
    c->fd = -1;
    c->timer = petrel_timer_start(p->o.connect_timeout_ms, on_connect_timeout, c);
    /* PQconnectStart's docs: poll as if it had returned WRITING */
    if (c->timer == NULL || conn_watch(c, PETREL_WATCH_WRITE) < 0)
        conn_attempt_failed(c, "out of memory");
}

/* Flush what libpq holds; watch for writability while some is left. */
static void conn_flush(pgconn_t *c)
{
    c->flush = false;
    int r = PQflush(c->pg);
    if (r < 0) {
        c->broken = true;
        petrel_turn_work_add(&c->pool->turn);
        return;
    }
    int ev = PETREL_WATCH_READ | (r ? PETREL_WATCH_WRITE : 0);
    if (ev != c->wev && conn_watch(c, ev) < 0) {
        c->broken = true;
        petrel_turn_work_add(&c->pool->turn);
    }
}

#ifndef LIBPQ_HAS_SEND_PIPELINE_SYNC
/* libpq before 17 has no PQsendPipelineSync: its PQpipelineSync writes at
 * once, a write per statement (and, on the server, a wake-up and a read
 * for each).  While it runs, send() and recv() of this thread answer
 * EAGAIN, as a full socket does: on a non-blocking connection libpq then
 * keeps the Sync in its buffer, and the flush at the end of the loop turn
 * writes the statements of the turn together, as libpq 17's
 * PQsendPipelineSync leaves them.  libpq calls send() and recv() through
 * the dynamic linker, which finds these definitions in the program first
 * (the library is static: they are the program's).  They are weak: a
 * program that defines its own keeps them, and PQpipelineSync then writes
 * at once, as before.
 * Outside PQpipelineSync they are the C library's, and cost a test. */
#include <dlfcn.h>
#include <sys/socket.h>

static __thread bool hold_io;

#define PG_LIBC_HOOK __attribute__((weak, visibility("default")))

PG_LIBC_HOOK ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    static ssize_t (*next)(int, const void *, size_t, int);
    if (hold_io) {
        errno = EAGAIN;
        return -1;
    }
    if (next == NULL)
        next = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
    if (next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return next(fd, buf, n, flags);
}

PG_LIBC_HOOK ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    static ssize_t (*next)(int, void *, size_t, int);
    if (hold_io) {
        errno = EAGAIN;
        return -1;
    }
    if (next == NULL)
        next = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    if (next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return next(fd, buf, n, flags);
}

/* libpq 17's PQsendPipelineSync on older libpq (the connection is
 * non-blocking: a blocking one would wait for the socket instead). */
static int send_pipeline_sync(PGconn *pg)
{
    hold_io = true;
    int r = PQpipelineSync(pg);
    hold_io = false;
    return r;
}
#else
#define send_pipeline_sync PQsendPipelineSync
#endif

/* The Sync of the batch whose queries were just sent: the end of its
 * transaction.  The bytes stay in libpq's buffer, flushed at the end of
 * the loop turn: one write for the batches of a turn. */
static void send_sync(pgconn_t *c)
{
    if (send_pipeline_sync(c->pg) != 1)
        goto broken;
    c->flush = true;
    petrel_turn_work_add(&c->pool->turn);
    return;
broken:
    set_err(c, PQerrorMessage(c->pg));
    c->broken = true;
    petrel_turn_work_add(&c->pool->turn);
}

static bool stmt_prepared(pgconn_t *c, const petrel_pg_stmt_t *s)
{
    if (s->idx >= c->nprepared) {
        unsigned n = c->pool->capstmts;
        unsigned char *a = realloc(c->prepared, n);
        if (a == NULL)
            return false; /* prepared again: harmless but for a duplicate-name error */
        memset(a + c->nprepared, 0, n - c->nprepared);
        c->prepared = a;
        c->nprepared = n;
    }
    return c->prepared[s->idx];
}

static void send_q(pgconn_t *c, pgq_t *q)
{
    int ok;
    const char *const *pv = (const char *const *)q->pv;
    if (q->stmt) {
        const petrel_pg_stmt_t *s = q->stmt;
        q->prep = false;
        if (!stmt_prepared(c, s)) {
            if (PQsendPrepare(c->pg, s->name, s->sql, 0, NULL) != 1)
                goto broken;
            if (s->idx < c->nprepared)
                c->prepared[s->idx] = 1;
            q->prep = true;
        }
        ok = PQsendQueryPrepared(c->pg, s->name, q->nparams, pv, q->bin ? q->pl : NULL,
                                 q->bin ? q->pf : NULL, s->result_format);
    } else {
        ok = PQsendQueryParams(c->pg, q->sql, q->nparams, NULL, pv, NULL, NULL, 0);
    }
    if (ok == 1)
        return;
broken:
    set_err(c, PQerrorMessage(c->pg));
    c->broken = true;
    petrel_turn_work_add(&c->pool->turn);
}

/* Put batch b on connection c: its queries go out, then its Sync. */
static void batch_attach(pgconn_t *c, pgbatch_t *b)
{
    b->conn = c;
    b->state = B_SENT;
    b->exposed = c->cancel_out > 0 || petrel_loop_now_ms() < c->cancel_until;
    list_append(&c->sent, &b->node);
    c->nq += b->nq;
    b->cur = b->first;
    for (pgq_t *q = b->first; q; q = q->next)
        send_q(c, q);
    b->cur_prep = b->first ? b->first->prep : false;
    send_sync(c);
}

/* The ready connection with the fewest queries in flight, under the depth. */
static pgconn_t *pick(petrel_pg_t *p)
{
    pgconn_t *best = NULL;
    for (unsigned i = 0; i < p->o.connections; i++) {
        pgconn_t *c = &p->conns[i];
        if (c->state == C_READY && !c->broken && c->nq < p->o.depth &&
            (best == NULL || c->nq < best->nq))
            best = c;
    }
    return best;
}

/* Queued batches go to connections with room. */
static void dispatch(petrel_pg_t *p)
{
    while (!list_empty(&p->queue)) {
        pgconn_t *c = pick(p);
        if (c == NULL)
            return;
        pgbatch_t *b = container_of(p->queue.next, pgbatch_t, node);
        list_unlink(&b->node);
        p->queued -= b->nq;
        batch_attach(c, b);
    }
}

/* ------------------------------------------------------------------------ */
/* Results                                                                  */

static const char *res_field(const PGresult *r, int f, const char *dflt)
{
    const char *v = r ? PQresultErrorField(r, f) : NULL;
    return v ? v : dflt;
}

/* A request still waiting for its answer: its handler holds it (also
 * during its abort callback, until the handler lets go). */
static bool req_live(const pgbatch_t *b)
{
    return b->req != NULL && petrel_req_held(b->req);
}

static void log_failure(pgbatch_t *b, const char *sqlstate, const char *msg)
{
    const char *what = "";
    char sn[80];
    if (b->failed && b->failed->stmt) {
        snprintf(sn, sizeof(sn), " (statement %.60s)", b->failed->stmt->sql);
        what = sn;
    } else if (b->failed && b->failed->sql) {
        snprintf(sn, sizeof(sn), " (%.60s)", b->failed->sql);
        what = sn;
    }
    if (req_live(b))
        petrel_log(PETREL_LOG_ERROR, "request %llu %s %s: query failed: SQLSTATE %s: %s%s",
                   (unsigned long long)b->req_id, b->req->method_name.ptr, b->req->path.ptr,
                   sqlstate, msg, what);
    else if (b->for_req)
        petrel_log(PETREL_LOG_ERROR, "request %llu: query failed: SQLSTATE %s: %s%s",
                   (unsigned long long)b->req_id, sqlstate, msg, what);
    else
        petrel_log(PETREL_LOG_ERROR, "query failed: SQLSTATE %s: %s%s", sqlstate, msg, what);
}

/*
 * Run the callbacks of batch b (unlinked from queue and connection) and
 * free it.  `status` other than PETREL_PG_OK fails every query with it
 * (lost connection, no connection); with PETREL_PG_OK each query reports
 * its own result, and all of them fail when one did.  A batch whose
 * request ended calls nobody back: its data may be gone.
 */
static void deliver(petrel_pg_t *p, pgbatch_t *b, int status, const char *sqlstate, const char *msg)
{
    b->state = B_DELIVERING;
    petrel_pg_result_t r = {status, sqlstate, msg, NULL, p};
    if (status == PETREL_PG_OK && b->failed) {
        const PGresult *fr = b->failed->res;
        r.sqlstate = res_field(fr, PG_DIAG_SQLSTATE, NULL);
        r.message = res_field(fr, PG_DIAG_MESSAGE_PRIMARY, NULL);
        if (r.sqlstate == NULL) { /* libpq's own: the connection went */
            r.sqlstate = "08006";
            r.message = fr ? PQresultErrorMessage(fr) : "connection lost";
            status = PETREL_PG_EUNAVAILABLE;
        } else if (r.message == NULL) {
            r.message = "";
        }
    }
    if (status == PETREL_PG_EUNAVAILABLE)
        p->st.unavailable += b->nq;
    else if (status == PETREL_PG_ECANCELED)
        p->st.canceled += b->nq;
    if (b->failed && status == PETREL_PG_OK) {
        p->st.errors++;
        if (!b->internal && !b->canceled) /* a cancel of ours is no error */
            log_failure(b, r.sqlstate, r.message);
    }
    for (pgq_t *q = b->first; q; q = q->next) {
        if (b->for_req && !req_live(b))
            break; /* the request ended: nobody to tell */
        if (b->canceled)
            break;
        if (status == PETREL_PG_OK) {
            if (b->failed) {
                r.status = q == b->failed ? PETREL_PG_ESQL : PETREL_PG_EABORTED;
                r.res = NULL;
            } else {
                r.status = PETREL_PG_OK;
                r.sqlstate = "00000";
                r.message = "";
                r.res = q->res;
            }
        } else {
            r.status = status;
        }
        q->cb(&r, q->data);
    }
    b_put(p, b);
}

static bool retriable(const pgbatch_t *b)
{
    /* a batch whose request ended is run again too: it still runs, only
     * nobody is called back (petrel_pg_exec) */
    if (b->internal || b->retries >= PG_MAX_RETRIES || b->canceled)
        return false;
    const char *s = res_field(b->failed->res, PG_DIAG_SQLSTATE, "");
    return strcmp(s, "40001") == 0 || strcmp(s, "40P01") == 0 ||
           (b->exposed && strcmp(s, "57014") == 0);
}

/* Is b the batch that runs on c now (the oldest one)? */
static bool running(const pgconn_t *c, const pgbatch_t *b)
{
    return !list_empty(&c->sent) && c->sent.next == &b->node;
}

/* Run b again, before anything waiting: nobody saw its results. */
static void requeue_front(petrel_pg_t *p, pgbatch_t *b)
{
    for (pgq_t *q = b->first; q; q = q->next)
        if (q->res) {
            PQclear(q->res);
            q->res = NULL;
        }
    b->failed = NULL;
    b->conn = NULL;
    b->state = B_QUEUED;
    p->st.retried++;
    p->queued += b->nq;
    b->node.next = p->queue.next;
    b->node.prev = &p->queue;
    p->queue.next->prev = &b->node;
    p->queue.next = &b->node;
}

/*
 * The Sync of the oldest batch of c arrived: its transaction is over.
 * When it failed, it was rolled back whole: it reports its error, or is
 * run again (a serialization failure, a deadlock, a stray cancel).
 */
static void segment_done(pgconn_t *c)
{
    petrel_pg_t *p = c->pool;
    pgbatch_t *b = container_of(c->sent.next, pgbatch_t, node);
    list_unlink(&b->node);
    c->nq -= b->nq;
    if (c->cancel_for == b)
        c->cancel_for = NULL;
    b->conn = NULL;
    if (b->failed && retriable(b)) {
        b->retries++;
        requeue_front(p, b);
    } else {
        deliver(p, b, PETREL_PG_OK, "00000", "");
    }
    /* the next batch belongs to a request that left: cancel it there */
    if (c->state == C_READY && c->cancel_for == NULL && !list_empty(&c->sent)) {
        pgbatch_t *h = container_of(c->sent.next, pgbatch_t, node);
        if (h->canceled)
            server_cancel(c, h);
    }
}

/* One result (or NULL, the end of one) of the oldest batch c sent. */
static void conn_result(pgconn_t *c, PGresult *r)
{
    pgbatch_t *b = container_of(c->sent.next, pgbatch_t, node);
    if (r == NULL) {
        if (b->cur == NULL)
            return; /* nothing expected: PQgetResult when idle */
        if (b->cur_prep) {
            b->cur_prep = false;
        } else {
            b->cur = b->cur->next;
            b->cur_prep = b->cur ? b->cur->prep : false;
        }
        return;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        segment_done(c);
        return;
    }
    pgq_t *q = b->cur;
    if (q == NULL) { /* more results than queries: libpq's or the server's surprise */
        PQclear(r);
        return;
    }
    bool bad = st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR;
    if (b->cur_prep) {
        if (st != PGRES_COMMAND_OK && q->stmt->idx < c->nprepared)
            c->prepared[q->stmt->idx] = 0; /* prepare it again next time */
        if (bad && b->failed == NULL) {
            b->failed = q;
            q->res = r;
            return;
        }
        PQclear(r);
        return;
    }
    if (bad && b->failed == NULL)
        b->failed = q;
    if (q->res == NULL)
        q->res = r;
    else
        PQclear(r); /* the query of a failed Prepare: aborted */
}

static void conn_read(pgconn_t *c)
{
    int ok = PQconsumeInput(c->pg);
    if (!sync_fd(c) || !ok || PQstatus(c->pg) != CONNECTION_OK) {
        conn_lost(c, PQerrorMessage(c->pg));
        return;
    }
    /* the callbacks run from here may make queries, on this connection too */
    while (c->state == C_READY && !list_empty(&c->sent) && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        pgbatch_t *rb = container_of(c->sent.next, pgbatch_t, node);
        if (r == NULL && rb->cur == NULL)
            break; /* answered so far: its Sync is still to come */
        conn_result(c, r);
    }
    if (c->state == C_READY)
        dispatch(c->pool);
}

static void conn_watch_cb(petrel_watch_t *w, int fd, int events, void *data)
{
    (void)w;
    (void)fd;
    pgconn_t *c = data;
    if (c->state == C_CONNECTING) {
        conn_poll(c);
        return;
    }
    if (c->state != C_READY)
        return;
    if (events & PETREL_WATCH_WRITE) {
        conn_flush(c);
        if (c->broken)
            return;
    }
    if (events & PETREL_WATCH_READ)
        conn_read(c);
}

/* Every batch c sent, into the empty list `into` (for the callbacks of a
 * connection that goes: they must not find them there). */
static void take_sent(pgconn_t *c, pglist_t *into)
{
    list_init(into);
    while (!list_empty(&c->sent)) {
        pglist_t *x = c->sent.next;
        list_unlink(x);
        list_append(into, x);
    }
}

/* The connection is gone: its batches fail (the database did not answer
 * them), and it is made again after a while. */
static void conn_lost(pgconn_t *c, const char *why)
{
    petrel_pg_t *p = c->pool;
    set_err(c, why);
    unsigned n = c->nq;
    pglist_t gone;
    take_sent(c, &gone);
    c->nq = 0;
    conn_drop(c); /* before the callbacks: they must not pick it */
    p->st.failures++;
    if (p->ready > 0 && !c->canceller)
        petrel_log(PETREL_LOG_WARN, "pg: connection %u lost: %s (%u queries failed)", c->idx,
                   c->err, n);
    char err[sizeof(c->err)];
    memcpy(err, c->err, sizeof(err));
    while (!list_empty(&gone)) {
        pgbatch_t *b = container_of(gone.next, pgbatch_t, node);
        list_unlink(&b->node);
        deliver(p, b, PETREL_PG_EUNAVAILABLE, "08006", err);
    }
    if (c->canceller)
        return; /* made again when a cancel needs it */
    pool_check_down(p, err);
    conn_retry_later(c);
}

/* ------------------------------------------------------------------------ */
/* Cancelling                                                               */

static void cancel_done(const petrel_pg_result_t *res, void *data)
{
    pgconn_t *c = data;
    if (c->cancel_out)
        c->cancel_out--;
    c->cancel_until = petrel_loop_now_ms() + PG_CANCEL_GRACE_MS;
    if (petrel_pg_status(res) != PETREL_PG_OK)
        petrel_log(PETREL_LOG_DEBUG, "pg: cancel on connection %u: %s", c->idx,
                   petrel_pg_message(res));
}

/* The canceller: a connection of the pool's own, for cancels only, made
 * the first time one is needed and kept (a cancel sent on a serving
 * connection would wait in its pipeline behind the very queries it is to
 * cancel). */
static pgconn_t *canceller(petrel_pg_t *p)
{
    return &p->conns[p->o.connections];
}

/* Send the cancels that wait for the canceller. */
static void cancels_send(petrel_pg_t *p)
{
    pgconn_t *x = canceller(p);
    for (unsigned i = 0; i < p->o.connections && x->state == C_READY; i++) {
        pgconn_t *c = &p->conns[i];
        if (!c->cancel_wanted)
            continue;
        c->cancel_wanted = false;
        /* still running what the cancel is for? */
        if (c->state != C_READY || c->cancel_for == NULL || !running(c, c->cancel_for))
            continue;
        pgbatch_t *b = b_get(p);
        pgq_t *q = b ? q_get(p) : NULL;
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", PQbackendPID(c->pg));
        const char *params[1] = {pid};
        if (q == NULL || q_fill(q, "SELECT pg_cancel_backend($1)", 1, params) < 0) {
            if (q)
                q_put(p, q);
            if (b)
                b_put(p, b);
            return;
        }
        q->stmt = NULL;
        q->cb = cancel_done;
        q->data = c;
        b->first = b->last = q;
        b->nq = 1;
        b->internal = true;
        c->cancel_out++;
        p->st.cancels++;
        /* a cancel that lands late hits what runs then: run that again */
        for (pglist_t *y = c->sent.next; y != &c->sent; y = y->next)
            container_of(y, pgbatch_t, node)->exposed = true;
        batch_attach(x, b);
    }
}

/* Batch b of c, running or about to, belongs to an aborted request: have
 * the server cancel what its backend runs (pg_cancel_backend(), allowed
 * for backends of the same role), from the canceller.  The transaction of
 * b fails; a batch that a cancel landing late hits is run again
 * (`exposed`). */
static void server_cancel(pgconn_t *c, pgbatch_t *b)
{
    petrel_pg_t *p = c->pool;
    if (c->cancel_for == b)
        return;
    c->cancel_for = b;
    c->cancel_wanted = true;
    pgconn_t *x = canceller(p);
    if (x->state == C_READY)
        cancels_send(p);
    else if (x->state == C_DOWN)
        conn_connect(x);
}

/* Cancel the batches of `req`: queued ones are dropped, sent ones have
 * their results dropped (and are cancelled on the server when they run),
 * and every query of them that was still to call back gets
 * PETREL_PG_ECANCELED now.  Returns the number of those queries. */
static int cancel_req(petrel_pg_t *p, petrel_req_t *req)
{
    pgbatch_t *list = NULL, **tail = &list;
    if (p->tx_open && p->tx_req == req)
        tx_close(p); /* into the queue or onto a connection: cancelled there */
    /* gather first: the callbacks may change the lists */
    for (pglist_t *x = p->queue.next; x != &p->queue;) {
        pgbatch_t *b = container_of(x, pgbatch_t, node);
        x = x->next;
        if (b->req == req && b->state == B_QUEUED) {
            list_unlink(&b->node);
            p->queued -= b->nq;
            b->state = B_CANCELING;
            b->cnext = NULL;
            *tail = b;
            tail = &b->cnext;
        }
    }
    for (unsigned i = 0; i < p->o.connections; i++) {
        pgconn_t *c = &p->conns[i];
        for (pglist_t *x = c->sent.next; x != &c->sent; x = x->next) {
            pgbatch_t *b = container_of(x, pgbatch_t, node);
            if (b->req == req && b->state == B_SENT && !b->canceled) {
                b->canceled = true;
                b->cnext = NULL;
                *tail = b;
                tail = &b->cnext;
            }
        }
    }
    int n = 0;
    petrel_pg_result_t r = {PETREL_PG_ECANCELED, "57014", "the request was aborted", NULL, p};
    for (pgbatch_t *b = list; b; b = b->cnext) {
        /* b->req turns NULL when the request ends during a callback */
        for (pgq_t *q = b->first; q && req_live(b); q = q->next) {
            q->cb(&r, q->data);
            n++;
        }
        p->st.canceled += b->nq;
    }
    for (pgbatch_t *b = list, *nb; b; b = nb) {
        nb = b->cnext;
        if (b->link)
            b->link->batch = NULL;
        b->link = NULL;
        b->req = NULL;
        if (b->state == B_CANCELING) {
            b_put(p, b);
            continue;
        }
        pgconn_t *c = b->conn;
        if (c && c->state == C_READY && running(c, b))
            server_cancel(c, b);
    }
    return n;
}

static bool pool_open(const petrel_pg_t *p)
{
    for (const pglist_t *x = pools.next; x != &pools; x = x->next)
        if (x == &p->node)
            return true;
    return false;
}

static void pg_on_abort(petrel_req_t *req, void *data)
{
    pglink_t *l = data;
    if (l->prev_cb)
        l->prev_cb(req, l->prev_data);
    if (l->pool && pool_open(l->pool))
        cancel_req(l->pool, req);
}

/* The request's arena is going: whatever its batch still does, nobody is
 * told (the data of its callbacks may be in that arena). */
static void link_gone(void *data)
{
    pglink_t *l = data;
    pgbatch_t *b = l->batch;
    if (b == NULL)
        return;
    l->batch = NULL;
    b->link = NULL;
    b->req = NULL;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */

static void turn_end(petrel_turn_work_t *pend)
{
    petrel_pg_t *p = container_of(pend, petrel_pg_t, turn);
    if (p->tx_open) /* a transaction ends with the turn at the latest */
        tx_close(p);
    for (unsigned i = 0; i <= p->o.connections; i++) {
        pgconn_t *c = &p->conns[i];
        if (c->state == C_READY && c->flush && !c->broken)
            conn_flush(c);
        if (c->state == C_READY && c->broken)
            conn_lost(c, c->err[0] ? c->err : PQerrorMessage(c->pg));
    }
    dispatch(p);
}

/* A batch b goes to the least loaded connection, or waits in the queue. */
static void batch_go(petrel_pg_t *p, pgbatch_t *b)
{
    pgconn_t *c = pick(p);
    if (c) {
        batch_attach(c, b);
    } else {
        b->state = B_QUEUED;
        list_append(&p->queue, &b->node);
        p->queued += b->nq;
    }
}

/* A new batch, tied to `req` (when not NULL) by a record in its arena. */
static pgbatch_t *batch_new(petrel_pg_t *p, petrel_req_t *req)
{
    pgbatch_t *b = b_get(p);
    if (b == NULL || req == NULL)
        return b;
    pglink_t *l = petrel_arena_alloc(req->arena, sizeof(*l), 0);
    if (l == NULL || petrel_arena_defer(req->arena, link_gone, l) < 0) {
        b_put(p, b);
        return NULL;
    }
    l->pool = p;
    l->batch = b;
    void *abort_data;
    petrel_abort_cb abort_cb = petrel_req_on_abort_get(req, &abort_data);
    if (abort_cb == pg_on_abort && ((pglink_t *)abort_data)->pool == p) {
        pglink_t *o = abort_data; /* ours already: keep what it chains */
        l->prev_cb = o->prev_cb;
        l->prev_data = o->prev_data;
    } else {
        l->prev_cb = abort_cb;
        l->prev_data = abort_data;
    }
    petrel_req_on_abort(req, pg_on_abort, l);
    b->req = req;
    b->link = l;
    b->req_id = req->id;
    b->for_req = true;
    return b;
}

/* The open transaction is complete: its batch goes out (or waits). */
static void tx_close(petrel_pg_t *p)
{
    pgbatch_t *b = p->tx;
    p->tx_open = false;
    p->tx_req = NULL;
    p->tx = NULL;
    if (b == NULL)
        return; /* no query in it */
    if (b->req == NULL && b->for_req) {
        b_put(p, b); /* its request ended meanwhile: nobody to run it for */
        return;
    }
    batch_go(p, b);
}

/* A query: text parameters `params`, or binary ones `bparams` (with a
 * statement only). */
static int submit(petrel_pg_t *p, petrel_req_t *req, const petrel_pg_stmt_t *stmt, const char *sql,
                  int n, const char *const *params, const petrel_str_t *bparams, petrel_pg_cb cb,
                  void *data)
{
    if (p == NULL || cb == NULL || (stmt == NULL && sql == NULL) || n < 0 || n > 65535 ||
        (n > 0 && params == NULL && bparams == NULL))
        return PETREL_EINVAL;
    for (int i = 0; bparams && i < n; i++)
        if (bparams[i].ptr && bparams[i].len > (size_t)INT32_MAX)
            return PETREL_EINVAL; /* libpq's lengths are ints */
    if (req && !petrel_req_waiting(req))
        return PETREL_ESTATE;
    if (p->down) {
        p->st.refused++;
        return PETREL_EIO;
    }
    bool in_tx = p->tx_open && p->tx_req == req;
    pgconn_t *c = pick(p);
    if (c == NULL && p->queued + 1 > p->o.queue) {
        p->st.refused++;
        return PETREL_ELIMIT;
    }
    pgq_t *q = q_get(p);
    if (q == NULL ||
        (bparams ? q_fill_bin(q, n, bparams) : q_fill(q, stmt ? NULL : sql, n, params)) < 0) {
        if (q)
            q_put(p, q);
        return PETREL_ENOMEM;
    }
    q->stmt = stmt;
    q->cb = cb;
    q->data = data;
    pgbatch_t *b = in_tx ? p->tx : NULL;
    if (b == NULL) {
        b = batch_new(p, req);
        if (b == NULL) {
            q_put(p, q);
            return PETREL_ENOMEM;
        }
        b->first = b->last = q;
        b->nq = 1;
    } else {
        b->last->next = q;
        b->last = q;
        b->nq++;
    }
    p->st.queries++;
    if (in_tx) { /* it waits for petrel_pg_tx_end(), then for a connection like any */
        p->tx = b;
        petrel_turn_work_add(&p->turn);
    } else if (c) {
        batch_attach(c, b);
    } else {
        b->state = B_QUEUED;
        list_append(&p->queue, &b->node);
        p->queued++;
    }
    return 0;
}

int petrel_pg_tx_begin(petrel_pg_t *pg, petrel_req_t *req)
{
    if (pg == NULL)
        return PETREL_EINVAL;
    if (req && !petrel_req_waiting(req))
        return PETREL_ESTATE;
    if (pg->tx_open)
        tx_close(pg);
    pg->tx_open = true;
    pg->tx_req = req;
    pg->tx = NULL;
    petrel_turn_work_add(&pg->turn);
    return 0;
}

int petrel_pg_tx_end(petrel_pg_t *pg)
{
    if (pg == NULL)
        return PETREL_EINVAL;
    if (!pg->tx_open)
        return PETREL_ESTATE;
    tx_close(pg);
    return 0;
}

int petrel_pg_exec(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt, int nparams,
                   const char *const *params, petrel_pg_cb cb, void *data)
{
    if (stmt == NULL)
        return PETREL_EINVAL;
    return submit(pg, req, stmt, NULL, nparams, params, NULL, cb, data);
}

int petrel_pg_exec_bin(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt,
                       int nparams, const petrel_str_t *params, petrel_pg_cb cb, void *data)
{
    if (stmt == NULL || (nparams > 0 && params == NULL))
        return PETREL_EINVAL;
    return submit(pg, req, stmt, NULL, nparams, NULL, params, cb, data);
}

int petrel_pg_query(petrel_pg_t *pg, petrel_req_t *req, const char *sql, int nparams,
                    const char *const *params, petrel_pg_cb cb, void *data)
{
    if (sql == NULL)
        return PETREL_EINVAL;
    return submit(pg, req, NULL, sql, nparams, params, NULL, cb, data);
}

int petrel_pg_cancel(petrel_pg_t *pg, petrel_req_t *req)
{
    if (pg == NULL || req == NULL)
        return 0;
    return cancel_req(pg, req);
}

petrel_pg_stmt_t *petrel_pg_prepare(petrel_pg_t *pg, const char *sql)
{
    return petrel_pg_prepare_ex(pg, sql, 0);
}

petrel_pg_stmt_t *petrel_pg_prepare_ex(petrel_pg_t *pg, const char *sql, unsigned flags)
{
    if (pg == NULL || sql == NULL || (flags & ~(unsigned)PETREL_PG_BINARY_RESULTS) != 0)
        return NULL;
    if (pg->nstmts == pg->capstmts) {
        unsigned cap = pg->capstmts ? pg->capstmts * 2 : 8;
        petrel_pg_stmt_t **a = realloc(pg->stmts, cap * sizeof(*a));
        if (a == NULL)
            return NULL;
        pg->stmts = a;
        pg->capstmts = cap;
    }
    petrel_pg_stmt_t *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->sql = strdup(sql)) == NULL) {
        free(s);
        return NULL;
    }
    s->idx = pg->nstmts;
    s->result_format = (flags & PETREL_PG_BINARY_RESULTS) ? 1 : 0;
    snprintf(s->name, sizeof(s->name), "petrel_%u", s->idx);
    pg->stmts[pg->nstmts++] = s;
    return s;
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                 */

int petrel_pg_supported(void)
{
    return 1;
}

/* The syntax of a connection string (keywords, quoting, URI): libpq's. */
static int conninfo_check(const char *ci)
{
    char *err = NULL;
    PQconninfoOption *parsed = PQconninfoParse(ci, &err);
    if (parsed == NULL) {
        size_t n = err ? strcspn(err, "\n") : 0;
        petrel_log(PETREL_LOG_ERROR, "pg: invalid connection string: %.*s", n ? (int)n : 13,
                   n ? err : "out of memory");
        PQfreemem(err);
        return PETREL_EINVAL;
    }
    PQconninfoFree(parsed);
    return 0;
}

petrel_pg_t *petrel_pg_open(const petrel_pg_opts_t *opts)
{
    if (opts == NULL || opts->connections == 0 || opts->depth == 0 || opts->reconnect_min_ms == 0 ||
        opts->reconnect_max_ms < opts->reconnect_min_ms) {
        petrel_log(PETREL_LOG_ERROR, "pg: invalid pool settings (connections and depth must be "
                                     "at least 1, reconnect_min_ms at least 1 and at most "
                                     "reconnect_max_ms)");
        return NULL;
    }
    if (petrel_loop_now_ms() == 0) { /* no loop: not in a worker */
        petrel_log(PETREL_LOG_ERROR, "pg: petrel_pg_open outside a worker (call it from a "
                                     "module's worker_init)");
        return NULL;
    }
    const char *ci = opts->conninfo ? opts->conninfo : "";
    if (conninfo_check(ci) < 0)
        return NULL;
    petrel_pg_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->o = *opts;
    p->conninfo = strdup(ci);
    p->conns = calloc(opts->connections + 1, sizeof(*p->conns));
    if (p->conninfo == NULL || p->conns == NULL) {
        free(p->conninfo);
        free(p->conns);
        free(p);
        return NULL;
    }
    p->o.conninfo = p->conninfo;
    list_init(&p->queue);
    list_init(&p->free_batches);
    petrel_turn_work_init(&p->turn, turn_end);
    list_append(&pools, &p->node);
    for (unsigned i = 0; i <= opts->connections; i++) {
        pgconn_t *c = &p->conns[i];
        c->pool = p;
        c->idx = i;
        c->fd = -1;
        c->canceller = i == opts->connections;
        list_init(&c->sent);
    }
    for (unsigned i = 0; i < opts->connections; i++)
        conn_connect(&p->conns[i]);
    return p;
}

void petrel_pg_close(petrel_pg_t *pg)
{
    if (pg == NULL)
        return;
    petrel_pg_t *p = pg;
    list_unlink(&p->node);
    petrel_turn_work_del(&p->turn);
    p->down = true; /* the callbacks below get no new queries in */
    if (p->tx) {    /* a transaction still being made: it never ran */
        pgbatch_t *b = p->tx;
        p->tx = NULL;
        p->tx_open = false;
        if (b->for_req)
            deliver(p, b, PETREL_PG_EUNAVAILABLE, "08001", "the pool was closed");
        else
            b_put(p, b);
    }
    for (unsigned i = 0; i <= p->o.connections; i++) {
        pgconn_t *c = &p->conns[i];
        pglist_t gone;
        take_sent(c, &gone);
        conn_drop(c);
        while (!list_empty(&gone)) {
            pgbatch_t *b = container_of(gone.next, pgbatch_t, node);
            list_unlink(&b->node);
            if (!b->for_req) { /* the module closes its pool: nobody to tell */
                b_put(p, b);
                continue;
            }
            deliver(p, b, PETREL_PG_EUNAVAILABLE, "08006", "the pool was closed");
        }
        free(c->prepared);
    }
    while (!list_empty(&p->queue)) {
        pgbatch_t *b = container_of(p->queue.next, pgbatch_t, node);
        list_unlink(&b->node);
        if (!b->for_req)
            b_put(p, b);
        else
            deliver(p, b, PETREL_PG_EUNAVAILABLE, "08001", "the pool was closed");
    }
    while (!list_empty(&p->free_batches)) {
        pgbatch_t *b = container_of(p->free_batches.next, pgbatch_t, node);
        list_unlink(&b->node);
        free(b);
    }
    while (p->free_q) {
        pgq_t *q = p->free_q;
        p->free_q = q->next;
        free(q->pv);
        free(q->pl);
        free(q->pf);
        free(q->buf);
        free(q);
    }
    for (unsigned i = 0; i < p->nstmts; i++) {
        free(p->stmts[i]->sql);
        free(p->stmts[i]);
    }
    free(p->stmts);
    free(p->conns);
    free(p->conninfo);
    free(p);
}

int petrel_pg_ready(const petrel_pg_t *pg)
{
    return pg ? (int)pg->ready : 0;
}

void petrel_pg_stats(const petrel_pg_t *pg, petrel_pg_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (pg == NULL)
        return;
    *st = pg->st;
    st->connections = pg->o.connections;
    st->ready = pg->ready;
    st->queued = pg->queued;
    for (unsigned i = 0; i < pg->o.connections; i++)
        st->inflight += pg->conns[i].nq;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                  */

int petrel_pg_nrows(const petrel_pg_result_t *res)
{
    return res && res->res ? PQntuples(res->res) : 0;
}

int petrel_pg_ncols(const petrel_pg_result_t *res)
{
    return res && res->res ? PQnfields(res->res) : 0;
}

const char *petrel_pg_colname(const petrel_pg_result_t *res, int col)
{
    if (res == NULL || res->res == NULL || col < 0 || col >= PQnfields(res->res))
        return NULL;
    return PQfname(res->res, col);
}

petrel_str_t petrel_pg_value(const petrel_pg_result_t *res, int row, int col)
{
    petrel_str_t v = {NULL, 0};
    if (res == NULL || res->res == NULL || row < 0 || col < 0 || row >= PQntuples(res->res) ||
        col >= PQnfields(res->res) || PQgetisnull(res->res, row, col))
        return v;
    v.ptr = PQgetvalue(res->res, row, col);
    v.len = (size_t)PQgetlength(res->res, row, col);
    return v;
}

/* The type OIDs of PostgreSQL's integers (pg_type.dat: fixed). */
#define PG_INT8OID 20
#define PG_INT2OID 21
#define PG_INT4OID 23

/* A value in binary format, read as an integer: 1 when the value is text
 * (for the caller to parse), 0 with *out set, or PETREL_EINVAL (SQL NULL,
 * out of range, a type that is not int2, int4 nor int8, or a length that
 * is not the type's). */
static int value_binary_int(const petrel_pg_result_t *res, int row, int col, int64_t *out)
{
    if (res == NULL || res->res == NULL || col < 0 || col >= PQnfields(res->res) ||
        PQfformat(res->res, col) != 1)
        return 1;
    if (row < 0 || row >= PQntuples(res->res) || PQgetisnull(res->res, row, col))
        return PETREL_EINVAL;
    const unsigned char *b = (const unsigned char *)PQgetvalue(res->res, row, col);
    int len = PQgetlength(res->res, row, col);
    Oid t = PQftype(res->res, col);
    int want = t == PG_INT2OID ? 2 : t == PG_INT4OID ? 4 : t == PG_INT8OID ? 8 : 0;
    if (want == 0 || len != want)
        return PETREL_EINVAL;
    uint64_t u = 0;
    for (int i = 0; i < len; i++)
        u = u << 8 | b[i];
    if (len < 8 && (u >> (len * 8 - 1)) & 1) /* negative: sign-extend */
        u |= ~(uint64_t)0 << (len * 8);
    *out = (int64_t)u;
    return 0;
}

uint64_t petrel_pg_affected(const petrel_pg_result_t *res)
{
    if (res == NULL || res->res == NULL)
        return 0;
    const char *s = PQcmdTuples((PGresult *)res->res);
    return s && *s ? strtoull(s, NULL, 10) : 0;
}

#else /* !HAVE_PGSQL */

static int conninfo_check(const char *ci)
{
    (void)ci;
    return 0;
}

/* Built without libpq: the API is there (modules link against it), the
 * pool is not. */

int petrel_pg_supported(void)
{
    return 0;
}

petrel_pg_t *petrel_pg_open(const petrel_pg_opts_t *opts)
{
    (void)opts;
    petrel_log(PETREL_LOG_ERROR, "pg: this petrel was built without its PostgreSQL pool "
                                 "(configure --without-pgsql, or no libpq: install the Debian "
                                 "package libpq-dev and run configure again)");
    return NULL;
}

void petrel_pg_close(petrel_pg_t *pg)
{
    (void)pg;
}

petrel_pg_stmt_t *petrel_pg_prepare(petrel_pg_t *pg, const char *sql)
{
    (void)pg;
    (void)sql;
    return NULL;
}

petrel_pg_stmt_t *petrel_pg_prepare_ex(petrel_pg_t *pg, const char *sql, unsigned flags)
{
    (void)pg, (void)sql, (void)flags;
    return NULL;
}

int petrel_pg_exec(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt, int nparams,
                   const char *const *params, petrel_pg_cb cb, void *data)
{
    (void)pg, (void)req, (void)stmt, (void)nparams, (void)params, (void)cb, (void)data;
    return PETREL_EINVAL;
}

int petrel_pg_exec_bin(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt,
                       int nparams, const petrel_str_t *params, petrel_pg_cb cb, void *data)
{
    (void)pg, (void)req, (void)stmt, (void)nparams, (void)params, (void)cb, (void)data;
    return PETREL_EINVAL;
}

int petrel_pg_query(petrel_pg_t *pg, petrel_req_t *req, const char *sql, int nparams,
                    const char *const *params, petrel_pg_cb cb, void *data)
{
    (void)pg, (void)req, (void)sql, (void)nparams, (void)params, (void)cb, (void)data;
    return PETREL_EINVAL;
}

int petrel_pg_cancel(petrel_pg_t *pg, petrel_req_t *req)
{
    (void)pg, (void)req;
    return 0;
}

int petrel_pg_tx_begin(petrel_pg_t *pg, petrel_req_t *req)
{
    (void)pg, (void)req;
    return PETREL_EINVAL;
}

int petrel_pg_tx_end(petrel_pg_t *pg)
{
    (void)pg;
    return PETREL_EINVAL;
}

int petrel_pg_ready(const petrel_pg_t *pg)
{
    (void)pg;
    return 0;
}

void petrel_pg_stats(const petrel_pg_t *pg, petrel_pg_stats_t *st)
{
    (void)pg;
    memset(st, 0, sizeof(*st));
}

int petrel_pg_nrows(const petrel_pg_result_t *res)
{
    (void)res;
    return 0;
}

int petrel_pg_ncols(const petrel_pg_result_t *res)
{
    (void)res;
    return 0;
}

const char *petrel_pg_colname(const petrel_pg_result_t *res, int col)
{
    (void)res, (void)col;
    return NULL;
}

petrel_str_t petrel_pg_value(const petrel_pg_result_t *res, int row, int col)
{
    (void)res, (void)row, (void)col;
    petrel_str_t v = {NULL, 0};
    return v;
}

uint64_t petrel_pg_affected(const petrel_pg_result_t *res)
{
    (void)res;
    return 0;
}

static int value_binary_int(const petrel_pg_result_t *res, int row, int col, int64_t *out)
{
    (void)res, (void)row, (void)col, (void)out;
    return 1;
}

#endif /* HAVE_PGSQL */

/* ------------------------------------------------------------------------ */
/* Either way                                                               */

void petrel_pg_opts_init(petrel_pg_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->conninfo = "";
    o->connections = 4;
    o->depth = 1024;
    o->queue = 8192;
    o->retry_after = 1;
    o->connect_timeout_ms = 5000;
    o->reconnect_min_ms = 100;
    o->reconnect_max_ms = 2000;
}

int petrel_pg_opts_parse(petrel_pg_opts_t *o, const char *args)
{
    static const struct {
        const char *name;
        size_t off;
        unsigned min;
    } keys[] = {
        {"connections", offsetof(petrel_pg_opts_t, connections), 1},
        {"depth", offsetof(petrel_pg_opts_t, depth), 1},
        {"queue", offsetof(petrel_pg_opts_t, queue), 0},
        {"retry_after", offsetof(petrel_pg_opts_t, retry_after), 0},
        {"connect_timeout_ms", offsetof(petrel_pg_opts_t, connect_timeout_ms), 1},
        {"reconnect_min_ms", offsetof(petrel_pg_opts_t, reconnect_min_ms), 1},
        {"reconnect_max_ms", offsetof(petrel_pg_opts_t, reconnect_max_ms), 1},
    };
    const char *s = args ? args : "";
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (strncmp(s, "pool.", 5) != 0)
            break;
        const char *k = s + 5, *eq = k;
        while (*eq && *eq != '=' && *eq != ' ' && *eq != '\t')
            eq++;
        size_t i, kl = (size_t)(eq - k);
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strlen(keys[i].name) == kl && memcmp(keys[i].name, k, kl) == 0)
                break;
        if (i == sizeof(keys) / sizeof(keys[0]) || *eq != '=') {
            petrel_log(PETREL_LOG_ERROR,
                       "pg: unknown pool setting '%.*s' (known: "
                       "pool.connections, pool.depth, pool.queue, "
                       "pool.retry_after, pool.connect_timeout_ms, "
                       "pool.reconnect_min_ms, pool.reconnect_max_ms)",
                       (int)(eq - s), s);
            return PETREL_EINVAL;
        }
        char *end;
        errno = 0;
        unsigned long v = strtoul(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ' ' && *end != '\t') || errno || eq[1] == '-' ||
            v > 1000000000UL || v < keys[i].min) {
            petrel_log(PETREL_LOG_ERROR,
                       "pg: pool.%.*s: '%.*s' is not a number from %u to "
                       "1000000000",
                       (int)kl, k, (int)(strcspn(eq + 1, " \t")), eq + 1, keys[i].min);
            return PETREL_EINVAL;
        }
        *(unsigned *)((char *)o + keys[i].off) = (unsigned)v;
        s = end;
    }
    o->conninfo = s;
    return conninfo_check(s);
}

int petrel_pg_status(const petrel_pg_result_t *res)
{
    return res ? res->status : PETREL_PG_EUNAVAILABLE;
}

const char *petrel_pg_sqlstate(const petrel_pg_result_t *res)
{
    return res && res->sqlstate ? res->sqlstate : "08006";
}

const char *petrel_pg_message(const petrel_pg_result_t *res)
{
    return res && res->message ? res->message : "";
}

int petrel_pg_value_int(const petrel_pg_result_t *res, int row, int col, int64_t *out)
{
    int rc = value_binary_int(res, row, col, out);
    if (rc <= 0)
        return rc;
    petrel_str_t v = petrel_pg_value(res, row, col);
    if (v.ptr == NULL || v.len == 0)
        return PETREL_EINVAL;
    const char *s = v.ptr, *e = v.ptr + v.len;
    bool neg = *s == '-';
    if (neg || *s == '+')
        s++;
    if (s == e)
        return PETREL_EINVAL;
    uint64_t x = 0;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9')
            return PETREL_EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return PETREL_EINVAL;
        x = x * 10 + d;
    }
    if (x > (uint64_t)INT64_MAX + (neg ? 1 : 0))
        return PETREL_EINVAL;
    *out = neg ? (int64_t)(0 - x) : (int64_t)x;
    return 0;
}

int petrel_pg_value_int4(const petrel_pg_result_t *res, int row, int col, int32_t *out)
{
    int64_t v;
    if (petrel_pg_value_int(res, row, col, &v) < 0 || v < INT32_MIN || v > INT32_MAX)
        return PETREL_EINVAL;
    *out = (int32_t)v;
    return 0;
}

static unsigned retry_after_of(const petrel_pg_t *pg);

/* 503 with Retry-After: the database, not the request, is the trouble. */
static int send_503(petrel_req_t *req, unsigned secs)
{
    char v[16];
    snprintf(v, sizeof(v), "%u", secs);
    petrel_resp_header(req, "Retry-After", v);
    return petrel_send_status(req, 503);
}

int petrel_pg_send_error(petrel_req_t *req, const petrel_pg_result_t *res)
{
    if (res == NULL)
        return PETREL_EINVAL;
    const char *s = petrel_pg_sqlstate(res);
    /* 08P01 for a query the server refused (a binary value too short for
     * its type) is the query's fault: the connection is fine */
    bool refused = res->status == PETREL_PG_ESQL && strcmp(s, "08P01") == 0;
    bool unavailable = res->status == PETREL_PG_EUNAVAILABLE ||
                       res->status == PETREL_PG_ECANCELED ||
                       (strncmp(s, "08", 2) == 0 && !refused) || strncmp(s, "53", 2) == 0 ||
                       strncmp(s, "57P0", 4) == 0;
    if (unavailable)
        return send_503(req, retry_after_of(res->pool));
    return petrel_send_status(req, 500);
}

int petrel_pg_send_refused(petrel_pg_t *pg, petrel_req_t *req, int rc)
{
    if (rc != PETREL_EIO && rc != PETREL_ELIMIT)
        return rc;
    return send_503(req, retry_after_of(pg));
}

static unsigned retry_after_of(const petrel_pg_t *pg)
{
#ifdef HAVE_PGSQL
    return pg ? pg->o.retry_after : 1;
#else
    (void)pg;
    return 1;
#endif
}
