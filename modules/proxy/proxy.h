/*
 * proxy.h -- the reverse-proxy module's private declarations: a mount
 * (a URL prefix forwarded to an upstream) made by mount.c from the
 * module's argument, and the handler of forward.c that forwards a request.
 */
#ifndef PETREL_PROXY_H
#define PETREL_PROXY_H

#include <petrel.h>

#include <stdbool.h>
#include <stddef.h>

/* A prefix forwarded to an upstream.  Made in the module's init (the
 * master), kept for the process's life, read by the workers. */
typedef struct petrel__proxy_mount {
    char *prefix; /* "/api" (no trailing slash); "" for "/" */
    size_t plen;
    bool strip;              /* the prefix is taken off the target */
    bool host_rewrite;       /* Host: the upstream's, not the client's */
    size_t buffer;           /* bytes waiting for the client that pause the upstream */
    unsigned retry_after;    /* seconds, of a 503 when every breaker is open */
    size_t ws_max_message;   /* largest WebSocket message relayed (0: --ws-max-message-size) */
    unsigned ws_max_tunnels; /* WebSocket tunnels per worker */
    petrel_upstream_t *up;
} petrel__proxy_mount_t;

/* The handler of a mount's routes (route data: the mount). */
int petrel__proxy_handle(petrel_req_t *req, void *data);

/* A forwarded request that asks the upstream to switch protocols
 * (websocket.c): the protocol, fields added to the request (those of the
 * client's handshake for this hop are left out), and who takes a 101. */
typedef struct petrel__proxy_upgrade {
    const char *protocol;
    const petrel_header_t *fields;
    size_t nfields;
    petrel_upgrade_cb cb;
    void *data;
} petrel__proxy_upgrade_t;

/* Forward a request (forward.c); `u`: as an upgrade (NULL: not one).  A
 * handler's return value. */
int petrel__proxy_forward(petrel_req_t *req, const petrel__proxy_mount_t *m,
                          const petrel__proxy_upgrade_t *u);

/* Whether a request is a WebSocket opening handshake (websocket.c). */
bool petrel__proxy_ws_wanted(const petrel_req_t *req);
/* Forward a WebSocket opening handshake and relay its messages
 * (websocket.c).  A handler's return value. */
int petrel__proxy_ws(petrel_req_t *req, const petrel__proxy_mount_t *m);

#endif /* PETREL_PROXY_H */
