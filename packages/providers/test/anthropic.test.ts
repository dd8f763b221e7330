/**
 * The Anthropic adapter on the real @anthropic-ai/sdk against the wire server: text, tool calls,
 * thinking round-trips with signatures, prompt caching tiers, usage and cost.
 */
import { startWireServer, type WireServer } from "@keel/wire-server";
import type { Usage } from "@keel/kernel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anthropicProvider } from "../src/index.ts";
import type { AnthropicProviderOptions } from "../src/index.ts";
import { ask, FAST, run, timeTool, weatherTool, withResults } from "./support/helpers.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const provider = (o: Partial<AnthropicProviderOptions> = {}) =>
  anthropicProvider({
    model: "claude-sonnet-4-6",
    apiKey: "sk-ant-test",
    baseURL: server.anthropicBaseURL,
    ...FAST,
    ...o,
  });
const last = () => server.requests[server.requests.length - 1]!;

describe("anthropic adapter", () => {
  it("streams plain text as deltas, then one response with usage", async () => {
    server.enqueue({ text: "Hello from the wire.", chunks: 4, usage: { input: 12, output: 6 } });
    const r = await run(provider(), ask("hi"));
    expect(r.error).toBeUndefined();
    expect(r.events.filter((e) => e.type === "text_delta")).toHaveLength(4);
    expect(r.text).toBe("Hello from the wire.");
    expect(r.events.filter((e) => e.type === "response")).toHaveLength(1);
    expect(r.events.at(-1)!.type).toBe("response");
    expect(r.response!.message.content).toEqual([{ type: "text", text: "Hello from the wire." }]);
    expect(r.response!.stopReason).toBe("end_turn");
    expect(r.response!.usage).toMatchObject({
      inputTokens: 12,
      outputTokens: 6,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    });
    expect(r.response!.usage.costUsd).toBeCloseTo((12 * 3 + 6 * 15) / 1e6, 12);
    const req = last();
    expect(req.api).toBe("anthropic");
    expect(req.headers["x-api-key"] ?? req.headers.authorization).toMatch(/^(Bearer )?sk-ant-test$/);
    expect(req.body).toMatchObject({
      model: "claude-sonnet-4-6",
      max_tokens: 8192,
      stream: true,
      system: "You are terse.",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    });
  });

  it("streams one tool call and sends its result back as a tool_result the API accepts", async () => {
    server.enqueue(
      {
        text: "Let me check.",
        toolCalls: [{ id: "toolu_01A", name: "get_weather", args: { city: "Paris" }, chunks: 3 }],
      },
      { text: "It is sunny in Paris." },
    );
    const p = provider();
    const request = ask("weather in Paris?", { tools: [weatherTool] });
    const r1 = await run(p, request);
    expect(r1.response!.stopReason).toBe("tool_use");
    expect(r1.response!.message.content).toEqual([
      { type: "text", text: "Let me check." },
      { type: "tool_call", id: "toolu_01A", name: "get_weather", args: { city: "Paris" } },
    ]);
    const deltas = r1.events.filter((e) => e.type === "tool_call_delta");
    expect(deltas[0]).toEqual({ type: "tool_call_delta", id: "toolu_01A", name: "get_weather", argsText: "" });
    expect(
      deltas
        .slice(1)
        .map((d) => (d as { argsText: string }).argsText)
        .join(""),
    ).toBe('{"city":"Paris"}');
    expect(last().body.tools).toEqual([
      { name: "get_weather", description: "Weather for a city.", input_schema: weatherTool.parameters },
    ]);

    const r2 = await run(p, withResults(request, r1.response!.message));
    expect(r2.error).toBeUndefined();
    expect(r2.text).toBe("It is sunny in Paris.");
    const msgs = last().body.messages;
    expect(msgs[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Paris" } },
      ],
    });
    expect(msgs[2]).toEqual({
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "toolu_01A", content: [{ type: "text", text: "sunny" }] }],
    });
  });

  it("streams several tool calls in order and answers all their results in one user turn", async () => {
    server.enqueue(
      {
        toolCalls: [
          { id: "toolu_1", name: "get_weather", args: { city: "Oslo" } },
          { id: "toolu_2", name: "get_time", args: { city: "Oslo" } },
          { id: "toolu_3", name: "get_weather", args: { city: "Rome" } },
        ],
      },
      { text: "done" },
    );
    const p = provider();
    const request = ask("both", { tools: [weatherTool, timeTool] });
    const r1 = await run(p, request);
    const calls = r1.response!.message.content.filter((b) => b.type === "tool_call");
    expect(calls.map((c) => c.type === "tool_call" && [c.id, c.name, c.args])).toEqual([
      ["toolu_1", "get_weather", { city: "Oslo" }],
      ["toolu_2", "get_time", { city: "Oslo" }],
      ["toolu_3", "get_weather", { city: "Rome" }],
    ]);
    const r2 = await run(p, withResults(request, r1.response!.message));
    expect(r2.error).toBeUndefined();
    expect(last().body.messages[2].content.map((b: { tool_use_id: string }) => b.tool_use_id)).toEqual([
      "toolu_1",
      "toolu_2",
      "toolu_3",
    ]);
  });

  it("keeps thinking blocks with their signatures and sends them back verbatim; redacted ones too", async () => {
    server.enqueue(
      {
        thinking: { text: "The user wants weather.", signature: "sig-Opaque+/==" },
        toolCalls: [{ id: "toolu_T", name: "get_weather", args: { city: "Lima" } }],
      },
      { thinking: { text: "", redactedData: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" }, text: "Warm." },
      { text: "ok" },
    );
    const p = provider();
    const request = ask("Lima?", {
      tools: [weatherTool],
      options: { extra: { thinking: { type: "enabled", budget_tokens: 2048 } } },
    });
    const r1 = await run(p, request);
    expect(
      r1.events
        .filter((e) => e.type === "thinking_delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("The user wants weather.");
    expect(r1.response!.message.content[0]).toEqual({
      type: "thinking",
      text: "The user wants weather.",
      providerData: { provider: "anthropic", signature: "sig-Opaque+/==" },
    });
    expect(last().body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
    const request2 = withResults(request, r1.response!.message);
    const r2 = await run(p, request2);
    expect(r2.error).toBeUndefined();
    expect(last().body.messages[1].content[0]).toEqual({
      type: "thinking",
      thinking: "The user wants weather.",
      signature: "sig-Opaque+/==",
    });
    expect(r2.response!.message.content[0]).toEqual({
      type: "thinking",
      text: "",
      redacted: true,
      providerData: { provider: "anthropic", data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" },
    });
    await run(p, {
      ...request2,
      messages: [
        ...request2.messages,
        r2.response!.message,
        { role: "user", content: [{ type: "text", text: "thanks" }] },
      ],
    });
    expect(last().body.messages[3].content[0]).toEqual({
      type: "redacted_thinking",
      data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT",
    });
  });

  it("drops thinking from another provider (no signature) instead of sending an invalid block", async () => {
    server.enqueue({ text: "fine" });
    const r = await run(provider(), {
      ...ask("x"),
      messages: [
        { role: "user", content: [{ type: "text", text: "a" }] },
        {
          role: "assistant",
          content: [
            {
              type: "thinking",
              text: "openai summary",
              providerData: { provider: "openai-responses", item: { type: "reasoning", id: "rs_1" } },
            },
            { type: "text", text: "b" },
          ],
        },
        { role: "user", content: [{ type: "text", text: "c" }] },
      ],
    });
    expect(r.error).toBeUndefined();
    expect(last().body.messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "b" }] });
  });

  describe("prompt caching", () => {
    const big = "Background. ".repeat(500); // ~6,000 chars: ~1,500 estimated tokens
    const bigRequest = (options = {}) => ask("question", { system: big, tools: [weatherTool], options });
    const cacheControls = (body: any) => [
      body.tools?.at(-1)?.cache_control,
      Array.isArray(body.system) ? body.system[0].cache_control : undefined,
      body.messages.at(-1).content.at(-1).cache_control,
    ];

    it("sets no breakpoint below 1,024 estimated input tokens, even when a tier is asked for", async () => {
      server.enqueue({ text: "a" });
      await run(provider(), ask("short", { tools: [weatherTool], options: { cache: "1h" } }));
      expect(cacheControls(last().body)).toEqual([undefined, undefined, undefined]);
      expect(last().body.system).toBe("You are terse.");
    });

    it("uses the 5-minute tier by default above the threshold, on tools, system and the last turn", async () => {
      server.enqueue({ text: "a" });
      await run(provider(), bigRequest());
      expect(cacheControls(last().body)).toEqual([{ type: "ephemeral" }, { type: "ephemeral" }, { type: "ephemeral" }]);
    });

    it("uses the 1-hour tier when the request asks for it or the expected reuse exceeds 300 s", async () => {
      server.enqueue({ text: "a" }, { text: "b" }, { text: "c" });
      await run(provider(), bigRequest({ cache: "1h" }));
      expect(cacheControls(last().body)).toEqual(Array(3).fill({ type: "ephemeral", ttl: "1h" }));
      await run(provider({ cacheReuseMs: 600_000 }), bigRequest());
      expect(cacheControls(last().body)).toEqual(Array(3).fill({ type: "ephemeral", ttl: "1h" }));
      await run(provider({ cacheReuseMs: 120_000 }), bigRequest());
      expect(cacheControls(last().body)).toEqual(Array(3).fill({ type: "ephemeral" }));
    });

    it("sets none when asked (`cache: none` or promptCache off)", async () => {
      server.enqueue({ text: "a" }, { text: "b" });
      await run(provider(), bigRequest({ cache: "none" }));
      expect(cacheControls(last().body)).toEqual([undefined, undefined, undefined]);
      await run(provider({ promptCache: "off" }), bigRequest());
      expect(cacheControls(last().body)).toEqual([undefined, undefined, undefined]);
    });

    it("maps cache reads and writes into usage and prices the 1 h writes as such", async () => {
      server.enqueue({
        text: "a",
        usage: { input: 20, output: 10, cacheRead: 1000, cacheWrite: 200, cacheWrite1h: 300 },
      });
      const r = await run(provider(), bigRequest());
      expect(r.response!.usage).toMatchObject({
        inputTokens: 20,
        outputTokens: 10,
        cacheReadTokens: 1000,
        cacheWriteTokens: 500,
      });
      expect(r.response!.usage.costUsd).toBeCloseTo((20 * 3 + 10 * 15 + 1000 * 0.3 + 200 * 3.75 + 300 * 6) / 1e6, 12);
    });
  });

  it("maps max_tokens and keeps invalid tool JSON as raw text for the kernel to report", async () => {
    server.enqueue({
      toolCalls: [{ id: "toolu_bad", name: "get_weather", argsJson: '{"city": "Par' }],
      stopReason: "max_tokens",
    });
    const r = await run(provider(), ask("x", { tools: [weatherTool] }));
    expect(r.response!.stopReason).toBe("max_tokens");
    expect(r.response!.message.content[0]).toEqual({
      type: "tool_call",
      id: "toolu_bad",
      name: "get_weather",
      args: '{"city": "Par',
    });
  });

  it("reports the context window of the model, or the one given", () => {
    expect(provider().contextWindow).toBe(200_000);
    expect(provider({ contextWindow: 1_000_000 }).contextWindow).toBe(1_000_000);
    expect(provider().id).toBe("anthropic:claude-sonnet-4-6");
  });
});

describe("anthropic adapter: a request without tools (the kernel's final round)", () => {
  it("sends earlier tool calls and results as text, which the API accepts", async () => {
    server.enqueue(
      { toolCalls: [{ id: "toolu_F", name: "get_weather", args: { city: "Nice" } }] },
      { text: "Final answer." },
    );
    const p = provider();
    const request = ask("Nice?", { tools: [weatherTool] });
    const r1 = await run(p, request);
    const r2 = await run(p, { ...withResults(request, r1.response!.message, "cloudy"), tools: [] });
    expect(r2.error).toBeUndefined();
    expect(r2.text).toBe("Final answer.");
    const body = last().body;
    expect(body.tools).toBeUndefined();
    expect(body.messages[1].content).toEqual([
      { type: "text", text: '[called tool get_weather (id toolu_F) with {"city":"Nice"}]' },
    ]);
    expect(body.messages[2].content[0].text).toContain("cloudy");
  });
});

describe("anthropic adapter: prompt cache across rounds (the server models the cache)", () => {
  it("writes the prefix on the first round and reads it on the next one", async () => {
    const system = "Ground rules for the cache round-trip test. ".repeat(150);
    server.enqueue(
      { toolCalls: [{ id: "toolu_C1", name: "get_weather", args: { city: "Bern" } }] },
      { text: "Bern: sunny." },
    );
    const p = provider();
    const request = ask("Bern?", { system, tools: [weatherTool] });
    const r1 = await run(p, request);
    const u1 = r1.response!.usage as Usage;
    expect(u1.cacheReadTokens).toBe(0);
    expect(u1.cacheWriteTokens).toBeGreaterThan(1024);
    const r2 = await run(p, withResults(request, r1.response!.message));
    const u2 = r2.response!.usage as Usage;
    expect(u2.cacheReadTokens).toBe(u1.cacheWriteTokens);
    expect(u2.cacheWriteTokens).toBeGreaterThan(0);
    expect(u2.cacheWriteTokens).toBeLessThan(u1.cacheWriteTokens);
    // Priced: reads at a tenth of the input price.
    expect(u2.costUsd).toBeCloseTo(
      (u2.inputTokens * 3 + u2.outputTokens * 15 + u2.cacheReadTokens * 0.3 + u2.cacheWriteTokens * 3.75) / 1e6,
      12,
    );
  });

  it("caches nothing for a small prompt", async () => {
    server.enqueue({ text: "a" }, { text: "b" });
    const p = provider();
    for (const _ of [1, 2]) {
      const r = await run(p, ask("tiny", { system: "Small cache test." }));
      expect([r.response!.usage.cacheReadTokens, r.response!.usage.cacheWriteTokens]).toEqual([0, 0]);
    }
  });

  describe("structured output (a forced tool)", () => {
    const output = {
      name: "final_answer",
      schema: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
    };
    it("streams the answer tool's input as text deltas and returns it as the only text, stop reason end_turn", async () => {
      server.enqueue({ text: "thinking aloud", toolCalls: [{ name: "final_answer", args: { n: 7 }, chunks: 3 }] });
      const r = await run(provider(), ask("n?", { options: { output } }));
      expect(r.response!.message.content).toEqual([{ type: "text", text: '{"n":7}' }]);
      expect(r.response!.stopReason).toBe("end_turn");
      expect(r.events.filter((e) => e.type === "tool_call_delta")).toEqual([]);
      expect(
        r.events
          .filter((e) => e.type === "text_delta")
          .map((e) => (e.type === "text_delta" ? e.text : ""))
          .join(""),
      ).toBe('thinking aloud{"n":7}');
      expect(last().body.tool_choice).toEqual({ type: "tool", name: "final_answer" });
    });

    it("with a real tool called in the same message, keeps that call and drops the answer (the model answers again)", async () => {
      server.enqueue({
        toolCalls: [
          { name: "get_weather", args: { city: "Oslo" } },
          { name: "final_answer", args: { n: 1 } },
        ],
      });
      const r = await run(provider(), ask("n?", { tools: [weatherTool], options: { output } }));
      expect(r.response!.message.content.map((b) => b.type)).toEqual(["tool_call"]);
      expect(r.response!.stopReason).toBe("tool_use");
      expect(last().body.tool_choice).toEqual({ type: "any" });
    });

    it("with extended thinking on, does not force the tool (the API refuses both)", async () => {
      server.enqueue({ toolCalls: [{ name: "final_answer", args: { n: 2 } }] });
      const r = await run(
        provider(),
        ask("n?", { options: { output, extra: { thinking: { type: "enabled", budget_tokens: 1024 } } } }),
      );
      expect(r.response!.message.content).toEqual([{ type: "text", text: '{"n":2}' }]);
      expect(last().body.tool_choice).toBeUndefined();
    });
  });
});
