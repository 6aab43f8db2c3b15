/*
 * static.h -- private declarations of the static-file module, shared by
 * its files (and by tests/check_static.c and the fuzzing harnesses, which
 * exercise the pieces one by one).  Not installed; the petrel__static_*
 * symbols are hidden.
 *
 *   resolve.c   opening a path beneath a root: openat2, or the component walk
 *   cache.c     per worker and mount: the hash table, LRU, reference counts,
 *               revalidation against the disk
 *   mime.c      Content-Type by extension
 *   handler.c   the request handler: conditional, Range, precompressed
 *   listing.c   the directory listing (autoindex)
 *   mount.c     mounts (petrel_static_mount), the module and its arguments
 *
 * The module is written against the public API only (<petrel.h>,
 * <petrel/static.h>): it is a module like any other, which the core
 * library does not link.
 */
#ifndef PETREL_STATIC_PRIV_H
#define PETREL_STATIC_PRIV_H

#include <petrel.h>
#include <petrel/static.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

#define REL_MAX 4000 /* longest path below a mount; longer ones get 414 */

/* ------------------------------------------------------------------------ */
/* Resolving a path beneath a root directory (resolve.c)                    */

enum {
    PETREL__STATIC_DIR_READ = 1 << 0, /* a directory comes back readable (for a listing) */
    PETREL__STATIC_WALK = 1 << 1      /* skip openat2: the component walk (for tests) */
};

/*
 * Open `rel` (relative: no leading '/'; "" or "." is the root itself)
 * beneath the directory `rootfd` without ever leaving it: with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) where the kernel has it, else
 * with a walk of one component at a time (O_PATH | O_NOFOLLOW, fstat), and
 * in both cases with symlinks followed only while they stay beneath the root
 * (an absolute target counts when it starts with `root_real`, the root's
 * realpath, or may be NULL).  Nothing is opened for reading before it is
 * known to be a regular file (no FIFO blocks, no device is opened).
 *
 * Returns a descriptor and fills `st`: readable for a regular file; an
 * O_PATH descriptor for a directory (readable with PETREL__STATIC_DIR_READ)
 * and for anything else (the caller checks st_mode).  On failure, -errno:
 * -ENOENT, -ENOTDIR, -EACCES, -EXDEV (would leave the root), -ELOOP,
 * -ENAMETOOLONG, ...
 */
int petrel__static_open(int rootfd, const char *root_real, const char *rel, int flags,
                        struct stat *st);

/* Whether openat2 is used (1), not available (0); probed once. */
int petrel__static_have_openat2(int rootfd);

/* ------------------------------------------------------------------------ */
/* Content types (mime.c)                                                   */

/* Content-Type for a file name by its extension (case-insensitive): static
 * storage, or `default_type` when the extension is unknown or there is
 * none. */
const char *petrel__static_mime(const char *name, size_t len, const char *default_type);

/* ------------------------------------------------------------------------ */
/* Mounts (mount.c)                                                         */

typedef struct petrel__static_mount {
    unsigned id;  /* index of its cache in each worker */
    char *prefix; /* with its trailing slash */
    size_t plen;
    char *dir, *root_real;
    int rootfd;
    char *index;
    size_t index_len;
    char *cache_control;
    char *default_type;
    bool autoindex, precompressed;
    size_t cache_size, max_in_memory, max_fds;
    uint64_t revalidate_ms;
} petrel__static_mount_t;

/* The number of mounts made (ids are below it). */
extern unsigned petrel__static_nmounts;

/* Forget every mount (after petrel__static_worker_fini in every worker;
 * for tests). */
void petrel__static_reset(void);

/* ------------------------------------------------------------------------ */
/* The cache (cache.c)                                                      */

enum { K_FILE, K_DIR, K_NOINDEX, K_NOTFOUND, K_FORBIDDEN };

/* Precompressed variants beside a file (entry.variants). */
enum { PETREL__ENC_BR = 1, PETREL__ENC_GZIP = 2 };

/* What a stat says about a path, to tell whether it changed. */
typedef struct petrel__static_fsig {
    dev_t dev;
    ino_t ino;
    off_t size;
    mode_t mode;
    int err;
    struct timespec mtim, ctim;
} petrel__static_fsig_t;

typedef struct petrel__static_lnode {
    struct petrel__static_lnode *prev, *next;
} petrel__static_lnode_t;

/* What a path below a mount resolved to.  Reference-counted: the cache
 * holds one reference while the entry is in it, each response one until it
 * has been written. */
typedef struct petrel__static_entry {
    struct petrel__static_entry *hnext; /* hash chain */
    petrel__static_lnode_t lru;
    uint64_t hash;
    uint64_t checked; /* ms (monotonic) of the last look at the disk */
    uint32_t refs;    /* the cache's own, plus one per response in flight */
    uint8_t kind;     /* K_* */
    uint8_t variants; /* PETREL__ENC_* bits: FILE.br / FILE.gz exist */
    bool cached;      /* in the hash table (and counted in mem, fds) */
    bool dirreq;      /* the key names a directory: "" or ending in '/' */
    int fd;           /* for files not in memory; -1 otherwise */
    size_t mem;       /* bytes counted against cache_size */
    const char *type; /* Content-Type: static storage or the mount's */
    char *data;       /* the bytes of a file kept in memory, or NULL */
    uint64_t size;    /* body bytes */
    time_t mtime;
    petrel__static_fsig_t sig;  /* of fspath */
    petrel__static_fsig_t dsig; /* of the directory, for directory requests */
    char etag[48];
    char last_modified[32]; /* an HTTP-date: PETREL_HTTP_DATE_SIZE bytes */
    uint32_t keylen, fslen;
    char *fspath; /* the file the key maps to: key, or key + index */
    char key[];
} petrel__static_entry_t;

typedef struct petrel__static_cache petrel__static_cache_t;

/* This worker's caches, by mount id (cache.c). */
extern petrel__static_cache_t **petrel__static_caches;
extern unsigned petrel__static_ncaches;

/* Make this worker's cache of mount `m`; NULL when out of memory. */
petrel__static_cache_t *petrel__static_cache_new(petrel__static_mount_t *m);

/* This worker's cache of mount `m`, made on first use; NULL when out of
 * memory. */
static inline petrel__static_cache_t *petrel__static_cache_of(petrel__static_mount_t *m)
{
    if (likely(m->id < petrel__static_ncaches && petrel__static_caches[m->id]))
        return petrel__static_caches[m->id];
    return petrel__static_cache_new(m);
}

/* The entry for `key` (klen bytes, relative to the mount) with a reference
 * for the caller, loaded or revalidated as needed; NULL when out of
 * memory.  `now`: monotonic ms. */
petrel__static_entry_t *petrel__static_cache_get(petrel__static_cache_t *c, const char *key,
                                                 size_t klen, uint64_t now);

/* Free an entry (its descriptor, its bytes): at the last reference. */
void petrel__static_entry_free(petrel__static_entry_t *e);

/* Drop a reference (the entry is freed with the last one). */
static inline void petrel__static_entry_release(petrel__static_entry_t *e)
{
    if (--e->refs == 0)
        petrel__static_entry_free(e);
}

/* The kind of entry of an error of petrel__static_open(). */
static inline int petrel__static_err_kind(int err)
{
    return (err == -EACCES || err == -EPERM) ? K_FORBIDDEN : K_NOTFOUND;
}

/* Monotonic milliseconds (coarse), as the cache counts them. */
static inline uint64_t petrel__static_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Seed the hash of the caches (once, in the master, at the first mount). */
void petrel__static_hash_seed(void);

/* Free this worker's caches (each worker does at exit). */
void petrel__static_worker_fini(void);
/* Register the cache's metrics (hits, misses, bytes) with the server. */
void petrel__static_metrics(petrel_server_t *srv);

/* ------------------------------------------------------------------------ */
/* Responses (handler.c, listing.c)                                         */

/* The route handler of every mount (`data`: its petrel__static_mount_t). */
int petrel__static_handle(petrel_req_t *req, void *data);

/* An HTML listing of the directory `rel` (rlen bytes, ending in '/' or
 * empty) of mount `m`, or a status. */
int petrel__static_listing(petrel_req_t *req, const petrel__static_mount_t *m, const char *rel,
                           size_t rlen);

/* Percent-encode a path for a Location header or a link: everything but
 * unreserved, sub-delims, ':', '@' and '/'.  `out` holds 3 * len + 1 bytes;
 * returns the length (NUL-terminated). */
size_t petrel__static_uri_encode(const char *in, size_t len, char *out);

#endif /* PETREL_STATIC_PRIV_H */
