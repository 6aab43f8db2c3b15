/*
 * server/options.h -- the command line from the subsystems' option tables
 * (runtime/options.h): options.c parses values, applies defaults and
 * prints --help; server.c holds the server's own tables and applies the
 * defaults of every table; cli.c holds the command line's own options and
 * the list of all of them in the order of --help, and adds the tables of
 * the modules (their petrel_option_t rows, as petrel's rows here).
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

/* The options of module `m` (NULL: none, or a descriptor of ABI 2). */
const petrel_option_t *petrel__module_options(const petrel_module_t *m);
/* Row `p` of module `m` as a row of petrel's, into `o`. */
void petrel__option_from_module(const petrel_module_t *m, const petrel_option_t *p,
                                petrel__option_t *o);
/* The options of module `m` as a table of petrel's, its section in --help
 * named for the module: 0, or PETREL_ENOMEM; free it with
 * petrel__module_option_table_free. */
int petrel__module_option_table(const petrel_module_t *m, petrel__option_table_t *t);
void petrel__module_option_table_free(petrel__option_table_t *t);
/* The defaults of the options of module `m` into its config. */
void petrel__module_options_defaults(const petrel_module_t *m);

/* The option tables of a command line: petrel's, then the modules' (the
 * built-in ones', then those of the module files that --module names,
 * opened for it), each module's in a section of its own. */
typedef struct petrel__cli_tables {
    const petrel__option_table_t **all; /* NULL-terminated, in the order of --help */
    petrel__option_table_t *mods;       /* the modules' tables */
    int nmods;
    void **probes; /* the module files opened, until petrel__cli_tables_free */
    int nprobes;
} petrel__cli_tables_t;

/* (module.c makes them: petrel__cli_tables_make.) */

#endif /* PETREL_SERVER_OPTIONS_H */
