# SPDX-License-Identifier: MIT
"""agentix for Python: drive agentix sandboxes from asyncio.

- RuntimeClient: remote calls into a sandbox's runtime (unary, stream, bidi; cancel, deadlines,
  resume after a reconnect), persistent shell sessions (open_shell(): ShellSession) and code
  contexts on Jupyter kernels (run_code(), create_code_context(): CodeContext, Execution).
- AgentdDeployment, SandboxConfig, session(): create, get and delete sandboxes through agentd
  on D-Bus.
- AgentixSandbox: a sandbox with the deepagents backend methods (execute, upload_files,
  download_files, read, write, edit, ls_info, grep_raw, glob_info), a deepagents BaseSandbox
  when deepagents is importable.
"""

from .errors import (AgentdError, AgentixError, ArgumentError, Cancelled, ConnectionLost, ContextBusy,
                     ContextNotFound, DeadlineExceeded, KernelNotFound, NoSuchCallable, RemoteError, ResultUnavailable,
                     SandboxGone, ServerUnreachable, SessionBusy, SessionNotFound, Unauthorized, WorkerDied)
from .deployment import AgentdDeployment, SandboxConfig, SandboxInfo, SnapshotInfo, session
from .runtime import Channel, CodeContext, Execution, RuntimeClient, ShellSession, Stream
from .sandbox import AgentixSandbox

__version__ = "0.1.0"

__all__ = ["RuntimeClient", "Stream", "Channel", "ShellSession", "CodeContext", "Execution", "ContextNotFound",
           "ContextBusy", "KernelNotFound", "SessionNotFound", "SessionBusy", "AgentdDeployment", "SandboxConfig",
           "SandboxInfo", "SnapshotInfo", "session",
           "AgentixSandbox", "AgentixError", "RemoteError", "ArgumentError", "Cancelled",
           "ConnectionLost", "DeadlineExceeded", "NoSuchCallable", "ResultUnavailable", "SandboxGone",
           "ServerUnreachable", "Unauthorized", "WorkerDied", "AgentdError"]
