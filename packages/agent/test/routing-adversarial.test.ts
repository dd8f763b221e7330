/**
 * Adversarial cases of the routing seam and budgets: spend that could escape a budget (a priced
 * provider whose responses carry no costUsd), a route to a member too small for the request, and
 * pool names that are prototype keys.
 */
import { describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import type { AgentOptions, ModelProvider, ModelRequest } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { ofType, pingTool } from "./support/helpers.ts";
import { anthropicProvider } from "../../providers/src/index.ts";

/** A provider with a price whose responses report tokens but no costUsd (as a custom or local adapter may). */
function unpricedUsage(
  id: string,
  steps: ScriptStep[],
  price?: { input: number; output: number },
  contextWindow = 200_000,
) {
  const inner = scriptedProvider(steps, { model: id, contextWindow });
  const requests: ModelRequest[] = [];
  const provider: ModelProvider = {
    id,
    contextWindow,
    ...(price ? { price } : {}),
    stream(request, options) {
      requests.push(request);
      return inner.stream(request, options);
    },
  };
  return { provider, requests };
}

const routeTo = (model: string) =>
  definePlugin({
    name: "test-router",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("round.pre_request", () => [{ kind: "request_options", options: { route: { model, reason: "test" } } }]);
    },
  });

const text = (t: string, usage = { inputTokens: 1000, outputTokens: 100 }): ScriptStep => ({ text: t, usage });

async function agentWith(options: Partial<AgentOptions> & Pick<AgentOptions, "provider">) {
  const agent = await createAgent({ store: new MemorySessionStore(), ...options });
  return { agent, session: await agent.session() };
}

describe("spend that must not escape a budget", () => {
  it("a priced provider whose response has no costUsd is charged at its price (and the log keeps it)", async () => {
    const store = new MemorySessionStore();
    const price = { input: 3, output: 15 };
    // 20,000 × $3/M + 100 × $15/M = $0.0615
    const main = unpricedUsage("x:main", [text("one", { inputTokens: 20_000, outputTokens: 100 })], price);
    const a1 = await createAgent({
      provider: main.provider,
      store,
      limits: { maxSessionCostUsd: 0.062 },
      requestOptions: { maxTokens: 100 },
    });
    const s1 = await a1.session();
    expect((await s1.run("hello")).verdict.status).toBe("completed");
    const responded = ofType(await s1.events(), "model.responded")[0]!;
    expect(responded.usage.costUsd).toBeCloseTo(0.0615, 6);
    await a1.close();
    const again = unpricedUsage("x:main", [text("never")], price);
    const a2 = await createAgent({
      provider: again.provider,
      store,
      limits: { maxSessionCostUsd: 0.062 },
      requestOptions: { maxTokens: 100 },
    });
    const r = await (await a2.session(s1.id)).run("again");
    expect(again.requests).toHaveLength(0);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    await a2.close();
  });

  it("a routed member's configured price charges its responses when the provider reports no cost", async () => {
    const main = unpricedUsage("x:main", []);
    const cheap = unpricedUsage("x:cheap", [text("one", { inputTokens: 10_000, outputTokens: 100 }), text("never")]);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { cheap: { provider: cheap.provider, price: { input: 5, output: 5 } } },
      plugins: [routeTo("cheap")],
      limits: { maxSessionCostUsd: 0.0506 },
      requestOptions: { maxTokens: 100 },
    });
    expect((await session.run("hello")).verdict.status).toBe("completed");
    const r = await session.run("again");
    expect(cheap.requests).toHaveLength(1);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
  });
});

describe("a route the request does not fit", () => {
  it("a route to a member whose window is smaller than the request is dropped with a diagnostic: the default serves, the turn keeps its tools", async () => {
    const main = unpricedUsage("x:main", [text("done")]);
    const tiny = unpricedUsage("x:tiny", [text("never")], undefined, 40);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { tiny: { provider: tiny.provider } },
      plugins: [routeTo("tiny")],
      tools: [pingTool({ n: 0 })],
    });
    const r = await session.run("a request that is longer than forty tokens once the tool schema is counted in");
    expect(r.verdict.status).toBe("completed");
    expect(tiny.requests).toHaveLength(0);
    expect(main.requests).toHaveLength(1);
    expect(main.requests[0]!.tools.map((t) => t.name)).toEqual(["ping"]);
    const events = await session.events();
    expect(ofType(events, "guard.tripped")).toEqual([]);
    const d = ofType(events, "diagnostic").find((e) => e.code === "KEEL_ROUTE_UNFIT");
    expect(d?.message).toMatch(/test-router routed round 1 to "tiny".*window of 40.*x:main served it/);
    expect(ofType(events, "prompt.compiled")[0]!.manifest.route).toBeUndefined();
  });
});

describe("pool names that are prototype keys", () => {
  for (const name of ["__proto__", "constructor", "toString"])
    it(`a member named ${name} is routed to like any other`, async () => {
      const main = unpricedUsage("x:main", [text("never")]);
      const odd = unpricedUsage("x:odd", [text("served")]);
      const { session } = await agentWith({
        provider: main.provider,
        pool: Object.fromEntries([[name, { provider: odd.provider }]]),
        plugins: [routeTo(name)],
      });
      const r = await session.run("hello");
      expect(r.verdict.status).toBe("completed");
      expect(odd.requests).toHaveLength(1);
      expect(main.requests).toHaveLength(0);
      expect(ofType(await session.events(), "prompt.compiled")[0]!.manifest.route).toMatchObject({ model: name });
    });

  it("a route to a prototype key the pool does not have is unknown, not the prototype's function", async () => {
    const main = unpricedUsage("x:main", [text("served")]);
    const other = unpricedUsage("x:other", []);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { other: { provider: other.provider } },
      plugins: [routeTo("constructor")],
    });
    expect((await session.run("hello")).verdict.status).toBe("completed");
    expect(main.requests).toHaveLength(1);
    expect(ofType(await session.events(), "diagnostic").map((d) => d.code)).toContain("KEEL_ROUTE_UNKNOWN");
  });
});

describe("a child session spends the parent's budget", () => {
  it("a child started by a tool may spend only the dollars its parent turn has left", async () => {
    const parent = unpricedUsage(
      "x:parent",
      [{ toolCalls: [{ id: "d1", name: "delegate" }], usage: { inputTokens: 8000, outputTokens: 0 } }, text("done")],
      { input: 1, output: 1 },
    );
    // The child's one request is estimated at ≥ 100 × $100/M = $0.01; the parent has $0.002 left.
    const child = unpricedUsage("x:child", [text("spent")], { input: 1, output: 100 });
    let childVerdict: unknown;
    const delegate = defineTool({
      name: "delegate",
      description: "asks a helper",
      execute: async (_args: unknown, ctx) => {
        const run = await ctx.child({
          name: "helper",
          input: "look it up",
          agent: { provider: child.provider, requestOptions: { maxTokens: 100 } },
        });
        childVerdict = run.result.verdict;
        return "helper done";
      },
    });
    const { session } = await agentWith({
      provider: parent.provider,
      tools: [delegate],
      limits: { maxCostUsd: 0.01 },
      requestOptions: { maxTokens: 100 },
    });
    const r = await session.run("delegate it");
    expect(child.requests).toHaveLength(0);
    expect(childVerdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect(r.verdict.status).toBe("completed");
  });

  it("a child's spend counts against the parent session's limit (the parent's next turn is refused)", async () => {
    const steps: ScriptStep[] = [
      { toolCalls: [{ id: "d1", name: "delegate" }], usage: { inputTokens: 1000, outputTokens: 0 } },
      text("done", { inputTokens: 1000, outputTokens: 0 }),
      text("never"),
    ];
    const parent = unpricedUsage("x:parent", steps, { input: 1, output: 1 });
    const child = unpricedUsage("x:child", [text("spent", { inputTokens: 45_000, outputTokens: 0 })], {
      input: 1,
      output: 1,
    });
    const delegate = defineTool({
      name: "delegate",
      description: "asks a helper",
      execute: async (_args: unknown, ctx) => {
        await ctx.child({
          name: "helper",
          input: "go",
          agent: { provider: child.provider, requestOptions: { maxTokens: 100 } },
        });
        return "helper done";
      },
    });
    const { session } = await agentWith({
      provider: parent.provider,
      tools: [delegate],
      limits: { maxSessionCostUsd: 0.0465 },
      requestOptions: { maxTokens: 100 },
    });
    expect((await session.run("delegate it")).verdict.status).toBe("completed");
    expect(child.requests).toHaveLength(1);
    const r = await session.run("again");
    expect(parent.requests).toHaveLength(2);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
  });
});

describe("the output ceiling of a request without maxTokens", () => {
  it("Anthropic asks for max_tokens 8192 by default: the estimate uses it, so a request that can cost more than the limit is not sent", async () => {
    // Nothing listens on port 9: a request that is sent fails the turn instead of stopping it.
    const provider = anthropicProvider({
      model: "claude-sonnet-4-5",
      apiKey: "sk-test",
      baseURL: "http://127.0.0.1:9",
      maxRetries: 0,
    });
    expect(provider.maxOutputTokens).toBe(8192);
    // 8192 × $15/M = $0.1229 can be spent; 4096 × $15/M = $0.0614 would fit under $0.10.
    const { session } = await agentWith({ provider, limits: { maxCostUsd: 0.1 } });
    const r = await session.run("hello");
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect((r.verdict as { detail: string }).detail).toMatch(/estimated at \$0\.12/);
  });

  it("a provider's declared ceiling counts for a routed member too", async () => {
    const main = unpricedUsage("x:main", [text("never")]);
    const big = unpricedUsage("x:big", [text("never")], { input: 1, output: 10 });
    const provider = { ...big.provider, maxOutputTokens: 20_000, stream: big.provider.stream };
    const { session } = await agentWith({
      provider: main.provider,
      pool: { big: { provider } },
      plugins: [routeTo("big")],
      limits: { maxCostUsd: 0.1 },
    });
    // 20,000 × $10/M = $0.20 > $0.10 (4096 × $10/M = $0.04 would pass).
    const r = await session.run("hello");
    expect(big.requests).toHaveLength(0);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
  });
});

describe("the preflight request spends too", () => {
  it("a priced preflight's spend counts in the session's spend, live and read back from the log", async () => {
    const store = new MemorySessionStore();
    const hidden = defineTool({ name: "alpha", description: "The alpha tool.", hidden: true, execute: () => "ran" });
    const agentOf = async (side: ModelProvider, main: ModelProvider) =>
      createAgent({
        provider: main,
        preflight: { model: side },
        tools: [hidden],
        store,
        limits: { maxSessionCostUsd: 0.03 },
        requestOptions: { maxTokens: 100 },
      });
    // The preflight answer costs 40,000 × $1/M = $0.04 (no costUsd reported: charged at its price).
    const side = unpricedUsage(
      "x:side",
      [{ text: '{"plan": "p", "reveal": []}', usage: { inputTokens: 40_000, outputTokens: 0 } }],
      { input: 1, output: 1 },
    );
    const main = unpricedUsage("x:main", [text("never")], { input: 1, output: 1 });
    const a1 = await agentOf(side.provider, main.provider);
    const s1 = await a1.session();
    const r1 = await s1.run("hello");
    expect(side.requests).toHaveLength(1);
    expect(main.requests).toHaveLength(0);
    expect(r1.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect(ofType(await s1.events(), "preflight.completed")[0]!.usage.costUsd).toBeCloseTo(0.04, 6);
    await a1.close();
    const side2 = unpricedUsage(
      "x:side",
      [{ text: '{"plan": "p", "reveal": []}', usage: { inputTokens: 10, outputTokens: 0 } }],
      { input: 1, output: 1 },
    );
    const main2 = unpricedUsage("x:main", [text("never")], { input: 1, output: 1 });
    const a2 = await agentOf(side2.provider, main2.provider);
    const r2 = await (await a2.session(s1.id)).run("again");
    expect(main2.requests).toHaveLength(0);
    expect(r2.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    await a2.close();
  });
});

describe("a route in the agent's own requestOptions", () => {
  it("is taken by the kernel even when no plugin handles round.pre_request: the member serves, no provider sees `route`", async () => {
    const main = unpricedUsage("x:main", [text("never")]);
    const cheap = unpricedUsage("x:cheap", [text("served")]);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { cheap: { provider: cheap.provider } },
      requestOptions: { route: { model: "cheap", reason: "always" } },
    });
    expect((await session.run("hello")).verdict.status).toBe("completed");
    expect(main.requests).toHaveLength(0);
    expect(cheap.requests).toHaveLength(1);
    expect(cheap.requests[0]!.options).not.toHaveProperty("route");
    const m = ofType(await session.events(), "prompt.compiled")[0]!.manifest;
    expect(m.route).toMatchObject({ model: "cheap", reason: "always", plugin: "requestOptions" });
    expect(m.options).not.toHaveProperty("route");
  });
});

describe("what a router sees of the context ceiling", () => {
  it("the routing view carries limits.contextCeiling, the share of a member's window the kernel lets a routed request fill", async () => {
    const main = unpricedUsage("x:main", [text("ok")]);
    const other = unpricedUsage("x:other", []);
    const seen: unknown[] = [];
    const spy = definePlugin({
      name: "spy",
      version: "1.0.0",
      setup: (ctx) => void ctx.on("round.pre_request", (e) => void seen.push(e.routing?.contextCeiling)),
    });
    const { session } = await agentWith({
      provider: main.provider,
      pool: { other: { provider: other.provider } },
      plugins: [spy],
      limits: { contextCeiling: 0.7 },
    });
    await session.run("hello");
    expect(seen).toEqual([0.7]);
  });
});

describe("two handles of one session", () => {
  it("spend one handle's turn made counts when the other runs next (it reads the log first)", async () => {
    const price = { input: 3, output: 15 };
    // 20,000 × $3/M + 100 × $15/M = $0.0615 per answer.
    const main = unpricedUsage(
      "x:main",
      [text("one", { inputTokens: 20_000, outputTokens: 100 }), text("never")],
      price,
    );
    const agent = await createAgent({
      provider: main.provider,
      store: new MemorySessionStore(),
      limits: { maxSessionCostUsd: 0.062 },
      requestOptions: { maxTokens: 100 },
    });
    const h1 = await agent.session();
    const h2 = await agent.session(h1.id);
    expect((await h1.run("hello")).verdict.status).toBe("completed");
    const r = await h2.run("again");
    expect(main.requests).toHaveLength(1);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    await agent.close();
  });
});

describe("a huge pool", () => {
  it("an unknown route's diagnostic names a few members, not all of them (the log stays small)", async () => {
    const main = unpricedUsage("x:main", [text("served")]);
    const member = unpricedUsage("x:m", []);
    const pool = Object.fromEntries(
      Array.from({ length: 5000 }, (_, i) => [`member-${i}-${"x".repeat(40)}`, { provider: member.provider }]),
    );
    const { session } = await agentWith({ provider: main.provider, pool, plugins: [routeTo("nope")] });
    expect((await session.run("hello")).verdict.status).toBe("completed");
    const d = ofType(await session.events(), "diagnostic").find((e) => e.code === "KEEL_ROUTE_UNKNOWN")!;
    expect(d.message).toContain("member-0-");
    expect(d.message).toContain("and 4990 more");
    expect([...d.message].length).toBeLessThan(2000);
  });
});
