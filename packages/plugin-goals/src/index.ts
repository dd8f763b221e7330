/**
 * @keel/plugin-goals — Zeph's goal lifecycle and autonomous goal execution. Each session has a
 * goal state (idle → active → completed): a user's message opens a goal, a final answer with a
 * completion phrase (or the supervisor, or the host) closes it. The state is stored in the
 * goals database and logged as diagnostics for operators; the model sees it only with
 * `prompt: true`. `runGoal()` drives a session toward a goal without user input.
 */
import { join } from "node:path";
import { z } from "zod";
import type { Agent, ContributionInputOf } from "@keel/agent";
import { definePlugin } from "@keel/kernel";
import { defaultKeelHome } from "@keel/safe-path";
import { truncate } from "@keel/text";
import { completionPhrase, DEFAULT_PHRASES } from "./phrases.ts";
import { GoalStore } from "./store.ts";
import { runGoal } from "./run.ts";
import type { GoalRunOptions } from "./run.ts";

export { completionPhrase, DEFAULT_PHRASES } from "./phrases.ts";
export { GoalStore } from "./store.ts";
export type { GoalRecord, RunRecord, RunStatus } from "./store.ts";
export { runGoal } from "./run.ts";
export type { GoalRunOptions, GoalRunResult } from "./run.ts";
export { parseVerdict, superviseGoal } from "./supervisor.ts";
export type { SupervisorOutcome } from "./supervisor.ts";

export const PLUGIN_NAME = "@keel/plugin-goals";
export const PLUGIN_VERSION = "0.1.0";

/** Options of goals(). Contract: all optional. */
export interface GoalsOptions {
  /** The goals database; default `<KEEL_HOME>/goals.sqlite`. */
  path?: string;
  /** Phrases in a final answer that complete the goal (case-insensitive, whole words). */
  phrases?: readonly string[];
  /** Show the active goal to the model as a prompt section. Default false (operators only). */
  prompt?: boolean;
}

const Options = z.strictObject({
  path: z.string().min(1).optional(),
  phrases: z.array(z.string().min(2)).min(1).optional(),
  prompt: z.boolean().default(false),
});

/** The goals database at `path`, or `goals.sqlite` in `home` (default KEEL_HOME, else ~/.keel). Contract: the caller closes it. */
export function goalStore(path?: string, home: string = defaultKeelHome()): GoalStore {
  return new GoalStore(path ?? join(home, "goals.sqlite"));
}

/** The plugin. Contract: never blocks a turn; never shows the goal to the model unless `prompt`. */
export function goals(options: GoalsOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Goal lifecycle per session, and autonomous goal runs with a supervisor.",
    options: Options,
    input: options as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as z.output<typeof Options>;
      const store = goalStore(o.path, ctx.storage.home);
      const phrases = o.phrases ?? DEFAULT_PHRASES;
      // Runs a crashed process left behind are found once, when the agent starts.
      let orphans = store.markOrphans();
      const open = new Set<string>();

      ctx.on("session.start", (e) => {
        open.add(e.sessionId);
        if (!orphans.length) return undefined;
        const found = orphans;
        orphans = [];
        return {
          kind: "diagnostic",
          level: "warn",
          code: "GOAL_RUNS_ORPHANED",
          message: `${found.length} autonomous goal run(s) were left running by a process that stopped, and are now marked orphaned: ${found.map((r) => `${r.id} (session ${r.sessionId}, ${r.turns} turn(s))`).join(", ")}. Start them again with runGoal or keel goal.`,
          data: { runs: found.map((r) => ({ id: r.id, sessionId: r.sessionId, turns: r.turns })) },
        };
      });

      ctx.on("turn.pre_prompt_compile", (e) => {
        const out: Array<ContributionInputOf<"prompt_section"> | ContributionInputOf<"diagnostic">> = [];
        let g = store.goal(e.sessionId);
        // A person's new message opens a goal when none is open (an autonomous run sets its own).
        if (
          g.status !== "active" &&
          e.trigger === "user" &&
          !(e.metadata as { goalRun?: unknown }).goalRun &&
          e.input.trim()
        ) {
          g = store.setGoal({ sessionId: e.sessionId, status: "active", goal: e.input });
          out.push({
            kind: "diagnostic",
            level: "info",
            code: "goal.active",
            message: `Goal: ${truncate(g.goal ?? "", 200)}`,
            data: { goal: g.goal ?? "" },
          });
        }
        if (o.prompt && g.status === "active" && g.goal)
          out.push({
            kind: "prompt_section",
            id: "goals:current",
            sectionId: "current_goal",
            domain: "goals",
            title: "Current goal",
            content: g.goal,
          });
        return out.length ? out : undefined;
      });

      ctx.on("turn.post_turn", (e) => {
        // An autonomous run decides for its own turns (its supervisor may reject the claim).
        if ((e.metadata as { goalRun?: unknown }).goalRun) return undefined;
        const g = store.goal(e.sessionId);
        if (g.status !== "active" || e.verdict.status !== "completed") return undefined;
        const said = completionPhrase(e.finalText, phrases);
        if (!said) return undefined;
        store.setGoal({ sessionId: e.sessionId, status: "completed", goal: g.goal ?? "", completedBy: "phrase" });
        return {
          kind: "diagnostic",
          level: "info",
          code: "goal.completed",
          message: `Goal completed (the agent said "${said}"): ${truncate(g.goal ?? "", 200)}`,
          data: { goal: g.goal ?? "", by: "phrase" },
        };
      });

      ctx.on("session.end", (e) => {
        open.delete(e.sessionId);
        if (!open.size) store.close();
        return undefined;
      });
    },
  });
}

/**
 * A worker's source of orphaned goal runs (a @keel/worker WorkSource, for `keel worker`): each
 * run whose process stopped is claimed (GoalStore.claimOrphans) and goes on in its session,
 * with its turn count, until it ends as usual. Contract: two workers on one goals database
 * never run one run twice; a run handed back by a stopping worker is orphaned again.
 */
export function goalRunWork(options: {
  store: GoalStore;
  supervisor?: GoalRunOptions["supervisor"];
  continuePrompt?: string;
}): {
  name: string;
  claim(
    agent: Agent,
    limit: number,
  ): Promise<Array<{ id: string; sessionId: string; run(signal: AbortSignal): Promise<string> }>>;
} {
  return {
    name: "goal-runs",
    claim: async (agent, limit) =>
      options.store.claimOrphans(limit).map((run) => ({
        id: run.id,
        sessionId: run.sessionId,
        run: async (signal) => {
          const session = await agent.session(run.sessionId);
          try {
            const r = await runGoal(session, {
              goal: run.goal,
              store: options.store,
              resume: run,
              signal,
              ...(options.supervisor ? { supervisor: options.supervisor } : {}),
              ...(options.continuePrompt ? { continuePrompt: options.continuePrompt } : {}),
            });
            return `${r.status} after ${r.turns} turn(s): ${r.reason}`;
          } finally {
            await session.close();
          }
        },
      })),
  };
}

export default goals;
