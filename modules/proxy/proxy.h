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
    bool strip;           /* the prefix is taken off the target */
    bool host_rewrite;    /* Host: the upstream's, not the client's */
    size_t buffer;        /* bytes waiting for the client that pause the upstream */
    unsigned retry_after; /* seconds, of a 503 when every breaker is open */
    petrel_upstream_t *up;
} petrel__proxy_mount_t;

/* The handler of a mount's routes (route data: the mount). */
int petrel__proxy_handle(petrel_req_t *req, void *data);

#endif /* PETREL_PROXY_H */
