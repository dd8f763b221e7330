import { describe, expect, it } from "vitest";
import type { AgentEvent, AgentOptions } from "../src/index.ts";
import { createAgent, definePlugin, defineTool, isKeelError } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

const base = (): AgentOptions => ({ provider: scriptedProvider([{ text: "ok" }]), store: new MemorySessionStore() });

async function optionsError(options: unknown) {
  try {
    await createAgent(options as AgentOptions);
  } catch (err) {
    if (isKeelError(err)) return err;
    throw err;
  }
  throw new Error("createAgent accepted invalid options");
}

describe("createAgent options", () => {
  it.each([
    ["no provider", { store: new MemorySessionStore() }, "provider"],
    ["a provider without stream()", { provider: { id: "x" } }, "provider"],
    ["a zero round limit", { limits: { maxRounds: 0 } }, "limits.maxRounds"],
    ["a context ceiling above 1", { limits: { contextCeiling: 1.5 } }, "limits.contextCeiling"],
    ["an unknown limit (typo)", { limits: { maxRound: 3 } }, "limits"],
    ["a negative tool timeout", { toolTimeouts: { exec: -1 } }, "toolTimeouts.exec"],
    ["an unknown option (typo)", { limit: { maxRounds: 3 } }, "(options)"],
    ["an unknown trace mode", { trace: "verbose" }, "trace"],
  ])("rejects %s with KEEL_AGENT_OPTIONS_INVALID at its path", async (_name, patch, path) => {
    const options: Record<string, unknown> = { ...base(), ...patch };
    if (path === "provider" && !("provider" in patch)) delete options["provider"];
    const err = await optionsError(options);
    expect(err.code).toBe("KEEL_AGENT_OPTIONS_INVALID");
    expect(err.location.path).toBe(path);
    expect(err.message).toContain("Fix the option at the path shown");
  });

  it("rejects a malformed built-in tool with its index", async () => {
    const err = await optionsError({
      ...base(),
      tools: [
        defineTool({ name: "ok", description: "d", execute: () => "" }),
        { name: "bad name!", description: "d", execute: () => "" },
      ],
    });
    expect(err.code).toBe("KEEL_TOOL_INVALID");
    expect(err.location.path).toBe("tools[1]");
  });

  it("accepts the documented options", async () => {
    const agent = await createAgent({
      ...base(),
      name: "a",
      instructions: "be brief",
      limits: { maxRounds: 3 },
      toolTimeouts: { info: 100 },
      caps: { contextEntries: 4 },
      trace: "full",
      approve: () => true,
    });
    expect(agent.limits.maxRounds).toBe(3);
    expect(agent.toolTimeouts).toMatchObject({ info: 100, exec: 600_000 });
    await agent.close();
  });
});

describe("run() input", () => {
  it("rejects a non-string input with KEEL_INPUT_INVALID and stores nothing", async () => {
    const agent = await createAgent(base());
    const session = await agent.session();
    const before = (await session.events()).length;
    await expect(session.run({ text: "hi" } as unknown as string)).rejects.toMatchObject({
      code: "KEEL_INPUT_INVALID",
    });
    expect((await session.events()).length).toBe(before);
    expect(session.busy).toBe(false);
    await agent.close();
  });
});

describe("live events", () => {
  it("the tracing interceptor publishes phase.started for every phase run, in order, with the turn id", async () => {
    const everywhere = definePlugin({
      name: "everywhere",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_policy", () => undefined);
        ctx.on("round.pre_request", () => undefined);
        ctx.on("turn.post_turn", () => undefined);
      },
    });
    const agent = await createAgent({
      ...base(),
      provider: scriptedProvider([{ text: "hello there" }]),
      plugins: [everywhere],
    });
    const seen: AgentEvent[] = [];
    agent.subscribe((e) => seen.push(e));
    const session = await agent.session();
    const result = await session.run("hi");
    const started = seen.filter((e) => e.type === "phase.started");
    expect(started.map((e) => e.type === "phase.started" && e.phase)).toEqual([
      "turn.pre_policy",
      "round.pre_request",
      "turn.post_turn",
    ]);
    expect(started.every((e) => e.turnId === result.turnId)).toBe(true);
    const text = seen
      .filter((e) => e.type === "model.delta")
      .map((e) => (e.type === "model.delta" ? e.text : ""))
      .join("");
    expect(text).toBe("hello there");
    await agent.close();
  });
});

describe("tool-call limit within one response", () => {
  it("runs calls up to the limit, skips the rest with a result each, then gives a final round", async () => {
    let runs = 0;
    const tick = defineTool({ name: "tick", description: "count", execute: () => String(++runs) });
    const provider = scriptedProvider([
      { toolCalls: [1, 2, 3, 4, 5].map(() => ({ name: "tick", args: {} })) },
      { text: "done" },
    ]);
    const agent = await createAgent({ ...base(), provider, tools: [tick], limits: { maxToolCalls: 2 } });
    const session = await agent.session();
    const result = await session.run("tick five times");
    expect(runs).toBe(2);
    const results = session.messages.filter((m) => m.role === "tool");
    expect(results).toHaveLength(5);
    expect(
      results
        .slice(2)
        .every((m) => m.role === "tool" && m.isError && JSON.stringify(m.content).includes("limit of 2 tool calls")),
    ).toBe(true);
    expect(result.verdict).toEqual({ status: "stopped", reason: "max_tool_calls" });
    expect(provider.requests[1]!.tools).toEqual([]);
    await agent.close();
  });
});
