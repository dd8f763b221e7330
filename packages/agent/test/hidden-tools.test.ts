import { describe, expect, it } from "vitest";
import { createAgent, defineTool, definePlugin } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ToolDefinition } from "../src/index.ts";
import { ofType } from "./support/helpers.ts";

const echo = (name: string, hidden = true): ToolDefinition =>
  defineTool({ name, description: `The ${name} tool.`, hidden, execute: () => `${name} ran` });
const search = defineTool({
  name: "tool_search",
  description: "Finds tools.",
  execute: (args: { q: string }) => ({ content: `found ${args.q}`, reveal: [args.q, "no_such_tool"] }),
});
const catalogue = definePlugin({
  name: "catalogue",
  version: "1.0.0",
  setup(ctx) {
    ctx.on("turn.pre_tool_materialization", () => ({
      kind: "tool_bundle",
      bundleId: "cat",
      tools: [search, echo("alpha"), echo("beta"), echo("gamma")],
    }));
  },
});
const sent = (req: { tools: readonly { name: string }[] }) => req.tools.map((t) => t.name).sort();

describe("hidden tools", () => {
  it("are not advertised until a tool output reveals them, then stay visible for the turn", async () => {
    const provider = scriptedProvider([
      { toolCalls: [{ name: "tool_search", args: { q: "beta" } }] },
      { toolCalls: [{ name: "beta", args: {} }] },
      { text: "done" },
      { text: "next turn" },
    ]);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [catalogue] });
    const session = await agent.session();
    await session.run("use beta");
    expect(provider.requests.map(sent)).toEqual([["tool_search"], ["beta", "tool_search"], ["beta", "tool_search"]]);
    const events = await session.events();
    expect(ofType(events, "tools.revealed")).toMatchObject([
      { by: "tool_search", names: ["beta"], unknown: ["no_such_tool"] },
    ]);
    expect(ofType(events, "tool.completed").map((e) => [e.name, e.status])).toEqual([
      ["tool_search", "ok"],
      ["beta", "ok"],
    ]);
    await session.run("again");
    expect(sent(provider.requests[3]!)).toEqual(["tool_search"]);
  });

  it("a hidden tool called by name still runs (hidden is not a permission)", async () => {
    const provider = scriptedProvider([{ toolCalls: [{ name: "gamma", args: {} }] }, { text: "ok" }]);
    const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins: [catalogue] });
    const session = await agent.session();
    await session.run("x");
    expect(ofType(await session.events(), "tool.completed")[0]).toMatchObject({ name: "gamma", status: "ok" });
  });
});

describe("preflight", () => {
  it("reveals the hidden tools its JSON answer names, ignores unknown ones, and tells the plugins", async () => {
    const side = scriptedProvider(
      [{ text: 'Plan first. {"plan": "search then use alpha", "reveal": ["alpha", "tool_search", "zeta"]}' }],
      { model: "side" },
    );
    const provider = scriptedProvider([{ text: "ok" }]);
    const seen: unknown[] = [];
    const spy = definePlugin({
      name: "spy",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.post_preflight_prompt_context", (e) => {
          seen.push(e.preflight);
        });
      },
    });
    const agent = await createAgent({
      provider,
      sideModel: side,
      preflight: true,
      store: new MemorySessionStore(),
      plugins: [catalogue, spy],
    });
    const session = await agent.session();
    await session.run("do the alpha thing");
    expect(side.requests).toHaveLength(1);
    expect(side.requests[0]!.tools).toEqual([]);
    expect(JSON.stringify(side.requests[0]!.messages)).toContain("alpha: The alpha tool.");
    expect(sent(provider.requests[0]!)).toEqual(["alpha", "tool_search"]);
    expect(seen).toEqual([{ status: "ok", plan: "search then use alpha", revealed: ["alpha"] }]);
    const [pf] = ofType(await session.events(), "preflight.completed");
    expect(pf).toMatchObject({ status: "ok", revealed: ["alpha"], ignored: ["tool_search", "zeta"] });
  });

  it("falls back to revealing nothing on a timeout or an answer that is not JSON, and the turn goes on", async () => {
    for (const [step, status] of [
      [{ hang: true }, "timeout"],
      [{ text: "I think alpha" }, "invalid"],
    ] as const) {
      const side = scriptedProvider([step], { model: "side" });
      const provider = scriptedProvider([{ text: "answered" }]);
      const agent = await createAgent({
        provider,
        preflight: { model: side, timeoutMs: 50 },
        store: new MemorySessionStore(),
        plugins: [catalogue],
      });
      const session = await agent.session();
      const result = await session.run("hi");
      expect(result.verdict.status).toBe("completed");
      expect(sent(provider.requests[0]!)).toEqual(["tool_search"]);
      expect(ofType(await session.events(), "preflight.completed")[0]).toMatchObject({ status, revealed: [] });
    }
  });

  it("does not run when no tool is hidden", async () => {
    const side = scriptedProvider([], { model: "side" });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      preflight: { model: side },
      tools: [echo("plain", false)],
      store: new MemorySessionStore(),
    });
    await (await agent.session()).run("hi");
    expect(side.requests).toHaveLength(0);
  });
});
