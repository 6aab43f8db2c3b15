/*
 * server/options.h -- the command line from the subsystems' option tables
 * (runtime/options.h): options.c parses values, applies defaults and
 * prints --help; server.c holds the server's own tables and applies the
 * defaults of every table; cli.c holds the command line's own options and
 * the list of all of them in the order of --help.
 */
#ifndef PETREL_SERVER_OPTIONS_H
#define PETREL_SERVER_OPTIONS_H

#include "runtime/options.h"

#include <stdio.h>

/* A list of tables is NULL-terminated. */

/* Every option of the command line, in the order of --help (cli.c). */
extern const petrel__option_table_t *const petrel__option_tables[];

/* The server's own options (server.c): in the first part of --help, and
 * in its part for deployments. */
extern const petrel__option_table_t petrel__server_option_table;
extern const petrel__option_table_t petrel__server_deploy_option_table;
extern const petrel__option_table_t petrel__server_fault_option_table;

/* The defaults of the tables into `cfg` (petrel__config_defaults). */
void petrel__options_defaults(petrel__config_t *cfg, const petrel__option_table_t *const *tables);
/* Set option `o` from `value` (NULL for a flag), given as `flag`: 0, a
 * negative PETREL_E* code for a bad value (say o->expect), or the exit
 * status of a CALL that said why itself. */
int petrel__option_set(petrel__config_t *cfg, const petrel__option_t *o, const char *flag,
                       const char *value, void *ctx);
/* The options part of --help. */
void petrel__options_help(FILE *f, const petrel__option_table_t *const *tables);
/* The options of the tables, numbered in their order. */
size_t petrel__options_count(const petrel__option_table_t *const *tables);
const petrel__option_t *petrel__option_at(const petrel__option_table_t *const *tables, size_t i);

/* A size (k, m, g suffixes; at most 1t) and a number of seconds (a
 * fraction allowed, at most a year; 0 only when `zero_ok`) into ms. */
bool petrel__parse_size(const char *s, size_t *out);
bool petrel__parse_secs(const char *s, bool zero_ok, uint64_t *ms);

#endif /* PETREL_SERVER_OPTIONS_H */
