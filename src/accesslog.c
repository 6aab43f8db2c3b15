/*
 * accesslog.c -- the access log line of a request (the combined format), at
 * the framework layer: it reads the request through the request API and
 * hands the line to log.c's sink.
 */
#include "loop.h"
#include "proto.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Lines are written within a second, even when the server goes quiet
 * (the worker also flushes once a second while it is busy). */
static bool flush_armed;

static void flush_soon(void *data)
{
    (void)data;
    flush_armed = false;
    petrel__alog_flush();
}

/* The widest each field of a line may grow to (escaped), so that a line of
 * any request fits LINE_MAX with room for the fixed parts. */
#define LINE_MAX 4096
#define PEER_MAX 64
#define METHOD_MAX 256
#define TARGET_MAX 2048
#define REFERER_MAX 640
#define AGENT_MAX 640
#define FIXED_MAX 128 /* separators, time, version, status, bytes, newline */
_Static_assert(PEER_MAX + METHOD_MAX + TARGET_MAX + REFERER_MAX + AGENT_MAX + FIXED_MAX <= LINE_MAX,
               "the fields of an access log line fit its buffer");

/* Copy a field into [*p, *p + cap), escaping '"', '\\' and control bytes so
 * that a client cannot forge log lines; a field too long is cut, at a whole
 * escape, and ends with "...". */
static char *esc(char *p, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char *end = p + cap - 3;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool raw = !(ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\');
        if (p + (raw ? 1 : 4) > end) {
            memcpy(p, "...", 3);
            return p + 3;
        }
        if (raw) {
            *p++ = (char)ch;
        } else {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    return p;
}

/* snprintf at p, cut to `cap`; returns the end. */
static char *fmt(char *p, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static char *fmt(char *p, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int k = vsnprintf(p, cap, f, ap);
    va_end(ap);
    return p + (k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1);
}

static char *esc_str(char *p, size_t cap, const char *s)
{
    return s ? esc(p, cap, s, strlen(s)) : esc(p, cap, "-", 1);
}

void petrel__req_log(petrel_req_t *req, uint64_t bytes)
{
    /* combined: host ident user [time] "request" status bytes "referer" "agent" */
    char line[LINE_MAX];
    char *p = line;
    p = esc_str(p, PEER_MAX, petrel_req_peer(req));
    p = fmt(p, FIXED_MAX / 2, " - - [%s] \"", petrel__loop ? petrel__loop->log_time : "-");
    p = req->method_name.ptr ? esc(p, METHOD_MAX, req->method_name.ptr, req->method_name.len)
                             : esc(p, METHOD_MAX, "-", 1);
    *p++ = ' ';
    p = req->target.ptr ? esc(p, TARGET_MAX, req->target.ptr, req->target.len)
                        : esc(p, TARGET_MAX, "-", 1);
    p = fmt(p, FIXED_MAX / 2 - 8, " HTTP/%d.%d\" %d %llu \"", req->version / 10, req->version % 10,
            req->_resp->status, (unsigned long long)bytes);
    p = esc_str(p, REFERER_MAX, petrel_req_header(req, "referer"));
    memcpy(p, "\" \"", 3);
    p += 3;
    p = esc_str(p, AGENT_MAX, petrel_req_header(req, "user-agent"));
    *p++ = '"';
    *p++ = '\n';
    if (petrel__alog_write(line, (size_t)(p - line)) && !flush_armed)
        flush_armed = petrel_timer_start(1000, flush_soon, NULL) != NULL;
}
