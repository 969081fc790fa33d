# SPDX-License-Identifier: MIT
"""AgentixSandbox: a sandbox with the deepagents backend methods, served natively by the
runtime's fs and sandbox modules (no shell, no python3 or GNU tools needed in the task image).

Method names and result shapes are deepagents' sandbox backend protocol (REFERENCE.md §2):
execute, upload_files, download_files, read, write, edit, ls_info, grep_raw, glob_info, and
their async twins (aexecute, …). With deepagents importable the class is a deepagents
BaseSandbox and returns deepagents' own result types; without it, dataclasses of the same
names and fields.

    async with session(AgentdDeployment(), SandboxConfig(image=..., bundle=...)) as sandbox:
        result = await sandbox.aexecute("make test")

The sync methods run the async ones on a loop of the sandbox's own in a helper thread, so they
work from plain code and from inside a running event loop (as deepagents' tools call them)."""

import asyncio
import dataclasses
import posixpath
import threading

from .runtime import RuntimeClient

try:  # deepagents is optional: use its types when it is there.
    from deepagents.backends.protocol import (EditResult, ExecuteResponse, FileDownloadResponse,  # type: ignore
                                              FileUploadResponse, WriteResult)
    from deepagents.backends.sandbox import BaseSandbox  # type: ignore
    HAVE_DEEPAGENTS = True
except ImportError:  # pragma: no cover - exercised where deepagents is absent (Debian has no package)
    HAVE_DEEPAGENTS = False
    BaseSandbox = object

    @dataclasses.dataclass
    class ExecuteResponse:
        output: str
        exit_code: int | None = None
        truncated: bool = False

    @dataclasses.dataclass
    class FileUploadResponse:
        path: str
        error: str | None = None

    @dataclasses.dataclass
    class FileDownloadResponse:
        path: str
        content: bytes | None = None
        error: str | None = None

    @dataclasses.dataclass
    class WriteResult:
        error: str | None = None
        path: str | None = None
        files_update: dict | None = None

    @dataclasses.dataclass
    class EditResult:
        error: str | None = None
        path: str | None = None
        files_update: dict | None = None
        occurrences: int | None = None

# The per-file errors deepagents defines; the runtime's other codes map onto them.
_FILE_ERRORS = {"file_not_found", "permission_denied", "is_directory", "invalid_path"}
_ERROR_MAP = {"not_a_file": "is_directory", "not_a_directory": "file_not_found"}


def _file_error(code):
    if code is None:
        return None
    return code if code in _FILE_ERRORS else _ERROR_MAP.get(code, code)


class _LoopThread:
    """An event loop on a daemon thread, for the sync methods."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agentix-sandbox", daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class AgentixSandbox(BaseSandbox):
    """One sandbox's runtime, as a deepagents sandbox backend.

    AgentixSandbox(url, token, id=None, ca=None): attach to a running runtime (ca: for an https://
    url, the CA to verify it with; id: the sandbox's, whose name its certificate must carry). AgentixSandbox.create(
    deployment, config) makes one through agentd (see agentix.deployment); close() deletes what
    create() made."""

    def __init__(self, url, token, *, id=None, default_timeout=None, on_close=None, ca=None):
        self._url, self._token, self._ca = url, token, ca
        self._sandbox_id = id
        self._id = id or url
        self._default_timeout = default_timeout
        self._on_close = on_close
        self._client = None
        self._thread = None
        self._lock = threading.Lock()

    # ---- life ------------------------------------------------------------------------------

    @property
    def id(self):
        return self._id

    @property
    def url(self):
        return self._url

    @classmethod
    async def create(cls, deployment, config, *, initial_files=None):
        """A new sandbox from agentd (deployment: AgentdDeployment), with initial_files
        ([(path, bytes)]) uploaded; deleted again if any of that fails."""
        info = await deployment.create(config)
        sandbox = cls(info.runtime_url, info.token, id=info.id, on_close=lambda: deployment.delete(info.id),
                      ca=info.ca)
        try:
            await sandbox.initialize()
            if initial_files:
                failed = [r for r in await sandbox.aupload_files(list(initial_files)) if r.error]
                if failed:
                    raise OSError(f"initial files not written: {[(r.path, r.error) for r in failed]}")
        except BaseException:
            await sandbox.aclose()
            raise
        return sandbox

    async def initialize(self):
        """Connect (the second step of a two-step start; create() does it)."""
        if self._client is None:
            client = RuntimeClient(self._url, self._token, ca=self._ca, sandbox_id=self._sandbox_id)
            await client.connect()
            self._client = client
        return self

    @property
    def is_running(self):
        return self._client is not None and self._client._failure is None and not self._client._closed

    async def aclose(self):
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            await on_close()

    def close(self):
        self._sync(self.aclose())
        if self._thread:
            self._thread.stop()
            self._thread = None

    async def __aenter__(self):
        return await self.initialize()

    async def __aexit__(self, *exc):
        await self.aclose()

    def _sync(self, coro):
        with self._lock:
            if self._thread is None:
                self._thread = _LoopThread()
        return self._thread.run(coro)

    async def _rt(self):
        if self._client is None:
            await self.initialize()
        return self._client

    # ---- execute, upload, download ---------------------------------------------------------

    async def aexecute(self, command, *, timeout=None):
        """Run command with sh -c; output is stdout and stderr combined. timeout: seconds (None:
        the sandbox's default; 0: none)."""
        timeout = self._default_timeout if timeout is None else timeout
        r = await (await self._rt()).exec(command, timeout=timeout or None)
        output = r.get("output", "")
        if r.get("timed_out"):
            output += f"\nError: Command timed out after {timeout} seconds."
        return ExecuteResponse(output=output, exit_code=r.get("exit_code"), truncated=bool(r.get("truncated")))

    async def aupload_files(self, files):
        results = await (await self._rt()).call("fs::upload", [[p, c] for p, c in files])
        return [FileUploadResponse(path=p, error=_file_error(r.get("error"))) for (p, _), r in zip(files, results)]

    async def adownload_files(self, paths):
        results = await (await self._rt()).call("fs::download", list(paths))
        return [FileDownloadResponse(path=p, content=r.get("content") if not r.get("error") else None,
                                     error=_file_error(r.get("error")))
                for p, r in zip(paths, results)]

    # ---- the file operations, natively ------------------------------------------------------

    async def aread(self, file_path, offset=0, limit=2000):
        r = await (await self._rt()).fs("read", file_path, offset=offset, limit=limit)
        error = r.get("error")
        if error == "file_not_found":
            return f"Error: File '{file_path}' not found"
        if error:
            return f"Error: {r.get('message') or error}"
        if r.get("encoding") == "bytes":
            return f"Error: File '{file_path}' is binary ({len(r.get('data') or b'')} bytes): download it instead"
        content = r.get("content") or ""
        if not content and r.get("message"):
            return r["message"]  # "System reminder: File exists but has empty contents"
        return content

    async def awrite(self, file_path, content):
        r = await (await self._rt()).fs("write", file_path, content)
        if r.get("error"):
            return WriteResult(error=r.get("message") or r["error"])
        return WriteResult(path=file_path, files_update=None)

    async def aedit(self, file_path, old_string, new_string, replace_all=False):
        r = await (await self._rt()).fs("edit", file_path, old_string, new_string, replace_all=replace_all)
        if r.get("error"):
            return EditResult(error=r.get("message") or r["error"])
        return EditResult(path=file_path, files_update=None, occurrences=r.get("occurrences"))

    async def als_info(self, path):
        r = await (await self._rt()).fs("ls", path)
        if r.get("error"):
            return []
        return [{"path": e["path"], "is_dir": e["is_dir"], "size": e.get("size"), "modified_at": e.get("modified_at")}
                for e in r.get("entries", [])]

    async def agrep_raw(self, pattern, path=None, glob=None):
        r = await (await self._rt()).fs("grep", pattern, path=path, glob=glob)
        if r.get("error"):
            return r.get("message") or r["error"]
        return [{"path": m["path"], "line": m["line"], "text": m["text"]} for m in r.get("matches", [])]

    async def aglob_info(self, pattern, path="/"):
        r = await (await self._rt()).fs("glob", pattern, path=path)
        if r.get("error"):
            return []
        root = path.rstrip("/") or "/"
        out = []
        for m in r.get("matches", []):
            rel = posixpath.relpath(m["path"], root) if m["path"].startswith(root) else m["path"]
            out.append({"path": rel, "is_dir": bool(m.get("is_dir")), "size": m.get("size"),
                        "modified_at": m.get("modified_at")})
        return out

    # ---- the sync twins ---------------------------------------------------------------------

    def execute(self, command, *, timeout=None):
        return self._sync(self.aexecute(command, timeout=timeout))

    def upload_files(self, files):
        return self._sync(self.aupload_files(files))

    def download_files(self, paths):
        return self._sync(self.adownload_files(paths))

    def read(self, file_path, offset=0, limit=2000):
        return self._sync(self.aread(file_path, offset, limit))

    def write(self, file_path, content):
        return self._sync(self.awrite(file_path, content))

    def edit(self, file_path, old_string, new_string, replace_all=False):
        return self._sync(self.aedit(file_path, old_string, new_string, replace_all))

    def ls_info(self, path):
        return self._sync(self.als_info(path))

    def grep_raw(self, pattern, path=None, glob=None):
        return self._sync(self.agrep_raw(pattern, path, glob))

    def glob_info(self, pattern, path="/"):
        return self._sync(self.aglob_info(pattern, path))


__all__ = ["AgentixSandbox", "ExecuteResponse", "FileUploadResponse", "FileDownloadResponse", "WriteResult",
           "EditResult", "HAVE_DEEPAGENTS"]
