/**
 * `keel worker`: finishes the turns stopped processes left (@keel/worker), until SIGTERM or
 * Ctrl-C (running turns get the exit grace to end, then are handed back unfinished), or one
 * pass with --once (a cron job). One line per step on stdout; JSON lines with --json.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Agent } from "@keel/agent";
import { runWorker } from "@keel/worker";
import type { WorkerEvent, WorkSource } from "@keel/worker";
import { exitNow, onSignal } from "./exit.ts";
import type { CliEnv } from "./stdio.ts";

/** Run the worker for `agent`. Contract: exit 0 after a clean stop or pass, 1 when a session failed under --once. */
export async function workerCommand(
  agent: Agent,
  io: CliEnv,
  flags: { once?: boolean; json?: boolean; concurrency?: number },
  home: string,
): Promise<number> {
  // Goal runs (keel goal) keep their records in the home: orphaned ones go on here too, as keel goal would run them.
  const sources: WorkSource[] = [];
  let closeGoals = () => {};
  if (existsSync(join(home, "goals.sqlite"))) {
    const { GoalStore, goalRunWork } = await import("@keel/plugin-goals");
    const store = new GoalStore(join(home, "goals.sqlite"));
    closeGoals = () => store.close();
    const supervisor = agent.options.sideModel || agent.options.provider;
    sources.push(goalRunWork({ store, supervisor: { model: supervisor } }));
  }
  const stop = new AbortController();
  const off = onSignal((signal) => {
    if (stop.signal.aborted) exitNow(signal, "keel worker: a second signal; exiting now (the turns stay unfinished)\n");
    io.err(`keel worker: ${signal}; running turns get the grace to end, then are handed back\n`);
    stop.abort();
  });
  const ms = (name: string) => {
    const v = Number(io.env[name]);
    return io.env[name] !== undefined && Number.isFinite(v) && v >= 0 ? v : undefined;
  };
  const minIdleMs = ms("KEEL_WORKER_MIN_IDLE_MS");
  const intervalMs = ms("KEEL_WORKER_INTERVAL_MS");
  const maxBackoffMs = ms("KEEL_WORKER_MAX_BACKOFF_MS");
  const graceMs = ms("KEEL_EXIT_GRACE_MS");
  if (!flags.once) io.err(`keel worker: continuing the unfinished turns of agent "${agent.name}" (Ctrl-C stops)\n`);
  try {
    const report = await runWorker({
      agent,
      signal: stop.signal,
      sources,
      ...(flags.once ? { once: true } : {}),
      ...(flags.concurrency ? { concurrency: flags.concurrency } : {}),
      ...(minIdleMs !== undefined ? { minIdleMs } : {}),
      ...(intervalMs !== undefined ? { intervalMs } : {}),
      ...(maxBackoffMs !== undefined ? { maxBackoffMs } : {}),
      ...(graceMs !== undefined ? { graceMs } : {}),
      onEvent: (e) => {
        const line = flags.json ? JSON.stringify(e) : workerLine(e);
        if (line) io.out(`${line}\n`);
      },
    });
    const summary = `${report.finished} finished, ${report.failed} failed, ${report.handedBack} handed back`;
    if (flags.json) io.out(`${JSON.stringify({ type: "report", ...report })}\n`);
    else io.err(`keel worker: ${summary}\n`);
    return flags.once && report.failed ? 1 : 0;
  } finally {
    off();
    closeGoals();
  }
}

/** One step as a line (skips are only in --json: a busy session is seen every pass). */
/** One human line for a worker event (undefined: nothing to say). Contract: the outage line names its Keel code once. */
export function workerLine(e: WorkerEvent): string | undefined {
  switch (e.type) {
    case "claimed":
      return `claimed  ${e.turnId} (${e.state === "running" ? "left unfinished" : "approvals answered"})`;
    case "finished": {
      const v = e.verdict;
      return `finished ${e.turnId} ${v.status}${"reason" in v ? ` (${v.reason})` : ""} in ${e.ms} ms`;
    }
    case "failed":
      return `failed   ${e.sessionId}: ${e.code}: ${e.message}`;
    case "handed_back":
      return `handed back ${e.turnId}`;
    case "jobs":
      return `jobs     ${e.sessionId}: pending durable jobs run in ${e.ms} ms`;
    case "work":
      return `${e.source} ${e.id}: ${e.outcome}`;
    case "store_unavailable":
      return `store unavailable: ${e.message.startsWith(e.code) ? e.message : `${e.code}: ${e.message}`} (last successful poll ${e.lastPollAt ? new Date(e.lastPollAt).toISOString() : "never"}); retrying with backoff (next in ${e.backoffMs} ms), turns wait`;
    case "store_recovered":
      return `store back after ${e.downMs} ms (${e.failures} failed attempt${e.failures === 1 ? "" : "s"}); going on`;
    default:
      return undefined;
  }
}
