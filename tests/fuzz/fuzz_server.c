/*
 * fuzz_server.c -- see fuzz_server.h.
 */
#include "server/server.h"
#include "runtime/log.h"
#include "protocols/h2.h"

#include <llhttp.h>
#include <petrel/static.h>

#include "fuzz_server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The table generated from BUILTIN_MODULES (modules/builtin.c). */
extern const petrel_module_t *const petrel__builtin_modules[];

static petrel_server_t *srv;
static char tmp_dir[256];
/* PETREL_FUZZ_DUMP set: what the server writes goes to stderr too (to see
 * what a seed reaches). */
static bool dump;

/* A directory beside the static root, reachable only through a symlink
 * that leaves the root: nothing in it may ever be opened (an inotify watch
 * sees every open and read; O_PATH descriptors, which cannot read, are not
 * reported). */
#define SECRET "outside the root\n"
static int outside_watch = -1;

/* Loop turns allowed for each stage of an input; far more than any input
 * of a few KiB needs, and bounded so that a server that never settles is
 * reported as a failure instead of spinning. */
#define SETTLE_TURNS 64
#define CLOSE_TURNS 1000
#define STUCK_WRITES 1000
#define MAX_PIECES 64

__attribute__((noreturn)) static void die(const char *what)
{
    fprintf(stderr, "fuzz_server: %s\n", what);
    abort();
}

/* ------------------------------------------------------------------------ */
/* Routes of our own                                                        */

/* A streamed body in pieces with a trailer (RFC 9112 §7.1.2). */
static int h_stream(petrel_req_t *req, void *data)
{
    (void)data;
    if (petrel_stream_begin(req, 200, "text/plain") < 0 ||
        petrel_stream_write(req, "one ", 4) < 0 || petrel_stream_write(req, "two", 3) < 0 ||
        petrel_resp_trailer(req, "X-Sum", "7") < 0)
        return PETREL_ENOMEM;
    return petrel_stream_end(req);
}

/* What the request looked like: method, path, query, parameters, headers. */
static int h_info(petrel_req_t *req, void *data)
{
    (void)data;
    const char *key = petrel_req_param(req, "key");
    const char *star = petrel_req_param(req, "*");
    const char *q = petrel_req_query(req, "q");
    const char *ua = petrel_req_header(req, "user-agent");
    char *s = petrel_arena_printf(req->arena, "%s %s key=%s *=%s q=%s ua=%s body=%zu\n",
                                  req->method_name.ptr, req->path.ptr, key ? key : "-",
                                  star ? star : "-", q ? q : "-", ua ? ua : "-", req->body.len);
    if (s == NULL)
        return PETREL_ENOMEM;
    petrel_resp_header(req, "X-Info", "1");
    return petrel_send_text(req, 200, "text/plain", s);
}

static int h_status(petrel_req_t *req, void *data)
{
    (void)req;
    return (int)(intptr_t)data;
}

/* ------------------------------------------------------------------------ */
/* A small static root                                                      */

static void watch_outside(void)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/outside", tmp_dir);
    outside_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (outside_watch < 0 || inotify_add_watch(outside_watch, p, IN_OPEN | IN_ACCESS) < 0)
        die("inotify");
}

static void check_outside(void)
{
    char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(outside_watch, ev, sizeof(ev));
    if (n > 0) {
        const struct inotify_event *e = (const struct inotify_event *)ev;
        fprintf(stderr, "fuzz_server: '%s' outside the static root was opened or read\n",
                e->len ? e->name : "(the directory)");
        abort();
    }
}


static void put_file(const char *rel, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0)
        die("cannot write the static root");
}

static void remove_tmp(void)
{
    if (tmp_dir[0]) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "fuzz_server: could not remove %s\n", tmp_dir);
    }
}

static void make_root(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/petrel-fuzz.XXXXXX", t && *t ? t : "/tmp");
    if (mkdtemp(tmp_dir) == NULL)
        die("mkdtemp");
    atexit(remove_tmp);
    char p[600];
    snprintf(p, sizeof(p), "%s/root", tmp_dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/root/sub", tmp_dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/root/empty", tmp_dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/outside", tmp_dir);
    mkdir(p, 0755);
    put_file("outside/secret", SECRET, sizeof(SECRET) - 1);
    put_file("root/index.html", "<h1>hi</h1>\n", 12);
    put_file("root/a.txt", "hello, world\n", 13);
    put_file("root/a.txt.gz", "\x1f\x8b\x08\x00", 4);
    put_file("root/sub/style.css", "p{}\n", 4);
    put_file("root/sub/index.html", "sub\n", 4);
    /* larger than the in-memory limit: served from a descriptor */
    static char big[100000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    put_file("root/big.bin", big, sizeof(big));
    snprintf(p, sizeof(p), "%s/root/up", tmp_dir);
    if (symlink("../outside", p) < 0)
        die("symlink");
    snprintf(p, sizeof(p), "%s/root/link.txt", tmp_dir);
    if (symlink("a.txt", p) < 0)
        die("symlink");
    snprintf(p, sizeof(p), "%s/root/abs-out", tmp_dir);
    char target[600];
    snprintf(target, sizeof(target), "%s/outside/secret", tmp_dir);
    if (symlink(target, p) < 0)
        die("symlink");
    watch_outside();
}

/* ------------------------------------------------------------------------ */
/* Set-up                                                                   */

void fuzz_server_init(void)
{
    if (srv)
        return;
    signal(SIGPIPE, SIG_IGN);
    petrel__log_level = getenv("PETREL_FUZZ_LOG") ? PETREL_LOG_DEBUG : -1;
    dump = getenv("PETREL_FUZZ_DUMP") != NULL;
    make_root();
    srv = petrel__server_new();
    if (srv == NULL)
        die("petrel__server_new");
    petrel__set_builtins(petrel__builtin_modules);
    char err[256];
    static const char *const mods[] = {"hello", "echo", "wsecho"};
    for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
        if (petrel__server_load_module(srv, mods[i], err, sizeof(err)) < 0)
            die(err);
    if (petrel_route_add(srv, PETREL_GET, "/stream", h_stream, NULL) < 0 ||
        petrel_route_add(srv, PETREL_GET | PETREL_PUT, "/kv/:key", h_info, NULL) < 0 ||
        petrel_route_add(srv, PETREL_GET, "/kv/all", h_info, NULL) < 0 ||
        petrel_route_add(srv, PETREL_ANY, "/info/*", h_info, NULL) < 0 ||
        petrel_route_add(srv, PETREL_GET, "/status/418", h_status, (void *)(intptr_t)418) < 0 ||
        petrel_route_add(srv, PETREL_GET, "/status/fail", h_status,
                         (void *)(intptr_t)PETREL_EINVAL) < 0)
        die("petrel_route_add");
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.autoindex = 1;
    char root[600];
    snprintf(root, sizeof(root), "%s/root", tmp_dir);
    if (petrel_static_mount(srv, "/files/", root, &o) < 0)
        die("petrel_static_mount");
    /* small limits, so that inputs of a few KiB reach them */
    srv->cfg.max_body_size = 8192;
    srv->cfg.max_header_size = 4096;
    srv->cfg.max_uri_size = 1024;
    srv->cfg.ws_max_message_size = 8192;
    /* the worker blocks its signals for its signalfd; give them back to
     * libFuzzer (its -max_total_time, Ctrl-C): the mask as it was before */
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    if (petrel__worker_init(srv) < 0)
        die("petrel__worker_init");
    sigprocmask(SIG_SETMASK, &mask, NULL);
    /* one WebSocket connection now, so that ws.c has made its timer queue
     * (it does on the first upgrade) before zero_timeouts looks for them */
    static const char ws[] = "GET /ws HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    int nq = srv->loop.nqueues;
    fuzz_server_run(ws, sizeof(ws) - 1, NULL, 0, 0, false, FUZZ_EXPECT_WS, false);
    if (srv->loop.nqueues == nq)
        die("the WebSocket upgrade made no timer queue");
}

/* ------------------------------------------------------------------------ */
/* One connection                                                           */

static int turn(void)
{
    return petrel__loop_run_once(&srv->loop, 0);
}

/* Read and drop what the server wrote; returns the bytes read. */
static char first[16]; /* the first bytes the server wrote */
static size_t nfirst;

/* FUZZ_EXPECT_PARSED: the responses go through llhttp as a client would
 * read them (RFC 9112 §4-§7); any parse error is a malformed or misframed
 * response.  Checking stops at a 101 (the protocol changes). */
static llhttp_t rparser;
static llhttp_settings_t rsettings;
static bool rcheck;
static uint64_t nresponses;

static int on_resp_complete(llhttp_t *p)
{
    (void)p;
    nresponses++;
    return 0;
}

/* FUZZ_EXPECT_WS*: all the output, checked once the input is served. */
static char out_buf[1 << 20];
static size_t out_len;
static bool out_full;

static void out_keep(const char *data, size_t n)
{
    if (out_len + n > sizeof(out_buf)) {
        out_full = true; /* too much to keep: not checked */
        return;
    }
    memcpy(out_buf + out_len, data, n);
    out_len += n;
}

__attribute__((noreturn)) static void ws_bad(const char *what, size_t off)
{
    fprintf(stderr, "fuzz_server: server frame at byte %zu: %s\n", off, what);
    abort();
}

static bool close_code_ok(unsigned c)
{
    /* RFC 6455 §7.4.1, §7.4.2: the codes that may be sent */
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

static void check_ws_frames(bool deflate)
{
    if (out_full)
        return;
    const uint8_t *b = (const uint8_t *)out_buf;
    const char *e = memmem(out_buf, out_len, "\r\n\r\n", 4);
    if (e == NULL)
        return;
    size_t off = (size_t)(e + 4 - out_buf);
    bool closed = false, in_msg = false;
    while (off + 2 <= out_len) {
        unsigned b0 = b[off], b1 = b[off + 1], op = b0 & 0x0f;
        bool fin = b0 & 0x80, rsv1 = b0 & 0x40;
        size_t h = 2;
        uint64_t len = b1 & 0x7f;
        if (closed)
            ws_bad("a frame after the Close", off);
        if (b1 & 0x80)
            ws_bad("masked (RFC 6455 §5.1)", off);
        if (b0 & 0x30)
            ws_bad("RSV2 or RSV3 set", off);
        if (rsv1 && (!deflate || op == 0 || op >= 8))
            ws_bad("RSV1 set where no extension allows it", off);
        if (len == 126) {
            if (off + 4 > out_len)
                break;
            len = (uint64_t)b[off + 2] << 8 | b[off + 3];
            h = 4;
            if (len < 126)
                ws_bad("16-bit length for a short payload (§5.2: minimal)", off);
        } else if (len == 127) {
            if (off + 10 > out_len)
                break;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = len << 8 | b[off + 2 + i];
            h = 10;
            if (len < 65536 || (len >> 63))
                ws_bad("64-bit length not minimal or with its top bit", off);
        }
        if (op >= 8) {
            if (op > 10)
                ws_bad("reserved control opcode", off);
            if (!fin || len > 125)
                ws_bad("fragmented or long control frame (§5.5)", off);
        } else if (op >= 3) {
            ws_bad("reserved data opcode", off);
        } else if (op == 0 && !in_msg) {
            ws_bad("continuation without a message", off);
        } else if (op != 0 && in_msg) {
            ws_bad("new message inside a fragmented one", off);
        }
        if (off + h + len > out_len)
            break; /* the rest was not written yet */
        if (op == 8) {
            if (len == 1)
                ws_bad("Close with a one-byte payload (§5.5.1)", off);
            if (len >= 2 && !close_code_ok((unsigned)b[off + h] << 8 | b[off + h + 1]))
                ws_bad("Close with a code that may not be sent", off);
            closed = true;
        } else if (op < 8) {
            in_msg = !fin;
        }
        off += h + (size_t)len;
    }
}

__attribute__((noreturn)) static void h2_bad(const char *what, size_t off)
{
    fprintf(stderr, "fuzz_server: server frame at byte %zu: %s\n", off, what);
    abort();
}

/* `big`: the client may have raised SETTINGS_MAX_FRAME_SIZE (§6.5.2). */
static void check_h2_frames(bool after_101, bool big)
{
    if (out_full)
        return;
    const uint8_t *b = (const uint8_t *)out_buf;
    size_t off = 0;
    if (after_101) {
        const char *e = memmem(out_buf, out_len, "\r\n\r\n", 4);
        if (e == NULL)
            return;
        off = (size_t)(e + 4 - out_buf);
    }
    bool first_frame = true;
    while (off + 9 <= out_len) {
        uint32_t len = (uint32_t)b[off] << 16 | (uint32_t)b[off + 1] << 8 | b[off + 2];
        unsigned type = b[off + 3];
        uint32_t sid = ((uint32_t)b[off + 5] << 24 | (uint32_t)b[off + 6] << 16 |
                        (uint32_t)b[off + 7] << 8 | b[off + 8]) &
                       0x7fffffffu;
        if (first_frame && (type != 4 || sid != 0))
            h2_bad("the first frame is not SETTINGS (§3.4)", off);
        first_frame = false;
        if (type > 9)
            h2_bad("unknown frame type", off);
        if (len > 16384 && !big)
            h2_bad("frame larger than SETTINGS_MAX_FRAME_SIZE", off);
        bool conn_level = type == 4 || type == 6 || type == 7; /* SETTINGS PING GOAWAY */
        if (conn_level && sid != 0)
            h2_bad("connection frame on a stream", off);
        if (!conn_level && type != 8 && sid == 0)
            h2_bad("stream frame on stream 0", off);
        if ((type == 0 || type == 1 || type == 9) && !(sid & 1))
            h2_bad("DATA or HEADERS on a stream the client did not open", off);
        if (type == 5)
            h2_bad("PUSH_PROMISE (push is not used)", off);
        if ((type == 4 && !(b[off + 4] & 1) && len % 6) || (type == 4 && (b[off + 4] & 1) && len))
            h2_bad("SETTINGS of a bad length", off);
        if ((type == 6 && len != 8) || (type == 3 && len != 4) || (type == 8 && len != 4) ||
            (type == 7 && len < 8))
            h2_bad("control frame of a bad length", off);
        off += 9 + len;
    }
}

static void check_responses(const char *data, size_t n)
{
    if (!rcheck)
        return;
    llhttp_errno_t e = llhttp_execute(&rparser, data, n);
    if (e == HPE_PAUSED_UPGRADE) {
        rcheck = false;
    } else if (e != HPE_OK) {
        fprintf(stderr, "fuzz_server: response %llu does not parse: %s (%s)\n",
                (unsigned long long)nresponses + 1, llhttp_errno_name(e),
                llhttp_get_error_reason(&rparser));
        abort();
    }
}

static size_t drain(int fd, bool *eof)
{
    static char sink[1 << 16];
    size_t got = 0;
    while (!*eof) {
        ssize_t n = read(fd, sink, sizeof(sink));
        if (n > 0 && dump)
            fwrite(sink, 1, (size_t)n, stderr);
        if (n > 0 && nfirst < sizeof(first)) {
            size_t k = sizeof(first) - nfirst < (size_t)n ? sizeof(first) - nfirst : (size_t)n;
            memcpy(first + nfirst, sink, k);
            nfirst += k;
        }
        if (n > 0) {
            check_responses(sink, (size_t)n);
            out_keep(sink, (size_t)n);
            got += (size_t)n;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            *eof = true;
        } else {
            break;
        }
    }
    return got;
}

/* Turn the loop until nothing happens any more (bounded). */
static void settle(int fd, bool *eof)
{
    for (int i = 0; i < SETTLE_TURNS; i++) {
        int ev = turn();
        size_t got = drain(fd, eof);
        if (ev <= 0 && got == 0 && list_empty(&srv->loop.pending))
            break;
    }
}

/* Write all of it unless the server closes; false when it did. */
static bool write_all(int fd, const uint8_t *p, size_t len, bool *eof)
{
    int stuck = 0;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            stuck = 0;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (++stuck > STUCK_WRITES)
            die("the server stopped reading (input not consumed)");
        turn();
        drain(fd, eof);
    }
    return true;
}

int fuzz_server_run_heads(const fuzz_head_t heads[4], const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const fuzz_head_t *h = &heads[mode & 3];
    fuzz_server_run(h->s, h->len, data + 1, size - 1, (mode >> 2) & 0x1f, (mode & 0x80) != 0,
                    h->expect, (mode & 0x60) == 0x60);
    return 0;
}

/* Every timeout at once: the loop's queues, and the minimum-rate rule's
 * deadline (petrel__body_late reads it from the settings). */
static void zero_all(petrel__loop_t *loop, int nq)
{
    for (int i = 0; i < nq; i++)
        loop->queues[i]->timeout_ms = 0;
    srv->cfg.body_timeout_ms = 0;
    srv->cfg.body_min_rate = 0;
}

void fuzz_server_run(const void *head, size_t head_len, const uint8_t *data, size_t len,
                     uint8_t split, bool half_close, enum fuzz_expect expect, bool zero_timeouts)
{
    fuzz_server_init();
    petrel__loop_t *loop = &srv->loop;
    uint64_t saved[sizeof(loop->queues) / sizeof(loop->queues[0])];
    int nq = loop->nqueues;
    for (int i = 0; i < nq; i++)
        saved[i] = loop->queues[i]->timeout_ms;
    /* the minimum-rate rule of bodies and WebSocket messages reads its
     * deadline from the settings, not from a queue: zeroed with them (a
     * deadline never reached while the loop's time stands still would
     * re-arm its check for ever) */
    uint64_t saved_body_ms = srv->cfg.body_timeout_ms;
    size_t saved_rate = srv->cfg.body_min_rate;
    /* zero_timeouts: from the start when there is no head (the header
     * timeout then fires on the fuzz bytes), else once the head is served
     * (a handshake that timed out at once would leave nothing to fuzz) */
    if (zero_timeouts && head_len == 0)
        zero_all(loop, nq);
    nfirst = 0;
    out_len = 0;
    out_full = false;
    rcheck = expect == FUZZ_EXPECT_PARSED;
    if (rcheck) {
        llhttp_settings_init(&rsettings);
        rsettings.on_message_complete = on_resp_complete;
        llhttp_init(&rparser, HTTP_RESPONSE, &rsettings);
        nresponses = 0;
    }
    size_t live0 = petrel__pool.live;
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        die("socketpair");
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0 || petrel__conn_adopt(&srv->conns, fds[0]) < 0)
        die("adopt");
    int fd = fds[1];
    bool eof = false, open = true;
    if (head_len) {
        open = write_all(fd, head, head_len, &eof);
        settle(fd, &eof);
        if (zero_timeouts)
            zero_all(loop, nq);
    }
    /* the pieces: `split` seeds a small generator of piece sizes (1..2^k
     * bytes, k from its low bits), 0 writes everything at once; at most
     * about MAX_PIECES pieces, so that a large input costs no more than a
     * few hundred loop turns */
    uint32_t x = split * 2654435761u + 1;
    size_t off = 0, min_piece = len / MAX_PIECES + 1;
    while (open && off < len) {
        size_t n = len - off;
        if (split) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            size_t max = (size_t)1 << (split & 7);
            size_t piece = 1 + x % max;
            if (piece < min_piece)
                piece = min_piece;
            if (piece < n)
                n = piece;
        }
        open = write_all(fd, data + off, n, &eof);
        off += n;
        settle(fd, &eof);
    }
    if (open && half_close) {
        shutdown(fd, SHUT_WR);
        settle(fd, &eof);
    }
    /* whatever the input, what comes back starts as it must: a status line
     * (RFC 9112 §4), or the server's SETTINGS (RFC 9113 §3.4) */
    static const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    bool ws = expect == FUZZ_EXPECT_WS || expect == FUZZ_EXPECT_WS_DEFLATE;
    const char *want = expect == FUZZ_EXPECT_H2 ? settings
                       : expect == FUZZ_EXPECT_101 || expect == FUZZ_EXPECT_H2_101 || ws
                           ? "HTTP/1.1 101 "
                           : "HTTP/1.1 ";
    size_t wl = expect == FUZZ_EXPECT_H2 ? sizeof(settings) : strlen(want);
    size_t cmp = nfirst < wl ? nfirst : wl;
    for (size_t i = 0; i < cmp; i++) {
        if (expect == FUZZ_EXPECT_H2 && i < 3)
            continue; /* the frame's length */
        if (first[i] != want[i]) {
            fprintf(stderr, "fuzz_server: the output does not start as it must (byte %zu)\n", i);
            abort();
        }
    }
    check_outside();
    if (ws)
        check_ws_frames(expect == FUZZ_EXPECT_WS_DEFLATE);
    if (expect == FUZZ_EXPECT_H2 || expect == FUZZ_EXPECT_H2_101) {
        /* the client may have raised SETTINGS_MAX_FRAME_SIZE (id 5) */
        static const uint8_t id5[2] = {0, 5};
        check_h2_frames(expect == FUZZ_EXPECT_H2_101, memmem(data, len, id5, 2) != NULL);
    }
    close(fd);
    for (int i = 0; i < CLOSE_TURNS && srv->conns.n > 0; i++)
        turn();
    turn();                      /* the turn's end frees what was closed during it */
    for (int i = 0; i < nq; i++) /* the queues are empty again: no order to keep */
        loop->queues[i]->timeout_ms = saved[i];
    srv->cfg.body_timeout_ms = saved_body_ms;
    srv->cfg.body_min_rate = saved_rate;
    petrel__h2_stats_t st;
    petrel__h2_stats(&st);
    if (srv->conns.n != 0 || st.sessions != 0 || st.streams != 0 || petrel__pool.live != live0) {
        fprintf(stderr,
                "fuzz_server: connection not released: %zu conns, %zu h2 sessions, %zu h2 "
                "streams, %zu pool chunks live (%zu before)\n",
                srv->conns.n, st.sessions, st.streams, petrel__pool.live, live0);
        abort();
    }
}
