/*
 * check_ws.c -- WebSocket (src/protocols/ws.c, modules/wsecho.c) through the
 * in-process loopback harness of check_http1.c: a socketpair whose server end
 * is adopted by the worker loop (petrel__conn_adopt), hand-built client
 * frames written to the other end, the loop turned (petrel__loop_run_once)
 * until the expected frames come back.  No sleeps: only the idle-timeout
 * test lets the loop wait in epoll_wait for its own timer.
 *
 * RFC references: RFC 6455 (the protocol), RFC 3174 (SHA-1 test vectors),
 * RFC 4648 (base64 test vectors), RFC 3629 (UTF-8).
 */
#include "server/server.h"
#include "runtime/log.h"
#include "protocols/ws.h"
#include "runtime/wskey.h"
#include "protocols/proto.h"

#include "check_server.h"
#include "check_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>


/* ------------------------------------------------------------------------ */
/* A test endpoint, /t, that records what happens                           */

static int n_open, n_close, n_msg;
static int last_code;
static char last_reason[128];
static petrel_ws_t *last_ws;
static char last_msg[64];
static size_t last_len;
static int last_binary;
static bool last_nul; /* text arrived NUL-terminated */
static int send_rc_in_close;

static void t_open(petrel_ws_t *ws, petrel_req_t *req)
{
    n_open++;
    last_ws = ws;
    if (petrel_req_query(req, "greet"))
        petrel_ws_send_text(ws, "welcome", 7);
    if (petrel_req_query(req, "refuse"))
        petrel_ws_close(ws, 4001, "not now");
}

static void t_message(petrel_ws_t *ws, int binary, const void *data, size_t len)
{
    n_msg++;
    last_binary = binary;
    last_len = len;
    memcpy(last_msg, data, len < sizeof(last_msg) ? len : sizeof(last_msg));
    last_nul = !binary && ((const char *)data)[len] == '\0';
    if (!binary && len == 8 && memcmp(data, "close-me", 8) == 0) {
        ck_assert_int_eq(petrel_ws_close(ws, 4000, "bye"), 0);
        ck_assert_int_eq(petrel_ws_close(ws, 4000, "bye"), PETREL_ESTATE);
        ck_assert_int_eq(petrel_ws_send_text(ws, "x", 1), PETREL_ESTATE);
        return;
    }
    if (binary)
        petrel_ws_send_binary(ws, data, len);
    else
        petrel_ws_send_text(ws, data, len);
}

static void t_close(petrel_ws_t *ws, int code, const char *reason)
{
    n_close++;
    last_code = code;
    snprintf(last_reason, sizeof(last_reason), "%s", reason);
    send_rc_in_close = petrel_ws_send_text(ws, "late", 4);
    if (ws == last_ws)
        last_ws = NULL;
}

static const char *const protos[] = {"chat", "superchat", NULL};

static int t_origin(petrel_req_t *req, const char *origin, void *data)
{
    (void)req;
    ck_assert_ptr_eq(data, &n_open);
    if (origin && strcmp(origin, "http://evil.example") == 0)
        return 403;
    return 0;
}

static const petrel_ws_handler_t t_handler = {
    .on_open = t_open,
    .on_message = t_message,
    .on_close = t_close,
    .subprotocols = protos,
    .check_origin = t_origin,
};

/* ------------------------------------------------------------------------ */
/* Fixture                                                                  */

static void setup(void)
{
    ck_server_new();
    ck_server_load("wsecho");
    ck_server_load("hello");
    ck_assert_int_eq(petrel_ws_route_add(srv, "/t", &t_handler, &n_open), 0);
    ck_assert_int_eq(petrel_ws_route_add(srv, "/t", &t_handler, NULL), PETREL_ESTATE);
    n_open = n_close = n_msg = 0;
    last_code = 0;
    last_reason[0] = '\0';
    last_ws = NULL;
    send_rc_in_close = 0;
}

#define CLIENT_BUF (3u << 20)

typedef ck_client_t client_t;

static void teardown(void)
{
    ck_server_free();
}

static int turn(int wait_ms)
{
    return ck_turn(wait_ms);
}

static client_t *client_open(void)
{
    return ck_server_client(CLIENT_BUF, true);
}

#define client_pull ck_client_pull
/* No Check call: runs while heap calls are counted. */
#define client_write(c, data, len) ck_client_write(c, data, len, 100000)
/* Turn the loop until the client has `n` unread bytes or the server closed. */
#define client_wait(c, n) ck_client_wait(c, n, 200000)

/* The server side of the newest connection. */
static petrel__conn_t *server_conn(void)
{
    ck_assert(!list_empty(&srv->conns.all));
    return container_of(srv->conns.all.prev, petrel__conn_t, link);
}


/* The server closes: turn until EOF. */
static void expect_eof(client_t *c)
{
    for (int i = 0; i < 10000 && !c->eof; i++) {
        turn(0);
        client_pull(c);
    }
    ck_assert_msg(c->eof, "the server did not close the connection");
    ck_assert_uint_eq(c->len - c->off, 0);
}

/* ------------------------------------------------------------------------ */
/* Frames                                                                   */

static const uint8_t mask_key[4] = {0x37, 0xfa, 0x21, 0x3d};

/* A client frame: `b0` is FIN | RSV | opcode; `len7` forces the 7-bit length
 * field (-1: the shortest encoding of len). */
static size_t frame_build(uint8_t *out, int b0, const void *payload, size_t len, bool masked,
                          int len7)
{
    size_t n = 0;
    out[n++] = (uint8_t)b0;
    uint8_t m = masked ? 0x80 : 0;
    int l7 = len7 >= 0 ? len7 : len < 126 ? (int)len : len < 65536 ? 126 : 127;
    out[n++] = (uint8_t)(m | l7);
    if (l7 == 126) {
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else if (l7 == 127) {
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    if (masked) {
        memcpy(out + n, mask_key, 4);
        n += 4;
    }
    const uint8_t *p = payload;
    for (size_t i = 0; i < len; i++)
        out[n + i] = masked ? p[i] ^ mask_key[i & 3] : p[i];
    return n + len;
}

static uint8_t fbuf[(2u << 20) + 64];

static void send_frame(client_t *c, int b0, const void *payload, size_t len)
{
    size_t n = frame_build(fbuf, b0, payload, len, true, -1);
    ck_assert(client_write(c, fbuf, n));
}

typedef struct frame {
    int b0;
    int op;
    size_t len;
    const uint8_t *data; /* in the client buffer */
} frame_t;

/* Read one server frame (unmasked, as §5.1 wants). */
static bool read_frame(client_t *c, frame_t *f)
{
    if (!client_wait(c, 2))
        return false;
    const uint8_t *p = (const uint8_t *)c->buf + c->off;
    ck_assert_msg(!(p[1] & 0x80), "a server frame is masked");
    size_t hl = 2, l7 = p[1] & 0x7f;
    if (l7 == 126)
        hl += 2;
    else if (l7 == 127)
        hl += 8;
    if (!client_wait(c, hl))
        return false;
    p = (const uint8_t *)c->buf + c->off;
    uint64_t len = l7;
    if (l7 == 126)
        len = (uint64_t)p[2] << 8 | p[3];
    else if (l7 == 127)
        for (int i = 0; i < 8; i++)
            len = (i ? len << 8 : 0) | p[2 + i];
    if (!client_wait(c, hl + len))
        return false;
    p = (const uint8_t *)c->buf + c->off;
    f->b0 = p[0];
    f->op = p[0] & 0x0f;
    f->len = (size_t)len;
    f->data = p + hl;
    c->off += hl + len;
    return true;
}

static void expect_frame(client_t *c, int op, const void *data, size_t len)
{
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "no frame (eof %d)", c->eof);
    ck_assert_int_eq(f.b0 & 0xf0, 0x80); /* FIN, no RSV */
    ck_assert_int_eq(f.op, op);
    ck_assert_uint_eq(f.len, len);
    ck_assert(len == 0 || memcmp(f.data, data, len) == 0);
}

/* A Close frame with `code` (0: no payload), then the end of the connection. */
static void expect_close(client_t *c, int code)
{
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "no close frame (eof %d)", c->eof);
    ck_assert_int_eq(f.op, 8);
    if (code == 0) {
        ck_assert_uint_eq(f.len, 0);
    } else {
        ck_assert_uint_ge(f.len, 2);
        ck_assert_int_eq(f.data[0] << 8 | f.data[1], code);
    }
    expect_eof(c);
}

/* ------------------------------------------------------------------------ */
/* Handshake                                                                */

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="        /* RFC 6455 §1.3 */
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" /* its answer */

static char head[4096];

/* Send `req`, read the response head into `head`; returns the status. */
static int http_exchange(client_t *c, const char *req)
{
    ck_assert(client_write(c, req, strlen(req)));
    for (int i = 0; i < 100000; i++) {
        const char *e = memmem(c->buf + c->off, c->len - c->off, "\r\n\r\n", 4);
        if (e) {
            size_t n = (size_t)(e + 4 - (c->buf + c->off));
            ck_assert_uint_lt(n, sizeof(head));
            memcpy(head, c->buf + c->off, n);
            head[n] = '\0';
            c->off += n;
            return atoi(head + 9);
        }
        if (c->eof)
            break;
        turn(0);
        client_pull(c);
    }
    ck_abort_msg("no response head");
    return 0;
}

static bool head_has(const char *line)
{
    return strcasestr(head, line) != NULL;
}

static void upgrade(client_t *c, const char *path)
{
    char req[1024];
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n",
             path);
    int st = http_exchange(c, req);
    ck_assert_msg(st == 101, "%s", head);
    ck_assert(head_has("\r\nSec-WebSocket-Accept: " ACCEPT "\r\n"));
    ck_assert(head_has("\r\nUpgrade: websocket\r\n"));
    ck_assert(head_has("\r\nConnection: Upgrade\r\n"));
}

static client_t *ws_open(const char *path)
{
    client_t *c = client_open();
    upgrade(c, path);
    return c;
}

START_TEST(test_handshake_rfc_example)
{
    client_t *c = ws_open("/ws");
    ck_assert(!head_has("Sec-WebSocket-Protocol"));
    ck_assert(!head_has("Content-Length"));
    send_frame(c, 0x81, "hi", 2);
    expect_frame(c, 1, "hi", 2);
}
END_TEST

static const struct {
    const char *req;
    int status;
} bad_handshakes[] = {
    /* no Upgrade */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " KEY
     "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* Upgrade to something else */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " KEY
     "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* no Connection: Upgrade */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n"
     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* no key */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* a key of 15 bytes */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* a key that is not base64 */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ!=\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* two keys */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Key: " KEY
     "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* HTTP/1.0 */
    {"GET /ws HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     400},
    /* another version: 426 */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 8\r\n\r\n",
     426},
    /* no version: 426 */
    {"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: " KEY "\r\n\r\n",
     426},
    /* not GET */
    {"POST /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n",
     405},
    /* refused by the origin hook */
    {"GET /t HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Origin: http://evil.example\r\nSec-WebSocket-Key: " KEY
     "\r\nSec-WebSocket-Version: 13\r\n\r\n",
     403},
};

START_TEST(test_handshake_bad)
{
    client_t *c = client_open();
    int st = http_exchange(c, bad_handshakes[_i].req);
    ck_assert_msg(st == bad_handshakes[_i].status, "case %d: got %d: %s", _i, st, head);
    if (st == 426)
        ck_assert(head_has("\r\nSec-WebSocket-Version: 13\r\n"));
    ck_assert_int_eq(n_open, 0);
    /* the server goes on serving */
    client_t *d = ws_open("/ws");
    send_frame(d, 0x82, "ok", 2);
    expect_frame(d, 2, "ok", 2);
}
END_TEST

START_TEST(test_handshake_tokens_any_case)
{
    client_t *c = client_open();
    int st = http_exchange(c, "GET /ws HTTP/1.1\r\nHost: x\r\nupgrade: WebSocket\r\n"
                              "connection: keep-alive, UPGRADE\r\nsec-websocket-key: " KEY
                              "\r\nsec-websocket-version: 13\r\n\r\n");
    ck_assert_int_eq(st, 101);
    ck_assert(head_has("Sec-WebSocket-Accept: " ACCEPT "\r\n"));
}
END_TEST

START_TEST(test_subprotocol)
{
    client_t *c = client_open();
    int st = http_exchange(c, "GET /t HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY
                              "\r\nSec-WebSocket-Protocol: superchat, chat\r\n"
                              "Sec-WebSocket-Version: 13\r\n\r\n");
    ck_assert_int_eq(st, 101);
    /* the server's preference */
    ck_assert(head_has("\r\nSec-WebSocket-Protocol: chat\r\n"));
    ck_assert_ptr_nonnull(last_ws);
    ck_assert_str_eq(petrel_ws_subprotocol(last_ws), "chat");
    ck_assert_ptr_eq(petrel_ws_get_data(last_ws), &n_open);

    client_t *d = client_open();
    st = http_exchange(d, "GET /t HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY
                          "\r\nSec-WebSocket-Protocol: mqtt\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n");
    ck_assert_int_eq(st, 101);
    ck_assert(!head_has("Sec-WebSocket-Protocol"));
    ck_assert_ptr_null(petrel_ws_subprotocol(last_ws));
}
END_TEST

/* Frames sent right behind the handshake, in the same write. */
START_TEST(test_frames_with_handshake)
{
    client_t *c = client_open();
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n");
    size_t fl = frame_build((uint8_t *)req + n, 0x81, "early", 5, true, -1);
    fl += frame_build((uint8_t *)req + n + fl, 0x82, "bird", 4, true, -1);
    ck_assert(client_write(c, req, (size_t)n + fl));
    ck_assert(client_wait(c, 1));
    const char *e = NULL;
    for (int i = 0; i < 1000 && !(e = memmem(c->buf, c->len, "\r\n\r\n", 4)); i++) {
        turn(0);
        client_pull(c);
    }
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(atoi(c->buf + 9), 101);
    c->off = (size_t)(e + 4 - c->buf);
    expect_frame(c, 1, "early", 5);
    expect_frame(c, 2, "bird", 4);
}
END_TEST

START_TEST(test_on_open_sends_and_closes)
{
    client_t *c = ws_open("/t?greet");
    expect_frame(c, 1, "welcome", 7);
    client_t *d = ws_open("/t?greet&refuse");
    expect_frame(d, 1, "welcome", 7);
    frame_t f;
    ck_assert(read_frame(d, &f));
    ck_assert_int_eq(f.op, 8);
    ck_assert_int_eq(f.data[0] << 8 | f.data[1], 4001);
    ck_assert_uint_eq(f.len, 2 + 7);
    ck_assert(memcmp(f.data + 2, "not now", 7) == 0);
    /* messages after our Close are dropped; the client's Close ends it */
    send_frame(d, 0x81, "ignored", 7);
    send_frame(d, 0x88, "\x0f\xa1", 2);
    expect_eof(d);
    ck_assert_int_eq(last_code, 4001);
    ck_assert_int_eq(n_msg, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */

START_TEST(test_echo_text_binary_empty)
{
    client_t *c = ws_open("/ws");
    send_frame(c, 0x81, "Hello", 5);
    expect_frame(c, 1, "Hello", 5);
    send_frame(c, 0x82, "\x00\xff\x01", 3);
    expect_frame(c, 2, "\x00\xff\x01", 3);
    send_frame(c, 0x81, "", 0);
    expect_frame(c, 1, "", 0);
    send_frame(c, 0x82, "", 0);
    expect_frame(c, 2, "", 0);
    /* UTF-8 of every length */
    const char *u = "\x7f \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
    send_frame(c, 0x81, u, strlen(u));
    expect_frame(c, 1, u, strlen(u));
}
END_TEST

START_TEST(test_text_is_nul_terminated)
{
    client_t *c = ws_open("/t");
    send_frame(c, 0x81, "abc", 3);
    expect_frame(c, 1, "abc", 3);
    ck_assert(last_nul);
    ck_assert_int_eq(last_binary, 0);
    send_frame(c, 0x82, "abc", 3);
    expect_frame(c, 2, "abc", 3);
    ck_assert_int_eq(last_binary, 1);
}
END_TEST

static uint8_t big[(1u << 20) + 16];

static void echo_size(client_t *c, int op, size_t n)
{
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(op == 1 ? 'a' + i % 26 : (i * 7) & 0xff);
    send_frame(c, 0x80 | op, big, n);
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "no echo of %zu bytes", n);
    ck_assert_int_eq(f.op, op);
    ck_assert_uint_eq(f.len, n);
    ck_assert(memcmp(f.data, big, n) == 0);
    /* the server used the shortest length encoding */
    const uint8_t *h = f.data - (n < 126 ? 2 : n < 65536 ? 4 : 10);
    ck_assert_int_eq(h[1], n < 126 ? (int)n : n < 65536 ? 126 : 127);
}

START_TEST(test_payload_sizes)
{
    static const size_t sizes[] = {125, 126, 127, 65535, 65536, 65537, 1u << 20};
    client_t *c = ws_open("/ws");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        echo_size(c, 2, sizes[i]);
        echo_size(c, 1, sizes[i]);
    }
    /* a long life does not grow the connection: its arena is empty again */
    petrel_arena_t *a = petrel__ws_arena(server_conn()->proto);
    petrel_arena_stats_t st;
    petrel_arena_stats(a, &st);
    ck_assert_uint_eq(st.chunks, 0);
    ck_assert_uint_eq(st.bytes, 0);
    ck_assert(petrel__arena_is_empty(a));
}
END_TEST

/* A message in byte-sized writes: every split of a header is handled. */
START_TEST(test_byte_by_byte)
{
    client_t *c = ws_open("/ws");
    static const size_t sizes[] = {5, 200, 70000};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizes[k]; i++)
            big[i] = (uint8_t)('A' + i % 26);
        size_t n = frame_build(fbuf, 0x81, big, sizes[k], true, -1);
        size_t step = sizes[k] > 1000 ? 997 : 1;
        for (size_t i = 0; i < n; i += step) {
            ck_assert(client_write(c, fbuf + i, n - i < step ? n - i : step));
            turn(0);
        }
        frame_t f;
        ck_assert(read_frame(c, &f));
        ck_assert_uint_eq(f.len, sizes[k]);
        ck_assert(memcmp(f.data, big, sizes[k]) == 0);
    }
}
END_TEST

/* §5.4: a fragmented message, with control frames between the fragments. */
START_TEST(test_fragments_with_pings)
{
    client_t *c = ws_open("/ws");
    send_frame(c, 0x01, "Hel", 3);
    send_frame(c, 0x89, "p1", 2);
    send_frame(c, 0x00, "lo", 2);
    send_frame(c, 0x89, "", 0);
    send_frame(c, 0x8a, "unsolicited pong", 16);
    send_frame(c, 0x00, "", 0);
    send_frame(c, 0x80, " World", 6);
    expect_frame(c, 10, "p1", 2);
    expect_frame(c, 10, "", 0);
    expect_frame(c, 1, "Hello World", 11);
    /* binary, many fragments */
    send_frame(c, 0x02, "\x01", 1);
    for (int i = 0; i < 100; i++)
        send_frame(c, 0x00, "\x02", 1);
    send_frame(c, 0x80, "\x03", 1);
    frame_t f;
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 2);
    ck_assert_uint_eq(f.len, 102);
    ck_assert_int_eq(f.data[0], 1);
    ck_assert_int_eq(f.data[50], 2);
    ck_assert_int_eq(f.data[101], 3);
}
END_TEST

/* A character split between fragments is fine; a broken one is not. */
START_TEST(test_utf8_across_fragments)
{
    client_t *c = ws_open("/ws");
    send_frame(c, 0x01, "caf\xc3", 4);
    send_frame(c, 0x89, "x", 1);
    send_frame(c, 0x80, "\xa9!", 2);
    expect_frame(c, 10, "x", 1);
    expect_frame(c, 1, "caf\xc3\xa9!", 6);
    send_frame(c, 0x01, "\xf0\x9f", 2);
    send_frame(c, 0x00, "\x98", 1);
    send_frame(c, 0x80, "\x80", 1);
    expect_frame(c, 1, "\xf0\x9f\x98\x80", 4);
    send_frame(c, 0x01, "ok \xe2\x82", 5);
    send_frame(c, 0x80, "x", 1); /* not a continuation byte */
    expect_close(c, 1007);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad input: every MUST of RFC 6455, whatever wslay does                   */

typedef struct bad_case {
    const char *name;
    int code;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"unmasked text frame", 1002},
    {"RSV1 without an extension", 1002},
    {"RSV2", 1002},
    {"RSV3", 1002},
    {"opcode 3", 1002},
    {"opcode 7", 1002},
    {"opcode 0xB", 1002},
    {"opcode 0xF", 1002},
    {"fragmented ping", 1002},
    {"ping of 126 bytes", 1002},
    {"close of 126 bytes", 1002},
    {"continuation without a message", 1002},
    {"text inside a fragmented message", 1002},
    {"binary inside a fragmented message", 1002},
    {"close with a 1-byte payload", 1002},
    {"close code 0", 1002},
    {"close code 999", 1002},
    {"close code 1004", 1002},
    {"close code 1005", 1002},
    {"close code 1006", 1002},
    {"close code 1015", 1002},
    {"close code 1016", 1002},
    {"close code 2999", 1002},
    {"close code 5000", 1002},
    {"close reason not UTF-8", 1007},
    {"text not UTF-8", 1007},
    {"text ending inside a character", 1007},
    {"text with a surrogate", 1007},
    {"text with an overlong form", 1007},
    {"text above U+10FFFF", 1007},
    {"fragmented text ending inside a character (empty last frame)", 1007},
    {"16-bit length under 126", 1002},
    {"64-bit length under 65536", 1002},
    {"64-bit length with its top bit set", 1002},
    {"message over the limit", 1009},
    {"fragmented message over the limit", 1009},
};

static size_t bad_frames(int i, uint8_t *o)
{
    size_t n = 0;
    switch (i) {
    case 0:
        return frame_build(o, 0x81, "hi", 2, false, -1);
    case 1:
        return frame_build(o, 0xC1, "hi", 2, true, -1);
    case 2:
        return frame_build(o, 0xA1, "hi", 2, true, -1);
    case 3:
        return frame_build(o, 0x91, "hi", 2, true, -1);
    case 4:
        return frame_build(o, 0x83, "hi", 2, true, -1);
    case 5:
        return frame_build(o, 0x87, "hi", 2, true, -1);
    case 6:
        return frame_build(o, 0x8B, "hi", 2, true, -1);
    case 7:
        return frame_build(o, 0x8F, "hi", 2, true, -1);
    case 8:
        return frame_build(o, 0x09, "hi", 2, true, -1);
    case 9:
        memset(big, 'p', 126);
        return frame_build(o, 0x89, big, 126, true, -1);
    case 10:
        memset(big, 'p', 126);
        big[0] = 0x03;
        big[1] = 0xe8;
        return frame_build(o, 0x88, big, 126, true, -1);
    case 11:
        return frame_build(o, 0x80, "hi", 2, true, -1);
    case 12:
        n = frame_build(o, 0x01, "a", 1, true, -1);
        return n + frame_build(o + n, 0x81, "b", 1, true, -1);
    case 13:
        n = frame_build(o, 0x02, "a", 1, true, -1);
        return n + frame_build(o + n, 0x02, "b", 1, true, -1);
    case 14:
        return frame_build(o, 0x88, "\x03", 1, true, -1);
    case 15:
        return frame_build(o, 0x88, "\x00\x00", 2, true, -1);
    case 16:
        return frame_build(o, 0x88, "\x03\xe7", 2, true, -1);
    case 17:
        return frame_build(o, 0x88, "\x03\xec", 2, true, -1);
    case 18:
        return frame_build(o, 0x88, "\x03\xed", 2, true, -1);
    case 19:
        return frame_build(o, 0x88, "\x03\xee", 2, true, -1);
    case 20:
        return frame_build(o, 0x88, "\x03\xf7", 2, true, -1);
    case 21:
        return frame_build(o, 0x88, "\x03\xf8", 2, true, -1);
    case 22:
        return frame_build(o, 0x88, "\x0b\xb7", 2, true, -1);
    case 23:
        return frame_build(o, 0x88, "\x13\x88", 2, true, -1);
    case 24:
        return frame_build(o, 0x88, "\x03\xe8\xff\xfe", 4, true, -1);
    case 25:
        return frame_build(o, 0x81, "ab\xff", 3, true, -1);
    case 26:
        return frame_build(o, 0x81, "ab\xe2\x82", 4, true, -1);
    case 27:
        return frame_build(o, 0x81, "\xed\xa0\x80", 3, true, -1);
    case 28:
        return frame_build(o, 0x81, "\xc0\xaf", 2, true, -1);
    case 29:
        return frame_build(o, 0x81, "\xf4\x90\x80\x80", 4, true, -1);
    case 30:
        n = frame_build(o, 0x01, "ab\xe2\x82", 4, true, -1);
        return n + frame_build(o + n, 0x80, "", 0, true, -1);
    case 31:
        return frame_build(o, 0x82, "hi", 2, true, 126);
    case 32:
        return frame_build(o, 0x82, "hi", 2, true, 127);
    case 33: {
        uint8_t *p = o;
        *p++ = 0x82;
        *p++ = 0x80 | 127;
        *p++ = 0x80;
        memset(p, 0, 7);
        p += 7;
        memcpy(p, mask_key, 4);
        return 2 + 8 + 4;
    }
    case 34:
        memset(big, 'x', 1001);
        return frame_build(o, 0x82, big, 1001, true, -1);
    case 35:
        memset(big, 'x', 600);
        n = frame_build(o, 0x01, big, 600, true, -1);
        return n + frame_build(o + n, 0x80, big, 401, true, -1);
    }
    return 0;
}

START_TEST(test_bad_input)
{
    srv->cfg.ws_max_message_size = 1000;
    client_t *c = ws_open("/t");
    size_t n = bad_frames(_i, fbuf);
    ck_assert_uint_gt(n, 0);
    ck_assert(client_write(c, fbuf, n));
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "%s: no close frame", bad_cases[_i].name);
    ck_assert_msg(f.op == 8 && f.len >= 2, "%s: op %d len %zu", bad_cases[_i].name, f.op, f.len);
    int code = f.data[0] << 8 | f.data[1];
    ck_assert_msg(code == bad_cases[_i].code, "%s: close %d, want %d", bad_cases[_i].name, code,
                  bad_cases[_i].code);
    expect_eof(c);
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, bad_cases[_i].code);
    ck_assert_int_eq(send_rc_in_close, PETREL_ESTATE);
    ck_assert_int_eq(n_msg, 0);
    /* the server survives and keeps serving */
    client_t *d = ws_open("/ws");
    send_frame(d, 0x81, "still here", 10);
    expect_frame(d, 1, "still here", 10);
}
END_TEST

/* The same, fed one byte at a time. */
START_TEST(test_bad_input_bytewise)
{
    srv->cfg.ws_max_message_size = 1000;
    client_t *c = ws_open("/ws");
    size_t n = bad_frames(_i, fbuf);
    for (size_t k = 0; k < n && !c->eof; k++) {
        if (write(c->fd, fbuf + k, 1) != 1)
            break;
        turn(0);
        client_pull(c);
    }
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "%s: no close frame", bad_cases[_i].name);
    ck_assert_int_eq(f.op, 8);
    ck_assert_int_eq(f.data[0] << 8 | f.data[1], bad_cases[_i].code);
    expect_eof(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Closing                                                                  */

/* §5.5.1: a Close is answered with the same code, then the server closes
 * the TCP connection first (§7.1.1). */
START_TEST(test_close_echoes_code)
{
    static const int codes[] = {1000, 1001, 1003, 1007, 1011, 1012, 1014, 3000, 4999};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        ck_nclients = 0;
        client_t *c = ws_open("/t");
        uint8_t pl[8] = {(uint8_t)(codes[i] >> 8), (uint8_t)codes[i], 'b', 'y', 'e'};
        send_frame(c, 0x88, pl, 5);
        expect_close(c, codes[i]);
        close(c->fd);
        ck_assert_int_eq(last_code, codes[i]);
        ck_assert_str_eq(last_reason, "bye");
    }
    ck_assert_int_eq(n_close, (int)(sizeof(codes) / sizeof(codes[0])));
}
END_TEST

START_TEST(test_close_without_code)
{
    client_t *c = ws_open("/t");
    send_frame(c, 0x88, "", 0);
    expect_close(c, 0);
    ck_assert_int_eq(last_code, 1005);
    ck_assert_int_eq(n_close, 1);
}
END_TEST

START_TEST(test_server_closes)
{
    client_t *c = ws_open("/t");
    send_frame(c, 0x81, "close-me", 8);
    frame_t f;
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 8);
    ck_assert_int_eq(f.data[0] << 8 | f.data[1], 4000);
    ck_assert_int_eq(n_close, 0); /* waits for the answer */
    send_frame(c, 0x88, "\x0f\xa0", 2);
    expect_eof(c);
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, 4000);
}
END_TEST

START_TEST(test_peer_vanishes)
{
    client_t *c = ws_open("/t");
    send_frame(c, 0x01, "partial", 7);
    turn(0);
    close(c->fd);
    c->fd = -1;
    for (int i = 0; i < 100 && n_close == 0; i++)
        turn(0);
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, 1006);
    ck_assert(list_empty(&srv->conns.all));
}
END_TEST

START_TEST(test_close_api_arguments)
{
    client_t *c = ws_open("/t");
    (void)c;
    petrel_ws_t *ws = last_ws;
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(petrel_ws_close(ws, 1005, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_close(ws, 1006, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_close(ws, 999, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_close(ws, 5000, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_close(ws, 0, "reason without a code"), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_close(ws, 1000, "\xff"), PETREL_EINVAL);
    char longr[200];
    memset(longr, 'r', sizeof(longr));
    longr[124] = '\0';
    ck_assert_int_eq(petrel_ws_close(ws, 1000, longr), PETREL_EINVAL);
    ck_assert_int_eq(petrel_ws_send_text(ws, "\xc3", 1), PETREL_EINVAL);
    longr[123] = '\0';
    ck_assert_int_eq(petrel_ws_close(ws, 1000, longr), 0);
    frame_t f;
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 8);
    ck_assert_uint_eq(f.len, 125);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sending from outside callbacks, backpressure                             */

static void timer_send(void *data)
{
    petrel_ws_t *ws = data;
    petrel_ws_send_text(ws, "tick", 4);
}

START_TEST(test_send_from_outside)
{
    client_t *c = ws_open("/t");
    petrel_ws_t *ws = last_ws;
    /* from the test itself: written at the end of the next loop turn */
    ck_assert_int_eq(petrel_ws_send_text(ws, "one", 3), 0);
    ck_assert_int_eq(petrel_ws_send_binary(ws, "two", 3), 0);
    expect_frame(c, 1, "one", 3);
    expect_frame(c, 2, "two", 3);
    /* from a timer */
    ck_assert_ptr_nonnull(petrel_timer_start(1, timer_send, ws));
    for (int i = 0; i < 1000 && c->len - c->off < 6; i++) {
        turn(5);
        client_pull(c);
    }
    expect_frame(c, 1, "tick", 4);
    /* user data */
    int x;
    petrel_ws_set_data(ws, &x);
    ck_assert_ptr_eq(petrel_ws_get_data(ws), &x);
}
END_TEST

/* A reader that does not read: sends are refused past the limit, and the
 * connection is closed with 1008. */
START_TEST(test_send_limit)
{
    srv->cfg.ws_send_limit = 256u << 10;
    client_t *c = ws_open("/t");
    petrel_ws_t *ws = last_ws;
    memset(big, 'b', 65536);
    int rc = 0, sent = 0;
    for (int i = 0; i < 1000 && rc == 0; i++) {
        rc = petrel_ws_send_binary(ws, big, 65536);
        if (rc == 0)
            sent++;
        turn(0); /* writes what the socket takes */
    }
    ck_assert_int_eq(rc, PETREL_EIO);
    ck_assert_int_lt(sent, 100); /* bounded: socket buffers plus the limit */
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, 1008);
    ck_assert_int_eq(petrel_ws_send_binary(ws, big, 1), PETREL_ESTATE);
    /* the client reads everything, and the Close 1008 at the end */
    for (int i = 0; i < sent; i++) {
        frame_t f;
        ck_assert(read_frame(c, &f));
        ck_assert_int_eq(f.op, 2);
        ck_assert_uint_eq(f.len, 65536);
        if (c->off > (2u << 20)) {
            memmove(c->buf, c->buf + c->off, c->len - c->off);
            c->len -= c->off;
            c->off = 0;
        }
    }
    expect_close(c, 1008);
}
END_TEST

/* An echo client that writes and does not read: the server stops reading
 * (TCP pushes back) instead of queueing echoes without bound. */
START_TEST(test_echo_backpressure)
{
    client_t *c = ws_open("/ws");
    memset(big, 'e', 16384);
    size_t n = frame_build(fbuf, 0x82, big, 16384, true, -1);
    int wrote = 0;
    for (int i = 0; i < 10000; i++) {
        ssize_t w = write(c->fd, fbuf, n);
        if (w < 0)
            break;
        ck_assert_int_eq(w, (ssize_t)n); /* frames are smaller than the socket buffer */
        wrote++;
        turn(0);
    }
    for (int i = 0; i < 10; i++)
        turn(0);
    petrel__conn_t *sc = server_conn();
    ck_assert(sc->flags & PETREL__CONN_PAUSED);
    size_t queued = petrel__out_bytes(sc);
    ck_assert_uint_lt(queued, 256u << 10);
    ck_assert_int_lt(wrote, 10000);
    /* now read: every echo arrives, in order */
    for (int i = 0; i < wrote; i++) {
        frame_t f;
        ck_assert_msg(read_frame(c, &f), "echo %d of %d", i, wrote);
        ck_assert_uint_eq(f.len, 16384);
        if (c->off > (2u << 20)) {
            memmove(c->buf, c->buf + c->off, c->len - c->off);
            c->len -= c->off;
            c->off = 0;
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Timers and shutdown                                                      */

START_TEST(test_idle_ping_then_close)
{
    srv->cfg.ws_idle_timeout_ms = 60;
    client_t *c = ws_open("/t");
    frame_t f;
    for (int i = 0; i < 200 && c->len - c->off < 2; i++) {
        turn(20);
        client_pull(c);
    }
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 9);
    /* answering keeps it open */
    send_frame(c, 0x8a, f.data, f.len);
    for (int i = 0; i < 200 && c->len - c->off < 2; i++) {
        turn(20);
        client_pull(c);
    }
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 9);
    ck_assert_int_eq(n_close, 0);
    /* silence: closed */
    for (int i = 0; i < 200 && !c->eof; i++) {
        turn(20);
        client_pull(c);
    }
    ck_assert(read_frame(c, &f) || true);
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, 1006);
    ck_assert_str_eq(last_reason, "idle timeout");
}
END_TEST

/* Run the loop for `ms` milliseconds of wall time, pulling what the client
 * receives. */
static void run_for(client_t *c, int ms)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (el >= ms || c->eof)
            return;
        turn((int)(ms - el));
        client_pull(c);
    }
}

/* Send `n` bytes of `p` in pieces of `piece` bytes, `gap_ms` apart, while
 * the connection is open; returns the bytes sent. */
static size_t trickle(client_t *c, const uint8_t *p, size_t n, size_t piece, int gap_ms)
{
    size_t sent = 0;
    while (sent < n && !c->eof) {
        size_t k = n - sent < piece ? n - sent : piece;
        ck_assert(client_write(c, p + sent, k));
        sent += k;
        run_for(c, gap_ms);
    }
    return sent;
}

/* RFC 6455 §7.4.1 (1008: a message that violates the server's policy) and
 * §7.1.7 (_Fail the WebSocket Connection_): a message that arrives below the
 * minimum rate (--body-timeout plus 1 s per --body-min-rate bytes, the
 * rule of HTTP/1.1 request bodies) is refused with 1008 and the connection
 * ends -- a fragmented message trickled a frame at a time, one large frame
 * trickled a few bytes at a time, a message that stalls midway -- while a
 * message at the rate is delivered however long it takes. */
START_TEST(test_message_too_slow)
{
    srv->cfg.body_timeout_ms = 100;
    srv->cfg.body_min_rate = 100; /* each 100 bytes earn 1 s more */
    static uint8_t payload[1000];
    memset(payload, 'a', sizeof(payload));
    uint8_t f[64];

    /* 1. at the rate (400 B/s, for 0.5 s): delivered whole */
    client_t *c = ws_open("/t");
    size_t n = frame_build(fbuf, 0x82, payload, 200, true, -1);
    ck_assert_uint_eq(trickle(c, fbuf, n, 20, 50), n);
    expect_frame(c, 2, payload, 200);
    ck_assert_int_eq(n_msg, 1);
    ck_assert_int_eq(n_close, 0);

    /* 2. a fragmented text message, one byte a frame every 60 ms (17 B/s):
     * refused within a few frames */
    size_t fl = frame_build(f, 0x01, "x", 1, true, -1); /* TEXT, not FIN */
    ck_assert(client_write(c, f, fl));
    size_t frames = 0;
    fl = frame_build(f, 0x00, "y", 1, true, -1); /* CONTINUATION, not FIN */
    for (; frames < 40 && !c->eof && c->len - c->off == 0; frames++) {
        ck_assert(client_write(c, f, fl));
        run_for(c, 60);
    }
    ck_assert_msg(frames < 10, "a message trickled for %zu frames", frames);
    expect_close(c, 1008);
    ck_assert_int_eq(n_msg, 1);
    ck_assert_int_eq(n_close, 1);
    ck_assert_int_eq(last_code, 1008);

    /* 3. one frame of 1000 bytes, 2 bytes every 50 ms (40 B/s) */
    c = ws_open("/t");
    n = frame_build(fbuf, 0x82, payload, 1000, true, -1);
    size_t sent = trickle(c, fbuf, n, 2, 50);
    ck_assert_msg(sent < 60, "%zu bytes of a slow frame taken", sent);
    expect_close(c, 1008);
    ck_assert_int_eq(n_msg, 1);
    ck_assert_int_eq(n_close, 2);

    /* 4. a message that stops midway: the timer ends it, not the idle
     * timeout (30 s) */
    c = ws_open("/t");
    n = frame_build(fbuf, 0x82, payload, 1000, true, -1);
    ck_assert(client_write(c, fbuf, 100));
    run_for(c, 3000);
    ck_assert(c->eof || c->len - c->off > 0);
    expect_close(c, 1008);
    ck_assert_int_eq(n_close, 3);
    ck_assert_int_eq(n_msg, 1);
}
END_TEST

/* A reload registers every endpoint again, in the routes of the new
 * generation, and drops the old generation's routes: the endpoints go with
 * them (they used to stay in the master for the life of the process). */
START_TEST(test_endpoints_freed_with_their_routes)
{
#if CK_HEAP_HOOK
    petrel__router_t *keep = srv->router;
    int64_t live0 = ck_heap.live;
    int rc = 0;
    for (int i = 0; i < 50 && rc == 0; i++) {
        srv->router = petrel__router_new();
        rc = srv->router ? petrel_ws_route_add(srv, "/gen", &t_handler, NULL) : PETREL_ENOMEM;
        petrel__router_free(srv->router);
    }
    srv->router = keep;
    int64_t grown = ck_heap.live - live0;
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(grown == 0, "%lld heap blocks left by 50 generations", (long long)grown);
#endif
}
END_TEST

START_TEST(test_drain_sends_1001)
{
    client_t *c = ws_open("/t");
    send_frame(c, 0x81, "x", 1);
    expect_frame(c, 1, "x", 1);
    petrel__conns_drain(&srv->conns, true);
    frame_t f;
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.op, 8);
    ck_assert_int_eq(f.data[0] << 8 | f.data[1], 1001);
    ck_assert_int_eq(srv->conns.n, 1);
    send_frame(c, 0x88, "\x03\xe9", 2);
    expect_eof(c);
    ck_assert_int_eq(last_code, 1001);
    /* the server half-closed first; the client's close ends it */
    close(c->fd);
    c->fd = -1;
    for (int i = 0; i < 100 && srv->conns.n; i++)
        turn(0);
    ck_assert_int_eq(srv->conns.n, 0);
    ck_assert(srv->loop.stop);
}
END_TEST

START_TEST(test_shutdown_calls_on_close)
{
    ws_open("/t");
    ws_open("/t");
    ck_assert_int_eq(n_open, 2);
    petrel__worker_fini(srv);
    ck_started = false;
    ck_assert_int_eq(n_close, 2);
    ck_assert_int_eq(last_code, 1006);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */

/* 10,000 echoes after a warm-up, `batch` frames per write: no heap call, no
 * new pool chunk, nothing left behind.  Up to 16 KiB, a message lives in
 * pool chunks. */
static uint8_t zm_frames[4 * (16384 + 16)];
static char zm_reply[4 * (16384 + 16)];

static void zero_malloc_echo(size_t size, int batch)
{
    client_t *c = ws_open("/ws");
    for (size_t i = 0; i < size; i++)
        big[i] = (uint8_t)('a' + i % 26);
    size_t one = frame_build(zm_frames, 0x81, big, size, true, -1);
    for (int i = 1; i < batch; i++)
        memcpy(zm_frames + (size_t)i * one, zm_frames, one);
    size_t hl = size < 126 ? 2 : 4, want = (size_t)batch * (hl + size);
    int errors = 0;
    uint64_t calls0 = 0, pool0 = 0;
    int64_t live0 = 0;
    for (int round = 0; round < 10000 / batch + 10; round++) {
        if (round == 10) {
            calls0 = ck_heap.calls;
            pool0 = petrel__pool.mallocs;
            live0 = ck_heap.live;
        }
        if (!client_write(c, zm_frames, (size_t)batch * one)) {
            errors++;
            break;
        }
        size_t got = 0;
        for (int idle = 0; got < want && idle < 1000;) {
            turn(0);
            ssize_t n = read(c->fd, zm_reply + got, want - got);
            if (n > 0)
                got += (size_t)n;
            else
                idle++;
        }
        if (got != want || memcmp(zm_reply + hl, big, size) != 0) {
            errors++;
            break;
        }
    }
    uint64_t calls1 = ck_heap.calls, pool1 = petrel__pool.mallocs;
    int64_t live1 = ck_heap.live;
    ck_assert_int_eq(errors, 0);
    ck_assert_msg(pool1 == pool0, "the chunk pool made %llu heap calls",
                  (unsigned long long)(pool1 - pool0));
    if (CK_HEAP_HOOK) {
        ck_assert_msg(calls1 == calls0, "%llu heap calls for 10,000 messages of %zu bytes",
                      (unsigned long long)(calls1 - calls0), size);
        ck_assert_int_eq(live1, live0);
    }
}

START_TEST(test_zero_malloc_echo)
{
    zero_malloc_echo(25, 4);
}
END_TEST

START_TEST(test_zero_malloc_echo_16k)
{
    zero_malloc_echo(10000, 4);
    zero_malloc_echo(16383, 1);
}
END_TEST

/* Heap counters of an idle connection. */
START_TEST(test_idle_memory)
{
    client_t *c = ws_open("/ws");
    send_frame(c, 0x82, big, 100000);
    frame_t f;
    ck_assert(read_frame(c, &f));
    for (int i = 0; i < 5; i++)
        turn(0);
    petrel__conn_t *sc = server_conn();
    ck_assert_ptr_null(sc->rbuf); /* the read buffer went back */
    ck_assert_ptr_null(sc->out.head);
    petrel_arena_t *a = petrel__ws_arena(sc->proto);
    ck_assert(petrel__arena_is_empty(a));
    ck_assert_ptr_null(a->large);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* permessage-deflate (RFC 7692)                                            */

static void upgrade_ext(client_t *c, const char *path, const char *ext)
{
    char req[1024];
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
             path, ext);
    int st = http_exchange(c, req);
    ck_assert_msg(st == 101, "%s", head);
}

static const struct {
    const char *offer;
    const char *answer; /* NULL: declined */
} offers[] = {
    {"Sec-WebSocket-Extensions: permessage-deflate\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
    /* what browsers and python3-websockets offer */
    {"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
    {"Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=10; "
     "client_no_context_takeover\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
     "server_max_window_bits=10"},
    {"Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=\"12\"\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
     "server_max_window_bits=12"},
    /* an offer we cannot honour is declined; the next one is taken */
    {"Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=8, "
     "permessage-deflate\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
    {"Sec-WebSocket-Extensions: x-webkit-deflate-frame\r\n"
     "Sec-WebSocket-Extensions: permessage-deflate\r\n",
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
    {"Sec-WebSocket-Extensions: permessage-deflate; unknown_param\r\n", NULL},
    {"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
     "server_no_context_takeover\r\n",
     NULL},
    {"Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits\r\n", NULL},
    {"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=16\r\n", NULL},
    {"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover=1\r\n", NULL},
    {"Sec-WebSocket-Extensions: foo, bar\r\n", NULL},
};

START_TEST(test_deflate_negotiation)
{
    client_t *c = client_open();
    upgrade_ext(c, "/ws", offers[_i].offer);
    char want[256];
    if (offers[_i].answer) {
        snprintf(want, sizeof(want), "\r\nSec-WebSocket-Extensions: %s\r\n", offers[_i].answer);
        ck_assert_msg(head_has(want), "offer %d: %s", _i, head);
    } else {
        ck_assert_msg(!head_has("Sec-WebSocket-Extensions"), "offer %d: %s", _i, head);
    }
}
END_TEST

/* Compress like a client would (RFC 7692 §7.2.1): raw deflate, sync flush,
 * without the 00 00 ff ff tail. */
static size_t zcompress(const void *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_SYNC_FLUSH), Z_OK);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    ck_assert_uint_ge(len, 4);
    ck_assert(memcmp(out + len - 4, "\x00\x00\xff\xff", 4) == 0);
    return len - 4;
}

static size_t zinflate(const void *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(inflateInit2(&z, -15), Z_OK);
    uint8_t tmp[(1u << 16) + 4];
    ck_assert_uint_le(n, 1u << 16);
    memcpy(tmp, in, n);
    memcpy(tmp + n, "\x00\x00\xff\xff", 4);
    z.next_in = tmp;
    z.avail_in = (uInt)(n + 4);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    ck_assert_msg(rc == Z_OK || rc == Z_STREAM_END, "inflate: %d", rc);
    ck_assert_uint_eq(z.avail_in, 0);
    size_t len = cap - z.avail_out;
    inflateEnd(&z);
    return len;
}

static uint8_t zin[1u << 16], zout[1u << 17];

/* A compressed message (RSV1) from the client is inflated; the echo is
 * compressed; a short one is not. */
START_TEST(test_deflate_echo)
{
    client_t *c = client_open();
    upgrade_ext(c, "/t", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    size_t n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)sprintf((char *)zin + n, "Hello, compressed petrel %d! ", i % 7);
    size_t zl = zcompress(zin, n, zout, sizeof(zout));
    ck_assert_uint_lt(zl, n / 4);
    send_frame(c, 0xC1, zout, zl);
    frame_t f;
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.b0, 0xC1); /* FIN, RSV1, text */
    static uint8_t back[1u << 16];
    ck_assert_uint_eq(zinflate(f.data, f.len, back, sizeof(back)), n);
    ck_assert(memcmp(back, zin, n) == 0);
    ck_assert_int_eq(n_msg, 1);
    ck_assert_uint_eq(last_len, n);
    ck_assert(last_nul);
    /* a fragmented compressed message: RSV1 on its first frame only */
    size_t half = zl / 2;
    send_frame(c, 0x41, zout, half);
    send_frame(c, 0x89, "ping", 4);
    send_frame(c, 0x80, zout + half, zl - half);
    expect_frame(c, 10, "ping", 4);
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.b0, 0xC1);
    ck_assert_uint_eq(zinflate(f.data, f.len, back, sizeof(back)), n);
    /* short messages go out as they are, compressed or not on the way in */
    zl = zcompress("tiny", 4, zout, sizeof(zout));
    send_frame(c, 0xC1, zout, zl);
    expect_frame(c, 1, "tiny", 4);
    send_frame(c, 0x82, "raw", 3);
    expect_frame(c, 2, "raw", 3);
    /* an empty compressed message */
    zl = zcompress("", 0, zout, sizeof(zout));
    send_frame(c, 0xC2, zout, zl);
    expect_frame(c, 2, "", 0);
    /* incompressible data is sent uncompressed */
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < 1000; i++) { /* xorshift32 */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        zin[i] = (uint8_t)(x >> 24);
    }
    zl = zcompress(zin, 1000, zout, sizeof(zout));
    send_frame(c, 0xC2, zout, zl);
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.b0, 0x82);
    ck_assert_uint_eq(f.len, 1000);
    ck_assert(memcmp(f.data, zin, 1000) == 0);
    /* a long message is deflated past its first 16 KiB only when those
     * shrank (ws.c, WS_DEFLATE_PROBE): 48 KiB of text is compressed in the
     * two steps into one stream that inflates back whole ... */
    const size_t longer = 48u << 10;
    for (n = 0; n < longer;)
        n += (size_t)snprintf((char *)zin + n, longer + 1 - n, "line %zu of a long petrel text\n",
                              n);
    n = longer;
    send_frame(c, 0x82, zin, n);
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.b0, 0xC2);
    ck_assert_uint_lt(f.len, n / 4);
    ck_assert_uint_eq(zinflate(f.data, f.len, back, sizeof(back)), n);
    ck_assert(memcmp(back, zin, n) == 0);
    /* ... and the same text behind 16 KiB of random bytes is sent as it
     * is: the probe gave up before deflating the rest */
    for (size_t i = 0; i < 16384; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        zin[i] = (uint8_t)(x >> 24);
    }
    send_frame(c, 0x82, zin, n);
    ck_assert(read_frame(c, &f));
    ck_assert_int_eq(f.b0, 0x82);
    ck_assert_uint_eq(f.len, n);
    ck_assert(memcmp(f.data, zin, n) == 0);
}
END_TEST

static const bad_case_t deflate_bad[] = {
    {"RSV1 on a continuation frame", 1002},    {"RSV1 on a ping", 1002},
    {"RSV2 with permessage-deflate", 1002},    {"data that does not inflate", 1007},
    {"inflated text that is not UTF-8", 1007}, {"inflated message over the limit", 1009},
    {"data after the final block", 1007},
};

START_TEST(test_deflate_bad)
{
    srv->cfg.ws_max_message_size = 100000;
    client_t *c = client_open();
    upgrade_ext(c, "/t", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    size_t zl;
    switch (_i) {
    case 0:
        zl = zcompress("hello hello hello hello", 23, zout, sizeof(zout));
        send_frame(c, 0x41, zout, 2);
        send_frame(c, 0xC0, zout + 2, zl - 2);
        break;
    case 1:
        send_frame(c, 0xC9, "x", 1);
        break;
    case 2:
        send_frame(c, 0xA1, "x", 1);
        break;
    case 3:
        send_frame(c, 0xC2, "\xff\xff\xff\xff", 4);
        break;
    case 4:
        zl = zcompress("ok \xc3\x28 not UTF-8", 15, zout, sizeof(zout));
        send_frame(c, 0xC1, zout, zl);
        break;
    case 5: {
        /* 200,000 zeros compress to a few hundred bytes: a small bomb */
        static uint8_t zeros[200000];
        z_stream z;
        memset(&z, 0, sizeof(z));
        deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        z.next_in = zeros;
        z.avail_in = sizeof(zeros);
        z.next_out = zout;
        z.avail_out = sizeof(zout);
        deflate(&z, Z_SYNC_FLUSH);
        zl = sizeof(zout) - z.avail_out - 4;
        deflateEnd(&z);
        ck_assert_uint_lt(zl, 1000);
        send_frame(c, 0xC2, zout, zl);
        break;
    }
    case 6: {
        /* a complete stream (Z_FINISH), then garbage */
        z_stream z;
        memset(&z, 0, sizeof(z));
        deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        z.next_in = (Bytef *)"final";
        z.avail_in = 5;
        z.next_out = zout;
        z.avail_out = sizeof(zout);
        deflate(&z, Z_FINISH);
        zl = sizeof(zout) - z.avail_out;
        deflateEnd(&z);
        memcpy(zout + zl, "junk", 4);
        send_frame(c, 0xC1, zout, zl + 4);
        break;
    }
    }
    frame_t f;
    ck_assert_msg(read_frame(c, &f), "%s: no close frame", deflate_bad[_i].name);
    ck_assert_int_eq(f.op, 8);
    int code = f.data[0] << 8 | f.data[1];
    ck_assert_msg(code == deflate_bad[_i].code, "%s: close %d, want %d", deflate_bad[_i].name, code,
                  deflate_bad[_i].code);
    expect_eof(c);
    ck_assert_int_eq(n_msg, 0);
}
END_TEST

/* A compressed message that ends with a final block is fine. */
START_TEST(test_deflate_final_block)
{
    client_t *c = client_open();
    upgrade_ext(c, "/ws", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    z_stream z;
    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    z.next_in = (Bytef *)"final block";
    z.avail_in = 11;
    z.next_out = zout;
    z.avail_out = sizeof(zout);
    deflate(&z, Z_FINISH);
    size_t zl = sizeof(zout) - z.avail_out;
    deflateEnd(&z);
    send_frame(c, 0xC1, zout, zl);
    expect_frame(c, 1, "final block", 11);
}
END_TEST

/* 10,000 compressed echoes: zlib's streams are the worker's, made once. */
START_TEST(test_deflate_zero_malloc)
{
    client_t *c = client_open();
    upgrade_ext(c, "/ws", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    size_t n = 0;
    while (n < 3000)
        n += (size_t)sprintf((char *)zin + n, "compress me %zu; ", n % 13);
    size_t zl = zcompress(zin, n, zout, sizeof(zout));
    uint8_t *fr = fbuf;
    size_t fl = frame_build(fr, 0xC1, zout, zl, true, -1);
    uint64_t calls0 = 0, pool0 = 0;
    int errors = 0;
    static char rep[1u << 16];
    for (int i = 0; i < 10010; i++) {
        if (i == 10) {
            calls0 = ck_heap.calls;
            pool0 = petrel__pool.mallocs;
        }
        if (!client_write(c, fr, fl)) {
            errors++;
            break;
        }
        size_t got = 0;
        bool done = false;
        for (int idle = 0; !done && idle < 1000;) {
            turn(0);
            ssize_t r = read(c->fd, rep + got, sizeof(rep) - got);
            if (r > 0)
                got += (size_t)r;
            else
                idle++;
            done = got >= 2 && got >= 2 + (size_t)((uint8_t)rep[1] & 0x7f) &&
                   ((uint8_t)rep[1] & 0x7f) < 126;
        }
        if (!done || (uint8_t)rep[0] != 0xC1) {
            errors++;
            break;
        }
    }
    uint64_t calls1 = ck_heap.calls, pool1 = petrel__pool.mallocs;
    ck_assert_int_eq(errors, 0);
    ck_assert_uint_eq(pool1, pool0);
    if (CK_HEAP_HOOK)
        ck_assert_msg(calls1 == calls0, "%llu heap calls for 10,000 compressed echoes",
                      (unsigned long long)(calls1 - calls0));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* SHA-1, base64, UTF-8                                                     */

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

START_TEST(test_sha1_vectors)
{
    /* RFC 3174 §7.3 */
    static const struct {
        const char *in;
        int repeat;
        const char *out;
    } v[] = {
        {"abc", 1, "a9993e364706816aba3e25717850c26c9cd0d89d"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
        {"a", 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"},
        {"0123456701234567012345670123456701234567012345670123456701234567", 10,
         "dea356a2cddd90c7a7ecedc5ebb563934f460452"},
        {"", 1, "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
    };
    static char buf[1000000];
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t l = strlen(v[i].in), n = 0;
        for (int r = 0; r < v[i].repeat; r++, n += l)
            memcpy(buf + n, v[i].in, l);
        uint8_t d[20];
        char h[41];
        petrel__sha1(buf, n, d);
        hex(d, 20, h);
        ck_assert_str_eq(h, v[i].out);
    }
    /* lengths around the padding boundaries (the length field moves to a
     * second block from 56 bytes on), against Python's hashlib */
    static const struct {
        size_t n;
        const char *out;
    } x[] = {
        {55, "cef734ba81a024479e09eb5a75b6ddae62e6abf1"},
        {56, "901305367c259952f4e7af8323f480d59f81335b"},
        {63, "0ddc4e0cccd9a12850deb5abb0853a4425559fec"},
        {64, "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163"},
        {65, "78c741ddc482e4cdf8c474a0876347a0905b6233"},
        {119, "4300320394f7ee239bcdce7d3b8bcee173a0cd5c"},
        {120, "ceb2821639c4b6dcb10bce0e522ca2e608ce056d"},
        {128, "150fa3fbdc899bd0b8f95a9fb6027f564d953762"},
    };
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++) {
        uint8_t d[20];
        char h[41];
        memset(buf, 'x', x[i].n);
        petrel__sha1(buf, x[i].n, d);
        hex(d, 20, h);
        ck_assert_str_eq(h, x[i].out);
    }
    /* RFC 6455 §1.3 */
    const char *kg = KEY "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t d[20];
    char out[32];
    petrel__sha1(kg, strlen(kg), d);
    petrel__base64_encode(d, 20, out);
    ck_assert_str_eq(out, ACCEPT);
}
END_TEST

START_TEST(test_base64_vectors)
{
    /* RFC 4648 §10 */
    static const char *const v[][2] = {{"", ""},
                                       {"f", "Zg=="},
                                       {"fo", "Zm8="},
                                       {"foo", "Zm9v"},
                                       {"foob", "Zm9vYg=="},
                                       {"fooba", "Zm9vYmE="},
                                       {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[16];
        uint8_t back[16];
        ck_assert_uint_eq(petrel__base64_encode(v[i][0], strlen(v[i][0]), out), strlen(v[i][1]));
        ck_assert_str_eq(out, v[i][1]);
        ssize_t n = petrel__base64_decode(v[i][1], strlen(v[i][1]), back, sizeof(back));
        ck_assert_int_eq(n, (ssize_t)strlen(v[i][0]));
        ck_assert(memcmp(back, v[i][0], (size_t)n) == 0);
    }
    uint8_t b[32];
    ck_assert_int_eq(petrel__base64_decode(KEY, 24, b, sizeof(b)), 16);
    ck_assert_int_eq(petrel__base64_decode("Zg=", 3, b, sizeof(b)), -1);
    ck_assert_int_eq(petrel__base64_decode("Zh==", 4, b, sizeof(b)), -1); /* not canonical */
    ck_assert_int_eq(petrel__base64_decode("Z===", 4, b, sizeof(b)), -1);
    ck_assert_int_eq(petrel__base64_decode("Zg==Zg==", 8, b, sizeof(b)), -1);
    ck_assert_int_eq(petrel__base64_decode("Zm9v", 4, b, 2), -1);
    ck_assert_int_eq(petrel__base64_decode("Zm-v", 4, b, sizeof(b)), -1);
}
END_TEST

START_TEST(test_utf8_validator)
{
    static const struct {
        const char *s;
        bool ok;
    } v[] = {
        {"", true},
        {"plain ascii, long enough for the 8-byte path", true},
        {"\xc2\x80", true},
        {"\xdf\xbf", true},
        {"\xe0\xa0\x80", true},
        {"\xed\x9f\xbf", true},
        {"\xee\x80\x80", true},
        {"\xf0\x90\x80\x80", true},
        {"\xf4\x8f\xbf\xbf", true},
        {"\x80", false},
        {"\xc0\x80", false},
        {"\xc1\xbf", false},
        {"\xe0\x9f\xbf", false},
        {"\xed\xa0\x80", false},
        {"\xed\xbf\xbf", false},
        {"\xf0\x8f\xbf\xbf", false},
        {"\xf4\x90\x80\x80", false},
        {"\xf5\x80\x80\x80", false},
        {"\xff", false},
        {"\xc3", false},
        {"\xe2\x82", false},
        {"abcdefgh\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", true},
        {"abcdefghijklmnop\xc3(", false},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t n = strlen(v[i].s);
        uint32_t st = 0;
        bool ok = petrel__utf8_scan(&st, v[i].s, n) == n && st == 0;
        ck_assert_msg(ok == v[i].ok, "case %zu", i);
        /* the same, one byte at a time */
        st = 0;
        bool ok2 = true;
        for (size_t k = 0; k < n && ok2; k++)
            ok2 = petrel__utf8_scan(&st, v[i].s + k, 1) == 1;
        ok2 = ok2 && st == 0;
        ck_assert_msg(ok2 == v[i].ok, "case %zu bytewise", i);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */

static TCase *tcase(Suite *s, const char *name, double timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *ws_suite(void)
{
    Suite *s = suite_create("ws");
    TCase *tc = tcase(s, "handshake", 10);
    tcase_add_test(tc, test_handshake_rfc_example);
    tcase_add_loop_test(tc, test_handshake_bad, 0,
                        (int)(sizeof(bad_handshakes) / sizeof(bad_handshakes[0])));
    tcase_add_test(tc, test_handshake_tokens_any_case);
    tcase_add_test(tc, test_subprotocol);
    tcase_add_test(tc, test_frames_with_handshake);
    tcase_add_test(tc, test_on_open_sends_and_closes);

    tc = tcase(s, "messages", 30);
    tcase_add_test(tc, test_echo_text_binary_empty);
    tcase_add_test(tc, test_text_is_nul_terminated);
    tcase_add_test(tc, test_payload_sizes);
    tcase_add_test(tc, test_byte_by_byte);
    tcase_add_test(tc, test_fragments_with_pings);
    tcase_add_test(tc, test_utf8_across_fragments);

    int nbad = (int)(sizeof(bad_cases) / sizeof(bad_cases[0]));
    tc = tcase(s, "bad input", 10);
    tcase_add_loop_test(tc, test_bad_input, 0, nbad);
    tcase_add_loop_test(tc, test_bad_input_bytewise, 0, nbad);

    tc = tcase(s, "closing", 10);
    tcase_add_test(tc, test_close_echoes_code);
    tcase_add_test(tc, test_close_without_code);
    tcase_add_test(tc, test_server_closes);
    tcase_add_test(tc, test_peer_vanishes);
    tcase_add_test(tc, test_close_api_arguments);

    tc = tcase(s, "sending", 30);
    tcase_add_test(tc, test_send_from_outside);
    tcase_add_test(tc, test_send_limit);
    tcase_add_test(tc, test_echo_backpressure);

    tc = tcase(s, "timers", 10);
    tcase_add_test(tc, test_idle_ping_then_close);
    tcase_add_test(tc, test_message_too_slow);
    tcase_add_test(tc, test_drain_sends_1001);
    tcase_add_test(tc, test_endpoints_freed_with_their_routes);
    tcase_add_test(tc, test_shutdown_calls_on_close);

    tc = tcase(s, "memory", 60);
    tcase_add_test(tc, test_zero_malloc_echo);
    tcase_add_test(tc, test_zero_malloc_echo_16k);
    tcase_add_test(tc, test_idle_memory);

    tc = tcase(s, "permessage-deflate", 30);
    tcase_add_loop_test(tc, test_deflate_negotiation, 0, (int)(sizeof(offers) / sizeof(offers[0])));
    tcase_add_test(tc, test_deflate_echo);
    tcase_add_loop_test(tc, test_deflate_bad, 0,
                        (int)(sizeof(deflate_bad) / sizeof(deflate_bad[0])));
    tcase_add_test(tc, test_deflate_final_block);
    tcase_add_test(tc, test_deflate_zero_malloc);

    tc = tcase(s, "helpers", 10);
    tcase_add_test(tc, test_sha1_vectors);
    tcase_add_test(tc, test_base64_vectors);
    tcase_add_test(tc, test_utf8_validator);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ws_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
