/*
 * echo.c -- POST /echo and POST /api/benchmark/echo: answer with the request
 * body and its Content-Type.
 *
 * The body lives in the request arena until the response is written, so it
 * is sent as it is, without a copy.
 */
#include <petrel.h>

static int echo(petrel_req_t *req, void *data)
{
    (void)data;
    const char *type = petrel_req_header(req, "content-type");
    return petrel_send(req, 200, type ? type : "application/octet-stream", req->body.ptr,
                       req->body.len);
}

static const petrel_route_t routes[] = {
    {PETREL_POST, "/echo", echo, NULL},
    {PETREL_POST, "/api/benchmark/echo", echo, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(echo, routes, NULL, NULL, NULL)
