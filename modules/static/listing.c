/*
 * listing.c -- the HTML listing of a directory without an index file
 * (--autoindex): directories first, then files, by name; names starting
 * with a dot are left out; every name is escaped for HTML and its link
 * percent-encoded.  Made on each request, with the heap (not on the hot
 * path: an index file is what a site serves).
 */
#include "static.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef petrel__static_mount_t mount_t;

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

int petrel__static_listing(petrel_req_t *req, const mount_t *m, const char *rel, size_t rlen)
{
    char dpath[REL_MAX + 2];
    memcpy(dpath, rel, rlen);
    dpath[rlen ? rlen - 1 : 0] = '\0';
    struct stat st;
    int fd = petrel__static_open(m->rootfd, m->root_real, dpath, PETREL__STATIC_DIR_READ, &st);
    if (fd < 0)
        return petrel__static_err_kind(fd) == K_FORBIDDEN ? 403 : 404;
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
            petrel_http_date_format(ents[i].mtime, date);
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
