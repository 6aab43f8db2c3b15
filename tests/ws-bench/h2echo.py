#!/usr/bin/python3
"""h2echo.py -- WebSocket echo round trips over HTTP/2 (RFC 8441) or
HTTP/1.1, with the same client for both: python3-wsproto frames the
messages, python3-h2 carries them over h2c (Extended CONNECT, one stream
per WebSocket, all on one connection) or the socket carries them after an
HTTP/1.1 Upgrade (one connection per WebSocket).  Each WebSocket has one
message in flight; the messages go round-robin over the WebSockets.  Every
echo is checked.

    h2echo.py h2|h1 PORT [-c WEBSOCKETS] [-n MESSAGES] [-s SIZE] [--path /ws]

For instructions per message (fanout.sh h2): the server runs under callgrind
and this client twice with different -n; the difference cancels set-up.
"""
import argparse
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from wsproto import ConnectionType, WSConnection  # noqa: E402
from wsproto.events import AcceptConnection, Message, Request  # noqa: E402


def h1_open(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ws = WSConnection(ConnectionType.CLIENT)
    s.sendall(ws.send(Request(host="127.0.0.1", target=path)))
    while True:
        ws.receive_data(s.recv(65536))
        for ev in ws.events():
            if isinstance(ev, AcceptConnection):
                return s, ws
            raise SystemExit("handshake refused: %r" % ev)


def h1_echo(s, ws, msg):
    s.sendall(ws.send(Message(data=msg)))
    parts = []
    while True:
        ws.receive_data(s.recv(65536))
        for ev in ws.events():
            if isinstance(ev, Message):
                parts.append(ev.data)
                if ev.message_finished:
                    return b"".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["h1", "h2"])
    ap.add_argument("port", type=int)
    ap.add_argument("-c", type=int, default=10)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("-s", type=int, default=100)
    ap.add_argument("--path", default="/ws")
    a = ap.parse_args()
    msg = os.urandom(a.s)
    if a.mode == "h1":
        conns = [h1_open(a.port, a.path) for _ in range(a.c)]
        for i in range(a.n):
            s, ws = conns[i % a.c]
            if h1_echo(s, ws, msg) != msg:
                raise SystemExit("echo %d differs" % i)
        for s, _ in conns:
            s.close()
    else:
        from ws_h2_client import H2
        c = H2(a.port)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wss = [c.websocket(a.path) for _ in range(a.c)]
        for w in wss:
            if w.status != 200:
                raise SystemExit("Extended CONNECT answered %r" % w.status)
        for i in range(a.n):
            w = wss[i % a.c]
            w.send(msg)
            c.pump_until(lambda: w.messages)
            if w.messages.pop() != (True, msg):
                raise SystemExit("echo %d differs" % i)
        c.close()
    print("%s: %d echoes of %d bytes on %d WebSockets" % (a.mode, a.n, a.s, a.c))


main()
