/*
 * options.h -- the command-line options, declared where they live.
 *
 * Each subsystem declares the options it reads as a table of its own
 * (name, value, kind, range, default, help, the field of petrel__config_t
 * it sets): the transport's in conn.c, the requests' limits in request.c,
 * HTTP/2's in h2.c, WebSocket's in ws.c, publish/subscribe's in pubsub.c,
 * the PROXY protocol's in proxy.c, the server's own in cli.c; a module's
 * in its descriptor (petrel_option_t of <petrel.h>, turned into these
 * rows by server/options.c).  The server
 * layer (server/options.c) parses the command line with them, applies
 * their defaults (petrel__config_defaults) and prints `petrel --help` from
 * them; doc/petrel.1 is checked against that output
 * (tests/integration/test_doc_options.sh).  Adding an option is a row of
 * its subsystem's table and the code that reads the field.
 */
#ifndef PETREL_OPTIONS_H
#define PETREL_OPTIONS_H

#include "runtime/settings.h"

#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum petrel__opt_kind {
    PETREL__OPT_FLAG,   /* no value: sets the bool field */
    PETREL__OPT_SIZE,   /* a number with an optional k, m or g suffix, in [min, max] */
    PETREL__OPT_SECS,   /* seconds, a fraction allowed, into milliseconds; 0 only when min is 0 */
    PETREL__OPT_TEXT,   /* the value as given (argv outlives the server) */
    PETREL__OPT_CHOICE, /* one of `choices`: the field takes its index */
    PETREL__OPT_CALL    /* `set` takes it */
} petrel__opt_kind_t;

typedef struct petrel__option {
    const char *name;  /* "max-body-size": --max-body-size */
    const char *value; /* what it takes, for --help ("BYTES"); NULL for a flag */
    const char *help;  /* --help's text, '\n' between its lines; NULL: not listed by itself */
    petrel__opt_kind_t kind;
    size_t off, width;          /* the field of petrel__config_t it sets (PETREL__OPT_FIELD) */
    uint64_t min, max;          /* SIZE: the range; SECS: min 0 when 0 is allowed */
    uint64_t def;               /* the default (SIZE, SECS in ms, CHOICE index); 0: none */
    const char *expect;         /* what a bad value is told: "a size from 1 byte to 1m" */
    const char *const *choices; /* CHOICE: the names, NULL-terminated */
    /* CALL: 0, or a negative PETREL_E* code for a bad value (then `expect`
     * is said), or an exit status when it said why itself. */
    int (*set)(petrel__config_t *cfg, const char *flag, const char *value, void *ctx);
    bool pow2; /* SIZE: a power of two */
    /* A module's row (petrel_option_t, server/options.c makes these): `off`
     * counts from `base`, its module's config, not from the configuration;
     * `call` is the row's own set (CALL, or a check after the others). */
    void *base;
    int (*call)(void *config, const char *value);
    const char *module; /* the module's name; NULL: petrel's own */
    bool dir;           /* TEXT: a readable directory when the module loads */
    bool loads;         /* giving it loads its module (PETREL_OPTION_LOADS) */
} petrel__option_t;

#define PETREL__OPT_FIELD(f)                                                                       \
    .off = offsetof(petrel__config_t, f), .width = sizeof(((petrel__config_t *)0)->f)

/* A subsystem's options: `section` heads them in --help (NULL: none);
 * `opts` ends with a zero row. */
typedef struct petrel__option_table {
    const char *owner;
    const char *section;
    const petrel__option_t *opts;
} petrel__option_table_t;

#endif /* PETREL_OPTIONS_H */
