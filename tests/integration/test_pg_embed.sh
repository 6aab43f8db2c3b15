#!/usr/bin/env bash
# The PostgreSQL pool as a library of its own (libpetrel-pg), installed:
# `make install` installs libpetrel-pg.a, <petrel/pg.h> and petrel-pg.pc;
# petrel.pc's flags carry no -I of PostgreSQL's headers; a program that
# embeds petrel and calls the pool builds with `pkg-config --cflags --libs
# petrel-pg` and runs; a module file that calls the pool, built with
# petrel's flags only (petrel-mod) or linked with petrel-pg, loads into the
# installed petrel and calls the petrel command's pool.  No database is
# needed: the calls used answer without one.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mod_lib.sh"

mod_install
work=$LIB_TMP/work
mkdir -p "$work"
cd "$work"

for f in "$STAGE_INC/petrel/pg.h" "$STAGE_LIB/libpetrel-pg.a" "$STAGE_LIB/pkgconfig/petrel-pg.pc"; do
    [[ -e $f ]] || fail "not installed: $f"
done
flags=$(pkg-config --cflags petrel)
expect_no_match "$flags" 'postgresql' "pkg-config --cflags petrel"
supported=0
grep -q '^#define HAVE_PGSQL 1' "$top_builddir/config.h" && supported=1
ok "installed: libpetrel-pg.a, petrel/pg.h, petrel-pg.pc; petrel's flags name no PostgreSQL header ($flags)"

cat >embed.c <<'EOF2'
/* A program that embeds petrel and asks the pool what it can. */
#include <petrel.h>
#include <petrel/pg.h>

#include <stdio.h>

int main(void)
{
    petrel_pg_opts_t o;
    petrel_pg_opts_init(&o);
    int rc = petrel_pg_opts_parse(&o, "pool.connections=2 dbname=app");
    printf("supported %d parse %d connections %u conninfo %s\n", petrel_pg_supported(), rc,
           o.connections, o.conninfo);
    return 0;
}
EOF2
san=()
[[ ${PETREL_SANITIZERS:-no} == yes ]] && san=(-fsanitize=address,undefined)
# shellcheck disable=SC2046 # pkg-config prints word lists
cc -Wall -Werror "${san[@]}" embed.c $(pkg-config --cflags --libs petrel-pg) -o embed ||
    fail "cc embed.c \$(pkg-config --cflags --libs petrel-pg) failed"
out=$(LD_LIBRARY_PATH=$STAGE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./embed 2>&1) ||
    fail "the program linked with petrel-pg: $out"
expect_eq "$out" "supported $supported parse 0 connections 2 conninfo dbname=app" "the embedding program"
ok "a program built with pkg-config --cflags --libs petrel-pg links the pool and runs"

cat >pgmod.c <<'EOF2'
/* A module that calls the pool: GET /pg says whether it is built in. */
#include <petrel.h>

#include <stdio.h>

static int pg(petrel_req_t *req, void *data)
{
    (void)data;
    char *s = petrel_arena_printf(req->arena, "supported %d\n", petrel_pg_supported());
    return s ? petrel_send_text(req, 200, "text/plain", s) : 500;
}

static const petrel_route_t routes[] = {{PETREL_GET, "/pg", pg, NULL}, {0, NULL, NULL, NULL}};
PETREL_MODULE(pgmod, routes, NULL, NULL, NULL)
EOF2
petrel-mod build -o pgmod-mod.so pgmod.c >"$LIB_TMP/pm.out" 2>&1 ||
    fail "petrel-mod build pgmod.c: $(cat "$LIB_TMP/pm.out")"
sed 's/PETREL_MODULE(pgmod,/PETREL_MODULE(pgmodpc,/; s|"/pg"|"/pgpc"|' pgmod.c >pgmodpc.c
# shellcheck disable=SC2046
cc -shared -fPIC -Wall -Werror "${san[@]}" pgmodpc.c $(pkg-config --cflags --libs petrel-pg) \
    -o pgmod-pc.so || fail "cc -shared pgmodpc.c \$(pkg-config --cflags --libs petrel-pg) failed"
petrel_start --module ./pgmod-mod.so --module ./pgmod-pc.so
expect_eq "$(curl_ "$BASE/pg")" "supported $supported" "GET /pg from a module built by petrel-mod"
expect_eq "$(curl_ "$BASE/pgpc")" "supported $supported" "GET /pgpc from a module linked with petrel-pg"
petrel_stop
ok "modules that call the pool load into the installed petrel: built with petrel-mod, or linked with petrel-pg"
