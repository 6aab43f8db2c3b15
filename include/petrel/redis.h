/*
 * petrel/redis.h -- libpetrel-redis: publish/subscribe across instances
 * through Redis (pkg-config --cflags --libs petrel-redis).
 *
 * Install the bridge before petrel_main(); then --pubsub-redis HOST:PORT
 * (or unix:PATH) and --pubsub-redis-prefix PREFIX reach the other
 * instances (doc/pubsub.md, "Across instances"):
 *
 *   #include <petrel.h>
 *   #include <petrel/redis.h>
 *
 *   int main(int argc, char **argv)
 *   {
 *       petrel_pubsub_use_bridge(&petrel_redis_bridge);
 *       return petrel_main(argc, argv, my_builtin_modules);
 *   }
 *
 * The petrel command does this when it was built with hiredis.
 */
#ifndef PETREL_REDIS_PUBLIC_H
#define PETREL_REDIS_PUBLIC_H

#include <petrel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Redis bridge, on hiredis's asynchronous API in each worker's loop. */
PETREL_API extern const petrel_pubsub_bridge_t petrel_redis_bridge;

#ifdef __cplusplus
}
#endif

#endif /* PETREL_REDIS_PUBLIC_H */
