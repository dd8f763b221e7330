/**
 * The eval's tool seam (tools.ts): fixtures matched by arguments, the default that runs only
 * read-only tools, answers from the recording a case was made of, and a resumed case that never
 * runs again a call an interrupted attempt ran.
 */
import { describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import type { KeelEvent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { parseDataset } from "../src/dataset.ts";
import { caseFromSession } from "../src/from-sessions.ts";
import { runEval } from "../src/runner.ts";
import { evalMark, evalTools } from "../src/tools.ts";
import type { EvalToolsMode } from "../src/tools.ts";
import { testExperimentStore } from "./support/memory-experiments.ts";

function rig(steps: unknown[]) {
  const ran: string[] = [];
  const refund = defineTool({
    name: "refund",
    description: "Refund an order.",
    execute: (args: { order?: string }) => {
      ran.push(`refund ${args.order}`);
      return `refunded ${args.order} for real`;
    },
  });
  const lookup = defineTool({
    name: "lookup",
    description: "Look an order up.",
    category: "info",
    execute: (args: { order?: string }) => {
      ran.push(`lookup ${args.order}`);
      return `order ${args.order}: shipped`;
    },
  });
  const tools = evalTools();
  const store = new MemorySessionStore();
  const made = createAgent({
    name: "tools-test",
    provider: scriptedProvider(steps as never),
    store,
    tools: [refund, lookup],
    plugins: [tools.plugin],
    sideModel: false,
  });
  return { ran, tools, store, made };
}

const calls = (input: string, list: Array<{ name: string; args: Record<string, unknown> }>) => [
  { when: { lastUserIncludes: input }, toolCalls: list },
  { when: { lastUserIncludes: input }, text: `done ${input}` },
];

const toolTexts = (events: readonly KeelEvent[]) =>
  events.flatMap((e) =>
    e.type === "message.appended" && e.message.role === "tool"
      ? [e.message.content.map((b) => (b.type === "text" ? b.text : "")).join("")]
      : [],
  );

async function evaluate(r: ReturnType<typeof rig>, rows: unknown[], mode?: EvalToolsMode, resume?: string) {
  const agent = await r.made;
  const dataset = parseDataset(rows.map((x) => JSON.stringify(x)).join("\n"), "d.jsonl");
  const store = experiments;
  const run = await runEval({
    agent,
    cases: dataset.cases,
    store,
    dataset: { file: "d.jsonl", hash: dataset.hash },
    tools: r.tools,
    ...(mode ? { toolsMode: mode } : {}),
    ...(resume ? { resume } : {}),
  });
  const texts = await Promise.all(run.results.map(async (c) => toolTexts(await r.store.events(c.sessionId!))));
  return { run, texts, agent };
}

let experiments = testExperimentStore();

describe("eval tools", () => {
  it("fixtures answer by arguments; without one, a read-only tool runs and any other is refused", async () => {
    experiments = testExperimentStore();
    const r = rig([
      ...calls("one", [
        { name: "refund", args: { order: "A" } },
        { name: "refund", args: { order: "B" } },
      ]),
      ...calls("two", [
        { name: "refund", args: { order: "C" } },
        { name: "lookup", args: { order: "C" } },
      ]),
    ]);
    const { run, texts, agent } = await evaluate(r, [
      {
        id: "one",
        input: "one",
        tools: { refund: [{ args: { order: "A" }, result: "A refunded (fixture)" }, { result: { ok: true } }] },
      },
      { id: "two", input: "two" },
    ]);
    expect(run.complete).toBe(true);
    expect(texts[0]).toEqual(["A refunded (fixture)", '{"ok":true}']);
    expect(texts[1]![0]).toContain("KEEL_EVAL_TOOL_NOT_RUN");
    expect(texts[1]![1]).toBe("order C: shipped");
    expect(r.ran).toEqual(["lookup C"]);
    // Eval sessions are marked by their turns' metadata.
    expect(evalMark(await r.store.events(run.results[0]!.sessionId!))).toEqual({
      experiment: run.experiment.id,
      case: "one",
    });
    await agent.close();
  });

  it("recorded: a case made from a session answers its calls with the recorded results", async () => {
    experiments = testExperimentStore();
    const step = calls("refund order", [{ name: "refund", args: { order: "R" } }]);
    const r = rig([...step, ...step, ...calls("other", [{ name: "refund", args: { order: "X" } }])]);
    const agent = await r.made;
    const s = await agent.session();
    await s.run("refund order");
    await s.close();
    expect(r.ran).toEqual(["refund R"]);
    const line = await caseFromSession(r.store, s.id);
    const { texts } = await evaluate(r, [line, { id: "unrecorded", input: "other" }], "recorded");
    expect(texts[0]).toEqual(["refunded R for real"]);
    expect(texts[1]![0]).toContain("KEEL_EVAL_TOOL_NOT_RUN");
    expect(r.ran).toEqual(["refund R"]);
    await agent.close();
  });

  it("on resume, a call an interrupted attempt finished is answered with its result, never run again", async () => {
    experiments = testExperimentStore();
    const step = calls("refund it", [{ name: "refund", args: { order: "Z" } }]);
    const r = rig([...step, ...step]);
    const agent = await r.made;
    const rows = [{ id: "z", input: "refund it" }];
    const dataset = parseDataset(JSON.stringify(rows[0]), "d.jsonl");
    // An attempt cut after its call ran: the experiment is running and the case unscored.
    await experiments.create({
      id: "exp_cut",
      name: "cut",
      dataset: "d.jsonl",
      datasetHash: dataset.hash,
      agent: agent.name,
      status: "running",
      startedAt: Date.now() - 10,
    });
    const first = await agent.session();
    await first.run("refund it", { metadata: { experiment: "exp_cut", case: "z" } });
    await first.close();
    expect(r.ran).toEqual(["refund Z"]);
    const { run, texts } = await evaluate(r, rows, "live", "exp_cut");
    expect(run.experiment.status).toBe("completed");
    expect(texts[0]).toEqual(["refunded Z for real"]);
    expect(r.ran).toEqual(["refund Z"]);
    await agent.close();
  });
});
