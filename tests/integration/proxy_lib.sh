# proxy_lib.sh -- for the reverse-proxy tests (test_proxy_*.sh), after lib.sh.
#
#   proxy_needs             skip when petrel is built without the proxy module
#   upstream_start          start proxy_upstream.py (a raw-socket HTTP/1.1
#                           upstream that records the bytes it receives):
#                           UP_PORT, UP (its base URL), UP_REC (its records)
#   up_stat conns|requests  its count of TCP connections or requests
#   up_last                 the file of the last request it recorded

proxy_needs() {
    # (not `--help | grep -q`: grep leaves at the match, and under pipefail
    # the help's writes after it fail the pipe with SIGPIPE)
    [[ $("$PETREL" --help) == *--proxy-buffer* ]] ||
        skip "petrel is built without the proxy module (modules/proxy/)"
}

upstream_start() {
    UP_REC=$LIB_TMP/rec
    rm -f "$LIB_TMP/upport"
    "$PY" "$LIB_DIR/proxy_upstream.py" "$LIB_TMP/upport" "$UP_REC" 2>"$LIB_TMP/upstream.err" &
    LIB_BG+=($!)
    wait_for "$(bound 10)" test -s "$LIB_TMP/upport"
    UP_PORT=$(cat "$LIB_TMP/upport")
    UP=http://127.0.0.1:$UP_PORT
}

up_stat() {
    curl_ "$UP/__stats" | "$PY" -c "import json, sys; print(json.load(sys.stdin)['$1'])"
}

up_last() {
    echo "$UP_REC/$(up_stat requests)"
}
