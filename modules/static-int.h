/*
 * static-int.h -- the pieces of modules/static.c that tests/check_static.c
 * exercises one by one: path resolution beneath a root, the MIME table,
 * Range and conditional-request logic, dates, Accept-Encoding.  Not
 * installed; the symbols are hidden in libpetrel (petrel__ prefix).
 */
#ifndef PETREL_STATIC_INT_H
#define PETREL_STATIC_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Resolving a path beneath a root directory                                */

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

/* Whether openat2 is used (1), not available (0); for the tests' report. */
int petrel__static_have_openat2(int rootfd);

/* ------------------------------------------------------------------------ */
/* Headers                                                                   */

/* Content-Type for a file name by its extension (case-insensitive):
 * static storage, "application/octet-stream" when unknown. */
const char *petrel__static_mime(const char *name, size_t len);

/*
 * A Range header for a representation of `size` bytes (RFC 9110 §14):
 * returns 206 with [*off, *off + *len) for one satisfiable range
 * (bytes=a-b, a-, -n), 416 when no byte is satisfiable, 0 when the header
 * is to be ignored (absent, not "bytes", malformed, or several ranges: the
 * whole representation is sent then).
 */
int petrel__static_range(const char *range, uint64_t size, uint64_t *off, uint64_t *len);

/* Whether the entity-tag list `list` ("*", or tags, comma-separated, W/
 * allowed) matches `etag` (a quoted strong tag); `weak` compares weakly. */
bool petrel__static_etag_match(const char *list, const char *etag, bool weak);

/* Parse an HTTP date (IMF-fixdate, RFC 850 or asctime form).  0 or -1. */
int petrel__static_parse_date(const char *s, time_t *out);

/* Format `t` as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), 29 bytes
 * and a NUL into `buf` (at least 30 bytes). */
void petrel__static_format_date(time_t t, char *buf);

/* The conditional request headers of a request (NULL when absent). */
typedef struct petrel__static_cond {
    const char *if_match;
    const char *if_none_match;
    const char *if_modified_since;
    const char *if_unmodified_since;
} petrel__static_cond_t;

/*
 * Evaluate the preconditions of RFC 9110 §13.2.2 for a GET or HEAD of a
 * representation with strong `etag`, modification time `mtime` and its
 * Last-Modified text `last_modified`: 0 (go on), 304 or 412.
 */
int petrel__static_precondition(const petrel__static_cond_t *c, const char *etag, time_t mtime,
                                const char *last_modified);

/* If-Range (RFC 9110 §13.1.5): true when the Range may be honoured. */
bool petrel__static_if_range(const char *if_range, const char *etag, const char *last_modified);

enum { PETREL__ENC_BR = 1, PETREL__ENC_GZIP = 2 };

/* The encoding to send among `available` (PETREL__ENC_* bits) given an
 * Accept-Encoding value: PETREL__ENC_BR, PETREL__ENC_GZIP or 0 (identity).
 * A coding with q=0 is never chosen; br wins a tie. */
int petrel__static_pick_encoding(const char *accept_encoding, unsigned available);

/* Percent-encode a path for a Location header: everything but unreserved,
 * sub-delims, ':', '@' and '/'.  `out` holds 3 * len + 1 bytes; returns the
 * length (NUL-terminated). */
size_t petrel__static_uri_encode(const char *in, size_t len, char *out);

/* ------------------------------------------------------------------------ */
/* For tests                                                                 */

/* Free this thread's caches (each worker does at exit). */
void petrel__static_worker_fini(void);
/* Forget every mount (after petrel__static_worker_fini in every thread). */
void petrel__static_reset(void);

#endif /* PETREL_STATIC_INT_H */
