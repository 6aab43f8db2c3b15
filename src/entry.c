/*
 * entry.c -- the entry stage of every connection: the first bytes choose
 * its protocol, here and nowhere else.
 *
 * A connection that starts with the HTTP/2 connection preface (RFC 9113
 * §3.4, prior knowledge) goes to h2.c; anything else to http1.c, which may
 * later hand it on through an upgrade (`Upgrade: h2c`, WebSocket).  A
 * pre-HTTP stage (the PROXY protocol) sits here, before the choice.
 */
#include "server.h"

#include "h2.h"
#include "http1.h"

#include <string.h>

/* RFC 9113 §3.4: prior knowledge starts with the connection preface. */
static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* The bytes read so far choose, or wait for more (a prefix of the preface). */
static void choose(petrel__conn_t *c)
{
    size_t n, want = sizeof(h2_preface) - 1;
    const char *p = petrel__conn_input(c, &n);
    if (n == 0)
        return;
    if (p[0] == 'P' && memcmp(p, h2_preface, n < want ? n : want) == 0) {
        if (n < want)
            return; /* a prefix of the preface so far */
        petrel__conn_switch(c, &petrel__h2_ops, NULL);
        return;
    }
    petrel__conn_switch(c, &petrel__http1_ops, NULL);
}

static void entry_read(petrel__conn_t *c)
{
    int n = petrel__conn_read(c);
    if (n < 0 || (n == 0 && (c->flags & CONN_EOF))) {
        petrel__conn_close(c); /* nothing, or a preface cut short */
        return;
    }
    if (n == 0) {
        petrel__conn_idle(c); /* EAGAIN: do not hold an empty buffer */
        return;
    }
    choose(c);
}

/* A connection that sends nothing (or a prefix of the preface) within the
 * header timeout is closed without a word: there is no protocol to answer
 * in yet. */
static void entry_timeout(petrel__conn_t *c)
{
    petrel__conn_close(c);
}

/* Accepted but not read yet: in flight, not idle.  Its first bytes are
 * served (HTTP/1.1 answers with Connection: close while draining). */
static void entry_drain(petrel__conn_t *c, bool close_idle)
{
    (void)c, (void)close_idle;
}

const petrel__proto_ops_t petrel__entry_ops = {
    .name = "entry",
    .start = entry_read,
    .on_read = entry_read,
    .on_timeout = entry_timeout,
    .drain = entry_drain,
};

void petrel__entry_init(void)
{
    petrel__http1_set_upgrade_hook(petrel__h2_upgrade);
}
