/*
 * fuzz_range.c -- the HTTP semantics of the public API (src/framework/semantics.c),
 * which the static module and any handler use: petrel_range_parse (RFC
 * 9110 §14.1.2), If-Range (§13.1.5), If-Match / If-None-Match entity-tag
 * lists (§13.1.1, §13.1.2), If-Modified-Since / If-Unmodified-Since and the
 * HTTP-date forms (§5.6.7), the precondition order (§13.2.2),
 * Accept-Encoding (§12.5.3); and the static module's MIME table and
 * Location encoder.
 *
 * Input: 8 bytes of representation size (the low bit of the first byte
 * picks a small size, 0..255, so that the edges are reached), then up to
 * four NUL-separated strings: a Range value, an If-Range value, a date, an
 * entity-tag list.  Asserted:
 *   - petrel_range_parse agrees with an independent reading of the
 *     range-set: 206 only for the one range that the satisfiable ranges
 *     make when merged (within the representation, no overflow), 416 only
 *     when none is satisfiable, 0 otherwise; *r untouched unless 206;
 *   - a parsed date is not before 1970 and formats back into a date that
 *     parses to the same time (up to year 9999);
 *   - precondition results are 0, 304 or 412; codings are ones offered;
 *   - the Location encoder stays within 3 * len bytes, only emitting
 *     allowed characters.
 */
#include "petrel.h"

#include "static/static.h"

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

typedef struct span {
    uint64_t a, b; /* first and last byte */
} span_t;

static int span_cmp(const void *x, const void *y)
{
    const span_t *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* An independent reading of a Range value (§14.1.1, §14.1.2, §14.2): 0 to
 * ignore it, 416, or 206 with the merged range in *one. */
static int expect(const char *s, uint64_t size, span_t *one)
{
    const uint64_t huge = UINT64_C(1) << 62;
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncasecmp(s, "bytes", 5) != 0)
        return 0;
    s += 5;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s++ != '=')
        return 0;
    span_t set[17];
    int n = 0, specs = 0;
    bool empty_ok = false;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        if (*s == '\0')
            break;
        if (++specs > 16)
            return 0;
        bool ha = false, hb = false;
        uint64_t a = 0, b = 0;
        for (; *s >= '0' && *s <= '9'; s++) {
            ha = true;
            a = a < huge / 10 ? a * 10 + (uint64_t)(*s - '0') : huge;
        }
        if (*s++ != '-')
            return 0;
        for (; *s >= '0' && *s <= '9'; s++) {
            hb = true;
            b = b < huge / 10 ? b * 10 + (uint64_t)(*s - '0') : huge;
        }
        while (*s == ' ' || *s == '\t')
            s++;
        if ((*s != ',' && *s != '\0') || (!ha && !hb) || (ha && hb && b < a))
            return 0;
        if (size == 0) {
            empty_ok = empty_ok || (!ha && b > 0);
            continue;
        }
        if (ha && a < size)
            set[n++] = (span_t){a, hb && b < size ? b : size - 1};
        else if (!ha && b > 0)
            set[n++] = (span_t){b < size ? size - b : 0, size - 1};
    }
    if (specs == 0 || (size == 0 && empty_ok))
        return 0;
    if (n == 0)
        return 416;
    qsort(set, (size_t)n, sizeof(set[0]), span_cmp);
    *one = set[0];
    for (int i = 1; i < n; i++) {
        if (set[i].a > one->b + 1)
            return 0;
        if (set[i].b > one->b)
            one->b = set[i].b;
    }
    return 206;
}

static void check_range(const char *range, uint64_t size)
{
    petrel_range_t r = {12345, 67890};
    int rc = petrel_range_parse(range, size, &r);
    span_t one;
    int want = expect(range, size, &one);
    if (rc != want) {
        fprintf(stderr, "fuzz_range: size %llu: %d, expected %d\n", (unsigned long long)size, rc,
                want);
        fail("petrel_range_parse disagrees", range);
    }
    if (rc == 206) {
        if (r.len == 0 || r.off >= size || r.len > size - r.off)
            fail("206 outside the representation", range);
        if (r.off != one.a || r.off + r.len - 1 != one.b)
            fail("206 with another range than the one asked", range);
    } else if (r.off != 12345 || r.len != 67890) {
        fail("*r changed without a 206", range);
    }
}

static void check_date(const char *s)
{
    time_t t, t2;
    if (petrel_http_date_parse(s, &t) != 0)
        return;
    char buf[32];
    memset(buf, 'x', sizeof(buf));
    petrel_http_date_format(t, buf);
    if (strlen(buf) != 29 || buf[30] != 'x')
        fail("format_date wrote a wrong length", s);
    /* 9999-12-31 23:59:60 is the first second of year 10000, which no
     * HTTP-date spells: format_date writes the epoch for it */
    if (t >= 0 && t < INT64_C(253402300800) && (petrel_http_date_parse(buf, &t2) != 0 || t2 != t))
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
    time_t mtime = 784111777;
    (void)petrel_if_range(f[1], etag, mtime);
    (void)petrel_if_range(f[1], f[3], mtime);
    (void)petrel_etag_match(f[3], etag, 0);
    (void)petrel_etag_match(f[3], etag, 1);
    (void)petrel_etag_match(f[3], f[1], 1);
    /* an entity-tag of etagc (no SP, no DQUOTE, no control) matches itself */
    size_t l1 = strlen(f[1]);
    bool tag = l1 >= 2 && f[1][0] == '"' && f[1][l1 - 1] == '"';
    for (size_t i = 1; tag && i + 1 < l1; i++)
        tag = (unsigned char)f[1][i] > 0x20 && f[1][i] != '"' && f[1][i] != 0x7f;
    if (tag && !petrel_etag_match(f[1], f[1], 0))
        fail("an entity-tag does not match itself", f[1]);
    static const int methods[] = {PETREL_GET, PETREL_HEAD, PETREL_PUT, 0};
    for (int m = 0; m < 4; m++) {
        petrel_conditions_t c[4] = {
            {methods[m], f[3], NULL, NULL, f[2], f[1], f[0]},
            {methods[m], NULL, f[3], f[2], NULL, f[1], f[0]},
            {methods[m], f[1], f[3], f[2], f[2], f[1], f[0]},
            {methods[m], NULL, NULL, f[2], f[2], f[1], f[0]},
        };
        for (int i = 0; i < 4; i++) {
            int rc = petrel_preconditions(&c[i], i & 1 ? NULL : etag, i & 2 ? -1 : mtime);
            if (rc != 0 && rc != 304 && rc != 412)
                fail("precondition result", f[2]);
            if (rc == 304 && methods[m] != PETREL_GET && methods[m] != PETREL_HEAD)
                fail("304 for a method other than GET and HEAD", f[2]);
            petrel_range_t r;
            rc = petrel_range_select(&c[i], rsize, etag, mtime, &r);
            if ((rc != 0 && methods[m] != PETREL_GET) || (rc != 0 && rc != 206 && rc != 416))
                fail("range_select result", f[0]);
        }
    }
    static const char *const codings[] = {"br", "gzip", "zstd"};
    for (size_t n = 0; n <= 3; n++) {
        int e = petrel_accept_encoding(f[3], codings, n);
        if (e != PETREL_CODING_IDENTITY && (e < 0 || (size_t)e >= n))
            fail("a coding that was not offered", f[3]);
    }
    (void)petrel__static_mime(f[0], strlen(f[0]), "application/octet-stream");
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
