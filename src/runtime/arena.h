/*
 * arena.h -- the worker's chunk pool and the arena's internals (arena.c).
 * The public half of the arena API (petrel_arena_alloc, mark/reset, defer)
 * is in petrel.h.
 */
#ifndef PETREL_ARENA_H
#define PETREL_ARENA_H

#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PETREL_CHUNK_SIZE 16384

typedef struct petrel__chunk {
    struct petrel__chunk *next;
    size_t size; /* usable bytes after the header */
} petrel__chunk_t;

/* One per worker process: free chunks, recycled without malloc. */
typedef struct petrel__pool {
    petrel__chunk_t *free;
    size_t nfree;
    size_t max_free;  /* chunks kept beyond this are given back to the heap */
    size_t live;      /* chunks handed out and not returned */
    uint64_t mallocs; /* heap calls for chunks */
    size_t nlow;      /* the fewest free chunks since the last petrel__pool_trim */
    uint64_t trimmed; /* chunks given back by petrel__pool_trim */
} petrel__pool_t;

struct petrel_arena {
    petrel__chunk_t *chunk; /* current (newest) chunk; older ones linked by next */
    char *pos, *end;
    void *defer;  /* newest cleanup */
    void *large;  /* newest large block */
    size_t bytes; /* bytes handed out (incl. large) */
    size_t bytes_high;
    size_t limit; /* 0 = no limit */
    size_t nchunks;
    uint64_t mallocs;
    petrel__pool_t *pool;
};

/* The pool of this worker process (doc/architecture.md, "Processes"). */
extern petrel__pool_t petrel__pool;

void petrel__pool_init(petrel__pool_t *p, size_t max_free);
void petrel__pool_fini(petrel__pool_t *p);
/* A chunk of PETREL_CHUNK_SIZE usable bytes; NULL if the heap is exhausted. */
void *petrel__chunk_get(petrel__pool_t *p);
void petrel__chunk_put(petrel__pool_t *p, void *data);
/* Give back to the heap the free chunks that sat unused since the last
 * call (the free list's low-water mark), keeping up to `keep` of them;
 * chunks taken since are the working set and stay.  Returns the chunks
 * given back (worker.c, "Memory that comes back"). */
size_t petrel__pool_trim(petrel__pool_t *p, size_t keep);

static inline void petrel__arena_init(petrel_arena_t *a, petrel__pool_t *pool, size_t limit)
{
    *a = (petrel_arena_t){.pool = pool, .limit = limit};
}
/* Runs every cleanup and gives all memory back: the arena is empty again. */
void petrel__arena_clear_all(petrel_arena_t *a);
static inline void petrel__arena_clear(petrel_arena_t *a)
{
    if (a->chunk || a->large || a->defer)
        petrel__arena_clear_all(a);
}
/* A buffer of at least *size bytes in the current scope of `a`, for data
 * that grows (a request body, a WebSocket message).  A size the arena would
 * malloc (over a quarter of a chunk) but a pool chunk holds takes a whole
 * chunk instead, given back by a cleanup of the scope: *size then becomes
 * PETREL_CHUNK_SIZE.  NULL when out of memory or over the arena's limit. */
void *petrel__arena_alloc_buf(petrel_arena_t *a, size_t *size);
static inline bool petrel__arena_is_empty(const petrel_arena_t *a)
{
    return a->chunk == NULL && a->large == NULL && a->defer == NULL;
}

#endif /* PETREL_ARENA_H */
