#!/usr/bin/env python3
"""An HTTP/1.1 upstream for the reverse-proxy tests, on raw sockets (stdlib
only), that records exactly the bytes of every request it receives.

    proxy_upstream.py PORTFILE RECORDDIR

Listens on 127.0.0.1 (a port of the kernel's choice, written to PORTFILE)
and answers by the last segment of the path (the prefix before it is
whatever the proxy kept):

  .../rec          200, the request's bytes as received in the body, and
                   hop-by-hop fields in the response (Connection: X-Up-Hop,
                   X-Up-Hop, Keep-Alive, Proxy-Connection, Upgrade), a Via
  .../big?n=N      200, N bytes (Content-Length), written as fast as taken
  .../chunked      200, chunked, with a trailer X-Up-Trailer: done
  .../cut          Content-Length 1000000, 100000 bytes sent, then closed
  .../cutchunked   chunked, two chunks, then closed without the last
  .../headcut      half a response head, then closed
  .../garbage      a line that is not a status line
  .../twocl        two different Content-Length fields
  .../clte         Content-Length and Transfer-Encoding: chunked
  .../slow?ms=N    the response after N ms
  .../nobody204    204;  .../nm304: 304
  anything else    200 "ok"

GET /__stats (straight to it, not through the proxy) answers
{"conns": C, "requests": R}: the TCP connections accepted and requests
read.  Each request's bytes are written to RECORDDIR/N (N from 1): what
went over the wire, head and body, framed as the request framed itself.
"""
import json
import os
import socket
import sys
import threading
import time

lock = threading.Lock()
stats = {"conns": 0, "requests": 0}


def read_request(sock, buf):
    """One request from sock: (raw bytes, head text, body) or None at EOF.
    The body is read by Content-Length or chunked coding."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
    end = buf.index(b"\r\n\r\n") + 4
    head = buf[:end].decode("latin-1")
    lines = head.split("\r\n")
    fields = [ln.split(":", 1) for ln in lines[1:] if ":" in ln]
    cl = [v.strip() for n, v in fields if n.strip().lower() == "content-length"]
    te = [v.strip() for n, v in fields if n.strip().lower() == "transfer-encoding"]
    body_start = end
    if te:
        # chunked: up to the last chunk and the (empty) trailer section
        pos = body_start
        while True:
            while b"\r\n" not in buf[pos:]:
                d = sock.recv(65536)
                if not d:
                    return None, b""
                buf += d
            eol = buf.index(b"\r\n", pos)
            size = int(buf[pos:eol].split(b";")[0], 16)
            pos = eol + 2
            if size == 0:
                while b"\r\n\r\n" not in buf[pos - 2:]:
                    d = sock.recv(65536)
                    if not d:
                        return None, b""
                    buf += d
                pos = buf.index(b"\r\n\r\n", pos - 2) + 4
                break
            while len(buf) < pos + size + 2:
                d = sock.recv(65536)
                if not d:
                    return None, b""
                buf += d
            pos += size + 2
        total = pos
    else:
        n = int(cl[0]) if cl else 0
        total = body_start + n
        while len(buf) < total:
            d = sock.recv(65536)
            if not d:
                return None, b""
            buf += d
    raw = buf[:total]
    return (raw, lines[0], buf[body_start:total]), buf[total:]


def respond(sock, reqline, raw, recdir, n):
    method, target = reqline.split(" ")[:2]
    path = target.split("?")[0]
    query = target.partition("?")[2]
    q = dict(kv.partition("=")[::2] for kv in query.split("&") if kv)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    head_only = method == "HEAD"

    def send(status, fields, body=b""):
        h = "HTTP/1.1 %s\r\n" % status
        h += "".join("%s: %s\r\n" % f for f in fields)
        sock.sendall(h.encode("latin-1") + b"\r\n" + (b"" if head_only else body))

    if last == "rec":
        send("200 OK", [("Content-Type", "application/octet-stream"),
                        ("Content-Length", str(len(raw))),
                        ("Connection", "X-Up-Hop"), ("X-Up-Hop", "secret"),
                        ("Keep-Alive", "timeout=5"), ("Proxy-Connection", "keep-alive"),
                        ("Upgrade", "foo/1"), ("Via", "1.1 upstream"),
                        ("X-Up", "1")], raw)
    elif last == "big":
        size = int(q.get("n", "0"))
        send("200 OK", [("Content-Type", "application/octet-stream"),
                        ("Content-Length", str(size))])
        if not head_only:
            block = b"x" * 65536
            left = size
            while left > 0:
                k = min(left, len(block))
                sock.sendall(block[:k])
                left -= k
    elif last == "chunked":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\nTrailer: X-Up-Trailer\r\n\r\n"
                     b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Up-Trailer: done\r\n\r\n")
    elif last == "cut":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: 1000000\r\n\r\n" + b"c" * 100000)
        time.sleep(0.2)
        return False
    elif last == "cutchunked":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n")
        time.sleep(0.2)
        return False
    elif last == "headcut":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Ty")
        return False
    elif last == "garbage":
        sock.sendall(b"this is not HTTP\r\n\r\n")
        return False
    elif last == "twocl":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
        return False
    elif last == "clte":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        return False
    elif last == "slow":
        time.sleep(int(q.get("ms", "1000")) / 1000)
        send("200 OK", [("Content-Length", "4")], b"slow")
    elif last == "nobody204":
        send("204 No Content", [("X-Up", "1")])
    elif last == "nm304":
        send("304 Not Modified", [("ETag", '"v1"'), ("X-Up", "1")])
    else:
        send("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3"),
                        ("X-Up", "1")], b"ok\n")
    return True


def serve(sock, recdir):
    buf = b""
    try:
        while True:
            r, buf = read_request(sock, buf)
            if r is None:
                return
            raw, reqline, _ = r
            if reqline.startswith("GET /__stats "):
                with lock:
                    body = json.dumps(stats).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                continue
            with lock:
                stats["requests"] += 1
                n = stats["requests"]
            with open(os.path.join(recdir, str(n)), "wb") as f:
                f.write(raw)
            if not respond(sock, reqline, raw, recdir, n):
                return
    except (ConnectionError, OSError, ValueError):
        pass
    finally:
        sock.close()


def main():
    portfile, recdir = sys.argv[1:3]
    os.makedirs(recdir, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    with open(portfile + ".t", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".t", portfile)
    while True:
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            stats["conns"] += 1
        threading.Thread(target=serve, args=(s, recdir), daemon=True).start()


main()
