/*
 * log.c -- the byte sinks of logging: the error log (stderr, with levels)
 * and the access log's file, buffered per worker and written at most once a
 * second or when the buffer fills, so that logging costs a format, not a
 * syscall, per request.  What an access log line says is accesslog.c's.
 */
#include "log.h"

#include "petrel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int petrel__log_level = PETREL_LOG_INFO;
bool petrel__alog_on;

static const char *const level_name[] = {"error", "warn", "info", "debug"};

void petrel_log(int level, const char *fmt, ...)
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
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
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
        alog_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (alog_fd < 0)
            return PETREL_EIO;
    }
    petrel__alog_on = true;
    return 0;
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
