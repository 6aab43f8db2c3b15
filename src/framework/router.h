/*
 * router.h -- routes: method + path pattern -> handler (router.c).
 */
#ifndef PETREL_ROUTER_H
#define PETREL_ROUTER_H

#include "petrel.h"
#include "runtime/fault.h"

#include <stddef.h>

typedef struct petrel__router petrel__router_t;

/* A method bit of petrel's own, outside PETREL_ANY: an HTTP/2 Extended
 * CONNECT with `:protocol websocket` (RFC 8441 §4).  Only WebSocket routes
 * have it (petrel_ws_route_add); petrel_route_add() refuses it. */
#define PETREL__CONNECT PETREL_WS_CONNECT


typedef struct petrel__match {
    petrel_handler_t handler;
    const petrel__route_info_t *info; /* of the route matched (info->stream:
                                         PETREL_BODY_STREAM) */
    void *data;
    int allowed; /* methods the path has, when the method does not match */
    petrel_param_t *params;
    size_t nparams;
} petrel__match_t;

/* The module whose routes are being added (module.c sets it around a
 * module's registration and init), recorded with each route; NULL: none. */
extern const char *petrel__router_module;

petrel__router_t *petrel__router_new(void);
void petrel__router_free(petrel__router_t *r);
int petrel__router_add(petrel__router_t *r, int methods, const char *pattern,
                       petrel_handler_t handler, void *data);
/*
 * Match a normalised path.  Returns 0 with m->handler set, 404 when no route
 * has the path, 405 with m->allowed when the path exists for other methods,
 * 501 for PETREL_OTHER when no route of the router names it.
 * Parameters are allocated from `a`.  HEAD falls back to GET.
 */
int petrel__router_match(const petrel__router_t *r, int method, const char *path, size_t len,
                         petrel_arena_t *a, petrel__match_t *m);

/* ws-handshake.c: the route of a WebSocket endpoint, for petrel_ws_route_add()
 * (server.c, which adds it to the server's router): the handshake handler
 * in *fn and its data in *data (the router owns it: free() it with the
 * router).  0, PETREL_EINVAL (a bad subprotocol name) or PETREL_ENOMEM. */
int petrel__ws_route_make(const petrel_ws_handler_t *handler, void *data, petrel_handler_t *fn,
                          void **rt);
/* The router frees `data` with `free_data` when it goes.  0, or
 * PETREL_ENOMEM (then `data` is freed at once). */
int petrel__router_own(petrel__router_t *r, void *data, void (*free_data)(void *));

#endif /* PETREL_ROUTER_H */
