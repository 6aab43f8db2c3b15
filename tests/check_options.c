/*
 * check_options.c -- unit tests of the option tables (runtime/options.h,
 * server/options.c): each row is well formed, the defaults petrel applies
 * are the ones its --help text gives, and every range is enforced at both
 * ends: petrel's own rows and a module's (petrel_option_t, here those of
 * the built-in module static), which options.c turns into rows of petrel's;
 * and the parsers of a size and a duration every option and module shares
 * (petrel_parse_size(), petrel_parse_duration()).
 */
#include "server/options.h"
#include "server/server.h"

#include "petrel/static.h"

#include "check_run.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* petrel's tables and the static module's, as the petrel command has them. */
static const petrel__option_table_t *tables[64];
static petrel__option_table_t static_table;

static void tables_init(void)
{
    size_t n = 0;
    while (petrel__option_tables[n]) {
        tables[n] = petrel__option_tables[n];
        n++;
    }
    if (petrel__module_option_table(&petrel_module_static, &static_table) < 0)
        abort();
    tables[n] = &static_table;
    petrel__module_options_defaults(&petrel_module_static);
}

/* Every row: a unique name, a field that fits its kind, what a bad value
 * is told, and a text in --help (or a place after one that has it). */
START_TEST(test_rows)
{
    ck_assert_ptr_nonnull(static_table.section);
    ck_assert_str_eq(static_table.section, "The module static:");
    size_t n = petrel__options_count(tables);
    ck_assert_uint_gt(n, 40);
    for (size_t i = 0; i < n; i++) {
        const petrel__option_t *o = petrel__option_at(tables, i);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(o->name, petrel__option_at(tables, j)->name) != 0, "--%s twice",
                          o->name);
        switch (o->kind) {
        case PETREL__OPT_FLAG:
            ck_assert_msg(o->width == (o->module ? sizeof(int) : sizeof(bool)) && o->value == NULL,
                          "--%s", o->name);
            break;
        case PETREL__OPT_SIZE:
        case PETREL__OPT_SECS:
        case PETREL__OPT_CHOICE:
            ck_assert_msg(o->width == 1 || o->width == 4 || o->width == 8, "--%s: width %zu",
                          o->name, o->width);
            ck_assert_msg(o->expect && o->value, "--%s: no expect or value", o->name);
            ck_assert_msg(o->kind != PETREL__OPT_CHOICE || o->choices, "--%s", o->name);
            ck_assert_msg(o->kind != PETREL__OPT_SIZE || o->min <= o->max, "--%s", o->name);
            break;
        case PETREL__OPT_TEXT:
            ck_assert_msg(o->width == sizeof(char *) && o->value, "--%s", o->name);
            break;
        case PETREL__OPT_CALL:
            ck_assert_msg(o->set != NULL || o->call != NULL, "--%s: no set", o->name);
            break;
        }
        if (o->module == NULL)
            ck_assert_msg(o->off + o->width <= sizeof(petrel__config_t), "--%s", o->name);
        else
            /* a module's row: a field of its config, a section of its own in
             * --help, what a value its check refuses is told */
            ck_assert_msg(o->base && o->width > 0 && !o->set && (!o->call || o->expect), "--%s",
                          o->name);
        ck_assert_msg(o->help || i > 0, "--%s: no help", o->name);
    }
}
END_TEST

/* The defaults: the values the server had before the tables held them,
 * and, for each row with a default, the one its --help text names. */
START_TEST(test_defaults)
{
    petrel__config_t c;
    petrel__config_defaults(&c);
    ck_assert_uint_eq(c.max_header_size, 16384);
    ck_assert_uint_eq(c.max_uri_size, 8192);
    ck_assert_uint_eq(c.max_body_size, 16u << 20);
    ck_assert_uint_eq(c.max_connections, 10000);
    ck_assert_uint_eq(c.max_pipelined, 16);
    ck_assert_uint_eq(c.header_timeout_ms, 10000);
    ck_assert_uint_eq(c.keepalive_timeout_ms, 60000);
    ck_assert_uint_eq(c.send_timeout_ms, 60000);
    ck_assert_uint_eq(c.drain_timeout_ms, 10000);
    ck_assert_uint_eq(c.handler_timeout_ms, 30000);
    ck_assert_uint_eq(c.body_timeout_ms, 10000);
    ck_assert_uint_eq(c.body_min_rate, 1024);
    ck_assert_uint_eq(c.init_timeout_ms, 30000);
    ck_assert_uint_eq(c.watchdog_timeout_ms, 5000);
    ck_assert_int_eq(c.restart_limit, 5);
    ck_assert_uint_eq(c.admin_max_connections, 256);
    ck_assert_uint_eq(c.memory_reserve, 256u << 10);
    ck_assert_uint_eq(c.memory_release_delay_ms, 1000);
    ck_assert_uint_eq(c.h2_reset_burst, 1000);
    ck_assert_uint_eq(c.h2_reset_rate, 33);
    ck_assert_int_eq(c.workers, 1);
    ck_assert_int_eq(c.log_level, PETREL_LOG_INFO);
    ck_assert_uint_eq(c.max_proxy_header_size, 4096);
    ck_assert_uint_eq(c.h2_max_concurrent_streams, 0); /* 0: h2.c's own default */
    for (size_t i = 0; i < petrel__options_count(tables); i++) {
        const petrel__option_t *o = petrel__option_at(tables, i);
        if (!o->def || (o->kind != PETREL__OPT_SIZE && o->kind != PETREL__OPT_SECS))
            continue;
        const char *d = o->help ? strstr(o->help, "(default ") : NULL;
        ck_assert_msg(d, "--%s has a default its --help does not give", o->name);
        char v[32];
        ck_assert_int_eq(sscanf(d + 9, "%31[^) ;]", v), 1);
        uint64_t want;
        size_t sz;
        if (o->kind == PETREL__OPT_SECS)
            ck_assert_int_eq(petrel_parse_duration(v, &want), 0);
        else {
            ck_assert_int_eq(petrel_parse_size(v, &sz), 0);
            want = sz;
        }
        ck_assert_msg(want == o->def, "--%s: --help says %s, the table %llu", o->name, v,
                      (unsigned long long)o->def);
        if (o->module) {
            /* in the module's config before anything is given */
            uint64_t have = 0;
            memcpy(&have, (char *)o->base + o->off, o->width);
            ck_assert_msg(have == o->def, "--%s: the module's field holds %llu", o->name,
                          (unsigned long long)have);
        }
    }
}
END_TEST

/* Each range at both ends: the bounds are taken, one past them refused. */
START_TEST(test_ranges)
{
    for (size_t i = 0; i < petrel__options_count(tables); i++) {
        const petrel__option_t *o = petrel__option_at(tables, i);
        if (o->kind != PETREL__OPT_SIZE || o->pow2)
            continue;
        petrel__config_t c;
        petrel__config_defaults(&c);
        char v[32], flag[64];
        snprintf(flag, sizeof(flag), "--%s", o->name);
        snprintf(v, sizeof(v), "%llu", (unsigned long long)o->max);
        ck_assert_msg(petrel__option_set(&c, o, flag, v, NULL) == 0, "%s %s", flag, v);
        snprintf(v, sizeof(v), "%llu", (unsigned long long)o->max + 1);
        ck_assert_msg(petrel__option_set(&c, o, flag, v, NULL) < 0, "%s %s", flag, v);
        snprintf(v, sizeof(v), "%llu", (unsigned long long)o->min);
        ck_assert_msg(petrel__option_set(&c, o, flag, v, NULL) == 0, "%s %s", flag, v);
        if (o->min > 0) {
            snprintf(v, sizeof(v), "%llu", (unsigned long long)o->min - 1);
            ck_assert_msg(petrel__option_set(&c, o, flag, v, NULL) < 0, "%s %s", flag, v);
        }
        ck_assert_msg(petrel__option_set(&c, o, flag, "12x", NULL) < 0, "%s 12x", flag);
    }
}
END_TEST

/* A module's row of each kind, as options.c turns it into one of petrel's:
 * the field of its kind in the module's struct, the defaults, the range,
 * the module's own check. */
typedef struct demo_conf {
    int verbose;
    size_t limit;
    uint64_t wait_ms;
    const char *name, *dir;
    int mode;
    int calls;
} demo_conf_t;

static demo_conf_t demo;

static int demo_call(void *config, const char *value)
{
    demo_conf_t *c = config;
    c->calls++;
    return value && strcmp(value, "bad") == 0 ? PETREL_EINVAL : 0;
}

static const char *const demo_modes[] = {"fast", "slow", NULL};

static const petrel_option_t demo_options[] = {
    {.name = "demo-verbose",
     .kind = PETREL_OPTION_FLAG,
     .offset = offsetof(demo_conf_t, verbose),
     .help = "talk"},
    {.name = "demo-limit",
     .value = "BYTES",
     .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(demo_conf_t, limit),
     .min = 1,
     .max = 4096,
     .def = 1024,
     .expect = "a size from 1 to 4k",
     .help = "a limit (default 1k)"},
    {.name = "demo-wait",
     .value = "SECONDS",
     .kind = PETREL_OPTION_SECS,
     .offset = offsetof(demo_conf_t, wait_ms),
     .min = 1,
     .def = 2500,
     .expect = "seconds",
     .help = "a wait (default 2.5)"},
    {.name = "demo-name",
     .value = "TEXT",
     .kind = PETREL_OPTION_TEXT,
     .offset = offsetof(demo_conf_t, name),
     .set = demo_call,
     .expect = "not 'bad'",
     .help = "a name"},
    {.name = "demo-dir",
     .value = "DIR",
     .kind = PETREL_OPTION_DIR,
     .offset = offsetof(demo_conf_t, dir),
     .flags = PETREL_OPTION_LOADS,
     .help = "a directory"},
    {.name = "demo-mode",
     .value = "fast|slow",
     .kind = PETREL_OPTION_CHOICE,
     .offset = offsetof(demo_conf_t, mode),
     .choices = demo_modes,
     .def = 1,
     .expect = "fast or slow",
     .help = "a mode (default slow)"},
    {.name = "demo-call",
     .value = "X",
     .kind = PETREL_OPTION_CALL,
     .set = demo_call,
     .expect = "not 'bad'",
     .help = NULL},
    {.name = NULL},
};

static const petrel_module_t demo_module = {PETREL_ABI_VERSION, "demo", NULL, NULL, NULL, NULL,
                                            demo_options,       &demo};

START_TEST(test_module_rows)
{
    petrel__option_table_t t;
    ck_assert_int_eq(petrel__module_option_table(&demo_module, &t), 0);
    ck_assert_str_eq(t.section, "The module demo:");
    ck_assert_uint_eq(petrel__options_count((const petrel__option_table_t *[]){&t, NULL}), 7);
    petrel__module_options_defaults(&demo_module);
    ck_assert_uint_eq(demo.limit, 1024);
    ck_assert_uint_eq(demo.wait_ms, 2500);
    ck_assert_int_eq(demo.mode, 1);
    const petrel__option_t *o = t.opts;
    ck_assert(o[0].module && strcmp(o[0].module, "demo") == 0 && o[0].base == &demo);
    ck_assert_int_eq(petrel__option_set(NULL, &o[0], "--demo-verbose", NULL, NULL), 0);
    ck_assert_int_eq(demo.verbose, 1);
    ck_assert_int_eq(petrel__option_set(NULL, &o[1], "--demo-limit", "4k", NULL), 0);
    ck_assert_uint_eq(demo.limit, 4096);
    ck_assert_int_lt(petrel__option_set(NULL, &o[1], "--demo-limit", "4097", NULL), 0);
    ck_assert_int_lt(petrel__option_set(NULL, &o[1], "--demo-limit", "0", NULL), 0);
    ck_assert_int_eq(petrel__option_set(NULL, &o[2], "--demo-wait", "0.5", NULL), 0);
    ck_assert_uint_eq(demo.wait_ms, 500);
    ck_assert_int_lt(petrel__option_set(NULL, &o[2], "--demo-wait", "0", NULL), 0);
    ck_assert_int_eq(petrel__option_set(NULL, &o[3], "--demo-name", "x", NULL), 0);
    ck_assert_str_eq(demo.name, "x");
    ck_assert_int_lt(petrel__option_set(NULL, &o[3], "--demo-name", "bad", NULL), 0);
    ck_assert(o[4].dir && o[4].loads && o[4].kind == PETREL__OPT_TEXT);
    ck_assert_int_eq(petrel__option_set(NULL, &o[4], "--demo-dir", "/tmp", NULL), 0);
    ck_assert_str_eq(demo.dir, "/tmp");
    ck_assert_int_eq(petrel__option_set(NULL, &o[5], "--demo-mode", "fast", NULL), 0);
    ck_assert_int_eq(demo.mode, 0);
    ck_assert_int_lt(petrel__option_set(NULL, &o[5], "--demo-mode", "medium", NULL), 0);
    int calls = demo.calls;
    ck_assert_int_eq(petrel__option_set(NULL, &o[6], "--demo-call", "y", NULL), 0);
    ck_assert_int_lt(petrel__option_set(NULL, &o[6], "--demo-call", "bad", NULL), 0);
    ck_assert_int_eq(demo.calls, calls + 2);
    /* --help: the module's section, its rows as petrel's */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    petrel__options_help(f, (const petrel__option_table_t *[]){&t, NULL});
    fclose(f);
    ck_assert_msg(strstr(text, "\nThe module demo:\n  --demo-verbose") &&
                      strstr(text, "  --demo-limit BYTES") &&
                      strstr(text, "--demo-mode fast|slow, --demo-call"),
                  "%s", text);
    free(text);
    petrel__module_option_table_free(&t);
    /* a descriptor of ABI 2 ends before `options`: none are read */
    static const petrel_module_t old = {2, "old", NULL, NULL, NULL, NULL, demo_options, &demo};
    ck_assert_ptr_null(petrel__module_options(&old));
    /* nor of a later ABI than this petrel's, which may lay them out otherwise */
    static const petrel_module_t later = {PETREL_ABI_VERSION + 1, "later", NULL, NULL, NULL, NULL,
                                          demo_options,           &demo};
    ck_assert_ptr_null(petrel__module_options(&later));
}
END_TEST

START_TEST(test_parse_size)
{
    static const struct {
        const char *s;
        size_t v;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"64k", 64 << 10},
        {"64K", 64 << 10},
        {"3m", (size_t)3 << 20},
        {"1G", (size_t)1 << 30},
        {"1024g", (size_t)1 << 40},
        {"1099511627776", (size_t)1 << 40},
        {"007", 7},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 1;
        ck_assert_msg(petrel_parse_size(good[i].s, &v) == 0, "'%s' refused", good[i].s);
        ck_assert_msg(v == good[i].v, "'%s': %zu", good[i].s, v);
    }
    static const char *const bad[] = {
        "",
        "k",
        "-1",
        "-0",
        "+1",
        " 1",
        "1 ",
        "1.5k",
        "8x",
        "1kb",
        "1t",
        "0x10",
        "1025g",
        "1099511627777",
        "1048577m",
        "99999999999999999999999", /* overflows 64 bits */
        "18446744073709551616k",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 12345;
        ck_assert_msg(petrel_parse_size(bad[i], &v) == PETREL_EINVAL, "'%s' taken", bad[i]);
        ck_assert_uint_eq(v, 12345); /* left as it was */
    }
    size_t v;
    ck_assert_int_eq(petrel_parse_size(NULL, &v), PETREL_EINVAL);
    ck_assert_int_eq(petrel_parse_size("1", NULL), PETREL_EINVAL);
}
END_TEST

START_TEST(test_parse_duration)
{
    static const struct {
        const char *s;
        uint64_t ms;
    } good[] = {
        {"0", 0},
        {"0.0", 0},
        {"30", 30000},
        {"0.5", 500},
        {".5", 500},
        {"5.", 5000},
        {"1.2345", 1235},
        {"1.2344", 1234},
        {"0.0001", 1},
        {"0.0004", 1},
        {"0.0005", 1},
        {"0.9999", 1000},
        {"2.00000001", 2000},
        {"86400", 86400000},
        {"31536000", UINT64_C(31536000000)},
        {"31536000.000", UINT64_C(31536000000)},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = 1;
        ck_assert_msg(petrel_parse_duration(good[i].s, &v) == 0, "'%s' refused", good[i].s);
        ck_assert_msg(v == good[i].ms, "'%s': %llu", good[i].s, (unsigned long long)v);
    }
    static const char *const bad[] = {
        "",
        ".",
        "-1",
        "-0",
        "+1",
        " 1",
        "1 ",
        "1e3",
        "5s",
        "1..2",
        "1.2.3",
        "inf",
        "nan",
        "0x10",
        "31536000.001",
        "31536001",
        "99999999999999999999999",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        ck_assert_msg(petrel_parse_duration(bad[i], &v) == PETREL_EINVAL, "'%s' taken", bad[i]);
        ck_assert_uint_eq(v, 12345);
    }
    uint64_t v;
    ck_assert_int_eq(petrel_parse_duration(NULL, &v), PETREL_EINVAL);
    ck_assert_int_eq(petrel_parse_duration("1", NULL), PETREL_EINVAL);
}
END_TEST

int main(void)
{
    tables_init();
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_rows);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_module_rows);
    tcase_add_test(tc, test_parse_size);
    tcase_add_test(tc, test_parse_duration);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
