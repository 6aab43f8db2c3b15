/*
 * pubsub.h -- publish/subscribe (pubsub.c): topics of WebSocket
 * subscribers in each worker, a message delivered to all of them framed
 * once, the other workers reached through shared-memory rings (ring.c) and
 * other instances through Redis (redis.c).  doc/pubsub.md has the design.
 *
 * The server layer (worker.c) sets it up: the master maps the rings before
 * it forks and gives each worker a ring of its own; each worker starts
 * reading the others' rings and, with --pubsub-redis, its Redis bridge.
 */
#ifndef PETREL_PUBSUB_H
#define PETREL_PUBSUB_H

#include "runtime/settings.h"

#include <stddef.h>
#include <sys/types.h>

#define PETREL__PUBSUB_MAX_TOPIC 256
#define PETREL__PUBSUB_MAX_MESSAGE (64u << 10)
#define PETREL__PUBSUB_MAX_SUBSCRIPTIONS 64
#define PETREL__PUBSUB_MAX_SUBSCRIBERS 100000
#define PETREL__PUBSUB_RING_SIZE (4u << 20)

/* Master: the rings for `workers` workers (none for one) and the Redis
 * address.  0, or a negative PETREL_E* code with the reason in `err`. */
int petrel__pubsub_master_init(const petrel__config_t *cfg, int workers, char *err, size_t errlen);
/* Around each fork of a worker: a ring for it, then its pid (0: the fork
 * failed). */
void petrel__pubsub_before_fork(void);
void petrel__pubsub_after_fork(pid_t pid);
/* A worker exited: its ring is free. */
void petrel__pubsub_exited(pid_t pid);
void petrel__pubsub_master_fini(void);

/* Worker: start (0, or a negative PETREL_E* code), stop publishing to the
 * other workers (a drain: the ring goes back to the master for the
 * successor), end. */
int petrel__pubsub_worker_init(const petrel__config_t *cfg);
void petrel__pubsub_drain(void);
void petrel__pubsub_worker_fini(void);
/* The rings of this process (tests). */
struct petrel__rings *petrel__pubsub_rings(void);

#endif /* PETREL_PUBSUB_H */
