#!/usr/bin/env bash
# A module file's own options (petrel_option_t, PETREL_MODULE_WITH_OPTIONS):
# petrel opens the module files that --module names before it reads the
# rest of the command line, so their options are known wherever they stand
# on it; --help lists them in a section of the module; a bad value is a
# usage error; the values go into the module again when a reload loads a
# fresh copy of it (SIGHUP).  And a module built for the previous module ABI
# (version 2: its descriptor ends before `options`) still loads.
. "$(dirname "$0")/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
cd "$LIB_TMP"

cat >opt.c <<'EOF'
#include <petrel.h>
#include <stdio.h>
#include <string.h>

typedef struct opt_conf {
    const char *greeting;
    size_t max;
    int loud;
} opt_conf_t;
static opt_conf_t conf = {"Hello", 0, 0};

static int opt(petrel_req_t *req, void *data)
{
    (void)data;
    char *body = petrel_arena_printf(req->arena, "%s %zu %d", conf.greeting, conf.max, conf.loud);
    return body ? petrel_send(req, 200, "text/plain", body, strlen(body)) : PETREL_ENOMEM;
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/opt", opt, NULL},
    {0, NULL, NULL, NULL},
};

static const petrel_option_t options[] = {
    {.name = "opt-greeting", .value = "TEXT", .kind = PETREL_OPTION_TEXT,
     .offset = offsetof(opt_conf_t, greeting), .help = "what /opt says (default Hello)"},
    {.name = "opt-max", .value = "BYTES", .kind = PETREL_OPTION_SIZE,
     .offset = offsetof(opt_conf_t, max), .min = 1, .max = 4096, .def = 64,
     .expect = "a size from 1 to 4k", .help = "a limit (default 64)"},
    {.name = "opt-loud", .kind = PETREL_OPTION_FLAG, .offset = offsetof(opt_conf_t, loud),
     .help = "say it loud"},
    {.name = NULL},
};

PETREL_MODULE_WITH_OPTIONS(opt, routes, NULL, NULL, NULL, options, &conf)
EOF
cc -shared -fPIC -Wall -Wextra -Werror -I"$top_srcdir/include" -o opt.so opt.c ||
    fail "cc opt.c failed"

# --- --help: the module's section ---------------------------------------------
help=$(timeout "$(bound 10)" "$PETREL" --module ./opt.so --help) || fail "--help: status $?"
[[ $help == *$'\nThe module opt:\n  --opt-greeting TEXT'*'--opt-max BYTES'*'(default 64)'* ]] ||
    fail "--help has no section of the module opt: $help"
ok "petrel --module ./opt.so --help lists the module's options in a section of its own"

# --- a bad value: a usage error, naming the option ----------------------------
rc=0
err=$(timeout "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 --opt-max 0 --module ./opt.so \
    2>&1 >/dev/null) || rc=$?
[[ $rc -eq 2 && $err == "petrel: --opt-max: expected a size from 1 to 4k, got '0' (see petrel --help)" ]] ||
    fail "--opt-max 0: status $rc, '$err'"
rc=0
err=$(timeout "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 --opt-max 1 2>&1 >/dev/null) || rc=$?
[[ $rc -eq 2 && $err == *"unknown option '--opt-max'"* ]] ||
    fail "--opt-max without the module: status $rc, '$err'"
ok "a bad value is a usage error; without --module the option is unknown"

# --- the values, before or after --module, and after a reload ------------------
petrel_start --opt-greeting Hi --module ./opt.so --opt-max 2k --opt-loud
expect_eq "$(curl_ "$BASE/opt")" "Hi 2048 1" "the options given"
kill -HUP "$PETREL_PID"
wait_for "$(bound 20)" grep -q "reload: generation [0-9]* serving" "$PETREL_ERR"
expect_eq "$(curl_ "$BASE/opt")" "Hi 2048 1" "the options given, after a reload"
petrel_stop
petrel_start --module ./opt.so
expect_eq "$(curl_ "$BASE/opt")" "Hello 64 0" "the defaults"
petrel_stop
ok "options before and after --module, kept through a reload; the defaults without them"

# --- a module of the previous ABI (2) ------------------------------------------
cat >abi2.c <<'EOF'
#include <petrel.h>

static int old(petrel_req_t *req, void *data)
{
    (void)data;
    return petrel_send(req, 200, "text/plain", "abi2", 4);
}

static const petrel_route_t routes[] = {
    {PETREL_GET, "/old", old, NULL},
    {0, NULL, NULL, NULL},
};

/* the descriptor as petrel.h of ABI 2 declared it */
typedef struct abi2_module {
    int abi_version;
    const char *name;
    const petrel_route_t *routes;
    int (*init)(petrel_server_t *srv, const char *args);
    int (*worker_init)(petrel_server_t *srv);
    void (*worker_fini)(petrel_server_t *srv);
} abi2_module_t;
static const abi2_module_t desc = {2, "abi2", routes, NULL, NULL, NULL};
PETREL_API const abi2_module_t *petrel_module_entry = &desc;
EOF
cc -shared -fPIC -Wall -Werror -I"$top_srcdir/include" -o abi2.so abi2.c || fail "cc abi2.c failed"
petrel_start --module ./abi2.so --module ./opt.so --opt-greeting Hey
expect_eq "$(curl_ "$BASE/old")" "abi2" "a module of ABI 2"
expect_eq "$(curl_ "$BASE/opt")" "Hey 64 0" "beside a module of ABI 3"
petrel_stop
ok "a module built for ABI 2 loads beside one of ABI 3"
