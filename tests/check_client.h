/*
 * check_client.h -- the loopback client of the Check suites that drive a
 * protocol end to end (check_http1, check_ws, check_h2, check_static): one
 * end of a socketpair is adopted by the server's loop as a connection, the
 * test writes and reads the other end and turns the loop by hand.  No
 * sockets to a port, no sleeps.  Each suite compiles its own copy (static
 * functions).
 *
 * The write, pull and wait helpers make no Check call: they run while the
 * heap hook of check_util.h counts (check ck_client_write's result after).
 */
#ifndef CHECK_CLIENT_H
#define CHECK_CLIENT_H

#include "runtime/loop.h"
#include "server/server.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* A new connection of `srv` (its worker started): returns the client's end,
 * non-blocking. */
static inline int ck_conn_open(petrel_server_t *srv)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ck_assert_int_eq(petrel__conn_adopt(&srv->conns, sv[0]), 0);
    ck_assert_int_eq(fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK), 0);
    return sv[1];
}

/* One turn of the worker's loop, waiting up to `ms` for an event. */
static inline int ck_turn(int ms)
{
    return petrel__loop_run_once(petrel__loop, ms);
}

/* A byte-level client with a receive buffer of its own. */
typedef struct ck_client {
    int fd;
    bool eof;
    bool rewind; /* start over at the buffer's start once all is consumed */
    size_t len;  /* bytes in buf */
    size_t off;  /* bytes of buf consumed by the test */
    size_t cap;
    char *buf;
} ck_client_t;

/* Open a connection of `srv` with a `cap`-byte receive buffer. */
static inline void ck_client_open(ck_client_t *c, petrel_server_t *srv, size_t cap, bool rewind)
{
    c->fd = ck_conn_open(srv);
    c->eof = false;
    c->rewind = rewind;
    c->len = c->off = 0;
    c->cap = cap;
    if (c->buf == NULL)
        c->buf = malloc(cap);
    ck_assert_ptr_nonnull(c->buf);
}

static inline void ck_client_close(ck_client_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Read what the server wrote; returns the number of bytes read. */
static inline size_t ck_client_pull(ck_client_t *c)
{
    size_t got = 0;
    if (c->rewind && c->off == c->len)
        c->off = c->len = 0;
    while (!c->eof && c->len < c->cap) {
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            got += (size_t)n;
        } else if (n == 0) {
            c->eof = true;
        } else {
            if (errno == ECONNRESET)
                c->eof = true;
            break;
        }
    }
    return got;
}

/* Write all of `data`, turning the loop (and reading) while the socket is
 * full.  False when the server closed the connection, or nothing moved for
 * `max_stuck` turns. */
static inline bool ck_client_write(ck_client_t *c, const void *data, size_t len, int max_stuck)
{
    const char *p = data;
    int stuck = 0;
    while (len > 0) {
        ssize_t n = write(c->fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            stuck = 0;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return false;
        if (++stuck > max_stuck)
            return false;
        ck_turn(0);
        ck_client_pull(c);
    }
    return true;
}

/* Turn the loop until the client holds `n` unconsumed bytes; false when
 * the server closed first or `turns` turns went by. */
static inline bool ck_client_wait(ck_client_t *c, size_t n, int turns)
{
    for (int i = 0; i < turns && c->len - c->off < n; i++) {
        ck_turn(0);
        ck_client_pull(c);
        if (c->eof && c->len - c->off < n)
            return false;
    }
    return c->len - c->off >= n;
}

/* Turn the loop, waiting up to `ms` per turn, until the server closes the
 * connection; false when it did not within `turns` turns. */
static inline bool ck_client_wait_eof(ck_client_t *c, int turns, int ms)
{
    for (int i = 0; i < turns && !c->eof; i++) {
        ck_turn(ms);
        ck_client_pull(c);
    }
    return c->eof;
}

#endif /* CHECK_CLIENT_H */
