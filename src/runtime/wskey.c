/*
 * wskey.c -- SHA-1, base64 and the WebSocket accept value (wskey.h).
 */
#include "runtime/wskey.h"

#include <string.h>


static inline uint32_t rol32(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol32(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol32(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void petrel__sha1(const void *data, size_t len, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const uint8_t *p = data;
    uint64_t bits = (uint64_t)len * 8;
    for (; len >= 64; p += 64, len -= 64)
        sha1_block(h, p);
    uint8_t last[128] = {0};
    memcpy(last, p, len);
    last[len] = 0x80;
    size_t n = len < 56 ? 64 : 128; /* the length goes in the last 8 bytes */
    for (int i = 0; i < 8; i++)
        last[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha1_block(h, last);
    if (n == 128)
        sha1_block(h, last + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t petrel__base64_encode(const void *data, size_t len, char *out)
{
    const uint8_t *p = data;
    char *o = out;
    for (; len >= 3; p += 3, len -= 3) {
        uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = b64[(v >> 6) & 63];
        *o++ = b64[v & 63];
    }
    if (len) {
        uint32_t v = (uint32_t)p[0] << 16 | (len == 2 ? (uint32_t)p[1] << 8 : 0);
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = len == 2 ? b64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return (size_t)(o - out);
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

ssize_t petrel__base64_decode(const char *s, size_t len, uint8_t *out, size_t cap)
{
    if (len % 4)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = b64_value(s[i + k])) < 0)
                return -1; /* a character outside the alphabet, or data after '=' */
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | v[3];
        /* canonical: the bits under the padding are zero */
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
            return -1;
        if (n + 3 - (size_t)pad > cap)
            return -1;
        out[n++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[n++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[n++] = (uint8_t)w;
    }
    return (ssize_t)n;
}

void petrel__ws_accept(const char *key, size_t klen, char out[PETREL__WS_ACCEPT_LEN + 1])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t digest[20];
    char buf[256];
    if (klen <= sizeof(buf) - (sizeof(guid) - 1)) {
        memcpy(buf, key, klen);
        memcpy(buf + klen, guid, sizeof(guid) - 1);
        petrel__sha1(buf, klen + sizeof(guid) - 1, digest);
    } else {
        /* no RFC 6455 key is this long (both callers pass 24 bytes): the
         * function stays total by hashing the key's first bytes only */
        memcpy(buf, key, sizeof(buf) - (sizeof(guid) - 1));
        memcpy(buf + sizeof(buf) - (sizeof(guid) - 1), guid, sizeof(guid) - 1);
        petrel__sha1(buf, sizeof(buf), digest);
    }
    petrel__base64_encode(digest, sizeof(digest), out);
}
