/*
 * check_options.c -- unit tests of the option tables (runtime/options.h,
 * server/options.c): each row is well formed, the defaults petrel applies
 * are the ones its --help text gives, and every range is enforced at both
 * ends.
 */
#include "server/options.h"
#include "server/server.h"

#include "check_run.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

/* Every row: a unique name, a field that fits its kind, what a bad value
 * is told, and a text in --help (or a place after one that has it). */
START_TEST(test_rows)
{
    size_t n = petrel__options_count(petrel__option_tables);
    ck_assert_uint_gt(n, 40);
    for (size_t i = 0; i < n; i++) {
        const petrel__option_t *o = petrel__option_at(petrel__option_tables, i);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(o->name, petrel__option_at(petrel__option_tables, j)->name) != 0,
                          "--%s twice", o->name);
        switch (o->kind) {
        case PETREL__OPT_FLAG:
            ck_assert_msg(o->width == sizeof(bool) && o->value == NULL, "--%s", o->name);
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
            ck_assert_msg(o->set != NULL, "--%s: no set", o->name);
            break;
        }
        ck_assert_msg(o->off + o->width <= sizeof(petrel__config_t), "--%s", o->name);
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
    for (size_t i = 0; i < petrel__options_count(petrel__option_tables); i++) {
        const petrel__option_t *o = petrel__option_at(petrel__option_tables, i);
        if (!o->def || (o->kind != PETREL__OPT_SIZE && o->kind != PETREL__OPT_SECS))
            continue;
        const char *d = o->help ? strstr(o->help, "(default ") : NULL;
        ck_assert_msg(d, "--%s has a default its --help does not give", o->name);
        char v[32];
        ck_assert_int_eq(sscanf(d + 9, "%31[^) ;]", v), 1);
        uint64_t want;
        size_t sz;
        if (o->kind == PETREL__OPT_SECS)
            ck_assert(petrel__parse_secs(v, true, &want));
        else {
            ck_assert(petrel__parse_size(v, &sz));
            want = sz;
        }
        ck_assert_msg(want == o->def, "--%s: --help says %s, the table %llu", o->name, v,
                      (unsigned long long)o->def);
    }
}
END_TEST

/* Each range at both ends: the bounds are taken, one past them refused. */
START_TEST(test_ranges)
{
    for (size_t i = 0; i < petrel__options_count(petrel__option_tables); i++) {
        const petrel__option_t *o = petrel__option_at(petrel__option_tables, i);
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

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_rows);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_ranges);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
