# redis_lib.sh -- a real Redis for the publish/subscribe tests, sourced
# after lib.sh: Debian's redis-server, started in the test's temporary
# directory on a loopback port and a Unix socket, without persistence, in
# the foreground (so that the test owns it and its exit kills it).
#
#   redis_needs      skip the test (77) without redis-server or redis-cli, or
#                    with a petrel built without the Redis bridge
#   redis_start      start it (again on the same port and socket after a
#                    redis_kill); sets REDIS_PORT, REDIS_SOCK, REDIS_PID
#   redis_kill       SIGKILL: Redis goes away at once, as in a crash
#   redis_stop       SIGTERM, and wait for it
#   redis_cli ARG... redis-cli on its port

REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}
REDIS_CLI=${REDIS_CLI:-$(command -v redis-cli || true)}
REDIS_PORT=
REDIS_SOCK=
REDIS_PID=

redis_needs() {
    [[ $("$PETREL" --version) != *"no Redis bridge"* ]] ||
        skip "petrel was built without the Redis bridge (configure --without-redis)"
    [[ -n $REDIS_SERVER ]] ||
        skip "no redis-server (apt-get install redis-server, or ./bootstrap --test)"
    [[ -n $REDIS_CLI ]] || skip "no redis-cli (apt-get install redis-tools)"
}

redis_start() {
    local dir=$LIB_TMP/redis
    mkdir -p "$dir"
    [[ -n $REDIS_PORT ]] || REDIS_PORT=$(free_port)
    REDIS_SOCK=$dir/redis.sock
    "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --unixsocket "$REDIS_SOCK" \
        --unixsocketperm 700 --save '' --appendonly no --daemonize no --dir "$dir" \
        --logfile "$dir/redis.log" </dev/null &
    REDIS_PID=$!
    LIB_BG+=("$REDIS_PID")
    wait_for "$(bound 10)" redis_up
}

redis_up() {
    [[ $("$REDIS_CLI" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
}

redis_kill() {
    kill -KILL "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
}

redis_stop() {
    kill -TERM "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
}

redis_cli() {
    "$REDIS_CLI" -p "$REDIS_PORT" "$@"
}
