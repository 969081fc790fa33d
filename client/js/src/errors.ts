// SPDX-License-Identifier: MIT
// Errors: what a remote call failed with (its `type`, as a class for the known ones), and what
// stops a client from reaching a runtime or agentd at all. Every message says what to do.

export class AgentixError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No runtime answers at the URL (not started, wrong port, or the sandbox is gone). */
export class ServerUnreachable extends AgentixError {}
/** The runtime refused the token. */
export class Unauthorized extends AgentixError {}
/** The connection dropped and was not made again in time. */
export class ConnectionLost extends AgentixError {}
/** agentd has no such sandbox (deleted, expired, or never made). */
export class SandboxGone extends AgentixError {}

/** agentd refused a request: `dbusName` is its org.agentix.Agentd1 error. */
export class AgentdError extends AgentixError {
  constructor(readonly dbusName: string, readonly detail: string) {
    super(`${dbusName.split(".").pop()}: ${detail}`);
  }
}

export interface RemoteErrorInfo {
  type: string;
  message: string;
  traceback?: string | null;
  cancelled?: boolean;
  returncode?: number | null;
}

/** A call ended with `call:error`. */
export class RemoteError extends AgentixError {
  readonly type: string;
  readonly remoteMessage: string;
  readonly traceback?: string | null;
  readonly cancelled: boolean;
  readonly returncode?: number | null;

  constructor(readonly info: RemoteErrorInfo) {
    super(`${info.type}: ${info.message}`);
    this.type = info.type;
    this.remoteMessage = info.message;
    this.traceback = info.traceback;
    this.cancelled = Boolean(info.cancelled);
    this.returncode = info.returncode;
  }
}

export class BadRequest extends RemoteError {}
export class NoSuchCallable extends RemoteError {}
export class ArgumentError extends RemoteError {}
export class Cancelled extends RemoteError {}
export class DeadlineExceeded extends RemoteError {}
export class WorkerDied extends RemoteError {}
export class ResultUnavailable extends RemoteError {}
export class MessageTooLarge extends RemoteError {}
/** shell:: — no such session (or it ended). */
export class SessionNotFound extends RemoteError {}
/** shell:: — the session is running a command. */
export class SessionBusy extends RemoteError {}
/** code:: — no such code context (or it was deleted). */
export class ContextNotFound extends RemoteError {}
/** code:: — too many runs wait on the context already. */
export class ContextBusy extends RemoteError {}
/** code:: — no Jupyter kernel for that language in the sandbox (the message lists those there are). */
export class KernelNotFound extends RemoteError {}

const byType: Record<string, new (info: RemoteErrorInfo) => RemoteError> = {
  BadRequest, NoSuchCallable, ArgumentError, Cancelled, DeadlineExceeded, WorkerDied, ResultUnavailable,
  MessageTooLarge, SessionNotFound, SessionBusy, ContextNotFound, ContextBusy, KernelNotFound,
};

/** The error for a call:error's `error` map. */
export function remoteError(info: RemoteErrorInfo): RemoteError {
  const Kind = byType[info.type] ?? RemoteError;
  return new Kind(info);
}
