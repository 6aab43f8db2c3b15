/*
 * petrel/static.h -- the static-file module: serve the files of a
 * directory at a URL prefix, from C.
 *
 * The module is not part of libpetrel.  The `petrel` command has it built
 * in (`--root DIR`, `--module static:...`) and exports these functions to
 * the modules it loads, so a module file (.so) loaded into `petrel` calls
 * them as it calls the rest of the API, linked with nothing more.  A
 * program that embeds petrel with petrel_main() and a built-in module table
 * of its own links the module's library, libpetrel-static (a static
 * library: `pkg-config --cflags --libs petrel-static`), and puts
 * `&petrel_module_static` in its table to have `--root` and `--module
 * static:...`; its own modules may then call petrel_static_mount().
 *
 * The types below are part of the module ABI (PETREL_ABI_VERSION).
 */
#ifndef PETREL_STATIC_H
#define PETREL_STATIC_H

#include <petrel.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Static files (modules/static/)                                            */

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
    /** Content-Type of a file whose extension is not in the module's table
     *  of types, or that has none (as nginx's default_type); NULL or "" for
     *  the default, "application/octet-stream".  Must be a media type
     *  ("text/plain; charset=utf-8"): no CR, LF or other control. */
    const char *default_type;
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
 * a cache of open files, metadata and small files' bytes (see the options);
 * the module's worker_fini frees the caches of every mount when a worker
 * exits, when the module is loaded (as `petrel` does for --root and
 * --module static), else they go with the process.  Conditional requests
 * (304, 412), Range (206, 416) and Accept-Encoding are answered with the
 * HTTP semantics of <petrel.h> (petrel_preconditions(),
 * petrel_range_select(), petrel_accept_encoding()), as any module can.
 *
 * A reload (SIGHUP, --dev) sets the server up again: a mount of the same
 * prefix, directory and options is used again, with the descriptor of the
 * directory it opened first.
 *
 * Returns 0, PETREL_EINVAL (bad prefix, options), PETREL_ENOTFOUND (`dir` is
 * not a readable directory), PETREL_ESTATE (the route exists already) or
 * PETREL_ENOMEM.
 */
PETREL_API int petrel_static_mount(petrel_server_t *srv, const char *prefix, const char *dir,
                                   const petrel_static_opts_t *opts);

/** The module descriptor, for the built-in module table of a program that
 *  embeds petrel (petrel_main()): it gives that program `--root DIR` and
 *  `--module static:[PREFIX=]DIR[,OPTION...]` (see petrel(1)). */
PETREL_API extern const petrel_module_t petrel_module_static;

#ifdef __cplusplus
}
#endif
#endif /* PETREL_STATIC_H */
