/*
 * semantics.c -- HTTP semantics that any handler may need (RFC 9110), as
 * public API: HTTP-dates (§5.6.7), entity-tags (§8.8.3), the preconditions
 * of conditional requests (§13), Range requests (§14) and the choice of a
 * content coding from Accept-Encoding (§12.5.3).
 *
 * The string functions are plain: they read NUL-terminated header values
 * and allocate nothing.  The petrel_req_*() forms find the header fields of
 * a request in one pass over its headers, so that a handler serving
 * generated content answers a conditional or a Range request with one call
 * each.  The static-file module uses them like any other module.
 *
 * HTTP-dates are in syntax.c (one formatter for the whole tree: the Date
 * header of every response, loop.c, once a second, and Last-Modified,
 * modules/static).
 */
#include <petrel.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* Small string helpers                                                     */

static inline char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
}

/* a[0, n) equals the lower-case literal b[0, n), ignoring case */
static bool ieq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != b[i])
            return false;
    return true;
}

static inline const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* ------------------------------------------------------------------------ */
/* Entity-tags (RFC 9110 §8.8.3)                                            */

/* An entity-tag at p: [ "W/" ] DQUOTE *etagc DQUOTE.  Sets the opaque-tag
 * (quotes included) and returns the end, or NULL when p is not one. */
static const char *etag_at(const char *p, bool *weak, const char **tag, size_t *len)
{
    *weak = p[0] == 'W' && p[1] == '/';
    if (*weak)
        p += 2;
    if (*p != '"')
        return NULL;
    const char *q = p + 1;
    /* etagc = %x21 / %x23-7E / obs-text: anything but controls, SP, DQUOTE */
    while ((unsigned char)*q > 0x20 && *q != '"' && *q != 0x7f)
        q++;
    if (*q != '"')
        return NULL;
    *tag = p;
    *len = (size_t)(q + 1 - p);
    return q + 1;
}

/* Whether `list` (an If-Match or If-None-Match value) matches a current
 * representation with entity-tag `etag` (NULL: none) that `exists`. */
static bool list_match(const char *list, const char *etag, bool weak, bool exists)
{
    bool ew = false;
    const char *et = NULL;
    size_t el = 0;
    if (etag && etag_at(etag, &ew, &et, &el) == NULL)
        et = NULL; /* not an entity-tag: matches nothing but "*" */
    const char *p = list;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            return false;
        if (*p == '*')
            return exists; /* any current representation (§13.1.1, §13.1.2) */
        bool w;
        const char *t;
        size_t tl;
        const char *end = etag_at(p, &w, &t, &tl);
        if (end == NULL) {
            /* not an entity-tag: skip this element */
            while (*p && *p != ',')
                p++;
            continue;
        }
        /* §8.8.3.2: strong comparison needs both tags strong */
        if (et && (weak || (!w && !ew)) && tl == el && memcmp(t, et, el) == 0)
            return true;
        p = end;
    }
}

int petrel_etag_match(const char *list, const char *etag, int weak)
{
    if (list == NULL)
        return 0;
    return list_match(list, etag, weak != 0, etag != NULL);
}

/* ------------------------------------------------------------------------ */
/* Conditional requests (RFC 9110 §13)                                      */

/* A second field line of a list field: both values, joined (§5.3); one
 * that cannot be is not evaluated as a list ("": no element matches). */
static const char *join(petrel_req_t *req, const char *a, const char *b)
{
    char *j = petrel_arena_printf(req->arena, "%s, %s", a, b);
    return j ? j : "";
}

void petrel_req_conditions(petrel_req_t *req, petrel_conditions_t *c)
{
    memset(c, 0, sizeof(*c));
    c->method = req->method;
    /* §13.2.1: ignored with a method that neither selects nor changes a
     * representation (CONNECT, OPTIONS, TRACE) */
    if (req->method == PETREL_OPTIONS ||
        (req->method == 0 && (strcmp(req->method_name.ptr, "CONNECT") == 0 ||
                              strcmp(req->method_name.ptr, "TRACE") == 0)))
        return;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = req->headers[i].name.ptr, *v = req->headers[i].value.ptr;
        const char **slot = NULL;
        bool list = false;
        switch (req->headers[i].name.len) {
        case 5:
            if (ieq(n, "range", 5))
                slot = &c->range;
            break;
        case 8:
            if (ieq(n, "if-match", 8))
                slot = &c->if_match, list = true;
            else if (ieq(n, "if-range", 8))
                slot = &c->if_range;
            break;
        case 13:
            if (ieq(n, "if-none-match", 13))
                slot = &c->if_none_match, list = true;
            break;
        case 17:
            if (ieq(n, "if-modified-since", 17))
                slot = &c->if_modified_since;
            break;
        case 19:
            if (ieq(n, "if-unmodified-since", 19))
                slot = &c->if_unmodified_since;
            break;
        }
        if (slot == NULL)
            continue;
        if (*slot == NULL)
            *slot = v;
        else if (list)
            *slot = join(req, *slot, v);
        else
            *slot = ""; /* a single-valued field given twice is invalid: ignored */
    }
}

/* The preconditions, when there is at least one (a noinline function of
 * its own: the common request has none, and pays no more than a test). */
static __attribute__((noinline)) int evaluate(const petrel_conditions_t *c, const char *etag,
                                              time_t last_modified)
{
    bool exists = etag != NULL || last_modified >= 0;
    bool get = c->method == PETREL_GET || c->method == PETREL_HEAD;
    time_t t;
    /* §13.2.2 step 1: If-Match (strong comparison, §13.1.1); step 2:
     * without it, If-Unmodified-Since (§13.1.4: ignored when the
     * representation has no date or the value is no HTTP-date) */
    if (c->if_match) {
        if (!list_match(c->if_match, etag, false, exists))
            return 412;
    } else if (c->if_unmodified_since && last_modified >= 0 &&
               petrel_http_date_parse(c->if_unmodified_since, &t) == 0 && last_modified > t) {
        return 412;
    }
    /* step 3: If-None-Match (weak comparison, §13.1.2); step 4: without
     * it, If-Modified-Since, for GET and HEAD only (§13.1.3) */
    if (c->if_none_match) {
        if (list_match(c->if_none_match, etag, true, exists))
            return get ? 304 : 412;
    } else if (get && c->if_modified_since && last_modified >= 0 &&
               petrel_http_date_parse(c->if_modified_since, &t) == 0 && last_modified <= t) {
        return 304;
    }
    return 0;
}

int petrel_preconditions(const petrel_conditions_t *c, const char *etag, time_t last_modified)
{
    if (c->if_match == NULL && c->if_none_match == NULL && c->if_modified_since == NULL &&
        c->if_unmodified_since == NULL)
        return 0;
    return evaluate(c, etag, last_modified);
}

int petrel_req_preconditions(petrel_req_t *req, const char *etag, time_t last_modified)
{
    petrel_conditions_t c;
    petrel_req_conditions(req, &c);
    return petrel_preconditions(&c, etag, last_modified);
}

int petrel_if_range(const char *value, const char *etag, time_t last_modified)
{
    if (value == NULL)
        return 1;
    const char *v = skip_ows(value);
    bool w;
    const char *t;
    size_t tl;
    const char *end = etag_at(v, &w, &t, &tl);
    if (end != NULL) {
        /* an entity-tag: strong comparison (§13.1.5); a weak one never
         * matches */
        bool ew;
        const char *et;
        size_t el;
        return *skip_ows(end) == '\0' && !w && etag && etag_at(etag, &ew, &et, &el) && !ew &&
               tl == el && memcmp(t, et, el) == 0;
    }
    /* an HTTP-date: true when it is the Last-Modified of the
     * representation and that is a strong validator (§8.8.2.2): the
     * representation cannot change again within that second, which has
     * passed */
    time_t d;
    return last_modified >= 0 && petrel_http_date_parse(v, &d) == 0 && d == last_modified &&
           last_modified < time(NULL);
}

/* ------------------------------------------------------------------------ */
/* Range requests (RFC 9110 §14)                                            */

#define POS_HUGE (UINT64_C(1) << 62)

/* 1*DIGIT into *v (saturating at POS_HUGE); returns the end, or NULL. */
static const char *parse_pos(const char *p, uint64_t *v)
{
    if (*p < '0' || *p > '9')
        return NULL;
    uint64_t x = 0;
    while (*p >= '0' && *p <= '9') {
        x = x < POS_HUGE / 10 ? x * 10 + (uint64_t)(*p - '0') : POS_HUGE;
        p++;
    }
    *v = x;
    return p;
}

/* More range-specs than this: the header is ignored (§14.2 lets a server
 * ignore a Range it deems abusive; many small ranges are one). */
#define RANGE_SPECS_MAX 16

static int range_cmp(const petrel_range_t *a, const petrel_range_t *b)
{
    return a->off < b->off ? -1 : a->off > b->off;
}

int petrel_range_parse(const char *value, uint64_t size, petrel_range_t *r)
{
    if (value == NULL)
        return 0;
    /* ranges-specifier = range-unit "=" range-set (§14.1.1); the unit is
     * case-insensitive (§14.1) */
    const char *p = skip_ows(value);
    if (!ieq(p, "bytes", 5))
        return 0;
    p = skip_ows(p + 5);
    if (*p++ != '=')
        return 0;
    petrel_range_t set[RANGE_SPECS_MAX];
    size_t n = 0, specs = 0;
    bool empty_suffix = false; /* a suffix of an empty representation */
    for (;;) {
        /* range-set = 1#range-spec: empty elements and OWS allowed (§5.6.1) */
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        if (++specs > RANGE_SPECS_MAX)
            return 0;
        uint64_t a = 0, b = 0;
        const char *q = parse_pos(p, &a);
        bool has_a = q != NULL;
        if (q)
            p = q;
        if (*p++ != '-')
            return 0;
        q = parse_pos(p, &b);
        bool has_b = q != NULL;
        if (q)
            p = q;
        p = skip_ows(p);
        if ((*p != ',' && *p != '\0') || (!has_a && !has_b))
            return 0; /* not an int-range or a suffix-range: invalid */
        if (has_a && has_b && b < a)
            return 0; /* §14.1.1: invalid, and so is the whole header */
        if (size == 0) {
            /* §14.1.3: of an empty representation, only a suffix-range of
             * a non-zero length is satisfiable */
            empty_suffix = empty_suffix || (!has_a && b > 0);
            continue;
        }
        if (has_a) {
            if (a >= size)
                continue; /* unsatisfiable (§14.1.1): left out */
            set[n].off = a;
            set[n].len = (has_b && b < size - 1 ? b : size - 1) - a + 1;
        } else {
            if (b == 0)
                continue; /* a suffix of no byte: unsatisfiable */
            uint64_t len = b < size ? b : size;
            set[n].off = size - len;
            set[n].len = len;
        }
        n++;
    }
    if (specs == 0)
        return 0;
    if (size == 0 && empty_suffix)
        return 0; /* satisfiable, but a 206 cannot say "no bytes": a 200 can */
    if (n == 0)
        return 416;
    /* ranges that overlap or touch are one (§14.2: a server MAY coalesce) */
    for (size_t i = 1; i < n; i++) /* insertion sort: n <= 16 */
        for (size_t j = i; j > 0 && range_cmp(&set[j - 1], &set[j]) > 0; j--) {
            petrel_range_t x = set[j];
            set[j] = set[j - 1];
            set[j - 1] = x;
        }
    petrel_range_t one = set[0];
    for (size_t i = 1; i < n; i++) {
        if (set[i].off > one.off + one.len)
            return 0; /* several disjoint ranges: the whole representation */
        uint64_t end = set[i].off + set[i].len;
        if (end > one.off + one.len)
            one.len = end - one.off;
    }
    *r = one;
    return 206;
}

int petrel_range_select(const petrel_conditions_t *c, uint64_t size, const char *etag,
                        time_t last_modified, petrel_range_t *r)
{
    /* §14.2: Range is defined for GET only; §13.2.2 step 5: If-Range */
    if (c->range == NULL || c->method != PETREL_GET ||
        !petrel_if_range(c->if_range, etag, last_modified))
        return 0;
    return petrel_range_parse(c->range, size, r);
}

int petrel_req_range(petrel_req_t *req, uint64_t size, const char *etag, time_t last_modified,
                     petrel_range_t *r)
{
    petrel_conditions_t c;
    petrel_req_conditions(req, &c);
    int rc = petrel_range_select(&c, size, etag, last_modified, r);
    char cr[72];
    if (rc == 206)
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)r->off,
                 (unsigned long long)(r->off + r->len - 1), (unsigned long long)size);
    else if (rc == 416)
        snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
    else
        return rc;
    int e = petrel_resp_header(req, "Content-Range", cr);
    return e < 0 ? e : rc;
}

/* ------------------------------------------------------------------------ */
/* Content codings (RFC 9110 §12.5.3)                                       */

/* A qvalue (§12.4.2) in thousandths, or -1 when it is not one. */
static int parse_q(const char *p, const char **end)
{
    int v;
    if (*p == '0')
        v = 0;
    else if (*p == '1')
        v = 1000;
    else
        return -1;
    p++;
    if (*p == '.') {
        p++;
        int scale = 100;
        for (int i = 0; i < 3 && *p >= '0' && *p <= '9'; i++, p++, scale /= 10)
            v += (*p - '0') * scale;
    }
    *end = p;
    return v > 1000 ? 1000 : v;
}

/* The canonical name of a coding token: "x-gzip" is "gzip", "x-compress"
 * is "compress" (§8.4.1.1, §8.4.1.3). */
static void coding_name(const char *t, size_t tl, const char **name, size_t *len)
{
    if ((tl == 6 && ieq(t, "x-gzip", 6)) || (tl == 10 && ieq(t, "x-compress", 10))) {
        t += 2;
        tl -= 2;
    }
    *name = t;
    *len = tl;
}

/* The q of the element of `accept` naming `name` (len bytes; "*" for the
 * wildcard), or -1 when none does; the last such element counts. */
static int coding_q(const char *accept, const char *name, size_t len)
{
    int found = -1;
    const char *p = accept;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        const char *t = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        const char *cn;
        size_t cl;
        coding_name(t, (size_t)(p - t), &cn, &cl);
        int q = 1000;
        /* parameters: only q matters (weight = OWS ";" OWS "q=" qvalue) */
        for (;;) {
            p = skip_ows(p);
            if (*p != ';')
                break;
            p = skip_ows(p + 1);
            if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
                const char *e;
                int v = parse_q(p + 2, &e);
                if (v >= 0) {
                    q = v;
                    p = e;
                }
            }
            while (*p && *p != ';' && *p != ',')
                p++;
        }
        while (*p && *p != ',')
            p++;
        if (cl == len && ieq(cn, name, len))
            found = q;
    }
    return found;
}

int petrel_accept_encoding(const char *accept, const char *const *codings, size_t n)
{
    /* no field: no preference; the representation as it is (§12.5.3) */
    if (accept == NULL || codings == NULL)
        return PETREL_CODING_IDENTITY;
    int q_any = coding_q(accept, "*", 1);
    int q_id = coding_q(accept, "identity", 8);
    /* identity, when the field does not rank it, loses to any coding the
     * client lists with a q above 0 */
    int best = PETREL_CODING_IDENTITY, best_q = q_id >= 0 ? q_id : q_any >= 0 ? q_any : 0;
    for (size_t i = 0; i < n; i++) {
        char lname[32];
        size_t l = strlen(codings[i]);
        if (l == 0 || l >= sizeof(lname))
            continue;
        for (size_t k = 0; k < l; k++)
            lname[k] = lower(codings[i][k]);
        const char *cn;
        size_t cl;
        coding_name(lname, l, &cn, &cl);
        int q = coding_q(accept, cn, cl);
        if (q < 0)
            q = q_any; /* "*": any coding not listed */
        /* q=0: not acceptable; a tie goes to the coding, then to the
         * earlier one of the caller's list */
        if (q > 0 && (q > best_q || (q == best_q && best == PETREL_CODING_IDENTITY))) {
            best = (int)i;
            best_q = q;
        }
    }
    return best;
}
