/*
 * server.h -- the server layer: the server object and its configuration
 * (server.c), modules and reloads (module.c), listeners (listen.c), the
 * entry stage of connections (entry.c), worker and master processes
 * (worker.c) and the command line (cli.c).
 */
#ifndef PETREL_SERVER_H
#define PETREL_SERVER_H

#include "runtime/settings.h"
#include "runtime/conn.h"
#include "runtime/loop.h"
#include "framework/router.h"
#include "server/options.h"

#include <stdbool.h>
#include <sys/socket.h>

typedef struct petrel__listen {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[64];
    int fd;        /* the worker's listening socket */
    int hold_fd;   /* the master's bound (not listening) socket: holds the port */
    bool admin;    /* --admin-listen: /livez, /readyz, /metrics (admin.c) */
    int inherited; /* a socket from systemd (LISTEN_FDS), shared by all workers; -1: none */
} petrel__listen_t;

typedef struct petrel__listener petrel__listener_t;

struct petrel_server {
    petrel__config_t cfg;
    petrel__listen_t *listens;
    int nlistens;
    petrel__router_t *router;
    const petrel_module_t **modules;
    int nmodules;
    void **module_handles;
    /* reload (SIGHUP, --dev): the master builds a new generation of routes
     * and modules with setup(), then replaces its workers with new ones */
    int (*setup)(petrel_server_t *srv, void *ctx, char *err, size_t errlen);
    void *setup_ctx;
    unsigned generation; /* 0 at start-up, +1 for each reload attempt */
    /* worker state */
    petrel__loop_t loop;
    petrel__conns_t conns; /* the worker's connections */
    petrel__tq_t tq_drain;
    petrel__listener_t *listeners; /* listen.c: one per listens[] */
    bool accept_paused;
    bool admin_paused;
    /* the admin listener's server (admin.c): its routes, settings and
     * connections; NULL without --admin-listen.  Its `main` is this one. */
    petrel_server_t *admin, *main;
};

petrel_server_t *petrel__server_new(void);
void petrel__server_free(petrel_server_t *srv);
int petrel__server_add_listen(petrel_server_t *srv, const char *spec, char *err, size_t errlen);
/* --admin-listen ADDR:PORT: a listener of the admin server (admin.c). */
int petrel__server_add_admin(petrel_server_t *srv, const char *spec, char *err, size_t errlen);
/* A listening socket passed by systemd (LISTEN_FDS), named `name` ("" if
 * unnamed): it serves the --listen or --admin-listen address it is bound
 * to, or else is a listener of its own (an admin one when named "admin").
 * 0, PETREL_EINVAL (with `err`) or PETREL_ENOMEM. */
int petrel__server_inherit(petrel_server_t *srv, int fd, const char *name, char *err,
                           size_t errlen);
/* Whether srv has an --admin-listen address. */
bool petrel__server_has_admin(const petrel_server_t *srv);
void petrel__set_builtins(const petrel_module_t *const *table);
/* The built-in module that --module `spec` names, with its arguments in
 * *args (NULL: a module file, or no such module). */
const petrel_module_t *petrel__builtin_of(const char *spec, const char **args);
/* The option tables of a command line (server/options.h): `own`,
 * petrel's, then the built-in modules' (`table`) and those of the module files that
 * --module names in argv (opened for it, petrel__module_probe), the
 * defaults of the modules' options applied: 0, or an exit status after
 * saying what is wrong (an option of a module that another has already). */
int petrel__cli_tables_make(petrel__cli_tables_t *t, const petrel__option_table_t *const *own,
                            const petrel_module_t *const *table, int argc, char **argv);
void petrel__cli_tables_free(petrel__cli_tables_t *t);
/* The --module specs `specs[0, n)` in the order they load, into `out`
 * (room for n + nloaded): the modules `loaded` (that an option of them
 * loads) first unless a spec names them, and a built-in module named more
 * than once once, its arguments joined by ';' in the place of the first
 * (the joined specs malloc'ed into `joined`, room for n; the caller frees
 * them).  The count, or -1 when out of memory. */
int petrel__module_specs(const char **specs, int n, const petrel_module_t *const *loaded,
                         int nloaded, const char **out, char **joined);
/* An option of module `module` given on the command line (`value` NULL
 * for a flag; the strings stay valid): each time the module loads, its
 * options' defaults, then these values in their order, go into its config
 * before its init runs.  0 or PETREL_ENOMEM. */
int petrel__module_option_given(const char *module, const char *name, const char *value);
void petrel__module_options_forget(void);
/* The module file of --module `spec` (PATH.so[:ARGS]) opened to read its
 * options before the command line is: its dlopen handle (dlclose it when
 * done) and its descriptor in *m, or NULL (not a module file, or one
 * without options, or it does not load: said when it is loaded). */
void *petrel__module_probe(const char *spec, const petrel_module_t **m);
int petrel__server_load_module(petrel_server_t *srv, const char *spec, char *err, size_t errlen);

/* module.c: reload and --dev.  A module file loaded again on a reload is
 * loaded from a private copy (dlopen would return the copy already loaded
 * under the same name); --dev builds module sources into the same private
 * directory, removed at exit. */
void petrel__module_unload(void *handle); /* dlclose, and remove its private copy */
/* Create the private directory now (before a trial process forks, so that
 * it is the master's).  0, or PETREL_EIO with `err`. */
int petrel__module_private_prepare(char *err, size_t errlen);
/* In the trial process: the master's private directory is its own. */
void petrel__module_trial_enter(void);
/* --dev: the trial process of this generation built the module sources;
 * loading them again does not build them again. */
extern bool petrel__module_reuse_builds;
/* The trial of a generation (worker.c): run srv->setup() -- load the
 * modules, run every init -- in a child process first, bounded by
 * --init-timeout.  0 when it succeeded; otherwise PETREL_EINVAL with why
 * in `err` (which module, which function, what happened). */
int petrel__setup_trial(petrel_server_t *srv, char *err, size_t errlen);
/* inotify on the module files (--dev): the fd, or -1 */
int petrel__dev_watch_start(void);
/* Read the pending events of the watch fd; true when a module file (or a
 * header beside a module source) changed, with its name in `what`. */
bool petrel__dev_watch_read(int fd, char *what, size_t len);

/* listen.c: accept on the worker's listening sockets into srv->conns (and
 * the admin listeners' into srv->admin->conns). */
int petrel__listen_start(petrel_server_t *srv);
/* Stop accepting on the public listeners (the admin ones go on). */
void petrel__listen_stop(petrel_server_t *srv);
/* Stop accepting for good and close the public listening sockets. */
void petrel__listen_close(petrel_server_t *srv);
/* The same for the admin listeners (a reload retires this worker: its
 * successor accepts on the same sockets; or the worker exits). */
void petrel__listen_close_admin(petrel_server_t *srv);
/* A connection went away (conns->on_gone): accept again if paused. */
void petrel__listen_on_gone(petrel_server_t *srv);

/* entry.c: the first protocol of every connection.  It reads the first
 * bytes and switches to HTTP/2 (the connection preface, RFC 9113 §3.4) or
 * HTTP/1.1; pre-HTTP stages (the PROXY protocol) belong here. */
extern const petrel__proto_ops_t petrel__entry_ops;
/* Per worker, before its connection sets: register the timer queues of
 * the entry stage and of the protocols it hands connections to (their
 * timeouts from `cfg`; the admin listener's are the same).  0, or
 * PETREL_ELIMIT. */
int petrel__entry_init(const petrel__config_t *cfg);

/* admin.c: the admin listener's server, in a worker (srv->admin). */
int petrel__admin_init(petrel_server_t *srv);
void petrel__admin_fini(petrel_server_t *srv);

/* worker.c */
int petrel__worker_init(petrel_server_t *srv);
int petrel__worker_run(petrel_server_t *srv);
void petrel__worker_fini(petrel_server_t *srv);
int petrel__master_run(petrel_server_t *srv);

#endif /* PETREL_SERVER_H */
