/*
 * check_module.c -- unit tests of src/server/module.c: the --module spec (NAME,
 * PATH.so, PATH.c, and where ARGS begin), built-in modules (routes, init
 * and its argument string), and every refusal with its message: another
 * ABI version, an init that fails, a module loaded twice, a route taken by
 * another module, an unknown name, a missing or broken file, a source file
 * without --dev; a module of the previous ABI (its shorter descriptor) and
 * a module's options applied when it loads.  Loading real shared objects, reloads and --dev builds
 * are tested against the real binary (tests/integration/test_mod_*.sh).
 */
#define PETREL_BUILTIN_MODULE 1 /* descriptors of this file go in a table */
#include "server/server.h"
#include "runtime/log.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static petrel_server_t *S;
static char err[1024];
static const char *seen_args;
static int inits;

static int handler(petrel_req_t *req, void *data)
{
    (void)req;
    (void)data;
    return 204;
}

static int init_record(petrel_server_t *srv, const char *args)
{
    ck_assert_ptr_eq(srv, S);
    seen_args = args;
    inits++;
    return 0;
}

static int init_fails(petrel_server_t *srv, const char *args)
{
    (void)srv;
    (void)args;
    return PETREL_EINVAL;
}

static int init_adds_route(petrel_server_t *srv, const char *args)
{
    (void)args;
    return petrel_route_add(srv, PETREL_PUT, "/from-init/:x", handler, NULL);
}

static const petrel_route_t routes_alpha[] = {
    {PETREL_GET, "/alpha", handler, "alpha data"},
    {PETREL_GET | PETREL_POST, "/alpha/:id", handler, NULL},
    {0, NULL, NULL, NULL},
};
static const petrel_route_t routes_clash[] = {
    {PETREL_GET, "/alpha", handler, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(alpha, routes_alpha, init_record, NULL, NULL)
PETREL_MODULE(failing, NULL, init_fails, NULL, NULL)
PETREL_MODULE(clash, routes_clash, NULL, NULL, NULL)
PETREL_MODULE(initroute, NULL, init_adds_route, NULL, NULL)
static const petrel_module_t oldabi = {
    PETREL_ABI_VERSION + 1, "oldabi", NULL, NULL, NULL, NULL, NULL, NULL};

static const petrel_module_t *const table[] = {
    &petrel_module_alpha,
    &petrel_module_failing,
    &petrel_module_clash,
    &petrel_module_initroute,
    &oldabi,
    NULL,
};

/* A descriptor of ABI 2, as a module built against that header has it: it
 * ends before `options`. */
typedef struct abi2_module {
    int abi_version;
    const char *name;
    const petrel_route_t *routes;
    int (*init)(petrel_server_t *srv, const char *args);
    int (*worker_init)(petrel_server_t *srv);
    void (*worker_fini)(petrel_server_t *srv);
} abi2_module_t;
static const abi2_module_t abi2 = {2, "abi2", routes_alpha, init_record, NULL, NULL};
static const abi2_module_t abi1 = {1, "abi1", NULL, NULL, NULL, NULL};

/* A module with options: what its init sees. */
typedef struct opts_conf {
    size_t size;
    const char *text, *dir;
    int flag;
} opts_conf_t;
static opts_conf_t opts_conf, opts_seen;

static int init_opts(petrel_server_t *srv, const char *args)
{
    (void)srv, (void)args;
    opts_seen = opts_conf;
    return 0;
}

static const petrel_option_t opts_rows[] = {
    {.name = "wo-size",
     .value = "BYTES",
     .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(opts_conf_t, size),
     .min = 1,
     .max = 4096,
     .def = 100,
     .expect = "a size from 1 to 4k",
     .help = "a size (default 100)"},
    {.name = "wo-text",
     .value = "TEXT",
     .kind = PETREL_OPTION_TEXT,
     .offset = offsetof(opts_conf_t, text),
     .help = "a text"},
    {.name = "wo-dir",
     .value = "DIR",
     .kind = PETREL_OPTION_DIR,
     .offset = offsetof(opts_conf_t, dir),
     .help = "a directory"},
    {.name = "wo-flag",
     .kind = PETREL_OPTION_FLAG,
     .offset = offsetof(opts_conf_t, flag),
     .help = "a flag"},
    {.name = NULL},
};
PETREL_MODULE_WITH_OPTIONS(withopts, NULL, init_opts, NULL, NULL, opts_rows, &opts_conf)

static const petrel_module_t *const table_abi[] = {
    (const petrel_module_t *)&abi2,
    (const petrel_module_t *)&abi1,
    &petrel_module_withopts,
    NULL,
};

static void setup(void)
{
    petrel__pool_init(&petrel__pool, 16);
    petrel__log_level = -1; /* the modules' own error messages: not here */
    S = petrel__server_new();
    ck_assert_ptr_nonnull(S);
    petrel__set_builtins(table);
    seen_args = NULL;
    inits = 0;
    err[0] = '\0';
}

static void teardown(void)
{
    petrel__server_free(S);
    petrel__pool_fini(&petrel__pool);
}

static int load(const char *spec)
{
    err[0] = '\0';
    return petrel__server_load_module(S, spec, err, sizeof(err));
}

/* Route `path` for `method`: 0 (found), 404 or 405. */
static int route(int method, const char *path, void **data)
{
    petrel_arena_t a;
    petrel__arena_init(&a, &petrel__pool, 0);
    petrel__match_t m;
    int rc = petrel__router_match(S->router, method, path, strlen(path), &a, &m);
    if (rc == 0 && data)
        *data = m.data;
    petrel__arena_clear(&a);
    return rc;
}

#define assert_err(want)                                                                           \
    ck_assert_msg(strstr(err, (want)) != NULL, "error '%s' does not contain '%s'", err, (want))

START_TEST(test_builtin_routes_and_init)
{
    ck_assert_int_eq(load("alpha"), 0);
    ck_assert_int_eq(S->nmodules, 1);
    ck_assert_ptr_eq(S->modules[0], &petrel_module_alpha);
    ck_assert_ptr_null(S->module_handles[0]);
    ck_assert_int_eq(inits, 1);
    ck_assert_str_eq(seen_args, "");
    void *data = NULL;
    ck_assert_int_eq(route(PETREL_GET, "/alpha", &data), 0);
    ck_assert_str_eq((const char *)data, "alpha data");
    ck_assert_int_eq(route(PETREL_POST, "/alpha/7", NULL), 0);
    ck_assert_int_eq(route(PETREL_DELETE, "/alpha/7", NULL), 405);
}
END_TEST

START_TEST(test_args)
{
    /* everything after the name's first ':' -- slashes and colons too */
    ck_assert_int_eq(load("alpha:prefix=/api,x=a:b"), 0);
    ck_assert_str_eq(seen_args, "prefix=/api,x=a:b");
    teardown();
    setup();
    ck_assert_int_eq(load("alpha:"), 0);
    ck_assert_str_eq(seen_args, "");
}
END_TEST

START_TEST(test_init_adds_routes)
{
    ck_assert_int_eq(load("initroute"), 0);
    ck_assert_int_eq(route(PETREL_PUT, "/from-init/1", NULL), 0);
}
END_TEST

START_TEST(test_other_abi)
{
    ck_assert_int_eq(load("oldabi"), PETREL_EINVAL);
    char want[160];
    snprintf(want, sizeof(want),
             "module 'oldabi' was built for petrel ABI version %d, this petrel has ABI version "
             "%d: rebuild the module against this petrel's petrel.h",
             PETREL_ABI_VERSION + 1, PETREL_ABI_VERSION);
    assert_err(want);
    ck_assert_int_eq(S->nmodules, 0);
}
END_TEST

START_TEST(test_previous_abi)
{
    petrel__set_builtins(table_abi);
    ck_assert_int_eq(load("abi2:x"), 0);
    ck_assert_int_eq(inits, 1);
    ck_assert_str_eq(seen_args, "x");
    ck_assert_int_eq(route(PETREL_GET, "/alpha", NULL), 0);
    /* older than PETREL_ABI_VERSION_MIN: refused, naming both versions */
    ck_assert_int_eq(load("abi1"), PETREL_EINVAL);
    char want[160];
    snprintf(want, sizeof(want),
             "module 'abi1' was built for petrel ABI version 1, this petrel has ABI version %d",
             PETREL_ABI_VERSION);
    assert_err(want);
}
END_TEST

START_TEST(test_options_at_load)
{
    petrel__set_builtins(table_abi);
    /* nothing given: the defaults */
    opts_conf.size = 7;
    ck_assert_int_eq(load("withopts"), 0);
    ck_assert_uint_eq(opts_seen.size, 100);
    ck_assert_ptr_null(opts_seen.text);
    petrel__server_free(S);
    /* the values given, in their order, before init, at every load */
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-size", "1k"), 0);
    ck_assert_int_eq(petrel__module_option_given("other", "wo-size", "2k"), 0);
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-text", "hi"), 0);
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-size", "2k"), 0);
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-flag", NULL), 0);
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-dir", "/"), 0);
    for (int i = 0; i < 2; i++) {
        S = petrel__server_new();
        memset(&opts_conf, 0, sizeof(opts_conf));
        ck_assert_int_eq(load("withopts"), 0);
        ck_assert_uint_eq(opts_seen.size, 2048);
        ck_assert_str_eq(opts_seen.text, "hi");
        ck_assert_str_eq(opts_seen.dir, "/");
        ck_assert_int_eq(opts_seen.flag, 1);
        if (i == 0)
            petrel__server_free(S);
    }
    /* a directory that is not there: refused before init, naming the option */
    petrel__server_free(S);
    S = petrel__server_new();
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-dir", "/nonexistent"), 0);
    ck_assert_int_eq(load("withopts"), PETREL_ENOTFOUND);
    ck_assert_str_eq(err, "--wo-dir '/nonexistent': No such file or directory");
    ck_assert_int_eq(S->nmodules, 0);
    petrel__module_options_forget();
    /* an option the module no longer has (a module file rebuilt) */
    ck_assert_int_eq(petrel__module_option_given("withopts", "wo-gone", "1"), 0);
    ck_assert_int_eq(load("withopts"), PETREL_EINVAL);
    ck_assert_str_eq(err, "module 'withopts' has no option --wo-gone any more");
    petrel__module_options_forget();
}
END_TEST

START_TEST(test_init_fails)
{
    ck_assert_int_eq(load("failing"), PETREL_EINVAL);
    ck_assert_str_eq(err, "module 'failing': init failed: invalid argument");
}
END_TEST

START_TEST(test_twice)
{
    ck_assert_int_eq(load("alpha"), 0);
    ck_assert_int_eq(load("alpha:again"), PETREL_ESTATE);
    ck_assert_str_eq(err, "module 'alpha' is loaded twice");
    ck_assert_int_eq(inits, 1);
}
END_TEST

START_TEST(test_route_clash)
{
    ck_assert_int_eq(load("alpha"), 0);
    ck_assert_int_eq(load("clash"), PETREL_ESTATE);
    ck_assert_str_eq(err, "module 'clash': route '/alpha': already registered by another module");
}
END_TEST

START_TEST(test_unknown_name)
{
    ck_assert_int_eq(load("nosuch:x=1"), PETREL_ENOTFOUND);
    assert_err("--module 'nosuch': no built-in module of that name (built-in: alpha, failing, "
               "clash, initroute, oldabi; a module file is given by its path, e.g. ./nosuch.so)");
    ck_assert_int_eq(load(":x"), PETREL_EINVAL);
    assert_err("expected NAME or PATH.so");
}
END_TEST

START_TEST(test_paths)
{
    /* a path ends at ".so" (or ".c") and a ':' -- ARGS may hold slashes */
    ck_assert_int_eq(load("./nowhere/mod.so:prefix=/api/v1"), PETREL_ENOTFOUND);
    ck_assert_str_eq(err, "--module './nowhere/mod.so': No such file or directory");
    ck_assert_int_eq(load("mod.so"), PETREL_ENOTFOUND);
    ck_assert_str_eq(err, "--module 'mod.so': No such file or directory");
    ck_assert_int_eq(load("/nowhere/mod:a=b"), PETREL_ENOTFOUND);
    ck_assert_str_eq(err, "--module '/nowhere/mod': No such file or directory");
    ck_assert_int_eq(load("/tmp"), PETREL_EINVAL);
    ck_assert_str_eq(err, "--module '/tmp': not a regular file");
}
END_TEST

START_TEST(test_source_needs_dev)
{
    char path[] = "/tmp/check_module.XXXXXX.c";
    int fd = mkstemps(path, 2);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char spec[64];
    snprintf(spec, sizeof(spec), "%s:x=1", path);
    int rc = load(spec);
    unlink(path);
    ck_assert_int_eq(rc, PETREL_EINVAL);
    assert_err("a C source file: build it into a shared object (petrel-mod build");
    assert_err("or run petrel --dev");
}
END_TEST

START_TEST(test_not_a_shared_object)
{
    char path[] = "/tmp/check_module.XXXXXX.so";
    int fd = mkstemps(path, 3);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "not ELF\n", 8), 8);
    close(fd);
    int rc = load(path);
    unlink(path);
    ck_assert_int_eq(rc, PETREL_ENOTFOUND);
    assert_err("cannot load: ");
    ck_assert_int_eq(S->nmodules, 0);
}
END_TEST

static Suite *module_suite(void)
{
    Suite *s = suite_create("module");
    TCase *tc = tcase_create("builtin");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_builtin_routes_and_init);
    tcase_add_test(tc, test_args);
    tcase_add_test(tc, test_init_adds_routes);
    suite_add_tcase(s, tc);

    tc = tcase_create("refusals");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_other_abi);
    tcase_add_test(tc, test_previous_abi);
    tcase_add_test(tc, test_options_at_load);
    tcase_add_test(tc, test_init_fails);
    tcase_add_test(tc, test_twice);
    tcase_add_test(tc, test_route_clash);
    tcase_add_test(tc, test_unknown_name);
    tcase_add_test(tc, test_paths);
    tcase_add_test(tc, test_source_needs_dev);
    tcase_add_test(tc, test_not_a_shared_object);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(module_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
