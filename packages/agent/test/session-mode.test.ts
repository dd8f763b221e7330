/**
 * Chat mode and agent mode per session: in chat mode no tool is materialised or sent (the
 * materialisation phase does not run) while prompt plugins still run; the host switches between
 * turns, the switch is in the log and honoured by a later process; it is refused mid-turn and
 * while a turn waits for approval.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { AgentOptions, KeelEvent } from "../src/index.ts";
import type { ProviderScriptInput } from "../../testkit/src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-mode-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const seen: string[] = [];
const rules = definePlugin({
  name: "rules",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_prompt_compile", (e) => {
      seen.push(`compile:${e.mode}`);
      return { kind: "prompt_section", id: "rules", sectionId: "rules", domain: "rules", content: "Be brief." };
    });
    ctx.on("turn.pre_tool_materialization", (e) => {
      seen.push(`materialize:${e.mode}`);
      return {
        kind: "tool_bundle",
        bundleId: "extra",
        tools: [defineTool({ name: "extra", description: "An extra tool.", execute: () => "x" })],
      };
    });
  },
});
const lookup = defineTool({ name: "lookup", description: "Looks a value up.", execute: () => "42" });

function agentWith(steps: ProviderScriptInput, more: Partial<AgentOptions> = {}) {
  const provider = scriptedProvider(steps);
  return {
    provider,
    agent: createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [lookup],
      plugins: [rules],
      ...more,
    }),
  };
}

describe("session modes", () => {
  it("chat mode sends no tools and skips their materialisation; prompt plugins still run; the turn records its mode", async () => {
    seen.length = 0;
    const { provider, agent: pending } = agentWith([{ text: "Just talking." }]);
    const agent = await pending;
    const session = await agent.session();
    expect(session.mode).toBe("agent");
    await session.setMode("chat");
    const r = await session.run("hello");
    expect(r.text).toBe("Just talking.");
    expect(provider.requests[0]!.tools).toEqual([]);
    expect(provider.requests[0]!.system).toContain("Be brief.");
    expect(seen).toEqual(["compile:chat"]);
    const events = await session.events();
    expect(events.find((e) => e.type === "turn.started")).toMatchObject({ mode: "chat" });
    expect(
      (events.find((e) => e.type === "prompt.compiled") as Extract<KeelEvent, { type: "prompt.compiled" }>).manifest
        .tools,
    ).toEqual([]);
    await agent.close();
  });

  it("switches between turns: chat, then agent again, each recorded once", async () => {
    seen.length = 0;
    const { provider, agent: pending } = agentWith([
      { text: "chatting" },
      { toolCalls: [{ id: "l1", name: "lookup", args: {} }] },
      { text: "It is 42." },
    ]);
    const agent = await pending;
    const session = await agent.session();
    await session.setMode("chat");
    await session.setMode("chat");
    await session.run("hi");
    await session.setMode("agent");
    const r = await session.run("look it up");
    expect(r.text).toBe("It is 42.");
    expect(provider.requests.map((q) => q.tools.map((t) => t.name).sort())).toEqual([
      [],
      ["extra", "lookup"],
      ["extra", "lookup"],
    ]);
    expect(seen).toEqual(["compile:chat", "materialize:agent", "compile:agent"]);
    expect(
      (await session.events()).filter((e) => e.type === "session.mode").map((e) => (e as { mode: string }).mode),
    ).toEqual(["chat", "agent"]);
    await agent.close();
  });

  it("a later process honours the session's switch; the agent's default mode applies only to sessions that never switched", async () => {
    const path = join(dir, "modes.sqlite");
    const first = await createAgent({
      provider: scriptedProvider([{ text: "one" }]),
      sideModel: false,
      store: new SqliteSessionStore({ path }),
      tools: [lookup],
    });
    const s1 = await first.session();
    await s1.setMode("chat");
    await s1.run("first");
    const fresh = await first.session();
    await first.close();

    const provider = scriptedProvider([{ text: "two" }, { text: "three" }]);
    const second = await createAgent({
      provider,
      sideModel: false,
      store: new SqliteSessionStore({ path }),
      tools: [lookup],
      mode: "agent",
    });
    const again = await second.session(s1.id);
    expect(again.mode).toBe("chat");
    await again.run("second");
    expect(provider.requests[0]!.tools).toEqual([]);
    await second.close();

    const provider3 = scriptedProvider([{ text: "four" }]);
    const third = await createAgent({
      provider: provider3,
      sideModel: false,
      store: new SqliteSessionStore({ path }),
      tools: [lookup],
      mode: "chat",
    });
    expect((await third.session(fresh.id)).mode).toBe("chat");
    const switched = await third.session(s1.id);
    await switched.setMode("agent");
    await switched.run("fourth");
    expect(provider3.requests[0]!.tools.map((t) => t.name)).toEqual(["lookup"]);
    await third.close();
  });

  it("a tool call the model makes anyway in chat mode gets an error result that says why; the turn goes on", async () => {
    const { agent: pending } = agentWith([
      { toolCalls: [{ id: "x1", name: "lookup", args: {} }] },
      { text: "Without tools, then." },
    ]);
    const agent = await pending;
    const session = await agent.session();
    await session.setMode("chat");
    const r = await session.run("look it up");
    expect(r.text).toBe("Without tools, then.");
    const result = (await session.events()).find(
      (e) => e.type === "message.appended" && e.message.role === "tool",
    ) as Extract<KeelEvent, { type: "message.appended" }>;
    expect(JSON.stringify(result.message)).toContain("this session is in chat mode: no tools are available");
    await agent.close();
  });

  it("refuses another value, a switch during a turn, and a switch while a turn waits for approval", async () => {
    const { agent: pending } = agentWith([{ text: "slow", delayMs: 200 }]);
    const agent = await pending;
    const session = await agent.session();
    await expect(session.setMode("tools" as never)).rejects.toMatchObject({ code: "KEEL_MODE_INVALID" });
    const running = session.run("hi");
    await new Promise((r) => setTimeout(r, 50));
    await expect(session.setMode("chat")).rejects.toMatchObject({
      code: "KEEL_MODE_INVALID",
      message: expect.stringContaining("is running a turn"),
    });
    await running;
    await agent.close();

    const asking = definePlugin({
      name: "asking",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "check" })),
    });
    const paused = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "a1", name: "lookup", args: {} }] }]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [lookup],
      plugins: [asking],
    });
    const p = await paused.session();
    expect((await p.run("go")).verdict.status).toBe("paused");
    await expect(p.setMode("chat")).rejects.toMatchObject({
      code: "KEEL_MODE_INVALID",
      message: expect.stringContaining("waiting for approval"),
    });
    await paused.close();
  });
});
