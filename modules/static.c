/*
 * static.c -- the cached static-file handler: petrel_static_mount() serves
 * the files below a directory at a URL prefix (`petrel --root DIR` mounts one
 * at "/").  Written only against <petrel.h>, like any other module.
 *
 * The request path comes from the router percent-decoded and with its dot
 * segments resolved (a path above "/" was refused with 400).  The part after
 * the prefix is opened beneath the root directory with openat2
 * (RESOLVE_BENEATH), or with a component walk where the kernel lacks it: a
 * symlink is followed only while it stays inside the root, and nothing but a
 * regular file is ever opened for reading.
 *
 * Each worker keeps, per mount, a cache of what a path resolved to: a file
 * (its metadata, ETag, Last-Modified, Content-Type, and either its bytes --
 * files up to max_file_in_memory -- or an open descriptor for sendfile), a
 * directory, or an error.  A hit makes no file syscall.  An entry is checked
 * against the disk with one fstatat at most once per revalidate_ms (1 s):
 * when the file changed (size, mtime, ctime, inode, mode) it is loaded again,
 * so nothing stale is served more than that long after a change.  The cache
 * is bounded in bytes and in descriptors and evicts the least recently used
 * entries.  An entry is reference-counted: each response holds a reference
 * until it has been written (petrel_arena_defer on the request), so an
 * eviction or a reload never frees bytes or closes a descriptor still being
 * sent.
 */
#define PETREL_BUILTIN_MODULE 1 /* part of libpetrel: no petrel_module_entry */
#include <petrel.h>

#include "static-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2_H 1
#endif
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

#define REL_MAX 4000   /* longest path below a mount; longer ones get 414 */
#define WALK_DEPTH 256 /* directories deep, for the component walk */
#define WALK_LINKS 40  /* symlinks followed in one resolution (as the kernel) */

/* ------------------------------------------------------------------------ */
/* Small string helpers                                                     */

static inline char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
}

/* a[0, n) equals the lower-case literal b, ignoring case */
static bool ieq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != b[i])
            return false;
    return true;
}

static inline const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* ------------------------------------------------------------------------ */
/* MIME types                                                                */

static const struct {
    const char *ext;
    const char *type;
} mime_table[] = {
    {"apng", "image/apng"},
    {"atom", "application/atom+xml"},
    {"avif", "image/avif"},
    {"bmp", "image/bmp"},
    {"css", "text/css; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"htm", "text/html; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"ico", "image/x-icon"},
    {"ics", "text/calendar; charset=utf-8"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"jsonld", "application/ld+json"},
    {"map", "application/json"},
    {"md", "text/markdown; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"rss", "application/rss+xml"},
    {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain; charset=utf-8"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", "application/xhtml+xml"},
    {"xml", "text/xml; charset=utf-8"},
    {"yaml", "text/yaml; charset=utf-8"},
    {"yml", "text/yaml; charset=utf-8"},
    {"zip", "application/zip"},
};

const char *petrel__static_mime(const char *name, size_t len)
{
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || i == 1 || name[i - 2] == '/')
        return "application/octet-stream"; /* no extension, or a dotfile ".x" */
    size_t el = len - i;
    for (size_t k = 0; k < sizeof(mime_table) / sizeof(mime_table[0]); k++)
        if (strlen(mime_table[k].ext) == el && ieq(name + i, mime_table[k].ext, el))
            return mime_table[k].type;
    return "application/octet-stream";
}

/* ------------------------------------------------------------------------ */
/* HTTP dates (RFC 9110 §5.6.7)                                             */

static const char wdays[] = "SunMonTueWedThuFriSat";
static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

void petrel__static_format_date(time_t t, char *buf)
{
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        t = 0;
        gmtime_r(&t, &tm);
    }
    unsigned y = (unsigned)(tm.tm_year + 1900);
    char *p = buf;
    memcpy(p, wdays + 3 * tm.tm_wday, 3);
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    *p++ = (char)('0' + tm.tm_mday / 10);
    *p++ = (char)('0' + tm.tm_mday % 10);
    *p++ = ' ';
    memcpy(p, months + 3 * tm.tm_mon, 3);
    p += 3;
    *p++ = ' ';
    *p++ = (char)('0' + y / 1000);
    *p++ = (char)('0' + y / 100 % 10);
    *p++ = (char)('0' + y / 10 % 10);
    *p++ = (char)('0' + y % 10);
    *p++ = ' ';
    *p++ = (char)('0' + tm.tm_hour / 10);
    *p++ = (char)('0' + tm.tm_hour % 10);
    *p++ = ':';
    *p++ = (char)('0' + tm.tm_min / 10);
    *p++ = (char)('0' + tm.tm_min % 10);
    *p++ = ':';
    *p++ = (char)('0' + tm.tm_sec / 10);
    *p++ = (char)('0' + tm.tm_sec % 10);
    memcpy(p, " GMT", 5);
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

/* An HTTP-date in any of its three forms (RFC 9110 §5.6.7), to the letter:
 * a value that is not one is no date (an If-Modified-Since holding it is
 * ignored, §13.1.3).  Each form has a fixed length: it is checked before
 * any position is read. */
int petrel__static_parse_date(const char *s, time_t *out)
{
    int d, mi, y, hh, mm, ss;
    const char *p = day_name(s, false);
    if (p && *p == ',') {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        p++;
        if (strlen(p) < 25 || p[0] != ' ' || p[3] != ' ' || p[7] != ' ' || p[12] != ' ')
            return -1;
        d = digits(p + 1, 2);
        mi = month_index(p + 4);
        y = digits(p + 8, 4);
        if ((p = time_of_day(p + 13, &hh, &mm, &ss)) == NULL || strncmp(p, " GMT", 4) != 0)
            return -1;
        p += 4;
    } else if ((p = day_name(s, true)) != NULL && *p == ',') {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        p++;
        if (strlen(p) < 23 || p[0] != ' ' || p[3] != '-' || p[7] != '-' || p[10] != ' ')
            return -1;
        d = digits(p + 1, 2);
        mi = month_index(p + 4);
        y = digits(p + 8, 2);
        if (y < 0 || (p = time_of_day(p + 11, &hh, &mm, &ss)) == NULL ||
            strncmp(p, " GMT", 4) != 0)
            return -1;
        y += y < 70 ? 2000 : 1900;
        p += 4;
    } else if ((p = day_name(s, false)) != NULL && *p == ' ') {
        /* asctime: Sun Nov  6 08:49:37 1994 (day: 2DIGIT or SP 1DIGIT) */
        p++;
        if (strlen(p) < 20 || p[3] != ' ' || p[6] != ' ' || p[15] != ' ')
            return -1;
        mi = month_index(p);
        d = p[4] == ' ' ? digits(p + 5, 1) : digits(p + 4, 2);
        if (time_of_day(p + 7, &hh, &mm, &ss) == NULL)
            return -1;
        y = digits(p + 16, 4);
        p += 20;
    } else {
        return -1;
    }
    if (*skip_ows(p) != '\0')
        return -1;
    if (mi < 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970)
        return -1;
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
        return -1;
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Conditional requests and ranges (RFC 9110 §13, §14)                     */

bool petrel__static_etag_match(const char *list, const char *etag, bool weak)
{
    size_t el = strlen(etag);
    const char *p = list;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            return false;
        if (*p == '*')
            return true; /* any current representation: we have one */
        bool w = false;
        if (p[0] == 'W' && p[1] == '/') {
            w = true;
            p += 2;
        }
        if (*p != '"') {
            /* not an entity-tag: skip this element */
            while (*p && *p != ',')
                p++;
            continue;
        }
        const char *q = strchr(p + 1, '"');
        if (q == NULL)
            return false;
        size_t tl = (size_t)(q + 1 - p);
        if ((weak || !w) && tl == el && memcmp(p, etag, el) == 0)
            return true;
        p = q + 1;
    }
}

int petrel__static_precondition(const petrel__static_cond_t *c, const char *etag, time_t mtime,
                                const char *last_modified)
{
    time_t t;
    /* §13.2.2 steps 1-2: If-Match, else If-Unmodified-Since */
    if (c->if_match) {
        if (!petrel__static_etag_match(c->if_match, etag, false))
            return 412;
    } else if (c->if_unmodified_since &&
               petrel__static_parse_date(c->if_unmodified_since, &t) == 0 && mtime > t) {
        return 412;
    }
    /* steps 3-4: If-None-Match, else If-Modified-Since (GET and HEAD only) */
    if (c->if_none_match) {
        if (petrel__static_etag_match(c->if_none_match, etag, true))
            return 304;
    } else if (c->if_modified_since) {
        if (strcmp(c->if_modified_since, last_modified) == 0)
            return 304; /* the usual case: our own Last-Modified sent back */
        if (petrel__static_parse_date(c->if_modified_since, &t) == 0 && mtime <= t)
            return 304;
    }
    return 0;
}

bool petrel__static_if_range(const char *if_range, const char *etag, const char *last_modified)
{
    if (if_range == NULL)
        return true;
    if (if_range[0] == '"')
        return strcmp(if_range, etag) == 0; /* strong comparison */
    if (if_range[0] == 'W' && if_range[1] == '/')
        return false; /* a weak tag never matches */
    time_t a, b;
    if (strcmp(if_range, last_modified) == 0)
        return true;
    return petrel__static_parse_date(if_range, &a) == 0 &&
           petrel__static_parse_date(last_modified, &b) == 0 && a == b;
}

#define POS_HUGE (UINT64_C(1) << 62)

/* Digits into *v (saturating at POS_HUGE); returns the end, or NULL if none. */
static const char *parse_pos(const char *p, uint64_t *v)
{
    if (*p < '0' || *p > '9')
        return NULL;
    uint64_t x = 0;
    while (*p >= '0' && *p <= '9') {
        x = x < POS_HUGE / 10 ? x * 10 + (uint64_t)(*p - '0') : POS_HUGE;
        p++;
    }
    *v = x;
    return p;
}

int petrel__static_range(const char *range, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (range == NULL)
        return 0;
    const char *p = skip_ows(range);
    if (!ieq(p, "bytes", 5))
        return 0;
    p = skip_ows(p + 5);
    if (*p++ != '=')
        return 0;
    p = skip_ows(p);
    uint64_t a = 0, b = 0;
    const char *q = parse_pos(p, &a);
    bool has_a = q != NULL;
    if (q)
        p = q;
    if (*p++ != '-')
        return 0;
    q = parse_pos(p, &b);
    bool has_b = q != NULL;
    if (q)
        p = q;
    p = skip_ows(p);
    if (*p == ',')
        return 0; /* several ranges: send the whole representation */
    if (*p != '\0' || (!has_a && !has_b))
        return 0;
    if (has_a) {
        if (has_b && b < a)
            return 0; /* invalid range-spec: ignore the header */
        if (a >= size)
            return 416;
        uint64_t last = has_b && b < size - 1 ? b : size - 1;
        *off = a;
        *len = last - a + 1;
        return 206;
    }
    /* suffix: the last b bytes */
    if (b == 0 || size == 0)
        return 416;
    uint64_t n = b < size ? b : size;
    *off = size - n;
    *len = n;
    return 206;
}

/* A q-value in thousandths (RFC 9110 §12.4.2); -1 if malformed. */
static int parse_q(const char *p, const char **end)
{
    int v;
    if (*p == '0')
        v = 0;
    else if (*p == '1')
        v = 1000;
    else
        return -1;
    p++;
    if (*p == '.') {
        p++;
        int scale = 100;
        for (int i = 0; i < 3 && *p >= '0' && *p <= '9'; i++, p++, scale /= 10)
            v += (*p - '0') * scale;
    }
    *end = p;
    return v > 1000 ? 1000 : v;
}

int petrel__static_pick_encoding(const char *ae, unsigned available)
{
    int q_br = -1, q_gz = -1, q_any = -1;
    const char *p = ae;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        const char *t = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t tl = (size_t)(p - t);
        int q = 1000;
        /* parameters: only q matters */
        for (;;) {
            p = skip_ows(p);
            if (*p != ';')
                break;
            p = skip_ows(p + 1);
            if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
                const char *e;
                int v = parse_q(p + 2, &e);
                if (v >= 0) {
                    q = v;
                    p = e;
                }
            }
            while (*p && *p != ';' && *p != ',')
                p++;
        }
        while (*p && *p != ',')
            p++;
        if (tl == 2 && ieq(t, "br", 2))
            q_br = q;
        else if ((tl == 4 && ieq(t, "gzip", 4)) || (tl == 6 && ieq(t, "x-gzip", 6)))
            q_gz = q;
        else if (tl == 1 && t[0] == '*')
            q_any = q;
    }
    if (q_br < 0)
        q_br = q_any;
    if (q_gz < 0)
        q_gz = q_any;
    if (!(available & PETREL__ENC_BR))
        q_br = -1;
    if (!(available & PETREL__ENC_GZIP))
        q_gz = -1;
    if (q_br > 0 && q_br >= q_gz)
        return PETREL__ENC_BR;
    if (q_gz > 0)
        return PETREL__ENC_GZIP;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Escaping                                                                  */

/* clang-format off */
static const uint8_t uri_plain[256] = {
    ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1, ['_'] = 1,
    ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
    ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['@'] = 1, ['/'] = 1,
};
/* clang-format on */

size_t petrel__static_uri_encode(const char *in, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (uri_plain[c]) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

/* A growable buffer for the directory listing (not on the hot path). */
typedef struct buf {
    char *p;
    size_t len, cap;
    bool failed;
} buf_t;

static void buf_add(buf_t *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (np == NULL) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf_t *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static void buf_html(buf_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            buf_str(b, "&amp;");
            break;
        case '<':
            buf_str(b, "&lt;");
            break;
        case '>':
            buf_str(b, "&gt;");
            break;
        case '"':
            buf_str(b, "&quot;");
            break;
        case '\'':
            buf_str(b, "&#39;");
            break;
        default:
            buf_add(b, s + i, 1);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Opening beneath the root                                                 */

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
    static __thread char rest[2][2 * PATH_MAX];
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

/* ------------------------------------------------------------------------ */
/* Mounts                                                                    */

typedef struct mount {
    unsigned id;
    char *prefix; /* with its trailing slash */
    size_t plen;
    char *dir, *root_real;
    int rootfd;
    char *index;
    size_t index_len;
    char *cache_control;
    bool autoindex, precompressed;
    size_t cache_size, max_in_memory, max_fds;
    uint64_t revalidate_ms;
} mount_t;

static mount_t **mounts;
static unsigned nmounts;
static uint64_t hash_seed;

/* ------------------------------------------------------------------------ */
/* The cache                                                                 */

enum { K_FILE, K_DIR, K_NOINDEX, K_NOTFOUND, K_FORBIDDEN };

/* What a stat says about a path, to tell whether it changed. */
typedef struct fsig {
    dev_t dev;
    ino_t ino;
    off_t size;
    mode_t mode;
    int err;
    struct timespec mtim, ctim;
} fsig_t;

typedef struct lnode {
    struct lnode *prev, *next;
} lnode_t;

typedef struct entry {
    struct entry *hnext; /* hash chain */
    lnode_t lru;
    uint64_t hash;
    uint64_t checked; /* ms (monotonic) of the last look at the disk */
    uint32_t refs;    /* the cache's own, plus one per response in flight */
    uint8_t kind;
    uint8_t variants; /* PETREL__ENC_* bits: FILE.br / FILE.gz exist */
    bool cached;      /* in the hash table (and counted in mem, fds) */
    bool dirreq;      /* the key names a directory: "" or ending in '/' */
    int fd;           /* for files not in memory; -1 otherwise */
    size_t mem;       /* bytes counted against cache_size */
    const char *type; /* Content-Type, static storage */
    char *data;       /* the bytes of a file kept in memory, or NULL */
    uint64_t size;    /* body bytes */
    time_t mtime;
    fsig_t sig;  /* of fspath */
    fsig_t dsig; /* of the directory, for directory requests */
    char etag[48];
    char last_modified[32];
    uint32_t keylen, fslen;
    char *fspath; /* the file the key maps to: key, or key + index */
    char key[];
} entry_t;

typedef struct cache {
    mount_t *m;
    entry_t **tab;
    size_t mask, count;
    lnode_t lru; /* next: most recently used */
    size_t mem, fds;
} cache_t;

static __thread cache_t **tl_caches;
static __thread unsigned tl_ncaches;

static inline uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t hash_key(const char *s, size_t n)
{
    uint64_t h = hash_seed ^ (n * UINT64_C(0x9E3779B97F4A7C15));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ w) * UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 29);
}

static void sig_of_stat(fsig_t *s, const struct stat *st)
{
    memset(s, 0, sizeof(*s));
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    s->size = st->st_size;
    s->mode = st->st_mode;
    s->mtim = st->st_mtim;
    s->ctim = st->st_ctim;
}

static void sig_of_path(fsig_t *s, int rootfd, const char *path)
{
    struct stat st;
    if (fstatat(rootfd, *path ? path : ".", &st, 0) < 0) {
        memset(s, 0, sizeof(*s));
        s->err = errno;
    } else {
        sig_of_stat(s, &st);
    }
}

/* `content`: compare what a file's bytes depend on, else only identity. */
static bool sig_eq(const fsig_t *a, const fsig_t *b, bool content)
{
    if (a->err != b->err || a->dev != b->dev || a->ino != b->ino || a->mode != b->mode)
        return false;
    if (!content)
        return true;
    return a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
           a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
           a->ctim.tv_nsec == b->ctim.tv_nsec;
}

static void entry_free(entry_t *e)
{
    if (e->fd >= 0)
        close(e->fd);
    free(e->data);
    free(e);
}

static inline void entry_release(entry_t *e)
{
    if (--e->refs == 0)
        entry_free(e);
}

static void release_cb(void *p)
{
    entry_release(p);
}

static inline void lru_unlink(lnode_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

static inline void lru_push(cache_t *c, lnode_t *n)
{
    n->next = c->lru.next;
    n->prev = &c->lru;
    c->lru.next->prev = n;
    c->lru.next = n;
}

/* /metrics (petrel_metric_*): look-ups that found an entry or had to
 * load one, and the memory the caches hold (summed over the workers). */
static petrel_metric_t *m_hits, *m_misses, *m_bytes;

static void cache_remove(cache_t *c, entry_t *e)
{
    entry_t **pp = &c->tab[e->hash & c->mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(&e->lru);
    c->count--;
    c->mem -= e->mem;
    petrel_metric_add(m_bytes, -(int64_t)e->mem);
    if (e->fd >= 0)
        c->fds--;
    e->cached = false;
    entry_release(e);
}

static void cache_grow(cache_t *c)
{
    size_t n = (c->mask + 1) * 2;
    entry_t **t = calloc(n, sizeof(*t));
    if (t == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i <= c->mask; i++) {
        entry_t *e = c->tab[i];
        while (e) {
            entry_t *next = e->hnext;
            e->hnext = t[e->hash & (n - 1)];
            t[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(c->tab);
    c->tab = t;
    c->mask = n - 1;
}

static void cache_insert(cache_t *c, entry_t *e)
{
    if (c->count >= c->mask + 1)
        cache_grow(c);
    entry_t **b = &c->tab[e->hash & c->mask];
    e->hnext = *b;
    *b = e;
    lru_push(c, &e->lru);
    c->count++;
    c->mem += e->mem;
    petrel_metric_add(m_bytes, (int64_t)e->mem);
    if (e->fd >= 0)
        c->fds++;
    e->cached = true;
}

static void cache_evict(cache_t *c)
{
    const mount_t *m = c->m;
    while ((c->mem > m->cache_size || c->fds > m->max_fds) && c->lru.prev != &c->lru)
        cache_remove(c, container_of(c->lru.prev, entry_t, lru));
}

static cache_t *cache_new(mount_t *m)
{
    cache_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->m = m;
    c->mask = 63;
    c->tab = calloc(c->mask + 1, sizeof(*c->tab));
    if (c->tab == NULL) {
        free(c);
        return NULL;
    }
    c->lru.next = c->lru.prev = &c->lru;
    return c;
}

static void cache_free(cache_t *c)
{
    while (c->lru.next != &c->lru)
        cache_remove(c, container_of(c->lru.next, entry_t, lru));
    free(c->tab);
    free(c);
}

static cache_t *cache_of(mount_t *m)
{
    if (likely(m->id < tl_ncaches && tl_caches[m->id]))
        return tl_caches[m->id];
    if (m->id >= tl_ncaches) {
        cache_t **t = realloc(tl_caches, nmounts * sizeof(*t));
        if (t == NULL)
            return NULL;
        for (unsigned i = tl_ncaches; i < nmounts; i++)
            t[i] = NULL;
        tl_caches = t;
        tl_ncaches = nmounts;
    }
    return tl_caches[m->id] = cache_new(m);
}

void petrel__static_worker_fini(void)
{
    for (unsigned i = 0; i < tl_ncaches; i++)
        if (tl_caches[i])
            cache_free(tl_caches[i]);
    free(tl_caches);
    tl_caches = NULL;
    tl_ncaches = 0;
}

void petrel__static_reset(void)
{
    for (unsigned i = 0; i < nmounts; i++) {
        mount_t *m = mounts[i];
        if (m->rootfd >= 0)
            close(m->rootfd);
        free(m->prefix);
        free(m->dir);
        free(m->root_real);
        free(m->index);
        free(m->cache_control);
        free(m);
    }
    free(mounts);
    mounts = NULL;
    nmounts = 0;
}

static int err_kind(int err)
{
    return (err == -EACCES || err == -EPERM) ? K_FORBIDDEN : K_NOTFOUND;
}

static bool has_suffix(const char *s, size_t n, const char *suf, size_t sl)
{
    return n >= sl && memcmp(s + n - sl, suf, sl) == 0;
}

/* Which precompressed variants lie beside a file (a hint: they are opened
 * beneath the root like anything else when used). */
static unsigned probe_variants(const mount_t *m, const entry_t *e)
{
    if (!m->precompressed || e->fslen + 4 > REL_MAX || has_suffix(e->fspath, e->fslen, ".gz", 3) ||
        has_suffix(e->fspath, e->fslen, ".br", 3))
        return 0;
    char p[REL_MAX + 8];
    struct stat st;
    unsigned v = 0;
    memcpy(p, e->fspath, e->fslen);
    memcpy(p + e->fslen, ".br", 4);
    if (fstatat(m->rootfd, p, &st, 0) == 0 && S_ISREG(st.st_mode))
        v |= PETREL__ENC_BR;
    memcpy(p + e->fslen, ".gz", 4);
    if (fstatat(m->rootfd, p, &st, 0) == 0 && S_ISREG(st.st_mode))
        v |= PETREL__ENC_GZIP;
    return v;
}

/* A regular file was opened: metadata, headers, and maybe its bytes. */
static void file_fill(const mount_t *m, entry_t *e, int fd, const struct stat *st)
{
    e->kind = K_FILE;
    sig_of_stat(&e->sig, st);
    e->size = (uint64_t)st->st_size;
    e->mtime = st->st_mtime;
    e->type = petrel__static_mime(e->fspath, e->fslen);
    /* nginx's form: hex mtime and size */
    snprintf(e->etag, sizeof(e->etag), "\"%llx-%llx\"", (unsigned long long)st->st_mtime,
             (unsigned long long)st->st_size);
    petrel__static_format_date(st->st_mtime, e->last_modified);
    e->variants = (uint8_t)probe_variants(m, e);
    if (e->size <= m->max_in_memory && e->size + e->mem <= m->cache_size) {
        char *d = malloc(e->size ? e->size : 1);
        size_t got = 0;
        bool ok = d != NULL;
        while (ok && got < e->size) {
            ssize_t n = pread(fd, d + got, e->size - got, (off_t)got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                ok = false;
            if (n <= 0)
                break; /* 0: the file shrank while read */
            got += (size_t)n;
        }
        if (ok) {
            /* What was read is what is sent, with its own length; a file
             * that changed meanwhile differs from `sig` at the next check. */
            e->size = got;
            e->data = d;
            e->mem += got;
            close(fd);
            return;
        }
        free(d);
    }
    e->fd = fd;
}

static entry_t *entry_load(cache_t *c, const char *key, size_t klen, uint64_t h, uint64_t now)
{
    const mount_t *m = c->m;
    bool dirreq = klen == 0 || key[klen - 1] == '/';
    size_t il = dirreq ? m->index_len : 0;
    size_t extra = dirreq ? klen + il + 1 : 0;
    entry_t *e = malloc(sizeof(*e) + klen + 1 + extra);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->checked = now;
    e->refs = 1;
    e->fd = -1;
    e->dirreq = dirreq;
    e->keylen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    if (dirreq) {
        e->fspath = e->key + klen + 1;
        memcpy(e->fspath, key, klen);
        memcpy(e->fspath + klen, m->index ? m->index : "", il);
        e->fslen = (uint32_t)(klen + il);
        e->fspath[e->fslen] = '\0';
    } else {
        e->fspath = e->key;
        e->fslen = (uint32_t)klen;
    }
    e->mem = sizeof(*e) + klen + 1 + extra;

    struct stat st;
    int fd;
    if (dirreq) {
        char dpath[REL_MAX + 2];
        memcpy(dpath, key, klen);
        dpath[klen ? klen - 1 : 0] = '\0';
        sig_of_path(&e->dsig, m->rootfd, dpath);
        fd = petrel__static_open(m->rootfd, m->root_real, dpath, 0, &st);
        if (fd < 0) {
            e->kind = (uint8_t)err_kind(fd);
            return e;
        }
        close(fd);
        if (!S_ISDIR(st.st_mode)) {
            e->kind = K_NOTFOUND; /* "file/" */
            return e;
        }
        e->kind = K_NOINDEX;
        if (il == 0)
            return e;
    }
    sig_of_path(&e->sig, m->rootfd, e->fspath);
    fd = petrel__static_open(m->rootfd, m->root_real, e->fspath, 0, &st);
    if (fd < 0) {
        if (dirreq && (fd == -ENOENT || fd == -ENOTDIR))
            return e; /* a directory without an index */
        e->kind = (uint8_t)err_kind(fd);
        return e;
    }
    if (S_ISREG(st.st_mode)) {
        file_fill(m, e, fd, &st);
        return e;
    }
    close(fd);
    if (dirreq)
        return e;                                       /* the index is not a file: K_NOINDEX */
    e->kind = S_ISDIR(st.st_mode) ? K_DIR : K_NOTFOUND; /* no devices, FIFOs, sockets */
    return e;
}

/* Whether a cached entry still describes the disk (one or a few stats). */
static bool entry_fresh(const mount_t *m, entry_t *e)
{
    fsig_t s;
    if (e->dirreq) {
        char dpath[REL_MAX + 2];
        memcpy(dpath, e->key, e->keylen);
        dpath[e->keylen ? e->keylen - 1 : 0] = '\0';
        sig_of_path(&s, m->rootfd, dpath);
        if (!sig_eq(&s, &e->dsig, false))
            return false;
        if (e->kind == K_NOINDEX && m->index_len == 0)
            return true;
    }
    sig_of_path(&s, m->rootfd, e->fspath);
    if (!sig_eq(&s, &e->sig, e->kind == K_FILE))
        return false;
    if (e->kind == K_FILE)
        e->variants = (uint8_t)probe_variants(m, e);
    return true;
}

/* The entry for `key`, with a reference for the caller; NULL when out of
 * memory. */
static entry_t *cache_get(cache_t *c, const char *key, size_t klen, uint64_t now)
{
    uint64_t h = hash_key(key, klen);
    entry_t *e = c->tab[h & c->mask];
    while (e && !(e->hash == h && e->keylen == klen && memcmp(e->key, key, klen) == 0))
        e = e->hnext;
    if (likely(e != NULL)) {
        if (unlikely(now - e->checked >= c->m->revalidate_ms)) {
            if (entry_fresh(c->m, e)) {
                e->checked = now;
            } else {
                cache_remove(c, e);
                e = NULL;
            }
        }
        if (e) {
            if (c->lru.next != &e->lru) {
                lru_unlink(&e->lru);
                lru_push(c, &e->lru);
            }
            e->refs++;
            petrel_metric_add(m_hits, 1);
            return e;
        }
    }
    petrel_metric_add(m_misses, 1);
    e = entry_load(c, key, klen, h, now);
    if (e == NULL)
        return NULL;
    cache_insert(c, e);
    e->refs++;
    cache_evict(c);
    return e;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

/* 301 to the path with a slash added, the query kept. */
static int redirect_slash(petrel_req_t *req)
{
    size_t n = req->path.len;
    char *loc = petrel_arena_alloc(req->arena, 3 * n + 3 + req->query.len, 1);
    if (loc == NULL)
        return 503;
    size_t o = petrel__static_uri_encode(req->path.ptr, n, loc);
    loc[o++] = '/';
    if (req->query.len) {
        loc[o++] = '?';
        memcpy(loc + o, req->query.ptr, req->query.len);
        o += req->query.len;
    }
    loc[o] = '\0';
    if (petrel_resp_header(req, "Location", loc) < 0)
        return 400;
    return 301;
}

typedef struct dent {
    char *name;
    bool dir;
    off_t size;
    time_t mtime;
} dent_t;

static int dent_cmp(const void *a, const void *b)
{
    const dent_t *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* An HTML listing of a directory without an index (--autoindex). */
static int autoindex(petrel_req_t *req, const mount_t *m, const char *rel, size_t rlen)
{
    char dpath[REL_MAX + 2];
    memcpy(dpath, rel, rlen);
    dpath[rlen ? rlen - 1 : 0] = '\0';
    struct stat st;
    int fd = petrel__static_open(m->rootfd, m->root_real, dpath, PETREL__STATIC_DIR_READ, &st);
    if (fd < 0)
        return err_kind(fd) == K_FORBIDDEN ? 403 : 404;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 500;
    }
    dent_t *ents = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue; /* ".", ".." and hidden files */
        struct stat s;
        if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            dent_t *ne = realloc(ents, nc * sizeof(*ne));
            if (ne == NULL) {
                rc = 503;
                break;
            }
            ents = ne;
            cap = nc;
        }
        ents[n].name = strdup(de->d_name);
        if (ents[n].name == NULL) {
            rc = 503;
            break;
        }
        ents[n].dir = S_ISDIR(s.st_mode);
        ents[n].size = s.st_size;
        ents[n].mtime = s.st_mtime;
        n++;
    }
    closedir(d);
    buf_t b = {0};
    if (rc == 0) {
        if (n > 1) /* qsort(NULL, 0, ...) is undefined: an empty directory */
            qsort(ents, n, sizeof(*ents), dent_cmp);
        buf_str(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
        buf_html(&b, req->path.ptr, req->path.len);
        buf_str(&b, "</title></head>\n<body><h1>Index of ");
        buf_html(&b, req->path.ptr, req->path.len);
        buf_str(&b, "</h1><hr><pre>\n");
        if (req->path.len > 1)
            buf_str(&b, "<a href=\"../\">../</a>\n");
        for (size_t i = 0; i < n; i++) {
            size_t nl = strlen(ents[i].name);
            char *enc = malloc(3 * nl + 1), date[32], line[80];
            if (enc == NULL) {
                b.failed = true;
                break;
            }
            petrel__static_uri_encode(ents[i].name, nl, enc);
            buf_str(&b, "<a href=\"./");
            buf_str(&b, enc);
            free(enc);
            buf_str(&b, ents[i].dir ? "/\">" : "\">");
            buf_html(&b, ents[i].name, nl);
            buf_str(&b, ents[i].dir ? "/</a>" : "</a>");
            petrel__static_format_date(ents[i].mtime, date);
            if (ents[i].dir)
                snprintf(line, sizeof(line), "  %s  -\n", date);
            else
                snprintf(line, sizeof(line), "  %s  %lld\n", date, (long long)ents[i].size);
            buf_str(&b, line);
        }
        buf_str(&b, "</pre><hr></body></html>\n");
        if (b.failed)
            rc = 503;
    }
    for (size_t i = 0; i < n; i++)
        free(ents[i].name);
    free(ents);
    if (rc == 0) {
        int s = petrel_send_copy(req, 200, "text/html; charset=utf-8", b.p, b.len);
        rc = s < 0 ? s : 0;
    }
    free(b.p);
    return rc;
}

/* The request headers the handler looks at, in one pass. */
typedef struct reqh {
    petrel__static_cond_t cond;
    const char *range, *if_range, *accept_encoding;
} reqh_t;

static void scan_headers(const petrel_req_t *req, reqh_t *h)
{
    memset(h, 0, sizeof(*h));
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = req->headers[i].name.ptr, *v = req->headers[i].value.ptr;
        switch (req->headers[i].name.len) {
        case 5:
            if (ieq(n, "range", 5))
                h->range = v;
            break;
        case 8:
            if (ieq(n, "if-match", 8))
                h->cond.if_match = v;
            else if (ieq(n, "if-range", 8))
                h->if_range = v;
            break;
        case 13:
            if (ieq(n, "if-none-match", 13))
                h->cond.if_none_match = v;
            break;
        case 15:
            if (ieq(n, "accept-encoding", 15))
                h->accept_encoding = v;
            break;
        case 17:
            if (ieq(n, "if-modified-since", 17))
                h->cond.if_modified_since = v;
            break;
        case 19:
            if (ieq(n, "if-unmodified-since", 19))
                h->cond.if_unmodified_since = v;
            break;
        }
    }
}

/* Serve a file entry; consumes the caller's reference to `e`. */
static int serve_file(petrel_req_t *req, const mount_t *m, cache_t *c, entry_t *e, uint64_t now)
{
    reqh_t h;
    scan_headers(req, &h);
    entry_t *b = e; /* the representation sent: e or a precompressed variant */
    const char *enc = NULL;
    if (e->variants && h.accept_encoding) {
        int pick = petrel__static_pick_encoding(h.accept_encoding, e->variants);
        if (pick && e->fslen + 3 <= REL_MAX) {
            char key[REL_MAX + 4];
            memcpy(key, e->fspath, e->fslen);
            memcpy(key + e->fslen, pick == PETREL__ENC_BR ? ".br" : ".gz", 3);
            entry_t *v = cache_get(c, key, e->fslen + 3, now);
            if (v && v->kind == K_FILE) {
                b = v;
                enc = pick == PETREL__ENC_BR ? "br" : "gzip";
            } else if (v) {
                entry_release(v);
            }
        }
    }
    const char *type = e->type;
    bool vary = e->variants != 0;
    if (b != e)
        entry_release(e); /* type is static storage: e is not needed any more */

    int rc = 0, status = 200;
    int pre = petrel__static_precondition(&h.cond, b->etag, b->mtime, b->last_modified);
    if (pre == 412) {
        rc = 412;
        goto done;
    }
    uint64_t off = 0, len = b->size;
    char crange[64];
    if (pre == 0 && h.range && req->method == PETREL_GET &&
        petrel__static_if_range(h.if_range, b->etag, b->last_modified)) {
        int r = petrel__static_range(h.range, b->size, &off, &len);
        if (r == 416) {
            snprintf(crange, sizeof(crange), "bytes */%llu", (unsigned long long)b->size);
            petrel_resp_header(req, "Content-Range", crange);
            rc = 416;
            goto done;
        }
        if (r == 206) {
            status = 206;
            snprintf(crange, sizeof(crange), "bytes %llu-%llu/%llu", (unsigned long long)off,
                     (unsigned long long)(off + len - 1), (unsigned long long)b->size);
        }
    }
    if (petrel_resp_header(req, "Last-Modified", b->last_modified) < 0 ||
        petrel_resp_header(req, "ETag", b->etag) < 0 ||
        (m->cache_control && petrel_resp_header(req, "Cache-Control", m->cache_control) < 0) ||
        (vary && petrel_resp_header(req, "Vary", "Accept-Encoding") < 0) ||
        (enc && petrel_resp_header(req, "Content-Encoding", enc) < 0)) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    if (pre == 304) {
        rc = petrel_send(req, 304, NULL, NULL, 0);
        goto done;
    }
    if (petrel_resp_header(req, "Accept-Ranges", "bytes") < 0 ||
        (status == 206 && petrel_resp_header(req, "Content-Range", crange) < 0)) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    /* The body refers to the entry (its bytes or its descriptor) until the
     * response has been written: the reference goes with the request. */
    if (petrel_arena_defer(req->arena, release_cb, b) < 0) {
        rc = PETREL_ENOMEM;
        goto done;
    }
    if (b->data)
        return petrel_send(req, status, type, b->data + off, (size_t)len);
    return petrel_send_fd(req, status, type, b->fd, (off_t)off, (size_t)len, 0);
done:
    entry_release(b);
    return rc;
}

static int handle(petrel_req_t *req, void *data)
{
    mount_t *m = data;
    const char *path = req->path.ptr;
    size_t plen = req->path.len;
    if (unlikely(plen < m->plen || memcmp(path, m->prefix, m->plen) != 0)) {
        /* the route of the prefix without its slash */
        if (plen + 1 == m->plen && memcmp(path, m->prefix, plen) == 0)
            return redirect_slash(req);
        return 404;
    }
    const char *rel = path + m->plen;
    size_t rlen = plen - m->plen;
    if (unlikely(rlen > REL_MAX))
        return 414;
    if (unlikely(memchr(rel, '\\', rlen) || memchr(rel, '\0', rlen)))
        return 400;
    cache_t *c = cache_of(m);
    if (unlikely(c == NULL))
        return 503;
    uint64_t now = now_ms();
    entry_t *e = cache_get(c, rel, rlen, now);
    if (unlikely(e == NULL))
        return 503;
    if (likely(e->kind == K_FILE))
        return serve_file(req, m, c, e, now);
    int kind = e->kind;
    entry_release(e);
    switch (kind) {
    case K_DIR:
        return redirect_slash(req);
    case K_NOINDEX:
        return m->autoindex ? autoindex(req, m, rel, rlen) : 404;
    case K_FORBIDDEN:
        return 403;
    default:
        return 404;
    }
}

/* ------------------------------------------------------------------------ */
/* Mounting                                                                  */

void petrel_static_opts_init(petrel_static_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->index = "index.html";
    o->autoindex = 0;
    o->cache_control = NULL;
    o->precompressed = 1;
    o->cache_size = (size_t)64 << 20;
    o->max_file_in_memory = (size_t)64 << 10;
    o->max_open_files = 1024;
    o->revalidate_ms = 1000;
}

static char *dup_or_null(const char *s, bool *fail)
{
    if (s == NULL || *s == '\0')
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *fail = true;
    return d;
}

/* A prefix the router takes literally: segments that are not parameters,
 * wildcards or dot segments. */
static bool prefix_ok(const char *p)
{
    if (p[0] != '/')
        return false;
    for (const char *s = p + 1; *s;) {
        const char *e = strchrnul(s, '/');
        size_t n = (size_t)(e - s);
        if (n == 0 && *e)
            return false; /* "//" */
        if (n && (s[0] == ':' || (n == 1 && s[0] == '*') || (n == 1 && s[0] == '.') ||
                  (n == 2 && s[0] == '.' && s[1] == '.')))
            return false;
        if (memchr(s, '\\', n) || memchr(s, '?', n) || memchr(s, '#', n))
            return false;
        s = *e ? e + 1 : e;
    }
    return true;
}

/* PREFIX* serves; PREFIX without its slash redirects to it. */
static int add_routes(petrel_server_t *srv, mount_t *m)
{
    char *pat = malloc(m->plen + 2);
    if (pat == NULL)
        return PETREL_ENOMEM;
    memcpy(pat, m->prefix, m->plen);
    memcpy(pat + m->plen, "*", 2);
    int rc = petrel_route_add(srv, PETREL_GET | PETREL_HEAD, pat, handle, m);
    if (rc == 0 && m->plen > 1) {
        pat[m->plen - 1] = '\0';
        petrel_route_add(srv, PETREL_GET | PETREL_HEAD, pat, handle, m); /* may exist: fine */
    }
    free(pat);
    return rc;
}

static bool str_same(const char *a, const char *b)
{
    if (a == NULL || *a == '\0')
        return b == NULL || *b == '\0';
    return b && strcmp(a, b) == 0;
}

/* The mount of the same prefix, directory and options made before (a
 * reload -- SIGHUP, --dev -- sets the server up again into a fresh router):
 * it is used again rather than duplicated with another descriptor. */
static mount_t *mount_find(const char *prefix, const char *dir, const petrel_static_opts_t *o)
{
    size_t pl = strlen(prefix);
    if (pl && prefix[pl - 1] == '/')
        pl--;
    struct stat st, rst;
    if (stat(dir, &st) < 0)
        return NULL;
    for (unsigned i = 0; i < nmounts; i++) {
        mount_t *m = mounts[i];
        if (m->plen - 1 != pl || memcmp(m->prefix, prefix, pl) != 0 || strcmp(m->dir, dir) != 0 ||
            !str_same(m->index, o->index) || !str_same(m->cache_control, o->cache_control) ||
            m->autoindex != (o->autoindex != 0) || m->precompressed != (o->precompressed != 0) ||
            m->cache_size != o->cache_size || m->max_in_memory != o->max_file_in_memory ||
            m->max_fds != o->max_open_files || m->revalidate_ms != o->revalidate_ms)
            continue;
        if (fstat(m->rootfd, &rst) == 0 && rst.st_dev == st.st_dev && rst.st_ino == st.st_ino)
            return m;
    }
    return NULL;
}

int petrel_static_mount(petrel_server_t *srv, const char *prefix, const char *dir,
                        const petrel_static_opts_t *opts)
{
    petrel_static_opts_t defaults;
    if (opts == NULL) {
        petrel_static_opts_init(&defaults);
        opts = &defaults;
    }
    if (srv == NULL || prefix == NULL || dir == NULL || !prefix_ok(prefix))
        return PETREL_EINVAL;
    m_hits = petrel_metric_counter(srv, "petrel_static_cache_hits_total",
                                   "Static file look-ups answered from the cache.");
    m_misses = petrel_metric_counter(srv, "petrel_static_cache_misses_total",
                                     "Static file look-ups that had to open the file.");
    m_bytes = petrel_metric_gauge(srv, "petrel_static_cache_bytes",
                                  "Memory held by the static file caches.");
    if (opts->index && (strchr(opts->index, '/') || strcmp(opts->index, ".") == 0 ||
                        strcmp(opts->index, "..") == 0))
        return PETREL_EINVAL;
    if (opts->cache_control &&
        (strchr(opts->cache_control, '\r') || strchr(opts->cache_control, '\n')))
        return PETREL_EINVAL;
    mount_t *same = mount_find(prefix, dir, opts);
    if (same)
        return add_routes(srv, same);
    int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0 || access(dir, X_OK) < 0) {
        if (rootfd >= 0)
            close(rootfd);
        return PETREL_ENOTFOUND;
    }
    mount_t *m = calloc(1, sizeof(*m));
    mount_t **ms = realloc(mounts, (nmounts + 1) * sizeof(*ms));
    if (ms)
        mounts = ms;
    bool fail = m == NULL || ms == NULL;
    if (!fail) {
        size_t pl = strlen(prefix);
        bool slash = prefix[pl - 1] == '/';
        m->prefix = malloc(pl + 3);
        if (m->prefix) {
            memcpy(m->prefix, prefix, pl);
            if (!slash)
                m->prefix[pl++] = '/';
            m->prefix[pl] = '\0';
            m->plen = pl;
        }
        m->rootfd = rootfd;
        m->dir = strdup(dir);
        m->root_real = realpath(dir, NULL);
        m->index = dup_or_null(opts->index, &fail);
        m->index_len = m->index ? strlen(m->index) : 0;
        m->cache_control = dup_or_null(opts->cache_control, &fail);
        m->autoindex = opts->autoindex != 0;
        m->precompressed = opts->precompressed != 0;
        m->cache_size = opts->cache_size;
        m->max_in_memory = opts->max_file_in_memory;
        m->max_fds = opts->max_open_files;
        m->revalidate_ms = opts->revalidate_ms;
        fail = fail || m->prefix == NULL || m->dir == NULL || m->root_real == NULL;
    }
    if (fail) {
        if (m) {
            free(m->prefix);
            free(m->dir);
            free(m->root_real);
            free(m->index);
            free(m->cache_control);
            free(m);
        }
        close(rootfd);
        return PETREL_ENOMEM;
    }
    if (hash_seed == 0 && getrandom(&hash_seed, sizeof(hash_seed), GRND_NONBLOCK) < 0)
        hash_seed = (uint64_t)time(NULL) * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)getpid();
    petrel__static_have_openat2(rootfd);

    int rc = add_routes(srv, m);
    if (rc < 0) {
        close(rootfd);
        free(m->prefix);
        free(m->dir);
        free(m->root_real);
        free(m->index);
        free(m->cache_control);
        free(m);
        return rc;
    }
    m->id = nmounts;
    mounts[nmounts++] = m;
    petrel_log(PETREL_LOG_DEBUG, "static: %s -> %s (%s)", m->prefix, m->root_real,
               openat2_state == 1 ? "openat2" : "component walk");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* As a module: --module static:PREFIX=DIR (or static:DIR, at "/")         */

static int module_init(petrel_server_t *srv, const char *args)
{
    if (*args == '\0') {
        petrel_log(PETREL_LOG_ERROR, "module 'static': expected --module static:PREFIX=DIR");
        return PETREL_EINVAL;
    }
    /* The prefix may leave out its leading slash: petrel's --module parser
     * takes any spec with a '/' before the first ':' for a file name. */
    const char *eq = strchr(args, '=');
    size_t pl = eq ? (size_t)(eq - args) : 0;
    char *prefix = malloc(pl + 2);
    if (prefix == NULL)
        return PETREL_ENOMEM;
    size_t o = 0;
    if (pl == 0 || args[0] != '/')
        prefix[o++] = '/';
    memcpy(prefix + o, args, pl);
    prefix[o + pl] = '\0';
    const char *dir = eq ? eq + 1 : args;
    int rc = petrel_static_mount(srv, prefix, dir, NULL);
    if (rc < 0)
        petrel_log(PETREL_LOG_ERROR, "module 'static': cannot mount '%s' at '%s': %s", dir, prefix,
                   rc == PETREL_ENOTFOUND ? "not a readable directory" : petrel_strerror(rc));
    free(prefix);
    return rc;
}

static void module_worker_fini(petrel_server_t *srv)
{
    (void)srv;
    petrel__static_worker_fini();
}

PETREL_MODULE(static, NULL, module_init, NULL, module_worker_fini)
