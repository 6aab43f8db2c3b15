#!/usr/bin/env python3
"""upstream_peer.py -- a controllable HTTP/1.1 upstream for test_upstream.sh.

usage: upstream_peer.py PORTFILE [CONTROL_DIR [UNIX_SOCKET]]

Listens on 127.0.0.1 (a port the kernel chooses, written to PORTFILE), or
on UNIX_SOCKET when given (PORTFILE then gets 0), and
answers by the request's path:
  /ok            200, X-Test: ok, "hello" (kept alive)
  /hang          never answers
  /close-head    part of a status line, then closes
  /close-body    Content-Length 100, 10 bytes, then closes
  /garbage       not HTTP
  /cl-te         Content-Length and Transfer-Encoding: chunked
  /two-cl        two different Content-Lengths
  /bad-chunk     a chunk size that is not hex
  /chunked       a chunked body with the trailer X-Trailer: yes
  /interim       100 Continue and 103 Early Hints, then 200
  /close         200 with Connection: close, then closes
  /http10        HTTP/1.0 200 without keep-alive (the connection stays open)
  /nolen         200 with no Content-Length: the body ends with the close
  /drop          closes without answering (POST and GET are counted)
  /idle-close    200, kept alive, and the connection closed 100 ms later
  /sink          reads the body as it comes (Content-Length or chunked) and
                 answers 200 "len N md5 HEX" of it (kept alive); a body cut
                 by the close is counted in cuts
  /sink-slow     /sink reading slowly (64 KiB, then 2 ms of sleep)
  /early413      413 at once, before reading the body; then reads and drops
                 the body (kept alive, as a server that answered early does)
  /drop-body     reads 1000 bytes of the body, then closes without answering
                 (counted in drops)
  /stats         "conns N requests M drops D cuts C" of this process
  /host          200 with the request's Host field as its body
With CONTROL_DIR/noaccept present at start, it listens with a backlog of 0
and never accepts: one connection completes, the handshakes of the others
never do (connect timeouts).
With CONTROL_DIR/rst present, every connection is accepted and reset at once
(counted in conns): an upstream that is down but reachable.
"""
import hashlib
import os
import socket
import struct
import sys
import threading
import time

lock = threading.Lock()
stats = {"conns": 0, "requests": 0, "drops": 0, "cuts": 0}
STREAMED = ("/sink", "/early413", "/drop-body")


def count(k):
    with lock:
        stats[k] += 1


def resp(body, status="200 OK", extra=""):
    return ("HTTP/1.1 %s\r\nContent-Length: %d\r\nX-Test: ok\r\n%s\r\n" %
            (status, len(body), extra)).encode() + body


def read_request(f):
    line = f.readline()
    if not line:
        return None
    head = []
    while True:
        h = f.readline()
        if not h or h in (b"\r\n", b"\n"):
            break
        head.append(h)
    n = 0
    host = ""
    chunked = False
    for h in head:
        k, _, v = h.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            n = int(v.strip())
        if k.strip().lower() == "host":
            host = v.strip()
        if k.strip().lower() == "transfer-encoding" and "chunked" in v.lower():
            chunked = True
    parts = line.decode("latin-1").split()
    if parts[1].startswith(STREAMED):  # the body is read by the handler
        return parts[0], parts[1], (n, chunked), host
    body = f.read(n) if n else b""
    return parts[0], parts[1], body, host


def body_parts(f, framing, slow=False, limit=None):
    """The body's bytes as they come; raises EOFError when it is cut."""
    n, chunked = framing
    got = 0

    def read(k):
        b = f.read1(min(k, 65536)) if hasattr(f, "read1") else f.read(min(k, 65536))
        if not b:
            raise EOFError
        if slow:
            time.sleep(0.002)
        return b

    if not chunked:
        while got < n and (limit is None or got < limit):
            b = read(n - got)
            got += len(b)
            yield b
        return
    while True:
        line = f.readline()
        if not line.endswith(b"\n"):
            raise EOFError
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:  # trailers, then the empty line
                t = f.readline()
                if not t.endswith(b"\n"):
                    raise EOFError
                if t in (b"\r\n", b"\n"):
                    return
        while size > 0:
            b = read(size)
            size -= len(b)
            got += len(b)
            yield b
            if limit is not None and got >= limit:
                return
        if f.read(2) != b"\r\n":
            raise EOFError


def serve(conn, control):
    count("conns")
    if control and os.path.exists(os.path.join(control, "rst")):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        return
    f = conn.makefile("rb")
    try:
        while True:
            r = read_request(f)
            if r is None:
                return
            method, path, body, host = r
            count("requests")
            if path.startswith("/ok"):
                conn.sendall(resp(b"hello"))
            elif path.startswith("/empty"):
                conn.sendall(resp(b""))
            elif path.startswith("/echo"):
                conn.sendall(resp(method.encode() + b" " + body))
            elif path.startswith("/hang"):
                time.sleep(30)
                return
            elif path.startswith("/close-head"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
                return
            elif path.startswith("/close-body"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Test: ok\r\nContent-Length: 100\r\n\r\n0123456789")
                time.sleep(0.05)
                return
            elif path.startswith("/garbage"):
                conn.sendall(b"GARBAGE GARBAGE\r\n\r\n")
                return
            elif path.startswith("/cl-te"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            elif path.startswith("/two-cl"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
            elif path.startswith("/bad-chunk"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
            elif path.startswith("/chunked"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Test: chunky\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"3\r\nhel\r\n2\r\nlo\r\n0\r\nX-Trailer: yes\r\n\r\n")
            elif path.startswith("/interim"):
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
                conn.sendall(resp(b"after interim"))
            elif path.startswith("/close"):
                conn.sendall(resp(b"bye", extra="Connection: close\r\n"))
                return
            elif path.startswith("/http10"):
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nX-Test: old\r\n\r\nok")
            elif path.startswith("/nolen"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Test: nolen\r\nConnection: close\r\n\r\nto the end")
                return
            elif path.startswith("/drop"):
                count("drops")
                return
            elif path.startswith("/idle-close"):
                conn.sendall(resp(b"soon closed"))
                time.sleep(0.1)
                return
            elif path.startswith("/host"):
                conn.sendall(resp(host.encode()))
            elif path.startswith("/sink"):
                h = hashlib.md5()
                total = 0
                try:
                    for b in body_parts(f, body, slow=path.startswith("/sink-slow")):
                        h.update(b)
                        total += len(b)
                except (EOFError, ValueError):
                    count("cuts")
                    return
                conn.sendall(resp(("len %d md5 %s" % (total, h.hexdigest())).encode()))
            elif path.startswith("/early413"):
                conn.sendall(resp(b"too big", status="413 Content Too Large"))
                try:
                    for _ in body_parts(f, body):
                        pass
                except (EOFError, ValueError):
                    count("cuts")
                    return
            elif path.startswith("/drop-body"):
                try:
                    for _ in body_parts(f, body, limit=1000):
                        pass
                except (EOFError, ValueError):
                    pass
                count("drops")
                return
            elif path.startswith("/stats"):
                with lock:
                    s = "conns %d requests %d drops %d cuts %d" % (stats["conns"], stats["requests"], stats["drops"], stats["cuts"])
                conn.sendall(resp(s.encode(), extra="Connection: close\r\n"))
                return
            else:
                conn.sendall(resp(b"no such path", status="404 Not Found"))
    except OSError:
        pass
    finally:
        try:
            f.close()
            conn.close()
        except OSError:
            pass


def main():
    portfile = sys.argv[1]
    control = sys.argv[2] if len(sys.argv) > 2 else None
    if len(sys.argv) > 3:
        ls = socket.socket(socket.AF_UNIX)
        ls.bind(sys.argv[3])
        port = 0
    else:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        port = ls.getsockname()[1]
    noaccept = control and os.path.exists(os.path.join(control, "noaccept"))
    ls.listen(0 if noaccept else 128)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(portfile + ".tmp", portfile)
    if noaccept:
        while True:
            time.sleep(60)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, control), daemon=True).start()


if __name__ == "__main__":
    main()
