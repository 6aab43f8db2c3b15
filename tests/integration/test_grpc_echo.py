#!/usr/bin/python3
"""test_grpc_echo.py -- the grpcecho module against a real gRPC client
(python3-grpcio, C-core) over h2c, and curl for what a gRPC client never sends.

Checked (gRPC over HTTP/2: https://github.com/grpc/grpc/blob/master/doc/
PROTOCOL-HTTP2.md; status codes: doc/statuscodes.md; protobuf encoding:
https://protobuf.dev/programming-guides/encoding/):
  - the echo: request_id and payload back, payload_bytes = the payload's
    length in bytes, for empty, small, UTF-8 and large (multi-frame) payloads;
    unknown fields of the request are skipped;
  - errors: a message that is not protobuf, a payload that is not UTF-8 ->
    INVALID_ARGUMENT; another method of the service -> UNIMPLEMENTED; a gzip
    message (grpc-encoding not supported) -> UNIMPLEMENTED; a message over
    max_message -> RESOURCE_EXHAUSTED; and with curl: the compressed flag
    without grpc-encoding -> INTERNAL, two messages -> INTERNAL, a wrong
    content-type -> 415, GET -> 405, HTTP/1.1 -> 505 or (TE: trailers) a
    gRPC error in chunked trailers; grpc-message is percent-encoded;
  - 300 concurrent calls on one channel, each answered with its own
    request_id, over one connection (counted by a relay in front of petrel);
  - a new channel for each of 40 calls: 40 connections.
The server's access log must show every call, and petrel must stop cleanly.

Standalone: env PETREL (petrel binary); exit 0 pass, 1 fail, 77 skip.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
except ImportError:
    print("SKIP: python3-grpcio is not installed")
    sys.exit(77)

PETREL = os.environ.get("PETREL", "")
SCALE = 3 if os.environ.get("PETREL_SANITIZERS") == "yes" else 1
TIMEOUT = 10 * SCALE
METHOD = "/petrel.bench.Echo/Echo"

OK = grpc.StatusCode.OK
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


# --- protobuf, written by hand (independent of src/grpc/grpcwire.c) -------------


def varint(v):
    v &= (1 << 64) - 1  # negative int64/int32: two's complement, 10 bytes
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(n, v):
    return varint(n << 3 | 0) + varint(v) if v else b""


def field_bytes(n, b):
    return varint(n << 3 | 2) + varint(len(b)) + b if b else b""


def encode(request_id, payload, payload_bytes=0):
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return field_varint(1, request_id) + field_bytes(2, payload) + field_varint(3, payload_bytes)


def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def decode(b):
    """{'request_id', 'payload' (bytes), 'payload_bytes'}; strict: only the
    three fields, with their wire types, as the server writes them."""
    m = {"request_id": 0, "payload": b"", "payload_bytes": 0}
    i = 0
    while i < len(b):
        tag, i = read_varint(b, i)
        field, wt = tag >> 3, tag & 7
        if field == 1 and wt == 0:
            v, i = read_varint(b, i)
            m["request_id"] = v - (1 << 64) if v >= 1 << 63 else v
        elif field == 2 and wt == 2:
            n, i = read_varint(b, i)
            m["payload"] = bytes(b[i : i + n])
            check(len(m["payload"]) == n, "payload cut short in the response")
            i += n
        elif field == 3 and wt == 0:
            v, i = read_varint(b, i)
            v &= 0xFFFFFFFF
            m["payload_bytes"] = v - (1 << 32) if v >= 1 << 31 else v
        else:
            fail("unexpected field %d (wire type %d) in the response" % (field, wt))
    return m


# --- petrel -------------------------------------------------------------------


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Petrel:
    def __init__(self, tmp, *args):
        self.port = free_port()
        self.log = os.path.join(tmp, "access-%d.log" % self.port)
        self.err = open(os.path.join(tmp, "err-%d" % self.port), "w+")
        self.proc = subprocess.Popen(
            [PETREL, "--listen", "127.0.0.1:%d" % self.port, "--access-log", self.log] + list(args),
            stdout=subprocess.DEVNULL,
            stderr=self.err,
        )
        deadline = time.monotonic() + TIMEOUT
        while True:
            if self.proc.poll() is not None:
                fail("petrel exited at start: " + self.stderr())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    fail("petrel never opened its port")
                time.sleep(0.02)
        self.target = "127.0.0.1:%d" % self.port
        self.url = "http://" + self.target

    def stderr(self):
        self.err.seek(0)
        return self.err.read()[-3000:]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("petrel did not stop on SIGTERM")
        check(rc == 0, "petrel exited %d: %s" % (rc, self.stderr()))
        err = self.stderr()
        check("Sanitizer" not in err and "runtime error" not in err, "sanitizer: " + err)
        self.err.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def calls(self, path):
        with open(self.log) as f:
            return sum(1 for line in f if ('"POST %s ' % path) in line)


def channel(p, target=None):
    """A channel with a connection of its own: gRPC C-core may otherwise
    share a connection between the live channels of a process (its global
    subchannel pool)."""
    return grpc.insecure_channel(
        target or p.target, options=[("grpc.use_local_subchannel_pool", 1)]
    )


class CountingProxy:
    """A TCP relay in front of petrel that counts the connections it accepts:
    how many connections a client really opened (the kernel's TIME_WAIT list
    cannot tell, since loopback ports in TIME_WAIT are reused)."""

    def __init__(self, port):
        self.port = port
        self.accepted = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.target = "127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return  # closed
            with self.lock:
                self.accepted += 1
            u = socket.create_connection(("127.0.0.1", self.port))
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def count(self):
        with self.lock:
            return self.accepted

    def close(self):
        self.sock.close()


def stub(ch, method=METHOD):
    ident = lambda b: b  # the test does its own (de)serialization
    return ch.unary_unary(method, request_serializer=ident, response_deserializer=ident)


def call_code(fn, req, **kw):
    try:
        fn(req, timeout=TIMEOUT, **kw)
        return OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()


def curl(args):
    r = subprocess.run(
        ["curl", "-s", "-S", "-m", str(TIMEOUT), "-D", "-", "-o", "/dev/null"] + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    check(r.returncode == 0, "curl %s: %s" % (args, r.stderr.decode()))
    return r.stdout.decode("latin-1").lower()


# --- the tests ----------------------------------------------------------------


def test_echo(p):
    with channel(p) as ch:
        echo = stub(ch)
        cases = [
            (1, b""),
            (7, b"x"),
            (2**40 + 3, b"hello, petrel"),
            (-5, "h\u00e9llo \U0001f426".encode("utf-8")),  # UTF-8: bytes, not characters
            (123456, b"y" * 100000),  # several DATA frames each way
        ]
        for rid, payload in cases:
            raw = echo(encode(rid, payload, payload_bytes=999), timeout=TIMEOUT)
            m = decode(raw)
            check(m["request_id"] == rid, "request_id %r echoed as %r" % (rid, m["request_id"]))
            check(m["payload"] == payload, "payload of %d bytes not echoed" % len(payload))
            check(
                m["payload_bytes"] == len(payload),
                "payload_bytes %d, want %d" % (m["payload_bytes"], len(payload)),
            )
        # unknown fields (every wire type) are skipped, not echoed
        unknown = (
            varint(9 << 3 | 0) + varint(300)
            + varint(10 << 3 | 1) + bytes(8)
            + varint(11 << 3 | 2) + varint(3) + b"abc"
            + varint(12 << 3 | 5) + bytes(4)
        )
        m = decode(echo(unknown + encode(42, b"kept"), timeout=TIMEOUT))
        check(m == {"request_id": 42, "payload": b"kept", "payload_bytes": 4}, "unknown: %r" % m)
    return 6


def test_errors(p):
    with channel(p) as ch:
        echo = stub(ch)
        # a length-delimited field longer than the message
        code, details = call_code(echo, b"\x12\x05ab")
        check(code == INVALID_ARGUMENT, "truncated protobuf: %s %s" % (code, details))
        check("EchoMessage" in details, "grpc-message of INVALID_ARGUMENT: %r" % details)
        # wire type 7 does not exist
        code, _ = call_code(echo, b"\x0f\x00")
        check(code == INVALID_ARGUMENT, "wire type 7: %s" % code)
        # proto3 strings are UTF-8
        code, _ = call_code(echo, b"\x12\x02\xc3\x28")
        check(code == INVALID_ARGUMENT, "payload not UTF-8: %s" % code)
        # another method of the service: UNIMPLEMENTED (trailers-only)
        code, details = call_code(stub(ch, "/petrel.bench.Echo/Nope"), encode(1, b"x"))
        check(code == UNIMPLEMENTED, "unknown method: %s" % code)
        check("/petrel.bench.Echo/Nope" in details, "unknown method details: %r" % details)
        # a gzip message: that grpc-encoding is not supported
        code, _ = call_code(echo, encode(1, b"z" * 100), compression=grpc.Compression.Gzip)
        check(code == UNIMPLEMENTED, "grpc-encoding gzip: %s" % code)
        # the channel still works after all that
        m = decode(echo(encode(5, b"after"), timeout=TIMEOUT))
        check(m["request_id"] == 5, "echo after errors")
    return 5  # the calls of METHOD: all but the unknown method


def test_concurrent(p):
    n = 300
    proxy = CountingProxy(p.port)
    with channel(p, proxy.target) as ch:
        echo = stub(ch)
        futures = [echo.future(encode(i + 1, b"c" * (i % 50)), timeout=TIMEOUT) for i in range(n)]
        for i, f in enumerate(futures):
            m = decode(f.result())
            check(m["request_id"] == i + 1, "concurrent call %d got request_id %d" % (i + 1, m["request_id"]))
            check(m["payload_bytes"] == i % 50, "concurrent call %d payload_bytes" % (i + 1))
    proxy.close()
    got = proxy.count()
    check(got == 1, "%d concurrent calls on one channel took %d connections" % (n, got))
    return n


def test_channel_per_call(p):
    n = 40
    proxy = CountingProxy(p.port)
    for i in range(n):
        with channel(p, proxy.target) as ch:
            m = decode(stub(ch)(encode(1000 + i, b"p" * i), timeout=TIMEOUT))
            check(m["request_id"] == 1000 + i and m["payload_bytes"] == i, "channel %d: %r" % (i, m))
    proxy.close()
    got = proxy.count()
    check(got == n, "%d channels took %d connections" % (n, got))
    return n


def test_curl(p, tmp):
    """What a gRPC client library never sends, over h2c with prior knowledge."""
    if shutil.which("curl") is None:
        print("  (no curl: raw request checks skipped)")
        return 0
    url = p.url + METHOD

    def body(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return "@" + path

    msg = encode(7, b"ab")
    frame = b"\x00" + len(msg).to_bytes(4, "big") + msg
    h2 = ["--http2-prior-knowledge", "-H", "te: trailers"]
    grpc_ct = ["-H", "content-type: application/grpc"]
    # the plain echo, the response's head and trailers
    out = curl(h2 + grpc_ct + ["--data-binary", body("ok", frame), url])
    check(out.startswith("http/2 200") and "content-type: application/grpc" in out, out)
    check("grpc-status: 0" in out, "echo: no grpc-status 0 trailer: " + out)
    # application/grpc+proto is the same codec
    out = curl(h2 + ["-H", "content-type: application/grpc+proto", "--data-binary", body("ok", frame), url])
    check("grpc-status: 0" in out, "application/grpc+proto: " + out)
    # the compressed flag without a grpc-encoding: INTERNAL (13)
    out = curl(h2 + grpc_ct + ["--data-binary", body("c", b"\x01" + frame[1:]), url])
    check("grpc-status: 13" in out, "compressed flag: " + out)
    # two messages for a unary method: INTERNAL
    out = curl(h2 + grpc_ct + ["--data-binary", body("two", frame + frame), url])
    check("grpc-status: 13" in out, "two messages: " + out)
    # a message cut short: INTERNAL
    out = curl(h2 + grpc_ct + ["--data-binary", body("cut", frame[:-1]), url])
    check("grpc-status: 13" in out, "cut short: " + out)
    # not protobuf: INVALID_ARGUMENT, with a percent-encoded grpc-message
    bad = b"\x12\x01\xff"
    out = curl(h2 + grpc_ct + ["--data-binary", body("bad", b"\x00" + len(bad).to_bytes(4, "big") + bad), url])
    check("grpc-status: 3" in out and "grpc-message: invalid echomessage: payload is not valid utf-8" in out, out)
    # wrong content-type: HTTP 415 (PROTOCOL-HTTP2.md, "Content-Type")
    out = curl(h2 + ["-H", "content-type: application/json", "--data-binary", body("ok", frame), url])
    check(out.startswith("http/2 415"), "content-type json: " + out)
    # another codec of gRPC: UNIMPLEMENTED
    out = curl(h2 + ["-H", "content-type: application/grpc+json", "--data-binary", body("ok", frame), url])
    check("grpc-status: 12" in out, "application/grpc+json: " + out)
    # not POST: 405 with Allow (RFC 9110 §15.5.6)
    out = curl(["--http2-prior-knowledge", url])
    check(out.startswith("http/2 405") and "allow: post" in out, "GET: " + out)
    # HTTP/1.1: 505 (RFC 9110 §15.6.6), or with TE: trailers a gRPC error in
    # chunked trailers (RFC 9112 §7.1.2)
    out = curl(["--http1.1", "-H", "content-type: application/grpc", "--data-binary", body("ok", frame), url])
    check(out.startswith("http/1.1 505"), "HTTP/1.1: " + out)
    out = curl(["--http1.1", "-H", "te: trailers"] + grpc_ct + ["--data-binary", body("ok", frame), url])
    check(out.startswith("http/1.1 200") and "grpc-status: 13" in out, "HTTP/1.1 TE: trailers: " + out)
    return 10  # the POSTs of METHOD, whatever their answer


def test_limit(tmp):
    """max_message (module argument): a bigger message gets RESOURCE_EXHAUSTED."""
    p = Petrel(tmp, "--module", "grpcecho:max_message=1k")
    try:
        with channel(p) as ch:
            echo = stub(ch)
            ok = encode(1, b"a" * 1000)  # 1000 + 4 bytes: at most 1024
            check(len(ok) <= 1024, "test message size")
            m = decode(echo(ok, timeout=TIMEOUT))
            check(m["payload_bytes"] == 1000, "under the limit")
            code, details = call_code(echo, encode(1, b"a" * 1100))
            check(code == RESOURCE_EXHAUSTED, "over max_message: %s %s" % (code, details))
            check("1024" in details, "RESOURCE_EXHAUSTED details: %r" % details)
    finally:
        p.stop()
    # a bad argument stops petrel at start-up with a message
    r = subprocess.run(
        [PETREL, "--listen", "127.0.0.1:%d" % free_port(), "--module", "grpcecho:max_message=lots"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT,
    )
    check(r.returncode != 0 and b"max_message" in r.stderr, "bad argument: %r" % r.stderr)


def main():
    if not PETREL or not os.access(PETREL, os.X_OK):
        print("SKIP: PETREL not set or not executable")
        sys.exit(77)
    tmp = tempfile.mkdtemp()
    p = None
    try:
        p = Petrel(tmp, "--module", "grpcecho")
        calls = test_echo(p)
        calls += test_errors(p)
        calls += test_concurrent(p)
        calls += test_channel_per_call(p)
        calls += test_curl(p, tmp)
        p.stop()
        # every call reached the server once (the unknown method is another path)
        got = p.calls(METHOD)
        check(got == calls, "access log: %d calls of %s, want %d" % (got, METHOD, calls))
        p = None
        test_limit(tmp)
    finally:
        if p is not None:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS: test_grpc_echo")


if __name__ == "__main__":
    main()
