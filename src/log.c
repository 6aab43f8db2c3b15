/*
 * log.c -- the error log (stderr, with levels) and the access log (combined
 * format, buffered per worker and written at most once a second or when the
 * buffer fills, so that logging costs a format, not a syscall, per request).
 */
#include "petrel-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int petrel__log_level = PETREL_LOG_INFO;
bool petrel__access_log_on;

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
                  level_name[level < 0 ? 0 : level > 3 ? 3 : level], (int)getpid());
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
static bool alog_timer_armed;

static void alog_timer(void *data)
{
    (void)data;
    alog_timer_armed = false;
    petrel__access_log_flush();
}

int petrel__access_log_open(const char *path)
{
    if (strcmp(path, "-") == 0) {
        alog_fd = STDOUT_FILENO;
    } else {
        alog_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (alog_fd < 0)
            return -errno;
    }
    petrel__access_log_on = true;
    return 0;
}

void petrel__access_log_flush(void)
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

/* Copy a field, escaping '"', '\\' and control bytes so a client cannot
 * forge log lines. */
static size_t esc(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        } else {
            out[o++] = (char)ch;
        }
    }
    return o;
}

void petrel__access_log(petrel_req_t *req, int status, uint64_t bytes)
{
    /* combined: host ident user [time] "request" status bytes "referer" "agent" */
    char line[4096];
    size_t n = 0;
    const char *peer = petrel_req_peer(req);
    const char *ref = petrel_req_header(req, "referer");
    const char *ua = petrel_req_header(req, "user-agent");
    n += esc(line + n, sizeof(line) - n, peer ? peer : "-", strlen(peer ? peer : "-"));
    n += (size_t)snprintf(line + n, sizeof(line) - n, " - - [%s] \"",
                          petrel__loop ? petrel__loop->log_time : "-");
    n += esc(line + n, sizeof(line) - n - 512, req->method_name.ptr ? req->method_name.ptr : "-",
             req->method_name.len);
    line[n++] = ' ';
    n += esc(line + n, sizeof(line) - n - 512, req->target.ptr ? req->target.ptr : "-",
             req->target.len);
    n += (size_t)snprintf(line + n, sizeof(line) - n, " HTTP/%d.%d\" %d %llu \"",
                          req->version / 10, req->version % 10, status, (unsigned long long)bytes);
    n += esc(line + n, sizeof(line) - n - 256, ref ? ref : "-", strlen(ref ? ref : "-"));
    line[n++] = '"';
    line[n++] = ' ';
    line[n++] = '"';
    n += esc(line + n, sizeof(line) - n - 4, ua ? ua : "-", strlen(ua ? ua : "-"));
    line[n++] = '"';
    line[n++] = '\n';
    if (alog_len + n > ALOG_SIZE)
        petrel__access_log_flush();
    if (alog_len == 0 && !alog_timer_armed) {
        /* written within a second even if the server goes quiet */
        alog_timer_armed = petrel_timer_start(1000, alog_timer, NULL) != NULL;
    }
    memcpy(alog_buf + alog_len, line, n);
    alog_len += n;
}
