/*
 * main.c -- the `petrel` command: the library's command line with the
 * built-in modules (the table in modules/builtin.c is generated at build
 * time from the list of modules/ files) and, when it was built with
 * hiredis, the Redis bridge of publish/subscribe (libpetrel-redis).
 */
#include <petrel.h>
#include <petrel/pg.h>
#ifdef PETREL_WITH_REDIS
#include <petrel/redis.h>
#endif

extern const petrel_module_t *const petrel__builtin_modules[];

int main(int argc, char **argv)
{
    /* --version names the optional parts, built in or not */
    petrel_version_add(petrel_pg_supported() ? "PostgreSQL pool: yes (libpq)"
                                             : "PostgreSQL pool: no (built without libpq)");
#ifdef PETREL_WITH_REDIS
    petrel_pubsub_use_bridge(&petrel_redis_bridge);
    petrel_version_add("Redis bridge of publish/subscribe: yes (hiredis)");
#else
    petrel_version_add("Redis bridge of publish/subscribe: no (built without hiredis)");
#endif
    return petrel_main(argc, argv, petrel__builtin_modules);
}
