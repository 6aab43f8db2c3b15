/*
 * ring.h -- broadcast rings in shared memory between the worker processes
 * (ring.c): the cross-worker path of publish/subscribe (doc/pubsub.md).
 *
 * The master maps the rings before it forks the workers, so every worker
 * sees the same memory.  A worker holds one ring: it is that ring's only
 * writer, and every other worker reads it with a cursor of its own.  The
 * writer never waits for its readers and takes no lock: a reader that falls
 * a whole ring behind finds that its records were overwritten (a sequence
 * lock over the ring's positions), skips to the newest ones and counts what
 * it lost.  An eventfd per ring wakes the worker that holds it when another
 * worker wrote.
 */
#ifndef PETREL_RING_H
#define PETREL_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct petrel__rings petrel__rings_t;

/* Where a reader is in one ring; zero it to start at the ring's end. */
typedef struct petrel__ring_cursor {
    uint64_t pos;  /* byte position of the next record */
    uint64_t seq;  /* sequence number of the next record expected */
    uint64_t lost; /* records overwritten before they were read, so far */
    bool started;  /* pos and seq are set */
} petrel__ring_cursor_t;

/* Records: the header and the body's bytes are bounded by the ring's size. */
#define PETREL__RING_HDR 16

/* `n` rings of `size` bytes each (a power of two, 64 KiB to 1 GiB), and an
 * eventfd for each: shared, inherited by the processes forked after.  NULL
 * with errno. */
petrel__rings_t *petrel__rings_new(unsigned n, size_t size);
void petrel__rings_free(petrel__rings_t *r);
unsigned petrel__rings_count(const petrel__rings_t *r);
/* The largest body a record may have. */
size_t petrel__rings_max_record(const petrel__rings_t *r);

/* Holders (the master, around fork): a free ring, reserved for the process
 * about to be forked (-1: none free); then its pid (0: the fork failed, the
 * ring is free again).  A holder gives its ring back when it stops
 * publishing (a drain), the master when it exits. */
int petrel__rings_claim(petrel__rings_t *r);
void petrel__rings_hold(petrel__rings_t *r, int ring, pid_t pid);
void petrel__rings_release(petrel__rings_t *r, int ring, pid_t pid);
void petrel__rings_exited(petrel__rings_t *r, pid_t pid);
/* Whether `ring` has a holder now (a process that may read it). */
bool petrel__rings_held(const petrel__rings_t *r, int ring);

/* Writer: append one record, the bytes of iov[0..n) (0, or PETREL_ELIMIT
 * for a body over petrel__rings_max_record).  Readers are not woken: that
 * is petrel__rings_wake(), once for many records. */
int petrel__ring_put(petrel__rings_t *r, int ring, const struct iovec *iov, int n);
/* Wake the holders of the other rings that have not been woken since they
 * last read: eventfd writes (one each), skipping `self`.  Returns how many
 * were written. */
unsigned petrel__rings_wake(petrel__rings_t *r, int self);

/* Reader: the eventfd that wakes the holder of `ring`; and, once woken,
 * petrel__rings_woken() before reading every other ring (a record written
 * after that wakes it again). */
int petrel__rings_fd(const petrel__rings_t *r, int ring);
void petrel__rings_woken(petrel__rings_t *r, int ring);
/* The next record of ring `ring` after `cur`, copied into buf (`cap` bytes,
 * at least petrel__rings_max_record): its length, or -1 when there is none
 * now.  Records overwritten before they were read are skipped and counted
 * in cur->lost. */
ssize_t petrel__ring_get(petrel__rings_t *r, int ring, petrel__ring_cursor_t *cur, void *buf,
                         size_t cap);

#endif /* PETREL_RING_H */
