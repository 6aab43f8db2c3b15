/*
 * options.c -- the command line from the option tables of the subsystems
 * (runtime/options.h): their defaults, a value of each kind, and the
 * --help text, over a list of tables: server.c's for the defaults, cli.c's
 * (all of them, in the order of --help) for the command line, and after
 * them the modules' (petrel_option_t rows of <petrel.h>, turned into rows
 * of petrel's, the fields they set in the module's own config; module.c
 * gathers them).
 */
#include "server/options.h"

#include "petrel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The column of --help where the text of an option starts. */
#define HELP_COL 26

static void store(char *f, size_t width, uint64_t v)
{
    switch (width) {
    case 1: {
        bool b = v != 0;
        memcpy(f, &b, 1);
        break;
    }
    case 4: {
        uint32_t u = (uint32_t)v;
        memcpy(f, &u, 4);
        break;
    }
    default: {
        uint64_t u = v;
        memcpy(f, &u, 8);
        break;
    }
    }
}

/* The field of option `o`: in its module's config, or in `cfg`. */
static char *field(petrel__config_t *cfg, const petrel__option_t *o)
{
    return (o->base ? (char *)o->base : (char *)cfg) + o->off;
}

void petrel__options_defaults(petrel__config_t *cfg, const petrel__option_table_t *const *tables)
{
    for (const petrel__option_table_t *const *t = tables; *t; t++)
        for (const petrel__option_t *o = (*t)->opts; o->name; o++)
            if (o->def && o->kind != PETREL__OPT_CALL && o->kind != PETREL__OPT_TEXT)
                store(field(cfg, o), o->width, o->def);
}

/* The largest size petrel_parse_size() takes: 1t. */
#define SIZE_LIMIT (UINT64_C(1) << 40)
/* The longest duration petrel_parse_duration() takes: a year, in seconds. */
#define SECS_LIMIT (UINT64_C(86400) * 365)

int petrel_parse_size(const char *s, size_t *out)
{
    if (s == NULL || out == NULL)
        return PETREL_EINVAL;
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (uint64_t)(*p - '0')) > SIZE_LIMIT)
            return PETREL_EINVAL; /* and before it could overflow */
    if (p == s)
        return PETREL_EINVAL;
    unsigned shift = 0;
    switch (*p) {
    case 'k':
    case 'K':
        shift = 10, p++;
        break;
    case 'm':
    case 'M':
        shift = 20, p++;
        break;
    case 'g':
    case 'G':
        shift = 30, p++;
        break;
    }
    if (*p != '\0' || v > SIZE_LIMIT >> shift)
        return PETREL_EINVAL;
    *out = (size_t)(v << shift);
    return 0;
}

int petrel_parse_duration(const char *s, uint64_t *ms)
{
    if (s == NULL || ms == NULL)
        return PETREL_EINVAL;
    uint64_t secs = 0;
    unsigned tenths = 0; /* of a millisecond: the fraction's first four digits */
    int ndigits = 0, nfrac = 0;
    bool frac_nonzero = false;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++, ndigits++)
        if ((secs = secs * 10 + (uint64_t)(*p - '0')) > SECS_LIMIT)
            return PETREL_EINVAL; /* and before it could overflow */
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, ndigits++, nfrac++) {
            if (nfrac < 4)
                tenths = tenths * 10 + (unsigned)(*p - '0');
            frac_nonzero |= *p != '0';
        }
    if (ndigits == 0 || *p != '\0' || (secs == SECS_LIMIT && frac_nonzero))
        return PETREL_EINVAL;
    for (int n = nfrac; n < 4; n++)
        tenths *= 10;
    uint64_t v = secs * 1000 + (tenths + 5) / 10; /* to the nearest millisecond */
    *ms = v == 0 && frac_nonzero ? 1 : v;
    return 0;
}

static int set_value(petrel__config_t *cfg, const petrel__option_t *o, const char *flag,
                     const char *value, void *ctx)
{
    char *f = field(cfg, o);
    switch (o->kind) {
    case PETREL__OPT_FLAG:
        store(f, o->width, 1);
        return 0;
    case PETREL__OPT_SIZE: {
        size_t v;
        if (petrel_parse_size(value, &v) < 0 || v < o->min || v > o->max ||
            (o->pow2 && (v & (v - 1))))
            return PETREL_EINVAL;
        store(f, o->width, v);
        return 0;
    }
    case PETREL__OPT_SECS: {
        uint64_t ms;
        if (petrel_parse_duration(value, &ms) < 0 || (ms == 0 && o->min != 0))
            return PETREL_EINVAL;
        store(f, o->width, ms);
        return 0;
    }
    case PETREL__OPT_TEXT:
        memcpy(f, &value, sizeof(value));
        return 0;
    case PETREL__OPT_CHOICE:
        for (uint64_t i = 0; o->choices[i]; i++)
            if (strcmp(value, o->choices[i]) == 0) {
                store(f, o->width, i);
                return 0;
            }
        return PETREL_EINVAL;
    case PETREL__OPT_CALL:
        return o->set ? o->set(cfg, flag, value, ctx) : 0;
    }
    return PETREL_EINVAL;
}

int petrel__option_set(petrel__config_t *cfg, const petrel__option_t *o, const char *flag,
                       const char *value, void *ctx)
{
    int rc = set_value(cfg, o, flag, value, ctx);
    if (rc == 0 && o->call) {
        /* a module's own set: it takes the value, or checks it */
        rc = o->call(o->base, value);
        if (rc > 0)
            rc = 0;
    }
    return rc;
}

void petrel__options_help(FILE *f, const petrel__option_table_t *const *tables)
{
    for (const petrel__option_table_t *const *t = tables; *t; t++) {
        if ((*t)->section)
            fprintf(f, "\n%s\n", (*t)->section);
        for (const petrel__option_t *o = (*t)->opts; o->name; o++) {
            if (o->help == NULL)
                continue; /* named after the one before it */
            int n =
                fprintf(f, "  --%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
            /* the options that follow it without a text of their own */
            for (const petrel__option_t *a = o + 1; a->name && a->help == NULL; a++)
                n += fprintf(f, ", --%s", a->name);
            if (*o->help == '\0') {
                fputc('\n', f);
                continue;
            }
            if (n > HELP_COL - 2)
                fprintf(f, "\n%*s", HELP_COL, "");
            else
                fprintf(f, "%*s", HELP_COL - n, "");
            for (const char *p = o->help; *p; p++) {
                fputc(*p, f);
                if (*p == '\n')
                    fprintf(f, "%*s", HELP_COL, "");
            }
            fputc('\n', f);
        }
    }
}

size_t petrel__options_count(const petrel__option_table_t *const *tables)
{
    size_t n = 0;
    for (const petrel__option_table_t *const *t = tables; *t; t++)
        for (const petrel__option_t *o = (*t)->opts; o->name; o++)
            n++;
    return n;
}

const petrel__option_t *petrel__option_at(const petrel__option_table_t *const *tables, size_t i)
{
    for (const petrel__option_table_t *const *t = tables; *t; t++)
        for (const petrel__option_t *o = (*t)->opts; o->name; o++)
            if (i-- == 0)
                return o;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The options of a module (petrel_option_t of <petrel.h>)                 */

const petrel_option_t *petrel__module_options(const petrel_module_t *m)
{
    /* a descriptor of ABI 2 ends before `options`; one of a later ABI than
     * this petrel's may lay them out otherwise (it is refused at load) */
    return m && m->abi_version >= 3 && m->abi_version <= PETREL_ABI_VERSION ? m->options : NULL;
}

void petrel__option_from_module(const petrel_module_t *m, const petrel_option_t *p,
                                petrel__option_t *o)
{
    *o = (petrel__option_t){.name = p->name,
                            .value = p->value,
                            .help = p->help,
                            .off = p->offset,
                            .min = p->min,
                            .max = p->max,
                            .def = p->def,
                            .expect = p->expect,
                            .choices = p->choices,
                            .base = m->config,
                            .call = p->set,
                            .module = m->name,
                            .loads = (p->flags & PETREL_OPTION_LOADS) != 0};
    switch (p->kind) {
    case PETREL_OPTION_FLAG:
        o->kind = PETREL__OPT_FLAG, o->width = sizeof(int);
        break;
    case PETREL_OPTION_SIZE:
        o->kind = PETREL__OPT_SIZE, o->width = sizeof(size_t);
        if (o->max == 0)
            o->max = SIZE_LIMIT; /* what petrel_parse_size takes */
        break;
    case PETREL_OPTION_SECS:
        o->kind = PETREL__OPT_SECS, o->width = sizeof(uint64_t);
        break;
    case PETREL_OPTION_DIR:
        o->dir = true;
        /* fall through */
    case PETREL_OPTION_TEXT:
        o->kind = PETREL__OPT_TEXT, o->width = sizeof(const char *);
        break;
    case PETREL_OPTION_CHOICE:
        o->kind = PETREL__OPT_CHOICE, o->width = sizeof(int);
        break;
    default:
        o->kind = PETREL__OPT_CALL, o->width = 0;
        break;
    }
}

int petrel__module_option_table(const petrel_module_t *m, petrel__option_table_t *t)
{
    const petrel_option_t *opts = petrel__module_options(m);
    size_t n = 0;
    while (opts && opts[n].name)
        n++;
    *t = (petrel__option_table_t){m->name, NULL, NULL};
    petrel__option_t *rows = calloc(n + 1, sizeof(*rows));
    size_t len = strlen(m->name) + 32;
    char *section = malloc(len);
    if (rows == NULL || section == NULL) {
        free(rows);
        free(section);
        return PETREL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        petrel__option_from_module(m, &opts[i], &rows[i]);
    snprintf(section, len, "The module %s:", m->name);
    t->section = section;
    t->opts = rows;
    return 0;
}

void petrel__module_option_table_free(petrel__option_table_t *t)
{
    free((void *)t->section);
    free((void *)t->opts);
    t->section = NULL;
    t->opts = NULL;
}

void petrel__module_options_defaults(const petrel_module_t *m)
{
    const petrel_option_t *opts = petrel__module_options(m);
    for (size_t i = 0; opts && opts[i].name; i++) {
        petrel__option_t o;
        petrel__option_from_module(m, &opts[i], &o);
        if (o.def && o.kind != PETREL__OPT_CALL && o.kind != PETREL__OPT_TEXT)
            store(field(NULL, &o), o.width, o.def);
    }
}
