/*
 * check_util.h -- helpers shared by the Check suites (each suite is its own
 * program, so the definitions below are compiled once per suite).
 *
 * The heap hook: malloc, calloc, realloc and free are interposed in the test
 * program (glibc lets a program replace them, "Replacing malloc" in its
 * manual) and forward to __libc_malloc and friends.  They count successful
 * heap calls, and can make the N-th call fail (nghttp2's failmalloc): arm it,
 * run the code under test, disarm, and only then assert -- Check itself
 * allocates, even when an assertion passes (_mark_point), so no ck_assert
 * may run while the hook is armed or while counting.
 *
 * AddressSanitizer owns malloc; under it (__SANITIZE_ADDRESS__) the hook is
 * compiled out, CK_HEAP_HOOK is 0, and the suites still run the code but skip
 * the counting and the injected failures.
 */
#ifndef CHECK_UTIL_H
#define CHECK_UTIL_H

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>

#ifdef __SANITIZE_ADDRESS__
#define CK_HEAP_HOOK 0
#else
#define CK_HEAP_HOOK 1
#endif

typedef struct ck_heap {
    uint64_t calls;     /* successful malloc, calloc and realloc calls */
    int64_t live;       /* blocks taken minus blocks given back */
    uint64_t failed;    /* calls made to fail */
    uint64_t countdown; /* 0: off; else the call that brings it to 0 fails */
    bool fail_rest;     /* after the first failure, fail every later call too */
} ck_heap_t;

static ck_heap_t ck_heap;

#if CK_HEAP_HOOK
/* Exported even under -fvisibility=hidden: the C library's own calls (strdup,
 * fopen, ...) must reach these too, not only the program's. */
#define CKU_EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

static bool ck_heap_fail(void)
{
    if (ck_heap.countdown == 0)
        return false;
    if (ck_heap.countdown == 1) {
        ck_heap.failed++;
        if (!ck_heap.fail_rest)
            ck_heap.countdown = 0;
        errno = ENOMEM;
        return true;
    }
    ck_heap.countdown--;
    return false;
}

CKU_EXPORT void *malloc(size_t size)
{
    if (ck_heap_fail())
        return NULL;
    void *p = __libc_malloc(size);
    if (p) {
        ck_heap.calls++;
        ck_heap.live++;
    }
    return p;
}

CKU_EXPORT void *calloc(size_t n, size_t size)
{
    if (ck_heap_fail())
        return NULL;
    void *p = __libc_calloc(n, size);
    if (p) {
        ck_heap.calls++;
        ck_heap.live++;
    }
    return p;
}

CKU_EXPORT void *realloc(void *old, size_t size)
{
    if (ck_heap_fail())
        return NULL;
    void *p = __libc_realloc(old, size);
    if (p) {
        ck_heap.calls++;
        if (old == NULL)
            ck_heap.live++;
    }
    return p;
}

static void *ck_memalign(size_t align, size_t size)
{
    if (ck_heap_fail())
        return NULL;
    void *p = __libc_memalign(align, size);
    if (p) {
        ck_heap.calls++;
        ck_heap.live++;
    }
    return p;
}

CKU_EXPORT void *memalign(size_t align, size_t size)
{
    return ck_memalign(align, size);
}

CKU_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    return ck_memalign(align, size);
}

CKU_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = ck_memalign(align, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

CKU_EXPORT void free(void *p)
{
    if (p)
        ck_heap.live--;
    __libc_free(p);
}
#endif

/* Make the n-th heap call from now fail (n >= 1); with `rest`, every call
 * after it fails too.  No effect without the hook. */
static inline void ck_heap_arm(uint64_t n, bool rest)
{
    ck_heap.failed = 0;
    ck_heap.fail_rest = rest;
    ck_heap.countdown = n;
}

static inline void ck_heap_disarm(void)
{
    ck_heap.countdown = 0;
    ck_heap.fail_rest = false;
}

#endif /* CHECK_UTIL_H */
