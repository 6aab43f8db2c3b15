/*
 * h2.c -- HTTP/2 over cleartext on nghttp2 (RFC 9113): the only file that
 * touches nghttp2.  Not built yet: a prior-knowledge connection is closed.
 */
#include "petrel-int.h"

int petrel__h2_takeover(petrel__conn_t *c)
{
    (void)c;
    petrel_log(PETREL_LOG_DEBUG, "HTTP/2 preface received: HTTP/2 is not built in");
    return PETREL_ENOTFOUND;
}
