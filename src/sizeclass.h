/*
 * sizeclass.h -- a counted allocator with per-worker free lists by size
 * class (sizeclass.c), for a library that frees and reallocates small
 * blocks all the time (nghttp2, through h2.c's nghttp2_mem): after warm-up
 * its blocks are recycled, not malloc'ed.  malloc's contract: NULL when out
 * of memory or for a size no block can have.
 */
#ifndef PETREL_SIZECLASS_H
#define PETREL_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

void *petrel__sc_malloc(size_t size);
void petrel__sc_free(void *p);
void *petrel__sc_calloc(size_t n, size_t size);
void *petrel__sc_realloc(void *p, size_t size);

typedef struct petrel__sc_stats {
    uint64_t ops;   /* calls (malloc, calloc, realloc, free) */
    uint64_t calls; /* of these, calls that reached the heap (the free list
                     * of the class was empty or full, or a large block) */
    size_t bytes;   /* bytes held now (blocks, headers included) */
} petrel__sc_stats_t;
void petrel__sc_stats(petrel__sc_stats_t *st);

#endif /* PETREL_SIZECLASS_H */
