/*
 * check_static.c -- unit tests of the static module (modules/static/): the
 * MIME table and the default type, path resolution beneath a root (openat2
 * and the component walk, on the same cases), the module's arguments, and
 * the handler and its cache driven through a real connection in this
 * process (a socketpair adopted by a worker loop): hits make no file
 * syscall and no heap call, a reload never frees bytes still being sent,
 * changes on disk are seen once the revalidation interval has passed.  The
 * same connection drives a handler of generated content through the
 * request forms of the HTTP semantics (petrel_req_preconditions(),
 * petrel_req_range(); the rest of src/framework/semantics.c is check_semantics.c's).
 */
#include "check_server.h"
#include "check_util.h"

#include "server/server.h"
#include "static/static.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* MIME                                                                     */

START_TEST(mime_table)
{
    static const struct {
        const char *name, *type;
    } cases[] = {
        {"index.html", "text/html; charset=utf-8"},
        {"INDEX.HTM", "text/html; charset=utf-8"},
        {"a/b/style.css", "text/css; charset=utf-8"},
        {"app.js", "text/javascript; charset=utf-8"},
        {"mod.mjs", "text/javascript; charset=utf-8"},
        {"data.json", "application/json"},
        {"notes.txt", "text/plain; charset=utf-8"},
        {"feed.xml", "text/xml; charset=utf-8"},
        {"logo.svg", "image/svg+xml"},
        {"p.png", "image/png"},
        {"p.jpg", "image/jpeg"},
        {"p.JPEG", "image/jpeg"},
        {"p.gif", "image/gif"},
        {"p.webp", "image/webp"},
        {"favicon.ico", "image/x-icon"},
        {"m.wasm", "application/wasm"},
        {"f.woff2", "font/woff2"},
        {"doc.pdf", "application/pdf"},
        {"v.mp4", "video/mp4"},
        {"a.tar.gz", "application/gzip"},
        {"README", NULL},
        {".bashrc", NULL},
        {"dir.d/file", NULL},
        {"x.unknownext", NULL},
        {"trailingdot.", NULL},
        {"", NULL},
    };
    const char *def = "text/x-default";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = petrel__static_mime(cases[i].name, strlen(cases[i].name), def);
        ck_assert_msg(cases[i].type ? strcmp(got, cases[i].type) == 0 : got == def, "%s -> %s",
                      cases[i].name, got);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* URI encoding                                                             */

START_TEST(uri_encoding)
{
    char out[64];
    ck_assert_uint_eq(petrel__static_uri_encode("/a b/ü?#%", strlen("/a b/ü?#%"), out), 22);
    ck_assert_str_eq(out, "/a%20b/%C3%BC%3F%23%25");
    petrel__static_uri_encode("/x-y_z.~!$&'()*+,;=:@", 21, out);
    ck_assert_str_eq(out, "/x-y_z.~!$&'()*+,;=:@");
    petrel__static_uri_encode("\r\n\"<>", 5, out);
    ck_assert_str_eq(out, "%0D%0A%22%3C%3E");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Path resolution                                                          */

static char tmpdir[PATH_MAX], root[PATH_MAX + 16];
static int rootfd = -1;

static void write_file(const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void link_at(const char *target, const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
    ck_assert_int_eq(symlink(target, p), 0);
}

static void mkdir_at(const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void tree_setup(void)
{
    char p[PATH_MAX * 2];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_static.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(root, sizeof(root), "%s/root", tmpdir);
    mkdir_at("root");
    mkdir_at("root/sub");
    mkdir_at("root/sub/deeper");
    mkdir_at("root/empty");
    write_file("outside.txt", "secret\n");
    write_file("root/a.txt", "alpha\n");
    write_file("root/sub/b.txt", "bravo\n");
    write_file("root/sub/deeper/c.txt", "charlie\n");
    write_file("root/sub/index.html", "<p>sub</p>\n");
    link_at("sub/b.txt", "root/link-in");
    link_at("sub", "root/link-dir");
    link_at("../outside.txt", "root/link-up");
    snprintf(p, sizeof(p), "%s/a.txt", root);
    link_at(p, "root/link-abs-in");
    snprintf(p, sizeof(p), "%s/outside.txt", tmpdir);
    link_at(p, "root/link-abs-out");
    link_at("/etc/passwd", "root/link-etc");
    link_at("../a.txt", "root/sub/link-back");
    link_at("../../outside.txt", "root/sub/link-esc");
    link_at("deeper/../../a.txt", "root/sub/link-dotdot");
    link_at("loop2", "root/loop1");
    link_at("loop1", "root/loop2");
    link_at("/proc/self/root/etc/passwd", "root/link-proc");
    snprintf(p, sizeof(p), "%s/fifo", root);
    ck_assert_int_eq(mkfifo(p, 0644), 0);
    rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(rootfd, 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

static void tree_teardown(void)
{
    if (rootfd >= 0)
        close(rootfd);
    rootfd = -1;
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int open_rel(int flags, const char *rel, struct stat *st)
{
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(root, real));
    return petrel__static_open(rootfd, real, rel, flags, st);
}

/* Opens `rel` (loop index 0: openat2, 1: the component walk) and checks the
 * content of the regular file it reaches, or the error. */
static void expect_file(int flags, const char *rel, const char *content)
{
    struct stat st;
    int fd = open_rel(flags, rel, &st);
    ck_assert_msg(fd >= 0, "%s: %s", rel, strerror(-fd));
    ck_assert_msg(S_ISREG(st.st_mode), "%s: not a regular file", rel);
    char buf[64] = "";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    ck_assert_msg(n >= 0, "%s: not readable: %s", rel, strerror(errno));
    buf[n] = '\0';
    ck_assert_str_eq(buf, content);
    close(fd);
}

static void expect_err(int flags, const char *rel, int err)
{
    struct stat st;
    int fd = open_rel(flags, rel, &st);
    if (fd >= 0)
        close(fd);
    ck_assert_msg(fd == -err, "%s: got %s, expected %s", rel,
                  fd >= 0 ? "a descriptor" : strerror(-fd), strerror(err));
}

static int mode_flags(int i)
{
    return i == 0 ? 0 : PETREL__STATIC_WALK;
}

START_TEST(resolve_files)
{
    int f = mode_flags(_i);
    if (_i == 0 && !petrel__static_have_openat2(rootfd))
        fprintf(stderr, "check_static: no openat2 here: both loops test the walk\n");
    expect_file(f, "a.txt", "alpha\n");
    expect_file(f, "sub/b.txt", "bravo\n");
    expect_file(f, "sub/deeper/c.txt", "charlie\n");
    expect_file(f, "sub//deeper/./c.txt", "charlie\n");
    expect_file(f, "sub/../a.txt", "alpha\n");
    expect_file(f, "sub/deeper/../../a.txt", "alpha\n");
    expect_err(f, "nope", ENOENT);
    expect_err(f, "sub/nope.txt", ENOENT);
    expect_err(f, "a.txt/x", ENOTDIR);
    expect_err(f, "a.txt/", ENOTDIR);
    expect_err(f, "../outside.txt", EXDEV);
    expect_err(f, "sub/../../outside.txt", EXDEV);
    char longname[NAME_MAX + 10];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    expect_err(f, longname, ENAMETOOLONG);
}
END_TEST

START_TEST(resolve_symlinks)
{
    int f = mode_flags(_i);
    expect_file(f, "link-in", "bravo\n");
    expect_file(f, "link-dir/b.txt", "bravo\n");
    expect_file(f, "link-dir/deeper/c.txt", "charlie\n");
    expect_file(f, "sub/link-back", "alpha\n");
    expect_file(f, "sub/link-dotdot", "alpha\n");
    expect_file(f, "link-abs-in", "alpha\n"); /* absolute, but inside the root */
    expect_err(f, "link-up", EXDEV);
    expect_err(f, "sub/link-esc", EXDEV);
    expect_err(f, "link-abs-out", EXDEV);
    expect_err(f, "link-etc", EXDEV);
    expect_err(f, "link-proc", EXDEV);
    expect_err(f, "link-dir/../../outside.txt", EXDEV);
    expect_err(f, "loop1", ELOOP);
}
END_TEST

START_TEST(resolve_special)
{
    int f = mode_flags(_i);
    struct stat st;
    /* a FIFO comes back as O_PATH, never opened for reading: no blocking */
    int fd = open_rel(f, "fifo", &st);
    ck_assert_int_ge(fd, 0);
    ck_assert(S_ISFIFO(st.st_mode));
    char c;
    ck_assert_int_lt(read(fd, &c, 1), 0);
    ck_assert_int_eq(errno, EBADF);
    close(fd);
    /* a device (needs CAP_MKNOD; skipped without) */
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/null", root);
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        fd = open_rel(f, "null", &st);
        ck_assert_int_ge(fd, 0);
        ck_assert(S_ISCHR(st.st_mode));
        ck_assert_int_lt(read(fd, &c, 1), 0);
        close(fd);
    }
    /* directories */
    fd = open_rel(f, "", &st);
    ck_assert_int_ge(fd, 0);
    ck_assert(S_ISDIR(st.st_mode));
    close(fd);
    fd = open_rel(f, "sub", &st);
    ck_assert_int_ge(fd, 0);
    ck_assert(S_ISDIR(st.st_mode));
    close(fd);
    fd = open_rel(f | PETREL__STATIC_DIR_READ, "link-dir", &st);
    ck_assert_int_ge(fd, 0);
    ck_assert(S_ISDIR(st.st_mode));
    DIR *d = fdopendir(fd);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    ck_assert_int_ge(n, 5); /* . .. b.txt deeper index.html ... */
    closedir(d);
    /* permission denied: only observable without CAP_DAC_OVERRIDE */
    write_file("root/secret.txt", "no\n");
    snprintf(p, sizeof(p), "%s/secret.txt", root);
    chmod(p, 0);
    if (geteuid() != 0)
        expect_err(f, "secret.txt", EACCES);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The handler and its cache, over a socketpair served by this process      */

static int cli = -1;

/* A worker serving one connection, `cli` its other end; the routes (and
 * mounts) were added to `srv` (ck_server_new()) before. */
static void server_start(void)
{
    ck_server_start();
    cli = ck_conn_open(srv);
}

static void server_setup(const petrel_static_opts_t *o)
{
    ck_server_new();
    ck_assert_int_eq(petrel_static_mount(srv, "/", root, o), 0);
    ck_assert_int_eq(petrel_static_mount(srv, "/assets", root, o), 0);
    server_start();
}

static void server_teardown(void)
{
    if (cli >= 0)
        close(cli);
    cli = -1;
    ck_server_stop();
    petrel__static_worker_fini();
    petrel__static_reset();
    ck_server_free();
}

typedef struct resp {
    int status;
    char head[4096];
    char *body;
    size_t len;
} resp_t;

static char rbuf[4 << 20];

/* Send `req`, run the loop until one whole response is back. */
static void exchange(const char *req, bool head, resp_t *r)
{
    size_t n = strlen(req), got = 0;
    ck_assert_int_eq(write(cli, req, n), (ssize_t)n);
    memset(r, 0, sizeof(*r));
    for (int turns = 0; turns < 100000; turns++) {
        petrel__loop_run_once(&srv->loop, 0);
        ssize_t k = read(cli, rbuf + got, sizeof(rbuf) - got);
        if (k > 0)
            got += (size_t)k;
        char *e = memmem(rbuf, got, "\r\n\r\n", 4);
        if (e == NULL)
            continue;
        size_t hl = (size_t)(e + 4 - rbuf);
        size_t cl = 0;
        char *c = memmem(rbuf, hl, "Content-Length: ", 16);
        if (c)
            cl = strtoull(c + 16, NULL, 10);
        if (head)
            cl = 0;
        if (got < hl + cl)
            continue;
        ck_assert_uint_eq(got, hl + cl); /* nothing more than one response */
        ck_assert_uint_lt(hl, sizeof(r->head));
        memcpy(r->head, rbuf, hl);
        r->head[hl] = '\0';
        r->status = atoi(rbuf + 9);
        r->body = rbuf + hl;
        r->len = cl;
        return;
    }
    ck_abort_msg("no complete response to: %s", req);
}

static bool has_header(const resp_t *r, const char *line)
{
    return strstr(r->head, line) != NULL;
}

START_TEST(serve_basic)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    server_setup(&o);
    resp_t r;
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Content-Type: text/plain; charset=utf-8\r\n"));
    ck_assert(has_header(&r, "Accept-Ranges: bytes\r\n"));
    ck_assert(has_header(&r, "ETag: \""));
    ck_assert(has_header(&r, "Last-Modified: "));
    ck_assert(!has_header(&r, "Cache-Control"));
    ck_assert_uint_eq(r.len, 6);
    ck_assert(memcmp(r.body, "alpha\n", 6) == 0);

    exchange("HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", true, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Content-Length: 6\r\n"));

    exchange("GET /sub HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 301);
    ck_assert(has_header(&r, "Location: /sub/\r\n"));
    exchange("GET /sub?a=1&b HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Location: /sub/?a=1&b\r\n"));
    exchange("GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Content-Type: text/html; charset=utf-8\r\n"));
    exchange("GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    exchange("GET /a.txt/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    exchange("GET /fifo HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    exchange("GET /link-up HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    exchange("GET /a%5c.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 400);
    exchange("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 405);

    /* the second mount, and its prefix without the slash */
    exchange("GET /assets/sub/b.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(memcmp(r.body, "bravo\n", 6) == 0);
    exchange("GET /assets?q HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 301);
    ck_assert(has_header(&r, "Location: /assets/?q\r\n"));
    server_teardown();
}
END_TEST

START_TEST(serve_conditional_range)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.cache_control = "public, max-age=60";
    server_setup(&o);
    resp_t r;
    char req[512], etag[64], lm[64];
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Cache-Control: public, max-age=60\r\n"));
    ck_assert_int_eq(sscanf(strstr(r.head, "ETag: ") + 6, "%63[^\r]", etag), 1);
    ck_assert_int_eq(sscanf(strstr(r.head, "Last-Modified: ") + 15, "%63[^\r]", lm), 1);

    snprintf(req, sizeof(req),
             "GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n", etag);
    exchange(req, false, &r);
    ck_assert_int_eq(r.status, 304);
    ck_assert(!has_header(&r, "Content-Length"));
    ck_assert(has_header(&r, "ETag: "));
    ck_assert(has_header(&r, "Cache-Control: public"));
    snprintf(req, sizeof(req),
             "GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: %s\r\n\r\n", lm);
    exchange(req, false, &r);
    ck_assert_int_eq(r.status, 304);
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"nope\"\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 412);

    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=1-3\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 206);
    ck_assert(has_header(&r, "Content-Range: bytes 1-3/8\r\n"));
    ck_assert_uint_eq(r.len, 3);
    ck_assert(memcmp(r.body, "har", 3) == 0);
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=-2\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 206);
    ck_assert(memcmp(r.body, "e\n", 2) == 0);
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=8-\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 416);
    ck_assert(has_header(&r, "Content-Range: bytes */8\r\n"));
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n"
             "If-Range: \"stale\"\r\n\r\n",
             false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 8);
    snprintf(req, sizeof(req),
             "GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n"
             "If-Range: %s\r\n\r\n",
             etag);
    exchange(req, false, &r);
    ck_assert_int_eq(r.status, 206);
    server_teardown();
}
END_TEST

START_TEST(serve_precompressed)
{
    write_file("root/app.js", "console.log('identity');\n");
    write_file("root/app.js.gz", "GZ");
    write_file("root/app.js.br", "BR");
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    server_setup(&o);
    resp_t r;
    exchange("GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Vary: Accept-Encoding\r\n"));
    ck_assert(!has_header(&r, "Content-Encoding"));
    ck_assert_uint_eq(r.len, 25);
    exchange("GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n", false,
             &r);
    ck_assert(has_header(&r, "Content-Encoding: br\r\n"));
    ck_assert(has_header(&r, "Content-Type: text/javascript; charset=utf-8\r\n"));
    ck_assert(has_header(&r, "Vary: Accept-Encoding\r\n"));
    ck_assert_uint_eq(r.len, 2);
    ck_assert(memcmp(r.body, "BR", 2) == 0);
    exchange("GET /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Content-Encoding: gzip\r\n"));
    ck_assert(memcmp(r.body, "GZ", 2) == 0);
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n", false, &r);
    ck_assert(!has_header(&r, "Vary"));
    ck_assert(!has_header(&r, "Content-Encoding"));
    server_teardown();
}
END_TEST

/* A cache hit makes no heap call and no file syscall (the latter is
 * checked by the integration tests with strace; here: the file may vanish
 * and a hit still serves it until the revalidation). */
START_TEST(cache_hits)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.revalidate_ms = 3600 * 1000;
    server_setup(&o);
    resp_t r;
    for (int i = 0; i < 3; i++)
        exchange("GET /sub/b.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    /* no ck_assert while counting: Check allocates even for a passing one */
    int bad = 0;
    uint64_t before = ck_heap.calls;
    for (int i = 0; i < 200 && !bad; i++) {
        if (write(cli, "GET /sub/b.txt HTTP/1.1\r\nHost: x\r\n\r\n", 36) != 36)
            bad = 1;
        size_t got = 0;
        int turns = 0;
        while (!memmem(rbuf, got, "\r\n\r\nbravo\n", 10) && ++turns < 100000) {
            petrel__loop_run_once(&srv->loop, 0);
            ssize_t k = read(cli, rbuf + got, sizeof(rbuf) - got);
            if (k > 0)
                got += (size_t)k;
        }
        if (turns >= 100000)
            bad = 2;
    }
    uint64_t calls = ck_heap.calls - before;
    ck_assert_int_eq(bad, 0);
    if (CK_HEAP_HOOK)
        ck_assert_msg(calls == 0, "%llu heap calls for 200 cached responses",
                      (unsigned long long)calls);
    /* served from memory: removing the file changes nothing within the bound */
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/sub/b.txt", root);
    ck_assert_int_eq(unlink(p), 0);
    exchange("GET /sub/b.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(memcmp(r.body, "bravo\n", 6) == 0);
    server_teardown();
}
END_TEST

/* With revalidation on every request, a change on disk shows at once. */
START_TEST(cache_revalidate)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.revalidate_ms = 0;
    server_setup(&o);
    resp_t r;
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(memcmp(r.body, "alpha\n", 6) == 0);
    write_file("root/a.txt", "alpha, rewritten in place\n");
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_uint_eq(r.len, 26);
    ck_assert(memcmp(r.body, "alpha, rewritten", 16) == 0);
    /* replaced by rename */
    write_file("new.txt", "renamed over\n");
    char a[PATH_MAX * 2], b[PATH_MAX * 2];
    snprintf(a, sizeof(a), "%s/new.txt", tmpdir);
    snprintf(b, sizeof(b), "%s/a.txt", root);
    ck_assert_int_eq(rename(a, b), 0);
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(memcmp(r.body, "renamed over\n", 13) == 0);
    /* deleted */
    ck_assert_int_eq(unlink(b), 0);
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    /* created after a 404 */
    write_file("root/late.txt", "late\n");
    exchange("GET /late.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    /* an index appears in a directory that had none */
    exchange("GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 404);
    write_file("root/empty/index.html", "now\n");
    exchange("GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    server_teardown();
}
END_TEST

/* A cache of 0 bytes keeps nothing: every entry is evicted at once, while
 * its response is still being written; and big files go by descriptor. */
START_TEST(cache_evict_in_flight)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.cache_size = 0;
    o.max_open_files = 0;
    server_setup(&o);
    char big[300000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/big.bin", root);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(big, 1, sizeof(big), f);
    fclose(f);
    resp_t r;
    for (int i = 0; i < 3; i++) {
        exchange("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_uint_eq(r.len, sizeof(big));
        ck_assert(memcmp(r.body, big, sizeof(big)) == 0);
        exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
        ck_assert(memcmp(r.body, "alpha\n", 6) == 0);
    }
    exchange("GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=299990-\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 206);
    ck_assert_uint_eq(r.len, 10);
    ck_assert(memcmp(r.body, big + 299990, 10) == 0);
    server_teardown();
}
END_TEST

START_TEST(serve_autoindex)
{
    write_file("root/empty/<b>&\"x\".txt", "x");
    mkdir_at("root/empty/d ir");
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.autoindex = 1;
    server_setup(&o);
    resp_t r;
    exchange("GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Content-Type: text/html; charset=utf-8\r\n"));
    r.body[r.len - 1] = '\0';
    ck_assert_ptr_nonnull(strstr(r.body, "<a href=\"./d%20ir/\">d ir/</a>"));
    ck_assert_ptr_nonnull(
        strstr(r.body, "<a href=\"./%3Cb%3E&%22x%22.txt\">&lt;b&gt;&amp;&quot;x&quot;.txt</a>"));
    ck_assert_ptr_null(strstr(r.body, "<b>"));
    /* a directory with an index still gets the index */
    exchange("GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(memcmp(r.body, "<p>sub</p>", 10) == 0);
    server_teardown();
}
END_TEST

/* Files of no known extension get the mount's default type. */
START_TEST(serve_default_type)
{
    write_file("root/README", "read me\n");
    write_file("root/x.unknownext", "?");
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    ck_server_new();
    ck_assert_int_eq(petrel_static_mount(srv, "/", root, &o), 0);
    o.default_type = "text/plain; charset=utf-8";
    ck_assert_int_eq(petrel_static_mount(srv, "/t/", root, &o), 0);
    server_start();
    resp_t r;
    exchange("GET /README HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Content-Type: application/octet-stream\r\n"));
    exchange("GET /t/README HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Content-Type: text/plain; charset=utf-8\r\n"));
    exchange("GET /t/x.unknownext HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Content-Type: text/plain; charset=utf-8\r\n"));
    exchange("GET /t/sub/index.html HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert(has_header(&r, "Content-Type: text/html; charset=utf-8\r\n"));
    server_teardown();
}
END_TEST

/* Several ranges (RFC 9110 §14.2): merged into one 206 when they overlap or
 * touch; disjoint ones get the whole file (no multipart/byteranges). */
START_TEST(serve_multi_range)
{
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    server_setup(&o);
    resp_t r;
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=4-5, 0-1,2-3\r\n\r\n",
             false, &r);
    ck_assert_int_eq(r.status, 206);
    ck_assert(has_header(&r, "Content-Range: bytes 0-5/8\r\n"));
    ck_assert_uint_eq(r.len, 6);
    ck_assert(memcmp(r.body, "charli", 6) == 0);
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,-1\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 8);
    ck_assert(!has_header(&r, "Content-Range"));
    exchange("GET /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=8-,20-30\r\n\r\n", false,
             &r);
    ck_assert_int_eq(r.status, 416);
    ck_assert(has_header(&r, "Content-Range: bytes */8\r\n"));
    /* §14.2: Range is for GET only: HEAD gets the 200 head */
    exchange("HEAD /sub/deeper/c.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n", true, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Content-Length: 8\r\n"));
    server_teardown();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Generated content with the request forms of the HTTP semantics           */

static const char gen_body[] = "0123456789abcdefghij"; /* version 7 of a document */

/* GET/PUT /gen: ETag "v7", Last-Modified LMT; what the guide's report.c does */
static int gen(petrel_req_t *req, void *data)
{
    (void)data;
    const time_t lm = 784111777;
    char date[PETREL_HTTP_DATE_SIZE];
    petrel_http_date_format(lm, date);
    if (petrel_resp_header(req, "ETag", "\"v7\"") < 0 ||
        petrel_resp_header(req, "Last-Modified", date) < 0)
        return PETREL_ENOMEM;
    int s = petrel_req_preconditions(req, "\"v7\"", lm);
    if (s)
        return s;
    if (req->method == PETREL_PUT)
        return petrel_send_text(req, 200, "text/plain", "stored\n");
    petrel_range_t r;
    s = petrel_req_range(req, sizeof(gen_body) - 1, "\"v7\"", lm, &r);
    if (s == 206)
        return petrel_send(req, 206, "text/plain", gen_body + r.off, (size_t)r.len);
    if (s)
        return s;
    return petrel_send(req, 200, "text/plain", gen_body, sizeof(gen_body) - 1);
}

START_TEST(generated)
{
    ck_server_new();
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET | PETREL_PUT, "/gen", gen, NULL), 0);
    server_start();
    resp_t r;
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 20);
    /* RFC 9110 §15.4.5: a 304 has the ETag and Last-Modified a 200 has */
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v6\", W/\"v7\"\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 304);
    ck_assert(has_header(&r, "ETag: \"v7\"\r\n"));
    ck_assert(has_header(&r, "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"));
    ck_assert_uint_eq(r.len, 0);
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT"
             "\r\n\r\n",
             false, &r);
    ck_assert_int_eq(r.status, 304);
    /* §14.2, §14.4: one range, with its Content-Range */
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\nRange: bytes=10-\r\nIf-Range: \"v7\"\r\n\r\n", false,
             &r);
    ck_assert_int_eq(r.status, 206);
    ck_assert(has_header(&r, "Content-Range: bytes 10-19/20\r\n"));
    ck_assert_uint_eq(r.len, 10);
    ck_assert(memcmp(r.body, "abcdefghij", 10) == 0);
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\nRange: bytes=20-\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 416);
    ck_assert(has_header(&r, "Content-Range: bytes */20\r\n"));
    /* §13.1.5: a stale If-Range: the whole document */
    exchange("GET /gen HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\nIf-Range: \"v6\"\r\n\r\n", false,
             &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(!has_header(&r, "Content-Range"));
    /* a PUT: If-Match protects against lost updates; If-None-Match: * only
     * creates (§13.1.1, §13.1.2) */
    exchange("PUT /gen HTTP/1.1\r\nHost: x\r\nIf-Match: \"v6\"\r\nContent-Length: 1\r\n\r\nx",
             false, &r);
    ck_assert_int_eq(r.status, 412);
    exchange("PUT /gen HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\nContent-Length: 1\r\n\r\nx",
             false, &r);
    ck_assert_int_eq(r.status, 412);
    exchange("PUT /gen HTTP/1.1\r\nHost: x\r\nIf-Match: \"v7\"\r\nContent-Length: 1\r\n\r\nx",
             false, &r);
    ck_assert_int_eq(r.status, 200);
    server_teardown();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The module: its arguments, and --root                                    */

/* The module's init with `args` on a fresh server: its result. */
static int module_args(const char *args)
{
    srv = petrel__server_new();
    ck_assert_ptr_nonnull(srv);
    return petrel_module_static.init(srv, args);
}

static void module_args_done(void)
{
    petrel__static_reset();
    petrel__server_free(srv);
    srv = NULL;
}

START_TEST(module_arguments)
{
    char dir[PATH_MAX * 2], args[PATH_MAX * 6];
    snprintf(dir, sizeof(dir), "%s/a \"quoted\", dir; name", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof(dir), "%s/a \"quoted\", dir; name/f", tmpdir);
    FILE *f = fopen(dir, "w");
    ck_assert_ptr_nonnull(f);
    fputs("quoted\n", f);
    fclose(f);
    /* three mounts; a quoted directory, quoted values with , ; and \" */
    snprintf(args, sizeof(args),
             "%s;assets=%s,autoindex,cache-size=1m,max-file-in-memory=0,max-open-files=8,"
             "revalidate-ms=0,precompressed=off,index=;"
             "/q/=\"%s/a \\\"quoted\\\", dir; name\",cache-control=\"public, max-age=1\","
             "default-type=\"text/plain; charset=\\\"utf-8\\\"\"",
             root, root, tmpdir);
    ck_assert_int_eq(module_args(args), 0);
    ck_assert_uint_eq(petrel__static_nmounts, 3);
    server_start();
    resp_t r;
    exchange("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    /* the second mount: no index, autoindex on */
    exchange("GET /assets/sub/ HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    r.body[r.len - 1] = '\0';
    ck_assert_ptr_nonnull(strstr(r.body, "Index of /assets/sub/"));
    exchange("GET /q/f HTTP/1.1\r\nHost: x\r\n\r\n", false, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(has_header(&r, "Cache-Control: public, max-age=1\r\n"));
    ck_assert(has_header(&r, "Content-Type: text/plain; charset=\"utf-8\"\r\n"));
    ck_assert(memcmp(r.body, "quoted\n", 7) == 0);
    server_teardown();

    /* refused: each with a message (not checked here: petrel_log) */
    static const char *const bad[] = {
        "",
        "/x=",
        ",autoindex",
        "/x=\"unterminated",
        "/x=DIR,nosuch",
        "/x=DIR,autoindex=maybe",
        "/x=DIR,cache-size=-1",
        "/x=DIR,cache-size=2g0",
        "/x=DIR,max-open-files=99999999",
        "/x=DIR,default-type=plain",
        "/x=DIR,cache-control=\"a\001b\"",
        "/x=DIR,index=../up",
        "/x=DIR\"junk\"",
        "/x=/nonexistent/dir",
        "/x=DIR;/x=DIR", /* the same prefix twice */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char a[PATH_MAX * 4] = "";
        /* DIR: the root */
        const char *d = strstr(bad[i], "DIR");
        if (d) {
            snprintf(a, sizeof(a), "%.*s%s%s", (int)(d - bad[i]), bad[i], root, d + 3);
            const char *d2 = strstr(a + (d - bad[i]) + strlen(root), "DIR");
            if (d2) {
                char b[PATH_MAX * 4];
                snprintf(b, sizeof(b), "%.*s%s%s", (int)(d2 - a), a, root, d2 + 3);
                snprintf(a, sizeof(a), "%s", b);
            }
        } else {
            snprintf(a, sizeof(a), "%s", bad[i]);
        }
        int rc = module_args(a);
        ck_assert_msg(rc < 0, "'%s' accepted", a);
        module_args_done();
    }
}
END_TEST

/* A reload makes the same mounts again: the ones of the same prefix,
 * directory and options are used again; another default type is another
 * mount. */
START_TEST(module_reload)
{
    char args[PATH_MAX * 2];
    snprintf(args, sizeof(args), "/=%s,default-type=text/a", root);
    ck_assert_int_eq(module_args(args), 0);
    petrel_server_t *s2 = petrel__server_new();
    ck_assert_int_eq(petrel_module_static.init(s2, args), 0);
    ck_assert_uint_eq(petrel__static_nmounts, 1);
    petrel_server_t *s3 = petrel__server_new();
    snprintf(args, sizeof(args), "/=%s,default-type=text/b", root);
    ck_assert_int_eq(petrel_module_static.init(s3, args), 0);
    ck_assert_uint_eq(petrel__static_nmounts, 2);
    petrel__server_free(s2);
    petrel__server_free(s3);
    module_args_done();
}
END_TEST

/* --root in a program whose built-in modules do not include static: a
 * message that says so, status 1 (libpetrel has no static module). */
START_TEST(root_without_module)
{
    static const petrel_module_t *const none[] = {NULL};
    char *argv[] = {"petrel", "--listen", "127.0.0.1:0", "--root", root, NULL};
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    int saved = dup(2);
    dup2(p[1], 2);
    int rc = petrel_main(5, argv, none);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    char msg[1024] = "";
    ssize_t n = read(p[0], msg, sizeof(msg) - 1);
    close(p[0]);
    msg[n > 0 ? n : 0] = '\0';
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(msg, "--root") && strstr(msg, "no built-in module 'static'"), "%s", msg);
}
END_TEST

START_TEST(mount_errors)
{
    petrel_server_t *s = petrel__server_new();
    ck_assert_int_eq(petrel_static_mount(s, "nope", root, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_static_mount(s, "/a//b/", root, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_static_mount(s, "/:x/", root, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_static_mount(s, "/../", root, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel_static_mount(s, "/x/", "/nonexistent/dir", NULL), PETREL_ENOTFOUND);
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/a.txt", root);
    ck_assert_int_eq(petrel_static_mount(s, "/x/", p, NULL), PETREL_ENOTFOUND);
    ck_assert_int_eq(petrel_static_mount(s, "/x/", root, NULL), 0);
    ck_assert_int_eq(petrel_static_mount(s, "/x", root, NULL), PETREL_ESTATE);
    /* a reload sets a fresh server up again: the same mount is used again */
    petrel_server_t *s2 = petrel__server_new();
    ck_assert_int_eq(petrel_static_mount(s2, "/x", root, NULL), 0);
    ck_assert_int_eq(petrel_static_mount(s2, "/x/", root, NULL), PETREL_ESTATE);
    petrel__static_reset();
    petrel__server_free(s);
    petrel__server_free(s2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Regressions found by the fuzzing harnesses (tests/fuzz)                  */

/* The listing of an empty directory (or of one with hidden files only)
 * called qsort(NULL, 0, ...): undefined, reported by UBSan (fuzz_http1,
 * GET of an empty directory with autoindex on). */
START_TEST(fuzz_autoindex_empty)
{
    mkdir_at("root/void");
    mkdir_at("root/hidden");
    write_file("root/hidden/.dot", "x");
    petrel_static_opts_t o;
    petrel_static_opts_init(&o);
    o.autoindex = 1;
    server_setup(&o);
    resp_t r;
    static const char *const reqs[] = {"GET /void/ HTTP/1.1\r\nHost: x\r\n\r\n",
                                       "GET /hidden/ HTTP/1.1\r\nHost: x\r\n\r\n"};
    for (int i = 0; i < 2; i++) {
        exchange(reqs[i], false, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_uint_gt(r.len, 0);
        r.body[r.len - 1] = '\0';
        ck_assert_ptr_nonnull(strstr(r.body, i ? "Index of /hidden/" : "Index of /void/"));
        ck_assert_ptr_null(strstr(r.body, ".dot"));
    }
    server_teardown();
}
END_TEST

/* End of the fuzz regressions. */

static Suite *suite(void)
{
    Suite *s = suite_create("static");
    TCase *tc = tcase_create("headers");
    tcase_add_test(tc, mime_table);
    tcase_add_test(tc, uri_encoding);
    suite_add_tcase(s, tc);

    tc = tcase_create("resolve");
    tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
    tcase_add_loop_test(tc, resolve_files, 0, 2);
    tcase_add_loop_test(tc, resolve_symlinks, 0, 2);
    tcase_add_loop_test(tc, resolve_special, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("serve");
    tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, serve_basic);
    tcase_add_test(tc, serve_conditional_range);
    tcase_add_test(tc, serve_precompressed);
    tcase_add_test(tc, serve_autoindex);
    tcase_add_test(tc, cache_hits);
    tcase_add_test(tc, cache_revalidate);
    tcase_add_test(tc, cache_evict_in_flight);
    tcase_add_test(tc, mount_errors);
    tcase_add_test(tc, serve_default_type);
    tcase_add_test(tc, serve_multi_range);
    tcase_add_test(tc, generated);
    tcase_add_test(tc, module_arguments);
    tcase_add_test(tc, module_reload);
    tcase_add_test(tc, root_without_module);
    suite_add_tcase(s, tc);

    /* regressions found by the fuzzing harnesses (tests/fuzz) */
    tc = tcase_create("fuzz");
    tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, fuzz_autoindex_empty);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
