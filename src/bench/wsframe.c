/*
 * wsframe.c -- petrel-bench's WebSocket pieces that need no socket: the
 * check of the server's 101 response (RFC 6455 §4.1), frame headers (§5.2)
 * and masking (§5.3), and the payload a message carries.  The key and the
 * Sec-WebSocket-Accept value (SHA-1, base64) are the server's own code,
 * src/wskey.c.  Depends on nothing else, so tests/check_bench_ws.c links it
 * with those two files alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define BENCH_HIST_ONLY
#include "bench.h"

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
