/*
 * options.c -- the command line from the option tables of the subsystems
 * (runtime/options.h): their defaults, a value of each kind, and the
 * --help text, over a list of tables: server.c's for the defaults, cli.c's
 * (all of them, in the order of --help) for the command line.
 */
#include "server/options.h"

#include "petrel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The column of --help where the text of an option starts. */
#define HELP_COL 26

static void store(petrel__config_t *cfg, const petrel__option_t *o, uint64_t v)
{
    char *f = (char *)cfg + o->off;
    switch (o->width) {
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

void petrel__options_defaults(petrel__config_t *cfg, const petrel__option_table_t *const *tables)
{
    for (const petrel__option_table_t *const *t = tables; *t; t++)
        for (const petrel__option_t *o = (*t)->opts; o->name; o++)
            if (o->def && o->kind != PETREL__OPT_CALL && o->kind != PETREL__OPT_TEXT)
                store(cfg, o, o->def);
}

bool petrel__parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return false;
    unsigned long long mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    }
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mul || v * mul > (1ull << 40))
        return false;
    *out = (size_t)(v * mul);
    return true;
}

bool petrel__parse_secs(const char *s, bool zero_ok, uint64_t *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno || !(v >= 0 && v <= 86400.0 * 365) ||
        (v == 0 && !zero_ok))
        return false;
    *ms = (uint64_t)(v * 1000.0 + 0.5);
    if (*ms == 0 && v > 0)
        *ms = 1;
    return true;
}

int petrel__option_set(petrel__config_t *cfg, const petrel__option_t *o, const char *flag,
                       const char *value, void *ctx)
{
    switch (o->kind) {
    case PETREL__OPT_FLAG:
        store(cfg, o, 1);
        return 0;
    case PETREL__OPT_SIZE: {
        size_t v;
        if (!petrel__parse_size(value, &v) || v < o->min || v > o->max ||
            (o->pow2 && (v & (v - 1))))
            return PETREL_EINVAL;
        store(cfg, o, v);
        return 0;
    }
    case PETREL__OPT_SECS: {
        uint64_t ms;
        if (!petrel__parse_secs(value, o->min == 0, &ms))
            return PETREL_EINVAL;
        store(cfg, o, ms);
        return 0;
    }
    case PETREL__OPT_TEXT:
        memcpy((char *)cfg + o->off, &value, sizeof(value));
        return 0;
    case PETREL__OPT_CHOICE:
        for (uint64_t i = 0; o->choices[i]; i++)
            if (strcmp(value, o->choices[i]) == 0) {
                store(cfg, o, i);
                return 0;
            }
        return PETREL_EINVAL;
    case PETREL__OPT_CALL:
        return o->set(cfg, flag, value, ctx);
    }
    return PETREL_EINVAL;
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
