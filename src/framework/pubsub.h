/*
 * pubsub.h -- publish/subscribe (pubsub.c): topics of WebSocket
 * subscribers in each worker, a message delivered to all of them framed
 * once, the other workers reached through shared-memory rings (ring.c) and
 * other instances through a bridge (libpetrel-redis's, src/redis/redis.c).
 * doc/pubsub.md has the design.
 *
 * The server layer (worker.c) sets it up: the master maps the rings before
 * it forks and gives each worker a ring of its own; each worker starts
 * reading the others' rings and, with --pubsub-redis, its Redis bridge.
 */
#ifndef PETREL_PUBSUB_H
#define PETREL_PUBSUB_H

#include "runtime/settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PETREL__PUBSUB_MAX_TOPIC 256
#define PETREL__PUBSUB_MAX_MESSAGE (64u << 10)
#define PETREL__PUBSUB_MAX_SUBSCRIPTIONS 64
#define PETREL__PUBSUB_MAX_SUBSCRIBERS 100000
#define PETREL__PUBSUB_RING_SIZE (4u << 20)

/* ------------------------------------------------------------------------ */
/* The bridge to other instances (petrel_pubsub_use_bridge(): libpetrel-     */
/* redis's, src/redis/redis.c).  The core calls it only through this table;  */
/* it calls the core only through the public API and the two callbacks of   */
/* petrel__bridge_peer_t.                                                    */

/* What the bridge asks of publish/subscribe. */
typedef struct petrel__bridge_peer {
    /* A message of another instance, or of another program, on `topic`:
     * `binary` 1 or 0 as it was published, -1 when the bridge cannot tell
     * (pubsub.c then delivers it as text when it is UTF-8).  Returns false
     * when it was dropped (text that is not UTF-8). */
    bool (*deliver)(const char *topic, size_t tlen, int binary, const void *data, size_t len);
    /* fn(topic, tlen, arg) for every topic with subscribers in this worker
     * (to subscribe again after a reconnect). */
    void (*each_topic)(void (*fn)(const char *topic, size_t tlen, void *arg), void *arg);
} petrel__bridge_peer_t;

/* Counters of this worker's bridge. */
typedef struct petrel__bridge_stats {
    uint64_t sent;        /* messages published to the broker */
    uint64_t received;    /* messages of other instances delivered from it */
    uint64_t unbridged;   /* published here while it was unreachable: not sent */
    uint64_t disconnects; /* times it became unreachable */
    int connected;        /* 1 up, 0 down, -1 not started */
} petrel__bridge_stats_t;

struct petrel_pubsub_bridge {
    const char *name; /* "Redis": for --version and the messages */
    /* Check and keep the address (--pubsub-redis) and the channel prefix
     * (--pubsub-redis-prefix, NULL: the bridge's default).  Called in the
     * master, before the workers fork.  0, or PETREL_EINVAL /
     * PETREL_ENOTFOUND with the reason in `err`. */
    int (*config)(const char *spec, const char *prefix, char *err, size_t errlen);
    /* In a worker: connect (in the background; local delivery goes on
     * while the broker is away).  `instance` tells this instance's
     * messages from the others'; `max_message` bounds what is delivered. */
    int (*start)(const petrel__bridge_peer_t *peer, uint64_t instance, size_t max_message);
    void (*stop)(void);
    bool (*on)(void);
    /* The first subscriber of a topic came, the last one left. */
    void (*subscribe)(const char *topic, size_t tlen);
    void (*unsubscribe)(const char *topic, size_t tlen);
    /* Publish (dropped and counted while the broker is unreachable). */
    void (*publish)(const char *topic, size_t tlen, int binary, const void *data, size_t len);
    void (*get_stats)(petrel__bridge_stats_t *st);
};

/* --pubsub-redis SPEC with --pubsub-redis-prefix PREFIX: checked by the
 * installed bridge (refused without one).  0, or a negative PETREL_E* code
 * with the reason in `err`. */
int petrel__pubsub_bridge_config(const char *spec, const char *prefix, char *err, size_t errlen);

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

/* The options of publish/subscribe (--pubsub-*). */
extern const struct petrel__option_table petrel__pubsub_option_table;

#endif /* PETREL_PUBSUB_H */
