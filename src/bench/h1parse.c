/*
 * h1parse.c -- petrel-bench's incremental HTTP/1.1 response parser.
 *
 * Written for a load generator's hot path, not for every corner of RFC 9112:
 * a head is taken whole or not at all (heads are small, so an incomplete one
 * is simply parsed again when more bytes came), lines are found with memchr,
 * and only the headers that frame the message are looked at: Content-Length,
 * Transfer-Encoding and Connection.  Bodies are counted, never copied.
 * Accepted: LF or CRLF line ends, 1xx interim responses (skipped), chunked
 * bodies with extensions and trailers, bodies delimited by the close, HEAD,
 * 204 and 304 without a body.
 */
#include <string.h>

#define BENCH_HIST_ONLY
#include "bench.h"

#define MAX_LINE 4096 /* chunk-size and trailer lines */

void bench_h1p_init(bench_h1p_t *p)
{
    memset(p, 0, sizeof *p);
    p->state = BENCH_H1P_HEAD;
    p->max_head = 64 * 1024;
    p->content_length = -1;
}

int bench_h1p_busy(const bench_h1p_t *p)
{
    return p->state != BENCH_H1P_HEAD;
}

static int fail(bench_h1p_t *p, const char *why)
{
    p->error = why;
    return BENCH_H1P_ERROR;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* case-insensitive: does [s, s+n) start with the lower-case word w? */
static int name_is(const char *s, size_t n, const char *w, size_t wn)
{
    if (n != wn)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != w[i])
            return 0;
    return 1;
}

int bench_has_token(const char *v, size_t n, const char *w)
{
    size_t wn = strlen(w);
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (name_is(v + s, e - s, w, wn))
            return 1;
    }
    return 0;
}

/* The last coding of Transfer-Encoding decides: chunked or not. */
static int last_token_is(const char *v, size_t n, const char *w)
{
    size_t e = n;
    while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t' || v[e - 1] == ','))
        e--;
    size_t s = e;
    while (s > 0 && v[s - 1] != ',')
        s--;
    while (s < e && (v[s] == ' ' || v[s] == '\t'))
        s++;
    return name_is(v + s, e - s, w, strlen(w));
}

/* One header line [s, e) (line end removed). */
static int header(bench_h1p_t *p, const char *s, const char *e)
{
    const char *colon = memchr(s, ':', (size_t)(e - s));
    if (!colon || colon == s)
        return fail(p, "header line without a name and a colon");
    size_t nlen = (size_t)(colon - s);
    const char *v = colon + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    const char *ve = e;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    size_t vlen = (size_t)(ve - v);

    switch (lower((unsigned char)*s)) {
    case 'c':
        if (name_is(s, nlen, "content-length", 14)) {
            if (vlen == 0 || vlen > 18)
                return fail(p, "bad Content-Length");
            int64_t n = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return fail(p, "bad Content-Length");
                n = n * 10 + (v[i] - '0');
            }
            if (p->content_length >= 0 && p->content_length != n)
                return fail(p, "conflicting Content-Length headers");
            p->content_length = n;
        } else if (name_is(s, nlen, "connection", 10)) {
            if (bench_has_token(v, vlen, "close"))
                p->close = 1;
            else if (bench_has_token(v, vlen, "keep-alive") && p->minor == 0)
                p->close = 0;
        }
        break;
    case 't':
        if (name_is(s, nlen, "transfer-encoding", 17))
            p->chunked = last_token_is(v, vlen, "chunked");
        break;
    }
    return 0;
}

/* A whole head, or MORE with nothing consumed. */
static int parse_head(bench_h1p_t *p, const char *buf, size_t len, size_t *used)
{
    const char *end = buf + len;
    /* not HTTP/1 at all (e.g. h2 frames): say so now, not at the timeout */
    if (memcmp(buf, "HTTP/1.", len < 7 ? len : 7) != 0)
        return fail(p, "not an HTTP/1.x response");
    const char *nl = memchr(buf, '\n', len);
    if (!nl)
        goto more;
    /* status line: HTTP/1.x SSS[ reason] */
    const char *le = nl > buf && nl[-1] == '\r' ? nl - 1 : nl;
    if (le - buf < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || buf[9] < '1' || buf[9] > '9' || buf[10] < '0' || buf[10] > '9' ||
        buf[11] < '0' || buf[11] > '9' || (le - buf > 12 && buf[12] != ' '))
        return fail(p, "bad status line");
    p->minor = buf[7] - '0';
    p->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    p->close = p->minor == 0;
    p->chunked = 0;
    p->content_length = -1;
    p->body_len = 0;
    p->remaining = 0;

    const char *s = nl + 1;
    for (;;) {
        if (s >= end)
            goto more;
        nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl)
            goto more;
        le = nl > s && nl[-1] == '\r' ? nl - 1 : nl;
        if (le == s)
            break; /* the empty line */
        if (header(p, s, le) < 0)
            return BENCH_H1P_ERROR;
        s = nl + 1;
    }
    *used = (size_t)(nl + 1 - buf);
    return BENCH_H1P_DONE;
more:
    if (len >= p->max_head)
        return fail(p, "response head too large");
    *used = 0;
    return BENCH_H1P_MORE;
}

/* One line [buf, nl] for chunk sizes and trailers; NULL if not all there. */
static const char *line_end(const char *buf, size_t len)
{
    return memchr(buf, '\n', len);
}

int bench_h1p_parse(bench_h1p_t *p, const char *buf, size_t len, size_t *used)
{
    size_t pos = 0;
    for (;;) {
        const char *b = buf + pos;
        size_t n = len - pos;
        switch (p->state) {
        case BENCH_H1P_HEAD: {
            size_t hu;
            int r = parse_head(p, b, n, &hu);
            if (r != BENCH_H1P_DONE) {
                *used = pos;
                return r;
            }
            pos += hu;
            int st = p->status;
            if (st >= 100 && st < 200 && st != 101)
                continue; /* interim response: the real one follows */
            if (p->head_only || st == 204 || st == 304 || st == 101) {
                *used = pos;
                return BENCH_H1P_DONE;
            }
            if (p->chunked) {
                p->state = BENCH_H1P_CHUNK_SIZE;
            } else if (p->content_length >= 0) {
                if (p->content_length == 0) {
                    *used = pos;
                    return BENCH_H1P_DONE;
                }
                p->remaining = (uint64_t)p->content_length;
                p->state = BENCH_H1P_BODY_CL;
            } else {
                p->close = 1;
                p->state = BENCH_H1P_BODY_EOF;
            }
            continue;
        }
        case BENCH_H1P_BODY_CL:
        case BENCH_H1P_CHUNK_DATA: {
            size_t k = n < p->remaining ? n : (size_t)p->remaining;
            pos += k;
            p->remaining -= k;
            p->body_len += k;
            if (p->remaining > 0) {
                *used = pos;
                return BENCH_H1P_MORE;
            }
            if (p->state == BENCH_H1P_CHUNK_DATA) {
                p->state = BENCH_H1P_CHUNK_CRLF;
                continue;
            }
            p->state = BENCH_H1P_HEAD;
            *used = pos;
            return BENCH_H1P_DONE;
        }
        case BENCH_H1P_CHUNK_SIZE: {
            const char *nl = line_end(b, n);
            if (!nl) {
                if (n > MAX_LINE)
                    return fail(p, "chunk-size line too long");
                *used = pos;
                return BENCH_H1P_MORE;
            }
            uint64_t sz = 0;
            int digits = 0;
            const char *q = b;
            for (; q < nl; q++) {
                int c = lower((unsigned char)*q), d;
                if (c >= '0' && c <= '9')
                    d = c - '0';
                else if (c >= 'a' && c <= 'f')
                    d = c - 'a' + 10;
                else
                    break;
                if (++digits > 15)
                    return fail(p, "chunk size too large");
                sz = sz * 16 + (uint64_t)d;
            }
            if (digits == 0)
                return fail(p, "bad chunk size");
            while (q < nl && (*q == ' ' || *q == '\t'))
                q++;
            if (q < nl && *q != ';' && *q != '\r')
                return fail(p, "bad chunk size");
            pos += (size_t)(nl + 1 - b);
            if (sz == 0) {
                p->state = BENCH_H1P_TRAILER;
            } else {
                p->remaining = sz;
                p->state = BENCH_H1P_CHUNK_DATA;
            }
            continue;
        }
        case BENCH_H1P_CHUNK_CRLF:
            if (n == 0 || (n == 1 && b[0] == '\r')) {
                *used = pos;
                return BENCH_H1P_MORE;
            }
            if (b[0] == '\n') {
                pos += 1;
            } else if (b[0] == '\r' && b[1] == '\n') {
                pos += 2;
            } else {
                return fail(p, "no CRLF after chunk data");
            }
            p->state = BENCH_H1P_CHUNK_SIZE;
            continue;
        case BENCH_H1P_TRAILER: {
            const char *nl = line_end(b, n);
            if (!nl) {
                if (n > MAX_LINE)
                    return fail(p, "trailer line too long");
                *used = pos;
                return BENCH_H1P_MORE;
            }
            size_t ll = (size_t)(nl - b);
            pos += ll + 1;
            if (ll == 0 || (ll == 1 && b[0] == '\r')) {
                p->state = BENCH_H1P_HEAD;
                *used = pos;
                return BENCH_H1P_DONE;
            }
            continue;
        }
        case BENCH_H1P_BODY_EOF:
            p->body_len += n;
            *used = len;
            return BENCH_H1P_MORE;
        default:
            return fail(p, "bad parser state");
        }
    }
}

int bench_h1p_eof(bench_h1p_t *p)
{
    switch (p->state) {
    case BENCH_H1P_HEAD:
        return BENCH_H1P_MORE;
    case BENCH_H1P_BODY_EOF:
        p->state = BENCH_H1P_HEAD;
        return BENCH_H1P_DONE;
    default:
        return fail(p, "connection closed inside a response body");
    }
}
