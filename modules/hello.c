/*
 * hello.c -- GET /hello: "Hello World!" (12 bytes, text/plain).
 *
 * The smallest useful module, and the benchmark route: the body is static
 * storage, so the response needs no allocation at all.
 */
#include <petrel.h>

static int hello(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", "Hello World!", 12);
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/hello", hello, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(hello, routes, NULL, NULL, NULL)
