/*
 * grpcwire.h -- the bytes of gRPC's benchmark echo call: protobuf wire
 * format (varints, length-delimited fields, unknown fields skipped), the
 * EchoMessage of petrel.bench.Echo and the 5-byte prefix of a gRPC message.
 * Never installed.
 *
 * Shared by the grpcecho module (modules/grpcecho.c, the server side) and
 * petrel-bench (src/bench/h2.c, the client side); it depends on nothing but
 * the C library, so both link src/grpcwire.c as it is.
 *
 *   message EchoMessage {
 *       int64 request_id = 1;
 *       string payload = 2;
 *       int32 payload_bytes = 3;
 *   }
 *
 * Encoding follows proto3: fields with their default value (0, "") are not
 * written.  Decoding follows the protobuf encoding spec
 * (https://protobuf.dev/programming-guides/encoding/): the last value of a
 * repeated scalar field wins, fields of unknown numbers are skipped whatever
 * their wire type, a known field with another wire type is skipped as an
 * unknown one, and payload must be UTF-8 (a proto3 string).
 */
#ifndef PETREL_GRPCWIRE_H
#define PETREL_GRPCWIRE_H

#include <stddef.h>
#include <stdint.h>

/** The method of the echo service, as a :path. */
#define PETREL__GRPC_ECHO_PATH "/petrel.bench.Echo/Echo"
/** The service's prefix: other methods under it get UNIMPLEMENTED. */
#define PETREL__GRPC_ECHO_SERVICE "/petrel.bench.Echo/"

/** Bytes before each gRPC message: compressed flag, big-endian length. */
#define PETREL__GRPC_PREFIX 5

/** gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
enum {
    PETREL__GRPC_OK = 0,
    PETREL__GRPC_INVALID_ARGUMENT = 3,
    PETREL__GRPC_RESOURCE_EXHAUSTED = 8,
    PETREL__GRPC_UNIMPLEMENTED = 12,
    PETREL__GRPC_INTERNAL = 13,
};

/** Protobuf wire types. */
enum {
    PETREL__PB_VARINT = 0,
    PETREL__PB_I64 = 1,
    PETREL__PB_LEN = 2,
    PETREL__PB_SGROUP = 3,
    PETREL__PB_EGROUP = 4,
    PETREL__PB_I32 = 5,
};

/** The longest varint: 10 bytes for 64 bits. */
#define PETREL__PB_VARINT_MAX 10

/** An EchoMessage.  `payload` is not owned: it points into the buffer it was
 *  decoded from (not NUL-terminated), or to the caller's bytes to encode. */
typedef struct petrel__echo_msg {
    int64_t request_id;
    const char *payload;
    size_t payload_len;
    int32_t payload_bytes;
} petrel__echo_msg_t;

/** Write `v` as a varint at `dst` (room for PETREL__PB_VARINT_MAX bytes);
 *  returns the bytes written. */
size_t petrel__pb_varint_put(uint8_t *dst, uint64_t v);

/** The length of `v` as a varint. */
size_t petrel__pb_varint_len(uint64_t v);

/** Read a varint at *p (not past `end`) and move *p after it.  Returns 0, or
 *  -1 when it is cut short or longer than 10 bytes. */
int petrel__pb_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v);

/** Skip the value of a field of wire type `wt` whose tag was just read (a
 *  group up to its matching end, nested at most 32 deep).  Returns 0, or -1
 *  for a value cut short, a bad wire type or a mismatched group end. */
int petrel__pb_skip(const uint8_t **p, const uint8_t *end, unsigned wt, uint32_t field);

/** The encoded size of `m`. */
size_t petrel__echo_size(const petrel__echo_msg_t *m);

/** Encode `m` at `dst`, which has room for petrel__echo_size(m) bytes;
 *  returns the bytes written. */
size_t petrel__echo_encode(uint8_t *dst, const petrel__echo_msg_t *m);

/**
 * Decode an EchoMessage from `len` bytes at `buf` into `m` (zeroed first;
 * m->payload then points into `buf`).  Returns 0, or -1 with `*why` set to a
 * static message: malformed wire format, a bad tag, or a payload that is not
 * UTF-8.
 */
int petrel__echo_decode(petrel__echo_msg_t *m, const uint8_t *buf, size_t len, const char **why);

/** Write the 5-byte prefix of a gRPC message of `len` bytes. */
void petrel__grpc_prefix_put(uint8_t *dst, int compressed, uint32_t len);

/** Read the prefix at `p` (5 bytes): the compressed flag byte and the length. */
void petrel__grpc_prefix_get(const uint8_t *p, unsigned *flag, uint32_t *len);

#endif
