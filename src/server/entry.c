/*
 * entry.c -- the entry stage of every connection: the first bytes choose
 * its protocol, here and nowhere else.
 *
 * On a --proxy-protocol listener the connection must first come from a
 * trusted proxy (--trusted-proxies) and start with a PROXY protocol header
 * (proxy.c parses it): the client's address it names replaces the peer's
 * for the connection's whole life -- every keep-alive request, every h2
 * stream, every log line.  Anything else closes the connection with one
 * log line, before a byte of HTTP is read; a header cut short waits, up to
 * the header timeout.
 *
 * Then a connection that starts with the HTTP/2 connection preface (RFC
 * 9113 §3.4, prior knowledge) goes to h2.c; anything else to http1.c, which
 * may later hand it on through an upgrade (`Upgrade: h2c`, WebSocket).
 */
#include "server/server.h"

#include "protocols/h2.h"
#include "protocols/http1.h"
#include "runtime/metrics.h"
#include "runtime/proxy.h"

#include <string.h>

/* The entry stage's timer: the first bytes (and a PROXY header) within
 * --header-timeout.  Per worker process (doc/architecture.md, "Processes"). */
static petrel__tq_t entry_q;

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

/* c->proto while in the entry stage: NULL, or this once the PROXY header
 * has been read. */
static const char proxied;

static bool wants_proxy(const petrel__conn_t *c)
{
    return c->cs->cfg->proxy_protocol && c->proto != &proxied;
}

/* One log line, and the connection goes.  The address named is the
 * socket's peer: nothing a header says is logged. */
static void proxy_reject(petrel__conn_t *c, unsigned reason, const char *what)
{
    char peer[64];
    petrel_log(PETREL_LOG_WARN, "PROXY protocol: connection from %s closed: %s",
               petrel__conn_peer_text(c, peer, sizeof(peer)), what);
    petrel__count(PETREL__C_PROXY_REJECTED + reason, 1);
    petrel__conn_close(c, reason == PETREL__PROXY_REJ_TIMEOUT ? PETREL__CLOSE_TIMEOUT
                                                              : PETREL__CLOSE_ERROR);
}

/* Read the PROXY header from the input.  true: read (the peer address is
 * the client's now), the connection goes on; false: closed, or waiting for
 * the rest of the header. */
static bool proxy_read(petrel__conn_t *c)
{
    size_t n;
    const char *p = petrel__conn_input(c, &n);
    petrel__proxy_hdr_t h;
    const char *why = NULL;
    ssize_t len = petrel__proxy_parse(p, n, c->cs->cfg->max_proxy_header_size, &h, &why);
    if (len < 0) {
        proxy_reject(c, PETREL__PROXY_REJ_INVALID, why);
        return false;
    }
    if (len == 0) {
        if (c->flags & PETREL__CONN_EOF)
            proxy_reject(c, PETREL__PROXY_REJ_EOF,
                         n ? "the connection ended inside its PROXY header"
                           : "the connection ended without a PROXY header");
        else
            petrel__conn_idle(c); /* nothing buffered: no buffer held while waiting */
        return false;
    }
    if (h.kind == PETREL__PROXY_ADDR)
        memcpy(&c->peer, &h.src, sizeof(c->peer));
    else if (h.kind == PETREL__PROXY_UNIX) {
        memset(&c->peer, 0, sizeof(c->peer));
        c->peer.sa.sa_family = AF_UNIX;
    }
    /* LOCAL and UNKNOWN: the balancer speaks for itself, its address stands */
    petrel__conn_consume(c, (size_t)len);
    c->proto = (void *)&proxied;
    petrel__count(h.version == 1 ? PETREL__C_PROXY_V1 : PETREL__C_PROXY_V2, 1);
    return true;
}

static void entry_read(petrel__conn_t *c)
{
    int n = petrel__conn_read(c);
    if (n < 0) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT);
        return;
    }
    if (wants_proxy(c) && !proxy_read(c))
        return;
    size_t avail;
    petrel__conn_input(c, &avail);
    if (n == 0 && (c->flags & PETREL__CONN_EOF)) {
        petrel__conn_close(c, PETREL__CLOSE_CLIENT); /* nothing, or a preface cut short */
        return;
    }
    if (avail == 0) {
        petrel__conn_idle(c); /* EAGAIN: do not hold an empty buffer */
        return;
    }
    choose(c);
}

/* A new connection: on a --proxy-protocol listener, only from a trusted
 * proxy (checked before anything it sent is read). */
static void entry_start(petrel__conn_t *c)
{
    const petrel__config_t *cfg = c->cs->cfg;
    petrel__timer_arm(petrel__loop, &c->timer, &entry_q);
    if (cfg->proxy_protocol && cfg->trusted &&
        !petrel__cidr_match(cfg->trusted, cfg->ntrusted, &c->peer.sa)) {
        proxy_reject(c, PETREL__PROXY_REJ_UNTRUSTED, "not a trusted proxy (--trusted-proxies)");
        return;
    }
    entry_read(c);
}

/* A connection that sends nothing (or a prefix of the preface) within the
 * header timeout is closed without a word: there is no protocol to answer
 * in yet.  One that owes a PROXY header is logged. */
static void entry_timeout(petrel__conn_t *c)
{
    if (wants_proxy(c)) {
        proxy_reject(c, PETREL__PROXY_REJ_TIMEOUT,
                     "no complete PROXY header within the header timeout (--header-timeout)");
        return;
    }
    petrel__conn_close(c, PETREL__CLOSE_TIMEOUT);
}

static void entry_expire(petrel__timer_t *t)
{
    petrel__conn_expire(t, entry_timeout);
}

/* Accepted but not read yet (or its PROXY header not complete yet): in
 * flight, not idle.  Its first bytes are served (HTTP/1.1 answers with
 * Connection: close while draining). */
static void entry_drain(petrel__conn_t *c, bool close_idle)
{
    (void)c, (void)close_idle;
}

const petrel__proto_ops_t petrel__entry_ops = {
    .name = "entry",
    .start = entry_start,
    .on_read = entry_read,
    .drain = entry_drain,
};

int petrel__entry_init(const petrel__config_t *cfg)
{
    int rc;
    if ((rc = petrel__tq_init(petrel__loop, &entry_q, cfg->header_timeout_ms, entry_expire)) < 0 ||
        (rc = petrel__http1_worker_init(cfg)) < 0 || (rc = petrel__h2_worker_init(cfg)) < 0)
        return rc;
    return 0;
}
