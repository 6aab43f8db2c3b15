/*
 * grpc.c -- petrel-bench's gRPC calls (--grpc): the request message of each
 * call and the check of its answer, for the unary method
 * /petrel.bench.Echo/Echo of petrel's grpcecho module.  The bytes are made
 * and read by src/grpcwire.c, which the module shares; h2.c carries them
 * over h2c like any other request.
 */
#include <string.h>

#include "bench.h"
#include "grpc/grpcwire.h"

size_t bench_grpc_request_max(size_t payload)
{
    /* prefix; request_id (tag + 10); payload (tag + length + bytes) */
    return PETREL__GRPC_PREFIX + 1 + PETREL__PB_VARINT_MAX + 1 + PETREL__PB_VARINT_MAX + payload;
}

size_t bench_grpc_request(uint8_t *dst, size_t payload, uint64_t id)
{
    /* the fields before the payload, then the payload ('x' * payload) in
     * place: no copy of it through an EchoMessage */
    uint8_t head[1 + PETREL__PB_VARINT_MAX + 1 + PETREL__PB_VARINT_MAX];
    size_t n = 0;
    if (id) { /* proto3: a field of value 0 is not written */
        head[n++] = 1 << 3 | PETREL__PB_VARINT;
        n += petrel__pb_varint_put(head + n, id);
    }
    if (payload) {
        head[n++] = 2 << 3 | PETREL__PB_LEN;
        n += petrel__pb_varint_put(head + n, payload);
    }
    size_t msg = n + payload;
    petrel__grpc_prefix_put(dst, 0, (uint32_t)msg);
    memcpy(dst + PETREL__GRPC_PREFIX, head, n);
    memset(dst + PETREL__GRPC_PREFIX + n, 'x', payload);
    return PETREL__GRPC_PREFIX + msg;
}

int bench_grpc_check(const uint8_t *body, size_t len, uint64_t id, size_t payload, const char **why)
{
    unsigned flag;
    uint32_t mlen;
    if (len < PETREL__GRPC_PREFIX) {
        *why = "no response message";
        return -1;
    }
    petrel__grpc_prefix_get(body, &flag, &mlen);
    if (flag != 0) {
        *why = "compressed response message (none was asked for)";
        return -1;
    }
    if (mlen != len - PETREL__GRPC_PREFIX) {
        *why = "response message length does not match the DATA received";
        return -1;
    }
    petrel__echo_msg_t m;
    if (petrel__echo_decode(&m, body + PETREL__GRPC_PREFIX, mlen, why) < 0)
        return -1;
    if ((uint64_t)m.request_id != id) {
        *why = "request_id not echoed";
        return -1;
    }
    if (m.payload_len != payload || m.payload_bytes != (int32_t)payload) {
        *why = "payload or payload_bytes of another length";
        return -1;
    }
    for (size_t i = 0; i < payload; i++)
        if (m.payload[i] != 'x') {
            *why = "payload not echoed";
            return -1;
        }
    return 0;
}
