/*
 * mime.c -- the Content-Type of a file, by its extension (case-insensitive).
 * A name without an extension, a dotfile (".profile") or an extension not
 * in the table gets the mount's default type (--default-type, as nginx's
 * default_type; application/octet-stream unless set).
 */
#include "static.h"

#include <string.h>
#include <strings.h>

/* Sorted by extension, lower case. */
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

const char *petrel__static_mime(const char *name, size_t len, const char *default_type)
{
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || i == 1 || name[i - 2] == '/')
        return default_type; /* no extension, or a dotfile ".x" */
    size_t el = len - i;
    for (size_t k = 0; k < sizeof(mime_table) / sizeof(mime_table[0]); k++)
        if (strlen(mime_table[k].ext) == el && strncasecmp(name + i, mime_table[k].ext, el) == 0)
            return mime_table[k].type;
    return default_type;
}
