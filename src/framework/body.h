/*
 * body.h -- a request body read as it arrives (body.c), for dispatch
 * (request.c).
 */
#ifndef PETREL_BODY_H
#define PETREL_BODY_H

#include "petrel.h"

/* The request was routed to a PETREL_BODY_STREAM route: a body the
 * protocol has whole (or none) is kept for petrel_body_read(), and
 * req->body becomes empty. */
void petrel__body_routed(petrel_req_t *req);

#endif /* PETREL_BODY_H */
