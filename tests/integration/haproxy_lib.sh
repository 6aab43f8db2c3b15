# haproxy_lib.sh -- HAProxy in front of petrel, for test_haproxy*.sh (sourced
# after lib.sh): examples/haproxy/haproxy.cfg adapted to the test's ports,
# HAProxy started in the foreground (killed with the test), its runtime API
# for Python.
#
#   haproxy_setup            skip (77) without haproxy; set HAPROXY and the
#                            free ports F (HTTP frontend), S (TLS frontend),
#                            A AA B BA (the instances' ports and admin ports)
#   haproxy_start [PEM]      write $LIB_TMP/haproxy.cfg from the example --
#                            with the TLS frontend on S when PEM is given,
#                            without it otherwise -- check it, start HAProxy
#   Python (pyrun): `from hap import status, wait_status` -- a server's
#   status ("UP", "DOWN", ...) in a backend; wait_status(server, want)
#   waits until it has it in both backends (petrel, petrel_h2).

haproxy_setup() {
    HAPROXY=$(sbin_cmd haproxy)
    [[ -n $HAPROXY ]] || skip "no haproxy (apt-get install haproxy)"
    F=$(free_port)
    S=$(free_port)
    A=$(free_port)
    AA=$(free_port)
    B=$(free_port)
    BA=$(free_port)
    T=$LIB_TMP
    export F S A AA B BA T
}

haproxy_start() {
    local pem=${1:-} tls
    if [[ -n $pem ]]; then
        tls="s|^    bind :443 ssl crt /etc/haproxy/certs/site.pem |    bind 127.0.0.1:$S ssl crt $pem |"
    else
        tls='/^    bind :443 /d'
    fi
    sed -e "s|^    bind :80\$|    bind 127.0.0.1:$F|" -e "$tls" \
        -e "s|127.0.0.1:8081|127.0.0.1:$A|g" -e "s|port 9091|port $AA|g" \
        -e "s|127.0.0.1:8082|127.0.0.1:$B|g" -e "s|port 9092|port $BA|g" \
        -e "s|/run/haproxy/admin.sock|$T/haproxy.sock|" -e "s|maxconn 20000|maxconn 2000|" \
        "$top_srcdir/examples/haproxy/haproxy.cfg" >"$T/haproxy.cfg"
    if [[ -n $pem ]]; then
        grep -q "bind 127.0.0.1:$S ssl crt $pem alpn h2,http/1.1" "$T/haproxy.cfg" ||
            fail "examples/haproxy/haproxy.cfg has no TLS frontend with ALPN h2 to adapt"
    fi
    "$HAPROXY" -c -f "$T/haproxy.cfg" >"$T/haproxy-check.out" 2>&1 ||
        fail "haproxy -c: $(cat "$T/haproxy-check.out")"
    "$HAPROXY" -db -f "$T/haproxy.cfg" >"$T/haproxy.out" 2>&1 &
    LIB_BG+=($!)
    wait_port "$F"
}

cat >"$LIB_TMP/py/hap.py" <<'PYEOF'
"""HAProxy's runtime API (the stats socket of haproxy_lib.sh)."""
import os, socket, time
from petrel_client import check, bound, recv_all

def stat():
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(os.environ["T"], "haproxy.sock"))
    s.sendall(b"show stat\n")
    d = recv_all(s)
    s.close()
    lines = d.decode().splitlines()
    head = lines[0].lstrip("# ").split(",")
    return [dict(zip(head, l.split(","))) for l in lines[1:] if l]

def status(backend, server):
    for r in stat():
        if r["pxname"] == backend and r["svname"] == server:
            return r["status"]
    return None

def wait_status(server, want, secs=20):
    """Wait until `server` is `want` in both backends; the seconds it took."""
    t0 = time.monotonic()
    while True:
        st = [status(b, server) for b in ("petrel", "petrel_h2")]
        if all(s == want for s in st):
            return time.monotonic() - t0
        check(time.monotonic() - t0 < bound(secs), "%s: %r, want %s" % (server, st, want))
        time.sleep(0.05)
PYEOF
