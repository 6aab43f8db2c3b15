/*
 * syntax.c -- HTTP syntax shared by every protocol and the framework
 * (RFC 9110): tokens and lists of them, method names, percent-decoding and
 * path normalisation, status codes and status lines, HTTP-dates (the one
 * formatter of the tree: loop.c's Date header, the static module's
 * Last-Modified), and UTF-8 validation (RFC 3629).  Depends on nothing but
 * the C library.
 */
#include "runtime/syntax.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The classes of the bytes of HTTP syntax, one table for every protocol
 * (proto.h PETREL__C_*): a byte's bits say what it may be part of. */
#define TCH (PETREL__CC_TCHAR | PETREL__CC_LNAME | PETREL__CC_TARGET | PETREL__CC_VALUE)
#define UPPER (PETREL__CC_TCHAR | PETREL__CC_TARGET | PETREL__CC_VALUE)
#define VIS (PETREL__CC_TARGET | PETREL__CC_VALUE)
const uint8_t petrel__cclass[256] = {
    /* RFC 9110 §5.6.2 tchar; lowercase: an HTTP/2 field name (RFC 9113 §8.2.1) */
    ['a' ... 'z'] = TCH | PETREL__CC_HOST | PETREL__CC_SCHEME,
    ['A' ... 'Z'] = UPPER | PETREL__CC_HOST | PETREL__CC_SCHEME,
    ['0' ... '9'] = TCH | PETREL__CC_HOST | PETREL__CC_SCHEME,
    ['-'] = TCH | PETREL__CC_HOST | PETREL__CC_SCHEME,
    ['.'] = TCH | PETREL__CC_HOST | PETREL__CC_SCHEME,
    ['+'] = TCH | PETREL__CC_HOST | PETREL__CC_SCHEME,
    /* RFC 3986 §3.2.2 reg-name: unreserved, sub-delims and pct-encoded */
    ['_'] = TCH | PETREL__CC_HOST,
    ['~'] = TCH | PETREL__CC_HOST,
    ['!'] = TCH | PETREL__CC_HOST,
    ['$'] = TCH | PETREL__CC_HOST,
    ['&'] = TCH | PETREL__CC_HOST,
    ['\''] = TCH | PETREL__CC_HOST,
    ['*'] = TCH | PETREL__CC_HOST,
    ['%'] = TCH | PETREL__CC_HOST,
    ['#'] = TCH,
    ['^'] = TCH,
    ['`'] = TCH,
    ['|'] = TCH,
    ['('] = VIS | PETREL__CC_HOST,
    [')'] = VIS | PETREL__CC_HOST,
    [','] = VIS | PETREL__CC_HOST,
    [';'] = VIS | PETREL__CC_HOST,
    ['='] = VIS | PETREL__CC_HOST,
    /* the other visible characters (RFC 5234 VCHAR) */
    ['"'] = VIS,
    ['/'] = VIS,
    [':'] = VIS,
    ['<'] = VIS,
    ['>'] = VIS,
    ['?'] = VIS,
    ['@'] = VIS,
    ['['] = VIS,
    ['\\'] = VIS,
    [']'] = VIS,
    ['{'] = VIS,
    ['}'] = VIS,
    /* field values also take SP, HTAB and obs-text (RFC 9110 §5.5) */
    [' '] = PETREL__CC_VALUE,
    ['\t'] = PETREL__CC_VALUE,
    [0x80 ... 0xff] = PETREL__CC_VALUE,
};
#undef TCH
#undef UPPER
#undef VIS

/* RFC 9110 §7.2: Host = uri-host [ ":" port ]; reg-name, IPv4 or IP-literal. */
bool petrel__host_valid(const char *s, size_t n)
{
    if (n == 0)
        return false;
    size_t i = 0;
    if (s[0] == '[') {
        for (i = 1; i < n && s[i] != ']'; i++) {
            char ch = s[i];
            if (!(ch == ':' || ch == '.' || (ch >= '0' && ch <= '9') ||
                  ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') || ch == 'v' || ch == 'V'))
                return false;
        }
        if (i == n || i == 1)
            return false;
        i++;
    } else {
        while (i < n && (petrel__cclass[(unsigned char)s[i]] & PETREL__CC_HOST))
            i++;
    }
    if (i < n) {
        if (s[i] != ':')
            return false;
        for (i++; i < n; i++)
            if (s[i] < '0' || s[i] > '9')
                return false;
    }
    return true;
}

static const struct {
    const char *name;
    size_t len;
    int bit;
} methods[] = {
    {"GET", 3, PETREL_GET},         {"HEAD", 4, PETREL_HEAD},     {"POST", 4, PETREL_POST},
    {"PUT", 3, PETREL_PUT},         {"DELETE", 6, PETREL_DELETE}, {"PATCH", 5, PETREL_PATCH},
    {"OPTIONS", 7, PETREL_OPTIONS},
};

int petrel__method_from_name(const char *s, size_t len)
{
    if (len == 3 && s[0] == 'G' && s[1] == 'E' && s[2] == 'T')
        return PETREL_GET;
    for (size_t i = 1; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (methods[i].len == len && memcmp(methods[i].name, s, len) == 0)
            return methods[i].bit;
    return 0;
}

size_t petrel__methods_format(int bits, char *buf, size_t len)
{
    size_t n = 0;
    if (len == 0)
        return 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (!(bits & methods[i].bit))
            continue;
        size_t need = methods[i].len + (n ? 2 : 0);
        if (n + need + 1 > len)
            break;
        if (n) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        memcpy(buf + n, methods[i].name, methods[i].len);
        n += methods[i].len;
        buf[n] = '\0';
    }
    return n;
}

bool petrel__str_ieq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y && (x | 0x20) != (y | 0x20))
            return false;
        if (x != y && !((x | 0x20) >= 'a' && (x | 0x20) <= 'z'))
            return false;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

ssize_t petrel__pct_decode(const char *in, size_t len, char *out, bool plus)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= len || (h = hexval(in[i + 1])) < 0 || (l = hexval(in[i + 2])) < 0)
                return PETREL_EINVAL;
            c = (char)(h << 4 | l);
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

/*
 * Decode, then resolve "." and ".." segments (RFC 3986 §5.2.4) and merge
 * repeated slashes.  A path that would climb above the root, or that holds a
 * NUL byte once decoded, is refused: no route and no file may be reached by
 * spelling a path differently.
 */
ssize_t petrel__path_normalize(const char *in, size_t len, char *out)
{
    if (len == 0 || in[0] != '/')
        return PETREL_EINVAL;
    ssize_t n = petrel__pct_decode(in, len, out, false);
    if (n < 0 || memchr(out, '\0', (size_t)n))
        return PETREL_EINVAL;
    size_t r = 0, w = 0, end = (size_t)n;
    while (r < end) {
        /* out[r] == '/' here */
        size_t s = r + 1;
        while (s < end && out[s] == '/')
            s++; /* merge slashes */
        size_t e = s;
        while (e < end && out[e] != '/')
            e++;
        size_t seg = e - s;
        if (seg == 1 && out[s] == '.') {
            if (e == end)
                out[w++] = '/';
        } else if (seg == 2 && out[s] == '.' && out[s + 1] == '.') {
            if (w == 0)
                return PETREL_EINVAL; /* above the root */
            while (w > 0 && out[--w] != '/')
                ;
            if (e == end)
                out[w++] = '/';
        } else {
            out[w++] = '/';
            memmove(out + w, out + s, seg);
            w += seg;
        }
        r = e;
    }
    if (w == 0)
        out[w++] = '/';
    out[w] = '\0';
    return (ssize_t)w;
}

bool petrel__list_has_token(const char *s, size_t n, const char *tok, size_t tlen)
{
    const char *end = s + n;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
            s++;
        const char *b = s;
        while (s < end && *s != ',')
            s++;
        const char *e = s;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (petrel__str_ieq(b, (size_t)(e - b), tok, tlen))
            return true;
    }
    return false;
}

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {203, "Non-Authoritative Information"},
    {204, "No Content"},
    {205, "Reset Content"},
    {206, "Partial Content"},
    {300, "Multiple Choices"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {406, "Not Acceptable"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Content"},
    {426, "Upgrade Required"},
    {428, "Precondition Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

const char *petrel_status_reason(int status)
{
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    return "";
}

size_t petrel__status_line(int status, char *buf, size_t len)
{
    if (status == 200 && len >= 17) {
        memcpy(buf, "HTTP/1.1 200 OK\r\n", 17);
        return 17;
    }
    const char *r = petrel_status_reason(status);
    int n = snprintf(buf, len, "HTTP/1.1 %03d %s\r\n", status, r);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

size_t petrel__status_body(int status, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%d %s\n", status, petrel_status_reason(status));
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}


static inline const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* ------------------------------------------------------------------------ */
/* HTTP-dates (RFC 9110 §5.6.7)                                             */

static const char wdays[] = "SunMonTueWedThuFriSat";
static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

static inline char *put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

size_t petrel_http_date_format(time_t t, char *buf)
{
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        t = 0;
        gmtime_r(&t, &tm);
    }
    int y = tm.tm_year + 1900;
    char *p = buf;
    memcpy(p, wdays + 3 * tm.tm_wday, 3);
    memcpy(p + 3, ", ", 2);
    p = put2(p + 5, tm.tm_mday);
    *p++ = ' ';
    memcpy(p, months + 3 * tm.tm_mon, 3);
    p[3] = ' ';
    p = put2(p + 4, y / 100);
    p = put2(p, y % 100);
    *p++ = ' ';
    p = put2(p, tm.tm_hour);
    *p++ = ':';
    p = put2(p, tm.tm_min);
    *p++ = ':';
    p = put2(p, tm.tm_sec);
    memcpy(p, " GMT", 5);
    return PETREL_HTTP_DATE_SIZE - 1;
}

static int month_index(const char *m)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(m, months + 3 * i, 3) == 0)
            return i;
    return -1;
}

/* Exactly n ASCII digits at p, as a number; -1 otherwise (no sign, no
 * space: sscanf's %d would take both). */
static int digits(const char *p, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* day-name (RFC 9110 §5.6.7): Mon..Sun, or the long form of RFC 850. */
static const char *day_name(const char *p, bool longform)
{
    static const char *const days[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                       "Friday", "Saturday", "Sunday"};
    for (int i = 0; i < 7; i++) {
        size_t n = longform ? strlen(days[i]) : 3;
        if (strncmp(p, days[i], n) == 0)
            return p + n;
    }
    return NULL;
}

/* time-of-day = hour ":" minute ":" second, each 2DIGIT */
static const char *time_of_day(const char *p, int *hh, int *mm, int *ss)
{
    if (p[2] != ':' || p[5] != ':')
        return NULL;
    *hh = digits(p, 2), *mm = digits(p + 3, 2), *ss = digits(p + 6, 2);
    return *hh < 0 || *mm < 0 || *ss < 0 ? NULL : p + 8;
}

/* To the letter: a value that is not an HTTP-date is no date (an
 * If-Modified-Since holding one is ignored, §13.1.3).  Each form has a
 * fixed length, checked before any position is read. */
int petrel_http_date_parse(const char *s, time_t *out)
{
    int d, mi, y, hh, mm, ss;
    const char *p = day_name(s, false);
    if (p && *p == ',') {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        p++;
        if (strlen(p) < 25 || p[0] != ' ' || p[3] != ' ' || p[7] != ' ' || p[12] != ' ')
            return PETREL_EINVAL;
        d = digits(p + 1, 2);
        mi = month_index(p + 4);
        y = digits(p + 8, 4);
        if ((p = time_of_day(p + 13, &hh, &mm, &ss)) == NULL || strncmp(p, " GMT", 4) != 0)
            return PETREL_EINVAL;
        p += 4;
    } else if ((p = day_name(s, true)) != NULL && *p == ',') {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        p++;
        if (strlen(p) < 23 || p[0] != ' ' || p[3] != '-' || p[7] != '-' || p[10] != ' ')
            return PETREL_EINVAL;
        d = digits(p + 1, 2);
        mi = month_index(p + 4);
        y = digits(p + 8, 2);
        if (y < 0 || (p = time_of_day(p + 11, &hh, &mm, &ss)) == NULL || strncmp(p, " GMT", 4) != 0)
            return PETREL_EINVAL;
        /* §5.6.7: a two-digit year more than 50 years in the future is
         * taken to be in the past; within 1970..2069 that is this rule */
        y += y < 70 ? 2000 : 1900;
        p += 4;
    } else if ((p = day_name(s, false)) != NULL && *p == ' ') {
        /* asctime: Sun Nov  6 08:49:37 1994 (day: 2DIGIT or SP 1DIGIT) */
        p++;
        if (strlen(p) < 20 || p[3] != ' ' || p[6] != ' ' || p[15] != ' ')
            return PETREL_EINVAL;
        mi = month_index(p);
        d = p[4] == ' ' ? digits(p + 5, 1) : digits(p + 4, 2);
        if (time_of_day(p + 7, &hh, &mm, &ss) == NULL)
            return PETREL_EINVAL;
        y = digits(p + 16, 4);
        p += 20;
    } else {
        return PETREL_EINVAL;
    }
    if (*skip_ows(p) != '\0')
        return PETREL_EINVAL;
    if (mi < 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970)
        return PETREL_EINVAL;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mi;
    tm.tm_mday = d;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return PETREL_EINVAL;
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* UTF-8 (RFC 3629): shortest forms only, no surrogates, up to U+10FFFF.    */
/* The state is 0 at a character boundary, else the number of continuation  */
/* bytes still expected and the range the next one must fall in.            */

static inline bool utf8_step(uint32_t *st, uint8_t b)
{
    uint32_t s = *st;
    if (s == 0) {
        if (b < 0x80)
            return true;
        if (b < 0xC2)
            return false; /* a continuation byte, or an overlong 2-byte form */
        if (b < 0xE0) {
            *st = 1 | 0x80u << 8 | 0xBFu << 16;
            return true;
        }
        if (b < 0xF0) {
            uint32_t lo = b == 0xE0 ? 0xA0 : 0x80; /* overlong */
            uint32_t hi = b == 0xED ? 0x9F : 0xBF; /* surrogates */
            *st = 2 | lo << 8 | hi << 16;
            return true;
        }
        if (b < 0xF5) {
            uint32_t lo = b == 0xF0 ? 0x90 : 0x80; /* overlong */
            uint32_t hi = b == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
            *st = 3 | lo << 8 | hi << 16;
            return true;
        }
        return false;
    }
    if (b < ((s >> 8) & 0xff) || b > (s >> 16))
        return false;
    uint32_t need = (s & 0xff) - 1;
    *st = need ? need | 0x80u << 8 | 0xBFu << 16 : 0;
    return true;
}

/* Feed `n` bytes to the validator; returns how many were valid (n if all). */
size_t petrel__utf8_scan(uint32_t *st, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t i = 0;
    while (i < n) {
        if (*st == 0) {
            /* ASCII runs, 8 bytes at a time */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i == n)
                break;
        }
        if (!utf8_step(st, p[i]))
            return i;
        i++;
    }
    return n;
}
