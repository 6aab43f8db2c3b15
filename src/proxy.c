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
 * family's address block; everything after the addresses (TLVs) is
 * skipped whole, unread, up to the --max-proxy-header-size cap.
 */
#include "proxy.h"

#include "petrel.h"

#include <arpa/inet.h>
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

/* "0" to "65535", no sign, no leading zero. */
static bool v1_port(const char *s, size_t n, uint16_t *port)
{
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return false;
    uint32_t v = 0;
    for (const char *e = s + n; s < e; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9)
            return false;
        v = v * 10 + d;
    }
    if (v > 65535)
        return false;
    *port = htons((uint16_t)v);
    return true;
}

/* Four decimal numbers 0-255 without leading zeros, separated by dots. */
static bool v1_ipv4(const char *s, size_t n, struct in_addr *a)
{
    if (n < 7 || n > 15)
        return false;
    const char *end = s + n;
    uint32_t addr = 0;
    for (int part = 0; part < 4; part++) {
        if (part && (s == end || *s++ != '.'))
            return false;
        if (s == end)
            return false;
        unsigned v = (unsigned)(*s++ - '0');
        if (v > 9)
            return false;
        if (v) /* a 0 stands alone: no leading zeros */
            for (int k = 0; k < 2 && s < end && (unsigned)(*s - '0') <= 9; k++)
                v = v * 10 + (unsigned)(*s++ - '0');
        if (v > 255)
            return false;
        addr = addr << 8 | v;
    }
    if (s != end)
        return false;
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

/*
 * The usual line, "TCP4 a.b.c.d e.f.g.h sport dport", in one pass: [s, end)
 * after "TCP4 ", *end the CR -- no digit, dot or space, so every field ends
 * there at the latest and nothing is read past it.  As strict as the
 * general path below (which reports what is wrong when this one says no):
 * single spaces, octets 0-255 and ports 0-65535 without leading zeros.
 */
static bool tcp4_fast(const char *s, const char *end, petrel__proxy_hdr_t *h)
{
    uint32_t addr[2];
    for (int i = 0; i < 2; i++) {
        uint32_t a = 0;
        for (int part = 0; part < 4; part++) {
            unsigned v = (unsigned)(*s++ - '0');
            if (v > 9)
                return false;
            unsigned d;
            if (v && (d = (unsigned)(*s - '0')) <= 9) { /* a 0 stands alone */
                v = v * 10 + d;
                if ((d = (unsigned)(*++s - '0')) <= 9) {
                    v = v * 10 + d;
                    s++;
                    if (v > 255)
                        return false;
                }
            }
            a = a << 8 | v;
            if (*s++ != (part == 3 ? ' ' : '.'))
                return false;
        }
        addr[i] = a;
    }
    unsigned port[2];
    for (int i = 0; i < 2; i++) {
        unsigned v = (unsigned)(*s++ - '0');
        if (v > 9)
            return false;
        if (v)
            for (int k = 0; k < 4; k++) {
                unsigned d = (unsigned)(*s - '0');
                if (d > 9)
                    break;
                v = v * 10 + d;
                s++;
            }
        if (v > 65535 || (i == 0 && *s++ != ' '))
            return false;
        port[i] = v;
    }
    if (s != end)
        return false;
    h->kind = PETREL__PROXY_ADDR;
    h->src.in.sin_family = h->dst.in.sin_family = AF_INET;
    h->src.in.sin_addr.s_addr = htonl(addr[0]);
    h->dst.in.sin_addr.s_addr = htonl(addr[1]);
    h->src.in.sin_port = htons((uint16_t)port[0]);
    h->dst.in.sin_port = htons((uint16_t)port[1]);
    return true;
}

/* The line [s, end) after "PROXY ", without its CRLF. */
static ssize_t v1_line(const char *s, const char *end, petrel__proxy_hdr_t *h, const char **why)
{
    size_t n = (size_t)(end - s);
    if (n >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (n == 7 || s[7] == ' ')) {
        h->kind = PETREL__PROXY_UNKNOWN; /* the rest of the line is ignored */
        return 0;
    }
    bool v6;
    if (n >= 5 && memcmp(s, "TCP4 ", 5) == 0)
        v6 = false;
    else if (n >= 5 && memcmp(s, "TCP6 ", 5) == 0)
        v6 = true;
    else
        return bad(why, "v1: the protocol is not TCP4, TCP6 or UNKNOWN");
    s += 5;
    const char *f[4];
    size_t len[4];
    for (int i = 0; i < 4; i++)
        if (!v1_field(&s, end, &f[i], &len[i], i == 3))
            return bad(why, "v1: expected four fields separated by single spaces");
    h->kind = PETREL__PROXY_ADDR;
    petrel__sockaddr_t *a[2] = {&h->src, &h->dst};
    for (int i = 0; i < 2; i++) {
        bool ok;
        if (v6) {
            a[i]->in6.sin6_family = AF_INET6;
            ok = v1_ipv6(f[i], len[i], &a[i]->in6.sin6_addr) &&
                 v1_port(f[i + 2], len[i + 2], &a[i]->in6.sin6_port);
        } else {
            a[i]->in.sin_family = AF_INET;
            ok = v1_ipv4(f[i], len[i], &a[i]->in.sin_addr) &&
                 v1_port(f[i + 2], len[i + 2], &a[i]->in.sin_port);
        }
        if (!ok)
            return bad(why, v6 ? "v1: TCP6 with an address that is not IPv6, or a port that is not "
                                 "a number from 0 to 65535"
                               : "v1: TCP4 with an address that is not IPv4, or a port that is not "
                                 "a number from 0 to 65535");
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
    if (cr && cr + 1 < p + n && cr[1] == '\n' && cr + 1 < p + PETREL__PROXY_V1_MAX &&
        cr - (p + k) >= 5 && memcmp(p + k, "TCP4 ", 5) == 0 && tcp4_fast(p + k + 5, cr, h)) {
        h->version = 1;
        return (ssize_t)(cr + 2 - p);
    }
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
    h->version = 2;
    const uint8_t *a = u + PETREL__PROXY_V2_HEAD;
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
    if (v1_ipv4(buf, strlen(buf), &a4)) {
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
