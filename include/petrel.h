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
    PETREL_EIO = -4,       /**< I/O error, the connection is gone */
    PETREL_ENOTFOUND = -5, /**< no such thing (module, file, route) */
    PETREL_ELIMIT = -6     /**< a configured limit was reached */
};

/** A static, human-readable message for a PETREL_E* code. */
PETREL_API const char *petrel_strerror(int err);

/* ------------------------------------------------------------------------ */
/* Arena                                                                     */

/**
 * A bump allocator over a list of chunks taken from the worker's chunk pool.
 * No per-object free: memory is returned by petrel_arena_reset() to a mark,
 * or when the arena's owner (a connection, a stream) goes away.
 * A block larger than a quarter of a chunk that does not fit in the current
 * chunk gets a heap block of its own, freed by the reset that unwinds it.  An arena has a byte limit: past it,
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

/**
 * The server: configuration, routes and modules.  Opaque.  One per process;
 * a module gets it in its init (in the master, before the workers fork) and
 * worker_init, and a handler finds it in req->server.  Valid for as long as
 * the process runs.
 */
typedef struct petrel_server petrel_server_t;
/** The response being built for a request (private: use petrel_send*()). */
typedef struct petrel_resp petrel_resp_t;
/** The protocol that carried a request (private: HTTP/1.1 or HTTP/2). */
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
    /* private: its start, for the metrics and the access log (proto.h) */
    uint64_t _t0; /* ns, monotonic */
    size_t _a0;   /* bytes of `arena` when its scope began */
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
/* Built into a program: the descriptor petrel_module_NAME goes into the
 * table of built-in modules passed to petrel_main(). */
#define PETREL_MODULE_DESC_(name) PETREL_API const petrel_module_t petrel_module_##name
#define PETREL_MODULE_ENTRY_(name)
#else
/* A module file (.so): the descriptor is private (a petrel binary with a
 * built-in module of the same name must not take its place), and one
 * well-known symbol points to it for dlsym(). */
#define PETREL_MODULE_DESC_(name) static const petrel_module_t petrel_module_##name
#define PETREL_MODULE_ENTRY_(name)                                                              \
    PETREL_API const petrel_module_t *petrel_module_entry = &petrel_module_##name;
#endif

/**
 * Declare the module of this file:
 * `PETREL_MODULE(hello, routes, init, worker_init, worker_fini)`, with NULL
 * for what the module does not have.  `name` is a C identifier, the name
 * petrel reports the module by (and, for a built-in module, the NAME of
 * `--module NAME`); `routes` a route table ending in a zero entry, or NULL.
 * Built as a shared object, the file then exports `petrel_module_entry`,
 * which `--module PATH.so` looks up; built with -DPETREL_BUILTIN_MODULE, it
 * defines `petrel_module_NAME` for a table of built-in modules instead.
 */
#define PETREL_MODULE(name, routes, init, worker_init, worker_fini)                             \
    PETREL_MODULE_DESC_(name) = {                                                               \
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

/** A timer of petrel_timer_start() (opaque). */
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
/* WebSocket (src/ws.c) -- begin                                             */

/**
 * A WebSocket connection (RFC 6455), made by a route of
 * petrel_ws_route_add().  It belongs to the worker that accepted it: use it
 * only from that worker's thread (its callbacks, its timers, other handlers
 * of the same worker).  Valid from on_open until on_close returns; not after.
 */
typedef struct petrel_ws petrel_ws_t;

/**
 * What a WebSocket endpoint does.  Any callback may be NULL.  The struct is
 * copied by petrel_ws_route_add(); `subprotocols` is not (static storage).
 */
typedef struct petrel_ws_handler {
    /**
     * The handshake was accepted: the 101 response is queued.  `req` (the
     * upgrade request: path, query, headers, parameters) is valid during
     * this call only.  May send (the messages follow the 101) or close.
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
     *  under 32 bytes, or that do not shrink, are sent as they are). */
    int no_compression;
} petrel_ws_handler_t;

/**
 * Register a WebSocket endpoint: a GET route `pattern` (the syntax of
 * petrel_route_add()) that performs the opening handshake (RFC 6455 §4.2):
 * Upgrade: websocket, Connection: Upgrade, a Sec-WebSocket-Key of 16 bytes
 * in base64 and Sec-WebSocket-Version: 13, over HTTP/1.1.  A request
 * without them gets 400, another version 426 with Sec-WebSocket-Version: 13,
 * a refusal of check_origin its status, a draining server 503.  `data` is
 * the initial user data of every connection (petrel_ws_get_data()).
 *
 * Then petrel runs the protocol: pings are answered, a connection silent
 * for --ws-idle-timeout gets a ping and is closed if it stays silent as long
 * again; a Close is answered with the same code; every frame is checked
 * (unmasked frames, reserved bits, unknown opcodes, fragmented or long
 * control frames, invalid close codes: 1002; text that is not UTF-8: 1007;
 * a message over the size limit: 1009).  permessage-deflate (RFC 7692) is
 * accepted when the client offers it (browsers do), unless the handler says
 * no_compression.  At shutdown, open connections get Close 1001.  Call at start-up (from a module's init).  Returns 0,
 * PETREL_EINVAL, PETREL_ESTATE (the route exists) or PETREL_ENOMEM.
 */
PETREL_API int petrel_ws_route_add(petrel_server_t *srv, const char *pattern,
                                   const petrel_ws_handler_t *handler, void *data);

/**
 * Send a text message (`text` must be UTF-8: else PETREL_EINVAL) or a
 * binary one, as one frame.  The bytes are copied into the connection's
 * output: `data` may go away after the call.  Works from any code of the
 * connection's worker (callbacks, timers, other connections' handlers):
 * output queued outside the connection's own callbacks is written at the
 * end of the loop turn.
 *
 * Backpressure: while output waits for the socket, petrel stops reading
 * from the peer.  A send that finds more than --ws-send-limit bytes
 * (default 4 MiB) queued and unwritten is refused: the connection is closed
 * with 1008 and PETREL_EIO returned.  Returns 0, PETREL_EINVAL,
 * PETREL_ESTATE (closing or closed), PETREL_EIO or PETREL_ENOMEM.
 */
PETREL_API int petrel_ws_send_text(petrel_ws_t *ws, const char *text, size_t len);

/** Send a binary message; see petrel_ws_send_text(). */
PETREL_API int petrel_ws_send_binary(petrel_ws_t *ws, const void *data, size_t len);

/**
 * Start the closing handshake: send a Close frame with `code` (1000-1003,
 * 1007-1014 or 3000-4999; 0 for none, then `reason` must be NULL or "") and
 * `reason` (NULL or UTF-8 of at most 123 bytes).  Messages that arrive
 * afterwards are dropped; on_close runs with the peer's answer, or 1006
 * when none comes within --ws-idle-timeout.  Returns 0, PETREL_EINVAL or
 * PETREL_ESTATE (already closing).
 */
PETREL_API int petrel_ws_close(petrel_ws_t *ws, int code, const char *reason);

/** The user data of the connection (initially the route's `data`). */
PETREL_API void *petrel_ws_get_data(const petrel_ws_t *ws);

/** Set the user data of the connection. */
PETREL_API void petrel_ws_set_data(petrel_ws_t *ws, void *data);

/** The subprotocol selected at the handshake, or NULL. */
PETREL_API const char *petrel_ws_subprotocol(const petrel_ws_t *ws);

/* WebSocket -- end                                                          */

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */

/** Log levels of petrel_log(), and of --log-level error|warn|info|debug. */
enum { PETREL_LOG_ERROR = 0, PETREL_LOG_WARN, PETREL_LOG_INFO, PETREL_LOG_DEBUG };

/**
 * Write to the error log when `level` is at or above --log-level.  A line
 * written while a handler runs (or petrel_stream_write/petrel_stream_end)
 * carries the request's id: "request ID: " before the message.
 */
PETREL_API void petrel_log(int level, const char *fmt, ...) PETREL_PRINTF(2, 3);

/**
 * petrel_log() about `req`, from anywhere its handler has it (a timer, a
 * callback of a library): the line carries "request ID: ", the id of the
 * JSON access log's "request_id".  `req` must still be valid (its response
 * not yet complete).
 */
PETREL_API void petrel_req_log(const petrel_req_t *req, int level, const char *fmt, ...)
    PETREL_PRINTF(3, 4);

/* ------------------------------------------------------------------------ */
/* Metrics and readiness (the admin listener: --admin-listen)                */

/** A metric of a module (opaque), from petrel_metric_counter/gauge(). */
typedef struct petrel_metric petrel_metric_t;

/**
 * Register a counter that /metrics reports, summed over the workers of the
 * instance and never going backwards while it runs (the counts of a worker
 * that exits are kept).  `name` follows Prometheus' rules
 * ([a-zA-Z_:][a-zA-Z0-9_:]*, at most 63 bytes; counters should end in
 * "_total"), `help` is one line (at most 127 bytes; copied).  Call it from
 * a module's init or another start-up path of the master (before the
 * workers fork); registering a name again (a reload) returns the same
 * metric.  Returns NULL for a bad name or help, a name registered with the
 * other kind, 64 metrics already, or a call from a worker.  The handle is
 * valid until exit, in the master and every worker.
 */
PETREL_API petrel_metric_t *petrel_metric_counter(petrel_server_t *srv, const char *name,
                                                  const char *help);

/** Register a gauge (a value that goes up and down, summed over the workers
 *  alive); as petrel_metric_counter(). */
PETREL_API petrel_metric_t *petrel_metric_gauge(petrel_server_t *srv, const char *name,
                                                const char *help);

/**
 * Add `n` to the calling worker's share of a metric (a counter takes n >= 0
 * only).  A plain addition to memory the worker alone writes: cheap enough
 * for every request.  NULL `m` is allowed and does nothing.
 */
PETREL_API void petrel_metric_add(petrel_metric_t *m, int64_t n);

/** Set the calling worker's share of a gauge to `v`.  NULL `m`: nothing. */
PETREL_API void petrel_metric_set(petrel_metric_t *m, int64_t v);

/**
 * Tell /readyz whether something the worker's requests need is there (a
 * database pool: ready 0 while it is down, 1 once it is back).  While any
 * worker reports a check down, /readyz answers 503 and names it, so that a
 * load balancer sends the requests elsewhere.  `check` is a name of at most
 * 31 bytes; a worker holds at most 8.  Call from a worker (worker_init, a
 * handler, a timer).  Returns 0, PETREL_EINVAL, PETREL_ELIMIT (8 already)
 * or PETREL_ESTATE (not in a worker).
 */
PETREL_API int petrel_ready_set(petrel_server_t *srv, const char *check, int ready);

#ifdef __cplusplus
}
#endif
#endif /* PETREL_H */
