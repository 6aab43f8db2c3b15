/*
 * check_request.c -- unit tests of src/framework/request.c: path normalisation,
 * percent-decoding, methods, case-insensitive comparison, and of the
 * reason phrases of src/framework/response.c.
 */
#include "runtime/arena.h"
#include "protocols/proto.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[1024];

/* Normalise `in`; returns the length (or PETREL_EINVAL), the result in `out`. */
static ssize_t norm(const char *in)
{
    size_t n = strlen(in);
    ck_assert_uint_lt(n, sizeof(out));
    memset(out, 'X', sizeof(out));
    return petrel__path_normalize(in, n, out);
}

#define ck_norm(in, want)                                                                          \
    do {                                                                                           \
        ssize_t n_ = norm(in);                                                                     \
        ck_assert_msg(n_ >= 0, "'%s' refused", in);                                                \
        ck_assert_msg(strcmp(out, want) == 0, "'%s' -> '%s', want '%s'", in, out, want);           \
        ck_assert_int_eq(n_, (ssize_t)strlen(want));                                               \
    } while (0)

#define ck_norm_refused(in)                                                                        \
    do {                                                                                           \
        ssize_t n_ = norm(in);                                                                     \
        ck_assert_msg(n_ == PETREL_EINVAL, "'%s' not refused: '%s'", in, n_ >= 0 ? out : "");      \
    } while (0)

/* ------------------------------------------------------------------------ */
/* petrel__path_normalize: RFC 3986 §5.2.4 remove_dot_segments, after
 * percent-decoding (§2.1), with repeated slashes merged.                   */

START_TEST(test_norm_plain)
{
    ck_norm("/", "/");
    ck_norm("/hello", "/hello");
    ck_norm("/a/b/c", "/a/b/c");
    ck_norm("/a/", "/a/");
    ck_norm("/...", "/..."); /* not a dot-segment */
    ck_norm("/a/..b/.c/c.", "/a/..b/.c/c.");
}
END_TEST

/* §5.2.4 step 2B/2C: "." segments go, ".." removes the segment before. */
START_TEST(test_norm_dot_segments)
{
    ck_norm("/a/./b/../c", "/a/c");
    ck_norm("/a/b/c/./../../g", "/a/g"); /* RFC 3986 §5.2.4's own example */
    ck_norm("/./a", "/a");
    ck_norm("/a/../b", "/b");
    ck_norm("/a/b/../../c", "/c");
    ck_norm("/a/..", "/");
    ck_norm("/x/../hello", "/hello");
}
END_TEST

/* A trailing "." or ".." leaves the path ending in '/' (§5.2.4 2B, 2C:
 * "/a/." becomes "/a/", "/a/b/.." becomes "/a/"). */
START_TEST(test_norm_trailing_dots)
{
    ck_norm("/a/.", "/a/");
    ck_norm("/a/b/..", "/a/");
    ck_norm("/.", "/");
    ck_norm("/a/./", "/a/");
    ck_norm("/a/b/../", "/a/");
}
END_TEST

START_TEST(test_norm_slashes)
{
    ck_norm("//a///b", "/a/b");
    ck_norm("//", "/");
    ck_norm("/a//", "/a/");
    ck_norm("/a//../b", "/b");
}
END_TEST

/* Decoding comes first, so an encoded dot-segment is a dot-segment: no
 * route or file can be reached by spelling ".." as "%2e%2e". */
START_TEST(test_norm_encoded)
{
    ck_norm("/a%20b", "/a b");
    ck_norm("/%41%62", "/Ab");
    ck_norm("/a/%2e%2e/b", "/b");
    ck_norm("/a/%2E%2E/b", "/b");
    ck_norm("/a/%2e/b", "/a/b");
    ck_norm("/a/.%2e/b", "/b");
    ck_norm("/a/b/%2e%2e", "/a/");
    ck_norm_refused("/%2e%2e");
    ck_norm_refused("/%2e%2e/etc/passwd");
    ck_norm("/a+b", "/a+b"); /* '+' is no space in a path */
    ck_norm("/%25", "/%");   /* decoded once only */
    ck_norm("/%2541", "/%41");
}
END_TEST

/* §5.2.4 leaves ".." above the root as a no-op; petrel refuses it instead,
 * since it can only come from a client probing for files. */
START_TEST(test_norm_above_root)
{
    ck_norm_refused("/..");
    ck_norm_refused("/../hello");
    ck_norm_refused("/a/../..");
    ck_norm_refused("/a/../../b");
    ck_norm_refused("/./../a");
}
END_TEST

START_TEST(test_norm_refused)
{
    ck_norm_refused("");
    ck_norm_refused("a/b");
    ck_norm_refused("*");
    ck_norm_refused("/%00");
    ck_norm_refused("/a%00b");
    ck_norm_refused("/%zz");
    ck_norm_refused("/%2");
    ck_norm_refused("/%");
    ck_norm_refused("/a%2");
    ck_norm_refused("/%g0");
    ck_norm_refused("/%0g");
    /* only `len` bytes are read */
    ck_assert_int_eq(petrel__path_normalize("/ab%41", 4, out), PETREL_EINVAL);
    ck_assert_int_eq(petrel__path_normalize("/abc", 3, out), 3);
    ck_assert_str_eq(out, "/ab");
}
END_TEST

/* The output buffer needs len + 1 bytes and no more. */
START_TEST(test_norm_capacity)
{
    static const char *const in[] = {"/a/b/c", "/%41/./x", "//a//b//", "/a/.", "/"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        size_t n = strlen(in[i]);
        char *buf = malloc(n + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_ge(petrel__path_normalize(in[i], n, buf), 1);
        ck_assert_uint_le(strlen(buf), n);
        free(buf);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* petrel__pct_decode (RFC 3986 §2.1; '+' is a space only in a query,
 * application/x-www-form-urlencoded)                                        */

static ssize_t dec(const char *in, bool plus)
{
    memset(out, 'X', sizeof(out));
    return petrel__pct_decode(in, strlen(in), out, plus);
}

START_TEST(test_pct_decode)
{
    ck_assert_int_eq(dec("abc", false), 3);
    ck_assert_str_eq(out, "abc");
    ck_assert_int_eq(dec("", false), 0);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(dec("a%20b", false), 3);
    ck_assert_str_eq(out, "a b");
    ck_assert_int_eq(dec("%e2%82%AC", false), 3);
    ck_assert_str_eq(out, "\xe2\x82\xac");
    ck_assert_int_eq(dec("%41", false), 1); /* an escape at the very end */
    ck_assert_str_eq(out, "A");
    ck_assert_int_eq(dec("a+b", false), 3);
    ck_assert_str_eq(out, "a+b");
    ck_assert_int_eq(dec("a+b", true), 3);
    ck_assert_str_eq(out, "a b");
    ck_assert_int_eq(dec("%2B+", true), 2); /* an encoded '+' stays a '+' */
    ck_assert_str_eq(out, "+ ");
    /* %00 decodes (the caller decides); the length tells it */
    ck_assert_int_eq(dec("a%00b", false), 3);
    ck_assert_mem_eq(out, "a\0b", 4);
}
END_TEST

START_TEST(test_pct_decode_bad)
{
    ck_assert_int_eq(dec("%", false), PETREL_EINVAL);
    ck_assert_int_eq(dec("%2", false), PETREL_EINVAL);
    ck_assert_int_eq(dec("a%2", true), PETREL_EINVAL);
    ck_assert_int_eq(dec("%zz", false), PETREL_EINVAL);
    ck_assert_int_eq(dec("%2z", false), PETREL_EINVAL);
    ck_assert_int_eq(dec("%-1", false), PETREL_EINVAL);
    ck_assert_int_eq(dec("%%41", false), PETREL_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Methods (RFC 9110 §9.1: method names are case-sensitive)                  */

START_TEST(test_method_from_name)
{
    static const struct {
        const char *name;
        int bit;
    } t[] = {
        {"GET", PETREL_GET},
        {"HEAD", PETREL_HEAD},
        {"POST", PETREL_POST},
        {"PUT", PETREL_PUT},
        {"DELETE", PETREL_DELETE},
        {"PATCH", PETREL_PATCH},
        {"OPTIONS", PETREL_OPTIONS},
        {"get", 0},
        {"Get", 0},
        {"GE", 0},
        {"GETS", 0},
        {"POSTX", 0},
        {"PROPFIND", 0},
        {"CONNECT", 0},
        {"TRACE", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        ck_assert_msg(petrel__method_from_name(t[i].name, strlen(t[i].name)) == t[i].bit, "'%s'",
                      t[i].name);
    /* only `len` bytes count */
    ck_assert_int_eq(petrel__method_from_name("GETX", 3), PETREL_GET);
    ck_assert_int_eq(petrel__method_from_name("POST", 3), 0);
}
END_TEST

START_TEST(test_methods_format)
{
    char buf[128];
    ck_assert_uint_eq(petrel__methods_format(PETREL_GET | PETREL_HEAD, buf, sizeof(buf)), 9);
    ck_assert_str_eq(buf, "GET, HEAD");
    ck_assert_uint_eq(petrel__methods_format(0, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "");
    petrel__methods_format(PETREL_POST, buf, sizeof(buf));
    ck_assert_str_eq(buf, "POST");
    /* in a fixed order, whatever the bits */
    petrel__methods_format(PETREL_OPTIONS | PETREL_PUT | PETREL_GET, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, PUT, OPTIONS");
    size_t n = petrel__methods_format(PETREL_ANY, buf, sizeof(buf));
    ck_assert_str_eq(buf, "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS");
    ck_assert_uint_eq(n, strlen(buf));
    /* a short buffer: whole names only, always NUL-terminated */
    ck_assert_uint_eq(petrel__methods_format(PETREL_ANY, buf, 10), 9);
    ck_assert_str_eq(buf, "GET, HEAD");
    ck_assert_uint_eq(petrel__methods_format(PETREL_ANY, buf, 3), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_uint_eq(petrel__methods_format(PETREL_ANY, buf, 4), 3);
    ck_assert_str_eq(buf, "GET");
    buf[0] = 'Z';
    ck_assert_uint_eq(petrel__methods_format(PETREL_ANY, buf, 0), 0);
    ck_assert_int_eq(buf[0], 'Z'); /* nothing written */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Case-insensitive comparison of ASCII letters only (field names, RFC 9110
 * §5.1; tokens such as "chunked", §7.8)                                      */

static bool ieq(const char *a, const char *b)
{
    return petrel__str_ieq(a, strlen(a), b, strlen(b));
}

START_TEST(test_str_ieq)
{
    ck_assert(ieq("Host", "host"));
    ck_assert(ieq("hOST", "HoSt"));
    ck_assert(ieq("Content-Length", "content-length"));
    ck_assert(ieq("", ""));
    ck_assert(ieq("a1-_", "A1-_"));
    ck_assert(!ieq("host", "hosts"));
    ck_assert(!ieq("hosts", "host"));
    ck_assert(!ieq("host", "hast"));
    /* bytes that differ by 0x20 but are not letters */
    ck_assert(!ieq("@", "`"));
    ck_assert(!ieq("[", "{"));
    ck_assert(!ieq("]", "}"));
    ck_assert(!ieq("^", "~"));
    ck_assert(!ieq("\x10", "0"));
    ck_assert(!ieq("\xc1", "\xe1"));
    ck_assert(petrel__str_ieq("chunkedXX", 7, "CHUNKED", 7));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reason phrases (RFC 9110 §15)                                            */

START_TEST(test_status_reason)
{
    ck_assert_str_eq(petrel_status_reason(200), "OK");
    ck_assert_str_eq(petrel_status_reason(100), "Continue");
    ck_assert_str_eq(petrel_status_reason(204), "No Content");
    ck_assert_str_eq(petrel_status_reason(400), "Bad Request");
    ck_assert_str_eq(petrel_status_reason(404), "Not Found");
    ck_assert_str_eq(petrel_status_reason(405), "Method Not Allowed");
    ck_assert_str_eq(petrel_status_reason(408), "Request Timeout");
    ck_assert_str_eq(petrel_status_reason(413), "Content Too Large"); /* §15.5.14 */
    ck_assert_str_eq(petrel_status_reason(414), "URI Too Long");
    ck_assert_str_eq(petrel_status_reason(422), "Unprocessable Content"); /* §15.5.21 */
    ck_assert_str_eq(petrel_status_reason(431), "Request Header Fields Too Large");
    ck_assert_str_eq(petrel_status_reason(500), "Internal Server Error");
    ck_assert_str_eq(petrel_status_reason(501), "Not Implemented");
    ck_assert_str_eq(petrel_status_reason(505), "HTTP Version Not Supported");
    ck_assert_str_eq(petrel_status_reason(299), "");
    ck_assert_str_eq(petrel_status_reason(0), "");
    ck_assert_str_eq(petrel_status_reason(-1), "");
    ck_assert_str_eq(petrel_status_reason(1000), "");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Regressions found by the fuzzing harnesses (tests/fuzz)                  */

/* petrel_req_waiting (response.c): a request may be answered while its
 * handler runs or holds it, not once its response is complete or it was
 * aborted. */
START_TEST(test_req_waiting)
{
    petrel_resp_t rs;
    memset(&rs, 0, sizeof(rs));
    petrel_req_t r;
    memset(&r, 0, sizeof(r));
    r._resp = &rs;
    ck_assert_int_eq(petrel_req_waiting(&r), 1); /* the handler runs */
    rs.holds = true;
    ck_assert_int_eq(petrel_req_waiting(&r), 1); /* PETREL_LATER */
    rs.ended = true;
    ck_assert_int_eq(petrel_req_waiting(&r), 1); /* still held */
    rs.holds = false;
    ck_assert_int_eq(petrel_req_waiting(&r), 0); /* answered */
    rs.ended = false;
    rs.abandoned = true;
    ck_assert_int_eq(petrel_req_waiting(&r), 0); /* aborted */
    ck_assert_int_eq(petrel_req_aborted(&r), 1);
}
END_TEST

/* petrel_req_held (response.c): the handler holds a request from its
 * PETREL_LATER until it lets go -- also once it was aborted, when
 * petrel_req_waiting is 0 already. */
START_TEST(test_req_held)
{
    petrel_resp_t rs;
    memset(&rs, 0, sizeof(rs));
    petrel_req_t r;
    memset(&r, 0, sizeof(r));
    r._resp = &rs;
    ck_assert_int_eq(petrel_req_held(&r), 0); /* the handler runs */
    rs.holds = true;
    ck_assert_int_eq(petrel_req_held(&r), 1); /* PETREL_LATER */
    rs.abandoned = true;
    ck_assert_int_eq(petrel_req_held(&r), 1); /* aborted, not let go */
    ck_assert_int_eq(petrel_req_waiting(&r), 0);
    rs.holds = false;
    ck_assert_int_eq(petrel_req_held(&r), 0); /* let go */
}
END_TEST

static void abort_a(petrel_req_t *req, void *data)
{
    (void)req, (void)data;
}

/* petrel_req_on_abort_get (response.c): what petrel_req_on_abort
 * registered, so that a library can chain it. */
START_TEST(test_req_on_abort_get)
{
    petrel_resp_t rs;
    memset(&rs, 0, sizeof(rs));
    petrel_req_t r;
    memset(&r, 0, sizeof(r));
    r._resp = &rs;
    int x;
    void *d = &x;
    ck_assert_ptr_null(petrel_req_on_abort_get(&r, &d));
    ck_assert_ptr_null(d);
    ck_assert_int_eq(petrel_req_on_abort(&r, abort_a, &x), 0);
    ck_assert(petrel_req_on_abort_get(&r, &d) == abort_a);
    ck_assert_ptr_eq(d, &x);
    ck_assert(petrel_req_on_abort_get(&r, NULL) == abort_a);
    ck_assert_int_eq(petrel_req_on_abort(&r, NULL, NULL), 0);
    ck_assert_ptr_null(petrel_req_on_abort_get(&r, &d));
    ck_assert_ptr_null(d);
}
END_TEST

/* petrel_req_query on a request without a query (query.ptr NULL): it
 * computed NULL + 0, undefined behaviour that UBSan reports (fuzz_http1,
 * GET /kv/all with a handler asking for a query parameter). */
START_TEST(test_fuzz_query_absent)
{
    petrel__pool_t pool;
    petrel__pool_init(&pool, 4);
    petrel_arena_t a;
    petrel__arena_init(&a, &pool, 0);
    petrel_req_t req;
    memset(&req, 0, sizeof(req));
    req.arena = &a;
    ck_assert_ptr_null(petrel_req_query(&req, "q"));
    ck_assert_ptr_null(petrel_req_query(&req, ""));
    /* and with one: RFC 3986 §3.4, '+' and %XX decoded as a form would */
    req.query.ptr = "q=a+b%21&r&=x";
    req.query.len = strlen(req.query.ptr);
    ck_assert_str_eq(petrel_req_query(&req, "q"), "a b!");
    ck_assert_str_eq(petrel_req_query(&req, "r"), "");
    ck_assert_str_eq(petrel_req_query(&req, ""), "x");
    ck_assert_ptr_null(petrel_req_query(&req, "s"));
    petrel__arena_clear(&a);
    petrel__pool_fini(&pool);
}
END_TEST

/* End of the fuzz regressions. */

static Suite *request_suite(void)
{
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("path");
    tcase_add_test(tc, test_norm_plain);
    tcase_add_test(tc, test_norm_dot_segments);
    tcase_add_test(tc, test_norm_trailing_dots);
    tcase_add_test(tc, test_norm_slashes);
    tcase_add_test(tc, test_norm_encoded);
    tcase_add_test(tc, test_norm_above_root);
    tcase_add_test(tc, test_norm_refused);
    tcase_add_test(tc, test_norm_capacity);
    tcase_add_test(tc, test_pct_decode);
    tcase_add_test(tc, test_pct_decode_bad);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, test_method_from_name);
    tcase_add_test(tc, test_methods_format);
    tcase_add_test(tc, test_str_ieq);
    tcase_add_test(tc, test_status_reason);
    suite_add_tcase(s, tc);

    /* regressions found by the fuzzing harnesses (tests/fuzz) */
    tc = tcase_create("fuzz");
    tcase_add_test(tc, test_fuzz_query_absent);
    tcase_add_test(tc, test_req_waiting);
    suite_add_tcase(s, tc);

    /* what a library that answers requests later asks of them */
    tc = tcase_create("waiting");
    tcase_add_test(tc, test_req_held);
    tcase_add_test(tc, test_req_on_abort_get);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(request_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
