#!/usr/bin/env bash
# No heap allocation per call in petrel's own code on the upstream client's
# path, after warm-up: GET /up/hello of upstream_mod.c (each request calls
# another petrel's /hello through a pool of kept-alive connections) and
# POST /up/echo with a body, POST /stream/echo with a body streamed
# (petrel_call_stream, chunked, in three writes), 10 clients at once, over
# HTTP/1.1 and over h2c
# (nghttp2's blocks come from the size-class free lists: none of the heap
# either once warm).  The counting allocator
# is test_pg_heap.sh's (every malloc, calloc, realloc and memalign of the
# worker, by the object the call came from); between two snapshots taken
# around 5,000 requests (after 2,000 of warm-up), the petrel executable
# must have made none.
. "$(dirname "$0")/lib.sh"

[[ $PETREL_SANITIZERS != yes ]] || skip "AddressSanitizer owns malloc: no counting allocator under it"
[[ ${PETREL_VALGRIND:-0} != 1 ]] || skip "valgrind owns malloc: no counting allocator under it"
command -v cc >/dev/null || skip "no C compiler (cc)"
bench_needs

sed -n "/^cat >\"\$LIB_TMP\/heap.c\" <<'C'\$/,/^C\$/p" "$top_srcdir/tests/integration/test_pg_heap.sh" |
    sed '1d;$d' >"$LIB_TMP/heap.c"
[[ -s $LIB_TMP/heap.c ]] || fail "no counting allocator in test_pg_heap.sh"
cc -shared -fPIC -O2 -o "$LIB_TMP/heap.so" "$LIB_TMP/heap.c" -lpthread ||
    fail "the counting allocator does not build"
cc -shared -fPIC -g -Wall -Wextra -Werror -I"$top_srcdir/include" -o "$LIB_TMP/upt.so" \
    "$top_srcdir/tests/integration/upstream_mod.c" || fail "the test module does not build"

petrel_start --module hello --module echo --workers 1
UPID=$PETREL_PID
UPORT=$PORT
mkdir -p "$LIB_TMP/heap"
# the same over HTTP/1.1 (http://) and HTTP/2 with prior knowledge (h2c://).
# h2c: no max_requests, so that one connection carries all the calls (a new
# connection costs heap calls of nghttp2's own: its session struct is
# larger than the largest size class of sizeclass.c; per connection, not
# per call).  And the upstream's Date field changes every second: each new
# value is a new entry of the connection's HPACK decoding table, which
# grows (to 4 KiB) before its old entries are recycled; so a run of 5,000
# calls is tried up to 3 times, and one of them must make no heap call.
for scheme in http h2c; do
    opts= tries=1
    [[ $scheme == h2c ]] && opts=max_requests=0 tries=3
    UPT_URLS=$scheme://127.0.0.1:$UPORT UPT_OPTS=$opts HEAP_DIR=$LIB_TMP/heap LD_PRELOAD=$LIB_TMP/heap.so \
        petrel_start --workers 1 --memory-release-delay 86400 --module "$LIB_TMP/upt.so"
    worker=$(petrel_worker)
    [[ -f $LIB_TMP/heap/heap.$worker ]] || fail "no counters of the worker (heap.$worker)"
    counters() { od -An -t u8 -v "$LIB_TMP/heap/heap.$worker" | tr -s ' \n' ' '; }

    for what in "GET /up/hello" "POST /up/echo" "POST /stream/echo?n=1500&part=500&chunked=1"; do
        args=("$BASE${what#* }")
        [[ $what == POST* ]] && args=(-X POST --body-size 64 "${args[@]}")
        "$BENCH" -c 10 -n 2000 --fail-on-error "${args[@]}" >/dev/null || fail "warm-up of $what failed"
        n=5000
        for ((try = 1; try <= tries; try++)); do
            read -r e0 q0 c0 o0 <<<"$(counters)"
            # the counting works: warming up took connections and buffers from the heap
            (( e0 > 0 )) || fail "no heap call of the petrel executable counted at all"
            "$BENCH" -c 10 -n "$n" --fail-on-error "${args[@]}" >"$LIB_TMP/bench.out" ||
                fail "petrel-bench $what: $(tail -3 "$LIB_TMP/bench.out")"
            read -r e1 q1 c1 o1 <<<"$(counters)"
            [[ $((e1 - e0)) -eq 0 ]] && break
        done
        [[ $((e1 - e0)) -eq 0 ]] ||
            fail "$scheme: $what: the petrel executable made $((e1 - e0)) heap calls in $n calls after warm-up ($tries tries)"
        ok "$scheme: $what: $n calls through the pool: petrel's code 0 heap calls (the C library $((c1 - c0)), others $((o1 - o0)); try $try)"
    done
    petrel_stop
done
petrel_stop "$UPID"
