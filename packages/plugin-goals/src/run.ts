/**
 * Autonomous goal runs (Zeph's AutonomousDriver and GoalSupervisor): the session works toward
 * a goal turn after turn without user input until the goal is met, the turn limit is hit, it
 * is stopped, or the supervisor cannot be reached K times in a row (circuit breaker: the run
 * pauses). The supervisor is an independent model call every N turns; a 429 defers it to the
 * next turn instead of sleeping. The run is recorded in the goals database with its process.
 */
import { randomUUID } from "node:crypto";
import type { ModelProvider, Session, TurnResult } from "@keel/agent";
import { errorMessage, KeelError } from "@keel/kernel";
import { completionPhrase, DEFAULT_PHRASES } from "./phrases.ts";
import type { GoalStore, RunRecord, RunStatus } from "./store.ts";
import { superviseGoal } from "./supervisor.ts";

/** How an autonomous run goes. Contract: all optional but `goal` and `store`. */
export interface GoalRunOptions {
  goal: string;
  store: GoalStore;
  /** Most turns (default 50). */
  maxTurns?: number;
  /** What the agent is told on each turn after the first. */
  continuePrompt?: string;
  /** Phrases in a final answer that say the goal is done (default DEFAULT_PHRASES). */
  phrases?: readonly string[];
  /** The independent check; without a model, only the completion phrase ends a run. */
  supervisor?: { model?: ModelProvider; every?: number; maxFails?: number; timeoutMs?: number };
  /** Identical final answers in a row that end the run as stuck (default 3). */
  stuckAfter?: number;
  /**
   * Dollars the whole run may spend (its turns' reported `costUsd`, children included). Each turn
   * gets the budget left as its `maxCostUsd`, so a request that would pass it is never sent; a run
   * that reaches it pauses with a reason starting `budget` (as a managed agent pauses on
   * budget_reached). A resumed run counts what its earlier turns spent, from the session's log.
   */
  maxCostUsd?: number;
  /** Pause between turns, ms (default 0). */
  turnDelayMs?: number;
  signal?: AbortSignal;
  /** Told after every turn. */
  onTurn?: (turn: number, result: TurnResult) => void;
  /**
   * Go on with this run (one whose process stopped: GoalStore.claimOrphans) instead of starting
   * one: its turns count, the next turn continues the work, and the run keeps its id.
   */
  resume?: RunRecord;
}

/** How the run ended. Contract: `status` is never `running`. */
export interface GoalRunResult {
  run: RunRecord;
  status: Exclude<RunStatus, "running" | "orphaned">;
  turns: number;
  reason: string;
}

const CONTINUE =
  'Continue working toward the goal on your own; nobody will answer questions. When the goal is fully achieved, say "GOAL COMPLETE" in your final answer.';

/** Run `session` autonomously toward `options.goal`. Contract: throws only for bad options; every ending is recorded. */
export async function runGoal(session: Session, options: GoalRunOptions): Promise<GoalRunResult> {
  const maxTurns = options.maxTurns ?? options.resume?.maxTurns ?? 50;
  const every = options.supervisor?.every ?? 5;
  const maxFails = options.supervisor?.maxFails ?? 3;
  const stuckAfter = options.stuckAfter ?? 3;
  const timeoutMs = options.supervisor?.timeoutMs ?? 30_000;
  const delay = options.turnDelayMs ?? 0;
  const phrases = options.phrases ?? DEFAULT_PHRASES;
  // Everything is checked before the run is recorded: a bad option never leaves a run "running".
  if (typeof options.goal !== "string" || !options.goal.trim())
    throw new KeelError("KEEL_CONFIG_INVALID", "runGoal needs a goal.", { path: "goal" });
  for (const [k, v, min] of [
    ["maxTurns", maxTurns, 1],
    ["supervisor.every", every, 1],
    ["supervisor.maxFails", maxFails, 1],
    ["stuckAfter", stuckAfter, 2],
  ] as const)
    if (!Number.isInteger(v) || v < min)
      throw new KeelError("KEEL_CONFIG_INVALID", `runGoal: ${k} must be a whole number ≥ ${min} (got ${String(v)}).`, {
        path: k,
      });
  for (const [k, v] of [
    ["supervisor.timeoutMs", timeoutMs],
    ["turnDelayMs", delay],
  ] as const)
    if (!Number.isInteger(v) || v < 0 || v > 2_147_483_647 || (k === "supervisor.timeoutMs" && v < 1))
      throw new KeelError("KEEL_CONFIG_INVALID", `runGoal: ${k} must be a whole number of ms (got ${String(v)}).`, {
        path: k,
      });
  if (!Array.isArray(phrases) || !phrases.every((p) => typeof p === "string" && p.trim().length >= 2))
    throw new KeelError("KEEL_CONFIG_INVALID", "runGoal: phrases must be a list of strings of 2 or more characters.", {
      path: "phrases",
    });
  if (
    options.maxCostUsd !== undefined &&
    !(typeof options.maxCostUsd === "number" && options.maxCostUsd > 0 && Number.isFinite(options.maxCostUsd))
  )
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `runGoal: maxCostUsd must be a positive number of dollars (got ${String(options.maxCostUsd)}).`,
      {
        path: "maxCostUsd",
      },
    );
  if (options.onTurn !== undefined && typeof options.onTurn !== "function")
    throw new KeelError("KEEL_CONFIG_INVALID", "runGoal: onTurn must be a function.", { path: "onTurn" });
  const store = options.store;
  store.markOrphans();
  const before = store.goal(session.id);
  let run = options.resume ?? store.startRun({ id: randomUUID(), sessionId: session.id, goal: options.goal, maxTurns });
  const first = (options.resume?.turns ?? 0) + 1;
  const model = options.supervisor?.model;
  let fails = 0;
  let verifyDue = false;
  let same = 0;
  let last: string | undefined;
  const end = (status: GoalRunResult["status"], reason: string, extra: Partial<RunRecord> = {}): GoalRunResult => {
    run = store.updateRun(run.id, { status, reason, ...extra });
    if (status === "achieved")
      store.setGoal({
        sessionId: session.id,
        status: "completed",
        goal: options.goal,
        completedBy: extra.verdict ? "supervisor" : "phrase",
      });
    return { run, status, turns: run.turns, reason };
  };
  const budget = options.maxCostUsd;
  let spent = budget !== undefined && options.resume ? await spentBy(session, run.id) : 0;
  const overBudget = (turn: number) =>
    end(
      "paused",
      `budget: the run spent $${spent.toFixed(4)} of its $${budget!.toFixed(4)} budget (maxCostUsd) by turn ${turn}; raise the budget (keel goal --budget) and run the goal again`,
    );
  const onAbort = () => session.cancel(options.signal?.reason);
  options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (let turn = first; ; turn++) {
      if (options.signal?.aborted) return end("stopped", "stopped by the host");
      if (turn > maxTurns) return end("limit", `the turn limit (${maxTurns}) was reached before the goal`);
      if (budget !== undefined && spent >= budget) return overBudget(turn - 1);
      let r: TurnResult;
      try {
        // A run that goes on was given its goal already (that turn's input is in the log): it continues.
        const opening = turn === 1 && !options.resume;
        if (opening) store.setGoal({ sessionId: session.id, status: "active", goal: options.goal });
        r = await session.run(opening ? options.goal : (options.continuePrompt ?? CONTINUE), {
          metadata: { goalRun: { id: run.id, turn } },
          ...(budget !== undefined ? { maxCostUsd: budget - spent } : {}),
        });
      } catch (err) {
        // Refused at once (a busy session, bad input): the session keeps the goal it had.
        if (turn === 1 && !options.resume)
          store.setGoal({
            sessionId: session.id,
            status: before.status,
            ...(before.goal ? { goal: before.goal } : {}),
            ...(before.completedBy ? { completedBy: before.completedBy } : {}),
          });
        return end("failed", `turn ${turn} could not run: ${errorMessage(err)}`);
      }
      run = store.updateRun(run.id, { turns: turn });
      spent += r.usage.costUsd ?? 0;
      try {
        options.onTurn?.(turn, r);
      } catch {
        // The host's callback is told, not trusted: its throw does not end the run.
      }
      if (r.verdict.status === "interrupted" && r.verdict.reason === "handed_back") {
        // A stopping worker gave the turn back: the run is left for the next worker to go on with.
        run = store.updateRun(run.id, {
          status: "orphaned",
          reason: `turn ${turn} was handed back by a stopping worker`,
        });
        return { run, status: "stopped", turns: run.turns, reason: run.reason ?? "handed back" };
      }
      if (r.verdict.status === "interrupted")
        return end("stopped", `turn ${turn} was interrupted (${r.verdict.reason})`);
      if (r.verdict.status === "paused")
        return end(
          "paused",
          `turn ${turn} waits for approval of ${r.verdict.pending.join(", ")}; answer it, then run the goal again`,
        );
      if (r.verdict.status === "failed") return end("failed", `turn ${turn} failed: ${r.verdict.code}`);
      if (r.verdict.status === "stopped" && r.verdict.reason === "budget")
        return end(
          "paused",
          `budget: turn ${turn} stopped before a request that would pass a spending limit (the run spent $${spent.toFixed(4)}${budget !== undefined ? ` of its $${budget.toFixed(4)} budget` : ""}): ${r.verdict.detail ?? "no detail"}`,
        );
      const claimed = completionPhrase(r.text, phrases);
      same = r.text && r.text === last ? same + 1 : 0;
      last = r.text;
      if (same + 1 >= stuckAfter) return end("stuck", `the last ${same + 1} answers were identical`);
      if (claimed && !model) return end("achieved", `the agent said "${claimed}"`);
      if (model && (claimed || verifyDue || turn % every === 0)) {
        const v = await superviseGoal(model, options.goal, session.messages, {
          timeoutMs,
          ...(options.signal ? { signal: options.signal } : {}),
        });
        if (v.kind === "deferred") verifyDue = true;
        else if (v.kind === "failed") {
          verifyDue = false;
          fails++;
          run = store.updateRun(run.id, { supervisorFails: fails, reason: v.error });
          if (fails >= maxFails)
            return end("paused", `the supervisor failed ${fails} times in a row (last: ${v.error}); the run paused`);
        } else {
          verifyDue = false;
          fails = 0;
          run = store.updateRun(run.id, { supervisorFails: 0, verdict: { achieved: v.achieved, reason: v.reason } });
          if (v.achieved)
            return end("achieved", `the supervisor confirmed it: ${v.reason}`, {
              verdict: { achieved: true, reason: v.reason },
            });
        }
      }
      if (delay) await sleep(delay, options.signal);
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * What the run's earlier turns spent, from the session's log (turns whose metadata names the run):
 * per turn, the larger of its last terminal usage (children included) and what its own requests cost
 * (model.responded, preflight.completed), since a turn that crashed ends with no usage at all.
 */
async function spentBy(session: Session, runId: string): Promise<number> {
  const ended = new Map<string, number>();
  const requested = new Map<string, number>();
  const add = (m: Map<string, number>, id: string, usage: unknown) => m.set(id, (m.get(id) ?? 0) + costOf(usage));
  for (const e of await session.events()) {
    if (!e.turnId) continue;
    if (e.type === "turn.started" && (e.metadata as { goalRun?: { id?: unknown } })?.goalRun?.id === runId)
      ended.set(e.turnId, ended.get(e.turnId) ?? 0);
    else if (!ended.has(e.turnId)) continue;
    else if (e.type === "model.responded" || e.type === "preflight.completed") add(requested, e.turnId, e.usage);
    // The last terminal event holds the whole turn (a resumed turn's counts what it spent before its pause).
    else if ("usage" in e && isTerminal(e.type)) ended.set(e.turnId, costOf(e.usage));
  }
  let spent = 0;
  for (const [id, cost] of ended) spent += Math.max(cost, requested.get(id) ?? 0);
  return spent;
}

/** A usage's costUsd when it is a finite, non-negative number, else 0. */
function costOf(usage: unknown): number {
  const c = (usage as { costUsd?: unknown } | undefined)?.costUsd;
  return typeof c === "number" && Number.isFinite(c) && c > 0 ? c : 0;
}

function isTerminal(type: string): boolean {
  return type === "turn.completed" || type === "turn.failed" || type === "turn.interrupted" || type === "turn.paused";
}

/** Wait `ms`, or less if `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
