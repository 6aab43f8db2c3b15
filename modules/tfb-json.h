/*
 * tfb-json.h -- the JSON the tfb module writes (modules/tfb.c): integers,
 * strings escaped as RFC 8259 §7 requires, World objects.  By hand: a
 * library costs more than a whole request (doc/benchmarks.md, "JSON: a
 * library or by hand"); tools/json-cost.c measures these very functions
 * against the libraries.  Header-only, static: for tfb.c and that tool.
 */
#ifndef PETREL_TFB_JSON_H
#define PETREL_TFB_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct world {
    int32_t id;
    int32_t random_number;
} world_t;

/* `v` (>= 0) in decimal at p; returns the end. */
static inline char *put_int(char *p, int32_t v)
{
    char t[12];
    int n = 0;
    uint32_t u = (uint32_t)v;
    do {
        t[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = t[--n];
    return p;
}

/* The longest a JSON world object is: {"id":10000,"randomNumber":10000} plus a comma. */
#define WORLD_JSON_MAX 40

static inline char *json_world(char *p, const world_t *w)
{
    memcpy(p, "{\"id\":", 6);
    p = put_int(p + 6, w->id);
    memcpy(p, ",\"randomNumber\":", 16);
    p = put_int(p + 16, w->random_number);
    *p++ = '}';
    return p;
}

/* 1 for the bytes a JSON string must escape (RFC 8259 §7): the controls,
 * '"' and '\\'.  The rest, UTF-8 included, goes as it is. */
static const unsigned char json_esc[256] = {[0 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1};

/* `s` as a JSON string at o, which has room for 6 * n + 2 bytes (every
 * byte escaped as \u00XX); returns the end.  Runs of plain bytes are
 * copied whole. */
static inline char *json_str(char *o, const char *s, size_t n)
{
    static const char hex[16] = "0123456789abcdef";
    *o++ = '"';
    for (size_t i = 0;;) {
        size_t j = i;
        while (j < n && !json_esc[(unsigned char)s[j]])
            j++;
        memcpy(o, s + i, j - i);
        o += j - i;
        if (j == n)
            break;
        unsigned char c = (unsigned char)s[j];
        *o++ = '\\';
        switch (c) {
        case '"':
        case '\\':
            *o++ = (char)c;
            break;
        case '\n':
            *o++ = 'n';
            break;
        case '\r':
            *o++ = 'r';
            break;
        case '\t':
            *o++ = 't';
            break;
        default:
            o[0] = 'u';
            o[1] = o[2] = '0';
            o[3] = hex[c >> 4];
            o[4] = hex[c & 15];
            o += 5;
        }
        i = j + 1;
    }
    *o++ = '"';
    return o;
}

#endif /* PETREL_TFB_JSON_H */
