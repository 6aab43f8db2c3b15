/*
 * check_metrics.c -- unit tests of src/runtime/metrics.c: where a request's figures
 * land (the buckets are bit counts: their edges are checked one by one),
 * the Prometheus text, the fold of a gone worker's block into the retired
 * counts (nothing counted twice or lost), module metrics and readiness
 * checks.  The whole instance (shared memory across real workers, a reload,
 * a killed worker) is tests/integration/test_admin_metrics.sh.
 */
#include "runtime/metrics.h"

#include "runtime/arena.h"
#include "petrel.h"
#include "check_run.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t *C(void)
{
    return petrel__stats->c;
}

static void zero(void)
{
    memset(petrel__stats, 0, sizeof(*petrel__stats));
}

/* The first of the n counters from `base` that counted something, or -1. */
static int first_counted(unsigned base, int n)
{
    for (int i = 0; i < n; i++)
        if (C()[base + (unsigned)i])
            return i;
    return -1;
}

/* The duration bucket a value lands in. */
static int dur_slot(uint64_t ns)
{
    zero();
    petrel__metrics_request(11, PETREL_GET, 200, ns, 0);
    return first_counted(PETREL__C_DUR, PETREL__M_DUR_SLOTS);
}

static int arena_slot(uint64_t bytes)
{
    zero();
    petrel__metrics_request(11, PETREL_GET, 200, 0, bytes);
    return first_counted(PETREL__C_ARENA, PETREL__M_ARENA_SLOTS);
}

/* Bucket i holds what is below 2^(14 + i) ns and at least the previous
 * bound: le = 2^(14 + i) - 1. */
START_TEST(test_duration_buckets)
{
    ck_assert_int_eq(dur_slot(0), 0);
    ck_assert_int_eq(dur_slot(1), 0);
    ck_assert_int_eq(dur_slot(16383), 0);
    ck_assert_int_eq(dur_slot(16384), 1);
    ck_assert_int_eq(dur_slot(32767), 1);
    ck_assert_int_eq(dur_slot(32768), 2);
    for (int i = 1; i < PETREL__M_DUR_BOUNDS; i++) {
        uint64_t edge = (uint64_t)1 << (PETREL__M_DUR_SHIFT + i);
        ck_assert_int_eq(dur_slot(edge - 1), i);
        ck_assert_int_eq(dur_slot(edge), i + 1);
    }
    ck_assert_int_eq(dur_slot(UINT64_MAX), 50); /* a slot, past the bounds: +Inf */
    ck_assert_int_lt(50, PETREL__M_DUR_SLOTS);
    zero();
    petrel__metrics_request(11, PETREL_GET, 200, 1000, 0);
    petrel__metrics_request(11, PETREL_GET, 200, 3000, 0);
    ck_assert_uint_eq(C()[PETREL__C_DUR_SUM_NS], 4000);
}
END_TEST

/* Bucket i holds what is below 2^(8 + 2i) bytes: 255, 1023, 4095, ... */
START_TEST(test_arena_buckets)
{
    ck_assert_int_eq(arena_slot(0), 0);
    ck_assert_int_eq(arena_slot(255), 0);
    ck_assert_int_eq(arena_slot(256), 1);
    ck_assert_int_eq(arena_slot(1023), 1);
    ck_assert_int_eq(arena_slot(1024), 2);
    ck_assert_int_eq(arena_slot(4095), 2);
    ck_assert_int_eq(arena_slot(4096), 3);
    ck_assert_int_eq(arena_slot((uint64_t)64 << 20), PETREL__M_ARENA_BOUNDS); /* +Inf */
    ck_assert_int_lt(arena_slot(UINT64_MAX), PETREL__M_ARENA_SLOTS);
}
END_TEST

static int req_slot(int version, int method, int status)
{
    zero();
    petrel__metrics_request(version, method, status, 0, 0);
    return first_counted(PETREL__C_REQUESTS,
                         PETREL__M_PROTOS * PETREL__M_METHODS * PETREL__M_CLASSES);
}

static int slot_of(int p, int m, int k)
{
    return (p * PETREL__M_METHODS + m) * PETREL__M_CLASSES + k;
}

START_TEST(test_request_labels)
{
    ck_assert_int_eq(req_slot(11, PETREL_GET, 200), slot_of(1, 0, 1));
    ck_assert_int_eq(req_slot(10, PETREL_HEAD, 304), slot_of(0, 1, 2));
    ck_assert_int_eq(req_slot(20, PETREL_POST, 404), slot_of(2, 2, 3));
    ck_assert_int_eq(req_slot(20, PETREL_OPTIONS, 599), slot_of(2, 6, 4));
    ck_assert_int_eq(req_slot(11, 0, 101), slot_of(1, 7, 0)); /* another method, 1xx */
    ck_assert_int_eq(req_slot(11, PETREL_GET, 199), slot_of(1, 0, 0));
    ck_assert_int_eq(req_slot(11, PETREL_DELETE, 500), slot_of(1, 4, 4));
    /* no status petrel sends is out of 100-599; one would still land inside */
    int n = PETREL__M_PROTOS * PETREL__M_METHODS * PETREL__M_CLASSES;
    static const int odd[] = {0, 42, 600, 999, 1000, 65535, -1};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        int s = req_slot(11, PETREL_GET, odd[i]);
        ck_assert_int_ge(s, 0);
        ck_assert_int_lt(s, n);
    }
}
END_TEST

/* The text: families once, cumulative buckets, +Inf = _count. */
START_TEST(test_text)
{
    zero();
    petrel__metrics_request(11, PETREL_GET, 200, 20000, 300);
    petrel__metrics_request(11, PETREL_GET, 404, (uint64_t)1 << 40, 5000);
    petrel__stats->c[PETREL__C_CONN_ACCEPTED] = 7;
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    size_t len;
    char *t = petrel__metrics_text(&a, &len);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(strlen(t), len);
    ck_assert_ptr_nonnull(strstr(t, "petrel_connections_accepted_total 7\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_requests_total{protocol=\"HTTP/1.1\",method=\"GET\","
                                    "status=\"2xx\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_requests_total{protocol=\"HTTP/1.1\",method=\"GET\","
                                    "status=\"4xx\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "petrel_request_duration_seconds_bucket{le=\"0.000016383\"} 0\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "petrel_request_duration_seconds_bucket{le=\"0.000032767\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "petrel_request_duration_seconds_bucket{le=\"17.179869183\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_request_duration_seconds_bucket{le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_request_duration_seconds_count 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_request_arena_bytes_bucket{le=\"1023\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_request_arena_bytes_bucket{le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(t, "petrel_request_arena_bytes_sum 5300\n"));
    /* each # TYPE once */
    for (const char *p = t; (p = strstr(p, "# TYPE ")) != NULL; p++) {
        const char *e = strchr(p + 7, ' ');
        char name[128];
        snprintf(name, sizeof(name), "# TYPE %.*s ", (int)(e - p - 7), p + 7);
        ck_assert_msg(strstr(p + 1, name) == NULL, "%s twice", name);
    }
    petrel__arena_clear(&a);
}
END_TEST

START_TEST(test_module_metrics)
{
    ck_assert_ptr_null(petrel_metric_counter(NULL, "", "x"));
    ck_assert_ptr_null(petrel_metric_counter(NULL, "9lives", "x"));
    ck_assert_ptr_null(petrel_metric_counter(NULL, "a-b", "x"));
    ck_assert_ptr_null(petrel_metric_counter(NULL, "__reserved", "x"));
    ck_assert_ptr_null(petrel_metric_counter(NULL, "ok_total", "two\nlines"));
    petrel_metric_t *c = petrel_metric_counter(NULL, "mod_things_total", "Things.");
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_eq(petrel_metric_counter(NULL, "mod_things_total", "Again."), c);
    ck_assert_ptr_null(petrel_metric_gauge(NULL, "mod_things_total", "a gauge now"));
    petrel_metric_t *g = petrel_metric_gauge(NULL, "mod:level", NULL);
    ck_assert_ptr_nonnull(g);
    petrel_metric_add(c, 3);
    petrel_metric_add(c, -5);  /* a counter does not go back */
    petrel_metric_set(c, 100); /* nor is it set */
    petrel_metric_add(g, -2);
    petrel_metric_set(g, 42);
    petrel_metric_add(NULL, 1);
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    size_t len;
    char *t = petrel__metrics_text(&a, &len);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE mod_things_total counter\nmod_things_total 3\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE mod:level gauge\nmod:level 42\n"));
    petrel__arena_clear(&a);
    char name[32];
    int made = 0;
    for (int i = 0; i < PETREL__M_USER_MAX + 2; i++) {
        snprintf(name, sizeof(name), "many_%d_total", i);
        made += petrel_metric_counter(NULL, name, "") != NULL;
    }
    ck_assert_int_eq(made, PETREL__M_USER_MAX - 2); /* two taken above */
}
END_TEST

/* Label values in the text format: a backslash, a double quote and a line
 * feed escaped as \\, \" and \n; nothing can end a label early. */
START_TEST(test_label_escape)
{
    int s = petrel__metrics_upstream_slot("app", "unix:/run/a\"b\\c\nd.sock");
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(petrel__metrics_upstream_slot("app", "unix:/run/a\"b\\c\nd.sock"), s);
    ck_assert_int_ge(petrel__metrics_upstream_slot("app", NULL), 0);
    petrel__metrics_up(s)->connects = 5;
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    size_t len;
    char *t = petrel__metrics_text(&a, &len);
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(strstr(t, "petrel_upstream_connects_total{upstream=\"app\","
                            "address=\"unix:/run/a\\\"b\\\\c\\nd.sock\"} 5\n") != NULL,
                  "%s", t);
    petrel__arena_clear(&a);
}
END_TEST

/* Blocks in shared memory: a gone worker's counts join the retired ones,
 * once; its block is given out again zeroed; readiness. */
START_TEST(test_fold)
{
    ck_assert_int_eq(petrel__metrics_init(2), 0);
    ck_assert_int_eq(petrel_ready_set(NULL, "db", 0), PETREL_ESTATE); /* not a worker */
    int b1 = petrel__metrics_block_take(), b2 = petrel__metrics_block_take();
    ck_assert_int_ge(b1, 0);
    ck_assert_int_ne(b1, b2);
    petrel__metrics_block_owner(b1, 1001);
    petrel__metrics_block_owner(b2, 1002);
    petrel__metrics_block_enter(b1); /* this process plays worker 1001 */
    petrel__count(PETREL__C_CONN_ACCEPTED, 5);
    petrel__gauge_add(PETREL__G_CONN_OPEN, 2);
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    size_t len;
    ck_assert_ptr_nonnull(
        strstr(petrel__metrics_text(&a, &len), "petrel_connections_accepted_total 5\n"));
    ck_assert_ptr_nonnull(strstr(petrel__metrics_text(&a, &len), "petrel_connections_open 2\n"));
    ck_assert_int_eq(petrel_ready_set(NULL, "db", 0), 0);
    char why[64];
    ck_assert(!petrel__metrics_ready(why, sizeof(why)));
    ck_assert_str_eq(why, "db is down");
    ck_assert_int_eq(petrel_ready_set(NULL, "db", 1), 0);
    ck_assert(petrel__metrics_ready(why, sizeof(why)));
    for (int i = 0; i < PETREL__M_CHECKS - 1; i++) {
        char n[16];
        snprintf(n, sizeof(n), "c%d", i);
        ck_assert_int_eq(petrel_ready_set(NULL, n, 1), 0);
    }
    ck_assert_int_eq(petrel_ready_set(NULL, "one-too-many", 1), PETREL_ELIMIT);
    ck_assert_int_eq(petrel_ready_set(NULL, "a-name-of-more-than-31-bytes-xxxx", 1), PETREL_EINVAL);
    /* worker 1001 exits: its counters stay, its gauges go */
    petrel__metrics_worker_gone(1001);
    ck_assert_ptr_nonnull(
        strstr(petrel__metrics_text(&a, &len), "petrel_connections_accepted_total 5\n"));
    ck_assert_ptr_nonnull(strstr(petrel__metrics_text(&a, &len), "petrel_connections_open 0\n"));
    petrel__metrics_worker_gone(1001); /* twice: nothing more */
    ck_assert_ptr_nonnull(
        strstr(petrel__metrics_text(&a, &len), "petrel_connections_accepted_total 5\n"));
    int b3 = petrel__metrics_block_take();
    ck_assert_int_eq(b3, b1); /* reused ... */
    petrel__metrics_block_owner(b3, 1003);
    petrel__metrics_block_enter(b3);
    ck_assert_uint_eq(petrel__stats->c[PETREL__C_CONN_ACCEPTED], 0); /* ... zeroed */
    petrel__count(PETREL__C_CONN_ACCEPTED, 1);
    ck_assert_ptr_nonnull(
        strstr(petrel__metrics_text(&a, &len), "petrel_connections_accepted_total 6\n"));
    /* a fork that failed gives its block back */
    int b4 = petrel__metrics_block_take();
    petrel__metrics_block_owner(b4, 0);
    ck_assert_int_eq(petrel__metrics_block_take(), b4);
    petrel__metrics_instance_set(PETREL__I_DRAINING, 1);
    ck_assert(!petrel__metrics_ready(why, sizeof(why)));
    ck_assert_str_eq(why, "draining");
    petrel__arena_clear(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("private");
    tcase_add_test(tc, test_duration_buckets);
    tcase_add_test(tc, test_arena_buckets);
    tcase_add_test(tc, test_request_labels);
    tcase_add_test(tc, test_label_escape);
    tcase_add_test(tc, test_text);
    tcase_add_test(tc, test_module_metrics);
    suite_add_tcase(s, tc);
    tc = tcase_create("shared");
    tcase_add_test(tc, test_fold);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
