/**
 * The OpenAI adapter on the real `openai` SDK against the wire server: Chat Completions and the
 * Responses API (text, one and several tool calls, reasoning, usage), and compatible servers without a key.
 */
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiProvider, type OpenAIProviderOptions } from "../src/index.ts";
import { ask, FAST, run, timeTool, weatherTool, withResults } from "./support/helpers.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());
const last = () => server.requests[server.requests.length - 1]!;

const chat = (o: Partial<OpenAIProviderOptions> = {}) =>
  openaiProvider({ model: "gpt-4o", api: "chat", apiKey: "sk-test", baseURL: server.openaiBaseURL, ...FAST, ...o });
const responses = (o: Partial<OpenAIProviderOptions> = {}) =>
  openaiProvider({ model: "gpt-5", apiKey: "sk-test", baseURL: server.openaiBaseURL, ...FAST, ...o });

describe("openai chat completions", () => {
  it("streams text and reports usage from the include_usage chunk (cached tokens apart)", async () => {
    server.enqueue({ text: "Hi from chat.", chunks: 5, usage: { input: 30, cacheRead: 70, output: 5 } });
    const r = await run(chat(), ask("hi"));
    expect(r.error).toBeUndefined();
    expect(r.events.filter((e) => e.type === "text_delta")).toHaveLength(5);
    expect(r.response!.message.content).toEqual([{ type: "text", text: "Hi from chat." }]);
    expect(r.response!.stopReason).toBe("end_turn");
    expect(r.response!.usage).toMatchObject({
      inputTokens: 30,
      cacheReadTokens: 70,
      outputTokens: 5,
      cacheWriteTokens: 0,
    });
    expect(r.response!.usage.costUsd).toBeCloseTo((30 * 2.5 + 70 * 1.25 + 5 * 10) / 1e6, 12);
    const req = last();
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe("Bearer sk-test");
    expect(req.body).toMatchObject({
      model: "gpt-4o",
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "hi" },
      ],
    });
  });

  it("assembles several tool calls whose argument deltas interleave by index, and sends the results back", async () => {
    server.enqueue(
      {
        interleave: true,
        toolCalls: [
          { id: "call_a", name: "get_weather", args: { city: "Oslo" }, chunks: 4 },
          { id: "call_b", name: "get_time", args: { city: "Lima" }, chunks: 3 },
          { id: "call_c", name: "get_weather", args: { city: "Kyiv" }, chunks: 2 },
        ],
      },
      { text: "All done." },
    );
    const p = chat();
    const request = ask("three things", { tools: [weatherTool, timeTool] });
    const r1 = await run(p, request);
    expect(r1.response!.stopReason).toBe("tool_use");
    expect(r1.response!.message.content).toEqual([
      { type: "tool_call", id: "call_a", name: "get_weather", args: { city: "Oslo" } },
      { type: "tool_call", id: "call_b", name: "get_time", args: { city: "Lima" } },
      { type: "tool_call", id: "call_c", name: "get_weather", args: { city: "Kyiv" } },
    ]);
    const ids = r1.events.filter((e) => e.type === "tool_call_delta").map((e) => (e as { id: string }).id);
    expect(ids.slice(0, 6)).toEqual(["call_a", "call_b", "call_c", "call_a", "call_b", "call_c"]);
    expect(last().body.tools[0]).toEqual({
      type: "function",
      function: { name: "get_weather", description: "Weather for a city.", parameters: weatherTool.parameters },
    });
    const r2 = await run(p, withResults(request, r1.response!.message));
    expect(r2.error).toBeUndefined();
    const sent = last().body.messages;
    expect(sent[2]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        expect.anything(),
        expect.anything(),
      ],
    });
    expect(sent.slice(3).map((m: { role: string; tool_call_id: string }) => [m.role, m.tool_call_id])).toEqual([
      ["tool", "call_a"],
      ["tool", "call_b"],
      ["tool", "call_c"],
    ]);
  });

  it("reads reasoning_content deltas of compatible servers as thinking and does not send it back", async () => {
    server.enqueue({ thinking: { text: "Let me think.", chunks: 3 }, text: "42" }, { text: "ok" });
    const p = chat();
    const r = await run(p, ask("q"));
    expect(r.events.filter((e) => e.type === "thinking_delta")).toHaveLength(3);
    expect(r.response!.message.content).toEqual([
      { type: "thinking", text: "Let me think.", providerData: { provider: "openai-chat" } },
      { type: "text", text: "42" },
    ]);
    await run(p, {
      ...ask("q"),
      messages: [
        ...ask("q").messages,
        r.response!.message,
        { role: "user", content: [{ type: "text", text: "and?" }] },
      ],
    });
    expect(last().body.messages[2]).toEqual({ role: "assistant", content: "42" });
  });

  it("talks to a compatible server with no key: no Authorization header, max_tokens, chat by default, no price", async () => {
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      server.enqueue({ text: "local model here" });
      const p = openaiProvider({ model: "llama3.1:8b", compatible: true, baseURL: server.openaiBaseURL, ...FAST });
      expect(p.id).toBe("openai-compatible:llama3.1:8b");
      const r = await run(p, ask("hi", { options: { maxTokens: 100 } }));
      expect(r.error).toBeUndefined();
      expect(r.text).toBe("local model here");
      expect(r.response!.usage.costUsd).toBeUndefined();
      expect(last().path).toBe("/v1/chat/completions");
      expect(last().headers.authorization).toBeUndefined();
      expect(last().body.max_tokens).toBe(100);
      expect(last().body.max_completion_tokens).toBeUndefined();
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    }
  });

  it("generates unique ids when a compatible server omits tool call ids", async () => {
    server.enqueue({
      toolCalls: [
        { id: "", name: "get_weather", args: { city: "A" } },
        { id: "", name: "get_weather", args: { city: "B" } },
      ],
    });
    const r = await run(chat(), ask("x", { tools: [weatherTool] }));
    const ids = r.response!.message.content.map((b) => (b.type === "tool_call" ? b.id : ""));
    expect(ids.every((id) => id.startsWith("call_"))).toBe(true);
    expect(new Set(ids).size).toBe(2);
  });
});

describe("openai responses api", () => {
  it("is the default for openai models and streams text with usage", async () => {
    server.enqueue({
      text: "Hello from responses.",
      chunks: 3,
      usage: { input: 40, cacheRead: 60, output: 7, reasoning: 3 },
    });
    const r = await run(responses(), ask("hi"));
    expect(r.error).toBeUndefined();
    expect(last().path).toBe("/v1/responses");
    expect(r.text).toBe("Hello from responses.");
    expect(r.response!.message.content).toEqual([{ type: "text", text: "Hello from responses." }]);
    expect(r.response!.usage).toMatchObject({ inputTokens: 40, cacheReadTokens: 60, outputTokens: 7 });
    expect(last().body).toMatchObject({
      model: "gpt-5",
      stream: true,
      store: false,
      instructions: "You are terse.",
      include: ["reasoning.encrypted_content"],
      input: [{ role: "user", content: [{ type: "input_text", text: "hi" }] }],
    });
  });

  it("streams tool calls and sends function_call / function_call_output items back", async () => {
    server.enqueue(
      {
        text: "Checking.",
        toolCalls: [
          { id: "call_1", name: "get_weather", args: { city: "Oslo" } },
          { id: "call_2", name: "get_time", args: { city: "Oslo" } },
        ],
      },
      { text: "Done." },
    );
    const p = responses();
    const request = ask("Oslo?", { tools: [weatherTool, timeTool] });
    const r1 = await run(p, request);
    expect(r1.response!.stopReason).toBe("tool_use");
    expect(r1.response!.message.content).toEqual([
      { type: "text", text: "Checking." },
      { type: "tool_call", id: "call_1", name: "get_weather", args: { city: "Oslo" } },
      { type: "tool_call", id: "call_2", name: "get_time", args: { city: "Oslo" } },
    ]);
    expect(last().body.tools[0]).toEqual({
      type: "function",
      name: "get_weather",
      description: "Weather for a city.",
      parameters: weatherTool.parameters,
      strict: false,
    });
    const r2 = await run(p, withResults(request, r1.response!.message));
    expect(r2.error).toBeUndefined();
    expect(last().body.input.slice(1)).toEqual([
      { role: "assistant", content: "Checking." },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
      { type: "function_call", call_id: "call_2", name: "get_time", arguments: '{"city":"Oslo"}' },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
      { type: "function_call_output", call_id: "call_2", output: "sunny" },
    ]);
  });

  it("keeps reasoning items (summary + encrypted content) and sends them back verbatim", async () => {
    server.enqueue(
      {
        thinking: { text: "Need the weather tool.", encrypted: "gAAAA-opaque-blob" },
        toolCalls: [{ id: "call_r", name: "get_weather", args: { city: "Lima" } }],
      },
      { text: "Warm." },
    );
    const p = responses({ reasoning: { effort: "low", summary: "auto" } });
    const request = ask("Lima?", { tools: [weatherTool] });
    const r1 = await run(p, request);
    expect(
      r1.events
        .filter((e) => e.type === "thinking_delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("Need the weather tool.");
    const thinking = r1.response!.message.content[0]!;
    expect(thinking).toMatchObject({
      type: "thinking",
      text: "Need the weather tool.",
      providerData: {
        provider: "openai-responses",
        item: {
          type: "reasoning",
          encrypted_content: "gAAAA-opaque-blob",
          summary: [{ type: "summary_text", text: "Need the weather tool." }],
        },
      },
    });
    expect(last().body.reasoning).toEqual({ effort: "low", summary: "auto" });
    await run(p, withResults(request, r1.response!.message));
    expect(last().body.input[1]).toEqual((thinking as { providerData: { item: unknown } }).providerData.item);
    expect(last().body.input[2]).toMatchObject({ type: "function_call", call_id: "call_r" });
  });

  it("maps an incomplete response (max_output_tokens) to max_tokens", async () => {
    server.enqueue({ text: "cut sh", stopReason: "max_tokens" });
    const r = await run(responses(), ask("long"));
    expect(r.response!.stopReason).toBe("max_tokens");
    expect(r.text).toBe("cut sh");
  });
});
