"""ws_h2_client.py -- WebSocket over HTTP/2 (RFC 8441) from independent
libraries: python3-h2 for the connection and Extended CONNECT, python3-wsproto
for the WebSocket frames (wsproto.Connection without its HTTP/1.1
handshake).

    c = H2(port)                     an h2c connection (prior knowledge)
    ws = c.websocket("/ws", deflate=True)   Extended CONNECT; .status, .headers
    ws.send("text") / ws.send(b"bin"); c.pump_until(lambda: ws.messages)
    ws.close(1000); ...

Everything runs on one blocking socket; pump() reads what comes and feeds
the streams.  Used by test_ws_h2.sh and tests/ws-bench/h2echo.py.
"""
import socket

import h2.config
import h2.connection
import h2.events
import h2.settings
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping
from wsproto.extensions import PerMessageDeflate


class WS:
    def __init__(self, conn, sid):
        self.c, self.sid = conn, sid
        self.status, self.headers = None, {}
        self.ws = None
        self.messages = []   # (binary, payload) whole messages
        self.closed = None   # the peer's Close: (code, reason)
        self.ended = False   # the peer's END_STREAM
        self.reset = None    # RST_STREAM error code
        self.parts = {}

    def _start(self, deflate):
        ext = []
        offer = self.headers.get("sec-websocket-extensions")
        if deflate and offer:
            pmd = PerMessageDeflate()
            pmd.finalize(offer)
            ext = [pmd]
        self.ws = Connection(ConnectionType.CLIENT, extensions=ext)

    def _data(self, data):
        self.ws.receive_data(data)
        for ev in self.ws.events():
            if isinstance(ev, Message):
                key = isinstance(ev, BytesMessage)
                self.parts.setdefault(key, []).append(ev.data)
                if ev.message_finished:
                    parts = self.parts.pop(key)
                    self.messages.append((key, (b"" if key else "").join(parts)))
            elif isinstance(ev, CloseConnection):
                self.closed = (ev.code, ev.reason)
                if self.ws.state.name != "CLOSED":
                    self.c.send_data(self.sid, self.ws.send(ev.response()))
            elif isinstance(ev, Ping):
                self.c.send_data(self.sid, self.ws.send(ev.response()))

    def send(self, msg):
        self.c.send_data(self.sid, self.ws.send(Message(data=msg)))

    def send_raw(self, data, end=False):
        self.c.send_data(self.sid, data, end)

    def close(self, code=1000, reason=""):
        self.c.send_data(self.sid, self.ws.send(CloseConnection(code=code, reason=reason)))

    def end(self):
        self.c.send_data(self.sid, b"", True)


class H2:
    def __init__(self, port, host="127.0.0.1", window=None, settings=None, timeout=10):
        self.sock = socket.create_connection((host, port))
        self.sock.settimeout(timeout)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=False)
        self.h = h2.connection.H2Connection(cfg)
        self.h.initiate_connection()
        if settings:
            self.h.update_settings(settings)
        self.streams = {}   # sid -> WS or a plain response dict
        self.server_settings = {}
        self.goaway = None
        self.stalled = set()  # streams whose DATA is not acknowledged (stall())
        self.unacked = {}
        self.flush()
        self.pump_until(lambda: self.server_settings)

    def flush(self):
        d = self.h.data_to_send()
        if d:
            self.sock.sendall(d)

    def send_data(self, sid, data, end=False):
        # split to the peer's window and frame size (whatever the frames'
        # boundaries: RFC 8441 §5 frames are independent of DATA frames)
        while True:
            room = min(self.h.local_flow_control_window(sid), self.h.max_outbound_frame_size)
            if len(data) <= room:
                self.h.send_data(sid, data, end_stream=end)
                break
            if room > 0:
                self.h.send_data(sid, data[:room])
                data = data[room:]
                continue
            self.flush()
            self.pump()  # wait for WINDOW_UPDATE
        self.flush()

    def websocket(self, path, deflate=False, extra=(), protocol="websocket", wait=True):
        sid = self.h.get_next_available_stream_id()
        hdrs = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "http"),
                (":path", path), (":authority", "127.0.0.1"),
                ("sec-websocket-version", "13")]
        if deflate:
            hdrs.append(("sec-websocket-extensions",
                         "permessage-deflate; client_max_window_bits"))
        hdrs += list(extra)
        ws = WS(self, sid)
        ws.deflate = deflate
        self.streams[sid] = ws
        self.h.send_headers(sid, hdrs)
        self.flush()
        if wait:
            self.pump_until(lambda: ws.status is not None or ws.reset is not None)
        return ws

    def get(self, path):
        sid = self.h.get_next_available_stream_id()
        r = {"status": None, "body": b"", "done": False, "reset": None}
        self.streams[sid] = r
        self.h.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":path", path),
                                  (":authority", "127.0.0.1")], end_stream=True)
        self.flush()
        return r

    def pump(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("connection closed")
        for ev in self.h.receive_data(data):
            self.event(ev)
        self.flush()

    def event(self, ev):
        s = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            self.server_settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
        elif isinstance(ev, h2.events.ResponseReceived):
            hd = dict(ev.headers)
            if isinstance(s, WS):
                s.status, s.headers = int(hd[":status"]), hd
                if s.status == 200:
                    s._start(s.deflate)
            else:
                s["status"], s["headers"] = int(hd[":status"]), hd
        elif isinstance(ev, h2.events.DataReceived):
            if ev.stream_id in self.stalled:
                self.unacked[ev.stream_id] = self.unacked.get(ev.stream_id, 0) + \
                    ev.flow_controlled_length  # this stream's reader is stalled
            else:
                self.h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if isinstance(s, WS):
                if s.ws is not None and ev.data:
                    s._data(ev.data)
            elif s is not None:
                s["body"] += ev.data
        elif isinstance(ev, h2.events.StreamEnded):
            if isinstance(s, WS):
                s.ended = True
            elif s is not None:
                s["done"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if isinstance(s, WS):
                s.reset = ev.error_code
            elif s is not None:
                s["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev

    def stall(self, sid):
        """Stop opening this stream's window (its reader stalls); the
        connection's window stays wide open for the others."""
        self.stalled.add(sid)
        self.h.increment_flow_control_window(64 << 20)
        self.flush()

    def unstall(self, sid):
        self.stalled.discard(sid)
        n = self.unacked.pop(sid, 0)
        if n:
            self.h.increment_flow_control_window(n, stream_id=sid)
        self.flush()

    def send_some(self, sid, data):
        """Send what the windows take of `data` without waiting; returns
        the rest."""
        while data:
            room = min(self.h.local_flow_control_window(sid), self.h.max_outbound_frame_size)
            if room <= 0:
                break
            self.h.send_data(sid, data[:room])
            data = data[room:]
        self.flush()
        return data

    def pump_until(self, cond, limit=100000):
        for _ in range(limit):
            if cond():
                return
            self.pump()
        raise TimeoutError("condition not reached")

    def close(self):
        self.sock.close()
