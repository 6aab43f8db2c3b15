/*
 * sizeclass.c -- a counted allocator for a library that frees and
 * reallocates blocks all the time (nghttp2):
 *
 *   - blocks up to 2 KiB (header included) come from a free list per size
 *     class, eight classes per power of two (64, 72, 80, ..., 128, 144,
 *     ..., 2048), so that a block wastes at most a ninth of itself: a 1 KiB
 *     array plus its header (nghttp2's HPACK rings) takes 1152 bytes, not
 *     2048;
 *   - blocks of 4 KiB to 32 KiB of data ("paged" blocks) start on a page
 *     boundary and take whole pages, carved from a reserved range of the
 *     address space with a zone per number of pages, and have no header (the
 *     zone says the size): petrel__sc_discard() can give their pages back
 *     to the kernel while the block stays allocated;
 *   - other blocks come from the heap, with a 16-byte header naming their
 *     class and size.
 *
 * Per worker process (doc/architecture.md, "Processes"): no locks.
 */
#include "runtime/sizeclass.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HDR 16
#define MIN_SHIFT 6  /* the smallest class: 64 bytes, header included */
#define MAX_SHIFT 11 /* the largest class: 2048 bytes */
#define SUB 3        /* 2^SUB classes per power of two */
#define NCLASS (1 + ((MAX_SHIFT - MIN_SHIFT) << SUB))
#define KEPT 1024 /* free blocks kept per class */
#define LARGE 0xff

#define PAGE 4096u
#define PAGED_MIN PAGE         /* data bytes from which a block is paged */
#define NZONE 8                /* zones of 1 to 8 pages */
#define ZONE_SHIFT_MAX 32      /* 4 GiB of address space per zone, at most */
#define ZONE_SHIFT_MIN 24      /* 16 MiB, at least */
#define GROW ((size_t)1 << 20) /* a zone is made usable 1 MiB at a time */

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
/* the fewest free blocks of each class since the last petrel__sc_trim():
 * that many sat unused all the while (sizeclass.h) */
static uint32_t nlow[NCLASS];

/* Paged blocks: zone z (0..NZONE-1) holds blocks of z + 1 pages, in
 * [base + z * 2^zone_shift, ... + 2^zone_shift).  The range is reserved
 * PROT_NONE at the first paged block (no memory, no commit charge) and made
 * readable and writable GROW bytes at a time.  When it cannot be reserved
 * (an address-space limit), or a zone is full, blocks come from the heap. */
static char *base;
static unsigned zone_shift = ZONE_SHIFT_MAX; /* smaller under an address-space limit */
static uintptr_t span;                       /* bytes reserved (0: none) */
static int reserved;                         /* 0 not tried, 1 reserved, -1 failed */
static struct zone {
    size_t used, usable; /* bytes carved, bytes made usable */
    void *free;          /* freed blocks, linked through their first word */
    size_t nfree, nlow;  /* blocks on `free`; the fewest since the last trim */
    /* freed blocks whose pages went back to the kernel: an array of their
     * addresses, not a list through them (a link would take a page back) */
    void **cold;
    size_t ncold, cold_cap;
} zones[NZONE];

/* The last paged blocks made (petrel__sc_paged_since). */
#define RECENT 8
static void *recent[RECENT];
static uint64_t npaged;

/* The class of a block for `size` bytes (size <= SIZE_MAX - HDR), and the
 * bytes of its block in *bytes. */
static inline int class_of(size_t size, size_t *bytes)
{
    size_t need = size + HDR;
    if (need <= ((size_t)1 << MIN_SHIFT)) {
        *bytes = (size_t)1 << MIN_SHIFT;
        return 0;
    }
    if (need > ((size_t)1 << MAX_SHIFT))
        return LARGE;
    /* 2^b < need <= 2^(b+1): the classes (2^SUB + 1 .. 2^(SUB+1)) * 2^(b-SUB) */
    unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)(need - 1));
    unsigned q = (unsigned)((need - 1) >> (b - SUB)) & ((1u << SUB) - 1);
    *bytes = (size_t)((1u << SUB) + 1 + q) << (b - SUB);
    return (int)(1 + ((b - MIN_SHIFT) << SUB) + q);
}

static inline size_t class_bytes(int c)
{
    if (c == 0)
        return (size_t)1 << MIN_SHIFT;
    unsigned b = ((unsigned)(c - 1) >> SUB) + MIN_SHIFT, q = (unsigned)(c - 1) & ((1u << SUB) - 1);
    return (size_t)((1u << SUB) + 1 + q) << (b - SUB);
}

static inline bool is_paged(const void *p)
{
    return (uintptr_t)p - (uintptr_t)base < span;
}

static inline size_t paged_bytes(const void *p)
{
    return ((((uintptr_t)p - (uintptr_t)base) >> zone_shift) + 1) * PAGE;
}

static bool reserve(void)
{
    /* under an address-space limit (RLIMIT_AS), smaller zones */
    for (; reserved == 0 && zone_shift >= ZONE_SHIFT_MIN; zone_shift -= 4) {
        void *m = mmap(NULL, (size_t)NZONE << zone_shift, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) {
            base = m;
            span = (uintptr_t)NZONE << zone_shift;
            reserved = 1;
            return true;
        }
    }
    if (reserved == 0)
        reserved = -1;
    return reserved > 0;
}

/* A paged block of `npages` pages, or NULL to use the heap. */
static void *paged_get(size_t npages)
{
    struct zone *z = &zones[npages - 1];
    if (z->free) {
        void *p = z->free;
        z->free = *(void **)p;
        if (--z->nfree < z->nlow)
            z->nlow = z->nfree;
        return p;
    }
    if (z->ncold) {
        /* its pages read as zeros and are faulted in as written */
        stats.cold_bytes -= npages * PAGE;
        return z->cold[--z->ncold];
    }
    if (!reserve())
        return NULL;
    size_t bytes = npages * PAGE;
    if (z->used + bytes > ((size_t)1 << zone_shift))
        return NULL;
    char *zb = base + ((size_t)(npages - 1) << zone_shift);
    if (z->used + bytes > z->usable) {
        if (mprotect(zb + z->usable, GROW, PROT_READ | PROT_WRITE) != 0)
            return NULL;
        z->usable += GROW;
    }
    void *p = zb + z->used;
    z->used += bytes;
    stats.calls++; /* new memory, as from the heap */
    return p;
}

/* A block from the heap (or a paged block): the free list's slow path. */
static __attribute__((noinline)) void *heap_get(size_t size, int c, size_t bytes)
{
    if (c == LARGE) {
        if (size >= PAGED_MIN && size <= NZONE * PAGE) {
            size_t npages = (size + PAGE - 1) / PAGE;
            void *p = paged_get(npages);
            if (p) {
                recent[npaged++ % RECENT] = p;
                stats.bytes += npages * PAGE;
                return p;
            }
        }
        bytes = size + HDR;
    }
    blk_t *b = malloc(bytes);
    if (b == NULL)
        return NULL;
    stats.calls++;
    b->h.cls = (uint8_t)c;
    b->h.size = bytes;
    stats.bytes += bytes;
    return (char *)b + HDR;
}

void *petrel__sc_malloc(size_t size)
{
    if (size > SIZE_MAX - HDR)
        return NULL; /* the header would not fit */
    size_t bytes = 0;
    int c = class_of(size, &bytes);
    blk_t *b;
    stats.ops++;
    if (c == LARGE || (b = free_list[c]) == NULL)
        return heap_get(size, c, bytes);
    free_list[c] = b->next;
    if (--nfree[c] < nlow[c])
        nlow[c] = nfree[c];
    b->h.cls = (uint8_t)c;
    b->h.size = bytes;
    stats.bytes += bytes;
    return (char *)b + HDR;
}

void petrel__sc_free(void *p)
{
    if (p == NULL)
        return;
    stats.ops++;
    if (is_paged(p)) {
        size_t bytes = paged_bytes(p);
        struct zone *z = &zones[bytes / PAGE - 1];
        stats.bytes -= bytes;
        *(void **)p = z->free;
        z->free = p;
        z->nfree++;
        return;
    }
    blk_t *b = (blk_t *)((char *)p - HDR);
    int c = b->h.cls;
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
    size_t cap;
    if (is_paged(p)) {
        cap = paged_bytes(p);
    } else {
        blk_t *b = (blk_t *)((char *)p - HDR);
        int c = b->h.cls;
        if (c == LARGE && !(size >= PAGED_MIN && size <= NZONE * PAGE)) {
            stats.ops++;
            stats.calls++;
            blk_t *nb = realloc(b, size + HDR);
            if (nb == NULL)
                return NULL;
            stats.bytes += size + HDR - nb->h.size;
            nb->h.size = size + HDR;
            return (char *)nb + HDR;
        }
        cap = (c == LARGE ? b->h.size : class_bytes(c)) - HDR;
    }
    if (size <= cap)
        return p;
    void *q = petrel__sc_malloc(size);
    if (q) {
        memcpy(q, p, cap);
        petrel__sc_free(p);
    }
    return q;
}

/* Is the page at p all zero bytes?  (A page never written, or given back,
 * reads as the kernel's zero page: no memory is taken.) */
static bool page_zero(const char *p)
{
    const uint64_t *w = (const uint64_t *)p;
    uint64_t acc = 0;
    for (size_t i = 0; i < PAGE / sizeof(*w); i += 8)
        acc |= w[i] | w[i + 1] | w[i + 2] | w[i + 3] | w[i + 4] | w[i + 5] | w[i + 6] | w[i + 7];
    return acc == 0;
}

size_t petrel__sc_discard(void *p, bool contents_dead)
{
    if (p == NULL || !is_paged(p))
        return 0;
    size_t bytes = paged_bytes(p), given = 0;
    char *run = NULL;
    for (char *pg = p; pg <= (char *)p + bytes; pg += PAGE) {
        bool drop = pg < (char *)p + bytes && (contents_dead || page_zero(pg));
        if (drop) {
            if (run == NULL)
                run = pg;
            continue;
        }
        if (run && madvise(run, (size_t)(pg - run), MADV_DONTNEED) == 0)
            given += (size_t)(pg - run);
        run = NULL;
    }
    stats.discarded += given;
    return given;
}

uint64_t petrel__sc_paged_count(void)
{
    return npaged;
}

void *petrel__sc_paged_since(uint64_t mark, unsigned i, size_t *bytes)
{
    if (npaged - mark > RECENT || i >= npaged - mark)
        return NULL;
    void *p = recent[(mark + i) % RECENT];
    *bytes = paged_bytes(p);
    return p;
}

size_t petrel__sc_free_bytes(void)
{
    size_t n = 0;
    for (int c = 0; c < NCLASS; c++)
        n += nfree[c] * class_bytes(c);
    for (int z = 0; z < NZONE; z++)
        n += zones[z].nfree * (size_t)(z + 1) * PAGE;
    return n;
}

size_t petrel__sc_trim(size_t keep)
{
    size_t given = 0;
    /* small blocks: every one that sat unused goes back to the heap, none
     * is kept against `keep` -- a few free blocks scattered through the
     * heap would each pin a page that malloc_trim could give back */
    for (int c = 0; c < NCLASS; c++) {
        size_t n = nlow[c] < nfree[c] ? nlow[c] : nfree[c], bytes = class_bytes(c);
        for (; n > 0; n--) {
            blk_t *b = free_list[c];
            free_list[c] = b->next;
            nfree[c]--;
            free(b);
            stats.calls++;
            given += bytes;
        }
        nlow[c] = nfree[c];
    }
    /* paged blocks: their pages go back, the blocks stay in their zone */
    for (int zi = 0; zi < NZONE; zi++) {
        struct zone *z = &zones[zi];
        size_t bytes = (size_t)(zi + 1) * PAGE, n = z->nlow < z->nfree ? z->nlow : z->nfree;
        size_t kept = z->nfree - n;
        size_t more = kept * bytes >= keep ? 0 : (keep - kept * bytes) / bytes;
        if (more > n)
            more = n;
        keep -= (kept + more) * bytes < keep ? (kept + more) * bytes : keep;
        n -= more;
        if (n && z->ncold + n > z->cold_cap) {
            size_t cap = z->cold_cap ? z->cold_cap : 64;
            while (cap < z->ncold + n)
                cap *= 2;
            void **a = realloc(z->cold, cap * sizeof(*a));
            if (a == NULL)
                n = z->cold_cap - z->ncold; /* as many as there is room for */
            else {
                z->cold = a;
                z->cold_cap = cap;
            }
        }
        for (; n > 0; n--) {
            void *p = z->free;
            z->free = *(void **)p;
            z->nfree--;
            madvise(p, bytes, MADV_DONTNEED); /* (a failure leaves them resident) */
            z->cold[z->ncold++] = p;
            stats.cold_bytes += bytes;
            stats.discarded += bytes;
            given += bytes;
        }
        z->nlow = z->nfree;
    }
    return given;
}

void petrel__sc_stats(petrel__sc_stats_t *st)
{
    *st = stats;
}
