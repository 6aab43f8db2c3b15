/*
 * check_loop.c -- unit tests of src/runtime/loop.c: watched descriptors
 * (petrel_watch_*) and timers, in a loop of their own; and of the
 * transport's text of a peer's address (src/runtime/conn.c).
 */
#include "runtime/conn.h"
#include "runtime/loop.h"
#include "petrel.h"

#include "check_util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

static petrel__loop_t L;
static int sv[2], sv2[2];

static void setup(void)
{
    ck_assert_int_eq(petrel__loop_init(&L), 0);
    petrel__loop = &L;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv2), 0);
}

static void teardown(void)
{
    for (int i = 0; i < 2; i++) {
        close(sv[i]);
        close(sv2[i]);
    }
    petrel__loop_fini(&L);
    petrel__loop = NULL;
}

typedef struct seen {
    int calls, events, fd;
    petrel_watch_t *stop_me; /* stop this watch from the callback */
    bool stop_self;
    char got[64];
    size_t len;
} seen_t;

static void on_ready(petrel_watch_t *w, int fd, int events, void *data)
{
    seen_t *s = data;
    s->calls++;
    s->events = events;
    s->fd = fd;
    if (events & PETREL_WATCH_READ) {
        ssize_t n = read(fd, s->got + s->len, sizeof(s->got) - s->len);
        if (n > 0)
            s->len += (size_t)n;
    }
    if (s->stop_me)
        petrel_watch_stop(s->stop_me);
    if (s->stop_self)
        petrel_watch_stop(w);
}

/* A readable descriptor is reported, with its data; level-triggered. */
START_TEST(test_watch_read)
{
    seen_t s = {0};
    petrel_watch_t *w = petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &s);
    ck_assert_ptr_nonnull(w);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(s.calls, 0); /* nothing to read yet */
    ck_assert_int_eq(write(sv[1], "ping", 4), 4);
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.events, PETREL_WATCH_READ);
    ck_assert_int_eq(s.fd, sv[0]);
    ck_assert_uint_eq(s.len, 4);
    ck_assert_mem_eq(s.got, "ping", 4);
    petrel_watch_stop(w);
}
END_TEST

/* Events change with petrel_watch_set; 0 silences the watch. */
START_TEST(test_watch_set)
{
    seen_t s = {0};
    petrel_watch_t *w = petrel_watch_start(sv[0], PETREL_WATCH_WRITE, on_ready, &s);
    ck_assert_ptr_nonnull(w);
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.events, PETREL_WATCH_WRITE);
    ck_assert_int_eq(petrel_watch_set(w, 0), 0);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(petrel_watch_set(w, PETREL_WATCH_READ | PETREL_WATCH_WRITE), 0);
    ck_assert_int_eq(write(sv[1], "x", 1), 1);
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(s.calls, 2);
    ck_assert_int_eq(s.events, PETREL_WATCH_READ | PETREL_WATCH_WRITE);
    petrel_watch_stop(w);
}
END_TEST

/* A watch stopped by another's callback in the same turn (both were ready)
 * is not called; one may stop itself.  Stopped handles are freed at the
 * end of the turn (checked by the sanitizer and valgrind runs). */
START_TEST(test_watch_stop_in_callback)
{
    seen_t a = {0}, b = {0};
    petrel_watch_t *wa = petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &a);
    petrel_watch_t *wb = petrel_watch_start(sv2[0], PETREL_WATCH_READ, on_ready, &b);
    ck_assert_ptr_nonnull(wa);
    ck_assert_ptr_nonnull(wb);
    a.stop_me = wb;
    b.stop_me = wa;
    a.stop_self = b.stop_self = false;
    ck_assert_int_eq(write(sv[1], "1", 1), 1);
    ck_assert_int_eq(write(sv2[1], "2", 1), 1);
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(a.calls + b.calls, 1); /* the first one stopped the other */
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(a.calls + b.calls, 1);
    /* the survivor stops itself */
    petrel_watch_t *survivor = a.calls ? wa : wb;
    seen_t *ss = a.calls ? &a : &b;
    ss->stop_me = NULL;
    ss->stop_self = true;
    ck_assert_int_eq(write(a.calls ? sv[1] : sv2[1], "3", 1), 1);
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(ss->calls, 2);
    (void)survivor;
    ck_assert_int_eq(write(a.calls ? sv[1] : sv2[1], "4", 1), 1);
    petrel__loop_run_once(&L, 50);
    ck_assert_int_eq(ss->calls, 2); /* stopped: no more calls */
}
END_TEST

/* The other end hanging up reports READ (a read then sees the end). */
START_TEST(test_watch_hangup)
{
    seen_t s = {0};
    petrel_watch_t *w = petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &s);
    close(sv[1]);
    sv[1] = socket(AF_UNIX, SOCK_STREAM, 0); /* keep teardown's close harmless */
    petrel__loop_run_once(&L, 100);
    ck_assert_int_eq(s.calls, 1);
    ck_assert(s.events & PETREL_WATCH_READ);
    ck_assert_uint_eq(s.len, 0);
    petrel_watch_stop(w);
}
END_TEST

/* Bad arguments, and descriptors that cannot be watched, are refused with
 * errno set; the same descriptor twice is refused (one watch per fd). */
START_TEST(test_watch_refused)
{
    seen_t s = {0};
    errno = 0;
    ck_assert_ptr_null(petrel_watch_start(-1, PETREL_WATCH_READ, on_ready, &s));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(petrel_watch_start(sv[0], PETREL_WATCH_READ, NULL, &s));
    int fd = open("/dev/null", O_RDONLY); /* regular files: epoll says EPERM */
    errno = 0;
    ck_assert_ptr_null(petrel_watch_start(fd, PETREL_WATCH_READ, on_ready, &s));
    ck_assert_int_eq(errno, EPERM);
    close(fd);
    petrel_watch_t *w = petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &s);
    ck_assert_ptr_nonnull(w);
    errno = 0;
    ck_assert_ptr_null(petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &s));
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_int_eq(petrel_watch_set(NULL, 0), PETREL_EINVAL);
    petrel_watch_stop(w);
    petrel_watch_stop(NULL);
    /* outside a worker's loop */
    petrel__loop = NULL;
    ck_assert_ptr_null(petrel_watch_start(sv[0], PETREL_WATCH_READ, on_ready, &s));
    petrel__loop = &L;
}
END_TEST

/* A timer queue the loop has no room for is an error, not a queue that
 * never fires. */
START_TEST(test_tq_limit)
{
    static petrel__tq_t q[PETREL__LOOP_MAX_TQ + 1];
    int rc = 0, i;
    for (i = 0; i <= PETREL__LOOP_MAX_TQ && rc == 0; i++)
        rc = petrel__tq_init(&L, &q[i], 10, NULL);
    ck_assert_int_eq(rc, PETREL_ELIMIT);
    ck_assert_int_eq(i, PETREL__LOOP_MAX_TQ + 1);
    ck_assert(petrel__tq_registered(&L, &q[0]));
    ck_assert(!petrel__tq_registered(&L, &q[PETREL__LOOP_MAX_TQ]));
    ck_assert_int_eq(petrel__tq_init(&L, &q[0], 10, NULL), 0); /* again: no new slot */
}
END_TEST

/* Work for the end of the turn (the public petrel_turn_work_*): once per
 * turn however often added, not at all once taken back, and the turn's
 * time is the loop's. */
typedef struct turn_seen {
    petrel_turn_work_t w;
    int calls;
} turn_seen_t;

static void on_turn(petrel_turn_work_t *w)
{
    turn_seen_t *t = (turn_seen_t *)((char *)w - offsetof(turn_seen_t, w));
    t->calls++;
}

START_TEST(test_turn_work)
{
    turn_seen_t t = {.calls = 0};
    petrel_turn_work_init(&t.w, on_turn);
    petrel_turn_work_add(&t.w);
    petrel_turn_work_add(&t.w);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(t.calls, 1);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(t.calls, 1); /* not again unless added */
    petrel_turn_work_add(&t.w);
    petrel_turn_work_del(&t.w);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(t.calls, 1);
    petrel_turn_work_add(&t.w);
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(t.calls, 2);
    ck_assert_uint_eq(petrel_loop_now_ms(), L.now_ms);
    ck_assert_uint_gt(petrel_loop_now_ms(), 0);
    petrel__loop = NULL;
    ck_assert_uint_eq(petrel_loop_now_ms(), 0);
    petrel_turn_work_add(&t.w); /* outside a worker: nothing */
    petrel__loop = &L;
    petrel__loop_run_once(&L, 0);
    ck_assert_int_eq(t.calls, 2);
}
END_TEST

/* An IPv4 peer in the text inet_ntop() gives, written without it. */
START_TEST(test_peer_text)
{
    petrel__conn_t c;
    memset(&c, 0, sizeof(c));
    c.peer.in.sin_family = AF_INET;
    char buf[64], want[INET_ADDRSTRLEN];
    uint32_t fixed[] = {0, 0xffffffffu, 0x7f000001u, 0x0a006409u, 0x011403c7u, 0x09630a64u};
    uint32_t x = 2463534242u;
    for (int i = 0; i < 100000; i++) {
        uint32_t a = i < (int)(sizeof(fixed) / sizeof(fixed[0]))
                         ? fixed[i]
                         : (x ^= x << 13, x ^= x >> 17, x ^= x << 5);
        c.peer.in.sin_addr.s_addr = htonl(a);
        ck_assert_ptr_nonnull(inet_ntop(AF_INET, &c.peer.in.sin_addr, want, sizeof(want)));
        ck_assert_str_eq(petrel__conn_peer_text(&c, buf, sizeof(buf)), want);
    }
    ck_assert_str_eq(petrel__conn_peer_text(&c, buf, INET_ADDRSTRLEN - 1), "-");
    c.peer.in6.sin6_family = AF_INET6;
    ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::7", &c.peer.in6.sin6_addr), 1);
    ck_assert_str_eq(petrel__conn_peer_text(&c, buf, sizeof(buf)), "2001:db8::7");
    c.peer.sa.sa_family = AF_UNIX;
    ck_assert_str_eq(petrel__conn_peer_text(&c, buf, sizeof(buf)), "unix");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loop");
    TCase *tc = tcase_create("watch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_watch_read);
    tcase_add_test(tc, test_watch_set);
    tcase_add_test(tc, test_watch_stop_in_callback);
    tcase_add_test(tc, test_watch_hangup);
    tcase_add_test(tc, test_watch_refused);
    tcase_add_test(tc, test_tq_limit);
    tcase_add_test(tc, test_turn_work);
    tcase_add_test(tc, test_peer_text);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
