/*
 * check_wait.h -- a backend for handlers that wait (petrel.h, "Waiting"),
 * shared by check_http1 and check_h2: a socketpair, one end watched in the
 * worker's loop (what a database client does with its socket).  GET /wait
 * sends its request's number to the backend and returns PETREL_LATER; the
 * test plays the backend, answering numbers in the order it likes
 * (backend_answer); the watch callback answers the requests ("reply N").
 * Each suite compiles its own copy.
 */
#ifndef CHECK_WAIT_H
#define CHECK_WAIT_H

#include "petrel.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MAX 256
static int be_fd[2] = {-1, -1};
static petrel_watch_t *be_watch;
static petrel_req_t *waiting[WAIT_MAX];
static int nwait_sent; /* numbers given out */
static int aborts;     /* abort callbacks run */
static int late_rc;    /* what the last late answer returned */

static void wait_aborted(petrel_req_t *req, void *data)
{
    (void)req;
    aborts++;
    (void)data;
}

static void be_reply(petrel_watch_t *w, int fd, int events, void *data)
{
    (void)w, (void)data;
    if (!(events & PETREL_WATCH_READ))
        return; /* no Check call here: it runs while heap calls are counted */
    unsigned char ids[64];
    ssize_t n = read(fd, ids, sizeof(ids));
    for (ssize_t i = 0; i < n; i++) {
        petrel_req_t *req = waiting[ids[i]];
        waiting[ids[i]] = NULL;
        if (req == NULL)
            continue;
        char body[32];
        int len = snprintf(body, sizeof(body), "reply %u", ids[i]);
        late_rc = petrel_send_copy(req, 200, "text/plain", body, (size_t)len);
    }
}

static int h_wait(petrel_req_t *req, void *data)
{
    (void)data;
    if (be_watch == NULL) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, be_fd), 0);
        be_watch = petrel_watch_start(be_fd[0], PETREL_WATCH_READ, be_reply, NULL);
        ck_assert_ptr_nonnull(be_watch);
    }
    unsigned char id = (unsigned char)nwait_sent++;
    waiting[id] = req;
    if (petrel_req_on_abort(req, wait_aborted, NULL) < 0 || write(be_fd[0], &id, 1) != 1)
        return 500;
    return PETREL_LATER;
}

/* The test, as the backend: take the numbers sent so far, answer `id`. */
static void backend_answer(unsigned char id)
{
    unsigned char junk[64];
    while (read(be_fd[1], junk, sizeof(junk)) > 0)
        ;
    ck_assert_int_eq(write(be_fd[1], &id, 1), 1);
}

static void wait_setup(void)
{
    be_watch = NULL;
    nwait_sent = aborts = late_rc = 0;
    memset(waiting, 0, sizeof(waiting));
}

static void wait_teardown(void)
{
    if (be_watch)
        petrel_watch_stop(be_watch);
    be_watch = NULL;
    for (int i = 0; i < 2; i++)
        if (be_fd[i] >= 0)
            close(be_fd[i]);
    be_fd[0] = be_fd[1] = -1;
}

#endif /* CHECK_WAIT_H */
