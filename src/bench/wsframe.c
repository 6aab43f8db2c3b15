/*
 * wsframe.c -- petrel-bench's WebSocket pieces that need no socket: SHA-1
 * (FIPS 180-4 §6.1) and base64 (RFC 4648 §4) for the opening handshake's
 * Sec-WebSocket-Accept (RFC 6455 §4.1, §4.2.2), the check of the server's
 * 101 response, frame headers (§5.2) and masking (§5.3), and the payload a
 * message carries.  Depends on nothing else, so tests/check_bench_ws.c links
 * it alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define BENCH_HIST_ONLY
#include "bench.h"

/* ------------------------------------------------------------------------- */
/* SHA-1, FIPS 180-4 §6.1.2: 512-bit blocks, 80 rounds over a 16-word window. */

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[16];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int t = 0; t < 80; t++) {
        uint32_t f, k;
        if (t >= 16) {
            uint32_t x = w[(t - 3) & 15] ^ w[(t - 8) & 15] ^ w[(t - 14) & 15] ^ w[t & 15];
            w[t & 15] = rol(x, 1);
        }
        if (t < 20) {
            f = (b & c) | (~b & d); /* Ch */
            k = 0x5a827999;
        } else if (t < 40) {
            f = b ^ c ^ d; /* Parity */
            k = 0x6ed9eba1;
        } else if (t < 60) {
            f = (b & c) | (b & d) | (c & d); /* Maj */
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        uint32_t tmp = rol(a, 5) + f + e + k + w[t & 15];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = tmp;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void bench_sha1(const void *data, size_t len, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    const uint8_t *p = data;
    size_t left = len;
    for (; left >= 64; left -= 64, p += 64)
        sha1_block(h, p);
    /* padding (§5.1.1): 0x80, zeros, the length in bits as 64 bits big-endian */
    uint8_t tail[128] = {0};
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t n = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha1_block(h, tail);
    if (n == 128)
        sha1_block(h, tail + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

/* ------------------------------------------------------------------------- */

size_t bench_base64(const uint8_t *src, size_t n, char *dst)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *q = dst;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        *q++ = tab[v >> 18];
        *q++ = tab[(v >> 12) & 63];
        *q++ = tab[(v >> 6) & 63];
        *q++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
        *q++ = tab[v >> 18];
        *q++ = tab[(v >> 12) & 63];
        *q++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *q++ = '=';
    }
    *q = 0;
    return (size_t)(q - dst);
}

void bench_ws_accept(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char buf[128];
    size_t k = strlen(key);
    if (k > sizeof buf - sizeof guid)
        k = sizeof buf - sizeof guid;
    memcpy(buf, key, k);
    memcpy(buf + k, guid, sizeof guid - 1);
    uint8_t d[20];
    bench_sha1(buf, k + sizeof guid - 1, d);
    bench_base64(d, sizeof d, out);
}

/* ------------------------------------------------------------------------- */
/* The 101 response (RFC 6455 §4.1, the client's checks 1-4). */

int bench_ws_check_head(const char *head, size_t len, const char *accept, int *status,
                        const char **why)
{
    *status = 0;
    *why = NULL;
    const char *end = head + len;
    const char *eol = memchr(head, '\n', len);
    if (!eol || len < 12 || strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' || head[9] < '1' ||
        head[9] > '5' || head[10] < '0' || head[10] > '9' || head[11] < '0' || head[11] > '9') {
        *why = "malformed status line";
        return BENCH_WS_HS_BAD;
    }
    *status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    if (*status != 101) {
        *why = "the server did not switch protocols";
        return BENCH_WS_HS_STATUS;
    }
    int upgrade = 0, connection = 0, acc = 0;
    for (const char *p = eol + 1; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            e = end;
        size_t n = (size_t)(e - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n == 0)
            break;
        const char *colon = memchr(p, ':', n);
        if (colon) {
            size_t nl = (size_t)(colon - p);
            const char *v = colon + 1;
            size_t vl = n - nl - 1;
            while (vl > 0 && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (nl == 7 && strncasecmp(p, "upgrade", 7) == 0)
                upgrade |= bench_has_token(v, vl, "websocket");
            else if (nl == 10 && strncasecmp(p, "connection", 10) == 0)
                connection |= bench_has_token(v, vl, "upgrade");
            else if (nl == 20 && strncasecmp(p, "sec-websocket-accept", 20) == 0)
                acc = vl == strlen(accept) && memcmp(v, accept, vl) == 0 ? 1 : -1;
        }
        p = e + 1;
    }
    if (!upgrade)
        *why = "101 without Upgrade: websocket";
    else if (!connection)
        *why = "101 without Connection: Upgrade";
    else if (acc == 0)
        *why = "101 without Sec-WebSocket-Accept";
    else if (acc < 0)
        *why = "wrong Sec-WebSocket-Accept";
    return *why ? BENCH_WS_HS_BAD : BENCH_WS_HS_OK;
}

/* ------------------------------------------------------------------------- */
/* Frames (RFC 6455 §5.2). */

size_t bench_ws_header(uint8_t *dst, int opcode, uint64_t len, const uint8_t *mask)
{
    size_t n = 2;
    dst[0] = (uint8_t)(0x80 | (opcode & 15)); /* FIN: messages are never fragmented */
    uint8_t m = mask ? 0x80 : 0;
    if (len < 126) {
        dst[1] = (uint8_t)(m | len);
    } else if (len < 65536) {
        dst[1] = (uint8_t)(m | 126);
        dst[2] = (uint8_t)(len >> 8);
        dst[3] = (uint8_t)len;
        n = 4;
    } else {
        dst[1] = (uint8_t)(m | 127);
        for (int i = 0; i < 8; i++)
            dst[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        n = 10;
    }
    if (mask) {
        memcpy(dst + n, mask, 4);
        n += 4;
    }
    return n;
}

void bench_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset)
{
    for (size_t i = 0; i < n; i++)
        p[i] ^= mask[(offset + i) & 3];
}

int bench_ws_parse(const uint8_t *p, size_t n, bench_wsf_t *f, const char **why)
{
    *why = NULL;
    if (n < 2)
        return 0;
    f->fin = p[0] >> 7;
    f->rsv = (p[0] >> 4) & 7;
    f->opcode = p[0] & 15;
    f->masked = p[1] >> 7;
    uint64_t len = p[1] & 127;
    size_t h = 2;
    if (len == 126) {
        if (n < 4)
            return 0;
        len = (uint64_t)p[2] << 8 | p[3];
        h = 4;
        if (len < 126)
            *why = "length not in its shortest form";
    } else if (len == 127) {
        if (n < 10)
            return 0;
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | p[2 + i];
        h = 10;
        if (len >> 63)
            *why = "length with the most significant bit set";
        else if (len < 65536)
            *why = "length not in its shortest form";
    }
    if (f->masked) {
        if (n < h + 4)
            return 0;
        memcpy(f->mask, p + h, 4);
        h += 4;
    }
    f->len = len;
    if (*why)
        return -1;
    if (f->rsv) {
        *why = "reserved bits set without an extension";
        return -1;
    }
    if ((f->opcode >= 3 && f->opcode <= 7) || f->opcode >= 11) {
        *why = "reserved opcode";
        return -1;
    }
    if (f->opcode >= 8 && (!f->fin || len > 125)) {
        *why = "fragmented or over-long control frame";
        return -1;
    }
    return (int)h;
}

/* ------------------------------------------------------------------------- */
/* The payload of message id: text "ID xxx...", binary the id's 8 bytes
 * (little-endian) then i & 255; cut at size. */

static size_t id_prefix(uint64_t id, int binary, uint8_t *buf)
{
    if (binary) {
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)(id >> (8 * i));
        return 8;
    }
    return (size_t)snprintf((char *)buf, 24, "%llu ", (unsigned long long)id);
}

static uint8_t filler(int binary, uint64_t i)
{
    return binary ? (uint8_t)i : 'x';
}

void bench_ws_payload(uint8_t *dst, size_t size, uint64_t id, int binary)
{
    uint8_t pre[24];
    size_t k = id_prefix(id, binary, pre);
    if (k > size)
        k = size;
    memcpy(dst, pre, k);
    for (size_t i = k; i < size; i++)
        dst[i] = filler(binary, i);
}

int bench_ws_payload_check(const uint8_t *p, size_t n, uint64_t off, uint64_t id, int binary)
{
    uint8_t pre[24];
    size_t k = id_prefix(id, binary, pre);
    for (size_t i = 0; i < n; i++) {
        uint64_t at = off + i;
        uint8_t want = at < k ? pre[at] : filler(binary, at);
        if (p[i] != want)
            return 0;
    }
    return 1;
}
