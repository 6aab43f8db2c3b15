/*
 * arena.c -- the chunk pool and the arena allocator.
 *
 * Chunks of PETREL_CHUNK_SIZE bytes come from a per-worker pool that keeps
 * freed chunks on a list, so that a worker in steady state recycles chunks
 * and never calls malloc.  An arena bumps a pointer through its newest chunk;
 * a mark records (chunk, position, newest cleanup, newest large block) and a
 * reset unwinds to it.
 */
#include "runtime/arena.h"

#include "runtime/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

petrel__pool_t petrel__pool = {NULL, 0, 256, 0, 0, 0, 0};

typedef struct defer {
    struct defer *next;
    void (*fn)(void *);
    void *data;
} defer_t;

typedef struct large {
    struct large *next;
    size_t size;
    max_align_t _align[];
} large_t;

#define HDR_SIZE ((sizeof(petrel__chunk_t) + 15) & ~(size_t)15)
#define CHUNK_DATA(c) ((char *)(c) + HDR_SIZE)

void petrel__pool_init(petrel__pool_t *p, size_t max_free)
{
    memset(p, 0, sizeof(*p));
    p->max_free = max_free;
}

void petrel__pool_fini(petrel__pool_t *p)
{
    while (p->free) {
        petrel__chunk_t *c = p->free;
        UNPOISON(c, HDR_SIZE);
        p->free = c->next;
        free(c);
    }
    p->nfree = 0;
}

static petrel__chunk_t *chunk_get(petrel__pool_t *p)
{
    petrel__chunk_t *c = p->free;
    if (likely(c != NULL)) {
        UNPOISON(c, HDR_SIZE + PETREL_CHUNK_SIZE);
        p->free = c->next;
        if (--p->nfree < p->nlow)
            p->nlow = p->nfree;
    } else {
        c = malloc(HDR_SIZE + PETREL_CHUNK_SIZE);
        if (c == NULL)
            return NULL;
        p->mallocs++;
        c->size = PETREL_CHUNK_SIZE;
    }
    p->live++;
    c->next = NULL;
    return c;
}

static void chunk_put(petrel__pool_t *p, petrel__chunk_t *c)
{
    p->live--;
    if (p->nfree >= p->max_free) {
        free(c);
        return;
    }
    c->next = p->free;
    p->free = c;
    p->nfree++;
    POISON(CHUNK_DATA(c), PETREL_CHUNK_SIZE);
}

void *petrel__chunk_get(petrel__pool_t *p)
{
    petrel__chunk_t *c = chunk_get(p);
    return c ? CHUNK_DATA(c) : NULL;
}

void petrel__chunk_put(petrel__pool_t *p, void *data)
{
    if (data)
        chunk_put(p, (petrel__chunk_t *)((char *)data - HDR_SIZE));
}

size_t petrel__pool_trim(petrel__pool_t *p, size_t keep)
{
    size_t idle = p->nlow < p->nfree ? p->nlow : p->nfree, busy = p->nfree - idle, n = 0;
    size_t kept = busy >= keep ? 0 : keep - busy;
    for (idle = idle > kept ? idle - kept : 0; n < idle; n++) {
        petrel__chunk_t *c = p->free;
        UNPOISON(c, HDR_SIZE);
        p->free = c->next;
        p->nfree--;
        free(c);
    }
    p->nlow = p->nfree;
    p->trimmed += n;
    return n;
}

static void *alloc_large(petrel_arena_t *a, size_t size, size_t align)
{
    if (size > SIZE_MAX - sizeof(large_t) - align)
        return NULL;
    large_t *l = malloc(sizeof(large_t) + size + align - 1);
    if (l == NULL)
        return NULL;
    a->mallocs++;
    l->size = size;
    l->next = a->large;
    a->large = l;
    return (void *)(((uintptr_t)(l + 1) + (align - 1)) & ~(uintptr_t)(align - 1));
}

static void *alloc_slow(petrel_arena_t *a, size_t size, size_t align)
{
    if (size + align > PETREL_CHUNK_SIZE / 4)
        return alloc_large(a, size, align);
    uint64_t before = a->pool->mallocs;
    petrel__chunk_t *c = chunk_get(a->pool);
    if (c == NULL)
        return NULL;
    a->mallocs += a->pool->mallocs - before;
    c->next = a->chunk;
    a->chunk = c;
    a->nchunks++;
    char *p = (char *)(((uintptr_t)CHUNK_DATA(c) + (align - 1)) & ~(uintptr_t)(align - 1));
    a->pos = p + size;
    a->end = CHUNK_DATA(c) + PETREL_CHUNK_SIZE;
    return p;
}

void *petrel_arena_alloc(petrel_arena_t *a, size_t size, size_t align)
{
    if (align == 0)
        align = sizeof(void *);
    if (unlikely(align > 64 || (align & (align - 1)) || size > SIZE_MAX / 2 ||
                 (a->limit && (size > a->limit || a->bytes + size > a->limit))))
        return NULL;
    a->bytes += size;
    if (a->bytes > a->bytes_high)
        a->bytes_high = a->bytes;
    char *p = (char *)(((uintptr_t)a->pos + (align - 1)) & ~(uintptr_t)(align - 1));
    if (likely(a->pos != NULL && p <= a->end && size <= (size_t)(a->end - p))) {
        a->pos = p + size;
        UNPOISON(p, size);
        return p;
    }
    void *r = alloc_slow(a, size, align);
    if (r == NULL)
        a->bytes -= size;
    return r;
}

void *petrel_arena_calloc(petrel_arena_t *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = petrel_arena_alloc(a, n * size, size >= 16 ? 16 : 0);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *petrel_arena_strndup(petrel_arena_t *a, const char *s, size_t n)
{
    char *p = petrel_arena_alloc(a, n + 1, 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *petrel_arena_printf(petrel_arena_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = petrel_arena_alloc(a, (size_t)n + 1, 1);
    if (p) {
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return p;
}

int petrel_arena_defer(petrel_arena_t *a, void (*fn)(void *), void *data)
{
    defer_t *d = petrel_arena_alloc(a, sizeof(*d), 0);
    if (d == NULL)
        return PETREL_ENOMEM;
    d->fn = fn;
    d->data = data;
    d->next = a->defer;
    a->defer = d;
    return 0;
}

petrel_arena_mark_t petrel_arena_mark(const petrel_arena_t *a)
{
    petrel_arena_mark_t m = {a->chunk, a->pos, a->defer, a->large, a->bytes};
    return m;
}

void petrel_arena_reset(petrel_arena_t *a, petrel_arena_mark_t m)
{
    /* Cleanups first: they may still read memory of the scope. */
    while (a->defer != m._defer) {
        defer_t *d = a->defer;
        a->defer = d->next;
        d->fn(d->data);
    }
    while (a->large != m._large) {
        large_t *l = a->large;
        a->large = l->next;
        free(l);
    }
    while (a->chunk != m._chunk) {
        petrel__chunk_t *c = a->chunk;
        a->chunk = c->next;
        a->nchunks--;
        chunk_put(a->pool, c);
    }
    if (a->chunk) {
        a->pos = m._pos;
        a->end = CHUNK_DATA(a->chunk) + PETREL_CHUNK_SIZE;
        POISON(a->pos, (size_t)(a->end - a->pos));
    } else {
        a->pos = a->end = NULL;
    }
    a->bytes = m._bytes;
}

/* (a cleanup has one argument: the buffers come from the worker's pool) */
static void chunk_release(void *data)
{
    petrel__chunk_put(&petrel__pool, data);
}

void *petrel__arena_alloc_buf(petrel_arena_t *a, size_t *size)
{
    if (*size + 1 > PETREL_CHUNK_SIZE / 4 && *size <= PETREL_CHUNK_SIZE &&
        a->pool == &petrel__pool) {
        void *p = petrel__chunk_get(a->pool);
        if (p == NULL)
            return NULL;
        if (petrel_arena_defer(a, chunk_release, p) < 0) {
            petrel__chunk_put(a->pool, p);
            return NULL;
        }
        *size = PETREL_CHUNK_SIZE;
        return p;
    }
    return petrel_arena_alloc(a, *size, 1);
}

void petrel__arena_clear_all(petrel_arena_t *a)
{
    petrel_arena_mark_t empty = {NULL, NULL, NULL, NULL, 0};
    petrel_arena_reset(a, empty);
}

void petrel_arena_stats(const petrel_arena_t *a, petrel_arena_stats_t *st)
{
    st->chunks = a->nchunks;
    st->bytes = a->bytes;
    st->bytes_high = a->bytes_high;
    st->mallocs = a->mallocs;
    st->pool_mallocs = a->pool ? a->pool->mallocs : 0;
}

const char *petrel_strerror(int err)
{
    switch (err) {
    case PETREL_OK:
        return "success";
    case PETREL_ENOMEM:
        return "out of memory";
    case PETREL_EINVAL:
        return "invalid argument";
    case PETREL_ESTATE:
        return "not allowed in this state";
    case PETREL_EIO:
        return "I/O error";
    case PETREL_ENOTFOUND:
        return "not found";
    case PETREL_ELIMIT:
        return "limit reached";
    default:
        return "unknown error";
    }
}
