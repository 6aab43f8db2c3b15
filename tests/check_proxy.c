/*
 * check_proxy.c -- unit tests of src/runtime/proxy.c: the PROXY protocol header,
 * versions 1 and 2, against HAProxy's specification ("The PROXY protocol",
 * sections 2.1 and 2.2), and the --trusted-proxies list.
 */
#include "runtime/proxy.h"

#include "petrel.h"
#include "check_run.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX PETREL__PROXY_MAX_DEFAULT

static ssize_t parse(const char *s, size_t n, petrel__proxy_hdr_t *h)
{
    const char *why = NULL;
    ssize_t rc = petrel__proxy_parse(s, n, MAX, h, &why);
    if (rc < 0)
        ck_assert_ptr_nonnull(why);
    return rc;
}

static ssize_t parse_str(const char *s, petrel__proxy_hdr_t *h)
{
    return parse(s, strlen(s), h);
}

/* *h names a client: version, source address (text) and both ports. */
static void expect_addr(const petrel__proxy_hdr_t *h, int version, const char *src, unsigned sport,
                        unsigned dport)
{
    char buf[INET6_ADDRSTRLEN];
    bool v4 = h->src.sa.sa_family == AF_INET;
    ck_assert_int_eq(h->version, version);
    ck_assert_int_eq(h->kind, PETREL__PROXY_ADDR);
    ck_assert_int_eq(h->dst.sa.sa_family, h->src.sa.sa_family);
    ck_assert_str_eq(v4 ? inet_ntop(AF_INET, &h->src.in.sin_addr, buf, sizeof(buf))
                        : inet_ntop(AF_INET6, &h->src.in6.sin6_addr, buf, sizeof(buf)),
                     src);
    ck_assert_uint_eq(ntohs(v4 ? h->src.in.sin_port : h->src.in6.sin6_port), sport);
    ck_assert_uint_eq(ntohs(v4 ? h->dst.in.sin_port : h->dst.in6.sin6_port), dport);
}

/* ------------------------------------------------------------------------ */
/* Version 1 (spec 2.1)                                                     */

START_TEST(test_v1_tcp4)
{
    petrel__proxy_hdr_t h;
    const char *s = "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
    ck_assert_int_eq(parse_str(s, &h), 45);
    expect_addr(&h, 1, "192.0.2.1", 56324, 443);
}
END_TEST

START_TEST(test_v1_tcp6)
{
    petrel__proxy_hdr_t h;
    const char *s = "PROXY TCP6 2001:db8::1 2001:DB8:0:0:0:0:0:2 0 65535\r\n";
    ck_assert_int_eq(parse_str(s, &h), (ssize_t)strlen(s));
    expect_addr(&h, 1, "2001:db8::1", 0, 65535);
    /* an IPv4-mapped address is IPv6 text */
    ck_assert_int_gt(parse_str("PROXY TCP6 ::ffff:192.0.2.1 ::1 1 2\r\n", &h), 0);
}
END_TEST

/* "PROXY UNKNOWN": whatever follows up to the CRLF is ignored, in lines of
 * up to 107 bytes. */
START_TEST(test_v1_unknown)
{
    petrel__proxy_hdr_t h;
    ck_assert_int_eq(parse_str("PROXY UNKNOWN\r\n", &h), 15);
    ck_assert_int_eq(h.kind, PETREL__PROXY_UNKNOWN);
    char line[PETREL__PROXY_V1_MAX + 1];
    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    memcpy(line + PETREL__PROXY_V1_MAX - 2, "\r\n", 2); /* 107 bytes exactly */
    ck_assert_int_eq(parse(line, PETREL__PROXY_V1_MAX, &h), PETREL__PROXY_V1_MAX);
    ck_assert_int_eq(h.kind, PETREL__PROXY_UNKNOWN);
    ck_assert_int_eq(parse_str("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", &h), 35);
    /* one byte more: the CRLF is not within the first 107 bytes */
    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    memcpy(line + PETREL__PROXY_V1_MAX - 1, "\r\n", 2);
    ck_assert_int_lt(parse(line, sizeof(line) + 1 - 1, &h), 0);
    ck_assert_int_lt(parse_str("PROXY UNKNOWNX\r\n", &h), 0);
}
END_TEST

/* Exact syntax: each of these is refused. */
START_TEST(test_v1_malformed)
{
    static const char *const bad[] = {
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n",    /* LF alone */
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\rX",   /* CR alone */
        "PROXY  TCP4 192.0.2.1 198.51.100.2 56324 443\r\n", /* two spaces */
        "PROXY TCP4  192.0.2.1 198.51.100.2 56324 443\r\n",
        "PROXY TCP4 192.0.2.1  198.51.100.2 56324 443\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324  443\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 \r\n",  /* trailing space */
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n",       /* a field missing */
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 1\r\n", /* one too many */
        "PROXY TCP4 192.0.2.1 198.51.100.2 056324 443\r\n",  /* leading zero */
        "PROXY TCP4 192.0.2.1 198.51.100.2 00 443\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 65536 443\r\n", /* port > 65535 */
        "PROXY TCP4 192.0.2.1 198.51.100.2 -1 443\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 +1 443\r\n",
        "PROXY TCP4 192.0.2.1 198.51.100.2 1 4x3\r\n",
        "PROXY TCP4 192.0.2.01 198.51.100.2 1 2\r\n", /* leading zero in an octet */
        "PROXY TCP4 192.0.2.256 198.51.100.2 1 2\r\n",
        "PROXY TCP4 192.0.2 198.51.100.2 1 2\r\n",
        "PROXY TCP4 192.0.2.1.5 198.51.100.2 1 2\r\n",
        "PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n",    /* IPv6 in TCP4 */
        "PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n",       /* IPv4 in TCP6 */
        "PROXY TCP6 2001:db8::00001 2001:db8::2 1 2\r\n", /* 5 hex digits */
        "PROXY TCP6 2001:db8::1::2 2001:db8::2 1 2\r\n",
        "PROXY TCP6 2001:db8::g 2001:db8::2 1 2\r\n",
        "PROXY TCP6 [2001:db8::1] 2001:db8::2 1 2\r\n",
        "PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n",
        "PROXY tcp4 192.0.2.1 198.51.100.2 1 2\r\n",
        "PROXY TCP4\r\n",
        "PROXY \r\n",
        "PROXY\r\n",
        "proxy TCP4 192.0.2.1 198.51.100.2 1 2\r\n",
        "GET / HTTP/1.1\r\n", /* no header at all */
        "\r\n\r\nX",          /* not the v2 signature */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        petrel__proxy_hdr_t h;
        const char *why = NULL;
        ssize_t rc = petrel__proxy_parse(bad[i], strlen(bad[i]), MAX, &h, &why);
        ck_assert_msg(rc < 0, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(why);
    }
}
END_TEST

/* A header that comes in pieces: every proper prefix asks for more, the
 * whole is accepted (the header timeout bounds the wait). */
START_TEST(test_v1_split)
{
    const char *s = "PROXY TCP6 2001:db8::1 2001:db8::2 65535 80\r\n";
    size_t n = strlen(s);
    for (size_t k = 0; k < n; k++) {
        petrel__proxy_hdr_t h;
        ck_assert_msg(parse(s, k, &h) == 0, "prefix of %zu bytes", k);
    }
    petrel__proxy_hdr_t h;
    ck_assert_int_eq(parse(s, n, &h), (ssize_t)n);
    /* 107 bytes without a CRLF: no more waiting */
    char line[200];
    memset(line, 'x', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    ck_assert_int_eq(parse(line, 106, &h), 0);
    ck_assert_int_lt(parse(line, 107, &h), 0);
    /* a wrong first byte is wrong at once */
    ck_assert_int_lt(parse("G", 1, &h), 0);
    ck_assert_int_lt(parse("PRI", 3, &h), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Version 2 (spec 2.2)                                                     */

static const char sig[12] = "\r\n\r\n\0\r\nQUIT\n";

static size_t v2(uint8_t *b, uint8_t ver_cmd, uint8_t fam, uint16_t len, const void *body,
                 size_t blen)
{
    memcpy(b, sig, 12);
    b[12] = ver_cmd;
    b[13] = fam;
    b[14] = (uint8_t)(len >> 8);
    b[15] = (uint8_t)len;
    if (blen)
        memcpy(b + 16, body, blen);
    return 16 + blen;
}

START_TEST(test_v2_inet)
{
    uint8_t b[256], addr[12] = {192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb};
    size_t n = v2(b, 0x21, 0x11, 12, addr, 12);
    memcpy(b + n, "GET", 3);
    petrel__proxy_hdr_t h;
    ck_assert_int_eq(parse((char *)b, n + 3, &h), 28);
    expect_addr(&h, 2, "192.0.2.1", 56324, 443);
}
END_TEST

START_TEST(test_v2_inet6_tlvs)
{
    /* INET6 with TLVs after the addresses (ALPN "h2", AUTHORITY, NOOP,
     * a CRC32C): all skipped whole */
    uint8_t body[36 + 64];
    memset(body, 0, sizeof(body));
    body[0] = 0x20;
    body[1] = 0x01;
    body[2] = 0x0d;
    body[3] = 0xb8;
    body[15] = 1;
    body[32] = 0x30; /* port 12345 */
    body[33] = 0x39;
    uint8_t tlv[] = {0x01, 0,   2,   'h',  '2', 0x02, 0,   11,  'e',  'x', 'a',
                     'm',  'p', 'l', 'e',  '.', 'c',  'o', 'm', 0x04, 0,   3,
                     0,    0,   0,   0x03, 0,   4,    1,   2,   3,    4};
    memcpy(body + 36, tlv, sizeof(tlv));
    size_t len = 36 + sizeof(tlv);
    uint8_t b[256];
    size_t n = v2(b, 0x21, 0x21, (uint16_t)len, body, len);
    petrel__proxy_hdr_t h;
    ck_assert_int_eq(parse((char *)b, n, &h), (ssize_t)n);
    expect_addr(&h, 2, "2001:db8::1", 12345, 0);
    /* a TLV that claims more than there is: malformed */
    b[16 + 36 + 1] = 0xff;
    b[16 + 36 + 2] = 0xff;
    ck_assert_int_lt(parse((char *)b, n, &h), 0);
}
END_TEST

/* TLVs must fill the bytes after the address block exactly (spec 2.2.7):
 * one that runs past the header's length, or a TLV header of fewer than 3
 * bytes, is a malformed header -- whatever bytes follow the header. */
START_TEST(test_v2_tlv_bounds)
{
    uint8_t b[256], body[64] = {192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb};
    petrel__proxy_hdr_t h;
    const char *why;
    /* len 18: a NOOP TLV that claims 64 bytes, with 3 present */
    uint8_t noop[6] = {0x04, 0, 64, 0, 0, 0};
    memcpy(body + 12, noop, 6);
    size_t n = v2(b, 0x21, 0x11, 18, body, 18);
    memset(b + n, 'G', 64); /* what the client sends next is not the TLV's */
    why = NULL;
    ck_assert_int_lt(petrel__proxy_parse((char *)b, n + 64, MAX, &h, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "TLV"));
    /* len 14: a TLV header of 2 bytes */
    uint8_t cut[2] = {0x04, 0};
    memcpy(body + 12, cut, 2);
    n = v2(b, 0x21, 0x11, 14, body, 14);
    why = NULL;
    ck_assert_int_lt(petrel__proxy_parse((char *)b, n, MAX, &h, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "TLV"));
    /* len 13: one byte */
    n = v2(b, 0x21, 0x11, 13, body, 13);
    ck_assert_int_lt(parse((char *)b, n, &h), 0);
    /* the second of two TLVs runs past by one byte */
    uint8_t two[10] = {0x04, 0, 1, 0, 0x04, 0, 4, 0, 0, 0};
    memcpy(body + 12, two, 10);
    n = v2(b, 0x21, 0x11, 22, body, 22);
    ck_assert_int_lt(parse((char *)b, n, &h), 0);
    /* ... and fits exactly with one byte less claimed */
    b[16 + 12 + 6] = 3;
    ck_assert_int_eq(parse((char *)b, n, &h), (ssize_t)n);
    /* a TLV of length 0 at the very end */
    uint8_t empty[3] = {0x04, 0, 0};
    memcpy(body + 12, empty, 3);
    n = v2(b, 0x21, 0x11, 15, body, 15);
    ck_assert_int_eq(parse((char *)b, n, &h), 15 + 16);
    /* INET6 and UNIX: the TLVs after their blocks are checked the same */
    uint8_t b6[64] = {0};
    memcpy(b6 + 36, noop, 6);
    n = v2(b, 0x21, 0x21, 42, b6, 42);
    ck_assert_int_lt(parse((char *)b, n, &h), 0);
    static uint8_t bu[216 + 6];
    memcpy(bu + 216, noop, 6);
    uint8_t big[256 + 16];
    n = v2(big, 0x21, 0x31, 222, bu, 222);
    ck_assert_int_lt(parse((char *)big, n, &h), 0);
    /* LOCAL: the addresses and what follows are ignored, TLVs too */
    n = v2(b, 0x20, 0x11, 18, body, 18);
    memcpy(b + 16 + 12, noop, 6);
    ck_assert_int_eq(parse((char *)b, n, &h), 18 + 16);
}
END_TEST

START_TEST(test_v2_local_unspec_unix)
{
    uint8_t b[512];
    petrel__proxy_hdr_t h;
    /* LOCAL (a health check of the balancer): no addresses needed */
    size_t n = v2(b, 0x20, 0x00, 0, NULL, 0);
    ck_assert_int_eq(parse((char *)b, n, &h), 16);
    ck_assert_int_eq(h.kind, PETREL__PROXY_LOCAL);
    /* LOCAL with an address block: ignored, skipped */
    uint8_t addr[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2};
    n = v2(b, 0x20, 0x11, 12, addr, 12);
    ck_assert_int_eq(parse((char *)b, n, &h), 28);
    ck_assert_int_eq(h.kind, PETREL__PROXY_LOCAL);
    /* PROXY with UNSPEC: the socket's addresses stand */
    n = v2(b, 0x21, 0x00, 0, NULL, 0);
    ck_assert_int_eq(parse((char *)b, n, &h), 16);
    ck_assert_int_eq(h.kind, PETREL__PROXY_UNKNOWN);
    /* UNIX stream: 216 bytes of addresses */
    uint8_t u[216] = {'/', 't'};
    n = v2(b, 0x21, 0x31, 216, u, 216);
    ck_assert_int_eq(parse((char *)b, n, &h), 232);
    ck_assert_int_eq(h.kind, PETREL__PROXY_UNIX);
}
END_TEST

START_TEST(test_v2_malformed)
{
    uint8_t b[256], addr[36] = {0};
    petrel__proxy_hdr_t h;
    const char *why;
    struct {
        uint8_t vc, fam;
        uint16_t len;
        const char *what;
    } bad[] = {
        {0x11, 0x11, 12, "version 1 in the binary form"},
        {0x31, 0x11, 12, "version 3"},
        {0x01, 0x11, 12, "version 0"},
        {0x22, 0x11, 12, "command 2"},
        {0x2f, 0x11, 12, "command 15"},
        {0x21, 0x41, 12, "family 4"},
        {0x21, 0xf1, 12, "family 15"},
        {0x21, 0x13, 12, "transport 3"},
        {0x21, 0x11, 11, "INET, len 11"},
        {0x21, 0x21, 35, "INET6, len 35"},
        {0x21, 0x31, 215, "UNIX, len 215"},
        {0x21, 0x11, 0, "INET, len 0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = v2(b, bad[i].vc, bad[i].fam, bad[i].len, addr, sizeof(addr));
        why = NULL;
        ck_assert_msg(petrel__proxy_parse((char *)b, n, MAX, &h, &why) < 0, "accepted: %s",
                      bad[i].what);
        ck_assert_ptr_nonnull(why);
    }
    /* a wrong signature byte */
    size_t n = v2(b, 0x21, 0x11, 12, addr, 12);
    b[7] = 'q';
    ck_assert_int_lt(petrel__proxy_parse((char *)b, n, MAX, &h, &why), 0);
}
END_TEST

/* The cap: a length past --max-proxy-header-size is refused before its
 * bytes are waited for. */
START_TEST(test_v2_cap)
{
    uint8_t b[16];
    v2(b, 0x21, 0x11, 0xffff, NULL, 0);
    petrel__proxy_hdr_t h;
    const char *why = NULL;
    ck_assert_int_lt(petrel__proxy_parse((char *)b, 16, MAX, &h, &why), 0);
    ck_assert_ptr_nonnull(strstr(why, "max-proxy-header-size"));
    v2(b, 0x21, 0x11, (uint16_t)(MAX - 16), NULL, 0);
    ck_assert_int_eq(petrel__proxy_parse((char *)b, 16, MAX, &h, &why), 0); /* wait for it */
    v2(b, 0x21, 0x11, (uint16_t)(MAX - 15), NULL, 0);
    ck_assert_int_lt(petrel__proxy_parse((char *)b, 16, MAX, &h, &why), 0);
}
END_TEST

START_TEST(test_v2_split)
{
    uint8_t b[256], addr[12] = {192, 0, 2, 9, 198, 51, 100, 2, 0, 80, 0, 81};
    uint8_t tlv[5] = {0x04, 0, 2, 0, 0};
    uint8_t body[17];
    memcpy(body, addr, 12);
    memcpy(body + 12, tlv, 5);
    size_t n = v2(b, 0x21, 0x11, 17, body, 17);
    petrel__proxy_hdr_t h;
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(parse((char *)b, k, &h) == 0, "prefix of %zu bytes", k);
    ck_assert_int_eq(parse((char *)b, n, &h), (ssize_t)n);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* --trusted-proxies                                                        */

static bool match(const char *list, const char *addr)
{
    petrel__cidr_t c[8];
    size_t n = 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        ck_assert_int_eq(petrel__cidr_parse(p, len, &c[n++]), 0);
        p += len + (e != NULL);
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, addr, &a->sin_addr), 1);
    }
    return petrel__cidr_match(c, n, (struct sockaddr *)&ss);
}

START_TEST(test_cidr)
{
    ck_assert(match("127.0.0.1", "127.0.0.1"));
    ck_assert(!match("127.0.0.1", "127.0.0.2"));
    ck_assert(match("10.0.0.0/8", "10.200.1.1"));
    ck_assert(!match("10.0.0.0/8", "11.0.0.1"));
    ck_assert(match("192.0.2.0/25", "192.0.2.127"));
    ck_assert(!match("192.0.2.0/25", "192.0.2.128"));
    ck_assert(match("0.0.0.0/0", "203.0.113.7"));
    ck_assert(match("10.0.0.0/8,2001:db8::/32", "2001:db8:ffff::1"));
    ck_assert(!match("10.0.0.0/8,2001:db8::/32", "2001:db9::1"));
    ck_assert(match("::1", "::1"));
    /* an IPv4 client on a dual-stack socket */
    ck_assert(match("192.0.2.0/24", "::ffff:192.0.2.10"));
    ck_assert(!match("192.0.2.0/24", "::ffff:192.0.3.10"));
    ck_assert(!match("::/0", "192.0.2.1"));
    petrel__cidr_t c;
    static const char *const bad[] = {"",          "10.0.0.0/33", "::/129",
                                      "10.0.0.0/", "10.0.0.0/a",  "10.0.0.0/08",
                                      "example",   "10.0.0/8",    "1.2.3.4/8/9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(petrel__cidr_parse(bad[i], strlen(bad[i]), &c) < 0, "accepted: %s", bad[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proxy");
    TCase *tc = tcase_create("v1");
    tcase_add_test(tc, test_v1_tcp4);
    tcase_add_test(tc, test_v1_tcp6);
    tcase_add_test(tc, test_v1_unknown);
    tcase_add_test(tc, test_v1_malformed);
    tcase_add_test(tc, test_v1_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("v2");
    tcase_add_test(tc, test_v2_inet);
    tcase_add_test(tc, test_v2_inet6_tlvs);
    tcase_add_test(tc, test_v2_local_unspec_unix);
    tcase_add_test(tc, test_v2_malformed);
    tcase_add_test(tc, test_v2_tlv_bounds);
    tcase_add_test(tc, test_v2_cap);
    tcase_add_test(tc, test_v2_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("trusted");
    tcase_add_test(tc, test_cidr);
    suite_add_tcase(s, tc);
    return ck_run(s);
}
