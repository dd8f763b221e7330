/**
 * How `keel` ends: closing the agent within a grace whatever a plugin does, and leaving the
 * process even when a tool or handler that ignored its signal keeps the event loop busy.
 */
import { abandonedWork } from "@keel/kernel";
import type { Agent } from "@keel/agent";

/** Exit status after Ctrl-C (SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** Exit status after SIGTERM (128 + 15): the running turn was cancelled and recorded interrupted. */
export const EXIT_TERMINATED = 143;

/** How long closing waits for background work after the turn (KEEL_EXIT_GRACE_MS overrides). */
export const DEFAULT_EXIT_GRACE_MS = 5_000;

/** The signals the CLI handles: Ctrl-C and SIGTERM. */
export type CliSignal = "SIGINT" | "SIGTERM";

/**
 * The CLI's one SIGINT and SIGTERM listener, installed before the agent is built and kept for
 * the rest of the process (opening the session, the turn, settling, closing, the exit linger).
 * What a signal does is the current phase's action (the innermost `onSignal`); with none, the
 * signal does what it would do if keel did not listen (ends the process, or whatever another
 * listener does, e.g. a plugin that ends its child processes first).
 *
 * Why one listener and not one per phase: Node runs a signal's listeners a little after the
 * signal arrived (libuv queues it for the signal's handle, the event loop reads it later), and a
 * signal queued for a handle that was closed in between is dropped. Removing a phase's listener
 * as it ended (the turn) closed the handle when it was the last one, and the next phase (closing)
 * opened a new one: a Ctrl-C sent just as the turn ended was lost, and the process waited out the
 * exit grace. The listener here stays, so a signal goes to whichever phase is current when it is read.
 */
const signals: { actions: Array<(signal: CliSignal) => void>; err: (text: string) => void } = {
  actions: [],
  err: (text) => void process.stderr.write(text),
};
const CLI_SIGNALS = ["SIGINT", "SIGTERM"] as const;

function onProcessSignal(signal: CliSignal): void {
  const action = signals.actions.at(-1);
  if (action) return action(signal);
  // No phase handles it: as if keel did not listen. Removing the listeners restores the default
  // action when no one else listens; the signal sent again then ends the process by it.
  for (const s of CLI_SIGNALS) process.off(s, onProcessSignal);
  process.kill(process.pid, signal);
}

/**
 * Take over SIGINT and SIGTERM for the rest of the process (idempotent); `err` says what a signal did.
 * Whether keel listens is read from the process, not remembered: a plugin that removed every listener
 * (`process.removeAllListeners("SIGINT")` in its setup) must not leave the turn without its Ctrl-C.
 */
export function ownSignals(err: (text: string) => void): void {
  signals.err = err;
  for (const s of CLI_SIGNALS)
    if (!process.listeners(s).some((l) => l === onProcessSignal)) process.on(s, onProcessSignal);
}

/**
 * Make `action` what SIGINT and SIGTERM do until the returned function is called (then the
 * enclosing phase's action is back). Contract: installs the listener if needed.
 */
export function onSignal(action: (signal: CliSignal) => void): () => void {
  ownSignals(signals.err);
  const entry = (signal: CliSignal) => action(signal);
  signals.actions.push(entry);
  return () => {
    const at = signals.actions.lastIndexOf(entry);
    if (at >= 0) signals.actions.splice(at, 1);
  };
}

/** While keel eval refuses process.exit (eval-guard.ts), the exit it replaced: Keel's own exits (a second Ctrl-C) take it. */
export const heldExit: { original?: typeof process.exit | undefined } = {};

/** Say `text` on stderr and exit at once: 130 after SIGINT, 143 after SIGTERM. */
export function exitNow(signal: CliSignal, text: string): never {
  signals.err(text);
  return (heldExit.original ?? process.exit).call(process, signal === "SIGTERM" ? EXIT_TERMINATED : EXIT_INTERRUPTED);
}

/**
 * Close the agent within the exit grace (plus 1 s for session.end), whatever a plugin does.
 * Contract: resolves within KEEL_EXIT_GRACE_MS + 1 s; Ctrl-C while closing exits 130 at once, SIGTERM 143.
 */
export async function closeWithin(agent: Agent, env: NodeJS.ProcessEnv, err: (text: string) => void): Promise<void> {
  const raw = Number(env.KEEL_EXIT_GRACE_MS);
  const graceMs =
    env.KEEL_EXIT_GRACE_MS !== undefined && Number.isFinite(raw) && raw >= 0 ? raw : DEFAULT_EXIT_GRACE_MS;
  const offSignals = onSignal((signal) =>
    exitNow(signal, `keel: ${signal === "SIGTERM" ? "terminated" : "interrupted"} while closing; exiting now\n`),
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), graceMs + 1_000)));
  try {
    const how = await Promise.race([
      agent.close({ graceMs }).then(
        () => "closed" as const,
        () => "closed" as const,
      ),
      late,
    ]);
    if (how === "late")
      err(`keel: closing did not finish within ${graceMs + 1_000} ms; leaving it${describeAbandoned()}\n`);
  } finally {
    clearTimeout(timer);
    offSignals();
  }
}

function describeAbandoned(): string {
  const left = abandonedWork();
  return left.length
    ? ` (still running: ${left.slice(0, 8).join(", ")}${left.length > 8 ? `, +${left.length - 8} more` : ""})`
    : "";
}

/**
 * After `main` returned: let the process end on its own, and if something (a tool or handler that
 * ignored its abort signal, a stray timer or socket) still keeps it alive after `lingerMs`, say
 * what on stderr and exit with `code` once stdout and stderr are flushed. Contract: the process
 * ends within `lingerMs` of the call unless a reader is still taking the output.
 */
export function exitWhenDone(code: number, err: (text: string) => void, lingerMs = 200): void {
  process.exitCode = code;
  // A signal from here on (a second Ctrl-C during the linger, or one caught with the first and read
  // after main returned) exits at once with its status, like one while closing; the listener is
  // unref'd, so it keeps nothing alive.
  onSignal((signal) =>
    exitNow(signal, `keel: ${signal === "SIGTERM" ? "terminated" : "interrupted"} while exiting; exiting now\n`),
  );
  // Output a slow reader has not taken yet is waited for (it is what the user asked for).
  const unflushed = (s: NodeJS.WriteStream) => !s.destroyed && s.writableLength > 0;
  const exit = () => {
    if (unflushed(process.stdout) || unflushed(process.stderr)) return void setTimeout(exit, 100).unref();
    // A fault recorded after main returned (a plugin timer during the linger) may have raised it.
    process.exit(typeof process.exitCode === "number" && process.exitCode !== 0 ? process.exitCode : code);
  };
  const timer = setTimeout(() => {
    const handles = process
      .getActiveResourcesInfo()
      .filter((r) => r !== "TTYWrap" && r !== "PipeWrap" && r !== "FSReqCallback");
    const counts = [...handles.reduce((m, r) => m.set(r, (m.get(r) ?? 0) + 1), new Map<string, number>())]
      .map(([r, n]) => `${n} ${r}`)
      .join(", ");
    err(
      `keel: exiting while work is still running${describeAbandoned() || (counts ? ` (open: ${counts})` : "")}; it was abandoned.\n`,
    );
    exit();
  }, lingerMs);
  timer.unref();
}

/**
 * A long-running command's stop: resolves with the first SIGINT/SIGTERM; another while it stops
 * exits at once. Contract: `off` unregisters it once the command has closed.
 */
export function stopSignal(): { stopped: Promise<CliSignal>; off: () => void } {
  let off = () => {};
  const stopped = new Promise<CliSignal>((resolve) => {
    let stopping = false;
    off = onSignal((signal) => {
      if (stopping)
        exitNow(signal, `keel: ${signal === "SIGTERM" ? "terminated" : "interrupted"} while stopping; exiting now\n`);
      stopping = true;
      resolve(signal);
    });
  });
  return { stopped, off };
}
