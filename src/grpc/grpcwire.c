/*
 * grpcwire.c -- protobuf wire format for the EchoMessage of petrel.bench.Echo
 * and the gRPC message prefix (see grpcwire.h).
 */
#include "grpc/grpcwire.h"

#include <string.h>

#define GROUP_DEPTH_MAX 32

size_t petrel__pb_varint_put(uint8_t *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

size_t petrel__pb_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

int petrel__pb_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (q == end)
            return -1;
        uint8_t b = *q++;
        x |= (uint64_t)(b & 0x7f) << shift; /* bits past 64 of the 10th byte are dropped */
        if (!(b & 0x80)) {
            *p = q;
            *v = x;
            return 0;
        }
    }
    return -1; /* more than 10 bytes */
}

static int skip_depth(const uint8_t **p, const uint8_t *end, unsigned wt, uint32_t field, int depth)
{
    uint64_t v;
    switch (wt) {
    case PETREL__PB_VARINT:
        return petrel__pb_varint_get(p, end, &v);
    case PETREL__PB_I64:
    case PETREL__PB_I32: {
        size_t n = wt == PETREL__PB_I64 ? 8 : 4;
        if ((size_t)(end - *p) < n)
            return -1;
        *p += n;
        return 0;
    }
    case PETREL__PB_LEN:
        if (petrel__pb_varint_get(p, end, &v) < 0 || v > (uint64_t)(end - *p))
            return -1;
        *p += v;
        return 0;
    case PETREL__PB_SGROUP:
        if (depth >= GROUP_DEPTH_MAX)
            return -1;
        for (;;) {
            uint64_t tag;
            if (petrel__pb_varint_get(p, end, &tag) < 0 || (tag >> 3) == 0 ||
                (tag >> 3) > 0x1fffffff)
                return -1;
            if ((tag & 7) == PETREL__PB_EGROUP)
                return (tag >> 3) == field ? 0 : -1;
            if (skip_depth(p, end, (unsigned)(tag & 7), (uint32_t)(tag >> 3), depth + 1) < 0)
                return -1;
        }
    default: /* an end group without its start, or wire types 6 and 7 */
        return -1;
    }
}

int petrel__pb_skip(const uint8_t **p, const uint8_t *end, unsigned wt, uint32_t field)
{
    return skip_depth(p, end, wt, field, 0);
}

size_t petrel__echo_size(const petrel__echo_msg_t *m)
{
    size_t n = 0;
    if (m->request_id)
        n += 1 + petrel__pb_varint_len((uint64_t)m->request_id);
    if (m->payload_len)
        n += 1 + petrel__pb_varint_len(m->payload_len) + m->payload_len;
    if (m->payload_bytes) /* an int32 is sign-extended to 64 bits */
        n += 1 + petrel__pb_varint_len((uint64_t)(int64_t)m->payload_bytes);
    return n;
}

size_t petrel__echo_encode(uint8_t *dst, const petrel__echo_msg_t *m)
{
    size_t n = 0;
    if (m->request_id) {
        dst[n++] = 1 << 3 | PETREL__PB_VARINT;
        n += petrel__pb_varint_put(dst + n, (uint64_t)m->request_id);
    }
    if (m->payload_len) {
        dst[n++] = 2 << 3 | PETREL__PB_LEN;
        n += petrel__pb_varint_put(dst + n, m->payload_len);
        memcpy(dst + n, m->payload, m->payload_len);
        n += m->payload_len;
    }
    if (m->payload_bytes) {
        dst[n++] = 3 << 3 | PETREL__PB_VARINT;
        n += petrel__pb_varint_put(dst + n, (uint64_t)(int64_t)m->payload_bytes);
    }
    return n;
}

/* RFC 3629 §4: no overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* ASCII eight bytes at a time: payloads mostly are */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & UINT64_C(0x8080808080808080)) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            k = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else
            return 0;
        if (n - i <= k)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        i += k + 1;
    }
    return 1;
}

int petrel__echo_decode(petrel__echo_msg_t *m, const uint8_t *buf, size_t len, const char **why)
{
    const uint8_t *p = buf, *end = buf + len;
    memset(m, 0, sizeof *m);
    while (p < end) {
        uint64_t tag, v;
        if (petrel__pb_varint_get(&p, end, &tag) < 0) {
            *why = "malformed tag";
            return -1;
        }
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (field == 0 || field > 0x1fffffff) { /* field numbers are 1 to 2^29 - 1 */
            *why = "invalid field number";
            return -1;
        }
        if (field == 1 && wt == PETREL__PB_VARINT) {
            if (petrel__pb_varint_get(&p, end, &v) < 0)
                goto cut;
            m->request_id = (int64_t)v;
        } else if (field == 2 && wt == PETREL__PB_LEN) {
            if (petrel__pb_varint_get(&p, end, &v) < 0 || v > (uint64_t)(end - p))
                goto cut;
            m->payload = (const char *)p;
            m->payload_len = (size_t)v;
            p += v;
        } else if (field == 3 && wt == PETREL__PB_VARINT) {
            if (petrel__pb_varint_get(&p, end, &v) < 0)
                goto cut;
            m->payload_bytes = (int32_t)(uint32_t)v; /* int32: the low 32 bits */
        } else if (petrel__pb_skip(&p, end, wt, (uint32_t)field) < 0) {
            *why = "malformed unknown field";
            return -1;
        }
    }
    if (!utf8_valid((const uint8_t *)m->payload, m->payload_len)) {
        *why = "payload is not valid UTF-8";
        return -1;
    }
    return 0;
cut:
    *why = "truncated field";
    return -1;
}

void petrel__grpc_prefix_put(uint8_t *dst, int compressed, uint32_t len)
{
    dst[0] = compressed ? 1 : 0;
    dst[1] = (uint8_t)(len >> 24);
    dst[2] = (uint8_t)(len >> 16);
    dst[3] = (uint8_t)(len >> 8);
    dst[4] = (uint8_t)len;
}

void petrel__grpc_prefix_get(const uint8_t *p, unsigned *flag, uint32_t *len)
{
    *flag = p[0];
    *len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}
