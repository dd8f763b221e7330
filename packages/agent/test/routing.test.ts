/**
 * The routing seam and budgets: a plugin routes a round to a pool member with
 * `request_options.options.route` (the member serves it, the manifest records member, reason and
 * plugin, the provider never sees `route`); an unknown member is a located diagnostic and the
 * default model serves; a request over a budget is never sent; session spend is read back from
 * the log; without a pool nothing of it shows.
 */
import { describe, expect, it } from "vitest";
import { createAgent, definePlugin, estimateCost } from "../src/index.ts";
import type { AgentOptions, ModelEvent, ModelPriceView, ModelProvider, ModelRequest } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { router } from "../../plugin-router/src/index.ts";
import { ofType, pingTool } from "./support/helpers.ts";

/** A scripted provider with an id and a price, whose responses report costUsd as an adapter does. */
function priced(id: string, steps: ScriptStep[], price?: ModelPriceView, contextWindow = 200_000) {
  const inner = scriptedProvider(steps, { model: id, contextWindow });
  const requests: ModelRequest[] = [];
  const provider: ModelProvider = {
    id,
    contextWindow,
    ...(price ? { price } : {}),
    async *stream(request, options): AsyncIterable<ModelEvent> {
      requests.push(request);
      for await (const e of inner.stream(request, options)) {
        if (e.type === "response" && price)
          yield {
            ...e,
            usage: {
              ...e.usage,
              costUsd: ((e.usage.inputTokens ?? 0) * price.input + (e.usage.outputTokens ?? 0) * price.output) / 1e6,
            },
          };
        else yield e;
      }
    },
  };
  return { provider, requests };
}

/** A plugin that routes every round to `model` (or throws). */
const routeTo = (model: string | (() => string)) =>
  definePlugin({
    name: "test-router",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("round.pre_request", () => [
        {
          kind: "request_options",
          options: { route: { model: typeof model === "string" ? model : model(), reason: "test says so" } },
        },
      ]);
    },
  });

const text = (t: string, usage = { inputTokens: 1000, outputTokens: 100 }): ScriptStep => ({ text: t, usage });

async function agentWith(options: Partial<AgentOptions> & Pick<AgentOptions, "provider">) {
  const agent = await createAgent({ store: new MemorySessionStore(), ...options });
  return { agent, session: await agent.session() };
}

describe("the routing seam", () => {
  it("without a pool: no routing view, no route in the manifest", async () => {
    const main = priced("x:main", [text("hi")]);
    const seen: unknown[] = [];
    const spy = definePlugin({
      name: "spy",
      version: "1.0.0",
      setup: (ctx) => void ctx.on("round.pre_request", (e) => void seen.push(e.routing)),
    });
    const { session } = await agentWith({ provider: main.provider, plugins: [spy] });
    await session.run("hello");
    expect(seen).toEqual([undefined]);
    const m = ofType(await session.events(), "prompt.compiled")[0]!.manifest;
    expect(m.route).toBeUndefined();
  });

  it("a routed round goes to the pool member; the manifest and model.responded say so; route never reaches a provider", async () => {
    const main = priced("x:main", [text("from main")]);
    const cheap = priced("x:cheap", [text("from cheap")], { input: 1, output: 2 }, 64_000);
    const seen: unknown[] = [];
    const spy = definePlugin({
      name: "spy",
      version: "1.0.0",
      setup: (ctx) => void ctx.on("round.pre_request", (e) => void seen.push(e.routing)),
    });
    const { session } = await agentWith({
      provider: main.provider,
      pool: { cheap: { provider: cheap.provider, tags: ["cheap"] } },
      plugins: [spy, routeTo("cheap")],
      tools: [pingTool({ n: 0 })],
    });
    const r = await session.run("hello");
    expect(r.text).toBe("from cheap");
    expect(main.requests).toHaveLength(0);
    expect(cheap.requests).toHaveLength(1);
    expect(cheap.requests[0]!.options).not.toHaveProperty("route");
    expect(seen[0]).toMatchObject({
      members: [
        { name: "cheap", id: "x:cheap", tags: ["cheap"], price: { input: 1, output: 2 }, contextWindow: 64_000 },
      ],
      default: { id: "x:main", contextWindow: 200_000 },
      shape: { tools: 1, images: false, mode: "agent" },
    });
    const events = await session.events();
    const m = ofType(events, "prompt.compiled")[0]!.manifest;
    expect(m.route).toEqual({ model: "cheap", provider: "x:cheap", reason: "test says so", plugin: "test-router" });
    expect(m.options).not.toHaveProperty("route");
    expect(m.contextWindow).toBe(64_000);
    expect(ofType(events, "model.responded")[0]!.provider).toBe("x:cheap");
  });

  it("an unknown member is a located diagnostic and the default model serves", async () => {
    const main = priced("x:main", [text("from main")]);
    const cheap = priced("x:cheap", []);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { cheap: { provider: cheap.provider } },
      plugins: [routeTo("nope")],
    });
    const r = await session.run("hello");
    expect(r.text).toBe("from main");
    const d = ofType(await session.events(), "diagnostic").find((x) => x.code === "KEEL_ROUTE_UNKNOWN")!;
    expect(d).toMatchObject({ plugin: "test-router", phase: "round.pre_request", level: "warn" });
    expect(d.message).toContain('"nope", which is not in the pool (cheap)');
    expect(ofType(await session.events(), "prompt.compiled")[0]!.manifest.route).toBeUndefined();
  });

  it("a router that throws leaves the round on the default model (best effort)", async () => {
    const main = priced("x:main", [text("from main")]);
    const cheap = priced("x:cheap", []);
    const { session } = await agentWith({
      provider: main.provider,
      pool: { cheap: { provider: cheap.provider } },
      plugins: [
        routeTo(() => {
          throw new Error("router broke");
        }),
      ],
    });
    const r = await session.run("hello");
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("from main");
  });

  it("a pool entry that is not a provider is refused at createAgent with its path", async () => {
    const main = priced("x:main", []);
    await expect(
      createAgent({
        provider: main.provider,
        pool: { bad: { provider: {} as ModelProvider } },
        store: new MemorySessionStore(),
      }),
    ).rejects.toThrow(/pool\.bad\.provider/);
  });

  it("the router plugin routes tool rounds to the member tagged tools and keeps it for the turn", async () => {
    const main = priced("x:main", []);
    const small = priced("x:small", [{ toolCalls: [{ name: "ping" }] }, text("done")], { input: 0.1, output: 0.1 });
    const big = priced("x:big", [], { input: 5, output: 25 });
    const chat = priced("x:chat", [], { input: 0.01, output: 0.01 });
    const { session } = await agentWith({
      provider: main.provider,
      pool: {
        chat: { provider: chat.provider, tags: ["cheap"] },
        small: { provider: small.provider, tags: ["tools"] },
        big: { provider: big.provider, tags: ["tools", "images"] },
      },
      plugins: [router()],
      tools: [pingTool({ n: 0 })],
    });
    const r = await session.run("go");
    expect(r.text).toBe("done");
    const routes = ofType(await session.events(), "prompt.compiled").map((e) => e.manifest.route);
    expect(routes.map((x) => x?.model)).toEqual(["small", "small"]);
    expect(routes[0]!.reason).toMatch(/^cheapest that fits: small \(est\. \$[0-9.]+\), needs tools$/);
    expect(routes[1]!.reason).toBe("kept small for this turn (prompt cache stays warm)");
    expect(routes[0]!.plugin).toBe("@keel/plugin-router");
  });
});

describe("budgets", () => {
  it("estimateCost: tokens × input price plus the output ceiling × output price", () => {
    expect(estimateCost(1_000_000, { input: 3, output: 15 }, 1000)).toBeCloseTo(3.015, 9);
    expect(estimateCost(0, { input: 3, output: 15 })).toBeCloseTo((4096 * 15) / 1e6, 9);
    expect(estimateCost(10, undefined)).toBeUndefined();
  });

  it("a request over limits.maxCostUsd is never sent: the turn stops with reason budget and says what to do", async () => {
    const main = priced("x:main", [text("never")], { input: 3, output: 15 });
    const { session } = await agentWith({ provider: main.provider, limits: { maxCostUsd: 0.01 } });
    const r = await session.run("hello");
    expect(main.requests).toHaveLength(0);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    const detail = (r.verdict as { detail: string }).detail;
    expect(detail).toContain("KEEL_BUDGET_EXCEEDED");
    expect(detail).toMatch(
      /This turn spent \$0\.0000 of limits\.maxCostUsd \$0\.0100; the next request to x:main is estimated at \$0\.06\d\d/,
    );
    const g = ofType(await session.events(), "guard.tripped")[0]!;
    expect(g).toMatchObject({ guard: "budget", limit: 0.01 });
  });

  it("the turn's spend counts: the second round is refused once the first spent the budget", async () => {
    const main = priced(
      "x:main",
      [{ toolCalls: [{ name: "ping" }], usage: { inputTokens: 10_000, outputTokens: 10 } }, text("never")],
      {
        input: 3,
        output: 15,
      },
    );
    const { session } = await agentWith({
      provider: main.provider,
      limits: { maxCostUsd: 0.031 },
      requestOptions: { maxTokens: 100 },
      tools: [pingTool({ n: 0 })],
    });
    const r = await session.run("hello");
    expect(main.requests).toHaveLength(1);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect((r.verdict as { detail: string }).detail).toContain("This turn spent $0.0301 of limits.maxCostUsd $0.0310");
  });

  it("session spend is read back from the log: a new agent on the same store refuses the next request", async () => {
    const store = new MemorySessionStore();
    const price = { input: 3, output: 15 };
    const first = priced("x:main", [text("one", { inputTokens: 20_000, outputTokens: 100 })], price);
    const a1 = await createAgent({
      provider: first.provider,
      store,
      limits: { maxSessionCostUsd: 0.062 },
      requestOptions: { maxTokens: 100 },
    });
    const s1 = await a1.session();
    expect((await s1.run("hello")).verdict.status).toBe("completed");
    await a1.close();
    const second = priced("x:main", [text("never")], price);
    const a2 = await createAgent({
      provider: second.provider,
      store,
      limits: { maxSessionCostUsd: 0.062 },
      requestOptions: { maxTokens: 100 },
    });
    const s2 = await a2.session(s1.id);
    const r = await s2.run("again");
    expect(second.requests).toHaveLength(0);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect((r.verdict as { detail: string }).detail).toContain(
      "This session spent $0.0615 of limits.maxSessionCostUsd $0.0620",
    );
    await a2.close();
  });

  it("a model without a price is held to limits.maxSessionTokens", async () => {
    const main = priced("x:main", [text("one", { inputTokens: 500, outputTokens: 50 }), text("never")]);
    const { session } = await agentWith({
      provider: main.provider,
      limits: { maxSessionTokens: 700, maxCostUsd: 0.000001 },
      requestOptions: { maxTokens: 200 },
    });
    expect((await session.run("hello")).verdict.status).toBe("completed");
    const r = await session.run("again");
    expect(main.requests).toHaveLength(1);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect((r.verdict as { detail: string }).detail).toMatch(
      /This session used 550 tokens of limits\.maxSessionTokens 700/,
    );
  });

  it("the router moves to a cheaper member when the preferred one would pass the budget, saying why", async () => {
    const main = priced("x:main", []);
    const strong = priced("x:strong", [], { input: 3, output: 15 });
    const cheap = priced("x:cheap", [text("cheap answer")], { input: 0.1, output: 0.1 });
    const { session } = await agentWith({
      provider: main.provider,
      pool: {
        strong: { provider: strong.provider, tags: ["strong"] },
        cheap: { provider: cheap.provider, tags: ["cheap"] },
      },
      plugins: [router({ policy: "strongest" })],
      limits: { maxCostUsd: 0.01 },
    });
    const r = await session.run("hello");
    expect(r.text).toBe("cheap answer");
    expect(strong.requests).toHaveLength(0);
    const route = ofType(await session.events(), "prompt.compiled")[0]!.manifest.route!;
    expect(route.model).toBe("cheap");
    expect(route.reason).toMatch(/^strongest that fits: cheap/);
  });

  it("run({ maxCostUsd }) tightens the turn's dollar limit, never loosens it; a bad value is refused", async () => {
    const main = priced("x:main", [text("fits")], { input: 3, output: 15 });
    const { session } = await agentWith({
      provider: main.provider,
      limits: { maxCostUsd: 0.01 },
      requestOptions: { maxTokens: 100 },
    });
    const tight = await session.run("hello", { maxCostUsd: 0.001 });
    expect(tight.verdict).toMatchObject({ status: "stopped", reason: "budget" });
    expect((tight.verdict as { detail: string }).detail).toContain("of limits.maxCostUsd $0.0010");
    const loose = await session.run("hello", { maxCostUsd: 5 });
    expect(loose.verdict.status).toBe("completed");
    expect(main.requests).toHaveLength(1);
    await expect(session.run("x", { maxCostUsd: 0 })).rejects.toThrow(/maxCostUsd must be a positive number/);
  });
});
