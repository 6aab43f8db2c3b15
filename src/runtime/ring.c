/*
 * ring.c -- broadcast rings in shared memory between the worker processes
 * (ring.h; the design is in doc/pubsub.md, "Across workers").
 *
 * Positions are byte counts since the ring was made (64 bits: they never
 * wrap); a position's byte is data[pos & (size - 1)].  A record is a
 * 16-byte header (the body's length, the record's sequence number) and its
 * body, padded to 8 bytes; a record may wrap around the end of the ring.
 *
 * One writer per ring, any number of readers, no lock and no waiting:
 *   writer: reserve = end of the new record (it may overwrite what lies a
 *           ring's size before that); fence; copy the record; write = end.
 *   reader: W = write (acquire); copy the record at its position; fence;
 *           if reserve > position + size, the writer may have overwritten
 *           it while it was copied: start again at the tail.
 * The writer also keeps `tail`, the oldest record it has not overwritten:
 * a reader a whole ring behind goes on from there, losing the oldest
 * records only, and counts them by the records' sequence numbers.
 * The writer never learns of its readers: a slow reader loses records, a
 * fast one costs the writer nothing.  (The copies are plain memcpy over
 * shared memory ordered by the fences, as sequence locks are written in
 * practice; x86-64 and arm64 keep them in that order.)
 *
 * Waking: each ring has an eventfd and a `woken` flag for its holder.  A
 * writer that wrote during a loop turn wakes, at its end, every other
 * holder whose flag it finds clear (one eventfd write each); a woken
 * reader reads its eventfd, clears its flag, then reads every ring.  A
 * busy reader is woken once, however many records arrive meanwhile.
 */
#include "runtime/ring.h"

#include "petrel.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct ring_hdr {
    /* written by the ring's writer, read by everyone */
    _Atomic uint64_t write;   /* end of the last whole record */
    _Atomic uint64_t reserve; /* below reserve - size, bytes may be overwritten */
    _Atomic uint64_t tail;    /* the oldest record not overwritten yet */
    _Atomic uint64_t seq;     /* records written */
    char pad1[32];
    /* the holder's: who, and whether it was woken */
    _Atomic int32_t holder; /* pid; -1 reserved for a process being forked; 0 free */
    _Atomic uint32_t woken;
    char pad2[56];
} ring_hdr_t;

_Static_assert(sizeof(ring_hdr_t) == 128, "two cache lines");

struct petrel__rings {
    unsigned n;
    size_t size;     /* bytes of each ring, a power of two */
    ring_hdr_t *hdr; /* shared: n headers */
    uint8_t *data;   /* shared: n rings of `size` bytes */
    size_t map_len;
    int *efd;
};

petrel__rings_t *petrel__rings_new(unsigned n, size_t size)
{
    if (n == 0 || n > 4096 || size < (64u << 10) || size > (1ull << 30) || (size & (size - 1))) {
        errno = EINVAL;
        return NULL;
    }
    petrel__rings_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->n = n;
    r->size = size;
    size_t hl = ((n * sizeof(ring_hdr_t)) + 4095) & ~(size_t)4095;
    r->map_len = hl + (size_t)n * size;
    /* anonymous shared memory: the forked workers inherit it; its pages are
     * touched only as the rings fill */
    void *m = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        free(r);
        errno = e;
        return NULL;
    }
    r->hdr = m;
    r->data = (uint8_t *)m + hl;
    r->efd = malloc(n * sizeof(int));
    if (r->efd == NULL) {
        munmap(m, r->map_len);
        free(r);
        errno = ENOMEM;
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        r->efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (r->efd[i] < 0) {
            int e = errno;
            while (i--)
                close(r->efd[i]);
            free(r->efd);
            munmap(m, r->map_len);
            free(r);
            errno = e;
            return NULL;
        }
    }
    return r;
}

void petrel__rings_free(petrel__rings_t *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->n; i++)
        close(r->efd[i]);
    free(r->efd);
    munmap(r->hdr, r->map_len);
    free(r);
}

unsigned petrel__rings_count(const petrel__rings_t *r)
{
    return r->n;
}

/* A record takes at most a quarter of the ring: a reader never needs more
 * than a few records of slack to keep up with a writer. */
size_t petrel__rings_max_record(const petrel__rings_t *r)
{
    return r->size / 4 - PETREL__RING_HDR;
}

/* ------------------------------------------------------------------------ */
/* Holders                                                                  */

int petrel__rings_claim(petrel__rings_t *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        int32_t free_ = 0;
        if (atomic_compare_exchange_strong(&r->hdr[i].holder, &free_, -1))
            return (int)i;
    }
    return -1;
}

void petrel__rings_hold(petrel__rings_t *r, int ring, pid_t pid)
{
    if (ring >= 0 && (unsigned)ring < r->n)
        atomic_store(&r->hdr[ring].holder, pid > 0 ? (int32_t)pid : 0);
}

void petrel__rings_release(petrel__rings_t *r, int ring, pid_t pid)
{
    if (ring < 0 || (unsigned)ring >= r->n)
        return;
    int32_t want = (int32_t)pid;
    atomic_compare_exchange_strong(&r->hdr[ring].holder, &want, 0);
}

void petrel__rings_exited(petrel__rings_t *r, pid_t pid)
{
    for (unsigned i = 0; i < r->n; i++)
        petrel__rings_release(r, (int)i, pid);
}

bool petrel__rings_held(const petrel__rings_t *r, int ring)
{
    return atomic_load_explicit(&r->hdr[ring].holder, memory_order_relaxed) != 0;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                  */

static void copy_in(petrel__rings_t *r, uint8_t *base, uint64_t pos, const void *src, size_t n)
{
    size_t off = (size_t)(pos & (r->size - 1)), first = r->size - off;
    if (first >= n) {
        memcpy(base + off, src, n);
    } else {
        memcpy(base + off, src, first);
        memcpy(base, (const uint8_t *)src + first, n - first);
    }
}

static void copy_out(petrel__rings_t *r, const uint8_t *base, uint64_t pos, void *dst, size_t n)
{
    size_t off = (size_t)(pos & (r->size - 1)), first = r->size - off;
    if (first >= n) {
        memcpy(dst, base + off, n);
    } else {
        memcpy(dst, base + off, first);
        memcpy((uint8_t *)dst + first, base, n - first);
    }
}

typedef struct rec_hdr {
    uint32_t len; /* of the body */
    uint32_t zero;
    uint64_t seq;
} rec_hdr_t;

_Static_assert(sizeof(rec_hdr_t) == PETREL__RING_HDR, "record header");

int petrel__ring_put(petrel__rings_t *r, int ring, const struct iovec *iov, int n)
{
    ring_hdr_t *h = &r->hdr[ring];
    uint8_t *base = r->data + (size_t)ring * r->size;
    size_t body = 0;
    for (int i = 0; i < n; i++)
        body += iov[i].iov_len;
    if (body > petrel__rings_max_record(r))
        return PETREL_ELIMIT;
    uint64_t w = atomic_load_explicit(&h->write, memory_order_relaxed);
    uint64_t seq = atomic_load_explicit(&h->seq, memory_order_relaxed);
    uint64_t end = w + ((PETREL__RING_HDR + body + 7) & ~(uint64_t)7);
    /* the records this one overwrites leave the ring: the oldest left is
     * where a reader a whole ring behind starts again */
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    while (end - tail > r->size) {
        rec_hdr_t old;
        copy_out(r, base, tail, &old, sizeof(old));
        tail += (PETREL__RING_HDR + (uint64_t)old.len + 7) & ~(uint64_t)7;
    }
    atomic_store_explicit(&h->tail, tail, memory_order_relaxed);
    /* what lies a ring's size before `end` may be overwritten from now on */
    atomic_store_explicit(&h->reserve, end, memory_order_release);
    atomic_thread_fence(memory_order_release);
    rec_hdr_t rh = {(uint32_t)body, 0, seq};
    copy_in(r, base, w, &rh, sizeof(rh));
    uint64_t p = w + sizeof(rh);
    for (int i = 0; i < n; i++) {
        copy_in(r, base, p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    atomic_store_explicit(&h->seq, seq + 1, memory_order_relaxed);
    atomic_store_explicit(&h->write, end, memory_order_release);
    return 0;
}

unsigned petrel__rings_wake(petrel__rings_t *r, int self)
{
    unsigned k = 0;
    /* the records written are visible before any flag is looked at */
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < r->n; i++) {
        ring_hdr_t *h = &r->hdr[i];
        if ((int)i == self || atomic_load_explicit(&h->holder, memory_order_relaxed) == 0)
            continue;
        if (atomic_load_explicit(&h->woken, memory_order_relaxed) || atomic_exchange(&h->woken, 1))
            continue; /* woken already, and has not read since */
        uint64_t one = 1;
        ssize_t w;
        do
            w = write(r->efd[i], &one, sizeof(one));
        while (w < 0 && errno == EINTR);
        k++;
    }
    return k;
}

int petrel__rings_fd(const petrel__rings_t *r, int ring)
{
    return r->efd[ring];
}

void petrel__rings_woken(petrel__rings_t *r, int ring)
{
    uint64_t v;
    while (read(r->efd[ring], &v, sizeof(v)) < 0 && errno == EINTR)
        ;
    atomic_store(&r->hdr[ring].woken, 0);
    /* the flag is clear before any ring is read: a record written after
     * the reads began finds it clear and wakes us again */
    atomic_thread_fence(memory_order_seq_cst);
}

ssize_t petrel__ring_get(petrel__rings_t *r, int ring, petrel__ring_cursor_t *cur, void *buf,
                         size_t cap)
{
    ring_hdr_t *h = &r->hdr[ring];
    const uint8_t *base = r->data + (size_t)ring * r->size;
    uint64_t w = atomic_load_explicit(&h->write, memory_order_acquire);
    if (!cur->started) {
        /* a new reader starts at the end: what was written before is not its */
        cur->started = true;
        cur->pos = w;
        cur->seq = atomic_load_explicit(&h->seq, memory_order_relaxed);
        return -1;
    }
    /* a few tries: each failure means the writer overwrote what was being
     * read, and moved the tail past it */
    for (int tries = 0; tries < 8; tries++) {
        if (cur->pos == w)
            return -1;
        if (w - cur->pos > r->size) {
            /* a whole ring behind: on at the oldest record still there */
            cur->pos = atomic_load_explicit(&h->tail, memory_order_acquire);
            w = atomic_load_explicit(&h->write, memory_order_acquire);
            continue;
        }
        rec_hdr_t rh;
        copy_out(r, base, cur->pos, &rh, sizeof(rh));
        uint64_t end = cur->pos + ((PETREL__RING_HDR + (uint64_t)rh.len + 7) & ~(uint64_t)7);
        bool sane = rh.len <= petrel__rings_max_record(r) && rh.len <= cap && end <= w;
        if (sane)
            copy_out(r, base, cur->pos + sizeof(rh), buf, rh.len);
        atomic_thread_fence(memory_order_acquire);
        uint64_t reserve = atomic_load_explicit(&h->reserve, memory_order_acquire);
        if (!sane || reserve > cur->pos + r->size) {
            /* overwritten while it was read: the tail has moved past it */
            cur->pos = atomic_load_explicit(&h->tail, memory_order_relaxed);
            w = atomic_load_explicit(&h->write, memory_order_acquire);
            continue;
        }
        if (rh.seq > cur->seq)
            cur->lost += rh.seq - cur->seq; /* what was skipped */
        cur->seq = rh.seq + 1;
        cur->pos = end;
        return (ssize_t)rh.len;
    }
    return -1;
}
