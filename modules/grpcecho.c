/*
 * grpcecho.c -- the unary gRPC method /petrel.bench.Echo/Echo over h2c, the
 * server side of `petrel-bench --grpc`.
 *
 *   service Echo { rpc Echo(EchoMessage) returns (EchoMessage); }
 *   message EchoMessage {
 *       int64 request_id = 1; string payload = 2; int32 payload_bytes = 3;
 *   }
 *
 * The answer echoes request_id and payload and sets payload_bytes to the
 * payload's length.  gRPC over HTTP/2 as its spec says
 * (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md): a POST
 * with `content-type: application/grpc` (or `application/grpc+proto`), one
 * length-prefixed message; the answer is `:status 200`, `content-type:
 * application/grpc`, the message, then the trailers `grpc-status` (and
 * `grpc-message`, percent-encoded, on errors).  Errors:
 *
 *   HTTP/1.x                       505, or a gRPC error with TE: trailers
 *   a method other than POST       405 with `Allow: POST` (the router)
 *   content-type not application/grpc...        415
 *   application/grpc+json or another codec      UNIMPLEMENTED (12)
 *   another method of /petrel.bench.Echo/       UNIMPLEMENTED (12)
 *   grpc-encoding other than identity           UNIMPLEMENTED (12), with
 *                                               grpc-accept-encoding: identity
 *   compressed flag set (no encoding was negotiated), a flag other than 0
 *   or 1, no message, a message cut short, more than one message: INTERNAL (13)
 *   a message over max_message     RESOURCE_EXHAUSTED (8)
 *   a message that is not a valid EchoMessage   INVALID_ARGUMENT (3)
 *
 * Errors are trailers-only responses (one HEADERS frame: :status 200 and
 * grpc-status), as gRPC servers send them.
 *
 * Not checked: `te: trailers` over HTTP/2 (gRPC clients send it to detect
 * proxies that drop trailers; HTTP/2 always carries them) and `grpc-timeout`
 * (the answer is immediate).  grpc-accept-encoding is always identity: no
 * compression either way.
 *
 * Over HTTP/1.1 there is no gRPC (it needs HTTP/2 framing).  A client that
 * sent `TE: trailers` gets what a gRPC client understands: 200,
 * application/grpc, no message, and grpc-status 13 (INTERNAL) with
 * grpc-message "gRPC needs HTTP/2 (h2c)" as chunked trailers.  Any other
 * client gets 505 HTTP Version Not Supported with a text body naming h2c
 * (RFC 9110 §15.6.6: the server refuses that major version).  Not 426:
 * RFC 9110 §15.5.22 requires an Upgrade header in a 426, and Upgrade is
 * petrel's own field (modules cannot send it).

 * Arguments, --module grpcecho:ARGS:
 *   max_message=BYTES   largest request message (default 4m, gRPC's own
 *                       default receive limit), at most 1g; k, m and g
 *                       suffixes.  A body
 *                       over petrel's --max-body-size gets 413 before the
 *                       handler runs, so keep this limit below it.
 *
 * Every allocation is from the request arena.  The protobuf bytes are read
 * and written by src/grpc/grpcwire.c, which petrel-bench shares.
 */
#include <petrel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grpc/grpcwire.h"

#define MAX_MESSAGE_DEFAULT (4u << 20)
#define MAX_MESSAGE_LIMIT (1u << 30)

static size_t max_message = MAX_MESSAGE_DEFAULT;

/* grpc-message: bytes outside 0x20-0x7e, and '%', as %XX (PROTOCOL-HTTP2.md). */
static const char *pct_encode(petrel_req_t *req, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = petrel_arena_alloc(req->arena, 3 * n + 1, 1);
    if (out == NULL)
        return "";
    char *q = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            *q++ = (char)*p;
        } else {
            *q++ = '%';
            *q++ = hex[*p >> 4];
            *q++ = hex[*p & 15];
        }
    }
    *q = '\0';
    return out;
}

/* A trailers-only response: :status 200, content-type, grpc-status and
 * grpc-message in the one HEADERS frame that ends the stream. */
static int grpc_error(petrel_req_t *req, int code, const char *msg)
{
    char num[12];
    snprintf(num, sizeof(num), "%d", code);
    int rc = petrel_resp_header(req, "grpc-status", num);
    if (rc == 0 && msg)
        rc = petrel_resp_header(req, "grpc-message", pct_encode(req, msg));
    if (rc < 0)
        return rc;
    return petrel_send(req, 200, "application/grpc", NULL, 0);
}

#define GO_ON 1

/* HTTP/1.x: no gRPC there.  A client that can read trailers gets a gRPC
 * error in them (chunked, RFC 9112 §7.1.2); any other gets 505 with a body
 * that says what to use (RFC 9110 §15.6.6). */
static int http1(petrel_req_t *req)
{
    const char *te = petrel_req_header(req, "te");
    if (te && strcasestr(te, "trailers")) {
        int rc = petrel_resp_trailer(req, "grpc-status", "13");
        if (rc == 0)
            rc = petrel_resp_trailer(req, "grpc-message", "gRPC needs HTTP/2 (h2c)");
        if (rc == 0)
            rc = petrel_stream_begin(req, 200, "application/grpc");
        return rc < 0 ? rc : petrel_stream_end(req);
    }
    return petrel_send_text(req, 505, "text/plain; charset=utf-8",
                            "gRPC needs HTTP/2: use h2c (HTTP/2 over cleartext, RFC 9113)\n");
}

/* What every request of the service checks first.  Returns GO_ON, or what
 * the handler returns: an HTTP status to send (415), 0 once it answered (505,
 * a gRPC error), or a negative PETREL_E* code. */
static int check_call(petrel_req_t *req)
{
    if (req->version != 20)
        return http1(req);
    const char *type = petrel_req_header(req, "content-type");
    if (type == NULL || strncasecmp(type, "application/grpc", 16) != 0)
        return 415;
    const char *sub = type + 16;
    size_t n = strcspn(sub, ";");
    if (!(n == 0 || (n == 6 && strncasecmp(sub, "+proto", 6) == 0))) {
        if (*sub != '+' && *sub != ';')
            return 415; /* application/grpcfoo */
        return grpc_error(req, PETREL__GRPC_UNIMPLEMENTED,
                          "only the protobuf codec is served (application/grpc+proto)");
    }
    const char *enc = petrel_req_header(req, "grpc-encoding");
    if (enc && strcasecmp(enc, "identity") != 0) {
        int rc = petrel_resp_header(req, "grpc-accept-encoding", "identity");
        if (rc < 0)
            return rc;
        return grpc_error(req, PETREL__GRPC_UNIMPLEMENTED, "grpc-encoding not supported");
    }
    return GO_ON;
}

static int echo(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = check_call(req);
    if (rc != GO_ON)
        return rc;
    const uint8_t *body = (const uint8_t *)req->body.ptr;
    size_t len = req->body.len;
    if (len == 0)
        return grpc_error(req, PETREL__GRPC_INTERNAL, "no request message");
    if (len < PETREL__GRPC_PREFIX)
        return grpc_error(req, PETREL__GRPC_INTERNAL, "request message prefix cut short");
    unsigned flag;
    uint32_t mlen;
    petrel__grpc_prefix_get(body, &flag, &mlen);
    if (flag == 1)
        return grpc_error(req, PETREL__GRPC_INTERNAL,
                          "compressed flag set without a grpc-encoding");
    if (flag != 0)
        return grpc_error(req, PETREL__GRPC_INTERNAL, "bad compressed flag");
    if (mlen > max_message) {
        const char *m = petrel_arena_printf(
            req->arena, "request message of %lu bytes is over the limit of %zu bytes",
            (unsigned long)mlen, max_message);
        return grpc_error(req, PETREL__GRPC_RESOURCE_EXHAUSTED, m ? m : "message too large");
    }
    if (len - PETREL__GRPC_PREFIX < mlen)
        return grpc_error(req, PETREL__GRPC_INTERNAL, "request message cut short");
    if (len - PETREL__GRPC_PREFIX > mlen)
        return grpc_error(req, PETREL__GRPC_INTERNAL,
                          "more than one request message for a unary method");

    petrel__echo_msg_t in;
    const char *why;
    if (petrel__echo_decode(&in, body + PETREL__GRPC_PREFIX, mlen, &why) < 0) {
        const char *m = petrel_arena_printf(req->arena, "invalid EchoMessage: %s", why);
        return grpc_error(req, PETREL__GRPC_INVALID_ARGUMENT, m ? m : why);
    }
    petrel__echo_msg_t out = {
        .request_id = in.request_id,
        .payload = in.payload,
        .payload_len = in.payload_len,
        .payload_bytes = (int32_t)in.payload_len, /* at most max_message */
    };
    size_t olen = petrel__echo_size(&out);
    uint8_t *buf = petrel_arena_alloc(req->arena, PETREL__GRPC_PREFIX + olen, 1);
    if (buf == NULL)
        return PETREL_ENOMEM;
    petrel__grpc_prefix_put(buf, 0, (uint32_t)olen);
    petrel__echo_encode(buf + PETREL__GRPC_PREFIX, &out);
    /* the trailer first: once the head is out, a failure cannot become a 500 */
    if ((rc = petrel_resp_trailer(req, "grpc-status", "0")) < 0 ||
        (rc = petrel_stream_begin(req, 200, "application/grpc")) < 0)
        return rc;
    if (petrel_stream_write(req, buf, PETREL__GRPC_PREFIX + olen) < 0) {
        /* the head is gone: end the stream; the client sees a call cut short */
        petrel_stream_end(req);
        return 0;
    }
    return petrel_stream_end(req);
}

static int unimplemented(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = check_call(req);
    if (rc != GO_ON)
        return rc;
    const char *m = petrel_arena_printf(req->arena, "unknown method %s", req->path.ptr);
    return grpc_error(req, PETREL__GRPC_UNIMPLEMENTED, m ? m : "unknown method");
}

/* max_message's value (petrel_parse_size()'s syntax), 1 to 1g. */
static int parse_size(const char *v, size_t *out)
{
    size_t n;
    if (petrel_parse_size(v, &n) < 0 || n == 0 || n > MAX_MESSAGE_LIMIT)
        return -1;
    *out = n;
    return 0;
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)srv;
    /* init runs again on each reload: start from the default every time */
    max_message = MAX_MESSAGE_DEFAULT;
    if (*args == '\0')
        return 0;
    if (strncmp(args, "max_message=", 12) == 0 && parse_size(args + 12, &max_message) == 0)
        return 0;
    petrel_log(PETREL_LOG_ERROR,
               "module 'grpcecho': bad argument '%s' (expected max_message=BYTES, 1 to 1g, "
               "k, m and g suffixes)",
               args);
    return PETREL_EINVAL;
}

static const petrel_route_t routes[] = {
    {PETREL_POST, PETREL__GRPC_ECHO_PATH, echo, NULL},
    {PETREL_POST, PETREL__GRPC_ECHO_SERVICE "*", unimplemented, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(grpcecho, routes, init, NULL, NULL)
