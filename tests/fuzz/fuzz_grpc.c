/*
 * fuzz_grpc.c -- the protobuf wire code of the gRPC echo service
 * (src/grpc/grpcwire.c), which the grpcecho module runs on every request message
 * a client sends, and petrel-bench on every answer.
 *
 * Input: the bytes of an EchoMessage (as they follow the 5-byte gRPC
 * prefix).  Asserted:
 *   - petrel__echo_decode never reads outside the input (it lives in a
 *     buffer of exactly its size: AddressSanitizer sees any overread), and
 *     a decoded payload lies within the input and is valid UTF-8 (RFC 3629,
 *     checked here by an independent decoder: no overlong form, no
 *     surrogate, nothing above U+10FFFF);
 *   - what decodes encodes back (petrel__echo_size bytes, exactly) into a
 *     message that decodes to the same fields, and encodes to the same
 *     bytes again (the encoder's output is canonical);
 *   - the varint reader and writer agree: every varint read from the input
 *     is written back in at most 10 bytes and reads back to the same value.
 */
#include "grpc/grpcwire.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((noreturn)) static void fail(const char *what)
{
    fprintf(stderr, "fuzz_grpc: %s\n", what);
    abort();
}

/* RFC 3629 §4, read independently of grpcwire.c's own check. */
static bool utf8_ok(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        size_t len;
        uint32_t cp, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            len = 2, cp = b & 0x1F, min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3, cp = b & 0x0F, min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4, cp = b & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static void check_varints(const uint8_t *buf, size_t size)
{
    const uint8_t *p = buf, *end = buf + size;
    while (p < end) {
        const uint8_t *at = p;
        uint64_t v;
        if (petrel__pb_varint_get(&p, end, &v) < 0) {
            p = at + 1; /* not a varint here: try from the next byte */
            continue;
        }
        if (p <= at || p > end)
            fail("varint reader moved outside its input");
        uint8_t out[PETREL__PB_VARINT_MAX];
        size_t n = petrel__pb_varint_put(out, v);
        if (n == 0 || n > PETREL__PB_VARINT_MAX || n != petrel__pb_varint_len(v))
            fail("varint length");
        if (n > (size_t)(p - at))
            fail("a varint written back is longer than the one read");
        const uint8_t *q = out;
        uint64_t w;
        if (petrel__pb_varint_get(&q, out + n, &w) < 0 || w != v || q != out + n)
            fail("varint round trip");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    check_varints(buf, size);

    petrel__echo_msg_t m;
    const char *why = NULL;
    if (petrel__echo_decode(&m, buf, size, &why) < 0) {
        if (why == NULL || *why == '\0')
            fail("a refusal without a reason");
        free(buf);
        return 0;
    }
    if (m.payload_len) {
        const uint8_t *pl = (const uint8_t *)m.payload;
        if (pl < buf || pl + m.payload_len > buf + size)
            fail("payload outside the input");
        if (!utf8_ok(pl, m.payload_len))
            fail("payload accepted that is not UTF-8");
    }

    size_t n = petrel__echo_size(&m);
    uint8_t *enc = malloc(n ? n : 1);
    if (enc == NULL)
        fail("out of memory");
    if (petrel__echo_encode(enc, &m) != n)
        fail("encoded size differs from petrel__echo_size");
    petrel__echo_msg_t m2;
    if (petrel__echo_decode(&m2, enc, n, &why) < 0)
        fail("what was decoded does not decode once encoded");
    if (m2.request_id != m.request_id || m2.payload_bytes != m.payload_bytes ||
        m2.payload_len != m.payload_len ||
        (m.payload_len && memcmp(m2.payload, m.payload, m.payload_len) != 0))
        fail("round trip changed a field");
    uint8_t *enc2 = malloc(n ? n : 1);
    if (enc2 == NULL)
        fail("out of memory");
    if (petrel__echo_encode(enc2, &m2) != n || memcmp(enc, enc2, n) != 0)
        fail("encoding is not canonical");
    free(enc2);
    free(enc);
    free(buf);
    return 0;
}
