/**
 * A goal run's budget (runGoal maxCostUsd): each turn gets the budget left, so a request that
 * would pass it is never sent; the run pauses with reason `budget`; a resumed run counts what its
 * earlier turns spent from the session's log.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import type { ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { GoalStore, runGoal } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-goal-budget-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** $3/M in, $15/M out; every answer reports 10,000 input and 100 output tokens ($0.0315). */
function priced(steps: ScriptStep[]) {
  const inner = scriptedProvider(steps.map((s) => ({ ...s, usage: { inputTokens: 10_000, outputTokens: 100 } })));
  const requests: ModelRequest[] = [];
  const price = { input: 3, output: 15 };
  const provider: ModelProvider = {
    id: "x:priced",
    contextWindow: 200_000,
    price,
    async *stream(request, options): AsyncIterable<ModelEvent> {
      requests.push(request);
      for await (const e of inner.stream(request, options))
        yield e.type === "response"
          ? {
              ...e,
              usage: {
                ...e.usage,
                costUsd: ((e.usage.inputTokens ?? 0) * price.input + (e.usage.outputTokens ?? 0) * price.output) / 1e6,
              },
            }
          : e;
    },
  };
  return { provider, requests };
}

describe("goal run budgets", () => {
  it("a run pauses with reason budget once its turns spent the budget; the request over it is never sent", async () => {
    const { provider, requests } = priced([{ text: "step 1" }, { text: "step 2" }, { text: "step 3" }, { text: "4" }]);
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      requestOptions: { maxTokens: 100 },
    });
    const session = await agent.session();
    const db = new GoalStore(join(dir, "a.sqlite"));
    // Two turns fit ($0.063); the third request (about $0.0017 with maxTokens 100) would pass the $0.001 left.
    const r = await runGoal(session, { goal: "Keep going", store: db, maxTurns: 10, maxCostUsd: 0.064 });
    expect(requests).toHaveLength(2);
    expect(r.status).toBe("paused");
    expect(r.reason).toMatch(
      /^budget: turn 3 stopped before a request that would pass a spending limit \(the run spent \$0\.0630 of its \$0\.0640 budget\): KEEL_BUDGET_EXCEEDED: This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.0010/,
    );
    expect(db.runs({ sessionId: session.id })[0]).toMatchObject({ status: "paused", turns: 3 });
    db.close();
    await agent.close();
  });

  it("a resumed run counts its earlier turns' spend from the log and pauses at once when it is spent", async () => {
    const store = new MemorySessionStore();
    const db = new GoalStore(join(dir, "b.sqlite"));
    const first = priced([{ text: "one" }, { text: "two" }]);
    const a1 = await createAgent({ provider: first.provider, sideModel: false, store });
    const s1 = await a1.session();
    const r1 = await runGoal(s1, { goal: "Work", store: db, maxTurns: 2 });
    expect(r1.status).toBe("limit");
    await a1.close();
    const second = priced([{ text: "never" }]);
    const a2 = await createAgent({ provider: second.provider, sideModel: false, store });
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
    expect(r2.reason).toBe(
      "budget: the run spent $0.0630 of its $0.0500 budget (maxCostUsd) by turn 2; raise the budget (keel goal --budget) and run the goal again",
    );
    db.close();
    await a2.close();
  });

  it("a bad budget is refused before the run is recorded", async () => {
    const { provider } = priced([]);
    const agent = await createAgent({ provider, sideModel: false, store: new MemorySessionStore() });
    const db = new GoalStore(join(dir, "c.sqlite"));
    await expect(runGoal(await agent.session(), { goal: "x", store: db, maxCostUsd: -1 })).rejects.toThrow(
      /maxCostUsd must be a positive number/,
    );
    expect(db.runs()).toHaveLength(0);
    db.close();
    await agent.close();
  });
});
