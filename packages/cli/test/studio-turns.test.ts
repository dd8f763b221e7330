/**
 * The studio's view of a log (turnsOf), from real kernel turns: a compaction shows on the
 * request that followed it (who, before/after, each edit) and on the timeline; a guard that
 * trips is a timeline marker and a finding; a retried request stays one request with its notice.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import compaction from "../../plugin-compaction/src/index.ts";
import { tasks } from "../../plugin-tasks/src/index.ts";
import { turnsOf } from "../src/studio/turns.ts";
import { SqliteSessionStore } from "@keel/store-sqlite";

const home = mkdtempSync(join(tmpdir(), "keel-studio-turns-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const output = (tag: string) =>
  Array.from(
    { length: 60 },
    (_, i) => `${tag} row ${i + 1}: ok ${i * 7} items processed in worker pool shard ${i % 5} of the cluster node`,
  ).join("\n");

describe("turnsOf", () => {
  it("a compaction is shown on the next request and the timeline, with its plugin and every edit", async () => {
    let n = 0;
    const steps = [
      ...Array.from({ length: 8 }, (_, i) => ({
        text: `Step ${i + 1}.`,
        toolCalls: [{ id: `c${i + 1}`, name: "bash", args: { command: `check ${i + 1}` } }],
      })),
      { text: "done" },
    ];
    const agent = await createAgent({
      provider: scriptedProvider(steps, { contextWindow: 9_000 }),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [
        defineTool({
          name: "bash",
          description: "Runs a command.",
          category: "exec",
          execute: () => output(`t${n++}`),
        }),
      ],
      plugins: [
        compaction({
          path: join(home, "c.sqlite"),
          taco: { enabled: false },
          hard: 0.99,
          subgoals: { extractor: "heuristic" },
        }),
      ],
    });
    const session = await agent.session();
    await session.run("check the cluster");
    const [turn] = turnsOf(await session.events());
    await agent.close();
    expect(turn!.status).toBe("completed");
    expect(turn!.requests).toHaveLength(9);
    const compacted = turn!.requests.filter((r) => r.compactions.length);
    expect(compacted.length).toBeGreaterThan(0);
    const c = compacted[0]!.compactions[0]!;
    expect(c.plugin).toBe("@keel/plugin-compaction");
    expect(c.reason).toMatch(/^compaction subgoal: \d+ → \d+ tokens; masked \d+ tool outputs/);
    expect(c.what.length).toBe(Math.min(c.edits, 21));
    expect(c.what[0]).toMatch(/^result of call c\d masked: /);
    expect(turn!.requests[0]!.compactions).toEqual([]);
    const marker = turn!.timeline.find((i) => i.kind === "compaction")!;
    expect(marker.label).toBe(`@keel/plugin-compaction: ${c.before} → ${c.after} messages`);
    expect(marker.start).toBe(marker.end);
    // Tool results have their size; timeline bars never end before they start.
    expect(turn!.timeline.filter((i) => i.kind === "tool").map((i) => i.detail?.resultChars)).toEqual(
      Array(8).fill(output("t0").length),
    );
    for (const i of turn!.timeline) expect(i.end).toBeGreaterThanOrEqual(i.start);
  });

  it("a tool call that ran a subagent links to the child session; the child's log names its parent", async () => {
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "helper", prompt: "help" } }] },
        { text: "done" },
      ]),
      sideModel: false,
      store,
      plugins: [
        tasks({ profiles: { helper: { description: "Helps.", model: scriptedProvider([{ text: "helped" }]) } } }),
      ],
    });
    const session = await agent.session();
    await session.run("delegate");
    const [turn] = turnsOf(await session.events());
    const child = turn!.timeline.find((i) => i.kind === "tool")!.detail!.childSession as string;
    expect(child).toMatch(/^[0-9a-f-]{36}$/);
    const [childTurn] = turnsOf(await store.events(child));
    expect(childTurn!.answer).toBe("helped");
    expect(childTurn!.trigger).toBe("subagent");
    await agent.close();
  });

  it("a turn a stopped process left and a worker finished says it was recovered, with the calls that were cut", async () => {
    const db = join(home, `recovered-${Date.now()}.sqlite`);
    let release!: () => void;
    let started!: () => void;
    const inTool = new Promise<void>((r) => (started = r));
    const look = defineTool({
      name: "look",
      description: "Looks.",
      category: "info",
      execute: () => (started(), new Promise<string>((r) => (release = () => r("seen")))),
    });
    const storeA = new SqliteSessionStore({ path: db });
    const a = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "c1", name: "look", args: {} }] }]),
      sideModel: false,
      store: storeA,
      tools: [look],
    });
    const s = await a.session();
    const running = s.run("look around").catch(() => undefined);
    await inTool;
    storeA.close();
    release();
    await running;
    const fast = defineTool({ name: "look", description: "Looks.", category: "info", execute: () => "seen" });
    const storeB = new SqliteSessionStore({ path: db });
    const b = await createAgent({
      provider: scriptedProvider([{ text: "Nothing there." }]),
      sideModel: false,
      store: storeB,
      tools: [fast],
      recovery: "auto",
    });
    const again = await b.session(s.id);
    await again.recover();
    const [turn] = turnsOf(await again.events());
    await b.close();
    storeB.close();
    expect(turn!.status).toBe("completed");
    expect(turn!.recovered).toMatchObject({ cut: ["c1"], takenOver: { reason: "holder_dead" } });
  });

  it("a guard that trips is a marker and a finding; the verdict says stopped", async () => {
    const agent = await createAgent({
      provider: scriptedProvider([
        ...Array.from({ length: 2 }, (_, i) => ({ toolCalls: [{ id: `k${i}`, name: "clock", args: {} }] })),
        { text: "I stop here." },
      ]),
      sideModel: false,
      store: new MemorySessionStore(),
      limits: { maxToolCalls: 2 },
      tools: [defineTool({ name: "clock", description: "Tells the time.", execute: () => "12:00" })],
    });
    const session = await agent.session();
    await session.run("loop");
    const [turn] = turnsOf(await session.events());
    await agent.close();
    expect(turn!.status).toBe("stopped");
    expect(turn!.guards).toEqual([{ guard: "max_tool_calls", limit: 2, value: 2 }]);
    expect(turn!.timeline.filter((i) => i.kind === "guard").map((i) => i.label)).toEqual(["max_tool_calls: 2 of 2"]);
  });

  it("an approval answered in a log that names no answerer (older logs) stays in the history, saying how it came; an unpriced model is counted, not priced", async () => {
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "d1", name: "deploy", args: { env: "prod" } }] },
        { toolCalls: [{ id: "d2", name: "deploy", args: { env: "staging" } }] },
        { text: "done" },
      ]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [defineTool({ name: "deploy", description: "Deploys.", category: "exec", execute: () => "ok" })],
      plugins: [
        {
          name: "rules",
          version: "1.0.0",
          setup: (ctx) =>
            ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "deploys" })),
        },
      ],
    });
    const session = await agent.session();
    await session.run("deploy");
    await session.approve("d1", { always: true });
    const done = await session.resume();
    expect(done.text).toBe("done");
    const [turn] = turnsOf(await session.events());
    await agent.close();
    expect(turn!.approvals.map((a) => [a.callId, a.answer?.by, a.answer?.approved, a.answer?.answerer])).toEqual([
      ["d1", "host", true, undefined],
      // The second call was allowed by the earlier "always": no one was asked again.
      ["d2", "always", true, undefined],
    ]);
    expect(turn!.approvals[0]).toMatchObject({ reason: "deploys", plugin: "rules", args: '{\n  "env": "prod"\n}' });
    expect(turn!.calls.map((c) => [c.callId, c.status, c.result])).toEqual([
      ["d1", "ok", "ok"],
      ["d2", "ok", "ok"],
    ]);
    expect(turn!.cost).toEqual({ usd: 0, priced: 0, unpriced: 3 });
  });
});
