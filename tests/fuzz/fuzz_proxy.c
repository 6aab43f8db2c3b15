/*
 * fuzz_proxy.c -- the PROXY protocol header (src/runtime/proxy.c): whatever the
 * first bytes of a connection are, petrel__proxy_parse answers "a header of
 * N bytes", "more bytes", or "invalid", and never reads past what it got.
 *
 * Input: the bytes a connection starts with.  Asserted:
 *   - a header's length is within the input, at most the v2 cap, and every
 *     shorter prefix of it asks for more (the split across TCP segments is
 *     accepted, nothing is decided early);
 *   - an invalid input says why;
 *   - a v1 TCP4 header is exactly the line its fields print back to (single
 *     spaces, no leading zeros, CRLF): the strictness the specification
 *     asks for; a v1 TCP6 header's addresses print to a line that parses to
 *     the same addresses;
 *   - a v2 header's length is 16 plus its length field.
 */
#include "runtime/proxy.h"

#include "petrel.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn)) static void fail(const char *what)
{
    fprintf(stderr, "fuzz_proxy: %s\n", what);
    abort();
}

static ssize_t parse(const uint8_t *d, size_t n, petrel__proxy_hdr_t *h)
{
    /* a copy of exactly n bytes: ASan sees a read past them */
    char *copy = malloc(n ? n : 1);
    if (copy == NULL)
        abort();
    memcpy(copy, d, n);
    const char *why = NULL;
    ssize_t r = petrel__proxy_parse(copy, n, MAX, h, &why);
    free(copy);
    if (r < 0 && (why == NULL || why[0] == '\0'))
        fail("invalid without a reason");
    return r;
}

/* "PROXY TCPx src dst sport dport\r\n" from the parsed fields. */
static int print_v1(const petrel__proxy_hdr_t *h, char *buf, size_t len)
{
    char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
    bool v6 = h->src.sa.sa_family == AF_INET6;
    const void *sa = v6 ? (const void *)&h->src.in6.sin6_addr : (const void *)&h->src.in.sin_addr;
    const void *da = v6 ? (const void *)&h->dst.in6.sin6_addr : (const void *)&h->dst.in.sin_addr;
    inet_ntop(v6 ? AF_INET6 : AF_INET, sa, s, sizeof(s));
    inet_ntop(v6 ? AF_INET6 : AF_INET, da, d, sizeof(d));
    unsigned sp = ntohs(v6 ? h->src.in6.sin6_port : h->src.in.sin_port);
    unsigned dp = ntohs(v6 ? h->dst.in6.sin6_port : h->dst.in.sin_port);
    return snprintf(buf, len, "PROXY TCP%c %s %s %u %u\r\n", v6 ? '6' : '4', s, d, sp, dp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    petrel__proxy_hdr_t h;
    ssize_t r = parse(data, size, &h);
    if (r <= 0)
        return 0;
    if ((size_t)r > size || (h.version == 2 && r > MAX) ||
        (h.version == 1 && r > PETREL__PROXY_V1_MAX))
        fail("a header longer than the input or the cap");
    petrel__proxy_hdr_t h2;
    size_t probes[3] = {0, (size_t)r / 2, (size_t)r - 1};
    for (int i = 0; i < 3; i++)
        if (parse(data, probes[i], &h2) != 0)
            fail("a proper prefix of a header was decided");
    if (h.version == 2) {
        if ((size_t)r != 16 + ((size_t)data[14] << 8 | data[15]))
            fail("v2: the length is not 16 + len");
        return 0;
    }
    if (h.kind != PETREL__PROXY_ADDR)
        return 0;
    char line[160];
    int n = print_v1(&h, line, sizeof(line));
    if (h.src.sa.sa_family == AF_INET) {
        if (n != r || memcmp(line, data, (size_t)r) != 0)
            fail("v1 TCP4: the header is not the line of its own fields");
    } else {
        if (parse((const uint8_t *)line, (size_t)n, &h2) != n ||
            memcmp(&h2.src, &h.src, sizeof(h.src)) != 0 || memcmp(&h2.dst, &h.dst, sizeof(h.dst)))
            fail("v1 TCP6: the fields do not print to the same header");
    }
    return 0;
}
