/**
 * Parallel subagents within one dollar limit (issue 43, item 4): a child's share of the parent's
 * dollars is held for it while it runs, and held again a level down (a child's own children
 * reserve out of its share), so whatever the fan-out the providers are charged at most the
 * limit — here a session-level limit, `maxSessionCostUsd`, two levels deep. The fault suite's
 * class 19 runs the same over the wire (test/fault/budget.test.ts).
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, ModelProvider } from "@keel/kernel";
import { tasks } from "../src/index.ts";

/** $1,000 per million tokens in and out; at most 10 output tokens a request (the estimate's ceiling). */
const priced = (p: ModelProvider): ModelProvider =>
  Object.assign(p, { price: { input: 1_000, output: 1_000 }, maxOutputTokens: 10 });

describe("tasks within a dollar limit", () => {
  it("two leads each starting two leaves at once: the whole tree is charged within the parent's maxSessionCostUsd, and a leaf that cannot afford its request says budget", async () => {
    const store = new MemorySessionStore();
    // About 1,000 tokens of instructions: a leaf's request is estimated (and charged) about $1.
    const leaf = priced(scriptedProvider(Array.from({ length: 8 }, () => ({ text: "leaf done" }))));
    const lead = priced(
      scriptedProvider([
        ...Array.from({ length: 2 }, (_, i) => ({
          when: { lastUserIncludes: `lead ${i + 1}` },
          toolCalls: [1, 2].map((k) => ({
            id: `l${i + 1}_${k}`,
            name: "task",
            args: { profile: "leaf", prompt: `leaf ${i + 1}.${k}` },
          })),
        })),
        { text: "lead done" },
        { text: "lead done" },
      ]),
    );
    const parent = priced(
      scriptedProvider([
        {
          toolCalls: [1, 2].map((i) => ({
            id: `t${i}`,
            name: "task",
            args: { profile: "lead", prompt: `lead ${i}` },
          })),
        },
        { text: "all done" },
      ]),
    );
    const leafProfile = { description: "Does a leaf.", instructions: "word ".repeat(1_000), model: leaf };
    const agent = await createAgent({
      name: "tree",
      provider: parent,
      sideModel: false,
      store,
      limits: { maxSessionCostUsd: 3 },
      plugins: [
        tasks({
          profiles: {
            lead: {
              description: "Leads two leaves.",
              model: lead,
              plugins: [tasks({ profiles: { leaf: leafProfile } })],
            },
          },
        }),
      ],
    });
    const session = await agent.session();
    const r = await session.run("split it");
    expect(r.verdict.status, JSON.stringify(r.verdict)).toBe("completed");
    // Every provider call of every session in the tree, as the logs charged it.
    let charged = 0;
    const leafResults: string[] = [];
    for (const s of await agent.sessions(50))
      for (const e of (await store.events(s.id)) as KeelEvent[]) {
        if (e.type === "model.responded") charged += e.usage.costUsd ?? 0;
        if (e.type === "message.appended" && e.message.role === "tool" && e.message.toolName === "task")
          leafResults.push(JSON.stringify(e.message.content));
      }
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThanOrEqual(3);
    // The parent's turn counts its whole tree's spend.
    expect(r.usage.costUsd).toBeCloseTo(charged, 9);
    expect(leafResults.some((t) => /stopped by budget/.test(t))).toBe(true);
    await agent.close();
  });
});
