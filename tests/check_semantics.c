/*
 * check_semantics.c -- unit tests of src/framework/semantics.c, the HTTP semantics
 * of the public API (RFC 9110): HTTP-dates (§5.6.7), entity-tag
 * comparison (§8.8.3.2), the preconditions in their order (§13.1, §13.2),
 * If-Range (§13.1.5), Range (§14.1, §14.2) and Accept-Encoding (§12.5.3).
 * The petrel_req_*() forms that write response fields are driven through a
 * real connection in check_static.c ("generated").
 */
#include "check_util.h"

#include "runtime/arena.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const LM = "Sun, 06 Nov 1994 08:49:37 GMT";
static const time_t LMT = 784111777;

/* ------------------------------------------------------------------------ */
/* HTTP-dates (RFC 9110 §5.6.7)                                             */

START_TEST(date_forms)
{
    time_t t = 1;
    /* §5.6.7: a recipient MUST accept all three formats */
    ck_assert_int_eq(petrel_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    ck_assert_int_eq((long long)t, 784111777);
    ck_assert_int_eq(petrel_http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    ck_assert_int_eq((long long)t, 784111777);
    ck_assert_int_eq(petrel_http_date_parse("Sun Nov  6 08:49:37 1994", &t), 0);
    ck_assert_int_eq((long long)t, 784111777);
    ck_assert_int_eq(petrel_http_date_parse("Sun Nov 06 08:49:37 1994", &t), 0);
    ck_assert_int_eq((long long)t, 784111777);
    /* RFC 850 two-digit years: 70-99 are 19xx, 00-69 are 20xx (§5.6.7:
     * a year more than 50 years in the future is in the past) */
    ck_assert_int_eq(petrel_http_date_parse("Thursday, 01-Jan-70 00:00:00 GMT", &t), 0);
    ck_assert_int_eq((long long)t, 0);
    ck_assert_int_eq(petrel_http_date_parse("Saturday, 01-Jan-00 00:00:00 GMT", &t), 0);
    ck_assert_int_eq((long long)t, 946684800);
    /* trailing whitespace of a field value */
    ck_assert_int_eq(petrel_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT  ", &t), 0);
    /* a leap second is the next second */
    ck_assert_int_eq(petrel_http_date_parse("Sun, 06 Nov 1994 23:59:60 GMT", &t), 0);
    ck_assert_int_eq((long long)t, 784166400);
}
END_TEST

START_TEST(date_invalid)
{
    static const char *const bad[] = {
        "",
        "yesterday",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 06 Nov 1994 08:60:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT junk",
        "Sun, 06 Nov 1994 08:49:37 CET",
        "Sun, 06 Nov 1994 08:49:37 gmt", /* §5.6.7: GMT is case-sensitive */
        "sun, 06 Nov 1994 08:49:37 GMT", /* so are day and month names */
        "Sun, 06 Nov 1969 23:59:59 GMT", /* before the epoch */
        "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT", /* a list */
        /* the fuzzing of fuzz_range found sscanf's %d taking signs: every
         * number is a fixed count of DIGITs */
        "Thu, 01 Jan 1970 -1:00:00 GMT",
        "Sun, 06 Nov 1994 08:-4:37 GMT",
        "Sun, 06 Nov 1994 08:49:-7 GMT",
        "Sunday, 06-Nov-94 -8:49:37 GMT",
        "Sun Nov  6 08:-9:37 1994",
        "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sun,  6 Nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov +6 08:49:37 1994",
        "Sun Nov 6 08:49:37 1994",
        "Sun,",
        "Sun Nov",
        "Sunday,",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        time_t t = 42;
        ck_assert_msg(petrel_http_date_parse(bad[i], &t) == PETREL_EINVAL, "'%s' parsed", bad[i]);
        ck_assert_msg(t == 42, "'%s' changed *t", bad[i]);
    }
}
END_TEST

START_TEST(date_format)
{
    char buf[PETREL_HTTP_DATE_SIZE + 2];
    memset(buf, 'x', sizeof(buf));
    ck_assert_uint_eq(petrel_http_date_format(LMT, buf), 29);
    ck_assert_str_eq(buf, LM);
    ck_assert_int_eq(buf[PETREL_HTTP_DATE_SIZE], 'x'); /* nothing past the NUL */
    petrel_http_date_format(0, buf);
    ck_assert_str_eq(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    petrel_http_date_format(INT64_C(253402300799), buf);
    ck_assert_str_eq(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
    /* year 10000 has no HTTP-date: the epoch */
    petrel_http_date_format(INT64_C(253402300800), buf);
    ck_assert_str_eq(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    petrel_http_date_format(-1, buf);
    ck_assert_str_eq(buf, "Wed, 31 Dec 1969 23:59:59 GMT");
    /* what is formatted parses back, over a range of times */
    for (time_t t = 0; t < INT64_C(4102444800); t += 86400 * 37 + 3607) {
        time_t u;
        petrel_http_date_format(t, buf);
        ck_assert_int_eq(petrel_http_date_parse(buf, &u), 0);
        ck_assert_int_eq((long long)u, (long long)t);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Entity-tags (RFC 9110 §8.8.3.2)                                          */

START_TEST(etag_compare)
{
    const char *tag = "\"5f-100\"";
    ck_assert(petrel_etag_match("\"5f-100\"", tag, 0));
    ck_assert(petrel_etag_match("\"x\", \"5f-100\"", tag, 0));
    ck_assert(petrel_etag_match(" ,\"x\" ,, \"5f-100\" ", tag, 0)); /* §5.6.1 empty elements */
    ck_assert(petrel_etag_match("*", tag, 0));
    /* §8.8.3.2: the table of its example */
    ck_assert(!petrel_etag_match("W/\"1\"", "W/\"1\"", 0));
    ck_assert(petrel_etag_match("W/\"1\"", "W/\"1\"", 1));
    ck_assert(!petrel_etag_match("W/\"1\"", "W/\"2\"", 0));
    ck_assert(!petrel_etag_match("W/\"1\"", "W/\"2\"", 1));
    ck_assert(!petrel_etag_match("W/\"1\"", "\"1\"", 0));
    ck_assert(petrel_etag_match("W/\"1\"", "\"1\"", 1));
    ck_assert(petrel_etag_match("\"1\"", "\"1\"", 0));
    ck_assert(petrel_etag_match("\"1\"", "\"1\"", 1));
    ck_assert(!petrel_etag_match("\"1\"", "W/\"1\"", 0));
    /* not entity-tags, or not the same one */
    ck_assert(!petrel_etag_match("\"5f-10\"", tag, 1));
    ck_assert(!petrel_etag_match("\"5f-1000\"", tag, 1));
    ck_assert(!petrel_etag_match("", tag, 1));
    ck_assert(!petrel_etag_match("5f-100", tag, 1)); /* not quoted */
    ck_assert(petrel_etag_match("junk, \"5f-100\"", tag, 1));
    ck_assert(!petrel_etag_match("\"5f-100", tag, 1));            /* unterminated */
    ck_assert(!petrel_etag_match("\"5f 100\"", "\"5f 100\"", 1)); /* SP is no etagc */
    ck_assert(!petrel_etag_match(NULL, tag, 1));
    ck_assert(!petrel_etag_match("*", NULL, 1));              /* no representation */
    ck_assert(!petrel_etag_match("\"5f-100\"", "5f-100", 1)); /* ours is no entity-tag */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Preconditions (RFC 9110 §13.1, §13.2.2)                                  */

static int pre(int method, const char *im, const char *inm, const char *ims, const char *ius,
               const char *etag, time_t lm)
{
    petrel_conditions_t c;
    memset(&c, 0, sizeof(c));
    c.method = method;
    c.if_match = im;
    c.if_none_match = inm;
    c.if_modified_since = ims;
    c.if_unmodified_since = ius;
    return petrel_preconditions(&c, etag, lm);
}

START_TEST(preconditions_get)
{
    const char *tag = "\"5f-100\"";
    const int G = PETREL_GET;
    ck_assert_int_eq(pre(G, NULL, NULL, NULL, NULL, tag, LMT), 0);
    /* §13.1.2: If-None-Match, weak comparison; false for GET/HEAD: 304 */
    ck_assert_int_eq(pre(G, NULL, tag, NULL, NULL, tag, LMT), 304);
    ck_assert_int_eq(pre(PETREL_HEAD, NULL, tag, NULL, NULL, tag, LMT), 304);
    ck_assert_int_eq(pre(G, NULL, "W/\"5f-100\"", NULL, NULL, tag, LMT), 304);
    ck_assert_int_eq(pre(G, NULL, "\"other\"", NULL, NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, "*", NULL, NULL, tag, LMT), 304);
    /* §13.1.3: If-Modified-Since, false when not modified since */
    ck_assert_int_eq(pre(G, NULL, NULL, LM, NULL, tag, LMT), 304);
    ck_assert_int_eq(pre(G, NULL, NULL, "Sun, 06 Nov 1994 08:49:38 GMT", NULL, tag, LMT), 304);
    ck_assert_int_eq(pre(G, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, NULL, "Sunday, 06-Nov-94 08:49:37 GMT", NULL, tag, LMT), 304);
    /* §13.1.3: MUST ignore an invalid date, a list, or no modification date */
    ck_assert_int_eq(pre(G, NULL, NULL, "garbage", NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, NULL, "Sun, 06 Nov 1994 08:49:37 GMT, x", NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, NULL, LM, NULL, tag, -1), 0);
    /* §13.2.2 step 4: If-Modified-Since only without If-None-Match */
    ck_assert_int_eq(pre(G, NULL, "\"other\"", LM, NULL, tag, LMT), 0);
    /* §13.1.1: If-Match, strong comparison */
    ck_assert_int_eq(pre(G, tag, NULL, NULL, NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(G, "\"other\"", NULL, NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(G, "W/\"5f-100\"", NULL, NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(G, "*", NULL, NULL, NULL, tag, LMT), 0);
    /* §13.1.4: If-Unmodified-Since */
    ck_assert_int_eq(pre(G, NULL, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", tag, LMT), 412);
    ck_assert_int_eq(pre(G, NULL, NULL, NULL, LM, tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, NULL, NULL, "garbage", tag, LMT), 0);
    ck_assert_int_eq(pre(G, NULL, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", tag, -1), 0);
    /* §13.2.2 step 2: If-Unmodified-Since only without If-Match */
    ck_assert_int_eq(pre(G, tag, NULL, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", tag, LMT), 0);
    /* steps 1-2 come before 3-4: 412 before 304 */
    ck_assert_int_eq(pre(G, "\"other\"", tag, NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(G, NULL, tag, NULL, "Sun, 06 Nov 1994 08:49:36 GMT", tag, LMT), 412);
    /* a weak entity-tag of our own: If-None-Match still matches it */
    ck_assert_int_eq(pre(G, NULL, "\"v1\"", NULL, NULL, "W/\"v1\"", LMT), 304);
    ck_assert_int_eq(pre(G, "\"v1\"", NULL, NULL, NULL, "W/\"v1\"", LMT), 412);
    /* a resource with a date and no entity-tag */
    ck_assert_int_eq(pre(G, NULL, NULL, LM, NULL, NULL, LMT), 304);
    ck_assert_int_eq(pre(G, NULL, "\"x\"", NULL, NULL, NULL, LMT), 0);
    ck_assert_int_eq(pre(G, "*", NULL, NULL, NULL, NULL, LMT), 0);
}
END_TEST

START_TEST(preconditions_other_methods)
{
    const char *tag = "\"v7\"";
    /* §13.1.2: If-None-Match false with another method: 412 */
    ck_assert_int_eq(pre(PETREL_PUT, NULL, tag, NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(PETREL_DELETE, NULL, "*", NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(0, NULL, tag, NULL, NULL, tag, LMT), 412); /* e.g. PROPPATCH */
    /* §13.1.3: If-Modified-Since MUST be ignored for methods but GET, HEAD */
    ck_assert_int_eq(pre(PETREL_POST, NULL, NULL, LM, NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(PETREL_PUT, NULL, NULL, LM, NULL, tag, LMT), 0);
    /* lost updates: If-Match with the entity-tag the client saw */
    ck_assert_int_eq(pre(PETREL_PUT, "\"v6\"", NULL, NULL, NULL, tag, LMT), 412);
    ck_assert_int_eq(pre(PETREL_PUT, "\"v6\", \"v7\"", NULL, NULL, NULL, tag, LMT), 0);
    ck_assert_int_eq(pre(PETREL_PATCH, NULL, NULL, NULL, "Sun, 06 Nov 1994 08:00:00 GMT", tag, LMT),
                     412);
    /* no current representation (a PUT that would create the resource):
     * "If-None-Match: *" passes (§13.1.2), "If-Match: *" fails (§13.1.1) */
    ck_assert_int_eq(pre(PETREL_PUT, NULL, "*", NULL, NULL, NULL, -1), 0);
    ck_assert_int_eq(pre(PETREL_PUT, "*", NULL, NULL, NULL, NULL, -1), 412);
    ck_assert_int_eq(pre(PETREL_PUT, tag, NULL, NULL, NULL, NULL, -1), 412);
    ck_assert_int_eq(pre(PETREL_PUT, NULL, NULL, NULL, LM, NULL, -1), 0);
    /* ... and with one, "If-None-Match: *" fails */
    ck_assert_int_eq(pre(PETREL_PUT, NULL, "*", NULL, NULL, tag, LMT), 412);
}
END_TEST

/* A request with these header fields, on an arena of the fixture. */
static petrel_arena_t arena;
static petrel_header_t hdrs[8];
static petrel_req_t req;

static void req_setup(void)
{
    petrel__pool_init(&petrel__pool, 16);
    petrel__arena_init(&arena, &petrel__pool, 0);
}

static void req_teardown(void)
{
    petrel__arena_clear(&arena);
    petrel__pool_fini(&petrel__pool);
}

static petrel_req_t *make_req(int method, const char *name, ...)
{
    va_list ap;
    va_start(ap, name);
    memset(&req, 0, sizeof(req));
    req.method = method;
    req.method_name.ptr = name;
    req.method_name.len = strlen(name);
    req.arena = &arena;
    const char *n;
    while ((n = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        hdrs[req.nheaders].name = (petrel_str_t){n, strlen(n)};
        hdrs[req.nheaders].value = (petrel_str_t){v, strlen(v)};
        req.nheaders++;
    }
    va_end(ap);
    req.headers = hdrs;
    return &req;
}

START_TEST(request_conditions)
{
    petrel_conditions_t c;
    petrel_req_conditions(make_req(PETREL_GET, "GET", "Host", "x", "if-none-match", "\"a\"",
                                   "IF-MATCH", "*", "If-Modified-Since", LM, "If-Unmodified-Since",
                                   LM, "If-Range", "\"a\"", "Range", "bytes=0-1", "Accept", "*/*",
                                   NULL),
                          &c);
    ck_assert_int_eq(c.method, PETREL_GET);
    ck_assert_str_eq(c.if_none_match, "\"a\"");
    ck_assert_str_eq(c.if_match, "*");
    ck_assert_str_eq(c.if_modified_since, LM);
    ck_assert_str_eq(c.if_unmodified_since, LM);
    ck_assert_str_eq(c.if_range, "\"a\"");
    ck_assert_str_eq(c.range, "bytes=0-1");
    /* §5.3: a list field on several lines is one list */
    petrel_req_conditions(make_req(PETREL_GET, "GET", "If-None-Match", "\"a\"", "If-None-Match",
                                   "\"b\", \"c\"", NULL),
                          &c);
    ck_assert_str_eq(c.if_none_match, "\"a\", \"b\", \"c\"");
    ck_assert_int_eq(petrel_req_preconditions(&req, "\"c\"", LMT), 304);
    /* a single-valued field twice is invalid: ignored (§13.1.3, §14.2) */
    petrel_req_conditions(make_req(PETREL_GET, "GET", "If-Modified-Since", LM, "If-Modified-Since",
                                   LM, "Range", "bytes=0-1", "Range", "bytes=2-3", NULL),
                          &c);
    ck_assert_str_eq(c.if_modified_since, "");
    ck_assert_int_eq(petrel_req_preconditions(&req, "\"c\"", LMT), 0);
    petrel_range_t r;
    ck_assert_int_eq(petrel_range_select(&c, 100, "\"c\"", LMT, &r), 0);
    /* §13.2.1: ignored for methods that do not select a representation */
    static const struct {
        int method;
        const char *name;
    } none[] = {{PETREL_OPTIONS, "OPTIONS"}, {0, "CONNECT"}, {0, "TRACE"}};
    for (size_t i = 0; i < 3; i++) {
        petrel_req_conditions(make_req(none[i].method, none[i].name, "If-Match", "\"zz\"", "Range",
                                       "bytes=0-0", NULL),
                              &c);
        ck_assert_ptr_null(c.if_match);
        ck_assert_ptr_null(c.range);
        ck_assert_int_eq(petrel_req_preconditions(&req, "\"a\"", LMT), 0);
    }
    /* but not for other unknown methods (WebDAV's change representations) */
    petrel_req_conditions(make_req(0, "PROPPATCH", "If-Match", "\"zz\"", NULL), &c);
    ck_assert_str_eq(c.if_match, "\"zz\"");
    ck_assert_int_eq(petrel_req_preconditions(&req, "\"a\"", LMT), 412);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* If-Range (RFC 9110 §13.1.5)                                              */

START_TEST(if_range)
{
    const char *tag = "\"5f-100\"";
    ck_assert(petrel_if_range(NULL, tag, LMT));
    ck_assert(petrel_if_range(tag, tag, LMT));
    ck_assert(!petrel_if_range("\"other\"", tag, LMT));
    /* weak entity-tags never match (strong comparison) */
    ck_assert(!petrel_if_range("W/\"5f-100\"", tag, LMT));
    ck_assert(!petrel_if_range("\"v\"", "W/\"v\"", LMT));
    ck_assert(!petrel_if_range(tag, NULL, LMT));
    /* a date: exactly the Last-Modified, which is strong (long past) */
    ck_assert(petrel_if_range(LM, tag, LMT));
    ck_assert(petrel_if_range("Sunday, 06-Nov-94 08:49:37 GMT", tag, LMT));
    ck_assert(!petrel_if_range("Sun, 06 Nov 1994 08:49:38 GMT", tag, LMT));
    ck_assert(!petrel_if_range("Sun, 06 Nov 1994 08:49:36 GMT", tag, LMT));
    ck_assert(!petrel_if_range(LM, tag, -1));
    ck_assert(!petrel_if_range("garbage", tag, LMT));
    /* §8.8.2.2: a Last-Modified of this very second is weak: false */
    char now[PETREL_HTTP_DATE_SIZE];
    time_t t = time(NULL) + 1; /* a second that has not passed */
    petrel_http_date_format(t, now);
    ck_assert(!petrel_if_range(now, tag, t));
    petrel_http_date_format(t - 10, now);
    ck_assert(petrel_if_range(now, tag, t - 10));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Range (RFC 9110 §14)                                                     */

START_TEST(ranges)
{
    static const struct {
        const char *h;
        uint64_t size;
        int rc;
        uint64_t off, len;
    } cases[] = {
        {NULL, 100, 0, 0, 0},
        /* §14.1.2: int-range, suffix-range */
        {"bytes=0-0", 100, 206, 0, 1},
        {"bytes=0-99", 100, 206, 0, 100},
        {"bytes=0-1000", 100, 206, 0, 100}, /* last-pos past the end: the end */
        {"bytes=10-", 100, 206, 10, 90},
        {"bytes=99-", 100, 206, 99, 1},
        {"bytes=-10", 100, 206, 90, 10},
        {"bytes=-1000", 100, 206, 0, 100}, /* §14.1.3: the entire representation */
        /* §14.1.1: unsatisfiable: first-pos past the end, suffix of 0 */
        {"bytes=100-", 100, 416, 0, 0},
        {"bytes=100-200", 100, 416, 0, 0},
        {"bytes=-0", 100, 416, 0, 0},
        {"bytes=100-,-0", 100, 416, 0, 0},
        /* §14.1.3: of an empty representation, only a suffix-range is
         * satisfiable; it selects nothing, which a 200 says */
        {"bytes=0-", 0, 416, 0, 0},
        {"bytes=0-0", 0, 416, 0, 0},
        {"bytes=-0", 0, 416, 0, 0},
        {"bytes=-5", 0, 0, 0, 0},
        {"bytes=0-0,-5", 0, 0, 0, 0},
        /* §14.1: the unit is case-insensitive; OWS */
        {"Bytes = 5-9", 100, 206, 5, 5},
        {"bytes=5-9 ", 100, 206, 5, 5},
        /* §14.1.1: invalid: the whole header is ignored */
        {"bytes=9-5", 100, 0, 0, 0},
        {"bytes=0-1,9-5", 100, 0, 0, 0},
        {"bytes=-", 100, 0, 0, 0},
        {"bytes=", 100, 0, 0, 0},
        {"bytes=,", 100, 0, 0, 0},
        {"bytes=a-b", 100, 0, 0, 0},
        {"items=0-5", 100, 0, 0, 0},
        {"bytes 0-5", 100, 0, 0, 0},
        {"bytes=0-5x", 100, 0, 0, 0},
        {"bytes=0-5;x", 100, 0, 0, 0},
        /* several ranges: merged when they overlap or touch (§14.2) */
        {"bytes=0-9,10-19", 100, 206, 0, 20},
        {"bytes=10-19, 0-9", 100, 206, 0, 20},
        {"bytes=0-50,10-20", 100, 206, 0, 51},
        {"bytes=90-,-5", 100, 206, 90, 10},
        {"bytes=0-0,,0-0", 100, 206, 0, 1},    /* §5.6.1: empty elements */
        {"bytes=200-300,5-9", 100, 206, 5, 5}, /* the unsatisfiable one is left out */
        /* ... else the whole representation: no multipart/byteranges */
        {"bytes=1-2,5-6", 100, 0, 0, 0},
        {"bytes=0-0,-1", 100, 0, 0, 0},
        {"bytes=0-0,-1", 2, 206, 0, 2},
        /* more than 16 range-specs: ignored */
        {"bytes=0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0", 100, 206, 0, 1},
        {"bytes=0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0", 100, 0, 0, 0},
        /* numbers saturate */
        {"bytes=99999999999999999999999-", 100, 416, 0, 0},
        {"bytes=0-99999999999999999999999", 100, 206, 0, 100},
        {"bytes=-99999999999999999999999", 100, 206, 0, 100},
        {"bytes=0-", UINT64_C(1) << 62, 206, 0, UINT64_C(1) << 62},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        petrel_range_t r = {12345, 67890};
        int rc = petrel_range_parse(cases[i].h, cases[i].size, &r);
        ck_assert_msg(rc == cases[i].rc, "'%s' size %llu: %d, expected %d",
                      cases[i].h ? cases[i].h : "(null)", (unsigned long long)cases[i].size, rc,
                      cases[i].rc);
        if (rc == 206)
            ck_assert_msg(r.off == cases[i].off && r.len == cases[i].len, "'%s': %llu+%llu",
                          cases[i].h, (unsigned long long)r.off, (unsigned long long)r.len);
        else
            ck_assert_msg(r.off == 12345 && r.len == 67890, "'%s': *r changed", cases[i].h);
    }
}
END_TEST

START_TEST(range_select)
{
    const char *tag = "\"t\"";
    petrel_conditions_t c;
    memset(&c, 0, sizeof(c));
    petrel_range_t r;
    c.method = PETREL_GET;
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 0);
    c.range = "bytes=2-3";
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 206);
    ck_assert(r.off == 2 && r.len == 2);
    ck_assert_int_eq(petrel_range_select(&c, 2, tag, LMT, &r), 416);
    /* §14.2: GET only */
    c.method = PETREL_HEAD;
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 0);
    c.method = PETREL_POST;
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 0);
    /* §13.1.5: If-Range */
    c.method = PETREL_GET;
    c.if_range = tag;
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 206);
    c.if_range = "\"stale\"";
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 0);
    c.if_range = LM;
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT, &r), 206);
    ck_assert_int_eq(petrel_range_select(&c, 10, tag, LMT + 1, &r), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Accept-Encoding (RFC 9110 §12.5.3)                                       */

START_TEST(codings)
{
    const char *const both[] = {"br", "gzip"};
    const char *const gz[] = {"gzip"};
    const char *const zg[] = {"gzip", "br"};
#define AE(v, list) petrel_accept_encoding((v), (list), sizeof(list) / sizeof((list)[0]))
    /* no field: no preference, identity */
    ck_assert_int_eq(AE(NULL, both), PETREL_CODING_IDENTITY);
    /* an empty field: no content coding wanted */
    ck_assert_int_eq(AE("", both), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(AE("gzip, deflate, br", both), 0);
    ck_assert_int_eq(AE("gzip, deflate, br", gz), 0);
    ck_assert_int_eq(AE("gzip, deflate, br", zg), 0); /* a tie: the caller's order */
    ck_assert_int_eq(AE("br", gz), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(AE("identity", both), PETREL_CODING_IDENTITY);
    /* q=0: not acceptable */
    ck_assert_int_eq(AE("br;q=0, gzip", both), 1);
    ck_assert_int_eq(AE("br;q=0.0, gzip;q=0.000", both), PETREL_CODING_IDENTITY);
    /* the highest q */
    ck_assert_int_eq(AE("br;q=0.5, gzip;q=0.8", both), 1);
    ck_assert_int_eq(AE("br ; q=1 , gzip;q=1", both), 0);
    ck_assert_int_eq(AE("br;Q=0.001, gzip;q=0.002", both), 1);
    /* "*": any coding not listed */
    ck_assert_int_eq(AE("*", both), 0);
    ck_assert_int_eq(AE("*;q=0, gzip", both), 1);
    ck_assert_int_eq(AE("br;q=0, *", both), 1);
    ck_assert_int_eq(AE("*;q=0", both), PETREL_CODING_IDENTITY);
    /* identity ranked: above a coding of lower q; ties go to the coding */
    ck_assert_int_eq(AE("gzip;q=0.5, identity", gz), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(AE("gzip, identity", gz), 0);
    ck_assert_int_eq(AE("gzip;q=0.4, *;q=0.5", gz), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(AE("gzip;q=0.5", gz), 0); /* identity not ranked: the coding */
    /* identity refused and nothing else acceptable: still identity (no 406) */
    ck_assert_int_eq(AE("identity;q=0, gzip;q=0", gz), PETREL_CODING_IDENTITY);
    /* §8.4.1.3: x-gzip is gzip; names are case-insensitive */
    ck_assert_int_eq(AE("x-gzip", both), 1);
    ck_assert_int_eq(AE("GZIP", both), 1);
    const char *const upper[] = {"GZip"};
    ck_assert_int_eq(AE("gzip", upper), 0);
    const char *const xc[] = {"compress"};
    ck_assert_int_eq(AE("x-compress", xc), 0);
    ck_assert_int_eq(AE("brotli, gzipx, x-gzipx", both), PETREL_CODING_IDENTITY);
    /* the last of duplicate elements counts */
    ck_assert_int_eq(AE("gzip;q=1, gzip;q=0", gz), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(petrel_accept_encoding("gzip", NULL, 0), PETREL_CODING_IDENTITY);
    ck_assert_int_eq(petrel_accept_encoding("gzip", gz, 0), PETREL_CODING_IDENTITY);
#undef AE
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("semantics");
    TCase *tc = tcase_create("dates");
    tcase_add_test(tc, date_forms);
    tcase_add_test(tc, date_invalid);
    tcase_add_test(tc, date_format);
    suite_add_tcase(s, tc);

    tc = tcase_create("conditional");
    tcase_add_checked_fixture(tc, req_setup, req_teardown);
    tcase_add_test(tc, etag_compare);
    tcase_add_test(tc, preconditions_get);
    tcase_add_test(tc, preconditions_other_methods);
    tcase_add_test(tc, request_conditions);
    tcase_add_test(tc, if_range);
    suite_add_tcase(s, tc);

    tc = tcase_create("range");
    tcase_add_test(tc, ranges);
    tcase_add_test(tc, range_select);
    suite_add_tcase(s, tc);

    tc = tcase_create("coding");
    tcase_add_test(tc, codings);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
