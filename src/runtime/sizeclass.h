/*
 * sizeclass.h -- a counted allocator with per-worker free lists by size
 * class (sizeclass.c), for a library that frees and reallocates small
 * blocks all the time (nghttp2, through h2.c's nghttp2_mem): after warm-up
 * its blocks are recycled, not malloc'ed.  malloc's contract: NULL when out
 * of memory or for a size no block can have.
 */
#ifndef PETREL_SIZECLASS_H
#define PETREL_SIZECLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *petrel__sc_malloc(size_t size);
void petrel__sc_free(void *p);
void *petrel__sc_calloc(size_t n, size_t size);
void *petrel__sc_realloc(void *p, size_t size);

typedef struct petrel__sc_stats {
    uint64_t ops;       /* calls (malloc, calloc, realloc, free) */
    uint64_t calls;     /* of these, calls that reached the heap (the free list
                         * of the class was empty or full, or a large block) */
    size_t bytes;       /* bytes held now (blocks, headers included) */
    uint64_t discarded; /* bytes of pages given back (petrel__sc_discard, _trim) */
    size_t cold_bytes;  /* free paged blocks whose pages were given back */
} petrel__sc_stats_t;
/* Give the kernel back the pages of block p (from this allocator) whose
 * contents are not needed: all of them when contents_dead, else the pages
 * that hold only zero bytes.  The block stays allocated and usable: a page
 * given back reads as zeros and takes memory again when written.  Only
 * blocks of 4 KiB to 32 KiB ("paged") have pages of their own; for others,
 * and when madvise fails, nothing happens.  Returns the bytes given back. */
size_t petrel__sc_discard(void *p, bool contents_dead);

/* Paged blocks made from new memory or the zones' free lists (not
 * counting realloc that stays in place) since the process started: take
 * the count as a mark, and petrel__sc_paged_since(mark, i) is the i-th
 * paged block made after it (0 first), its size in pages in *bytes, or
 * NULL when there is no such block or it is no longer remembered (only the
 * last 8 are).  The block may have been freed since. */
uint64_t petrel__sc_paged_count(void);
void *petrel__sc_paged_since(uint64_t mark, unsigned i, size_t *bytes);

void petrel__sc_stats(petrel__sc_stats_t *st);

/* Bytes of the free blocks kept for reuse (the small classes' free lists
 * and the paged blocks that still have their pages). */
size_t petrel__sc_free_bytes(void);
/* Give back what sat unused since the last call: of each free list, the
 * blocks it never dipped into (its low-water mark) -- small blocks all to
 * the heap (free: kept, they would pin heap pages), paged blocks' pages to
 * the kernel (madvise MADV_DONTNEED; the block stays in its zone, reused
 * after the blocks that kept their pages) except up to `keep` bytes.
 * Blocks taken since the last call are the working set: kept.  Returns the
 * bytes given back.  The worker calls it after its release delay
 * (worker.c, "Memory that comes back"). */
size_t petrel__sc_trim(size_t keep);

#endif /* PETREL_SIZECLASS_H */
