/*
 * check_http1.c -- HTTP/1.1 (src/protocols/http1.c, src/runtime/conn.c) through an in-process
 * loopback harness.
 *
 * The fixture makes a server with the built-in hello and echo modules and a
 * few test routes, and runs its worker loop in the test process without a
 * listener: a test opens a socketpair, hands one end to the server with
 * petrel__conn_adopt(), writes raw request bytes to the other end and turns
 * the loop (petrel__loop_run_once) until the expected response bytes have
 * been read back.  Reads and writes are non-blocking, the number of loop
 * turns is bounded, and nothing sleeps: only the timeout tests let the loop
 * wait in epoll_wait for its own timers.
 *
 * The zero-malloc proof counts heap calls with the hook of check_util.h
 * (compiled out under AddressSanitizer: the requests still run there, the
 * heap count is skipped).  No Check assertion runs while counting: Check
 * allocates even for an assertion that passes.
 *
 * RFC references: RFC 9112 (HTTP/1.1 message syntax), RFC 9110 (semantics).
 */
#include "server/server.h"
#include "runtime/log.h"
#include "protocols/http1.h"

#include "check_server.h"
#include "check_wait.h"
#include "check_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Test routes                                                              */

/* A streamed body in three writes, with a trailer (RFC 9112 §7.1). */
static int h_stream(petrel_req_t *req, void *data)
{
    (void)data;
    if (petrel_stream_begin(req, 200, "text/plain") < 0 ||
        petrel_stream_write(req, "Hello", 5) < 0 || petrel_stream_write(req, " ", 1) < 0 ||
        petrel_stream_write(req, "World", 5) < 0 ||
        petrel_resp_trailer(req, "X-Checksum", "abc123") < 0)
        return PETREL_ENOMEM;
    return petrel_stream_end(req);
}

/* Starts a stream and leaves it open: the test writes and ends it later. */
static petrel_req_t *held;
static int h_later(petrel_req_t *req, void *data)
{
    (void)data;
    held = req;
    return petrel_stream_begin(req, 200, "text/plain");
}

static int h_404(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 404;
}

static int h_fail(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return PETREL_EINVAL;
}

/* Returns a status it may not send. */
static int h_status42(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 42;
}

/* Starts a streamed response, then returns a status as if it had not. */
static int h_stream_then_404(petrel_req_t *req, void *data)
{
    (void)data;
    if (petrel_stream_begin(req, 200, "text/plain") < 0 || petrel_stream_write(req, "part", 4) < 0)
        return PETREL_ENOMEM;
    return 404;
}

/* What the request looked like to a handler. */
static int h_info(petrel_req_t *req, void *data)
{
    (void)data;
    const char *key = petrel_req_param(req, "key");
    const char *big = petrel_req_header(req, "x-big");
    const char *fold = petrel_req_header(req, "x-fold");
    char *s = petrel_arena_printf(
        req->arena, "method=%s path=%s query=%s authority=%s version=%d key=%s big=%zu fold=%s",
        req->method_name.ptr, req->path.ptr, req->query.len ? req->query.ptr : "",
        req->authority.len ? req->authority.ptr : "", req->version, key ? key : "-",
        big ? strlen(big) : 0, fold ? fold : "-");
    if (s == NULL)
        return PETREL_ENOMEM;
    return petrel_send(req, 200, "text/plain", s, strlen(s));
}

/* A 100 KB body from static storage: sent by reference, not copied. */
static char big_body[100000];
static int h_big(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "application/octet-stream", big_body, sizeof(big_body));
}

/* Request bodies read as they arrive (PETREL_BODY_STREAM): /ssink counts
 * the parts and answers "n=BYTES parts=P len=L" at the end; /spause pauses
 * after its first part (the test resumes it); /searly answers without
 * reading. */
typedef struct sink {
    size_t n;
    unsigned parts;
    int end;
    int pause_first;
} sink_t;
static petrel_req_t *sreq;
static sink_t *ssink;

static void sink_part(petrel_req_t *req, const void *ptr, size_t len, int end, void *data)
{
    sink_t *k = data;
    (void)ptr;
    k->n += len;
    k->parts += len > 0;
    if (end == 0) {
        if (k->pause_first && k->parts == 1)
            petrel_body_pause(req, 1);
        return;
    }
    k->end = end;
    if (end < 0)
        return;
    char *s = petrel_arena_printf(req->arena, "n=%zu parts=%u len=%lld", k->n, k->parts,
                                  (long long)petrel_body_length(req));
    petrel_send(req, 200, "text/plain", s, strlen(s));
}

static int sink_start(petrel_req_t *req, int pause_first)
{
    /* static: the test reads it after the request is gone */
    static sink_t sink;
    sink_t *k = &sink;
    *k = (sink_t){.pause_first = pause_first};
    sreq = req;
    ssink = k;
    if (req->body.len != 0 || petrel_body_read(req, sink_part, k) < 0 ||
        petrel_body_read(req, sink_part, k) != PETREL_EINVAL)
        return 500;
    return PETREL_LATER;
}

static int h_ssink(petrel_req_t *req, void *data)
{
    (void)data;
    return sink_start(req, 0);
}

static int h_spause(petrel_req_t *req, void *data)
{
    (void)data;
    return sink_start(req, 1);
}

static int h_searly(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", "early", 5);
}

static void setup(void)
{
    for (size_t i = 0; i < sizeof(big_body); i++)
        big_body[i] = (char)('a' + i % 26);
    ck_server_new();
    ck_server_load("hello");
    ck_server_load("echo");
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/stream", h_stream, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/later", h_later, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/status404", h_404, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/fail", h_fail, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET | PETREL_POST, "/info", h_info, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/kv/:key", h_info, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/big", h_big, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/status42", h_status42, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/wait", h_wait, NULL), 0);
    wait_setup();
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/stream404", h_stream_then_404, NULL), 0);
    ck_assert_int_eq(
        petrel_route_add(srv, PETREL_POST | PETREL_BODY_STREAM, "/ssink", h_ssink, NULL), 0);
    ck_assert_int_eq(
        petrel_route_add(srv, PETREL_POST | PETREL_BODY_STREAM, "/spause", h_spause, NULL), 0);
    ck_assert_int_eq(
        petrel_route_add(srv, PETREL_POST | PETREL_BODY_STREAM, "/searly", h_searly, NULL), 0);
    held = NULL;
    sreq = NULL;
    ssink = NULL;
}

/* ------------------------------------------------------------------------ */
/* The client side                                                          */

#define CLIENT_BUF (512u << 10)

typedef ck_client_t client_t;

static void teardown(void)
{
    wait_teardown();
    ck_server_free();
}

static int turn(int wait_ms)
{
    return ck_turn(wait_ms);
}

/* A new connection: returns its client end. */
static client_t *client_open(void)
{
    return ck_server_client(CLIENT_BUF, false);
}

#define client_close ck_client_close
#define client_pull ck_client_pull
#define client_write(c, data, len) ck_client_write(c, data, len, 10000)
#define client_wait_eof ck_client_wait_eof

static void client_send(client_t *c, const char *s)
{
    ck_assert_msg(client_write(c, s, strlen(s)), "write: %s", strerror(errno));
}

/* Drop the bytes of the responses parsed so far. */
static void client_compact(client_t *c)
{
    if (c->off) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Responses as the client sees them                                        */

typedef struct resp {
    int status;
    int minor;        /* HTTP/1.x */
    const char *head; /* status line through the empty line, in the client buffer */
    size_t head_len;
    const char *body; /* in the client buffer, or dbody when chunked */
    size_t body_len;
    bool chunked;
    size_t raw_len;      /* bytes of the whole response */
    char trailers[1024]; /* the trailer section of a chunked body, raw */
    size_t trailers_len;
    char dbody[1u << 14];
} resp_t;

static resp_t R[20];

/* The value of the header `name` (first occurrence) into out; returns how
 * many times it occurs. */
static int resp_header(const resp_t *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    int count = 0;
    const char *p = memchr(r->head, '\n', r->head_len);
    const char *end = r->head + r->head_len;
    if (out && outlen)
        out[0] = '\0';
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            break;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (colon && (size_t)(colon - line) == nl && strncasecmp(line, name, nl) == 0) {
            if (count == 0 && out) {
                const char *v = colon + 1, *ve = eol;
                while (v < ve && (*v == ' ' || *v == '\t'))
                    v++;
                while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                    ve--;
                size_t n = (size_t)(ve - v) < outlen - 1 ? (size_t)(ve - v) : outlen - 1;
                memcpy(out, v, n);
                out[n] = '\0';
            }
            count++;
        }
        p = eol;
    }
    return count;
}

static bool has_body(int status, bool head_req)
{
    return !(head_req || status < 200 || status == 204 || status == 304);
}

/*
 * Parse one response from b[0, n): returns its length, 0 when incomplete,
 * -1 when malformed.  `eof`: the peer has closed (ends a close-delimited
 * body, RFC 9112 §6.3 rule 8).
 */
static ssize_t resp_parse(const char *b, size_t n, bool head_req, bool eof, resp_t *r)
{
    const char *e = memmem(b, n, "\r\n\r\n", 4);
    if (e == NULL)
        return n > 65536 ? -1 : 0;
    r->head = b;
    r->head_len = (size_t)(e + 4 - b);
    if (r->head_len < 17 || memcmp(b, "HTTP/1.", 7) != 0 || b[8] != ' ' || b[12] != ' ')
        return -1;
    r->minor = b[7] - '0';
    r->status = 0;
    for (int i = 9; i < 12; i++) {
        if (b[i] < '0' || b[i] > '9')
            return -1;
        r->status = r->status * 10 + (b[i] - '0');
    }
    size_t pos = r->head_len;
    char v[64];
    r->chunked = false;
    r->trailers_len = 0;
    r->trailers[0] = '\0';
    r->body = b + pos;
    r->body_len = 0;
    if (!has_body(r->status, head_req)) {
        r->raw_len = pos;
        return (ssize_t)pos;
    }
    if (resp_header(r, "Transfer-Encoding", v, sizeof(v))) {
        if (strcasecmp(v, "chunked") != 0)
            return -1;
        r->chunked = true;
        size_t dl = 0;
        for (;;) {
            const char *le = memmem(b + pos, n - pos, "\r\n", 2);
            if (le == NULL)
                return 0;
            char *xe;
            unsigned long sz = strtoul(b + pos, &xe, 16);
            if (xe == b + pos || xe != le)
                return -1;
            pos = (size_t)(le + 2 - b);
            if (sz == 0)
                break;
            if (n - pos < sz + 2)
                return 0;
            if (memcmp(b + pos + sz, "\r\n", 2) != 0)
                return -1;
            if (dl + sz > sizeof(r->dbody))
                return -1;
            memcpy(r->dbody + dl, b + pos, sz);
            dl += sz;
            pos += sz + 2;
        }
        /* trailer section: field lines up to an empty line */
        size_t tstart = pos;
        for (;;) {
            const char *le = memmem(b + pos, n - pos, "\r\n", 2);
            if (le == NULL)
                return 0;
            size_t ll = (size_t)(le - (b + pos));
            pos += ll + 2;
            if (ll == 0)
                break;
        }
        r->trailers_len = pos - 2 - tstart;
        if (r->trailers_len >= 2)
            r->trailers_len -= 2; /* the CRLF of the last field line */
        if (r->trailers_len >= sizeof(r->trailers))
            return -1;
        memcpy(r->trailers, b + tstart, r->trailers_len);
        r->trailers[r->trailers_len] = '\0';
        r->body = r->dbody;
        r->body_len = dl;
    } else if (resp_header(r, "Content-Length", v, sizeof(v))) {
        char *xe;
        unsigned long cl = strtoul(v, &xe, 10);
        if (*xe || v[0] == '\0')
            return -1;
        if (n - pos < cl)
            return 0;
        r->body_len = cl;
        pos += cl;
    } else {
        if (!eof)
            return 0; /* close-delimited */
        r->body_len = n - pos;
        pos = n;
    }
    r->raw_len = pos;
    return (ssize_t)pos;
}

/*
 * Turn the loop until `n` responses have arrived on c (into R[0..n)), or the
 * server closed the connection, or nothing happened for many turns.  Returns
 * the number of responses parsed; -1 on a malformed response.
 */
static int client_wait_flags(client_t *c, int n, const bool *head_req, bool head_all)
{
    client_compact(c);
    int got = 0, idle = 0;
    for (;;) {
        while (got < n) {
            bool hr = head_req ? head_req[got] : head_all;
            ssize_t k = resp_parse(c->buf + c->off, c->len - c->off, hr, c->eof, &R[got]);
            if (k < 0)
                return -1;
            if (k == 0)
                break;
            c->off += (size_t)k;
            got++;
        }
        if (got == n || c->eof || idle > 2000)
            return got;
        turn(0);
        if (client_pull(c) == 0 && !c->eof)
            idle++;
        else
            idle = 0;
    }
}

static int client_wait(client_t *c, int n)
{
    return client_wait_flags(c, n, NULL, false);
}

/* Wait for `n` responses for up to `turns` turns of up to `ms` each. */
static int client_wait_flags_ms(client_t *c, int n, int ms, int turns_max)
{
    int got = 0;
    for (int i = 0; i < turns_max && got < n; i++) {
        turn(ms);
        client_pull(c);
        got = client_wait(c, n);
        if (got < 0 || c->eof)
            break;
    }
    return got;
}

/* The body of R[i] as a NUL-terminated string (bodies in tests are text). */
static const char *body_str(int i)
{
    static char s[1u << 16];
    size_t n = R[i].body_len < sizeof(s) - 1 ? R[i].body_len : sizeof(s) - 1;
    memcpy(s, R[i].body, n);
    s[n] = '\0';
    return s;
}

/* RFC 9110 §5.6.7: IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", and close
 * to now. */
static void check_date(const resp_t *r)
{
    char v[64];
    ck_assert_msg(resp_header(r, "Date", v, sizeof(v)) == 1, "no Date (or two)");
    ck_assert_uint_eq(strlen(v), 29);
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    ck_assert_msg(end && *end == '\0', "Date '%s' is not an IMF-fixdate", v);
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    time_t t = timegm(&tm);
    struct tm chk;
    gmtime_r(&t, &chk);
    ck_assert_msg(strncmp(v, days[chk.tm_wday], 3) == 0, "Date '%s': wrong day name", v);
    ck_assert_msg(v[3] == ',' && v[4] == ' ' && v[7] == ' ' && v[11] == ' ' && v[16] == ' ',
                  "Date '%s'", v);
    time_t now = time(NULL);
    ck_assert_msg(t >= now - 5 && t <= now + 1, "Date '%s' is not now", v);
}

static void check_header(const resp_t *r, const char *name, const char *want)
{
    char v[256];
    int n = resp_header(r, name, v, sizeof(v));
    if (want == NULL) {
        ck_assert_msg(n == 0, "unexpected %s: %s", name, v);
        return;
    }
    ck_assert_msg(n == 1, "%s: %d times", name, n);
    ck_assert_msg(strcmp(v, want) == 0, "%s: '%s', want '%s'", name, v, want);
}

/* One request, one response R[0], on connection c. */
static void roundtrip(client_t *c, const char *req)
{
    client_send(c, req);
    int n = client_wait(c, 1);
    ck_assert_msg(n == 1, "no response to '%.40s' (%d, eof %d)", req, n, c->eof);
}

static void check_hello(const resp_t *r)
{
    ck_assert_int_eq(r->status, 200);
    ck_assert_uint_eq(r->body_len, 12);
    ck_assert_mem_eq(r->body, "Hello World!", 12);
}

/* A fresh connection is served normally. */
static void check_new_connection_works(void)
{
    client_t *c = client_open();
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n");
    check_hello(&R[0]);
    client_close(c);
}

#define GET_HELLO "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n"

/* ------------------------------------------------------------------------ */
/* Basics                                                                   */

/* The whole response, byte for byte (RFC 9112 §4 status line, §6 body
 * length; RFC 9110 §6.6.1 Date, §10.2.4 Server). */
START_TEST(test_get_hello)
{
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    resp_t *r = &R[0];
    check_date(r);
    char want[256];
    char date[64];
    resp_header(r, "Date", date, sizeof(date));
    int n = snprintf(want, sizeof(want),
                     "HTTP/1.1 200 OK\r\n"
                     "Server: petrel\r\n"
                     "Date: %s\r\n"
                     "Content-Type: text/plain\r\n"
                     "Content-Length: 12\r\n"
                     "\r\n"
                     "Hello World!",
                     date);
    ck_assert_uint_eq(r->raw_len, (size_t)n);
    ck_assert_mem_eq(r->head, want, (size_t)n);
    /* keep-alive is the default in HTTP/1.1 (RFC 9112 §9.3): no Connection */
    check_header(r, "Connection", NULL);
    ck_assert(!client_wait_eof(c, 5, 0));
    ck_assert_uint_eq(c->len, c->off); /* nothing more */
}
END_TEST

START_TEST(test_keepalive_two_requests)
{
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    roundtrip(c, "GET /info?a=1 HTTP/1.1\r\nHost: example.org:8080\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "method=GET path=/info query=a=1 authority=example.org:8080 "
                                  "version=11 key=- big=0 fold=-");
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    ck_assert(!c->eof);
}
END_TEST

/* RFC 9112 §9.3: an HTTP/1.0 connection closes after the response unless the
 * request said "Connection: keep-alive". */
START_TEST(test_http10_closes)
{
    client_t *c = client_open();
    roundtrip(c, "GET /hello HTTP/1.0\r\n\r\n");
    check_hello(&R[0]);
    ck_assert_int_eq(R[0].minor, 1); /* petrel speaks 1.1 (RFC 9110 §6.2) */
    check_header(&R[0], "Connection", "close");
    ck_assert(client_wait_eof(c, 100, 0));
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

START_TEST(test_http10_keepalive)
{
    client_t *c = client_open();
    roundtrip(c, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    check_hello(&R[0]);
    check_header(&R[0], "Connection", "keep-alive");
    ck_assert(!client_wait_eof(c, 5, 0));
    roundtrip(c, "GET /hello HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    check_hello(&R[0]);
    check_header(&R[0], "Connection", "keep-alive");
    roundtrip(c, "GET /hello HTTP/1.0\r\n\r\n");
    check_header(&R[0], "Connection", "close");
    ck_assert(client_wait_eof(c, 100, 0));
}
END_TEST

/* RFC 9112 §9.6: "Connection: close" -- the response says so, and the
 * connection is closed after it. */
START_TEST(test_connection_close)
{
    client_t *c = client_open();
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    check_hello(&R[0]);
    check_header(&R[0], "Connection", "close");
    ck_assert(client_wait_eof(c, 100, 0));
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

/* A request after "Connection: close" in the same write is not answered. */
START_TEST(test_connection_close_pipelined)
{
    client_t *c = client_open();
    client_send(c, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" GET_HELLO);
    ck_assert_int_eq(client_wait(c, 2), 1);
    check_hello(&R[0]);
    ck_assert(client_wait_eof(c, 100, 0));
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

/* The client half-closes after its request: it still gets the whole
 * response, then the server closes. */
START_TEST(test_half_close)
{
    client_t *c = client_open();
    client_send(c, GET_HELLO GET_HELLO);
    ck_assert_int_eq(shutdown(c->fd, SHUT_WR), 0);
    ck_assert_int_eq(client_wait(c, 2), 2);
    check_hello(&R[0]);
    check_hello(&R[1]);
    ck_assert(client_wait_eof(c, 100, 0));
}
END_TEST

/* RFC 9112 §9.3.2: pipelined requests are answered in order. */
START_TEST(test_pipeline_16)
{
    client_t *c = client_open();
    static char reqs[16 * 64];
    size_t len = 0;
    for (int i = 0; i < 16; i++)
        len += (size_t)snprintf(reqs + len, sizeof(reqs) - len,
                                i % 2 ? GET_HELLO : "GET /kv/%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
    ck_assert(client_write(c, reqs, len));
    ck_assert_int_eq(client_wait(c, 16), 16);
    for (int i = 0; i < 16; i++) {
        ck_assert_int_eq(R[i].status, 200);
        if (i % 2) {
            check_hello(&R[i]);
        } else {
            char want[128];
            snprintf(want, sizeof(want),
                     "method=GET path=/kv/%d query= authority=x version=11 key=%d big=0 fold=-", i,
                     i);
            ck_assert_str_eq(body_str(i), want);
        }
    }
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

/* Large responses (sent by reference) and large request bodies, pipelined:
 * the next request waits until the previous response is written. */
START_TEST(test_pipeline_large)
{
    client_t *c = client_open();
    static char reqs[3 * 11000 + 1000];
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        len += (size_t)snprintf(reqs + len, sizeof(reqs) - len,
                                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n");
        memset(reqs + len, 'A' + i, 10000);
        len += 10000;
        len += (size_t)snprintf(reqs + len, sizeof(reqs) - len,
                                "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    len += (size_t)snprintf(reqs + len, sizeof(reqs) - len, GET_HELLO);
    ck_assert(client_write(c, reqs, len));
    ck_assert_int_eq(client_wait(c, 7), 7);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(R[2 * i].status, 200);
        ck_assert_uint_eq(R[2 * i].body_len, 10000);
        size_t bad = 0;
        for (size_t k = 0; k < 10000; k++)
            bad += R[2 * i].body[k] != 'A' + i;
        ck_assert_uint_eq(bad, 0);
        ck_assert_int_eq(R[2 * i + 1].status, 200);
        ck_assert_uint_eq(R[2 * i + 1].body_len, sizeof(big_body));
        ck_assert(memcmp(R[2 * i + 1].body, big_body, sizeof(big_body)) == 0);
    }
    check_hello(&R[6]);
}
END_TEST

/* RFC 9110 §9.3.2: HEAD gets the headers GET would get, Content-Length
 * included, and no body (the next response follows at once). */
START_TEST(test_head)
{
    client_t *c = client_open();
    client_send(c, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n" GET_HELLO);
    bool head[2] = {true, false};
    ck_assert_int_eq(client_wait_flags(c, 2, head, false), 2);
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Content-Length", "12");
    check_header(&R[0], "Content-Type", "text/plain");
    check_date(&R[0]);
    ck_assert_uint_eq(R[0].body_len, 0);
    check_hello(&R[1]);
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

/* RFC 9110 §15.5.5: 404; a handler's status return gets a default body. */
START_TEST(test_404)
{
    client_t *c = client_open();
    roundtrip(c, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 404);
    ck_assert_str_eq(body_str(0), "404 Not Found\n");
    check_date(&R[0]);
    roundtrip(c, "GET /status404 HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 404);
    ck_assert_str_eq(body_str(0), "404 Not Found\n");
    client_send(c, "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n" GET_HELLO);
    bool head[2] = {true, false};
    ck_assert_int_eq(client_wait_flags(c, 2, head, false), 2);
    ck_assert_int_eq(R[0].status, 404);
    check_header(&R[0], "Content-Length", "14");
    check_hello(&R[1]); /* so the 404 to HEAD had no body */
}
END_TEST

/* RFC 9110 §15.5.6: 405 with Allow; the connection stays open. */
START_TEST(test_405_allow)
{
    client_t *c = client_open();
    roundtrip(c, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 405);
    check_header(&R[0], "Allow", "GET, HEAD");
    ck_assert_str_eq(body_str(0), "405 Method Not Allowed\n");
    check_date(&R[0]);
    roundtrip(c, "DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 405);
    check_header(&R[0], "Allow", "POST");
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* A handler that fails (negative return) gets the client a 500. */
START_TEST(test_handler_error_500)
{
    client_t *c = client_open();
    roundtrip(c, "GET /fail HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 500);
    ck_assert_str_eq(body_str(0), "500 Internal Server Error\n");
    check_date(&R[0]);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* The error log (stderr) of what runs between log_capture() and
 * log_captured(), at level info. */
static int log_saved = -1;
static FILE *log_file;

static void log_capture(void)
{
    fflush(stderr);
    log_file = tmpfile();
    ck_assert_ptr_nonnull(log_file);
    log_saved = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fileno(log_file), STDERR_FILENO), 0);
    petrel__log_level = PETREL_LOG_INFO;
}

/* The lines captured, NUL-terminated, in `buf`; returns their number. */
static int log_captured(char *buf, size_t cap)
{
    petrel__log_level = -1;
    dup2(log_saved, STDERR_FILENO);
    close(log_saved);
    rewind(log_file);
    size_t n = fread(buf, 1, cap - 1, log_file);
    buf[n] = '\0';
    fclose(log_file);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    return lines;
}

/* A handler returning what is not a status it may send (42) is a handler
 * error: 500, and one log line that says so. */
START_TEST(test_handler_invalid_status)
{
    client_t *c = client_open();
    log_capture();
    roundtrip(c, "GET /status42 HTTP/1.1\r\nHost: x\r\n\r\n");
    char log[4096];
    int lines = log_captured(log, sizeof(log));
    ck_assert_int_eq(R[0].status, 500);
    ck_assert_msg(lines == 1, "%d log lines: %s", lines, log);
    ck_assert_msg(strstr(log, "returned 42") && strstr(log, "not a status"), "log: %s", log);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* A handler that started a streamed response and then returns a status:
 * the response is ended as it is, and the handler error is logged. */
START_TEST(test_handler_status_after_stream)
{
    client_t *c = client_open();
    log_capture();
    roundtrip(c, "GET /stream404 HTTP/1.1\r\nHost: x\r\n\r\n");
    char log[4096];
    int lines = log_captured(log, sizeof(log));
    ck_assert_int_eq(R[0].status, 200);
    ck_assert(R[0].chunked);
    ck_assert_str_eq(body_str(0), "part");
    ck_assert_msg(lines == 1, "%d log lines: %s", lines, log);
    ck_assert_msg(strstr(log, "returned 404 after starting its response"), "log: %s", log);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Handlers that wait (petrel.h, "Waiting")                                 */

static void turns(int n)
{
    for (int i = 0; i < n; i++)
        turn(0);
}

/* Pipelined requests whose handlers answer out of order: the responses
 * still go out in request order (RFC 9112 §9.3.2), and the request after a
 * waiting one is read and answered meanwhile (held until its turn). */
START_TEST(test_wait_pipelined_order)
{
    client_t *c = client_open();
    client_send(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n" GET_HELLO
                   "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    turns(5);
    ck_assert_int_eq(nwait_sent, 2); /* both dispatched, the /hello answered (held) */
    client_pull(c);
    ck_assert_uint_eq(c->len, 0);
    backend_answer(1); /* the last one first */
    turns(5);
    client_pull(c);
    ck_assert_uint_eq(c->len, 0); /* still nothing: the first one waits */
    backend_answer(0);
    ck_assert_int_eq(client_wait(c, 3), 3);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "reply 0");
    check_hello(&R[1]);
    ck_assert_str_eq(body_str(2), "reply 1");
    ck_assert_int_eq(aborts, 0);
    /* the connection goes on */
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    petrel__http1_stats_t st;
    petrel__http1_stats(&st);
    ck_assert_uint_eq(st.slots, 0);
}
END_TEST

/* The client goes away while its request waits: the abort callback runs,
 * the late answer returns PETREL_EIO and lets go of the request (nothing
 * leaks, nothing is written anywhere). */
START_TEST(test_wait_abort_on_close)
{
    client_t *c = client_open();
    client_send(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    turns(3);
    ck_assert_int_eq(nwait_sent, 1);
    client_close(c);
    turns(3);
    ck_assert_int_eq(aborts, 1);
    ck_assert_uint_eq(srv->conns.n, 0);
    petrel__http1_stats_t st;
    petrel__http1_stats(&st);
    ck_assert_uint_eq(st.slots, 1); /* held for its handler */
    backend_answer(0);
    turns(3);
    ck_assert_int_eq(late_rc, PETREL_EIO);
    petrel__http1_stats(&st);
    ck_assert_uint_eq(st.slots, 0);
    check_new_connection_works();
}
END_TEST

/* --handler-timeout: 504 (RFC 9110 §15.6.5) and the abort callback; the
 * connection goes on; the late answer returns PETREL_EIO. */
START_TEST(test_wait_timeout_504)
{
    srv->cfg.handler_timeout_ms = 30;
    client_t *c = client_open();
    client_send(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(client_wait_flags_ms(c, 1, 10, 100), 1);
    ck_assert_int_eq(R[0].status, 504);
    ck_assert_int_eq(aborts, 1);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    backend_answer(0);
    turns(3);
    ck_assert_int_eq(late_rc, PETREL_EIO);
    petrel__http1_stats_t st;
    petrel__http1_stats(&st);
    ck_assert_uint_eq(st.slots, 0);
}
END_TEST

/* `n` waiting requests one after the other on `c`, each answered by the
 * backend; returns the number that went wrong.  No Check call (heap
 * counting). */
static int wait_rounds(client_t *c, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        nwait_sent = 0;
        static const char wreq[] = "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n";
        bad += !client_write(c, wreq, sizeof(wreq) - 1);
        turns(2);
        unsigned char id = 0, junk[8];
        while (read(be_fd[1], junk, sizeof(junk)) > 0)
            ;
        bad += write(be_fd[1], &id, 1) != 1;
        for (int t = 0;
             t < 50 && (c->len - c->off < 20 || memcmp(c->buf + c->len - 7, "reply 0", 7)); t++) {
            turn(0);
            client_pull(c);
        }
        bad += c->len < 7 || memcmp(c->buf + c->len - 7, "reply 0", 7) != 0;
        c->off = c->len = 0;
    }
    return bad;
}

/* A graceful shutdown waits for a waiting request: it is answered (with
 * Connection: close), then the connection closes. */
START_TEST(test_wait_drain)
{
    client_t *c = client_open();
    client_t *idle = client_open();
    roundtrip(idle, GET_HELLO);
    client_send(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    turns(3);
    ck_assert_int_eq(nwait_sent, 1);
    petrel__conns_drain(&srv->conns, true);
    turns(3);
    ck_assert_msg(ck_client_wait_eof(idle, 20, 0), "the idle connection stays");
    ck_assert(!c->eof);
    ck_assert_uint_eq(srv->conns.n, 1);
    backend_answer(0);
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_str_eq(body_str(0), "reply 0");
    check_header(&R[0], "Connection", "close");
    ck_assert_msg(client_wait_eof(c, 50, 0), "not closed after the answer");
    ck_assert_int_eq(aborts, 0);
}
END_TEST

/* A request that waits makes no heap call in petrel after warm-up, and its
 * slot and chunks go back. */
START_TEST(test_wait_zero_malloc)
{
    client_t *c = client_open();
    client_send(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"); /* the backend's watch */
    turns(2);
    backend_answer(0);
    ck_assert_int_eq(client_wait(c, 1), 1);
    c->off = c->len = 0;
    ck_assert_int_eq(wait_rounds(c, 20), 0); /* warm-up */
    uint64_t calls0 = ck_heap.calls, pool0 = petrel__pool.mallocs;
    size_t live0 = petrel__pool.live;
    int bad = wait_rounds(c, 200);
    uint64_t calls1 = ck_heap.calls, pool1 = petrel__pool.mallocs;
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(pool1, pool0);
    ck_assert_uint_eq(petrel__pool.live, live0);
    if (CK_HEAP_HOOK)
        ck_assert_msg(calls1 == calls0, "%llu heap calls for 200 waiting requests",
                      (unsigned long long)(calls1 - calls0));
}
END_TEST

/* RFC 9110 §9.3.7: OPTIONS * asks about the server. */
START_TEST(test_options_asterisk)
{
    client_t *c = client_open();
    roundtrip(c, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 204);
    check_header(&R[0], "Allow", "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS");
    check_header(&R[0], "Content-Length", NULL);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* RFC 9112 §2.2: empty lines before a request line are ignored. */
START_TEST(test_leading_crlf)
{
    client_t *c = client_open();
    roundtrip(c, "\r\n\r\n" GET_HELLO);
    check_hello(&R[0]);
    roundtrip(c, "\r\n" GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Targets and paths                                                        */

/* RFC 9112 §3.2.2: absolute-form is routed like origin-form, and its
 * authority is the request's. */
START_TEST(test_absolute_form)
{
    client_t *c = client_open();
    roundtrip(c, "GET http://example.com/hello HTTP/1.1\r\nHost: example.com\r\n\r\n");
    check_hello(&R[0]);
    roundtrip(c, "GET http://example.com:8080/info?q=1 HTTP/1.1\r\nHost: other\r\n\r\n");
    ck_assert_str_eq(body_str(0), "method=GET path=/info query=q=1 authority=example.com:8080 "
                                  "version=11 key=- big=0 fold=-");
    roundtrip(c, "GET HTTP://example.com/x/../hello HTTP/1.1\r\nHost: example.com\r\n\r\n");
    check_hello(&R[0]);
}
END_TEST

/* RFC 9112 §3.2: a client sends Host even with absolute-form, and a server
 * answers 400 to an HTTP/1.1 request without one. */
START_TEST(test_absolute_form_needs_host)
{
    client_t *c = client_open();
    roundtrip(c, "GET http://example.com/hello HTTP/1.1\r\n\r\n");
    ck_assert_int_eq(R[0].status, 400);
    check_header(&R[0], "Connection", "close");
    ck_assert(client_wait_eof(c, 100, 0));
}
END_TEST

/* Dot-segments and encodings are resolved before routing (RFC 3986
 * §5.2.4, §6.2.2); climbing above the root is refused. */
START_TEST(test_path_normalisation)
{
    client_t *c = client_open();
    static const char *const ok[] = {"/x/../hello",    "/./hello",   "//hello",
                                     "/%68ello",       "/hello?x=1", "/a/b/../../hello",
                                     "/x/%2e%2e/hello"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char req[128];
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", ok[i]);
        roundtrip(c, req);
        ck_assert_msg(R[0].status == 200, "%s: %d", ok[i], R[0].status);
        check_hello(&R[0]);
    }
    roundtrip(c, "GET /../hello HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 400);
    ck_assert(client_wait_eof(c, 100, 0));
    check_new_connection_works();
}
END_TEST

/* Path parameters reach the handler percent-decoded. */
START_TEST(test_param_decoded)
{
    client_t *c = client_open();
    roundtrip(c, "GET /kv/a%20b%2Bc HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "method=GET path=/kv/a b+c query= authority=x version=11 "
                                  "key=a b+c big=0 fold=-");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Request bodies                                                           */

/* RFC 9112 §6.2: a body of Content-Length bytes. */
START_TEST(test_echo_content_length)
{
    client_t *c = client_open();
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 13\r\n\r\n{\"a\": \"b c\"}\n");
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Content-Type", "application/json");
    ck_assert_str_eq(body_str(0), "{\"a\": \"b c\"}\n");
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Content-Type", "application/octet-stream");
    check_header(&R[0], "Content-Length", "0");
    ck_assert_uint_eq(R[0].body_len, 0);
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* RFC 9112 §7.1: a chunked body arriving in pieces, one of them cut in the
 * middle of a chunk-size line, with a request trailer (ignored). */
START_TEST(test_echo_chunked_split)
{
    client_t *c = client_open();
    static const char *const parts[] = {
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHel",
        "lo\r\n1", /* "10" split after its first digit */
        "0\r\n0123456789ABCDEF\r\n",
        "3;ext=1\r\n", /* a chunk extension (§7.1.1), ignored */
        "xyz\r\n0\r\n",
        "X-Trailer: t\r\n",
        "\r\n",
    };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        client_send(c, parts[i]);
        for (int k = 0; k < 3; k++)
            turn(0);
        client_pull(c);
        if (i + 1 < sizeof(parts) / sizeof(parts[0]))
            ck_assert_msg(c->len == 0, "a response before the body was complete");
    }
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "Hello0123456789ABCDEFxyz");
    check_header(&R[0], "Content-Length", "24");
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* Bodies larger than the read buffer, both framings. */
START_TEST(test_echo_large)
{
    client_t *c = client_open();
    static char req[300000];
    size_t len = (size_t)snprintf(
        req, sizeof(req), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    for (int i = 0; i < 100000; i++)
        req[len++] = (char)('0' + i % 10);
    ck_assert(client_write(c, req, len));
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_uint_eq(R[0].body_len, 100000);
    size_t bad = 0;
    for (int i = 0; i < 100000; i++)
        bad += R[0].body[i] != '0' + i % 10;
    ck_assert_uint_eq(bad, 0);

    len = (size_t)snprintf(req, sizeof(req),
                           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int k = 0; k < 100; k++) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, "3e8\r\n");
        for (int i = 0; i < 1000; i++)
            req[len++] = (char)('a' + (k + i) % 26);
        memcpy(req + len, "\r\n", 2);
        len += 2;
    }
    len += (size_t)snprintf(req + len, sizeof(req) - len, "0\r\n\r\n");
    ck_assert(client_write(c, req, len));
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_uint_eq(R[0].body_len, 100000);
    for (int k = 0; k < 100; k++)
        for (int i = 0; i < 1000; i++)
            bad += R[0].body[k * 1000 + i] != 'a' + (k + i) % 26;
    ck_assert_uint_eq(bad, 0);
}
END_TEST

/* RFC 9110 §10.1.1: "Expect: 100-continue" on HTTP/1.1 gets an interim 100
 * before the client sends the body. */
START_TEST(test_expect_continue)
{
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                   "Content-Length: 5\r\n\r\n");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 100);
    ck_assert_uint_eq(R[0].raw_len, strlen("HTTP/1.1 100 Continue\r\n\r\n"));
    ck_assert_mem_eq(R[0].head, "HTTP/1.1 100 Continue\r\n\r\n", R[0].raw_len);
    roundtrip(c, "hello");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
    /* the next request on the connection has no 100 unless it asks */
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "ok");
    /* with the body already sent, a 100 may come or not; the 200 comes */
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\n"
                   "Content-Length: 3\r\n\r\nabc");
    int n = client_wait(c, 2);
    ck_assert_int_ge(n, 1);
    int last = R[0].status == 100 ? 1 : 0;
    if (last == 1)
        ck_assert_int_eq(n, 2);
    ck_assert_int_eq(R[last].status, 200);
    ck_assert_str_eq(body_str(last), "abc");
}
END_TEST

/* RFC 9110 §10.1.1: never a 100 to an HTTP/1.0 client. */
START_TEST(test_expect_continue_http10)
{
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    for (int i = 0; i < 20; i++)
        turn(0);
    client_pull(c);
    ck_assert_uint_eq(c->len, 0);
    roundtrip(c, "hello");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
}
END_TEST

/* RFC 9110 §10.1.1: an expectation other than 100-continue gets 417. */
START_TEST(test_expect_unknown)
{
    client_t *c = client_open();
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: something\r\n"
                 "Content-Length: 5\r\n\r\nhello");
    ck_assert_int_eq(R[0].status, 417);
    check_date(&R[0]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad requests: the status, Date, "Connection: close", then the close; a new
 * connection is served normally.                                           */

typedef struct bad {
    const char *why;
    const char *req;
    int status, status2; /* status2: another acceptable one, or 0 */
} bad_t;

static const bad_t bad_requests[] = {
    /* RFC 9112 §3: request-line = method SP request-target SP HTTP-version */
    {"malformed request line", "GARBAGE\r\n\r\n", 400, 0},
    {"extra word", "GET /hello HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400, 0},
    /* an HTTP/0.9 request line: a version petrel does not speak, or garbage */
    {"no version", "GET /hello\r\nHost: x\r\n\r\n", 400, 505},
    {"lower-case version", "GET /hello http/1.1\r\nHost: x\r\n\r\n", 400, 0},
    /* RFC 9110 §15.6.6: 505 is for a major version petrel does not speak;
     * a version that is not HTTP-version syntax is a bad request line */
    {"HTTP/2.0", "GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 505, 400},
    {"HTTP/3.1", "GET /hello HTTP/3.1\r\nHost: x\r\n\r\n", 505, 400},
    {"HTTP/1.x", "GET /hello HTTP/1.x\r\nHost: x\r\n\r\n", 400, 505},
    {"HTTP/11", "GET /hello HTTP/11\r\nHost: x\r\n\r\n", 400, 505},
    /* RFC 9112 §6.1: Content-Length with Transfer-Encoding is an attack */
    {"CL and TE",
     "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400, 0},
    {"TE and CL",
     "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     "Content-Length: 5\r\n\r\n0\r\n\r\n",
     400, 0},
    /* RFC 9112 §6.3 rule 5: differing Content-Length values */
    {"two Content-Lengths",
     "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     "Content-Length: 6\r\n\r\nhello!",
     400, 0},
    {"Content-Length list",
     "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n"
     "hello!",
     400, 0},
    {"Content-Length not a number",
     "POST /echo HTTP/1.1\r\nHost: x\r\n"
     "Content-Length: abc\r\n\r\n",
     400, 0},
    {"negative Content-Length",
     "POST /echo HTTP/1.1\r\nHost: x\r\n"
     "Content-Length: -1\r\n\r\n",
     400, 0},
    /* RFC 9112 §3.2: exactly one valid Host in HTTP/1.1 */
    {"missing Host", "GET /hello HTTP/1.1\r\n\r\n", 400, 0},
    {"two Hosts", "GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, 0},
    {"two equal Hosts", "GET /hello HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, 0},
    {"Host with a space", "GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n", 400, 0},
    {"Host with a slash", "GET /hello HTTP/1.1\r\nHost: x/y\r\n\r\n", 400, 0},
    {"Host with userinfo", "GET /hello HTTP/1.1\r\nHost: u@x\r\n\r\n", 400, 0},
    {"Host with a bad port", "GET /hello HTTP/1.1\r\nHost: x:8a\r\n\r\n", 400, 0},
    {"empty Host", "GET /hello HTTP/1.1\r\nHost:\r\n\r\n", 400, 0},
    /* RFC 9112 §6.1: a coding petrel does not implement -> 501 (SHOULD);
     * RFC 9112 §6.3 rule 4: chunked not the final coding -> 400 (MUST), and
     * §6.1: chunked applied twice is not allowed either */
    {"TE gzip, chunked",
     "POST /echo HTTP/1.1\r\nHost: x\r\n"
     "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
     501, 0},
    {"TE chunked, gzip",
     "POST /echo HTTP/1.1\r\nHost: x\r\n"
     "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
     400, 0},
    {"TE chunked, chunked",
     "POST /echo HTTP/1.1\r\nHost: x\r\n"
     "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
     400, 0},
    {"TE gzip", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, 0},
    /* RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request is faulty */
    {"TE in HTTP/1.0", "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
     0},
    /* RFC 9110 §9.1: a method we do not implement -> 501 */
    {"unknown method", "FOO /x HTTP/1.1\r\nHost: x\r\n\r\n", 501, 0},
    {"unknown method like GET", "GETX /hello HTTP/1.1\r\nHost: x\r\n\r\n", 501, 0},
    {"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501, 400},
    {"method not a token", "G(T /hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"NUL in the method", "GE\0T /hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    /* RFC 9112 §3: an unknown method on a line that is not a request line
     * (an invalid connection preface) is a malformed request: 400 */
    {"invalid preface", "INVALID CONNECTION PREFACE\r\n\r\n", 400, 0},
    {"unknown method, no version", "FOO /x\r\nHost: x\r\n\r\n", 400, 0},
    {"unknown method, two spaces", "FOO  /x HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    /* RFC 9112 §2.2: a bare CR is not a line ending; §2.2: whitespace
     * between the start line and the first field line */
    {"bare CR", "GET /hello HTTP/1.1\rHost: x\r\n\r\n", 400, 0},
    {"space before the first field", "GET /hello HTTP/1.1\r\n Host: x\r\n\r\n", 400, 0},
    /* RFC 9110 §5.1: a field name is a token, one character at least */
    {"empty field name first", "GET /hello HTTP/1.1\r\n: v\r\nHost: x\r\n\r\n", 400, 0},
    {"empty field name later", "GET /hello HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", 400, 0},
    {"empty field name and value", "GET /hello HTTP/1.1\r\nHost: x\r\n:\r\n\r\n", 400, 0},
    /* RFC 9112 §3.2 request targets */
    {"above the root", "GET /../hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"encoded above the root", "GET /%2e%2e/hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"bad escape", "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"short escape", "GET /a%2 HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"encoded NUL", "GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"asterisk with GET", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"not a URI", "GET hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"ftp URI", "GET ftp://x/hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    {"absolute-form, userinfo", "GET http://u@x/hello HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0},
    /* RFC 9112 §5: field syntax */
    {"no colon", "GET /hello HTTP/1.1\r\nHost: x\r\nFoo\r\n\r\n", 400, 0},
    {"space in a name", "GET /hello HTTP/1.1\r\nHost: x\r\nFoo Bar: 1\r\n\r\n", 400, 0},
    {"space before colon", "GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400, 0},
    {"NUL in a value", "GET /hello HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", 400, 0},
    /* RFC 9112 §7.1: chunk-size is hex */
    {"bad chunk size",
     "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     "zz\r\nhello\r\n0\r\n\r\n",
     400, 0},
    {"chunk without CRLF",
     "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     "\r\n5\r\nhelloXX0\r\n\r\n",
     400, 0},
};

/* The length of a bad request: up to the end of the literal (the "NUL in" ones hold a NUL). */
static size_t bad_len(const bad_t *b)
{
    if (strncmp(b->why, "NUL in ", 7) == 0)
        return strlen(b->req) + 1 + strlen(b->req + strlen(b->req) + 1);
    return strlen(b->req);
}

static void check_error_response(client_t *c, const char *why, int status, int status2)
{
    int n = client_wait(c, 1);
    ck_assert_msg(n == 1, "%s: no response (eof %d)", why, c->eof);
    resp_t *r = &R[0];
    ck_assert_msg(r->status == status || (status2 && r->status == status2),
                  "%s: status %d, want %d", why, r->status, status);
    check_date(r);
    check_header(r, "Connection", "close");
    char body[64];
    snprintf(body, sizeof(body), "%d %s\n", r->status, petrel_status_reason(r->status));
    ck_assert_msg(strcmp(body_str(0), body) == 0, "%s: body '%s'", why, body_str(0));
    ck_assert_msg(client_wait_eof(c, 100, 0), "%s: the connection stays open", why);
    ck_assert_msg(c->len == c->off, "%s: bytes after the error response", why);
}

START_TEST(test_bad_request)
{
    const bad_t *b = &bad_requests[_i];
    client_t *c = client_open();
    ck_assert(client_write(c, b->req, bad_len(b)));
    check_error_response(c, b->why, b->status, b->status2);
    check_new_connection_works();
}
END_TEST

/* The same bad requests after a good one on a kept-alive connection: the
 * good one is answered, then the error. */
START_TEST(test_bad_request_after_good)
{
    const bad_t *b = &bad_requests[_i];
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    ck_assert(client_write(c, b->req, bad_len(b)));
    check_error_response(c, b->why, b->status, b->status2);
}
END_TEST

/* RFC 9112 §3: a recipient MAY parse the request line on whitespace
 * boundaries: two spaces are either accepted or a 400 that closes. */
START_TEST(test_request_line_two_spaces)
{
    client_t *c = client_open();
    client_send(c, "GET  /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    if (client_wait(c, 1) == 1 && R[0].status == 200) {
        check_hello(&R[0]);
        return;
    }
    c = client_open();
    client_send(c, "GET  /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    check_error_response(c, "two spaces", 400, 0);
}
END_TEST

/* An obsolete line folding (RFC 9112 §5.2) is refused with 400, or
 * replaced with spaces: the handler never sees a CR or LF in a value. */
START_TEST(test_obs_fold)
{
    client_t *c = client_open();
    roundtrip(c, "GET /info HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n b\r\n\r\n");
    if (R[0].status == 400)
        return;
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_msg(strpbrk(body_str(0), "\r\n") == NULL,
                  "a folded value reached the handler "
                  "with its line break: '%s'",
                  body_str(0));
}
END_TEST

/* RFC 9112 §5.2: an obs-fold right after the colon, the whole value on the
 * next line, is refused like any other fold -- also for a field that frames
 * the message, where one reading of it would differ from another's. */
START_TEST(test_obs_fold_empty_first_line)
{
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 3\r\n\r\nabc");
    check_error_response(c, "Content-Length:CRLF SP 3", 400, 0);
    c = client_open();
    client_send(c, "GET /info HTTP/1.1\r\nHost: x\r\nX-Fold: \r\n\tb\r\n\r\n");
    check_error_response(c, "X-Fold: CRLF HTAB b", 400, 0);
    /* an empty value that is not folded stays a field with an empty value */
    c = client_open();
    roundtrip(c, "GET /info HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-B: 1\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
}
END_TEST

/* RFC 9110 §9.1: a method outside the seven reaches a route that names
 * PETREL_OTHER (its name in method_name); where no route names it, 501,
 * and the connection goes on (the request was well framed); where the
 * path's routes do not, 405.  CONNECT stays 501 (§9.3.6). */
START_TEST(test_other_methods)
{
    client_t *c = client_open();
    roundtrip(c, "PROPFIND /info HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 501);
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
}
END_TEST

START_TEST(test_other_methods_routed)
{
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET | PETREL_OTHER, "/dav", h_info, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, 1 << 9, "/x", h_info, NULL), PETREL_EINVAL);
    client_t *c = client_open();
    roundtrip(c, "PROPFIND /dav HTTP/1.1\r\nHost: x\r\nDepth: 1\r\nContent-Length: 0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_msg(strncmp(body_str(0), "method=PROPFIND path=/dav ", 26) == 0, "%s", body_str(0));
    roundtrip(c, "MKCOL /dav HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_msg(strncmp(body_str(0), "method=MKCOL ", 13) == 0, "%s", body_str(0));
    roundtrip(c, "PROPFIND /info HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 405);
    check_header(&R[0], "Allow", "GET, HEAD, POST");
    roundtrip(c, "DELETE /dav HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 405); /* PETREL_OTHER is not the seven */
    c = client_open();
    client_send(c, "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n");
    check_error_response(c, "CONNECT to a route of PETREL_OTHER", 501, 400);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Limits                                                                   */

/* RFC 6585 §5: 431 for a header section over max_header_size. */
START_TEST(test_header_too_large)
{
    srv->cfg.max_header_size = 1024;
    client_t *c = client_open();
    static char req[4096];
    int n = snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', 2000);
    strcpy(req + n + 2000, "\r\n\r\n");
    client_send(c, req);
    check_error_response(c, "header > max_header_size", 431, 0);
    check_new_connection_works();
}
END_TEST

/* Many small fields add up the same way. */
START_TEST(test_header_too_large_many_fields)
{
    srv->cfg.max_header_size = 1024;
    client_t *c = client_open();
    static char req[8192];
    size_t len = (size_t)snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 100; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "X-%d: 0123456789\r\n", i);
    len += (size_t)snprintf(req + len, sizeof(req) - len, "\r\n");
    ck_assert(client_write(c, req, len));
    check_error_response(c, "many fields > max_header_size", 431, 0);
}
END_TEST

/* The default limit (16 KiB) is bigger than nothing and smaller than the
 * read buffer growth: a 20 KB field gets 431, not a crash or a hang. */
START_TEST(test_header_too_large_default)
{
    client_t *c = client_open();
    static char req[32768];
    int n = snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', 20000);
    strcpy(req + n + 20000, "\r\n\r\n");
    client_send(c, req);
    check_error_response(c, "20 KB field, 16 KiB limit", 431, 0);
}
END_TEST

/* More fields than petrel keeps (128) -> 431. */
START_TEST(test_too_many_fields)
{
    client_t *c = client_open();
    static char req[8192];
    size_t len = (size_t)snprintf(req, sizeof(req), "GET /info HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 126; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "X-%d: v\r\n", i);
    memcpy(req + len, "\r\n", 3);
    roundtrip(c, req);
    ck_assert_int_eq(R[0].status, 200); /* 127 fields */
    len = (size_t)snprintf(req, sizeof(req), "GET /info HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 200; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "X-%d: v\r\n", i);
    memcpy(req + len, "\r\n", 3);
    client_send(c, req);
    check_error_response(c, "201 fields", 431, 0);
}
END_TEST

/* RFC 9110 §15.5.15: 414 for a target over max_uri_size. */
START_TEST(test_uri_too_long)
{
    srv->cfg.max_uri_size = 100;
    client_t *c = client_open();
    static char req[1024];
    int n = snprintf(req, sizeof(req), "GET /hello?");
    memset(req + n, 'q', 200);
    strcpy(req + n + 200, " HTTP/1.1\r\nHost: x\r\n\r\n");
    client_send(c, req);
    check_error_response(c, "target > max_uri_size", 414, 0);
    check_new_connection_works();
}
END_TEST

START_TEST(test_uri_too_long_default)
{
    client_t *c = client_open();
    static char req[32768];
    int n = snprintf(req, sizeof(req), "GET /");
    memset(req + n, 'p', 20000);
    strcpy(req + n + 20000, " HTTP/1.1\r\nHost: x\r\n\r\n");
    client_send(c, req);
    check_error_response(c, "20 KB target, 8 KiB limit", 414, 0);
}
END_TEST

/* RFC 9110 §15.5.14: 413 for a body over max_body_size, by its
 * Content-Length before it arrives, and by counting a chunked one. */
START_TEST(test_body_too_large_content_length)
{
    srv->cfg.max_body_size = 1000;
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n");
    check_error_response(c, "Content-Length > max_body_size", 413, 0);
    c = client_open();
    static char req[2048];
    int n = snprintf(req, sizeof(req),
                     "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
    memset(req + n, 'b', 1000);
    req[n + 1000] = '\0';
    roundtrip(c, req); /* exactly the limit */
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_uint_eq(R[0].body_len, 1000);
}
END_TEST

START_TEST(test_body_too_large_chunked)
{
    srv->cfg.max_body_size = 1000;
    client_t *c = client_open();
    static char req[4096];
    size_t len = (size_t)snprintf(
        req, sizeof(req), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++) {
        len += (size_t)snprintf(req + len, sizeof(req) - len, "12c\r\n"); /* 300 */
        memset(req + len, 'c', 300);
        len += 300;
        memcpy(req + len, "\r\n", 2);
        len += 2;
    }
    len += (size_t)snprintf(req + len, sizeof(req) - len, "0\r\n\r\n");
    ck_assert(client_write(c, req, len));
    check_error_response(c, "chunked body > max_body_size", 413, 0);
    check_new_connection_works();
}
END_TEST

/* A head over 16 KiB (the read buffer) but within the limits: the buffer
 * grows, and the spans of the head move with it. */
START_TEST(test_large_head)
{
    srv->cfg.max_header_size = 32768;
    client_t *c = client_open();
    static char req[65536];
    size_t len = (size_t)snprintf(req, sizeof(req), "GET /info?q=1 HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Pad-%d: %0200d\r\n", i, i);
    len += (size_t)snprintf(req + len, sizeof(req) - len, "X-Big: ");
    memset(req + len, 'z', 10000);
    len += 10000;
    len += (size_t)snprintf(req + len, sizeof(req) - len, "\r\n\r\n");
    ck_assert_uint_gt(len, 16384 + 2000);
    ck_assert(client_write(c, req, len));
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "method=GET path=/info query=q=1 authority=x version=11 "
                                  "key=- big=10000 fold=-");
    /* again, pipelined behind a small one, and a small one after it */
    static char req2[70000];
    size_t l2 = (size_t)snprintf(req2, sizeof(req2), GET_HELLO);
    memcpy(req2 + l2, req, len);
    l2 += len;
    l2 += (size_t)snprintf(req2 + l2, sizeof(req2) - l2, GET_HELLO);
    ck_assert(client_write(c, req2, l2));
    ck_assert_int_eq(client_wait(c, 3), 3);
    check_hello(&R[0]);
    ck_assert_str_eq(body_str(1), "method=GET path=/info query=q=1 authority=x version=11 "
                                  "key=- big=10000 fold=-");
    check_hello(&R[2]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Streamed responses                                                       */

/* RFC 9112 §7.1: a streamed body is chunked; trailers (§7.1.2) only when
 * the request said "TE: trailers" (RFC 9110 §10.1.4). */
START_TEST(test_stream_chunked)
{
    client_t *c = client_open();
    roundtrip(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Transfer-Encoding", "chunked");
    check_header(&R[0], "Content-Length", NULL);
    check_header(&R[0], "Content-Type", "text/plain");
    check_date(&R[0]);
    const char *raw = R[0].head + R[0].head_len;
    static const char framed[] = "5\r\nHello\r\n1\r\n \r\n5\r\nWorld\r\n0\r\n\r\n";
    ck_assert_uint_eq(R[0].raw_len - R[0].head_len, strlen(framed));
    ck_assert_mem_eq(raw, framed, strlen(framed));
    ck_assert_str_eq(body_str(0), "Hello World");
    ck_assert_uint_eq(R[0].trailers_len, 0);

    roundtrip(c, "GET /stream HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "Hello World");
    ck_assert_str_eq(R[0].trailers, "X-Checksum: abc123");
    raw = R[0].head + R[0].head_len;
    static const char framed2[] =
        "5\r\nHello\r\n1\r\n \r\n5\r\nWorld\r\n0\r\nX-Checksum: abc123\r\n\r\n";
    ck_assert_mem_eq(raw, framed2, strlen(framed2));

    roundtrip(c, "GET /stream HTTP/1.1\r\nHost: x\r\nTE: gzip;q=0.5, trailers\r\n\r\n");
    ck_assert_str_eq(R[0].trailers, "X-Checksum: abc123");
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
}
END_TEST

/* HTTP/1.0 has no chunked coding: the body ends with the connection. */
START_TEST(test_stream_http10)
{
    client_t *c = client_open();
    client_send(c, "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert(c->eof);
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Transfer-Encoding", NULL);
    check_header(&R[0], "Connection", "close");
    ck_assert_str_eq(body_str(0), "Hello World");
}
END_TEST

START_TEST(test_stream_head)
{
    client_t *c = client_open();
    client_send(c, "HEAD /stream HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n" GET_HELLO);
    bool head[2] = {true, false};
    ck_assert_int_eq(client_wait_flags(c, 2, head, false), 2);
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Transfer-Encoding", "chunked");
    check_hello(&R[1]);
    ck_assert_uint_eq(c->len, c->off);
}
END_TEST

/* A stream ended after the handler returned, from outside the loop's
 * callbacks; a request pipelined behind it waits for the end. */
START_TEST(test_stream_later)
{
    client_t *c = client_open();
    client_send(c, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n" GET_HELLO);
    for (int i = 0; i < 20; i++)
        turn(0);
    client_pull(c);
    ck_assert_ptr_nonnull(held);
    ck_assert_ptr_nonnull(memmem(c->buf, c->len, "\r\n\r\n", 4)); /* the head went out */
    ck_assert_ptr_null(memmem(c->buf, c->len, "Hello World!", 12));
    ck_assert_int_eq(petrel_stream_write(held, "late", 4), 0);
    ck_assert_int_eq(petrel_resp_trailer(held, "X-T", "1"), 0);
    ck_assert_int_eq(petrel_stream_end(held), 0);
    ck_assert_int_eq(client_wait(c, 2), 2);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "late");
    ck_assert_uint_eq(R[0].trailers_len, 0);
    check_hello(&R[1]);
}
END_TEST

/* A stream that takes longer than the header timeout is not cut by it: the
 * request arrived in time. */
START_TEST(test_stream_slower_than_header_timeout)
{
    srv->cfg.header_timeout_ms = 50;
    client_t *c = client_open();
    client_send(c, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int i = 0; i < 20; i++)
        turn(0);
    ck_assert_ptr_nonnull(held);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        turn(20);
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 250);
    client_pull(c);
    ck_assert_msg(!c->eof, "the connection was closed while the response was streaming");
    ck_assert_int_eq(petrel_stream_write(held, "late", 4), 0);
    ck_assert_int_eq(petrel_stream_end(held), 0);
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_str_eq(body_str(0), "late");
}
END_TEST

/* petrel_stream_abort() from outside the handler (a source that failed
 * midway): the client gets the head and what was written, then the
 * connection closes without the last chunk (RFC 9112 §7.1: the message is
 * incomplete); the calls after it say the stream is over. */
START_TEST(test_stream_abort)
{
    client_t *c = client_open();
    client_send(c, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int i = 0; i < 20; i++)
        turn(0);
    ck_assert_ptr_nonnull(held);
    ck_assert_int_eq(petrel_stream_abort(NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_stream_write(held, "part", 4), 0);
    ck_assert_int_eq(petrel_stream_abort(held), 0);
    held = NULL;
    char all[4096];
    size_t n = 0;
    for (int i = 0; i < 100000 && !c->eof; i++) {
        ssize_t k = read(c->fd, all + n, sizeof(all) - 1 - n);
        if (k > 0)
            n += (size_t)k;
        else if (k == 0)
            c->eof = true;
        turn(0);
    }
    all[n] = '\0';
    ck_assert_msg(c->eof, "the connection stays open after an aborted stream");
    ck_assert_ptr_nonnull(strstr(all, "HTTP/1.1 200"));
    ck_assert_ptr_nonnull(strstr(all, "4\r\npart\r\n"));
    ck_assert_ptr_null(strstr(all, "\r\n0\r\n"));
}
END_TEST

/* Backpressure (petrel_stream_buffered, petrel_stream_on_drain): a
 * producer waits for a client that reads slowly; its callback runs once
 * the queue is at the mark (before it is empty), and not after the end. */
static int drains;
static size_t drain_left;

static void stream_drained(petrel_req_t *req, void *data)
{
    drains++;
    drain_left = petrel_stream_buffered(req);
    ck_assert_ptr_eq(data, &drains);
}

START_TEST(test_stream_drain)
{
    drains = 0;
    client_t *c = client_open();
    client_send(c, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int i = 0; i < 20; i++)
        turn(0);
    ck_assert_ptr_nonnull(held);
    ck_assert_int_eq(petrel_stream_on_drain(NULL, 0, stream_drained, NULL), PETREL_EINVAL);
    ck_assert_uint_eq(petrel_stream_buffered(held), 0); /* the head is written */
    ck_assert_int_eq(petrel_stream_on_drain(held, 0, stream_drained, &drains), 1);
    static char chunk[65536];
    memset(chunk, 's', sizeof(chunk));
    /* the client does not read: 1 MiB waits for it */
    while (petrel_stream_buffered(held) < (1u << 20)) {
        ck_assert_int_eq(petrel_stream_write(held, chunk, sizeof(chunk)), 0);
        turn(0);
    }
    /* a mark well above what one write to the socket takes: the queue
     * passes it on its way down */
    ck_assert_int_eq(petrel_stream_on_drain(held, 512u << 10, stream_drained, &drains), 0);
    for (int i = 0; i < 10; i++)
        turn(0);
    ck_assert_int_eq(drains, 0);
    for (int i = 0; i < 100000 && drains == 0; i++) {
        char tmp[8192];
        if (read(c->fd, tmp, sizeof(tmp)) < 0)
            ck_assert_int_eq(errno, EAGAIN);
        turn(0);
    }
    ck_assert_int_eq(drains, 1);
    ck_assert_uint_le(drain_left, 512u << 10);
    ck_assert_uint_gt(drain_left, 0);
    /* set again, then the stream ends: it never runs */
    while (petrel_stream_buffered(held) < (1u << 20))
        ck_assert_int_eq(petrel_stream_write(held, chunk, sizeof(chunk)), 0);
    ck_assert_int_eq(petrel_stream_on_drain(held, 0, stream_drained, &drains), 0);
    ck_assert_int_eq(petrel_stream_end(held), 0);
    for (int i = 0; i < 100000 && !c->eof; i++) {
        char tmp[65536];
        ssize_t n = read(c->fd, tmp, sizeof(tmp));
        if (n > 0 && memmem(tmp, (size_t)n, "\r\n0\r\n\r\n", 7))
            break;
        turn(0);
    }
    for (int i = 0; i < 10; i++)
        turn(0);
    ck_assert_int_eq(drains, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Requests in pieces                                                       */

/* One byte per write, the loop turning in between. */
START_TEST(test_byte_by_byte)
{
    client_t *c = client_open();
    static const char req[] = "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/x\r\n"
                              "Content-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz";
    ck_assert_uint_ge(strlen(req), 100);
    for (size_t i = 0; i < strlen(req); i++) {
        ck_assert(client_write(c, req + i, 1));
        turn(0);
        client_pull(c);
        if (i + 1 < strlen(req))
            ck_assert_uint_eq(c->len, 0);
    }
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    check_header(&R[0], "Content-Type", "text/x");
    ck_assert_str_eq(body_str(0), "abcdefghijklmnopqrstuvwxyz");
    /* and a GET, with a chunked POST after it, byte by byte too */
    static const char req2[] = GET_HELLO "POST /echo HTTP/1.1\r\nHost: x\r\n"
                                         "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    for (size_t i = 0; i < strlen(req2); i++) {
        ck_assert(client_write(c, req2 + i, 1));
        turn(0);
    }
    ck_assert_int_eq(client_wait(c, 2), 2);
    check_hello(&R[0]);
    ck_assert_str_eq(body_str(1), "abc");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Timeouts                                                                 */

/* RFC 9110 §15.5.9: a request that does not arrive in time gets 408. */
START_TEST(test_header_timeout)
{
    srv->cfg.header_timeout_ms = 50;
    client_t *c = client_open();
    client_send(c, "GET /hello HTTP/1.1\r\nHo");
    ck_assert_msg(client_wait_eof(c, 200, 20), "not closed");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 408);
    check_header(&R[0], "Connection", "close");
    check_date(&R[0]);
    check_new_connection_works();
}
END_TEST

/* The 408 is written like every error response (RFC 9112 §9.6): a
 * half-close after it, then the server still reads and drops what the
 * client sends, so that the client reads the 408 and not a reset. */
START_TEST(test_header_timeout_lingers)
{
    srv->cfg.header_timeout_ms = 50;
    client_t *c = client_open();
    client_send(c, "GET /hello HTTP/1.1\r\nHo");
    ck_assert_msg(client_wait_eof(c, 200, 20), "not half-closed");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 408);
    /* the server side is open for reading: no EPIPE, no reset */
    ck_assert_int_eq(write(c->fd, "st: x\r\n\r\n", 9), 9);
    turn(10);
    ck_assert_int_eq(write(c->fd, "more", 4), 4);
    turn(10);
    ck_assert_uint_eq(srv->conns.n, 1);
    client_close(c);
    for (int i = 0; i < 20 && srv->conns.n; i++)
        turn(10);
    ck_assert_uint_eq(srv->conns.n, 0);
}
END_TEST

/* The same for a body that stops coming. */
START_TEST(test_body_timeout)
{
    srv->cfg.body_timeout_ms = 50;
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    ck_assert_msg(client_wait_eof(c, 200, 20), "not closed");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 408);
}
END_TEST

/* Turn the loop for `ms` milliseconds. */
static void turns_for_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        turn(5);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* A body that trickles (one byte every 20 ms: 50 bytes/s, under
 * --body-min-rate 1000) is cut at --body-timeout plus what its bytes earn
 * (1 ms each): 408, and the connection closes; a keep-alive read-to-read
 * timeout never would.  One that comes at 2,000 bytes/s is served, however
 * long it takes past --body-timeout. */
START_TEST(test_body_trickle)
{
    srv->cfg.body_timeout_ms = 200;
    srv->cfg.body_min_rate = 1000;
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    int sent = 0;
    for (; sent < 200 && !c->eof; sent++) { /* 4 s at most */
        if (write(c->fd, "x", 1) != 1)
            break;
        turns_for_ms(20);
        client_pull(c);
    }
    ck_assert_msg(c->eof, "a trickle of %d bytes is still served", sent);
    /* 200 ms and what 10 bytes earn, then the check of the moving deadline
     * (once a second): cut within about 1.2 s, 60 bytes */
    ck_assert_int_lt(sent, 100);
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 408);

    client_t *d = client_open();
    client_send(d, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n");
    char chunk[40];
    memset(chunk, 'y', sizeof(chunk));
    for (int i = 0; i < 20; i++) { /* 40 bytes every 20 ms: 400 ms in all */
        ck_assert(client_write(d, chunk, sizeof(chunk)));
        turns_for_ms(20);
    }
    ck_assert_int_eq(client_wait(d, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_uint_eq(R[0].body_len, 800);
}
END_TEST

/* RFC 9112 §5.1, RFC 9110 §5.5: OWS around a field value is SP or HTAB,
 * and not part of the value -- also for the framing fields, which llhttp
 * reads itself. */
START_TEST(test_htab_ows)
{
    client_t *c = client_open();
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\t5\t\r\n\r\nhello");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\t \t\r\n\r\n"
                 "5\r\nhello\r\n0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
    /* a HTAB inside a value stays */
    roundtrip(c, "GET /info HTTP/1.1\r\nHost: x\r\nX-Fold:\ta\tb\t\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_msg(strstr(body_str(0), "fold=a\tb") != NULL, "%s", body_str(0));
    /* RFC 9112 §9.6: Connection: close<HTAB> closes */
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\t\r\n\r\n");
    check_hello(&R[0]);
    check_header(&R[0], "Connection", "close");
    ck_assert(client_wait_eof(c, 50, 0));
}
END_TEST

/* A HTAB at the end of what has arrived: its role is known with the next
 * bytes (the field's value may go on). */
START_TEST(test_htab_split)
{
    client_t *c = client_open();
    client_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\t");
    turns(3);
    client_send(c, "\r\n\r\nhello");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
}
END_TEST

/* RFC 9112 §7.1.1: chunk extensions count toward --max-header-size over
 * the whole body (llhttp would read them without end): 400. */
START_TEST(test_chunk_extensions_bounded)
{
    srv->cfg.max_header_size = 1000;
    client_t *c = client_open();
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5;a;b=c\r\nhello\r\n0\r\n\r\n");
    ck_assert_int_eq(R[0].status, 200);
    static char req[8192];
    int n = snprintf(req, sizeof(req),
                     "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 40; i++) /* 40 chunks of 30 extension bytes: 1200 */
        n += snprintf(req + n, sizeof(req) - (size_t)n, "1;ext=%023d\r\nx\r\n", i);
    snprintf(req + n, sizeof(req) - (size_t)n, "0\r\n\r\n");
    client_t *d = client_open();
    client_send(d, req);
    ck_assert_int_eq(client_wait(d, 1), 1);
    ck_assert_int_eq(R[0].status, 400);
}
END_TEST

/* The HTTP/2 preface that the entry stage did not take (cut short, or
 * wrong after its first line) is an invalid HTTP/1.1 request line: 400
 * (RFC 9112 §3; RFC 9113 §3.4 makes it fail as one), not 505 or 501. */
START_TEST(test_bad_preface_400)
{
    client_t *c = client_open();
    client_send(c, "PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 400);
}
END_TEST

/* A connection that never sends a byte is closed, without a response. */
START_TEST(test_idle_connection_timeout)
{
    srv->cfg.header_timeout_ms = 50;
    client_t *c = client_open();
    ck_assert_msg(client_wait_eof(c, 200, 20), "not closed");
    ck_assert_uint_eq(c->len, 0);
}
END_TEST

/* An idle kept-alive connection is closed after keepalive_timeout_ms,
 * without a response (RFC 9112 §9.8). */
START_TEST(test_keepalive_timeout)
{
    srv->cfg.keepalive_timeout_ms = 50;
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    ck_assert_msg(client_wait_eof(c, 200, 20), "not closed");
    ck_assert_uint_eq(c->len, c->off);
    check_new_connection_works();
}
END_TEST

/* The reason a connection closed (petrel_connections_closed_total): one
 * that went through its idle stage (PETREL__IDLE_MS: its state given back,
 * the timer armed again) and then was closed by its client was closed by
 * the client; one the keep-alive timeout closed, by a timeout. */
START_TEST(test_close_reason_after_idle)
{
    srv->cfg.keepalive_timeout_ms = 1500;
    uint64_t *closed = &petrel__stats->c[PETREL__C_CONN_CLOSED];
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    uint64_t t0 = petrel__clock_ns() / 1000000;
    while (petrel__clock_ns() / 1000000 < t0 + PETREL__IDLE_MS + 150)
        turn(10);
    uint64_t client0 = closed[PETREL__CLOSE_CLIENT], timeout0 = closed[PETREL__CLOSE_TIMEOUT];
    client_close(c);
    for (int i = 0; i < 20 && closed[PETREL__CLOSE_CLIENT] == client0; i++)
        turn(10);
    ck_assert_uint_eq(closed[PETREL__CLOSE_CLIENT], client0 + 1);
    ck_assert_uint_eq(closed[PETREL__CLOSE_TIMEOUT], timeout0);

    c = client_open();
    roundtrip(c, GET_HELLO);
    ck_assert_msg(client_wait_eof(c, 300, 20), "not closed");
    ck_assert_uint_eq(closed[PETREL__CLOSE_TIMEOUT], timeout0 + 1);
    ck_assert_uint_eq(closed[PETREL__CLOSE_CLIENT], client0 + 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Zero heap calls per request                                              */

/*
 * `total` GET /hello requests on c, `batch` per write.  No Check call and no
 * heap call of its own: the request bytes and the read buffer are prepared
 * or static.  Returns the number of errors; the first is described in err.
 */
static char batch_buf[16 * 64];
static char resp_buf[16 * 512];
static char err[256];

static int serve_hellos(client_t *c, int total, int batch, size_t resp_len)
{
    size_t one = strlen(GET_HELLO);
    for (int i = 0; i < batch; i++)
        memcpy(batch_buf + (size_t)i * one, GET_HELLO, one);
    for (int done = 0; done < total; done += batch) {
        if (!client_write(c, batch_buf, one * (size_t)batch)) {
            snprintf(err, sizeof(err), "write failed after %d requests", done);
            return 1;
        }
        size_t want = resp_len * (size_t)batch, got = 0;
        int idle = 0;
        while (got < want && idle < 1000) {
            turn(0);
            ssize_t n = read(c->fd, resp_buf + got, want - got);
            if (n > 0) {
                got += (size_t)n;
                idle = 0;
            } else if (n == 0) {
                snprintf(err, sizeof(err), "EOF after %d requests", done);
                return 1;
            } else {
                idle++;
            }
        }
        if (got != want) {
            snprintf(err, sizeof(err), "%zu of %zu bytes after %d requests", got, want, done);
            return 1;
        }
        for (int i = 0; i < batch; i++) {
            const char *r = resp_buf + (size_t)i * resp_len;
            if (memcmp(r, "HTTP/1.1 200 OK\r\n", 17) != 0 ||
                memcmp(r + resp_len - 16, "\r\n\r\nHello World!", 16) != 0) {
                snprintf(err, sizeof(err), "bad response %d: '%.40s'", done + i, r);
                return 1;
            }
        }
    }
    /* nothing more came */
    turn(0);
    if (read(c->fd, resp_buf, 1) >= 0) {
        snprintf(err, sizeof(err), "extra bytes or EOF");
        return 1;
    }
    return 0;
}

static void zero_malloc(int batch)
{
    client_t *c = client_open();
    roundtrip(c, GET_HELLO);
    check_hello(&R[0]);
    size_t resp_len = R[0].raw_len;
    ck_assert_uint_lt(resp_len, 512);
    /* warm up: 100 more */
    ck_assert_msg(serve_hellos(c, 96, batch == 1 ? 1 : 16, resp_len) == 0, "%s", err);
    ck_assert_msg(serve_hellos(c, 4, batch == 1 ? 1 : 4, resp_len) == 0, "%s", err);

    uint64_t calls0 = ck_heap.calls, pool0 = petrel__pool.mallocs;
    int64_t live0 = ck_heap.live;
    uint64_t ids0 = srv->conns.next_req_id;
    int errors = serve_hellos(c, 10000, batch, resp_len);
    uint64_t calls1 = ck_heap.calls, pool1 = petrel__pool.mallocs;
    int64_t live1 = ck_heap.live;
    uint64_t ids1 = srv->conns.next_req_id;

    ck_assert_msg(errors == 0, "%s", err);
    ck_assert_uint_eq(ids1 - ids0, 10000);
    ck_assert_msg(pool1 == pool0, "the chunk pool made %llu heap calls",
                  (unsigned long long)(pool1 - pool0));
    if (CK_HEAP_HOOK) {
        ck_assert_msg(calls1 == calls0, "%llu heap calls for 10,000 requests",
                      (unsigned long long)(calls1 - calls0));
        ck_assert_int_eq(live1, live0);
    }
}

/* 10,000 keep-alive requests, one at a time, after 100 to warm up. */
START_TEST(test_zero_malloc_keepalive)
{
    zero_malloc(1);
}
END_TEST

/* 10,000 requests pipelined 16 at a time. */
START_TEST(test_zero_malloc_pipelined)
{
    zero_malloc(16);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A failing heap across whole requests                                     */

/*
 * Make the N-th heap call fail, for every N, across a new connection that
 * pipelines a mix of requests, with a pool that keeps no free chunk (so every
 * chunk is a heap call): six POST /echo of 3000 distinct bytes (their
 * responses overflow an output chunk), a streamed response with trailers, a
 * chunked POST whose body buffer grows, and a GET /hello with a 17 KB field
 * (the read buffer grows).  Whatever fails, the client sees complete and
 * correct responses -- or 5xx ones -- in order, then possibly the end of the
 * connection: never a wrong body, a malformed stream or a hang; and the
 * server leaks nothing.
 */
#define WALK_POSTS 6
#define WALK_BODY 3000
#define WALK_CHUNKED 9000
#define WALK_NREQ (WALK_POSTS + 3)

static char walk_req[WALK_POSTS * (WALK_BODY + 100) + WALK_CHUNKED + 20000 + 1000];
static size_t walk_len;

static void walk_prepare(void)
{
    walk_len = 0;
#define WALK_ADD(...)                                                                              \
    (walk_len += (size_t)snprintf(walk_req + walk_len, sizeof(walk_req) - walk_len, __VA_ARGS__))
    for (int i = 0; i < WALK_POSTS; i++) {
        WALK_ADD("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", WALK_BODY);
        memset(walk_req + walk_len, 'A' + i, WALK_BODY);
        walk_len += WALK_BODY;
    }
    WALK_ADD("GET /stream HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n");
    WALK_ADD("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int k = 0; k < WALK_CHUNKED / 1000; k++) {
        WALK_ADD("3e8\r\n");
        memset(walk_req + walk_len, 'Z', 1000);
        walk_len += 1000;
        WALK_ADD("\r\n");
    }
    WALK_ADD("0\r\n\r\n");
    WALK_ADD("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(walk_req + walk_len, 'y', 17000);
    walk_len += 17000;
    WALK_ADD("\r\n\r\n");
#undef WALK_ADD
}

/* Is r the right answer to walk request i? */
static bool walk_ok(int i, const resp_t *r)
{
    if (r->status != 200)
        return false;
    if (i < WALK_POSTS || i == WALK_POSTS + 1) {
        size_t n = i < WALK_POSTS ? WALK_BODY : WALK_CHUNKED;
        char ch = i < WALK_POSTS ? (char)('A' + i) : 'Z';
        if (r->body_len != n)
            return false;
        for (size_t b = 0; b < n; b++)
            if (r->body[b] != ch)
                return false;
        return true;
    }
    if (i == WALK_POSTS)
        return r->body_len == 11 && memcmp(r->body, "Hello World", 11) == 0 &&
               strcmp(r->trailers, "X-Checksum: abc123") == 0;
    return r->body_len == 12 && memcmp(r->body, "Hello World!", 12) == 0;
}

typedef struct walk {
    bool adopt_failed;
    int responses; /* complete and correct (or an error status) */
    int errors;    /* 5xx responses */
    int bad;       /* wrong body or status, malformed */
    bool eof, hang;
    char what[160]; /* the first bad response */
    int64_t leaked;
    size_t pool_live, nconns;
} walk_t;

/* One connection with the heap armed; no Check call inside. */
static void walk_once(walk_t *w, uint64_t n)
{
    memset(w, 0, sizeof(*w));
    client_t *c = &ck_clients[2];
    if (c->buf == NULL) {
        c->buf = malloc(CLIENT_BUF); /* kept across walks: not counted */
        c->cap = CLIENT_BUF;
    }
    int64_t live0 = ck_heap.live;
    int fds[2];
    if (c->buf == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
        w->bad = 100;
        return;
    }
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    c->fd = fds[1];
    c->eof = false;
    c->len = c->off = 0;
    if (n)
        ck_heap_arm(n, false);
    if (petrel__conn_adopt(&srv->conns, fds[0]) < 0) {
        close(fds[0]);
        w->adopt_failed = true;
    } else if (client_write(c, walk_req, walk_len)) {
        int idle = 0;
        while (w->responses < WALK_NREQ && !c->eof && idle < 2000) {
            turn(0);
            if (client_pull(c) == 0 && !c->eof)
                idle++;
            else
                idle = 0;
            for (;;) {
                resp_t *r = &R[0];
                ssize_t k = resp_parse(c->buf + c->off, c->len - c->off, false, false, r);
                if (k < 0) {
                    if (!w->bad)
                        snprintf(w->what, sizeof(w->what), "malformed: '%.100s'", c->buf + c->off);
                    w->bad++;
                    break;
                }
                if (k == 0)
                    break;
                c->off += (size_t)k;
                int i = w->responses++;
                if (r->status >= 500) {
                    w->errors++;
                    continue;
                }
                bool ok = i < WALK_NREQ && walk_ok(i, r);
                if (!ok && !w->bad)
                    snprintf(w->what, sizeof(w->what), "#%d: %d, %zu bytes '%.40s'", i, r->status,
                             r->body_len, r->body);
                if (!ok)
                    w->bad++;
            }
            if (w->bad)
                break;
        }
        w->eof = c->eof;
        w->hang = !c->eof && w->responses < WALK_NREQ;
    }
    ck_heap_disarm();
    /* close our end: the server sees EOF and lets go of the connection */
    close(fds[1]);
    c->fd = -1;
    for (int i = 0; i < 20 && srv->conns.n; i++)
        turn(0);
    turn(0);
    w->nconns = srv->conns.n;
    w->pool_live = petrel__pool.live;
    w->leaked = ck_heap.live - live0;
}

START_TEST(test_failmalloc_requests)
{
    srv->cfg.max_header_size = 32768;
    ck_server_start();
    walk_prepare();
    petrel__pool_fini(&petrel__pool);
    petrel__pool.max_free = 0;
    walk_t w;
    walk_once(&w, 0); /* unarmed: everything works, and the conn struct is cached */
    ck_assert_int_eq(w.responses, WALK_NREQ);
    ck_assert_int_eq(w.bad + w.errors, 0);
    ck_assert_uint_eq(w.nconns, 0);
    ck_assert_uint_eq(w.pool_live, 0);
#if CK_HEAP_HOOK
    int injected = 0;
    for (uint64_t n = 1; n < 2000; n++) {
        walk_once(&w, n);
        uint64_t failed = ck_heap.failed;
        ck_assert_msg(w.bad == 0, "N=%llu: %d wrong or malformed responses of %d (%s)",
                      (unsigned long long)n, w.bad, w.responses, w.what);
        ck_assert_msg(!w.hang, "N=%llu: the connection hangs after %d responses",
                      (unsigned long long)n, w.responses);
        ck_assert_msg(w.nconns == 0, "N=%llu: the server kept the connection",
                      (unsigned long long)n);
        ck_assert_msg(w.pool_live == 0, "N=%llu: %zu chunks not given back", (unsigned long long)n,
                      w.pool_live);
        ck_assert_msg(w.leaked == 0, "N=%llu: %lld heap blocks leaked", (unsigned long long)n,
                      (long long)w.leaked);
        if (failed == 0) {
            ck_assert_int_eq(w.responses, WALK_NREQ);
            ck_assert_int_gt(injected, 5);
            return;
        }
        injected++;
    }
    ck_abort_msg("the walk did not end");
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Request bodies read as they arrive (PETREL_BODY_STREAM)                  */

/* A Content-Length body, then a request on the same connection; the
 * server's other routes (echo: req->body) are as before. */
START_TEST(test_sbody_content_length)
{
    client_t *c = client_open();
    roundtrip(c, "POST /ssink HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "n=10 parts=1 len=10");
    ck_assert_int_eq(ssink->end, 1);
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    check_hello(&R[0]);
    roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "hello");
    client_close(c);
}
END_TEST

/* A chunked body one byte per write: every part reaches the callback, the
 * length is unknown (-1), trailers are ignored (RFC 9112 §7.1). */
START_TEST(test_sbody_chunked_bytewise)
{
    client_t *c = client_open();
    const char *req = "POST /ssink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n";
    for (const char *p = req; *p; p++) {
        ck_assert(client_write(c, p, 1));
        turn(0);
    }
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    char want[64];
    snprintf(want, sizeof(want), "n=19 parts=%u len=-1", ssink->parts);
    ck_assert_str_eq(body_str(0), want);
    ck_assert_uint_ge(ssink->parts, 2);
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    check_hello(&R[0]);
    client_close(c);
}
END_TEST

/* Answered before its body: the body is dropped, and a request inside it
 * is never parsed (RFC 9112 §6.3: the body's length is its
 * Content-Length) -- the next response is the real next request's. */
START_TEST(test_sbody_early_no_smuggling)
{
    client_t *c = client_open();
    const char *inner = "GET /status404 HTTP/1.1\r\nHost: x\r\n\r\n";
    char req[512];
    snprintf(req, sizeof(req),
             "POST /searly HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s"
             "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
             strlen(inner), inner);
    client_send(c, req);
    ck_assert_int_eq(client_wait(c, 2), 2);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "early");
    check_hello(&R[1]);
    ck_assert_int_eq(client_wait_flags_ms(c, 1, 10, 5), 0); /* no third response */
    client_close(c);
}
END_TEST

/* A paused reader: the rest of the body is not parsed (nor the connection
 * read) until it resumes. */
START_TEST(test_sbody_pause)
{
    client_t *c = client_open();
    static char body[60000];
    memset(body, 'p', sizeof(body));
    char head[128];
    snprintf(head, sizeof(head), "POST /spause HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             sizeof(body));
    client_send(c, head);
    for (int i = 0; i < 20 && ssink == NULL; i++)
        turn(0);
    ck_assert_ptr_nonnull(ssink);
    ck_assert(client_write(c, body, sizeof(body)));
    for (int i = 0; i < 20; i++)
        turn(0);
    ck_assert_uint_eq(ssink->parts, 1);
    ck_assert_uint_lt(ssink->n, sizeof(body));
    size_t n = ssink->n;
    for (int i = 0; i < 20; i++)
        turn(0);
    ck_assert_uint_eq(ssink->n, n); /* nothing more while paused */
    petrel_body_pause(sreq, 0);
    ck_assert_int_eq(client_wait_flags_ms(c, 1, 10, 200), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_uint_eq(ssink->n, sizeof(body));
    client_close(c);
}
END_TEST

/* Expect: 100-continue (RFC 9110 §10.1.1): the 100 goes out when the
 * handler reads, then the final response. */
START_TEST(test_sbody_expect)
{
    client_t *c = client_open();
    client_send(c, "POST /ssink HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                   "Expect: 100-continue\r\n\r\n");
    ck_assert_int_eq(client_wait_flags_ms(c, 1, 10, 100), 1);
    ck_assert_int_eq(R[0].status, 100);
    client_send(c, "abc");
    ck_assert_int_eq(client_wait(c, 1), 1);
    ck_assert_int_eq(R[0].status, 200);
    ck_assert_str_eq(body_str(0), "n=3 parts=1 len=3");
    client_close(c);
}
END_TEST

/* A client that goes away mid-body: the callback gets PETREL_EIO. */
START_TEST(test_sbody_client_gone)
{
    client_t *c = client_open();
    client_send(c, "POST /ssink HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
    for (int i = 0; i < 20 && (ssink == NULL || ssink->n < 3); i++)
        turn(0);
    ck_assert_ptr_nonnull(ssink);
    sink_t *k = ssink;
    ck_assert_int_eq(k->end, 0);
    client_close(c);
    for (int i = 0; i < 20 && k->end == 0; i++)
        turn(0);
    ck_assert_int_eq(k->end, PETREL_EIO);
}
END_TEST

static TCase *tcase(Suite *s, const char *name, double timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *http1_suite(void)
{
    Suite *s = suite_create("http1");
    TCase *tc = tcase(s, "basics", 10);
    tcase_add_test(tc, test_get_hello);
    tcase_add_test(tc, test_keepalive_two_requests);
    tcase_add_test(tc, test_http10_closes);
    tcase_add_test(tc, test_http10_keepalive);
    tcase_add_test(tc, test_connection_close);
    tcase_add_test(tc, test_connection_close_pipelined);
    tcase_add_test(tc, test_half_close);
    tcase_add_test(tc, test_pipeline_16);
    tcase_add_test(tc, test_pipeline_large);
    tcase_add_test(tc, test_head);
    tcase_add_test(tc, test_404);
    tcase_add_test(tc, test_405_allow);
    tcase_add_test(tc, test_handler_error_500);
    tcase_add_test(tc, test_wait_pipelined_order);
    tcase_add_test(tc, test_wait_abort_on_close);
    tcase_add_test(tc, test_wait_timeout_504);
    tcase_add_test(tc, test_wait_drain);
    tcase_add_test(tc, test_wait_zero_malloc);
    tcase_add_test(tc, test_handler_invalid_status);
    tcase_add_test(tc, test_handler_status_after_stream);
    tcase_add_test(tc, test_options_asterisk);
    tcase_add_test(tc, test_leading_crlf);

    tc = tcase(s, "streamed bodies", 10);
    tcase_add_test(tc, test_sbody_content_length);
    tcase_add_test(tc, test_sbody_chunked_bytewise);
    tcase_add_test(tc, test_sbody_early_no_smuggling);
    tcase_add_test(tc, test_sbody_pause);
    tcase_add_test(tc, test_sbody_expect);
    tcase_add_test(tc, test_sbody_client_gone);

    tc = tcase(s, "targets", 10);
    tcase_add_test(tc, test_absolute_form);
    tcase_add_test(tc, test_absolute_form_needs_host);
    tcase_add_test(tc, test_path_normalisation);
    tcase_add_test(tc, test_param_decoded);

    tc = tcase(s, "bodies", 10);
    tcase_add_test(tc, test_echo_content_length);
    tcase_add_test(tc, test_echo_chunked_split);
    tcase_add_test(tc, test_echo_large);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_expect_continue_http10);
    tcase_add_test(tc, test_expect_unknown);

    int nbad = (int)(sizeof(bad_requests) / sizeof(bad_requests[0]));
    tc = tcase(s, "bad", 10);
    tcase_add_loop_test(tc, test_bad_request, 0, nbad);
    tcase_add_loop_test(tc, test_bad_request_after_good, 0, nbad);
    tcase_add_test(tc, test_request_line_two_spaces);
    tcase_add_test(tc, test_obs_fold);
    tcase_add_test(tc, test_obs_fold_empty_first_line);
    tcase_add_test(tc, test_other_methods);
    tcase_add_test(tc, test_other_methods_routed);

    tc = tcase(s, "limits", 10);
    tcase_add_test(tc, test_header_too_large);
    tcase_add_test(tc, test_header_too_large_many_fields);
    tcase_add_test(tc, test_header_too_large_default);
    tcase_add_test(tc, test_too_many_fields);
    tcase_add_test(tc, test_uri_too_long);
    tcase_add_test(tc, test_uri_too_long_default);
    tcase_add_test(tc, test_body_too_large_content_length);
    tcase_add_test(tc, test_body_too_large_chunked);
    tcase_add_test(tc, test_large_head);

    tc = tcase(s, "stream", 10);
    tcase_add_test(tc, test_stream_chunked);
    tcase_add_test(tc, test_stream_http10);
    tcase_add_test(tc, test_stream_head);
    tcase_add_test(tc, test_stream_later);
    tcase_add_test(tc, test_stream_slower_than_header_timeout);
    tcase_add_test(tc, test_stream_drain);
    tcase_add_test(tc, test_stream_abort);
    tcase_add_test(tc, test_byte_by_byte);

    tc = tcase(s, "timeouts", 10);
    tcase_add_test(tc, test_header_timeout);
    tcase_add_test(tc, test_header_timeout_lingers);
    tcase_add_test(tc, test_body_timeout);
    tcase_add_test(tc, test_body_trickle);
    tcase_add_test(tc, test_htab_ows);
    tcase_add_test(tc, test_htab_split);
    tcase_add_test(tc, test_chunk_extensions_bounded);
    tcase_add_test(tc, test_bad_preface_400);
    tcase_add_test(tc, test_idle_connection_timeout);
    tcase_add_test(tc, test_keepalive_timeout);
    tcase_add_test(tc, test_close_reason_after_idle);

    tc = tcase(s, "zero-malloc", 60);
    tcase_add_test(tc, test_zero_malloc_keepalive);
    tcase_add_test(tc, test_zero_malloc_pipelined);

    tc = tcase(s, "failmalloc", 120);
    tcase_add_test(tc, test_failmalloc_requests);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http1_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
