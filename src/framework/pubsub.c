/*
 * pubsub.c -- publish/subscribe for WebSocket connections (petrel.h:
 * petrel_ws_subscribe, petrel_publish_text; the design is doc/pubsub.md).
 *
 * In each worker, a hash table of topics; a topic holds an array of its
 * subscribers, a WebSocket the list of its topics, each entry knowing its
 * place in the other so that either side removes in O(1).  A publish
 *   1. frames the message once (petrel__ws_msg_init: compressed at most
 *      once per window size) and queues it on every local subscriber -- a
 *      copy into each connection's output queue, written at the end of the
 *      loop turn; a subscriber past its send limit is dropped or closed by
 *      --ws-send-overflow and never holds up the others;
 *   2. appends one record to this worker's shared-memory ring (ring.c), which
 *      every other worker reads when woken, delivering it to its own
 *      subscribers the same way;
 *   3. with --pubsub-redis, publishes it to the topic's Redis channel
 *      (redis.c), from which the workers of the other instances deliver it.
 * Every subscriber gets each message once: a worker delivers what it
 * publishes itself, what it reads from the other workers' rings, and what
 * Redis brings from other instances (its own instance's messages carry its
 * identifier and are skipped).  The order of one publisher's messages is
 * kept on each path (a ring is read in order, a Redis connection delivers
 * in order).
 *
 * Memory: topics and subscription entries are malloc'ed when a WebSocket
 * subscribes; a message costs no heap call (its frame is on the stack, the
 * compressed forms in per-worker buffers, the copies in the connections'
 * pool chunks, the ring record in shared memory, a record read into one
 * per-worker buffer).
 */
#include "framework/pubsub.h"
#include "runtime/options.h"

#include "runtime/loop.h"
#include "petrel.h"
#include "runtime/ring.h"
#include "runtime/syntax.h"
#include "protocols/ws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Records of one ring read per wake-up before the loop serves others. */
#define RING_BATCH 4096

typedef struct topic topic_t;

/* A subscriber in its topic's array, and the topic in its WebSocket's list:
 * each names the other's index. */
typedef struct tsub {
    petrel_ws_t *ws;
    uint32_t j; /* index in the WebSocket's list */
} tsub_t;

typedef struct wsub {
    topic_t *t;
    uint32_t i; /* index in the topic's array */
} wsub_t;

/* The bridge to other instances (petrel_pubsub_use_bridge()), or NULL. */
static const petrel_pubsub_bridge_t *bridge;

void petrel_pubsub_use_bridge(const petrel_pubsub_bridge_t *b)
{
    bridge = b;
}

int petrel__pubsub_bridge_config(const char *spec, const char *prefix, char *err, size_t errlen)
{
    if (bridge == NULL) {
        snprintf(err, errlen,
                 "--pubsub-redis: this petrel has no Redis bridge (libpetrel-redis is built "
                 "when configure finds hiredis: install the Debian package libhiredis-dev and "
                 "run configure again)");
        return PETREL_EINVAL;
    }
    return bridge->config(spec, prefix, err, errlen);
}

static bool bridge_on(void)
{
    return bridge && bridge->on();
}

/* The topics of a WebSocket (*petrel__ws_pubsub(ws)). */
typedef struct wsubs {
    uint32_t n, cap;
    wsub_t e[];
} wsubs_t;

struct topic {
    topic_t *next; /* hash chain */
    uint64_t hash;
    tsub_t *subs;
    uint32_t n, cap; /* entries of subs, holes included */
    uint32_t live;   /* subscribers */
    uint32_t holes;  /* entries emptied while a delivery walked the array */
    uint32_t walking;
    uint32_t len;
    char name[]; /* NUL-terminated */
};

/* Set in the master, inherited by the workers. */
static petrel__rings_t *rings;
static int next_ring = -1; /* the ring of the worker being forked */
static uint64_t instance;  /* this instance, in the messages it sends to Redis */

/* Per worker process (doc/architecture.md, "Processes"). */
static struct {
    bool ready;
    bool writing; /* publishing to the other workers (until a drain) */
    int ring;     /* ours, or -1 */
    size_t max_topic, max_message, max_subscriptions, max_subscribers;
    uint64_t key[2]; /* SipHash key */
    topic_t **buckets;
    size_t nbuckets, ntopics, live_topics, subscriptions;
    petrel__ring_cursor_t *cursors;
    uint8_t *rbuf; /* a record read from a ring */
    size_t rbuf_cap;
    petrel__io_t io;        /* our ring's eventfd */
    petrel__pending_t wake; /* end of a turn that wrote: wake the others */
    uint64_t lost_logged_at;
    petrel_pubsub_stats_t st;
} ps = {.ring = -1};

/* ------------------------------------------------------------------------ */
/* SipHash-1-3 (Aumasson and Bernstein) with a per-worker random key: topic */
/* names may come from clients, so the table must not be made to collide.   */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t siphash13(const uint8_t *p, size_t n, const uint64_t k[2])
{
    uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
    uint64_t b = (uint64_t)n << 56;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m;
        memcpy(&m, p + i, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t k2 = 0; i + k2 < n; k2++)
        b |= (uint64_t)p[i + k2] << (8 * k2);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------------ */
/* Topics                                                                   */

/* A topic name: 1 to --pubsub-max-topic-size bytes of UTF-8, no control
 * characters.  0 with its length in *len, PETREL_EINVAL, or PETREL_ELIMIT. */
static int topic_check(const char *topic, size_t *len)
{
    if (topic == NULL)
        return PETREL_EINVAL;
    size_t n = strnlen(topic, ps.max_topic + 1);
    if (n == 0)
        return PETREL_EINVAL;
    if (n > ps.max_topic)
        return PETREL_ELIMIT;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)topic[i] < 0x20 || topic[i] == 0x7f)
            return PETREL_EINVAL;
    uint32_t st = 0;
    if (petrel__utf8_scan(&st, topic, n) != n || st != 0)
        return PETREL_EINVAL;
    *len = n;
    return 0;
}

static topic_t *topic_find(const char *name, size_t len, uint64_t h)
{
    for (topic_t *t = ps.buckets[h & (ps.nbuckets - 1)]; t; t = t->next)
        if (t->hash == h && t->len == len && memcmp(t->name, name, len) == 0)
            return t;
    return NULL;
}

static void table_grow(void)
{
    size_t nb = ps.nbuckets * 2;
    topic_t **b = calloc(nb, sizeof(*b));
    if (b == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < ps.nbuckets; i++)
        for (topic_t *t = ps.buckets[i], *next; t; t = next) {
            next = t->next;
            t->next = b[t->hash & (nb - 1)];
            b[t->hash & (nb - 1)] = t;
        }
    free(ps.buckets);
    ps.buckets = b;
    ps.nbuckets = nb;
}

static topic_t *topic_add(const char *name, size_t len, uint64_t h)
{
    topic_t *t = calloc(1, sizeof(*t) + len + 1);
    if (t == NULL)
        return NULL;
    t->hash = h;
    t->len = (uint32_t)len;
    memcpy(t->name, name, len);
    if (ps.ntopics >= ps.nbuckets)
        table_grow();
    topic_t **b = &ps.buckets[h & (ps.nbuckets - 1)];
    t->next = *b;
    *b = t;
    ps.ntopics++;
    return t;
}

static void topic_free(topic_t *t)
{
    topic_t **p = &ps.buckets[t->hash & (ps.nbuckets - 1)];
    while (*p != t)
        p = &(*p)->next;
    *p = t->next;
    ps.ntopics--;
    free(t->subs);
    free(t);
}

/* The last subscriber left (the topic is not being walked). */
static void topic_empty(topic_t *t)
{
    if (bridge_on())
        bridge->unsubscribe(t->name, t->len);
    topic_free(t);
}

/* A delivery is over: close the holes it left. */
static void topic_compact(topic_t *t)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        tsub_t s = t->subs[i];
        if (s.ws == NULL)
            continue;
        if (k != i) {
            t->subs[k] = s;
            wsubs_t *w = *petrel__ws_pubsub(s.ws);
            w->e[s.j].i = k;
        }
        k++;
    }
    t->n = k;
    t->holes = 0;
    if (t->live == 0)
        topic_empty(t);
}

/* Remove the WebSocket's j-th subscription. */
static void sub_remove(petrel_ws_t *ws, wsubs_t *w, uint32_t j)
{
    topic_t *t = w->e[j].t;
    uint32_t i = w->e[j].i;
    /* the topic's side */
    if (t->walking) {
        t->subs[i].ws = NULL; /* the walk skips it; compacted after */
        t->holes++;
    } else {
        tsub_t last = t->subs[--t->n];
        if (i < t->n) {
            t->subs[i] = last;
            wsubs_t *lw = *petrel__ws_pubsub(last.ws);
            lw->e[last.j].i = i;
        }
    }
    /* the WebSocket's side */
    wsub_t lastw = w->e[--w->n];
    if (j < w->n) {
        w->e[j] = lastw;
        lastw.t->subs[lastw.i].j = j;
    }
    ps.subscriptions--;
    if (--t->live == 0) {
        ps.live_topics--;
        if (!t->walking)
            topic_empty(t);
    }
    (void)ws;
}

/* The WebSocket can send no more (ws.c calls this before on_close). */
static void ws_gone(petrel_ws_t *ws)
{
    wsubs_t **slot = (wsubs_t **)petrel__ws_pubsub(ws);
    wsubs_t *w = *slot;
    if (w == NULL)
        return;
    while (w->n)
        sub_remove(ws, w, w->n - 1);
    free(w);
    *slot = NULL;
}

/* ------------------------------------------------------------------------ */
/* Delivery in this worker                                                  */

static void deliver(const char *topic, size_t tlen, int binary, const void *data, size_t len)
{
    topic_t *t = topic_find(topic, tlen, siphash13((const uint8_t *)topic, tlen, ps.key));
    if (t == NULL || t->live == 0)
        return;
    petrel__ws_msg_t m;
    petrel__ws_msg_init(&m, binary, data, len);
    t->walking++;
    for (uint32_t i = 0; i < t->n; i++) {
        petrel_ws_t *ws = t->subs[i].ws;
        if (ws == NULL)
            continue;
        int rc = petrel__ws_msg_send(ws, &m);
        if (likely(rc == 0))
            ps.st.delivered++;
        else if (rc == PETREL_ELIMIT)
            ps.st.dropped++; /* --ws-send-overflow drop: this subscriber misses it */
        else if (rc == PETREL_EIO)
            ps.st.closed++; /* over its send limit: closed with 1008 */
    }
    petrel__ws_msg_done(&m);
    if (--t->walking == 0 && t->holes)
        topic_compact(t);
}

/* From the bridge: another instance's message, or another program's
 * (binary -1: text when it is UTF-8); the bridge checked its size.  Text
 * that is not UTF-8 never reaches a browser. */
static bool deliver_remote(const char *topic, size_t tlen, int binary, const void *data, size_t len)
{
    if (binary <= 0) {
        uint32_t st = 0;
        bool utf8 = petrel__utf8_scan(&st, data, len) == len && st == 0;
        if (binary == 0 && !utf8)
            return false;
        binary = !utf8;
    }
    deliver(topic, tlen, binary, data, len);
    return true;
}

static void each_topic(void (*fn)(const char *topic, size_t tlen, void *arg), void *arg)
{
    for (size_t b = 0; b < ps.nbuckets; b++)
        for (topic_t *t = ps.buckets[b]; t; t = t->next)
            if (t->live)
                fn(t->name, t->len, arg);
}

static const petrel__bridge_peer_t bridge_peer = {deliver_remote, each_topic};

/* ------------------------------------------------------------------------ */
/* The other workers: a record is [flags][0][topic length, 2 bytes][topic]  */
/* [message].                                                               */

enum { REC_BINARY = 1 };

static void on_wake(petrel__pending_t *p)
{
    (void)p;
    if (ps.writing)
        petrel__rings_wake(rings, ps.ring);
}

static void ring_publish(const char *topic, size_t tlen, int binary, const void *data, size_t len)
{
    uint8_t h[4] = {binary ? REC_BINARY : 0, 0, (uint8_t)tlen, (uint8_t)(tlen >> 8)};
    struct iovec iov[3] = {{h, 4}, {(void *)topic, tlen}, {(void *)data, len}};
    if (petrel__ring_put(rings, ps.ring, iov, 3) == 0)
        petrel__pending_add(petrel__loop, &ps.wake);
}

static void read_rings(void)
{
    unsigned n = petrel__rings_count(rings);
    bool more = false;
    for (unsigned r = 0; r < n; r++) {
        if ((int)r == ps.ring)
            continue;
        petrel__ring_cursor_t *cur = &ps.cursors[r];
        uint64_t lost = cur->lost;
        ssize_t k;
        int batch = 0;
        while ((k = petrel__ring_get(rings, (int)r, cur, ps.rbuf, ps.rbuf_cap)) >= 0) {
            const uint8_t *p = ps.rbuf;
            size_t tlen = (size_t)p[2] | (size_t)p[3] << 8;
            if ((size_t)k >= 4 && 4 + tlen <= (size_t)k) {
                ps.st.from_workers++;
                deliver((const char *)p + 4, tlen, p[0] & REC_BINARY, p + 4 + tlen,
                        (size_t)k - 4 - tlen);
            }
            if (++batch == RING_BATCH) {
                more = true; /* the rest after the others' turn */
                break;
            }
        }
        if (cur->lost > lost) {
            ps.st.lost_workers += cur->lost - lost;
            if (petrel__loop->now_ms - ps.lost_logged_at >= 1000 || ps.lost_logged_at == 0) {
                ps.lost_logged_at = petrel__loop->now_ms;
                petrel_log(PETREL_LOG_WARN,
                           "pubsub: this worker fell a whole ring behind another and missed "
                           "%llu of its messages (%llu so far; see --pubsub-ring-size)",
                           (unsigned long long)(cur->lost - lost),
                           (unsigned long long)ps.st.lost_workers);
            }
        }
    }
    if (more) {
        uint64_t one = 1;
        ssize_t w = write(petrel__rings_fd(rings, ps.ring), &one, sizeof(one));
        (void)w;
    }
}

static void on_ring_event(petrel__io_t *io, uint32_t events)
{
    (void)io, (void)events;
    petrel__rings_woken(rings, ps.ring);
    read_rings();
}

/* ------------------------------------------------------------------------ */
/* Master                                                                   */

static size_t ring_size(const petrel__config_t *cfg)
{
    return cfg->pubsub_ring_size ? cfg->pubsub_ring_size : PETREL__PUBSUB_RING_SIZE;
}

static size_t max_record(const petrel__config_t *cfg)
{
    size_t topic =
        cfg->pubsub_max_topic_size ? cfg->pubsub_max_topic_size : PETREL__PUBSUB_MAX_TOPIC;
    size_t msg =
        cfg->pubsub_max_message_size ? cfg->pubsub_max_message_size : PETREL__PUBSUB_MAX_MESSAGE;
    return 4 + topic + msg;
}

static uint64_t random64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^
            (uint64_t)ts.tv_sec;
    }
    return v;
}

int petrel__pubsub_master_init(const petrel__config_t *cfg, int workers, char *err, size_t errlen)
{
    instance = random64();
    size_t size = ring_size(cfg);
    if (size < (64u << 10) || size > (1u << 30) || (size & (size - 1))) {
        snprintf(err, errlen, "--pubsub-ring-size %zu: a power of two from 64k to 1g", size);
        return PETREL_EINVAL;
    }
    if (max_record(cfg) > size / 4 - PETREL__RING_HDR) {
        snprintf(err, errlen,
                 "--pubsub-ring-size %zu holds records of %zu bytes at most, and a message of "
                 "--pubsub-max-message-size with a topic of --pubsub-max-topic-size needs %zu: "
                 "a ring must hold at least four of them",
                 size, size / 4 - PETREL__RING_HDR, max_record(cfg));
        return PETREL_EINVAL;
    }
    if (cfg->pubsub_redis) {
        int rc =
            petrel__pubsub_bridge_config(cfg->pubsub_redis, cfg->pubsub_redis_prefix, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (workers < 2)
        return 0; /* one worker: nothing to share (a reload's successor
                   * replaces it; the two do not serve subscribers together) */
    /* two rings per worker: a worker and its successor during a reload */
    rings = petrel__rings_new((unsigned)workers * 2, size);
    if (rings == NULL) {
        snprintf(err, errlen, "pubsub: %u shared rings of %zu bytes: %s", (unsigned)workers * 2,
                 size, strerror(errno));
        return PETREL_ENOMEM;
    }
    return 0;
}

void petrel__pubsub_before_fork(void)
{
    next_ring = rings ? petrel__rings_claim(rings) : -1;
    if (rings && next_ring < 0)
        petrel_log(PETREL_LOG_ERROR, "pubsub: no free ring for a new worker: its messages "
                                     "will not reach the other workers");
}

void petrel__pubsub_after_fork(pid_t pid)
{
    if (rings && next_ring >= 0)
        petrel__rings_hold(rings, next_ring, pid);
    next_ring = -1;
}

void petrel__pubsub_exited(pid_t pid)
{
    if (rings)
        petrel__rings_exited(rings, pid);
}

struct petrel__rings *petrel__pubsub_rings(void)
{
    return rings;
}

void petrel__pubsub_master_fini(void)
{
    petrel__rings_free(rings);
    rings = NULL;
}

/* ------------------------------------------------------------------------ */
/* Worker                                                                   */

int petrel__pubsub_worker_init(const petrel__config_t *cfg)
{
    int ring = next_ring;
    memset(&ps, 0, sizeof(ps));
    ps.ring = -1;
    ps.max_topic =
        cfg->pubsub_max_topic_size ? cfg->pubsub_max_topic_size : PETREL__PUBSUB_MAX_TOPIC;
    ps.max_message =
        cfg->pubsub_max_message_size ? cfg->pubsub_max_message_size : PETREL__PUBSUB_MAX_MESSAGE;
    ps.max_subscriptions = cfg->pubsub_max_subscriptions ? cfg->pubsub_max_subscriptions
                                                         : PETREL__PUBSUB_MAX_SUBSCRIPTIONS;
    ps.max_subscribers =
        cfg->pubsub_max_subscribers ? cfg->pubsub_max_subscribers : PETREL__PUBSUB_MAX_SUBSCRIBERS;
    if (ps.max_topic > 65535)
        ps.max_topic = 65535; /* the records' topic length field */
    ps.key[0] = random64();
    ps.key[1] = random64();
    if (instance == 0)
        instance = random64(); /* a worker without a master (embedded, tests) */
    ps.nbuckets = 64;
    ps.buckets = calloc(ps.nbuckets, sizeof(*ps.buckets));
    if (ps.buckets == NULL)
        return PETREL_ENOMEM;
    list_init(&ps.wake.node);
    ps.wake.cb = on_wake;
    if (rings && ring >= 0) {
        unsigned n = petrel__rings_count(rings);
        ps.cursors = calloc(n, sizeof(*ps.cursors));
        ps.rbuf_cap = petrel__rings_max_record(rings);
        ps.rbuf = malloc(ps.rbuf_cap);
        if (ps.cursors == NULL || ps.rbuf == NULL) {
            petrel__pubsub_worker_fini();
            return PETREL_ENOMEM;
        }
        ps.ring = ring;
        for (unsigned r = 0; r < n; r++) /* start at the end of each */
            petrel__ring_get(rings, (int)r, &ps.cursors[r], ps.rbuf, ps.rbuf_cap);
        ps.io.fd = petrel__rings_fd(rings, ring);
        ps.io.cb = on_ring_event;
        if (petrel__io_add(petrel__loop, &ps.io, EPOLLIN) < 0) {
            petrel__pubsub_worker_fini();
            return PETREL_EIO;
        }
        ps.writing = true;
    }
    ps.ready = true;
    if (cfg->pubsub_redis) {
        char err[256];
        int rc = 0;
        if (!bridge_on() &&
            (rc = petrel__pubsub_bridge_config(cfg->pubsub_redis, cfg->pubsub_redis_prefix, err,
                                               sizeof(err))) < 0)
            petrel_log(PETREL_LOG_ERROR, "%s", err);
        if (rc < 0 || (rc = bridge->start(&bridge_peer, instance, ps.max_message)) < 0) {
            petrel__pubsub_worker_fini();
            return rc;
        }
    }
    return 0;
}

void petrel__pubsub_drain(void)
{
    if (!ps.writing)
        return;
    ps.writing = false;
    list_unlink(&ps.wake.node);
    petrel__io_del(petrel__loop, &ps.io);
    /* the ring goes back to the master, for this worker's successor */
    petrel__rings_release(rings, ps.ring, getpid());
}

void petrel__pubsub_worker_fini(void)
{
    if (bridge)
        bridge->stop();
    petrel__ws_msg_fini();
    if (ps.writing) {
        petrel__io_del(petrel__loop, &ps.io);
        ps.writing = false;
    }
    list_unlink(&ps.wake.node);
    if (ps.buckets) {
        for (size_t b = 0; b < ps.nbuckets; b++)
            while (ps.buckets[b]) {
                topic_t *t = ps.buckets[b];
                /* subscribers left (a worker ending without closing them):
                 * their lists go with the topics */
                for (uint32_t i = 0; i < t->n; i++)
                    if (t->subs[i].ws) {
                        wsubs_t **slot = (wsubs_t **)petrel__ws_pubsub(t->subs[i].ws);
                        free(*slot);
                        *slot = NULL;
                    }
                ps.buckets[b] = t->next;
                free(t->subs);
                free(t);
            }
        free(ps.buckets);
    }
    free(ps.cursors);
    free(ps.rbuf);
    memset(&ps, 0, sizeof(ps));
    ps.ring = -1;
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

/* The arguments of (un)subscribing: 0 with the topic's length in *len. */
static int ws_topic(const petrel_ws_t *ws, const char *topic, size_t *len)
{
    if (ws == NULL)
        return PETREL_EINVAL;
    if (!ps.ready)
        return PETREL_ESTATE;
    return topic_check(topic, len);
}

/* The index of topic `t` in a WebSocket's list, or -1. */
static int64_t sub_index(const wsubs_t *w, const topic_t *t)
{
    if (t && w)
        for (uint32_t j = 0; j < w->n; j++)
            if (w->e[j].t == t)
                return j;
    return -1;
}

int petrel_ws_subscribe(petrel_ws_t *ws, const char *topic)
{
    size_t len;
    int rc = ws_topic(ws, topic, &len);
    if (rc < 0)
        return rc;
    if (!petrel__ws_open(ws))
        return PETREL_ESTATE;
    uint64_t h = siphash13((const uint8_t *)topic, len, ps.key);
    topic_t *t = topic_find(topic, len, h);
    wsubs_t **slot = (wsubs_t **)petrel__ws_pubsub(ws);
    wsubs_t *w = *slot;
    if (sub_index(w, t) >= 0)
        return 0; /* subscribed already */
    if (w && w->n >= ps.max_subscriptions)
        return PETREL_ELIMIT;
    if (t && t->live >= ps.max_subscribers)
        return PETREL_ELIMIT;
    /* room on both sides first: nothing to undo after */
    if (w == NULL || w->n == w->cap) {
        uint32_t cap = w ? w->cap * 2 : 4;
        if (cap > ps.max_subscriptions)
            cap = (uint32_t)ps.max_subscriptions;
        wsubs_t *nw = realloc(w, sizeof(*nw) + cap * sizeof(wsub_t));
        if (nw == NULL)
            return PETREL_ENOMEM;
        if (w == NULL) {
            nw->n = 0;
            petrel__ws_pubsub_attach(ws, ws_gone);
        }
        nw->cap = cap;
        *slot = w = nw;
        /* the topics' entries name indices, not addresses: nothing moves */
    }
    if (t == NULL && (t = topic_add(topic, len, h)) == NULL)
        return PETREL_ENOMEM;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        tsub_t *ns = realloc(t->subs, cap * sizeof(*ns));
        if (ns == NULL) {
            if (t->live == 0 && !t->walking)
                topic_free(t);
            return PETREL_ENOMEM;
        }
        t->subs = ns;
        t->cap = cap;
    }
    t->subs[t->n] = (tsub_t){ws, w->n};
    w->e[w->n++] = (wsub_t){t, t->n};
    t->n++;
    ps.subscriptions++;
    if (t->live++ == 0) {
        ps.live_topics++;
        if (bridge_on())
            bridge->subscribe(t->name, t->len);
    }
    return 0;
}

int petrel_ws_unsubscribe(petrel_ws_t *ws, const char *topic)
{
    size_t len;
    int rc = ws_topic(ws, topic, &len);
    if (rc < 0)
        return rc == PETREL_ELIMIT ? PETREL_ENOTFOUND : rc;
    wsubs_t *w = *petrel__ws_pubsub(ws);
    int64_t j =
        sub_index(w, topic_find(topic, len, siphash13((const uint8_t *)topic, len, ps.key)));
    if (j < 0)
        return PETREL_ENOTFOUND;
    sub_remove(ws, w, (uint32_t)j);
    return 0;
}

static int publish(const char *topic, int binary, const void *data, size_t len)
{
    size_t tlen;
    if (!ps.ready)
        return PETREL_ESTATE;
    if (data == NULL && len)
        return PETREL_EINVAL;
    int rc = topic_check(topic, &tlen);
    if (rc < 0)
        return rc;
    if (len > ps.max_message)
        return PETREL_ELIMIT;
    if (!binary) {
        uint32_t st = 0;
        if (petrel__utf8_scan(&st, data, len) != len || st != 0)
            return PETREL_EINVAL;
    }
    if (data == NULL)
        data = "";
    deliver(topic, tlen, binary, data, len);
    if (ps.writing)
        ring_publish(topic, tlen, binary, data, len);
    if (bridge_on())
        bridge->publish(topic, tlen, binary, data, len);
    ps.st.published++;
    return 0;
}

int petrel_publish_text(const char *topic, const char *text, size_t len)
{
    return publish(topic, 0, text, len);
}

int petrel_publish_binary(const char *topic, const void *data, size_t len)
{
    return publish(topic, 1, data, len);
}

int petrel_pubsub_stats(petrel_pubsub_stats_t *st)
{
    if (st == NULL)
        return PETREL_EINVAL;
    if (!ps.ready)
        return PETREL_ESTATE;
    *st = ps.st;
    st->topics = ps.live_topics;
    st->subscriptions = ps.subscriptions;
    petrel__bridge_stats_t rs = {.connected = -1};
    if (bridge)
        bridge->get_stats(&rs);
    st->to_redis = rs.sent;
    st->from_redis = rs.received;
    st->unbridged = rs.unbridged;
    st->redis_disconnects = rs.disconnects;
    st->redis = rs.connected;
    return 0;
}

/* The options of publish/subscribe (runtime/options.h); 0 or NULL in a
 * field is its default. */
static int set_redis_prefix(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)flag, (void)ctx;
    for (const char *c = value; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return PETREL_EINVAL;
    if (strlen(value) > 127)
        return PETREL_EINVAL;
    cfg->pubsub_redis_prefix = value;
    return 0;
}

static const petrel__option_t pubsub_options[] = {
    {.name = "pubsub-max-topic-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(pubsub_max_topic_size),
     .min = 1,
     .max = 65535,
     .expect = "a size from 1 to 65535 bytes (e.g. 256)",
     .help = "longest publish/subscribe topic name (default 256)"},
    {.name = "pubsub-max-message-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(pubsub_max_message_size),
     .min = 1,
     .max = 1u << 28,
     .expect = "a size from 1 byte to 256m (e.g. 64k)",
     .help = "largest published message (default 64k)"},
    {.name = "pubsub-max-subscriptions",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(pubsub_max_subscriptions),
     .min = 1,
     .max = 65536,
     .expect = "a number of topics from 1 to 65536",
     .help = "topics per WebSocket (default 64)"},
    {.name = "pubsub-max-subscribers",
     .value = "N",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(pubsub_max_subscribers),
     .min = 1,
     .max = 10000000,
     .expect = "a number of WebSockets from 1 to 10000000",
     .help = "WebSockets per topic, per worker (default 100000)"},
    {.name = "pubsub-ring-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(pubsub_ring_size),
     .min = 64u << 10,
     .max = 1u << 30,
     .pow2 = true,
     .expect = "a power of two from 64k to 1g (e.g. 4m)",
     .help = "shared memory per worker for the others (default 4m)"},
    {.name = "pubsub-redis",
     .value = "HOST:PORT|unix:PATH",
     .kind = PETREL__OPT_TEXT,
     PETREL__OPT_FIELD(pubsub_redis),
     .help = "publish/subscribe across instances through Redis\n(default: none)"},
    {.name = "pubsub-redis-prefix",
     .value = "PREFIX",
     .kind = PETREL__OPT_CALL,
     .set = set_redis_prefix,
     .expect = "up to 127 bytes without control characters",
     .help = "Redis channel of a topic: PREFIX + topic (default petrel:)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__pubsub_option_table = {"pubsub", NULL, pubsub_options};
