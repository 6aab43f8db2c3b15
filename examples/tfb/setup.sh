#!/bin/sh
# setup.sh -- the database of the TechEmpower Framework Benchmarks test
# types, for petrel's tfb module, as the benchmark's PostgreSQL image makes
# it: a role benchmarkdbuser (the image's superuser, password
# benchmarkdbpass), a database hello_world owned by it, and in it what the
# benchmark's create-postgres.sql makes: the extension pg_stat_statements
# (the benchmark's verifier counts queries with it), the table World
# (10,000 rows of a random number; its columns, unquoted, are id and
# randomnumber) and the table Fortune (12 fortunes), and, as that script
# does, both again under quoted names, "World" and "Fortune" (the
# verifier's /updates check reads "World" and world before and after, and
# fails when either is missing).
#
#   examples/tfb/setup.sh [--recreate] [PSQL-OPTION]...
#
# Run it as a PostgreSQL superuser; psql finds the server as libpq does
# (PGHOST, PGPORT, PGUSER, or options such as -h /run/postgresql -U
# postgres).  With --recreate an existing hello_world is dropped first;
# without it, an existing hello_world is left alone (its tables too) and
# the script says so.  The server settings of the benchmark's
# postgresql.conf that matter here are in postgresql.conf beside this
# script (pg_stat_statements must be in shared_preload_libraries for its
# view to work: the script says so when it is not).  Then:
#
#   petrel --module tfb:'host=... dbname=hello_world user=benchmarkdbuser password=benchmarkdbpass'
set -eu

recreate=no
if [ "${1:-}" = --recreate ]; then
    recreate=yes
    shift
fi
command -v psql >/dev/null 2>&1 || {
    echo "setup.sh: psql not found (Debian: apt-get install postgresql-client)" >&2
    exit 1
}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

exists=$(psql_ -At "$@" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'hello_world'")
if [ "$exists" = 1 ] && [ $recreate = no ]; then
    echo "setup.sh: the database hello_world exists already (--recreate drops it and makes it again)"
    exit 0
fi

# the role and the database: what the benchmark's image makes from its
# POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB
psql_ "$@" -d postgres <<'SQL'
SET client_min_messages = warning;
DROP DATABASE IF EXISTS hello_world;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'benchmarkdbuser') THEN
        CREATE ROLE benchmarkdbuser LOGIN PASSWORD 'benchmarkdbpass';
    END IF;
END
$$;
ALTER ROLE benchmarkdbuser WITH SUPERUSER;
CREATE DATABASE hello_world WITH TEMPLATE = template0 ENCODING 'UTF8' OWNER = benchmarkdbuser;
SQL

# create-postgres.sql, as benchmarkdbuser: the names are unquoted, so
# World is world and randomNumber is randomnumber
psql_ "$@" -d hello_world <<'SQL'
SET client_min_messages = warning;
SET ROLE benchmarkdbuser;
BEGIN;

CREATE EXTENSION IF NOT EXISTS pg_stat_statements;

CREATE TABLE World (
  id integer NOT NULL,
  randomNumber integer NOT NULL default 0,
  PRIMARY KEY (id)
);

INSERT INTO World (id, randomnumber)
SELECT x.id, least(floor(random() * 10000 + 1), 10000) FROM generate_series(1,10000) as x(id);

CREATE TABLE Fortune (
  id integer NOT NULL,
  message varchar(2048) NOT NULL,
  PRIMARY KEY (id)
);

INSERT INTO Fortune (id, message) VALUES (1, 'fortune: No such file or directory');
INSERT INTO Fortune (id, message) VALUES (2, 'A computer scientist is someone who fixes things that aren''t broken.');
INSERT INTO Fortune (id, message) VALUES (3, 'After enough decimal places, nobody gives a damn.');
INSERT INTO Fortune (id, message) VALUES (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1');
INSERT INTO Fortune (id, message) VALUES (5, 'A computer program does what you tell it to do, not what you want it to do.');
INSERT INTO Fortune (id, message) VALUES (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen');
INSERT INTO Fortune (id, message) VALUES (7, 'Any program that runs right is obsolete.');
INSERT INTO Fortune (id, message) VALUES (8, 'A list is only as strong as its weakest link. — Donald Knuth');
INSERT INTO Fortune (id, message) VALUES (9, 'Feature: A bug with seniority.');
INSERT INTO Fortune (id, message) VALUES (10, 'Computers make very fast, very accurate mistakes.');
INSERT INTO Fortune (id, message) VALUES (11, '<script>alert("This should not be displayed in a browser alert box.");</script>');
INSERT INTO Fortune (id, message) VALUES (12, 'フレームワークのベンチマーク');

-- and again under quoted names, as create-postgres.sql makes them
CREATE TABLE "World" (
  id integer NOT NULL,
  randomNumber integer NOT NULL default 0,
  PRIMARY KEY (id)
);

INSERT INTO "World" (id, randomnumber)
SELECT x.id, least(floor(random() * 10000 + 1), 10000) FROM generate_series(1,10000) as x(id);

CREATE TABLE "Fortune" (
  id integer NOT NULL,
  message varchar(2048) NOT NULL,
  PRIMARY KEY (id)
);

INSERT INTO "Fortune" (id, message) VALUES (1, 'fortune: No such file or directory');
INSERT INTO "Fortune" (id, message) VALUES (2, 'A computer scientist is someone who fixes things that aren''t broken.');
INSERT INTO "Fortune" (id, message) VALUES (3, 'After enough decimal places, nobody gives a damn.');
INSERT INTO "Fortune" (id, message) VALUES (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1');
INSERT INTO "Fortune" (id, message) VALUES (5, 'A computer program does what you tell it to do, not what you want it to do.');
INSERT INTO "Fortune" (id, message) VALUES (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen');
INSERT INTO "Fortune" (id, message) VALUES (7, 'Any program that runs right is obsolete.');
INSERT INTO "Fortune" (id, message) VALUES (8, 'A list is only as strong as its weakest link. — Donald Knuth');
INSERT INTO "Fortune" (id, message) VALUES (9, 'Feature: A bug with seniority.');
INSERT INTO "Fortune" (id, message) VALUES (10, 'Computers make very fast, very accurate mistakes.');
INSERT INTO "Fortune" (id, message) VALUES (11, '<script>alert("This should not be displayed in a browser alert box.");</script>');
INSERT INTO "Fortune" (id, message) VALUES (12, 'フレームワークのベンチマーク');

COMMIT;
ANALYZE;
SQL
rows() { psql_ -At "$@" -d hello_world -c "SELECT count(*) FROM $table"; }
table=world
nw=$(rows "$@")
table=fortune
nf=$(rows "$@")
table='"World"'
nqw=$(rows "$@")
table='"Fortune"'
nqf=$(rows "$@")
echo "setup.sh: hello_world is ready: World $nw rows, Fortune $nf rows" \
    "(\"World\" $nqw, \"Fortune\" $nqf)"
preload=$(psql_ -At "$@" -d postgres -c "SHOW shared_preload_libraries")
case ",$(echo "$preload" | tr -d ' ')," in
*,pg_stat_statements,*) ;;
*)
    echo "setup.sh: note: pg_stat_statements is not in shared_preload_libraries" \
        "(\"$preload\"): its view works once the server runs with the settings of" \
        "examples/tfb/postgresql.conf (a restart)"
    ;;
esac
