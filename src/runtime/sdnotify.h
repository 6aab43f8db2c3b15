/*
 * sdnotify.h -- systemd's service protocols (sdnotify.c): socket activation
 * (sockets passed in LISTEN_FDS) and readiness notification (messages to
 * NOTIFY_SOCKET), with libsystemd where configure found it (Debian's
 * libsystemd-dev) and by their documented protocols otherwise
 * (sd_listen_fds(3), sd_notify(3)); both ways behave the same.
 */
#ifndef PETREL_SDNOTIFY_H
#define PETREL_SDNOTIFY_H

#include <stddef.h>

/* The first descriptor systemd passes (SD_LISTEN_FDS_START). */
#define PETREL__LISTEN_FDS_START 3

/*
 * The sockets passed to this process: only when LISTEN_PID is this
 * process's pid (else they are someone else's).  LISTEN_PID, LISTEN_FDS
 * and LISTEN_FDNAMES are unset either way, so that no child sees them.
 * The descriptors get FD_CLOEXEC.  Returns their number n (descriptors 3
 * to 3 + n - 1), with names[i] the name of each (LISTEN_FDNAMES, "" when
 * unnamed; static storage, at most `max` entries filled), or PETREL_EINVAL
 * (with a message in `err`) for variables that do not parse.
 */
int petrel__sd_listen_fds(const char **names, int max, char *err, size_t errlen);

/* Whether descriptor `fd` is a listening stream socket. */
int petrel__sd_is_listener(int fd);

/*
 * Send a state message ("READY=1", "STATUS=...", several lines in one
 * message) to the service manager at $NOTIFY_SOCKET (a path, or an
 * abstract socket name starting with '@'), as one datagram.  Nothing
 * happens without NOTIFY_SOCKET.  0 on success or when there is nobody to
 * tell, else PETREL_EIO.
 */
int petrel__sd_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The documented protocols themselves, what the two calls above do without
 * libsystemd (compiled either way, for the tests): */
int petrel__sd_listen_fds_proto(const char **names, int max, char *err, size_t errlen);
/* one datagram to `path` ('@': abstract); 0 or PETREL_EIO */
int petrel__sd_notify_raw(const char *path, const char *msg, size_t len);

#endif /* PETREL_SDNOTIFY_H */
