/**
 * End to end through the kernel: createAgent({ provider: resolveModel(...) }) running a turn with a
 * tool call against the wire server, for Anthropic, OpenAI Responses and OpenAI Chat; notices and
 * classified failures land in the event log and the verdict; context_too_long gets exactly one
 * compaction retry from the kernel, never a loop in the adapter.
 */
import { startWireServer, type WireServer } from "@keel/wire-server";
import { createAgent, defineTool, definePlugin, type KeelEvent, type ModelProvider } from "@keel/agent";
import { MemorySessionStore } from "@keel/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fallback, resolveModel } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const fast = { maxRetries: 1, streamBackoffMs: 10 };
const specs = [
  { spec: "anthropic:claude-sonnet-4-6", api: "anthropic" as const },
  { spec: "openai:gpt-5", api: "responses" as const },
  { spec: "openai:gpt-4o", api: "chat" as const },
];
const providerFor = (spec: string, api: string) =>
  resolveModel(spec, {
    env: {},
    apiKey: "sk-test",
    baseURL: spec.startsWith("anthropic") ? server.anthropicBaseURL : server.openaiBaseURL,
    ...(api === "chat" ? { api: "chat" as const } : {}),
    ...fast,
  });

function weather(calls: string[]) {
  return defineTool({
    name: "get_weather",
    description: "Weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    execute: ({ city }: { city: string }) => {
      calls.push(city);
      return `${city}: 21°C and sunny`;
    },
  });
}

async function turn(provider: ModelProvider, input: string, extra: { plugins?: any[] } = {}) {
  const calls: string[] = [];
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    tools: [weather(calls)],
    instructions: "Use tools when needed.",
    ...extra,
  });
  const session = await agent.session();
  const result = await session.run(input);
  const events = await session.events();
  await agent.close();
  return { result, events, calls };
}
const ofType = <T extends KeelEvent["type"]>(events: KeelEvent[], type: T) =>
  events.filter((e) => e.type === type) as Extract<KeelEvent, { type: T }>[];

describe.each(specs)("a kernel turn on $spec", ({ spec, api }) => {
  it("runs a tool call and answers, with usage, through the real SDK", async () => {
    const from = server.requests.length;
    server.enqueue(
      {
        text: "Let me look.",
        toolCalls: [{ name: "get_weather", args: { city: "Paris" } }],
        usage: { input: 50, output: 10 },
        api,
      },
      { text: "Paris is sunny, 21°C.", usage: { input: 80, output: 8 }, api },
    );
    const { result, events, calls } = await turn(providerFor(spec, api), "Weather in Paris?");
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(result.text).toBe("Paris is sunny, 21°C.");
    expect(calls).toEqual(["Paris"]);
    expect(result.rounds).toBe(2);
    expect(result.usage.inputTokens).toBe(130);
    expect(result.usage.outputTokens).toBe(18);
    const seen = server.requests.slice(from);
    expect(seen.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    // The second request carried the tool result the wire server validated against the call.
    expect(JSON.stringify(seen[1]!.body)).toContain("21°C and sunny");
    expect(ofType(events, "model.responded")).toHaveLength(2);
  });

  it("records a mid-stream retry as a model.notice and still completes", async () => {
    server.enqueue(
      { text: "broken answer", fault: { type: "cut", afterEvents: 5 }, api },
      { text: "whole answer", api },
    );
    const { result, events } = await turn(providerFor(spec, api), "hi");
    expect(result.verdict.status).toBe("completed");
    expect(result.text).toBe("whole answer");
    const notices = ofType(events, "model.notice");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ kind: "retry", provider: spec });
  });

  it("cancelling the turn mid-stream closes the HTTP connection", async () => {
    server.enqueue({ text: "a long answer that never ends", chunks: 6, fault: { type: "hang", afterEvents: 6 }, api });
    const from = server.requests.length;
    const agent = await createAgent({ provider: providerFor(spec, api), store: new MemorySessionStore() });
    const session = await agent.session();
    const ac = new AbortController();
    const pending = session.run("go on", { signal: ac.signal });
    while (server.requests.length === from) await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    const result = await pending;
    expect(result.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect((await server.settled(from)).outcome).toBe("client_closed");
    await agent.close();
  });

  it("fails the turn with a classified error in the verdict and the log (401: auth)", async () => {
    server.enqueue({ error: "auth", api });
    const { result, events } = await turn(providerFor(spec, api), "hi");
    expect(result.verdict).toMatchObject({
      status: "failed",
      reason: "provider_error",
      errorClass: "auth",
      code: "KEEL_PROVIDER_ERROR",
    });
    expect(ofType(events, "model.failed")[0]).toMatchObject({ errorClass: "auth", status: 401 });
  });
});

describe("context_too_long", () => {
  it("is retried once by the kernel after a plugin compacts; the adapter never loops", async () => {
    const compactor = definePlugin({
      name: "test-compactor",
      version: "1.0.0",
      kernel: "^1",
      setup(ctx) {
        ctx.on("round.pre_request", (e) => (e.retry ? [{ kind: "request_options", options: { maxTokens: 100 } }] : []));
      },
    });
    const from = server.requests.length;
    server.enqueue(
      { error: "context_length", api: "anthropic" },
      { error: "context_length", api: "anthropic" },
      { text: "never reached", api: "anthropic" },
    );
    const { result } = await turn(providerFor("anthropic:claude-sonnet-4-6", "anthropic"), "a very long story", {
      plugins: [compactor],
    });
    expect(result.verdict).toMatchObject({ status: "failed", errorClass: "context_too_long" });
    const seen = server.requests.slice(from);
    expect(seen).toHaveLength(2);
    expect(seen[1]!.body.max_tokens).toBe(100);
    expect(server.pending()).toBe(1); // drain the unused answer
    await turn(providerFor("anthropic:claude-sonnet-4-6", "anthropic"), "drain");
  });
});

describe("fallback through the kernel", () => {
  it("serves from the second provider when the first is overloaded, and logs the fallback", async () => {
    const chain = fallback(
      [providerFor("anthropic:claude-sonnet-4-6", "anthropic"), providerFor("openai:gpt-4o", "chat")],
      { baseFreezeMs: 60_000 },
    );
    server.enqueue(...Array(2).fill({ error: "overloaded", retryAfter: "0.01", api: "anthropic" }), {
      text: "from gpt",
      api: "chat",
    });
    const { result, events } = await turn(chain, "hi");
    expect(result.text).toBe("from gpt");
    expect(ofType(events, "model.notice").map((n) => n.kind)).toEqual(["fallback"]);
    expect(chain.states()[0]!.strikes).toBe(1);
  });
});
