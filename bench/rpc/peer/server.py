#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The comparison peer of bench/rpc: an /rpc server built the way the Python original is.

python-socketio's AsyncServer (ASGI) on uvicorn (uvloop + httptools when installed, wsproto
for WebSocket, as the original's bootstrap asks), namespace /rpc, one binary attachment
holding one msgpack map per event, the same events and fields as agentix-server (call →
call:result / call:error; ack; cancel). Calls are relayed to ONE worker subprocess
(worker.py, same interpreter) over length-prefixed msgpack frames on a pipe: u32
little-endian length + msgpack map. As in the original: the worker is spawned lazily by the
first call and once at start-up here (so RSS is measured with it), writes go through a single
queue drainer, a reader task resolves futures by call_id, results are kept until acked
(bounded at 4096), a call_id never runs twice.

Run: AGENTIX_TOKEN=… /usr/bin/python3 server.py --host 127.0.0.1 --port P
"""
import argparse
import asyncio
import collections
import os
import struct
import sys

import msgpack
import socketio
import uvicorn

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
PENDING_RESULTS_MAX = 4096
NS = "/rpc"
HERE = os.path.dirname(os.path.abspath(__file__))


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data):
    return msgpack.unpackb(data, raw=False)


class WorkerDied(Exception):
    def __init__(self, returncode):
        super().__init__(f"the worker process exited with status {returncode}")
        self.returncode = returncode


class WorkerClient:
    """The server's end of the worker pipe."""

    def __init__(self):
        self.proc = None
        self.pending = {}
        self.outbox = None
        self.tasks = []
        self.ready = None
        self.lock = asyncio.Lock()

    async def ensure_started(self):
        async with self.lock:
            if self.proc is not None and self.proc.returncode is None:
                return
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, os.path.join(HERE, "worker.py"),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                limit=MAX_MESSAGE_BYTES + 1024)
            self.outbox = asyncio.Queue()
            self.ready = asyncio.get_running_loop().create_future()
            self.tasks = [asyncio.create_task(self._reader(self.proc)),
                          asyncio.create_task(self._writer(self.proc))]
            await asyncio.wait_for(self.ready, 15)

    async def _writer(self, proc):
        # One drainer: a lock across drain() deadlocked in the original (#102).
        while True:
            frame = await self.outbox.get()
            proc.stdin.write(frame)
            await proc.stdin.drain()

    async def _reader(self, proc):
        try:
            while True:
                header = await proc.stdout.readexactly(4)
                (n,) = struct.unpack("<I", header)
                msg = unpack(await proc.stdout.readexactly(n)) if n else {}
                kind = msg.get("type")
                if kind == "ready":
                    if not self.ready.done():
                        self.ready.set_result(True)
                    continue
                fut = self.pending.pop(msg.get("call_id"), None)
                if fut is None or fut.done():
                    continue  # a call already closed (cancelled): its late frame is dropped
                fut.set_result(msg)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        returncode = await proc.wait()
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(WorkerDied(returncode))
        self.pending.clear()

    async def stop(self):
        # The original's order: shutdown frame, 5 s, terminate, 2 s, kill.
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        self.send({"type": "shutdown"})
        for signal_after, wait in ((None, 5), (proc.terminate, 2), (proc.kill, None)):
            if signal_after:
                signal_after()
            try:
                await asyncio.wait_for(proc.wait(), wait)
                break
            except asyncio.TimeoutError:
                continue
        for t in self.tasks:
            t.cancel()

    def send(self, msg):
        body = pack(msg)
        self.outbox.put_nowait(struct.pack("<I", len(body)) + body)

    async def call(self, call_id, callable_, args, kwargs):
        await self.ensure_started()
        fut = asyncio.get_running_loop().create_future()
        self.pending[call_id] = fut
        self.send({"type": "call", "call_id": call_id, "callable": callable_, "args": args, "kwargs": kwargs})
        try:
            return await fut
        except asyncio.CancelledError:
            self.pending.pop(call_id, None)
            self.send({"type": "cancel", "call_id": call_id})
            raise


def error_map(type_, message, cancelled=False, returncode=None):
    e = {"type": type_, "message": message, "traceback": None, "cancelled": cancelled}
    if returncode is not None:
        e["returncode"] = returncode
    return e


def build(token):
    sio = socketio.AsyncServer(async_mode="asgi", cors_allowed_origins="*",
                               max_http_buffer_size=MAX_MESSAGE_BYTES,
                               ping_interval=25, ping_timeout=300)
    worker = WorkerClient()
    running = {}                                        # call_id → task
    owner = {}                                          # call_id → sid
    results = collections.OrderedDict()                 # call_id → (event, payload) until acked

    async def emit(event, env, call_id):
        payload = pack(env)
        results[call_id] = (event, payload)
        while len(results) > PENDING_RESULTS_MAX:
            results.popitem(last=False)
        sid = owner.get(call_id)
        if sid is not None:
            await sio.emit(event, payload, to=sid, namespace=NS)

    async def run(call_id, env):
        try:
            msg = await worker.call(call_id, env.get("callable"), env.get("args") or [], env.get("kwargs") or {})
            if msg.get("type") == "result":
                await emit("call:result", {"call_id": call_id, "value": msg.get("value")}, call_id)
            else:
                await emit("call:error", {"call_id": call_id, "error": msg.get("error")}, call_id)
        except WorkerDied as e:
            await emit("call:error", {"call_id": call_id,
                                      "error": error_map("WorkerDied", str(e), returncode=e.returncode)}, call_id)
        except asyncio.CancelledError:
            pass
        except Exception as e:  # noqa: BLE001 - every failure answers the call
            await emit("call:error", {"call_id": call_id, "error": error_map(type(e).__name__, str(e))}, call_id)
        finally:
            running.pop(call_id, None)

    @sio.on("connect", namespace=NS)
    async def connect(sid, environ, auth):
        if token and (not isinstance(auth, dict) or auth.get("token") != token):
            raise socketio.exceptions.ConnectionRefusedError("unauthorized")

    @sio.on("disconnect", namespace=NS)
    async def disconnect(sid):
        for cid in [c for c, s in owner.items() if s == sid]:
            owner.pop(cid, None)

    async def bad_request(sid, message, call_id=""):
        await sio.emit("call:error", pack({"call_id": call_id, "error": error_map("BadRequest", message)}),
                       to=sid, namespace=NS)

    def decode(data):
        if not isinstance(data, (bytes, bytearray)):
            return None
        try:
            env = unpack(data)
        except Exception:  # noqa: BLE001
            return None
        return env if isinstance(env, dict) else None

    @sio.on("call", namespace=NS)
    async def on_call(sid, data):
        env = decode(data)
        if env is None or not isinstance(env.get("call_id"), str) or not env["call_id"]:
            return await bad_request(sid, "an RPC event carries one msgpack map with a call_id")
        call_id = env["call_id"]
        owner[call_id] = sid
        if call_id in results:                       # at most once: replay
            event, payload = results[call_id]
            return await sio.emit(event, payload, to=sid, namespace=NS)
        if call_id in running:
            return
        running[call_id] = asyncio.current_task()
        await run(call_id, env)

    @sio.on("ack", namespace=NS)
    async def on_ack(sid, data):
        env = decode(data)
        if env is not None:
            results.pop(env.get("call_id"), None)
            owner.pop(env.get("call_id"), None)

    @sio.on("cancel", namespace=NS)
    async def on_cancel(sid, data):
        env = decode(data)
        call_id = env and env.get("call_id")
        task = running.pop(call_id, None)
        if task is not None:
            task.cancel()
            await emit("call:error", {"call_id": call_id,
                                      "error": error_map("Cancelled", "remote call cancelled", cancelled=True)},
                       call_id)

    async def health_and_startup(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await worker.ensure_started()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await worker.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "http" and scope["path"] == "/health":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"status":"ok","version":"peer"}'})
            return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return socketio.ASGIApp(sio, other_asgi_app=health_and_startup, socketio_path="socket.io")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=os.environ.get("AGENTIX_BIND_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("AGENTIX_BIND_PORT", "8000")))
    opts = ap.parse_args()
    app = build(os.environ.get("AGENTIX_TOKEN"))
    uvicorn.run(app, host=opts.host, port=opts.port, ws="wsproto", log_level="warning",
                ws_max_size=MAX_MESSAGE_BYTES, lifespan="on")


if __name__ == "__main__":
    main()
