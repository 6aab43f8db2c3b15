#!/usr/bin/env bash
# Static files under concurrency: a 1 MiB file fetched byte-exact over 50
# concurrent connections (curl --parallel), then 50 keep-alive connections
# (Python threads) mixing the 1 MiB file, a 4 KiB file and ranges -- once
# with the default cache and once with a cache of 0 bytes and 0 descriptors,
# where every entry is evicted while its responses are still being written.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
mkdir -p "$W"
head -c $((1 << 20)) /dev/urandom >"$W/file-1m.bin"
head -c 4096 /dev/urandom >"$W/file-4k.bin"
sum1m=$(sha256sum <"$W/file-1m.bin")

for opts in "" "--static-cache-size 0"; do
    # shellcheck disable=SC2086
    petrel_start --root "$W" --module hello $opts
    what="cache ${opts:-default}"

    args=()
    for i in $(seq 1 50); do args+=(-o "$T/out.$i" "$BASE/file-1m.bin"); done
    curl_ --no-progress-meter --parallel --parallel-immediate --parallel-max 50 "${args[@]}"
    for i in $(seq 1 50); do
        [[ $(sha256sum <"$T/out.$i") == "$sum1m" ]] || fail "$what: download $i differs"
    done
    rm -f "$T"/out.*
    ok "$what: 1 MiB over 50 concurrent connections, all 50 byte-exact"

    pyrun "$W" <<'EOF'
import hashlib, os, sys, threading
from petrel_client import *
root = sys.argv[1]
big = open(os.path.join(root, "file-1m.bin"), "rb").read()
small = open(os.path.join(root, "file-4k.bin"), "rb").read()
errors = []

def client(k):
    try:
        c = Conn(timeout=30)
        for j in range(4):
            c.send(request("GET", "/file-1m.bin"))
            r = c.read_response()
            if r.status != 200 or r.body != big:
                errors.append("conn %d: 1 MiB #%d: %d, %d bytes" % (k, j, r.status, len(r.body)))
            c.send(request("GET", "/file-4k.bin"))
            r = c.read_response()
            if r.status != 200 or r.body != small:
                errors.append("conn %d: 4 KiB: %d" % (k, r.status))
            a = (k * 7919 + j * 104729) % (len(big) - 5000)
            c.send(request("GET", "/file-1m.bin", [("Range", "bytes=%d-%d" % (a, a + 4999))]))
            r = c.read_response()
            if r.status != 206 or r.body != big[a:a + 5000]:
                errors.append("conn %d: range at %d: %d" % (k, a, r.status))
        # pipelined: three requests in one write
        c.send(request("GET", "/file-4k.bin") * 2 + request("GET", "/file-1m.bin"))
        for want in (small, small, big):
            r = c.read_response()
            if r.body != want:
                errors.append("conn %d: pipelined body" % k)
        c.close()
    except Exception as e:
        errors.append("conn %d: %r" % (k, e))

ts = [threading.Thread(target=client, args=(k,)) for k in range(50)]
for t in ts:
    t.start()
for t in ts:
    t.join()
check(not errors, "; ".join(errors[:5]))
ok("50 keep-alive connections x (4 x (1 MiB + 4 KiB + range) + 3 pipelined): all byte-exact")
EOF
    expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "$what: still answering"
    petrel_stop
done
