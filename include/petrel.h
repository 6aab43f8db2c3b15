/*
 * petrel.h -- the installed API of libpetrel.
 *
 * One header for module authors: the arena allocator, the request and
 * response API, the router and the module descriptor.  Nothing here depends
 * on the protocol that carried a request: the same handler answers over
 * HTTP/1.1 and HTTP/2.
 *
 * Lifetimes in one table (see doc/arena-and-lifetimes.md):
 *   server    petrel_server_t     from start-up to exit, one per process
 *   connection                    its arena lives as long as the connection
 *   request   petrel_req_t        a scope of the connection arena (HTTP/1.1)
 *                                 or a stream arena (HTTP/2); every pointer
 *                                 reachable from a request is valid until its
 *                                 response has been written, not after.
 *
 * It is one long file on purpose: a module includes one header, `petrel
 * --dev` builds module sources against a copy of this one file that the
 * library embeds, and tools/gen-man3.sh makes the manual pages of section 3
 * and libpetrel(3)'s index from it, by the banners of its sections.
 */
#ifndef PETREL_H
#define PETREL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PETREL_API __attribute__((visibility("default")))
#define PETREL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PETREL_API
#define PETREL_PRINTF(f, a)
#endif

/**
 * The version of the module ABI.
 *
 * It covers the layout of the types below, of those of <petrel/static.h>,
 * and of the module descriptor.  A module built against another ABI version
 * (older than PETREL_ABI_VERSION_MIN, or newer than this one) is refused at
 * load time, with a message naming both versions: rebuild it
 * against this header.  2: petrel_static_opts_t gained default_type.  3:
 * the module descriptor gained `options` and `config`; a module built for
 * ABI 2 (whose descriptor ends before them) is still loaded, as one without
 * options.
 */
#define PETREL_ABI_VERSION 3
/** The oldest ABI version a module may be built for and still load. */
#define PETREL_ABI_VERSION_MIN 2

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

/**
 * Error codes: PETREL_OK and the negative PETREL_E* codes.
 *
 * Library calls that can fail return 0 or one of these negative codes;
 * petrel_strerror() turns one into a message.  A handler may return one
 * too: it is logged and the client gets 500.
 */
enum {
    PETREL_OK = 0,
    PETREL_ENOMEM = -1,    /**< out of memory, or an arena over its limit */
    PETREL_EINVAL = -2,    /**< invalid argument */
    PETREL_ESTATE = -3,    /**< call not allowed in this state (e.g. sent twice) */
    PETREL_EIO = -4,       /**< I/O error, the connection is gone */
    PETREL_ENOTFOUND = -5, /**< no such thing (module, file, route) */
    PETREL_ELIMIT = -6     /**< a configured limit was reached */
};

/**
 * The message of an error code.
 *
 * Returns: a human-readable message for `err`, one of the PETREL_E* codes
 * or 0 ("success"); "unknown error" for any other value.
 *
 * Errors: none.
 *
 * Lifetime: the string is static: never free it, keep it as long as you
 * like.
 *
 * Example:
 *   static int tagged(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       int rc = petrel_resp_header(req, "X-Tag", "a\nb"); // refused: a newline
 *       if (rc < 0)
 *           petrel_log(PETREL_LOG_WARN, "X-Tag: %s", petrel_strerror(rc));
 *       return petrel_send_text(req, 200, "text/plain", "ok\n");
 *   }
 */
PETREL_API const char *petrel_strerror(int err);

/* ------------------------------------------------------------------------ */
/* Arena                                                                     */

/**
 * A bump allocator over chunks of the worker's chunk pool.
 *
 * There is no per-object free: memory goes back all at once, by
 * petrel_arena_reset() to a mark, or when the arena's owner (a connection,
 * a stream) goes away.  A block larger than a quarter of a chunk that does
 * not fit in the current chunk gets a heap block of its own, freed by the
 * reset that unwinds it.  An arena has a byte limit: past it, allocations
 * return NULL (a request then gets 413, 431 or 503, never a crash).
 *
 * Lifetime: handlers get one in `req->arena`, owned by petrel and valid
 * until the request's response has been written; there is no call to make
 * or free an arena of your own.
 */
typedef struct petrel_arena petrel_arena_t;

/**
 * A position in an arena, from petrel_arena_mark().
 *
 * A plain value (copy it freely); its fields are private.
 *
 * Lifetime: valid while the arena lives and has not been reset to a mark
 * taken before this one.
 */
typedef struct petrel_arena_mark {
    void *_chunk;
    char *_pos;
    void *_defer;
    void *_large;
    size_t _bytes;
} petrel_arena_mark_t;

/** Counters of an arena and of the pool under it, from petrel_arena_stats(). */
typedef struct petrel_arena_stats {
    size_t chunks;         /**< chunks this arena holds now */
    size_t bytes;          /**< bytes handed out since the arena was empty */
    size_t bytes_high;     /**< high-water mark of `bytes` */
    uint64_t mallocs;      /**< heap calls made for this arena (chunks + large) */
    uint64_t pool_mallocs; /**< heap calls made by the worker's chunk pool */
} petrel_arena_stats_t;

/**
 * Allocate memory from an arena.
 *
 * Allocates `size` bytes aligned to `align` (a power of two, at most 64; 0
 * means pointer alignment).  The memory is not zeroed (petrel_arena_calloc()
 * and petrel_arena_new() zero it).  Most allocations are a pointer bump in
 * the current chunk, without a heap call.
 *
 * Returns: the block, or NULL.
 *
 * Errors: NULL when the system is out of memory, when the arena would go
 * over its byte limit, or when `align` is not a power of two of at most 64.
 * A handler usually answers NULL with `return PETREL_ENOMEM;` (the client
 * gets 500) or a status of its own (413, 503).
 *
 * Lifetime: the block belongs to the arena: never free it.  It lives until
 * the arena is reset to a mark taken before this call, or goes away with
 * its owner (for `req->arena`: when the response has been written).
 *
 * Example:
 *   static int upper(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       char *out = petrel_arena_alloc(req->arena, req->body.len, 1);
 *       if (out == NULL && req->body.len)
 *           return PETREL_ENOMEM;
 *       for (size_t i = 0; i < req->body.len; i++)
 *           out[i] = (char)(req->body.ptr[i] >= 'a' && req->body.ptr[i] <= 'z'
 *                               ? req->body.ptr[i] - 32 : req->body.ptr[i]);
 *       return petrel_send(req, 200, "text/plain", out, req->body.len);
 *   }
 */
PETREL_API void *petrel_arena_alloc(petrel_arena_t *a, size_t size, size_t align);

/**
 * Allocate `n` zeroed objects of a type from an arena.
 *
 * A macro over petrel_arena_calloc(): typed, and checked for overflow of
 * `n * sizeof(type)`.
 *
 * Returns: a `type *` to `n` zeroed objects, or NULL.
 *
 * Errors: NULL on overflow, when out of memory or over the arena's limit.
 *
 * Lifetime: as petrel_arena_alloc(): the arena's, never freed by hand.
 *
 * Example:
 *   typedef struct job {
 *       petrel_req_t *req;
 *       int left;
 *   } job_t;
 *
 *   static job_t *job_new(petrel_req_t *req)
 *   {
 *       job_t *j = petrel_arena_new(req->arena, job_t, 1);
 *       if (j != NULL)
 *           j->req = req;
 *       return j;
 *   }
 */
#define petrel_arena_new(a, type, n) ((type *)petrel_arena_calloc((a), (n), sizeof(type)))

/**
 * Allocate `n * size` zeroed bytes from an arena.
 *
 * The block is aligned for any object of `size` (16 bytes for sizes of 16
 * and more, pointer alignment below).
 *
 * Returns: the zeroed block, or NULL.
 *
 * Errors: NULL when `n * size` overflows, when out of memory or over the
 * arena's limit.
 *
 * Lifetime: as petrel_arena_alloc(): the arena's, never freed by hand.
 */
PETREL_API void *petrel_arena_calloc(petrel_arena_t *a, size_t n, size_t size);

/**
 * Copy a string into an arena.
 *
 * Copies exactly `n` bytes of `s` (which may hold NUL bytes and need not be
 * NUL-terminated) and adds a NUL.
 *
 * Returns: the copy, `n + 1` bytes, or NULL.
 *
 * Errors: NULL when out of memory or over the arena's limit.
 *
 * Lifetime: `s` is only read during the call.  The copy is the arena's
 * (see petrel_arena_alloc()).
 */
PETREL_API char *petrel_arena_strndup(petrel_arena_t *a, const char *s, size_t n);

/**
 * Format a string into an arena, as printf(3) does.
 *
 * The string takes exactly the bytes it needs (the format is run twice: to
 * measure, then to write).
 *
 * Returns: the NUL-terminated string, or NULL.
 *
 * Errors: NULL when out of memory, over the arena's limit, or when the
 * format fails (an encoding error).
 *
 * Lifetime: the arguments are only read during the call; the string is the
 * arena's (see petrel_arena_alloc()).
 *
 * Example:
 *   static int hello_name(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       const char *name = petrel_req_param(req, "name");
 *       char *body = petrel_arena_printf(req->arena, "Hello, %s!\n", name);
 *       if (body == NULL)
 *           return PETREL_ENOMEM;
 *       return petrel_send_text(req, 200, "text/plain", body);
 *   }
 */
PETREL_API char *petrel_arena_printf(petrel_arena_t *a, const char *fmt, ...) PETREL_PRINTF(2, 3);

/**
 * Register a cleanup with an arena.
 *
 * `fn(data)` runs when the arena is reset to a mark taken before this call,
 * or goes away with its owner; cleanups run newest first, before the
 * memory of their scope goes back, so `fn` may still read it.  For
 * `req->arena`, that is when the response has been written, or when the
 * connection or stream is gone: the way to release what a request holds
 * (a file, a reference count, a slot of your own).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_ENOMEM  out of memory or over the arena's limit: `fn` is not
 *                  registered and will not be called (release `data` now)
 *
 * Lifetime: `data` must stay valid until `fn` has run; `fn` runs once.
 *
 * Example:
 *   #include <stdio.h>
 *
 *   static void close_file(void *data)
 *   {
 *       fclose(data);
 *   }
 *
 *   static FILE *open_for_request(petrel_req_t *req, const char *path)
 *   {
 *       FILE *f = fopen(path, "r");
 *       if (f != NULL && petrel_arena_defer(req->arena, close_file, f) < 0) {
 *           fclose(f);
 *           return NULL;
 *       }
 *       return f;
 *   }
 */
PETREL_API int petrel_arena_defer(petrel_arena_t *a, void (*fn)(void *), void *data);

/**
 * Take a mark: the current position of an arena.
 *
 * Pass it to petrel_arena_reset() to give back, at once, everything
 * allocated and deferred after it: scratch memory inside one handler, the
 * work of one loop iteration.
 *
 * Returns: the mark (a plain value).
 *
 * Errors: none.
 *
 * Lifetime: the mark is valid while the arena lives and has not been reset
 * to an earlier mark.
 *
 * Example:
 *   static size_t scratch_work(petrel_arena_t *a)
 *   {
 *       petrel_arena_mark_t m = petrel_arena_mark(a);
 *       char *tmp = petrel_arena_alloc(a, 4096, 0);
 *       size_t n = tmp ? 4096 : 0;
 *       petrel_arena_reset(a, m); // tmp is gone
 *       return n;
 *   }
 */
PETREL_API petrel_arena_mark_t petrel_arena_mark(const petrel_arena_t *a);

/**
 * Reset an arena to a mark, freeing everything allocated after it.
 *
 * Runs the cleanups registered since `m` (newest first), frees the large
 * blocks, gives the chunks back to the worker's pool and moves the bump
 * pointer back to `m`.
 *
 * Returns: nothing.
 *
 * Errors: none (a mark that was not taken from this arena, or one already
 * unwound by an earlier reset, is undefined behaviour).
 *
 * Lifetime: every pointer into memory allocated after `m` is invalid after
 * the call.  Never reset `req->arena` to a mark taken before the handler
 * was called: the request itself lives there.
 */
PETREL_API void petrel_arena_reset(petrel_arena_t *a, petrel_arena_mark_t m);

/**
 * Read the counters of an arena.
 *
 * Fills `st` (see petrel_arena_stats_t): the chunks the arena holds, the
 * bytes handed out and their high-water mark, and the heap calls made for
 * it and by the worker's pool; for tests and instrumentation.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `st` is the caller's; it is written during the call only.
 */
PETREL_API void petrel_arena_stats(const petrel_arena_t *a, petrel_arena_stats_t *st);

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

/**
 * A byte string that is not owned: a pointer and a length.
 *
 * The bytes are NUL-terminated (at `ptr[len]`) wherever petrel documents
 * it: every string field of petrel_req_t is.
 *
 * Lifetime: the bytes belong to whoever made the string; those of a
 * request live in its arena.
 */
typedef struct petrel_str {
    const char *ptr;
    size_t len;
} petrel_str_t;

/**
 * Request methods, as bit flags.
 *
 * A route names a set of them (`PETREL_GET | PETREL_HEAD`, or `PETREL_ANY`
 * for these seven); `req->method` is one of them.  A GET route also answers
 * HEAD.
 *
 * PETREL_OTHER stands for every other method (TRACE, PROPFIND, MKCOL, LOCK
 * ... over HTTP/1.1 those the parser knows, over HTTP/2 any token; read the
 * name in `req->method_name`).  Only a route that names it gets such a
 * request (`PETREL_ANY | PETREL_OTHER` takes every method, as a proxy
 * does); where no route names it, the answer is 501 (RFC 9110 §9.1), and
 * where the path's routes do not, 405.  CONNECT, a tunnel to a host, is
 * always 501 (RFC 9110 §9.3.6).
 */
enum {
    PETREL_GET = 1 << 0,
    PETREL_HEAD = 1 << 1,
    PETREL_POST = 1 << 2,
    PETREL_PUT = 1 << 3,
    PETREL_DELETE = 1 << 4,
    PETREL_PATCH = 1 << 5,
    PETREL_OPTIONS = 1 << 6,
    PETREL_ANY = 0x7f,
    /** An RFC 8441 Extended CONNECT with `:protocol websocket` over h2c
     *  (not in PETREL_ANY): a route that takes it answers with
     *  petrel_ws_accept(), as petrel_ws_route_add()'s routes do. */
    PETREL_WS_CONNECT = 1 << 7,
    PETREL_OTHER = 1 << 8,
    /** Not a method: a route with this bit gets its request when the head
     *  has arrived, before the body (see petrel_body_read()). */
    PETREL_BODY_STREAM = 1 << 9
};

/**
 * A request header field.
 *
 * Name and value are NUL-terminated; the name is as the client sent it
 * (HTTP/2: lower case), the value has no leading or trailing whitespace.
 *
 * Lifetime: valid until the request's response has been written.
 */
typedef struct petrel_header {
    petrel_str_t name;
    petrel_str_t value;
} petrel_header_t;

/**
 * A path parameter bound by the router, from `:name` or the `*` wildcard.
 *
 * Lifetime: valid until the request's response has been written.
 */
typedef struct petrel_param {
    petrel_str_t name;
    petrel_str_t value; /**< percent-decoded, NUL-terminated */
} petrel_param_t;

/**
 * The server: its configuration, routes and modules (opaque).
 *
 * There is one per process; a module gets it in its init (in the master,
 * before the workers fork) and worker_init, and a handler finds it in
 * `req->server`.
 *
 * Lifetime: valid for as long as the process runs; never freed by a module.
 */
typedef struct petrel_server petrel_server_t;
/** The response being built for a request (private: use petrel_send()). */
typedef struct petrel_resp petrel_resp_t;
/** The protocol that carried a request (private: HTTP/1.1 or HTTP/2). */
typedef struct petrel_proto petrel_proto_t;

/**
 * A request, the same whatever protocol carried it.
 *
 * Every field is read-only for handlers; every string is NUL-terminated.
 * The whole body has arrived before the handler runs (up to
 * --max-body-size: a larger one is answered 413 without calling it).
 *
 * Lifetime: the request and everything it points to live in `arena`,
 * until its response has been written: after petrel_send(), or after
 * petrel_stream_end() for a streamed response.  Copy what must outlive it.
 */
typedef struct petrel_req {
    int method;               /**< one PETREL_* method bit, 0 if none of them */
    petrel_str_t method_name; /**< as received ("GET", "PROPFIND") */
    petrel_str_t target;      /**< the request target as received */
    petrel_str_t path;        /**< percent-decoded, dot-segments removed */
    petrel_str_t query;       /**< raw query after '?', without it; len 0 if none */
    petrel_str_t authority;   /**< host[:port] from the target or Host */
    int version;              /**< 10, 11 or 20 */
    petrel_header_t *headers; /**< in order of arrival */
    size_t nheaders;
    petrel_param_t *params; /**< path parameters of the matched route */
    size_t nparams;
    petrel_str_t body;     /**< the whole request body, NUL-terminated ("" and 0 on a
                                PETREL_BODY_STREAM route: petrel_body_read()) */
    petrel_arena_t *arena; /**< the request scope: allocate freely from it */
    petrel_server_t *server;
    void *route_data; /**< the `data` of the matched route */
    uint64_t id;      /**< unique per worker, for logs */

    /* private: owned by the protocol module */
    const petrel_proto_t *_proto;
    void *_conn;
    petrel_resp_t *_resp;
    unsigned _flags;
    /* private: its start, for the metrics and the access log (proto.h) */
    uint64_t _t0; /* ns, monotonic */
    size_t _a0;   /* bytes of `arena` when its scope began */
} petrel_req_t;

/**
 * A part of a streamed request body (petrel_body_read()).
 *
 * `len` bytes at `ptr` (valid during the call only).  `end` is 0 while
 * more is to come, 1 with the last part (len may be 0: the body is
 * complete, trailers ignored), or a negative PETREL_E* code when the body
 * will not complete (the client closed or reset the stream or
 * --body-timeout passed: PETREL_EIO; more than --max-body-size:
 * PETREL_ELIMIT); after a non-zero `end` it is not called again.
 *
 * The callback may answer the request (petrel_send() and the others), and
 * may call petrel_body_pause().
 *
 * Lifetime: `ptr` is valid during the call only (it points into the
 * connection's read buffer: no copy of the body is made); `data` is
 * petrel_body_read()'s.
 */
typedef void (*petrel_body_cb)(petrel_req_t *req, const void *ptr, size_t len, int end, void *data);

/**
 * Start reading the body of a request routed with PETREL_BODY_STREAM.
 *
 * Call once, from the handler (which then returns PETREL_LATER, or 0 when
 * it has answered) or later while the request waits.  Parts that arrived
 * before the call are given first (from the loop, not from within
 * petrel_body_read()).  A request without a body gets one call with end=1,
 * len 0.  Over HTTP/1.1, a client that sent `Expect: 100-continue` gets
 * its 100 Continue now (not before).  A handler that answers without
 * reading the whole body: the rest is read and dropped (HTTP/1.1: the
 * connection stays usable; HTTP/2: RST_STREAM NO_ERROR after the
 * response), never taken for a request.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `req` or `cb` is NULL, the request was not routed with
 *                  PETREL_BODY_STREAM, or it was called before for it
 *   PETREL_ENOMEM  the request's arena is full (its clean-up could not be
 *                  registered)
 *
 * Lifetime: `cb` and `data` are kept until the call with a non-zero `end`
 * (or until the request is done, when it ends before).
 */
PETREL_API int petrel_body_read(petrel_req_t *req, petrel_body_cb cb, void *data);

/**
 * Stop (paused=1) or resume (0) the parts of a streamed request body.
 *
 * While paused, the connection (HTTP/1.1) or the stream's flow-control
 * window (HTTP/2: no WINDOW_UPDATE for it; the connection's window is
 * given back so that other streams go on) is not read or opened, and
 * --body-timeout does not run.  May be called from the callback.
 *
 * Returns: nothing.
 *
 * Errors: none; a request whose body has ended, or that is not streamed:
 * no-op.
 *
 * Lifetime: as the request.
 */
PETREL_API void petrel_body_pause(petrel_req_t *req, int paused);

/**
 * The length of the request body the client declared.
 *
 * Returns: the Content-Length (HTTP/1.1, or HTTP/2's content-length), 0
 * when there is no body (HTTP/1.1 with neither Content-Length nor
 * Transfer-Encoding; an HTTP/2 HEADERS with END_STREAM), -1 when it is not
 * known in advance (chunked; HTTP/2 DATA without content-length).
 *
 * Errors: none.
 *
 * Lifetime: as the request.
 */
PETREL_API int64_t petrel_body_length(const petrel_req_t *req);

/**
 * Look up a request header field by name.
 *
 * The name is compared without regard to case ("content-type" finds
 * `Content-Type`); when the field appears more than once, the first one is
 * returned (walk `req->headers` for all of them).
 *
 * Returns: the field's value (NUL-terminated, without surrounding
 * whitespace), or NULL when the request has no such field.
 *
 * Errors: none.
 *
 * Lifetime: the value lives in the request's arena, until the response has
 * been written.
 *
 * Example:
 *   #include <string.h>
 *
 *   static int needs_json(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       const char *type = petrel_req_header(req, "content-type");
 *       if (type == NULL || strncmp(type, "application/json", 16) != 0)
 *           return 415;
 *       return petrel_send(req, 200, "application/json", req->body.ptr, req->body.len);
 *   }
 */
PETREL_API const char *petrel_req_header(const petrel_req_t *req, const char *name);

/**
 * The value of a path parameter of the matched route.
 *
 * For a route "/kv/:key", `petrel_req_param(req, "key")`; for a trailing
 * wildcard, the name is "*".  The value is percent-decoded
 * ("/kv/caf%C3%A9" gives "café").
 *
 * Returns: the value (NUL-terminated), or NULL when the route has no
 * parameter of that name.
 *
 * Errors: none.
 *
 * Lifetime: the value lives in the request's arena, until the response has
 * been written.
 */
PETREL_API const char *petrel_req_param(const petrel_req_t *req, const char *name);

/**
 * The value of a query parameter.
 *
 * Finds the first `name=value` (or `name` alone) in the query string; the
 * key and the value are percent-decoded, `+` as a space.
 *
 * Returns: the decoded value, "" for `?name` or `?name=`, or NULL.
 *
 * Errors: NULL when the parameter is absent, when its value is not valid
 * percent-encoding, or when out of memory (each call decodes into the
 * arena).
 *
 * Lifetime: the value lives in the request's arena, until the response has
 * been written.
 *
 * Example:
 *   #include <stdlib.h>
 *
 *   static int page(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       const char *n = petrel_req_query(req, "page"); // GET /list?page=2
 *       long page = n ? strtol(n, NULL, 10) : 1;
 *       if (page < 1)
 *           return 400;
 *       return petrel_send_text(req, 200, "text/plain", page == 1 ? "first\n" : "later\n");
 *   }
 */
PETREL_API const char *petrel_req_query(petrel_req_t *req, const char *name);

/**
 * The address of the client, as text.
 *
 * "127.0.0.1", "::1"; "unix" for a Unix socket.
 *
 * Returns: the address, or NULL.
 *
 * Errors: NULL when out of memory (it is written into the arena).
 *
 * Lifetime: the text lives in the request's arena, until the response has
 * been written.
 */
PETREL_API const char *petrel_req_peer(petrel_req_t *req);

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

/**
 * Add a header field to the response.
 *
 * Call it before the response starts (petrel_send() and the other send
 * calls, petrel_stream_begin()); fields go out in the order they were
 * added, after petrel's own.  Content-Type is better given to the send
 * call.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `name` or `value` is NULL, the name is not a token, the
 *                  value holds CR or LF, or the field is one petrel writes
 *                  itself: Date, Server, Content-Length, Transfer-Encoding,
 *                  Connection, Keep-Alive, Upgrade
 *   PETREL_ESTATE  the response has started already
 *   PETREL_ENOMEM  out of memory or over the arena's limit
 *
 * Lifetime: `name` and `value` are copied into the request's arena; yours
 * may go away after the call.
 *
 * Example:
 *   static int created(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       int rc = petrel_resp_header(req, "Location", "/items/1");
 *       if (rc < 0)
 *           return rc;
 *       return petrel_send_text(req, 201, "application/json", "{\"id\":1}\n");
 *   }
 */
PETREL_API int petrel_resp_header(petrel_req_t *req, const char *name, const char *value);

/**
 * Add a trailer field, sent after a streamed body.
 *
 * Trailers go out at petrel_stream_end(): over HTTP/1.1 in the last chunk,
 * only to a client that sent `TE: trailers` (RFC 9112 §7.1.2); over HTTP/2
 * in a trailing HEADERS frame.  A response that is not streamed sends none.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  as petrel_resp_header()
 *   PETREL_ESTATE  the response has ended already
 *   PETREL_ENOMEM  out of memory or over the arena's limit
 *
 * Lifetime: `name` and `value` are copied into the request's arena.
 */
PETREL_API int petrel_resp_trailer(petrel_req_t *req, const char *name, const char *value);

/**
 * Send a whole response: status, Content-Type and body.
 *
 * `status` is 200 to 599 (1xx responses are petrel's own); `type` may be
 * NULL (no Content-Type).  Content-Length is set from `len`; a HEAD request
 * gets the same header fields and no body, and so do 204 and 304.  The
 * response is queued: the handler returns 0 after it.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `status` is not 200 to 599
 *   PETREL_ESTATE  a response was sent or started already
 *   PETREL_ENOMEM  out of memory, or the connection's output budget is
 *                  exhausted (the connection is closed)
 *   PETREL_EIO     the connection is gone
 *
 * Lifetime: `body` is not copied when it is large (over 4 KiB): it must
 * stay valid until the response has been written, so give static storage
 * or memory of the request's arena, never a stack buffer (for that, see
 * petrel_send_copy()).  `type` is read during the call.
 *
 * Example:
 *   static const char page[] = "<!doctype html><title>hi</title>\n";
 *
 *   static int home(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       return petrel_send(req, 200, "text/html", page, sizeof(page) - 1);
 *   }
 */
PETREL_API int petrel_send(petrel_req_t *req, int status, const char *type, const void *body,
                           size_t len);

/**
 * Send a whole response whose body is a NUL-terminated string.
 *
 * The same as `petrel_send(req, status, type, text, strlen(text))`.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_send().
 *
 * Lifetime: as petrel_send(): `text` must stay valid until the response
 * has been written (static, or the request's arena).
 */
PETREL_API int petrel_send_text(petrel_req_t *req, int status, const char *type, const char *text);

/**
 * Send a whole response with a copy of the body.
 *
 * Copies `body` into the request's arena, then calls petrel_send(): for a
 * body in a stack buffer, or in memory you free or change after the call.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_send(); PETREL_ENOMEM also when the copy does not fit
 * in the arena.
 *
 * Lifetime: `body` is read during the call only.
 *
 * Example:
 *   #include <stdio.h>
 *
 *   static int sum(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       char buf[64];
 *       int n = snprintf(buf, sizeof(buf), "%d\n", 2 + 2);
 *       return petrel_send_copy(req, 200, "text/plain", buf, (size_t)n);
 *   }
 */
PETREL_API int petrel_send_copy(petrel_req_t *req, int status, const char *type, const void *body,
                                size_t len);

/**
 * Send a whole response whose body is a part of a file.
 *
 * Sends `len` bytes of the open file `fd` from `offset` (with sendfile(2)
 * over HTTP/1.1; read into DATA frames over HTTP/2).  The file must hold
 * those bytes until they are sent.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_send().  With `close_fd` set, `fd` is closed on every
 * error too.
 *
 * Lifetime: `fd` must stay open until the response has been written.  With
 * `close_fd` set, petrel owns it from the call on and closes it then;
 * without, it is yours to close after the request (petrel_arena_defer() on
 * `req->arena` runs at the right time).
 *
 * Example:
 *   #include <fcntl.h>
 *   #include <sys/stat.h>
 *   #include <unistd.h>
 *
 *   static int motd(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       int fd = open("/etc/motd", O_RDONLY | O_CLOEXEC);
 *       struct stat st;
 *       if (fd < 0)
 *           return 404;
 *       if (fstat(fd, &st) < 0) {
 *           close(fd);
 *           return 500;
 *       }
 *       return petrel_send_fd(req, 200, "text/plain", fd, 0, (size_t)st.st_size, 1);
 *   }
 */
PETREL_API int petrel_send_fd(petrel_req_t *req, int status, const char *type, int fd, off_t offset,
                              size_t len, int close_fd);

/**
 * Send a status with a short default body.
 *
 * The body is the status and its reason phrase ("404 Not Found\n", as
 * text/plain); 204 and 304 get none.  Returning the status from a handler
 * (`return 404;`) does the same.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_send().
 *
 * Lifetime: nothing to keep: the body is copied.
 */
PETREL_API int petrel_send_status(petrel_req_t *req, int status);

/**
 * Start a streamed response, whose body is written in parts.
 *
 * Sends the status and the header fields (with chunked transfer coding
 * over HTTP/1.1; DATA frames follow over HTTP/2).  Then call
 * petrel_stream_write() any number of times and petrel_stream_end() once,
 * from the handler or later: from a timer, from another request's handler,
 * when a result arrives.  The handler returns 0 after starting the stream;
 * a handler that returns without ending it leaves the response open.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_send().
 *
 * Lifetime: the request, and everything in its arena, stays valid until
 * petrel_stream_end() (even when the client goes away: the writes then
 * fail); after it, `req` must not be used.  `type` is read during the
 * call.
 *
 * Example:
 *   #include <string.h>
 *
 *   static int numbers(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       static const char *const words[] = {"one\n", "two\n", "three\n"};
 *       int rc = petrel_stream_begin(req, 200, "text/plain");
 *       if (rc < 0)
 *           return rc;
 *       for (int i = 0; i < 3 && rc == 0; i++)
 *           rc = petrel_stream_write(req, words[i], strlen(words[i]));
 *       petrel_stream_end(req); // after a failed write too
 *       return 0;
 *   }
 */
PETREL_API int petrel_stream_begin(petrel_req_t *req, int status, const char *type);

/**
 * Write a part of a streamed response's body.
 *
 * Queues `len` bytes (a chunk over HTTP/1.1, DATA frames over HTTP/2, as
 * the client's flow-control window allows); an empty write does nothing.
 * A HEAD request, or a status without a body, discards the bytes.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_ESTATE  no stream was started, or it has ended
 *   PETREL_EIO     the client went away (the connection closed, or the
 *                  HTTP/2 stream was reset): stop writing, and end the
 *                  stream with petrel_stream_end() all the same
 *   PETREL_ENOMEM  out of memory, or more output is waiting for a client
 *                  that does not read it than the connection's budget
 *                  allows (see --max-body-size in petrel(1)): the stream
 *                  is reset (HTTP/2) or the connection closed (HTTP/1.1)
 *
 * Lifetime: `data` is copied: it may go away after the call.
 */
PETREL_API int petrel_stream_write(petrel_req_t *req, const void *data, size_t len);

/**
 * End a streamed response.
 *
 * Sends the end of the body, with the trailers added by
 * petrel_resp_trailer().  Call it exactly once for every stream started,
 * also after a write failed: it is what releases the request.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_ESTATE  no stream was started, or it has ended already
 *   PETREL_EIO     the client went away; the request is released all the
 *                  same
 *   PETREL_ENOMEM  out of memory: the connection is closed, and the
 *                  request released
 *
 * Lifetime: after the call `req`, its arena and everything in it may be
 * gone at any moment: do not touch them.
 */
PETREL_API int petrel_stream_end(petrel_req_t *req);

/**
 * Cut a streamed response short: the client sees it incomplete.
 *
 * For a producer whose source failed midway (an upstream that closed
 * mid-body): over HTTP/1.1 the connection is closed without the last
 * chunk (or, for a body delimited by the close, before its end), over
 * HTTP/2 the stream is reset (RST_STREAM, INTERNAL_ERROR); trailers are
 * not sent.  It ends the stream as petrel_stream_end() does: call one of
 * the two, once.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `req` is NULL
 *   PETREL_ESTATE  no stream was started, or it has ended already
 *   PETREL_EIO     the client went away; the request is released all the
 *                  same
 *
 * Lifetime: after the call `req`, its arena and everything in it may be
 * gone at any moment: do not touch them.
 */
PETREL_API int petrel_stream_abort(petrel_req_t *req);

/**
 * Bytes of a streamed response that wait to be written to the client.
 *
 * Over HTTP/1.1: the bytes queued on the connection and not written yet,
 * counting those of earlier responses ahead of this one.  Over HTTP/2: the
 * bytes petrel_stream_write() took that are not framed yet (the stream's or
 * the connection's flow-control window, or the connection's output, holds
 * them back).  A producer that checks it after its writes paces itself to
 * the client (see petrel_stream_on_drain()) instead of queueing until the
 * connection's budget (see --max-body-size in petrel(1)) cuts it off.
 *
 * Returns: the number of bytes; 0 when the request has no streamed response
 * under way (not started, ended, or aborted).
 *
 * Errors: none.
 *
 * Lifetime: `req` as for petrel_stream_write().
 */
PETREL_API size_t petrel_stream_buffered(petrel_req_t *req);

/** The callback of petrel_stream_on_drain(). */
typedef void (*petrel_stream_drain_cb)(petrel_req_t *req, void *data);

/**
 * Be called back when a streamed response's waiting bytes drain to a mark.
 *
 * Once the bytes of petrel_stream_buffered() are at `mark` or fewer,
 * `cb(req, data)` runs once, from the worker's loop (never from inside a
 * petrel call): write more from there, and call this again to wait again.
 * A second call replaces the first; a NULL `cb` cancels.  The callback is
 * cancelled when the stream ends or the request is aborted (the abort
 * callback runs instead).
 *
 * Returns: 0 when the callback is set (or cancelled); 1 when the bytes are
 * at `mark` or fewer already: the callback is not set, go on writing; or a
 * negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `req` is NULL
 *   PETREL_ESTATE  no streamed response is under way (not started, or ended)
 *   PETREL_EIO     the client went away: end the stream with petrel_stream_end()
 *
 * Lifetime: `data` is the caller's, and must stay valid until the callback
 * has run or has been cancelled.
 *
 * Example:
 *   #include <string.h>
 *
 *   static char line[64] = "one line of a long report\n";
 *
 *   static void more(petrel_req_t *req, void *data)
 *   {
 *       unsigned *left = data;
 *       while (*left > 0) {
 *           if (petrel_stream_write(req, line, strlen(line)) < 0)
 *               break;
 *           --*left;
 *           // 64 KiB waiting for the client: go on once half of it is written
 *           if (petrel_stream_buffered(req) > 65536 &&
 *               petrel_stream_on_drain(req, 32768, more, left) == 0)
 *               return;
 *       }
 *       petrel_stream_end(req);
 *   }
 *
 *   static int report(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       unsigned *left = petrel_arena_new(req->arena, unsigned, 1);
 *       if (left == NULL)
 *           return 503;
 *       *left = 1000000;
 *       int rc = petrel_stream_begin(req, 200, "text/plain");
 *       if (rc < 0)
 *           return rc;
 *       more(req, left);
 *       return 0;
 *   }
 */
PETREL_API int petrel_stream_on_drain(petrel_req_t *req, size_t mark, petrel_stream_drain_cb cb,
                                      void *data);

/**
 * The reason phrase of a status code.
 *
 * Returns: the phrase of RFC 9110 ("Not Found" for 404), or "" for a code
 * petrel does not know.
 *
 * Errors: none.
 *
 * Lifetime: the string is static.
 */
PETREL_API const char *petrel_status_reason(int status);

/* ------------------------------------------------------------------------ */
/* Router and modules                                                        */

/**
 * What a handler returns when it will respond later.
 *
 * It responds from a callback: a watched descriptor, a timer, another
 * request's handler (see "Waiting for work the handler started" below).
 */
#define PETREL_LATER 1

/**
 * A request handler.
 *
 * Called with the request and the route's `data`, in the worker's event
 * loop: it must not block (every other connection of the worker waits).
 * Return 0 once it responded (or started a stream), a status 200 to 599 to
 * have petrel send that status with a short default body
 * (petrel_send_status()), PETREL_LATER when it will respond later (see
 * "Waiting for work the handler started"), or a negative PETREL_E* code:
 * it is logged and the client gets 500.  Returning 0 without responding,
 * or any other value, is logged
 * as a handler error and answered 500; a handler that fails after starting
 * a streamed response has it cut short (the client sees it incomplete).
 *
 * Lifetime: `req` is valid until its response has been written (see
 * petrel_req_t; a request that waits: see "Waiting for work the handler
 * started"); `data` is the route's, kept as long as the route.
 */
typedef int (*petrel_handler_t)(petrel_req_t *req, void *data);

/**
 * A route: methods, a path pattern, a handler and its data.
 *
 * `methods` is a set of PETREL_* method bits.  Patterns are made of exact
 * segments ("/hello"), parameters ("/kv/:key", one segment) and a trailing
 * wildcard ("/static/ *" without the space) that binds the rest of the path
 * to the parameter "*".  Exact beats parameter beats wildcard.  `data` is
 * passed to the handler and is also `req->route_data`.  A module's route
 * table ends with a zero entry.
 *
 * Lifetime: a table given to PETREL_MODULE() is read when the module loads;
 * the pattern is copied, `data` is kept as it is (static storage).
 */
typedef struct petrel_route {
    int methods;
    const char *pattern;
    petrel_handler_t handler;
    void *data;
} petrel_route_t;

/**
 * Register a route: a handler for methods and a path pattern.
 *
 * For routes known only at start-up (from a module's argument); the routes
 * of a module's table are added the same way.  Call it from a module's init,
 * in the master, before the workers start.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `pattern` does not start with '/', a parameter has no
 *                  name, the wildcard is not last, two patterns name the
 *                  same parameter position differently ("/a/:x" and
 *                  "/a/:y"), more than 16 parameters, `handler` is NULL or
 *                  `methods` names no method or has other bits than
 *                  PETREL_ANY's, PETREL_WS_CONNECT, PETREL_OTHER and
 *                  PETREL_BODY_STREAM (which a PETREL_WS_CONNECT route
 *                  may not have)
 *   PETREL_ESTATE  a method of `methods` is registered already for this
 *                  pattern (by this module or another)
 *   PETREL_ENOMEM  out of memory
 *
 * Lifetime: `pattern` is copied; `data` is kept as it is and passed to
 * every call of `handler`: it must live as long as petrel runs.
 *
 * Example:
 *   static int item(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       return petrel_send_text(req, 200, "text/plain", petrel_req_param(req, "id"));
 *   }
 *
 *   static int init(petrel_server_t *srv, const char *args)
 *   {
 *       (void)args;
 *       return petrel_route_add(srv, PETREL_GET, "/items/:id", item, NULL);
 *   }
 */
PETREL_API int petrel_route_add(petrel_server_t *srv, int methods, const char *pattern,
                                petrel_handler_t handler, void *data);

/**
 * The kinds of a module's option: what it takes, and the type of its field.
 *
 * petrel_option_t.kind is one of these.
 */
enum {
    /** No value: sets an `int` field to 1. */
    PETREL_OPTION_FLAG = 1,
    /** A size with an optional k, m or g suffix, in [min, max] (max 0: up to
     *  1t), into a `size_t` field. */
    PETREL_OPTION_SIZE,
    /** Seconds, a fraction allowed (0.5), into a `uint64_t` field in
     *  milliseconds; 0 is taken only when min is 0. */
    PETREL_OPTION_SECS,
    /** The value as given, into a `const char *` field (it points into argv
     *  and stays valid as long as petrel runs). */
    PETREL_OPTION_TEXT,
    /** As TEXT, and the value must be a readable directory each time the
     *  module loads (else petrel does not start, or a reload fails, with a
     *  message naming the option). */
    PETREL_OPTION_DIR,
    /** One of `choices`: an `int` field takes its index. */
    PETREL_OPTION_CHOICE,
    /** `set` takes the value (NULL for an option without `value`). */
    PETREL_OPTION_CALL
};

/** A flag of petrel_option_t: giving the option loads its built-in module.
 *
 *  As `--module NAME` would (as `--root` loads the module static); the
 *  other options of the module apply to it, and petrel warns when they are
 *  given without it. */
#define PETREL_OPTION_LOADS 1

/**
 * An option of a module, parsed and listed in `petrel --help` as petrel's own.
 *
 * A row of the table that the module's descriptor points to
 * (PETREL_MODULE_WITH_OPTIONS).
 *
 * The option is `--NAME`, or `--NAME VALUE` when `value` is set; it sets a
 * field of the module's configuration struct (the descriptor's `config`) at
 * `offset`, of the type its kind says, or calls `set`.  Before the command
 * line is read, and again each time the module loads, the fields of the
 * rows with a default (`def`, not 0: SIZE, SECS in milliseconds, CHOICE's
 * index) take it; then the values given are applied in their order, and
 * the module's init runs and reads its struct.  A bad value stops petrel
 * with `petrel: --NAME: expected EXPECT, got 'VALUE'` (exit status 2).
 *
 * Names are unique across petrel's options and every module's (petrel
 * refuses to start with a clash); use a prefix of the module's name
 * (`--static-cache-size`) for anything but the module's main option.
 *
 * Lifetime: the table, its strings and `config` are static storage of the
 * module.
 */
typedef struct petrel_option {
    const char *name;  /**< "static-cache-size": --static-cache-size */
    const char *value; /**< what it takes, for --help ("BYTES"); NULL: a flag */
    /** --help's text ('\n' between lines; "(default X)" names the default);
     *  NULL: listed beside the row before it */
    const char *help;
    int kind;                   /**< PETREL_OPTION_FLAG, ...: what it takes */
    size_t offset;              /**< offsetof(your config struct, field) */
    uint64_t min, max;          /**< SIZE: the range; SECS: min 0 lets 0 be given */
    uint64_t def;               /**< the default (see above); 0: the struct's own */
    const char *expect;         /**< what a bad value is told: "a size from 1k to 1m" */
    const char *const *choices; /**< CHOICE: the names, NULL-terminated */
    /** CALL (and a check after any other kind, if set): `config` is the
     *  descriptor's; return 0, or a negative PETREL_E* code for a bad value
     *  (then `expect` is said).  Called when the command line is read and
     *  again each time the module loads, with the same values. */
    int (*set)(void *config, const char *value);
    int flags; /**< PETREL_OPTION_LOADS, or 0 */
} petrel_option_t;

/**
 * Parse a size given as digits and an optional k, m or g suffix.
 *
 * A suffix, in any case, multiplies by 1024, 1024^2 or 1024^3; the size is
 * at most 1t (2^40).  The syntax of PETREL_OPTION_SIZE, for a module that
 * reads sizes from its own argument ("cache-size=64m"): "0", "4096", "64k",
 * "1G".  Nothing else is taken: no sign, no space, no fraction, no other
 * suffix.
 *
 * Returns: 0 with the size in *out; PETREL_EINVAL otherwise (*out is left
 * as it was).
 *
 * Errors: PETREL_EINVAL  `s` or `out` is NULL, `s` is empty, has no digits
 * or anything but them and one suffix ("-1", "1.5k", "8x", "k"), or is
 * over 2^40 bytes (as is a number that overflows).
 *
 * Lifetime: nothing is kept; `s` is the caller's.
 *
 * Example:
 *   static size_t limit = 1 << 20;
 *
 *   static int limit_arg(const char *v)
 *   {
 *       size_t n;
 *       if (petrel_parse_size(v, &n) < 0 || n < 4096) {
 *           petrel_log(PETREL_LOG_ERROR, "limit=%s: expected a size from 4k", v);
 *           return PETREL_EINVAL;
 *       }
 *       limit = n;
 *       return 0;
 *   }
 */
PETREL_API int petrel_parse_size(const char *s, size_t *out);

/**
 * Parse a duration in seconds, a decimal fraction allowed, into milliseconds.
 *
 * "30" is 30000, "0.5" 500, "0" 0; at most a year.  The syntax of
 * PETREL_OPTION_SECS, for a module that reads durations from its own
 * argument ("timeout=2.5").  The milliseconds are rounded to the nearest,
 * and are at least 1 for a duration above 0 ("0.0001" is 1): a caller
 * that refuses 0 tests *ms.
 *
 * Returns: 0 with the milliseconds in *ms; PETREL_EINVAL otherwise (*ms is
 * left as it was).
 *
 * Errors: PETREL_EINVAL  `s` or `ms` is NULL, `s` is empty or anything but
 * digits with at most one '.' among or after them ("-1", "1e3", "5s",
 * " 5", "."), or is over a year (31,536,000 seconds).
 *
 * Lifetime: nothing is kept; `s` is the caller's.
 *
 * Example:
 *   static uint64_t timeout_ms = 5000;
 *
 *   static int timeout_arg(const char *v)
 *   {
 *       uint64_t ms;
 *       if (petrel_parse_duration(v, &ms) < 0 || ms == 0 || ms > 60000) {
 *           petrel_log(PETREL_LOG_ERROR, "timeout=%s: expected seconds, up to 60", v);
 *           return PETREL_EINVAL;
 *       }
 *       timeout_ms = ms;
 *       return 0;
 *   }
 */
PETREL_API int petrel_parse_duration(const char *s, uint64_t *ms);

/**
 * A module descriptor, made by PETREL_MODULE(): one per module file.
 *
 * The routes of `routes` are added first; then `init` runs in the master
 * before the workers start, with the module's argument string (what follows
 * the first ':' of `--module NAME:ARGS`, "" if none; it stays valid as long
 * as petrel runs); it may add more routes with petrel_route_add().  The
 * workers are forked after it, so they start with a copy of whatever init
 * set up.  `worker_init` runs in each worker
 * before it accepts connections (per-worker state: a cache, a store, timers)
 * and `worker_fini` when the worker exits.  `init` and `worker_init` return
 * 0 or a negative PETREL_E* code: a failing init stops petrel at start-up
 * with a message naming the module.  Any of the three may be NULL.
 *
 * A reload (SIGHUP, or --dev when a module file changes) loads every module
 * again and runs `init` again in the master, with a fresh router, then
 * replaces the workers with new ones (worker_init runs in those); the old
 * workers finish their requests and run worker_fini.  A module loaded from
 * a file gets fresh static variables on each reload; a built-in module keeps
 * its statics, so its init must be safe to run more than once.  If the new
 * init fails, the previous modules keep serving.
 *
 * Workers are separate processes: state that a handler changes (a counter,
 * a store) is per worker, and is lost when the worker exits.
 *
 * A later ABI version may add fields at the end: a descriptor written by
 * hand rather than with PETREL_MODULE() names its fields
 * (`{.abi_version = PETREL_ABI_VERSION, .name = "ping", ...}`).
 */
typedef struct petrel_module {
    int abi_version;
    const char *name;
    const petrel_route_t *routes; /**< terminated by a zero entry; may be NULL */
    int (*init)(petrel_server_t *srv, const char *args);
    int (*worker_init)(petrel_server_t *srv);
    void (*worker_fini)(petrel_server_t *srv);
    /* ABI 3: */
    /** The module's options, ending with a zero row; may be NULL
     *  (PETREL_MODULE_WITH_OPTIONS). */
    const petrel_option_t *options;
    /** The struct the options set (petrel_option_t.offset counts from it). */
    void *config;
} petrel_module_t;

#ifdef PETREL_BUILTIN_MODULE
/* Built into a program: the descriptor petrel_module_NAME goes into the
 * table of built-in modules passed to petrel_main(). */
#define PETREL_MODULE_DESC_(name) PETREL_API const petrel_module_t petrel_module_##name
#define PETREL_MODULE_ENTRY_(name)
#else
/* A module file (.so): the descriptor is private (a petrel binary with a
 * built-in module of the same name must not take its place), and one
 * well-known symbol points to it for dlsym(). */
#define PETREL_MODULE_DESC_(name) static const petrel_module_t petrel_module_##name
#define PETREL_MODULE_ENTRY_(name)                                                                 \
    PETREL_API const petrel_module_t *petrel_module_entry = &petrel_module_##name;
#endif

/**
 * Declare the module of this file.
 *
 * `PETREL_MODULE(hello, routes, init, worker_init, worker_fini)`, with NULL
 * for what the module does not have.  `name` is a C identifier, the name
 * petrel reports the module by (and, for a built-in module, the NAME of
 * `--module NAME`); `routes` a route table ending in a zero entry, or NULL.
 * Built as a shared object, the file then exports `petrel_module_entry`,
 * which `--module PATH.so` looks up; built with -DPETREL_BUILTIN_MODULE, it
 * defines `petrel_module_NAME` for a table of built-in modules instead.
 *
 * Example:
 *   static int hello(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       return petrel_send(req, 200, "text/plain", "Hello World!", 12);
 *   }
 *
 *   static const petrel_route_t routes[] = {
 *       {PETREL_GET, "/hello", hello, NULL},
 *       {0, NULL, NULL, NULL},
 *   };
 *
 *   PETREL_MODULE(hello, routes, NULL, NULL, NULL)
 */
#define PETREL_MODULE(name, routes, init, worker_init, worker_fini)                                \
    PETREL_MODULE_DESC_(name) = {PETREL_ABI_VERSION, #name,       routes, init,                    \
                                 worker_init,        worker_fini, NULL,   NULL};                   \
    PETREL_MODULE_ENTRY_(name)

/**
 * Declare the module of this file, with options of its own.
 *
 * As PETREL_MODULE(), and `options`, a table of petrel_option_t ending with
 * a zero row, that set the fields of `config` (a pointer to the module's
 * struct), which init reads.
 *
 * Built in, its options are petrel's (`--NAME`, listed in --help in a
 * section of the module).  A module file's options are given after its
 * `--module PATH.so`: petrel loads the module files named on the command
 * line before it reads the rest of it (see petrel(1)).
 *
 * Example:
 *   typedef struct hello_conf {
 *       const char *greeting;
 *       size_t max_name;
 *   } hello_conf_t;
 *   static hello_conf_t conf = {"Hello", 0};
 *
 *   static int hello(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       return petrel_send_text(req, 200, "text/plain", conf.greeting);
 *   }
 *
 *   static const petrel_route_t routes[] = {
 *       {PETREL_GET, "/hello", hello, NULL},
 *       {0, NULL, NULL, NULL},
 *   };
 *
 *   // petrel --module ./hello.so --hello-greeting Hi --hello-max-name 1k
 *   static const petrel_option_t options[] = {
 *       {.name = "hello-greeting", .value = "TEXT", .kind = PETREL_OPTION_TEXT,
 *        .offset = offsetof(hello_conf_t, greeting),
 *        .help = "what /hello says (default Hello)"},
 *       {.name = "hello-max-name", .value = "BYTES", .kind = PETREL_OPTION_SIZE,
 *        .offset = offsetof(hello_conf_t, max_name), .min = 1, .max = 1024, .def = 64,
 *        .expect = "a size from 1 to 1k", .help = "longest name (default 64)"},
 *       {.name = NULL},
 *   };
 *
 *   PETREL_MODULE_WITH_OPTIONS(hello, routes, NULL, NULL, NULL, options, &conf)
 */
#define PETREL_MODULE_WITH_OPTIONS(name, routes, init, worker_init, worker_fini, options, config)  \
    PETREL_MODULE_DESC_(name) = {PETREL_ABI_VERSION, #name,       routes,  init,                   \
                                 worker_init,        worker_fini, options, config};                \
    PETREL_MODULE_ENTRY_(name)

/**
 * Run the `petrel` command in a program of your own.
 *
 * Parses `argv` as petrel(1) does, loads modules from `builtins` (a
 * NULL-terminated table of descriptors, named by `--module NAME`) or from
 * files, starts the workers and serves until SIGTERM or SIGINT.  This is
 * how a program embeds petrel with modules of its own linked in (built with
 * -DPETREL_BUILTIN_MODULE, so that PETREL_MODULE() defines
 * `petrel_module_NAME`).  Call it once, from main().
 *
 * Returns: the process's exit status, as petrel(1) documents it: 0 after a
 * graceful shutdown, --help or --version; 1 for a start-up error; 2 for a
 * usage error.
 *
 * Errors: start-up and usage errors are reported on standard error, with
 * the cause, and in the exit status; nothing is served then.
 *
 * Lifetime: `argv` and `builtins` must stay valid until it returns; module
 * arguments point into `argv`.
 *
 * Example:
 *   static int ping(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       return petrel_send_text(req, 200, "text/plain", "pong\n");
 *   }
 *
 *   static const petrel_route_t ping_routes[] = {
 *       {PETREL_GET, "/ping", ping, NULL},
 *       {0, NULL, NULL, NULL},
 *   };
 *   static const petrel_module_t ping_module = {
 *       .abi_version = PETREL_ABI_VERSION, .name = "ping", .routes = ping_routes};
 *   static const petrel_module_t *const builtins[] = {&ping_module, NULL};
 *
 *   int main(int argc, char **argv)
 *   {
 *       return petrel_main(argc, argv, builtins); // ./server --module ping
 *   }
 */
PETREL_API int petrel_main(int argc, char **argv, const petrel_module_t *const *builtins);

/**
 * Name a part built into the program, for `--version`.
 *
 * `--version` prints petrel's version and module ABI, then one line per
 * part: what petrel itself always has (systemd's socket activation and
 * readiness notification, spoken without libsystemd), then the lines added
 * here, in order -- the optional libraries a program links (the `petrel`
 * command says whether it has the PostgreSQL pool and the Redis bridge).
 * Call it before petrel_main(); at most 16 lines.
 *
 * Returns: 0, or PETREL_ELIMIT (16 lines already), PETREL_EINVAL (NULL).
 *
 * Errors: as above.
 *
 * Lifetime: `line` is kept, not copied: a string literal, or memory that
 * outlives petrel_main().
 *
 * Example:
 *   int main(int argc, char **argv)
 *   {
 *       static const petrel_module_t *const builtins[] = {NULL};
 *       petrel_version_add("billing API 2.3");
 *       return petrel_main(argc, argv, builtins);
 *   }
 */
PETREL_API int petrel_version_add(const char *line);

/* ------------------------------------------------------------------------ */
/* HTTP semantics (src/framework/semantics.c) -- begin                                 */
/*                                                                           */
/* RFC 9110 for handlers: HTTP-dates, entity-tags, conditional requests     */
/* (304, 412), Range requests (206, 416) and content coding negotiation.    */
/* The string functions read NUL-terminated header values and allocate     */
/* nothing; the petrel_req_*() forms read the request's header fields in    */
/* one pass.  Times are seconds since the epoch; a negative time stands for */
/* "no modification date".                                                  */

/** Bytes of the buffer of petrel_http_date_format(): 29 characters and a
 *  NUL. */
#define PETREL_HTTP_DATE_SIZE 30

/**
 * Format a time as an HTTP-date.
 *
 * The IMF-fixdate of RFC 9110 §5.6.7, the form of the Date and
 * Last-Modified header fields: "Sun, 06 Nov 1994 08:49:37 GMT".  A time
 * whose year is not 0000 to 9999 is written as the epoch.  Allocates
 * nothing; safe from any process or thread.
 *
 * Returns: 29, the characters written (a NUL follows them).
 *
 * Errors: none.
 *
 * Lifetime: `buf` is the caller's, at least PETREL_HTTP_DATE_SIZE bytes.
 *
 * Example:
 *     static int last_modified(petrel_req_t *req, time_t mtime)
 *     {
 *         char date[PETREL_HTTP_DATE_SIZE];
 *         petrel_http_date_format(mtime, date);
 *         return petrel_resp_header(req, "Last-Modified", date);
 *     }
 */
PETREL_API size_t petrel_http_date_format(time_t t, char *buf);

/**
 * Parse an HTTP-date in any of its three forms.
 *
 * RFC 9110 §5.6.7: the IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the
 * obsolete RFC 850 form ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime's
 * ("Sun Nov  6 08:49:37 1994").  The value must be exactly one date
 * (trailing spaces allowed): fixed digit counts, the listed day and month
 * names, GMT, a year from 1970.
 *
 * Returns: 0 with `*t` set, or a negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL when `s` is not such a date (`*t` untouched).
 *
 * Lifetime: `s` is read during the call only.
 */
PETREL_API int petrel_http_date_parse(const char *s, time_t *t);

/**
 * Whether an If-Match or If-None-Match value matches an entity-tag.
 *
 * `list` is "*" or a comma-separated list of entity-tags (RFC 9110
 * §13.1.1, §13.1.2); `etag` is given as it is sent in ETag, with its
 * quotes: "\"v42\"" (strong) or "W/\"v42\"" (weak).  `weak` 0 is the
 * strong comparison (§8.8.3.2: both tags strong and the same), as If-Match
 * uses; 1 the weak comparison (the same opaque-tag), as If-None-Match uses.
 * "*" matches any `etag`; elements that are not entity-tags are skipped.
 * `etag` NULL (no representation) matches nothing.
 *
 * Returns: 1 when it matches, else 0.
 *
 * Errors: none.
 *
 * Lifetime: the strings are read during the call only.
 */
PETREL_API int petrel_etag_match(const char *list, const char *etag, int weak);

/**
 * The request header fields of conditional and Range requests.
 *
 * NULL where absent: fill with petrel_req_conditions(), or by hand (tests,
 * proxies).  The strings are not owned: those of petrel_req_conditions()
 * live in the request arena (valid until the response has been written).
 */
typedef struct petrel_conditions {
    int method;                      /**< the request's PETREL_* method bit */
    const char *if_match;            /**< If-Match (§13.1.1) */
    const char *if_none_match;       /**< If-None-Match (§13.1.2) */
    const char *if_modified_since;   /**< If-Modified-Since (§13.1.3) */
    const char *if_unmodified_since; /**< If-Unmodified-Since (§13.1.4) */
    const char *if_range;            /**< If-Range (§13.1.5) */
    const char *range;               /**< Range (§14.2) */
} petrel_conditions_t;

/**
 * Read the conditional and Range fields of a request.
 *
 * Fills `c` from the header fields of `req`, in one pass over them.  A
 * list field given on several lines (If-Match, If-None-Match) is joined
 * with ", " in the request arena; a single-valued one given twice is set
 * to "" (invalid: ignored).  With CONNECT, OPTIONS or TRACE every field is
 * left NULL: RFC 9110 §13.2.1 has them ignored for methods that neither
 * select nor change a representation.
 *
 * Returns: nothing.
 *
 * Errors: none (a join that finds the arena full keeps the first line).
 *
 * Lifetime: the strings set in `c` live in the request arena, valid until
 * the response has been written.
 */
PETREL_API void petrel_req_conditions(petrel_req_t *req, petrel_conditions_t *c);

/**
 * Evaluate the preconditions of a request (RFC 9110 §13.2.2, steps 1 to 4).
 *
 * In that order, for the selected representation of the target resource:
 * its entity-tag `etag` (with quotes, as sent in ETag; NULL if it has none)
 * and its modification time `last_modified` (negative if none).  A
 * resource with neither has no current representation: If-Match fails and
 * "If-None-Match: *" passes, which is what a PUT that creates needs.  For
 * any method: a PUT or DELETE handler calls it before changing anything.
 * Per §13.2.1 call it only when the response without conditions would be
 * 2xx or 412; when a failed If-Match or If-Unmodified-Since is due to a
 * change the same request already made, answering 2xx instead is the
 * caller's choice.
 *
 * Returns: 0 (go on with the method), 304 (GET or HEAD: not modified;
 * answer with the ETag, Last-Modified, Cache-Control and Vary a 200 would
 * have, §15.4.5) or 412 (precondition failed).
 *
 * Errors: none.
 *
 * Lifetime: everything is read during the call only.
 */
PETREL_API int petrel_preconditions(const petrel_conditions_t *c, const char *etag,
                                    time_t last_modified);

/**
 * Evaluate the preconditions of `req` for a representation, in one call.
 *
 * petrel_req_conditions() and petrel_preconditions() together.  Add the
 * validator fields (ETag, Last-Modified) before, so that a 304 carries
 * them; then `if (s) return s;` sends the status.
 *
 * Returns: 0, 304 or 412, as petrel_preconditions().
 *
 * Errors: none.
 *
 * Lifetime: `etag` is read during the call only.
 *
 * Example:
 *     static int page(petrel_req_t *req, void *data)
 *     {
 *         (void)data;
 *         petrel_resp_header(req, "ETag", "\"v1\"");
 *         int s = petrel_req_preconditions(req, "\"v1\"", -1);
 *         if (s)
 *             return s; // 304 or 412
 *         return petrel_send_text(req, 200, "text/plain", "version 1\n");
 *     }
 */
PETREL_API int petrel_req_preconditions(petrel_req_t *req, const char *etag, time_t last_modified);

/**
 * Whether an If-Range value lets a Range request be honoured.
 *
 * RFC 9110 §13.1.5, against the representation (`etag` as sent in ETag or
 * NULL, `last_modified` or negative): an entity-tag matches by the strong
 * comparison only (a weak one never does); an HTTP-date matches when it
 * equals `last_modified` and that is a strong validator (§8.8.2.2: its
 * second has passed).
 *
 * Returns: 1 when the Range may be honoured (also when `value` is NULL), 0
 * when the whole representation is to be sent.
 *
 * Errors: none.
 *
 * Lifetime: the strings are read during the call only.
 */
PETREL_API int petrel_if_range(const char *value, const char *etag, time_t last_modified);

/** A byte range of a representation: `len` bytes (at least 1) from `off`. */
typedef struct petrel_range {
    uint64_t off;
    uint64_t len;
} petrel_range_t;

/**
 * Evaluate a Range value for a representation of `size` bytes.
 *
 * RFC 9110 §14.1.2, the "bytes" unit, any case.  Several ranges that
 * overlap or touch are merged into one (§14.2 allows it).  Several disjoint
 * ranges get the whole representation (a server MAY ignore Range, §14.2): a
 * multipart body would have to be built in memory (petrel_send_fd() sends
 * one file range), browsers and media players ask one range at a time, and
 * many small ranges are a known denial of service (CVE-2011-3192).
 * Numbers saturate at 2^62.
 *
 * Returns: 206 with `*r` set (the range to send); 416 when no range is
 * satisfiable (every first-pos at or past `size`, or suffixes of 0 bytes;
 * of an empty representation, any int-range): answer with the
 * Content-Range that gives only the size (unsatisfied-range, §14.4); 0 to
 * ignore the header and send the whole representation (200): `value` NULL,
 * another unit, an invalid range-set (an int-range whose last-pos is
 * before its first-pos makes all of it invalid, §14.1.1), more than 16
 * range-specs, several disjoint ranges, or a suffix-range of an empty
 * representation (satisfiable, §14.1.3, but a 206 cannot say "no bytes":
 * the empty 200 does).
 *
 * Errors: none.
 *
 * Lifetime: `*r` is untouched unless 206 is returned.
 */
PETREL_API int petrel_range_parse(const char *value, uint64_t size, petrel_range_t *r);

/**
 * Step 5 of RFC 9110 §13.2.2: the Range of a request, if it applies.
 *
 * For the representation (`size` bytes, `etag`, `last_modified`, as for
 * petrel_preconditions()): the Range of `c` is evaluated for GET only
 * (§14.2; HEAD and other methods ignore it) and when the If-Range, if any,
 * matches (petrel_if_range()).  Call it after petrel_preconditions()
 * returned 0.
 *
 * Returns: 206 (`*r` set), 416 or 0, as petrel_range_parse().
 *
 * Errors: none.
 *
 * Lifetime: everything is read during the call only.
 */
PETREL_API int petrel_range_select(const petrel_conditions_t *c, uint64_t size, const char *etag,
                                   time_t last_modified, petrel_range_t *r);

/**
 * Evaluate the Range of `req` and add its Content-Range field, in one call.
 *
 * petrel_req_conditions() and petrel_range_select() together; the
 * Content-Range response field (§14.4) is "bytes FIRST-LAST/SIZE" with 206,
 * the unsatisfied-range form (only the size) with 416.
 *
 * Returns: 0 (send the whole representation, 200), 206 (send the `r->len`
 * bytes from `r->off`, with status 206) or 416 (return it: the status is
 * sent with its Content-Range); or a negative PETREL_E* code.
 *
 * Errors: PETREL_ENOMEM when the field cannot be added.
 *
 * Lifetime: `etag` is read during the call only.
 */
PETREL_API int petrel_req_range(petrel_req_t *req, uint64_t size, const char *etag,
                                time_t last_modified, petrel_range_t *r);

/** petrel_accept_encoding(): send the representation without a content
 *  coding. */
#define PETREL_CODING_IDENTITY (-1)

/**
 * Choose the content coding of a response (RFC 9110 §12.5.3).
 *
 * Among the `n` codings of `codings` that the caller can send ("br",
 * "gzip", ...; in its order of preference), given the request's
 * Accept-Encoding value `accept` (NULL when absent): the coding with the
 * highest q wins; q=0 means "not acceptable"; "*" stands for every coding
 * the field does not name; "x-gzip" is "gzip".  Ties go to a coding over
 * identity, then to the earlier one in `codings`; identity that the field
 * does not rank (itself or by "*") loses to any coding with a q above 0.
 * Even when the field refuses identity too ("identity;q=0"), identity is
 * what §12.5.3 prefers to a 406.  Send `Vary: Accept-Encoding` with every
 * response of a resource that has codings, whichever is chosen.
 *
 * Returns: the index in `codings` of the coding to apply, or
 * PETREL_CODING_IDENTITY: none (no field, an empty one, nothing of
 * `codings` acceptable).
 *
 * Errors: none.
 *
 * Lifetime: the strings are read during the call only.
 */
PETREL_API int petrel_accept_encoding(const char *accept, const char *const *codings, size_t n);

/* HTTP semantics -- end                                                     */

/* ------------------------------------------------------------------------ */
/* Waiting for work the handler started                                     */

/*
 * A handler that must wait for something (a database, another service, a
 * timer) starts that work, registers an abort callback and returns
 * PETREL_LATER; it responds later, from a callback in the same worker, with
 * the usual petrel_send*() or petrel_stream_*() calls.  Its worker serves
 * every other connection meanwhile.  Over HTTP/1.1 the responses of
 * pipelined requests still go out in request order (a later request that
 * is answered first waits for the ones before it); over HTTP/2 every stream
 * waits on its own; a WebSocket handler sends whenever it likes
 * (petrel_ws_send_*()) until its on_close.
 *
 * The request, its arena and everything in it stay valid until the
 * response is complete (the petrel_send*() or petrel_stream_end() call that
 * completes it has returned) -- or, when the request is aborted, until the
 * handler's next petrel_send*(), petrel_stream_begin() or
 * petrel_stream_end() call, which returns PETREL_EIO and lets it go, or at
 * the latest --handler-timeout after the abort.  A request waits at most
 * --handler-timeout (default 30 s): then petrel answers 504 and aborts it.
 * Graceful shutdown and reloads wait for waiting requests, up to
 * --drain-timeout.  No heap allocation is made for a waiting request by
 * petrel itself.
 */

/**
 * The abort callback of a request: its response will never reach the client.
 *
 * Called once, from the worker's loop, when the client went away
 * (the connection closed or was reset, RST_STREAM), when --handler-timeout
 * passed (petrel has answered 504), or when the worker stops at its drain
 * timeout.  Cancel the work started for the request; `req` is still valid
 * during the call and until the handler's next sending call (which returns
 * PETREL_EIO), and every sending call fails with PETREL_EIO.
 */
typedef void (*petrel_abort_cb)(petrel_req_t *req, void *data);

/**
 * Register the abort callback of a request that waits or streams.
 *
 * One per request: a second call replaces the first.  Register it before
 * returning PETREL_LATER, from the handler.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: PETREL_ESTATE when the response is already complete or the
 * request already aborted: the callback will not be called.
 *
 * Lifetime: `data` is the caller's and must stay valid until the callback
 * has run or the response is complete.
 *
 * Example:
 *     static void answer(void *data) // the work is done: respond
 *     {
 *         petrel_send_text(data, 200, "text/plain", "done\n");
 *     }
 *
 *     static void cancel(petrel_req_t *req, void *data) // the client left
 *     {
 *         (void)req;
 *         petrel_timer_stop(data);
 *     }
 *
 *     static int slow(petrel_req_t *req, void *data)
 *     {
 *         (void)data;
 *         petrel_timer_t *t = petrel_timer_start(100, answer, req);
 *         if (t == NULL)
 *             return 503;
 *         petrel_req_on_abort(req, cancel, t);
 *         return PETREL_LATER;
 *     }
 */
PETREL_API int petrel_req_on_abort(petrel_req_t *req, petrel_abort_cb cb, void *data);

/**
 * Whether a request was aborted (its client is gone, or petrel answered 504
 * at --handler-timeout).
 *
 * Returns: 1 when `req` was aborted (its sending calls fail with
 * PETREL_EIO), else 0.
 *
 * Errors: none.
 *
 * Lifetime: `req` must be valid (see "Waiting for work the handler started").
 */
PETREL_API int petrel_req_aborted(const petrel_req_t *req);

/**
 * Whether a request may still be answered.
 *
 * True while its handler runs, and after the handler returned PETREL_LATER
 * until the response is complete; false once the response is complete or
 * the request was aborted.  A library that answers requests later (the
 * PostgreSQL pool) asks it before it takes work for a request, and again
 * when the work is done.
 *
 * Returns: 1 when `req` may still be answered, else 0.
 *
 * Errors: none.
 *
 * Lifetime: `req` must be valid (see "Waiting for work the handler started").
 */
PETREL_API int petrel_req_waiting(const petrel_req_t *req);

/**
 * Whether the handler of a request still holds it.
 *
 * True from the return of a handler that answers later (PETREL_LATER) or
 * streams, until it lets go: until its response is complete, or, when the
 * request was aborted, until its next sending call (which returns
 * PETREL_EIO).  False while the handler runs, and after it let go.  A
 * library that calls a handler back with the outcome of work for a request
 * (the PostgreSQL pool) asks it before each callback: while it is true the
 * request is valid and its handler expects to hear -- during the abort
 * callback too, when petrel_req_waiting() is 0 already.
 *
 * Returns: 1 when the handler holds `req`, else 0.
 *
 * Errors: none.
 *
 * Lifetime: `req` must be valid (see "Waiting for work the handler started").
 */
PETREL_API int petrel_req_held(const petrel_req_t *req);

/**
 * The abort callback registered for a request, and its data.
 *
 * A request has one abort callback (petrel_req_on_abort() replaces it).  A
 * library that registers its own for a request the handler may have
 * registered one for (the PostgreSQL pool) reads that one first and calls
 * it from its own, so that both run.
 *
 * Returns: the callback, or NULL when none is registered (or it has run);
 * `*data` is set to its data (NULL with none) when `data` is not NULL.
 *
 * Errors: none.
 *
 * Lifetime: `req` must be valid; the data is the registrant's.
 */
PETREL_API petrel_abort_cb petrel_req_on_abort_get(const petrel_req_t *req, void **data);

/** A watched file descriptor (opaque): petrel_watch_start(). */
typedef struct petrel_watch petrel_watch_t;

/** Events of a watched descriptor. */
enum {
    PETREL_WATCH_READ = 1, /**< readable, or the other end hung up, or an error */
    PETREL_WATCH_WRITE = 2 /**< writable */
};

/**
 * The callback of a watched descriptor.
 *
 * Called from the worker's loop when `fd` is ready for `events`
 * (PETREL_WATCH_* bits; readiness is level-triggered: a descriptor that
 * stays readable is reported again at the next turn).  The callback may
 * change the events, stop the watch (also its own) and close the
 * descriptor after stopping it.
 */
typedef void (*petrel_watch_cb)(petrel_watch_t *w, int fd, int events, void *data);

/**
 * Watch a file descriptor in the calling worker's event loop.
 *
 * `fd` (non-blocking) is watched for `events` (PETREL_WATCH_* bits, 0 for
 * none yet): `cb(w, fd, events, data)` runs when it is ready.  Enough for
 * any asynchronous client library (libpq, hiredis, c-ares, libcurl's multi
 * interface).  Call from a module's worker_init, a handler or a callback;
 * one watch per descriptor.
 *
 * Returns: a handle, or NULL (errno says why).
 *
 * Errors: NULL with errno EINVAL (no callback, a negative descriptor, or
 * outside a worker), EEXIST (the descriptor is watched already), EPERM (a
 * regular file, which is always ready), ENOMEM.
 *
 * Lifetime: the caller keeps owning `fd`; the handle is valid until
 * petrel_watch_stop().  `data` is the caller's.
 *
 * Example:
 *     #include <unistd.h>
 *
 *     static void readable(petrel_watch_t *w, int fd, int events, void *data)
 *     {
 *         char buf[512];
 *         (void)events, (void)data;
 *         if (read(fd, buf, sizeof(buf)) <= 0) {
 *             petrel_watch_stop(w);
 *             close(fd);
 *         }
 *     }
 *
 *     static int watch_it(int fd) // from a module's worker_init
 *     {
 *         return petrel_watch_start(fd, PETREL_WATCH_READ, readable, NULL) ? 0 : PETREL_EIO;
 *     }
 */
PETREL_API petrel_watch_t *petrel_watch_start(int fd, int events, petrel_watch_cb cb, void *data);

/**
 * Change the events a descriptor is watched for.
 *
 * `events`: PETREL_WATCH_* bits, 0 for none for now (the watch stays).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL (NULL or a stopped watch), PETREL_EIO (the kernel
 * refused: the descriptor was closed under the watch).
 *
 * Lifetime: `w` must not have been stopped.
 */
PETREL_API int petrel_watch_set(petrel_watch_t *w, int events);

/**
 * Stop watching a descriptor and free the handle.
 *
 * Its callback will not run again, not even for events already reported
 * in this loop turn.  Stop a watch before closing its descriptor.  NULL is
 * ignored.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `w` is invalid after the call (freed at the end of the loop
 * turn); the descriptor stays the caller's.
 */
PETREL_API void petrel_watch_stop(petrel_watch_t *w);

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */

/**
 * A timer of petrel_timer_start() (opaque).
 *
 * Lifetime: the handle is valid until its callback has started, or until
 * petrel_timer_stop(); then it is freed.
 */
typedef struct petrel_timer petrel_timer_t;

/**
 * Run a function once, some milliseconds from now.
 *
 * Calls `cb(data)` once, `ms` milliseconds from now (0: at the end of the
 * current loop turn), in the calling worker's event loop: call it from a
 * handler, a module's worker_init, or another timer's callback.  For a
 * periodic timer, start the next one from the callback.  Timers still
 * pending when the worker exits do not run.
 *
 * Returns: a handle for petrel_timer_stop(), or NULL.
 *
 * Errors: NULL when out of memory, when `cb` is NULL, or when called
 * outside a worker (from a module's init in the master, say): then `cb`
 * will not run.
 *
 * Lifetime: the handle is valid until `cb` has started or
 * petrel_timer_stop(); keep the newest one of a periodic timer to stop it.
 * `data` must stay valid until `cb` runs (or the timer is stopped).
 *
 * Example:
 *   static petrel_timer_t *tick_timer;
 *   static unsigned long ticks;
 *
 *   static void tick(void *data)
 *   {
 *       ticks++;
 *       tick_timer = petrel_timer_start(1000, tick, data); // again in 1 s
 *   }
 *
 *   static int worker_init(petrel_server_t *srv)
 *   {
 *       (void)srv;
 *       tick_timer = petrel_timer_start(1000, tick, NULL);
 *       return tick_timer ? 0 : PETREL_ENOMEM;
 *   }
 *
 *   static void worker_fini(petrel_server_t *srv)
 *   {
 *       (void)srv;
 *       petrel_timer_stop(tick_timer);
 *   }
 */
PETREL_API petrel_timer_t *petrel_timer_start(uint64_t ms, void (*cb)(void *data), void *data);

/**
 * Cancel a timer that has not fired yet.
 *
 * Its callback will not run.  NULL is accepted and does nothing.
 *
 * Returns: nothing.
 *
 * Errors: none; a handle whose callback has started (or one stopped
 * already) is freed memory: passing it is undefined behaviour.
 *
 * Lifetime: the handle is freed by the call.
 */
PETREL_API void petrel_timer_stop(petrel_timer_t *t);

/**
 * Work for the end of the loop turn.
 *
 * The worker calls its callback once after the events and timers of the
 * turn, however often it was asked for.
 * A library that gathers what the handlers of one turn asked for and sends
 * it at once (the PostgreSQL pool's pipeline) embeds one in its own state,
 * sets it up with petrel_turn_work_init() and asks for it with
 * petrel_turn_work_add() whenever there is something to send.  No memory is
 * allocated.  The fields are petrel's.
 *
 * Lifetime: the caller's storage, set up once; petrel_turn_work_del()
 * before it is freed.
 */
typedef struct petrel_turn_work {
    void *_link[2];
    void (*_cb)(struct petrel_turn_work *w);
} petrel_turn_work_t;

/**
 * Set up `w` to run `cb` (with `w` itself) when it is added.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `w` is the caller's; find its container with offsetof.
 */
PETREL_API void petrel_turn_work_init(petrel_turn_work_t *w, void (*cb)(petrel_turn_work_t *w));

/**
 * Have `w`'s callback run at the end of this loop turn (once, however
 * often it is added before then).
 *
 * Returns: nothing.
 *
 * Errors: none; outside a worker it does nothing.
 *
 * Lifetime: `w` must stay valid until its callback has run or it is taken
 * back with petrel_turn_work_del().
 */
PETREL_API void petrel_turn_work_add(petrel_turn_work_t *w);

/**
 * Take back `w` if it waits for the end of the turn.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `w` may be freed after the call.
 */
PETREL_API void petrel_turn_work_del(petrel_turn_work_t *w);

/**
 * The time of this loop turn, in monotonic milliseconds.
 *
 * The clock of the timers, read once per turn.
 *
 * Returns: the milliseconds; 0 outside a worker's loop (a module's init).
 *
 * Errors: none.
 *
 * Lifetime: a value.
 */
PETREL_API uint64_t petrel_loop_now_ms(void);

/* ------------------------------------------------------------------------ */
/* Cache (src/framework/cache.c)                                            */

/**
 * A cache of small values by key, in one worker (opaque).
 *
 * Bounded: it holds at most `capacity` entries, each of a key of at most
 * `key_max` bytes and a value of at most `value_max` bytes, all allocated
 * by petrel_cache_new(): a lookup, a miss, a load and an eviction allocate
 * nothing.  When it is full, the CLOCK algorithm picks the entry to
 * replace (an expired one, or one not looked up since the hand last passed
 * it: an approximation of least recently used at the cost of one bit a
 * hit).  An entry expires `ttl_ms` after it was stored (0: never), by the
 * loop's clock.  Read-through: petrel_cache_get() of a key that is not
 * there calls the cache's loader, which may wait (a query on the
 * worker's PostgreSQL pool) and calls petrel_cache_loaded() when it has
 * the value; the lookups of that key meanwhile wait for the same load,
 * queued on its entry: concurrent misses of one key load it once.
 * petrel_cache_del() invalidates.  The counters of all the caches of an
 * instance are in /metrics (petrel_cache_hits_total, ..._misses_total,
 * ..._evictions_total, ..._expired_total, ..._loads_total,
 * ..._load_failures_total, and the gauge petrel_cache_entries).
 *
 * Each worker has its caches (make them in worker_init): a worker's cache
 * is touched by its loop only, so it takes no lock, and its loader may
 * wait on that worker's pool.  The cost: a value is held, and loaded, once
 * per worker.  A cache shared by the workers would take a lock (or a
 * lock-free protocol) on every lookup, and its waiters would wait on
 * another process's load.
 *
 * Lifetime: from petrel_cache_new() to petrel_cache_free(), in the worker
 * that made it; use it only from that worker's handlers and callbacks.
 */
typedef struct petrel_cache petrel_cache_t;

/**
 * A load under way (opaque): what the loader gets, to hand back to
 * petrel_cache_loaded().
 *
 * Lifetime: from the loader's call to petrel_cache_loaded(), which ends
 * it; the loader must call that exactly once (from a callback, or from
 * within the loader itself).
 */
typedef struct petrel_cache_load petrel_cache_load_t;

/**
 * The loader of a cache: start loading the value of `key`.
 *
 * Called by petrel_cache_get() on a miss, once per key however many
 * lookups wait for it.  It starts the load (a query on the worker's pool,
 * made for no request: the load serves every waiter, and one client
 * leaving must not cancel it) and returns 0; when the value is in, it
 * calls petrel_cache_loaded().  `key` (`len` bytes) is the cache's copy,
 * valid until then.
 *
 * Returns: 0 when the load started (or is done already), or a negative
 * error code: then petrel_cache_get() returns it and nothing waits.
 */
typedef int (*petrel_cache_loader)(petrel_cache_load_t *ld, const void *key, size_t len,
                                   void *data);

/**
 * The function a read-through lookup that had to wait calls back.
 *
 * `status` is 0 with the value (`len` bytes at `value`, valid during the
 * call only: copy what you keep), or the negative error code the load
 * failed with (PETREL_ELIMIT for a value over value_max, PETREL_EIO when
 * the cache was freed first); `data` is petrel_cache_get()'s.  It runs
 * from petrel_cache_loaded(), never from within petrel_cache_get().  It
 * may use the cache.
 */
typedef void (*petrel_cache_cb)(petrel_cache_t *c, int status, const void *value, size_t len,
                                void *data);

/** The most entries (and waiters) a cache may have. */
#define PETREL_CACHE_MAX_ENTRIES 16777216u
/** The longest key a cache may take. */
#define PETREL_CACHE_MAX_KEY 4096u
/** The largest value a cache may take. */
#define PETREL_CACHE_MAX_VALUE 1048576u
/** The most memory a cache's entries may take: capacity x (key_max + value_max). */
#define PETREL_CACHE_MAX_BYTES 1073741824u

/**
 * The settings of a cache, for petrel_cache_new().
 *
 * Fill with petrel_cache_opts_init(), then change what you need.  The
 * struct may grow fields at the end in a later ABI version.
 */
typedef struct petrel_cache_opts {
    /** Entries at most (default 1024; 1 to PETREL_CACHE_MAX_ENTRIES). */
    unsigned capacity;
    /** Bytes of a key at most (default 64; 1 to PETREL_CACHE_MAX_KEY). */
    unsigned key_max;
    /** Bytes of a value at most (default 256; 0 to PETREL_CACHE_MAX_VALUE). */
    unsigned value_max;
    /** Milliseconds an entry lives after it was stored (default 0: until
     *  it is replaced or invalidated). */
    unsigned ttl_ms;
    /** Lookups that may wait for loads at once (default 1024; 1 to
     *  PETREL_CACHE_MAX_ENTRIES); past it petrel_cache_get() refuses a
     *  miss with PETREL_ELIMIT. */
    unsigned waiters;
    /** The loader of petrel_cache_get() (default NULL: no read-through). */
    petrel_cache_loader load;
    /** Passed to `load`. */
    void *load_data;
} petrel_cache_opts_t;

/**
 * Fill cache settings with their defaults.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `opts` belongs to the caller.
 */
PETREL_API void petrel_cache_opts_init(petrel_cache_opts_t *opts);

/**
 * Make a cache, with all its memory.
 *
 * Allocates capacity x (key_max + value_max) bytes of entries (rounded up
 * to 8 a slot), a hash table and `waiters` waiter records, once.
 *
 * Returns: the cache, or NULL.
 *
 * Errors: NULL when out of memory, or for settings out of range (logged:
 * capacity 0 or too many, key_max 0 or over PETREL_CACHE_MAX_KEY,
 * value_max over PETREL_CACHE_MAX_VALUE, waiters 0, more than
 * PETREL_CACHE_MAX_BYTES of entries).
 *
 * Lifetime: the caller's until petrel_cache_free(); `opts` is copied.
 *
 * Example:
 *   static petrel_cache_t *names;
 *   // a query on the pool; petrel_cache_loaded() in its callback
 *   int load_name(petrel_cache_load_t *ld, const void *key, size_t len, void *data);
 *
 *   static int worker_init(petrel_server_t *srv)
 *   {
 *       (void)srv;
 *       petrel_cache_opts_t o;
 *       petrel_cache_opts_init(&o);
 *       o.capacity = 10000;
 *       o.ttl_ms = 60000;
 *       o.load = load_name;
 *       names = petrel_cache_new(&o);
 *       return names ? 0 : PETREL_ENOMEM;
 *   }
 */
PETREL_API petrel_cache_t *petrel_cache_new(const petrel_cache_opts_t *opts);

/**
 * Free a cache.
 *
 * Lookups still waiting for a load are called back with PETREL_EIO first.
 * Free it when its loads can no longer complete (after petrel_pg_close()
 * of the pool they query: the pool calls nobody back for queries made for
 * no request).  NULL does nothing.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: the cache and every pointer into it are gone.
 */
PETREL_API void petrel_cache_free(petrel_cache_t *c);

/**
 * Look a key up, without loading it.
 *
 * Returns: 0 with `*value` set to the entry's bytes (not NUL-terminated),
 * or PETREL_ENOTFOUND when the key is not there, is expired, or is being
 * loaded.  Counts a hit or a miss.
 *
 * Errors:
 *   PETREL_EINVAL  `c`, `key` or `value` is NULL, or `len` > key_max
 *
 * Lifetime: `*value` points into the cache: valid until the next call
 * into the cache (which may replace the entry); copy it to keep it.
 */
PETREL_API int petrel_cache_lookup(petrel_cache_t *c, const void *key, size_t len,
                                   petrel_str_t *value);

/**
 * Look a key up, loading it on a miss (read-through).
 *
 * A hit returns 0 with `*value` set, and `cb` does not run.  A miss
 * returns PETREL_LATER: the key's load was started (the cache's loader),
 * or was under way already, and `cb` runs once it is over, with the value
 * or the load's error; the waiters of one key are called back in the
 * order they came.  An expired entry is a miss.
 *
 * Returns: 0 (a hit), PETREL_LATER (`cb` will run), or a negative error
 * code (`cb` will not run).
 *
 * Errors:
 *   PETREL_EINVAL  `c`, `key`, `value` or `cb` is NULL, or `len` > key_max
 *   PETREL_ESTATE  the cache has no loader
 *   PETREL_ELIMIT  `waiters` lookups wait already, or every entry is
 *                  being loaded
 *   the loader's own error, when it could not start the load
 *
 * Lifetime: `key` is copied; `*value` as for petrel_cache_lookup();
 * `data` must stay valid until `cb` runs, or until petrel_cache_cancel()
 * (data in a request's arena: cancel from a cleanup of that arena, as the
 * request may end before the value comes).
 */
PETREL_API int petrel_cache_get(petrel_cache_t *c, const void *key, size_t len, petrel_str_t *value,
                                petrel_cache_cb cb, void *data);

/**
 * Hand a cache the value its loader loaded, or the load's failure.
 *
 * `status` 0: the value (`len` bytes at `value`) is stored and given to
 * every lookup waiting for it; it expires ttl_ms from now.  A negative
 * `status` (a value over value_max counts as PETREL_ELIMIT): the waiters
 * get that error, nothing is stored, and the next lookup loads again.
 * When the key was invalidated during the load (petrel_cache_del()), the
 * waiters get the value and it is not stored.
 *
 * Returns: nothing.
 *
 * Errors: none; a second call for one load is ignored.
 *
 * Lifetime: `ld` ends here; `value` is copied.
 */
PETREL_API void petrel_cache_loaded(petrel_cache_load_t *ld, int status, const void *value,
                                    size_t len);

/**
 * Store a value (write-through, or filling a cache ahead of lookups).
 *
 * Replaces the key's value, or takes an entry for it (CLOCK replaces one
 * when the cache is full).  A load of the key under way is left to its
 * waiters, and not stored.
 *
 * Returns: 0, or a negative error code.
 *
 * Errors:
 *   PETREL_EINVAL  `c` or `key` is NULL, `len` > key_max, or `value` NULL
 *                  with `vlen` > 0
 *   PETREL_ELIMIT  `vlen` > value_max, or every entry is being loaded
 *
 * Lifetime: `key` and `value` are copied.
 */
PETREL_API int petrel_cache_set(petrel_cache_t *c, const void *key, size_t len, const void *value,
                                size_t vlen);

/**
 * Invalidate a key.
 *
 * The entry goes: the next lookup misses (and loads again).  A load under
 * way still answers its waiters, and is not stored.
 *
 * Returns: 1 when the key was there (or being loaded), 0 when not, or a
 * negative error code.
 *
 * Errors:
 *   PETREL_EINVAL  `c` or `key` is NULL, or `len` > key_max
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_cache_del(petrel_cache_t *c, const void *key, size_t len);

/**
 * Stop waiting: the lookups of `key` waiting with `data` are not called back.
 *
 * For a request that ends (or is aborted) before the value it waits for
 * came: call it from a cleanup of the request's arena
 * (petrel_arena_defer()) when `data` lives there.  The load goes on, for
 * the other waiters and the cache.
 *
 * Returns: the number of lookups that stopped waiting (0 or more), or a
 * negative error code.
 *
 * Errors:
 *   PETREL_EINVAL  `c` or `key` is NULL, or `len` > key_max
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_cache_cancel(petrel_cache_t *c, const void *key, size_t len, void *data);

/**
 * Invalidate every key (as petrel_cache_del() for each).
 *
 * Returns: nothing.
 *
 * Errors: none; NULL does nothing.
 *
 * Lifetime: nothing is kept.
 */
PETREL_API void petrel_cache_clear(petrel_cache_t *c);

/**
 * Counters of a cache, for petrel_cache_stats().
 */
typedef struct petrel_cache_stats {
    unsigned capacity;      /**< entries at most */
    unsigned size;          /**< entries holding a value now */
    unsigned loading;       /**< loads under way now */
    uint64_t hits;          /**< lookups answered from the cache */
    uint64_t misses;        /**< lookups that found nothing (or an expired entry) */
    uint64_t evictions;     /**< entries replaced to make room (CLOCK) */
    uint64_t expired;       /**< entries dropped because their time had passed */
    uint64_t loads;         /**< loads started (one per key, however many waited) */
    uint64_t load_failures; /**< loads that failed, or gave a value too big */
} petrel_cache_stats_t;

/**
 * Read the counters of a cache.
 *
 * Returns: nothing; `st` is filled (zeroed for a NULL cache).
 *
 * Errors: none.
 *
 * Lifetime: `st` belongs to the caller.
 */
PETREL_API void petrel_cache_stats(const petrel_cache_t *c, petrel_cache_stats_t *st);

/* ------------------------------------------------------------------------ */
/* Calling other services (src/framework/upstream.c)                        */
/*                                                                          */
/* An upstream is another HTTP service a worker calls: declared once, in a  */
/* module's init (the master, before the workers fork), by its addresses     */
/* and limits; each worker then keeps its own pool of connections to it,     */
/* reused from call to call.  A call is made from a handler (or a timer, a   */
/* watch or WebSocket callback) and answers through callbacks from the       */
/* worker's loop, like every waiting handler.  The pool is bounded (at most  */
/* max_conns connections per address, max_pending calls waiting for one),   */
/* every wait has a deadline, an address that keeps failing is cut off for a */
/* while by its circuit breaker, retries are few (a budget, a share of the   */
/* recent calls) and new connections per second are bounded per address:    */
/* an upstream that is down sees a trickle of connection attempts from each */
/* worker, never one per request.                                            */

/** An upstream service (opaque): petrel_upstream_new(). */
typedef struct petrel_upstream petrel_upstream_t;
/** A call in progress (opaque): petrel_call(). */
typedef struct petrel_call petrel_call_t;

/** How calls are spread over an upstream's addresses. */
enum {
    PETREL_BALANCE_ROUND_ROBIN = 0,  /**< each address in turn */
    PETREL_BALANCE_LEAST_PENDING = 1 /**< the address with fewest calls in flight */
};

/**
 * An upstream's addresses and limits.
 *
 * Fill with petrel_upstream_opts_init(), change what you need.  The struct
 * may grow fields at the end in a later ABI version.
 */
typedef struct petrel_upstream_opts {
    /** Its name in /metrics and the log: [a-z0-9_], 1 to 32 bytes. */
    const char *name;
    /** One or more addresses, separated by commas: "http://10.0.0.1:8080",
     *  "http://backend.internal" (port 80), "http://[::1]:8080",
     *  "unix:/run/app.sock"; no path.  A host name is resolved at start-up
     *  and at each reload (in the master): all of its addresses are used.
     *  "h2c://HOST[:PORT]" and "h2c+unix:/run/app.sock" speak HTTP/2 with
     *  prior knowledge (RFC 9113 §3.3): a connection then carries up to 100
     *  calls at once (fewer if the upstream's SETTINGS_MAX_CONCURRENT_STREAMS
     *  says so), so max_conns bounds connections, not calls in flight;
     *  max_requests counts streams; a call's deadline or cancel resets its
     *  stream only; a stream the upstream did not process (REFUSED_STREAM,
     *  or above the last stream id of its GOAWAY) is sent again whatever
     *  its method. */
    const char *urls;
    /** Connections each worker may have open to each address (default 64;
     *  0 is taken as 1). */
    unsigned max_conns;
    /** Calls each worker may have waiting for a connection (default 1024);
     *  past it a call fails at once with PETREL_UPSTREAM_EFULL. */
    unsigned max_pending;
    /** Milliseconds a connection may take to be established (default 1000). */
    unsigned connect_timeout_ms;
    /** Milliseconds from the request written to the response's header
     *  (default 10000). */
    unsigned header_timeout_ms;
    /** Milliseconds the whole call may take, from petrel_call() to the end
     *  of the response (default 30000). */
    unsigned call_timeout_ms;
    /** Milliseconds an unused connection stays in the pool (default 30000). */
    unsigned idle_timeout_ms;
    /** Requests on one connection before it is closed (default 10000; 0:
     *  no limit). */
    unsigned max_requests;
    /** Retries allowed, as a percentage of the calls of the last 10 s
     *  (default 20; at least 3 per 10 s); 0: never retry. */
    unsigned retry_budget_pct;
    /** Failures in a row that open an address's circuit breaker (default 5;
     *  0: no breaker). */
    unsigned breaker_failures;
    /** Milliseconds an open breaker keeps its address out before one probe
     *  call is let through (default 5000).  A failure is a connection that
     *  could not be made, no header in time, a malformed response or one
     *  cut; any response header is a success (5xx too). */
    unsigned breaker_pause_ms;
    /** New connections per second each worker may open to each address
     *  (default 100; 0 is taken as 1); past it calls wait for a connection
     *  (an idle one, or the next token). */
    unsigned connects_per_sec;
    /** PETREL_BALANCE_* (default round robin). */
    int balance;
} petrel_upstream_opts_t;

/**
 * Fill upstream settings with their defaults.
 *
 * The defaults are those the fields of petrel_upstream_opts_t name;
 * `name` and `urls` are NULL.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `opts` is the caller's.
 */
PETREL_API void petrel_upstream_opts_init(petrel_upstream_opts_t *opts);

/**
 * Declare an upstream.
 *
 * Call from a module's init (in the master, before the workers fork).  The
 * addresses are parsed and resolved now; each worker opens its connections
 * when it first calls.  A reload declares its upstreams again.
 *
 * Returns: the upstream, or NULL with `err` (when not NULL) saying why.
 *
 * Errors: NULL for a bad name or URL ("upstream 'api': unsupported scheme
 * 'https' in 'https://x'"), a name that does not resolve, a call from a
 * worker, or out of memory.
 *
 * Lifetime: valid until exit; `opts` and its strings are copied.
 */
PETREL_API petrel_upstream_t *petrel_upstream_new(petrel_server_t *srv,
                                                  const petrel_upstream_opts_t *opts, char *err,
                                                  size_t errlen);

/** Why a call failed (the `error` of on_error): negative codes. */
enum {
    PETREL_UPSTREAM_EREFUSED = -101,  /**< no connection could be made */
    PETREL_UPSTREAM_ECONNECT = -102,  /**< connect_timeout_ms passed */
    PETREL_UPSTREAM_EHEADER = -103,   /**< header_timeout_ms passed */
    PETREL_UPSTREAM_ETIMEOUT = -104,  /**< call_timeout_ms passed */
    PETREL_UPSTREAM_ECLOSED = -105,   /**< the upstream closed or reset mid-response */
    PETREL_UPSTREAM_EPROTO = -106,    /**< a response that is not well-formed HTTP
                                           (bad status line, ambiguous framing) */
    PETREL_UPSTREAM_EBREAKER = -107,  /**< every address's breaker is open */
    PETREL_UPSTREAM_EFULL = -108,     /**< max_pending calls wait already */
    PETREL_UPSTREAM_ECANCELLED = -109 /**< cancelled (never given to on_error: a
                                           cancelled call reports nothing) */
};

/** The response's header, for on_head. */
typedef struct petrel_upstream_head {
    int status;  /**< 100..599 (interim 1xx responses are not reported) */
    int version; /**< 10 or 11; 20 from an h2c upstream */
    const petrel_header_t *headers;
    size_t nheaders;
    /** -1 when the body is chunked or delimited by the close (or, over
     *  h2c, has no content-length); 0 when the response has none (to HEAD,
     *  204, 304: its Content-Length field, if any, is in `headers`) */
    int64_t content_length;
} petrel_upstream_head_t;

/**
 * What a call answers through.  Every callback runs from the worker's loop
 * (never from within petrel_call()); exactly one of on_end and on_error is
 * the last one, unless the call is cancelled first (then none).
 */
typedef struct petrel_call_cbs {
    /** The response's status and fields (in the call's arena: valid until
     *  it is reset). */
    void (*on_head)(petrel_call_t *call, const petrel_upstream_head_t *head, void *data);
    /** A part of the body, as it arrives (NULL: the body is dropped).  The
     *  bytes are the connection's read buffer: valid during the callback
     *  only. */
    void (*on_body)(petrel_call_t *call, const void *ptr, size_t len, void *data);
    /** The end of the response, with its trailers (chunked; in the call's
     *  arena).  The connection is back in the pool. */
    void (*on_end)(petrel_call_t *call, const petrel_header_t *trailers, size_t ntrailers,
                   void *data);
    /** The call failed: `error` is a PETREL_UPSTREAM_E* code, `reason` one
     *  line saying why ("connect to 10.0.0.1:8080: Connection refused"),
     *  valid during the callback only.  After on_head, a failure means the
     *  body was cut. */
    void (*on_error)(petrel_call_t *call, int error, const char *reason, void *data);
} petrel_call_cbs_t;

/** What to send: petrel_call(). */
typedef struct petrel_call_spec {
    const char *method; /**< "GET", "POST"... */
    const char *target; /**< "/path?query" */
    /** The Host field; NULL: the address's host[:port] from its URL
     *  ("localhost" for a unix: address). */
    const char *authority;
    /** Fields to send: Host, Content-Length, Transfer-Encoding and the
     *  hop-by-hop fields (Connection, Keep-Alive, TE, Upgrade...) are set by
     *  the client and must not be given, but `TE: trailers` (what gRPC
     *  sends): it goes to an h2c address, not to an HTTP/1.1 one. */
    const petrel_header_t *headers;
    size_t nheaders;
    const void *body; /**< the whole request body (not copied: keep it) */
    size_t body_len;
    /** The request the call is made for: the call's memory is taken from its
     *  arena and the call is cancelled when it is aborted.  NULL: `arena`. */
    petrel_req_t *req;
    /** With no `req`: an arena of the caller's for the call's memory. */
    petrel_arena_t *arena;
} petrel_call_spec_t;

/**
 * Call an upstream.
 *
 * Sends the request on an idle pooled connection, a new one, or when the
 * worker is at max_conns, as soon as one is free (up to max_pending calls
 * wait).  A call whose connection was reused and closed before any byte of
 * its response arrived is sent again on another when it is idempotent
 * (GET, HEAD, OPTIONS, PUT, DELETE, TRACE) or none of its bytes had been
 * written, as are idempotent calls that failed to connect, within the
 * retry budget (a breaker's probe is never sent again).  A POST is never
 * sent twice.  The request is queued: nothing is sent, and no callback
 * runs, before the end of the loop turn.
 *
 * Returns: the call, or NULL (nothing will be called back).
 *
 * Errors: NULL with errno EINVAL (no method or target, a method not in
 * upper-case letters, a target with a space or control byte, a field the
 * client sets or one not valid, no req nor arena, a req that may no
 * longer be answered (petrel_req_waiting() is 0), or outside a worker),
 * ENOMEM (the arena).  Failures of the call itself (refused, breaker open,
 * pool full) are reported through on_error, from the loop.
 *
 * Lifetime: the call is valid until its last callback has returned or
 * petrel_call_cancel(); `spec`, `cbs` and their strings are read during
 * petrel_call() only, except `body`, which is read until the request is
 * written.  `data` is the caller's.
 */
PETREL_API petrel_call_t *petrel_call(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                                      const petrel_call_cbs_t *cbs, void *data);

/**
 * Stop or resume reading a call's response.
 *
 * For backpressure: a caller that forwards the body to a slow client
 * pauses while its output is full.  While paused no on_body runs and the upstream is not read (its
 * connection is not watched); bytes read before the pause are handed on
 * when it resumes.  Over h2c the connection is read on for its other
 * calls: the paused call's stream window is not given back, so the
 * upstream stops sending on that stream once it is used (64 KiB, held in
 * the call's arena).  May be called from the call's own callbacks.  The
 * deadlines keep running: call_timeout_ms bounds a paused call too.
 *
 * Returns: nothing.
 *
 * Errors: none; a call that has ended is ignored.
 *
 * Lifetime: `call` must be valid.
 */
PETREL_API void petrel_call_pause(petrel_call_t *call, int paused);

/**
 * Cancel a call: none of its callbacks run again.  A call still waiting
 * for a connection leaves the queue, one whose connection is being made
 * leaves it to join the pool; once its request was sent (or in part), its
 * connection is closed, since the response would arrive on it (over h2c
 * only its stream is reset, RST_STREAM CANCEL).  May be called from the
 * call's own callbacks.  Calls made for a request are
 * cancelled when it is aborted, and any call when the arena it lives in
 * is reset.
 *
 * Returns: nothing.
 *
 * Errors: none; a call that has ended, or was cancelled, is ignored.
 *
 * Lifetime: `call` must not be used after (its memory stays in its arena).
 */
PETREL_API void petrel_call_cancel(petrel_call_t *call);

/**
 * Call an upstream with a request body produced while the call runs.
 *
 * As petrel_call(), with the body to come through petrel_call_write() and
 * petrel_call_write_end(): `spec->body` must be NULL.  `body_len` >= 0:
 * sent with `Content-Length: body_len` (h2c: content-length), and exactly
 * that many bytes must be written; -1: HTTP/1.1 `Transfer-Encoding:
 * chunked` (each run of bytes written at once a chunk), h2c without
 * content-length.  The head goes out as soon as the call has a
 * connection; the body as it is written (h2c: DATA frames as the stream's
 * flow-control window allows).  A streamed call is sent again (retry,
 * GOAWAY or REFUSED_STREAM, a connect failure) only while none of its body
 * bytes were written to a connection: the call keeps what was not sent
 * yet, nothing more.  The response may come before the body is all sent
 * (an upstream that answers 413 early): the callbacks run as usual, and
 * an HTTP/1.1 connection whose request body was not completed is closed,
 * not reused (h2c: the stream is reset if our side is still open).
 * header_timeout_ms runs from the end of the body; call_timeout_ms bounds
 * the whole call.
 *
 * Returns: the call, or NULL (nothing will be called back).
 *
 * Errors: as petrel_call(), and NULL with errno EINVAL when `spec->body`
 * is not NULL or `body_len` is below -1.
 *
 * Lifetime: as petrel_call().  The body's buffer lives in the call's arena
 * and is reused as it drains: a call holds at most 1 MiB of it.
 *
 * Example:
 *     static void more(petrel_call_t *call, void *data) // also the drain callback
 *     {
 *         (void)data;
 *         static const char line[] = "a line of the body\n";
 *         int rc;
 *         do
 *             rc = petrel_call_write(call, line, sizeof(line) - 1);
 *         while (rc == 1); // a real body ends: then petrel_call_write_end(call)
 *     }
 *
 *     static int upload(petrel_req_t *req, petrel_upstream_t *up, const petrel_call_cbs_t *cbs)
 *     {
 *         petrel_call_spec_t spec = {.method = "POST", .target = "/upload", .req = req};
 *         petrel_call_t *call = petrel_call_stream(up, &spec, -1, cbs, req);
 *         if (call == NULL)
 *             return 503;
 *         petrel_call_on_drain(call, more);
 *         more(call, req);
 *         return PETREL_LATER;
 *     }
 */
PETREL_API petrel_call_t *petrel_call_stream(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                                             int64_t body_len, const petrel_call_cbs_t *cbs,
                                             void *data);

/**
 * Queue bytes of a streamed call's body (petrel_call_stream()).
 *
 * The bytes are copied into the call's buffer and written as the
 * connection takes them.  Over HTTP/1.1 chunked, what was written since
 * the last write to the connection goes as one chunk.
 *
 * Returns: 1 while more may be written; 0 when the call holds more than
 * 64 KiB not sent yet (the bytes are taken: wait for the drain callback of
 * petrel_call_on_drain() before writing more).
 *
 * Errors: PETREL_EINVAL (not a streamed call, after
 * petrel_call_write_end(), more than `body_len` in all); PETREL_ESTATE
 * (the call has ended or failed: on_end or on_error has run or will run);
 * PETREL_ENOMEM (the arena, or more than 1 MiB held: the bound of a call's
 * buffer, reached by a caller that keeps writing after 0).
 *
 * Lifetime: `ptr` is read during the call only.
 */
PETREL_API int petrel_call_write(petrel_call_t *call, const void *ptr, size_t len);

/**
 * The body of a streamed call is complete (HTTP/1.1 chunked: the last
 * chunk; h2c: END_STREAM).  With a `body_len` >= 0 it is complete once
 * that many bytes were written; this call then only says so.
 *
 * Returns: 0.
 *
 * Errors: as petrel_call_write(); PETREL_EINVAL when fewer bytes than
 * `body_len` were written: the call then fails (on_error with
 * PETREL_UPSTREAM_EPROTO, from the loop).
 *
 * Lifetime: `call` must be valid.
 */
PETREL_API int petrel_call_write_end(petrel_call_t *call);

/** The drain callback of a streamed call: petrel_call_on_drain(). */
typedef void (*petrel_call_drain_cb)(petrel_call_t *call, void *data);

/**
 * Set the drain callback of a streamed call.
 *
 * `cb` is called (from the loop) when the call, after petrel_call_write()
 * returned 0, has sent enough to be under its 64 KiB mark again.  `data`
 * is the call's (petrel_call_stream()'s `data`).  It is not called once
 * the call has ended or failed.
 *
 * Returns: nothing.
 *
 * Errors: none; NULL `cb` removes the callback.
 *
 * Lifetime: `call` must be valid.
 */
PETREL_API void petrel_call_on_drain(petrel_call_t *call, petrel_call_drain_cb cb);

/**
 * The callback of petrel_call_upgrade(): the upstream answered 101
 * (Switching Protocols).
 *
 * `head` is the 101's status and fields (in the call's arena).  `fd` is
 * the connected, non-blocking socket, now the callee's: the connection has
 * left the pool for good (it never carries HTTP again) and nothing of
 * petrel watches it; watch it with petrel_watch_start() or hand it to
 * petrel_ws_client_new(), and close it when done.  `rest` holds the
 * `rest_len` bytes read past the 101's empty line (the new protocol's
 * first bytes), valid during the callback only.  The call is over: it is
 * the call's last callback.
 */
typedef void (*petrel_upgrade_cb)(petrel_call_t *call, const petrel_upstream_head_t *head, int fd,
                                  const void *rest, size_t rest_len, void *data);

/**
 * Call an upstream, asking it to switch the connection to another protocol.
 *
 * As petrel_call(), with the fields `Connection: Upgrade` and
 * `Upgrade: protocol` added (RFC 9110 §7.8), usually on a GET (a WebSocket
 * opening handshake: protocol "websocket", RFC 6455 §4.1; the caller gives
 * the Sec-WebSocket-* fields in `spec`).  A 101 answer ends the call
 * through `on_upgrade`, which takes the connection; any other answer is an
 * ordinary response through `cbs` (on_head, on_body, on_end), after which
 * the connection goes back to the pool as usual.  The pool's limits apply
 * until the 101 (max_conns, max_pending, connects_per_sec, breakers,
 * connect and header deadlines, call_timeout_ms up to the 101); a 101 is a
 * success for the address's breaker.  After it, the connection no longer
 * counts against max_conns.
 *
 * Returns: the call, or NULL (nothing will be called back).
 *
 * Errors: as petrel_call(), and NULL with errno EINVAL for a NULL
 * `on_upgrade` or a `protocol` that is not a token (optionally with
 * "/version").
 *
 * Lifetime: as petrel_call(); `protocol` is copied.
 *
 * Example:
 *     #include <unistd.h>
 *
 *     static void switched(petrel_call_t *call, const petrel_upstream_head_t *head, int fd,
 *                          const void *rest, size_t rest_len, void *data)
 *     {
 *         (void)call, (void)head, (void)rest, (void)rest_len, (void)data;
 *         close(fd); // the caller's now
 *     }
 *
 *     static const petrel_call_cbs_t cbs = {NULL, NULL, NULL, NULL};
 *
 *     static int upgrade(petrel_req_t *req, petrel_upstream_t *up)
 *     {
 *         petrel_call_spec_t spec = {.method = "GET", .target = "/chat", .req = req};
 *         // (a real caller registers petrel_req_on_abort() and answers req in
 *         // its callbacks; a WebSocket handshake adds Sec-WebSocket-Key and -Version)
 *         return petrel_call_upgrade(up, &spec, "websocket", &cbs, switched, NULL) ? PETREL_LATER
 *                                                                                  : 503;
 *     }
 */
PETREL_API petrel_call_t *petrel_call_upgrade(petrel_upstream_t *up, const petrel_call_spec_t *spec,
                                              const char *protocol, const petrel_call_cbs_t *cbs,
                                              petrel_upgrade_cb on_upgrade, void *data);

/**
 * The address a call went to ("10.0.0.1:8080", "unix:/run/app.sock"), for
 * a log line.
 *
 * Returns: the address, or NULL before the call has one.
 *
 * Errors: none.
 *
 * Lifetime: the string is the upstream's, valid until exit.
 */
PETREL_API const char *petrel_call_address(const petrel_call_t *call);

/**
 * One line naming a PETREL_UPSTREAM_E* code.
 *
 * Returns: the line ("the upstream closed the connection"), or "unknown
 * upstream error".
 *
 * Errors: none.
 *
 * Lifetime: static.
 */
PETREL_API const char *petrel_upstream_strerror(int error);

/* ------------------------------------------------------------------------ */
/* PostgreSQL connection pool (src/pg/pgsql.c)                                 */

/*
 * The pool is the library libpetrel-pg, beside libpetrel (<petrel/pg.h>
 * says more): a module loaded into the petrel command calls it as it
 * calls the rest of the API; a program that embeds petrel links it with
 * `pkg-config --cflags --libs petrel-pg`.
 */

/**
 * A pool of PostgreSQL connections of one worker process (opaque).
 *
 * Each worker opens its own pool in its module's worker_init (the
 * connections are watched by that worker's event loop) and closes it in
 * worker_fini.  The pool talks to the server with libpq's non-blocking API
 * only: connecting (PQconnectStart/PQconnectPoll), sending, reading and
 * reconnecting never block the worker.  Each connection runs in pipeline
 * mode: many queries are in flight on a connection at once, and the
 * queries a request makes in one go are answered in one round trip.
 * Queries with parameters, prepared statements
 * (prepared on each connection the first time they run there, and again
 * after a reconnection), results read in place, a bounded queue when every
 * connection is busy, reconnection with backoff, and cancellation of the
 * queries of requests whose client left.
 *
 * Every query is a transaction of its own: the pool sends a Sync after
 * each one (its Prepare, when it has one, goes in the same transaction),
 * and its callback runs once the server has answered that Sync.  A handler
 * that wants several queries in one transaction says so with
 * petrel_pg_tx_begin() and petrel_pg_tx_end(): those queries go out as one
 * batch, with one Sync after the last, and commit or roll back together.
 * Queries of different requests never share a transaction: one request's
 * failing query never makes another request's query fail, and never makes
 * it run twice.  A query or transaction that fails with a serialization
 * failure or a deadlock (SQLSTATE 40001, 40P01) was rolled back whole and
 * is run again, before its callbacks saw anything, twice at most; so is
 * one that a server-side cancel meant for an aborted request hit instead.
 * Do not send BEGIN, COMMIT or ROLLBACK as queries: use the transactions
 * of petrel_pg_tx_begin().
 *
 * Lifetime: from petrel_pg_open() to petrel_pg_close(), in the worker that
 * opened it; use it only from that worker's handlers and callbacks.
 */
typedef struct petrel_pg petrel_pg_t;

/**
 * A prepared statement of a pool (opaque), made by petrel_pg_prepare().
 *
 * Lifetime: as long as its pool; freed by petrel_pg_close().
 */
typedef struct petrel_pg_stmt petrel_pg_stmt_t;

/**
 * The result of a query, passed to its callback (opaque).
 *
 * Read it with petrel_pg_status(), petrel_pg_value() and the other
 * petrel_pg_* accessors.
 *
 * Lifetime: valid during the callback only, and so is every string read
 * from it: copy what must outlive the callback.
 */
typedef struct petrel_pg_result petrel_pg_result_t;

/**
 * The outcome of a query: what petrel_pg_status() returns.
 *
 * PETREL_PG_OK: the query ran (rows in the result for a SELECT).
 * PETREL_PG_ESQL: the server refused it; petrel_pg_sqlstate() and
 * petrel_pg_message() say why.  PETREL_PG_EABORTED: another query of the
 * same transaction (petrel_pg_tx_begin()) failed, so this one was rolled
 * back or never ran.
 * PETREL_PG_EUNAVAILABLE: no answer from the database: the connection was
 * lost while the query was in flight, or no connection could be made
 * (SQLSTATE 08006 or 08001).  PETREL_PG_ECANCELED: the request of the
 * query was aborted (its client left), SQLSTATE 57014.
 */
enum {
    PETREL_PG_OK = 0,
    PETREL_PG_ESQL = 1,
    PETREL_PG_EABORTED = 2,
    PETREL_PG_EUNAVAILABLE = 3,
    PETREL_PG_ECANCELED = 4
};

/**
 * The function a query calls back with its result.
 *
 * It runs from the worker's loop, never from within the call that made
 * the query.  It may make more queries, and respond to the request of the
 * query.  `res` is valid during the call only.
 */
typedef void (*petrel_pg_cb)(const petrel_pg_result_t *res, void *data);

/**
 * The settings of a pool, for petrel_pg_open().
 *
 * Fill with petrel_pg_opts_init(), change what you need (or read them from
 * a module argument with petrel_pg_opts_parse()).  The struct may grow
 * fields at the end in a later ABI version.
 */
typedef struct petrel_pg_opts {
    /** A libpq connection string ("host=/run/postgresql dbname=app" or a
     *  postgresql:// URI).  "" or NULL: libpq's defaults and the PG*
     *  environment variables (PGHOST, PGPORT, PGDATABASE, PGUSER,
     *  PGPASSWORD, ...), as with psql.  Give IP addresses or Unix socket
     *  directories: a host name is looked up with a blocking call when a
     *  connection is made. */
    const char *conninfo;
    /** Connections of each worker (default 4). */
    unsigned connections;
    /** Queries one connection may have in flight (default 1024); past it
     *  the next batch goes to another connection, or waits. */
    unsigned depth;
    /** Queries that may wait for a connection when every connection is at
     *  `depth` or still connecting (default 8192); past it a query is
     *  refused with PETREL_ELIMIT. */
    unsigned queue;
    /** Seconds of Retry-After in the 503 responses of petrel_pg_send_error()
     *  and petrel_pg_send_refused() (default 1). */
    unsigned retry_after;
    /** Milliseconds a connection attempt may take before it is given up
     *  (default 5000). */
    unsigned connect_timeout_ms;
    /** Milliseconds between attempts to reconnect: the first wait, doubled
     *  after each failure up to the second (defaults 100 and 2000). */
    unsigned reconnect_min_ms, reconnect_max_ms;
} petrel_pg_opts_t;

/**
 * Fill pool settings with their defaults.
 *
 * The defaults are those of the fields of petrel_pg_opts_t: libpq's own
 * connection defaults, 4 connections, a depth of 1024 and a queue of 8192
 * queries, Retry-After 1 s, reconnecting after 100 ms to 2 s.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: `opts` belongs to the caller.
 */
PETREL_API void petrel_pg_opts_init(petrel_pg_opts_t *opts);

/**
 * Read pool settings and a connection string from one argument string.
 *
 * `args` is what a module gets as its argument (`--module NAME:ARGS`):
 * pool settings first, as `pool.connections=N`, `pool.depth=N`,
 * `pool.queue=N`, `pool.retry_after=SECONDS`,
 * `pool.connect_timeout_ms=MS`, `pool.reconnect_min_ms=MS` and
 * `pool.reconnect_max_ms=MS`, separated by spaces; the rest is the libpq
 * connection string (opts->conninfo points to it: "" when there is none).
 * Call petrel_pg_opts_init() first.
 *
 * The connection string's syntax is checked (libpq's keywords, quoting and
 * URIs), so that a module's init can refuse a bad one at start-up.
 *
 * Returns: 0, or a negative error code (logged, naming the bad setting).
 *
 * Errors:
 *   PETREL_EINVAL  an unknown pool.* setting, a value that is not a
 *                  number in range (connections and depth at least 1), or
 *                  a connection string libpq cannot parse
 *
 * Lifetime: opts->conninfo points into `args`, which must stay valid
 * until petrel_pg_open() has returned (module arguments live as long as
 * petrel runs).
 *
 * Example:
 *   static petrel_pg_opts_t db_opts;
 *
 *   static int init(petrel_server_t *srv, const char *args)
 *   {
 *       (void)srv;
 *       petrel_pg_opts_init(&db_opts);
 *       return petrel_pg_opts_parse(&db_opts, args); // "pool.connections=8 dbname=app"
 *   }
 */
PETREL_API int petrel_pg_opts_parse(petrel_pg_opts_t *opts, const char *args);

/**
 * Whether this libpetrel-pg has the PostgreSQL pool.
 *
 * The pool is built on libpq when configure finds it (Debian's libpq-dev)
 * and is not given --without-pgsql.  Without it, libpetrel-pg has the same
 * calls, and petrel_pg_open() fails.
 *
 * Returns: 1 when the pool is built in, else 0.
 *
 * Errors: none.
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_supported(void);

/**
 * Open the pool of the calling worker and start connecting.
 *
 * Call it from a module's worker_init: each worker has its pool.  It
 * returns at once; the connections are made in the background (the first
 * queries wait for them in the queue), and made again, with backoff, when
 * they are lost.  The connection string is checked for syntax here (an
 * unknown keyword is an error); that the server is up is not: a pool opens
 * while the database is down, and its queries fail with
 * PETREL_PG_EUNAVAILABLE (or petrel_pg_exec() refuses them with
 * PETREL_EIO) until a connection is made.
 *
 * Returns: the pool, or NULL.
 *
 * Errors: NULL when out of memory, with an invalid connection string or
 * settings (logged with libpq's reason), outside a worker, or when this
 * libpetrel-pg was built without libpq (logged).
 *
 * Lifetime: the pool is the caller's until petrel_pg_close().  `opts` and
 * its connection string are copied.
 *
 * Example:
 *   static petrel_pg_t *db;
 *
 *   static int worker_init(petrel_server_t *srv)
 *   {
 *       (void)srv;
 *       petrel_pg_opts_t o;
 *       petrel_pg_opts_init(&o);
 *       o.conninfo = "host=/run/postgresql dbname=app";
 *       db = petrel_pg_open(&o);
 *       return db ? 0 : PETREL_EINVAL;
 *   }
 *
 *   static void worker_fini(petrel_server_t *srv)
 *   {
 *       (void)srv;
 *       petrel_pg_close(db);
 *   }
 */
PETREL_API petrel_pg_t *petrel_pg_open(const petrel_pg_opts_t *opts);

/**
 * Close a pool: its connections, its statements, its queries.
 *
 * Queries still waiting for an answer are dropped; those whose request
 * still waits for them are told first (PETREL_PG_EUNAVAILABLE).  Call it
 * from worker_fini, not from a query's callback.  NULL does nothing.
 *
 * Returns: nothing.
 *
 * Errors: none.
 *
 * Lifetime: the pool and its statements are freed.
 */
PETREL_API void petrel_pg_close(petrel_pg_t *pg);

/**
 * Declare a prepared statement.
 *
 * `sql` is one SQL statement with parameters $1, $2, ...; the statement is
 * prepared on each connection the first time it runs there (in the same
 * round trip as that first run) and again after a reconnection.  Declare
 * the statements once, in worker_init after petrel_pg_open(); a statement
 * with an error in it makes each query of it fail (PETREL_PG_ESQL).
 *
 * Returns: the statement, or NULL.
 *
 * Errors: NULL when out of memory or when `pg` or `sql` is NULL.
 *
 * Lifetime: `sql` is copied; the statement lives as long as the pool.
 */
PETREL_API petrel_pg_stmt_t *petrel_pg_prepare(petrel_pg_t *pg, const char *sql);

/**
 * Flags of a prepared statement, for petrel_pg_prepare_ex().
 *
 * PETREL_PG_BINARY_RESULTS: the server sends the statement's results in
 * binary format (each column in its type's binary form: an int4 is 4
 * bytes in network byte order, text its characters) instead of text.
 * The server then skips the conversion of each value to text, and
 * integers are read without parsing (petrel_pg_value_int(),
 * petrel_pg_value_int4()).
 */
enum { PETREL_PG_BINARY_RESULTS = 1 };

/**
 * Declare a prepared statement, with flags.
 *
 * As petrel_pg_prepare(), with `flags` 0 or PETREL_PG_BINARY_RESULTS:
 * every query of the statement asks for its results in binary format.
 * Read its integer columns (int2, int4, int8) with petrel_pg_value_int()
 * or petrel_pg_value_int4(), its text columns with petrel_pg_value() (the
 * characters, as in text format); the bytes of other types are their
 * binary form (PostgreSQL's send functions).  Its parameters are text
 * with petrel_pg_exec(), binary with petrel_pg_exec_bin(): the two are
 * independent.
 *
 * Returns: the statement, or NULL.
 *
 * Errors: NULL when out of memory, when `pg` or `sql` is NULL, or with an
 * unknown flag.
 *
 * Lifetime: `sql` is copied; the statement lives as long as the pool.
 *
 * Example:
 *   static petrel_pg_t *db;
 *   static petrel_pg_stmt_t *by_id;
 *
 *   static int stmts(void) // in worker_init, after petrel_pg_open()
 *   {
 *       by_id = petrel_pg_prepare_ex(db, "SELECT id, qty FROM item WHERE id = $1",
 *                                    PETREL_PG_BINARY_RESULTS);
 *       return by_id ? 0 : PETREL_ENOMEM;
 *   }
 */
PETREL_API petrel_pg_stmt_t *petrel_pg_prepare_ex(petrel_pg_t *pg, const char *sql, unsigned flags);

/**
 * Run a prepared statement with parameters; its callback gets the result.
 *
 * `params` holds `nparams` values in text form ("42", "2024-01-31"), NULL
 * for SQL NULL.  `req` is the request the query works for, or NULL for a
 * query of the module's own (a cache to fill): with a request, the query
 * is cancelled when the request is aborted (the callback then gets
 * PETREL_PG_ECANCELED; a query already running on the server is cancelled
 * there with pg_cancel_backend() from a connection the pool keeps for
 * that), and when the request ends first (its response complete) the
 * query still runs but calls nobody back (its `data` may be gone).
 * petrel_pg_exec() registers the abort callback of `req`
 * (petrel_req_on_abort()); an abort callback the handler registered
 * before still runs, first.  A handler that registers one after its
 * queries calls petrel_pg_cancel() in it.
 *
 * The query is a transaction of its own, sent at once to the least loaded
 * connection (or it waits in the queue); the queries a handler makes one
 * after the other are all in flight together.  Between petrel_pg_tx_begin()
 * and petrel_pg_tx_end() it joins the request's transaction instead.
 *
 * Returns: 0 when the query was taken: `cb` will run once, from the loop
 * (unless the request ends first).  A negative error code when it was not:
 * then `cb` will not run.
 *
 * Errors:
 *   PETREL_EIO     the database is unavailable: no connection is up and
 *                  the last attempt to make one failed
 *   PETREL_ELIMIT  every connection is busy and the queue is full
 *   PETREL_ESTATE  `req` is complete or aborted
 *   PETREL_EINVAL  `pg`, `stmt` or `cb` is NULL, or nparams < 0
 *   PETREL_ENOMEM  out of memory
 * petrel_pg_send_refused() answers the first two with 503.
 *
 * Lifetime: `params` and the strings in it are read during the call only
 * (sent, or copied while the query waits).  `data` must stay valid until
 * `cb` runs (the request arena is a good place when `req` is given).
 *
 * Example:
 *   static petrel_pg_t *db;
 *   static petrel_pg_stmt_t *by_id; // petrel_pg_prepare(db, "SELECT name FROM item WHERE id = $1")
 *
 *   static void item_done(const petrel_pg_result_t *res, void *data)
 *   {
 *       petrel_req_t *req = data;
 *       if (petrel_pg_status(res) != PETREL_PG_OK) {
 *           petrel_pg_send_error(req, res); // 503 or 500
 *           return;
 *       }
 *       if (petrel_pg_nrows(res) == 0) {
 *           petrel_send_status(req, 404);
 *           return;
 *       }
 *       petrel_str_t name = petrel_pg_value(res, 0, 0);
 *       petrel_send_copy(req, 200, "text/plain", name.ptr, name.len);
 *   }
 *
 *   static int item(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       const char *params[1] = {petrel_req_param(req, "id")};
 *       int rc = petrel_pg_exec(db, req, by_id, 1, params, item_done, req);
 *       return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
 *   }
 */
PETREL_API int petrel_pg_exec(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt,
                              int nparams, const char *const *params, petrel_pg_cb cb, void *data);

/**
 * Run a prepared statement with binary parameters.
 *
 * As petrel_pg_exec(), with each of the `nparams` values of `params` in
 * the binary format of its parameter's type, as the server knows it from
 * the statement (`$1::int4`, or a comparison with an int4 column): an
 * int4 is 4 bytes in network byte order (htonl()), an int8 8 bytes, a
 * text its characters (no NUL needed: the length counts), an int4[] the
 * array format of PostgreSQL's array_send().  {NULL, 0} is SQL NULL; a
 * value of length 0 with a non-NULL `ptr` is an empty value.  The server
 * checks each value: one of the wrong length for its type fails the query
 * with PETREL_PG_ESQL, SQLSTATE 08P01 when it is too short (3 bytes for an
 * int4: "insufficient data left in message") or 22P03 when it is too long
 * ("incorrect binary data format"); the connection stays up, and
 * petrel_pg_send_error() answers 500.  The format of the results is the
 * statement's (petrel_pg_prepare_ex()).
 *
 * Returns: 0 when the query was taken (`cb` will run), or a negative error
 * code (then `cb` will not run).
 *
 * Errors: those of petrel_pg_exec(); PETREL_EINVAL also when `params` is
 * NULL with nparams > 0, or a value is longer than 2^31 - 1 bytes.
 *
 * Lifetime: `params` and their bytes are read during the call only (sent,
 * or copied while the query waits).
 *
 * Example:
 *   #include <arpa/inet.h>
 *
 *   static petrel_pg_t *db;
 *   static petrel_pg_stmt_t *by_id; // SELECT qty FROM item WHERE id = $1 (id int4)
 *   void item_done(const petrel_pg_result_t *res, void *data);
 *
 *   static int item(petrel_req_t *req, int32_t id)
 *   {
 *       uint32_t be = htonl((uint32_t)id);
 *       petrel_str_t params[1] = {{(const char *)&be, sizeof(be)}};
 *       int rc = petrel_pg_exec_bin(db, req, by_id, 1, params, item_done, req);
 *       return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
 *   }
 */
PETREL_API int petrel_pg_exec_bin(petrel_pg_t *pg, petrel_req_t *req, const petrel_pg_stmt_t *stmt,
                                  int nparams, const petrel_str_t *params, petrel_pg_cb cb,
                                  void *data);

/**
 * Run one SQL statement given as text, with parameters.
 *
 * As petrel_pg_exec(), with the statement parsed by the server each time
 * (no prepared statement): for statements that run rarely.  `sql` is one
 * statement, with parameters $1, $2, ...
 *
 * Returns: 0 when the query was taken (`cb` will run), or a negative error
 * code (then `cb` will not run).
 *
 * Errors: those of petrel_pg_exec(); PETREL_EINVAL when `sql` is NULL.
 *
 * Lifetime: `sql` and `params` are read during the call only.
 */
PETREL_API int petrel_pg_query(petrel_pg_t *pg, petrel_req_t *req, const char *sql, int nparams,
                               const char *const *params, petrel_pg_cb cb, void *data);

/**
 * Start a transaction: the next queries of `req` run as one.
 *
 * The queries that `req` makes on `pg` with petrel_pg_exec() and
 * petrel_pg_query() from here to petrel_pg_tx_end() form one transaction:
 * they go to one connection as one batch, with one Sync after the last
 * (PostgreSQL runs the statements before a Sync in one implicit
 * transaction), so they commit together or not at all.  When one fails,
 * the transaction is rolled back: that query's callback gets
 * PETREL_PG_ESQL and the others' PETREL_PG_EABORTED; every callback of the
 * transaction runs, in order, once it is over, and no other request's
 * query is touched.  A transaction that fails with a serialization failure
 * or a deadlock (40001, 40P01) is run again whole, twice at most, before
 * any of its callbacks ran.  Queries of other requests made meanwhile are
 * not part of it.  The transaction ends at petrel_pg_tx_end() or at the end
 * of the loop turn, whichever comes first: it never waits for an event,
 * so make its queries in one go (from the handler, or from one callback).
 * Starting a transaction while another is open ends the other first.
 * Do not put BEGIN, COMMIT or ROLLBACK in it.
 *
 * Returns: 0, or a negative error code.
 *
 * Errors:
 *   PETREL_EINVAL  `pg` is NULL (or the pool is not built in)
 *   PETREL_ESTATE  `req` is complete or aborted
 *
 * Lifetime: `req` may be NULL for the module's own queries (a cache to
 * fill); the transaction lasts until petrel_pg_tx_end() or the end of the
 * loop turn.
 *
 * Example:
 *   static petrel_pg_t *db;
 *   static petrel_pg_stmt_t *take; // UPDATE stock SET n = n - 1 WHERE id = $1
 *   static petrel_pg_stmt_t *give; // UPDATE stock SET n = n + 1 WHERE id = $1
 *   void moved(const petrel_pg_result_t *res, void *data); // answers after the second
 *
 *   // GET /move?from=ID&to=ID: one unit of stock moves; both rows change, or neither
 *   static int move(petrel_req_t *req, void *data)
 *   {
 *       const char *from[1] = {petrel_req_query(req, "from")};
 *       const char *to[1] = {petrel_req_query(req, "to")};
 *       petrel_pg_tx_begin(db, req);
 *       int rc = petrel_pg_exec(db, req, take, 1, from, moved, data);
 *       if (rc == 0)
 *           rc = petrel_pg_exec(db, req, give, 1, to, moved, data);
 *       petrel_pg_tx_end(db);
 *       return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
 *   }
 */
PETREL_API int petrel_pg_tx_begin(petrel_pg_t *pg, petrel_req_t *req);

/**
 * End the transaction petrel_pg_tx_begin() started: send it.
 *
 * Its queries go to a connection with their Sync (or wait in the queue
 * together).  A transaction without queries does nothing.
 *
 * Returns: 0, or a negative error code.
 *
 * Errors:
 *   PETREL_EINVAL  `pg` is NULL (or the pool is not built in)
 *   PETREL_ESTATE  no transaction is open (never begun, or ended by the
 *                  end of the loop turn already)
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_tx_end(petrel_pg_t *pg);

/**
 * Cancel the queries a request is waiting for.
 *
 * For an abort callback that a handler registers after making its queries
 * (which replaces the pool's): call this from it.  Each query of `req` that
 * has not called back gets PETREL_PG_ECANCELED, now; one running on the
 * server is cancelled there.
 *
 * Returns: the number of queries cancelled (0 or more).
 *
 * Errors: none; 0 when `pg` or `req` is NULL.
 *
 * Lifetime: `req` must be valid (it is, during its abort callback).
 */
PETREL_API int petrel_pg_cancel(petrel_pg_t *pg, petrel_req_t *req);

/**
 * The outcome of a query: one of the PETREL_PG_* values.
 *
 * Returns: PETREL_PG_OK, PETREL_PG_ESQL, PETREL_PG_EABORTED,
 * PETREL_PG_EUNAVAILABLE or PETREL_PG_ECANCELED.
 *
 * Errors: none.
 *
 * Lifetime: `res` is valid during its callback only.
 */
PETREL_API int petrel_pg_status(const petrel_pg_result_t *res);

/**
 * The SQLSTATE of a query's outcome.
 *
 * "00000" for PETREL_PG_OK; the server's code for PETREL_PG_ESQL ("42P01":
 * no such table), and for PETREL_PG_EABORTED the code of the query that
 * failed; "08006" (connection lost) or "08001" (no connection) for
 * PETREL_PG_EUNAVAILABLE; "57014" for PETREL_PG_ECANCELED.
 *
 * Returns: five characters, NUL-terminated.
 *
 * Errors: none.
 *
 * Lifetime: valid during the callback only.
 */
PETREL_API const char *petrel_pg_sqlstate(const petrel_pg_result_t *res);

/**
 * The error message of a query's outcome.
 *
 * The server's primary message for PETREL_PG_ESQL (and, for
 * PETREL_PG_EABORTED, that of the query that failed), libpq's for a lost
 * connection; "" for PETREL_PG_OK.
 *
 * Returns: a NUL-terminated message, without a trailing newline.
 *
 * Errors: none.
 *
 * Lifetime: valid during the callback only.
 */
PETREL_API const char *petrel_pg_message(const petrel_pg_result_t *res);

/**
 * The number of rows of a result.
 *
 * Returns: the rows a SELECT (or a statement with RETURNING) gave; 0 for
 * other statements and for failed queries.
 *
 * Errors: none.
 *
 * Lifetime: `res` is valid during its callback only.
 */
PETREL_API int petrel_pg_nrows(const petrel_pg_result_t *res);

/**
 * The number of columns of a result.
 *
 * Returns: the columns of the rows; 0 when there are none.
 *
 * Errors: none.
 *
 * Lifetime: `res` is valid during its callback only.
 */
PETREL_API int petrel_pg_ncols(const petrel_pg_result_t *res);

/**
 * The name of a column of a result.
 *
 * Returns: the column's name, NUL-terminated; NULL when `col` is out of
 * range.
 *
 * Errors: none (NULL).
 *
 * Lifetime: valid during the callback only.
 */
PETREL_API const char *petrel_pg_colname(const petrel_pg_result_t *res, int col);

/**
 * A value of a result, read in place.
 *
 * The text form of the value at `row`, `col` (counted from 0), as the
 * server sent it: "42", "t", "2024-01-31", a string in the connection's
 * client encoding.  Nothing is copied.  In the results of a statement of
 * PETREL_PG_BINARY_RESULTS, the binary form of its type: a text value's
 * characters still, an int4 4 bytes in network byte order (read integers
 * with petrel_pg_value_int()).
 *
 * Returns: the bytes and their length; NUL-terminated (a NUL follows the
 * last byte in binary format too).  {NULL, 0} for SQL
 * NULL or when `row` or `col` is out of range.
 *
 * Errors: none ({NULL, 0}).
 *
 * Lifetime: the bytes belong to the result: valid during the callback
 * only.  Copy them (petrel_arena_strndup() into the request arena) to keep
 * them.
 */
PETREL_API petrel_str_t petrel_pg_value(const petrel_pg_result_t *res, int row, int col);

/**
 * A value of a result, as an integer.
 *
 * Reads the value at `row`, `col` as a decimal integer into `*out`; in a
 * binary result (PETREL_PG_BINARY_RESULTS), a column of type int2, int4
 * or int8, from its 2, 4 or 8 bytes in network byte order.
 *
 * Returns: 0, or a negative error code (then `*out` is left alone).
 *
 * Errors:
 *   PETREL_EINVAL  SQL NULL, out of range, or not a decimal integer that
 *                  fits in 64 bits; in binary format, a column of another
 *                  type (a domain, numeric, float4 ...: read its bytes
 *                  with petrel_pg_value()), or a value whose length is
 *                  not its type's
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_value_int(const petrel_pg_result_t *res, int row, int col, int64_t *out);

/**
 * A value of a result, as a 32-bit integer.
 *
 * As petrel_pg_value_int(), text or binary format, for a value that must
 * fit in an int32_t (an int4 column; an int8 or a text one whose value
 * fits).
 *
 * Returns: 0, or a negative error code (then `*out` is left alone).
 *
 * Errors:
 *   PETREL_EINVAL  those of petrel_pg_value_int(), or a value below
 *                  INT32_MIN or above INT32_MAX
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_value_int4(const petrel_pg_result_t *res, int row, int col, int32_t *out);

/**
 * The number of rows a statement changed.
 *
 * Returns: the rows an INSERT, UPDATE, DELETE (or MERGE, COPY, SELECT)
 * affected, from the command tag; 0 when it says none or for failed
 * queries.
 *
 * Errors: none.
 *
 * Lifetime: `res` is valid during its callback only.
 */
PETREL_API uint64_t petrel_pg_affected(const petrel_pg_result_t *res);

/**
 * Answer a request whose query failed.
 *
 * Sends 503 with Retry-After (the pool's retry_after) when the database is
 * unavailable (PETREL_PG_EUNAVAILABLE, or an SQLSTATE of class 08, 53 or
 * 57P0: connection, resources, shutdown), else 500 (also for 08P01 with
 * PETREL_PG_ESQL: the server refused the query's message, such as a
 * binary parameter too short for its type, and the connection is up).  The pool has logged
 * the query's SQLSTATE and message with the request's id already.
 *
 * Returns: what petrel_send() returns: 0, or PETREL_EIO for a request that
 * was aborted (PETREL_PG_ECANCELED: the call lets go of it).
 *
 * Errors: those of petrel_send(); PETREL_EINVAL when `res` is NULL.
 *
 * Lifetime: `res` is read during the call only.
 */
PETREL_API int petrel_pg_send_error(petrel_req_t *req, const petrel_pg_result_t *res);

/**
 * Answer a request whose query petrel_pg_exec() refused.
 *
 * For `rc` PETREL_EIO (database unavailable) or PETREL_ELIMIT (queue full):
 * sends 503 with Retry-After and returns what petrel_send() returns.  Any
 * other code is returned as it is, so that a handler can
 * `return petrel_pg_send_refused(pg, req, rc);` and get 500 for those.
 *
 * Returns: 0 when it responded, or a negative error code.
 *
 * Errors: those of petrel_send(); `rc` itself when it is not one of the
 * two.
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_send_refused(petrel_pg_t *pg, petrel_req_t *req, int rc);

/**
 * Whether a pool can run queries now.
 *
 * Returns: the number of connections that are up (0: the database is
 * unreachable for now, or the pool is still connecting); 0 for NULL.  For
 * a readiness check.
 *
 * Errors: none.
 *
 * Lifetime: nothing is kept.
 */
PETREL_API int petrel_pg_ready(const petrel_pg_t *pg);

/**
 * Counters of a pool, for petrel_pg_stats().
 */
typedef struct petrel_pg_stats {
    unsigned connections; /**< connections of the pool */
    unsigned ready;       /**< up now */
    unsigned inflight;    /**< queries sent, not answered yet */
    unsigned queued;      /**< queries waiting for a connection */
    uint64_t queries;     /**< queries taken since the pool opened */
    uint64_t errors;      /**< queries that ended with PETREL_PG_ESQL */
    uint64_t unavailable; /**< ... with PETREL_PG_EUNAVAILABLE */
    uint64_t canceled;    /**< ... with PETREL_PG_ECANCELED */
    uint64_t refused;     /**< petrel_pg_exec() calls refused (EIO, ELIMIT) */
    uint64_t retried;     /**< transactions run again (40001, 40P01, cancel races) */
    uint64_t connects;    /**< connections made (the first ones included) */
    uint64_t failures;    /**< connection attempts that failed, connections lost */
    uint64_t cancels;     /**< server-side cancels sent */
} petrel_pg_stats_t;

/**
 * Read the counters of a pool.
 *
 * Returns: nothing; `st` is filled (zeroed for a NULL pool).
 *
 * Errors: none.
 *
 * Lifetime: `st` belongs to the caller.
 */
PETREL_API void petrel_pg_stats(const petrel_pg_t *pg, petrel_pg_stats_t *st);

/* ------------------------------------------------------------------------ */
/* WebSocket (src/protocols/ws.c) -- begin                                             */

/**
 * A WebSocket connection (RFC 6455), made by a route of petrel_ws_route_add().
 *
 * It belongs to the worker process that accepted it: use it only from that
 * worker (its callbacks, its timers, other handlers of the same worker).
 *
 * Lifetime: valid from on_open until on_close returns; not after.
 */
typedef struct petrel_ws petrel_ws_t;

/**
 * What a WebSocket endpoint does: its callbacks and settings.
 *
 * Any callback may be NULL.
 *
 * Lifetime: the struct is copied by petrel_ws_route_add(); `subprotocols`
 * is not (static storage).
 */
typedef struct petrel_ws_handler {
    /**
     * The handshake was accepted: the 101 response (over HTTP/2, the 200)
     * is queued.  `req` (the upgrade request: path, query, headers,
     * parameters) is valid during this call only.  May send (the messages
     * follow the 101) or close.
     */
    void (*on_open)(petrel_ws_t *ws, petrel_req_t *req);
    /**
     * A whole message, fragments reassembled: text (valid UTF-8, with a NUL
     * after the last byte; binary 0) or binary (binary 1).  `data` lives in
     * the connection's arena in a scope of its own, valid during this call
     * only: copy what must outlive it (sending it copies it).
     */
    void (*on_message)(petrel_ws_t *ws, int binary, const void *data, size_t len);
    /**
     * The connection is over, called once for every on_open.  `code` is the
     * status code of the peer's Close frame (1005 when it had none), the code
     * petrel sent when it failed the connection for a protocol error (1002,
     * 1007, 1008, 1009, 1011), or 1006 when it ended without a Close (the
     * peer went away, idle or send timeout, petrel shutting down at its
     * drain timeout).  `reason` is NUL-terminated UTF-8 ("" if none), valid
     * during the call.  Sending is refused from here on (PETREL_ESTATE).
     */
    void (*on_close)(petrel_ws_t *ws, int code, const char *reason);
    /**
     * Subprotocols this endpoint speaks, NULL-terminated, in order of
     * preference; NULL for none.  The first one the client offers in
     * Sec-WebSocket-Protocol is selected (petrel_ws_subprotocol()); when
     * none matches, the handshake succeeds without one and the client
     * decides.
     */
    const char *const *subprotocols;
    /**
     * Before the handshake is accepted: `origin` is the Origin header (NULL
     * when absent: not a browser), `data` the route's.  Return 0 to accept,
     * or an HTTP status 400-599 to refuse with it (other values: 403).  Any
     * check of the request fits here (a cookie, a token in the query).
     */
    int (*check_origin)(petrel_req_t *req, const char *origin, void *data);
    /** Largest message accepted, in bytes (larger: Close 1009); 0 means
     *  --ws-max-message-size (default 16 MiB).  With compression, the limit
     *  applies to the message both as it came and inflated. */
    size_t max_message_size;
    /** 1: never negotiate permessage-deflate (RFC 7692) on this endpoint.
     *  By default it is accepted when the client offers it, with no context
     *  takeover either way: each message is compressed on its own (messages
     *  under 32 bytes, that do not shrink, or whose first 16 KiB do not
     *  shrink by 1/32, are sent as they are). */
    int no_compression;
} petrel_ws_handler_t;

/**
 * Register a WebSocket endpoint.
 *
 * The endpoint is a GET route `pattern` (the syntax of petrel_route_add())
 * that performs the opening handshake (RFC 6455 §4.2):
 * Upgrade: websocket, Connection: Upgrade, a Sec-WebSocket-Key of 16 bytes
 * in base64 and Sec-WebSocket-Version: 13, over HTTP/1.1.  A request
 * without them gets 400, another version 426 with Sec-WebSocket-Version: 13,
 * a refusal of check_origin its status, a draining server 503.  `data` is
 * the initial user data of every connection (petrel_ws_get_data()).
 *
 * The route also accepts WebSocket over HTTP/2 (RFC 8441) on h2c: petrel
 * advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, and an Extended CONNECT
 * (`:method CONNECT`, `:protocol websocket`, `:scheme`, `:path`,
 * `:authority`, Sec-WebSocket-Version: 13) to `pattern` is answered 200
 * and carries the WebSocket on its stream, with the same callbacks,
 * subprotocols, permessage-deflate and limits (no Sec-WebSocket-Key nor
 * -Accept there, RFC 8441 §5).  The stream's flow control paces the peer:
 * a WebSocket that does not read holds only its own stream.  Each one
 * counts against --h2-max-concurrent-streams; a reset of its stream or the
 * end of its connection is a 1006 for on_close, and at shutdown it gets
 * Close 1001 as over HTTP/1.1.  Another :protocol is answered 501, an
 * Extended CONNECT to a path without a WebSocket route 404 or 405.  In
 * on_open, `req->method` is then not PETREL_GET (`req->method_name` is
 * "CONNECT").
 *
 * Then petrel runs the protocol: pings are answered, a connection silent
 * for --ws-idle-timeout gets a ping and is closed if it stays silent as long
 * again; a Close is answered with the same code; every frame is checked
 * (unmasked frames, reserved bits, unknown opcodes, fragmented or long
 * control frames, invalid close codes: 1002; text that is not UTF-8: 1007;
 * a message over the size limit: 1009).  permessage-deflate (RFC 7692) is
 * accepted when the client offers it (browsers do), unless the handler says
 * no_compression.  At shutdown, open connections get Close 1001.  Call at
 * start-up (from a module's init).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `srv`, `pattern` or `handler` is NULL, a bad pattern
 *                  (as petrel_route_add()), or a subprotocol that is empty
 *                  or holds a space, tab, comma, CR or LF
 *   PETREL_ESTATE  a GET route (or WebSocket route) of this pattern exists
 *                  already
 *   PETREL_ENOMEM  out of memory
 *
 * Lifetime: `handler` is copied (its `subprotocols` array is not: static
 * storage); `data` is kept, and is each new connection's user data.
 *
 * Example:
 *   static void echo(petrel_ws_t *ws, int binary, const void *data, size_t len)
 *   {
 *       if (binary)
 *           petrel_ws_send_binary(ws, data, len);
 *       else
 *           petrel_ws_send_text(ws, data, len);
 *   }
 *
 *   static int init(petrel_server_t *srv, const char *args)
 *   {
 *       (void)args;
 *       static const petrel_ws_handler_t h = {.on_message = echo};
 *       return petrel_ws_route_add(srv, "/ws", &h, NULL);
 *   }
 */
PETREL_API int petrel_ws_route_add(petrel_server_t *srv, const char *pattern,
                                   const petrel_ws_handler_t *handler, void *data);

/**
 * Send a text message on a WebSocket.
 *
 * Sends `len` bytes of `text` (UTF-8) as one frame, compressed when the
 * connection negotiated permessage-deflate.  Works from any code of the
 * connection's worker (callbacks, timers, other connections' handlers):
 * output queued outside the connection's own callbacks is written at the
 * end of the loop turn.
 *
 * Backpressure: while output waits for the socket, petrel stops reading
 * from the peer.  A sender that produces on its own (a timer, a feed) paces
 * itself with petrel_ws_buffered() and petrel_ws_on_drain().  The hard
 * bound: a send that finds more than --ws-send-limit bytes (default 4 MiB)
 * queued and unwritten is refused, and, by --ws-send-overflow, the
 * connection closed with 1008 (close, the default) or the message dropped
 * (drop).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `ws` is NULL, `text` is NULL with a length, or the text
 *                  is not valid UTF-8
 *   PETREL_ESTATE  the connection is closing or closed (after
 *                  petrel_ws_close(), or from on_close)
 *   PETREL_EIO     the send queue is over --ws-send-limit: the connection
 *                  is closed with 1008 (--ws-send-overflow close)
 *   PETREL_ELIMIT  the send queue is over --ws-send-limit: this message is
 *                  dropped, the connection stays (--ws-send-overflow drop)
 *   PETREL_ENOMEM  out of memory
 *
 * Lifetime: the bytes are copied into the connection's output: `text` may
 * go away after the call.
 *
 * Example:
 *   #include <string.h>
 *
 *   static void greet(petrel_ws_t *ws, petrel_req_t *req)
 *   {
 *       (void)req;
 *       static const char hi[] = "welcome";
 *       petrel_ws_send_text(ws, hi, strlen(hi));
 *   }
 */
PETREL_API int petrel_ws_send_text(petrel_ws_t *ws, const char *text, size_t len);

/**
 * Send a binary message on a WebSocket.
 *
 * As petrel_ws_send_text(), for any bytes.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_ws_send_text(), without the UTF-8 check.
 *
 * Lifetime: the bytes are copied: `data` may go away after the call.
 */
PETREL_API int petrel_ws_send_binary(petrel_ws_t *ws, const void *data, size_t len);

/**
 * Close a WebSocket: start the closing handshake.
 *
 * Sends a Close frame with `code` (1000 to 1003, 1007 to 1014 or 3000 to
 * 4999; 0 for none) and `reason`.  Messages that arrive afterwards are
 * dropped; on_close runs with the peer's answer, or with 1006 when none
 * comes within --ws-idle-timeout.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `ws` is NULL, a code outside those ranges, a reason
 *                  with code 0, or a reason that is not UTF-8 of at most
 *                  123 bytes
 *   PETREL_ESTATE  the connection is closing or closed already
 *
 * Lifetime: `reason` (NULL or "" for none) is copied.  `ws` stays valid
 * until on_close returns.
 */
PETREL_API int petrel_ws_close(petrel_ws_t *ws, int code, const char *reason);

/**
 * The user data of a WebSocket connection.
 *
 * Each connection has one pointer for its handler's state: initially the
 * `data` of petrel_ws_route_add(), changed with petrel_ws_set_data().
 *
 * Returns: the pointer, or NULL for a NULL `ws`.
 *
 * Errors: none.
 *
 * Lifetime: the pointer is yours: petrel never frees it (free it in
 * on_close if you allocated it).
 */
PETREL_API void *petrel_ws_get_data(const petrel_ws_t *ws);

/**
 * Set the user data of a WebSocket connection.
 *
 * Returns: nothing.
 *
 * Errors: none (a NULL `ws` is ignored).
 *
 * Lifetime: `data` is kept as it is, until it is set again or the
 * connection is over; petrel never frees it.
 *
 * Example:
 *   #include <stdlib.h>
 *
 *   typedef struct session {
 *       unsigned messages;
 *   } session_t;
 *
 *   static void on_open(petrel_ws_t *ws, petrel_req_t *req)
 *   {
 *       (void)req;
 *       session_t *s = calloc(1, sizeof(*s));
 *       if (s == NULL)
 *           petrel_ws_close(ws, 1011, "out of memory");
 *       petrel_ws_set_data(ws, s);
 *   }
 *
 *   static void on_close(petrel_ws_t *ws, int code, const char *reason)
 *   {
 *       (void)code;
 *       (void)reason;
 *       free(petrel_ws_get_data(ws));
 *   }
 */
PETREL_API void petrel_ws_set_data(petrel_ws_t *ws, void *data);

/**
 * The subprotocol selected at the handshake.
 *
 * Returns: the first of the endpoint's `subprotocols` that the client
 * offered in Sec-WebSocket-Protocol, or NULL when none was (or for a NULL
 * `ws`).
 *
 * Errors: none.
 *
 * Lifetime: a string of the endpoint's `subprotocols` array (static
 * storage).
 */
PETREL_API const char *petrel_ws_subprotocol(const petrel_ws_t *ws);

/**
 * Bytes queued for a WebSocket's peer and not written yet.
 *
 * What the sends (and the published messages) of the connection left in
 * its output queue because the peer does not read as fast: a producer
 * checks it after its sends and waits with petrel_ws_on_drain() when it is
 * high, instead of filling the queue until --ws-send-limit cuts the peer
 * off (the hard bound: see petrel_ws_send_text()).  Like a browser's
 * WebSocket.bufferedAmount.
 *
 * Returns: the number of bytes; 0 for a NULL `ws`.
 *
 * Errors: none.
 *
 * Lifetime: `ws` until its on_close returns.
 */
PETREL_API size_t petrel_ws_buffered(const petrel_ws_t *ws);

/** The callback of petrel_ws_on_drain(). */
typedef void (*petrel_ws_drain_cb)(petrel_ws_t *ws, void *data);

/**
 * Be called back when a WebSocket's queued bytes drain to a mark.
 *
 * Once petrel_ws_buffered() is at `mark` or fewer, `cb(ws, data)` runs
 * once, from the worker's loop (never from inside a petrel call): send more
 * from there, and call this again to wait again.  A second call replaces
 * the first; a NULL `cb` cancels.  The callback does not run once the
 * connection is closing (on_close runs instead).
 *
 * Returns: 0 when the callback is set (or cancelled); 1 when the queue is at
 * `mark` or below already: the callback is not set, go on sending; or a
 * negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `ws` is NULL
 *   PETREL_ESTATE  the connection is closing or closed
 *
 * Lifetime: `data` is the caller's, and must stay valid until the callback
 * has run, has been cancelled, or on_close has run.
 *
 * Example:
 *   #include <string.h>
 *
 *   static char tick[] = "{\"price\": 42}";
 *
 *   // a feed of many messages, sent as fast as the peer reads them
 *   static void feed(petrel_ws_t *ws, void *data)
 *   {
 *       unsigned *left = data;
 *       while (*left > 0) {
 *           if (petrel_ws_send_text(ws, tick, strlen(tick)) < 0)
 *               return;
 *           --*left;
 *           if (petrel_ws_buffered(ws) > 256 * 1024 &&
 *               petrel_ws_on_drain(ws, 64 * 1024, feed, left) == 0)
 *               return; // called again once 64 KiB or less are queued
 *       }
 *   }
 *
 *   static unsigned feed_left = 1000000;
 *
 *   static void on_open(petrel_ws_t *ws, petrel_req_t *req)
 *   {
 *       (void)req;
 *       feed(ws, &feed_left); // one feed for the example: real code keeps it per connection
 *   }
 */
PETREL_API int petrel_ws_on_drain(petrel_ws_t *ws, size_t mark, petrel_ws_drain_cb cb, void *data);

/**
 * Stop or resume reading from a WebSocket's peer.
 *
 * For backpressure between two WebSockets (a relay): while paused, petrel
 * reads nothing more from the peer, so TCP (over HTTP/2, the stream's flow
 * control) pushes back on it; on_message may still run for the frames of
 * input already read (at most one read buffer).  The idle timer runs as
 * before and nothing is read meanwhile, pongs included: a WebSocket paused
 * for more than twice --ws-idle-timeout with nothing written either is
 * taken for idle and ends (1006).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL (`ws` is NULL), PETREL_ESTATE (the connection is
 * over).
 *
 * Lifetime: `ws` until its on_close returns.
 */
PETREL_API int petrel_ws_pause(petrel_ws_t *ws, int paused);

/**
 * Check a WebSocket opening handshake without answering it.
 *
 * The checks of petrel_ws_route_add()'s routes: over HTTP/1.1 a GET with
 * Upgrade: websocket, Connection: Upgrade, one Sec-WebSocket-Key of 16
 * bytes in base64 (RFC 6455 §4.2.1); over HTTP/2 an Extended CONNECT with
 * :protocol websocket (RFC 8441 §4); Sec-WebSocket-Version: 13 either way.
 * For a handler that decides later whether to accept (petrel_ws_accept()).
 *
 * Returns: 0 for a valid handshake; 400 (not one: the reason is logged at
 * debug level); 426 for another version (the response's
 * Sec-WebSocket-Version: 13 field is set: return 426 from the handler); or
 * PETREL_EINVAL for a NULL `req`.
 *
 * Errors: as above.
 *
 * Lifetime: `req` must be valid.
 */
PETREL_API int petrel_ws_check(petrel_req_t *req);

/**
 * Accept a WebSocket opening handshake, now or for a waiting request.
 *
 * From a handler, or later for a request whose handler returned
 * PETREL_LATER.  As a route of petrel_ws_route_add() would: the handshake is checked
 * (petrel_ws_check()), the answer queued (101 with Sec-WebSocket-Accept
 * over HTTP/1.1, 200 over HTTP/2, RFC 8441 §5) with `subprotocol` (NULL:
 * none) in Sec-WebSocket-Protocol and permessage-deflate when the client
 * offers it and `handler` allows it, then on_open runs.  From then on the
 * request is over: `req` is not valid after a successful call from outside
 * its handler.  `handler->check_origin` and `subprotocols` are not used
 * (the caller decided).
 *
 * Returns: 0 when accepted; an HTTP status (400, 426, 503 when the server
 * drains) when not: nothing is sent, answer it (petrel_send_status()); or a
 * negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL (`req` or `handler` NULL, a request that may no
 * longer be answered), PETREL_ESTATE (answered already), PETREL_ENOMEM.
 *
 * Lifetime: `handler` is copied; `subprotocol` must stay valid until
 * on_close; `data` is the WebSocket's user data.
 */
PETREL_API int petrel_ws_accept(petrel_req_t *req, const petrel_ws_handler_t *handler, void *data,
                                const char *subprotocol);

/**
 * Make a fresh Sec-WebSocket-Key for a client's opening handshake.
 *
 * 16 random bytes in base64 (RFC 6455 §4.1), for petrel_call_upgrade() and
 * petrel_ws_client_new().
 *
 * Returns: 0, or PETREL_EIO (no entropy; PETREL_EIO for a NULL `key` too).
 *
 * Errors: as above.
 *
 * Lifetime: `key` (24 characters and a NUL) is the caller's.
 */
PETREL_API int petrel_ws_client_key(char key[25]);

/**
 * Run the client side of a WebSocket on a connected socket.
 *
 * After the server's answer to its opening handshake (an upstream's 101:
 * petrel_call_upgrade()'s on_upgrade).  `head` is that answer; it is checked as RFC 6455 §4.1
 * requires of a client that sent Sec-WebSocket-Key `key` and offered no extension: Upgrade:
 * websocket, Connection: Upgrade, the Sec-WebSocket-Accept of `key`, no Sec-WebSocket-Extensions (a
 * Sec-WebSocket-Protocol is the caller's to check against what it offered).  Then the socket joins
 * the worker's connections and is served by the engine of petrel's own WebSocket endpoints in the
 * client's role: every frame sent is masked with a fresh key (§5.3), a masked frame received fails
 * the connection (§5.1).  The handler's on_message, on_close and max_message_size and the --ws-*
 * limits (idle ping, send limit) apply; on_open is not called. `rest` (the bytes read past the 101)
 * is the first input, read at the end of the loop turn: no callback runs before this call returns.
 * Send, close, pause and wait for drain with the petrel_ws_* calls.
 *
 * Returns: the WebSocket, or NULL with errno set.
 *
 * Errors: NULL with errno EPROTO (the answer is not a valid acceptance of
 * the handshake), EINVAL (a NULL argument), ENOMEM (out of memory, no
 * worker, or `rest_len` over 16 KiB); `fd` is closed then.
 *
 * Lifetime: `fd` is petrel's in every case (closed with the WebSocket);
 * `head`, `key` and `rest` are read during the call, `handler` is copied;
 * the WebSocket is valid until its on_close returns.
 */
PETREL_API petrel_ws_t *petrel_ws_client_new(int fd, const void *rest, size_t rest_len,
                                             const petrel_upstream_head_t *head, const char *key,
                                             const petrel_ws_handler_t *handler, void *data);

/* WebSocket -- end                                                          */

/* ------------------------------------------------------------------------ */
/* Publish and subscribe (src/framework/pubsub.c) -- begin                            */

/*
 * A WebSocket subscribes to topics (names such as "room:lobby"); a message
 * published to a topic, from any handler, timer or callback of any worker,
 * reaches every WebSocket subscribed to it in every worker process of the
 * instance, and, with --pubsub-redis, in every instance connected to the
 * same Redis: each subscriber gets it once, and the messages of one
 * publisher (a worker, from its handlers and timers) arrive in the order
 * they were published.  A message is framed once per worker, compressed at
 * most once per worker and window size for the subscribers that negotiated
 * permessage-deflate, and copied into each subscriber's output queue.  A
 * subscriber that does not read never holds up the others: past its
 * --ws-send-limit it misses messages (--ws-send-overflow drop) or is closed
 * with 1008 (close, the default).  doc/pubsub.md has the design.
 *
 * Limits, each with a flag (petrel(1)): topic names of 1 to
 * --pubsub-max-topic-size bytes (default 256) of UTF-8 without control
 * characters, messages of up to --pubsub-max-message-size (default 64 KiB),
 * --pubsub-max-subscriptions topics per WebSocket (default 64),
 * --pubsub-max-subscribers WebSockets per topic in a worker (default
 * 100,000).
 */

/**
 * Subscribe a WebSocket to a topic.
 *
 * From now on, messages published to `topic` are sent to `ws`, until
 * petrel_ws_unsubscribe() or the connection closes (its subscriptions end
 * before its on_close runs).  Subscribing again to the same topic does
 * nothing.  Across instances, messages other instances publish reach it
 * once this worker's Redis subscription to the topic is confirmed (a few
 * milliseconds after the first subscriber of the topic in the worker).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `ws` or `topic` is NULL, or the topic is empty, not
 *                  UTF-8, or holds a control character
 *   PETREL_ELIMIT  the topic is longer than --pubsub-max-topic-size, the
 *                  connection has --pubsub-max-subscriptions topics already,
 *                  or the topic has --pubsub-max-subscribers in this worker
 *   PETREL_ESTATE  the connection is closing or closed
 *   PETREL_ENOMEM  out of memory
 *
 * Lifetime: `topic` is copied.
 *
 * Example:
 *   #include <stdio.h>
 *
 *   static void on_open(petrel_ws_t *ws, petrel_req_t *req)
 *   {
 *       const char *room = petrel_req_query(req, "room"); // GET /chat?room=lobby
 *       char topic[128];
 *       snprintf(topic, sizeof(topic), "room:%s", room ? room : "lobby");
 *       if (petrel_ws_subscribe(ws, topic) < 0)
 *           petrel_ws_close(ws, 1008, "bad room");
 *   }
 */
PETREL_API int petrel_ws_subscribe(petrel_ws_t *ws, const char *topic);

/**
 * Unsubscribe a WebSocket from a topic.
 *
 * Messages published to `topic` from now on are not sent to `ws`; those
 * queued already are.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL     `ws` or `topic` is NULL, or not a valid topic name
 *   PETREL_ENOTFOUND  `ws` is not subscribed to `topic`
 *
 * Lifetime: `topic` is read during the call.
 */
PETREL_API int petrel_ws_unsubscribe(petrel_ws_t *ws, const char *topic);

/**
 * Publish a text message to a topic.
 *
 * Sends `len` bytes of `text` (UTF-8) as a text message to every WebSocket
 * subscribed to `topic`: those of this worker before the call returns
 * (queued: written at the end of the loop turn), those of the other workers
 * and, with --pubsub-redis, of the other instances as soon as they are
 * woken.  Call it from anywhere in a worker: a WebSocket's on_message, an
 * HTTP handler, a timer, a watch callback.  A topic nobody subscribes to
 * drops the message.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors:
 *   PETREL_EINVAL  `topic` is NULL or not a valid topic name, `text` is NULL
 *                  with a length, or the text is not UTF-8
 *   PETREL_ELIMIT  the topic is longer than --pubsub-max-topic-size, or
 *                  the message than --pubsub-max-message-size
 *   PETREL_ESTATE  called outside a worker (a module's init in the master)
 *
 * Lifetime: `topic` and `text` are copied.
 *
 * Example:
 *   #include <string.h>
 *
 *   // POST /announce: the body goes to every subscriber of "news"
 *   static int announce(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       int rc = petrel_publish_text("news", req->body.ptr, req->body.len);
 *       if (rc == PETREL_EINVAL)
 *           return 400;
 *       if (rc == PETREL_ELIMIT)
 *           return 413;
 *       return rc < 0 ? rc : petrel_send_text(req, 202, "text/plain", "published\n");
 *   }
 */
PETREL_API int petrel_publish_text(const char *topic, const char *text, size_t len);

/**
 * Publish a binary message to a topic.
 *
 * As petrel_publish_text(), for any bytes.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: as petrel_publish_text(), without the UTF-8 check.
 *
 * Lifetime: `topic` and `data` are copied.
 */
PETREL_API int petrel_publish_binary(const char *topic, const void *data, size_t len);

/** Counters of publish/subscribe in one worker, from petrel_pubsub_stats(). */
typedef struct petrel_pubsub_stats {
    uint64_t published;         /**< messages published in this worker */
    uint64_t delivered;         /**< messages queued for subscribers of this worker */
    uint64_t dropped;           /**< not queued: a subscriber over --ws-send-limit (drop) */
    uint64_t closed;            /**< subscribers closed with 1008 over --ws-send-limit */
    uint64_t from_workers;      /**< messages of the other workers read here */
    uint64_t lost_workers;      /**< messages of other workers overwritten before read */
    uint64_t to_redis;          /**< messages published to Redis */
    uint64_t from_redis;        /**< messages of other instances received from Redis */
    uint64_t unbridged;         /**< published while Redis was unreachable: not bridged */
    uint64_t redis_disconnects; /**< times Redis became unreachable */
    int redis;                  /**< 1 bridge up, 0 down (reconnecting), -1 no --pubsub-redis */
    size_t topics;              /**< topics with subscribers in this worker */
    size_t subscriptions;       /**< subscriptions in this worker */
} petrel_pubsub_stats_t;

/**
 * The publish/subscribe counters of the calling worker.
 *
 * Each worker counts its own; a monitoring endpoint served by every worker
 * shows the one that answered.  "Messages lost" are counted where they are
 * lost: `lost_workers` by a worker that fell a whole --pubsub-ring-size
 * behind another, `unbridged` by the instance that published while Redis
 * was away (the gap other instances see), `dropped` and `closed` per
 * subscriber.
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL for a NULL `st`; PETREL_ESTATE outside a worker.
 *
 * Lifetime: `st` is filled during the call.
 *
 * Example:
 *   #include <stdio.h>
 *
 *   static int stats(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       petrel_pubsub_stats_t st;
 *       if (petrel_pubsub_stats(&st) < 0)
 *           return 500;
 *       char *body = petrel_arena_printf(req->arena, "published %llu delivered %llu\n",
 *                                        (unsigned long long)st.published,
 *                                        (unsigned long long)st.delivered);
 *       return body ? petrel_send_text(req, 200, "text/plain", body) : 503;
 *   }
 */
PETREL_API int petrel_pubsub_stats(petrel_pubsub_stats_t *st);

/**
 * A bridge of publish/subscribe to other instances (opaque).
 *
 * libpetrel does not link the client of any message broker: a bridge is a
 * library of its own that the program installs with
 * petrel_pubsub_use_bridge().  petrel's Redis bridge is
 * `petrel_redis_bridge` of libpetrel-redis (`#include <petrel/redis.h>`,
 * `pkg-config --cflags --libs petrel-redis`); the petrel command installs
 * it when it was built with hiredis.
 *
 * Lifetime: a bridge is a constant of its library.
 */
typedef struct petrel_pubsub_bridge petrel_pubsub_bridge_t;

/**
 * Install the bridge that --pubsub-redis (petrel_main()'s option) uses.
 *
 * Call it before petrel_main().  Without a bridge, --pubsub-redis is
 * refused at start with a message that says so.
 *
 * Returns: nothing.
 *
 * Errors: none; NULL removes the bridge.
 *
 * Lifetime: `bridge` must stay valid for the life of the process (the
 * bridges of petrel's libraries are constants).
 *
 * Example:
 *   #include <petrel/redis.h>
 *
 *   extern const petrel_module_t *const my_modules[];
 *
 *   int run(int argc, char **argv)
 *   {
 *       petrel_pubsub_use_bridge(&petrel_redis_bridge);
 *       return petrel_main(argc, argv, my_modules);
 *   }
 */
PETREL_API void petrel_pubsub_use_bridge(const petrel_pubsub_bridge_t *bridge);

/* Publish and subscribe -- end                                             */

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */

/** Log levels, of petrel_log() and of --log-level error|warn|info|debug. */
enum { PETREL_LOG_ERROR = 0, PETREL_LOG_WARN, PETREL_LOG_INFO, PETREL_LOG_DEBUG };

/**
 * Write a line to the error log.
 *
 * Formats as printf(3) and writes one line to the error log (standard
 * error, or --error-log FILE), with the time, the level and the process
 * id, when `level` is at or above --log-level (PETREL_LOG_INFO by
 * default); a line is cut at about 2 KiB.  One write(2) a line: lines of
 * several workers do not mix.  A line written while a handler runs (or
 * petrel_stream_write/petrel_stream_end) carries the request's id:
 * "request ID: " before the message.
 *
 * Returns: nothing.
 *
 * Errors: none (a failed write is ignored).
 *
 * Lifetime: the arguments are read during the call only.
 *
 * Example:
 *   static int init(petrel_server_t *srv, const char *args)
 *   {
 *       (void)srv;
 *       if (*args != '\0') {
 *           petrel_log(PETREL_LOG_ERROR, "mymod: unknown argument '%s'", args);
 *           return PETREL_EINVAL;
 *       }
 *       petrel_log(PETREL_LOG_INFO, "mymod: ready");
 *       return 0;
 *   }
 */
PETREL_API void petrel_log(int level, const char *fmt, ...) PETREL_PRINTF(2, 3);

/**
 * Write a line about a request to the error log, from anywhere its handler has it.
 *
 * As petrel_log(), from a timer or a library's callback as well as from the
 * handler: the line carries "request ID: " before the message, the id of
 * the JSON access log's "request_id", so the two can be matched.
 *
 * Returns: nothing.
 *
 * Errors: none (a failed write is ignored).
 *
 * Lifetime: `req` must still be valid (its response not yet complete, see
 * "Waiting for work the handler started"); the arguments are read during
 * the call only.
 *
 * Example:
 *   static void on_reply(petrel_req_t *req, int status)
 *   {
 *       if (status != 0)
 *           petrel_req_log(req, PETREL_LOG_WARN, "backend answered %d", status);
 *   }
 */
PETREL_API void petrel_req_log(const petrel_req_t *req, int level, const char *fmt, ...)
    PETREL_PRINTF(3, 4);

/* ------------------------------------------------------------------------ */
/* Metrics and readiness                                                    */
/*                                                                          */
/* What a module reports on the admin listener (--admin-listen): its own    */
/* counters and gauges in /metrics, and the checks /readyz depends on.      */

/** A metric of a module (opaque), from petrel_metric_counter/gauge(). */
typedef struct petrel_metric petrel_metric_t;

/**
 * Register a counter that /metrics reports, summed over the instance's workers.
 *
 * The sum never goes backwards while the instance runs (the counts of a
 * worker that exits are kept).  `name` follows Prometheus' rules
 * ([a-zA-Z_:][a-zA-Z0-9_:]*, at most 63 bytes; counters should end in
 * "_total"), `help` is one line of at most 127 bytes.  Call it from a
 * module's init or another start-up path of the master (before the
 * workers fork); registering a name again (a reload) returns the same
 * metric.
 *
 * Returns: the metric, or NULL.
 *
 * Errors: NULL for a bad name or help, a name registered with the other
 * kind, 64 metrics already, or a call from a worker.
 *
 * Lifetime: the handle is valid until exit, in the master and every
 * worker; `name` and `help` are copied.
 *
 * Example:
 *   static petrel_metric_t *hits;
 *
 *   static int init(petrel_server_t *srv, const char *args)
 *   {
 *       (void)args;
 *       hits = petrel_metric_counter(srv, "mymod_hits_total", "Requests mymod answered.");
 *       return hits ? 0 : PETREL_EINVAL;
 *   }
 *
 *   static int handler(petrel_req_t *req, void *data)
 *   {
 *       (void)data;
 *       petrel_metric_add(hits, 1);
 *       return petrel_send_text(req, 200, "text/plain", "hit\n");
 *   }
 */
PETREL_API petrel_metric_t *petrel_metric_counter(petrel_server_t *srv, const char *name,
                                                  const char *help);

/**
 * Register a gauge that /metrics reports: a value that goes up and down.
 *
 * The value reported is the sum over the workers alive; otherwise as
 * petrel_metric_counter().
 *
 * Returns: the metric, or NULL.
 *
 * Errors: as petrel_metric_counter().
 *
 * Lifetime: as petrel_metric_counter().
 */
PETREL_API petrel_metric_t *petrel_metric_gauge(petrel_server_t *srv, const char *name,
                                                const char *help);

/**
 * Add to the calling worker's share of a metric.
 *
 * A counter takes n >= 0 only (a negative `n` is ignored); a gauge either
 * sign.  A plain addition to memory the worker alone writes: cheap enough
 * for every request.
 *
 * Returns: nothing.
 *
 * Errors: none; a NULL `m` (a registration that failed) does nothing.
 *
 * Lifetime: `m` is valid until exit.
 */
PETREL_API void petrel_metric_add(petrel_metric_t *m, int64_t n);

/**
 * Set the calling worker's share of a gauge.
 *
 * Returns: nothing.
 *
 * Errors: none; a NULL `m`, or a counter, is left alone.
 *
 * Lifetime: `m` is valid until exit.
 */
PETREL_API void petrel_metric_set(petrel_metric_t *m, int64_t v);

/**
 * Tell /readyz whether something the worker's requests need is there.
 *
 * A database pool, for example: ready 0 while it is down, 1 once it is
 * back.  While any worker reports a check down, /readyz answers 503 and
 * names it, so that a load balancer sends the requests elsewhere.  Call
 * from a worker (worker_init, a handler, a timer).
 *
 * Returns: 0, or a negative PETREL_E* code.
 *
 * Errors: PETREL_EINVAL (no `check`, or longer than 31 bytes),
 * PETREL_ELIMIT (the worker holds 8 checks already), PETREL_ESTATE (not
 * called in a worker).
 *
 * Lifetime: `check` is copied.
 */
PETREL_API int petrel_ready_set(petrel_server_t *srv, const char *check, int ready);

#ifdef __cplusplus
}
#endif
#endif /* PETREL_H */
