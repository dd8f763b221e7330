/**
 * The request mapping, read back from what real AI SDK providers sent to the wire server: images,
 * tool results (errors too), options (maxTokens, temperature, stop sequences, toolChoice, extra
 * spec options), reasoning sent back only to the provider that made it; and the guard that refuses
 * objects that are not v3/v4 language models.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { isKeelError, type ModelRequest } from "@keel/kernel";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, run, weatherTool } from "../../providers/test/support/helpers.ts";
import { aiSdkModel } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const chat = () => aiSdkModel(createOpenAI({ apiKey: "k", baseURL: server.openaiBaseURL }).chat("gpt-4o"));
const claude = () =>
  aiSdkModel(createAnthropic({ apiKey: "k", baseURL: `${server.anthropicBaseURL}/v1` })("claude-sonnet-4-6"));

/** The body the wire server received for one request. */
async function sent(provider: ReturnType<typeof chat>, request: ModelRequest, api: "chat" | "anthropic") {
  const from = server.requests.length;
  server.enqueue({ text: "ok", api });
  const r = await run(provider, request);
  expect(r.error).toBeUndefined();
  return server.requests[from]!.body;
}

const history: ModelRequest["messages"] = [
  { role: "user", content: [{ type: "text", text: "Weather?" }] },
  {
    role: "assistant",
    content: [
      { type: "thinking", text: "foreign thoughts", providerData: { provider: "anthropic", signature: "s" } },
      { type: "tool_call", id: "call_1", name: "get_weather", args: { city: "Paris" } },
    ],
  },
  {
    role: "tool",
    toolCallId: "call_1",
    toolName: "get_weather",
    content: [{ type: "text", text: "station offline" }],
    isError: true,
  },
];

describe("request mapping", () => {
  it("an image goes as the provider's image part", async () => {
    const request = ask("", {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "image", mediaType: "image/png", data: PNG },
          ],
        },
      ],
    });
    const body = await sent(chat(), request, "chat");
    expect(body.messages.at(-1).content).toEqual([
      { type: "text", text: "What is this?" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
    ]);
    const anthropic = await sent(claude(), request, "anthropic");
    expect(anthropic.messages[0].content[1]).toMatchObject({
      type: "image",
      source: { type: "base64", media_type: "image/png", data: PNG },
    });
  });

  it("options: system, maxTokens, temperature, stop sequences, toolChoice, extra spec options", async () => {
    const body = await sent(
      chat(),
      ask("hi", {
        tools: [weatherTool],
        options: { maxTokens: 77, temperature: 0.2, toolChoice: "required", extra: { stop: ["END"], seed: 7 } },
      }),
      "chat",
    );
    expect(body.messages[0]).toEqual({ role: "system", content: "You are terse." });
    expect(body).toMatchObject({ max_tokens: 77, temperature: 0.2, tool_choice: "required", stop: ["END"], seed: 7 });
    expect(body.tools[0]).toMatchObject({ type: "function", function: { name: "get_weather" } });
  });

  it("a tool error result is marked as one; reasoning of another provider is not sent", async () => {
    const body = await sent(claude(), ask("", { messages: history, tools: [weatherTool] }), "anthropic");
    expect(body.messages[1].content).toEqual([
      expect.objectContaining({ type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }),
    ]);
    expect(body.messages[2].content[0]).toMatchObject({
      type: "tool_result",
      tool_use_id: "call_1",
      is_error: true,
    });
    expect(JSON.stringify(body.messages[2].content[0])).toContain("station offline");
    const openai = await sent(chat(), ask("", { messages: history, tools: [weatherTool] }), "chat");
    expect(openai.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_1" });
    expect(JSON.stringify(openai)).not.toContain("foreign thoughts");
  });
});

describe("Anthropic prompt caching, placed as the native adapter places it", () => {
  const big = "Background. ".repeat(500); // ~1,500 estimated tokens
  const bigRequest = (options = {}) => ask("question", { system: big, tools: [weatherTool], options });
  const cacheControls = (body: any) => [
    body.tools?.at(-1)?.cache_control,
    Array.isArray(body.system) ? body.system[0].cache_control : undefined,
    body.messages.at(-1).content.at(-1).cache_control,
  ];

  it("no breakpoint below 1,024 estimated tokens; 5 min by default above; 1 h or none when asked", async () => {
    expect(cacheControls(await sent(claude(), ask("short", { tools: [weatherTool] }), "anthropic"))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(cacheControls(await sent(claude(), bigRequest(), "anthropic"))).toEqual(
      Array(3).fill({ type: "ephemeral" }),
    );
    expect(cacheControls(await sent(claude(), bigRequest({ cache: "1h" }), "anthropic"))).toEqual(
      Array(3).fill({ type: "ephemeral", ttl: "1h" }),
    );
    expect(cacheControls(await sent(claude(), bigRequest({ cache: "none" }), "anthropic"))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    // Not an Anthropic model: nothing is added.
    expect(JSON.stringify(await sent(chat(), bigRequest(), "chat"))).not.toContain("cache_control");
  });

  it("cache reads and writes land in usage; 1 h writes are priced as such", async () => {
    server.enqueue({
      text: "a",
      usage: { input: 20, output: 10, cacheRead: 1000, cacheWrite: 200, cacheWrite1h: 300 },
      api: "anthropic",
    });
    const r = await run(claude(), bigRequest());
    expect(r.response!.usage).toMatchObject({
      inputTokens: 20,
      outputTokens: 10,
      cacheReadTokens: 1000,
      cacheWriteTokens: 500,
    });
    expect(r.response!.usage.costUsd).toBeCloseTo((20 * 3 + 10 * 15 + 1000 * 0.3 + 200 * 3.75 + 300 * 6) / 1e6, 12);
  });
});

describe("the model guard", () => {
  const code = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return isKeelError(err) ? [err.code, err.message] : ["not a KeelError", String(err)];
    }
    return ["no error", ""];
  };

  it("refuses a specification v2 model, saying to upgrade the provider package", () => {
    const v2 = { specificationVersion: "v2", provider: "old.chat", modelId: "m", doStream: async () => ({}) };
    const [c, message] = code(() => aiSdkModel(v2 as never));
    expect(c).toBe("KEEL_PROVIDER_MODEL_UNSUPPORTED");
    expect(message).toContain('"v2"');
    expect(message).toContain("Upgrade the @ai-sdk/* provider package");
  });

  it("refuses what is not a language model (a model id string, an embedding model)", () => {
    expect(code(() => aiSdkModel("gpt-4o" as never))[0]).toBe("KEEL_PROVIDER_MODEL_UNSUPPORTED");
    const embedding = createOpenAI({ apiKey: "k" }).embedding("text-embedding-3-small");
    expect(code(() => aiSdkModel(embedding as never))[0]).toBe("KEEL_PROVIDER_MODEL_UNSUPPORTED");
  });

  it("refuses a bad retry option naming it", () => {
    const [c, message] = code(() => aiSdkModel(createOpenAI({ apiKey: "k" })("gpt-4o"), { idleTimeoutMs: -1 }));
    expect(c).toBe("KEEL_PROVIDER_OPTIONS_INVALID");
    expect(message).toContain("idleTimeoutMs");
    const price = code(() => aiSdkModel(createOpenAI({ apiKey: "k" })("gpt-4o"), { price: { input: -1, output: 1 } }));
    expect(price[0]).toBe("KEEL_PROVIDER_OPTIONS_INVALID");
    expect(price[1]).toContain("price");
  });

  it("knows the price and context window of OpenAI and Anthropic models; an option overrides them", () => {
    expect(aiSdkModel(createOpenAI({ apiKey: "k" })("gpt-4o"))).toMatchObject({
      id: "openai.responses:gpt-4o",
      contextWindow: 128_000,
      price: { input: 2.5, output: 10 },
    });
    const own = aiSdkModel(createOpenAI({ apiKey: "k" })("gpt-4o"), { id: "mine:4o", price: false, contextWindow: 9 });
    expect(own).toMatchObject({ id: "mine:4o", contextWindow: 9 });
    expect(own.price).toBeUndefined();
  });
});
