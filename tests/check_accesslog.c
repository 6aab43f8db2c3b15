/*
 * check_accesslog.c -- unit tests of src/framework/accesslog.c: the combined-format
 * line of a request, whatever its fields hold.
 */
#include "runtime/log.h"
#include "protocols/proto.h"
#include "check_run.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *fake_peer(petrel_req_t *r)
{
    (void)r;
    return "192.0.2.1";
}

static const petrel_proto_t fake_proto = {.name = "fake", .peer = fake_peer};

static char log_path[64];

static void setup(void)
{
    strcpy(log_path, "/tmp/petrel-alog-XXXXXX");
    int fd = mkstemp(log_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(petrel__alog_open(log_path), 0);
}

static void teardown(void)
{
    unlink(log_path);
}

/* The log file, NUL-terminated, into buf; returns its length. */
static size_t read_log(char *buf, size_t cap)
{
    petrel__alog_flush();
    FILE *f = fopen(log_path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

static void req_init(petrel_req_t *r, petrel_resp_t *resp, petrel_header_t *h, size_t nh)
{
    memset(r, 0, sizeof(*r));
    petrel__resp_init(resp, r);
    resp->status = 200;
    r->_resp = resp;
    r->_proto = &fake_proto;
    r->version = 20;
    r->headers = h;
    r->nheaders = nh;
}

/* Log an h2 request of a 4 KiB method and these target, User-Agent and
 * Referer, 12345 bytes, 2.5 ms and 4 KiB of arena. */
static void log_long_request(const char *target, const char *ua, const char *ref, uint64_t id)
{
    static char method[4097];
    memset(method, 'M', 4096);
    petrel_header_t h[2] = {{{"user-agent", 10}, {ua, strlen(ua)}},
                            {{"referer", 7}, {ref, strlen(ref)}}};
    petrel_req_t r;
    petrel_resp_t resp;
    req_init(&r, &resp, h, 2);
    r.method_name.ptr = method;
    r.method_name.len = 4096;
    r.target.ptr = target;
    r.target.len = strlen(target);
    r.id = id;
    petrel__req_log(&r, 12345, 2500000, 4096);
}

/* An h2 :method, target and header fields may each be as long as the
 * header list allows: every field is cut to its share of the line, and the
 * line keeps its status, its size and its end. */
START_TEST(test_long_fields)
{
    static char target[9000], ua[6000], ref[6000];
    memset(target, '/', 8999);
    for (size_t i = 0; i < sizeof(ua) - 1; i++)
        ua[i] = i % 7 ? 'u' : '"'; /* escaped: 4 bytes each */
    memset(ref, '\x01', sizeof(ref) - 1);
    log_long_request(target, ua, ref, 0);
    char buf[16384];
    size_t n = read_log(buf, sizeof(buf));
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_le(n, 4096);
    ck_assert_int_eq(buf[n - 1], '\n');
    ck_assert_ptr_null(memchr(buf, '\n', n - 1)); /* one line */
    ck_assert(strncmp(buf, "192.0.2.1 - - [", 15) == 0);
    ck_assert_msg(strstr(buf, "... HTTP/2.0\" 200 12345 \""), "%s", buf);
    ck_assert_msg(strstr(buf, "\\x01\\x01..."), "%s", buf);
}
END_TEST

/* --access-log-format json: the same limits hold, each string is cut at a
 * whole UTF-8 character or escape (RFC 8259 §8.1: the line stays UTF-8)
 * and ends with "...", and the typed fields after the long ones remain. */
START_TEST(test_json_long_fields)
{
    static char target[9000], ua[6000], ref[6001];
    for (size_t i = 0; i + 2 < sizeof(target); i += 2) /* NUL-terminated */
        memcpy(target + i, "\xc3\xa9", 2);             /* U+00E9, 2 bytes */
    memset(ua, '\x01', sizeof(ua) - 1);                /* escaped: \u0001, 6 bytes each */
    for (size_t i = 0; i + 4 < sizeof(ref); i += 4)
        memcpy(ref + i, "\xf0\x9f\x98\x80", 4); /* U+1F600, 4 bytes */
    petrel__alog_format = PETREL__ALOG_JSON;
    log_long_request(target, ua, ref, 3000000000017ull);
    petrel__alog_format = PETREL__ALOG_COMBINED;
    char buf[16384];
    size_t n = read_log(buf, sizeof(buf));
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_le(n, 4096);
    ck_assert(n >= 2 && buf[n - 2] == '}' && buf[n - 1] == '\n');
    ck_assert_ptr_null(memchr(buf, '\n', n - 1)); /* one line */
    ck_assert_msg(strstr(buf, "\"method\":\"MMMM"), "%s", buf);
    ck_assert_msg(strstr(buf, "MMM...\",\"target\":\"\xc3\xa9"), "%s", buf);
    ck_assert_msg(strstr(buf, "\xc3\xa9...\",\"protocol\":\"HTTP/2\",\"status\":200,"
                              "\"bytes\":12345,\"duration_us\":2500,\"arena_bytes\":4096,"
                              "\"request_id\":\"3000000000017\",\"user_agent\":\"\\u0001"),
                  "%s", buf);
    ck_assert_msg(strstr(buf, "\\u0001...\",\"referer\":\"\xf0\x9f\x98\x80"), "%s", buf);
    ck_assert_msg(strstr(buf, "\xf0\x9f\x98\x80...\"}\n"), "%s", buf);
}
END_TEST

/* What a client sends cannot forge a line: quotes, backslashes and control
 * bytes are escaped. */
START_TEST(test_escapes)
{
    petrel_header_t h[1] = {{{"user-agent", 10}, {"a\"b\\c\nd", 7}}};
    petrel_req_t r;
    petrel_resp_t resp;
    req_init(&r, &resp, h, 1);
    r.version = 11;
    r.method_name.ptr = "GET";
    r.method_name.len = 3;
    r.target.ptr = "/x\r\ny";
    r.target.len = 5;
    resp.status = 404;
    petrel__req_log(&r, 0, 0, 0);
    char buf[4096];
    read_log(buf, sizeof(buf));
    ck_assert_msg(
        strstr(buf, "\"GET /x\\x0d\\x0ay HTTP/1.1\" 404 0 \"-\" \"a\\x22b\\x5cc\\x0ad\"\n"), "%s",
        buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("accesslog");
    TCase *tc = tcase_create("line");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_long_fields);
    tcase_add_test(tc, test_escapes);
    tcase_add_test(tc, test_json_long_fields);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
