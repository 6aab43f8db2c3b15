/*
 * check_run.h -- what every Check suite's main() does: its test cases and
 * running it.  No heap hook (tests/check_util.h has it, and includes this).
 */
#ifndef CHECK_RUN_H
#define CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* A test case of `s` with a fixture and a time limit (seconds). */
static inline TCase *ck_tcase(Suite *s, const char *name, double timeout, SFun setup, SFun teardown)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

/* Run a suite (CK_ENV output): the status for main() to return. */
static inline int ck_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* CHECK_RUN_H */
