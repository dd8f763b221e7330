/**
 * The last line of defence against plugin and tool code that throws where no one awaits it
 * (a timer, a floating promise). Every handler, tool, job runner and setup call runs inside
 * a fault scope (AsyncLocalStorage), so an uncaught exception or unhandled rejection can be
 * traced to the plugin (and phase or tool) whose code scheduled it.
 *
 * Opt-in: `guardProcess(agent)` installs process handlers (and the scope carrier the kernel
 * marks scopes with); the host never installs them by itself, because an embedding app owns its process (the CLI opts in).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { FaultScope } from "@keel/kernel";
import { errorMessage, installFaultScopes, isKeelError, KeelError, preview } from "@keel/kernel";

/** Faults a guard records in the log; later ones are only counted and passed to `onFault`. */
export const MAX_RECORDED_FAULTS = 20;

/** Carries the running plugin/tool across its timers and promises. */
const faultScope = new AsyncLocalStorage<FaultScope>();
const carrier = {
  run: <T>(scope: FaultScope, fn: () => T): T => faultScope.run(scope, fn),
  current: () => faultScope.getStore(),
};

/** A fault caught at the process level. Contract: `error.code` is KEEL_PROCESS_FAULT; `plugin` is set when the scope knew it. */
export interface ProcessFault {
  /** `processExit`: the code called `process.exit()`; that cannot be stopped nor recorded (`turns` is empty), only reported. */
  source: "uncaughtException" | "unhandledRejection" | "processExit";
  /** The KEEL_PROCESS_FAULT error: its message names the plugin, phase and tool when known. */
  error: KeelError;
  plugin?: string;
  /** Turns that were open and were closed with a failed verdict. */
  turns: string[];
}

/** What a guard records a fault in: an Agent is one (it closes the open turns, failed, and returns their ids). */
export interface FaultTarget {
  recordFault(fault: { source: "uncaughtException" | "unhandledRejection"; error: KeelError }): string[];
}

/** How `guardProcess` reacts. */
export interface GuardOptions {
  /** Called after a fault is recorded (the CLI prints it). Contract: a throw here is ignored. */
  onFault?(fault: ProcessFault): void;
}

/** An installed guard. Contract: `uninstall` is idempotent and restores the process's own handling. */
export interface ProcessGuard {
  readonly faults: readonly ProcessFault[];
  uninstall(): void;
}

/** Whose code it was, in words: `plugin "p" (phase) tool "t"`, or "" when outside any. */
function whereOf(plugin: string | undefined, scope: { phase?: string; tool?: string } | undefined): string {
  const parts = [plugin ? `plugin "${plugin}"` : "", scope?.phase ? `(${scope.phase})` : ""];
  return [...parts, scope?.tool ? `tool "${scope.tool}"` : ""].filter(Boolean).join(" ");
}

/** The error location of a fault in a scope. */
function locationOf(plugin: string | undefined, scope: { phase?: string; tool?: string } | undefined) {
  return {
    ...(plugin ? { plugin } : {}),
    ...(scope?.phase ? { phase: scope.phase } : {}),
    ...(scope?.tool ? { tool: scope.tool } : {}),
  };
}

/**
 * Install process handlers for `target` (an agent, or a function giving the current one): an uncaught exception or unhandled rejection is
 * recorded as a `fault` event in every open session, the turns that are open are closed with
 * a failed verdict (KEEL_PROCESS_FAULT, naming the plugin when known) and `onFault` is told;
 * `process.exit()` called by plugin or tool code is reported to `onFault` (source `processExit`).
 * Contract: the process is not exited here; the host decides (the CLI exits non-zero).
 */
export function guardProcess(
  target: FaultTarget | (() => FaultTarget | undefined),
  options: GuardOptions = {},
): ProcessGuard {
  const faults: ProcessFault[] = [];
  const handle = (source: "uncaughtException" | "unhandledRejection", err: unknown): void => {
    const scope = faultScope.getStore();
    const plugin = scope?.plugin ?? (isKeelError(err) ? err.plugin : undefined);
    const where = whereOf(plugin, scope);
    const what = source === "uncaughtException" ? "An uncaught exception" : "An unhandled promise rejection";
    const error = new KeelError(
      "KEEL_PROCESS_FAULT",
      `${what} escaped ${where ? `code of ${where}` : "code outside any plugin or tool"}: ${preview(errorMessage(err), 300)}.`,
      {
        ...locationOf(plugin, scope),
      },
      { cause: err },
    );
    const fault: ProcessFault & { source: typeof source } = { source, error, ...(plugin ? { plugin } : {}), turns: [] };
    try {
      const agent = typeof target === "function" ? target() : target;
      // A timer that throws on every tick must not flood the log: the first faults are recorded.
      if (agent && faults.length < MAX_RECORDED_FAULTS) fault.turns = agent.recordFault(fault);
    } catch {
      // Recording must not turn one fault into a crash.
    }
    faults.push(fault);
    try {
      options.onFault?.(fault);
    } catch {
      // The host's callback failed; the fault is recorded either way.
    }
  };
  const onException = (err: unknown) => handle("uncaughtException", err);
  const onRejection = (reason: unknown) => handle("unhandledRejection", reason);
  // `exit` is emitted inside the process.exit() call, so the scope says whose code made it.
  const onExit = (code: number) => {
    const scope = faultScope.getStore();
    if (!scope?.plugin && !scope?.tool) return;
    const where = whereOf(scope.plugin, scope);
    const error = new KeelError(
      "KEEL_PROCESS_FAULT",
      `Code of ${where} called process.exit(${code}): unlike a thrown error this cannot be recorded nor the turn closed now; a turn it cut short is marked interrupted when its session is resumed.`,
      locationOf(scope.plugin, scope),
    );
    const fault: ProcessFault = {
      source: "processExit",
      error,
      ...(scope.plugin ? { plugin: scope.plugin } : {}),
      turns: [],
    };
    faults.push(fault);
    try {
      options.onFault?.(fault);
    } catch {
      // The host's callback failed; the process exits either way.
    }
  };
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  process.on("exit", onExit);
  const release = installFaultScopes(carrier);
  let installed = true;
  return {
    faults,
    uninstall() {
      if (!installed) return;
      installed = false;
      release();
      process.off("uncaughtException", onException);
      process.off("unhandledRejection", onRejection);
      process.off("exit", onExit);
    },
  };
}
