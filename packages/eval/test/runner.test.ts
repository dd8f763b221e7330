import { describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { parseDataset } from "../src/dataset.ts";
import { defineScorer } from "../src/scorers.ts";
import { runEval } from "../src/runner.ts";
import type { EvalProgress } from "../src/runner.ts";
import { testExperimentStore } from "./support/memory-experiments.ts";

const lookup = defineTool({
  name: "lookup",
  description: "Look a word up.",
  execute: (args: unknown) => `found ${JSON.stringify(args)}`,
});

/** One script serving every case: each step only answers the case whose input it names. */
function caseSteps(n: number) {
  return Array.from({ length: n }, (_, i) => [
    { when: { lastUserIncludes: `question ${i}?` }, toolCalls: [{ name: "lookup", args: { word: `w${i}` } }] },
    { when: { lastUserIncludes: `question ${i}?` }, text: `answer ${i}`, usage: { inputTokens: 10, outputTokens: 5 } },
  ]).flat();
}

async function agentFor(steps: unknown[]) {
  const store = new MemorySessionStore();
  const agent = await createAgent({
    name: "eval-test",
    provider: scriptedProvider(steps as never),
    store,
    tools: [lookup],
    sideModel: false,
  });
  return { agent, store };
}

const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join("\n");

describe("runEval", () => {
  it("runs each case in its own session, links it, scores it, stores it as it finishes", async () => {
    const n = 6;
    const { agent, store: sessions } = await agentFor(caseSteps(n));
    const dataset = parseDataset(
      jsonl(
        Array.from({ length: n }, (_, i) => ({
          id: `c${i}`,
          input: `question ${i}?`,
          expect: {
            contains: i === 3 ? "nope" : `answer ${i}`,
            toolCalled: { name: "lookup", args: { word: `w${i}` } },
          },
        })),
      ),
      "d.jsonl",
    );
    const store = testExperimentStore();
    const progress: EvalProgress[] = [];
    const run = await runEval({
      agent,
      cases: dataset.cases,
      store,
      concurrency: 3,
      dataset: { file: "d.jsonl", hash: dataset.hash },
      name: "first",
      onProgress: (e) => {
        progress.push(e);
        // Stored before it is reported.
        if (e.type === "case") expect(store.results.get(e.result.experimentId)?.has(e.result.caseId)).toBe(true);
      },
    });
    expect(run.complete).toBe(true);
    expect(run.results.map((r) => [r.caseId, r.status])).toEqual([
      ["c0", "passed"],
      ["c1", "passed"],
      ["c2", "passed"],
      ["c3", "failed"],
      ["c4", "passed"],
      ["c5", "passed"],
    ]);
    expect(run.summary).toMatchObject({ cases: 6, passed: 5, failed: 1, errored: 0, passRate: 5 / 6 });
    expect(run.summary.scorers.toolCalled).toEqual({ passed: 6, total: 6, mean: 1 });
    const r0 = run.results[0]!;
    expect(r0.metrics).toMatchObject({
      rounds: 2,
      toolCalls: 1,
      inputTokens: expect.any(Number),
      outputTokens: expect.any(Number),
    });
    expect(r0.output).toBe("answer 0");
    const events = sessions.events(r0.sessionId!) as Array<{ type: string; metadata?: unknown }>;
    expect(events.find((e) => e.type === "turn.started")?.metadata).toEqual({
      experiment: run.experiment.id,
      case: "c0",
    });
    expect(new Set(run.results.map((r) => r.sessionId)).size).toBe(6);
    expect(store.experiments.get(run.experiment.id)).toMatchObject({
      status: "completed",
      name: "first",
      agent: "eval-test",
    });
    expect(progress[0]).toMatchObject({ type: "start", total: 6, skipped: 0 });
    expect(progress.filter((p) => p.type === "case").map((p) => (p as { done: number }).done)).toEqual([
      1, 2, 3, 4, 5, 6,
    ]);
    await agent.close();
  });

  it("bounds concurrency", async () => {
    const steps = Array.from({ length: 8 }, (_, i) => ({
      when: { lastUserIncludes: `q${i}.` },
      text: "ok",
      delayMs: 30,
    }));
    const { agent } = await agentFor(steps);
    let running = 0;
    let peak = 0;
    agent.subscribe((e) => {
      if (e.type === "turn.started") peak = Math.max(peak, ++running);
      if (e.type === "turn.completed") running--;
    });
    const cases = Array.from({ length: 8 }, (_, i) => ({ id: `${i}`, input: `q${i}.` }));
    await runEval({ agent, cases, store: testExperimentStore(), concurrency: 2, dataset: { file: "x", hash: "h" } });
    expect(peak).toBe(2);
    await agent.close();
  });

  it("a scorer that throws fails its case with its name; the other scorers and cases go on", async () => {
    const { agent } = await agentFor([
      { when: { lastUserIncludes: "a" }, text: "alpha" },
      { when: { lastUserIncludes: "b" }, text: "beta" },
    ]);
    const broken = defineScorer({
      name: "broken",
      appliesTo: (c) => c.id === "a",
      score: () => {
        throw new Error("division by zero");
      },
    });
    const run = await runEval({
      agent,
      cases: [
        { id: "a", input: "a", expect: { contains: "alpha" } },
        { id: "b", input: "b", expect: { contains: "beta" } },
      ],
      scorers: [broken],
      store: testExperimentStore(),
      dataset: { file: "x", hash: "h" },
    });
    expect(run.results[0]!.status).toBe("failed");
    expect(run.results[0]!.scores).toEqual([
      { scorer: "contains", pass: true, score: 1 },
      expect.objectContaining({ scorer: "broken", pass: false, reason: 'scorer "broken" threw: division by zero' }),
    ]);
    expect(run.results[1]!.status).toBe("passed");
    await agent.close();
  });

  it("a case whose turn fails is an error with the reason; multi-turn inputs run in one session", async () => {
    const { agent } = await agentFor([
      { when: { lastUserIncludes: "first" }, text: "one" },
      { when: { lastUserIncludes: "second" }, text: "two" },
      { when: { lastUserIncludes: "crash" }, error: { class: "invalid_request", message: "bad request" } },
    ]);
    const run = await runEval({
      agent,
      cases: [
        { id: "multi", input: ["first", "second"], expect: { exact: "two" } },
        { id: "crash", input: "crash" },
      ],
      store: testExperimentStore(),
      concurrency: 1,
      dataset: { file: "x", hash: "h" },
    });
    expect(run.results[0]).toMatchObject({ status: "passed", output: "two" });
    expect(run.results[0]!.metrics.rounds).toBe(2);
    expect(run.results[1]).toMatchObject({ status: "error", error: expect.stringContaining("turn 1 failed") });
    expect(run.summary.errored).toBe(1);
    await agent.close();
  });

  it("a stopped run stores only finished cases; resume runs the rest once, with the same dataset only", async () => {
    const steps = Array.from({ length: 6 }, (_, i) => ({
      when: { lastUserIncludes: `q${i}.` },
      text: `a${i}`,
      delayMs: 20,
    }));
    const cases = Array.from({ length: 6 }, (_, i) => ({ id: `${i}`, input: `q${i}.`, expect: { contains: `a${i}` } }));
    const store = testExperimentStore();
    const first = await agentFor(steps);
    const stop = new AbortController();
    const run = await runEval({
      agent: first.agent,
      cases,
      store,
      concurrency: 2,
      dataset: { file: "x", hash: "h1" },
      signal: stop.signal,
      onProgress: (e) => {
        if (e.type === "case" && e.done === 2) stop.abort();
      },
    });
    expect(run.complete).toBe(false);
    const id = run.experiment.id;
    expect(store.experiments.get(id)!.status).toBe("running");
    const stored = store.results.get(id)!.size;
    expect(stored).toBeGreaterThanOrEqual(2);
    expect(stored).toBeLessThan(6);
    await first.agent.close();

    const second = await agentFor(steps);
    await expect(
      runEval({ agent: second.agent, cases, store, dataset: { file: "x", hash: "other" }, resume: id }),
    ).rejects.toThrow(/KEEL_EVAL_RESUME_MISMATCH/);
    await expect(
      runEval({ agent: second.agent, cases, store, dataset: { file: "x", hash: "h1" }, resume: "exp_nope" }),
    ).rejects.toThrow(/KEEL_EVAL_EXPERIMENT_NOT_FOUND/);
    const putsBefore = store.puts;
    const resumed = await runEval({
      agent: second.agent,
      cases,
      store,
      dataset: { file: "x", hash: "h1" },
      resume: id,
    });
    expect(resumed.complete).toBe(true);
    expect(store.puts - putsBefore).toBe(6 - stored);
    expect(resumed.results.map((r) => [r.caseId, r.status])).toEqual(cases.map((c) => [c.id, "passed"]));
    expect(store.experiments.get(id)).toMatchObject({ status: "completed", summary: { cases: 6, passed: 6 } });
    await expect(
      runEval({ agent: second.agent, cases, store, dataset: { file: "x", hash: "h1" }, resume: id }),
    ).rejects.toThrow(/already completed/);
    await second.agent.close();
  });
});
