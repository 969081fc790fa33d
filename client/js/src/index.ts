// SPDX-License-Identifier: MIT
// @agentix/client: agentix sandboxes from TypeScript.
export * from "./errors.js";
export { RuntimeClient, sandboxTlsName, CallStream, Channel, ShellSession, CodeContext, Execution, type CodeItem, type CodeRunOptions, type CodeContextOptions, type CodeContextInfo, type ShellInfo, type ShellOpenOptions, type ShellRunOptions, type ShellRunResult, type CallOptions, type ConnectOptions, type ExecOptions, type ExecResult, type FileChange, type FileResult, type WatchOptions } from "./runtime.js";
export { SandboxManager, session, type SandboxConfig, type SandboxInfo, type SandboxStats, type SnapshotInfo } from "./manager.js";
