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

/** Version of the module ABI: the layout of the types below and the module
 *  descriptor.  A module built against another ABI version is refused. */
#define PETREL_ABI_VERSION 1

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

/** Error codes: library calls return 0 or one of these (negative). */
enum {
    PETREL_OK = 0,
    PETREL_ENOMEM = -1,   /**< out of memory, or an arena over its limit */
    PETREL_EINVAL = -2,   /**< invalid argument */
    PETREL_ESTATE = -3,   /**< call not allowed in this state (e.g. sent twice) */
    PETREL_EIO = -4,      /**< I/O error, the connection is gone */
    PETREL_ENOTFOUND = -5 /**< no such thing (module, file, route) */
};

/** A static, human-readable message for a PETREL_E* code. */
PETREL_API const char *petrel_strerror(int err);

/* ------------------------------------------------------------------------ */
/* Arena                                                                     */

/**
 * A bump allocator over a list of chunks taken from the worker's chunk pool.
 * No per-object free: memory is returned by petrel_arena_reset() to a mark,
 * or when the arena's owner (a connection, a stream) goes away.
 * Blocks larger than a quarter of a chunk get a block of their own, freed by
 * the reset that unwinds them.  An arena has a byte limit: past it,
 * allocations return NULL (a request then gets 413/431/503, never a crash).
 */
typedef struct petrel_arena petrel_arena_t;

/** A position in an arena, from petrel_arena_mark().  Plain value. */
typedef struct petrel_arena_mark {
    void *_chunk;
    char *_pos;
    void *_defer;
    void *_large;
    size_t _bytes;
} petrel_arena_mark_t;

/** Counters of an arena (and of the pool under it). */
typedef struct petrel_arena_stats {
    size_t chunks;        /**< chunks this arena holds now */
    size_t bytes;         /**< bytes handed out since the arena was empty */
    size_t bytes_high;    /**< high-water mark of `bytes` */
    uint64_t mallocs;     /**< heap calls made for this arena (chunks + large) */
    uint64_t pool_mallocs; /**< heap calls made by the worker's chunk pool */
} petrel_arena_stats_t;

/**
 * Allocate `size` bytes aligned to `align` (a power of two, at most 64; 0
 * means pointer alignment).  The block lives until the arena is reset to a
 * mark taken before this call.  Returns NULL when out of memory or over the
 * arena's limit.
 */
PETREL_API void *petrel_arena_alloc(petrel_arena_t *a, size_t size, size_t align);

/** Typed, overflow-checked allocation of `n` objects of `type`, zeroed. */
#define petrel_arena_new(a, type, n) ((type *)petrel_arena_calloc((a), (n), sizeof(type)))

/** Zeroed allocation of n * size bytes; NULL on overflow or out of memory. */
PETREL_API void *petrel_arena_calloc(petrel_arena_t *a, size_t n, size_t size);

/** Copy `n` bytes of `s` into the arena and NUL-terminate; NULL on failure. */
PETREL_API char *petrel_arena_strndup(petrel_arena_t *a, const char *s, size_t n);

/** printf into the arena; NULL on failure. */
PETREL_API char *petrel_arena_printf(petrel_arena_t *a, const char *fmt, ...) PETREL_PRINTF(2, 3);

/**
 * Register `fn(data)` to run when the arena is reset past this point or
 * destroyed.  Cleanups run in reverse order of registration.
 * Returns 0 or PETREL_ENOMEM (then `fn` is not registered and not called).
 */
PETREL_API int petrel_arena_defer(petrel_arena_t *a, void (*fn)(void *), void *data);

/** The current position: pass it to petrel_arena_reset() later. */
PETREL_API petrel_arena_mark_t petrel_arena_mark(const petrel_arena_t *a);

/**
 * Unwind everything allocated and deferred since `m`: run the cleanups
 * (newest first), free large blocks, give chunks back to the pool.
 */
PETREL_API void petrel_arena_reset(petrel_arena_t *a, petrel_arena_mark_t m);

/** Fill `st` with the arena's counters. */
PETREL_API void petrel_arena_stats(const petrel_arena_t *a, petrel_arena_stats_t *st);

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

/** A byte string that is not owned: pointer and length; NUL-terminated
 *  wherever petrel documents it. */
typedef struct petrel_str {
    const char *ptr;
    size_t len;
} petrel_str_t;

/** Methods.  Bit flags, so a route can name several. */
enum {
    PETREL_GET = 1 << 0,
    PETREL_HEAD = 1 << 1,
    PETREL_POST = 1 << 2,
    PETREL_PUT = 1 << 3,
    PETREL_DELETE = 1 << 4,
    PETREL_PATCH = 1 << 5,
    PETREL_OPTIONS = 1 << 6,
    PETREL_ANY = 0x7f
};

/** A request header field.  Name and value are NUL-terminated; the value has
 *  no leading or trailing whitespace.  Valid for the request's lifetime. */
typedef struct petrel_header {
    petrel_str_t name;
    petrel_str_t value;
} petrel_header_t;

/** A path parameter bound by the router (`:name` or the `*` wildcard). */
typedef struct petrel_param {
    petrel_str_t name;
    petrel_str_t value; /**< percent-decoded, NUL-terminated */
} petrel_param_t;

typedef struct petrel_server petrel_server_t;
typedef struct petrel_resp petrel_resp_t;
typedef struct petrel_proto petrel_proto_t;

/**
 * A request, the same whatever protocol carried it.  Every field is read-only
 * for handlers; every string is NUL-terminated and valid until the response
 * has been written (it lives in `arena`).
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
    petrel_param_t *params;   /**< path parameters of the matched route */
    size_t nparams;
    petrel_str_t body;        /**< the whole request body, NUL-terminated */
    petrel_arena_t *arena;    /**< the request scope: allocate freely from it */
    petrel_server_t *server;
    void *route_data;         /**< the `data` of the matched route */
    uint64_t id;              /**< unique per worker, for logs */

    /* private: owned by the protocol module */
    const petrel_proto_t *_proto;
    void *_conn;
    petrel_resp_t *_resp;
    unsigned _flags;
} petrel_req_t;

/** The value of the first header called `name` (any case), or NULL. */
PETREL_API const char *petrel_req_header(const petrel_req_t *req, const char *name);

/** The value of path parameter `name`, or NULL. */
PETREL_API const char *petrel_req_param(const petrel_req_t *req, const char *name);

/**
 * The percent-decoded value of query parameter `name` (first occurrence), in
 * the request arena; "" for `?name`, NULL when absent.
 */
PETREL_API const char *petrel_req_query(petrel_req_t *req, const char *name);

/** The peer address as text ("127.0.0.1", "::1"), in the request arena. */
PETREL_API const char *petrel_req_peer(petrel_req_t *req);

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

/**
 * Add a response header.  Name and value are copied into the request arena.
 * Date, Server, Content-Length, Transfer-Encoding and Connection are petrel's
 * own and are refused (PETREL_EINVAL), as are names or values with CR, LF or
 * NUL.  Call before petrel_send*() / petrel_stream_begin().
 */
PETREL_API int petrel_resp_header(petrel_req_t *req, const char *name, const char *value);

/**
 * Add a trailer field, sent after a streamed body (HTTP/1.1 chunked trailers
 * when the client sent `TE: trailers`, a trailing HEADERS frame on HTTP/2).
 * Copied into the request arena.  Call before petrel_stream_end().
 */
PETREL_API int petrel_resp_trailer(petrel_req_t *req, const char *name, const char *value);

/**
 * Send a whole response.  `body` is NOT copied when it is large: it must stay
 * valid until the response is written -- static storage or the request arena.
 * `type` may be NULL (no Content-Type).  HEAD requests get the same headers
 * and no body.  Returns 0, PETREL_ESTATE if a response was already sent, or
 * PETREL_ENOMEM.
 */
PETREL_API int petrel_send(petrel_req_t *req, int status, const char *type, const void *body,
                           size_t len);

/** petrel_send() with a NUL-terminated body. */
PETREL_API int petrel_send_text(petrel_req_t *req, int status, const char *type, const char *text);

/** petrel_send() after copying `body` into the request arena: for stack data. */
PETREL_API int petrel_send_copy(petrel_req_t *req, int status, const char *type,
                                const void *body, size_t len);

/**
 * Send `len` bytes of file `fd` from `offset` (sendfile on HTTP/1.1).  The fd
 * must stay open until the response is written; with `close_fd` set, petrel
 * closes it then (and on every error path).
 */
PETREL_API int petrel_send_fd(petrel_req_t *req, int status, const char *type, int fd,
                              off_t offset, size_t len, int close_fd);

/** Send `status` with a short default text body ("404 Not Found\n"). */
PETREL_API int petrel_send_status(petrel_req_t *req, int status);

/**
 * Start a streamed response of unknown length (chunked on HTTP/1.1, DATA
 * frames on HTTP/2).  Then petrel_stream_write() any number of times and
 * petrel_stream_end() once, from the handler or later (the request stays
 * alive until the end).
 */
PETREL_API int petrel_stream_begin(petrel_req_t *req, int status, const char *type);

/** Queue `len` bytes of the streamed body (copied). */
PETREL_API int petrel_stream_write(petrel_req_t *req, const void *data, size_t len);

/** End the streamed body, with the trailers added so far. */
PETREL_API int petrel_stream_end(petrel_req_t *req);

/** The standard reason phrase of `status` ("Not Found"), "" if unknown. */
PETREL_API const char *petrel_status_reason(int status);

/* ------------------------------------------------------------------------ */
/* Router and modules                                                        */

/**
 * A handler.  Return 0 when it responded (or started a stream), a status
 * 100-599 to have petrel send that status with a default body, or a negative
 * PETREL_E* code (logged; the client gets 500).
 */
typedef int (*petrel_handler_t)(petrel_req_t *req, void *data);

/**
 * A route: methods (PETREL_* bits), a path pattern and a handler.
 * Patterns: exact segments ("/hello"), parameters ("/kv/:key"), and a
 * trailing wildcard ("/static/ *" without the space) that binds the rest of
 * the path to the parameter "*".  Exact beats parameter beats wildcard.
 * `data` is passed to the handler and is also req->route_data.
 */
typedef struct petrel_route {
    int methods;
    const char *pattern;
    petrel_handler_t handler;
    void *data;
} petrel_route_t;

/** Register a route.  Returns 0, PETREL_EINVAL (bad pattern) or PETREL_ESTATE
 *  (the same method and pattern registered twice). */
PETREL_API int petrel_route_add(petrel_server_t *srv, int methods, const char *pattern,
                                petrel_handler_t handler, void *data);

/**
 * A module descriptor: one per module `.c` file, made by PETREL_MODULE().
 * `init` runs once in the master before workers start, with the module's
 * argument string ("" if none); it may add routes.  `worker_init` and
 * `worker_fini` run in each worker.  Each returns 0 or a negative code (a
 * failing init stops petrel with a message naming the module).
 */
typedef struct petrel_module {
    int abi_version;
    const char *name;
    const petrel_route_t *routes; /**< terminated by a zero entry; may be NULL */
    int (*init)(petrel_server_t *srv, const char *args);
    int (*worker_init)(petrel_server_t *srv);
    void (*worker_fini)(petrel_server_t *srv);
} petrel_module_t;

#ifdef PETREL_BUILTIN_MODULE
#define PETREL_MODULE_ENTRY_(name)
#else
/* Out-of-tree modules (.so) export one well-known symbol for dlsym. */
#define PETREL_MODULE_ENTRY_(name)                                                              \
    PETREL_API const petrel_module_t *petrel_module_entry = &petrel_module_##name;
#endif

/** Declare a module: `PETREL_MODULE(hello, routes, init, NULL, NULL);` */
#define PETREL_MODULE(name, routes, init, worker_init, worker_fini)                             \
    PETREL_API const petrel_module_t petrel_module_##name = {                                   \
        PETREL_ABI_VERSION, #name, routes, init, worker_init, worker_fini};                     \
    PETREL_MODULE_ENTRY_(name)

/**
 * Run the `petrel` command: parse `argv` (see petrel(1)), load modules from
 * `builtins` (a NULL-terminated table) or from files, start the workers and
 * serve until SIGTERM/SIGINT.  Returns the process exit status.  This is how
 * a program embeds petrel with modules of its own linked in.
 */
PETREL_API int petrel_main(int argc, char **argv, const petrel_module_t *const *builtins);

/* ------------------------------------------------------------------------ */
/* Static files (modules/static.c)                                           */

/**
 * Options of a static-file mount.  Fill with petrel_static_opts_init() (the
 * defaults), then change what you need; the struct may grow fields at the
 * end in a later ABI version.  Strings are copied by petrel_static_mount().
 */
typedef struct petrel_static_opts {
    /** Serve DIR/index.html for a request of a directory ("index.html");
     *  NULL or "" for none. */
    const char *index;
    /** An HTML listing for a directory without an index file (default 0:
     *  404). */
    int autoindex;
    /** Cache-Control value of every file response (200, 206, 304); NULL or
     *  "" for no header (the default, as nginx, h2o and lighttpd do). */
    const char *cache_control;
    /** Serve FILE.br / FILE.gz when they exist beside FILE and the client
     *  accepts that encoding, with Content-Encoding and Vary (default 1). */
    int precompressed;
    /** Bytes of memory the cache of one worker may hold for this mount:
     *  file contents, metadata, names (default 64 MiB).  0: nothing is kept
     *  between requests. */
    size_t cache_size;
    /** Files up to this size are kept in memory and served without a file
     *  syscall; larger ones are sent from a cached descriptor (sendfile on
     *  HTTP/1.1).  Default 64 KiB; 0: never in memory. */
    size_t max_file_in_memory;
    /** Open file descriptors the cache of one worker may hold for this
     *  mount (default 1024). */
    size_t max_open_files;
    /** A cached file is checked against the disk (one stat) at most this
     *  often, in milliseconds (default 1000): a file changed, replaced or
     *  deleted on disk is served fresh at most this long after the change.
     *  0: checked on every request. */
    unsigned revalidate_ms;
} petrel_static_opts_t;

/** Fill `opts` with the defaults described above. */
PETREL_API void petrel_static_opts_init(petrel_static_opts_t *opts);

/**
 * Serve the files below directory `dir` at URL prefix `prefix` ("/",
 * "/assets/"; a missing trailing slash is added, and a request of the prefix
 * without it is redirected to it).  Registers GET and HEAD routes
 * `prefix` + "*".  Call at start-up, before the workers start (from a
 * module's init).  `opts` may be NULL (the defaults); it and the strings are
 * copied.
 *
 * Requests are resolved beneath `dir` only (openat2 RESOLVE_BENEATH, or a
 * component walk on kernels without it): symlinks are followed only while
 * they stay inside `dir`; only regular files are served.  Each worker keeps
 * a cache of open files, metadata and small files' bytes (see the options).
 *
 * Returns 0, PETREL_EINVAL (bad prefix, options), PETREL_ENOTFOUND (`dir` is
 * not a readable directory), PETREL_ESTATE (the route exists already) or
 * PETREL_ENOMEM.
 */
PETREL_API int petrel_static_mount(petrel_server_t *srv, const char *prefix, const char *dir,
                                   const petrel_static_opts_t *opts);

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */

typedef struct petrel_timer petrel_timer_t;

/**
 * Run `cb(data)` once, `ms` milliseconds from now, in the calling worker's
 * event loop (call it from a handler, a module's worker_init, or another
 * timer).  Re-arm from the callback for a periodic timer.  Returns a handle,
 * valid until the callback has started or petrel_timer_stop(); NULL when out
 * of memory or outside a worker.
 */
PETREL_API petrel_timer_t *petrel_timer_start(uint64_t ms, void (*cb)(void *data), void *data);

/** Cancel a timer that has not fired yet (the callback will not run). */
PETREL_API void petrel_timer_stop(petrel_timer_t *t);

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */

enum { PETREL_LOG_ERROR = 0, PETREL_LOG_WARN, PETREL_LOG_INFO, PETREL_LOG_DEBUG };

/** Write to the error log when `level` is at or above --log-level. */
PETREL_API void petrel_log(int level, const char *fmt, ...) PETREL_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif /* PETREL_H */
