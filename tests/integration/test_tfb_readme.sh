#!/usr/bin/env bash
# examples/tfb/README.md's commands, as written: the private PostgreSQL
# server in ./pg (initdb, the example's postgresql.conf, pg_ctl on a Unix
# socket only), setup.sh, then petrel with the tfb module on it and the
# README's curl.  Run in a copy of examples/tfb laid out as in the tree
# (the README runs from the tree's top), as the postgres user when the
# test runs as root (the README says so).  The petrel command and port of
# the README are this build's petrel and a free port; nothing else is
# changed.  Before, the README's command used Debian's cluster, which is
# not running here.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_lib.sh"

pg_setup
readme=$top_srcdir/examples/tfb/README.md
# block N of the ```sh blocks after the line "A private server in"
block() {
    awk -v want="$1" '/^A private server in/ { on = 1 }
        on && /^```sh$/ { n++; inb = 1; next }
        inb && /^```$/ { inb = 0; if (n == want) exit; next }
        inb && n == want { print }' "$readme"
}
server=$(block 1)
run=$(block 2)
[[ $server == *initdb* && $server == *pg_ctl* && $server == *setup.sh* ]] ||
    fail "README.md: no block that makes the private server after 'A private server in': $server"
[[ $run == *"--module"*tfb* && $run == *curl* ]] || fail "README.md: no block that runs petrel on it: $run"

W=$PG_DIR/tree
mkdir -p "$W/examples"
cp -r "$top_srcdir/examples/tfb" "$W/examples/tfb"
[[ $(id -u) -ne 0 ]] || chown -R postgres "$W"
# as the server's user, in the namespace with a readable /etc/passwd where
# it needs one (pg_lib.sh)
as_pg() {
    if [[ $PG_NS == yes ]]; then
        unshare -m sh -c 'f=$1; shift; mount --bind "$f" /etc/passwd && exec "$@"' sh \
            "$PG_DIR/passwd" "${PG_AS[@]}" "$@"
    else
        "${PG_AS[@]}" "$@"
    fi
}
readme_stop() {
    as_pg env PATH="$PG_BINDIR:$PATH" pg_ctl -D "$W/pg/data" -m fast stop >/dev/null 2>&1 || true
}
trap 'readme_stop; pg_on_exit' EXIT
(cd "$W" && as_pg env HOME="$W" bash -e -c "$server") >"$LIB_TMP/server.log" 2>&1 ||
    fail "the README's server block: $(tail -n 15 "$LIB_TMP/server.log")"
ok "examples/tfb/README.md: the private server started and the database set up, as written"

# petrel on it: the README's command line (its lines joined), with this
# build's petrel and a free port, in the background; then its curl
port=$(free_port)
cmd=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' <<<"$run" | grep '^petrel ')
curl_line=$(grep '^curl ' <<<"$run")
cmd=${cmd/#petrel /\"\$PETREL\" }
cmd=${cmd//127.0.0.1:8080/127.0.0.1:$port}
curl_line=${curl_line//127.0.0.1:8080/127.0.0.1:$port}
(cd "$W" && exec bash -c "exec $cmd") >"$LIB_TMP/petrel.out" 2>"$LIB_TMP/petrel.err" &
pid=$!
LIB_PIDS+=("$pid")
wait_port "$port"
out=$(cd "$W" && bash -c "$curl_line") || fail "the README's curl: $out"
expect_match "$out" '^\[\{"id":[0-9]+,"randomNumber":[0-9]+\}(,\{"id":[0-9]+,"randomNumber":[0-9]+\}){2}\]$' \
    "the README's curl of /queries?queries=3"
kill -TERM "$pid"
petrel_wait_exit "$pid" "$(bound 15)"
ok "examples/tfb/README.md: petrel with the tfb module on that server answers the README's curl: $out"
