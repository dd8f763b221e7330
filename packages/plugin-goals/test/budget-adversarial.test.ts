/**
 * A goal run's budget against a crashed turn: the turn's terminal event (turn.interrupted, written
 * by whoever recovered the session) carries no usage, but its rounds' model.responded events do;
 * a resumed run must count them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import type { KeelEvent, ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { GoalStore, runGoal } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-goal-budget-adv-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** $3/M in, $15/M out; every answer reports 10,000 input and 100 output tokens ($0.0315). */
function priced(steps: ScriptStep[]) {
  const inner = scriptedProvider(steps.map((s) => ({ ...s, usage: { inputTokens: 10_000, outputTokens: 100 } })));
  const requests: ModelRequest[] = [];
  const provider: ModelProvider = {
    id: "x:priced",
    contextWindow: 200_000,
    price: { input: 3, output: 15 },
    async *stream(request, options): AsyncIterable<ModelEvent> {
      requests.push(request);
      yield* inner.stream(request, options);
    },
  };
  return { provider, requests };
}

describe("goal run budgets and a crashed turn", () => {
  it("a resumed run counts the spend of a turn that crashed (its model.responded events), not only terminal usage", async () => {
    const store = new MemorySessionStore();
    const db = new GoalStore(join(dir, "a.sqlite"));
    const first = priced([{ text: "one" }]);
    const a1 = await createAgent({ provider: first.provider, sideModel: false, store });
    const s1 = await a1.session();
    const r1 = await runGoal(s1, { goal: "Work", store: db, maxTurns: 1 });
    await a1.close();
    // Turn 2 of the run: one round answered ($0.0315), then the process died; recovery marked it interrupted (usage 0).
    const last = store.events(s1.id).at(-1)!.seq;
    const at = { sessionId: s1.id, turnId: "turn-crashed", ts: Date.now() };
    const zero = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const forged = [
      { type: "turn.started", input: "Continue.", trigger: "user", metadata: { goalRun: { id: r1.run.id, turn: 2 } } },
      {
        type: "model.responded",
        round: 1,
        stopReason: "tool_use",
        usage: { inputTokens: 10_000, outputTokens: 100, costUsd: 0.0315 },
        durationMs: 1,
        attempt: 1,
      },
      {
        type: "turn.interrupted",
        verdict: {
          status: "failed",
          reason: "interrupted",
          code: "KEEL_TURN_INTERRUPTED",
          message: "the process stopped",
        },
        usage: zero,
        rounds: 1,
        toolCalls: 0,
      },
    ].map((e, i) => ({ ...at, ...e, seq: last + 1 + i }) as unknown as KeelEvent);
    store.appendMany(forged);
    const second = priced([{ text: "never" }]);
    // maxTokens 100: the next request's estimate (~$0.0017) fits what the run would think is left ($0.0185).
    const a2 = await createAgent({
      provider: second.provider,
      sideModel: false,
      store,
      requestOptions: { maxTokens: 100 },
    });
    const s2 = await a2.session(s1.id);
    const r2 = await runGoal(s2, {
      goal: "Work",
      store: db,
      maxTurns: 5,
      maxCostUsd: 0.05,
      resume: { ...r1.run, status: "running" },
    });
    expect(second.requests).toHaveLength(0);
    expect(r2.status).toBe("paused");
    expect(r2.reason).toMatch(/^budget: the run spent \$0\.0630 of its \$0\.0500 budget/);
    db.close();
    await a2.close();
  });
});
