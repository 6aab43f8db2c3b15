/*
 * resolve.c -- opening a path beneath the root directory of a mount, without
 * ever leaving it: openat2 with RESOLVE_BENEATH where the kernel has it, a
 * walk of one component at a time (O_PATH | O_NOFOLLOW, fstat, readlinkat)
 * where it does not, and in both cases symlinks followed only while they
 * stay beneath the root.  Nothing is opened for reading before it is known
 * to be a regular file: no FIFO blocks, no device is opened.
 */
#include "static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2_H 1
#endif
#endif

#define WALK_DEPTH 256 /* directories deep, for the component walk */
#define WALK_LINKS 40  /* symlinks followed in one resolution (as the kernel) */

static int openat2_state = -1; /* -1 unknown, 0 not available, 1 works */

static int sys_openat2(int dirfd, const char *path, int flags)
{
#if defined(SYS_openat2) && defined(HAVE_OPENAT2_H)
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int i = 0; i < 8; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        /* EAGAIN: a rename raced with a ".." lookup; try again */
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
    }
    return -EAGAIN;
#else
    (void)dirfd;
    (void)path;
    (void)flags;
    return -ENOSYS;
#endif
}

int petrel__static_have_openat2(int rootfd)
{
    if (openat2_state < 0) {
        int fd = sys_openat2(rootfd, ".", O_PATH | O_CLOEXEC);
        /* ENOSYS: an old kernel; EPERM: a seccomp filter that does not know it */
        openat2_state = fd >= 0 ? 1 : (fd == -ENOSYS || fd == -EPERM) ? 0 : 1;
        if (fd >= 0)
            close(fd);
    }
    return openat2_state;
}

/* Reopen what `pfd` (O_PATH) found, for reading, by the same resolution;
 * refuse if another file took its place in between. */
static int reopen_checked(int fd, struct stat *st, int flags)
{
    if (fd < 0)
        return fd;
    struct stat s2;
    if (fstat(fd, &s2) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (s2.st_dev != st->st_dev || s2.st_ino != st->st_ino ||
        ((flags & O_DIRECTORY) ? !S_ISDIR(s2.st_mode) : !S_ISREG(s2.st_mode))) {
        close(fd);
        return -EAGAIN;
    }
    *st = s2;
    return fd;
}

#define READ_FLAGS (O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC)

static int walk_open(int rootfd, const char *root_real, const char *path, int flags,
                     struct stat *st)
{
    static char rest[2][2 * PATH_MAX];
    int dirs[WALK_DEPTH];
    int depth = 0, links = 0, cur = 0, rc;
    size_t n = strlen(path);
    if (n >= sizeof(rest[0]))
        return -ENAMETOOLONG;
    memcpy(rest[0], path, n + 1);
    const char *p = rest[0];
    dirs[depth] = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirs[depth] < 0)
        return -errno;
    depth++;
    for (;;) {
        while (*p == '/')
            p++;
        if (*p == '\0') {
            /* the path ends at the directory on top of the stack */
            int d = dirs[depth - 1];
            if (fstat(d, st) < 0) {
                rc = -errno;
            } else if (flags & PETREL__STATIC_DIR_READ) {
                rc = openat(d, ".", DIR_FLAGS);
                rc = rc < 0 ? -errno : reopen_checked(rc, st, O_DIRECTORY);
            } else {
                rc = d;
                depth--; /* handed to the caller */
            }
            goto out;
        }
        const char *e = strchrnul(p, '/');
        size_t cl = (size_t)(e - p);
        char name[NAME_MAX + 1];
        if (cl > NAME_MAX) {
            rc = -ENAMETOOLONG;
            goto out;
        }
        memcpy(name, p, cl);
        name[cl] = '\0';
        p = e;
        bool slash = *p == '/', last = true;
        for (const char *q = p; *q; q++)
            if (*q != '/') {
                last = false;
                break;
            }
        if (cl == 1 && name[0] == '.')
            continue;
        if (cl == 2 && name[0] == '.' && name[1] == '.') {
            if (depth == 1) {
                rc = -EXDEV; /* above the root */
                goto out;
            }
            close(dirs[--depth]);
            continue;
        }
        int fd = openat(dirs[depth - 1], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            goto out;
        }
        struct stat s;
        if (fstat(fd, &s) < 0) {
            rc = -errno;
            close(fd);
            goto out;
        }
        if (S_ISLNK(s.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlinkat(fd, "", target, sizeof(target) - 1);
            close(fd);
            if (++links > WALK_LINKS) {
                rc = -ELOOP;
                goto out;
            }
            if (tl <= 0) {
                rc = tl < 0 ? -errno : -ENOENT;
                goto out;
            }
            target[tl] = '\0';
            const char *t = target;
            if (t[0] == '/') {
                /* absolute: only when it names a place inside the root */
                size_t rl = root_real ? strlen(root_real) : 0;
                if (rl == 1 && root_real[0] == '/')
                    t = target + 1;
                else if (rl > 1 && strncmp(target, root_real, rl) == 0 &&
                         (target[rl] == '/' || target[rl] == '\0'))
                    t = target + rl;
                else {
                    rc = -EXDEV;
                    goto out;
                }
                while (depth > 1)
                    close(dirs[--depth]);
            }
            /* the rest of the path is now the target, then what followed */
            int nx = cur ^ 1;
            int len = snprintf(rest[nx], sizeof(rest[nx]), "%s%s", t, p);
            if (len < 0 || (size_t)len >= sizeof(rest[nx])) {
                rc = -ENAMETOOLONG;
                goto out;
            }
            cur = nx;
            p = rest[cur];
            continue;
        }
        if (S_ISDIR(s.st_mode) && !last) {
            if (depth == WALK_DEPTH) {
                close(fd);
                rc = -ENAMETOOLONG;
                goto out;
            }
            dirs[depth++] = fd;
            continue;
        }
        if (S_ISDIR(s.st_mode)) {
            *st = s;
            if (flags & PETREL__STATIC_DIR_READ) {
                rc = openat(dirs[depth - 1], name, DIR_FLAGS | O_NOFOLLOW);
                rc = rc < 0 ? -errno : reopen_checked(rc, st, O_DIRECTORY);
                close(fd);
            } else {
                rc = fd;
            }
            goto out;
        }
        if (!last || slash) {
            close(fd);
            rc = -ENOTDIR;
            goto out;
        }
        *st = s;
        if (S_ISREG(s.st_mode)) {
            rc = openat(dirs[depth - 1], name, READ_FLAGS | O_NOFOLLOW);
            rc = rc < 0 ? -errno : reopen_checked(rc, st, 0);
            close(fd);
        } else {
            rc = fd; /* a FIFO, device or socket: O_PATH only, never opened */
        }
        goto out;
    }
out:
    while (depth > 0)
        close(dirs[--depth]);
    return rc;
}

int petrel__static_open(int rootfd, const char *root_real, const char *rel, int flags,
                        struct stat *st)
{
    const char *p = *rel ? rel : ".";
    if ((flags & PETREL__STATIC_WALK) || petrel__static_have_openat2(rootfd) == 0)
        return walk_open(rootfd, root_real, p, flags, st);
    int fd = sys_openat2(rootfd, p, O_PATH | O_CLOEXEC);
    if (fd == -EXDEV)
        return walk_open(rootfd, root_real, p, flags, st); /* maybe an absolute link inside */
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    bool reg = S_ISREG(st->st_mode);
    if (!reg && !(S_ISDIR(st->st_mode) && (flags & PETREL__STATIC_DIR_READ)))
        return fd;
    close(fd);
    int how = reg ? READ_FLAGS : DIR_FLAGS;
    return reopen_checked(sys_openat2(rootfd, p, how), st, reg ? 0 : O_DIRECTORY);
}
