# SPDX-License-Identifier: MIT
"""One WebSocket as an asyncio Protocol, with the framing, masking and handshake of
python3-websockets' Sans-I/O connection (websockets.client.ClientConnection): frames reach the
client as they are parsed, in the event loop's own callback, and sends are plain writes. No
task, queue or future per frame: that is most of what a round trip costs in Python."""

import asyncio
import ipaddress
import re
import ssl as ssl_module

from websockets.client import ClientConnection
from websockets.frames import OP_BINARY, OP_CLOSE, OP_CONT, OP_TEXT
from websockets.http11 import Response
from websockets.uri import parse_uri


class WebSocketProtocol(asyncio.Protocol):
    """on_message(protocol, str | bytes) for each whole message (from the first, which may come
    with the handshake's answer); on_lost(exc) once, when the connection is gone (closed by
    either side or broken). check(transport): run once connected, before anything is sent; what
    it raises fails the connection (opened)."""

    def __init__(self, url, on_message, on_lost, check=None):
        self.conn = ClientConnection(parse_uri(url), max_size=None)
        self.on_message, self.on_lost = on_message, on_lost
        self._check = check
        self.transport = None
        self.opened = asyncio.get_running_loop().create_future()
        self._parts, self._opcode = [], None
        self._writable = None  # a future while the socket's buffer is full
        self._lost = False

    # ---- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        if self._check:
            try:
                self._check(transport)
            except Exception as e:
                self.opened.set_exception(e)
                transport.abort()
                return
        self.conn.send_request(self.conn.connect())
        self._flush()

    def data_received(self, data):
        self.conn.receive_data(data)
        for event in self.conn.events_received():
            if isinstance(event, Response):
                if not self.opened.done():
                    if self.conn.handshake_exc is not None:
                        self.opened.set_exception(self.conn.handshake_exc)
                    else:
                        self.opened.set_result(None)
                continue
            self._frame(event)
        self._flush()  # pongs, close replies

    def eof_received(self):
        self.conn.receive_eof()
        return False

    def connection_lost(self, exc):
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionResetError("the server closed the connection"))
        if self._writable and not self._writable.done():
            self._writable.set_result(None)
        if not self._lost:
            self._lost = True
            self.on_lost(exc)

    def pause_writing(self):
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self):
        if self._writable and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # ---- frames ----------------------------------------------------------------------------

    def _frame(self, frame):
        opcode = frame.opcode
        if opcode == OP_CLOSE:
            return
        if opcode in (OP_TEXT, OP_BINARY):
            if frame.fin:
                self.on_message(self, frame.data.decode() if opcode == OP_TEXT else frame.data)
                return
            self._opcode, self._parts = opcode, [frame.data]
            return
        if opcode == OP_CONT and self._opcode is not None:
            self._parts.append(frame.data)
            if frame.fin:
                data, opcode = b"".join(self._parts), self._opcode
                self._parts, self._opcode = [], None
                self.on_message(self, data.decode() if opcode == OP_TEXT else data)

    def _flush(self):
        data = self.conn.data_to_send()
        if data and self.transport and not self.transport.is_closing():
            self.transport.writelines(data)

    def send(self, *messages):
        """Send str (text) and bytes (binary) messages; False if the connection is gone."""
        if self._lost or self.transport is None or self.transport.is_closing():
            return False
        for m in messages:
            if isinstance(m, str):
                self.conn.send_text(m.encode())
            else:
                self.conn.send_binary(m)
        self._flush()
        return True

    async def drain(self):
        """Wait while the socket's buffer is full (backpressure for large sends)."""
        if self._writable is not None:
            await self._writable

    def close(self):
        if self.transport and not self.transport.is_closing():
            try:
                self.conn.send_close()
                self._flush()
            except Exception:
                pass
            self.transport.close()

    def abort(self):
        if self.transport:
            self.transport.abort()


SANDBOX_DOMAIN = "sandbox.agentix"
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def sandbox_tls_name(sandbox_id):
    """The DNS name agentd's certificate for a sandbox's runtime carries beside its address."""
    if not isinstance(sandbox_id, str) or not _LABEL.match(sandbox_id):
        raise ValueError(f"not a sandbox id: {sandbox_id!r}")
    return f"{sandbox_id}.{SANDBOX_DOMAIN}"


def tls_context(ca_pem):
    """Trust the runtime CA alone (agentd's), and check the certificate names the host dialled
    (an IP address in the URL against the certificate's IP entries)."""
    ctx = ssl_module.SSLContext(ssl_module.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl_module.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cadata=ca_pem)
    return ctx


def _refused(message):
    e = ssl_module.SSLCertVerificationError(message)
    e.verify_message = message
    return e


def identity_check(host, sandbox_id):
    """What a connection to sandbox_id's runtime at host checks, once the certificate verified
    against the CA and before a byte is sent: that it names the sandbox (ID.sandbox.agentix)
    and the address dialled. Both: on a swarm node every runtime has the node's address, and
    this sandbox's name alone would take its certificate served from anywhere. (Not through
    server_hostname, which would send the sandbox's id in the clear as SNI.)"""
    name = sandbox_tls_name(sandbox_id)

    def check(transport):
        cert = transport.get_extra_info("peercert") or {}
        names = cert.get("subjectAltName", ())
        if not any(kind == "DNS" and value.lower() == name for kind, value in names):
            raise _refused(f"the runtime's TLS certificate was made for another sandbox than {sandbox_id} "
                           f"(an impostor: another sandbox's runtime, or a redirected connection)")
        try:
            want = ipaddress.ip_address(host)
            ok = any(kind == "IP Address" and ipaddress.ip_address(value.strip()) == want for kind, value in names)
        except ValueError:
            ok = any(kind == "DNS" and value.lower() == host.lower() for kind, value in names)
        if not ok:
            raise _refused(f"the runtime's TLS certificate names another address than {host}")
    return check


async def open_websocket(url, on_message, on_lost, timeout, ca_pem=None, sandbox_id=None):
    """Connect and finish the WebSocket handshake; returns the protocol. wss:// needs ca_pem.
    With sandbox_id, the certificate must name that sandbox as well as the URL's address
    (identity_check())."""
    loop = asyncio.get_running_loop()
    uri = parse_uri(url)
    check = identity_check(uri.host, sandbox_id) if uri.secure and sandbox_id is not None else None
    proto = WebSocketProtocol(url, on_message, on_lost, check)
    ssl = tls_context(ca_pem) if uri.secure else None
    if check:
        ssl.check_hostname = False  # check() does it: the chain is still verified (CERT_REQUIRED)
    transport, _ = await asyncio.wait_for(
        loop.create_connection(lambda: proto, uri.host, uri.port, ssl=ssl,
                               server_hostname=uri.host if uri.secure else None), timeout)
    try:
        await asyncio.wait_for(asyncio.shield(proto.opened), timeout)
    except BaseException:
        transport.abort()
        raise
    return proto
