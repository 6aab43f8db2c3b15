/*
 * check_arena.c -- unit tests of src/runtime/arena.c: the chunk pool and the arena.
 *
 * Every test runs in its own process (Check's fork mode) with a fresh
 * thread-local pool (petrel__pool) and an arena A on it, made by the fixture.
 * The heap hook of check_util.h counts heap calls and injects failures; it is
 * compiled out under AddressSanitizer, where the heap counts are skipped.
 */
#include "runtime/arena.h"
#include "runtime/list.h"

#include "check_util.h"

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

/* The chunk header of arena.c: chunk data starts this far into a chunk. */
#define CHUNK_HDR ((sizeof(petrel__chunk_t) + 15) & ~(size_t)15)
#define LARGE_MIN (PETREL_CHUNK_SIZE / 4)

static petrel_arena_t A;

static void setup(void)
{
    petrel__pool_init(&petrel__pool, 256);
    petrel__arena_init(&A, &petrel__pool, 0);
}

static void teardown(void)
{
    petrel__arena_clear(&A);
    petrel__pool_fini(&petrel__pool);
}

/* Is [p, p + n) inside one of the chunks arena `a` holds? */
static bool in_chunk(const petrel_arena_t *a, const void *p, size_t n)
{
    const char *q = p;
    for (const petrel__chunk_t *c = a->chunk; c; c = c->next) {
        const char *d = (const char *)c + CHUNK_HDR;
        if (q >= d && q + n <= d + PETREL_CHUNK_SIZE)
            return true;
    }
    return false;
}

/* Allocate from A until a new chunk is its current one. */
static void start_new_chunk(void)
{
    petrel__chunk_t *c = A.chunk;
    while (A.chunk == c)
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, LARGE_MIN - 1, 1));
}

/* ------------------------------------------------------------------------ */
/* Alignment                                                                */

static void check_align(size_t align, size_t size)
{
    size_t want = align ? align : sizeof(void *);
    for (int i = 0; i < 200; i++) {
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1 + (size_t)i % 7, 1)); /* misalign */
        char *p = petrel_arena_alloc(&A, size, align);
        ck_assert_ptr_nonnull(p);
        ck_assert_msg((uintptr_t)p % want == 0, "alloc #%d of %zu bytes, align %zu: %p", i, size,
                      align, (void *)p);
        memset(p, 0xa5, size);
    }
}

/* Alignments up to 16 (the chunk data alignment), across chunk boundaries. */
START_TEST(test_alloc_align_small)
{
    static const size_t aligns[] = {0, 1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++)
        check_align(aligns[i], 1000);
}
END_TEST

/* petrel.h allows an alignment up to 64, also for the first block of a new
 * chunk (200 blocks of 1000 bytes start several chunks). */
START_TEST(test_alloc_align_64)
{
    check_align(32, 1000);
    check_align(64, 1000);
}
END_TEST

/* Large blocks (their own heap block) honour the alignment too. */
START_TEST(test_alloc_align_large)
{
    static const size_t aligns[] = {0, 8, 16, 32, 64};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++)
        for (int k = 0; k < 8; k++) {
            char *p = petrel_arena_alloc(&A, LARGE_MIN + 8 * (size_t)k, aligns[i]);
            ck_assert_ptr_nonnull(p);
            size_t want = aligns[i] ? aligns[i] : sizeof(void *);
            ck_assert_msg((uintptr_t)p % want == 0, "large block, align %zu: %p", want, (void *)p);
        }
}
END_TEST

/* The padding an alignment adds never takes a block past its chunk's end:
 * with the current position 1..63 bytes before the end, a 64-aligned block
 * goes to a new chunk, not beyond this one. */
START_TEST(test_alloc_align_stays_in_chunk)
{
    for (int round = 0; round < 4; round++) {
        start_new_chunk();
        for (size_t k = 1; k < 64; k++) {
            petrel_arena_mark_t m = petrel_arena_mark(&A);
            size_t room = (size_t)(A.end - A.pos);
            ck_assert_ptr_nonnull(petrel_arena_alloc(&A, room - k, 1));
            char *q = petrel_arena_alloc(&A, 8, 64);
            ck_assert_ptr_nonnull(q);
            ck_assert_msg(in_chunk(&A, q, 8),
                          "8 bytes at %p (align 64, %zu bytes left) are outside every chunk",
                          (void *)q, k);
            petrel_arena_reset(&A, m);
        }
    }
}
END_TEST

/* petrel_arena_new() gives memory aligned for its type, zeroed. */
START_TEST(test_new_aligned_zeroed)
{
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1, 1));
    long double *ld = petrel_arena_new(&A, long double, 3);
    ck_assert_ptr_nonnull(ld);
    ck_assert_msg((uintptr_t)ld % alignof(long double) == 0, "long double at %p", (void *)ld);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1, 1));
    uint64_t *u = petrel_arena_new(&A, uint64_t, 100);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq((uintptr_t)u % alignof(uint64_t), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(u[i], 0);
    max_align_t *mx = petrel_arena_new(&A, max_align_t, 2);
    ck_assert_ptr_nonnull(mx);
    ck_assert_uint_eq((uintptr_t)mx % alignof(max_align_t), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Mark and reset                                                           */

START_TEST(test_mark_reset_position)
{
    char *first = petrel_arena_alloc(&A, 100, 0);
    ck_assert_ptr_nonnull(first);
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    char *a = petrel_arena_alloc(&A, 200, 0);
    ck_assert_ptr_nonnull(a);
    for (int i = 0; i < 50; i++)
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1000, 0)); /* more chunks */
    ck_assert_uint_gt(A.nchunks, 1);
    petrel_arena_reset(&A, m);
    ck_assert_ptr_eq(A.chunk, m._chunk);
    ck_assert_ptr_eq(A.pos, m._pos);
    ck_assert_uint_eq(A.bytes, m._bytes);
    ck_assert_uint_eq(A.nchunks, 1);
    /* the same position again: the next block is where `a` was */
    ck_assert_ptr_eq(petrel_arena_alloc(&A, 200, 0), a);
    /* a reset to the same mark twice is harmless */
    petrel_arena_reset(&A, m);
    petrel_arena_reset(&A, m);
    ck_assert_ptr_eq(A.pos, m._pos);
}
END_TEST

/* A reset gives the chunks taken since the mark back to the pool, and the
 * next allocations take them from there (no heap call). */
START_TEST(test_reset_returns_chunks)
{
    petrel_arena_mark_t m = petrel_arena_mark(&A); /* of the empty arena */
    for (int i = 0; i < 60; i++)
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1000, 0));
    size_t n = A.nchunks;
    ck_assert_uint_ge(n, 4);
    ck_assert_uint_eq(petrel__pool.live, n);
    ck_assert_uint_eq(petrel__pool.nfree, 0);
    ck_assert_uint_eq(petrel__pool.mallocs, n);

    petrel_arena_reset(&A, m);
    ck_assert_uint_eq(A.nchunks, 0);
    ck_assert(petrel__arena_is_empty(&A));
    ck_assert_uint_eq(petrel__pool.live, 0);
    ck_assert_uint_eq(petrel__pool.nfree, n);

    for (int i = 0; i < 60; i++)
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1000, 0));
    ck_assert_uint_eq(petrel__pool.mallocs, n); /* recycled */
    ck_assert_uint_eq(petrel__pool.nfree, 0);
    ck_assert_uint_eq(petrel__pool.live, n);

    petrel_arena_stats_t st;
    petrel_arena_stats(&A, &st);
    ck_assert_uint_eq(st.chunks, n);
    ck_assert_uint_eq(st.bytes, 60 * 1000);
    ck_assert_uint_ge(st.bytes_high, 60 * 1000);
    ck_assert_uint_eq(st.pool_mallocs, n);
}
END_TEST

/* petrel_arena_stats(): "mallocs: heap calls made for this arena (chunks +
 * large)" (petrel.h); pool_mallocs: those of the pool. */
START_TEST(test_stats)
{
    petrel_arena_stats_t st;
    petrel_arena_stats(&A, &st);
    ck_assert_uint_eq(st.chunks, 0);
    ck_assert_uint_eq(st.bytes, 0);
    ck_assert_uint_eq(st.mallocs, 0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 100, 0));   /* a chunk from the heap */
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 20000, 0)); /* a large block */
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 300, 0));
    petrel_arena_stats(&A, &st);
    ck_assert_uint_eq(st.chunks, 1);
    ck_assert_uint_eq(st.bytes, 20400);
    ck_assert_uint_eq(st.bytes_high, 20400);
    ck_assert_uint_eq(st.pool_mallocs, 1);
    ck_assert_uint_eq(st.mallocs, 2);
    petrel_arena_reset(&A, m);
    petrel_arena_stats(&A, &st);
    ck_assert_uint_eq(st.bytes, 20100);
    ck_assert_uint_eq(st.bytes_high, 20400);
}
END_TEST

/* The pool keeps at most max_free chunks; the rest go back to the heap.
 * (No Check call between the heap counts: Check allocates.) */
START_TEST(test_pool_max_free)
{
    petrel__arena_clear(&A);
    petrel__pool_fini(&petrel__pool);
    petrel__pool_init(&petrel__pool, 2);
    int bad = 0;
    int64_t live0 = ck_heap.live;
    for (int i = 0; i < 60; i++)
        if (petrel_arena_alloc(&A, 1000, 0) == NULL)
            bad++;
    size_t n = A.nchunks;
    int64_t live1 = ck_heap.live;
    petrel__arena_clear(&A);
    int64_t live2 = ck_heap.live;
    size_t pool_live = petrel__pool.live, nfree = petrel__pool.nfree;
    petrel__pool_fini(&petrel__pool);
    int64_t live3 = ck_heap.live;

    ck_assert_int_eq(bad, 0);
    ck_assert_uint_gt(n, 2);
    ck_assert_uint_eq(pool_live, 0);
    ck_assert_uint_eq(nfree, 2);
    ck_assert_uint_eq(petrel__pool.nfree, 0);
    ck_assert_ptr_null(petrel__pool.free);
    if (CK_HEAP_HOOK) {
        ck_assert_int_eq(live1 - live0, (int64_t)n);
        ck_assert_int_eq(live2 - live0, 2);
        ck_assert_int_eq(live3 - live0, 0);
    }
}
END_TEST

/* petrel__chunk_get/put: the raw pool interface the connections use. */
START_TEST(test_pool_chunks)
{
    void *c1 = petrel__chunk_get(&petrel__pool);
    void *c2 = petrel__chunk_get(&petrel__pool);
    ck_assert_ptr_nonnull(c1);
    ck_assert_ptr_nonnull(c2);
    ck_assert_uint_eq((uintptr_t)c1 % 16, 0);
    memset(c1, 1, PETREL_CHUNK_SIZE);
    memset(c2, 2, PETREL_CHUNK_SIZE);
    ck_assert_uint_eq(petrel__pool.live, 2);
    ck_assert_uint_eq(petrel__pool.mallocs, 2);
    petrel__chunk_put(&petrel__pool, c1);
    petrel__chunk_put(&petrel__pool, NULL); /* no-op */
    ck_assert_uint_eq(petrel__pool.live, 1);
    ck_assert_uint_eq(petrel__pool.nfree, 1);
    ck_assert_ptr_eq(petrel__chunk_get(&petrel__pool), c1); /* recycled */
    ck_assert_uint_eq(petrel__pool.mallocs, 2);
    petrel__chunk_put(&petrel__pool, c1);
    petrel__chunk_put(&petrel__pool, c2);
    ck_assert_uint_eq(petrel__pool.live, 0);
    ck_assert_uint_eq(petrel__pool.nfree, 2);
}
END_TEST

/* A block of LARGE_MIN (4 KiB) bytes or more that does not fit the current
 * chunk is a heap block of its own (it does not waste a new chunk), freed by
 * the reset that unwinds it; a smaller one starts a new chunk. */
START_TEST(test_large_blocks)
{
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 10, 0));
    void *l0 = petrel_arena_alloc(&A, 20000, 0); /* bigger than a chunk */
    ck_assert_ptr_nonnull(l0);
    void *large0 = A.large;
    ck_assert_ptr_nonnull(large0);
    ck_assert(!in_chunk(&A, l0, 1));
    ck_assert_uint_eq(A.nchunks, 1);

    /* fill the chunk to 100 bytes from its end */
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, (size_t)(A.end - A.pos) - 100, 1));
    char *below = petrel_arena_alloc(&A, LARGE_MIN - 1, 1); /* a new chunk */
    ck_assert_ptr_nonnull(below);
    ck_assert_uint_eq(A.nchunks, 2);
    ck_assert(in_chunk(&A, below, LARGE_MIN - 1));
    ck_assert_ptr_eq(A.large, large0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, (size_t)(A.end - A.pos) - 100, 1));
    size_t bytes = A.bytes;

    int bad = 0;
    int64_t live0 = ck_heap.live;
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    char *b1 = petrel_arena_alloc(&A, 100000, 0);
    char *b2 = petrel_arena_alloc(&A, LARGE_MIN, 0); /* does not fit the 100 bytes left */
    if (b1 == NULL || b2 == NULL)
        bad++;
    else {
        memset(b1, 1, 100000);
        memset(b2, 2, LARGE_MIN);
    }
    size_t nchunks = A.nchunks, bytes1 = A.bytes;
    bool b2_in_chunk = b2 && in_chunk(&A, b2, 1);
    int64_t live1 = ck_heap.live;
    petrel_arena_reset(&A, m);
    int64_t live2 = ck_heap.live;

    ck_assert_int_eq(bad, 0);
    ck_assert(!b2_in_chunk);
    ck_assert_uint_eq(nchunks, 2);
    ck_assert_uint_eq(bytes1, bytes + 100000 + LARGE_MIN);
    ck_assert_ptr_eq(A.large, large0); /* the one before the mark stays */
    ck_assert_uint_eq(A.bytes, bytes);
    if (CK_HEAP_HOOK) {
        ck_assert_int_eq(live1 - live0, 2);
        ck_assert_int_eq(live2 - live0, 0);
    }
    petrel__arena_clear(&A);
    ck_assert_ptr_null(A.large);
    ck_assert(petrel__arena_is_empty(&A));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Cleanups                                                                 */

static char order[64];
static size_t norder;

static void record(void *p)
{
    const char *s = p; /* arena memory: cleanups run before it is released */
    order[norder++] = s[0];
    order[norder] = '\0';
}

static char *tag(char ch)
{
    char *s = petrel_arena_alloc(&A, 2, 1);
    ck_assert_ptr_nonnull(s);
    s[0] = ch;
    s[1] = '\0';
    return s;
}

/* A reset runs, newest first, exactly the cleanups registered after its
 * mark; petrel__arena_clear runs the rest. */
START_TEST(test_defer_reset_order)
{
    norder = 0;
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('1')), 0);
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('2')), 0);
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('3')), 0);
    for (int i = 0; i < 40; i++)
        ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 1000, 0)); /* a new chunk between */
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('4')), 0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 10000, 0)); /* and a large block */
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('5')), 0);
    ck_assert_uint_eq(norder, 0);

    petrel_arena_reset(&A, m);
    ck_assert_str_eq(order, "543");
    petrel_arena_reset(&A, m); /* nothing more to run */
    ck_assert_str_eq(order, "543");

    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('6')), 0);
    petrel__arena_clear(&A);
    ck_assert_str_eq(order, "543621");
    ck_assert(petrel__arena_is_empty(&A));
    ck_assert_uint_eq(petrel__pool.live, 0);
}
END_TEST

/* Nested scopes: an inner reset leaves the outer cleanups alone. */
START_TEST(test_defer_nested)
{
    norder = 0;
    petrel_arena_mark_t outer = petrel_arena_mark(&A);
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('a')), 0);
    petrel_arena_mark_t inner = petrel_arena_mark(&A);
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('b')), 0);
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('c')), 0);
    petrel_arena_reset(&A, inner);
    ck_assert_str_eq(order, "cb");
    ck_assert_int_eq(petrel_arena_defer(&A, record, tag('d')), 0);
    petrel_arena_reset(&A, outer);
    ck_assert_str_eq(order, "cbda");
    ck_assert(petrel__arena_is_empty(&A));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Limits and sizes                                                         */

static int limit_cleanups;
static void count_cleanup(void *p)
{
    (void)p;
    limit_cleanups++;
}

START_TEST(test_limit)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 1000);
    petrel_arena_mark_t m = petrel_arena_mark(&a);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&a, 600, 0));
    ck_assert_ptr_null(petrel_arena_alloc(&a, 500, 0));
    ck_assert_ptr_nonnull(petrel_arena_alloc(&a, 400, 0)); /* exactly the limit */
    ck_assert_uint_eq(a.bytes, 1000);
    ck_assert_ptr_null(petrel_arena_alloc(&a, 1, 0));
    ck_assert_ptr_null(petrel_arena_strndup(&a, "x", 1));
    ck_assert_ptr_null(petrel_arena_printf(&a, "%d", 1));
    ck_assert_ptr_null(petrel_arena_new(&a, int, 1));
    limit_cleanups = 0;
    ck_assert_int_eq(petrel_arena_defer(&a, count_cleanup, NULL), PETREL_ENOMEM);
    ck_assert_ptr_null(petrel_arena_alloc(&a, SIZE_MAX, 0));
    ck_assert_uint_eq(a.bytes, 1000); /* failures take nothing */
    petrel_arena_reset(&a, m);
    ck_assert_uint_eq(a.bytes, 0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&a, 1000, 0));
    petrel__arena_clear(&a);
    ck_assert_int_eq(limit_cleanups, 0); /* the refused cleanup never runs */

    /* large blocks count against the limit too */
    petrel__arena_init(&a, &petrel__pool, 10000);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&a, 8000, 0));
    ck_assert_ptr_null(petrel_arena_alloc(&a, LARGE_MIN, 0));
    ck_assert_ptr_nonnull(petrel_arena_alloc(&a, 2000, 0));
    petrel__arena_clear(&a);
    ck_assert_uint_eq(petrel__pool.live, 0);
}
END_TEST

/* petrel_arena_new() checks n * sizeof(type) for overflow. */
START_TEST(test_new_overflow)
{
    ck_assert_ptr_null(petrel_arena_new(&A, uint64_t, SIZE_MAX / 8 + 1));
    ck_assert_ptr_null(petrel_arena_new(&A, uint32_t, SIZE_MAX / 2));
    ck_assert_ptr_null(petrel_arena_calloc(&A, SIZE_MAX / 3 + 1, 3));
    ck_assert_ptr_null(petrel_arena_calloc(&A, 2, SIZE_MAX / 2 + 1));
    ck_assert_uint_eq(A.bytes, 0);
    /* zero objects: not an error, and nothing to overflow */
    (void)petrel_arena_new(&A, uint64_t, 0);
    ck_assert_ptr_nonnull(petrel_arena_new(&A, uint64_t, 1));
}
END_TEST

/* A size the heap cannot hold fails cleanly, without a limit set: the size
 * of a large block's header must not wrap around. */
START_TEST(test_alloc_huge)
{
    ck_assert_ptr_null(petrel_arena_alloc(&A, SIZE_MAX, 0));
    ck_assert_ptr_null(petrel_arena_alloc(&A, SIZE_MAX - 8, 0));
    ck_assert_ptr_null(petrel_arena_new(&A, char, SIZE_MAX - 4));
    ck_assert_uint_eq(A.bytes, 0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 10, 0));
}
END_TEST

START_TEST(test_strndup_printf)
{
    char *s = petrel_arena_strndup(&A, "hello world", 5);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "hello");
    char *e = petrel_arena_strndup(&A, "", 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e, "");
    char *nul = petrel_arena_strndup(&A, "a\0b", 3); /* copies n bytes, NUL after */
    ck_assert_mem_eq(nul, "a\0b\0", 4);

    char *p = petrel_arena_printf(&A, "%d-%s-%c", 42, "x", 'y');
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p, "42-x-y");
    ck_assert_str_eq(petrel_arena_printf(&A, "%s", ""), "");

    /* longer than a chunk: a large block */
    static char big[20001];
    memset(big, 'z', sizeof(big) - 1);
    char *q = petrel_arena_printf(&A, "<%s>", big);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(strlen(q), 20002);
    ck_assert_int_eq(q[0], '<');
    ck_assert_int_eq(q[20001], '>');
    char *d = petrel_arena_strndup(&A, big, 20000);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(strlen(d), 20000);
    /* the earlier strings are intact */
    ck_assert_str_eq(s, "hello");
    ck_assert_str_eq(p, "42-x-y");
}
END_TEST

/* A request-shaped cycle (mark, small blocks over several chunks, a cleanup,
 * reset) repeated 10,000 times makes no heap call once warm.  Returns the
 * number of failed calls (no Check call inside: Check allocates). */
static int cycle(int i)
{
    int bad = 0;
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    for (int k = 0; k < 50; k++) {
        char *p = petrel_arena_alloc(&A, 900 + (size_t)(k % 5), k % 3 ? 8 : 16);
        if (p == NULL)
            bad++;
        else
            p[0] = (char)i;
    }
    if (petrel_arena_strndup(&A, "Host", 4) == NULL)
        bad++;
    if (petrel_arena_defer(&A, count_cleanup, NULL) != 0)
        bad++;
    petrel_arena_reset(&A, m);
    return bad;
}

START_TEST(test_steady_state)
{
    /* a connection-scope block below the request marks */
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 64, 0));
    limit_cleanups = 0;
    int bad = 0;
    for (int i = 0; i < 10; i++)
        bad += cycle(i);
    uint64_t pool_mallocs = petrel__pool.mallocs;
    size_t live = petrel__pool.live;
    uint64_t amallocs = A.mallocs;
    uint64_t calls = ck_heap.calls;
    for (int i = 0; i < 10000; i++)
        bad += cycle(i);
    uint64_t calls1 = ck_heap.calls;
    ck_assert_int_eq(bad, 0);
    if (CK_HEAP_HOOK)
        ck_assert_uint_eq(calls1 - calls, 0);
    ck_assert_uint_eq(petrel__pool.mallocs, pool_mallocs);
    ck_assert_uint_eq(petrel__pool.live, live);
    ck_assert_uint_eq(A.mallocs, amallocs);
    ck_assert_uint_le(petrel__pool.nfree, petrel__pool.max_free);
    ck_assert_int_eq(limit_cleanups, 10010);
}
END_TEST

/* Steady state with large blocks too: they are heap blocks of their own
 * (one heap call each, given back by the reset), and the chunks around them
 * are still recycled. */
START_TEST(test_steady_state_large)
{
    int bad = 0;
    for (int i = 0; i < 10; i++)
        bad += cycle(i);
    uint64_t pool_mallocs = petrel__pool.mallocs;
    uint64_t calls = ck_heap.calls;
    int64_t live = ck_heap.live;
    for (int i = 0; i < 10000; i++) {
        petrel_arena_mark_t m = petrel_arena_mark(&A);
        if (petrel_arena_alloc(&A, 100, 0) == NULL || petrel_arena_alloc(&A, 20000, 0) == NULL)
            bad++;
        bad += cycle(i);
        petrel_arena_reset(&A, m);
    }
    uint64_t calls1 = ck_heap.calls;
    int64_t live1 = ck_heap.live;
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(petrel__pool.mallocs, pool_mallocs);
    if (CK_HEAP_HOOK) {
        ck_assert_uint_eq(calls1 - calls, 10000); /* the large blocks */
        ck_assert_int_eq(live1, live);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A failing heap: make the N-th heap call fail, for every N                */

typedef struct scen {
    int calls;    /* arena calls made */
    int failed;   /* of them, returned NULL / PETREL_ENOMEM */
    int defers;   /* cleanups registered */
    int ran;      /* cleanups run */
    int corrupt;  /* blocks whose bytes were overwritten by another */
    int bad_text; /* strndup/printf results with the wrong text */
} scen_t;

static int scen_ran;
static void scen_cleanup(void *p)
{
    (void)p;
    scen_ran++;
}

typedef struct blk {
    unsigned char *p;
    size_t n;
} blk_t;

static blk_t blks[128];
static int nblks;

static void scen_alloc(scen_t *r, petrel_arena_t *a, size_t n, size_t align)
{
    r->calls++;
    unsigned char *p = petrel_arena_alloc(a, n, align);
    if (p == NULL) {
        r->failed++;
        return;
    }
    memset(p, nblks & 0xff, n);
    blks[nblks].p = p;
    blks[nblks].n = n;
    nblks++;
}

static void scen_defer(scen_t *r, petrel_arena_t *a)
{
    r->calls++;
    if (petrel_arena_defer(a, scen_cleanup, NULL) == 0)
        r->defers++;
    else
        r->failed++;
}

static void scen_verify(scen_t *r)
{
    for (int i = 0; i < nblks; i++)
        for (size_t k = 0; k < blks[i].n; k++)
            if (blks[i].p[k] != (unsigned char)(i & 0xff)) {
                r->corrupt++;
                break;
            }
}

/* Arena calls of every kind; no Check call inside (it may run armed). */
static void scenario(scen_t *r)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    memset(r, 0, sizeof(*r));
    nblks = 0;
    scen_ran = 0;
    petrel_arena_mark_t m0 = petrel_arena_mark(&a);
    scen_alloc(r, &a, 100, 0);
    scen_defer(r, &a);
    scen_alloc(r, &a, 5000, 0); /* large */
    r->calls++;
    char *s = petrel_arena_strndup(&a, "abc", 3);
    if (s == NULL)
        r->failed++;
    else if (strcmp(s, "abc") != 0)
        r->bad_text++;
    for (int i = 0; i < 40; i++)
        scen_alloc(r, &a, 1000, i % 2 ? 16 : 0); /* several chunks */
    r->calls++;
    char *p = petrel_arena_printf(&a, "%s-%d", "x", 7);
    if (p == NULL)
        r->failed++;
    else if (strcmp(p, "x-7") != 0)
        r->bad_text++;
    int nb = nblks;
    petrel_arena_mark_t m1 = petrel_arena_mark(&a);
    scen_alloc(r, &a, 20000, 0);
    scen_alloc(r, &a, 500, 0);
    scen_defer(r, &a);
    for (int i = 0; i < 20; i++)
        scen_alloc(r, &a, 2000, 0);
    scen_verify(r);
    petrel_arena_reset(&a, m1);
    nblks = nb;
    r->calls++;
    uint32_t *u = petrel_arena_new(&a, uint32_t, 10);
    if (u == NULL)
        r->failed++;
    else
        for (int i = 0; i < 10; i++)
            if (u[i] != 0)
                r->bad_text++;
    scen_defer(r, &a);
    scen_verify(r);
    petrel_arena_reset(&a, m0);
    nblks = 0;
    for (int i = 0; i < 30; i++)
        scen_alloc(r, &a, 3000, 0);
    scen_verify(r);
    scen_defer(r, &a);
    petrel__arena_clear(&a);
    r->ran = scen_ran;
    if (!petrel__arena_is_empty(&a))
        r->corrupt++;
}

static void failmalloc_walk(bool rest, size_t max_free)
{
#if CK_HEAP_HOOK
    int injected_runs = 0;
    for (uint64_t n = 1; n < 10000; n++) {
        petrel__pool_init(&petrel__pool, max_free);
        int64_t live0 = ck_heap.live;
        scen_t r;
        ck_heap_arm(n, rest);
        scenario(&r);
        ck_heap_disarm();
        uint64_t failed = ck_heap.failed;
        petrel__pool_fini(&petrel__pool);
        int64_t leaked = ck_heap.live - live0;

        ck_assert_msg(r.corrupt == 0 && r.bad_text == 0, "N=%llu: corrupt blocks or text",
                      (unsigned long long)n);
        ck_assert_msg(r.ran == r.defers, "N=%llu: %d cleanups registered, %d ran",
                      (unsigned long long)n, r.defers, r.ran);
        ck_assert_msg(leaked == 0, "N=%llu: %lld heap blocks leaked", (unsigned long long)n,
                      (long long)leaked);
        ck_assert_uint_eq(petrel__pool.live, 0);
        if (failed == 0) {
            /* the scenario made fewer than n heap calls: the walk is over */
            ck_assert_int_eq(r.failed, 0);
            ck_assert_uint_gt(n, 5);
            ck_assert_int_gt(injected_runs, 0);
            return;
        }
        injected_runs++;
        /* every arena call makes at most one heap call */
        if (rest)
            ck_assert_int_ge(r.failed, 1);
        else
            ck_assert_msg(r.failed == 1, "N=%llu: one heap failure failed %d arena calls",
                          (unsigned long long)n, r.failed);
    }
    ck_abort_msg("the walk did not end");
#else
    /* under ASan: run the scenario once, without injected failures */
    (void)rest;
    petrel__pool_init(&petrel__pool, max_free);
    scen_t r;
    scenario(&r);
    ck_assert_int_eq(r.failed, 0);
    ck_assert_int_eq(r.corrupt, 0);
    ck_assert_int_eq(r.ran, r.defers);
    petrel__pool_fini(&petrel__pool);
#endif
}

START_TEST(test_failmalloc_once)
{
    failmalloc_walk(false, 256);
}
END_TEST

START_TEST(test_failmalloc_once_no_pool)
{
    failmalloc_walk(false, 0); /* every chunk is a heap call */
}
END_TEST

START_TEST(test_failmalloc_rest)
{
    failmalloc_walk(true, 1);
}
END_TEST

/* The hook itself works (else the walks above prove nothing). */
START_TEST(test_failmalloc_hook)
{
#if CK_HEAP_HOOK
    petrel__arena_clear(&A);
    petrel__pool_fini(&petrel__pool);
    petrel__pool_init(&petrel__pool, 0);
    ck_heap_arm(1, false);
    void *p = petrel_arena_alloc(&A, 10, 0);
    ck_heap_disarm();
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(ck_heap.failed, 1);
    ck_assert_ptr_null(A.chunk);
    ck_assert_uint_eq(A.bytes, 0);
    ck_assert_ptr_nonnull(petrel_arena_alloc(&A, 10, 0));
    ck_heap_arm(1, false);
    void *l = petrel_arena_alloc(&A, 20000, 0);         /* a large block */
    int d = petrel_arena_defer(&A, scen_cleanup, NULL); /* fits the chunk: no heap call */
    ck_heap_disarm();
    ck_assert_ptr_null(l);
    ck_assert_int_eq(d, 0);
    ck_assert_uint_eq(A.bytes, 10 + sizeof(void *) * 3);
#endif
}
END_TEST

/* petrel__pool_trim: the chunks the pool's free list did not dip into
 * since the last call go back to the heap, except `keep`; chunks taken in
 * between are the working set and stay. */
START_TEST(test_pool_trim)
{
    petrel__pool_init(&petrel__pool, 256);
    void *c[32];
    for (int i = 0; i < 32; i++)
        ck_assert_ptr_nonnull(c[i] = petrel__chunk_get(&petrel__pool));
    for (int i = 0; i < 32; i++)
        petrel__chunk_put(&petrel__pool, c[i]);
    ck_assert_uint_eq(petrel__pool_trim(&petrel__pool, 0), 0); /* the interval starts */
    ck_assert_uint_eq(petrel__pool.nfree, 32);
    for (int i = 0; i < 6; i++)
        c[i] = petrel__chunk_get(&petrel__pool);
    for (int i = 0; i < 6; i++)
        petrel__chunk_put(&petrel__pool, c[i]);
    /* 26 sat unused: 22 go, 4 are kept beyond the 6 of the working set */
    ck_assert_uint_eq(petrel__pool_trim(&petrel__pool, 10), 22);
    ck_assert_uint_eq(petrel__pool.nfree, 10);
    /* idle since: down to the 10 kept, then 0 */
    ck_assert_uint_eq(petrel__pool_trim(&petrel__pool, 10), 0);
    ck_assert_uint_eq(petrel__pool_trim(&petrel__pool, 0), 10);
    ck_assert_uint_eq(petrel__pool.nfree, 0);
    ck_assert_uint_eq(petrel__pool.trimmed, 32);
    void *again = petrel__chunk_get(&petrel__pool);
    ck_assert_ptr_nonnull(again);
    petrel__chunk_put(&petrel__pool, again);
    petrel__pool_fini(&petrel__pool);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("alloc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_alloc_align_small);
    tcase_add_test(tc, test_alloc_align_64);
    tcase_add_test(tc, test_alloc_align_large);
    tcase_add_test(tc, test_alloc_align_stays_in_chunk);
    tcase_add_test(tc, test_new_aligned_zeroed);
    tcase_add_test(tc, test_limit);
    tcase_add_test(tc, test_new_overflow);
    tcase_add_test(tc, test_alloc_huge);
    tcase_add_test(tc, test_strndup_printf);
    suite_add_tcase(s, tc);

    tc = tcase_create("scopes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_mark_reset_position);
    tcase_add_test(tc, test_reset_returns_chunks);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_pool_max_free);
    tcase_add_test(tc, test_pool_trim);
    tcase_add_test(tc, test_pool_chunks);
    tcase_add_test(tc, test_large_blocks);
    tcase_add_test(tc, test_defer_reset_order);
    tcase_add_test(tc, test_defer_nested);
    suite_add_tcase(s, tc);

    tc = tcase_create("steady");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_steady_state);
    tcase_add_test(tc, test_steady_state_large);
    suite_add_tcase(s, tc);

    tc = tcase_create("failmalloc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_failmalloc_hook);
    tcase_add_test(tc, test_failmalloc_once);
    tcase_add_test(tc, test_failmalloc_once_no_pool);
    tcase_add_test(tc, test_failmalloc_rest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(arena_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
