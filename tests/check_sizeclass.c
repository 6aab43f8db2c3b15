/*
 * check_sizeclass.c -- unit tests of src/runtime/sizeclass.c, the size-class
 * allocator behind nghttp2 (h2.c's nghttp2_mem).
 */
#include "runtime/sizeclass.h"
#include "check_run.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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
        void *b = petrel__sc_malloc(100 + (size_t)(i % 4)); /* one class */
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

/* Eight classes per power of two: a 1 KiB array and its header take 1152
 * bytes, not 2048. */
START_TEST(classes_are_close)
{
    petrel__sc_stats_t s0, s1;
    petrel__sc_stats(&s0);
    void *p = petrel__sc_malloc(1024);
    petrel__sc_stats(&s1);
    ck_assert_uint_eq(s1.bytes - s0.bytes, 1152);
    /* a realloc within the class stays in place */
    ck_assert_ptr_eq(petrel__sc_realloc(p, 1152 - 16), p);
    petrel__sc_free(p);
    size_t sizes[] = {48, 49, 63, 64, 65, 80, 81, 200, 1000, 2032};
    size_t want[] = {64, 72, 80, 80, 88, 96, 104, 224, 1024, 2048};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        petrel__sc_stats(&s0);
        p = petrel__sc_malloc(sizes[i]);
        petrel__sc_stats(&s1);
        ck_assert_uint_eq(s1.bytes - s0.bytes, want[i]);
        memset(p, 1, sizes[i]);
        petrel__sc_free(p);
    }
}
END_TEST

/* Blocks of 4 KiB to 32 KiB start on a page and have pages of their own:
 * petrel__sc_discard gives back the pages whose contents are dead, or that
 * hold only zeros, and the block stays usable. */
START_TEST(paged_blocks_discard)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page != 4096)
        return; /* the zones are laid out for 4 KiB pages */
    uint64_t mark = petrel__sc_paged_count();
    unsigned char *a = petrel__sc_calloc(1, 4096);    /* one page */
    unsigned char *b = petrel__sc_malloc(16384 + 10); /* five pages */
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)a % 4096, 0);
    ck_assert_uint_eq((uintptr_t)b % 4096, 0);
    size_t bytes = 0;
    ck_assert_ptr_eq(petrel__sc_paged_since(mark, 0, &bytes), a);
    ck_assert_uint_eq(bytes, 4096);
    ck_assert_ptr_eq(petrel__sc_paged_since(mark, 1, &bytes), b);
    ck_assert_uint_eq(bytes, 5 * 4096);
    ck_assert_ptr_null(petrel__sc_paged_since(mark, 2, &bytes));
    /* zeros only: given back, and it still reads as zeros */
    ck_assert_uint_eq(petrel__sc_discard(a, false), 4096);
    for (int i = 0; i < 4096; i++)
        ck_assert_int_eq(a[i], 0);
    /* a page with one byte set stays, with it */
    a[100] = 7;
    ck_assert_uint_eq(petrel__sc_discard(a, false), 0);
    ck_assert_int_eq(a[100], 7);
    /* pages 1 and 3 of b written: the others are given back */
    memset(b + 4096, 0x5a, 4096);
    memset(b + 3 * 4096, 0x5a, 10);
    ck_assert_uint_eq(petrel__sc_discard(b, false), 3 * 4096);
    ck_assert_int_eq(b[4096 + 4095], 0x5a);
    ck_assert_int_eq(b[3 * 4096 + 9], 0x5a);
    /* dead contents: every page goes, and reads as zeros */
    ck_assert_uint_eq(petrel__sc_discard(b, true), 5 * 4096);
    ck_assert_int_eq(b[4096], 0);
    b[16393] = 1; /* usable */
    /* smaller and larger blocks have no pages of their own */
    void *small = petrel__sc_malloc(2000), *big = petrel__sc_malloc(40000);
    ck_assert_uint_eq(petrel__sc_discard(small, true), 0);
    ck_assert_uint_eq(petrel__sc_discard(big, true), 0);
    /* growing out of the zones keeps the contents; a freed block comes back */
    b = petrel__sc_realloc(b, 50000);
    ck_assert_int_eq(b[16393], 1);
    petrel__sc_free(b);
    petrel__sc_free(a);
    void *again = petrel__sc_malloc(4096);
    ck_assert_ptr_eq(again, a);
    petrel__sc_free(again);
    petrel__sc_free(small);
    petrel__sc_free(big);
}
END_TEST

/* petrel__sc_trim gives back what its free lists did not dip into since
 * the last call: nothing the first time (the interval starts), then the
 * blocks that sat unused -- small ones to the heap, paged ones' pages to
 * the kernel beyond `keep` -- while blocks taken in between stay.  A paged
 * block whose pages went back is reused, reading as zeros. */
START_TEST(trim_gives_back_idle_blocks)
{
    if (sysconf(_SC_PAGESIZE) != 4096)
        return;
    enum { N = 64 };
    void *small[N], *paged[N];
    /* what the tests before left on the free lists, when they ran in this
     * process (CK_FORK=no), goes first: two looks give back all of it */
    petrel__sc_trim(0);
    petrel__sc_trim(0);
    for (int i = 0; i < N; i++) {
        small[i] = petrel__sc_malloc(100);
        paged[i] = petrel__sc_malloc(8000); /* two pages */
        ck_assert_ptr_nonnull(small[i]);
        ck_assert_ptr_nonnull(paged[i]);
        memset(paged[i], 0x5a, 8000);
    }
    for (int i = 0; i < N; i++) {
        petrel__sc_free(small[i]);
        petrel__sc_free(paged[i]);
    }
    size_t held = petrel__sc_free_bytes();
    ck_assert_uint_ge(held, N * (112 + 8192));
    petrel__sc_trim(0); /* the first look: the interval starts */
    ck_assert_uint_eq(petrel__sc_free_bytes(), held);
    /* the working set: 8 of each taken and given back in the interval */
    for (int i = 0; i < 8; i++) {
        small[i] = petrel__sc_malloc(100);
        paged[i] = petrel__sc_malloc(8000);
    }
    for (int i = 0; i < 8; i++) {
        petrel__sc_free(small[i]);
        petrel__sc_free(paged[i]);
    }
    petrel__sc_stats_t st0, st1;
    petrel__sc_stats(&st0);
    /* keep four paged blocks: the working set's eight are more already */
    size_t given = petrel__sc_trim(4 * 8192);
    petrel__sc_stats(&st1);
    /* small: the 56 idle blocks to the heap; paged: the 56 idle ones cold */
    ck_assert_uint_eq(st1.cold_bytes - st0.cold_bytes, 56 * 8192);
    ck_assert_uint_ge(given, 56 * 8192 + 56 * 112);
    ck_assert_uint_eq(petrel__sc_free_bytes(), held - given);
    /* nothing was taken since: all that is left goes, but four paged */
    petrel__sc_trim(4 * 8192);
    petrel__sc_stats(&st1);
    ck_assert_uint_eq(st1.cold_bytes - st0.cold_bytes, 60 * 8192);
    ck_assert_uint_eq(petrel__sc_free_bytes(), 4 * 8192);
    /* reused: the kept blocks first, with their contents, then cold ones */
    unsigned char *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = petrel__sc_malloc(8000);
        ck_assert_ptr_nonnull(p[i]);
        ck_assert_int_eq(p[i][4096 + 100], i < 4 ? 0x5a : 0);
        memset(p[i], 1, 8000);
    }
    for (int i = 0; i < 8; i++)
        petrel__sc_free(p[i]);
}
END_TEST

/* Under an address-space limit (RLIMIT_AS) the zones are smaller, and
 * still paged: a child process with 256 MiB of address space to spare. */
START_TEST(paged_under_rlimit_as)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        unsigned long vm_kb = 0;
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "VmSize: %lu kB", &vm_kb) == 1)
                break;
        if (f)
            fclose(f);
        struct rlimit rl = {.rlim_cur = (vm_kb << 10) + (256ul << 20),
                            .rlim_max = (vm_kb << 10) + (256ul << 20)};
        if (vm_kb == 0 || setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(2);
        void *p = petrel__sc_malloc(4096);
        _exit(p != NULL && petrel__sc_discard(p, true) == 4096 ? 0 : 1);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sizeclass");
    TCase *tc = tcase_create("sizeclass");
    tcase_add_test(tc, huge_sizes_fail);
    tcase_add_test(tc, blocks_are_recycled);
    tcase_add_test(tc, sizes_and_contents);
    tcase_add_test(tc, classes_are_close);
    tcase_add_test(tc, paged_blocks_discard);
    tcase_add_test(tc, trim_gives_back_idle_blocks);
    tcase_add_test(tc, paged_under_rlimit_as);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
