/*
 * cache.c -- a per-worker cache of small values by key (petrel.h,
 * "Cache"): bounded in entries, CLOCK replacement, expiry after a time to
 * live, read-through with one load per key however many wait for it,
 * invalidation, counters in /metrics.
 *
 * Everything is allocated by petrel_cache_new(): the entries, their key and
 * value bytes (key_max + value_max a slot), the hash buckets and the
 * waiter records.  A lookup, a miss, a load and an eviction allocate
 * nothing.
 *
 * Entries are numbered 0..capacity-1; the hash chains, the free list and
 * the waiter lists link by number (UINT32_MAX: none).  CLOCK: a hit sets
 * the entry's reference bit; to make room, the hand sweeps the entries,
 * taking the first expired one or the first whose bit is clear (clearing
 * the bits it passes; a new entry starts clear), and never an entry being
 * loaded or one whose waiters are being told.
 *
 * Why per worker: a worker's cache is touched only by its own loop, so it
 * needs no lock and no atomic instruction, and a loader may wait on that
 * worker's own PostgreSQL pool.  A cache in memory shared by the workers
 * would hold each value once instead of once per worker, but every lookup
 * would take a lock (or a lock-free protocol), its waiters would wait on
 * another process's load, and a worker that dies holding its lock would
 * stop them all.
 */
#include "config.h"

#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "petrel.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NONE UINT32_MAX

enum { E_FREE, E_READY, E_LOADING };

/* A pending load: the entry it fills (petrel_cache_load_t is this). */
struct petrel_cache_load {
    petrel_cache_t *cache;
    uint32_t idx;
};

typedef struct entry {
    uint32_t hnext; /* in its bucket; in the free list */
    uint32_t hash;
    uint64_t expires; /* ms of the loop's clock; 0: never */
    uint32_t klen, vlen;
    uint32_t wfirst, wlast; /* waiters of a load, in order */
    uint8_t state;
    uint8_t ref;    /* CLOCK's reference bit */
    uint8_t pinned; /* its waiters are being told: not to be taken */
    uint8_t dead;   /* invalidated while loading or pinned: out of the table,
                     * freed once its load or its waiters are done */
    struct petrel_cache_load ld;
} entry_t;

typedef struct waiter {
    uint32_t next;
    petrel_cache_cb cb;
    void *data;
} waiter_t;

struct petrel_cache {
    petrel_cache_opts_t o;
    entry_t *e;
    unsigned char *bytes; /* key_max + value_max per entry */
    size_t slot;
    uint32_t *buckets;
    uint32_t mask;
    uint32_t free; /* free entries */
    uint32_t hand; /* CLOCK */
    waiter_t *w;
    uint32_t wfree;
    uint64_t seed;
    petrel_cache_stats_t st;
};

static uint64_t now_ms(void)
{
    if (petrel__loop)
        return petrel__loop->now_ms;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* FNV-1a, seeded per cache (keys may come from clients). */
static uint32_t hash_of(const petrel_cache_t *c, const void *key, size_t len)
{
    uint64_t h = 14695981039346656037ULL ^ c->seed;
    const unsigned char *p = key;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static unsigned char *key_of(const petrel_cache_t *c, uint32_t i)
{
    return c->bytes + (size_t)i * c->slot;
}

static unsigned char *value_of(const petrel_cache_t *c, uint32_t i)
{
    return c->bytes + (size_t)i * c->slot + c->o.key_max;
}

static uint32_t find(const petrel_cache_t *c, uint32_t h, const void *key, size_t len)
{
    for (uint32_t i = c->buckets[h & c->mask]; i != NONE; i = c->e[i].hnext) {
        const entry_t *e = &c->e[i];
        if (e->hash == h && e->klen == len && memcmp(key_of(c, i), key, len) == 0)
            return i;
    }
    return NONE;
}

static void unhash(petrel_cache_t *c, uint32_t i)
{
    uint32_t *p = &c->buckets[c->e[i].hash & c->mask];
    while (*p != i)
        p = &c->e[*p].hnext;
    *p = c->e[i].hnext;
}

/* Entry i goes back to the free list (out of the table first, unless it
 * was invalidated already). */
static void drop(petrel_cache_t *c, uint32_t i)
{
    entry_t *e = &c->e[i];
    if (!e->dead)
        unhash(c, i);
    if (e->state == E_READY) {
        c->st.size--;
        petrel__gauge_add(PETREL__G_CACHE_ENTRIES, -1);
    }
    e->state = E_FREE;
    e->pinned = e->dead = e->ref = 0;
    e->hnext = c->free;
    c->free = i;
}

static bool expired(const entry_t *e, uint64_t now)
{
    return e->expires != 0 && now >= e->expires;
}

/* A free entry: from the free list, or taken by CLOCK's hand from an
 * expired or unreferenced one.  NONE when every entry is loading or
 * pinned. */
static uint32_t take(petrel_cache_t *c, uint64_t now)
{
    if (c->free != NONE) {
        uint32_t i = c->free;
        c->free = c->e[i].hnext;
        return i;
    }
    uint32_t n = c->o.capacity;
    for (uint32_t step = 0; step < 2 * n; step++) {
        uint32_t i = c->hand;
        c->hand = i + 1 == n ? 0 : i + 1;
        entry_t *e = &c->e[i];
        if (e->state != E_READY || e->pinned)
            continue;
        if (expired(e, now)) {
            c->st.expired++;
            petrel__count(PETREL__C_CACHE_EXPIRED, 1);
        } else if (e->ref) {
            e->ref = 0;
            continue;
        } else {
            c->st.evictions++;
            petrel__count(PETREL__C_CACHE_EVICTIONS, 1);
        }
        drop(c, i);
        c->free = c->e[i].hnext;
        return i;
    }
    return NONE;
}

/* Claim a free entry i for key (hash h): in the table, in `state`. */
static void claim(petrel_cache_t *c, uint32_t i, uint32_t h, const void *key, size_t len, int state)
{
    entry_t *e = &c->e[i];
    memcpy(key_of(c, i), key, len);
    e->hash = h;
    e->klen = (uint32_t)len;
    e->vlen = 0;
    e->state = (uint8_t)state;
    e->ref = 0;
    e->pinned = e->dead = 0;
    e->expires = 0;
    e->wfirst = e->wlast = NONE;
    e->ld.cache = c;
    e->ld.idx = i;
    uint32_t *b = &c->buckets[h & c->mask];
    e->hnext = *b;
    *b = i;
}

/* Entry i now holds `value`; ready for lookups. */
static void store(petrel_cache_t *c, uint32_t i, const void *value, size_t len)
{
    entry_t *e = &c->e[i];
    if (len)
        memcpy(value_of(c, i), value, len);
    e->vlen = (uint32_t)len;
    e->expires = c->o.ttl_ms ? now_ms() + c->o.ttl_ms : 0;
    if (e->state != E_READY) {
        c->st.size++;
        petrel__gauge_add(PETREL__G_CACHE_ENTRIES, 1);
    }
    e->state = E_READY;
}

/* ------------------------------------------------------------------------ */

void petrel_cache_opts_init(petrel_cache_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->capacity = 1024;
    o->key_max = 64;
    o->value_max = 256;
    o->ttl_ms = 0;
    o->waiters = 1024;
}

petrel_cache_t *petrel_cache_new(const petrel_cache_opts_t *o)
{
    if (o == NULL || o->capacity == 0 || o->capacity > PETREL_CACHE_MAX_ENTRIES ||
        o->key_max == 0 || o->key_max > PETREL_CACHE_MAX_KEY ||
        o->value_max > PETREL_CACHE_MAX_VALUE || o->waiters == 0 ||
        o->waiters > PETREL_CACHE_MAX_ENTRIES) {
        petrel_log(PETREL_LOG_ERROR,
                   "cache: invalid settings (capacity 1..%u, key_max 1..%u, value_max 0..%u, "
                   "waiters 1..%u)",
                   PETREL_CACHE_MAX_ENTRIES, PETREL_CACHE_MAX_KEY, PETREL_CACHE_MAX_VALUE,
                   PETREL_CACHE_MAX_ENTRIES);
        return NULL;
    }
    size_t slot = (size_t)o->key_max + o->value_max;
    slot = (slot + 7) & ~(size_t)7;
    if ((size_t)o->capacity > (size_t)PETREL_CACHE_MAX_BYTES / slot) {
        petrel_log(PETREL_LOG_ERROR, "cache: capacity x (key_max + value_max) is over %u MiB",
                   PETREL_CACHE_MAX_BYTES >> 20);
        return NULL;
    }
    uint32_t nb = 1;
    while (nb < o->capacity)
        nb <<= 1;
    petrel_cache_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->o = *o;
    c->slot = slot;
    c->mask = nb - 1;
    c->e = calloc(o->capacity, sizeof(*c->e));
    c->bytes = malloc(slot * o->capacity);
    c->buckets = malloc(nb * sizeof(*c->buckets));
    c->w = calloc(o->waiters, sizeof(*c->w));
    if (c->e == NULL || c->bytes == NULL || c->buckets == NULL || c->w == NULL) {
        petrel_cache_free(c);
        return NULL;
    }
    for (uint32_t i = 0; i < nb; i++)
        c->buckets[i] = NONE;
    for (uint32_t i = 0; i < o->capacity; i++)
        c->e[i].hnext = i + 1 < o->capacity ? i + 1 : NONE;
    c->free = 0;
    for (uint32_t i = 0; i < o->waiters; i++)
        c->w[i].next = i + 1 < o->waiters ? i + 1 : NONE;
    c->wfree = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->seed = ((uint64_t)(uintptr_t)c << 16) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
    return c;
}

/* Invalidate entry i while its load or its waiters are under way: out of
 * the table now (the next lookup of its key misses), freed when they are
 * done. */
static void detach(petrel_cache_t *c, uint32_t i)
{
    entry_t *e = &c->e[i];
    if (e->dead)
        return;
    unhash(c, i);
    e->dead = 1;
    if (e->state == E_READY) { /* pinned: no longer counted */
        c->st.size--;
        petrel__gauge_add(PETREL__G_CACHE_ENTRIES, -1);
        e->state = E_LOADING; /* freed by petrel_cache_loaded() after tell() */
    }
}

/* Tell the waiters of entry i (detached first: a callback may look up,
 * load or invalidate, this key too). */
static void tell(petrel_cache_t *c, uint32_t i, int status, const void *value, size_t len)
{
    entry_t *e = &c->e[i];
    uint32_t w = e->wfirst;
    e->wfirst = e->wlast = NONE;
    e->pinned = 1;
    while (w != NONE) {
        waiter_t *x = &c->w[w];
        uint32_t next = x->next;
        petrel_cache_cb cb = x->cb;
        void *data = x->data;
        x->next = c->wfree;
        c->wfree = w;
        cb(c, status, value, len, data);
        w = next;
    }
    e->pinned = 0;
}

void petrel_cache_free(petrel_cache_t *c)
{
    if (c == NULL)
        return;
    if (c->e) {
        for (uint32_t i = 0; i < c->o.capacity; i++) {
            if (c->e[i].state == E_LOADING)
                tell(c, i, PETREL_EIO, NULL, 0);
            if (c->e[i].state == E_READY)
                petrel__gauge_add(PETREL__G_CACHE_ENTRIES, -1);
        }
    }
    free(c->e);
    free(c->bytes);
    free(c->buckets);
    free(c->w);
    free(c);
}

int petrel_cache_lookup(petrel_cache_t *c, const void *key, size_t len, petrel_str_t *value)
{
    if (c == NULL || key == NULL || value == NULL || len > c->o.key_max)
        return PETREL_EINVAL;
    uint32_t i = find(c, hash_of(c, key, len), key, len);
    entry_t *e = i == NONE ? NULL : &c->e[i];
    if (e && e->state == E_READY && !expired(e, now_ms())) {
        e->ref = 1;
        c->st.hits++;
        petrel__count(PETREL__C_CACHE_HITS, 1);
        value->ptr = (const char *)value_of(c, i);
        value->len = e->vlen;
        return 0;
    }
    c->st.misses++;
    petrel__count(PETREL__C_CACHE_MISSES, 1);
    return PETREL_ENOTFOUND;
}

int petrel_cache_get(petrel_cache_t *c, const void *key, size_t len, petrel_str_t *value,
                     petrel_cache_cb cb, void *data)
{
    if (c == NULL || key == NULL || value == NULL || cb == NULL || len > c->o.key_max)
        return PETREL_EINVAL;
    if (c->o.load == NULL)
        return PETREL_ESTATE;
    uint64_t now = now_ms();
    uint32_t h = hash_of(c, key, len);
    uint32_t i = find(c, h, key, len);
    entry_t *e = i == NONE ? NULL : &c->e[i];
    /* (an entry whose waiters are being told was loaded just now) */
    if (e && e->state == E_READY && (e->pinned || !expired(e, now))) {
        e->ref = 1;
        c->st.hits++;
        petrel__count(PETREL__C_CACHE_HITS, 1);
        value->ptr = (const char *)value_of(c, i);
        value->len = e->vlen;
        return 0;
    }
    if (c->wfree == NONE)
        return PETREL_ELIMIT;
    c->st.misses++;
    petrel__count(PETREL__C_CACHE_MISSES, 1);
    if (e && e->state == E_READY) { /* expired: loaded again */
        c->st.expired++;
        petrel__count(PETREL__C_CACHE_EXPIRED, 1);
        drop(c, i);
        e = NULL;
    }
    if (e == NULL) {
        i = take(c, now);
        if (i == NONE)
            return PETREL_ELIMIT;
        claim(c, i, h, key, len, E_LOADING);
        e = &c->e[i];
        c->st.loads++;
        petrel__count(PETREL__C_CACHE_LOADS, 1);
        int rc = c->o.load(&e->ld, key_of(c, i), len, c->o.load_data);
        if (rc < 0) {
            if (e->state == E_LOADING) /* (else it said so already) */
                drop(c, i);
            return rc;
        }
        if (e->state == E_READY && !e->dead) { /* loaded at once */
            value->ptr = (const char *)value_of(c, i);
            value->len = e->vlen;
            return 0;
        }
        if (e->state != E_LOADING || e->dead) /* failed at once */
            return PETREL_EIO;
    }
    /* wait for the load of the key */
    uint32_t w = c->wfree;
    c->wfree = c->w[w].next;
    c->w[w].next = NONE;
    c->w[w].cb = cb;
    c->w[w].data = data;
    if (e->wlast == NONE)
        e->wfirst = w;
    else
        c->w[e->wlast].next = w;
    e->wlast = w;
    return PETREL_LATER;
}

void petrel_cache_loaded(petrel_cache_load_t *ld, int status, const void *value, size_t len)
{
    if (ld == NULL)
        return;
    petrel_cache_t *c = ld->cache;
    uint32_t i = ld->idx;
    entry_t *e = &c->e[i];
    if (e->state != E_LOADING || e->pinned)
        return; /* not a pending load (told twice) */
    if (status == 0 && ((value == NULL && len > 0) || len > c->o.value_max))
        status = PETREL_ELIMIT; /* not a value this cache can hold */
    if (status != 0) {
        c->st.load_failures++;
        petrel__count(PETREL__C_CACHE_LOAD_FAILURES, 1);
        tell(c, i, status < 0 ? status : PETREL_EIO, NULL, 0);
        drop(c, i);
        return;
    }
    if (e->dead) { /* invalidated while it loaded: its waiters get it, nobody else */
        tell(c, i, 0, value, len);
        drop(c, i);
        return;
    }
    store(c, i, value, len);
    tell(c, i, 0, value_of(c, i), len);
    if (e->dead) /* invalidated by a waiter */
        drop(c, i);
}

int petrel_cache_set(petrel_cache_t *c, const void *key, size_t len, const void *value, size_t vlen)
{
    if (c == NULL || key == NULL || len > c->o.key_max || (value == NULL && vlen > 0))
        return PETREL_EINVAL;
    if (vlen > c->o.value_max)
        return PETREL_ELIMIT;
    uint32_t h = hash_of(c, key, len);
    uint32_t i = find(c, h, key, len);
    if (i != NONE && (c->e[i].state == E_LOADING || c->e[i].pinned)) {
        /* a load is under way, or its waiters are being told: they get
         * theirs; this value goes into an entry of its own */
        detach(c, i);
        i = NONE;
    }
    if (i == NONE) {
        i = take(c, now_ms());
        if (i == NONE)
            return PETREL_ELIMIT;
        claim(c, i, h, key, len, E_FREE);
    }
    store(c, i, value, vlen);
    return 0;
}

int petrel_cache_del(petrel_cache_t *c, const void *key, size_t len)
{
    if (c == NULL || key == NULL || len > c->o.key_max)
        return PETREL_EINVAL;
    uint32_t i = find(c, hash_of(c, key, len), key, len);
    if (i == NONE)
        return 0;
    if (c->e[i].state == E_LOADING || c->e[i].pinned)
        detach(c, i); /* the load's waiters get its value; it is not kept */
    else
        drop(c, i);
    return 1;
}

int petrel_cache_cancel(petrel_cache_t *c, const void *key, size_t len, void *data)
{
    if (c == NULL || key == NULL || len > c->o.key_max)
        return PETREL_EINVAL;
    uint32_t i = find(c, hash_of(c, key, len), key, len);
    if (i == NONE || c->e[i].state != E_LOADING)
        return 0; /* (an invalidated load is out of the table: not found here) */
    entry_t *e = &c->e[i];
    int n = 0;
    uint32_t prev = NONE;
    for (uint32_t w = e->wfirst; w != NONE;) {
        uint32_t next = c->w[w].next;
        if (c->w[w].data == data) {
            if (prev == NONE)
                e->wfirst = next;
            else
                c->w[prev].next = next;
            if (e->wlast == w)
                e->wlast = prev;
            c->w[w].next = c->wfree;
            c->wfree = w;
            n++;
        } else {
            prev = w;
        }
        w = next;
    }
    return n;
}

void petrel_cache_clear(petrel_cache_t *c)
{
    if (c == NULL)
        return;
    for (uint32_t i = 0; i < c->o.capacity; i++) {
        entry_t *e = &c->e[i];
        if (e->dead || e->state == E_FREE)
            continue;
        if (e->state == E_LOADING || e->pinned)
            detach(c, i);
        else
            drop(c, i);
    }
}

void petrel_cache_stats(const petrel_cache_t *c, petrel_cache_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    if (c == NULL)
        return;
    *st = c->st;
    st->capacity = c->o.capacity;
    for (uint32_t i = 0; i < c->o.capacity; i++)
        st->loading += c->e[i].state == E_LOADING;
}
