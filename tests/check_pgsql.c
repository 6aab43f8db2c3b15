/*
 * check_pgsql.c -- unit tests of src/pg/pgsql.c that need no database: the
 * settings and their parsing, a pool whose server does not answer (a
 * listening socket that never accepts: the connect timeout) or is not
 * there (no socket), the queue and its limit, callbacks that never run
 * from within the call that made the query, reconnection with backoff,
 * closing, and failing allocations.  The pool on a real PostgreSQL is
 * tested by tests/integration/test_pg_*.sh.
 */
#include "config.h"

#include "runtime/loop.h"
#include "petrel.h"

#include "check_util.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static petrel__loop_t L;
static int lfd = -1;     /* listens, never accepts */
static char silent[128]; /* a connection string to it */

static void setup(void)
{
    ck_assert_int_eq(petrel__loop_init(&L), 0);
    petrel__loop = &L;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(lfd, 64), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    snprintf(silent, sizeof(silent), "hostaddr=127.0.0.1 port=%d dbname=x user=x sslmode=disable",
             ntohs(a.sin_port));
}

static void teardown(void)
{
    close(lfd);
    petrel__loop_fini(&L);
    petrel__loop = NULL;
}

/* Run the loop until *flag >= want, for at most ms milliseconds. */
static void run_until(const int *flag, int want, int ms)
{
    petrel__loop_update_time(&L);
    uint64_t end = L.now_ms + (uint64_t)ms;
    while (*flag < want && L.now_ms < end)
        petrel__loop_run_once(&L, 20);
}

static void run_for(int ms)
{
    int never = 0;
    run_until(&never, 1, ms);
}

typedef struct got {
    int calls;
    int status;
    char sqlstate[6];
    char message[200];
} got_t;

static void on_result(const petrel_pg_result_t *res, void *data)
{
    got_t *g = data;
    g->calls++;
    g->status = petrel_pg_status(res);
    snprintf(g->sqlstate, sizeof(g->sqlstate), "%s", petrel_pg_sqlstate(res));
    snprintf(g->message, sizeof(g->message), "%s", petrel_pg_message(res));
    ck_assert_int_eq(petrel_pg_nrows(res), 0);
    ck_assert_ptr_null(petrel_pg_value(res, 0, 0).ptr);
}

/* The defaults, and the settings read from a module argument. */
START_TEST(test_opts_parse)
{
    petrel_pg_opts_t o;
    petrel_pg_opts_init(&o);
    ck_assert_str_eq(o.conninfo, "");
    ck_assert_uint_eq(o.connections, 4);
    ck_assert_uint_eq(o.depth, 1024);
    ck_assert_uint_eq(o.queue, 8192);
    ck_assert_uint_eq(o.retry_after, 1);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.connections=8  pool.queue=0 "
                                              "pool.retry_after=3 host=/run/x dbname=y"),
                     0);
    ck_assert_uint_eq(o.connections, 8);
    ck_assert_uint_eq(o.queue, 0);
    ck_assert_uint_eq(o.retry_after, 3);
    ck_assert_str_eq(o.conninfo, "host=/run/x dbname=y");
    ck_assert_int_eq(petrel_pg_opts_parse(&o, ""), 0);
    ck_assert_str_eq(o.conninfo, "");
    ck_assert_int_eq(petrel_pg_opts_parse(&o, NULL), 0);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "postgresql:///hello_world?host=/run/x"), 0);
    ck_assert_str_eq(o.conninfo, "postgresql:///hello_world?host=/run/x");
    /* refused, each named in the log */
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.bogus=1"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.connections"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.connections=0"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.depth=-1"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.depth=12abc"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.depth=99999999999"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "pool.depth="), PETREL_EINVAL);
#ifdef HAVE_PGSQL
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "bogus=1"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_opts_parse(&o, "host='unterminated"), PETREL_EINVAL);
#endif
}
END_TEST

#ifdef HAVE_PGSQL

static petrel_pg_t *open_pool(const char *ci, unsigned conns, unsigned queue)
{
    petrel_pg_opts_t o;
    petrel_pg_opts_init(&o);
    o.conninfo = ci;
    o.connections = conns;
    o.queue = queue;
    o.connect_timeout_ms = 150;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 40;
    return petrel_pg_open(&o);
}

/* Outside a worker, with bad settings: no pool. */
START_TEST(test_open_refused)
{
    petrel_pg_opts_t o;
    petrel_pg_opts_init(&o);
    o.connections = 0;
    ck_assert_ptr_null(petrel_pg_open(&o));
    petrel_pg_opts_init(&o);
    o.conninfo = "bogus=1";
    ck_assert_ptr_null(petrel_pg_open(&o));
    ck_assert_ptr_null(petrel_pg_open(NULL));
    petrel__loop = NULL;
    petrel_pg_opts_init(&o);
    ck_assert_ptr_null(petrel_pg_open(&o));
    petrel__loop = &L;
}
END_TEST

/*
 * A server that accepts no connection (the kernel completes the TCP
 * handshake, nobody answers the startup packet): queries wait in the
 * queue, up to its limit; none calls back from within the call; at the
 * connect timeout they fail with PETREL_PG_EUNAVAILABLE (08001), and from
 * then on queries are refused at once with PETREL_EIO.
 */
START_TEST(test_silent_server)
{
    petrel_pg_t *pg = open_pool(silent, 1, 2);
    ck_assert_ptr_nonnull(pg);
    petrel_pg_stmt_t *st = petrel_pg_prepare(pg, "SELECT $1::int");
    ck_assert_ptr_nonnull(st);
    got_t a = {0}, b = {0}, c = {0};
    const char *p[1] = {"1"};
    ck_assert_int_eq(petrel_pg_exec(pg, NULL, st, 1, p, on_result, &a), 0);
    ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 2", 0, NULL, on_result, &b), 0);
    ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 3", 0, NULL, on_result, &c), PETREL_ELIMIT);
    ck_assert_int_eq(a.calls + b.calls + c.calls, 0);
    petrel_pg_stats_t s;
    petrel_pg_stats(pg, &s);
    ck_assert_uint_eq(s.connections, 1);
    ck_assert_uint_eq(s.ready, 0);
    ck_assert_uint_eq(s.queued, 2);
    ck_assert_uint_eq(s.refused, 1);
    ck_assert_int_eq(petrel_pg_ready(pg), 0);
    run_until(&b.calls, 1, 3000);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(c.calls, 0);
    ck_assert_int_eq(a.status, PETREL_PG_EUNAVAILABLE);
    ck_assert_str_eq(a.sqlstate, "08001");
    ck_assert_msg(strstr(a.message, "no connection within 150 ms") != NULL, "message: %s",
                  a.message);
    /* the pool is down: refused at once */
    ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 4", 0, NULL, on_result, &c), PETREL_EIO);
    petrel_pg_stats(pg, &s);
    ck_assert_uint_eq(s.queued, 0);
    ck_assert_uint_eq(s.unavailable, 2);
    ck_assert_uint_eq(s.refused, 2);
    ck_assert_uint_ge(s.failures, 1);
    /* it goes on trying, with backoff */
    uint64_t f0 = s.failures;
    run_for(700);
    petrel_pg_stats(pg, &s);
    ck_assert_uint_gt(s.failures, f0);
    ck_assert_int_eq(c.calls, 0);
    petrel_pg_close(pg);
}
END_TEST

/* No server at all (no socket): the first attempt fails in the open
 * call, and queries are refused at once. */
START_TEST(test_no_server)
{
    char dir[] = "/tmp/check_pgsql.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char ci[128];
    snprintf(ci, sizeof(ci), "host=%s port=5 dbname=x user=x", dir);
    petrel_pg_t *pg = open_pool(ci, 2, 10);
    ck_assert_ptr_nonnull(pg);
    got_t g = {0};
    ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 1", 0, NULL, on_result, &g), PETREL_EIO);
    run_for(100);
    ck_assert_int_eq(g.calls, 0);
    ck_assert_int_eq(petrel_pg_ready(pg), 0);
    petrel_pg_close(pg);
    rmdir(dir);
}
END_TEST

/* Bad arguments are refused, and call nobody back. */
START_TEST(test_exec_args)
{
    petrel_pg_t *pg = open_pool(silent, 1, 10);
    ck_assert_ptr_nonnull(pg);
    petrel_pg_stmt_t *st = petrel_pg_prepare(pg, "SELECT 1");
    got_t g = {0};
    ck_assert_int_eq(petrel_pg_exec(NULL, NULL, st, 0, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec(pg, NULL, NULL, 0, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec(pg, NULL, st, 0, NULL, NULL, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec(pg, NULL, st, -1, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec(pg, NULL, st, 1, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_query(pg, NULL, NULL, 0, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_ptr_null(petrel_pg_prepare(pg, NULL));
    ck_assert_ptr_null(petrel_pg_prepare(NULL, "SELECT 1"));
    /* binary parameters and results: the same checks, and their own */
    ck_assert_ptr_null(petrel_pg_prepare_ex(pg, "SELECT 1", 2));
    ck_assert_ptr_null(petrel_pg_prepare_ex(pg, NULL, PETREL_PG_BINARY_RESULTS));
    petrel_pg_stmt_t *bst = petrel_pg_prepare_ex(pg, "SELECT $1::int4", PETREL_PG_BINARY_RESULTS);
    ck_assert_ptr_nonnull(bst);
    petrel_str_t bp[1] = {{"\0\0\0\1", 4}};
    ck_assert_int_eq(petrel_pg_exec_bin(NULL, NULL, bst, 1, bp, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec_bin(pg, NULL, NULL, 1, bp, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec_bin(pg, NULL, bst, 1, bp, NULL, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec_bin(pg, NULL, bst, 1, NULL, on_result, &g), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_exec_bin(pg, NULL, bst, -1, bp, on_result, &g), PETREL_EINVAL);
    petrel_str_t huge[1] = {{"x", (size_t)INT32_MAX + 1}};
    ck_assert_int_eq(petrel_pg_exec_bin(pg, NULL, bst, 1, huge, on_result, &g), PETREL_EINVAL);
    int32_t i4 = 7;
    ck_assert_int_eq(petrel_pg_value_int4(NULL, 0, 0, &i4), PETREL_EINVAL);
    ck_assert_int_eq(i4, 7);
    ck_assert_int_eq(petrel_pg_cancel(pg, NULL), 0);
    ck_assert_int_eq(g.calls, 0);
    petrel_pg_close(pg);
    petrel_pg_close(NULL);
    ck_assert_int_eq(petrel_pg_ready(NULL), 0);
    petrel_pg_stats_t s;
    petrel_pg_stats(NULL, &s);
    ck_assert_uint_eq(s.connections, 0);
    ck_assert_int_eq(petrel_pg_status(NULL), PETREL_PG_EUNAVAILABLE);
}
END_TEST

/* Transactions: petrel_pg_tx_begin/end's arguments and states; the queries
 * of a transaction wait for its end (or the end of the loop turn), then go
 * together; none of them runs its callback from within a call. */
START_TEST(test_tx)
{
    petrel_pg_t *pg = open_pool(silent, 1, 10);
    ck_assert_ptr_nonnull(pg);
    got_t g = {0};
    petrel_pg_stats_t s;
    ck_assert_int_eq(petrel_pg_tx_begin(NULL, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_tx_end(NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_tx_end(pg), PETREL_ESTATE); /* none open */
    ck_assert_int_eq(petrel_pg_tx_begin(pg, NULL), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 1", 0, NULL, on_result, &g), 0);
    petrel_pg_stats(pg, &s);
    ck_assert_uint_eq(s.queued, 0); /* being made: not waiting for a connection yet */
    ck_assert_uint_eq(s.queries, 3);
    ck_assert_int_eq(petrel_pg_tx_end(pg), 0);
    petrel_pg_stats(pg, &s);
    ck_assert_uint_eq(s.queued, 3); /* no connection up: they wait, together */
    ck_assert_int_eq(petrel_pg_tx_end(pg), PETREL_ESTATE);
    /* a transaction not ended: the end of the loop turn ends it */
    ck_assert_int_eq(petrel_pg_tx_begin(pg, NULL), 0);
    ck_assert_int_eq(petrel_pg_query(pg, NULL, "SELECT 2", 0, NULL, on_result, &g), 0);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(petrel_pg_tx_end(pg), PETREL_ESTATE);
    petrel_pg_stats(pg, &s);
    ck_assert_uint_eq(s.queued, 4);
    /* an empty transaction does nothing */
    ck_assert_int_eq(petrel_pg_tx_begin(pg, NULL), 0);
    ck_assert_int_eq(petrel_pg_tx_end(pg), 0);
    ck_assert_int_eq(g.calls, 0);
    /* no connection comes: they fail, from the loop */
    run_until(&g.calls, 4, 3000);
    ck_assert_int_eq(g.calls, 4);
    ck_assert_int_eq(g.status, PETREL_PG_EUNAVAILABLE);
    petrel_pg_close(pg);
}
END_TEST

/* libpq (and the C library under it: the user database, for one) sets up
 * things of its own for good the first time: leave them out of the counts. */
static void warm_up(void)
{
    petrel_pg_t *pg = open_pool(silent, 2, 100);
    run_for(30);
    petrel_pg_close(pg);
    run_for(10);
}

/* Closing a pool with queued queries of no request: dropped, nobody
 * called back, nothing left on the heap. */
START_TEST(test_close_queued)
{
    if (!CK_HEAP_HOOK)
        return;
    warm_up();
    int64_t live = ck_heap.live;
    petrel_pg_t *pg = open_pool(silent, 2, 100);
    ck_assert_ptr_nonnull(pg);
    petrel_pg_stmt_t *st = petrel_pg_prepare(pg, "SELECT $1::text");
    got_t g = {0};
    for (int i = 0; i < 50; i++) {
        const char *p[1] = {i % 2 ? "a parameter" : NULL};
        ck_assert_int_eq(petrel_pg_exec(pg, NULL, st, 1, p, on_result, &g), 0);
    }
    run_for(30);
    petrel_pg_close(pg);
    run_for(10); /* watches stopped in the close are freed at the end of a turn */
    ck_assert_int_eq(g.calls, 0);
    ck_assert_int_eq(ck_heap.live, live);
}
END_TEST

/* Every allocation of open, prepare, queries and close made to fail in
 * turn: an error comes back, nothing crashes, nothing leaks. */
START_TEST(test_failing_allocations)
{
    if (!CK_HEAP_HOOK)
        return;
    warm_up();
    int64_t live = ck_heap.live;
    int worked = 0;
    for (uint64_t n = 1; n < 400 && worked < 3; n++) {
        got_t g = {0};
        ck_heap_arm(n, false);
        petrel_pg_t *pg = open_pool(silent, 2, 100);
        petrel_pg_stmt_t *st = pg ? petrel_pg_prepare(pg, "SELECT $1::int") : NULL;
        petrel_pg_stmt_t *bs =
            st ? petrel_pg_prepare_ex(pg, "SELECT $1::int4", PETREL_PG_BINARY_RESULTS) : NULL;
        int taken = 0;
        for (int i = 0; bs && i < 4; i++) { /* text and binary parameters in turn */
            const char *p[1] = {"7"};
            petrel_str_t bp[1] = {{"\0\0\0\7", 4}};
            taken += (i % 2 ? petrel_pg_exec_bin(pg, NULL, bs, 1, bp, on_result, &g)
                            : petrel_pg_exec(pg, NULL, st, 1, p, on_result, &g)) == 0;
        }
        bool failed = ck_heap.failed > 0;
        ck_heap_disarm();
        run_for(5);
        petrel_pg_close(pg);
        run_for(5);
        ck_assert_int_eq(g.calls, 0);
        ck_assert_msg(ck_heap.live == live, "allocation %llu failing: %lld blocks leaked",
                      (unsigned long long)n, (long long)(ck_heap.live - live));
        if (!failed && taken == 4)
            worked++;
    }
    ck_assert_int_ge(worked, 1);
}
END_TEST

#else

/* Built without libpq: the pool is not there, and says so. */
START_TEST(test_not_built)
{
    petrel_pg_opts_t o;
    petrel_pg_opts_init(&o);
    ck_assert_int_eq(petrel_pg_supported(), 0);
    ck_assert_ptr_null(petrel_pg_open(&o));
    ck_assert_int_eq(petrel_pg_tx_begin(NULL, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_pg_tx_end(NULL), PETREL_EINVAL);
}
END_TEST

#endif

int main(void)
{
    Suite *s = suite_create("pgsql");
    TCase *tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_opts_parse);
#ifdef HAVE_PGSQL
    tcase_add_test(tc, test_open_refused);
    tcase_add_test(tc, test_silent_server);
    tcase_add_test(tc, test_no_server);
    tcase_add_test(tc, test_exec_args);
    tcase_add_test(tc, test_tx);
    tcase_add_test(tc, test_close_queued);
    tcase_add_test(tc, test_failing_allocations);
#else
    tcase_add_test(tc, test_not_built);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
