/*
 * tfb.c -- the TechEmpower Framework Benchmarks test types, on the
 * PostgreSQL pool of petrel.h (`--module tfb[:[pool.SETTING=N ...] CONNINFO]`):
 *
 *   GET /json                {"message":"Hello, World!"}, an object serialized per request
 *   GET /plaintext           Hello, World!
 *   GET /db                  one random World row, as JSON
 *   GET /queries?queries=N   N random World rows, one query each (N clamped to 1..500;
 *                            missing or not a number: 1)
 *   GET /fortunes            the Fortune table and one more fortune added at request time,
 *                            sorted by message, as an HTML table (every value escaped)
 *   GET /updates?queries=N   N random World rows read (one query each), then given new random
 *                            numbers and written back in one statement
 *   GET /cached-queries?count=N  N random World rows from a per-worker cache (petrel.h,
 *                            petrel_cache_new: CLOCK replacement, read-through), filled from
 *                            the database at start-up; a miss loads its row, once
 *
 * The database is the benchmark's hello_world (examples/tfb/setup.sh makes
 * it: World of 10,000 rows, Fortune of 12).  Every query is a transaction
 * of its own (the pool sends a Sync after each, as the benchmark's rules
 * ask), and the queries of a request are in flight together: one round
 * trip for /queries?queries=20.  Queries and rows are text, but for
 * /updates' two int[], sent in the binary array format (petrel_pg_exec_bin):
 * 10 % fewer instructions of petrel's a request (doc/benchmarks.md).  Server and
 * Date are on every response (petrel's own).  JSON is written by hand: a
 * library costs more than the whole request here (doc/benchmarks.md).
 */
#include <petrel.h>

#include "tfb-json.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORLD_ROWS 10000
#define MAX_QUERIES 500

static const char hello[] = "Hello, World!";
static const char json_type[] = "application/json";

/* From init (the master): the pool settings and connection string. */
static petrel_pg_opts_t opts;

/* Per worker (worker_init). */
static petrel_pg_t *db;
static petrel_pg_stmt_t *world_by_id, *all_fortunes, *update_worlds;
static uint64_t rng;
static petrel_cache_t *cache; /* randomnumber (int32_t) by id (int32_t) */
static int cache_filling, cache_full;


/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */

/* xorshift64*: enough for picking rows, and no lock, no syscall. */
static uint32_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ULL) >> 32);
}

/* 1..10000, uniformly (the modulo bias of 2^32 % 10000 is 7e-7). */
static int32_t random_id(void)
{
    return (int32_t)(rnd() % WORLD_ROWS) + 1;
}

/*
 * The count of a test's query parameter: the rules say a missing value, one
 * that is not an integer, or one below 1 counts as 1, and one above 500 as
 * 500.
 */
static int count_of(petrel_req_t *req, const char *name)
{
    const char *v = petrel_req_query(req, name);
    if (v == NULL || *v == '\0')
        return 1;
    const char *s = v;
    int neg = *s == '-';
    if (neg || *s == '+')
        s++;
    if (*s == '\0')
        return 1;
    long n = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 1; /* not an integer */
        if (n <= MAX_QUERIES)
            n = n * 10 + (*s - '0');
    }
    if (neg || n < 1)
        return 1;
    return n > MAX_QUERIES ? MAX_QUERIES : (int)n;
}

/* ------------------------------------------------------------------------ */
/* JSON and HTML output                                                     */

/* An array of worlds as JSON, in the request arena: 0 or a negative code. */
static int send_worlds(petrel_req_t *req, const world_t *w, int n)
{
    char *b = petrel_arena_alloc(req->arena, 2 + (size_t)n * WORLD_JSON_MAX, 1);
    if (b == NULL)
        return petrel_send_status(req, 500);
    char *p = b;
    *p++ = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p = json_world(p, &w[i]);
    }
    *p++ = ']';
    return petrel_send(req, 200, json_type, b, (size_t)(p - b));
}

/* A result row (id, randomnumber) as a world: 0, or -1 when it is not one. */
static int world_of(const petrel_pg_result_t *res, int row, world_t *w)
{
    int32_t id, rn;
    if (petrel_pg_value_int4(res, row, 0, &id) < 0 || petrel_pg_value_int4(res, row, 1, &rn) < 0 ||
        id < 1 || id > WORLD_ROWS || rn < 0)
        return -1;
    w->id = id;
    w->random_number = rn;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* /json, /plaintext                                                        */

/* The object of the JSON test, made for each request and serialized. */
typedef struct message {
    petrel_str_t message;
} message_t;

static int json(petrel_req_t *req, void *data)
{
    (void)data;
    message_t m = {{hello, sizeof(hello) - 1}};
    char *b = petrel_arena_alloc(req->arena, 11 + 6 * m.message.len + 2 + 1, 1);
    if (b == NULL)
        return PETREL_ENOMEM;
    memcpy(b, "{\"message\":", 11);
    char *p = json_str(b + 11, m.message.ptr, m.message.len);
    *p++ = '}';
    return petrel_send(req, 200, json_type, b, (size_t)(p - b));
}

static int plaintext(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", hello, sizeof(hello) - 1);
}

/* ------------------------------------------------------------------------ */
/* /db, /queries                                                            */

/* The id and the row go as text: binary (petrel_pg_exec_bin) cost the
 * database as much, and petrel about as much (doc/benchmarks.md). */
static int query_world(petrel_req_t *req, int32_t id, petrel_pg_cb cb, void *data)
{
    char buf[12];
    *put_int(buf, id) = '\0';
    const char *params[1] = {buf};
    return petrel_pg_exec(db, req, world_by_id, 1, params, cb, data);
}

static void db_done(const petrel_pg_result_t *res, void *data)
{
    petrel_req_t *req = data;
    world_t w;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        petrel_pg_send_error(req, res);
        return;
    }
    if (petrel_pg_nrows(res) != 1 || world_of(res, 0, &w) < 0) {
        petrel_log(PETREL_LOG_ERROR,
                   "tfb: request %llu: no World row (is the database "
                   "hello_world of examples/tfb/setup.sh?)",
                   (unsigned long long)req->id);
        petrel_send_status(req, 500);
        return;
    }
    char b[WORLD_JSON_MAX];
    char *p = json_world(b, &w);
    petrel_send_copy(req, 200, json_type, b, (size_t)(p - b));
}

static int db_one(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = query_world(req, random_id(), db_done, req);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* The rows of /queries, /updates and /cached-queries, in the request arena. */
typedef struct rows {
    petrel_req_t *req;
    int n;    /* rows wanted */
    int done; /* callbacks so far */
    int failed;
    world_t w[];
} rows_t;

static rows_t *rows_new(petrel_req_t *req, int n)
{
    rows_t *r = petrel_arena_alloc(req->arena, sizeof(*r) + (size_t)n * sizeof(world_t), 0);
    if (r) {
        r->req = req;
        r->n = n;
        r->done = 0;
        r->failed = 0;
    }
    return r;
}

/* A row of `r` arrived (in order: the callbacks of a batch run in the
 * order of its queries).  The first error answers the request; the pool
 * calls nobody back for it after that. */
static int row_in(rows_t *r, const petrel_pg_result_t *res, world_t *slot)
{
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        r->failed = 1;
        petrel_pg_send_error(r->req, res);
        return -1;
    }
    if (petrel_pg_nrows(res) != 1 || world_of(res, 0, slot) < 0) {
        r->failed = 1;
        petrel_send_status(r->req, 500);
        return -1;
    }
    return 0;
}

static void queries_row(const petrel_pg_result_t *res, void *data)
{
    rows_t *r = data;
    if (r->failed || row_in(r, res, &r->w[r->done]) < 0)
        return;
    if (++r->done == r->n)
        send_worlds(r->req, r->w, r->n);
}

static int queries(petrel_req_t *req, void *data)
{
    (void)data;
    int n = count_of(req, "queries");
    rows_t *r = rows_new(req, n);
    if (r == NULL)
        return PETREL_ENOMEM;
    for (int i = 0; i < n; i++) {
        int rc = query_world(req, random_id(), queries_row, r);
        if (rc < 0) /* those taken already are dropped with the request */
            return petrel_pg_send_refused(db, req, rc);
    }
    return PETREL_LATER;
}

/* ------------------------------------------------------------------------ */
/* /updates                                                                 */

static int cmp_world(const void *a, const void *b)
{
    const world_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The state of an /updates request: its rows in the response order, and
 * the rows to write (each id once, in id order), in the request arena. */
typedef struct updates {
    rows_t *r;
    world_t *u; /* n of them; nu are used */
    int nu;
} updates_t;

static void updates_written(const petrel_pg_result_t *res, void *data)
{
    updates_t *up = data;
    rows_t *r = up->r;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        petrel_pg_send_error(r->req, res);
        return;
    }
    if (petrel_pg_affected(res) != (uint64_t)up->nu) {
        petrel_log(PETREL_LOG_ERROR, "tfb: request %llu: %llu rows updated, want %d",
                   (unsigned long long)r->req->id, (unsigned long long)petrel_pg_affected(res),
                   up->nu);
        petrel_send_status(r->req, 500);
        return;
    }
    send_worlds(r->req, r->w, r->n);
}

/*
 * Every row is read; now the new numbers are chosen and written in one
 * UPDATE (the rules allow "batches of update statements or individual
 * update statements that affect multiple rows"), whose text has no
 * SELECT in it: the benchmark counts each statement matching "select" as
 * a read.  An id drawn twice is written once, with one new number that
 * both of its rows show; the ids go in order, so that concurrent updates
 * lock rows in one order.
 */
static void updates_write(updates_t *up)
{
    rows_t *r = up->r;
    petrel_req_t *req = r->req;
    int n = r->n;
    for (int i = 0; i < n; i++) {
        r->w[i].random_number = random_id();
        up->u[i] = r->w[i];
    }
    qsort(up->u, (size_t)n, sizeof(world_t), cmp_world);
    int nu = 0;
    for (int i = 0; i < n; i++)
        if (nu == 0 || up->u[nu - 1].id != up->u[i].id)
            up->u[nu++] = up->u[i];
    up->nu = nu;
    for (int i = 0; i < n; i++) { /* a repeated id shows the number written */
        world_t *w = bsearch(&r->w[i], up->u, (size_t)nu, sizeof(world_t), cmp_world);
        r->w[i].random_number = w->random_number;
    }
    /* two int4[] in the binary array format (array_send): 1 dimension, no
     * NULLs, element type int4 (OID 23), nu elements from index 1, then
     * each as its length (4) and its value, in network byte order */
    size_t alen = 20 + (size_t)nu * 8;
    uint32_t *ids = petrel_arena_alloc(req->arena, alen, 4);
    uint32_t *rns = petrel_arena_alloc(req->arena, alen, 4);
    if (ids == NULL || rns == NULL) {
        petrel_send_status(req, 500);
        return;
    }
    uint32_t head[5] = {htonl(1), 0, htonl(23), htonl((uint32_t)nu), htonl(1)};
    memcpy(ids, head, sizeof(head));
    memcpy(rns, head, sizeof(head));
    for (int i = 0; i < nu; i++) {
        ids[5 + 2 * i] = rns[5 + 2 * i] = htonl(4);
        ids[6 + 2 * i] = htonl((uint32_t)up->u[i].id);
        rns[6 + 2 * i] = htonl((uint32_t)up->u[i].random_number);
    }
    petrel_str_t params[2] = {{(const char *)ids, alen}, {(const char *)rns, alen}};
    int rc = petrel_pg_exec_bin(db, req, update_worlds, 2, params, updates_written, up);
    if (rc < 0 && petrel_pg_send_refused(db, req, rc) < 0)
        petrel_send_status(req, 500);
}

/* A row read: its id and number, as the database has them. */
static void updates_row(const petrel_pg_result_t *res, void *data)
{
    updates_t *up = data;
    rows_t *r = up->r;
    if (r->failed || row_in(r, res, &r->w[r->done]) < 0)
        return;
    if (++r->done == r->n)
        updates_write(up);
}

/*
 * N random rows (drawn as for /queries: an id may come twice) are read,
 * one query each, all in flight together; when the last has answered, the
 * new numbers are chosen and written (updates_write).
 */
static int updates(petrel_req_t *req, void *data)
{
    (void)data;
    int n = count_of(req, "queries");
    rows_t *r = rows_new(req, n);
    updates_t *up = petrel_arena_alloc(req->arena, sizeof(*up), 0);
    world_t *u = petrel_arena_alloc(req->arena, (size_t)n * sizeof(world_t), 0);
    if (r == NULL || up == NULL || u == NULL)
        return PETREL_ENOMEM;
    up->r = r;
    up->u = u;
    up->nu = 0;
    for (int i = 0; i < n; i++) {
        int rc = query_world(req, random_id(), updates_row, up);
        if (rc < 0)
            return petrel_pg_send_refused(db, req, rc);
    }
    return PETREL_LATER;
}

/* ------------------------------------------------------------------------ */
/* /fortunes                                                                */

typedef struct fortune {
    int32_t id;
    const char *msg;
    size_t len;
} fortune_t;

static int cmp_fortune(const void *a, const void *b)
{
    const fortune_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->msg, y->msg, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* HTML-escaped length and copy: & < > " ' (the rest, UTF-8 included, as it is). */
static size_t html_len(const char *s, size_t n)
{
    size_t len = n;
    for (size_t i = 0; i < n; i++)
        switch (s[i]) {
        case '&':
            len += 4;
            break; /* &amp; */
        case '<':
        case '>':
            len += 3;
            break; /* &lt; &gt; */
        case '"':
            len += 5;
            break; /* &quot; */
        case '\'':
            len += 4;
            break; /* &#39; */
        default:
            break;
        }
    return len;
}

static char *put_str(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put_str((p), (lit), sizeof(lit) - 1)

static char *html(char *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        switch (s[i]) {
        case '&':
            p = PUT_LIT(p, "&amp;");
            break;
        case '<':
            p = PUT_LIT(p, "&lt;");
            break;
        case '>':
            p = PUT_LIT(p, "&gt;");
            break;
        case '"':
            p = PUT_LIT(p, "&quot;");
            break;
        case '\'':
            p = PUT_LIT(p, "&#39;");
            break;
        default:
            *p++ = s[i];
        }
    return p;
}

static const char fortunes_head[] = "<!DOCTYPE html><html><head><title>Fortunes</title></head>"
                                    "<body><table><tr><th>id</th><th>message</th></tr>";
static const char fortunes_tail[] = "</table></body></html>";
static const char extra_fortune[] = "Additional fortune added at request time.";

static void fortunes_done(const petrel_pg_result_t *res, void *data)
{
    petrel_req_t *req = data;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        petrel_pg_send_error(req, res);
        return;
    }
    int n = petrel_pg_nrows(res);
    fortune_t *f = petrel_arena_alloc(req->arena, ((size_t)n + 1) * sizeof(*f), 0);
    if (f == NULL) {
        petrel_send_status(req, 500);
        return;
    }
    size_t size = sizeof(fortunes_head) + sizeof(fortunes_tail);
    for (int i = 0; i < n; i++) {
        int64_t id;
        petrel_str_t m = petrel_pg_value(res, i, 1);
        if (petrel_pg_value_int(res, i, 0, &id) < 0 || m.ptr == NULL) {
            petrel_send_status(req, 500);
            return;
        }
        f[i].id = (int32_t)id;
        f[i].msg = m.ptr; /* in the result: valid during this callback, used in it */
        f[i].len = m.len;
    }
    f[n].id = 0;
    f[n].msg = extra_fortune;
    f[n].len = sizeof(extra_fortune) - 1;
    n++;
    qsort(f, (size_t)n, sizeof(*f), cmp_fortune);
    for (int i = 0; i < n; i++) /* <tr><td>ID</td><td>MSG</td></tr> */
        size += 11 + 18 + 9 + html_len(f[i].msg, f[i].len);
    char *b = petrel_arena_alloc(req->arena, size, 1);
    if (b == NULL) {
        petrel_send_status(req, 500);
        return;
    }
    char *p = PUT_LIT(b, fortunes_head);
    for (int i = 0; i < n; i++) {
        p = PUT_LIT(p, "<tr><td>");
        p = put_int(p, f[i].id);
        p = PUT_LIT(p, "</td><td>");
        p = html(p, f[i].msg, f[i].len);
        p = PUT_LIT(p, "</td></tr>");
    }
    p = PUT_LIT(p, fortunes_tail);
    petrel_send(req, 200, "text/html; charset=utf-8", b, (size_t)(p - b));
}

static int fortunes(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = petrel_pg_exec(db, req, all_fortunes, 0, NULL, fortunes_done, req);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* ------------------------------------------------------------------------ */
/* /cached-queries                                                          */

static void cache_filled(const petrel_pg_result_t *res, void *data)
{
    (void)data;
    cache_filling = 0;
    if (petrel_pg_status(res) != PETREL_PG_OK)
        return; /* misses read through meanwhile; the next one tries again */
    int n = petrel_pg_nrows(res), got = 0;
    for (int i = 0; i < n; i++) {
        world_t w;
        if (world_of(res, i, &w) == 0 &&
            petrel_cache_set(cache, &w.id, sizeof(w.id), &w.random_number,
                             sizeof(w.random_number)) == 0)
            got++;
    }
    cache_full = 1;
    petrel_log(PETREL_LOG_DEBUG, "tfb: %d World rows cached", got);
}

/* The whole table into the cache: the module's own query (no request). */
static void cache_fill(void)
{
    if (cache_filling)
        return;
    if (petrel_pg_query(db, NULL, "SELECT id, randomnumber FROM world", 0, NULL, cache_filled,
                        NULL) == 0)
        cache_filling = 1;
}

/* The cache's loader: one row, by a query of the module's own (the load
 * serves every request waiting for that id). */
static void world_loaded(const petrel_pg_result_t *res, void *data)
{
    petrel_cache_load_t *ld = data;
    world_t w;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        int st = petrel_pg_status(res);
        petrel_cache_loaded(ld, st == PETREL_PG_EUNAVAILABLE ? PETREL_EIO : PETREL_EINVAL, NULL, 0);
        return;
    }
    if (petrel_pg_nrows(res) != 1 || world_of(res, 0, &w) < 0) {
        petrel_cache_loaded(ld, PETREL_ENOTFOUND, NULL, 0);
        return;
    }
    petrel_cache_loaded(ld, 0, &w.random_number, sizeof(w.random_number));
}

static int load_world(petrel_cache_load_t *ld, const void *key, size_t len, void *data)
{
    (void)data;
    int32_t id;
    if (len != sizeof(id))
        return PETREL_EINVAL;
    memcpy(&id, key, sizeof(id));
    return query_world(NULL, id, world_loaded, ld);
}

/* A row of /cached-queries waiting for its load, in the request arena. */
typedef struct cached_wait {
    rows_t *r;
    int slot;
    int32_t id;
    int told;
} cached_wait_t;

static void cached_row(petrel_cache_t *c, int status, const void *value, size_t len, void *data)
{
    (void)c;
    cached_wait_t *cw = data;
    rows_t *r = cw->r;
    cw->told = 1;
    if (r->failed)
        return;
    if (status != 0 || len != sizeof(int32_t)) {
        r->failed = 1;
        if (status == PETREL_EIO)
            petrel_pg_send_refused(db, r->req, PETREL_EIO); /* 503 */
        else
            petrel_send_status(r->req, 500);
        return;
    }
    memcpy(&r->w[cw->slot].random_number, value, sizeof(int32_t));
    if (++r->done == r->n)
        send_worlds(r->req, r->w, r->n);
}

/* The request ends: a row still waiting stops waiting (its memory goes). */
static void cached_gone(void *data)
{
    cached_wait_t *cw = data;
    if (!cw->told)
        petrel_cache_cancel(cache, &cw->id, sizeof(cw->id), cw);
}

static int cached_queries(petrel_req_t *req, void *data)
{
    (void)data;
    int n = count_of(req, "count");
    rows_t *r = rows_new(req, n);
    if (r == NULL)
        return PETREL_ENOMEM;
    int waiting = 0;
    cached_wait_t *cw = NULL; /* made for a miss; a hit leaves it for the next row */
    for (int i = 0; i < n; i++) {
        int32_t id = random_id();
        petrel_str_t v;
        r->w[i].id = id;
        if (cw == NULL && (cw = petrel_arena_alloc(req->arena, sizeof(*cw), 0)) == NULL)
            return PETREL_ENOMEM;
        cw->r = r;
        cw->slot = i;
        cw->id = id;
        cw->told = 0;
        int rc = petrel_cache_get(cache, &id, sizeof(id), &v, cached_row, cw);
        if (rc == 0) {
            memcpy(&r->w[i].random_number, v.ptr, sizeof(int32_t));
            r->done++;
            continue;
        }
        if (rc == PETREL_LATER && petrel_arena_defer(req->arena, cached_gone, cw) == 0) {
            waiting++;
            cw = NULL;
            continue;
        }
        if (rc == PETREL_LATER)
            petrel_cache_cancel(cache, &id, sizeof(id), cw);
        /* those waiting already stop waiting with the request (cached_gone) */
        r->failed = 1;
        return petrel_pg_send_refused(db, req, rc == PETREL_LATER ? PETREL_ENOMEM : rc);
    }
    if (waiting == 0)
        return send_worlds(req, r->w, n);
    if (!cache_full)
        cache_fill(); /* not filled (the database was down at start-up?): fill it now */
    return PETREL_LATER;
}

/* ------------------------------------------------------------------------ */
/* Module                                                                   */

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    db = petrel_pg_open(&opts);
    if (db == NULL)
        return PETREL_EINVAL;
    world_by_id = petrel_pg_prepare(db, "SELECT id, randomnumber FROM world WHERE id = $1");
    all_fortunes = petrel_pg_prepare(db, "SELECT id, message FROM fortune");
    update_worlds = petrel_pg_prepare(db, "UPDATE world SET randomnumber = v.r "
                                          "FROM unnest($1::int[], $2::int[]) AS v(id, r) "
                                          "WHERE world.id = v.id");
    if (world_by_id == NULL || all_fortunes == NULL || update_worlds == NULL)
        return PETREL_ENOMEM;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rng = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    if (rng == 0)
        rng = 88172645463325252ULL;
    petrel_cache_opts_t co;
    petrel_cache_opts_init(&co);
    co.capacity = WORLD_ROWS;
    co.key_max = sizeof(int32_t);
    co.value_max = sizeof(int32_t);
    co.waiters = 4096;
    co.load = load_world;
    cache = petrel_cache_new(&co);
    if (cache == NULL)
        return PETREL_ENOMEM;
    cache_filling = cache_full = 0;
    cache_fill();
    return 0;
}

static void worker_fini(petrel_server_t *srv)
{
    (void)srv;
    petrel_pg_close(db); /* first: the cache's loads call nobody back after it */
    db = NULL;
    petrel_cache_free(cache);
    cache = NULL;
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)srv;
    if (!petrel_pg_supported()) {
        petrel_log(PETREL_LOG_ERROR, "tfb: this petrel was built without its PostgreSQL pool "
                                     "(configure --without-pgsql, or no libpq: install the "
                                     "Debian package libpq-dev and configure again)");
        return PETREL_ENOTFOUND;
    }
    petrel_pg_opts_init(&opts);
    return petrel_pg_opts_parse(&opts, args);
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/json", json, NULL},
    {PETREL_GET, "/plaintext", plaintext, NULL},
    {PETREL_GET, "/db", db_one, NULL},
    {PETREL_GET, "/queries", queries, NULL},
    {PETREL_GET, "/fortunes", fortunes, NULL},
    {PETREL_GET, "/updates", updates, NULL},
    {PETREL_GET, "/cached-queries", cached_queries, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(tfb, routes, init, worker_init, worker_fini)
