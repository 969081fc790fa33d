# SPDX-License-Identifier: MIT
"""RuntimeClient: remote calls into one agentix runtime (agentix-server), on asyncio.

It speaks Socket.IO over a single WebSocket (the framing of python3-websockets' Sans-I/O
connection on an asyncio Protocol) with msgpack envelopes, and nothing else: no polling
transport, no threads, no task or queue per message. A unary call is one write of two frames
and a callback that resolves its future, where python-socketio's client hands each message
through several layers and tasks (bench/python has the figures).

    async with RuntimeClient(url, token) as rt:
        print(await rt.call("fs::ls", "/"))
        async for chunk in rt.stream("sandbox::exec", "make", max_output=1 << 20):
            ...
        ch = await rt.bidi("sandbox::exec", "cat", interactive=True)

Calls of every shape (unary, stream, bidi), cancel, deadlines, resume after a reconnect (calls
outlive a dropped connection; their results are replayed), and errors as exceptions
(agentix.errors)."""

import asyncio
import itertools
import os
import ssl
import time
import urllib.parse

import websockets.exceptions

from . import _transport, _wire
from .errors import (AgentixError, ConnectionLost, DeadlineExceeded, ServerUnreachable, Unauthorized,
                     remote_error)

_TERMINAL = ("call:result", "call:end", "call:error")
_DEADLINE_GRACE = 2.0  # the server enforces deadlines; this much later the client stops waiting too
_ACK_BATCH = 64        # results acknowledged at once …
_ACK_DELAY = 0.05      # … or this long after the first of them


class _Call:
    __slots__ = ("call_id", "message", "shape", "items", "done", "deadline", "sent")

    def __init__(self, call_id, message, shape, deadline):
        self.call_id, self.message, self.shape, self.deadline = call_id, message, shape, deadline
        self.sent = False
        self.items = asyncio.Queue() if shape != "unary" else None
        self.done = asyncio.get_running_loop().create_future()


class Stream:
    """The items of a stream call, as an async iterator; `cancel()` stops the call."""

    def __init__(self, client, call):
        self._client, self._call = client, call

    @property
    def call_id(self):
        return self._call.call_id

    def __aiter__(self):
        return self

    async def __anext__(self):
        call = self._call
        while True:
            if not call.items.empty():
                return call.items.get_nowait()
            if call.done.done():
                call.done.result()  # raises the call's error
                raise StopAsyncIteration
            getter = asyncio.ensure_future(call.items.get())
            try:
                await asyncio.wait({getter, call.done}, timeout=self._client._left(call),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                return getter.result()
            if not call.done.done() and self._client._left(call) == 0:
                await self._client.cancel(call.call_id)
                raise DeadlineExceeded({"type": "DeadlineExceeded", "message": "no answer before the deadline"})

    async def cancel(self):
        await self._client.cancel(self._call.call_id)

    async def aclose(self):
        if not self._call.done.done():
            await self.cancel()


class Channel(Stream):
    """A bidi call: `send(item)` to its inbox, `end()` to close the inbox, iterate its items."""

    async def send(self, item):
        await self._client._emit("call:in", {"call_id": self.call_id, "item": item})

    async def end(self):
        await self._client._emit("call:end_in", {"call_id": self.call_id})


class RuntimeClient:
    """One connection to one runtime. url: http(s)://HOST:PORT of agentix-server (as agentd's
    GetRuntimeAccess gives it); token: its AGENTIX_TOKEN; ca: for an https:// URL, the CA (PEM)
    its certificate must chain to, the only one trusted (agentd's Manager.RuntimeCA; default:
    the file AGENTIX_CA_FILE names); sandbox_id: the sandbox meant, whose name
    (ID.sandbox.agentix) the certificate must carry besides the URL's address, so that another
    sandbox's runtime on the same address (a swarm node's) is refused: give it when known."""

    def __init__(self, url, token, *, reconnect=True, reconnect_for=30.0, connect_timeout=10.0, ca=None,
                 sandbox_id=None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
            raise ValueError(f"not a runtime URL (http://HOST:PORT): {url!r}")
        scheme = "wss" if parts.scheme in ("https", "wss") else "ws"
        if scheme == "wss" and ca is None:
            if not os.environ.get("AGENTIX_CA_FILE"):
                raise ValueError(f"{url} serves TLS: give the CA to verify it with (ca=, agentd's RuntimeCA, or "
                                 "AGENTIX_CA_FILE)")
            with open(os.environ["AGENTIX_CA_FILE"]) as f:
                ca = f.read()
        self._ca = ca
        if scheme == "wss" and sandbox_id is not None:
            _transport.sandbox_tls_name(sandbox_id)  # a ValueError now rather than at connect()
        self._sandbox_id = sandbox_id if scheme == "wss" else None
        self.url = url
        self._ws_url = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}/socket.io/?EIO=4&transport=websocket"
        self._token = token
        self._reconnect, self._reconnect_for, self._connect_timeout = reconnect, reconnect_for, connect_timeout
        self._ws = None
        self._joined = None
        self._pending_event = None
        self._recovery = None
        self._calls = {}
        self._connected = None
        self._closed = False
        self._failure = None
        self._ids = itertools.count()
        self._prefix = os.urandom(6).hex()
        self._acks = []
        self._ack_timer = None

    # ---- connection ------------------------------------------------------------------------

    async def __aenter__(self):
        await self.connect()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def connect(self):
        self._connected = asyncio.Event()
        await self._open()

    async def _open(self):
        """Connect, then Engine.IO's open packet, then CONNECT to /rpc with the token."""
        loop = asyncio.get_running_loop()
        self._joined = loop.create_future()
        self._pending_event = None
        try:
            ws = await _transport.open_websocket(self._ws_url, self._on_message, self._on_lost, self._connect_timeout,
                                                 self._ca, self._sandbox_id)
        except ssl.SSLCertVerificationError as e:
            raise ServerUnreachable(f"The runtime at {self.url} was refused: its TLS certificate does not verify "
                                    f"against agentd's runtime CA ({e.verify_message})") from None
        except (OSError, asyncio.TimeoutError, websockets.exceptions.InvalidHandshake,
                websockets.exceptions.InvalidURI) as e:
            raise ServerUnreachable(f"No agentix runtime answers at {self.url} ({e or type(e).__name__}): is the "
                                    f"sandbox running, and is this its RuntimeUrl?") from None
        self._ws = ws
        try:
            await asyncio.wait_for(asyncio.shield(self._joined), self._connect_timeout)
        except asyncio.TimeoutError:
            ws.abort()
            raise ServerUnreachable(f"{self.url} does not answer as an agentix runtime (no Socket.IO CONNECT "
                                    f"within {self._connect_timeout} s)") from None
        except BaseException:
            ws.abort()
            raise
        self._connected.set()

    def _on_message(self, ws, m):
        """Every message the runtime sends, as it is parsed (the event loop's callback)."""
        if not isinstance(m, str):  # binary: the attachment of the event announced just before
            event, self._pending_event = self._pending_event, None
            if event is not None:
                self._dispatch(event, _wire.unpack(m))
            return
        kind, value = _wire.parse_text(m)
        if kind == "binary_event":
            self._pending_event = value
        elif kind == "ping":
            ws.send("3")
        elif kind == "open":
            ws.send(_wire.connect_packet(self._token))
        elif kind == "connected":
            if not self._joined.done():
                self._joined.set_result(None)
        elif kind == "connect_error":
            if not self._joined.done():
                self._joined.set_exception(Unauthorized(
                    f"The runtime at {self.url} refused the token ({value.get('message', 'unauthorized')}): take "
                    f"the token from GetRuntimeAccess (or AGENTIX_TOKEN of the server)."))
        elif kind in ("close", "disconnect"):
            ws.close()

    def _on_lost(self, exc):
        if self._joined is not None and not self._joined.done():
            self._joined.set_exception(ServerUnreachable(f"{self.url} closed the connection while it was made"))
            self._joined.exception()
        if self._closed or not self._connected.is_set():
            return
        self._connected.clear()
        self._recovery = asyncio.ensure_future(self._recover())

    async def _recover(self):
        if not self._reconnect or not await self._reconnect_and_resume():
            self._failure = ConnectionLost(f"The connection to {self.url} dropped and could not be made again: "
                                           f"is the sandbox still running?")
            self._connected.set()  # wake senders: they see the failure
            self._fail_all(self._failure)

    async def close(self):
        """Close the connection; calls still running fail with ConnectionLost."""
        self._closed = True
        if self._recovery:
            self._recovery.cancel()
        if self._ack_timer is not None:
            self._ack_timer.cancel()
        if self._ws:
            self._ws.close()
        self._fail_all(ConnectionLost("the client was closed"))

    def _fail_all(self, error):
        for call in list(self._calls.values()):
            if not call.done.done():
                call.done.set_exception(error)
                call.done.exception()  # retrieved: no "never retrieved" warning for abandoned calls
        self._calls.clear()

    async def _reconnect_and_resume(self):
        end = time.monotonic() + self._reconnect_for
        delay = 0.05
        while time.monotonic() < end and not self._closed:
            try:
                await self._open()
            except Unauthorized:
                return False
            except AgentixError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            # Calls the server has: their results (or the rest of their items) come again.
            # Calls whose message never left: sent now.
            sent = [c.call_id for c in self._calls.values() if c.sent]
            if sent:
                await self._emit("resume", {"call_ids": sent})
            for c in [c for c in self._calls.values() if not c.sent]:
                c.sent = await self._emit("call", c.message)
            return True
        return False

    def _dispatch(self, event, m):
        call = self._calls.get(m.get("call_id"))
        if call is None:
            return
        if event == "call:item":
            call.items.put_nowait(m.get("value"))
            return
        if event not in _TERMINAL:
            return
        del self._calls[call.call_id]
        if event == "call:error":
            call.done.set_exception(remote_error(m.get("error") or {}))
        else:
            call.done.set_result(m.get("value"))
        # The result is here: the server may forget it. Acks go in batches, off the call's path.
        self._acks.append(call.call_id)
        if len(self._acks) >= _ACK_BATCH:
            self._flush_acks()
        elif self._ack_timer is None:
            self._ack_timer = asyncio.get_running_loop().call_later(_ACK_DELAY, self._flush_acks)

    def _flush_acks(self):
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        ids, self._acks = self._acks, []
        if ids and self._connected.is_set() and self._failure is None:
            # All of them in one write.
            self._ws.send(*(f for call_id in ids for f in _wire.event_frames("ack", {"call_id": call_id})))

    async def _emit(self, event, payload):
        """Send an event; False when the connection dropped meanwhile (it is made again)."""
        if not self._connected.is_set():
            await self._connected.wait()
        if self._failure:
            raise self._failure
        ws = self._ws
        if not ws.send(*_wire.event_frames(event, payload)):
            if not self._reconnect:
                raise ConnectionLost(f"The connection to {self.url} dropped")
            return False
        await ws.drain()
        return True

    # ---- calls -----------------------------------------------------------------------------

    def _left(self, call):
        if call.deadline is None:
            return None
        return max(0.0, call.deadline + _DEADLINE_GRACE - time.monotonic())

    async def _start(self, callable, shape, args, kwargs, deadline):
        if self._failure:
            raise self._failure
        if self._ws is None:
            raise AgentixError("connect() first (or use `async with RuntimeClient(...)`)")
        call_id = f"{self._prefix}-{next(self._ids)}"
        message = {"call_id": call_id, "callable": callable, "shape": shape, "args": list(args), "kwargs": kwargs}
        if deadline is not None:
            message["deadline_ms"] = max(1, int(deadline * 1000))
        call = _Call(call_id, message, shape, None if deadline is None else time.monotonic() + deadline)
        self._calls[call_id] = call
        call.sent = await self._emit("call", message)
        return call

    async def call(self, callable, *args, deadline=None, **kwargs):
        """A unary call: its value, or its error raised. deadline: seconds."""
        call = await self._start(callable, "unary", args, kwargs, deadline)
        if deadline is None:
            return await call.done
        try:
            return await asyncio.wait_for(asyncio.shield(call.done), self._left(call))
        except asyncio.TimeoutError:
            await self.cancel(call.call_id)
            raise DeadlineExceeded({"type": "DeadlineExceeded", "message": "no answer before the deadline"}) from None

    async def stream(self, callable, *args, deadline=None, **kwargs):
        """A stream call: an async iterator of its items (Stream)."""
        return Stream(self, await self._start(callable, "stream", args, kwargs, deadline))

    async def bidi(self, callable, *args, deadline=None, **kwargs):
        """A bidi call: a Channel to send to and iterate."""
        return Channel(self, await self._start(callable, "bidi", args, kwargs, deadline))

    async def cancel(self, call_id):
        """Ask the server to cancel the call; it then ends with Cancelled."""
        if call_id in self._calls:
            await self._emit("cancel", {"call_id": call_id})

    # ---- the built-in modules --------------------------------------------------------------

    async def exec(self, command, *, timeout=None, cwd=None, env=None, stdin=None, max_output=None):
        """sandbox::exec: {exit_code, output, truncated, timed_out}."""
        kwargs = _given(timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output=max_output)
        return await self.call("sandbox::exec", command, **kwargs)

    async def exec_stream(self, command, **kwargs):
        """sandbox::exec as a stream: {stream, data} chunks, then {exit_code}."""
        return await self.stream("sandbox::exec", command, **_given(**kwargs))

    async def watch(self, path, *, recursive=True):
        """fs::watch: an async iterator of the changes below path, {"path", "event"} with event
        "created", "modified", "deleted", "moved_from" or "moved_to", until the loop stops
        (leaving an `async for` early, or cancelling the task around it, cancels the watch).
        A path that does not exist raises file_not_found; inotify's limits raise io_error."""
        changes = await self.stream("fs::watch", path, recursive=recursive)
        try:
            async for change in changes:
                yield change
        finally:
            await changes.aclose()

    async def fs(self, function, *args, **kwargs):
        """fs::FUNCTION (read, write, edit, ls, grep, glob, upload, download, …)."""
        return await self.call(f"fs::{function}", *args, **_given(**kwargs))

    async def open_shell(self, *, cwd=None, env=None, shell=None):
        """shell::open: a persistent shell session (see ShellSession)."""
        return ShellSession(self, await self.call("shell::open", **_given(cwd=cwd, env=env, shell=shell)))

    def shell(self, session_id):
        """An open session by its id (from list_shells(), or another client's open_shell())."""
        return ShellSession(self, session_id)

    async def list_shells(self):
        """shell::list: [{id, pid, running, cwd}] of the sessions open in the sandbox."""
        return await self.call("shell::list")

    async def create_code_context(self, *, language=None, cwd=None, env=None):
        """code::create_context: a new code context on a Jupyter kernel (see CodeContext)."""
        return CodeContext(self, await self.call("code::create_context",
                                                 **_given(language=language, cwd=cwd, env=env)))

    def code_context(self, context_id):
        """A context by its id (from code_contexts(), or another client's)."""
        return CodeContext(self, context_id)

    async def code_contexts(self):
        """code::contexts: [{id, language, kernel, cwd, pid, running, queued}]."""
        return await self.call("code::contexts")

    async def run_code(self, code, *, context=None, language=None, env=None, timeout=None, max_output=None,
                       on_item=None):
        """code::run in `context`, else in the language's default context (python unless
        `language` says): an Execution (see CodeContext.run)."""
        items = []
        stream = await self.stream("code::run", code, **_given(context=context, language=language, env=env,
                                                                timeout=timeout, max_output=max_output))
        try:
            async for item in stream:
                items.append(item)
                if on_item:
                    on_item(item)
        finally:
            await stream.aclose()
        return Execution(items)


class CodeContext:
    """A code context in the sandbox (code::): a Jupyter kernel whose variables, imports and
    figures stay between run() calls. It lives in the runtime, so it outlives the client;
    delete() ends it. Runs on one context go one at a time, in the order they came."""

    def __init__(self, runtime, context_id):
        self.runtime = runtime
        self.id = context_id

    async def run(self, code, *, env=None, timeout=None, max_output=None, on_item=None):
        """Run code: an Execution of its items ({type: stdout|stderr|result|error|
        execution_count, …}; a result's `data` is its MIME bundle, images as bytes). An exception
        in the code is an item (execution.error), not raised. on_item(item): called as each
        item comes. At `timeout` (seconds) the run is interrupted and the context keeps its
        state."""
        return await self.runtime.run_code(code, context=self.id, env=env, timeout=timeout, max_output=max_output,
                                           on_item=on_item)

    async def interrupt(self):
        """^C to the run in progress: it ends with a KeyboardInterrupt item."""
        await self.runtime.call("code::interrupt", self.id)

    async def restart(self):
        """A fresh kernel: the state is gone, the id stays."""
        await self.runtime.call("code::restart", self.id)

    async def delete(self):
        """End the context and its kernel."""
        await self.runtime.call("code::delete_context", self.id)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        try:
            await self.delete()
        except Exception:  # already gone: nothing to end
            pass


class Execution:
    """What one code run gave: every item in order, and views of them."""

    def __init__(self, items):
        self.items = items

    @property
    def stdout(self):
        return "".join(i["text"] for i in self.items if i["type"] == "stdout")

    @property
    def stderr(self):
        return "".join(i["text"] for i in self.items if i["type"] == "stderr")

    @property
    def results(self):
        """The MIME bundles of the results and displays, in order."""
        return [i["data"] for i in self.items if i["type"] == "result"]

    @property
    def result(self):
        """The main result's MIME bundle (the value of the last line), or None."""
        return next((i["data"] for i in self.items if i["type"] == "result" and i.get("is_main_result")), None)

    @property
    def text(self):
        """The main result as text/plain, or None."""
        return (self.result or {}).get("text/plain")

    @property
    def error(self):
        """The first error item ({name, value, traceback}), or None."""
        return next((i for i in self.items if i["type"] == "error"), None)

    @property
    def images(self):
        """(mime, bytes) of every image the run gave (a matplotlib figure, …)."""
        return [(m, v) for d in self.results for m, v in d.items() if m.startswith("image/") and isinstance(v, bytes)]

    @property
    def truncated(self):
        return any(i.get("truncated") for i in self.items)

    def __repr__(self):
        return f"Execution(text={self.text!r}, error={self.error and self.error['name']!r}, items={len(self.items)})"


class ShellSession:
    """A persistent shell session in the sandbox (shell::): one bash whose working directory,
    variables, functions and background jobs stay between run() calls. It lives in the runtime,
    so it outlives the client; close() ends it. A second run() while one is in progress raises
    SessionBusy; a closed or ended session SessionNotFound."""

    def __init__(self, runtime, session_id):
        self.runtime = runtime
        self.id = session_id

    async def run(self, command, *, timeout=None, max_output=None):
        """{output, exit_code, timed_out, truncated, ended}: at `timeout` (seconds) the command is
        interrupted (^C) and the session goes on; `exit` ends it (ended is True)."""
        return await self.runtime.call("shell::run", self.id, command, **_given(timeout=timeout, max_output=max_output))

    async def input(self, data):
        """Bytes (or text) to the running command's input: an answer to `read`."""
        await self.runtime.call("shell::input", self.id, data)

    async def interrupt(self):
        """^C to the running command: its run() returns (exit_code 130), the session goes on."""
        await self.runtime.call("shell::interrupt", self.id)

    async def close(self):
        """End the session and the commands it started."""
        await self.runtime.call("shell::close", self.id)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        try:
            await self.close()
        except Exception:  # already ended: nothing to close
            pass


def _given(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not None}


__all__ = ["RuntimeClient", "Stream", "Channel", "ShellSession", "CodeContext", "Execution"]
