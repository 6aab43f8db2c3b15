/*
 * proxy.c -- the PROXY protocol header, versions 1 and 2 (HAProxy's
 * specification, "The PROXY protocol"), and the --trusted-proxies list.
 *
 * Parsed to the letter, because a header is accepted only from a trusted
 * balancer and anything it does not say exactly is a sign that it is not
 * one: a v1 line is "PROXY" SP protocol SP src SP dst SP sport SP dport
 * CRLF, single spaces, at most 107 bytes with its CRLF, ports in decimal
 * without leading zeros from 0 to 65535, addresses in their usual text
 * (IPv4 dotted decimal without leading zeros, IPv6 groups of at most four
 * hex digits); "UNKNOWN" and whatever follows it up to the CRLF is
 * accepted and ignored.  A v2 header is the 12-byte signature, version 2,
 * command LOCAL or PROXY, family UNSPEC, INET, INET6 or UNIX with
 * transport UNSPEC, STREAM or DGRAM, and a length that covers at least the
 * family's address block; what follows the addresses of a PROXY command
 * (INET, INET6, UNIX) is a sequence of TLVs (type, 16-bit length, value)
 * that must fill it exactly -- a TLV that runs past the header's length,
 * or a TLV header cut short, is a malformed header -- and is otherwise
 * skipped, unread, up to the --max-proxy-header-size cap.
 */
#include "runtime/proxy.h"
#include "runtime/options.h"

#include "petrel.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

static const char v1_prefix[] = "PROXY ";
static const char v2_sig[12] = {'\r', '\n', '\r', '\n', '\0', '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};

static ssize_t bad(const char **why, const char *what)
{
    *why = what;
    return PETREL_EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Version 1                                                                */

/*
 * The scanners below read a number or an IPv4 address at *s and leave *s
 * after it.  They stop at the first byte that cannot continue it and read
 * nothing past that byte, so the text they scan must end with a byte that
 * is neither a digit nor a dot (the line's CR, a space, a NUL); their
 * callers check that it is the separator they expect.
 */

/* A decimal number from 0 to `max` (at most 65535), without sign or
 * leading zero. */
static bool dec(const char **s, unsigned max, unsigned *out)
{
    const char *p = *s;
    unsigned v = (unsigned)(*p++ - '0');
    if (v > 9)
        return false;
    if (v) /* a 0 stands alone: no leading zeros */
        for (unsigned d; (d = (unsigned)(*p - '0')) <= 9; p++)
            if ((v = v * 10 + d) > max)
                return false;
    *s = p;
    *out = v;
    return true;
}

/* A port, 0 to 65535, into *port in network byte order. */
static bool port_scan(const char **s, uint16_t *port)
{
    unsigned v;
    if (!dec(s, 65535, &v))
        return false;
    *port = htons((uint16_t)v);
    return true;
}

/* Four decimal numbers 0-255 separated by dots. */
static bool ipv4_scan(const char **s, struct in_addr *a)
{
    uint32_t addr = 0;
    for (int part = 0; part < 4; part++) {
        unsigned v;
        if ((part && *(*s)++ != '.') || !dec(s, 255, &v))
            return false;
        addr = addr << 8 | v;
    }
    a->s_addr = htonl(addr);
    return true;
}

/* RFC 4291 §2.2 text: hex groups of one to four digits, "::" once, an
 * IPv4 tail; the groups' width is checked here, the rest by inet_pton. */
static bool v1_ipv6(const char *s, size_t n, struct in6_addr *a)
{
    char buf[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof(buf))
        return false;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
        if (hex) {
            if (++run > 4)
                return false;
        } else if (ch == ':' || ch == '.') {
            run = 0;
        } else {
            return false;
        }
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET6, buf, a) == 1;
}

/* The next field of [*s, end): up to a single space or the end. */
static bool v1_field(const char **s, const char *end, const char **f, size_t *len, bool last)
{
    const char *p = *s;
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (last) {
        if (sp)
            return false; /* a field too many, or a trailing space */
        sp = end;
    } else if (sp == NULL) {
        return false;
    }
    *f = p;
    *len = (size_t)(sp - p);
    *s = sp + (sp < end);
    return *len > 0; /* two spaces make an empty field */
}

/* The line [s, end) after "PROXY ", without its CRLF. */
static ssize_t v1_line(const char *s, const char *end, petrel__proxy_hdr_t *h, const char **why)
{
    size_t n = (size_t)(end - s);
    if (n >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (n == 7 || s[7] == ' ')) {
        h->kind = PETREL__PROXY_UNKNOWN; /* the rest of the line is ignored */
        return 0;
    }
    if (n >= 5 && memcmp(s, "TCP4 ", 5) == 0) {
        /* in one pass: the CR at `end` stops every scan */
        s += 5;
        h->kind = PETREL__PROXY_ADDR;
        h->src.in.sin_family = h->dst.in.sin_family = AF_INET;
        if (!ipv4_scan(&s, &h->src.in.sin_addr) || *s++ != ' ' ||
            !ipv4_scan(&s, &h->dst.in.sin_addr) || *s++ != ' ' ||
            !port_scan(&s, &h->src.in.sin_port) || *s++ != ' ' ||
            !port_scan(&s, &h->dst.in.sin_port) || s != end)
            return bad(why, "v1: TCP4 wants two IPv4 addresses (no leading zeros), then two ports "
                            "from 0 to 65535, single spaces apart");
        return 0;
    }
    if (n < 5 || memcmp(s, "TCP6 ", 5) != 0)
        return bad(why, "v1: the protocol is not TCP4, TCP6 or UNKNOWN");
    s += 5;
    const char *f[4];
    size_t len[4];
    for (int i = 0; i < 4; i++)
        if (!v1_field(&s, end, &f[i], &len[i], i == 3))
            return bad(why, "v1: expected four fields separated by single spaces");
    h->kind = PETREL__PROXY_ADDR;
    struct sockaddr_in6 *a[2] = {&h->src.in6, &h->dst.in6};
    for (int i = 0; i < 2; i++) {
        const char *q = f[i + 2]; /* followed by a space or the CR */
        a[i]->sin6_family = AF_INET6;
        if (!v1_ipv6(f[i], len[i], &a[i]->sin6_addr) || !port_scan(&q, &a[i]->sin6_port) ||
            q != f[i + 2] + len[i + 2])
            return bad(why, "v1: TCP6 with an address that is not IPv6, or a port that is not a "
                            "number from 0 to 65535");
    }
    return 0;
}

static ssize_t parse_v1(const char *p, size_t n, petrel__proxy_hdr_t *h, const char **why)
{
    size_t k = n < sizeof(v1_prefix) - 1 ? n : sizeof(v1_prefix) - 1;
    for (size_t i = 1; i < k; i++) /* p[0] is 'P' */
        if (p[i] != v1_prefix[i])
            return bad(why, "no PROXY protocol header");
    if (n <= k)
        return 0;
    size_t lim = n < PETREL__PROXY_V1_MAX ? n : PETREL__PROXY_V1_MAX;
    const char *cr = memchr(p + k, '\r', lim - k);
    if (memchr(p + k, '\n', (size_t)((cr ? cr : p + lim) - (p + k))))
        return bad(why, "v1: a line feed without a carriage return");
    if (cr) {
        size_t i = (size_t)(cr - p);
        if (i + 1 >= PETREL__PROXY_V1_MAX)
            return bad(why, "v1: no CRLF within the first 107 bytes");
        if (i + 1 >= n)
            return 0;
        if (p[i + 1] != '\n')
            return bad(why, "v1: a carriage return without a line feed");
        h->version = 1;
        ssize_t rc = v1_line(p + k, p + i, h, why);
        return rc < 0 ? rc : (ssize_t)(i + 2);
    }
    if (n >= PETREL__PROXY_V1_MAX)
        return bad(why, "v1: no CRLF within the first 107 bytes");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Version 2                                                                */

/* The v2 address block of INET (`alen` 4) or INET6 (16): source and
 * destination addresses, then their ports, all in network byte order. */
static void v2_addrs(const uint8_t *a, size_t alen, void *src, void *dst, void *sport, void *dport)
{
    memcpy(src, a, alen);
    memcpy(dst, a + alen, alen);
    memcpy(sport, a + 2 * alen, 2);
    memcpy(dport, a + 2 * alen + 2, 2);
}

static ssize_t parse_v2(const char *p, size_t n, size_t max, petrel__proxy_hdr_t *h,
                        const char **why)
{
    size_t k = n < sizeof(v2_sig) ? n : sizeof(v2_sig);
    if (k == sizeof(v2_sig) ? memcmp(p, v2_sig, sizeof(v2_sig)) != 0 : memcmp(p, v2_sig, k) != 0)
        return bad(why, "no PROXY protocol header");
    if (n < PETREL__PROXY_V2_HEAD)
        return 0;
    const uint8_t *u = (const uint8_t *)p;
    unsigned version = u[12] >> 4, command = u[12] & 15;
    unsigned family = u[13] >> 4, transport = u[13] & 15;
    size_t len = (size_t)u[14] << 8 | u[15];
    if (version != 2)
        return bad(why, "v2: the version is not 2");
    if (command > 1)
        return bad(why, "v2: the command is neither LOCAL nor PROXY");
    if (family > 3)
        return bad(why, "v2: unknown address family");
    if (transport > 2)
        return bad(why, "v2: unknown transport protocol");
    if (PETREL__PROXY_V2_HEAD + len > max)
        return bad(why, "v2: a header longer than --max-proxy-header-size");
    static const size_t block[4] = {0, 12, 36, 216}; /* UNSPEC, INET, INET6, UNIX */
    if (command == 1 && len < block[family])
        return bad(why, "v2: the length does not cover the address block");
    if (n < PETREL__PROXY_V2_HEAD + len)
        return 0;
    const uint8_t *a = u + PETREL__PROXY_V2_HEAD;
    if (command == 1 && family != 0) {
        /* the TLVs: each within the header (spec 2.2.7) */
        size_t off = block[family];
        while (off < len) {
            if (len - off < 3)
                return bad(why, "v2: a TLV cut short (less than its 3-byte type and length)");
            size_t tl = (size_t)a[off + 1] << 8 | a[off + 2];
            if (tl > len - off - 3)
                return bad(why, "v2: a TLV longer than what is left of the header");
            off += 3 + tl;
        }
    }
    h->version = 2;
    if (command == 0) {
        h->kind = PETREL__PROXY_LOCAL; /* the family and addresses are ignored */
    } else if (family == 1) {
        h->kind = PETREL__PROXY_ADDR;
        h->src.in.sin_family = h->dst.in.sin_family = AF_INET;
        v2_addrs(a, 4, &h->src.in.sin_addr, &h->dst.in.sin_addr, &h->src.in.sin_port,
                 &h->dst.in.sin_port);
    } else if (family == 2) {
        h->kind = PETREL__PROXY_ADDR;
        h->src.in6.sin6_family = h->dst.in6.sin6_family = AF_INET6;
        v2_addrs(a, 16, &h->src.in6.sin6_addr, &h->dst.in6.sin6_addr, &h->src.in6.sin6_port,
                 &h->dst.in6.sin6_port);
    } else {
        h->kind = family == 3 ? PETREL__PROXY_UNIX : PETREL__PROXY_UNKNOWN;
    }
    return (ssize_t)(PETREL__PROXY_V2_HEAD + len);
}

ssize_t petrel__proxy_parse(const char *p, size_t n, size_t max, petrel__proxy_hdr_t *h,
                            const char **why)
{
    memset(h, 0, sizeof(*h));
    if (n == 0)
        return 0;
    if (p[0] == v1_prefix[0])
        return parse_v1(p, n, h, why);
    if (p[0] == v2_sig[0])
        return parse_v2(p, n, max, h, why);
    return bad(why, "no PROXY protocol header");
}

/* ------------------------------------------------------------------------ */
/* --trusted-proxies                                                        */

int petrel__cidr_parse(const char *s, size_t len, petrel__cidr_t *out)
{
    char buf[INET6_ADDRSTRLEN + 8];
    if (len == 0 || len >= sizeof(buf))
        return PETREL_EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = '\0';
        const char *b = slash + 1;
        size_t bl = strlen(b);
        if (bl == 0 || bl > 3 || (bl > 1 && b[0] == '0'))
            return PETREL_EINVAL;
        bits = 0;
        for (size_t i = 0; i < bl; i++) {
            if (b[i] < '0' || b[i] > '9')
                return PETREL_EINVAL;
            bits = bits * 10 + (b[i] - '0');
        }
    }
    memset(out, 0, sizeof(*out));
    struct in_addr a4;
    const char *q = buf; /* NUL-terminated */
    if (ipv4_scan(&q, &a4) && *q == '\0') {
        out->family = AF_INET;
        memcpy(out->addr, &a4, 4);
        if (bits > 32)
            return PETREL_EINVAL;
        out->bits = (uint8_t)(bits < 0 ? 32 : bits);
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        if (bits > 128)
            return PETREL_EINVAL;
        out->bits = (uint8_t)(bits < 0 ? 128 : bits);
    } else {
        return PETREL_EINVAL;
    }
    return 0;
}

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

bool petrel__cidr_match(const petrel__cidr_t *list, size_t n, const struct sockaddr *peer)
{
    const uint8_t *v4 = NULL, *v6 = NULL;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (peer->sa_family == AF_INET) {
        v4 = (const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr;
    } else if (peer->sa_family == AF_INET6) {
        v6 = ((const struct sockaddr_in6 *)peer)->sin6_addr.s6_addr;
        if (memcmp(v6, mapped, 12) == 0)
            v4 = v6 + 12;
    }
    for (size_t i = 0; i < n; i++) {
        const petrel__cidr_t *c = &list[i];
        if (c->family == AF_INET && v4 && prefix_eq(v4, c->addr, c->bits))
            return true;
        if (c->family == AF_INET6 && v6 && prefix_eq(v6, c->addr, c->bits))
            return true;
    }
    return false;
}

/* The options of the PROXY protocol (runtime/options.h). */

/* --trusted-proxies CIDR[,CIDR...]: a list of the heap (petrel_main frees
 * cfg->trusted). */
static int set_trusted(petrel__config_t *cfg, const char *flag, const char *value, void *ctx)
{
    (void)flag, (void)ctx;
    size_t cap = 1, n = 0;
    for (const char *p = value; *p; p++)
        cap += *p == ',';
    petrel__cidr_t *list = calloc(cap, sizeof(*list));
    if (list == NULL)
        return PETREL_ENOMEM;
    for (const char *p = value;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (petrel__cidr_parse(p, len, &list[n]) < 0) {
            free(list);
            return PETREL_EINVAL;
        }
        n++;
        if (e == NULL)
            break;
        p = e + 1;
    }
    free((void *)cfg->trusted);
    cfg->trusted = list;
    cfg->ntrusted = n;
    return 0;
}

static const petrel__option_t proxy_options[] = {
    {.name = "proxy-protocol",
     .kind = PETREL__OPT_FLAG,
     PETREL__OPT_FIELD(proxy_protocol),
     .help = "every connection of the --listen addresses starts with a\n"
             "PROXY protocol header (v1 or v2) naming the client"},
    {.name = "trusted-proxies",
     .value = "CIDR[,CIDR...]",
     .kind = PETREL__OPT_CALL,
     .set = set_trusted,
     .expect = "a comma-separated list of addresses or CIDR blocks "
               "(e.g. 10.0.0.0/8,2001:db8::/32)",
     .help = "with --proxy-protocol, accept connections only from these\n"
             "addresses (default: any)"},
    {.name = "max-proxy-header-size",
     .value = "BYTES",
     .kind = PETREL__OPT_SIZE,
     PETREL__OPT_FIELD(max_proxy_header_size),
     .min = PETREL__PROXY_MAX_MIN,
     .max = PETREL__PROXY_MAX_MAX,
     .def = PETREL__PROXY_MAX_DEFAULT,
     .expect = "a size from 232 bytes to 16k",
     .help = "largest PROXY v2 header, TLVs included (default 4k)"},
    {.name = NULL},
};
const petrel__option_table_t petrel__proxy_option_table = {
    "proxy", "Behind a load balancer, under systemd (doc/deployment.md):", proxy_options};
