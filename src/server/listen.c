/*
 * listen.c -- accepting connections on the worker's listening sockets.
 *
 * Accepts are batched (PETREL__ACCEPT_BATCH per readiness of a listener);
 * at --max-connections, or when the process is out of descriptors, the
 * listeners leave the epoll set until a connection goes away (and, for
 * EMFILE and the like, every PETREL__ACCEPT_RETRY_MS), so a worker never
 * spins on a listener it cannot serve.  The admin listeners (--admin-listen)
 * accept into the admin server's connections, paused and closed apart from
 * the public ones: a drain closes the public listeners, the admin port
 * answers until the worker exits.
 */
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections accepted per readiness of a listener: others' events get a
 * turn between batches. */
#define PETREL__ACCEPT_BATCH 64
/* After EMFILE, ENFILE, ENOBUFS or ENOMEM: try again this often. */
#define PETREL__ACCEPT_RETRY_MS 100

struct petrel__listener {
    petrel__io_t io;
    petrel_server_t *srv;
    bool admin; /* an admin listener: its connections are srv->admin's */
};

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel__timer_t accept_retry;
static petrel__tq_t accept_retry_q;
static unsigned accept_failures; /* EMFILE and the like since the last accept */
static bool accept_said;         /* this episode's warning was logged */
static uint64_t accept_said_ms;  /* when a warning was last logged */
/* Episodes of running out follow each other as fast as connections close
 * (each close lets one accept through): a warning at most this often. */
#define ACCEPT_WARN_MS 1000
static petrel_server_t *retry_srv;

/* Stop polling the listeners of one kind (public or admin). */
static void stop_kind(petrel_server_t *srv, bool admin)
{
    if (srv->listeners == NULL)
        return;
    for (int i = 0; i < srv->nlistens; i++) {
        petrel__listener_t *l = &srv->listeners[i];
        if (l->admin == admin && l->io.fd >= 0 && l->io.events)
            petrel__io_del(petrel__loop, &l->io);
    }
}

static void pause_accepts(petrel_server_t *srv, bool admin)
{
    stop_kind(srv, admin);
    if (admin)
        srv->admin_paused = true;
    else
        srv->accept_paused = true;
}

static void on_accept(petrel__io_t *io, uint32_t events)
{
    (void)events;
    petrel__listener_t *l = (petrel__listener_t *)io;
    petrel_server_t *srv = l->srv;
    petrel__conns_t *cs = l->admin ? &srv->admin->conns : &srv->conns;
    if (cs->draining || io->fd < 0)
        return; /* an event of this turn for a listener we just closed */
    for (int i = 0; i < PETREL__ACCEPT_BATCH; i++) {
        if (cs->n >= cs->cfg->max_connections) {
            pause_accepts(srv, l->admin); /* until a connection goes away */
            return;
        }
        union {
            struct sockaddr sa;
            struct sockaddr_in6 in6;
        } addr;
        socklen_t alen = sizeof(addr);
        int fd = accept4(io->fd, &addr.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop polling the listener for a moment,
                 * keep serving the connections we have (no busy loop).  Said
                 * once per episode, not at every retry, and not again for
                 * an episode within ACCEPT_WARN_MS of the last warning. */
                uint64_t now = petrel__loop->now_ms;
                if (accept_failures++ == 0 &&
                    (accept_said_ms == 0 || now - accept_said_ms >= ACCEPT_WARN_MS)) {
                    petrel_log(PETREL_LOG_WARN,
                               "accept: %s; pausing accepts, retrying every %d ms and "
                               "whenever a connection closes",
                               strerror(errno), PETREL__ACCEPT_RETRY_MS);
                    accept_said = true;
                    accept_said_ms = now;
                }
                pause_accepts(srv, l->admin);
                petrel__timer_arm(petrel__loop, &accept_retry, &accept_retry_q);
                return;
            }
            petrel_log(PETREL_LOG_ERROR, "accept: %s", strerror(errno));
            return;
        }
        if (accept_failures) {
            if (accept_said)
                petrel_log(PETREL_LOG_INFO, "accept: resumed after %u failed attempts",
                           accept_failures);
            accept_failures = 0;
            accept_said = false;
        }
        /* TCP_NODELAY is inherited from the listening socket; a connection
         * that cannot get its struct is closed (out of memory) */
        petrel__conn_open(cs, fd, &addr.sa, alen);
    }
}

static bool may_resume(const petrel_server_t *srv)
{
    return srv->accept_paused && !srv->conns.draining && srv->conns.n < srv->cfg.max_connections;
}

static bool admin_may_resume(const petrel_server_t *srv)
{
    return srv->admin_paused && srv->admin && srv->admin->conns.n < srv->admin->cfg.max_connections;
}

static void resume(petrel_server_t *srv)
{
    if (may_resume(srv) || admin_may_resume(srv))
        petrel__listen_start(srv);
}

static void on_accept_retry_fire(petrel__timer_t *t)
{
    (void)t;
    if (retry_srv)
        resume(retry_srv);
}

void petrel__listen_on_gone(petrel_server_t *srv)
{
    resume(srv);
}

int petrel__listen_start(petrel_server_t *srv)
{
    if (srv->listeners == NULL) {
        petrel__listener_t *ls = calloc((size_t)srv->nlistens, sizeof(*ls));
        if (ls == NULL)
            return PETREL_ENOMEM;
        for (int i = 0; i < srv->nlistens; i++) {
            ls[i].io.fd = srv->listens[i].fd;
            ls[i].io.cb = on_accept;
            ls[i].srv = srv;
            ls[i].admin = srv->listens[i].admin && srv->admin;
        }
        srv->listeners = ls;
        retry_srv = srv;
        list_init(&accept_retry.node);
        int rc = petrel__tq_init(petrel__loop, &accept_retry_q, PETREL__ACCEPT_RETRY_MS,
                                 on_accept_retry_fire);
        if (rc < 0)
            return rc;
    }
    bool pub = !srv->conns.draining && srv->conns.n < srv->cfg.max_connections;
    bool adm = srv->admin && srv->admin->conns.n < srv->admin->cfg.max_connections;
    for (int i = 0; i < srv->nlistens; i++) {
        petrel__listener_t *l = &srv->listeners[i];
        if (!(l->admin ? adm : pub))
            continue;
        /* a socket every worker shares (systemd's): one worker woken per
         * connection, not all of them */
        uint32_t ev = EPOLLIN | (srv->listens[i].inherited >= 0 ? EPOLLEXCLUSIVE : 0);
        if (l->io.fd >= 0 && l->io.events == 0 && petrel__io_add(petrel__loop, &l->io, ev) < 0)
            return PETREL_EIO;
    }
    if (pub)
        srv->accept_paused = false;
    if (adm)
        srv->admin_paused = false;
    return 0;
}

void petrel__listen_stop(petrel_server_t *srv)
{
    stop_kind(srv, false);
}

static void close_kind(petrel_server_t *srv, bool admin)
{
    stop_kind(srv, admin);
    for (int i = 0; i < srv->nlistens; i++) {
        bool is_admin = srv->listens[i].admin && srv->admin;
        if (is_admin != admin)
            continue;
        if (srv->listens[i].fd >= 0) {
            close(srv->listens[i].fd);
            srv->listens[i].fd = -1;
        }
        if (srv->listeners)
            srv->listeners[i].io.fd = -1;
    }
}

void petrel__listen_close(petrel_server_t *srv)
{
    close_kind(srv, false);
}

void petrel__listen_close_admin(petrel_server_t *srv)
{
    close_kind(srv, true);
}
