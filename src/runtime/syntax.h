/*
 * syntax.h -- the syntax of HTTP that every layer shares (syntax.c): byte
 * classes, methods, percent-decoding and paths, field lists, status lines,
 * and UTF-8 validation (WebSocket text, the access log, publish/subscribe).
 */
#ifndef PETREL_SYNTAX_H
#define PETREL_SYNTAX_H

#include "petrel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------------------ */
/* HTTP                                                                     */

/* Map a method name to a PETREL_* bit; 0 for any other. */
int petrel__method_from_name(const char *s, size_t len);
/* Comma-separated list of methods for an Allow header, into `buf`. */
size_t petrel__methods_format(int methods, char *buf, size_t len);
/*
 * Percent-decode `in` and remove dot-segments into `out` (capacity len + 1,
 * NUL-terminated).  Returns the length, or PETREL_EINVAL for a path that is
 * not acceptable (not starting with '/', %00, bad escape, climbing above
 * the root).
 */
ssize_t petrel__path_normalize(const char *in, size_t len, char *out);
/* Percent-decode (with '+' as space when `plus`); returns the length or
 * PETREL_EINVAL. */
ssize_t petrel__pct_decode(const char *in, size_t len, char *out, bool plus);
bool petrel__str_ieq(const char *a, size_t alen, const char *b, size_t blen);
/* Is `tok` (any case) one of the comma-separated tokens of [s, s + n)? */
bool petrel__list_has_token(const char *s, size_t n, const char *tok, size_t tlen);
/* The classes of a byte (petrel__cclass): */
enum {
    PETREL__CC_TCHAR = 1 << 0,  /* a token's (RFC 9110 §5.6.2 tchar) */
    PETREL__CC_LNAME = 1 << 1,  /* an HTTP/2 field name's: tchar but uppercase (RFC 9113 §8.2.1) */
    PETREL__CC_VALUE = 1 << 2,  /* a field value's: VCHAR, SP, HTAB, obs-text (RFC 9110 §5.5) */
    PETREL__CC_TARGET = 1 << 3, /* a request target's: VCHAR (RFC 9112 §3.2) */
    PETREL__CC_HOST = 1 << 4,   /* a reg-name's or IPv4 address's (RFC 3986 §3.2.2) */
    PETREL__CC_SCHEME = 1 << 5, /* a URI scheme's, after its first letter (RFC 3986 §3.1) */
};
extern const uint8_t petrel__cclass[256];
/* Is [s, s + n) a valid Host or :authority: uri-host [ ":" port ] (RFC 9110 §7.2)? */
bool petrel__host_valid(const char *s, size_t n);
/* Are all n bytes at s of class `cls` (and n > 0)? */
static inline bool petrel__all_of(const char *s, size_t n, uint8_t cls)
{
    uint8_t acc = cls;
    for (size_t i = 0; i < n; i++)
        acc &= petrel__cclass[(unsigned char)s[i]];
    return n > 0 && acc;
}

/* RFC 9110 §6.4.1, §15.3.5, §15.4.5: 1xx, 204 and 304 carry no content. */
static inline bool petrel__status_has_body(int status)
{
    return !(status < 200 || status == 204 || status == 304);
}
/* The default body for a status: "404 Not Found\n". */
size_t petrel__status_body(int status, char *buf, size_t len);
/* "HTTP/1.1 404 Not Found\r\n" for known statuses, formatted otherwise. */
size_t petrel__status_line(int status, char *buf, size_t len);

/* `v` in decimal at p (no NUL); returns the end. */
static inline char *petrel__put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* One pass over an origin-form request target [t, end) (HTTP/1.1 and h2):
 * sets r->query when there is a '?', returns the path's length, and tells
 * in *clean whether the path can be used as it is (no '%', "/." or "//" to
 * decode or resolve). */
static inline size_t petrel__target_split(petrel_req_t *r, const char *t, const char *end,
                                          bool *clean)
{
    const char *q = NULL;
    *clean = true;
    for (const char *x = t; x < end; x++) {
        if (*x == '?') {
            q = x;
            break;
        }
        if (*x == '%' || (*x == '/' && x + 1 < end && (x[1] == '.' || x[1] == '/')))
            *clean = false;
    }
    if (q) {
        r->query.ptr = q + 1;
        r->query.len = (size_t)(end - q - 1);
    }
    return (size_t)((q ? q : end) - t);
}

/* UTF-8 validator (RFC 3629) over pieces: *st starts at 0 and is 0 again at a
 * character boundary; returns how many bytes were valid (n when all). */
size_t petrel__utf8_scan(uint32_t *st, const void *data, size_t n);

#endif /* PETREL_SYNTAX_H */
