/*
 * sizeclass.c -- blocks from 64 B to 2 KiB recycled through a free list per
 * size class (power of two), larger ones straight from the heap.  Each block
 * carries a 16-byte header naming its class and size.  Per worker process
 * (doc/architecture.md, "Processes"): no locks.
 */
#include "sizeclass.h"

#include <stdlib.h>
#include <string.h>

#define HDR 16
#define NCLASS 6 /* 64, 128, 256, 512, 1024, 2048 (with the header) */
#define MIN_SHIFT 6
#define KEPT 1024 /* free blocks kept per class */
#define LARGE 0xff

/* The header at the start of a block (malloc aligns it for any type; the
 * block's data starts HDR bytes in, as aligned). */
typedef union blk {
    union blk *next; /* when free */
    struct {
        uint8_t cls;
        size_t size; /* bytes of the block, header included */
    } h;
} blk_t;

_Static_assert(sizeof(blk_t) <= HDR && HDR % 16 == 0, "a block header fits HDR");

static petrel__sc_stats_t stats;
static blk_t *free_list[NCLASS];
static uint32_t nfree[NCLASS];

/* The class of a block for `size` bytes (size <= SIZE_MAX - HDR). */
static inline int class_of(size_t size)
{
    size_t need = size + HDR;
    if (need > ((size_t)1 << (MIN_SHIFT + NCLASS - 1)))
        return LARGE;
    int c = 0;
    while (((size_t)1 << (MIN_SHIFT + c)) < need)
        c++;
    return c;
}

void *petrel__sc_malloc(size_t size)
{
    if (size > SIZE_MAX - HDR)
        return NULL; /* the header would not fit */
    int c = class_of(size);
    size_t bytes = c == LARGE ? size + HDR : (size_t)1 << (MIN_SHIFT + c);
    blk_t *b;
    stats.ops++;
    if (c != LARGE && (b = free_list[c]) != NULL) {
        free_list[c] = b->next;
        nfree[c]--;
    } else {
        if ((b = malloc(bytes)) == NULL)
            return NULL;
        stats.calls++;
    }
    b->h.cls = (uint8_t)c;
    b->h.size = bytes;
    stats.bytes += bytes;
    return (char *)b + HDR;
}

void petrel__sc_free(void *p)
{
    if (p == NULL)
        return;
    blk_t *b = (blk_t *)((char *)p - HDR);
    int c = b->h.cls;
    stats.ops++;
    stats.bytes -= b->h.size;
    if (c == LARGE || nfree[c] >= KEPT) {
        stats.calls++;
        free(b);
        return;
    }
    b->next = free_list[c];
    free_list[c] = b;
    nfree[c]++;
}

void *petrel__sc_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = petrel__sc_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *petrel__sc_realloc(void *p, size_t size)
{
    if (p == NULL)
        return petrel__sc_malloc(size);
    if (size == 0) {
        petrel__sc_free(p);
        return NULL;
    }
    if (size > SIZE_MAX - HDR)
        return NULL; /* p is left as it was */
    blk_t *b = (blk_t *)((char *)p - HDR);
    int c = b->h.cls;
    if (c == LARGE) {
        stats.ops++;
        stats.calls++;
        blk_t *nb = realloc(b, size + HDR);
        if (nb == NULL)
            return NULL;
        stats.bytes += size + HDR - nb->h.size;
        nb->h.size = size + HDR;
        return (char *)nb + HDR;
    }
    size_t cap = ((size_t)1 << (MIN_SHIFT + c)) - HDR;
    if (size <= cap)
        return p;
    void *q = petrel__sc_malloc(size);
    if (q) {
        memcpy(q, p, cap);
        petrel__sc_free(p);
    }
    return q;
}

void petrel__sc_stats(petrel__sc_stats_t *st)
{
    *st = stats;
}
