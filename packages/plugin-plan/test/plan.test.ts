/**
 * Plan mode through real kernel turns on the scripted provider: only information tools are sent
 * while planning (a hidden one called by name is denied); approving the plan (host callback, or
 * the durable pause answered by a later process) brings every tool back in the same turn and
 * pins the plan; a rejection keeps plan mode with the reason; the model and the host can enter it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import type { AgentOptions } from "@keel/agent";
import type { ProviderScriptInput } from "@keel/testkit";
import { plan, planState } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-plan-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const written: string[] = [];
const tools = [
  defineTool({ name: "read", description: "Reads a file.", category: "info", execute: () => "TODO: ship" }),
  defineTool({
    name: "write",
    description: "Writes a file.",
    category: "edit",
    execute: (a: { text?: string }) => (written.push(String(a?.text)), "written"),
  }),
  defineTool({ name: "run", description: "Runs a command.", category: "exec", execute: () => "ok" }),
];
const names = (tools: readonly { name: string }[]) => tools.map((t) => t.name).sort();
const toolText = (m: { content: unknown }) => JSON.stringify(m.content);

function setup(
  steps: ProviderScriptInput,
  more: Partial<AgentOptions> = {},
  options: Parameters<typeof plan>[0] = { start: true },
) {
  const provider = scriptedProvider(steps);
  return {
    provider,
    agent: createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      tools,
      plugins: [plan(options)],
      ...more,
    }),
  };
}

describe("plan mode", () => {
  it("while planning only information tools are sent; a hidden tool called by name is denied with the way out", async () => {
    const { provider, agent: a } = setup([
      { toolCalls: [{ id: "w0", name: "write", args: { text: "too early" } }] },
      { text: "I will plan first." },
    ]);
    const agent = await a;
    const r = await (await agent.session()).run("ship it");
    expect(r.text).toBe("I will plan first.");
    expect(names(provider.requests[0]!.tools)).toEqual(["exit_plan_mode", "read"]);
    expect(provider.requests[0]!.system).toContain("You are in plan mode.");
    expect(toolText(provider.requests[1]!.messages.at(-1)!)).toContain(
      "plan mode: only information tools until the plan is approved (call exit_plan_mode with your plan)",
    );
    expect(written).not.toContain("too early");
    await agent.close();
  });

  it("an approved plan brings every tool back in the same turn and is pinned in later turns", async () => {
    const asked: string[] = [];
    const { provider, agent: a } = setup(
      [
        { toolCalls: [{ id: "r1", name: "read", args: {} }] },
        {
          toolCalls: [
            { id: "x1", name: "exit_plan_mode", args: { plan: "1. write the release note\n2. run the checks" } },
          ],
        },
        { toolCalls: [{ id: "w1", name: "write", args: { text: "release note" } }] },
        { text: "Done as planned." },
        { text: "Next turn." },
      ],
      { approve: (req) => (asked.push(`${req.call.name}: ${req.reason}`), true) },
    );
    const agent = await a;
    const session = await agent.session();
    const r = await session.run("ship it");
    expect(r.text).toBe("Done as planned.");
    expect(asked).toEqual([
      "exit_plan_mode: approve this plan before any change:\n1. write the release note\n2. run the checks",
    ]);
    expect(names(provider.requests[1]!.tools)).toEqual(["exit_plan_mode", "read"]);
    expect(names(provider.requests[2]!.tools)).toEqual(["exit_plan_mode", "read", "run", "write"]);
    expect(written).toContain("release note");
    await session.run("and now?");
    const next = provider.requests[4]!;
    expect(names(next.tools)).toEqual(["enter_plan_mode", "read", "run", "write"]);
    expect(next.system).toContain(
      "The user approved this plan; follow it:\n1. write the release note\n2. run the checks",
    );
    await agent.close();
  });

  it("a rejected plan keeps plan mode, and the model reads why", async () => {
    const { provider, agent: a } = setup(
      [
        { toolCalls: [{ id: "x1", name: "exit_plan_mode", args: { plan: "just do it" } }] },
        { text: "I will add a rollback step." },
        { text: "still planning" },
      ],
      { approve: () => ({ approved: false, reason: "add a rollback step" }) },
    );
    const agent = await a;
    const session = await agent.session();
    await session.run("ship it");
    expect(toolText(provider.requests[1]!.messages.at(-1)!)).toContain("add a rollback step");
    expect(names(provider.requests[1]!.tools)).toEqual(["exit_plan_mode", "read"]);
    await session.run("try again");
    expect(names(provider.requests[2]!.tools)).toEqual(["exit_plan_mode", "read"]);
    expect(planState(session.messages, true).active).toBe(true);
    await agent.close();
  });

  it("waiting for approval survives the process: a later agent approves the paused plan and the turn goes on with every tool", async () => {
    const path = join(dir, "plan.sqlite");
    const first = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "x1", name: "exit_plan_mode", args: { plan: "write the note" } }] },
      ]),
      sideModel: false,
      store: new SqliteSessionStore({ path }),
      tools,
      plugins: [plan({ start: true })],
    });
    const s1 = await first.session();
    expect((await s1.run("ship it")).verdict).toMatchObject({ status: "paused", pending: ["x1"] });
    await first.close();

    const provider = scriptedProvider([
      { toolCalls: [{ id: "w1", name: "write", args: { text: "after restart" } }] },
      { text: "Written after approval." },
    ]);
    const second = await createAgent({
      provider,
      sideModel: false,
      store: new SqliteSessionStore({ path }),
      tools,
      plugins: [plan({ start: true })],
    });
    const s2 = await second.session(s1.id);
    expect(s2.pendingApprovals().map((p) => p.name)).toEqual(["exit_plan_mode"]);
    await s2.approve("x1");
    const r = await s2.resume();
    expect(r.text).toBe("Written after approval.");
    expect(names(provider.requests[0]!.tools)).toEqual(["exit_plan_mode", "read", "run", "write"]);
    expect(written).toContain("after restart");
    await second.close();
  });

  it("the model enters plan mode itself (the rest of its turn is information only), and the host can force it for a turn", async () => {
    const { provider, agent: a } = setup(
      [
        { toolCalls: [{ id: "e1", name: "enter_plan_mode", args: {} }] },
        { toolCalls: [{ id: "w1", name: "run", args: {} }] },
        { text: "planning" },
        { text: "still planning" },
        { text: "forced" },
      ],
      {},
      {},
    );
    const agent = await a;
    const session = await agent.session();
    await session.run("careful now");
    expect(names(provider.requests[0]!.tools)).toEqual(["enter_plan_mode", "read", "run", "write"]);
    expect(toolText(provider.requests[2]!.messages.at(-1)!)).toContain("plan mode: only information tools");
    await session.run("next");
    expect(names(provider.requests[3]!.tools)).toEqual(["exit_plan_mode", "read"]);

    const fresh = await agent.session();
    await fresh.run("plan this", { metadata: { planMode: true } });
    expect(names(provider.requests[4]!.tools)).toEqual(["exit_plan_mode", "read"]);
    await agent.close();
  });
});
