/*
 * sdnotify.c -- socket activation and readiness notification for systemd
 * (see sdnotify.h).  petrel speaks systemd's documented protocols itself
 * (libsystemd is not linked: two calls did not pay for the library):
 *
 *   activation  LISTEN_PID (must be our pid), LISTEN_FDS (how many, from
 *               descriptor 3), LISTEN_FDNAMES (names, ':'-separated)
 *   notify      one AF_UNIX datagram to $NOTIFY_SOCKET, '@' for the
 *               abstract namespace, the message as newline-separated
 *               VARIABLE=value lines
 */
#include "runtime/sdnotify.h"

#include "config.h"
#include "petrel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>


static char names_buf[4096];

int petrel__sd_is_listener(int fd)
{
    int type = 0, acc = 0;
    socklen_t l1 = sizeof(type), l2 = sizeof(acc);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l2) < 0)
        return 0;
    return type == SOCK_STREAM && acc;
}

/* ------------------------------------------------------------------------ */
/* The documented protocols                                                 */

/* Split LISTEN_FDNAMES into names[] (static storage). */
static void split_names(const char *s, const char **names, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        names[i] = "";
    if (s == NULL)
        return;
    snprintf(names_buf, sizeof(names_buf), "%s", s);
    char *p = names_buf;
    for (int i = 0; i < n && i < max && p; i++) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        names[i] = p;
        p = colon ? colon + 1 : NULL;
    }
}

int petrel__sd_listen_fds_proto(const char **names, int max, char *err, size_t errlen)
{
    const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
    const char *names_s = getenv("LISTEN_FDNAMES");
    int n = 0, rc = 0;
    if (pid_s && fds_s) {
        char *end;
        errno = 0;
        long pid = strtol(pid_s, &end, 10);
        if (errno || *end || pid <= 0) {
            snprintf(err, errlen, "LISTEN_PID '%s' is not a process id", pid_s);
            rc = PETREL_EINVAL;
            goto out;
        }
        if ((pid_t)pid != getpid())
            goto out; /* meant for another process */
        long k = strtol(fds_s, &end, 10);
        if (errno || *end || k < 0 || k > 4096) {
            snprintf(err, errlen, "LISTEN_FDS '%s' is not a number of descriptors", fds_s);
            rc = PETREL_EINVAL;
            goto out;
        }
        n = (int)k;
        if (n > max) {
            snprintf(err, errlen, "LISTEN_FDS=%d: petrel takes at most %d sockets", n, max);
            rc = PETREL_EINVAL;
            goto out;
        }
        if (names_s && strlen(names_s) >= sizeof(names_buf)) {
            /* a name cut off could turn an admin socket into a public one */
            snprintf(err, errlen, "LISTEN_FDNAMES is longer than %zu bytes", sizeof(names_buf) - 1);
            rc = PETREL_EINVAL;
            goto out;
        }
        for (int i = 0; i < n; i++) {
            int fd = PETREL__LISTEN_FDS_START + i;
            int fl = fcntl(fd, F_GETFD);
            if (fl < 0) {
                snprintf(err, errlen, "LISTEN_FDS=%d, but descriptor %d is not open", n, fd);
                rc = PETREL_EINVAL;
                goto out;
            }
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        }
        split_names(names_s, names, n, max);
    }
out:
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return rc < 0 ? rc : n;
}

int petrel__sd_notify_raw(const char *path, const char *msg, size_t len)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t pl = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || pl < 2 || pl >= sizeof(sa.sun_path))
        return PETREL_EIO;
    memcpy(sa.sun_path, path, pl);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* the abstract namespace */
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pl);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return PETREL_EIO;
    ssize_t w;
    do
        w = sendto(fd, msg, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sl);
    while (w < 0 && errno == EINTR);
    close(fd);
    return w == (ssize_t)len ? 0 : PETREL_EIO;
}

/* ------------------------------------------------------------------------ */
/* What petrel uses                                                         */

int petrel__sd_listen_fds(const char **names, int max, char *err, size_t errlen)
{
    return petrel__sd_listen_fds_proto(names, max, err, errlen);
}

int petrel__sd_notify(const char *fmt, ...)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return PETREL_EIO;
    return petrel__sd_notify_raw(path, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}
