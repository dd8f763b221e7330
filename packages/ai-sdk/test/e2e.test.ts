/**
 * End to end through the kernel: createAgent({ provider: aiSdkModel(<real @ai-sdk provider>) })
 * against the wire server: a turn with a tool call, its result and a final answer, with usage and
 * cost; reasoning surfaced and sent back; structured output through the spec's `responseFormat`;
 * a 429 retried after its retry-after; a stall cut by the idle timeout; a fallback chain with a
 * native provider, as `keel` builds it from a config.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createAgent, defineTool, type KeelEvent, type ModelProvider } from "@keel/agent";
import { fallback, resolveModel } from "@keel/providers";
import { MemorySessionStore } from "@keel/testkit";
import { startWireServer, type WireApi, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type AiSdkModelOptions, aiSdkModel } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const price = { input: 3, output: 15 };
const fast = { maxRetries: 1, streamBackoffMs: 10, price };
const flavours: Array<{ name: string; api: WireApi; make: (o?: AiSdkModelOptions) => ModelProvider; id: string }> = [
  {
    name: "@ai-sdk/anthropic",
    api: "anthropic",
    id: "anthropic.messages:claude-sonnet-4-6",
    make: (o) =>
      aiSdkModel(createAnthropic({ apiKey: "k", baseURL: `${server.anthropicBaseURL}/v1` })("claude-sonnet-4-6"), {
        ...fast,
        ...o,
      }),
  },
  {
    name: "@ai-sdk/openai (responses)",
    api: "responses",
    id: "openai.responses:gpt-4o",
    make: (o) => aiSdkModel(createOpenAI({ apiKey: "k", baseURL: server.openaiBaseURL })("gpt-4o"), { ...fast, ...o }),
  },
  {
    name: "@ai-sdk/openai-compatible",
    api: "chat",
    id: "wire.chat:local-model",
    make: (o) =>
      aiSdkModel(
        createOpenAICompatible({
          name: "wire",
          baseURL: server.openaiBaseURL,
          includeUsage: true,
          supportsStructuredOutputs: true,
        })("local-model"),
        {
          ...fast,
          ...o,
        },
      ),
  },
];

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

async function turn(provider: ModelProvider, input: string, output?: z.ZodType) {
  const calls: string[] = [];
  const agent = await createAgent({ provider, store: new MemorySessionStore(), tools: [weather(calls)] });
  const session = await agent.session();
  const from = server.requests.length;
  const result = await session.run(input, output ? { output } : {});
  const events = await session.events();
  await agent.close();
  return { result, events, calls, seen: server.requests.slice(from) };
}
const ofType = <T extends KeelEvent["type"]>(events: KeelEvent[], type: T) =>
  events.filter((e) => e.type === type) as Extract<KeelEvent, { type: T }>[];
/** The assistant messages of a log. */
const answers = (events: KeelEvent[]) =>
  ofType(events, "message.appended").flatMap((e) => (e.message.role === "assistant" ? [e.message] : []));

describe.each(flavours)("a kernel turn on $name", ({ api, make, id }) => {
  it("runs a tool call and answers, with usage and cost", async () => {
    server.enqueue(
      {
        text: "Let me look.",
        toolCalls: [{ name: "get_weather", args: { city: "Paris" } }],
        usage: { input: 50, output: 10 },
        api,
      },
      { text: "Paris is sunny, 21°C.", usage: { input: 80, output: 8 }, api },
    );
    const { result, events, calls, seen } = await turn(make(), "Weather in Paris?");
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(result.text).toBe("Paris is sunny, 21°C.");
    expect(calls).toEqual(["Paris"]);
    expect(result.rounds).toBe(2);
    expect(result.usage.inputTokens).toBe(130);
    expect(result.usage.outputTokens).toBe(18);
    expect(result.usage.costUsd).toBeCloseTo((130 * 3 + 18 * 15) / 1e6, 9);
    expect(seen.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    // The second request carried the tool result, which the wire server checked against the call.
    expect(JSON.stringify(seen[1]!.body)).toContain("21°C and sunny");
    const responded = ofType(events, "model.responded");
    expect(responded).toHaveLength(2);
    expect(responded[0]).toMatchObject({ stopReason: "tool_use", provider: id });
    const first = answers(events)[0]!.content.find((b) => b.type === "tool_call");
    expect(first).toMatchObject({ name: "get_weather", args: { city: "Paris" } });
  });

  it("sends a failed tool's result as an error", async () => {
    const agent = await createAgent({
      provider: make(),
      store: new MemorySessionStore(),
      tools: [
        defineTool({
          name: "get_weather",
          description: "Weather.",
          parameters: { type: "object", properties: { city: { type: "string" } } },
          execute: () => {
            throw new Error("station offline");
          },
        }),
      ],
    });
    const session = await agent.session();
    const from = server.requests.length;
    server.enqueue({ toolCalls: [{ name: "get_weather", args: { city: "Oslo" } }], api }, { text: "Sorry.", api });
    const result = await session.run("Weather in Oslo?");
    await agent.close();
    expect(result.text).toBe("Sorry.");
    const body = JSON.stringify(server.requests[from + 1]!.body);
    expect(body).toContain("station offline");
    if (api === "anthropic") expect(body).toContain('"is_error":true');
  });

  it("retries a 429 after its retry-after, then completes", async () => {
    server.enqueue({ error: "rate_limit", retryAfter: "0.05", api }, { text: "after the wait", api });
    const { result, seen } = await turn(make(), "hi");
    expect(result.text).toBe("after the wait");
    expect(seen.map((r) => r.outcome)).toEqual(["http_error", "completed"]);
  });

  it("cuts a stalled stream (idle timeout), logs the retry and completes", async () => {
    server.enqueue(
      { text: "stalls here", chunks: 4, fault: { type: "hang", afterEvents: 5 }, api },
      { text: "flowing", api },
    );
    const { result, events, seen } = await turn(make({ idleTimeoutMs: 100 }), "hi");
    expect(result.text).toBe("flowing");
    const notices = ofType(events, "model.notice");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ kind: "retry", provider: id });
    expect(notices[0]!.message).toContain("stalled");
    expect((await server.settled(seen[0]!.index)).outcome).toBe("client_closed");
  });

  it("fails the turn with a classified error in the verdict and the log (401: auth)", async () => {
    server.enqueue({ error: "auth", api });
    const { result, events } = await turn(make(), "hi");
    expect(result.verdict).toMatchObject({ status: "failed", reason: "provider_error", errorClass: "auth" });
    expect(ofType(events, "model.failed")[0]).toMatchObject({ errorClass: "auth", status: 401 });
  });
});

const Weather = z.object({ city: z.string(), celsius: z.number(), sunny: z.boolean() });

describe("structured output through responseFormat", () => {
  it.each(flavours)("$name: a tool call, then the JSON answer, typed and validated", async ({ api, make }) => {
    const value = { city: "Paris", celsius: 21, sunny: true };
    server.enqueue(
      { toolCalls: [{ name: "get_weather", args: { city: "Paris" } }], api },
      { text: JSON.stringify(value), api },
    );
    const { result, seen } = await turn(make(), "Weather in Paris, as data?", Weather);
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(result.output).toEqual(value);
    for (const { body } of seen) {
      const format =
        api === "anthropic" ? body.output_config?.format : api === "chat" ? body.response_format : body.text?.format;
      expect(format).toBeDefined();
      expect(JSON.stringify(format)).toContain('"celsius"');
    }
  });
});

describe("reasoning", () => {
  it("@ai-sdk/anthropic: thinking is surfaced, and sent back with its signature after a tool call", async () => {
    const p = flavours[0]!.make();
    server.enqueue(
      {
        thinking: { text: "The user wants weather.", signature: "sig-123" },
        toolCalls: [{ name: "get_weather", args: { city: "Paris" } }],
        api: "anthropic",
      },
      { text: "Sunny.", api: "anthropic" },
    );
    const agent = await createAgent({ provider: p, store: new MemorySessionStore(), tools: [weather([])] });
    const session = await agent.session();
    const from = server.requests.length;
    const deltas: string[] = [];
    agent.subscribe((e) => {
      if (e.type === "model.delta" && e.channel === "thinking") deltas.push(e.text);
    });
    await session.run("Weather in Paris?");
    const events = await session.events();
    await agent.close();
    expect(deltas.join("")).toBe("The user wants weather.");
    const thinking = answers(events)[0]!.content[0];
    expect(thinking).toMatchObject({ type: "thinking", text: "The user wants weather." });
    const second = server.requests[from + 1]!;
    expect(second.outcome).toBe("completed");
    expect(second.body.messages[1].content[0]).toEqual({
      type: "thinking",
      thinking: "The user wants weather.",
      signature: "sig-123",
    });
  });

  it("@ai-sdk/openai responses: encrypted reasoning (store: false through extra.providerOptions) goes back", async () => {
    server.enqueue(
      {
        thinking: { text: "Plan: look it up.", encrypted: "enc-abc" },
        toolCalls: [{ name: "get_weather", args: { city: "Paris" } }],
        api: "responses",
      },
      { text: "Sunny.", api: "responses" },
    );
    const agent = await createAgent({
      provider: aiSdkModel(createOpenAI({ apiKey: "k", baseURL: server.openaiBaseURL })("gpt-5")),
      store: new MemorySessionStore(),
      tools: [weather([])],
      requestOptions: {
        extra: { providerOptions: { openai: { store: false, include: ["reasoning.encrypted_content"] } } },
      },
    });
    const session = await agent.session();
    const from = server.requests.length;
    const result = await session.run("Weather in Paris?");
    const events = await session.events();
    await agent.close();
    expect(result.text).toBe("Sunny.");
    expect(answers(events)[0]!.content[0]).toMatchObject({ type: "thinking", text: "Plan: look it up." });
    const [first, second] = server.requests.slice(from);
    expect(first!.body).toMatchObject({ store: false, include: ["reasoning.encrypted_content"] });
    expect(second!.outcome).toBe("completed");
    expect(second!.body.input[1]).toMatchObject({ type: "reasoning", encrypted_content: "enc-abc" });
  });

  it("@ai-sdk/openai-compatible: reasoning_content is surfaced as thinking", async () => {
    server.enqueue({ thinking: { text: "Short question." }, text: "Hello.", api: "chat" });
    const { result, events } = await turn(flavours[2]!.make(), "hi");
    expect(result.text).toBe("Hello.");
    expect(answers(events)[0]!.content[0]).toMatchObject({
      type: "thinking",
      text: "Short question.",
    });
  });
});

describe("fallback next to a native model", () => {
  it("an overloaded AI SDK model is frozen and the native provider serves; the log names both", async () => {
    const chain = fallback(
      [
        flavours[1]!.make({ maxRetries: 1 }),
        resolveModel("anthropic:claude-sonnet-4-6", {
          env: {},
          apiKey: "k",
          baseURL: server.anthropicBaseURL,
          maxRetries: 0,
        }),
      ],
      { baseFreezeMs: 60_000 },
    );
    server.enqueue(...Array(2).fill({ error: "rate_limit", retryAfter: "0.01", api: "responses" }), {
      text: "from claude",
      api: "anthropic",
    });
    const { result, events } = await turn(chain, "hi");
    expect(result.text).toBe("from claude");
    expect(chain.id).toBe("fallback:openai.responses:gpt-4o|anthropic:claude-sonnet-4-6");
    const notice = ofType(events, "model.notice")[0]!;
    expect(notice).toMatchObject({ kind: "fallback", provider: "openai.responses:gpt-4o" });
    expect(notice.data).toMatchObject({ errorClass: "rate_limited", next: "anthropic:claude-sonnet-4-6" });
    expect(ofType(events, "model.responded")[0]).toMatchObject({ provider: "anthropic:claude-sonnet-4-6" });
  });
});
