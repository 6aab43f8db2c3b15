/*
 * check_sizeclass.c -- unit tests of src/sizeclass.c, the size-class
 * allocator behind nghttp2 (h2.c's nghttp2_mem).
 */
#include "sizeclass.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A size whose block header would not fit: malloc's contract is NULL, never
 * a block smaller than asked (size + header wrapped around to a small
 * class). */
START_TEST(huge_sizes_fail)
{
    ck_assert_ptr_null(petrel__sc_malloc(SIZE_MAX));
    ck_assert_ptr_null(petrel__sc_malloc(SIZE_MAX - 8));
    ck_assert_ptr_null(petrel__sc_malloc(SIZE_MAX - 15));
    ck_assert_ptr_null(petrel__sc_calloc(SIZE_MAX / 2, 4));
    ck_assert_ptr_null(petrel__sc_calloc(2, SIZE_MAX - 4));
    char *p = petrel__sc_malloc(10);
    ck_assert_ptr_nonnull(p);
    memcpy(p, "0123456789", 10);
    ck_assert_ptr_null(petrel__sc_realloc(p, SIZE_MAX - 3));
    ck_assert(memcmp(p, "0123456789", 10) == 0); /* untouched */
    char *big = petrel__sc_malloc(5000);
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_null(petrel__sc_realloc(big, SIZE_MAX));
    petrel__sc_free(big);
    petrel__sc_free(p);
}
END_TEST

START_TEST(blocks_are_recycled)
{
    void *a = petrel__sc_malloc(100);
    petrel__sc_free(a);
    petrel__sc_stats_t s0, s1;
    petrel__sc_stats(&s0);
    for (int i = 0; i < 1000; i++) {
        void *b = petrel__sc_malloc(100 + (size_t)(i % 12));
        ck_assert_ptr_nonnull(b);
        memset(b, 0xab, 100);
        petrel__sc_free(b);
    }
    petrel__sc_stats(&s1);
    ck_assert_uint_eq(s1.calls, s0.calls); /* no heap call */
    ck_assert_uint_eq(s1.ops, s0.ops + 2000);
    ck_assert_uint_eq(s1.bytes, s0.bytes);
}
END_TEST

START_TEST(sizes_and_contents)
{
    petrel__sc_stats_t s0, s1;
    petrel__sc_stats(&s0);
    size_t sizes[] = {0, 1, 47, 48, 49, 111, 112, 113, 2032, 2033, 70000};
    void *p[sizeof(sizes) / sizeof(sizes[0])];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        p[i] = petrel__sc_malloc(sizes[i]);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_uint_eq((uintptr_t)p[i] % 16, 0);
        memset(p[i], (int)i, sizes[i]);
    }
    petrel__sc_stats(&s1);
    ck_assert_uint_gt(s1.bytes, s0.bytes);
    /* growing keeps the contents, across classes and into a large block */
    char *g = petrel__sc_malloc(30);
    memcpy(g, "abcdefghijklmnopqrstuvwxyz0123", 30);
    g = petrel__sc_realloc(g, 600);
    ck_assert(memcmp(g, "abcdefghijklmnopqrstuvwxyz0123", 30) == 0);
    g = petrel__sc_realloc(g, 10000);
    ck_assert(memcmp(g, "abcdefghijklmnopqrstuvwxyz0123", 30) == 0);
    g = petrel__sc_realloc(g, 20);
    ck_assert(memcmp(g, "abcdefghijklmnopqrst", 20) == 0);
    ck_assert_ptr_null(petrel__sc_realloc(g, 0)); /* frees */
    char *z = petrel__sc_calloc(10, 30);
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(z[i], 0);
    petrel__sc_free(z);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        for (size_t j = 0; j < sizes[i]; j++)
            ck_assert_int_eq(((unsigned char *)p[i])[j], i);
        petrel__sc_free(p[i]);
    }
    petrel__sc_stats(&s1);
    ck_assert_uint_eq(s1.bytes, s0.bytes);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sizeclass");
    TCase *tc = tcase_create("sizeclass");
    tcase_add_test(tc, huge_sizes_fail);
    tcase_add_test(tc, blocks_are_recycled);
    tcase_add_test(tc, sizes_and_contents);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
