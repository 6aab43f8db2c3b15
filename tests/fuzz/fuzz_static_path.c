/*
 * fuzz_static_path.c -- the static handler's path resolution
 * (petrel__static_open in modules/static/resolve.c): whatever the path, nothing
 * outside the root is ever opened or returned.
 *
 * The root is a temporary directory with files, directories, a FIFO and
 * symlinks: relative and absolute ones that stay inside, ones that point
 * outside (to a sibling directory holding a "secret" file, and to "/"), a
 * dangling one and a loop.  Input: one flag byte, then the path.  Flag bits:
 *   0  PETREL__STATIC_WALK (the component walk instead of openat2)
 *   1  PETREL__STATIC_DIR_READ
 *   2  run the path through petrel__path_normalize first and strip its
 *      leading '/', as the handler does with a request path
 *   3  no root_real (absolute symlinks are never taken to be inside)
 * Asserted: nothing outside the root is opened for reading, even on the
 * way to a refusal (an inotify watch on the directory beside it); and for
 * every descriptor returned: it is the file `st` describes,
 * its path (/proc/self/fd) is the root or beneath it, a regular file is
 * readable and anything else is not opened for reading; no descriptor is
 * left open afterwards; the call returns promptly (a FIFO must not block).
 */
#include "protocols/proto.h"

#include "static/static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char tmp_dir[256];
static char root_real[PATH_MAX];
static size_t root_len;
static int rootfd = -1;
static int outside_watch = -1; /* inotify: opens and reads outside the root */

__attribute__((noreturn)) static void die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz_static_path: %s: '%s'\n", what, path);
    abort();
}

static void remove_tmp(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_static_path: could not remove %s\n", tmp_dir);
}

static void mk(const char *kind, const char *rel, const char *target)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", tmp_dir, rel);
    int rc;
    if (strcmp(kind, "dir") == 0) {
        rc = mkdir(p, 0755);
    } else if (strcmp(kind, "file") == 0) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        rc = fd < 0 ? -1 : (int)write(fd, rel, strlen(rel)) - (int)strlen(rel);
        if (fd >= 0)
            close(fd);
    } else if (strcmp(kind, "fifo") == 0) {
        rc = mkfifo(p, 0644);
    } else {
        rc = symlink(target, p);
    }
    if (rc != 0)
        die("cannot make the test root", p);
}

static void init(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof(tmp_dir), "%s/petrel-fuzz-static.XXXXXX", t && *t ? t : "/tmp");
    if (mkdtemp(tmp_dir) == NULL)
        die("mkdtemp", tmp_dir);
    atexit(remove_tmp);
    char abs_in[600], abs_out[600];
    mk("dir", "root", NULL);
    mk("dir", "outside", NULL);
    mk("file", "outside/secret", NULL);
    mk("file", "root/a.txt", NULL);
    mk("file", "root/index.html", NULL);
    mk("dir", "root/sub", NULL);
    mk("file", "root/sub/b.txt", NULL);
    mk("dir", "root/sub/deeper", NULL);
    mk("file", "root/sub/deeper/c.css", NULL);
    mk("fifo", "root/fifo", NULL);
    mk("link", "root/in", "sub");
    mk("link", "root/sub/back", "../a.txt");
    mk("link", "root/out", "../outside");
    mk("link", "root/secret", "../outside/secret");
    mk("link", "root/sub/up", "../../outside/secret");
    mk("link", "root/slash", "/");
    mk("link", "root/dangling", "nothing-here");
    mk("link", "root/loop", "loop");
    mk("link", "root/dotdot", "..");
    snprintf(abs_in, sizeof(abs_in), "%s/root/sub", tmp_dir);
    mk("link", "root/absin", abs_in);
    snprintf(abs_out, sizeof(abs_out), "%s/outside", tmp_dir);
    mk("link", "root/absout", abs_out);
    snprintf(abs_in, sizeof(abs_in), "%s/root", tmp_dir);
    if (realpath(abs_in, root_real) == NULL)
        die("realpath", abs_in);
    root_len = strlen(root_real);
    rootfd = open(root_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        die("open root", root_real);
    /* nothing beside the root may be opened for reading, even to be
     * refused afterwards (O_PATH descriptors, which cannot read, are not
     * reported) */
    outside_watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (outside_watch < 0 || inotify_add_watch(outside_watch, abs_out, IN_OPEN | IN_ACCESS) < 0)
        die("inotify", abs_out);
}

static int lowest_free_fd(void)
{
    int fd = dup(0);
    if (fd >= 0)
        close(fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (rootfd < 0)
        init();
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    char *path = malloc(size);
    memcpy(path, data + 1, size - 1);
    path[size - 1] = '\0';
    const char *rel = path;
    char *norm = NULL;
    if (mode & 4) {
        size_t l = strlen(path);
        norm = malloc(l + 2);
        if (petrel__path_normalize(path, l, norm) < 0) {
            free(norm);
            free(path);
            return 0;
        }
        rel = norm + 1;
    }
    int flags = ((mode & 1) ? PETREL__STATIC_WALK : 0) | ((mode & 2) ? PETREL__STATIC_DIR_READ : 0);
    int before = lowest_free_fd();
    struct stat st;
    int fd = petrel__static_open(rootfd, (mode & 8) ? NULL : root_real, rel, flags, &st);
    if (fd >= 0) {
        char link[64], where[PATH_MAX + 1];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, where, PATH_MAX);
        if (n < 0)
            die("readlink of the result", rel);
        where[n] = '\0';
        if (strncmp(where, root_real, root_len) != 0 ||
            (where[root_len] != '\0' && where[root_len] != '/'))
            die("resolved outside the root", rel);
        struct stat st2;
        if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
            die("st does not describe the descriptor", rel);
        int acc = fcntl(fd, F_GETFL);
        bool readable = acc >= 0 && !(acc & O_PATH) && (acc & O_ACCMODE) != O_WRONLY;
        if (S_ISREG(st.st_mode) && !readable)
            die("a regular file came back unreadable", rel);
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && readable)
            die("something that is neither a file nor a directory was opened", rel);
        if (S_ISDIR(st.st_mode) && readable && !(flags & PETREL__STATIC_DIR_READ))
            die("a directory was opened for reading without DIR_READ", rel);
        close(fd);
    } else if (fd == -EBADF || fd == -EFAULT || fd == -EINVAL) {
        die("unexpected error", rel);
    }
    if (lowest_free_fd() != before)
        die("a descriptor leaked", rel);
    char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    if (read(outside_watch, ev, sizeof(ev)) > 0)
        die("something outside the root was opened for reading", rel);
    free(norm);
    free(path);
    return 0;
}
