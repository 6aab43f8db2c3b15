/*
 * check_bench_ws.c -- unit tests of petrel-bench's WebSocket pieces
 * (src/bench/wsframe.c): SHA-1 against FIPS 180-4 / FIPS 180-2 appendix A
 * vectors, base64 against RFC 4648 §10, Sec-WebSocket-Accept against RFC
 * 6455 §1.3, the 101 check (§4.1), frame headers against the examples of
 * §5.7, and the refusals of §5.2 and §5.5.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_HIST_ONLY
#include "bench/bench.h"

static void sha1_hex(const void *data, size_t len, char out[41])
{
    uint8_t d[20];
    petrel__sha1(data, len, d);
    for (int i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

START_TEST(sha1_vectors)
{
    char hex[41];
    sha1_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    sha1_hex("", 0, hex);
    ck_assert_str_eq(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    /* 448 bits: the padding needs a second block */
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha1_hex(m2, strlen(m2), hex);
    ck_assert_str_eq(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    const char *m3 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                     "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha1_hex(m3, strlen(m3), hex);
    ck_assert_str_eq(hex, "a49b2446a02c645bf419f995b67091253a04a259");
    char *a = malloc(1000000);
    ck_assert_ptr_nonnull(a);
    memset(a, 'a', 1000000);
    sha1_hex(a, 1000000, hex);
    ck_assert_str_eq(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(a);
}
END_TEST

START_TEST(sha1_block_edges)
{
    /* around the padding boundaries (55/56 bytes: the length still fits in
     * the last block or not; 64: a whole block) digests are stable and each
     * length gives another digest */
    char buf[130], h1[41], h2[41];
    memset(buf, 'q', sizeof buf);
    for (size_t n = 54; n <= 129; n++) {
        sha1_hex(buf, n, h1);
        sha1_hex(buf, n, h2);
        ck_assert_str_eq(h1, h2);
        sha1_hex(buf, n + 1, h2);
        ck_assert_str_ne(h1, h2);
    }
    /* exactly one block of input, then a block of padding alone */
    memset(buf, 'a', 64);
    sha1_hex(buf, 64, h1);
    ck_assert_str_eq(h1, "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}
END_TEST

START_TEST(base64_vectors)
{
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const out[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char buf[16];
    for (int i = 0; i < 7; i++) {
        size_t n = petrel__base64_encode((const uint8_t *)in[i], strlen(in[i]), buf);
        ck_assert_str_eq(buf, out[i]);
        ck_assert_uint_eq(n, strlen(out[i]));
    }
    static const uint8_t hi[3] = {0xff, 0xfe, 0xfb};
    petrel__base64_encode(hi, 3, buf);
    ck_assert_str_eq(buf, "//77");
}
END_TEST

START_TEST(accept_rfc6455)
{
    char acc[29];
    petrel__ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, acc); /* RFC 6455 §1.3 */
    ck_assert_str_eq(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    ck_assert_uint_eq(strlen(acc), 28);
}
END_TEST

START_TEST(head_checks)
{
    const char *acc = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
    int status;
    const char *why;
    const char *ok =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(ok, strlen(ok), acc, &status, &why), BENCH_WS_HS_OK);
    ck_assert_int_eq(status, 101);
    /* header names and the Upgrade/Connection tokens are case-insensitive,
     * Connection may be a list */
    const char *ok2 = "HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nCONNECTION: keep-alive, upgrade\r\n"
                      "sec-websocket-accept:   s3pPLMBiTxaQ9kYGzzhZRbK+xOo=  \r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(ok2, strlen(ok2), acc, &status, &why), BENCH_WS_HS_OK);
    const char *st = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(st, strlen(st), acc, &status, &why), BENCH_WS_HS_STATUS);
    ck_assert_int_eq(status, 404);
    /* the accept value is case-sensitive (base64) */
    const char *bad =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Accept: S3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(bad, strlen(bad), acc, &status, &why), BENCH_WS_HS_BAD);
    ck_assert_str_eq(why, "wrong Sec-WebSocket-Accept");
    const char *noup = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(noup, strlen(noup), acc, &status, &why), BENCH_WS_HS_BAD);
    const char *noconn = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(noconn, strlen(noconn), acc, &status, &why),
                     BENCH_WS_HS_BAD);
    const char *noacc = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(noacc, strlen(noacc), acc, &status, &why),
                     BENCH_WS_HS_BAD);
    /* Upgrade: websocketx is not the token websocket */
    const char *tok =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocketx\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(tok, strlen(tok), acc, &status, &why), BENCH_WS_HS_BAD);
    const char *junk = "SSH-2.0-OpenSSH\r\n\r\n";
    ck_assert_int_eq(bench_ws_check_head(junk, strlen(junk), acc, &status, &why), BENCH_WS_HS_BAD);
}
END_TEST

START_TEST(frame_headers_rfc_examples)
{
    /* RFC 6455 §5.7 */
    uint8_t h[14];
    ck_assert_uint_eq(bench_ws_header(h, BENCH_WS_TEXT, 5, NULL), 2);
    ck_assert_uint_eq(h[0], 0x81);
    ck_assert_uint_eq(h[1], 0x05);
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    uint8_t fr[32];
    size_t n = bench_ws_header(fr, BENCH_WS_TEXT, 5, mask);
    memcpy(fr + n, "Hello", 5);
    bench_ws_mask(fr + n, 5, mask, 0);
    static const uint8_t want[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                   0x7f, 0x9f, 0x4d, 0x51, 0x58};
    ck_assert_uint_eq(n + 5, sizeof want);
    ck_assert_mem_eq(fr, want, sizeof want);
    ck_assert_uint_eq(bench_ws_header(h, BENCH_WS_BINARY, 256, NULL), 4);
    static const uint8_t w256[] = {0x82, 0x7e, 0x01, 0x00};
    ck_assert_mem_eq(h, w256, 4);
    ck_assert_uint_eq(bench_ws_header(h, BENCH_WS_BINARY, 65536, NULL), 10);
    static const uint8_t w64k[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0};
    ck_assert_mem_eq(h, w64k, 10);
    ck_assert_uint_eq(bench_ws_header(h, BENCH_WS_BINARY, 65535, mask), 8);

    /* and they parse back */
    bench_wsf_t f;
    const char *why;
    ck_assert_int_eq(bench_ws_parse(want, sizeof want, &f, &why), 6);
    ck_assert_int_eq(f.fin, 1);
    ck_assert_int_eq(f.opcode, BENCH_WS_TEXT);
    ck_assert_int_eq(f.masked, 1);
    ck_assert_uint_eq(f.len, 5);
    ck_assert_mem_eq(f.mask, mask, 4);
    uint8_t pl[5];
    memcpy(pl, want + 6, 5);
    bench_ws_mask(pl, 5, f.mask, 0);
    ck_assert_mem_eq(pl, "Hello", 5);
    ck_assert_int_eq(bench_ws_parse(w64k, 10, &f, &why), 10);
    ck_assert_uint_eq(f.len, 65536);
    ck_assert_int_eq(f.masked, 0);
    /* unmasked fragments "Hel" + "lo" (§5.7) */
    static const uint8_t frag1[] = {0x01, 0x03, 0x48, 0x65, 0x6c};
    static const uint8_t frag2[] = {0x80, 0x02, 0x6c, 0x6f};
    ck_assert_int_eq(bench_ws_parse(frag1, sizeof frag1, &f, &why), 2);
    ck_assert_int_eq(f.fin, 0);
    ck_assert_int_eq(f.opcode, BENCH_WS_TEXT);
    ck_assert_int_eq(bench_ws_parse(frag2, sizeof frag2, &f, &why), 2);
    ck_assert_int_eq(f.fin, 1);
    ck_assert_int_eq(f.opcode, BENCH_WS_CONT);
    /* a ping with "Hello" */
    static const uint8_t ping[] = {0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
    ck_assert_int_eq(bench_ws_parse(ping, sizeof ping, &f, &why), 2);
    ck_assert_int_eq(f.opcode, BENCH_WS_PING);
}
END_TEST

START_TEST(mask_offsets)
{
    /* masking in pieces at any offset equals masking at once (§5.3) */
    static const uint8_t mask[4] = {1, 2, 3, 4};
    uint8_t a[37], b[37];
    for (int i = 0; i < 37; i++)
        a[i] = b[i] = (uint8_t)(i * 7);
    bench_ws_mask(a, 37, mask, 0);
    bench_ws_mask(b, 5, mask, 0);
    bench_ws_mask(b + 5, 30, mask, 5);
    bench_ws_mask(b + 35, 2, mask, 35);
    ck_assert_mem_eq(a, b, 37);
}
END_TEST

START_TEST(parse_incomplete)
{
    uint8_t h[14];
    bench_wsf_t f;
    const char *why;
    static const uint8_t mask[4] = {9, 9, 9, 9};
    size_t n = bench_ws_header(h, BENCH_WS_BINARY, 70000, mask);
    ck_assert_uint_eq(n, 14);
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(bench_ws_parse(h, k, &f, &why), 0);
    ck_assert_int_eq(bench_ws_parse(h, n, &f, &why), 14);
    ck_assert_uint_eq(f.len, 70000);
}
END_TEST

START_TEST(parse_refusals)
{
    bench_wsf_t f;
    const char *why;
    /* §5.2: RSV1-3 without an extension */
    static const uint8_t rsv[] = {0xc1, 0x00};
    ck_assert_int_eq(bench_ws_parse(rsv, 2, &f, &why), -1);
    ck_assert_ptr_nonnull(why);
    /* reserved opcodes 0x3-0x7 and 0xB-0xF */
    for (int op = 3; op <= 15; op++) {
        if (op >= 8 && op <= 10)
            continue;
        uint8_t b[2] = {(uint8_t)(0x80 | op), 0};
        ck_assert_int_eq(bench_ws_parse(b, 2, &f, &why), -1);
    }
    /* §5.5: control frames are final and at most 125 bytes */
    static const uint8_t frag_ping[] = {0x09, 0x00};
    ck_assert_int_eq(bench_ws_parse(frag_ping, 2, &f, &why), -1);
    static const uint8_t long_close[] = {0x88, 0x7e, 0x00, 0x80};
    ck_assert_int_eq(bench_ws_parse(long_close, 4, &f, &why), -1);
    /* §5.2: the minimal number of bytes MUST be used for the length */
    static const uint8_t nm16[] = {0x82, 0x7e, 0x00, 0x05};
    ck_assert_int_eq(bench_ws_parse(nm16, 4, &f, &why), -1);
    static const uint8_t nm64[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    ck_assert_int_eq(bench_ws_parse(nm64, 10, &f, &why), -1);
    /* the most significant bit of a 64-bit length MUST be 0 */
    static const uint8_t msb[] = {0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(bench_ws_parse(msb, 10, &f, &why), -1);
    /* and a masked frame parses: the caller refuses it from a server (§5.1) */
    static const uint8_t masked[] = {0x81, 0x80, 1, 2, 3, 4};
    ck_assert_int_eq(bench_ws_parse(masked, 6, &f, &why), 6);
    ck_assert_int_eq(f.masked, 1);
}
END_TEST

START_TEST(payloads)
{
    uint8_t p[300];
    for (int binary = 0; binary < 2; binary++) {
        for (size_t size = 0; size < 300; size += 13) {
            bench_ws_payload(p, size, 123456789, binary);
            ck_assert(bench_ws_payload_check(p, size, 0, 123456789, binary));
            /* in pieces too */
            if (size > 10) {
                ck_assert(bench_ws_payload_check(p, 7, 0, 123456789, binary));
                ck_assert(bench_ws_payload_check(p + 7, size - 7, 7, 123456789, binary));
            }
            /* another message's payload, or one changed byte, does not pass */
            if (size >= 10) {
                ck_assert(!bench_ws_payload_check(p, size, 0, 123456788, binary));
                p[size - 1] ^= 1;
                ck_assert(!bench_ws_payload_check(p, size, 0, 123456789, binary));
            }
        }
    }
    /* text payloads are ASCII (valid UTF-8) */
    bench_ws_payload(p, 64, 42, 0);
    ck_assert_mem_eq(p, "42 xxxx", 7);
    for (int i = 0; i < 64; i++)
        ck_assert(p[i] >= 0x20 && p[i] < 0x7f);
}
END_TEST

static Suite *bench_ws_suite(void)
{
    Suite *s = suite_create("bench_ws");
    TCase *t = tcase_create("sha1_base64");
    tcase_add_test(t, sha1_vectors);
    tcase_add_test(t, sha1_block_edges);
    tcase_add_test(t, base64_vectors);
    tcase_add_test(t, accept_rfc6455);
    suite_add_tcase(s, t);
    TCase *h = tcase_create("handshake");
    tcase_add_test(h, head_checks);
    suite_add_tcase(s, h);
    TCase *f = tcase_create("frames");
    tcase_add_test(f, frame_headers_rfc_examples);
    tcase_add_test(f, mask_offsets);
    tcase_add_test(f, parse_incomplete);
    tcase_add_test(f, parse_refusals);
    tcase_add_test(f, payloads);
    suite_add_tcase(s, f);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bench_ws_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
