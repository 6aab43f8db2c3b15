#!/usr/bin/env bash
# No heap allocation per request in petrel's own code on the database's
# path, after warm-up: /db (one query a request), /queries?queries=20 (20
# queries in flight), /updates?queries=20 (20 reads, then one write) and
# /cached-queries?count=20 (the cache of petrel_cache_new) of the tfb
# module.  Every malloc, calloc, realloc and
# memalign of the worker is counted by an interposed allocator, by the
# object the call came from: the petrel executable (petrel's code, the
# module's included), libpq, the C library, the rest.  Between two
# snapshots taken around 10,000 requests (after 3,000 of warm-up), the
# petrel executable must have made none; what libpq makes per query is
# printed (doc/benchmarks.md, "PostgreSQL").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

[[ $PETREL_SANITIZERS != yes ]] || skip "AddressSanitizer owns malloc: no counting allocator under it"
[[ ${PETREL_VALGRIND:-0} != 1 ]] || skip "valgrind owns malloc: no counting allocator under it"
pg_needs cc bench
pg_setup
pg_start
pg_tfb

mkdir -p "$LIB_TMP/heap"
cat >"$LIB_TMP/heap.c" <<'C'
/* An allocator that counts heap calls by the object of their caller, into
 * a file per process (HEAP_DIR/heap.PID: exe libpq libc other), mapped so
 * that another process reads it while this one runs. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

enum { EXE, PQ, LIBC, OTHER, N };
static struct { uintptr_t lo, hi; int kind; } seg[64];
static int nseg;
static volatile uint64_t *ctr;

static int phdr(struct dl_phdr_info *i, size_t size, void *data)
{
    (void)size, (void)data;
    int kind = i->dlpi_name[0] == '\0' ? EXE : strstr(i->dlpi_name, "libpq.so") ? PQ
             : strstr(i->dlpi_name, "libc.so") ? LIBC : OTHER;
    for (int k = 0; k < i->dlpi_phnum && nseg < 64; k++)
        if (i->dlpi_phdr[k].p_type == PT_LOAD && (i->dlpi_phdr[k].p_flags & PF_X)) {
            seg[nseg].lo = i->dlpi_addr + i->dlpi_phdr[k].p_vaddr;
            seg[nseg].hi = seg[nseg].lo + i->dlpi_phdr[k].p_memsz;
            seg[nseg++].kind = kind;
        }
    return 0;
}

static void map_counters(void)
{
    char path[256];
    const char *d = getenv("HEAP_DIR");
    snprintf(path, sizeof(path), "%s/heap.%d", d ? d : "/tmp", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, N * sizeof(uint64_t)) < 0)
        return;
    void *p = mmap(NULL, N * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ctr = p == MAP_FAILED ? NULL : p;
}

static void child(void) { ctr = NULL; map_counters(); }

__attribute__((constructor)) static void init(void)
{
    dl_iterate_phdr(phdr, NULL);
    map_counters();
    pthread_atfork(NULL, NULL, child);
}

static void count(void *ra)
{
    if (ctr == NULL)
        return;
    int kind = OTHER;
    for (int i = 0; i < nseg; i++)
        if ((uintptr_t)ra >= seg[i].lo && (uintptr_t)ra < seg[i].hi) {
            kind = seg[i].kind;
            break;
        }
    ctr[kind]++;
}

void *malloc(size_t n) { count(__builtin_return_address(0)); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(__builtin_return_address(0)); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(__builtin_return_address(0)); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { count(__builtin_return_address(0)); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { count(__builtin_return_address(0)); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    count(__builtin_return_address(0));
    *out = __libc_memalign(a, n);
    return *out ? 0 : 12;
}
C
cc -shared -fPIC -O2 -o "$LIB_TMP/heap.so" "$LIB_TMP/heap.c" -lpthread ||
    fail "the counting allocator does not build"

# The release of memory unused for --memory-release-delay (worker.c) is off:
# with it, what a worker under load gives back after a quiet second it takes
# from the heap again at its next swing (2 to 9 calls in 10,000 requests of
# /queries here: doc/architecture.md, "Memory that comes back"); this test
# is about the request path.
HEAP_DIR=$LIB_TMP/heap LD_PRELOAD=$LIB_TMP/heap.so petrel_start --workers 1 --memory-release-delay 86400 \
    --module tfb:"pool.connections=4 host=$PGHOST port=$PGPORT dbname=hello_world user=postgres"
worker=$(petrel_worker)
[[ -f $LIB_TMP/heap/heap.$worker ]] || fail "no counters of the worker (heap.$worker)"
counters() { od -An -t u8 -v "$LIB_TMP/heap/heap.$worker" | tr -s ' \n' ' '; }

for path in /db "/queries?queries=20" "/updates?queries=20" "/cached-queries?count=20"; do
    "$BENCH" -c 10 -n 3000 --fail-on-error "$BASE$path" >/dev/null || fail "warm-up of $path failed"
    read -r e0 q0 c0 o0 <<<"$(counters)"
    n=10000
    "$BENCH" -c 10 -n "$n" --fail-on-error "$BASE$path" >"$LIB_TMP/bench.out" ||
        fail "petrel-bench $path: $(tail -3 "$LIB_TMP/bench.out")"
    read -r e1 q1 c1 o1 <<<"$(counters)"
    per() { awk -v d="$1" -v n="$n" 'BEGIN { printf "%.3f", d / n }'; }
    [[ $((e1 - e0)) -eq 0 ]] ||
        fail "$path: the petrel executable made $((e1 - e0)) heap calls in $n requests after warm-up"
    ok "$path: $n requests: petrel's code 0 heap calls; libpq $(per $((q1 - q0))), the C library $(per $((c1 - c0))), others $(per $((o1 - o0))) a request"
done
petrel_stop
