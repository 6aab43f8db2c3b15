/*
 * accesslog.c -- the end of a request at the framework layer: its counts
 * (metrics.c) and its access log line, combined (the default) or JSON
 * (--access-log-format), read through the request API and handed to
 * log.c's sink.
 */
#include "runtime/arena.h"
#include "runtime/loop.h"
#include "runtime/metrics.h"
#include "protocols/proto.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

petrel_server_t *petrel__quiet_server;
int petrel__alog_format = PETREL__ALOG_COMBINED;

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
#define FIXED_MAX 320     /* separators and names, time, version, status, figures, newline */
#define UPSTREAM_MAX 64   /* the upstream's address (a long unix: path is cut) */
#define UPSTREAM_FIXED 48 /* its names and its time */
_Static_assert(PEER_MAX + METHOD_MAX + TARGET_MAX + REFERER_MAX + AGENT_MAX + FIXED_MAX +
                       UPSTREAM_MAX + UPSTREAM_FIXED <=
                   LINE_MAX,
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

/* A string literal at p (no format on the request path); returns the end. */
#define LIT(p, s) ((char *)memcpy((p), (s), sizeof(s) - 1) + sizeof(s) - 1)

static char *esc_str(char *p, size_t cap, const char *s)
{
    return s ? esc(p, cap, s, strlen(s)) : esc(p, cap, "-", 1);
}

static void combined(petrel_req_t *req, uint64_t bytes, char *line, char **end)
{
    /* combined: host ident user [time] "request" status bytes "referer" "agent" */
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
    *end = p;
}

/* ------------------------------------------------------------------------ */
/* JSON: one object per line                                                */

/* The length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629 §4: no
 * overlong forms, no surrogates, nothing past U+10FFFF; ws.c's validator),
 * or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t st = 0;
    for (size_t k = 0; k < n && k < 4; k++) {
        if (petrel__utf8_scan(&st, s + k, 1) != 1)
            return 0;
        if (st == 0)
            return k + 1;
    }
    return 0;
}

/* A JSON string (RFC 8259 §7) of [s, s + n) into [*p, *p + cap), quotes
 * included: '"', '\\' and control bytes escaped, bytes that are not UTF-8
 * replaced by U+FFFD; a value too long is cut at a whole character and
 * ends with "...".  NULL s: null. */
static char *json_str(char *p, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (s == NULL) {
        memcpy(p, "null", 4);
        return p + 4;
    }
    char *end = p + cap - 4; /* room for "..." and the closing quote */
    *p++ = '"';
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char ch = u[i];
        char tmp[8];
        size_t k = 0, used = 1;
        if (ch == '"' || ch == '\\') {
            tmp[k++] = '\\';
            tmp[k++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            const char *short_esc = ch == '\n' ? "n" : ch == '\r' ? "r" : ch == '\t' ? "t" : NULL;
            tmp[k++] = '\\';
            if (short_esc) {
                tmp[k++] = short_esc[0];
            } else {
                memcpy(tmp + k, "u00", 3);
                k += 3;
                tmp[k++] = hex[ch >> 4];
                tmp[k++] = hex[ch & 15];
            }
        } else if (ch < 0x80) {
            tmp[k++] = (char)ch;
        } else if ((used = utf8_len(u + i, n - i)) != 0) {
            memcpy(tmp, u + i, used);
            k = used;
        } else {
            memcpy(tmp, "\xef\xbf\xbd", 3); /* U+FFFD */
            k = 3;
            used = 1;
        }
        if (p + k > end) {
            memcpy(p, "...", 3);
            p += 3;
            break;
        }
        memcpy(p, tmp, k);
        p += k;
        i += used;
    }
    *p++ = '"';
    return p;
}

static char *json_cstr(char *p, size_t cap, const char *s)
{
    return json_str(p, cap, s, s ? strlen(s) : 0);
}

/* "2006-01-02T15:04:05" of the current second, made once a second. */
static char iso_sec[24];
static time_t iso_at = -1;

static void json(petrel_req_t *req, uint64_t bytes, uint64_t dur_ns, uint64_t arena_high,
                 char *line, char **end)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != iso_at) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(iso_sec, sizeof(iso_sec), "%Y-%m-%dT%H:%M:%S", &tm);
        iso_at = ts.tv_sec;
    }
    static const char *const protos[] = {"HTTP/1.0", "HTTP/1.1", "HTTP/2"};
    const char *proto = req->version == 20 ? protos[2] : req->version == 10 ? protos[0] : protos[1];
    char *p = line;
    p = fmt(p, FIXED_MAX, "{\"time\":\"%s.%03dZ\",\"client\":", iso_sec,
            (int)(ts.tv_nsec / 1000000));
    p = json_cstr(p, PEER_MAX, petrel_req_peer(req));
    p = LIT(p, ",\"method\":");
    p = json_str(p, METHOD_MAX, req->method_name.ptr, req->method_name.len);
    p = LIT(p, ",\"target\":");
    p = json_str(p, TARGET_MAX, req->target.ptr, req->target.len);
    p = fmt(p, FIXED_MAX,
            ",\"protocol\":\"%s\",\"status\":%d,\"bytes\":%llu,\"duration_us\":%llu,"
            "\"arena_bytes\":%llu,\"request_id\":\"%llu\",\"user_agent\":",
            proto, req->_resp->status, (unsigned long long)bytes,
            (unsigned long long)(dur_ns / 1000), (unsigned long long)arena_high,
            (unsigned long long)req->id);
    p = json_cstr(p, AGENT_MAX, petrel_req_header(req, "user-agent"));
    p = LIT(p, ",\"referer\":");
    p = json_cstr(p, REFERER_MAX, petrel_req_header(req, "referer"));
    if (req->_resp->upstream) {
        /* the last call made for the request (upstream.c) */
        p = LIT(p, ",\"upstream\":");
        p = json_cstr(p, UPSTREAM_MAX, req->_resp->upstream);
        p = fmt(p, UPSTREAM_FIXED, ",\"upstream_us\":%llu",
                (unsigned long long)(req->_resp->upstream_ns / 1000));
    }
    *p++ = '}';
    *p++ = '\n';
    *end = p;
}

void petrel__req_log(petrel_req_t *req, uint64_t bytes, uint64_t dur_ns, uint64_t arena_high)
{
    char line[LINE_MAX];
    char *end;
    if (petrel__alog_format == PETREL__ALOG_JSON)
        json(req, bytes, dur_ns, arena_high, line, &end);
    else
        combined(req, bytes, line, &end);
    if (petrel__alog_write(line, (size_t)(end - line)) && !flush_armed)
        flush_armed = petrel_timer_start(1000, flush_soon, NULL) != NULL;
}
