/*
 * log.c -- the byte sinks of logging: the error log (stderr, which
 * --error-log makes a file, with levels) and the access log's file,
 * buffered per worker and written at most once a second or when the buffer
 * fills, so that logging costs a format, not a syscall, per request.  Both
 * files are opened again by name on SIGUSR1 (logrotate's convention).  What
 * an access log line says is accesslog.c's.
 */
#include "runtime/log.h"

#include "runtime/metrics.h"
#include "petrel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int petrel__log_level = PETREL_LOG_INFO;
bool petrel__alog_on;
uint64_t petrel__log_req;

static const char *const level_name[] = {"error", "warn", "info", "debug"};

void petrel__vlog(int level, uint64_t id, const char *fmt, va_list ap)
{
    if (level > petrel__log_level)
        return;
    char buf[2048];
    struct tm tm;
    time_t now = time(NULL);
    localtime_r(&now, &tm);
    int n = (int)strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S ", &tm);
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, "[%s] [%d] ",
                  level_name[level < 0   ? 0
                             : level > 3 ? 3
                                         : level],
                  (int)getpid());
    if (id)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "request %llu: ", (unsigned long long)id);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

void petrel_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    petrel__vlog(level, petrel__log_req, fmt, ap);
    va_end(ap);
}

void petrel_req_log(const petrel_req_t *req, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    petrel__vlog(level, req ? req->id : 0, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Files, opened again on SIGUSR1                                           */

static char *elog_path, *alog_path;

/* Open `path` for appending onto descriptor `fd` (the number stays), with
 * `flags` O_CLOEXEC or 0 (the error log is standard error: no O_CLOEXEC). */
static int open_onto(const char *path, int fd, int flags)
{
    int nfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (nfd < 0)
        return PETREL_EIO;
    if (nfd == fd) /* fd was closed */
        return flags ? 0 : fcntl(fd, F_SETFD, 0) < 0 ? PETREL_EIO : 0;
    int rc = dup3(nfd, fd, flags);
    int e = errno;
    close(nfd);
    errno = e;
    return rc < 0 ? PETREL_EIO : 0;
}

int petrel__elog_open(const char *path)
{
    if (open_onto(path, STDERR_FILENO, 0) < 0)
        return PETREL_EIO;
    free(elog_path);
    elog_path = strdup(path);
    return 0;
}

/* ------------------------------------------------------------------------ */

#define ALOG_SIZE 65536
static int alog_fd = -1;
static char alog_buf[ALOG_SIZE];
static size_t alog_len;

int petrel__alog_open(const char *path)
{
    if (strcmp(path, "-") == 0) {
        alog_fd = STDOUT_FILENO;
    } else {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return PETREL_EIO;
        if (alog_fd > STDERR_FILENO)
            close(alog_fd);
        alog_fd = fd;
        free(alog_path);
        alog_path = strdup(path);
    }
    petrel__alog_on = true;
    petrel__req_measure |= PETREL__MEASURE_LOG; /* the lines carry durations */
    return 0;
}

int petrel__logs_reopen(void)
{
    int rc = 0;
    if (elog_path && open_onto(elog_path, STDERR_FILENO, 0) < 0) {
        petrel_log(PETREL_LOG_ERROR, "SIGUSR1: cannot open the error log %s again: %s", elog_path,
                   strerror(errno));
        rc = PETREL_EIO;
    }
    if (alog_path && alog_fd >= 0) {
        petrel__alog_flush(); /* the lines so far go to the file they belong to */
        if (open_onto(alog_path, alog_fd, O_CLOEXEC) < 0) {
            petrel_log(PETREL_LOG_ERROR, "SIGUSR1: cannot open the access log %s again: %s",
                       alog_path, strerror(errno));
            rc = PETREL_EIO;
        }
    }
    return rc;
}

bool petrel__alog_write(const char *line, size_t n)
{
    if (alog_len + n > ALOG_SIZE)
        petrel__alog_flush();
    if (n > ALOG_SIZE)
        n = ALOG_SIZE;
    bool first = alog_len == 0;
    memcpy(alog_buf + alog_len, line, n);
    alog_len += n;
    return first;
}

void petrel__alog_flush(void)
{
    size_t off = 0;
    while (off < alog_len) {
        ssize_t w = write(alog_fd, alog_buf + off, alog_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    alog_len = 0;
}
