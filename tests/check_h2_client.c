/*
 * check_h2_client.c -- unit tests of src/protocols/h2-client.c against an
 * nghttp2 server session in the same process (bytes handed from one to the
 * other, no sockets): a response with its body and trailers; a response
 * with a connection-specific field is malformed (RFC 9113 §8.2.2); a
 * stream refused (REFUSED_STREAM) or above a GOAWAY's last stream id is
 * reported as not processed (RFC 9113 §8.7); a paused stream holds at
 * most its window and gets the rest once resumed; a stream forgotten
 * before it was sent never reaches the server; a streamed request body
 * waits (its data provider deferred) while none is held, goes on when
 * resumed, past the server's window, and ends with END_STREAM.
 */
#include "protocols/h2-client.h"
#include "runtime/arena.h"

#include "petrel.h"
#include "check_run.h"

#include <check.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG 200000

typedef struct seen {
    int status, heads, ends, closes, how;
    int64_t cl;
    size_t body;
    char first[16];
    char trailers[128];
} seen_t;

static void on_head(void *ctx, int status, const petrel_header_t *f, size_t n, int64_t cl)
{
    (void)f;
    (void)n;
    seen_t *s = ctx;
    s->status = status;
    s->cl = cl;
    s->heads++;
}

static void on_body(void *ctx, const char *p, size_t n)
{
    seen_t *s = ctx;
    if (s->body == 0)
        snprintf(s->first, sizeof(s->first), "%.*s", (int)(n < 5 ? n : 5), p);
    s->body += n;
}

static void on_end(void *ctx, const petrel_header_t *t, size_t n)
{
    seen_t *s = ctx;
    for (size_t i = 0; i < n; i++)
        snprintf(s->trailers + strlen(s->trailers), sizeof(s->trailers) - strlen(s->trailers),
                 "%.*s: %.*s;", (int)t[i].name.len, t[i].name.ptr, (int)t[i].value.len,
                 t[i].value.ptr);
    s->ends++;
}

static void on_close(void *ctx, int how, uint32_t code)
{
    (void)code;
    seen_t *s = ctx;
    s->how = how;
    s->closes++;
}

static void on_sent(void *ctx)
{
    (void)ctx;
}

/* A streamed body: `rd_avail` bytes may be read now, `rd_end` after them. */
static size_t rd_avail, rd_total;
static bool rd_end;

static size_t on_read(void *ctx, char *buf, size_t len, bool *eof)
{
    (void)ctx;
    size_t k = rd_avail < len ? rd_avail : len;
    memset(buf, 's', k);
    rd_avail -= k;
    rd_total += k;
    *eof = rd_avail == 0 && rd_end;
    return k;
}

static const petrel__h2c_cbs_t cbs = {on_head, on_body, on_end, on_close, on_sent, on_read};

/* The server: answers by :path once the request has ended. */
typedef struct server {
    nghttp2_session *ngh;
    char path[64][32]; /* by stream id / 2 */
    int requests;
    size_t data; /* DATA bytes received */
    bool goaway; /* GOAWAY (last stream 0) instead of answering */
} server_t;

static char big[BIG];

static ssize_t read_big(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    size_t *off = src->ptr;
    size_t k = BIG - *off < len ? BIG - *off : len;
    memcpy(buf, big + *off, k);
    *off += k;
    if (*off == BIG)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

static ssize_t read_hello(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                          nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)len;
    (void)src;
    (void)ud;
    memcpy(buf, "hello", 5);
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    nghttp2_nv t[] = {{(uint8_t *)"x-trailer", (uint8_t *)"yes", 9, 3, 0}};
    nghttp2_submit_trailer(s, id, t, 1);
    return 5;
}

static size_t big_off;

#define NVS(n, v)                                                                                  \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), 0                                    \
    }

static int srv_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                      const uint8_t *v, size_t vl, uint8_t flags, void *ud)
{
    (void)s;
    (void)flags;
    server_t *sv = ud;
    if (nl == 5 && memcmp(n, ":path", 5) == 0 && f->hd.stream_id / 2 < 64)
        snprintf(sv->path[f->hd.stream_id / 2], 32, "%.*s", (int)vl, v);
    return 0;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    server_t *sv = ud;
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM) || f->hd.stream_id == 0)
        return 0;
    int32_t id = f->hd.stream_id;
    sv->requests++;
    const char *p = sv->path[id / 2];
    if (sv->goaway) {
        nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
        return 0;
    }
    if (strcmp(p, "/refuse") == 0)
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    if (strcmp(p, "/conn") == 0) {
        nghttp2_nv h[] = {NVS(":status", "200"), NVS("connection", "close")};
        return nghttp2_submit_response(s, id, h, 2, NULL);
    }
    nghttp2_nv h[] = {NVS(":status", "200")};
    nghttp2_data_provider d = {.read_callback = read_hello};
    if (strcmp(p, "/big") == 0) {
        big_off = 0;
        d = (nghttp2_data_provider){.source = {.ptr = &big_off}, .read_callback = read_big};
    }
    return nghttp2_submit_response(s, id, h, 1, &d);
}

static int srv_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                    void *ud)
{
    (void)s, (void)flags, (void)id, (void)data;
    server_t *sv = ud;
    sv->data += len;
    return 0;
}

static void server_init(server_t *sv)
{
    memset(sv, 0, sizeof(*sv));
    nghttp2_session_callbacks *c;
    ck_assert_int_eq(nghttp2_session_callbacks_new(&c), 0);
    nghttp2_session_callbacks_set_on_header_callback(c, srv_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, srv_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, srv_data);
    nghttp2_option *o;
    nghttp2_option_new(&o);
    nghttp2_option_set_no_http_messaging(o, 1); /* it sends what a test asks */
    ck_assert_int_eq(nghttp2_session_server_new2(&sv->ngh, c, sv, o), 0);
    nghttp2_option_del(o);
    nghttp2_session_callbacks_del(c);
    nghttp2_submit_settings(sv->ngh, NGHTTP2_FLAG_NONE, NULL, 0);
}

/* Hand the bytes both ways until neither side has any. */
static void pump(petrel__h2c_t *h, server_t *sv)
{
    static char buf[65536];
    for (int round = 0; round < 1000; round++) {
        long n = petrel__h2c_out(h, buf, sizeof(buf));
        ck_assert_int_ge(n, 0);
        if (n > 0)
            ck_assert_int_eq(nghttp2_session_mem_recv(sv->ngh, (uint8_t *)buf, (size_t)n), n);
        const uint8_t *p;
        ssize_t m, total = 0;
        while ((m = nghttp2_session_mem_send(sv->ngh, &p)) > 0) {
            ck_assert_int_eq(petrel__h2c_recv(h, (const char *)p, (size_t)m), 0);
            total += m;
        }
        if (n == 0 && total == 0)
            return;
    }
    ck_abort_msg("the sessions never went quiet");
}

static petrel_arena_t arena;
static petrel__h2c_t *h;
static server_t sv;

static void setup(void)
{
    petrel__arena_init(&arena, &petrel__pool, 0);
    h = petrel__h2c_new(&cbs);
    ck_assert_ptr_nonnull(h);
    server_init(&sv);
}

static void teardown(void)
{
    petrel__h2c_free(h);
    nghttp2_session_del(sv.ngh);
    petrel__arena_clear(&arena);
}

static void get(petrel__h2c_stream_t *st, seen_t *s, const char *path)
{
    memset(s, 0, sizeof(*s));
    ck_assert_int_eq(petrel__h2c_submit(h, st, s, &arena, "GET", "x", path, NULL, 0, false, NULL, 0,
                                        false, false, false),
                     0);
}

START_TEST(test_response)
{
    petrel__h2c_stream_t st;
    seen_t s;
    get(&st, &s, "/ok");
    pump(h, &sv);
    ck_assert_int_eq(s.heads, 1);
    ck_assert_int_eq(s.status, 200);
    ck_assert_int_eq(s.cl, -1);
    ck_assert_uint_eq(s.body, 5);
    ck_assert_str_eq(s.first, "hello");
    ck_assert_int_eq(s.ends, 1);
    ck_assert_str_eq(s.trailers, "x-trailer: yes;");
    ck_assert_ptr_null(petrel__h2c_first(h));
}
END_TEST

START_TEST(test_malformed)
{
    petrel__h2c_stream_t st;
    seen_t s;
    get(&st, &s, "/conn");
    pump(h, &sv);
    ck_assert_int_eq(s.heads, 0);
    ck_assert_int_eq(s.closes, 1);
    ck_assert_int_eq(s.how, PETREL__H2C_MALFORMED);
}
END_TEST

START_TEST(test_refused)
{
    petrel__h2c_stream_t st;
    seen_t s;
    get(&st, &s, "/refuse");
    pump(h, &sv);
    ck_assert_int_eq(s.closes, 1);
    ck_assert_int_eq(s.how, PETREL__H2C_REFUSED);
    sv.goaway = true;
    get(&st, &s, "/ok");
    pump(h, &sv);
    ck_assert_int_eq(s.closes, 1);
    ck_assert_int_eq(s.how, PETREL__H2C_REFUSED);
    ck_assert(petrel__h2c_goaway(h));
    ck_assert(!petrel__h2c_room(h, 100));
}
END_TEST

START_TEST(test_pause)
{
    petrel__h2c_stream_t st;
    seen_t s;
    memset(big, 'b', sizeof(big));
    get(&st, &s, "/big");
    petrel__h2c_pause(h, &st, true);
    pump(h, &sv);
    ck_assert_int_eq(s.heads, 1);
    ck_assert_uint_eq(s.body, 0);
    ck_assert_uint_le(st.held_len, 65535); /* the stream's window, no more */
    ck_assert_uint_gt(st.held_len, 0);
    petrel__h2c_pause(h, &st, false);
    ck_assert_uint_gt(s.body, 0);
    pump(h, &sv); /* its window given back: the rest comes */
    ck_assert_uint_eq(s.body, BIG);
    ck_assert_int_eq(s.ends, 1);
}
END_TEST

START_TEST(test_forget)
{
    petrel__h2c_stream_t st, st2;
    seen_t s, s2;
    get(&st, &s, "/ok");
    get(&st2, &s2, "/ok");
    petrel__h2c_forget(h, &st); /* before its HEADERS went out */
    pump(h, &sv);
    ck_assert_int_eq(sv.requests, 1);
    ck_assert_int_eq(s.heads + s.ends + s.closes, 0);
    ck_assert_int_eq(s2.ends, 1);
}
END_TEST

START_TEST(test_stream_body)
{
    petrel__h2c_stream_t st;
    seen_t s;
    memset(&s, 0, sizeof(s));
    rd_avail = rd_total = 0;
    rd_end = false;
    ck_assert_int_eq(petrel__h2c_submit(h, &st, &s, &arena, "POST", "x", "/ok", NULL, 0, false,
                                        NULL, 0, false, false, true),
                     0);
    pump(h, &sv);
    ck_assert(st.deferred); /* nothing held: the body waits */
    ck_assert_uint_eq(sv.data, 0);
    ck_assert_int_eq(sv.requests, 0);
    rd_avail = 150000; /* more than the server's window: it waits for WINDOW_UPDATEs */
    petrel__h2c_resume(h, &st);
    pump(h, &sv);
    ck_assert_uint_eq(sv.data, 150000);
    ck_assert_int_eq(sv.requests, 0); /* no END_STREAM yet */
    ck_assert(st.deferred);
    rd_end = true;
    petrel__h2c_resume(h, &st);
    pump(h, &sv);
    ck_assert_int_eq(sv.requests, 1);
    ck_assert_int_eq(s.ends, 1);
    ck_assert_uint_eq(rd_total, 150000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("h2_client");
    TCase *tc = tcase_create("session");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_response);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_pause);
    tcase_add_test(tc, test_forget);
    tcase_add_test(tc, test_stream_body);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
