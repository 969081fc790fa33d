# SPDX-License-Identifier: MIT
"""Errors: what a remote call failed with (its `type` as a class), and what stops a client from
reaching a runtime or agentd at all. Every message says what to do about it."""


class AgentixError(Exception):
    """Base of every agentix error."""


class ServerUnreachable(AgentixError, ConnectionError):
    """No runtime answers at the URL (not started, wrong port, or the sandbox is gone)."""


class Unauthorized(AgentixError):
    """The runtime refused the token."""


class ConnectionLost(AgentixError, ConnectionError):
    """The connection dropped and could not be made again within the client's retry budget."""


class SandboxGone(AgentixError):
    """agentd has no such sandbox (deleted, expired, or never made)."""


class AgentdError(AgentixError):
    """agentd refused a request: `name` is its org.agentix.Agentd1 error (InvalidConfig, ImageNotFound,
    BundleNotFound, BackendUnavailable, StartFailed, TooManySandboxes, NotOwner, …)."""

    def __init__(self, name, message):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class RemoteError(AgentixError):
    """A call ended with `call:error`. `type` is the server's stable error type (the class says it
    too, for the known ones), `message`, `traceback` and `returncode` (WorkerDied) as sent."""

    type = "RemoteError"

    def __init__(self, error):
        self.error = dict(error)
        self.type = self.error.get("type", type(self).type)
        self.message = self.error.get("message", "")
        self.traceback = self.error.get("traceback")
        self.cancelled = bool(self.error.get("cancelled", False))
        self.returncode = self.error.get("returncode")
        super().__init__(f"{self.type}: {self.message}")


def _kind(name, doc):
    return type(name, (RemoteError,), {"type": name, "__doc__": doc})


BadRequest = _kind("BadRequest", "The server could not read the call.")
NoSuchCallable = _kind("NoSuchCallable", "No function by that name in the sandbox's modules.")
ArgumentError = _kind("ArgumentError", "An argument does not fit the function's signature (the message names it).")
Cancelled = _kind("Cancelled", "The call was cancelled.")
DeadlineExceeded = _kind("DeadlineExceeded", "The call's deadline passed before it finished.")
WorkerDied = _kind("WorkerDied", "The worker running the call died (returncode says how); the next call gets a new one.")
ResultUnavailable = _kind("ResultUnavailable", "The server no longer has the call's result (after a reconnect).")
MessageTooLarge = _kind("MessageTooLarge", "A message was larger than the server accepts.")
RemoteUnauthorized = _kind("Unauthorized", "The server refused the token.")
SessionNotFound = _kind("SessionNotFound", "No shell session by that id (or it ended).")
SessionBusy = _kind("SessionBusy", "The shell session is running a command.")
ContextNotFound = _kind("ContextNotFound", "No code context by that id (or it was deleted).")
ContextBusy = _kind("ContextBusy", "Too many runs wait on the code context already.")
KernelNotFound = _kind("KernelNotFound", "No Jupyter kernel for that language in the sandbox (the message lists "
                                         "those there are).")

_BY_TYPE = {c.type: c for c in (BadRequest, NoSuchCallable, ArgumentError, Cancelled, DeadlineExceeded, WorkerDied,
                                ResultUnavailable, MessageTooLarge, RemoteUnauthorized, SessionNotFound, SessionBusy,
                                ContextNotFound, ContextBusy, KernelNotFound)}


def remote_error(error):
    """The exception for a call:error's `error` map."""
    return _BY_TYPE.get(error.get("type"), RemoteError)(error)
