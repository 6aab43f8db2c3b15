#!/usr/bin/env python3
"""upstream_h2_peer.py -- a controllable h2c upstream (HTTP/2 with prior
knowledge, on the h2 library) for test_upstream_h2c.sh.

usage: upstream_h2_peer.py PORTFILE [UNIX_SOCKET]

Listens on 127.0.0.1 (a port the kernel chooses, written to PORTFILE), or
on UNIX_SOCKET when given (PORTFILE then gets 0), and answers by the
request's :path:
  /ok             200, x-test: ok, "hello"
  /trailers       200, "hello", then the trailer x-trailer: yes
  /echo           200 with the request's body (after its END_STREAM)
  /hang           never answers (the stream stays open)
  /slow           200 "slow" 300 ms later
  /goaway-once    the first time: GOAWAY with a last stream id below this
                  stream (it was not processed), then the connection is
                  closed; after: 200 "hello"
  /refuse-once    the first time: RST_STREAM REFUSED_STREAM; after: 200
  /reset          RST_STREAM INTERNAL_ERROR after the header (a cut body)
  /conn-field     200 with a Connection field (malformed, RFC 9113 §8.2.2)
  /headers        200 with the request's fields, one "name: value" a line
  /sink           200 "len N md5 HEX" of the request's body (after its
                  END_STREAM; the body is hashed as it comes, not kept)
  /early413       413 "too big" with END_STREAM as soon as the request's
                  HEADERS came, before its body
  /stats          "conns N streams S resets R maxopen M" of this process
                  (resets: RST_STREAM received; maxopen: most streams open
                  at once on one connection)
With H2PEER_WINDOW=N in its environment it announces an initial stream
window of N bytes (SETTINGS_INITIAL_WINDOW_SIZE): a request body goes in
steps of N, each waiting for a WINDOW_UPDATE.
"""
import hashlib
import os
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

lock = threading.Lock()
stats = {"conns": 0, "streams": 0, "resets": 0, "maxopen": 0}
once = set()


def first(name):
    with lock:
        if name in once:
            return False
        once.add(name)
        return True


def serve(sock):
    with lock:
        stats["conns"] += 1
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                 header_encoding="utf-8",
                                                                 validate_outbound_headers=False,
                                                                 normalize_outbound_headers=False))
    conn.initiate_connection()
    window = int(os.environ.get("H2PEER_WINDOW", "0"))
    if window:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    sock.sendall(conn.data_to_send())
    reqs = {}  # stream id -> [path, body]
    later = []  # (when, stream id)
    open_ = set()
    closing = False
    pending = {}  # stream id -> [body left, trailers]: sent as the windows allow

    def pump():
        for sid in list(pending):
            left, trailers = pending[sid]
            while left:
                n = min(len(left), conn.local_flow_control_window(sid),
                        conn.max_outbound_frame_size)
                if n <= 0:
                    break
                conn.send_data(sid, left[:n])
                left = left[n:]
            pending[sid][0] = left
            if not left:
                del pending[sid]
                if trailers:
                    conn.send_headers(sid, trailers, end_stream=True)
                else:
                    conn.end_stream(sid)

    def answer(sid, body, status="200", extra=(), trailers=None):
        if sid not in open_:
            return
        conn.send_headers(sid, [(":status", status), ("x-test", "ok")] + list(extra))
        pending[sid] = [body, trailers]
        open_.discard(sid)
        pump()

    sock.settimeout(0.05)
    try:
        while True:
            now = time.time()
            for w in [x for x in later if x[0] <= now]:
                later.remove(w)
                answer(w[1], b"slow")
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            if closing:
                time.sleep(0.1)
                return
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    h = dict(ev.headers)
                    reqs[ev.stream_id] = [h.get(":path", ""), b""]
                    if h.get(":path") == "/headers":
                        reqs[ev.stream_id][1] = "".join(
                            "%s: %s\n" % (k, v) for k, v in ev.headers).encode()
                    if h.get(":path", "").startswith("/sink"):
                        reqs[ev.stream_id] = ["/sink", 0, hashlib.md5()]
                    open_.add(ev.stream_id)
                    if h.get(":path", "").startswith("/early413"):
                        answer(ev.stream_id, b"too big", status="413")
                    with lock:
                        stats["streams"] += 1
                        stats["maxopen"] = max(stats["maxopen"], len(open_))
                elif isinstance(ev, h2.events.DataReceived):
                    if reqs[ev.stream_id][0] == "/sink":
                        reqs[ev.stream_id][1] += len(ev.data)
                        reqs[ev.stream_id][2].update(ev.data)
                    else:
                        reqs[ev.stream_id][1] += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.WindowUpdated):
                    pump()
                elif isinstance(ev, h2.events.StreamReset):
                    open_.discard(ev.stream_id)
                    pending.pop(ev.stream_id, None)
                    with lock:
                        stats["resets"] += 1
                elif isinstance(ev, h2.events.StreamEnded):
                    sid = ev.stream_id
                    path, body = reqs[sid][:2]
                    if path == "/sink":
                        answer(sid, ("len %d md5 %s" % (body, reqs[sid][2].hexdigest())).encode())
                    elif path == "/ok":
                        answer(sid, b"hello")
                    elif path == "/trailers":
                        answer(sid, b"hello", trailers=[("x-trailer", "yes")])
                    elif path in ("/echo", "/headers"):
                        answer(sid, body)
                    elif path == "/slow":
                        later.append((time.time() + 0.3, sid))
                    elif path == "/goaway-once" and first("goaway"):
                        conn.close_connection(last_stream_id=sid - 2 if sid > 2 else 0)
                        closing = True
                    elif path == "/refuse-once" and first("refuse"):
                        conn.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
                        open_.discard(sid)
                    elif path == "/reset":
                        conn.send_headers(sid, [(":status", "200")])
                        conn.send_data(sid, b"part")
                        conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                        open_.discard(sid)
                    elif path == "/conn-field":
                        answer(sid, b"bad", extra=[("connection", "close")])
                    elif path == "/stats":
                        with lock:
                            s = "conns %(conns)d streams %(streams)d resets %(resets)d " \
                                "maxopen %(maxopen)d\n" % stats
                        answer(sid, s.encode())
                    elif path in ("/goaway-once", "/refuse-once"):
                        answer(sid, b"hello")
                    # /hang: never
    except Exception:
        return
    finally:
        sock.close()


def main():
    portfile = sys.argv[1]
    if len(sys.argv) > 2:
        ls = socket.socket(socket.AF_UNIX)
        if os.path.exists(sys.argv[2]):
            os.unlink(sys.argv[2])
        ls.bind(sys.argv[2])
        port = 0
    else:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        port = ls.getsockname()[1]
    ls.listen(128)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(portfile + ".tmp", portfile)
    while True:
        s, _ = ls.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


if __name__ == "__main__":
    main()
