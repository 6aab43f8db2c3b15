/*
 * check_server.h -- the server fixture of the Check suites that run a
 * worker in the test process (check_http1, check_h2, check_ws,
 * check_pubsub, check_static): a server `srv` with no listener, its worker
 * started by hand, and the loopback clients of check_client.h on it.  Each
 * suite compiles its own copy (static definitions).
 *
 * A suite's setup calls ck_server_new(), loads the built-in modules it
 * wants with ck_server_load() (a suite that does links BUILTIN_MODULE_SOURCES)
 * and adds its routes; the worker starts with the first client
 * (ck_server_client()) or ck_server_start(), so that a test can change
 * srv->cfg (timeouts, limits) before it.  Its teardown calls
 * ck_server_free() (or ck_server_stop(), what it has to do between the
 * worker's end and the server's, then ck_server_free()).  A suite may set CK_SERVER_CLIENTS (how
 * many clients a test may open, 3 unless told) before including this header.
 */
#ifndef CHECK_SERVER_H
#define CHECK_SERVER_H

#include "runtime/log.h"
#include "server/server.h"

#include "check_client.h"

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#ifndef CK_SERVER_CLIENTS
#define CK_SERVER_CLIENTS 3
#endif

/* The table generated from BUILTIN_MODULES (modules/builtin.c). */
extern const petrel_module_t *const petrel__builtin_modules[];

static petrel_server_t *srv;
static bool ck_started; /* the worker of srv runs */
static ck_client_t ck_clients[CK_SERVER_CLIENTS];
static int ck_nclients; /* opened since the setup */

/* A new server, quiet (PETREL_TEST_LOG=1 for its debug log) and with
 * SIGPIPE ignored: a test may write to a connection the server closed. */
static inline void ck_server_new(void)
{
    signal(SIGPIPE, SIG_IGN);
    petrel__log_level = getenv("PETREL_TEST_LOG") ? PETREL_LOG_DEBUG : -1;
    srv = petrel__server_new();
    ck_assert_ptr_nonnull(srv);
    ck_started = false;
    ck_nclients = 0;
}

/* Load the built-in module `name` into srv. */
static inline void ck_server_load(const char *name)
{
    char err[256];
    petrel__set_builtins(petrel__builtin_modules);
    ck_assert_msg(petrel__server_load_module(srv, name, err, sizeof(err)) == 0, "%s", err);
}

/* Start the worker, once. */
static inline void ck_server_start(void)
{
    if (!ck_started) {
        ck_assert_int_eq(petrel__worker_init(srv), 0);
        ck_started = true;
    }
}

/* A new connection (the worker started): its client, with a receive
 * buffer of `cap` bytes (see ck_client_open() for `rewind`). */
static inline ck_client_t *ck_server_client(size_t cap, bool rewind)
{
    ck_server_start();
    ck_assert_int_lt(ck_nclients, CK_SERVER_CLIENTS);
    ck_client_t *c = &ck_clients[ck_nclients++];
    ck_client_open(c, srv, cap, rewind);
    return c;
}

/* Close the clients and stop the worker (if it runs). */
static inline void ck_server_stop(void)
{
    for (int i = 0; i < CK_SERVER_CLIENTS; i++) {
        if (i < ck_nclients)
            ck_client_close(&ck_clients[i]);
        free(ck_clients[i].buf);
        ck_clients[i].buf = NULL;
    }
    ck_nclients = 0;
    if (ck_started)
        petrel__worker_fini(srv);
    ck_started = false;
}

/* ck_server_stop(), and free the server. */
static inline void ck_server_free(void)
{
    ck_server_stop();
    petrel__server_free(srv);
    srv = NULL;
}

#endif /* CHECK_SERVER_H */
