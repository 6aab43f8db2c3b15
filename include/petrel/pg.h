/*
 * petrel/pg.h -- libpetrel-pg: the PostgreSQL connection pool
 * (pkg-config --cflags --libs petrel-pg).
 *
 * The pool is a library of its own beside libpetrel, with libpq: libpetrel,
 * and the programs and modules that do not use PostgreSQL, do not need
 * libpq.  Its calls (petrel_pg_*) are declared in <petrel.h>, section
 * "PostgreSQL connection pool", where they have always been: a module
 * written against <petrel.h> compiles unchanged, the reference pages
 * (libpetrel(3), petrel_pg_open(3), ...) and `petrel --dev` know them, and
 * they name no libpq type, so they cost a file that does not use them
 * nothing (no -I for libpq's header).  Include this header to say that a
 * file uses the pool.
 *
 * A module file (.so) loaded into the `petrel` command needs nothing more
 * than `pkg-config --cflags --libs petrel` (or petrel-mod): the command has
 * the pool and exports it to the modules it loads, as it exports the rest
 * of the API.  A program that embeds petrel with petrel_main() and calls
 * petrel_pg_* (or has a module that does in its table of built-in modules)
 * links libpetrel-pg, a static library: `pkg-config --cflags --libs
 * petrel-pg`, which brings libpq.
 *
 * Built on a libpq older than 17 (no PQsendPipelineSync), libpetrel-pg
 * defines send() and recv(): the C library's, except inside the pool's
 * calls of PQpipelineSync, where they answer EAGAIN so that libpq keeps
 * each Sync for the pool's one write per connection at the end of the
 * loop turn.  A program that defines its own send() or recv() keeps them;
 * the pool then writes once per Sync.
 *
 * A libpetrel-pg built without libpq (configure --without-pgsql, or no
 * libpq found) has the same calls: petrel_pg_supported() returns 0 and
 * petrel_pg_open() fails, saying so.
 */
#ifndef PETREL_PG_H
#define PETREL_PG_H

#include <petrel.h>

#endif /* PETREL_PG_H */
