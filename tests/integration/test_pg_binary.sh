#!/usr/bin/env bash
# Binary parameters and results in the pool (petrel.h: petrel_pg_exec_bin,
# petrel_pg_prepare_ex with PETREL_PG_BINARY_RESULTS, petrel_pg_value_int,
# petrel_pg_value_int4), against a real PostgreSQL:
#  - int4, int8 and text values sent binary come back binary and equal,
#    at their limits (INT32_MIN, INT64_MAX, an empty text, UTF-8), the
#    same as the text path gives for them;
#  - SQL NULL both ways: a NULL parameter, a NULL value ({NULL, 0}, and
#    petrel_pg_value_int refuses it);
#  - a value of the wrong length for its type (3 bytes for an int4, 4 for
#    an int8) is refused by the server with SQLSTATE 22P03, and the
#    request gets its error, not garbage; the pool serves the next one;
#  - the readers refuse what is not an integer of their size: a binary
#    float4 or numeric, an int8 beyond int32 for petrel_pg_value_int4,
#    and read int2;
#  - an int4[] sent in the array format of array_send() is read back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_needs cc
pg_setup
pg_start
psql_ -d postgres -c "CREATE DATABASE bin"

cat >"$LIB_TMP/pgbin.c" <<'EOF'
/* A module of binary queries for test_pg_binary.sh. */
#include <petrel.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static petrel_pg_opts_t opts;
static petrel_pg_t *db;
static petrel_pg_stmt_t *rt, *rt_text, *types, *arr;

/* The values of row 0, as the readers see them: "i4=... i8=... t=LEN:BYTES". */
static void rt_done(const petrel_pg_result_t *res, void *data)
{
    petrel_req_t *req = data;
    char b[4096]; /* /arr?n=500: 1,891 bytes of text */
    if (petrel_pg_status(res) != PETREL_PG_OK && petrel_req_query(req, "send_error")) {
        petrel_pg_send_error(req, res);
        return;
    }
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        snprintf(b, sizeof(b), "error %s", petrel_pg_sqlstate(res));
        petrel_send_copy(req, 500, "text/plain", b, strlen(b));
        return;
    }
    int32_t i4;
    int64_t i8;
    petrel_str_t t = petrel_pg_value(res, 0, 2);
    int n = 0;
    if (petrel_pg_value_int4(res, 0, 0, &i4) == 0)
        n += snprintf(b + n, sizeof(b) - (size_t)n, "i4=%" PRId32, i4);
    else
        n += snprintf(b + n, sizeof(b) - (size_t)n, "i4=%s", petrel_pg_value(res, 0, 0).ptr ? "EINVAL" : "NULL");
    if (petrel_pg_value_int(res, 0, 1, &i8) == 0)
        n += snprintf(b + n, sizeof(b) - (size_t)n, " i8=%" PRId64, i8);
    else
        n += snprintf(b + n, sizeof(b) - (size_t)n, " i8=%s", petrel_pg_value(res, 0, 1).ptr ? "EINVAL" : "NULL");
    if (t.ptr)
        n += snprintf(b + n, sizeof(b) - (size_t)n, " t=%zu:%.*s", t.len, (int)t.len, t.ptr);
    else
        n += snprintf(b + n, sizeof(b) - (size_t)n, " t=NULL");
    petrel_send_copy(req, 200, "text/plain", b, (size_t)n);
}

static void put_be(unsigned char *p, uint64_t v, int len)
{
    for (int i = len - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* GET /rt?i4=N&i8=N&t=S[&len4=L][&len8=L]: the three as binary parameters
 * (absent: NULL; lenN: send that many bytes of the value), binary results.
 * GET /rt?...&text=1: the same query with text parameters and results. */
static int rt_(petrel_req_t *req, void *data)
{
    (void)data;
    const char *a4 = petrel_req_query(req, "i4"), *a8 = petrel_req_query(req, "i8");
    const char *t = petrel_req_query(req, "t"), *l4 = petrel_req_query(req, "len4");
    const char *l8 = petrel_req_query(req, "len8");
    int rc;
    if (petrel_req_query(req, "text")) {
        const char *p[3] = {a4, a8, t};
        rc = petrel_pg_exec(db, req, rt_text, 3, p, rt_done, req);
    } else {
        unsigned char *v4 = petrel_arena_alloc(req->arena, 8, 1);
        unsigned char *v8 = petrel_arena_alloc(req->arena, 8, 1);
        if (v4 == NULL || v8 == NULL)
            return 500;
        memset(v4, 0, 8);
        if (a4)
            put_be(v4, (uint64_t)(int64_t)strtoll(a4, NULL, 10), 4);
        if (a8)
            put_be(v8, (uint64_t)strtoll(a8, NULL, 10), 8);
        petrel_str_t p[3] = {{a4 ? (const char *)v4 : NULL, l4 ? (size_t)atoi(l4) : 4},
                             {a8 ? (const char *)v8 : NULL, l8 ? (size_t)atoi(l8) : 8},
                             {t, t ? strlen(t) : 0}};
        rc = petrel_pg_exec_bin(db, req, rt, 3, p, rt_done, req);
    }
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* GET /types: what the readers make of a binary float4, numeric, int2, an
 * int8 beyond int32 and a bool, one word each */
static void types_done(const petrel_pg_result_t *res, void *data)
{
    petrel_req_t *req = data;
    char b[256];
    int n = 0;
    if (petrel_pg_status(res) != PETREL_PG_OK)
        return (void)petrel_pg_send_error(req, res);
    for (int c = 0; c < petrel_pg_ncols(res); c++) {
        int64_t v;
        int32_t v4;
        int r8 = petrel_pg_value_int(res, 0, c, &v), r4 = petrel_pg_value_int4(res, 0, c, &v4);
        n += snprintf(b + n, sizeof(b) - (size_t)n, "%s%s=", c ? " " : "", petrel_pg_colname(res, c));
        n += r8 == 0 ? snprintf(b + n, sizeof(b) - (size_t)n, "%" PRId64, v)
                     : snprintf(b + n, sizeof(b) - (size_t)n, "EINVAL");
        n += r4 == 0 ? snprintf(b + n, sizeof(b) - (size_t)n, "/%" PRId32, v4)
                     : snprintf(b + n, sizeof(b) - (size_t)n, "/EINVAL");
    }
    petrel_send_copy(req, 200, "text/plain", b, (size_t)n);
}

static int types_(petrel_req_t *req, void *data)
{
    (void)data;
    int rc = petrel_pg_exec_bin(db, req, types, 0, NULL, types_done, req);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* GET /arr?n=N: the int4[] {1..N} in binary array format; the server sums it */
static int arr_(petrel_req_t *req, void *data)
{
    (void)data;
    const char *ns = petrel_req_query(req, "n");
    int n = ns ? atoi(ns) : 3;
    unsigned char *a = petrel_arena_alloc(req->arena, 20 + 8 * (size_t)n, 1);
    if (a == NULL || n < 0)
        return 500;
    put_be(a, 1, 4);     /* dimensions */
    put_be(a + 4, 0, 4); /* no NULLs */
    put_be(a + 8, 23, 4); /* int4 */
    put_be(a + 12, (uint64_t)n, 4);
    put_be(a + 16, 1, 4); /* lower bound */
    for (int i = 0; i < n; i++) {
        put_be(a + 20 + 8 * i, 4, 4);
        put_be(a + 24 + 8 * i, (uint64_t)(i + 1), 4);
    }
    petrel_str_t p[1] = {{(const char *)a, 20 + 8 * (size_t)n}};
    int rc = petrel_pg_exec_bin(db, req, arr, 1, p, rt_done, req);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    db = petrel_pg_open(&opts);
    if (db == NULL)
        return PETREL_EINVAL;
    rt = petrel_pg_prepare_ex(db, "SELECT $1::int4, $2::int8, $3::text", PETREL_PG_BINARY_RESULTS);
    rt_text = petrel_pg_prepare(db, "SELECT $1::int4, $2::int8, $3::text");
    types = petrel_pg_prepare_ex(db,
                                 "SELECT 1.5::float4 AS f4, 7::numeric AS num, (-2)::int2 AS i2, "
                                 "(2^40)::int8 AS big, (-5)::int8 AS small, true AS b",
                                 PETREL_PG_BINARY_RESULTS);
    arr = petrel_pg_prepare_ex(db,
                               "SELECT array_length($1::int[], 1), sum(x)::int8, "
                               "array_to_string($1::int[], ',') FROM unnest($1::int[]) AS x",
                               PETREL_PG_BINARY_RESULTS);
    return rt && rt_text && types && arr ? 0 : PETREL_ENOMEM;
}

static void worker_fini(petrel_server_t *srv)
{
    (void)srv;
    petrel_pg_close(db);
}

static int init(petrel_server_t *srv, const char *args)
{
    (void)srv;
    petrel_pg_opts_init(&opts);
    return petrel_pg_opts_parse(&opts, args);
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/rt", rt_, NULL},
    {PETREL_GET, "/types", types_, NULL},
    {PETREL_GET, "/arr", arr_, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(pgbin, routes, init, worker_init, worker_fini)
EOF

petrel_start --workers 1 --dev \
    --module "$LIB_TMP/pgbin.c:pool.connections=2 host=$PGHOST port=$PGPORT dbname=bin user=postgres"
get() { curl_ "http://127.0.0.1:$PORT$1"; }
# the body of GET $1 is $2
is() {
    local got
    got=$(get "$1")
    [[ $got == "$2" ]] || fail "GET $1: '$got', want '$2'"
}

# --- round trips ------------------------------------------------------------------
is '/rt?i4=42&i8=-7&t=hello' 'i4=42 i8=-7 t=5:hello'
is '/rt?i4=-2147483648&i8=9223372036854775807&t=' 'i4=-2147483648 i8=9223372036854775807 t=0:'
is '/rt?i4=2147483647&i8=-9223372036854775808&t=%C3%A9t%C3%A9' 'i4=2147483647 i8=-9223372036854775808 t=5:été'
for q in 'i4=42&i8=-7&t=hello' 'i4=-2147483648&i8=9223372036854775807&t=x%20y'; do
    [[ $(get "/rt?$q") == "$(get "/rt?$q&text=1")" ]] || fail "/rt?$q: binary and text differ"
done
ok "int4, int8 and text: binary parameters and results round trip, at their limits, as text does"

is '/rt' 'i4=NULL i8=NULL t=NULL'
is '/rt?i4=1' 'i4=1 i8=NULL t=NULL'
is '/rt?text=1' 'i4=NULL i8=NULL t=NULL'
ok "SQL NULL parameters come back NULL, and the integer readers refuse them"

# --- the wrong length ---------------------------------------------------------------
# too short: the server's reader runs out of bytes (08P01); too long: it
# has bytes left over (22P03)
is '/rt?i4=1&i8=1&t=x&len4=3' 'error 08P01'
is '/rt?i4=1&i8=1&t=x&len4=0' 'error 08P01'
is '/rt?i4=1&i8=1&t=x&len8=4' 'error 08P01'
is '/rt?i4=1&i8=1&t=x&len4=5' 'error 22P03'
is '/rt?i4=5&i8=6&t=ok' 'i4=5 i8=6 t=2:ok'
for q in len4=3 len8=4 len4=5; do
    st=$(curl_ -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/rt?i4=1&i8=1&t=x&$q&send_error=1")
    [[ $st == 500 ]] || fail "petrel_pg_send_error for a wrong-length value ($q): $st, want 500"
done
grep -q 'SQLSTATE 08P01: insufficient data left in message' "$PETREL_ERR" ||
    fail "the wrong-length errors were not logged"
is '/rt?i4=5&i8=6&t=ok' 'i4=5 i8=6 t=2:ok'
ok "a value of the wrong length for its type: SQLSTATE 08P01 or 22P03 for its request (500 from petrel_pg_send_error, not 503), logged; the connection serves the next query"

# --- what the readers refuse ----------------------------------------------------------
is '/types' 'f4=EINVAL/EINVAL num=EINVAL/EINVAL i2=-2/-2 big=1099511627776/EINVAL small=-5/-5 b=EINVAL/EINVAL'
ok "binary float4, numeric and bool are no integers; int2 and int8 are read; an int8 beyond int32 is refused as int4"

# --- an int4[] in array format ------------------------------------------------------
is '/arr?n=3' 'i4=3 i8=6 t=5:1,2,3'
is '/arr?n=500' "i4=500 i8=125250 t=$(seq -s, 500 | wc -c | awk '{ print $1 - 1 }'):$(seq -s, 500)"
ok "an int4[] sent in binary array format is read by the server"

petrel_stop
