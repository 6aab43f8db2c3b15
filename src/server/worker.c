/*
 * worker.c -- the master process and its workers.
 *
 * The master opens one listening socket per worker and address, all with
 * SO_REUSEPORT so the kernel spreads connections across workers, and keeps
 * them open: a worker that dies is restarted on the same socket, and no
 * connection waiting in its accept queue is lost.  SIGTERM/SIGINT make every
 * worker drain: stop accepting, close idle connections, finish the requests
 * in flight, exit -- or give up after --drain-timeout.  SIGHUP (and --dev,
 * when a module file changes) reloads the modules into new workers on the
 * same sockets and retires the old ones (see "Reload" below).
 *
 * With --admin-listen, a SIGTERM first makes /readyz answer 503 and waits
 * --drain-delay while everything still serves, so that a load balancer
 * stops sending before the listeners close; the admin port answers until
 * the workers exit.  SIGUSR1 opens the log files again, in the master and
 * every worker.  Under systemd (Type=notify) the master tells the service
 * manager when the workers accept (READY=1), when a reload starts and ends
 * (RELOADING=1 ... READY=1) and when the drain starts (STOPPING=1).
 *
 * Why this file is about 1,000 lines: the master's life (workers, their
 * restarts, reloads, drains, signals and systemd's notifications) is one
 * state machine over the same slots.
 */
#include "server/server.h"

#include "runtime/log.h"
#include "runtime/fault.h"
#include "protocols/h2.h"
#include "protocols/proto.h"
#include "protocols/http1.h"
#include "protocols/h2.h"
#include "framework/pubsub.h"
#include "runtime/metrics.h"
#include "runtime/sdnotify.h"
#include "runtime/arena.h"
#include "runtime/sizeclass.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PETREL_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PETREL_LSAN 1
#endif
#endif
#ifdef PETREL_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* ------------------------------------------------------------------------ */
/* Worker                                                                   */

/* Per worker process (doc/architecture.md, "Processes"). */
static petrel__io_t sig_io;
static petrel__timer_t drain_timer;
static petrel_server_t *the_srv;
/* Set by the master before it forks a worker. */
static pid_t master_pid;
static uint64_t next_req_base; /* the worker's request ids start above it */

static void on_drain_timeout(petrel__timer_t *t)
{
    (void)t;
    if (the_srv->conns.n)
        petrel_log(PETREL_LOG_WARN, "drain timeout: closing %zu connections", the_srv->conns.n);
    petrel__conns_close_all(&the_srv->conns);
    the_srv->loop.stop = true;
}

/*
 * One drain for SIGTERM/SIGINT and for SIGUSR2 from the master (a reload:
 * new workers already accept on the same listening sockets): stop
 * accepting, ask every connection's protocol to finish what is in flight
 * and take nothing new (HTTP/1.1: Connection: close; h2: GOAWAY; WebSocket:
 * Close 1001), exit when none is left or at --drain-timeout.  The one
 * difference: SIGTERM closes idle HTTP/1.1 connections at once, a reload
 * does not -- a client may be sending its next request on one right now and
 * would see the connection close without an answer; each of them gets its
 * next response with Connection: close, or closes at its keep-alive or the
 * drain timeout.
 */
static petrel__pending_t drain_pending;

/* The end of the loop turn in which the drain began: the listeners left
 * epoll then, but an accept event of the same turn may still have followed
 * (and been served).  Close them now, not before: an accept on a closed
 * descriptor would fail with EBADF. */
static void on_drain_pending(petrel__pending_t *p)
{
    (void)p;
    petrel_server_t *srv = the_srv;
    petrel__listen_close(srv);
    /* a connection closed this turn may have set stop, one accepted later in
     * the turn must still be served */
    srv->loop.stop = srv->conns.n == 0;
}

static void start_drain(petrel_server_t *srv, bool close_idle)
{
    if (!srv->conns.draining) {
        petrel__pubsub_drain(); /* our ring goes to a successor */
        petrel__listen_stop(srv);
        drain_pending.cb = on_drain_pending;
        petrel__pending_add(&srv->loop, &drain_pending);
        petrel__timer_arm(&srv->loop, &drain_timer, &srv->tq_drain);
    }
    petrel__conns_drain(&srv->conns, close_idle);
    /* the loop stops at the end of this turn if no connection is left
     * (on_drain_pending) */
}

static void on_signal(petrel__io_t *io, uint32_t events)
{
    (void)events;
    struct signalfd_siginfo si;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            /* the master gone (killed): the instance drains, /readyz says so */
            if (getppid() != master_pid)
                petrel__metrics_instance_set(PETREL__I_DRAINING, 1);
            start_drain(the_srv, true);
        } else if (si.ssi_signo == SIGUSR2) {
            /* a reload retires this worker: its successor accepts on the
             * same sockets, the admin ones too */
            start_drain(the_srv, false);
            petrel__listen_close_admin(the_srv);
        } else if (si.ssi_signo == SIGUSR1) {
            petrel__logs_reopen();
        }
    }
}

/* A connection went away: accept again if we paused, stop once a drain has
 * nothing left. */
static void on_conn_gone(petrel__conns_t *cs)
{
    petrel_server_t *srv = the_srv;
    petrel__listen_on_gone(srv);
    if (cs->draining && cs->n == 0)
        srv->loop.stop = true;
}

/*
 * Memory that comes back.  A burst of connections leaves free memory behind
 * in the worker's free lists: arena chunks in the pool, nghttp2's blocks in
 * the size-class free lists (paged blocks with their pages), the structs of
 * connections, HTTP/1.1 states and request slots, h2 stream slots, and the
 * heap pages that malloc keeps.  Every --memory-release-delay while the
 * worker is busy, and until nothing is left over once it is idle:
 *   - the pool and the size classes give back what they did not dip into
 *     since the last time (their low-water marks: not the working set),
 *     keeping --memory-reserve bytes for the next burst, half in chunks,
 *     half in paged blocks (small blocks are all given back: a few of them
 *     scattered through the heap would each pin a page);
 *   - the free lists of structs keep reserve / 64 KiB of each (4 by
 *     default), for the same reason;
 *   - malloc_trim(0) hands the free heap pages to the kernel (glibc:
 *     MADV_DONTNEED of every whole free page, not only the heap's top).
 * So memory past the working set comes back between one and two delays
 * after a burst ends.  The cost on the request path: one test per loop turn
 * (on_tick: is the timer armed?) and a low-water compare per chunk or block
 * taken from a free list.
 */
static petrel__tq_t tq_release;
static petrel__timer_t release_timer;
static bool release_fired; /* this loop turn is the timer's own */
static size_t heap_freed;  /* bytes freed to the heap since the last malloc_trim */
#define TRIM_MIN (64u << 10)

static void on_release(petrel__timer_t *t)
{
    (void)t;
    const petrel__config_t *cfg = &the_srv->cfg;
    size_t keep = cfg->memory_reserve / 2, structs = cfg->memory_reserve >> 16;
    size_t given = petrel__pool_trim(&petrel__pool, keep / PETREL_CHUNK_SIZE) * PETREL_CHUNK_SIZE;
    given += petrel__sc_trim(keep);
    given += petrel__conns_trim(structs) + petrel__http1_trim(structs) + petrel__h2_trim(structs);
    size_t rest = petrel__pool.nfree * (size_t)PETREL_CHUNK_SIZE + petrel__sc_free_bytes();
    heap_freed += given;
    /* malloc_trim walks the heap: once there is enough for it to give
     * back, or once the worker is idle (nothing more came back) */
    if (heap_freed >= TRIM_MIN || (given == 0 && heap_freed > 0)) {
#ifdef __GLIBC__
        malloc_trim(0); /* (other C libraries give free pages back by themselves, or never) */
#endif
        heap_freed = 0;
    }
    release_fired = true;
    /* more to give back once the working set is idle: look again */
    if (given || heap_freed || rest > cfg->memory_reserve)
        petrel__timer_arm(petrel__loop, &release_timer, &tq_release);
}

static void on_tick(petrel__loop_t *loop)
{
    static time_t flushed;
    if (unlikely(release_timer.q == NULL)) {
        if (!release_fired)
            petrel__timer_arm(loop, &release_timer, &tq_release);
        release_fired = false;
    }
    petrel__conns_reap();
    if (petrel__alog_on && loop->now_sec != flushed) {
        flushed = loop->now_sec;
        petrel__alog_flush();
    }
}

int petrel__worker_init(petrel_server_t *srv)
{
    the_srv = srv;
    if (petrel__loop_init(&srv->loop) < 0)
        return PETREL_EIO;
    petrel__loop = &srv->loop;
    int rc = petrel__entry_init(&srv->cfg);
    if (rc < 0 || (rc = petrel__conns_init(&srv->conns, &srv->cfg, srv, &petrel__entry_ops)) < 0 ||
        (rc = petrel__tq_init(&srv->loop, &srv->tq_drain, srv->cfg.drain_timeout_ms,
                              on_drain_timeout)) < 0 ||
        (rc = petrel__tq_init(&srv->loop, &tq_release, srv->cfg.memory_release_delay_ms,
                              on_release)) < 0 ||
        (rc = petrel__req_worker_init(&srv->cfg)) < 0 ||
        (rc = petrel__pubsub_worker_init(&srv->cfg)) < 0)
        return rc;
    petrel__conns_worker = &srv->conns;
    srv->conns.on_gone = on_conn_gone;
    srv->conns.router = srv->router;
    srv->conns.upgrade = petrel__h2_upgrade;
    srv->conns.next_req_id = next_req_base;
    if (petrel__server_has_admin(srv) && (rc = petrel__admin_init(srv)) < 0) {
        petrel_log(PETREL_LOG_ERROR, "admin listener: %s", petrel_strerror(rc));
        return rc;
    }
    list_init(&drain_timer.node);
    list_init(&drain_pending.node);
    list_init(&release_timer.node);
    srv->loop.on_tick = on_tick;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sig_io.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    sig_io.cb = on_signal;
    if (sig_io.fd < 0 || petrel__io_add(&srv->loop, &sig_io, EPOLLIN) < 0)
        return PETREL_EIO;
    if (srv->cfg.watchdog_timeout_ms && petrel__fault_self)
        srv->loop.busy = &petrel__fault_self->busy_ms;
    for (int i = 0; i < srv->nmodules; i++)
        if (srv->modules[i]->worker_init) {
            petrel__fault_stage("module '%s' worker_init", srv->modules[i]->name);
            rc = srv->modules[i]->worker_init(srv);
            petrel__fault_stage("%s", "");
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
    petrel__conns_reap();
    return rc;
}

void petrel__worker_fini(petrel_server_t *srv)
{
    petrel__conns_close_all(&srv->conns);
    petrel__req_worker_fini(); /* requests their handlers still held */
    petrel__conns_reap();
    petrel__pubsub_worker_fini();
    petrel__listen_close_admin(srv);
    petrel__admin_fini(srv);
    for (int i = srv->nmodules - 1; i >= 0; i--)
        if (srv->modules[i]->worker_fini)
            srv->modules[i]->worker_fini(srv);
    if (petrel__alog_on)
        petrel__alog_flush();
    if (sig_io.fd >= 0)
        close(sig_io.fd);
    petrel__loop_fini(&srv->loop);
    petrel__pool_fini(&petrel__pool);
}

/* ------------------------------------------------------------------------ */
/* Master                                                                   */

/*
 * Reload.  The master holds the routes and modules that workers are forked
 * with (a generation: srv->router, srv->modules, srv->module_handles).  A
 * reload (SIGHUP, or a module file changing under --dev) builds a new
 * generation with srv->setup() -- the module files loaded again, every init
 * run again -- and forks a successor for every worker, on the same listening
 * sockets.  Each worker writes its pid to the ready pipe once worker_init has
 * succeeded, just before it starts accepting.  When every successor is ready,
 * the old workers get SIGUSR2: they stop accepting and finish what they have
 * (start_drain), while the successors take the connections queued on the
 * shared sockets, so no connection is refused or lost.  When a successor fails
 * to start (or is not ready within RELOAD_TIMEOUT_MS), the successors are
 * retired instead and the master goes back to the previous generation: the
 * old workers never stopped serving.
 */

#define RELOAD_TIMEOUT_MS 30000
/* A worker killed by the watchdog (SIGABRT) that is still there this long
 * after (it blocked or caught the signal) gets SIGKILL. */
#define WD_KILL_MS 2000
/* Restarts of a worker that dies before it serves (or at once): after
 * RESTART_BASE_MS, doubled with each failure in a row, at most
 * RESTART_MAX_MS; at --restart-limit failures in a row the master stops. */
#define RESTART_BASE_MS 500
#define RESTART_MAX_MS 30000
#define DEV_DEBOUNCE_MS 150
/* Request ids: the n-th worker process the master forks numbers its
 * requests from n * REQ_ID_STRIDE + 1, so that an id names one request of
 * the instance (the JSON access log's request_id, "request ID:" in the
 * error log).  "3000000000017": the 17th request of the third worker. */
#define REQ_ID_STRIDE 1000000000000ull

typedef struct gen {
    petrel__router_t *router;
    const petrel_module_t **modules;
    void **handles;
    int nmodules;
} gen_t;

typedef struct slot {
    pid_t pid;  /* the serving worker, 0 if none */
    pid_t next; /* its successor during a reload, 0 if none */
    bool next_ready;
    bool ready;
    time_t started;
    uint64_t started_ms;
    uint64_t restart_at; /* a restart is due at this time (ms), 0 if none */
    int fails;           /* its workers that died before serving (or at once), in a row */
    pid_t wd_pid;        /* the worker the watchdog killed, 0 if none */
    uint64_t wd_at;      /* when (ms); SIGKILL if it is still there WD_KILL_MS later */
    uint64_t wd_stuck;   /* how long its loop turn had lasted then (ms) */
    int *fds;            /* one listening socket per address */
} slot_t;

typedef struct retiree {
    pid_t pid;
    uint64_t kill_at; /* SIGKILL if it is still there then */
} retiree_t;

typedef struct master {
    petrel_server_t *srv;
    slot_t *slots;
    int n;
    retiree_t *ret;
    int nret, capret;
    int sfd;      /* signalfd: SIGCHLD, SIGTERM, SIGINT, SIGHUP */
    int ready[2]; /* workers write their pid here when they accept */
    int wfd;      /* inotify on module files (--dev), or -1 */
    bool stopping;
    int status;
    uint64_t stop_at;
    bool reloading, reload_again;
    uint64_t reload_deadline;
    gen_t prev;          /* during a reload: the generation being replaced */
    unsigned serving;    /* the generation the workers serve */
    uint64_t rebuild_at; /* --dev: reload at this time (ms), 0 if none */
    uint64_t drain_at;   /* SIGTERM with --drain-delay: the drain starts then (ms) */
    bool told_ready;     /* READY=1 sent to systemd (once every worker accepted) */
    bool told_listening; /* "listening on ..." logged (once every worker accepted) */
    uint64_t spawned;    /* workers forked so far */
} master_t;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* The trial of a generation                                                */

/*
 * A module's init runs in the master, and whatever it sets up is inherited
 * by the workers: a crash there would take the master down, and with it
 * every worker.  So a generation (at start-up, on SIGHUP, on a --dev
 * rebuild) is first loaded by a child process, the trial, which runs
 * srv->setup() -- every module loaded, every init run -- and exits.  Only
 * when it succeeded does the master do the same for real; when it crashed,
 * hung past --init-timeout, or failed, its slot in shared memory (fault.h)
 * says in which module's init and how, and the master refuses the
 * generation.  The master waits for the trial and does nothing else
 * meanwhile; the workers go on serving.
 */

/* Wait up to `ms` for `pid`; true with its status in `ws`. */
static bool wait_child(pid_t pid, uint64_t ms, int *ws)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    uint64_t end = mono_ms() + ms;
    for (;;) {
        pid_t r = waitpid(pid, ws, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            *ws = 127 << 8; /* lost (cannot happen: it is our child) */
            break;
        }
        uint64_t now = mono_ms();
        if (now >= end) {
            if (pfd >= 0)
                close(pfd);
            return false;
        }
        uint64_t left = end - now;
        if (pfd >= 0) {
            struct pollfd p = {pfd, POLLIN, 0};
            poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        } else {
            /* no pidfd (Linux < 5.3): look again in a while */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (pfd >= 0)
        close(pfd);
    return true;
}

int petrel__setup_trial(petrel_server_t *srv, char *err, size_t errlen)
{
    petrel__module_reuse_builds = false;
    petrel__wslot_t *ts = petrel__fault_trial_slot();
    if (ts == NULL)
        return 0; /* no shared memory: no trial (an embedder's server) */
    if ((srv->cfg.dev || srv->generation > 0) && petrel__module_private_prepare(err, errlen) < 0)
        return PETREL_EIO;
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot try the modules: fork: %s", strerror(errno));
        return PETREL_EIO;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        petrel__metrics_detach(); /* its registrations are not the instance's */
        petrel__module_trial_enter();
        petrel__fault_enter(ts);
        int rc = srv->setup(srv, srv->setup_ctx, ts->err, sizeof(ts->err));
        _exit(rc < 0 ? 1 : 0);
    }
    int ws = 0;
    const char *what = ts->stage[0] ? ts->stage : "loading the modules";
    if (!wait_child(pid, srv->cfg.init_timeout_ms, &ws)) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        what = ts->stage[0] ? ts->stage : "loading the modules";
        snprintf(err, errlen, "%s did not return within %.3g s (--init-timeout); stopped it", what,
                 (double)srv->cfg.init_timeout_ms / 1000.0);
        return PETREL_ELIMIT;
    }
    what = ts->stage[0] ? ts->stage : "loading the modules";
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        petrel__module_reuse_builds = true;
        return 0;
    }
    if (WIFEXITED(ws)) {
        if (ts->err[0])
            snprintf(err, errlen, "%s", ts->err);
        else
            snprintf(err, errlen, "%s exited with status %d", what, WEXITSTATUS(ws));
        return PETREL_EINVAL;
    }
    char sb[48], fb[512] = "";
    const char *sig = petrel__signame(WTERMSIG(ws), sb, sizeof(sb));
    if (ts->signo && ts->pc)
        snprintf(fb, sizeof(fb), " at address 0x%llx%s%s", (unsigned long long)ts->addr,
                 ts->where[0] ? ", code in " : "", ts->where);
    snprintf(err, errlen, "%s crashed: %s%s", what, sig, fb);
    return PETREL_EINVAL;
}

static void gen_take(petrel_server_t *srv, gen_t *g)
{
    g->router = srv->router;
    g->modules = srv->modules;
    g->handles = srv->module_handles;
    g->nmodules = srv->nmodules;
    srv->router = NULL;
    srv->modules = NULL;
    srv->module_handles = NULL;
    srv->nmodules = 0;
}

static void gen_put(petrel_server_t *srv, gen_t *g)
{
    srv->router = g->router;
    srv->modules = g->modules;
    srv->module_handles = g->handles;
    srv->nmodules = g->nmodules;
    memset(g, 0, sizeof(*g));
}

static void gen_free(gen_t *g)
{
    petrel__router_free(g->router);
    for (int i = g->nmodules - 1; i >= 0; i--)
        if (g->handles && g->handles[i])
            petrel__module_unload(g->handles[i]);
    free(g->handles);
    free(g->modules);
    memset(g, 0, sizeof(*g));
}

/* SO_REUSEPORT would let us share a port with another running server (or
 * another petrel): bind once without it first, so that a port in use is an
 * error, as users expect. */
static int probe_port(petrel__listen_t *l, char *err, size_t errlen)
{
    if (l->inherited >= 0)
        return 0; /* systemd's socket: bound already, by the service manager */
    struct sockaddr_in *in = (struct sockaddr_in *)&l->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&l->addr;
    if ((l->addr.ss_family == AF_INET && in->sin_port == 0) ||
        (l->addr.ss_family == AF_INET6 && in6->sin6_port == 0))
        return 0;
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (l->addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    int rc = bind(fd, (struct sockaddr *)&l->addr, l->addrlen);
    int e = errno;
    close(fd);
    if (rc < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", l->text, strerror(e));
        return -1;
    }
    return 0;
}

static int open_listener(petrel__listen_t *l, char *err, size_t errlen)
{
    if (l->inherited >= 0) {
        /* systemd's socket, shared by every worker: a descriptor of its own
         * per worker slot, so that each closes its own */
        int fd = fcntl(l->inherited, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
            snprintf(err, errlen, "%s (from systemd): %s", l->text, strerror(errno));
            return -1;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return fd;
    }
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
    /* bound only: the worker listens once its worker_init has succeeded
     * (worker_listen), so that no connection waits in the queue of a worker
     * that never starts and is reset when its socket is closed */
    if (bind(fd, (struct sockaddr *)&l->addr, l->addrlen) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", l->text, strerror(errno));
        close(fd);
        return -1;
    }
    /* a port 0 becomes the kernel's choice: every worker shares it */
    getsockname(fd, (struct sockaddr *)&l->addr, &l->addrlen);
    return fd;
}

/* A worker whose worker_init succeeded joins its sockets to the group that
 * shares the address (SO_REUSEPORT: a socket takes connections from its
 * listen() on).  A socket that already listens (its slot's earlier worker
 * served, or a reload's successor shares it) is left as it is.  0, or -1
 * (logged). */
static int worker_listen(petrel_server_t *srv)
{
    for (int i = 0; i < srv->nlistens; i++) {
        petrel__listen_t *l = &srv->listens[i];
        if (l->inherited >= 0)
            continue; /* systemd's: it listens */
        int on = 0;
        socklen_t len = sizeof(on);
        if (getsockopt(l->fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on)
            continue;
        if (listen(l->fd, 4096) < 0) {
            petrel_log(PETREL_LOG_ERROR, "cannot listen on %s: %s", l->text, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* The listening sockets of slot `idx`: those closed while it waited to be
 * restarted (slot_close) are opened again.  0, or -1 (logged, errno set). */
static int slot_open(master_t *m, int idx)
{
    petrel_server_t *srv = m->srv;
    for (int i = 0; i < srv->nlistens; i++) {
        if (m->slots[idx].fds[i] >= 0)
            continue;
        char err[512];
        int fd = open_listener(&srv->listens[i], err, sizeof(err));
        if (fd < 0) {
            int e = errno;
            petrel_log(PETREL_LOG_ERROR, "worker %d: %s", idx, err);
            errno = e;
            return -1;
        }
        m->slots[idx].fds[i] = fd;
    }
    return 0;
}

/* A slot whose worker cannot start waits for its next try with its
 * listening sockets closed: new connections go to the other workers' (or,
 * with no other, are refused) instead of waiting in a queue nobody
 * accepts from.  The connections queued at the close are reset -- or,
 * where the kernel's net.ipv4.tcp_migrate_req is 1, moved to another
 * worker's socket of the same address. */
static void slot_close(master_t *m, int idx)
{
    for (int i = 0; i < m->srv->nlistens; i++)
        if (m->slots[idx].fds[i] >= 0) {
            close(m->slots[idx].fds[i]);
            m->slots[idx].fds[i] = -1;
        }
}

/* Fork a worker for slot `idx` with the generation in srv; 0 on failure. */
static pid_t spawn(master_t *m, int idx)
{
    petrel_server_t *srv = m->srv;
    if (slot_open(m, idx) < 0)
        return 0;
    int block = petrel__metrics_block_take();
    int fslot = petrel__fault_take();
    m->spawned++;
    petrel__pubsub_before_fork(); /* a ring for it (pubsub.c) */
    pid_t pid = fork();
    if (pid != 0) {
        petrel__metrics_block_owner(block, pid > 0 ? pid : 0);
        petrel__fault_owner(fslot, pid > 0 ? pid : 0);
        petrel__pubsub_after_fork(pid > 0 ? pid : 0);
        return pid > 0 ? pid : 0;
    }
    /* the worker: it never outlives the master (SIGTERM, it drains) */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != master_pid)
        _exit(0); /* the master died before prctl */
    if (block < 0 && petrel__metrics_on)
        petrel_log(PETREL_LOG_WARN, "metrics: more workers alive at once than blocks of "
                                    "counters; this one's counts are not reported");
    petrel__metrics_block_enter(block);
    petrel__fault_enter(petrel__fault_at(fslot));
    next_req_base = m->spawned * REQ_ID_STRIDE;
    for (int i = 0; i < srv->nlistens; i++)
        if (srv->listens[i].inherited >= 0)
            close(srv->listens[i].inherited); /* the slot's own descriptor serves */
    for (int s = 0; s < m->n; s++)
        for (int i = 0; i < srv->nlistens; i++)
            if (s != idx && m->slots[s].fds[i] >= 0)
                close(m->slots[s].fds[i]);
    for (int i = 0; i < srv->nlistens; i++)
        srv->listens[i].fd = m->slots[idx].fds[i];
    close(m->sfd);
    close(m->ready[0]);
    if (m->wfd >= 0)
        close(m->wfd);
    int rc = petrel__worker_init(srv);
    if (rc == 0)
        rc = worker_listen(srv);
    if (rc == 0) {
        pid_t me = getpid();
        ssize_t w = write(m->ready[1], &me, sizeof(me));
        (void)w;
    }
    close(m->ready[1]);
    if (rc == 0)
        rc = petrel__worker_run(srv);
    petrel__worker_fini(srv);
#ifdef PETREL_LSAN
    /* _exit skips LeakSanitizer's check at exit: run it here, so that what a
     * worker leaks is reported (and makes its exit status non-zero) */
    __lsan_do_leak_check();
#endif
    _exit(rc == 0 ? 0 : 3);
}

static void retire(master_t *m, pid_t pid, int sig)
{
    if (pid <= 0)
        return;
    kill(pid, sig);
    if (m->nret == m->capret) {
        int cap = m->capret ? 2 * m->capret : 8;
        retiree_t *r = realloc(m->ret, (size_t)cap * sizeof(*r));
        if (r == NULL) {
            kill(pid, SIGKILL); /* cannot keep track of it: do not leave it behind */
            return;
        }
        m->ret = r;
        m->capret = cap;
    }
    m->ret[m->nret].pid = pid;
    m->ret[m->nret].kill_at = mono_ms() + m->srv->cfg.drain_timeout_ms + 5000;
    m->nret++;
}

static void begin_reload(master_t *m, const char *why);

static void end_reload(master_t *m)
{
    m->reloading = false;
    if (m->reload_again && !m->stopping) {
        m->reload_again = false;
        begin_reload(m, "a reload requested meanwhile");
    }
}

/* Give up a reload: retire the successors, back to the previous generation. */
static void abort_reload(master_t *m, const char *why)
{
    petrel_server_t *srv = m->srv;
    for (int s = 0; s < m->n; s++) {
        slot_t *sl = &m->slots[s];
        /* a successor that is not ready has not accepted anything yet: it
         * gets SIGTERM, which it reads once its worker_init is over */
        retire(m, sl->next, sl->next_ready ? SIGUSR2 : SIGTERM);
        sl->next = 0;
        sl->next_ready = false;
        if (sl->pid == 0 && sl->restart_at == 0)
            sl->restart_at = mono_ms();
    }
    gen_t bad;
    gen_take(srv, &bad);
    gen_free(&bad);
    gen_put(srv, &m->prev);
    petrel_log(PETREL_LOG_ERROR, "reload failed: %s; still serving generation %u", why, m->serving);
    petrel__metrics_instance_add(PETREL__I_RELOADS_FAIL, 1);
    petrel__sd_notify("READY=1\nSTATUS=reload failed (%s); serving generation %u", why, m->serving);
    end_reload(m);
}

static void commit_reload(master_t *m)
{
    int n = 0;
    for (int s = 0; s < m->n; s++) {
        slot_t *sl = &m->slots[s];
        if (sl->pid > 0) {
            retire(m, sl->pid, SIGUSR2);
            n++;
        }
        sl->pid = sl->next;
        sl->ready = true;
        sl->started = time(NULL);
        sl->started_ms = mono_ms();
        sl->restart_at = 0;
        sl->next = 0;
        sl->next_ready = false;
    }
    gen_free(&m->prev);
    m->serving = m->srv->generation;
    petrel_log(PETREL_LOG_INFO,
               "reload: generation %u serving with %d worker%s; retiring %d old worker%s "
               "(they finish their requests, then exit)",
               m->serving, m->n, m->n == 1 ? "" : "s", n, n == 1 ? "" : "s");
    petrel__metrics_instance_add(PETREL__I_RELOADS_OK, 1);
    petrel__metrics_instance_set(PETREL__I_GENERATION, m->serving);
    petrel__sd_notify("READY=1\nSTATUS=serving generation %u with %d worker%s", m->serving, m->n,
                      m->n == 1 ? "" : "s");
    end_reload(m);
}

static void begin_reload(master_t *m, const char *why)
{
    petrel_server_t *srv = m->srv;
    if (m->stopping)
        return;
    if (m->reloading) {
        m->reload_again = true;
        return;
    }
    if (m->drain_at) {
        petrel_log(PETREL_LOG_WARN, "%s: not reloading: the instance is draining", why);
        return;
    }
    if (srv->setup == NULL) {
        petrel_log(PETREL_LOG_ERROR, "%s: this program cannot reload its modules", why);
        return;
    }
    /* systemd >= 253 wants the monotonic time with RELOADING=1, in the same
     * message; READY=1 follows when the reload is over, whatever its end */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    petrel__sd_notify(
        "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading modules (%s)",
        (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000, why);
    petrel__router_t *router = petrel__router_new();
    if (router == NULL) {
        petrel_log(PETREL_LOG_ERROR, "reload failed: out of memory; still serving generation %u",
                   m->serving);
        petrel__metrics_instance_add(PETREL__I_RELOADS_FAIL, 1);
        petrel__sd_notify("READY=1\nSTATUS=reload failed (out of memory); serving generation %u",
                          m->serving);
        return;
    }
    gen_take(srv, &m->prev);
    srv->router = router;
    srv->generation++;
    petrel_log(PETREL_LOG_INFO, "%s: reloading modules (generation %u)", why, srv->generation);
    char err[1024];
    if (petrel__setup_trial(srv, err, sizeof(err)) < 0 ||
        srv->setup(srv, srv->setup_ctx, err, sizeof(err)) < 0) {
        gen_t bad;
        gen_take(srv, &bad);
        gen_free(&bad);
        gen_put(srv, &m->prev);
        petrel_log(PETREL_LOG_ERROR, "reload failed: %s; still serving generation %u", err,
                   m->serving);
        petrel__metrics_instance_add(PETREL__I_RELOADS_FAIL, 1);
        petrel__sd_notify("READY=1\nSTATUS=reload failed (%s); serving generation %u", err,
                          m->serving);
        m->reload_again = false;
        return;
    }
    m->reloading = true;
    m->reload_deadline = mono_ms() + RELOAD_TIMEOUT_MS;
    for (int s = 0; s < m->n; s++) {
        m->slots[s].restart_at = 0; /* the successor replaces a worker that died */
        m->slots[s].next = spawn(m, s);
        m->slots[s].next_ready = false;
        if (m->slots[s].next == 0) {
            snprintf(err, sizeof(err), "fork: %s", strerror(errno));
            abort_reload(m, err);
            return;
        }
    }
}

/* Read the pids of the workers that became ready. */
static void read_ready(master_t *m)
{
    pid_t pids[64];
    ssize_t r;
    while ((r = read(m->ready[0], pids, sizeof(pids))) > 0) {
        for (size_t k = 0; k < (size_t)r / sizeof(pid_t); k++)
            for (int s = 0; s < m->n; s++) {
                if (m->slots[s].next == pids[k])
                    m->slots[s].next_ready = true;
                else if (m->slots[s].pid == pids[k])
                    m->slots[s].ready = true;
            }
    }
    if (m->reloading) {
        bool all = true;
        for (int s = 0; s < m->n; s++)
            all = all && m->slots[s].next_ready;
        if (all)
            commit_reload(m);
    }
}

/* Every worker: serving, succeeding and retiring. */
static void signal_workers(master_t *m, int sig)
{
    for (int s = 0; s < m->n; s++) {
        if (m->slots[s].pid > 0)
            kill(m->slots[s].pid, sig);
        if (m->slots[s].next > 0)
            kill(m->slots[s].next, sig);
    }
    for (int k = 0; k < m->nret; k++)
        kill(m->ret[k].pid, sig);
}

/* The instance drains: /readyz answers 503 from now on, systemd hears it. */
static void tell_draining(void)
{
    if (petrel__metrics_instance_get(PETREL__I_DRAINING))
        return;
    petrel__metrics_instance_set(PETREL__I_DRAINING, 1);
    petrel__sd_notify("STOPPING=1\nSTATUS=draining");
}

static void log_listening(petrel_server_t *srv, int n);

/* Every worker accepts: READY=1 (once), and the gauge of workers serving. */
static void tell_ready(master_t *m)
{
    int n = 0;
    for (int s = 0; s < m->n; s++)
        n += m->slots[s].pid > 0 && m->slots[s].ready;
    petrel__metrics_instance_set(PETREL__I_WORKERS, (uint64_t)n);
    if (!m->told_listening && !m->stopping && n == m->n) {
        m->told_listening = true;
        log_listening(m->srv, m->n); /* only now: every worker accepts */
    }
    if (m->told_ready || m->stopping || n < m->n)
        return;
    m->told_ready = true;
    petrel__sd_notify("READY=1\nSTATUS=serving generation %u with %d worker%s", m->serving, m->n,
                      m->n == 1 ? "" : "s");
}

static void stop_all(master_t *m, uint64_t grace_ms)
{
    m->stopping = true;
    m->stop_at = mono_ms() + grace_ms;
    petrel_server_t *srv = m->srv;
    for (int s = 0; s < m->n; s++) {
        for (int i = 0; i < srv->nlistens; i++)
            if (m->slots[s].fds[i] >= 0) {
                close(m->slots[s].fds[i]);
                m->slots[s].fds[i] = -1;
            }
        if (m->slots[s].pid > 0)
            kill(m->slots[s].pid, SIGTERM);
        if (m->slots[s].next > 0)
            kill(m->slots[s].next, SIGTERM);
        m->slots[s].restart_at = 0;
    }
    for (int k = 0; k < m->nret; k++)
        kill(m->ret[k].pid, SIGTERM); /* retiring: now close the idle connections too */
}

/* A worker that ends with a failure status when asked to stop (a leak
 * found by LeakSanitizer in a sanitizer build, an error in its drain) makes
 * the master's exit status 1, so that it is not lost. */
static void stopped_status(master_t *m, pid_t pid, int ws)
{
    if (m->stopping && WIFEXITED(ws) && WEXITSTATUS(ws) != 0) {
        petrel_log(PETREL_LOG_ERROR, "worker (pid %d) exited with status %d when stopping",
                   (int)pid, WEXITSTATUS(ws));
        m->status = 1;
    }
}

/* Whether `sig` is a fault of the process's own code (not a kill). */
static bool fault_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
           sig == SIGTRAP || sig == SIGSYS;
}

/* "killed by SIGSEGV while running request ... (route ..., module '...'),
 * SIGSEGV at address 0x0, code in ..." or "exited with status N", for the
 * log, from the worker's slot (read before it is released). */
static void death_text(pid_t pid, int ws, char *buf, size_t len)
{
    petrel__wslot_t *fs = petrel__fault_slot(pid);
    if (WIFSIGNALED(ws)) {
        char sb[48], desc[768] = "";
        if (fs)
            petrel__fault_describe(fs, desc, sizeof(desc));
        snprintf(buf, len, "killed by %s%s", petrel__signame(WTERMSIG(ws), sb, sizeof(sb)), desc);
    } else {
        snprintf(buf, len, "exited with status %d%s", WEXITSTATUS(ws),
                 WEXITSTATUS(ws) == 3 ? " at start-up (worker_init failed?)" : "");
    }
}

static void on_exit_status(master_t *m, pid_t pid, int ws)
{
    char death[1024], mod[48];
    death_text(pid, ws, death, sizeof(death));
    petrel__fault_module_of(petrel__fault_slot(pid), mod, sizeof(mod));
    petrel__fault_release(pid);
    petrel__pubsub_exited(pid);
    petrel__metrics_worker_gone(pid); /* its counts join the retired ones */
    for (int k = 0; k < m->nret; k++)
        if (m->ret[k].pid == pid) {
            m->ret[k] = m->ret[--m->nret];
            petrel_log(PETREL_LOG_DEBUG, "retired worker (pid %d) exited", (int)pid);
            stopped_status(m, pid, ws);
            return;
        }
    for (int s = 0; s < m->n; s++) {
        slot_t *sl = &m->slots[s];
        if (sl->next == pid) {
            sl->next = 0;
            if (m->stopping)
                return;
            char why[1200];
            snprintf(why, sizeof(why), "a new worker (pid %d) %s", (int)pid, death);
            if (WIFSIGNALED(ws) && fault_signal(WTERMSIG(ws))) {
                petrel__metrics_instance_add(PETREL__I_CRASHES, 1);
                petrel__metrics_fault(mod, false);
            }
            abort_reload(m, why);
            return;
        }
        if (sl->pid != pid)
            continue;
        sl->pid = 0;
        bool watchdog = sl->wd_pid == pid;
        sl->wd_pid = 0;
        if (m->stopping) {
            stopped_status(m, pid, ws);
            return;
        }
        /* a worker that dies before it serves is restarted later and later;
         * past --restart-limit in a row, the master stops: the fault is not
         * one a restart cures.  One that served is restarted at once (a
         * second later if it died within a second: no spinning), however
         * often: a request that crashes its worker must not stop the
         * instance. */
        uint64_t now = mono_ms();
        bool exit3 = WIFEXITED(ws) && WEXITSTATUS(ws) == 3 && !m->reloading && !sl->ready;
        sl->fails = sl->ready ? 0 : sl->fails + 1;
        int limit = m->srv->cfg.restart_limit;
        bool give_up = !m->reloading && !exit3 && limit > 0 && sl->fails >= limit;
        const char *then = m->reloading ? "" : give_up || exit3 ? "" : "; restarting it";
        if (watchdog) {
            petrel__metrics_instance_add(PETREL__I_WATCHDOG, 1);
            petrel__metrics_fault(mod, true);
            petrel_log(PETREL_LOG_ERROR,
                       "watchdog: worker %d (pid %d) was in one loop turn for %.1f s "
                       "(--watchdog-timeout %.3g), %s%s (a handler must not block its worker: "
                       "move long work to a thread or a child process and wait for it with "
                       "petrel_watch_start; see \"When a handler goes wrong\" in the module "
                       "guide)",
                       s, (int)pid, (double)sl->wd_stuck / 1000.0,
                       (double)m->srv->cfg.watchdog_timeout_ms / 1000.0, death, then);
        } else {
            if (WIFSIGNALED(ws) && fault_signal(WTERMSIG(ws))) {
                petrel__metrics_instance_add(PETREL__I_CRASHES, 1);
                petrel__metrics_fault(mod, false);
            }
            petrel_log(PETREL_LOG_ERROR, "worker %d (pid %d) %s%s", s, (int)pid, death, then);
        }
        if (exit3) {
            /* its worker_init failed and said why: a restart would too */
            petrel_log(PETREL_LOG_ERROR, "worker %d failed at start-up; stopping", s);
            m->status = 1;
            stop_all(m, 5000);
            return;
        }
        if (m->reloading)
            return; /* its successor takes over; restarted if the reload fails */
        if (give_up) {
            petrel_log(PETREL_LOG_ERROR,
                       "worker %d failed to start %d times in a row (--restart-limit): giving "
                       "up, stopping",
                       s, sl->fails);
            petrel__metrics_instance_set(PETREL__I_GAVE_UP, 1);
            m->status = 1;
            tell_draining();
            stop_all(m, m->srv->cfg.drain_timeout_ms + 5000);
            return;
        }
        uint64_t delay = now - sl->started_ms < 1000 ? 1000 : 0;
        if (sl->fails) {
            delay = RESTART_BASE_MS;
            for (int k = 1; k < sl->fails && delay < RESTART_MAX_MS; k++)
                delay *= 2;
            if (delay > RESTART_MAX_MS)
                delay = RESTART_MAX_MS;
            char of[32] = "";
            if (limit > 0)
                snprintf(of, sizeof(of), " of %d", limit);
            petrel_log(PETREL_LOG_WARN, "worker %d: restarting it in %.1f s (failure %d%s)", s,
                       (double)delay / 1000.0, sl->fails, of);
            slot_close(m, s);
        }
        sl->restart_at = now + delay;
        petrel__metrics_instance_add(PETREL__I_RESTARTS, 1);
        return;
    }
}

/* The watchdog: a serving worker whose loop turn has lasted past
 * --watchdog-timeout gets SIGABRT (its fatal signal handler records the
 * request it runs, fault.c), and SIGKILL WD_KILL_MS later if it is still
 * there.  The connections queued on its listening socket wait for its
 * successor: the socket is the master's, the slot's next worker accepts
 * them. */
static void watchdog(master_t *m, uint64_t now)
{
    uint64_t to = m->srv->cfg.watchdog_timeout_ms;
    if (to == 0 || m->stopping)
        return;
    for (int s = 0; s < m->n; s++) {
        slot_t *sl = &m->slots[s];
        if (sl->pid <= 0 || !sl->ready)
            continue;
        if (sl->wd_pid == sl->pid) {
            if (now >= sl->wd_at + WD_KILL_MS) {
                petrel_log(PETREL_LOG_ERROR,
                           "watchdog: worker %d (pid %d) still there %.1f s after SIGABRT: "
                           "SIGKILL",
                           s, (int)sl->pid, (double)WD_KILL_MS / 1000.0);
                kill(sl->pid, SIGKILL);
                sl->wd_at = now + 60000;
            }
            continue;
        }
        petrel__wslot_t *w = petrel__fault_slot(sl->pid);
        uint64_t busy = w ? __atomic_load_n(&w->busy_ms, __ATOMIC_RELAXED) : 0;
        if (busy == 0 || now < busy || now - busy < to)
            continue;
        sl->wd_pid = sl->pid;
        sl->wd_at = now;
        sl->wd_stuck = now - busy;
        kill(sl->pid, SIGABRT);
    }
}

static int alive(const master_t *m)
{
    int n = m->nret;
    for (int s = 0; s < m->n; s++)
        n += (m->slots[s].pid > 0) + (m->slots[s].next > 0);
    return n;
}

static void log_listening(petrel_server_t *srv, int n)
{
    for (int i = 0; i < srv->nlistens; i++) {
        const petrel__listen_t *l = &srv->listens[i];
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
        petrel_log(PETREL_LOG_INFO, "%s %s%s%s:%d with %d worker%s%s%s",
                   l->admin ? "admin listener (/livez /readyz /metrics) on" : "listening on",
                   a->ss_family == AF_INET6 ? "[" : "", host, a->ss_family == AF_INET6 ? "]" : "",
                   port, n, n == 1 ? "" : "s", l->inherited >= 0 ? ", socket from systemd" : "",
                   !l->admin && srv->cfg.proxy_protocol ? ", PROXY protocol" : "");
    }
}

int petrel__master_run(petrel_server_t *srv)
{
    char err[512];
    master_t M = {.srv = srv, .n = srv->cfg.workers, .sfd = -1, .ready = {-1, -1}, .wfd = -1};
    master_pid = getpid();
    master_t *m = &M;
    int rc = 1;
    m->slots = calloc((size_t)m->n, sizeof(*m->slots));
    if (m->slots == NULL)
        return 1;
    for (int s = 0; s < m->n; s++) {
        m->slots[s].fds = malloc((size_t)(srv->nlistens ? srv->nlistens : 1) * sizeof(int));
        if (m->slots[s].fds == NULL)
            goto out;
        for (int i = 0; i < srv->nlistens; i++)
            m->slots[s].fds[i] = -1;
    }
    for (int i = 0; i < srv->nlistens; i++)
        if (probe_port(&srv->listens[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "petrel: %s\n", err);
            goto out;
        }
    for (int s = 0; s < m->n; s++)
        for (int i = 0; i < srv->nlistens; i++) {
            int fd = open_listener(&srv->listens[i], err, sizeof(err));
            if (fd < 0) {
                fprintf(stderr, "petrel: %s\n", err);
                goto out;
            }
            m->slots[s].fds[i] = fd;
        }
    if (petrel__pubsub_master_init(&srv->cfg, m->n, err, sizeof(err)) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        goto out;
    }
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    /* blocked here and so in the workers until they read it: the reload's
     * "retire" signal (start_drain) */
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, &old);
    sigdelset(&set, SIGUSR2);
    m->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (m->sfd < 0 || pipe2(m->ready, O_CLOEXEC) < 0) {
        fprintf(stderr, "petrel: signalfd/pipe: %s\n", strerror(errno));
        goto out_mask;
    }
    fcntl(m->ready[0], F_SETFL, O_NONBLOCK);
    if (srv->cfg.dev && (m->wfd = petrel__dev_watch_start()) < 0)
        petrel_log(PETREL_LOG_WARN, "--dev: no module file is watched (give --module PATH.c "
                                    "or PATH.so)");
    m->serving = srv->generation;
    petrel__metrics_instance_set(PETREL__I_GENERATION, m->serving);
    petrel__metrics_instance_set(PETREL__I_WANTED, (uint64_t)m->n);

    for (int s = 0; s < m->n; s++) {
        m->slots[s].pid = spawn(m, s);
        m->slots[s].started = time(NULL);
        m->slots[s].started_ms = mono_ms();
        if (m->slots[s].pid == 0) {
            fprintf(stderr, "petrel: fork: %s\n", strerror(errno));
            stop_all(m, 5000);
            m->status = 1;
            break;
        }
    }

    rc = 0;
    while (!m->stopping || alive(m) > 0) {
        uint64_t now = mono_ms();
        int64_t wait = 1000;
#define UNTIL(t)                                                                                   \
    if ((t) && (int64_t)((t)-now) < wait)                                                          \
    wait = (int64_t)((t)-now) < 0 ? 0 : (int64_t)((t)-now)
        for (int s = 0; s < m->n; s++)
            UNTIL(m->slots[s].restart_at);
        for (int k = 0; k < m->nret; k++)
            UNTIL(m->ret[k].kill_at);
        if (m->reloading)
            UNTIL(m->reload_deadline);
        if (m->stopping)
            UNTIL(m->stop_at);
        UNTIL(m->rebuild_at);
        UNTIL(m->drain_at);
        if (srv->cfg.watchdog_timeout_ms) {
            /* look at the workers' loop turns a few times per timeout */
            uint64_t every = srv->cfg.watchdog_timeout_ms / 8;
            if ((int64_t)(every < 50 ? 50 : every) < wait)
                wait = (int64_t)(every < 50 ? 50 : every);
        }
#undef UNTIL
        struct pollfd pfd[3] = {{m->sfd, POLLIN, 0}, {m->ready[0], POLLIN, 0}, {m->wfd, POLLIN, 0}};
        int pr = poll(pfd, m->wfd >= 0 ? 3 : 2, (int)wait);
        if (pr < 0 && errno != EINTR)
            break;
        struct signalfd_siginfo si;
        bool hup = false;
        bool stop = false;
        const char *stop_why = NULL;
        while (read(m->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if ((si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) && !m->stopping) {
                const char *name = si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT";
                if (m->drain_at == 0 && srv->cfg.drain_delay_ms > 0) {
                    /* /readyz says 503 first; the listeners stay open meanwhile */
                    tell_draining();
                    m->drain_at = mono_ms() + srv->cfg.drain_delay_ms;
                    petrel_log(PETREL_LOG_INFO,
                               "%s: /readyz answers 503; the workers drain in %.3g s "
                               "(--drain-delay; a second signal drains at once)",
                               name, (double)srv->cfg.drain_delay_ms / 1000.0);
                } else {
                    stop = true;
                    stop_why = name;
                }
            } else if (si.ssi_signo == SIGHUP) {
                hup = true;
            } else if (si.ssi_signo == SIGUSR1) {
                /* logrotate moved the files: open them again, here and in
                 * every worker (the retiring ones too) */
                if (petrel__logs_reopen() == 0)
                    petrel_log(PETREL_LOG_INFO, "SIGUSR1: log files opened again");
                signal_workers(m, SIGUSR1);
            }
        }
        if (!stop && m->drain_at && !m->stopping && mono_ms() >= m->drain_at) {
            stop = true;
            stop_why = "--drain-delay over";
        }
        if (stop && !m->stopping) {
            petrel_log(PETREL_LOG_INFO, "%s: draining workers", stop_why);
            tell_draining();
            m->drain_at = 0;
            if (m->reloading) {
                gen_free(&m->prev); /* srv holds the new generation: freed at exit */
                m->reloading = false;
            }
            stop_all(m, srv->cfg.drain_timeout_ms + 5000);
        }
        /* reap before reading the ready pipe: a successor that wrote its
         * pid and then died is a failure, not a success */
        pid_t pid;
        int ws;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0)
            on_exit_status(m, pid, ws);
        read_ready(m);
        tell_ready(m);
        if (m->wfd >= 0 && (pfd[2].revents & POLLIN)) {
            char what[PATH_MAX];
            if (petrel__dev_watch_read(m->wfd, what, sizeof(what))) {
                if (m->rebuild_at == 0)
                    petrel_log(PETREL_LOG_INFO, "dev: %s changed", what);
                m->rebuild_at = mono_ms() + DEV_DEBOUNCE_MS;
            }
        }
        now = mono_ms();
        if (hup)
            begin_reload(m, "SIGHUP");
        if (m->rebuild_at && now >= m->rebuild_at) {
            m->rebuild_at = 0;
            begin_reload(m, "dev");
        }
        if (m->reloading && now >= m->reload_deadline)
            abort_reload(m, "the new workers were not ready in time");
        watchdog(m, now);
        if (!m->stopping)
            for (int s = 0; s < m->n; s++) {
                slot_t *sl = &m->slots[s];
                if (sl->restart_at == 0 || now < sl->restart_at)
                    continue;
                sl->restart_at = 0;
                sl->ready = false;
                sl->started = time(NULL);
                sl->started_ms = now;
                sl->pid = spawn(m, s);
                if (sl->pid == 0) {
                    petrel_log(PETREL_LOG_ERROR, "worker %d: cannot start it (%s); trying again", s,
                               strerror(errno));
                    sl->restart_at = now + 1000;
                }
            }
        for (int k = 0; k < m->nret; k++)
            if (now >= m->ret[k].kill_at) {
                petrel_log(PETREL_LOG_WARN, "retired worker (pid %d) still running: killing it",
                           (int)m->ret[k].pid);
                kill(m->ret[k].pid, SIGKILL);
                m->ret[k].kill_at = now + 60000;
            }
        if (m->stopping && now >= m->stop_at) {
            signal_workers(m, SIGKILL);
            m->stop_at = now + 60000;
        }
    }
    rc = m->status;
out_mask:
    if (m->sfd >= 0)
        close(m->sfd);
    if (m->wfd >= 0)
        close(m->wfd);
    if (m->ready[0] >= 0) {
        close(m->ready[0]);
        close(m->ready[1]);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
out:
    for (int s = 0; s < m->n; s++) {
        if (m->slots[s].fds)
            for (int i = 0; i < srv->nlistens; i++)
                if (m->slots[s].fds[i] >= 0)
                    close(m->slots[s].fds[i]);
        free(m->slots[s].fds);
    }
    free(m->slots);
    free(m->ret);
    petrel__pubsub_master_fini();
    return rc;
}
