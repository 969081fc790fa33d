# SPDX-License-Identifier: MIT
"""Sandboxes from agentd, in the shape of the seed's deployment API:

    deployment = AgentdDeployment()
    config = SandboxConfig(image="debian:12", bundle="example-bundle:0.1.0", memory=1 << 30)
    async with session(deployment, config) as sandbox:      # an AgentixSandbox
        print((await sandbox.aexecute("uname -a")).output)

AgentdDeployment talks to agentd (org.agentix.Agentd1) with dbus-python, Debian's stock D-Bus
binding, on worker threads so that the event loop never blocks. Like every deployment backend
its constructor takes no arguments and reads its settings from the environment:
AGENTIX_BUS ("system", the default, or "session") and DBUS_SYSTEM_BUS_ADDRESS /
DBUS_SESSION_BUS_ADDRESS."""

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import threading

from .errors import AgentdError, SandboxGone, ServerUnreachable

NAME, PATH = "org.agentix.Agentd1", "/org/agentix/Agentd1"
MANAGER, SANDBOX = "org.agentix.Agentd1.Manager", "org.agentix.Agentd1.Sandbox"


@dataclasses.dataclass
class SandboxConfig:
    """CreateSandbox's config (org.agentix.Agentd1(5)); None: agentd's default."""
    image: str
    bundle: str
    platform: str | None = None
    backend: str | None = None
    env: dict | None = None
    labels: dict | None = None
    ttl: int | None = None
    cpus: float | None = None
    memory: int | None = None
    pids: int | None = None
    network: str | None = None
    workdir: str | None = None
    bind_to_caller: bool = False
    setup: str | None = None
    runtime: str | None = None        # "runc", or "runsc" for gVisor
    read_only: bool = False           # a read-only root; /tmp and the workdir writable
    user: str | None = None           # USER[:GROUP] the runtime and its commands run as
    egress: list | None = None        # CIDRs it may reach (and DNS); []: no network at all

    def to_dbus(self):
        import dbus
        d = {"image": dbus.String(self.image), "bundle": dbus.String(self.bundle)}
        for key in ("platform", "backend", "network", "workdir", "setup", "runtime", "user"):
            if getattr(self, key) is not None:
                d[key] = dbus.String(getattr(self, key))
        for key in ("env", "labels"):
            if getattr(self, key) is not None:
                d[key] = dbus.Dictionary({str(k): str(v) for k, v in getattr(self, key).items()}, signature="ss")
        for key in ("ttl", "memory", "pids"):
            if getattr(self, key) is not None:
                d[key] = dbus.UInt64(getattr(self, key))
        if self.cpus is not None:
            d["cpus"] = dbus.Double(self.cpus)
        if self.bind_to_caller:
            d["bind_to_caller"] = dbus.Boolean(True)
        if self.read_only:
            d["read_only"] = dbus.Boolean(True)
        if self.egress is not None:
            d["egress"] = dbus.Array([str(c) for c in self.egress], signature="s")
        return dbus.Dictionary(d, signature="sv")


@dataclasses.dataclass
class SandboxInfo:
    id: str
    path: str
    state: str
    runtime_url: str
    token: str | None
    image: str
    bundle: str
    backend: str
    owner: int
    created_at: int  # µs since the epoch
    expires_at: int
    pool: str = ""  # the agentd warm pool it was claimed from; "" when made for its create
    ca: str | None = None  # https:// runtime_url: agentd's runtime CA (PEM), to verify it with


@dataclasses.dataclass
class SnapshotInfo:
    """A sandbox's filesystem as an image a create can name (its `image`)."""
    image: str
    sandbox_id: str  # the sandbox it was taken of
    owner: int
    created_at: int  # seconds since the epoch
    size: int  # bytes, with its base image


def _agentd_error(e):
    name = e.get_dbus_name() or ""
    message = e.get_dbus_message() or ""
    short = name.rsplit(".", 1)[-1]
    if short == "NoSuchSandbox":
        return SandboxGone(message)
    if name in ("org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"):
        return ServerUnreachable("agentd is not on the bus (is agentd.service running, and may you call it? "
                                 "root and the group agentix may)")
    if name == "org.freedesktop.DBus.Error.AccessDenied":
        return AgentdError("AccessDenied", message + " (only root and members of the group agentix may call agentd)")
    return AgentdError(short or name, message)


class AgentdDeployment:
    """agentd as a deployment backend: create, get, list and delete sandboxes."""

    def __init__(self):
        import dbus  # Debian's python3-dbus; imported here so the rest works without it
        self._dbus = dbus
        bus = os.environ.get("AGENTIX_BUS", "system")
        if bus not in ("system", "session"):
            raise ValueError(f"AGENTIX_BUS={bus!r}: say system or session")
        self._session = bus == "session"
        self._local = threading.local()
        self._connections = []
        self._pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="agentix-agentd")

    def _manager(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            dbus = self._dbus
            try:
                conn = dbus.SessionBus(private=True) if self._session else dbus.SystemBus(private=True)
            except dbus.DBusException as e:
                raise ServerUnreachable(f"Cannot reach the {'session' if self._session else 'system'} bus: "
                                        f"{e.get_dbus_message()}") from None
            self._local.conn = conn
            self._connections.append(conn)
        return conn, self._dbus.Interface(conn.get_object(NAME, PATH, introspect=False), MANAGER)

    async def _run(self, fn, *args):
        loop = asyncio.get_running_loop()

        def call():
            try:
                return fn(*args)
            except self._dbus.DBusException as e:
                raise _agentd_error(e) from None
        return await loop.run_in_executor(self._pool, call)

    def _info(self, path, with_token=True):
        conn, manager = self._manager()
        props = self._dbus.Interface(conn.get_object(NAME, path, introspect=False),
                                     "org.freedesktop.DBus.Properties").GetAll(SANDBOX, timeout=30)
        token = ca = None
        if with_token and props["State"] == "running":
            _, token = manager.GetRuntimeAccess(str(props["Id"]), timeout=30)
        if str(props["RuntimeUrl"]).startswith("https://"):
            ca = str(self._dbus.Interface(conn.get_object(NAME, "/org/agentix/Agentd1", introspect=False),
                                          "org.freedesktop.DBus.Properties").Get(MANAGER, "RuntimeCA", timeout=30))
        return SandboxInfo(id=str(props["Id"]), path=str(path), state=str(props["State"]),
                           runtime_url=str(props["RuntimeUrl"]), token=None if token is None else str(token),
                           image=str(props["Image"]), bundle=str(props["Bundle"]), backend=str(props["Backend"]),
                           owner=int(props["Owner"]), created_at=int(props["CreatedAt"]),
                           expires_at=int(props["ExpiresAt"]), pool=str(props.get("Pool", "")), ca=ca)

    async def create(self, config):
        """Make a sandbox; returns once its runtime answers (SandboxInfo, with its token)."""
        def create():
            _, manager = self._manager()
            path, sandbox_id = manager.CreateSandbox(config.to_dbus(), timeout=600)
            try:
                return self._info(path)
            except BaseException:
                # Made but not handed out: it must not outlive this call.
                try:
                    manager.DeleteSandbox(str(sandbox_id), timeout=120)
                except self._dbus.DBusException:
                    pass
                raise
        return await self._run(create)

    async def get(self, sandbox_id):
        def get():
            _, manager = self._manager()
            return self._info(manager.GetSandbox(str(sandbox_id), timeout=30))
        return await self._run(get)

    async def list(self):
        def ls():
            _, manager = self._manager()
            return [self._info(path, with_token=False) for _, _, _, path in manager.ListSandboxes(timeout=30)]
        return await self._run(ls)

    async def delete(self, sandbox_id):
        """Delete it; a sandbox already gone is no error."""
        def delete():
            _, manager = self._manager()
            try:
                manager.DeleteSandbox(str(sandbox_id), timeout=120)
            except self._dbus.DBusException as e:
                if not (e.get_dbus_name() or "").endswith(".NoSuchSandbox"):
                    raise
        await self._run(delete)

    def _sandbox(self, sandbox_id):
        """The Sandbox interface of one sandbox (from a worker thread)."""
        conn, manager = self._manager()
        path = manager.GetSandbox(str(sandbox_id), timeout=30)
        return self._dbus.Interface(conn.get_object(NAME, path, introspect=False), SANDBOX)

    async def extend(self, sandbox_id, seconds):
        await self._run(lambda: self._sandbox(sandbox_id).Extend(self._dbus.UInt64(seconds), timeout=30))

    async def logs(self, sandbox_id, lines=100):
        """The last `lines` lines its runtime wrote (its container's log), as one string."""
        return await self._run(lambda: str(self._sandbox(sandbox_id).Logs(self._dbus.UInt64(lines), timeout=60)))

    async def stats(self, sandbox_id):
        """What the sandbox uses now (Sandbox.GetStats; the owner's and root's only), as a dict:
        cpu_usec, cpu_percent (since the last reading: 100 = one CPU), memory_current,
        memory_peak, memory_limit, pids_current, pids_limit, net_rx_bytes, net_tx_bytes,
        io_read_bytes, io_write_bytes, time (µs since the epoch). A number agentd cannot tell
        is left out."""
        def get():
            raw = self._sandbox(sandbox_id).GetStats(timeout=30)
            return {str(k): float(v) if isinstance(v, self._dbus.Double) else int(v) for k, v in raw.items()}
        return await self._run(get)

    async def port_url(self, sandbox_id, port):
        """A port inside the sandbox through its runtime's proxy: (url, token). Requests carry the
        token as `Authorization: Bearer`, or once as `?agentix_token=` (a browser keeps a cookie)."""
        def get():
            _, manager = self._manager()
            url, token = manager.GetPortUrl(str(sandbox_id), self._dbus.UInt16(port), timeout=30)
            return str(url), str(token)
        return await self._run(get)

    async def pause(self, sandbox_id):
        """Freeze every process of the sandbox (state "paused"): calls to its runtime wait."""
        await self._run(lambda: self._sandbox(sandbox_id).Pause(timeout=120))

    async def resume(self, sandbox_id):
        """Thaw a paused sandbox: calls that waited go on. A hibernated one runs again from its
        checkpoint (its runtime URL may change: clients reconnect)."""
        await self._run(lambda: self._sandbox(sandbox_id).Resume(timeout=600))

    async def hibernate(self, sandbox_id):
        """Save its processes, memory and files to disk and stop it (state "hibernated"); resume()
        runs it again as it was. gVisor (runtime runsc) only: else NotSupported; an open TCP
        connection into or out of it: CheckpointFailed, naming it (it runs on untouched)."""
        await self._run(lambda: self._sandbox(sandbox_id).Hibernate(timeout=600))

    async def snapshot(self, sandbox_id, tag=None):
        """Commit its filesystem (not /nix, not its token) as an image; returns the image's name,
        which a create takes as its image."""
        options = self._dbus.Dictionary({} if tag is None else {"tag": str(tag)}, signature="sv")
        return await self._run(lambda: str(self._sandbox(sandbox_id).Snapshot(options, timeout=900)))

    async def list_snapshots(self):
        """The caller's snapshots (root: everyone's), as SnapshotInfo."""
        def ls():
            _, manager = self._manager()
            return [SnapshotInfo(image=str(i), sandbox_id=str(s), owner=int(o), created_at=int(c), size=int(n))
                    for i, s, o, c, n in manager.ListSnapshots(timeout=60)]
        return await self._run(ls)

    async def delete_snapshot(self, image):
        """Remove a snapshot (not while a sandbox runs from it)."""
        def delete():
            _, manager = self._manager()
            manager.DeleteSnapshot(str(image), timeout=120)
        await self._run(delete)

    def close(self):
        """Close the bus connections (sandboxes made with bind_to_caller go with them)."""
        self._pool.shutdown(wait=True)
        for conn in self._connections:
            conn.close()
        self._connections.clear()


@contextlib.asynccontextmanager
async def session(deployment, config, *, initial_files=None):
    """A sandbox for the block: created on entry, deleted on exit, also when the block raises."""
    from .sandbox import AgentixSandbox
    sandbox = await AgentixSandbox.create(deployment, config, initial_files=initial_files)
    try:
        yield sandbox
    finally:
        await sandbox.aclose()
