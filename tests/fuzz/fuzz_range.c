/*
 * fuzz_range.c -- Range and conditional-request parsing of the static
 * handler (modules/static.c): petrel__static_range (RFC 9110 §14.1.2),
 * If-Range (§13.1.5), If-Match / If-None-Match entity-tag lists (§13.1.1,
 * §13.1.2), If-Modified-Since / If-Unmodified-Since and the HTTP-date forms
 * (§5.6.7), the precondition order (§13.2.2), Accept-Encoding (§12.5.3) and
 * the Location encoder.
 *
 * Input: 8 bytes of representation size (the low bit of the first byte
 * picks a small size, 0..255, so that the edges are reached), then up to
 * four NUL-separated strings: a Range value, an If-Range value, a date, an
 * entity-tag list.  Asserted:
 *   - 206: 1 <= len, off + len <= size (no overflow), and the range is the
 *     one written: off is the first-pos when one was given, the last byte
 *     is min(last-pos, size - 1), a suffix gives the last bytes;
 *   - 416 only when no byte is satisfiable; 0 otherwise;
 *   - a parsed date is not before 1970 and formats back into a date that
 *     parses to the same time (up to year 9999);
 *   - precondition results are 0, 304 or 412; encodings are ones offered;
 *   - the Location encoder stays within 3 * len bytes, only emitting
 *     allowed characters.
 */
#include "petrel.h"

#include "static-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn)) static void fail(const char *what, const char *s)
{
    fprintf(stderr, "fuzz_range: %s: '%s'\n", what, s);
    abort();
}

/* An independent reading of a single "bytes=a-b" range: true when it is
 * one, with has_a/has_b and the numbers (saturated). */
static bool spec(const char *s, bool *has_a, uint64_t *a, bool *has_b, uint64_t *b)
{
    const uint64_t huge = UINT64_C(1) << 62;
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncasecmp(s, "bytes", 5) != 0)
        return false;
    s += 5;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s++ != '=')
        return false;
    while (*s == ' ' || *s == '\t')
        s++;
    *has_a = *has_b = false;
    *a = *b = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        *has_a = true;
        *a = *a < huge / 10 ? *a * 10 + (uint64_t)(*s - '0') : huge;
    }
    if (*s++ != '-')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        *has_b = true;
        *b = *b < huge / 10 ? *b * 10 + (uint64_t)(*s - '0') : huge;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    return *s == '\0' && (*has_a || *has_b);
}

static void check_range(const char *range, uint64_t size)
{
    uint64_t off = 12345, len = 67890;
    int rc = petrel__static_range(range, size, &off, &len);
    bool ha, hb;
    uint64_t a, b;
    bool one = spec(range, &ha, &a, &hb, &b);
    if (rc == 206) {
        if (len == 0 || off >= size || len > size - off)
            fail("206 outside the representation", range);
        if (!one)
            fail("206 for what is not one range", range);
        if (ha) {
            uint64_t last = hb && b < size - 1 ? b : size - 1;
            if (off != a || off + len - 1 != last || (hb && b < a))
                fail("206 with another range than the one asked", range);
        } else if (len != (b < size ? b : size) || off + len != size) {
            fail("suffix range is not the last bytes", range);
        }
    } else if (rc == 416) {
        if (!one)
            fail("416 for what is not one range", range);
        bool unsat = ha ? a >= size && !(hb && b < a) : (b == 0 || size == 0);
        if (!unsat)
            fail("416 for a satisfiable range", range);
    } else if (rc != 0) {
        fail("unexpected result", range);
    } else if (one && !(ha && hb && b < a)) {
        fail("a valid single range was ignored", range);
    }
}

static void check_date(const char *s)
{
    time_t t, t2;
    if (petrel__static_parse_date(s, &t) != 0)
        return;
    char buf[32];
    memset(buf, 'x', sizeof(buf));
    petrel__static_format_date(t, buf);
    if (strlen(buf) != 29 || buf[30] != 'x')
        fail("format_date wrote a wrong length", s);
    /* 9999-12-31 23:59:60 is the first second of year 10000, which no
     * HTTP-date spells: format_date writes the epoch for it */
    if (t >= 0 && t < INT64_C(253402300800) &&
        (petrel__static_parse_date(buf, &t2) != 0 || t2 != t))
        fail("a parsed date does not survive formatting", s);
    if (t < 0)
        fail("a date before 1970", s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t rsize;
    memcpy(&rsize, data, 8);
    if (data[0] & 1)
        rsize = data[1];
    /* the strings, NUL-terminated copies of exactly their size */
    char *f[4] = {NULL, NULL, NULL, NULL};
    const uint8_t *p = data + 8, *end = data + size;
    for (int i = 0; i < 4; i++) {
        const uint8_t *z = memchr(p, '\0', (size_t)(end - p));
        size_t l = z ? (size_t)(z - p) : (size_t)(end - p);
        f[i] = malloc(l + 1);
        memcpy(f[i], p, l);
        f[i][l] = '\0';
        p = z ? z + 1 : end;
    }
    check_range(f[0], rsize);
    for (int i = 0; i < 4; i++)
        check_date(f[i]);

    const char *etag = "\"5f3a-1c8\"";
    const char *lm = "Sun, 06 Nov 1994 08:49:37 GMT";
    time_t mtime = 784111777;
    (void)petrel__static_if_range(f[1], etag, lm);
    (void)petrel__static_if_range(f[1], f[3], f[2]);
    (void)petrel__static_etag_match(f[3], etag, false);
    (void)petrel__static_etag_match(f[3], etag, true);
    if (f[1][0] == '"' && strchr(f[1] + 1, '"') == f[1] + strlen(f[1]) - 1 &&
        !petrel__static_etag_match(f[1], f[1], false))
        fail("an entity-tag does not match itself", f[1]);
    petrel__static_cond_t c[4] = {
        {f[3], NULL, NULL, f[2]},
        {NULL, f[3], f[2], NULL},
        {f[1], f[3], f[2], f[2]},
        {NULL, NULL, f[2], f[2]},
    };
    for (int i = 0; i < 4; i++) {
        int rc = petrel__static_precondition(&c[i], etag, mtime, lm);
        if (rc != 0 && rc != 304 && rc != 412)
            fail("precondition result", f[2]);
    }
    for (unsigned avail = 0; avail < 4; avail++) {
        int e = petrel__static_pick_encoding(f[3], avail);
        if (e != 0 && ((e != PETREL__ENC_BR && e != PETREL__ENC_GZIP) || !(e & (int)avail)))
            fail("an encoding that was not offered", f[3]);
    }
    (void)petrel__static_mime(f[0], strlen(f[0]));
    size_t l0 = strlen(f[0]);
    char *enc = malloc(3 * l0 + 1);
    size_t el = petrel__static_uri_encode(f[0], l0, enc);
    if (el > 3 * l0 || enc[el] != '\0' || strlen(enc) != el)
        fail("uri_encode length", f[0]);
    for (size_t i = 0; i < el; i++)
        if (strchr(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/%",
                enc[i]) == NULL)
            fail("uri_encode emitted a character outside its set", f[0]);
    free(enc);
    for (int i = 0; i < 4; i++)
        free(f[i]);
    return 0;
}
