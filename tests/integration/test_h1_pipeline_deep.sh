#!/usr/bin/env bash
# Deep pipelining (RFC 9112 §9.3.2: a server MUST send its responses to
# pipelined requests in the order the requests were received; every one of
# them is answered): 10,000 GETs of a cached static file written back to
# back on one connection, by a client that reads all the while, get 10,000
# responses, whatever the response size -- 1 KiB and 16 KiB (cached in
# memory) and 200 KiB (sent from a cached descriptor).  The output budget
# pauses the parsing of buffered requests while the client reads; the
# written output must resume it (a lost wake-up left the connection silent
# until the head timeout).
. "$(dirname "$0")/lib.sh"

W=$LIB_TMP/www
mkdir -p "$W"
head -c 1024 /dev/zero | tr '\0' 'a' >"$W/1k.txt"
head -c 16384 /dev/zero | tr '\0' 'b' >"$W/16k.txt"
head -c 204800 /dev/zero | tr '\0' 'c' >"$W/200k.txt"

# a long head timeout would hide nothing: a stall is seen by the client's
# own deadline, well before petrel's head timeout ends the connection
petrel_start --root "$W" --module hello --header-timeout 30

pyrun <<'EOF'
import socket
import threading
import time
from petrel_client import *


def pipeline(name, size, count, deadline, slow=0.0, recv=1 << 20, extra=""):
    req = ("GET /%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (name, extra)).encode()
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(bound(10))   # no byte for this long: a stall

    def writer():
        try:
            s.sendall(req * count)
        except OSError:
            pass

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    buf = bytearray()
    pos = 0
    got = 0
    t0 = time.monotonic()
    try:
        while got < count:
            if time.monotonic() - t0 > deadline:
                break
            # one response: head, then Content-Length bytes
            end = buf.find(b"\r\n\r\n", pos)
            if end >= 0:
                head = bytes(buf[pos:end]).decode("latin-1")
                check(head.startswith("HTTP/1.1 200 "),
                      "%s: response %d: %r" % (name, got + 1, head[:80]))
                cl = None
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        cl = int(v.strip())
                check(cl == size, "%s: response %d: Content-Length %r" % (name, got + 1, cl))
                if len(buf) - (end + 4) >= cl:
                    pos = end + 4 + cl
                    got += 1
                    if pos > (1 << 20):
                        del buf[:pos]
                        pos = 0
                    continue
            if slow:
                time.sleep(slow)   # a reader slower than petrel writes
            d = s.recv(recv)
            if not d:
                break
            buf += d
    except socket.timeout:
        pass
    s.close()
    check(got == count, "%s: %d of %d pipelined responses (then nothing for %.0f s)"
          % (name, got, count, bound(10)))
    ok("%s: %d pipelined responses of %d bytes in %.1f s"
       % (name, got, size, time.monotonic() - t0))


pipeline("1k.txt", 1024, 10000, bound(60))
pipeline("16k.txt", 16384, 10000, bound(60))
pipeline("200k.txt", 204800, 1000, bound(60))
# a slow reader, and requests with the headers of a browser: the read buffer
# fills with requests while the output waits for the reader
UA = ("User-Agent: Mozilla/5.0 (X11; Linux x86_64) probe/1.0\r\nAccept: */*\r\n"
      "Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.5\r\n")
pipeline("16k.txt", 16384, 3000, bound(60), slow=0.001, recv=65536, extra=UA)
pipeline("1k.txt", 1024, 10000, bound(60), slow=0.001, recv=65536, extra=UA)
# the connection's server side is fine afterwards: a new one is served
check_hello()
EOF

petrel_stop
