/*
 * worker.c -- the master process and its workers.
 *
 * The master opens one listening socket per worker and address, all with
 * SO_REUSEPORT so the kernel spreads connections across workers, and keeps
 * them open: a worker that dies is restarted on the same socket, and no
 * connection waiting in its accept queue is lost.  SIGTERM/SIGINT make every
 * worker drain: stop accepting, close idle connections, finish the requests
 * in flight, exit -- or give up after --drain-timeout.
 */
#include "petrel-int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Worker                                                                   */

static petrel__io_t sig_io;
static petrel__timer_t drain_timer;
static petrel_server_t *the_srv;

static void close_all(petrel_server_t *srv)
{
    while (!list_empty(&srv->conns)) {
        petrel__conn_t *c = container_of(srv->conns.next, petrel__conn_t, link);
        petrel__conn_close(c);
    }
}

static void on_drain_timeout(petrel__timer_t *t)
{
    (void)t;
    if (the_srv->nconns)
        petrel_log(PETREL_LOG_WARN, "drain timeout: closing %zu connections", the_srv->nconns);
    close_all(the_srv);
    the_srv->loop.stop = true;
}

static void start_drain(petrel_server_t *srv)
{
    if (srv->draining)
        return;
    srv->draining = true;
    petrel__listen_stop(srv);
    for (int i = 0; i < srv->nlistens; i++)
        if (srv->listens[i].fd >= 0) {
            close(srv->listens[i].fd);
            srv->listens[i].fd = -1;
        }
    petrel__conn_close_idle(srv);
    drain_timer.cb = on_drain_timeout;
    petrel__timer_arm(&srv->loop, &drain_timer, &srv->tq_drain);
    if (srv->nconns == 0)
        srv->loop.stop = true;
}

static void on_signal(petrel__io_t *io, uint32_t events)
{
    (void)events;
    struct signalfd_siginfo si;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            start_drain(the_srv);
    }
}

static void on_tick(petrel__loop_t *loop)
{
    static time_t flushed;
    petrel__conn_reap();
    if (petrel__access_log_on && loop->now_sec != flushed) {
        flushed = loop->now_sec;
        petrel__access_log_flush();
    }
}

int petrel__worker_init(petrel_server_t *srv)
{
    the_srv = srv;
    if (petrel__loop_init(&srv->loop) < 0)
        return PETREL_EIO;
    petrel__loop = &srv->loop;
    petrel__tq_init(&srv->loop, &srv->tq_header, srv->cfg.header_timeout_ms);
    petrel__tq_init(&srv->loop, &srv->tq_keepalive, srv->cfg.keepalive_timeout_ms);
    petrel__tq_init(&srv->loop, &srv->tq_send, srv->cfg.send_timeout_ms);
    petrel__tq_init(&srv->loop, &srv->tq_drain, srv->cfg.drain_timeout_ms);
    petrel__tq_init(&srv->loop, &srv->tq_linger, 2000);
    list_init(&drain_timer.node);
    srv->loop.on_tick = on_tick;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sig_io.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    sig_io.cb = on_signal;
    if (sig_io.fd < 0 || petrel__io_add(&srv->loop, &sig_io, EPOLLIN) < 0)
        return PETREL_EIO;
    for (int i = 0; i < srv->nmodules; i++)
        if (srv->modules[i]->worker_init) {
            int rc = srv->modules[i]->worker_init(srv);
            if (rc < 0) {
                petrel_log(PETREL_LOG_ERROR, "module '%s': worker init failed: %s",
                           srv->modules[i]->name, petrel_strerror(rc));
                return rc;
            }
        }
    return 0;
}

int petrel__worker_run(petrel_server_t *srv)
{
    if (srv->nlistens && petrel__listen_start(srv) < 0)
        return PETREL_EIO;
    int rc = petrel__loop_run(&srv->loop);
    petrel__conn_reap();
    return rc;
}

void petrel__worker_fini(petrel_server_t *srv)
{
    close_all(srv);
    petrel__conn_reap();
    for (int i = srv->nmodules - 1; i >= 0; i--)
        if (srv->modules[i]->worker_fini)
            srv->modules[i]->worker_fini(srv);
    if (petrel__access_log_on)
        petrel__access_log_flush();
    if (sig_io.fd >= 0)
        close(sig_io.fd);
    petrel__loop_fini(&srv->loop);
    petrel__pool_fini(&petrel__pool);
}

/* ------------------------------------------------------------------------ */
/* Master                                                                   */

typedef struct slot {
    pid_t pid;
    time_t started;
    int *fds; /* one listening socket per address */
} slot_t;

static int open_listener(petrel__listen_t *l, char *err, size_t errlen)
{
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", l->text, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (l->addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    /* accepted sockets inherit TCP_NODELAY; TCP_DEFER_ACCEPT wakes us when
     * the first bytes are there, so a new connection is read at once */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&l->addr, l->addrlen) < 0 || listen(fd, 4096) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", l->text, strerror(errno));
        close(fd);
        return -1;
    }
    /* a port 0 becomes the kernel's choice: every worker shares it */
    getsockname(fd, (struct sockaddr *)&l->addr, &l->addrlen);
    return fd;
}

static pid_t spawn(petrel_server_t *srv, slot_t *slots, int nslots, int idx)
{
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0) {
            slots[idx].pid = pid;
            slots[idx].started = time(NULL);
        }
        return pid;
    }
    /* the worker */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        _exit(0);
    for (int s = 0; s < nslots; s++)
        for (int i = 0; i < srv->nlistens; i++)
            if (s != idx)
                close(slots[s].fds[i]);
    for (int i = 0; i < srv->nlistens; i++)
        srv->listens[i].fd = slots[idx].fds[i];
    int rc = petrel__worker_init(srv);
    if (rc == 0)
        rc = petrel__worker_run(srv);
    petrel__worker_fini(srv);
    _exit(rc == 0 ? 0 : 3);
}

int petrel__master_run(petrel_server_t *srv)
{
    char err[512];
    int n = srv->cfg.workers;
    slot_t *slots = calloc((size_t)n, sizeof(*slots));
    if (slots == NULL)
        return 1;
    for (int s = 0; s < n; s++) {
        slots[s].fds = calloc((size_t)srv->nlistens, sizeof(int));
        for (int i = 0; i < srv->nlistens; i++) {
            int fd = open_listener(&srv->listens[i], err, sizeof(err));
            if (fd < 0) {
                fprintf(stderr, "petrel: %s\n", err);
                return 1;
            }
            slots[s].fds[i] = fd;
        }
    }
    for (int i = 0; i < srv->nlistens; i++) {
        char host[64] = "?";
        int port = 0;
        struct sockaddr_storage *a = &srv->listens[i].addr;
        if (a->ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)a)->sin_addr, host, sizeof(host));
            port = ntohs(((struct sockaddr_in *)a)->sin_port);
        } else if (a->ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a)->sin6_addr, host, sizeof(host));
            port = ntohs(((struct sockaddr_in6 *)a)->sin6_port);
        }
        petrel_log(PETREL_LOG_INFO, "listening on %s%s%s:%d with %d worker%s",
                   a->ss_family == AF_INET6 ? "[" : "", host, a->ss_family == AF_INET6 ? "]" : "",
                   port, n, n == 1 ? "" : "s");
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);

    for (int s = 0; s < n; s++)
        if (spawn(srv, slots, n, s) < 0) {
            fprintf(stderr, "petrel: fork: %s\n", strerror(errno));
            return 1;
        }

    bool stopping = false;
    int alive = n, status = 0;
    struct timespec stop_deadline = {0, 0};
    while (alive > 0) {
        struct timespec tmo = {1, 0};
        siginfo_t si;
        int sig = sigtimedwait(&set, &si, &tmo);
        if (sig == SIGTERM || sig == SIGINT) {
            if (!stopping) {
                stopping = true;
                petrel_log(PETREL_LOG_INFO, "%s: draining workers",
                           sig == SIGTERM ? "SIGTERM" : "SIGINT");
                clock_gettime(CLOCK_MONOTONIC, &stop_deadline);
                stop_deadline.tv_sec += (time_t)(srv->cfg.drain_timeout_ms / 1000) + 5;
                for (int s = 0; s < n; s++) {
                    for (int i = 0; i < srv->nlistens; i++)
                        close(slots[s].fds[i]);
                    if (slots[s].pid > 0)
                        kill(slots[s].pid, SIGTERM);
                }
            }
        }
        /* reap */
        pid_t pid;
        int ws;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
            for (int s = 0; s < n; s++) {
                if (slots[s].pid != pid)
                    continue;
                slots[s].pid = 0;
                alive--;
                if (stopping)
                    break;
                if (WIFSIGNALED(ws))
                    petrel_log(PETREL_LOG_ERROR, "worker %d (pid %d) killed by signal %d; "
                               "restarting it", s, (int)pid, WTERMSIG(ws));
                else
                    petrel_log(PETREL_LOG_ERROR, "worker %d (pid %d) exited with status %d; "
                               "restarting it", s, (int)pid, WEXITSTATUS(ws));
                if (WIFEXITED(ws) && WEXITSTATUS(ws) == 3 && time(NULL) - slots[s].started < 2) {
                    petrel_log(PETREL_LOG_ERROR, "worker %d failed at start-up; stopping", s);
                    status = 1;
                    stopping = true;
                    clock_gettime(CLOCK_MONOTONIC, &stop_deadline);
                    stop_deadline.tv_sec += 5;
                    for (int k = 0; k < n; k++)
                        if (slots[k].pid > 0)
                            kill(slots[k].pid, SIGTERM);
                    break;
                }
                if (time(NULL) - slots[s].started < 1)
                    sleep(1); /* do not spin on a worker that dies at once */
                if (spawn(srv, slots, n, s) > 0)
                    alive++;
                break;
            }
        }
        if (stopping && alive > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec >= stop_deadline.tv_sec)
                for (int s = 0; s < n; s++)
                    if (slots[s].pid > 0)
                        kill(slots[s].pid, SIGKILL);
        }
    }
    for (int s = 0; s < n; s++)
        free(slots[s].fds);
    free(slots);
    return status;
}
