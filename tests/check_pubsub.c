/*
 * check_pubsub.c -- publish/subscribe (src/framework/pubsub.c), the shared-memory
 * rings between workers (src/runtime/ring.c) and WebSocket backpressure
 * (petrel_ws_buffered, petrel_ws_on_drain in src/protocols/ws.c).
 *
 * WebSocket clients are socketpairs adopted by the worker loop of the test
 * process (check_client.h): each does the opening handshake, then reads
 * whole server frames from its buffer; the test publishes from the outside
 * (as a timer would), from a WebSocket handler, from an HTTP handler and
 * from a timer.  The cross-worker path runs in one process too: the test
 * maps the rings as a master would, takes ring 0 for its worker and writes
 * into ring 1 as another worker would, then wakes its worker.  The rings'
 * own tests include one with a forked writer.  No sleeps.
 *
 * RFC references: RFC 6455 (frames), RFC 7692 (permessage-deflate).
 */
#include "server/server.h"
#include "runtime/log.h"
#include "framework/pubsub.h"
#include "runtime/ring.h"
#include "protocols/ws.h"

#define CK_SERVER_CLIENTS 320
#include "check_server.h"
#include "check_util.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------------------ */
/* Test endpoints                                                           */

static petrel_ws_t *last_ws;
static int last_sub_rc;
static int drained; /* drain callbacks run (the backpressure tests) */
static int multi_rc[8];
static int nclosed;
static int last_close_code;

/* /sub/:topic -- subscribes on open; a message is published to the topic
 * (from a WebSocket handler), "unsub" unsubscribes. */
static void sub_open(petrel_ws_t *ws, petrel_req_t *req)
{
    last_ws = ws;
    last_sub_rc = petrel_ws_subscribe(ws, petrel_req_param(req, "topic"));
    if (last_sub_rc < 0)
        petrel_ws_close(ws, 1008, "cannot subscribe");
}

static char sub_topic[64]; /* where /sub's messages are published (the tests set it) */

static void sub_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    if (!binary && len == 5 && memcmp(data, "unsub", 5) == 0) {
        petrel_ws_unsubscribe(ws, sub_topic);
        return;
    }
    if (binary)
        petrel_publish_binary(sub_topic, data, len);
    else
        petrel_publish_text(sub_topic, data, len);
}

static void any_close(petrel_ws_t *ws, int code, const char *reason)
{
    (void)reason;
    nclosed++;
    last_close_code = code;
    if (ws == last_ws)
        last_ws = NULL;
}

static const petrel_ws_handler_t sub_handler = {
    .on_open = sub_open, .on_message = sub_message, .on_close = any_close};

/* /multi?t=a,b,c -- subscribes to each, recording the results */
static void multi_open(petrel_ws_t *ws, petrel_req_t *req)
{
    last_ws = ws;
    const char *t = petrel_req_query(req, "t");
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", t ? t : "");
    int i = 0;
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p && i < 8;
         p = strtok_r(NULL, ",", &save))
        multi_rc[i++] = petrel_ws_subscribe(ws, p);
}

static const petrel_ws_handler_t multi_handler = {.on_open = multi_open, .on_close = any_close};

/* /plain -- no subscription: the test sends and subscribes by hand */
static void plain_open(petrel_ws_t *ws, petrel_req_t *req)
{
    (void)req;
    last_ws = ws;
}

static const petrel_ws_handler_t plain_handler = {.on_open = plain_open, .on_close = any_close};

/* POST /publish/:topic -- the body, published from an HTTP handler */
static int h_publish(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = petrel_publish_text(petrel_req_param(req, "topic"), req->body.ptr, req->body.len);
    if (rc == PETREL_ELIMIT)
        return 413;
    if (rc < 0)
        return 400;
    return petrel_send_text(req, 202, "text/plain", "published\n");
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                  */

static void setup(void)
{
    ck_server_new();
    ck_assert_int_eq(petrel_ws_route_add(srv, "/sub/:topic", &sub_handler, NULL), 0);
    ck_assert_int_eq(petrel_ws_route_add(srv, "/multi", &multi_handler, NULL), 0);
    ck_assert_int_eq(petrel_ws_route_add(srv, "/plain", &plain_handler, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_POST, "/publish/:topic", h_publish, NULL), 0);
    last_ws = NULL;
    nclosed = 0;
    drained = 0;
    snprintf(sub_topic, sizeof(sub_topic), "%s", "t");
}

#define CBUF (1u << 20)

static void teardown(void)
{
    ck_server_free();
    petrel__pubsub_master_fini();
}

static void turns(int n)
{
    for (int i = 0; i < n; i++)
        ck_turn(0);
}

/* ------------------------------------------------------------------------ */
/* A WebSocket client                                                       */

/* Open a WebSocket connection to `path` (offering permessage-deflate with
 * `ext` when not NULL), with a receive buffer of `cap` bytes; returns the
 * client once the 101 is read. */
static ck_client_t *ws_connect_cap(const char *path, const char *ext, size_t cap)
{
    ck_client_t *c = ck_server_client(cap, true);
    char req[512];
    int n =
        snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                 "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n%s%s%s\r\n",
                 path, ext ? "Sec-WebSocket-Extensions: " : "", ext ? ext : "", ext ? "\r\n" : "");
    ck_assert(ck_client_write(c, req, (size_t)n, 1000));
    for (int i = 0; i < 10000; i++) {
        ck_turn(0);
        ck_client_pull(c);
        const char *e = memmem(c->buf + c->off, c->len - c->off, "\r\n\r\n", 4);
        if (e) {
            ck_assert_msg(strncmp(c->buf + c->off, "HTTP/1.1 101 ", 13) == 0, "%.*s",
                          (int)(e - c->buf - c->off), c->buf + c->off);
            c->off = (size_t)(e + 4 - c->buf);
            return c;
        }
        ck_assert(!c->eof);
    }
    ck_abort_msg("no answer to the handshake of %s", path);
    return NULL;
}

static ck_client_t *ws_connect(const char *path, const char *ext)
{
    return ws_connect_cap(path, ext, CBUF);
}

/* Send a masked client frame (the mask key is 0: the payload as it is,
 * which RFC 6455 §5.3 allows). */
static void ws_send(ck_client_t *c, int op, const void *data, size_t len)
{
    uint8_t h[8];
    size_t hl = 2;
    h[0] = (uint8_t)(0x80 | op);
    if (len < 126) {
        h[1] = (uint8_t)(0x80 | len);
    } else {
        h[1] = 0x80 | 126;
        h[2] = (uint8_t)(len >> 8);
        h[3] = (uint8_t)len;
        hl = 4;
    }
    memset(h + hl, 0, 4);
    ck_assert(ck_client_write(c, h, hl + 4, 1000));
    ck_assert(ck_client_write(c, data, len, 1000));
}

typedef struct msg {
    int op;
    bool rsv1;
    const uint8_t *p; /* in the client's buffer, valid until its next pull */
    size_t len;
} msg_t;

/* The next whole server frame already read by `c`, without turning the
 * loop (no Check call: runs while heap calls are counted). */
static bool frame_next(ck_client_t *c, msg_t *m)
{
    const uint8_t *p = (const uint8_t *)c->buf + c->off;
    size_t avail = c->len - c->off;
    if (avail < 2)
        return false;
    size_t hl = 2, len = p[1] & 0x7f;
    if (len == 126)
        hl = 4;
    else if (len == 127)
        hl = 10;
    if (avail < hl)
        return false;
    if (len == 126)
        len = (size_t)p[2] << 8 | p[3];
    else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
    }
    if (avail < hl + len)
        return false;
    m->op = p[0] & 0x0f;
    m->rsv1 = (p[0] & 0x40) != 0;
    m->p = p + hl;
    m->len = len;
    c->off += hl + len;
    return true;
}

/* The next frame, turning the loop until it comes. */
static bool msg_get(ck_client_t *c, msg_t *m)
{
    for (int i = 0; i < 20000; i++) {
        if (frame_next(c, m))
            return true;
        if (c->eof)
            return false;
        ck_turn(0);
        ck_client_pull(c);
    }
    return false;
}

static void expect_msg(ck_client_t *c, int op, const void *data, size_t len)
{
    msg_t m;
    ck_assert_msg(msg_get(c, &m), "no message (eof %d)", c->eof);
    ck_assert_int_eq(m.op, op);
    ck_assert(!m.rsv1);
    ck_assert_uint_eq(m.len, len);
    ck_assert(len == 0 || memcmp(m.p, data, len) == 0);
}

/* Nothing more arrives for this client after a few turns. */
static void expect_nothing(ck_client_t *c)
{
    turns(5);
    ck_client_pull(c);
    ck_assert_uint_eq(c->len - c->off, 0);
}

static void expect_close(ck_client_t *c, int code)
{
    msg_t m;
    do
        ck_assert_msg(msg_get(c, &m), "no Close frame");
    while (m.op != 8);
    ck_assert_uint_ge(m.len, 2);
    ck_assert_int_eq(m.p[0] << 8 | m.p[1], code);
}

/* A compressed message (RFC 7692 §7.2.2): inflate it with the tail. */
static size_t inflate_msg(const msg_t *m, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(inflateInit2(&z, -15), Z_OK);
    static const uint8_t tail[4] = {0, 0, 0xff, 0xff};
    z.next_out = out;
    z.avail_out = (uInt)cap;
    z.next_in = (Bytef *)m->p;
    z.avail_in = (uInt)m->len;
    ck_assert_int_ne(inflate(&z, Z_SYNC_FLUSH), Z_STREAM_ERROR);
    z.next_in = (Bytef *)tail;
    z.avail_in = 4;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    ck_assert(rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END);
    size_t n = cap - z.avail_out;
    inflateEnd(&z);
    return n;
}

static petrel_pubsub_stats_t stats(void)
{
    petrel_pubsub_stats_t st;
    ck_assert_int_eq(petrel_pubsub_stats(&st), 0);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Topics                                                                   */

START_TEST(test_topic_names)
{
    srv->cfg.pubsub_max_topic_size = 8;
    ck_client_t *c = ws_connect("/plain", NULL);
    petrel_ws_t *ws = last_ws;
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(petrel_ws_subscribe(NULL, "a"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_subscribe(ws, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_subscribe(ws, ""), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_subscribe(ws, "a\nb"), PETREL_EINVAL);   /* control */
    ck_assert_int_eq(petrel_ws_subscribe(ws, "a\x7f"), PETREL_EINVAL);  /* DEL */
    ck_assert_int_eq(petrel_ws_subscribe(ws, "\xff"), PETREL_EINVAL);   /* not UTF-8 */
    ck_assert_int_eq(petrel_ws_subscribe(ws, "ab\xc3"), PETREL_EINVAL); /* cut short */
    ck_assert_int_eq(petrel_ws_subscribe(ws, "123456789"), PETREL_ELIMIT);
    ck_assert_int_eq(petrel_ws_subscribe(ws, "12345678"), 0);
    ck_assert_int_eq(petrel_ws_subscribe(ws, "caf\xc3\xa9"), 0); /* café */
    ck_assert_int_eq(petrel_ws_subscribe(ws, "caf\xc3\xa9"), 0); /* twice: once */
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.subscriptions, 2);
    ck_assert_uint_eq(st.topics, 2);
    ck_assert_int_eq(petrel_publish_text("caf\xc3\xa9", "x", 1), 0);
    expect_msg(c, 1, "x", 1);
    expect_nothing(c);
    /* publishing checks the same */
    ck_assert_int_eq(petrel_publish_text("", "x", 1), PETREL_EINVAL);
    ck_assert_int_eq(petrel_publish_text(NULL, "x", 1), PETREL_EINVAL);
    ck_assert_int_eq(petrel_publish_text("a\tb", "x", 1), PETREL_EINVAL);
    ck_assert_int_eq(petrel_publish_text("123456789", "x", 1), PETREL_ELIMIT);
    ck_assert_int_eq(petrel_publish_text("nobody", "x", 1), 0); /* no subscriber: dropped */
    /* unsubscribing */
    ck_assert_int_eq(petrel_ws_unsubscribe(ws, "nope"), PETREL_ENOTFOUND);
    ck_assert_int_eq(petrel_ws_unsubscribe(ws, "123456789"), PETREL_ENOTFOUND);
    ck_assert_int_eq(petrel_ws_unsubscribe(ws, ""), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_unsubscribe(NULL, "a"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_unsubscribe(ws, "caf\xc3\xa9"), 0);
    ck_assert_int_eq(petrel_ws_unsubscribe(ws, "caf\xc3\xa9"), PETREL_ENOTFOUND);
    ck_assert_int_eq(petrel_publish_text("caf\xc3\xa9", "y", 1), 0);
    expect_nothing(c);
    st = stats();
    ck_assert_uint_eq(st.subscriptions, 1);
    ck_assert_uint_eq(st.topics, 1);
    ck_assert_uint_eq(st.published, 3);
    ck_assert_uint_eq(st.delivered, 1);
}
END_TEST

/* Outside a worker (a module's init in the master): refused. */
START_TEST(test_outside_worker)
{
    petrel_pubsub_stats_t st;
    ck_assert_int_eq(petrel_publish_text("t", "x", 1), PETREL_ESTATE);
    ck_assert_int_eq(petrel_publish_binary("t", "x", 1), PETREL_ESTATE);
    ck_assert_int_eq(petrel_pubsub_stats(&st), PETREL_ESTATE);
    ck_assert_int_eq(petrel_pubsub_stats(NULL), PETREL_EINVAL);
}
END_TEST

START_TEST(test_fanout)
{
    ck_client_t *news[5], *other[2];
    for (int i = 0; i < 5; i++)
        news[i] = ws_connect("/sub/news", NULL);
    for (int i = 0; i < 2; i++)
        other[i] = ws_connect("/sub/other", NULL);
    static const uint8_t bin[] = {0, 1, 2, 255};
    ck_assert_int_eq(petrel_publish_text("news", "hello", 5), 0);
    ck_assert_int_eq(petrel_publish_binary("news", bin, sizeof(bin)), 0);
    ck_assert_int_eq(petrel_publish_text("news", NULL, 0), 0); /* an empty message */
    for (int i = 0; i < 5; i++) {
        expect_msg(news[i], 1, "hello", 5);
        expect_msg(news[i], 2, bin, sizeof(bin));
        expect_msg(news[i], 1, "", 0);
        expect_nothing(news[i]);
    }
    for (int i = 0; i < 2; i++)
        expect_nothing(other[i]);
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.published, 3);
    ck_assert_uint_eq(st.delivered, 15);
    ck_assert_uint_eq(st.topics, 2);
    ck_assert_uint_eq(st.subscriptions, 7);
    /* bad arguments */
    ck_assert_int_eq(petrel_publish_text("news", NULL, 3), PETREL_EINVAL);
    ck_assert_int_eq(petrel_publish_text("news", "\xc3\x28", 2), PETREL_EINVAL); /* not UTF-8 */
    ck_assert_int_eq(petrel_publish_binary("news", "\xc3\x28", 2), 0);
    for (int i = 0; i < 5; i++)
        expect_msg(news[i], 2, "\xc3\x28", 2);
}
END_TEST

static void timer_publish(void *data)
{
    petrel_publish_text("room", data, strlen(data));
}

/* From a WebSocket handler, an HTTP handler and a timer; every subscriber,
 * the sender too, gets each once, in the order they were published. */
START_TEST(test_publish_from_handlers)
{
    snprintf(sub_topic, sizeof(sub_topic), "room");
    ck_client_t *c[3];
    for (int i = 0; i < 3; i++)
        c[i] = ws_connect("/sub/room", NULL);
    ws_send(c[1], 1, "from-ws", 7);
    for (int i = 0; i < 3; i++)
        expect_msg(c[i], 1, "from-ws", 7);
    ck_client_t *h = ck_server_client(65536, false);
    static const char post[] = "POST /publish/room HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\n"
                               "from-http";
    ck_assert(ck_client_write(h, post, sizeof(post) - 1, 1000));
    ck_assert(ck_client_wait(h, 12, 10000));
    ck_assert_msg(strncmp(h->buf, "HTTP/1.1 202", 12) == 0, "%.*s", (int)h->len, h->buf);
    static const char too_long[] =
        "POST /publish/r%0Aom HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx";
    h->len = h->off = 0;
    ck_assert(ck_client_write(h, too_long, sizeof(too_long) - 1, 1000));
    ck_assert(ck_client_wait(h, 12, 10000));
    ck_assert_msg(strncmp(h->buf, "HTTP/1.1 400", 12) == 0, "%.*s", (int)h->len, h->buf);
    ck_assert_ptr_nonnull(petrel_timer_start(1, timer_publish, "from-timer"));
    for (int i = 0; i < 3; i++) {
        expect_msg(c[i], 1, "from-http", 9);
        msg_t m;
        for (int k = 0; k < 200 && !frame_next(c[i], &m); k++) {
            ck_turn(5);
            ck_client_pull(c[i]);
        }
        ck_assert_uint_eq(m.len, 10);
        ck_assert(memcmp(m.p, "from-timer", 10) == 0);
        expect_nothing(c[i]);
    }
}
END_TEST

START_TEST(test_limits)
{
    srv->cfg.pubsub_max_message_size = 100;
    srv->cfg.pubsub_max_subscriptions = 3;
    srv->cfg.pubsub_max_subscribers = 2;
    static char big[101];
    memset(big, 'm', sizeof(big));
    ck_client_t *a = ws_connect("/sub/x", NULL);
    ck_assert_int_eq(last_sub_rc, 0);
    ws_connect("/sub/x", NULL);
    ck_assert_int_eq(last_sub_rc, 0);
    ck_client_t *third = ws_connect("/sub/x", NULL);
    ck_assert_int_eq(last_sub_rc, PETREL_ELIMIT); /* two subscribers per topic */
    expect_close(third, 1008);
    ck_assert_int_eq(petrel_publish_text("x", big, 100), 0);
    ck_assert_int_eq(petrel_publish_text("x", big, 101), PETREL_ELIMIT);
    ck_assert_int_eq(petrel_publish_binary("x", big, 101), PETREL_ELIMIT);
    expect_msg(a, 1, big, 100);
    expect_nothing(a);
    ws_connect("/multi?t=a,b,c,d", NULL);
    ck_assert_int_eq(multi_rc[0], 0);
    ck_assert_int_eq(multi_rc[1], 0);
    ck_assert_int_eq(multi_rc[2], 0);
    ck_assert_int_eq(multi_rc[3], PETREL_ELIMIT); /* three topics per WebSocket */
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.subscriptions, 5);
    ck_assert_uint_eq(st.topics, 4);
}
END_TEST

/* A connection that closes leaves its topics before its on_close runs. */
START_TEST(test_unsubscribed_when_closed)
{
    ck_client_t *a = ws_connect("/sub/t", NULL);
    ck_client_t *b = ws_connect("/sub/t", NULL);
    ck_assert_uint_eq(stats().subscriptions, 2);
    ck_client_close(a); /* the peer vanishes */
    for (int i = 0; i < 100 && nclosed < 1; i++)
        ck_turn(0);
    ck_assert_int_eq(nclosed, 1);
    ck_assert_uint_eq(stats().subscriptions, 1);
    ws_send(b, 8, "\x03\xe8", 2); /* Close 1000 */
    expect_close(b, 1000);
    for (int i = 0; i < 100 && nclosed < 2; i++)
        ck_turn(0);
    ck_assert_int_eq(nclosed, 2);
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.subscriptions, 0);
    ck_assert_uint_eq(st.topics, 0);
    ck_assert_int_eq(petrel_publish_text("t", "x", 1), 0);
    ck_assert_uint_eq(stats().delivered, 0);
}
END_TEST

/* A client that unsubscribes itself from its handler. */
START_TEST(test_unsubscribe_from_handler)
{
    ck_client_t *a = ws_connect("/sub/t", NULL);
    ck_client_t *b = ws_connect("/sub/t", NULL);
    ws_send(a, 1, "unsub", 5);
    turns(5);
    ck_assert_int_eq(petrel_publish_text("t", "after", 5), 0);
    expect_msg(b, 1, "after", 5);
    expect_nothing(a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Slow subscribers                                                         */

#define NSLOW 600
static char payload[1000];

/* Publish NSLOW numbered messages of 1000 bytes; the fast clients read as
 * they come, the slow one (the last) never does. */
static void publish_numbered(ck_client_t **fast, int nfast, unsigned *got)
{
    memset(payload, 'p', sizeof(payload));
    for (int i = 0; i < NSLOW; i++) {
        snprintf(payload, 16, "%08d", i);
        payload[8] = ' ';
        ck_assert_int_eq(petrel_publish_text("feed", payload, sizeof(payload)), 0);
        turns(1);
        for (int k = 0; k < nfast; k++) {
            ck_client_pull(fast[k]);
            msg_t m;
            while (frame_next(fast[k], &m)) {
                ck_assert_uint_eq(m.len, sizeof(payload));
                ck_assert_int_eq(atoi((const char *)m.p), (int)got[k]); /* in order, none lost */
                got[k]++;
            }
        }
    }
    for (int k = 0; k < nfast; k++)
        while (got[k] < NSLOW) {
            msg_t m;
            ck_assert(msg_get(fast[k], &m));
            ck_assert_int_eq(atoi((const char *)m.p), (int)got[k]);
            got[k]++;
        }
}

/* --ws-send-overflow close (the default): the slow subscriber is closed
 * with 1008, the others get every message. */
START_TEST(test_slow_subscriber_closed)
{
    srv->cfg.ws_send_limit = 64u << 10;
    ck_client_t *fast[2] = {ws_connect("/sub/feed", NULL), ws_connect("/sub/feed", NULL)};
    ck_client_t *slow = ws_connect("/sub/feed", NULL);
    unsigned got[2] = {0, 0};
    publish_numbered(fast, 2, got);
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.closed, 1);
    ck_assert_uint_eq(st.dropped, 0);
    ck_assert_int_eq(nclosed, 1);
    ck_assert_int_eq(last_close_code, 1008);
    /* the slow one reads what was queued, in order, then the Close */
    int next = 0;
    msg_t m;
    while (msg_get(slow, &m) && m.op == 1) {
        ck_assert_int_eq(atoi((const char *)m.p), next);
        next++;
    }
    ck_assert_int_eq(m.op, 8);
    ck_assert_int_eq(m.p[0] << 8 | m.p[1], 1008);
    ck_assert_int_lt(next, NSLOW);
    ck_assert_int_gt(next, 0);
}
END_TEST

/* --ws-send-overflow drop: the slow subscriber misses messages and stays. */
START_TEST(test_slow_subscriber_dropped)
{
    srv->cfg.ws_send_limit = 64u << 10;
    srv->cfg.ws_send_overflow_drop = true;
    ck_client_t *fast[2] = {ws_connect("/sub/feed", NULL), ws_connect("/sub/feed", NULL)};
    ck_client_t *slow = ws_connect("/sub/feed", NULL);
    unsigned got[2] = {0, 0};
    publish_numbered(fast, 2, got);
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.closed, 0);
    ck_assert_uint_gt(st.dropped, 0);
    ck_assert_uint_eq(st.delivered + st.dropped, 3 * NSLOW);
    ck_assert_int_eq(nclosed, 0);
    /* it reads what was queued, in order with gaps, then gets new messages */
    int last = -1;
    unsigned n = 0;
    msg_t m;
    while (n < NSLOW - st.dropped && msg_get(slow, &m)) {
        int v = atoi((const char *)m.p);
        ck_assert_int_gt(v, last);
        last = v;
        n++;
    }
    ck_assert_uint_eq(n, NSLOW - st.dropped);
    ck_assert_int_eq(petrel_publish_text("feed", "later", 5), 0);
    expect_msg(slow, 1, "later", 5);
}
END_TEST

/* A subscriber that only receives, slowly but steadily, is neither idle nor
 * stuck: output is queued whenever its idle timer runs out, and it never
 * sends (not even a pong: no ping is due while it reads). */
START_TEST(test_busy_subscriber_not_idle)
{
    srv->cfg.ws_idle_timeout_ms = 100;
    ck_client_t *c = ws_connect("/sub/busy", NULL);
    int small = 4096;
    petrel__conn_t *sc = container_of(srv->conns.all.prev, petrel__conn_t, link);
    ck_assert_int_eq(setsockopt(sc->io.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    ck_assert_int_eq(setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    static char chunk[8192];
    memset(chunk, 'b', sizeof(chunk));
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned sent = 0, got = 0, queued_at_times = 0;
    do {
        if (petrel_ws_buffered(last_ws) < (64u << 10)) {
            ck_assert_int_eq(petrel_publish_binary("busy", chunk, sizeof(chunk)), 0);
            sent++;
        }
        ck_turn(2);
        queued_at_times += petrel_ws_buffered(last_ws) > 0;
        char tmp[8192];
        ssize_t n = read(c->fd, tmp, sizeof(tmp));
        if (n > 0)
            got += (unsigned)n;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 800);
    ck_assert_int_eq(nclosed, 0);
    ck_assert_ptr_nonnull(last_ws);
    ck_assert_uint_gt(queued_at_times, 100); /* output was waiting most of the time */
    ck_assert_uint_gt(got, 8 * sizeof(chunk));
    ck_assert_uint_eq(stats().closed, 0);
    (void)sent;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* permessage-deflate: compressed once per window size, shared              */

START_TEST(test_deflate_shared)
{
    ck_client_t *z15 = ws_connect("/sub/z", "permessage-deflate");
    ck_client_t *z10 = ws_connect("/sub/z", "permessage-deflate; server_max_window_bits=10");
    ck_client_t *plain = ws_connect("/sub/z", NULL);
    ck_client_t *z15b = ws_connect("/sub/z", "permessage-deflate; client_max_window_bits");
    static char text[2000];
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = "the quick brown fox "[i % 20];
    ck_assert_int_eq(petrel_publish_text("z", text, sizeof(text)), 0);
    ck_assert_int_eq(petrel_publish_text("z", "short", 5), 0); /* under 32 bytes: as it is */
    static uint8_t out[4096];
    ck_client_t *zs[3] = {z15, z10, z15b};
    for (int i = 0; i < 3; i++) {
        msg_t m;
        ck_assert(msg_get(zs[i], &m));
        ck_assert_int_eq(m.op, 1);
        ck_assert(m.rsv1); /* RFC 7692 §6: RSV1 on a compressed message */
        ck_assert_uint_lt(m.len, sizeof(text) / 4);
        ck_assert_uint_eq(inflate_msg(&m, out, sizeof(out)), sizeof(text));
        ck_assert(memcmp(out, text, sizeof(text)) == 0);
        expect_msg(zs[i], 1, "short", 5);
    }
    expect_msg(plain, 1, text, sizeof(text));
    expect_msg(plain, 1, "short", 5);
    ck_assert_uint_eq(stats().delivered, 8);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The other workers: rings in the test process                             */

/* This worker holds ring 0 (as the master would have given it) and
 * another "worker" writes ring 1. */
static void with_rings(void)
{
    char err[256];
    ck_assert_msg(petrel__pubsub_master_init(&srv->cfg, 2, err, sizeof(err)) == 0, "%s", err);
    petrel__pubsub_before_fork(); /* the worker (this process) gets ring 0 */
    ck_server_start();
    petrel__pubsub_after_fork(getpid()); /* the master's side */
}

/* A record as another worker writes it (pubsub.c's format). */
static void foreign_put(petrel__rings_t *r, const char *topic, int binary, const char *msg)
{
    size_t tl = strlen(topic);
    uint8_t h[4] = {(uint8_t)binary, 0, (uint8_t)tl, (uint8_t)(tl >> 8)};
    struct iovec iov[3] = {{h, 4}, {(void *)topic, tl}, {(void *)msg, strlen(msg)}};
    ck_assert_int_eq(petrel__ring_put(r, 1, iov, 3), 0);
}

/* What this worker publishes is written to its ring; what another worker
 * writes to its own is delivered here once this worker is woken. */
START_TEST(test_other_workers)
{
    srv->cfg.pubsub_ring_size = 64u << 10;
    srv->cfg.pubsub_max_message_size = 1000;
    with_rings();
    ck_client_t *a = ws_connect("/sub/w", NULL);
    ck_client_t *b = ws_connect("/sub/w", "permessage-deflate");
    petrel__rings_t *r = petrel__pubsub_rings();
    ck_assert_ptr_nonnull(r);
    /* ours: what this worker publishes goes to ring 0 too */
    petrel__ring_cursor_t cur = {0};
    static uint8_t buf[16384];
    ck_assert_int_eq(petrel__ring_get(r, 0, &cur, buf, sizeof(buf)), -1); /* starts at the end */
    ck_assert_int_eq(petrel_publish_text("w", "mine", 4), 0);
    ck_assert_int_eq(petrel__ring_get(r, 0, &cur, buf, sizeof(buf)), 4 + 1 + 4);
    ck_assert(memcmp(buf + 4, "wmine", 5) == 0);
    expect_msg(a, 1, "mine", 4);
    expect_msg(b, 1, "mine", 4);
    /* another worker's messages, in its order */
    foreign_put(r, "w", 0, "one");
    foreign_put(r, "nobody", 0, "zero");
    foreign_put(r, "w", 1, "two");
    uint64_t one = 1;
    ck_assert_int_eq(write(petrel__rings_fd(r, 0), &one, 8), 8);
    expect_msg(a, 1, "one", 3);
    expect_msg(a, 2, "two", 3);
    expect_msg(b, 1, "one", 3);
    expect_msg(b, 2, "two", 3);
    expect_nothing(a);
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.from_workers, 3);
    ck_assert_uint_eq(st.lost_workers, 0);
    /* a whole ring behind: lost, counted, and the newest still arrive */
    static char filler[900];
    memset(filler, 'f', sizeof(filler) - 1);
    for (int i = 0; i < 200; i++)
        foreign_put(r, "w", 0, filler);
    foreign_put(r, "w", 0, "newest");
    ck_assert_int_eq(write(petrel__rings_fd(r, 0), &one, 8), 8);
    msg_t m;
    unsigned fill = 0;
    while (msg_get(a, &m) && m.len == sizeof(filler) - 1)
        fill++;
    ck_assert_msg(m.len == 6, "%zu bytes (op %d, after %u fillers): %.40s", m.len, m.op, fill, m.p);
    ck_assert(memcmp(m.p, "newest", 6) == 0);
    st = stats();
    ck_assert_uint_gt(st.lost_workers, 0);
    ck_assert_uint_eq(fill + st.lost_workers, 200);
    ck_assert_uint_eq(st.from_workers, 3 + fill + 1);
    /* a drain gives the ring back, and publishing stays local */
    petrel__pubsub_drain();
    ck_assert(!petrel__rings_held(r, 0));
    ck_assert_int_eq(petrel_publish_text("w", "local", 5), 0);
    ck_assert_int_eq(petrel__ring_get(r, 0, &cur, buf, sizeof(buf)), -1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* No heap call per delivered message                                       */

/* More subscribers than the pool keeps free chunks (256): a frame is shared,
 * not copied into a chunk of each subscriber's queue. */
#define ZM_SUBS 300
#define ZM_MSGS 200

START_TEST(test_zero_malloc_fanout)
{
    srv->cfg.pubsub_ring_size = 1u << 20;
    with_rings(); /* every publish is also written for the other workers */
    ck_client_t *c[ZM_SUBS];
    for (int i = 0; i < ZM_SUBS; i++)
        c[i] = ws_connect_cap("/sub/zm", i % 2 ? "permessage-deflate" : NULL, 65536);
    petrel__rings_t *r = petrel__pubsub_rings();
    static char text[100];
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = "abcabcabcx"[i % 10];
    unsigned got[ZM_SUBS] = {0};
    uint64_t calls0 = 0, pool0 = 0;
    int64_t live0 = 0;
    int errors = 0;
    uint64_t one = 1;
    for (int round = 0; round < ZM_MSGS + 20; round++) {
        if (round == 20) {
            calls0 = ck_heap.calls;
            pool0 = petrel__pool.mallocs;
            live0 = ck_heap.live;
        }
        /* one published here, one from another worker through the ring */
        if (petrel_publish_text("zm", text, sizeof(text)) != 0)
            errors++;
        uint8_t h[4] = {0, 0, 2, 0};
        struct iovec iov[3] = {{h, 4}, {"zm", 2}, {text, sizeof(text)}};
        if (petrel__ring_put(r, 1, iov, 3) != 0 || write(petrel__rings_fd(r, 0), &one, 8) != 8)
            errors++;
        for (int t = 0; t < 3; t++)
            ck_turn(0);
        for (int i = 0; i < ZM_SUBS; i++) {
            ck_client_pull(c[i]);
            msg_t m;
            while (frame_next(c[i], &m))
                got[i]++;
        }
    }
    uint64_t calls1 = ck_heap.calls, pool1 = petrel__pool.mallocs;
    int64_t live1 = ck_heap.live;
    ck_assert_int_eq(errors, 0);
    for (int i = 0; i < ZM_SUBS; i++)
        ck_assert_uint_eq(got[i], 2 * (ZM_MSGS + 20));
    ck_assert_msg(pool1 == pool0, "the chunk pool made %llu heap calls",
                  (unsigned long long)(pool1 - pool0));
    if (CK_HEAP_HOOK) {
        ck_assert_msg(calls1 == calls0, "%llu heap calls for %d messages to %d subscribers",
                      (unsigned long long)(calls1 - calls0), 2 * ZM_MSGS, ZM_SUBS);
        ck_assert_int_eq(live1, live0);
    }
    petrel_pubsub_stats_t st = stats();
    ck_assert_uint_eq(st.delivered, (uint64_t)2 * (ZM_MSGS + 20) * ZM_SUBS);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The rings (ring.c) on their own                                          */

START_TEST(test_ring_holders)
{
    petrel__rings_t *r = petrel__rings_new(2, 64u << 10);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_null(petrel__rings_new(2, 100000)); /* not a power of two */
    ck_assert_ptr_null(petrel__rings_new(0, 64u << 10));
    ck_assert_int_eq(petrel__rings_claim(r), 0);
    ck_assert_int_eq(petrel__rings_claim(r), 1);
    ck_assert_int_eq(petrel__rings_claim(r), -1);
    petrel__rings_hold(r, 0, 1000);
    petrel__rings_hold(r, 1, 0); /* the fork failed */
    ck_assert(petrel__rings_held(r, 0));
    ck_assert(!petrel__rings_held(r, 1));
    ck_assert_int_eq(petrel__rings_claim(r), 1);
    petrel__rings_hold(r, 1, 1001);
    petrel__rings_release(r, 1, 999); /* not its holder: nothing */
    ck_assert(petrel__rings_held(r, 1));
    petrel__rings_release(r, 1, 1001);
    ck_assert(!petrel__rings_held(r, 1));
    petrel__rings_exited(r, 1000);
    ck_assert(!petrel__rings_held(r, 0));
    /* waking: once until the holder has read */
    petrel__rings_hold(r, 0, 1000);
    petrel__rings_hold(r, 1, 1001);
    ck_assert_uint_eq(petrel__rings_wake(r, 0), 1);
    ck_assert_uint_eq(petrel__rings_wake(r, 0), 0);
    uint64_t v = 0;
    ck_assert_int_eq(read(petrel__rings_fd(r, 1), &v, 8), 8);
    ck_assert_uint_eq(v, 1);
    petrel__rings_woken(r, 1);
    ck_assert_uint_eq(petrel__rings_wake(r, 0), 1);
    petrel__rings_free(r);
}
END_TEST

START_TEST(test_ring_records)
{
    petrel__rings_t *r = petrel__rings_new(2, 64u << 10);
    ck_assert_ptr_nonnull(r);
    size_t max = petrel__rings_max_record(r);
    ck_assert_uint_eq(max, (16u << 10) - PETREL__RING_HDR);
    static uint8_t big[16384], out[16384];
    struct iovec iov = {big, max + 1};
    ck_assert_int_eq(petrel__ring_put(r, 0, &iov, 1), PETREL_ELIMIT);
    petrel__ring_cursor_t cur = {0};
    ck_assert_int_eq(petrel__ring_get(r, 0, &cur, out, sizeof(out)), -1);
    /* records of every size around the wrap, read as they come */
    for (unsigned i = 0; i < 3000; i++) {
        size_t n = (i * 37) % 1500;
        for (size_t k = 0; k < n; k++)
            big[k] = (uint8_t)(i + k);
        struct iovec two[2] = {{big, n / 2}, {big + n / 2, n - n / 2}};
        ck_assert_int_eq(petrel__ring_put(r, 0, two, 2), 0);
        ck_assert_int_eq(petrel__ring_get(r, 0, &cur, out, sizeof(out)), (ssize_t)n);
        for (size_t k = 0; k < n; k++)
            ck_assert_uint_eq(out[k], (uint8_t)(i + k));
    }
    ck_assert_int_eq(petrel__ring_get(r, 0, &cur, out, sizeof(out)), -1);
    ck_assert_uint_eq(cur.lost, 0);
    /* less than a ring behind: everything is still there */
    iov.iov_len = 1000;
    for (unsigned i = 0; i < 60; i++) {
        memset(big, (int)i, 1000);
        ck_assert_int_eq(petrel__ring_put(r, 0, &iov, 1), 0);
    }
    for (unsigned i = 0; i < 60; i++) {
        ck_assert_int_eq(petrel__ring_get(r, 0, &cur, out, sizeof(out)), 1000);
        ck_assert_uint_eq(out[0], i);
    }
    /* a whole ring behind: loses the oldest, reads the newest, counts */
    for (unsigned i = 0; i < 100; i++) {
        memset(big, (int)i, 1000);
        ck_assert_int_eq(petrel__ring_put(r, 0, &iov, 1), 0);
    }
    unsigned read_ = 0;
    int last = -1;
    ssize_t k;
    while ((k = petrel__ring_get(r, 0, &cur, out, sizeof(out))) >= 0) {
        ck_assert_int_eq(k, 1000);
        ck_assert_int_gt(out[0], last);
        last = out[0];
        read_++;
    }
    ck_assert_int_eq(last, 99);
    ck_assert_uint_ge(read_, 60); /* a ring of 64 KiB holds 64 records of 1 KiB */
    ck_assert_uint_eq(read_ + cur.lost, 100);
    petrel__rings_free(r);
}
END_TEST

/* A writer in another process, a reader here, at the same time. */
START_TEST(test_ring_across_processes)
{
    petrel__rings_t *r = petrel__rings_new(2, 256u << 10);
    ck_assert_ptr_nonnull(r);
    petrel__ring_cursor_t cur = {0};
    static uint8_t out[65536];
    ck_assert_int_eq(petrel__ring_get(r, 1, &cur, out, sizeof(out)), -1);
    enum { N = 30000 };
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char b;
        if (read(go[0], &b, 1) != 1) /* the reader is about to read */
            _exit(1);
        uint8_t rec[64];
        for (uint32_t i = 0; i < N; i++) {
            size_t n = 8 + i % 50;
            memset(rec, (int)(i & 0xff), n);
            memcpy(rec, &i, 4);
            struct iovec iov = {rec, n};
            petrel__ring_put(r, 1, &iov, 1);
            if (i % 64 == 0)
                petrel__rings_wake(r, 1);
        }
        _exit(0);
    }
    uint32_t next = 0, received = 0;
    bool done = false;
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    for (;;) {
        ssize_t k = petrel__ring_get(r, 1, &cur, out, sizeof(out));
        if (k < 0) {
            int st;
            if (done)
                break; /* the writer is gone and everything is read */
            done = waitpid(pid, &st, WNOHANG) == pid;
            continue;
        }
        uint32_t i;
        memcpy(&i, out, 4);
        ck_assert_uint_ge(i, next); /* in order; a lapped reader skips, never goes back */
        ck_assert_uint_eq((size_t)k, 8 + i % 50);
        for (ssize_t b = 4; b < k; b++)
            ck_assert_uint_eq(out[b], i & 0xff);
        next = i + 1;
        received++;
    }
    ck_assert_uint_eq(next, N);                /* the newest are never lost */
    ck_assert_uint_eq(received + cur.lost, N); /* every record read or counted lost */
    close(go[0]);
    close(go[1]);
    petrel__rings_free(r);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Backpressure of one connection                                           */

static size_t drained_at;

static void on_drained(petrel_ws_t *ws, void *data)
{
    drained++;
    drained_at = petrel_ws_buffered(ws);
    ck_assert_ptr_eq(data, &drained);
}

START_TEST(test_ws_drain)
{
    ck_client_t *c = ws_connect("/plain", NULL);
    petrel_ws_t *ws = last_ws;
    ck_assert_uint_eq(petrel_ws_buffered(ws), 0);
    ck_assert_uint_eq(petrel_ws_buffered(NULL), 0);
    ck_assert_int_eq(petrel_ws_on_drain(NULL, 0, on_drained, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_on_drain(ws, 0, on_drained, &drained), 1); /* nothing queued */
    static char chunk[65536];
    memset(chunk, 'd', sizeof(chunk));
    /* fill the socket, then the queue: 1 MiB queued for a peer that does not read */
    while (petrel_ws_buffered(ws) < (1u << 20)) {
        ck_assert_int_eq(petrel_ws_send_binary(ws, chunk, sizeof(chunk)), 0);
        ck_turn(0);
    }
    size_t queued = petrel_ws_buffered(ws);
    ck_assert_int_eq(petrel_ws_on_drain(ws, 256u << 10, on_drained, &drained), 0);
    turns(10);
    ck_assert_int_eq(drained, 0); /* the peer reads nothing: no callback */
    /* the peer reads a little at a time: the callback runs once the queue
     * is at the mark, before it is empty */
    size_t taken = 0;
    for (int i = 0; i < 100000 && drained == 0; i++) {
        char tmp[8192];
        ssize_t n = read(c->fd, tmp, sizeof(tmp));
        if (n > 0)
            taken += (size_t)n;
        ck_turn(0);
    }
    ck_assert_int_eq(drained, 1);
    ck_assert_uint_le(drained_at, 256u << 10);
    ck_assert_uint_gt(drained_at, 0);
    ck_assert_uint_lt(taken, queued + (1u << 20));
    turns(10);
    ck_assert_int_eq(drained, 1); /* once */
    /* cancelled: not called */
    ck_assert_int_eq(petrel_ws_send_binary(ws, chunk, sizeof(chunk)), 0);
    while (petrel_ws_buffered(ws) < (1u << 20)) {
        ck_assert_int_eq(petrel_ws_send_binary(ws, chunk, sizeof(chunk)), 0);
        ck_turn(0);
    }
    ck_assert_int_eq(petrel_ws_on_drain(ws, 0, on_drained, &drained), 0);
    ck_assert_int_eq(petrel_ws_on_drain(ws, 0, NULL, NULL), 0);
    for (int i = 0; i < 100000 && petrel_ws_buffered(ws) > 0; i++) {
        char tmp[65536];
        while (read(c->fd, tmp, sizeof(tmp)) > 0)
            ;
        ck_turn(0);
    }
    ck_assert_uint_eq(petrel_ws_buffered(ws), 0);
    turns(5);
    ck_assert_int_eq(drained, 1);
    /* closing: refused */
    ck_assert_int_eq(petrel_ws_close(ws, 1000, NULL), 0);
    ck_assert_int_eq(petrel_ws_on_drain(ws, 0, on_drained, &drained), PETREL_ESTATE);
}
END_TEST

/* --ws-send-overflow drop for a connection's own sends: past the limit a
 * send is refused with PETREL_ELIMIT and the connection stays. */
START_TEST(test_send_limit_drop)
{
    srv->cfg.ws_send_limit = 64u << 10;
    srv->cfg.ws_send_overflow_drop = true;
    ck_client_t *c = ws_connect("/plain", NULL);
    petrel_ws_t *ws = last_ws;
    static char chunk[16384];
    int rc = 0, sent = 0;
    for (int i = 0; i < 1000 && rc == 0; i++) {
        rc = petrel_ws_send_binary(ws, chunk, sizeof(chunk));
        sent += rc == 0;
        ck_turn(0);
    }
    ck_assert_int_eq(rc, PETREL_ELIMIT);
    ck_assert_int_eq(nclosed, 0);
    for (int i = 0; i < sent; i++) {
        msg_t m;
        ck_assert_msg(msg_get(c, &m), "message %d of %d", i, sent);
        ck_assert_uint_eq(m.len, sizeof(chunk));
    }
    ck_assert_int_eq(petrel_ws_send_text(ws, "after", 5), 0); /* drained: sends again */
    expect_msg(c, 1, "after", 5);
}
END_TEST

/* A drain callback set when the connection closes never runs. */
START_TEST(test_ws_drain_then_close)
{
    ck_client_t *c = ws_connect("/plain", NULL);
    petrel_ws_t *ws = last_ws;
    static char chunk[65536];
    while (petrel_ws_buffered(ws) < (512u << 10)) {
        ck_assert_int_eq(petrel_ws_send_binary(ws, chunk, sizeof(chunk)), 0);
        ck_turn(0);
    }
    ck_assert_int_eq(petrel_ws_on_drain(ws, 0, on_drained, &drained), 0);
    ck_client_close(c);
    for (int i = 0; i < 1000 && nclosed == 0; i++)
        ck_turn(0);
    ck_assert_int_eq(nclosed, 1);
    turns(5);
    ck_assert_int_eq(drained, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

static TCase *tcase(Suite *s, const char *name, double timeout)
{
    return ck_tcase(s, name, timeout, setup, teardown);
}

static Suite *pubsub_suite(void)
{
    Suite *s = suite_create("pubsub");
    TCase *tc = tcase(s, "topics", 20);
    tcase_add_test(tc, test_topic_names);
    tcase_add_test(tc, test_outside_worker);
    tcase_add_test(tc, test_fanout);
    tcase_add_test(tc, test_publish_from_handlers);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_unsubscribed_when_closed);
    tcase_add_test(tc, test_unsubscribe_from_handler);

    tc = tcase(s, "slow subscribers", 60);
    tcase_add_test(tc, test_slow_subscriber_closed);
    tcase_add_test(tc, test_slow_subscriber_dropped);
    tcase_add_test(tc, test_busy_subscriber_not_idle);

    tc = tcase(s, "permessage-deflate", 20);
    tcase_add_test(tc, test_deflate_shared);

    tc = tcase(s, "workers", 60);
    tcase_add_test(tc, test_other_workers);
    tcase_add_test(tc, test_ring_holders);
    tcase_add_test(tc, test_ring_records);
    tcase_add_test(tc, test_ring_across_processes);

    tc = tcase(s, "memory", 120);
    tcase_add_test(tc, test_zero_malloc_fanout);

    tc = tcase(s, "backpressure", 60);
    tcase_add_test(tc, test_ws_drain);
    tcase_add_test(tc, test_ws_drain_then_close);
    tcase_add_test(tc, test_send_limit_drop);
    return s;
}

int main(void)
{
    return ck_run(pubsub_suite());
}
