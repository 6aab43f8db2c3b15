/*
 * check_http1_client.c -- unit tests of src/protocols/http1-client.c: the
 * request head it writes, and responses parsed whole and cut at every byte
 * (fields, chunk sizes and trailers split across reads), ambiguous framing
 * refused (RFC 9112 §6.3), 1xx skipped, HEAD and 204 without a body, a
 * body delimited by the close, pausing.
 */
#include "protocols/http1-client.h"
#include "runtime/arena.h"

#include "petrel.h"
#include "check_run.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seen {
    int status, version, heads, ends;
    int64_t cl;
    char fields[512];
    char body[512];
    char trailers[256];
    int pause_head; /* on_head returns 1 */
} seen_t;

static void cat(char *dst, size_t cap, const char *p, size_t n)
{
    size_t l = strlen(dst);
    if (l + n + 1 <= cap) {
        memcpy(dst + l, p, n);
        dst[l + n] = '\0';
    }
}

static void fields(char *dst, size_t cap, const petrel_header_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cat(dst, cap, f[i].name.ptr, f[i].name.len);
        cat(dst, cap, "=", 1);
        cat(dst, cap, f[i].value.ptr, f[i].value.len);
        cat(dst, cap, ";", 1);
    }
}

static int on_head(void *ctx, int status, int version, const petrel_header_t *f, size_t n,
                   int64_t cl)
{
    seen_t *s = ctx;
    s->status = status;
    s->version = version;
    s->cl = cl;
    s->heads++;
    fields(s->fields, sizeof(s->fields), f, n);
    return s->pause_head;
}

static int on_body(void *ctx, const char *p, size_t n)
{
    seen_t *s = ctx;
    cat(s->body, sizeof(s->body), p, n);
    return 0;
}

static int on_end(void *ctx, const petrel_header_t *t, size_t n)
{
    seen_t *s = ctx;
    s->ends++;
    fields(s->trailers, sizeof(s->trailers), t, n);
    return 0;
}

static const petrel__h1c_cbs_t cbs = {on_head, on_body, on_end};

/* Parse `resp` in two reads cut at `cut`; returns 0, the first error, or
 * 1 when the response did not end; `*rest` gets the bytes not consumed. */
static int parse_cut(const char *resp, size_t len, size_t cut, bool head, bool eof, seen_t *s,
                     size_t *rest)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    petrel__h1c_t *p = malloc(petrel__h1c_size());
    memset(s, 0, sizeof(*s));
    petrel__h1c_start(p, &a, head, &cbs, s);
    bool done = false;
    int rc = 1;
    size_t off = 0;
    size_t ends[2] = {cut, len};
    for (int i = 0; i < 2 && !done; i++) {
        while (off < ends[i] && !done) {
            long used = petrel__h1c_feed(p, resp + off, ends[i] - off, &done);
            if (used < 0) {
                rc = (int)used;
                goto out;
            }
            off += (size_t)used;
            if (used == 0 && !done)
                break;
        }
    }
    if (!done && eof) {
        bool started;
        rc = petrel__h1c_eof(p, &started);
        if (rc == 0)
            done = true;
        else
            goto out;
    }
    rc = done ? 0 : 1;
    *rest = len - off;
out:
    free(p);
    petrel__arena_clear(&a);
    return rc;
}

/* `resp` gives the same result whole and cut at every byte. */
static int parse_all(const char *resp, bool head, bool eof, seen_t *whole)
{
    size_t len = strlen(resp), rest = 0;
    int rc = parse_cut(resp, len, len, head, eof, whole, &rest);
    for (size_t cut = 0; cut < len; cut++) {
        seen_t s;
        size_t r2 = 0;
        int rc2 = parse_cut(resp, len, cut, head, eof, &s, &r2);
        ck_assert_msg(rc2 == rc, "cut at %zu: %d, whole: %d", cut, rc2, rc);
        if (rc == 0) {
            ck_assert_int_eq(s.status, whole->status);
            ck_assert_str_eq(s.fields, whole->fields);
            ck_assert_str_eq(s.body, whole->body);
            ck_assert_str_eq(s.trailers, whole->trailers);
            ck_assert_int_eq(s.heads, 1);
            ck_assert_int_eq(s.ends, 1);
        }
    }
    return rc;
}

START_TEST(test_content_length)
{
    seen_t s;
    ck_assert_int_eq(
        parse_all("HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 5\r\n\r\nhello", false, false, &s),
        0);
    ck_assert_int_eq(s.status, 200);
    ck_assert_int_eq(s.version, 11);
    ck_assert_int_eq(s.cl, 5);
    ck_assert_str_eq(s.fields, "X-A=1;Content-Length=5;");
    ck_assert_str_eq(s.body, "hello");
}
END_TEST

START_TEST(test_chunked_trailers)
{
    seen_t s;
    ck_assert_int_eq(parse_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nX-Trailer: yes\r\n\r\n",
                               false, false, &s),
                     0);
    ck_assert_int_eq(s.cl, -1);
    ck_assert_str_eq(s.body, "hello");
    ck_assert_str_eq(s.trailers, "X-Trailer=yes;");
}
END_TEST

START_TEST(test_interim_skipped)
{
    seen_t s;
    ck_assert_int_eq(
        parse_all("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
                  "Link: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
                  false, false, &s),
        0);
    ck_assert_int_eq(s.status, 201);
    ck_assert_str_eq(s.fields, "Content-Length=2;");
    ck_assert_str_eq(s.body, "ok");
}
END_TEST

START_TEST(test_no_body)
{
    seen_t s;
    /* HEAD: the Content-Length is the GET's, no body follows */
    ck_assert_int_eq(parse_all("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", true, false, &s),
                     0);
    ck_assert_int_eq(s.cl, 0);
    ck_assert_str_eq(s.body, "");
    ck_assert_int_eq(parse_all("HTTP/1.1 204 No Content\r\n\r\n", false, false, &s), 0);
    ck_assert_int_eq(
        parse_all("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false, false, &s), 0);
}
END_TEST

START_TEST(test_close_delimited)
{
    seen_t s;
    ck_assert_int_eq(
        parse_all("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end", false, true, &s), 0);
    ck_assert_str_eq(s.body, "to the end");
    /* cut: a Content-Length not reached, a chunked body not ended */
    size_t rest;
    const char *cut = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
    ck_assert_int_eq(parse_cut(cut, strlen(cut), strlen(cut), false, true, &s, &rest),
                     PETREL_UPSTREAM_EPROTO);
    cut = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n";
    ck_assert_int_eq(parse_cut(cut, strlen(cut), strlen(cut), false, true, &s, &rest),
                     PETREL_UPSTREAM_EPROTO);
}
END_TEST

START_TEST(test_ambiguous)
{
    seen_t s;
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        "GARBAGE\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(parse_all(bad[i], false, false, &s) == PETREL_UPSTREAM_EPROTO, "accepted: %s",
                      bad[i]);
}
END_TEST

START_TEST(test_keep_alive_and_rest)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    petrel__h1c_t *p = malloc(petrel__h1c_size());
    seen_t s = {0};
    const char *two = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
    petrel__h1c_start(p, &a, false, &cbs, &s);
    bool done;
    long used = petrel__h1c_feed(p, two, strlen(two), &done);
    ck_assert(done);
    ck_assert_int_eq(used, (long)strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    ck_assert(petrel__h1c_keep_alive(p));
    const char *ten = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    petrel__h1c_start(p, &a, false, &cbs, &s);
    petrel__h1c_feed(p, ten, strlen(ten), &done);
    ck_assert(done);
    ck_assert(!petrel__h1c_keep_alive(p));
    const char *close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
    petrel__h1c_start(p, &a, false, &cbs, &s);
    petrel__h1c_feed(p, close, strlen(close), &done);
    ck_assert(done);
    ck_assert(!petrel__h1c_keep_alive(p));
    free(p);
    petrel__arena_clear(&a);
}
END_TEST

/* RFC 9110 §15.2.2: a 101 to a request that asked for an upgrade ends the
 * response after its empty line; the bytes after it are the new
 * protocol's (the caller's).  Without the request asking, a 101 is
 * malformed. */
START_TEST(test_upgrade)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    petrel__h1c_t *p = malloc(petrel__h1c_size());
    seen_t s = {0};
    const char *head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n";
    char resp[256];
    snprintf(resp, sizeof(resp), "%s\x81\x02hi", head);
    petrel__h1c_start(p, &a, false, &cbs, &s);
    petrel__h1c_upgrade(p);
    bool done;
    long used = petrel__h1c_feed(p, resp, strlen(resp), &done);
    ck_assert(done);
    ck_assert_int_eq(used, (long)strlen(head));
    ck_assert_int_eq(s.status, 101);
    ck_assert_int_eq(s.heads, 1);
    ck_assert_int_eq(s.ends, 0);
    ck_assert(strstr(s.fields, "Upgrade=websocket;") != NULL);
    ck_assert(!petrel__h1c_keep_alive(p)); /* never HTTP again */
    /* a 1xx before it is still skipped; a 101 not asked for is refused */
    seen_t s2 = {0};
    snprintf(resp, sizeof(resp), "HTTP/1.1 100 Continue\r\n\r\n%s", head);
    petrel__h1c_start(p, &a, false, &cbs, &s2);
    petrel__h1c_upgrade(p);
    ck_assert_int_eq(petrel__h1c_feed(p, resp, strlen(resp), &done), (long)strlen(resp));
    ck_assert(done);
    ck_assert_int_eq(s2.status, 101);
    seen_t s3 = {0};
    petrel__h1c_start(p, &a, false, &cbs, &s3);
    ck_assert_int_eq(petrel__h1c_feed(p, head, strlen(head), &done), PETREL_UPSTREAM_EPROTO);
    ck_assert_int_eq(s3.heads, 0);
    free(p);
    petrel__arena_clear(&a);
}
END_TEST

START_TEST(test_pause)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    petrel__h1c_t *p = malloc(petrel__h1c_size());
    seen_t s = {0};
    s.pause_head = 1;
    const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    petrel__h1c_start(p, &a, false, &cbs, &s);
    bool done;
    long used = petrel__h1c_feed(p, r, strlen(r), &done);
    ck_assert(!done);
    ck_assert_int_lt(used, (long)strlen(r));
    ck_assert_str_eq(s.body, "");
    s.pause_head = 0;
    long more = petrel__h1c_feed(p, r + used, strlen(r) - (size_t)used, &done);
    ck_assert(done);
    ck_assert_int_eq(used + more, (long)strlen(r));
    ck_assert_str_eq(s.body, "hello");
    free(p);
    petrel__arena_clear(&a);
}
END_TEST

START_TEST(test_request_head)
{
    char buf[512];
    petrel_header_t f[] = {{{"X-A", 3}, {"1", 1}}, {{"Accept", 6}, {"*/*", 3}}};
    size_t need = petrel__h1c_head_size("POST", "/p?q=1", "h:8080", f, 2);
    ck_assert_int_eq(petrel__h1c_head(buf, need - 1, "POST", "/p?q=1", "h:8080", f, 2, 4, true),
                     -1);
    long n = petrel__h1c_head(buf, sizeof(buf), "POST", "/p?q=1", "h:8080", f, 2, 4, true);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "POST /p?q=1 HTTP/1.1\r\nHost: h:8080\r\nX-A: 1\r\nAccept: */*\r\n"
                          "Content-Length: 4\r\n\r\n");
    n = petrel__h1c_head(buf, sizeof(buf), "GET", "/", "h", NULL, 0, 0, false);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    petrel_header_t bad[] = {{{"Host", 4}, {"x", 1}},
                             {{"connection", 10}, {"x", 1}},
                             {{"Transfer-Encoding", 17}, {"x", 1}},
                             {{"X A", 3}, {"x", 1}},
                             {{"X-B", 3}, {"a\r\nb", 4}}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert(!petrel__h1c_field_ok(&bad[i]));
    ck_assert(petrel__h1c_field_ok(&f[0]));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_client");
    TCase *tc = tcase_create("response");
    tcase_add_test(tc, test_content_length);
    tcase_add_test(tc, test_chunked_trailers);
    tcase_add_test(tc, test_interim_skipped);
    tcase_add_test(tc, test_no_body);
    tcase_add_test(tc, test_close_delimited);
    tcase_add_test(tc, test_ambiguous);
    tcase_add_test(tc, test_keep_alive_and_rest);
    tcase_add_test(tc, test_pause);
    tcase_add_test(tc, test_upgrade);
    suite_add_tcase(s, tc);
    tc = tcase_create("request");
    tcase_add_test(tc, test_request_head);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
