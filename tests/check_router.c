/*
 * check_router.c -- unit tests of src/framework/router.c: patterns, matching, priority
 * and backtracking, 404 versus 405, parameters.
 *
 * The router matches a path that petrel__path_normalize() has already
 * percent-decoded (check_request.c tests that; check_http1.c tests a decoded
 * parameter end to end), so the paths below are decoded paths.
 */
#include "server/server.h"
#include "protocols/proto.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

static petrel__router_t *R;
static petrel_arena_t A;
static petrel__match_t M;

/* Distinct handlers, told apart by their address; data tells routes apart
 * when they share a handler. */
static int h_a(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 0;
}
static int h_b(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 0;
}
static int h_c(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 0;
}
static int h_d(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 0;
}

static void setup(void)
{
    petrel__pool_init(&petrel__pool, 16);
    petrel__arena_init(&A, &petrel__pool, 0);
    R = petrel__router_new();
    ck_assert_ptr_nonnull(R);
}

static void teardown(void)
{
    petrel__router_free(R);
    petrel__arena_clear(&A);
    petrel__pool_fini(&petrel__pool);
}

static void add(int methods, const char *pattern, petrel_handler_t h, void *data)
{
    int rc = petrel__router_add(R, methods, pattern, h, data);
    ck_assert_msg(rc == 0, "add '%s': %d", pattern, rc);
}

static int match(int method, const char *path)
{
    memset(&M, 0xee, sizeof(M));
    return petrel__router_match(R, method, path, strlen(path), &A, &M);
}

/* The value of parameter `name` of the last match, or NULL. */
static const char *param(const char *name)
{
    for (size_t i = 0; i < M.nparams; i++)
        if (strlen(name) == M.params[i].name.len && strcmp(M.params[i].name.ptr, name) == 0)
            return M.params[i].value.ptr;
    return NULL;
}

#define ck_match(method, path, h)                                                                  \
    do {                                                                                           \
        int rc_ = match(method, path);                                                             \
        ck_assert_msg(rc_ == 0, "%s: %d", path, rc_);                                              \
        ck_assert_msg(M.handler == (h), "%s: wrong handler", path);                                \
    } while (0)

/* ------------------------------------------------------------------------ */

START_TEST(test_exact)
{
    add(PETREL_GET, "/hello", h_a, "hello");
    add(PETREL_GET, "/hello/world", h_b, NULL);
    add(PETREL_GET, "/a/b/c/d", h_c, NULL);
    ck_match(PETREL_GET, "/hello", h_a);
    ck_assert_str_eq(M.data, "hello");
    ck_assert_uint_eq(M.nparams, 0);
    ck_assert_ptr_null(M.params);
    ck_match(PETREL_GET, "/hello/world", h_b);
    ck_match(PETREL_GET, "/a/b/c/d", h_c);
    ck_assert_int_eq(match(PETREL_GET, "/hell"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/helloo"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/hello/"), 404); /* a trailing slash is another path */
    ck_assert_int_eq(match(PETREL_GET, "/hello/x"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/Hello"), 404); /* case-sensitive */
    ck_assert_int_eq(match(PETREL_GET, "/a/b/c"), 404); /* an inner node without routes */
    ck_assert_int_eq(match(PETREL_GET, "/"), 404);
    ck_assert_ptr_null(M.handler);
    ck_assert_int_eq(M.allowed, 0);
}
END_TEST

START_TEST(test_trailing_slash)
{
    add(PETREL_GET, "/dir/", h_a, NULL);
    ck_match(PETREL_GET, "/dir/", h_a);
    ck_assert_int_eq(match(PETREL_GET, "/dir"), 404);
}
END_TEST

START_TEST(test_root)
{
    ck_assert_int_eq(match(PETREL_GET, "/"), 404);
    add(PETREL_GET, "/", h_a, NULL);
    add(PETREL_GET, "/x", h_b, NULL);
    ck_match(PETREL_GET, "/", h_a);
    ck_match(PETREL_GET, "/x", h_b);
    ck_assert_int_eq(match(PETREL_GET, "/y"), 404);
    ck_assert_int_eq(match(PETREL_POST, "/"), 405);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

START_TEST(test_params)
{
    add(PETREL_GET, "/kv/:key", h_a, NULL);
    add(PETREL_GET, "/users/:id/posts/:post", h_b, NULL);

    const char *path = "/kv/abc";
    ck_assert_int_eq(match(PETREL_GET, path), 0);
    ck_assert_ptr_eq(M.handler, h_a);
    ck_assert_uint_eq(M.nparams, 1);
    ck_assert_str_eq(M.params[0].name.ptr, "key");
    ck_assert_uint_eq(M.params[0].name.len, 3);
    ck_assert_str_eq(M.params[0].value.ptr, "abc"); /* NUL-terminated */
    ck_assert_uint_eq(M.params[0].value.len, 3);
    ck_assert_ptr_ne(M.params[0].value.ptr, path + 4); /* a copy, not a span of the path */

    ck_assert_int_eq(match(PETREL_GET, "/users/42/posts/7"), 0);
    ck_assert_ptr_eq(M.handler, h_b);
    ck_assert_uint_eq(M.nparams, 2);
    ck_assert_str_eq(param("id"), "42");
    ck_assert_str_eq(param("post"), "7");
    ck_assert_str_eq(M.params[0].name.ptr, "id"); /* in path order */

    /* a parameter is one non-empty segment */
    ck_assert_int_eq(match(PETREL_GET, "/kv/"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/kv"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/kv/a/b"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/users/42/posts/"), 404);
}
END_TEST

/* The values come from the (decoded) path as they are, bytes included that
 * were percent-encoded on the wire (a space, '%', '?'). */
START_TEST(test_param_decoded_values)
{
    add(PETREL_GET, "/kv/:key", h_a, NULL);
    ck_assert_int_eq(match(PETREL_GET, "/kv/a b%c?d\xc3\xa9"), 0);
    ck_assert_str_eq(param("key"), "a b%c?d\xc3\xa9");
    /* only `len` bytes of the path are read: the value ends there */
    const char buf[] = "/kv/abcdef";
    ck_assert_int_eq(petrel__router_match(R, PETREL_GET, buf, 7, &A, &M), 0);
    ck_assert_str_eq(param("key"), "abc");
}
END_TEST

/* Parameter values are allocated from the arena given, and released with
 * it: a reset to a mark before the match takes them back. */
START_TEST(test_param_arena)
{
    add(PETREL_GET, "/kv/:key", h_a, NULL);
    petrel_arena_mark_t m = petrel_arena_mark(&A);
    size_t before = A.bytes;
    ck_assert_int_eq(match(PETREL_GET, "/kv/some-value"), 0);
    ck_assert_uint_gt(A.bytes, before);
    const char *v = M.params[0].value.ptr;
    bool inside = false;
    for (petrel__chunk_t *c = A.chunk; c; c = c->next)
        if (v > (char *)c && v < (char *)c + sizeof(*c) + 16 + PETREL_CHUNK_SIZE)
            inside = true;
    ck_assert_msg(inside, "the value is not in the arena's chunks");
    ck_assert(M.params[0].value.ptr[M.params[0].value.len] == '\0');
    petrel_arena_reset(&A, m);
    ck_assert_uint_eq(A.bytes, before);

    /* no parameters: nothing allocated */
    add(PETREL_GET, "/plain", h_b, NULL);
    ck_assert_int_eq(match(PETREL_GET, "/plain"), 0);
    ck_assert_uint_eq(A.bytes, before);
}
END_TEST

/* An arena over its limit: no crash, no handler. */
START_TEST(test_param_arena_full)
{
    add(PETREL_GET, "/kv/:key", h_a, NULL);
    petrel_arena_t small;
    petrel__arena_init(&small, &petrel__pool, 8);
    int rc = petrel__router_match(R, PETREL_GET, "/kv/abc", 7, &small, &M);
    ck_assert_int_ne(rc, 0);
    petrel__arena_clear(&small);
}
END_TEST

START_TEST(test_param_same_name)
{
    add(PETREL_GET, "/a/:x", h_a, NULL);
    add(PETREL_GET, "/a/:x/b", h_b, NULL); /* the same name at the same place */
    add(PETREL_POST, "/a/:x", h_c, NULL);
    ck_match(PETREL_GET, "/a/1/b", h_b);
    ck_assert_str_eq(param("x"), "1");
    ck_match(PETREL_POST, "/a/2", h_c);
    ck_assert_str_eq(param("x"), "2");
}
END_TEST

/* Two names for one parameter position would be ambiguous. */
START_TEST(test_param_conflict)
{
    add(PETREL_GET, "/a/:x", h_a, NULL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_POST, "/a/:y", h_b, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a/:xx/b", h_b, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a/:/b", h_b, NULL), PETREL_EINVAL);
    /* the first route is untouched */
    ck_match(PETREL_GET, "/a/1", h_a);
    ck_assert_str_eq(param("x"), "1");
    ck_assert_int_eq(match(PETREL_POST, "/a/1"), 405);
}
END_TEST

/* A route the router accepts can be matched: many parameters. */
START_TEST(test_param_many)
{
    char pattern[256] = "", path[256] = "";
    size_t pl = 0, ql = 0;
    for (int i = 0; i < 20; i++) {
        pl += (size_t)snprintf(pattern + pl, sizeof(pattern) - pl, "/:p%d", i);
        ql += (size_t)snprintf(path + ql, sizeof(path) - ql, "/%d", i);
    }
    int rc = petrel__router_add(R, PETREL_GET, pattern, h_a, NULL);
    if (rc == PETREL_EINVAL)
        return; /* refusing a pattern with too many parameters is fine */
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(match(PETREL_GET, path) == 0,
                  "a route with 20 parameters was accepted but "
                  "does not match %s",
                  path);
    ck_assert_uint_eq(M.nparams, 20);
    ck_assert_str_eq(param("p19"), "19");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Wildcard                                                                 */

START_TEST(test_wildcard)
{
    add(PETREL_GET, "/static/*", h_a, NULL);
    ck_match(PETREL_GET, "/static/css/site.css", h_a);
    ck_assert_uint_eq(M.nparams, 1);
    ck_assert_str_eq(M.params[0].name.ptr, "*");
    ck_assert_str_eq(param("*"), "css/site.css");
    ck_match(PETREL_GET, "/static/a", h_a);
    ck_assert_str_eq(param("*"), "a");
    ck_match(PETREL_GET, "/static/", h_a); /* the rest is empty */
    ck_assert_str_eq(param("*"), "");
    ck_assert_uint_eq(M.params[0].value.len, 0);
    ck_match(PETREL_GET, "/static/a/", h_a);
    ck_assert_str_eq(param("*"), "a/");
    ck_assert_int_eq(match(PETREL_GET, "/static"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/staticx/a"), 404);
}
END_TEST

START_TEST(test_wildcard_root_and_params)
{
    add(PETREL_GET, "/*", h_a, NULL);
    add(PETREL_GET, "/u/:id/files/*", h_b, NULL);
    ck_match(PETREL_GET, "/", h_a);
    ck_assert_str_eq(param("*"), "");
    ck_match(PETREL_GET, "/any/thing", h_a);
    ck_assert_str_eq(param("*"), "any/thing");
    ck_match(PETREL_GET, "/u/7/files/a/b", h_b);
    ck_assert_str_eq(param("id"), "7");
    ck_assert_str_eq(param("*"), "a/b");
    ck_assert_uint_eq(M.nparams, 2);
    /* a dead end under /u/:id backtracks to the root wildcard */
    ck_match(PETREL_GET, "/u/7/other", h_a);
    ck_assert_str_eq(param("*"), "u/7/other");
    ck_assert_uint_eq(M.nparams, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Priority and backtracking                                                */

START_TEST(test_priority)
{
    add(PETREL_GET, "/kv/all", h_a, "exact");
    add(PETREL_GET, "/kv/:key", h_b, "param");
    add(PETREL_GET, "/kv/:key/x", h_c, "param-x");
    add(PETREL_GET, "/kv/*", h_d, "wild");
    ck_match(PETREL_GET, "/kv/all", h_a); /* exact beats parameter */
    ck_assert_uint_eq(M.nparams, 0);
    ck_match(PETREL_GET, "/kv/other", h_b); /* parameter beats wildcard */
    ck_assert_str_eq(param("key"), "other");
    /* "all" matches exactly, but /kv/all has no child "x": backtrack to :key */
    ck_match(PETREL_GET, "/kv/all/x", h_c);
    ck_assert_str_eq(param("key"), "all");
    ck_assert_uint_eq(M.nparams, 1);
    ck_match(PETREL_GET, "/kv/other/x", h_c);
    ck_assert_str_eq(param("key"), "other");
    /* neither exact nor parameter routes go deeper: the wildcard */
    ck_match(PETREL_GET, "/kv/all/y", h_d);
    ck_assert_str_eq(param("*"), "all/y");
    ck_assert_uint_eq(M.nparams, 1); /* the abandoned :key binding is gone */
    ck_assert_ptr_null(param("key"));
    ck_match(PETREL_GET, "/kv/", h_d); /* an empty segment is no parameter */
    ck_assert_str_eq(param("*"), "");
}
END_TEST

/* Backtracking also happens on the method: the exact node has the path but
 * not the method, the parameter route has it. */
START_TEST(test_priority_by_method)
{
    add(PETREL_POST, "/kv/all", h_a, NULL);
    add(PETREL_GET, "/kv/:key", h_b, NULL);
    ck_match(PETREL_GET, "/kv/all", h_b);
    ck_assert_str_eq(param("key"), "all");
    ck_match(PETREL_POST, "/kv/all", h_a);
    ck_assert_int_eq(match(PETREL_POST, "/kv/x"), 405);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD);
    /* a method neither has: 405 with both */
    ck_assert_int_eq(match(PETREL_DELETE, "/kv/all"), 405);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD | PETREL_POST);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Methods                                                                  */

START_TEST(test_404_405)
{
    add(PETREL_GET, "/hello", h_a, NULL);
    add(PETREL_PUT | PETREL_DELETE, "/res", h_b, NULL);
    ck_assert_int_eq(match(PETREL_POST, "/hello"), 405);
    ck_assert_ptr_null(M.handler);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD); /* HEAD because of GET */
    ck_assert_int_eq(match(PETREL_GET, "/res"), 405);
    ck_assert_int_eq(M.allowed, PETREL_PUT | PETREL_DELETE); /* no GET, no HEAD */
    ck_assert_int_eq(match(PETREL_HEAD, "/res"), 405);
    ck_assert_int_eq(match(PETREL_POST, "/nope"), 404);
    ck_assert_int_eq(M.allowed, 0);
    ck_assert_int_eq(match(0, "/hello"), 405); /* a method petrel has no bit for */
    ck_match(PETREL_PUT, "/res", h_b);
    ck_match(PETREL_DELETE, "/res", h_b);
}
END_TEST

START_TEST(test_405_wildcard)
{
    add(PETREL_GET, "/static/*", h_a, NULL);
    ck_assert_int_eq(match(PETREL_POST, "/static/x"), 405);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD);
}
END_TEST

START_TEST(test_head_falls_back_to_get)
{
    add(PETREL_GET, "/hello", h_a, NULL);
    add(PETREL_GET, "/both", h_b, NULL);
    add(PETREL_HEAD, "/both", h_c, NULL);
    add(PETREL_GET, "/files/*", h_d, NULL);
    ck_match(PETREL_HEAD, "/hello", h_a);
    ck_match(PETREL_HEAD, "/both", h_c); /* its own HEAD handler wins */
    ck_match(PETREL_GET, "/both", h_b);
    ck_match(PETREL_HEAD, "/files/a", h_d);
    ck_assert_str_eq(param("*"), "a");
}
END_TEST

START_TEST(test_methods_per_route)
{
    add(PETREL_GET | PETREL_POST, "/m", h_a, "a");
    add(PETREL_PUT, "/m", h_b, "b");
    ck_match(PETREL_GET, "/m", h_a);
    ck_match(PETREL_POST, "/m", h_a);
    ck_match(PETREL_PUT, "/m", h_b);
    ck_assert_str_eq(M.data, "b");
    ck_assert_int_eq(match(PETREL_PATCH, "/m"), 405);
    ck_assert_int_eq(M.allowed, PETREL_GET | PETREL_HEAD | PETREL_POST | PETREL_PUT);
    add(PETREL_ANY & ~(PETREL_GET | PETREL_POST | PETREL_PUT), "/m", h_c, NULL);
    ck_match(PETREL_OPTIONS, "/m", h_c);
    ck_match(PETREL_PATCH, "/m", h_c);
}
END_TEST

START_TEST(test_duplicate)
{
    add(PETREL_GET, "/a", h_a, NULL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a", h_b, NULL), PETREL_ESTATE);
    /* an overlap in one method of several is a duplicate too, and adds none */
    ck_assert_int_eq(petrel__router_add(R, PETREL_POST | PETREL_GET, "/a", h_b, NULL),
                     PETREL_ESTATE);
    ck_assert_int_eq(match(PETREL_POST, "/a"), 405);
    ck_match(PETREL_GET, "/a", h_a);
    add(PETREL_GET, "/p/:x", h_a, NULL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/p/:x", h_b, NULL), PETREL_ESTATE);
    add(PETREL_GET, "/w/*", h_a, NULL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/w/*", h_b, NULL), PETREL_ESTATE);
    add(PETREL_GET, "/", h_a, NULL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/", h_b, NULL), PETREL_ESTATE);
    /* the public petrel_route_add() says the same */
    petrel_server_t *srv = petrel__server_new();
    ck_assert_ptr_nonnull(srv);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/x", h_a, NULL), 0);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "/x", h_a, NULL), PETREL_ESTATE);
    ck_assert_int_eq(petrel_route_add(srv, PETREL_GET, "x", h_a, NULL), PETREL_EINVAL);
    petrel__server_free(srv);
}
END_TEST

START_TEST(test_invalid)
{
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "no-slash", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, NULL, h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a/*/b", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/*/", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/:", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a/:/b", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a", NULL, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, 0, "/a", h_a, NULL), PETREL_EINVAL);
    /* 1 << 7 is PETREL__CONNECT (WebSocket routes, RFC 8441): the router's
     * own; petrel_route_add() refuses it; 1 << 8 is PETREL_OTHER; 1 << 9,
     * PETREL_BODY_STREAM, is not a method: alone it names none */
    ck_assert_int_eq(petrel__router_add(R, 1 << 9, "/a", h_a, NULL), PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_BODY_STREAM | (1 << 7), "/a", h_a, NULL),
                     PETREL_EINVAL);
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET | (1 << 10), "/a", h_a, NULL), PETREL_EINVAL);
    /* nothing was registered by the refused patterns */
    ck_assert_int_eq(match(PETREL_GET, "/a"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/a/x/b"), 404);
    ck_assert_int_eq(match(PETREL_GET, "/x"), 404);
}
END_TEST

/* PETREL_OTHER: 501 while no route names it (RFC 9110 §9.1), then the
 * route that names it, 405 on paths whose routes do not. */
START_TEST(test_other)
{
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET, "/a", h_a, NULL), 0);
    ck_assert_int_eq(match(PETREL_OTHER, "/a"), 501);
    ck_assert_int_eq(match(PETREL_OTHER, "/nowhere"), 501);
    ck_assert_int_eq(petrel__router_add(R, PETREL_ANY | PETREL_OTHER, "/p/*", h_b, NULL), 0);
    ck_assert_int_eq(match(PETREL_OTHER, "/p/x"), 0);
    ck_assert_int_eq(match(PETREL_DELETE, "/p/x"), 0);
    ck_assert_int_eq(match(PETREL_OTHER, "/a"), 405);
    ck_assert_int_eq(match(PETREL_OTHER, "/nowhere"), 404);
    ck_assert_int_eq(petrel__router_add(R, PETREL_OTHER, "/p/*", h_a, NULL), PETREL_ESTATE);
}
END_TEST

/* PETREL_BODY_STREAM: a flag of the route, for the methods it names; the
 * router says it has such routes (read by the protocols at a head). */
START_TEST(test_body_stream)
{
    ck_assert(!petrel__router_streams(R));
    ck_assert_int_eq(petrel__router_add(R, PETREL_GET | PETREL_POST, "/whole", h_a, NULL), 0);
    ck_assert(!petrel__router_streams(R));
    ck_assert_int_eq(petrel__router_add(R, PETREL_PUT | PETREL_BODY_STREAM, "/whole", h_b, NULL),
                     0);
    ck_assert(petrel__router_streams(R));
    ck_assert_int_eq(
        petrel__router_add(R, PETREL_POST | PETREL_BODY_STREAM, "/up/:name", h_c, NULL), 0);
    ck_assert_int_eq(match(PETREL_POST, "/whole"), 0);
    ck_assert(!M.info->stream);
    ck_assert_int_eq(match(PETREL_PUT, "/whole"), 0);
    ck_assert(M.info->stream);
    ck_assert_ptr_eq(M.handler, h_b);
    ck_assert_int_eq(match(PETREL_POST, "/up/x"), 0);
    ck_assert(M.info->stream);
    /* the flag is no method: the same methods again are a conflict */
    ck_assert_int_eq(petrel__router_add(R, PETREL_PUT, "/whole", h_a, NULL), PETREL_ESTATE);
    ck_assert_int_eq(match(PETREL_GET, "/up/x"), 405);
}
END_TEST

static Suite *router_suite(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("paths");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_exact);
    tcase_add_test(tc, test_trailing_slash);
    tcase_add_test(tc, test_root);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_param_decoded_values);
    tcase_add_test(tc, test_param_arena);
    tcase_add_test(tc, test_param_arena_full);
    tcase_add_test(tc, test_param_same_name);
    tcase_add_test(tc, test_param_conflict);
    tcase_add_test(tc, test_param_many);
    tcase_add_test(tc, test_wildcard);
    tcase_add_test(tc, test_wildcard_root_and_params);
    tcase_add_test(tc, test_priority);
    tcase_add_test(tc, test_priority_by_method);
    suite_add_tcase(s, tc);

    tc = tcase_create("methods");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_404_405);
    tcase_add_test(tc, test_405_wildcard);
    tcase_add_test(tc, test_head_falls_back_to_get);
    tcase_add_test(tc, test_methods_per_route);
    tcase_add_test(tc, test_duplicate);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_other);
    tcase_add_test(tc, test_body_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(router_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
