/**
 * How `keel` ends: closing the agent within a grace whatever a plugin does, and leaving the
 * process even when a tool or handler that ignored its signal keeps the event loop busy.
 */
import { abandonedWork } from "@keel/kernel";
import type { Agent } from "@keel/kernel";

/** Exit status after Ctrl-C (SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** Exit status after SIGTERM (128 + 15): the running turn was cancelled and recorded interrupted. */
export const EXIT_TERMINATED = 143;

/** How long closing waits for background work after the turn (KEEL_EXIT_GRACE_MS overrides). */
export const DEFAULT_EXIT_GRACE_MS = 5_000;

/**
 * Close the agent within the exit grace (plus 1 s for session.end), whatever a plugin does.
 * Contract: resolves within KEEL_EXIT_GRACE_MS + 1 s; Ctrl-C while closing exits 130 at once, SIGTERM 143.
 */
export async function closeWithin(agent: Agent, env: NodeJS.ProcessEnv, err: (text: string) => void): Promise<void> {
  const raw = Number(env.KEEL_EXIT_GRACE_MS);
  const graceMs =
    env.KEEL_EXIT_GRACE_MS !== undefined && Number.isFinite(raw) && raw >= 0 ? raw : DEFAULT_EXIT_GRACE_MS;
  const quit = (signal: NodeJS.Signals) => {
    err(`keel: ${signal === "SIGTERM" ? "terminated" : "interrupted"} while closing; exiting now\n`);
    process.exit(signal === "SIGTERM" ? EXIT_TERMINATED : EXIT_INTERRUPTED);
  };
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
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
    process.off("SIGINT", quit);
    process.off("SIGTERM", quit);
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
