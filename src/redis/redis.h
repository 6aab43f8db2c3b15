/*
 * redis.h -- the Redis bridge of publish/subscribe (redis.c, on hiredis's
 * asynchronous API and the worker loop's fd watches): each worker publishes
 * what is published in it to the channel of the topic (a prefix and the
 * topic's name), subscribes to the channels of the topics it has
 * subscribers for, and hands what other instances published to the
 * subscribers (doc/pubsub.md, "Across instances").
 *
 * The bridge knows no WebSocket and no topic table: pubsub.c gives it two
 * callbacks (redis.c calls nothing of pubsub.c, so the two files do not
 * call each other in a circle).  Built without hiredis (configure
 * --without-redis), the bridge is absent: petrel__redis_config() refuses.
 */
#ifndef PETREL_REDIS_H
#define PETREL_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the bridge asks of publish/subscribe. */
typedef struct petrel__redis_ops {
    /* A message of another instance, or of another program, on `topic`. */
    void (*deliver)(const char *topic, size_t tlen, int binary, const void *data, size_t len);
    /* fn(topic, tlen, arg) for every topic with subscribers in this worker
     * (to subscribe again after a reconnect). */
    void (*each_topic)(void (*fn)(const char *topic, size_t tlen, void *arg), void *arg);
} petrel__redis_ops_t;

/* Counters of this worker's bridge. */
typedef struct petrel__redis_stats {
    uint64_t sent;        /* messages published to Redis */
    uint64_t received;    /* messages of other instances delivered from it */
    uint64_t unbridged;   /* published here while it was unreachable: not sent */
    uint64_t disconnects; /* times it became unreachable */
    int connected;        /* 1 up, 0 down, -1 no bridge */
} petrel__redis_stats_t;

/* Whether petrel was built with hiredis. */
bool petrel__redis_available(void);
/* Check and keep the address (HOST:PORT, or unix:PATH) and the channel
 * prefix; the name is resolved once, here.  0, or PETREL_EINVAL /
 * PETREL_ENOTFOUND with the reason in `err`.  Called in the master, before
 * the workers fork. */
int petrel__redis_config(const char *spec, const char *prefix, char *err, size_t errlen);
/* In a worker: connect (in the background: a Redis that is not there yet
 * is retried, local delivery goes on).  `instance` tells this instance's
 * messages from the others'.  `max_message` bounds what is delivered. */
int petrel__redis_start(const petrel__redis_ops_t *ops, uint64_t instance, size_t max_message);
void petrel__redis_stop(void);
bool petrel__redis_on(void);
/* The first subscriber of a topic came, the last one left. */
void petrel__redis_subscribe(const char *topic, size_t tlen);
void petrel__redis_unsubscribe(const char *topic, size_t tlen);
/* Publish a message to the topic's channel (dropped and counted while
 * Redis is unreachable). */
void petrel__redis_publish(const char *topic, size_t tlen, int binary, const void *data,
                           size_t len);
void petrel__redis_get_stats(petrel__redis_stats_t *st);

#endif /* PETREL_REDIS_H */
