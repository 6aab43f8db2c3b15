/*
 * cache.c -- what the paths below a mount resolve to, cached per worker and
 * per mount: a file (its metadata, ETag, Last-Modified, Content-Type, and
 * either its bytes -- files up to max_file_in_memory -- or an open
 * descriptor for sendfile), a directory, or an error.  A hit makes no file
 * syscall and no heap call.
 *
 * An entry is checked against the disk with one fstatat at most once per
 * revalidate_ms: when the file changed (size, mtime, ctime, inode, mode) it
 * is loaded again, so nothing stale is served more than that long after a
 * change.  The cache is bounded in bytes and in descriptors and evicts the
 * least recently used entries.  An entry is reference-counted: each
 * response holds a reference until it has been written (the handler defers
 * the release on the request arena), so an eviction never frees bytes or
 * closes a descriptor still being sent.
 */
#include "static.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

typedef petrel__static_mount_t mount_t;
typedef petrel__static_entry_t entry_t;
typedef petrel__static_fsig_t fsig_t;
typedef petrel__static_lnode_t lnode_t;
typedef petrel__static_cache_t cache_t;

struct petrel__static_cache {
    mount_t *m;
    entry_t **tab;
    size_t mask, count;
    lnode_t lru; /* next: most recently used */
    size_t mem, fds;
};

static uint64_t hash_seed;

void petrel__static_hash_seed(void)
{
    if (hash_seed == 0 && getrandom(&hash_seed, sizeof(hash_seed), GRND_NONBLOCK) < 0)
        hash_seed = (uint64_t)time(NULL) * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)getpid();
}

/* This worker's caches, by mount id (the fast path is inline, static.h) */
cache_t **petrel__static_caches;
unsigned petrel__static_ncaches;
#define tl_caches petrel__static_caches
#define tl_ncaches petrel__static_ncaches

static inline uint64_t hash_key(const char *s, size_t n)
{
    uint64_t h = hash_seed ^ (n * UINT64_C(0x9E3779B97F4A7C15));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ w) * UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 29);
}

static void sig_of_stat(fsig_t *s, const struct stat *st)
{
    memset(s, 0, sizeof(*s));
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mode = st->st_mode;
    s->mtim = st->st_mtim;
    s->ctim = st->st_ctim;
}

static void sig_of_path(fsig_t *s, int rootfd, const char *path)
{
    struct stat st;
    if (fstatat(rootfd, *path ? path : ".", &st, 0) < 0) {
        memset(s, 0, sizeof(*s));
        s->err = errno;
    } else {
        sig_of_stat(s, &st);
    }
}

/* `content`: compare what a file's bytes depend on, else only identity. */
static bool sig_eq(const fsig_t *a, const fsig_t *b, bool content)
{
    if (a->err != b->err || a->dev != b->dev || a->ino != b->ino || a->mode != b->mode)
        return false;
    if (!content)
        return true;
    return a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
           a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
           a->ctim.tv_nsec == b->ctim.tv_nsec;
}

void petrel__static_entry_free(entry_t *e)
{
    if (e->fd >= 0)
        close(e->fd);
    free(e->data);
    free(e);
}

static inline void lru_unlink(lnode_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

static inline void lru_push(cache_t *c, lnode_t *n)
{
    n->next = c->lru.next;
    n->prev = &c->lru;
    c->lru.next->prev = n;
    c->lru.next = n;
}

/* /metrics (petrel_metric_*): look-ups that found an entry or had to
 * load one, and the memory the caches hold (summed over the workers). */
static petrel_metric_t *m_hits, *m_misses, *m_bytes;

void petrel__static_metrics(petrel_server_t *srv)
{
    m_hits = petrel_metric_counter(srv, "petrel_static_cache_hits_total",
                                   "Static file look-ups answered from the cache.");
    m_misses = petrel_metric_counter(srv, "petrel_static_cache_misses_total",
                                     "Static file look-ups that had to open the file.");
    m_bytes = petrel_metric_gauge(srv, "petrel_static_cache_bytes",
                                  "Memory held by the static file caches.");
}

static void cache_remove(cache_t *c, entry_t *e)
{
    entry_t **pp = &c->tab[e->hash & c->mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(&e->lru);
    c->count--;
    c->mem -= e->mem;
    petrel_metric_add(m_bytes, -(int64_t)e->mem);
    if (e->fd >= 0)
        c->fds--;
    e->cached = false;
    petrel__static_entry_release(e);
}

static void cache_grow(cache_t *c)
{
    size_t n = (c->mask + 1) * 2;
    entry_t **t = calloc(n, sizeof(*t));
    if (t == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i <= c->mask; i++) {
        entry_t *e = c->tab[i];
        while (e) {
            entry_t *next = e->hnext;
            e->hnext = t[e->hash & (n - 1)];
            t[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(c->tab);
    c->tab = t;
    c->mask = n - 1;
}

static void cache_insert(cache_t *c, entry_t *e)
{
    if (c->count >= c->mask + 1)
        cache_grow(c);
    entry_t **b = &c->tab[e->hash & c->mask];
    e->hnext = *b;
    *b = e;
    lru_push(c, &e->lru);
    c->count++;
    c->mem += e->mem;
    petrel_metric_add(m_bytes, (int64_t)e->mem);
    if (e->fd >= 0)
        c->fds++;
    e->cached = true;
}

static void cache_evict(cache_t *c)
{
    const mount_t *m = c->m;
    while ((c->mem > m->cache_size || c->fds > m->max_fds) && c->lru.prev != &c->lru)
        cache_remove(c, container_of(c->lru.prev, entry_t, lru));
}

static cache_t *cache_new(mount_t *m)
{
    cache_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->m = m;
    c->mask = 63;
    c->tab = calloc(c->mask + 1, sizeof(*c->tab));
    if (c->tab == NULL) {
        free(c);
        return NULL;
    }
    c->lru.next = c->lru.prev = &c->lru;
    return c;
}

static void cache_free(cache_t *c)
{
    while (c->lru.next != &c->lru)
        cache_remove(c, container_of(c->lru.next, entry_t, lru));
    free(c->tab);
    free(c);
}

cache_t *petrel__static_cache_new(mount_t *m)
{
    if (m->id >= tl_ncaches) {
        cache_t **t = realloc(tl_caches, petrel__static_nmounts * sizeof(*t));
        if (t == NULL)
            return NULL;
        for (unsigned i = tl_ncaches; i < petrel__static_nmounts; i++)
            t[i] = NULL;
        tl_caches = t;
        tl_ncaches = petrel__static_nmounts;
    }
    return tl_caches[m->id] = cache_new(m);
}

void petrel__static_worker_fini(void)
{
    for (unsigned i = 0; i < tl_ncaches; i++)
        if (tl_caches[i])
            cache_free(tl_caches[i]);
    free(tl_caches);
    tl_caches = NULL;
    tl_ncaches = 0;
}

static bool has_suffix(const char *s, size_t n, const char *suf, size_t sl)
{
    return n >= sl && memcmp(s + n - sl, suf, sl) == 0;
}

/* Which precompressed variants lie beside a file (a hint: they are opened
 * beneath the root like anything else when used). */
static unsigned probe_variants(const mount_t *m, const entry_t *e)
{
    if (!m->precompressed || e->fslen + 4 > REL_MAX || has_suffix(e->fspath, e->fslen, ".gz", 3) ||
        has_suffix(e->fspath, e->fslen, ".br", 3))
        return 0;
    char p[REL_MAX + 8];
    struct stat st;
    unsigned v = 0;
    memcpy(p, e->fspath, e->fslen);
    memcpy(p + e->fslen, ".br", 4);
    if (fstatat(m->rootfd, p, &st, 0) == 0 && S_ISREG(st.st_mode))
        v |= PETREL__ENC_BR;
    memcpy(p + e->fslen, ".gz", 4);
    if (fstatat(m->rootfd, p, &st, 0) == 0 && S_ISREG(st.st_mode))
        v |= PETREL__ENC_GZIP;
    return v;
}

/* A regular file was opened: metadata, headers, and maybe its bytes. */
static void file_fill(const mount_t *m, entry_t *e, int fd, const struct stat *st)
{
    e->kind = K_FILE;
    sig_of_stat(&e->sig, st);
    e->size = (uint64_t)st->st_size;
    e->mtime = st->st_mtime;
    e->type = petrel__static_mime(e->fspath, e->fslen, m->default_type);
    /* nginx's form: hex mtime and size */
    snprintf(e->etag, sizeof(e->etag), "\"%llx-%llx\"", (unsigned long long)st->st_mtime,
             (unsigned long long)st->st_size);
    petrel_http_date_format(st->st_mtime, e->last_modified);
    e->variants = (uint8_t)probe_variants(m, e);
    if (e->size <= m->max_in_memory && e->size + e->mem <= m->cache_size) {
        char *d = malloc(e->size ? e->size : 1);
        size_t got = 0;
        bool ok = d != NULL;
        while (ok && got < e->size) {
            ssize_t n = pread(fd, d + got, e->size - got, (off_t)got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                ok = false;
            if (n <= 0)
                break; /* 0: the file shrank while read */
            got += (size_t)n;
        }
        if (ok) {
            /* What was read is what is sent, with its own length; a file
             * that changed meanwhile differs from `sig` at the next check. */
            e->size = got;
            e->data = d;
            e->mem += got;
            close(fd);
            return;
        }
        free(d);
    }
    e->fd = fd;
}

static entry_t *entry_load(cache_t *c, const char *key, size_t klen, uint64_t h, uint64_t now)
{
    const mount_t *m = c->m;
    bool dirreq = klen == 0 || key[klen - 1] == '/';
    size_t il = dirreq ? m->index_len : 0;
    size_t extra = dirreq ? klen + il + 1 : 0;
    entry_t *e = malloc(sizeof(*e) + klen + 1 + extra);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->checked = now;
    e->refs = 1;
    e->fd = -1;
    e->dirreq = dirreq;
    e->keylen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    if (dirreq) {
        e->fspath = e->key + klen + 1;
        memcpy(e->fspath, key, klen);
        memcpy(e->fspath + klen, m->index ? m->index : "", il);
        e->fslen = (uint32_t)(klen + il);
        e->fspath[e->fslen] = '\0';
    } else {
        e->fspath = e->key;
        e->fslen = (uint32_t)klen;
    }
    e->mem = sizeof(*e) + klen + 1 + extra;

    struct stat st;
    int fd;
    if (dirreq) {
        char dpath[REL_MAX + 2];
        memcpy(dpath, key, klen);
        dpath[klen ? klen - 1 : 0] = '\0';
        sig_of_path(&e->dsig, m->rootfd, dpath);
        fd = petrel__static_open(m->rootfd, m->root_real, dpath, 0, &st);
        if (fd < 0) {
            e->kind = (uint8_t)petrel__static_err_kind(fd);
            return e;
        }
        close(fd);
        if (!S_ISDIR(st.st_mode)) {
            e->kind = K_NOTFOUND; /* "file/" */
            return e;
        }
        e->kind = K_NOINDEX;
        if (il == 0)
            return e;
    }
    sig_of_path(&e->sig, m->rootfd, e->fspath);
    fd = petrel__static_open(m->rootfd, m->root_real, e->fspath, 0, &st);
    if (fd < 0) {
        if (dirreq && (fd == -ENOENT || fd == -ENOTDIR))
            return e; /* a directory without an index */
        e->kind = (uint8_t)petrel__static_err_kind(fd);
        return e;
    }
    if (S_ISREG(st.st_mode)) {
        file_fill(m, e, fd, &st);
        return e;
    }
    close(fd);
    if (dirreq)
        return e;                                       /* the index is not a file: K_NOINDEX */
    e->kind = S_ISDIR(st.st_mode) ? K_DIR : K_NOTFOUND; /* no devices, FIFOs, sockets */
    return e;
}

/* Whether a cached entry still describes the disk (one or a few stats). */
static bool entry_fresh(const mount_t *m, entry_t *e)
{
    fsig_t s;
    if (e->dirreq) {
        char dpath[REL_MAX + 2];
        memcpy(dpath, e->key, e->keylen);
        dpath[e->keylen ? e->keylen - 1 : 0] = '\0';
        sig_of_path(&s, m->rootfd, dpath);
        if (!sig_eq(&s, &e->dsig, false))
            return false;
        if (e->kind == K_NOINDEX && m->index_len == 0)
            return true;
    }
    sig_of_path(&s, m->rootfd, e->fspath);
    if (!sig_eq(&s, &e->sig, e->kind == K_FILE))
        return false;
    if (e->kind == K_FILE)
        e->variants = (uint8_t)probe_variants(m, e);
    return true;
}

entry_t *petrel__static_cache_get(cache_t *c, const char *key, size_t klen, uint64_t now)
{
    uint64_t h = hash_key(key, klen);
    entry_t *e = c->tab[h & c->mask];
    while (e && !(e->hash == h && e->keylen == klen && memcmp(e->key, key, klen) == 0))
        e = e->hnext;
    if (likely(e != NULL)) {
        if (unlikely(now - e->checked >= c->m->revalidate_ms)) {
            if (entry_fresh(c->m, e)) {
                e->checked = now;
            } else {
                cache_remove(c, e);
                e = NULL;
            }
        }
        if (e) {
            if (c->lru.next != &e->lru) {
                lru_unlink(&e->lru);
                lru_push(c, &e->lru);
            }
            e->refs++;
            petrel_metric_add(m_hits, 1);
            return e;
        }
    }
    petrel_metric_add(m_misses, 1);
    e = entry_load(c, key, klen, h, now);
    if (e == NULL)
        return NULL;
    cache_insert(c, e);
    e->refs++;
    cache_evict(c);
    return e;
}
