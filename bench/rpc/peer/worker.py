#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The peer's worker: reads call frames (u32 little-endian length + msgpack map) from the
server, runs each call as its own asyncio task, writes result/error frames back.

Like the original's worker process: the frame pipe is moved to private fds and fd 0/1 point
at /dev/null, so children cannot steal frame bytes; synchronous functions run in a thread
(asyncio.to_thread), coroutines on the loop; writes go through one queue drainer.

Functions (same names, arguments and result maps as agentix's built-ins):
  sandbox::echo(value=None)  → value
  fs::ls(path)               → {entries, truncated, error, message}
  fs::download(paths)        → [{path, content, error, message}]
  sandbox::exec(command, timeout=None) → {exit_code, output, truncated, timed_out}
"""
import asyncio
import datetime
import os
import struct
import sys
import traceback

import msgpack


def sandbox_echo(value=None):
    return value


def fs_ls(path):
    entries = []
    try:
        with os.scandir(path) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                entries.append({"path": e.path, "is_dir": e.is_dir(follow_symlinks=False), "size": st.st_size,
                                "modified_at": datetime.datetime.fromtimestamp(
                                    st.st_mtime, datetime.timezone.utc).isoformat()})
    except FileNotFoundError:
        return {"entries": None, "truncated": False, "error": "file_not_found",
                "message": f"Error: Path '{path}' not found"}
    entries.sort(key=lambda x: x["path"])
    return {"entries": entries, "truncated": False, "error": None, "message": None}


def fs_download(paths):
    out = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                out.append({"path": p, "content": f.read(), "error": None, "message": None})
        except FileNotFoundError:
            out.append({"path": p, "content": None, "error": "file_not_found", "message": None})
        except IsADirectoryError:
            out.append({"path": p, "content": None, "error": "is_directory", "message": None})
        except PermissionError:
            out.append({"path": p, "content": None, "error": "permission_denied", "message": None})
    return out


async def sandbox_exec(command, timeout=None):
    proc = await asyncio.create_subprocess_shell(command, stdin=asyncio.subprocess.DEVNULL,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    timed_out = False
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        timed_out = True
    return {"exit_code": proc.returncode, "output": out.decode("utf-8", "replace"), "truncated": False,
            "timed_out": timed_out}


FUNCTIONS = {
    "sandbox::echo": sandbox_echo,
    "fs::ls": fs_ls,
    "fs::download": fs_download,
    "sandbox::exec": sandbox_exec,
}


class Worker:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.outbox = asyncio.Queue()
        self.tasks = {}

    def send(self, msg):
        body = msgpack.packb(msg, use_bin_type=True)
        self.outbox.put_nowait(struct.pack("<I", len(body)) + body)

    async def drain_outbox(self):
        while True:
            frame = await self.outbox.get()
            self.writer.write(frame)
            await self.writer.drain()

    async def run_call(self, msg):
        call_id = msg.get("call_id")
        try:
            fn = FUNCTIONS.get(msg.get("callable"))
            if fn is None:
                raise LookupError(f"no such callable: {msg.get('callable')}")
            args, kwargs = msg.get("args") or [], msg.get("kwargs") or {}
            if asyncio.iscoroutinefunction(fn):
                value = await fn(*args, **kwargs)
            else:
                value = await asyncio.to_thread(fn, *args, **kwargs)
            self.send({"type": "result", "call_id": call_id, "value": value})
        except asyncio.CancelledError:
            self.send({"type": "error", "call_id": call_id,
                       "error": {"type": "Cancelled", "message": "remote call cancelled", "traceback": None,
                                 "cancelled": True}})
        except Exception as e:  # noqa: BLE001 - every failure answers the call
            self.send({"type": "error", "call_id": call_id,
                       "error": {"type": type(e).__name__, "message": str(e), "traceback": traceback.format_exc(),
                                 "cancelled": False}})
        finally:
            self.tasks.pop(call_id, None)

    async def serve(self):
        drainer = asyncio.create_task(self.drain_outbox())
        self.send({"type": "ready", "pid": os.getpid()})
        try:
            while True:
                (n,) = struct.unpack("<I", await self.reader.readexactly(4))
                msg = msgpack.unpackb(await self.reader.readexactly(n), raw=False) if n else {}
                kind = msg.get("type")
                if kind == "call":
                    self.tasks[msg["call_id"]] = asyncio.create_task(self.run_call(msg))
                elif kind == "cancel":
                    task = self.tasks.get(msg.get("call_id"))
                    if task:
                        task.cancel()
                elif kind == "shutdown":
                    break
        except asyncio.IncompleteReadError:
            pass
        drainer.cancel()


async def main():
    # Private copies of the frame pipe; 0/1 become /dev/null (the original's fd isolation).
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=512 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(rfd, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(wfd, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    await Worker(reader, writer).serve()


if __name__ == "__main__":
    try:
        # uvicorn puts the server on uvloop when it is installed; the worker gets it too, which
        # can only make the peer faster (the comparison is generous to it, not to agentix).
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    sys.exit(asyncio.run(main()))
