#!/usr/bin/env python3
"""An HTTP/1.1 upstream for the proxy's upload tests, on raw sockets
(stdlib only), that reads request bodies as they arrive and keeps none.

    upload_sink.py PORTFILE

Listens on 127.0.0.1 (a port of the kernel's choice, written to PORTFILE)
and answers by the last segment of the path:

  .../sink?rate=B  reads the body (Content-Length or chunked) at most B
                   bytes a second (default: as fast as it comes), then
                   answers 200 {"bytes": N, "sha256": H, "framing": "cl"
                   or "chunked", "declared": CL or -1}
  .../mute         reads the body like sink, then never answers (it
                   waits for the connection to close)
  .../early        answers 413 at once, without reading the body, and
                   closes the connection
GET /__stats (straight to it) answers {"conns": C, "requests": R, "cut": K}:
TCP connections accepted, requests whose head was read, requests whose
body ended before its framing said (the connection closed mid-body).
"""
import hashlib
import json
import socket
import sys
import threading
import time

lock = threading.Lock()
stats = {"conns": 0, "requests": 0, "cut": 0}


class Cut(Exception):
    pass


class Conn:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def more(self, limit=65536):
        d = self.sock.recv(limit)
        if not d:
            raise Cut()
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def take(self, n, rate, sha, t0, got):
        """n bytes of body into sha, at most `rate` bytes a second."""
        while n > 0:
            if not self.buf:
                self.more(min(65536, n) if rate else 65536)
            k = min(n, len(self.buf))
            sha.update(self.buf[:k])
            self.buf = self.buf[k:]
            n -= k
            got[0] += k
            if rate:
                ahead = got[0] / rate - (time.time() - t0)
                if ahead > 0:
                    time.sleep(ahead)


def serve(sock):
    c = Conn(sock)
    try:
        while True:
            while b"\r\n\r\n" not in c.buf:
                c.more()
            i = c.buf.index(b"\r\n\r\n")
            head, c.buf = c.buf[:i].decode("latin-1"), c.buf[i + 4:]
            lines = head.split("\r\n")
            method, target = lines[0].split(" ")[:2]
            fields = [ln.split(":", 1) for ln in lines[1:]]
            cl = [v.strip() for n, v in fields if n.strip().lower() == "content-length"]
            te = [v.strip() for n, v in fields if n.strip().lower() == "transfer-encoding"]
            if target == "/__stats":
                with lock:
                    b = json.dumps(stats).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
                continue
            with lock:
                stats["requests"] += 1
            path, _, query = target.partition("?")
            q = dict(kv.partition("=")[::2] for kv in query.split("&") if kv)
            last = path.rstrip("/").rsplit("/", 1)[-1]
            if last == "early":
                sock.sendall(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 6\r\n"
                             b"Connection: close\r\n\r\nearly\n")
                time.sleep(0.5)
                return
            rate = int(q.get("rate", "0"))
            sha, got, t0 = hashlib.sha256(), [0], time.time()
            try:
                if te:
                    framing = "chunked"
                    while True:
                        size = int(c.line().split(b";")[0], 16)
                        if size == 0:
                            while c.line():
                                pass
                            break
                        c.take(size, rate, sha, t0, got)
                        if c.line():
                            raise Cut()
                else:
                    framing = "cl"
                    c.take(int(cl[0]) if cl else 0, rate, sha, t0, got)
            except Cut:
                with lock:
                    stats["cut"] += 1
                return
            if last == "mute":
                while sock.recv(65536):
                    pass
                return
            b = json.dumps({"bytes": got[0], "sha256": sha.hexdigest(), "framing": framing,
                            "declared": int(cl[0]) if cl else -1}).encode()
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(b) + b)
    except (Cut, ConnectionError, OSError, ValueError):
        pass
    finally:
        sock.close()


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    with open(sys.argv[1] + ".t", "w") as f:
        f.write(str(ls.getsockname()[1]))
    import os
    os.rename(sys.argv[1] + ".t", sys.argv[1])
    while True:
        s, _ = ls.accept()
        with lock:
            stats["conns"] += 1
        threading.Thread(target=serve, args=(s,), daemon=True).start()


main()
