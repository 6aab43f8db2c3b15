/*
 * proxy.h -- the PROXY protocol (proxy.c): the header a load balancer
 * (HAProxy, AWS NLB, nginx's proxy_protocol) sends first on each
 * connection to name the client it accepted, and the --trusted-proxies
 * list of addresses allowed to send one.  Versions 1 (text) and 2 (binary)
 * of HAProxy's specification, "The PROXY protocol", parsed to the letter.
 *
 * proxy.c only parses: the entry stage (entry.c) calls it on the first
 * bytes of a connection of a --proxy-protocol listener and replaces the
 * connection's peer address with the client's.
 */
#ifndef PETREL_PROXY_H
#define PETREL_PROXY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A version 1 header is one line of at most 107 bytes, CRLF included. */
#define PETREL__PROXY_V1_MAX 107
/* A version 2 header: 16 bytes, then `len` bytes of addresses and TLVs. */
#define PETREL__PROXY_V2_HEAD 16
/* The default of --max-proxy-header-size (the whole v2 header, TLVs
 * included), and its bounds: room for the largest address block (AF_UNIX,
 * 216 bytes), and the read buffer that must hold the header whole. */
#define PETREL__PROXY_MAX_DEFAULT 4096
#define PETREL__PROXY_MAX_MIN (PETREL__PROXY_V2_HEAD + 216)
#define PETREL__PROXY_MAX_MAX 16384

typedef union petrel__sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} petrel__sockaddr_t;

typedef struct petrel__proxy_hdr {
    int version; /* 1 or 2 */
    /* What the header says of the client:
     *   PETREL__PROXY_ADDR   src and dst are the client's and the balancer's
     *                        addresses (TCP4/TCP6, v2 PROXY with INET/INET6)
     *   PETREL__PROXY_LOCAL  v2 LOCAL (the balancer's own connection, e.g. a
     *                        health check): the socket's addresses stand
     *   PETREL__PROXY_UNKNOWN v1 UNKNOWN, v2 PROXY with the UNSPEC family:
     *                        the socket's addresses stand
     *   PETREL__PROXY_UNIX   v2 PROXY with the UNIX family: the client is a
     *                        local socket ("unix") */
    int kind;
    petrel__sockaddr_t src, dst;
} petrel__proxy_hdr_t;

enum { PETREL__PROXY_ADDR, PETREL__PROXY_LOCAL, PETREL__PROXY_UNKNOWN, PETREL__PROXY_UNIX };

/*
 * Parse the PROXY protocol header at the start of [p, p + n).  `max` is
 * the largest v2 header accepted (--max-proxy-header-size).  Returns the
 * header's length (> 0) with *h filled, 0 while [p, p + n) is a proper
 * prefix of a header that may still be valid (read more), or
 * PETREL_EINVAL with *why set to a static description of what is wrong.
 * Nothing of the header's addresses goes into *why.
 */
ssize_t petrel__proxy_parse(const char *p, size_t n, size_t max, petrel__proxy_hdr_t *h,
                            const char **why);

/* One entry of --trusted-proxies: an address and a prefix length. */
typedef struct petrel__cidr {
    sa_family_t family; /* AF_INET or AF_INET6 */
    uint8_t bits;
    uint8_t addr[16];
} petrel__cidr_t;

/* Parse "192.0.2.0/24", "2001:db8::/32" or a bare address (all its bits).
 * 0, or PETREL_EINVAL. */
int petrel__cidr_parse(const char *s, size_t len, petrel__cidr_t *out);
/* Whether `peer` (AF_INET or AF_INET6; an IPv4-mapped IPv6 address counts
 * as the IPv4 address) is within one of the `n` entries of `list`. */
bool petrel__cidr_match(const petrel__cidr_t *list, size_t n, const struct sockaddr *peer);

/* The options of the PROXY protocol (--proxy-protocol, --trusted-proxies,
 * --max-proxy-header-size). */
extern const struct petrel__option_table petrel__proxy_option_table;

#endif /* PETREL_PROXY_H */
