/*
 * check_cache.c -- unit tests of src/framework/cache.c: settings and their
 * limits, lookups and stores, CLOCK replacement at capacity, expiry by the
 * loop's clock, read-through with one load per key and its waiters told in
 * order (never from within petrel_cache_get), failed and oversized loads,
 * invalidation during a load and from a waiter's callback, the waiter
 * limit, the counters in /metrics, and no allocation per lookup.
 */
#include "config.h"

#include "runtime/arena.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "petrel.h"

#include "check_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static petrel__loop_t L;

static void setup(void)
{
    ck_assert_int_eq(petrel__loop_init(&L), 0);
    petrel__loop = &L;
    L.now_ms = 1000000;
}

static void teardown(void)
{
    petrel__loop_fini(&L);
    petrel__loop = NULL;
}

static petrel_cache_t *make(unsigned capacity, unsigned ttl_ms, petrel_cache_loader load,
                            void *data)
{
    petrel_cache_opts_t o;
    petrel_cache_opts_init(&o);
    o.capacity = capacity;
    o.ttl_ms = ttl_ms;
    o.load = load;
    o.load_data = data;
    o.key_max = 16;
    o.value_max = 32;
    o.waiters = 8;
    petrel_cache_t *c = petrel_cache_new(&o);
    ck_assert_ptr_nonnull(c);
    return c;
}

static int set(petrel_cache_t *c, const char *k, const char *v)
{
    return petrel_cache_set(c, k, strlen(k), v, strlen(v));
}

/* The value of k, or NULL on a miss (in a static buffer). */
static const char *look(petrel_cache_t *c, const char *k)
{
    static char buf[64];
    petrel_str_t v;
    if (petrel_cache_lookup(c, k, strlen(k), &v) < 0)
        return NULL;
    snprintf(buf, sizeof(buf), "%.*s", (int)v.len, v.ptr);
    return buf;
}

/* A loader that records its loads; the test completes them. */
typedef struct loads {
    int n;
    petrel_cache_load_t *ld[8];
    char key[8][17];
    int fail_start; /* return this from the loader */
    int at_once;    /* complete within the loader */
} loads_t;

static int loader(petrel_cache_load_t *ld, const void *key, size_t len, void *data)
{
    loads_t *l = data;
    if (l->fail_start)
        return l->fail_start;
    if (l->n >= 8) /* (no ck_assert here: Check's bookkeeping allocates) */
        abort();
    l->ld[l->n] = ld;
    snprintf(l->key[l->n], sizeof(l->key[0]), "%.*s", (int)len, (const char *)key);
    l->n++;
    if (l->at_once)
        petrel_cache_loaded(ld, 0, "now", 3);
    return 0;
}

/* What a waiter was told. */
typedef struct told {
    int calls;
    int status;
    char value[64];
    int order;
} told_t;

static int told_seq;

static void on_value(petrel_cache_t *c, int status, const void *value, size_t len, void *data)
{
    (void)c;
    told_t *t = data;
    t->calls++;
    t->status = status;
    t->order = ++told_seq;
    snprintf(t->value, sizeof(t->value), "%.*s", (int)len, value ? (const char *)value : "");
}

START_TEST(test_opts)
{
    petrel_cache_opts_t o;
    petrel_cache_opts_init(&o);
    ck_assert_uint_eq(o.capacity, 1024);
    ck_assert_uint_eq(o.key_max, 64);
    ck_assert_uint_eq(o.value_max, 256);
    ck_assert_uint_eq(o.ttl_ms, 0);
    ck_assert_uint_eq(o.waiters, 1024);
    ck_assert_ptr_null(o.load);
    petrel_cache_t *c = petrel_cache_new(&o);
    ck_assert_ptr_nonnull(c);
    petrel_cache_free(c);
    /* each limit refused */
    petrel_cache_opts_t bad[6];
    for (int i = 0; i < 6; i++)
        petrel_cache_opts_init(&bad[i]);
    bad[0].capacity = 0;
    bad[1].capacity = PETREL_CACHE_MAX_ENTRIES + 1;
    bad[2].key_max = 0;
    bad[3].key_max = PETREL_CACHE_MAX_KEY + 1;
    bad[4].value_max = PETREL_CACHE_MAX_VALUE + 1;
    bad[5].waiters = 0;
    for (int i = 0; i < 6; i++)
        ck_assert_msg(petrel_cache_new(&bad[i]) == NULL, "bad settings %d taken", i);
    petrel_cache_opts_init(&o);
    o.capacity = PETREL_CACHE_MAX_ENTRIES; /* x 320 bytes: over PETREL_CACHE_MAX_BYTES */
    ck_assert_ptr_null(petrel_cache_new(&o));
    ck_assert_ptr_null(petrel_cache_new(NULL));
    petrel_cache_free(NULL);
}
END_TEST

START_TEST(test_set_lookup_del)
{
    petrel_cache_t *c = make(4, 0, NULL, NULL);
    ck_assert_ptr_null(look(c, "a"));
    ck_assert_int_eq(set(c, "a", "1"), 0);
    ck_assert_int_eq(set(c, "b", ""), 0);
    ck_assert_str_eq(look(c, "a"), "1");
    ck_assert_str_eq(look(c, "b"), "");
    ck_assert_int_eq(set(c, "a", "one"), 0); /* replaced in place */
    ck_assert_str_eq(look(c, "a"), "one");
    ck_assert_int_eq(petrel_cache_del(c, "a", 1), 1);
    ck_assert_int_eq(petrel_cache_del(c, "a", 1), 0);
    ck_assert_ptr_null(look(c, "a"));
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.capacity, 4);
    ck_assert_uint_eq(st.size, 1);
    ck_assert_uint_eq(st.hits, 3);
    ck_assert_uint_eq(st.misses, 2);
    /* bad arguments */
    char big[40];
    memset(big, 'x', sizeof(big));
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_set(c, big, 17, "v", 1), PETREL_EINVAL); /* key_max 16 */
    ck_assert_int_eq(petrel_cache_set(c, "k", 1, big, 33), PETREL_ELIMIT); /* value_max 32 */
    ck_assert_int_eq(petrel_cache_set(c, "k", 1, big, 32), 0);
    ck_assert_int_eq(petrel_cache_set(c, "k", 1, NULL, 1), PETREL_EINVAL);
    ck_assert_int_eq(petrel_cache_lookup(c, big, 17, &v), PETREL_EINVAL);
    ck_assert_int_eq(petrel_cache_lookup(NULL, "k", 1, &v), PETREL_EINVAL);
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, NULL),
                     PETREL_ESTATE); /* no loader */
    petrel_cache_clear(c);
    ck_assert_ptr_null(look(c, "b"));
    ck_assert_ptr_null(look(c, "k"));
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.size, 0);
    petrel_cache_free(c);
}
END_TEST

/* Many keys in a small cache: at most capacity held, the hot key kept. */
START_TEST(test_clock)
{
    petrel_cache_t *c = make(8, 0, NULL, NULL);
    char k[16];
    ck_assert_int_eq(set(c, "hot", "h"), 0);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        ck_assert_int_eq(set(c, k, k), 0);
        /* referenced each time, so whenever the hand comes back: kept */
        ck_assert_str_eq(look(c, "hot"), "h");
    }
    ck_assert_str_eq(look(c, "k99"), "k99");
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.size, 8);
    ck_assert_uint_eq(st.evictions, 101 - 8);
    int held = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        held += look(c, k) != NULL;
    }
    ck_assert_int_eq(held, 7);
    petrel_cache_free(c);
}
END_TEST

START_TEST(test_expiry)
{
    petrel_cache_t *c = make(4, 500, NULL, NULL);
    ck_assert_int_eq(set(c, "a", "1"), 0);
    L.now_ms += 499;
    ck_assert_str_eq(look(c, "a"), "1");
    L.now_ms += 1;
    ck_assert_ptr_null(look(c, "a")); /* 500 ms after it was stored */
    ck_assert_int_eq(set(c, "a", "2"), 0);
    L.now_ms += 300;
    ck_assert_str_eq(look(c, "a"), "2"); /* a new time to live */
    /* an expired entry is taken first to make room, before older live ones */
    ck_assert_int_eq(set(c, "b", "b"), 0);
    ck_assert_int_eq(set(c, "c", "c"), 0);
    ck_assert_int_eq(set(c, "d", "d"), 0);
    L.now_ms += 250; /* a (stored 550 ms ago) has expired; b, c, d have not */
    ck_assert_int_eq(set(c, "e", "e"), 0);
    ck_assert_str_eq(look(c, "b"), "b");
    ck_assert_str_eq(look(c, "c"), "c");
    ck_assert_str_eq(look(c, "d"), "d");
    ck_assert_str_eq(look(c, "e"), "e");
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.expired, 1);
    ck_assert_uint_eq(st.evictions, 0);
    petrel_cache_free(c);
}
END_TEST

/* Three misses of one key: one load; the waiters told in order, from
 * petrel_cache_loaded(), never from petrel_cache_get(). */
START_TEST(test_read_through)
{
    loads_t l = {0};
    petrel_cache_t *c = make(4, 0, loader, &l);
    told_t t[3] = {{0}};
    petrel_str_t v;
    told_seq = 0;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t[i]), PETREL_LATER);
    ck_assert_int_eq(l.n, 1);
    ck_assert_str_eq(l.key[0], "k");
    ck_assert_int_eq(t[0].calls + t[1].calls + t[2].calls, 0);
    ck_assert_ptr_null(look(c, "k")); /* being loaded: a miss */
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.loading, 1);
    petrel_cache_loaded(l.ld[0], 0, "val", 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(t[i].calls, 1);
        ck_assert_int_eq(t[i].status, 0);
        ck_assert_str_eq(t[i].value, "val");
        ck_assert_int_eq(t[i].order, i + 1);
    }
    petrel_cache_loaded(l.ld[0], 0, "again", 5); /* a second call: ignored */
    ck_assert_int_eq(t[0].calls, 1);
    /* now a hit: no callback, no load */
    told_t h = {0};
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &h), 0);
    ck_assert_int_eq((int)v.len, 3);
    ck_assert_int_eq(memcmp(v.ptr, "val", 3), 0);
    ck_assert_int_eq(h.calls, 0);
    ck_assert_int_eq(l.n, 1);
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.loads, 1);
    ck_assert_uint_eq(st.misses, 4); /* 3 gets, 1 lookup */
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.loading, 0);
    /* a loader that answers at once: a hit at once */
    l.at_once = 1;
    ck_assert_int_eq(petrel_cache_get(c, "n", 1, &v, on_value, &h), 0);
    ck_assert_int_eq((int)v.len, 3);
    ck_assert_int_eq(h.calls, 0);
    petrel_cache_free(c);
}
END_TEST

/* Read-through with a time to live: loaded again once expired. */
START_TEST(test_read_through_expiry)
{
    loads_t l = {0};
    petrel_cache_t *c = make(4, 1000, loader, &l);
    told_t t = {0};
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t), PETREL_LATER);
    petrel_cache_loaded(l.ld[0], 0, "v1", 2);
    L.now_ms += 999;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t), 0);
    L.now_ms += 1;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t), PETREL_LATER);
    ck_assert_int_eq(l.n, 2);
    petrel_cache_loaded(l.ld[1], 0, "v2", 2);
    ck_assert_int_eq(t.calls, 2);
    ck_assert_str_eq(t.value, "v2");
    ck_assert_str_eq(look(c, "k"), "v2");
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.expired, 1);
    ck_assert_uint_eq(st.loads, 2);
    petrel_cache_free(c);
}
END_TEST

START_TEST(test_load_failures)
{
    loads_t l = {0};
    petrel_cache_t *c = make(4, 0, loader, &l);
    told_t a = {0}, b = {0};
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &a), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &b), PETREL_LATER);
    petrel_cache_loaded(l.ld[0], PETREL_EIO, NULL, 0);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.status, PETREL_EIO);
    ck_assert_int_eq(b.status, PETREL_EIO);
    ck_assert_ptr_null(look(c, "k"));
    /* the next lookup loads again */
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &a), PETREL_LATER);
    ck_assert_int_eq(l.n, 2);
    char big[33];
    memset(big, 'x', sizeof(big));
    petrel_cache_loaded(l.ld[1], 0, big, sizeof(big)); /* over value_max */
    ck_assert_int_eq(a.calls, 2);
    ck_assert_int_eq(a.status, PETREL_ELIMIT);
    ck_assert_ptr_null(look(c, "k"));
    /* a loader that cannot start: its error, nobody waits */
    l.fail_start = PETREL_ELIMIT;
    ck_assert_int_eq(petrel_cache_get(c, "z", 1, &v, on_value, &a), PETREL_ELIMIT);
    ck_assert_int_eq(a.calls, 2);
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.load_failures, 2);
    ck_assert_uint_eq(st.loading, 0);
    ck_assert_uint_eq(st.size, 0);
    petrel_cache_free(c);
}
END_TEST

/* Invalidated during its load: the waiters get the value, it is not kept,
 * and a lookup after the invalidation loads anew. */
START_TEST(test_del_during_load)
{
    loads_t l = {0};
    petrel_cache_t *c = make(4, 0, loader, &l);
    told_t a = {0}, b = {0};
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &a), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_del(c, "k", 1), 1);
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &b), PETREL_LATER);
    ck_assert_int_eq(l.n, 2); /* a new load: the first may have read the old value */
    petrel_cache_loaded(l.ld[0], 0, "old", 3);
    ck_assert_str_eq(a.value, "old");
    ck_assert_int_eq(b.calls, 0);
    ck_assert_ptr_null(look(c, "k"));
    petrel_cache_loaded(l.ld[1], 0, "new", 3);
    ck_assert_str_eq(b.value, "new");
    ck_assert_str_eq(look(c, "k"), "new");
    /* petrel_cache_set during a load: the set value is kept */
    ck_assert_int_eq(petrel_cache_get(c, "s", 1, &v, on_value, &a), PETREL_LATER);
    ck_assert_int_eq(set(c, "s", "written"), 0);
    petrel_cache_loaded(l.ld[2], 0, "loaded", 6);
    ck_assert_str_eq(a.value, "loaded");
    ck_assert_str_eq(look(c, "s"), "written");
    petrel_cache_free(c);
}
END_TEST

/* A waiter's callback uses the cache: invalidates the key, and looks up. */
static petrel_cache_t *cb_cache;

static void on_value_del(petrel_cache_t *c, int status, const void *value, size_t len, void *data)
{
    on_value(c, status, value, len, data);
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_lookup(cb_cache, "k", 1, &v), 0); /* told: it is there */
    ck_assert_int_eq(petrel_cache_del(cb_cache, "k", 1), 1);
}

START_TEST(test_callback_uses_cache)
{
    loads_t l = {0};
    petrel_cache_t *c = cb_cache = make(2, 0, loader, &l);
    told_t a = {0}, b = {0};
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value_del, &a), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &b), PETREL_LATER);
    petrel_cache_loaded(l.ld[0], 0, "v", 1);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1); /* still told, after the invalidation */
    ck_assert_str_eq(b.value, "v");
    ck_assert_ptr_null(look(c, "k"));
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_eq(st.size, 0);
    /* every entry free again: two more keys fit */
    ck_assert_int_eq(set(c, "x", "1"), 0);
    ck_assert_int_eq(set(c, "y", "2"), 0);
    ck_assert_str_eq(look(c, "x"), "1");
    ck_assert_str_eq(look(c, "y"), "2");
    petrel_cache_free(c);
}
END_TEST

/* A waiter that stops waiting is not called back; the others are. */
START_TEST(test_cancel)
{
    loads_t l = {0};
    petrel_cache_t *c = make(4, 0, loader, &l);
    told_t t[3] = {{0}};
    petrel_str_t v;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t[i]), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_cancel(c, "k", 1, &t[1]), 1);
    ck_assert_int_eq(petrel_cache_cancel(c, "k", 1, &t[1]), 0);
    ck_assert_int_eq(petrel_cache_cancel(c, "x", 1, &t[0]), 0);
    ck_assert_int_eq(petrel_cache_cancel(c, "k", 1, &t[2]), 1); /* the last */
    ck_assert_int_eq(petrel_cache_get(c, "k", 1, &v, on_value, &t[2]), PETREL_LATER);
    petrel_cache_loaded(l.ld[0], 0, "v", 1);
    ck_assert_int_eq(t[0].calls, 1);
    ck_assert_int_eq(t[1].calls, 0);
    ck_assert_int_eq(t[2].calls, 1);
    ck_assert_int_eq(l.n, 1);
    petrel_cache_free(c);
}
END_TEST

/* The limits of waiting: waiters, and entries all being loaded. */
START_TEST(test_wait_limits)
{
    loads_t l = {0};
    petrel_cache_t *c = make(2, 0, loader, &l);
    told_t t[10] = {{0}};
    petrel_str_t v;
    ck_assert_int_eq(petrel_cache_get(c, "a", 1, &v, on_value, &t[0]), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_get(c, "b", 1, &v, on_value, &t[1]), PETREL_LATER);
    /* both entries are loading: nothing to replace */
    ck_assert_int_eq(petrel_cache_get(c, "c", 1, &v, on_value, &t[2]), PETREL_ELIMIT);
    ck_assert_int_eq(set(c, "c", "x"), PETREL_ELIMIT);
    for (int i = 2; i < 8; i++) /* 8 waiters at most */
        ck_assert_int_eq(petrel_cache_get(c, "a", 1, &v, on_value, &t[i]), PETREL_LATER);
    ck_assert_int_eq(petrel_cache_get(c, "a", 1, &v, on_value, &t[8]), PETREL_ELIMIT);
    petrel_cache_loaded(l.ld[0], 0, "A", 1);
    ck_assert_int_eq(petrel_cache_get(c, "b", 1, &v, on_value, &t[8]), PETREL_LATER);
    /* freeing the cache tells those still waiting */
    petrel_cache_free(c);
    ck_assert_int_eq(t[1].status, PETREL_EIO);
    ck_assert_int_eq(t[8].status, PETREL_EIO);
    ck_assert_int_eq(t[8].calls, 1);
    ck_assert_int_eq(t[9].calls, 0);
}
END_TEST

/* The counters reach the worker's block (/metrics), and the gauge. */
START_TEST(test_metrics)
{
    uint64_t h0 = petrel__stats->c[PETREL__C_CACHE_HITS];
    uint64_t m0 = petrel__stats->c[PETREL__C_CACHE_MISSES];
    uint64_t e0 = petrel__stats->c[PETREL__C_CACHE_EVICTIONS];
    uint64_t l0 = petrel__stats->c[PETREL__C_CACHE_LOADS];
    int64_t g0 = petrel__stats->g[PETREL__G_CACHE_ENTRIES];
    loads_t l = {0};
    petrel_cache_t *c = make(2, 0, loader, &l);
    told_t t = {0};
    petrel_str_t v;
    ck_assert_int_eq(set(c, "a", "1"), 0);
    ck_assert_int_eq(set(c, "b", "2"), 0);
    ck_assert_int_eq(set(c, "c", "3"), 0); /* evicts one */
    ck_assert_int_eq(petrel_cache_get(c, "c", 1, &v, on_value, &t), 0);
    ck_assert_int_eq(petrel_cache_get(c, "z", 1, &v, on_value, &t), PETREL_LATER);
    ck_assert_uint_eq(petrel__stats->c[PETREL__C_CACHE_HITS] - h0, 1);
    ck_assert_uint_eq(petrel__stats->c[PETREL__C_CACHE_MISSES] - m0, 1);
    ck_assert_uint_eq(petrel__stats->c[PETREL__C_CACHE_EVICTIONS] - e0, 2);
    ck_assert_uint_eq(petrel__stats->c[PETREL__C_CACHE_LOADS] - l0, 1);
    ck_assert_int_eq(petrel__stats->g[PETREL__G_CACHE_ENTRIES] - g0, 1);
    petrel_cache_loaded(l.ld[0], 0, "Z", 1);
    ck_assert_int_eq(petrel__stats->g[PETREL__G_CACHE_ENTRIES] - g0, 2);
    petrel_cache_free(c);
    ck_assert_int_eq(petrel__stats->g[PETREL__G_CACHE_ENTRIES], g0);
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    size_t len;
    char *txt = petrel__metrics_text(&a, &len);
    ck_assert_ptr_nonnull(txt);
    ck_assert_ptr_nonnull(strstr(txt, "\npetrel_cache_hits_total "));
    ck_assert_ptr_nonnull(strstr(txt, "\npetrel_cache_loads_total "));
    ck_assert_ptr_nonnull(strstr(txt, "\npetrel_cache_entries "));
    petrel__arena_clear(&a);
}
END_TEST

/* No allocation per lookup, miss, load, expiry or eviction once made
 * (the heap calls counted by check_util.h's hook). */
START_TEST(test_no_alloc)
{
    loads_t l = {0};
    petrel_cache_t *c = make(16, 100, loader, &l);
    told_t t = {0};
    petrel_str_t v;
    char k[16];
    uint64_t calls = ck_heap.calls;
    for (int round = 0; round < 1000; round++) {
        /* a few hot keys among many cold ones */
        snprintf(k, sizeof(k), "k%d", round % 3 == 0 ? round % 40 : round % 4);
        int rc = petrel_cache_get(c, k, strlen(k), &v, on_value, &t);
        if (rc == PETREL_LATER) {
            l.n = 0;
            petrel_cache_loaded(l.ld[0], 0, k, strlen(k));
        }
        L.now_ms += 7;
    }
    if (CK_HEAP_HOOK)
        ck_assert_uint_eq(ck_heap.calls - calls, 0);
    petrel_cache_stats_t st;
    petrel_cache_stats(c, &st);
    ck_assert_uint_gt(st.evictions + st.expired, 100); /* the paths ran */
    ck_assert_uint_gt(st.hits, 100);
    petrel_cache_free(c);
}
END_TEST

/* Each allocation of petrel_cache_new() failing: NULL, nothing leaked. */
START_TEST(test_failing_allocations)
{
    if (!CK_HEAP_HOOK)
        return;
    petrel_cache_opts_t o;
    petrel_cache_opts_init(&o);
    for (uint64_t n = 1; n < 20; n++) {
        int64_t live = ck_heap.live;
        ck_heap_arm(n, false);
        petrel_cache_t *c = petrel_cache_new(&o);
        ck_heap_disarm();
        if (c) {
            ck_assert_uint_ge(n, 6); /* five allocations, all failed in turn before */
            petrel_cache_free(c);
            ck_assert_int_eq(ck_heap.live, live);
            return;
        }
        ck_assert_int_eq(ck_heap.live, live);
    }
    ck_abort_msg("petrel_cache_new never succeeded");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_opts);
    tcase_add_test(tc, test_set_lookup_del);
    tcase_add_test(tc, test_clock);
    tcase_add_test(tc, test_expiry);
    tcase_add_test(tc, test_read_through);
    tcase_add_test(tc, test_read_through_expiry);
    tcase_add_test(tc, test_load_failures);
    tcase_add_test(tc, test_del_during_load);
    tcase_add_test(tc, test_callback_uses_cache);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_wait_limits);
    tcase_add_test(tc, test_metrics);
    tcase_add_test(tc, test_no_alloc);
    tcase_add_test(tc, test_failing_allocations);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run(suite());
}
