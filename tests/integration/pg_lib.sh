# pg_lib.sh -- a real PostgreSQL server for the integration tests
# (test_pg_*.sh), sourced after lib.sh.  The server is Debian's (package
# postgresql), made with initdb in the test's temporary directory and run
# by the unprivileged `postgres` system user when the test runs as root
# (PostgreSQL refuses to run as root; CI runs as root), by the test's own
# user otherwise.  It listens on a Unix socket in that directory (and on
# loopback TCP with pg_start --tcp), and is stopped and removed when the
# test ends, however it ends.
#
#   pg_available        0 when PostgreSQL's server is installed (and the pool
#                       built), else 1 with the reason in PG_WHY
#   pg_setup            skip (77) without PostgreSQL's server programs, find
#                       them (PG_BINDIR), prepare the user and the directory
#   pg_start [--tcp]    initdb (the first time) and start the server; wait
#                       until it accepts connections.  Exports PGHOST (the
#                       socket directory), PGPORT, PGUSER (the superuser),
#                       sets PG_PID and PG_LOG.  PG_OPTS (an array) holds
#                       more server options (-c name=value).  The server
#                       preloads pg_stat_statements when it is installed
#                       (PG_PGSS=yes), as the benchmark's does
#   pg_stop             fast shutdown (clients are disconnected), wait
#   pg_crash            immediate shutdown (SIGQUIT: every backend exits at
#                       once, as in a crash), wait
#   pg_tfb              the TechEmpower database (examples/tfb/setup.sh);
#                       exports PGDATABASE=hello_world
#   psql_ ARG...        psql -X -At -v ON_ERROR_STOP=1 (bounded in time)
#   pg_needs WHAT...    skip (77) without what a test uses besides the server:
#                       cc (a test module), h2 (python3-h2), bench (sets
#                       BENCH, petrel-bench next to petrel), pgss
#                       (pg_stat_statements; call after pg_setup)
#   pg_module DIR       write DIR/pgtest.c, a module for --dev --module on
#                       the pool: GET /sleep?s=SECONDS (SELECT pg_sleep),
#                       GET /sql/bad (a query of a table that does not
#                       exist: 500), GET /one (SELECT 1), GET /swap?a=ID&b=ID
#                       (one transaction, petrel_pg_tx_begin: row a of table
#                       swap + 1, a 0.3 s pause, row b + 1: "swapped"),
#                       GET /ins?k=K (INSERT INTO uniq (k) VALUES (K)
#                       RETURNING k: K, or 500 for a duplicate key),
#                       GET /txins?a=K&b=K (rows a and b of uniq in one
#                       transaction: "inserted", or 500 and neither)
#
# /etc/passwd of mode 0600 or 0700 (seen on these machines): then the
# postgres user cannot look itself up, and initdb fails with "could not
# look up effective user ID".  pg_setup detects it and runs initdb in a
# private mount namespace where a readable copy of /etc/passwd is mounted
# over it (the system's file is not changed); where that cannot be done it
# skips the test and says why and how to fix it.

PG_BINDIR=${PG_BINDIR:-}
PG_PID=
PG_LOG=
PG_DIR=
PG_AS=()       # the command prefix that runs a program as the server's user
PG_NS=no       # initdb needs a readable /etc/passwd in a namespace of its own
PG_OPTS=()
PG_PGSS=no     # pg_stat_statements is installed: preloaded by pg_start

# pg_available: 0 when PostgreSQL's server and psql are installed and
# this libpetrel has the pool; else 1, with the reason in PG_WHY
pg_available() {
    if [[ -z $PG_BINDIR ]]; then
        local d
        for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
            [[ -x $d/initdb && -x $d/postgres ]] && PG_BINDIR=$d
        done
    fi
    PG_WHY=
    if [[ -z $PG_BINDIR || ! -x $PG_BINDIR/initdb || ! -x $PG_BINDIR/postgres ]]; then
        PG_WHY="PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql, or ./bootstrap --test)"
    elif ! command -v psql >/dev/null; then
        PG_WHY="psql is not installed (apt-get install postgresql-client)"
    elif [[ -n ${top_builddir:-} && -f $top_builddir/config.h ]] &&
        ! grep -q '^#define HAVE_PGSQL 1' "$top_builddir/config.h"; then
        PG_WHY="petrel was built without its PostgreSQL pool (configure --without-pgsql, or no libpq: apt-get install libpq-dev, and configure again)"
    fi
    [[ -z $PG_WHY ]]
}

pg_setup() {
    pg_available || skip "$PG_WHY"
    PG_DIR=$LIB_TMP/pg
    mkdir -p "$PG_DIR/sock"
    if [[ $(id -u) -eq 0 ]]; then
        command -v setpriv >/dev/null || skip "no setpriv (util-linux) to run PostgreSQL as the postgres user"
        if ! id -u postgres >/dev/null 2>&1; then
            useradd --system --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin \
                postgres 2>/dev/null ||
                skip "no postgres system user, and useradd could not make one (PostgreSQL refuses to run as root)"
            echo "pg_lib: made the postgres system user (PostgreSQL refuses to run as root)"
        fi
        PG_AS=(setpriv --reuid=postgres --regid="$(id -g postgres)" --clear-groups --)
        # its directories: the test's temporary directory is root's (0700)
        chmod 711 "$LIB_TMP"
        chown -R postgres "$PG_DIR"
        if ! "${PG_AS[@]}" id -un >/dev/null 2>&1; then
            local mode
            mode=$(stat -c %a /etc/passwd)
            echo "pg_lib: the postgres user cannot look itself up (/etc/passwd is mode $mode, not readable by others): initdb would fail with \"could not look up effective user ID\"; it runs with a readable copy of /etc/passwd mounted over it in a mount namespace of its own"
            getent passwd >"$PG_DIR/passwd" # what NSS says, whole lines
            chmod 644 "$PG_DIR/passwd"
            unshare -m sh -c 'f=$1; shift; mount --bind "$f" /etc/passwd && exec "$@"' sh "$PG_DIR/passwd" \
                "${PG_AS[@]}" id -un >/dev/null 2>&1 ||
                skip "/etc/passwd is mode $mode: the postgres user cannot look itself up and initdb fails (\"could not look up effective user ID\"), and no private mount namespace could be made to work around it; fix: chmod 644 /etc/passwd (Debian's mode)"
            PG_NS=yes
        fi
    fi
    [[ -f $PG_BINDIR/../lib/pg_stat_statements.so ]] && PG_PGSS=yes
    trap 'pg_on_exit' EXIT
}

# initdb as the server's user (in the namespace when /etc/passwd needs it)
pg_initdb() {
    local cmd=("$PG_BINDIR/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N)
    if [[ $PG_NS == yes ]]; then
        unshare -m sh -c 'f=$1; shift; mount --bind "$f" /etc/passwd && exec "$@"' sh \
            "$PG_DIR/passwd" "${PG_AS[@]}" "${cmd[@]}" >"$PG_DIR/initdb.log" 2>&1
    else
        "${PG_AS[@]}" "${cmd[@]}" >"$PG_DIR/initdb.log" 2>&1
    fi || fail "initdb failed: $(tail -n 5 "$PG_DIR/initdb.log")"
}

pg_start() {
    local listen='' pgss=()
    [[ ${1:-} == --tcp ]] && listen=127.0.0.1
    [[ -n $PG_DIR ]] || pg_setup
    [[ $PG_PGSS == yes ]] && pgss=(-c shared_preload_libraries=pg_stat_statements)
    [[ -d $PG_DIR/data ]] || pg_initdb
    [[ -n ${PG_PORT:-} ]] || PG_PORT=$(free_port)
    PG_LOG=$PG_DIR/postgres.log
    "${PG_AS[@]}" "$PG_BINDIR/postgres" -D "$PG_DIR/data" -k "$PG_DIR/sock" -p "$PG_PORT" \
        -c listen_addresses="$listen" -c fsync=off -c synchronous_commit=off \
        -c full_page_writes=off -c max_connections=200 -c log_min_messages=warning \
        "${pgss[@]}" "${PG_OPTS[@]}" >>"$PG_LOG" 2>&1 </dev/null &
    PG_PID=$!
    export PGHOST=$PG_DIR/sock PGPORT=$PG_PORT PGUSER=postgres
    local t0=$EPOCHREALTIME
    until "$PG_BINDIR/pg_isready" -q -h "$PGHOST" -p "$PGPORT" -t 1; do
        lib_alive "$PG_PID" || fail "postgres exited at start-up: $(tail -n 5 "$PG_LOG")"
        fcmp "$(secs_since "$t0") < $(bound 30)" || fail "postgres did not start within $(bound 30)s"
        sleep 0.05
    done
}

# pg_wait_gone: the server has exited (the postmaster waits for its
# backends before it does)
pg_wait_gone() {
    local t0=$EPOCHREALTIME
    while lib_alive "$PG_PID"; do
        fcmp "$(secs_since "$t0") < $(bound 20)" || fail "postgres did not stop within $(bound 20)s"
        sleep 0.05
    done
    wait "$PG_PID" 2>/dev/null || true
}

pg_stop() {
    kill -INT "$PG_PID" 2>/dev/null || true
    pg_wait_gone
}

pg_crash() {
    kill -QUIT "$PG_PID" 2>/dev/null || true
    pg_wait_gone
}

pg_on_exit() {
    local rc=$? p
    trap - ERR
    set +e
    if [[ -n $PG_PID ]] && lib_alive "$PG_PID"; then
        kill -QUIT "$PG_PID" 2>/dev/null
        for _ in $(seq 100); do lib_alive "$PG_PID" || break; sleep 0.05; done
        for p in $(lib_descendants "$PG_PID") $PG_PID; do kill -KILL "$p" 2>/dev/null; done
    fi
    if [[ $rc -ne 0 && $rc -ne 77 && -n $PG_LOG && -f $PG_LOG ]]; then
        printf -- '--- postgres.log (last 20 lines) ---\n' >&2
        tail -n 20 "$PG_LOG" >&2
    fi
    (exit "$rc")
    lib_cleanup
}

pg_needs() {
    local w
    for w in "$@"; do
        case $w in
        cc) command -v cc >/dev/null || skip "no C compiler (cc) for the test's module" ;;
        h2) py_needs h2 ;;
        bench) bench_needs ;;
        pgss) [[ $PG_PGSS == yes ]] ||
            skip "no pg_stat_statements ($PG_BINDIR/../lib/pg_stat_statements.so; Debian's postgresql-15 has it)" ;;
        esac
    done
}

psql_() {
    timeout "$(bound 30)" psql -X -At -q -v ON_ERROR_STOP=1 "$@"
}

pg_tfb() {
    "$top_srcdir/examples/tfb/setup.sh" --recreate -d postgres >"$PG_DIR/setup.log" 2>&1 ||
        fail "examples/tfb/setup.sh failed: $(cat "$PG_DIR/setup.log")"
    export PGDATABASE=hello_world
}

pg_module() {
    cat >"$1/pgtest.c" <<'EOF'
/* A module on the pool for the PostgreSQL tests (pg_lib.sh). */
#include <petrel.h>

#include <stdlib.h>

static petrel_pg_opts_t opts;
static petrel_pg_t *db;

static void done(const petrel_pg_result_t *res, void *data)
{
    petrel_req_t *req = data;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        petrel_pg_send_error(req, res);
        return;
    }
    petrel_str_t v = petrel_pg_value(res, 0, 0);
    petrel_send_copy(req, 200, "text/plain", v.ptr ? v.ptr : "", v.len);
}

static int run(petrel_req_t *req, const char *sql, const char *param)
{
    const char *params[1] = {param};
    int rc = petrel_pg_query(db, req, sql, param ? 1 : 0, params, done, req);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* GET /sleep?s=SECONDS: "slept" after pg_sleep(SECONDS) */
static int sleep_(petrel_req_t *req, void *data)
{
    (void)data;
    const char *s = petrel_req_query(req, "s");
    return run(req, "SELECT 'slept' FROM pg_sleep($1)", s ? s : "1");
}

static int bad(petrel_req_t *req, void *data)
{
    (void)data;
    return run(req, "SELECT x FROM no_such_table", NULL);
}

static int one(petrel_req_t *req, void *data)
{
    (void)data;
    return run(req, "SELECT 1", NULL);
}

typedef struct swap {
    petrel_req_t *req;
    int left;
} swap_t;

/* GET /ins?k=K: one row of table uniq (a duplicate K: 500) */
static int ins(petrel_req_t *req, void *data)
{
    (void)data;
    return run(req, "INSERT INTO uniq (k) VALUES ($1::int) RETURNING k", petrel_req_query(req, "k"));
}

/* GET /txins?a=K&b=K: two rows of uniq in one transaction */
static void txins_done(const petrel_pg_result_t *res, void *data)
{
    swap_t *s = data;
    if (s->left < 0)
        return;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        s->left = -1;
        petrel_pg_send_error(s->req, res);
        return;
    }
    if (--s->left == 0)
        petrel_send_text(s->req, 200, "text/plain", "inserted");
}

static int txins(petrel_req_t *req, void *data)
{
    (void)data;
    swap_t *s = petrel_arena_alloc(req->arena, sizeof(*s), 0);
    const char *a[1] = {petrel_req_query(req, "a")}, *b[1] = {petrel_req_query(req, "b")};
    if (s == NULL || a[0] == NULL || b[0] == NULL)
        return 400;
    s->req = req;
    s->left = 2;
    const char *ins = "INSERT INTO uniq (k) VALUES ($1::int)";
    int rc = petrel_pg_tx_begin(db, req);
    if (rc == 0)
        rc = petrel_pg_query(db, req, ins, 1, a, txins_done, s);
    if (rc == 0)
        rc = petrel_pg_query(db, req, ins, 1, b, txins_done, s);
    if (rc == 0)
        rc = petrel_pg_tx_end(db);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

/* GET /swap?a=ID&b=ID: three queries in one transaction, answered by the last */
static void swapped(const petrel_pg_result_t *res, void *data)
{
    swap_t *s = data;
    if (s->left < 0)
        return;
    if (petrel_pg_status(res) != PETREL_PG_OK) {
        s->left = -1;
        petrel_pg_send_error(s->req, res);
        return;
    }
    if (--s->left == 0)
        petrel_send_text(s->req, 200, "text/plain", "swapped");
}

static int swap(petrel_req_t *req, void *data)
{
    (void)data;
    swap_t *s = petrel_arena_alloc(req->arena, sizeof(*s), 0);
    const char *a[1] = {petrel_req_query(req, "a")}, *b[1] = {petrel_req_query(req, "b")};
    if (s == NULL || a[0] == NULL || b[0] == NULL)
        return 400;
    s->req = req;
    s->left = 3;
    const char *up = "UPDATE swap SET v = v + 1 WHERE id = $1::int";
    int rc = petrel_pg_tx_begin(db, req);
    if (rc == 0)
        rc = petrel_pg_query(db, req, up, 1, a, swapped, s);
    if (rc == 0)
        rc = petrel_pg_query(db, req, "SELECT pg_sleep(0.3)", 0, NULL, swapped, s);
    if (rc == 0)
        rc = petrel_pg_query(db, req, up, 1, b, swapped, s);
    if (rc == 0)
        rc = petrel_pg_tx_end(db);
    return rc < 0 ? petrel_pg_send_refused(db, req, rc) : PETREL_LATER;
}

static int worker_init(petrel_server_t *srv)
{
    (void)srv;
    db = petrel_pg_open(&opts);
    return db ? 0 : PETREL_EINVAL;
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
    {PETREL_GET, "/sleep", sleep_, NULL},
    {PETREL_GET, "/sql/bad", bad, NULL},
    {PETREL_GET, "/one", one, NULL},
    {PETREL_GET, "/swap", swap, NULL},
    {PETREL_GET, "/ins", ins, NULL},
    {PETREL_GET, "/txins", txins, NULL},
    {0, NULL, NULL, NULL},
};

PETREL_MODULE(pgtest, routes, init, worker_init, worker_fini)
EOF
}
