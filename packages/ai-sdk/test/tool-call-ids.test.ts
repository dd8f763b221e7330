/**
 * Tool calls from providers that reuse ids: a server that sends the same id for two different
 * calls (an OpenAI-compatible server's id is passed through as it came) must not lose the first
 * call, as the native adapter (keyed by index) does not; the same finished call sent twice stays
 * one call.
 */
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { ask, run } from "../../providers/test/support/helpers.ts";
import { aiSdkModel } from "../src/index.ts";

function model(parts: LanguageModelV3StreamPart[]) {
  return {
    specificationVersion: "v3" as const,
    provider: "hand.chat",
    modelId: "m",
    supportedUrls: {},
    doGenerate: () => Promise.reject(new Error("not used")),
    doStream: async () => ({
      stream: new ReadableStream<LanguageModelV3StreamPart>({
        start(c) {
          for (const p of parts) c.enqueue(p);
          c.enqueue({
            type: "finish",
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage: {
              inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
              outputTokens: { total: 1, text: 1, reasoning: 0 },
            },
          });
          c.close();
        },
      }),
    }),
  };
}

const callsOf = async (parts: LanguageModelV3StreamPart[]) => {
  const r = await run(aiSdkModel(model(parts)), ask("hi"));
  expect(r.error).toBeUndefined();
  const deltas = r.events.filter((e) => e.type === "tool_call_delta" && e.name !== undefined);
  return { calls: r.response!.message.content.filter((b) => b.type === "tool_call"), deltas };
};

describe("tool call ids", () => {
  it("two different calls sharing an id are both kept, in order", async () => {
    const { calls, deltas } = await callsOf([
      { type: "tool-call", toolCallId: "call_0", toolName: "get_weather", input: '{"city":"Paris"}' },
      { type: "tool-call", toolCallId: "call_0", toolName: "get_time", input: '{"city":"Oslo"}' },
    ]);
    expect(calls).toEqual([
      { type: "tool_call", id: "call_0", name: "get_weather", args: { city: "Paris" } },
      { type: "tool_call", id: "call_0", name: "get_time", args: { city: "Oslo" } },
    ]);
    // What was streamed matches what the response holds.
    expect(deltas.map((d) => d.type === "tool_call_delta" && d.name)).toEqual(["get_weather", "get_time"]);
  });

  it("a streamed call with the id of a finished one is kept too", async () => {
    const { calls } = await callsOf([
      { type: "tool-input-start", id: "", toolName: "get_weather" },
      { type: "tool-input-delta", id: "", delta: '{"city":"Paris"}' },
      { type: "tool-input-end", id: "" },
      { type: "tool-call", toolCallId: "", toolName: "get_weather", input: '{"city":"Paris"}' },
      { type: "tool-call", toolCallId: "", toolName: "get_weather", input: '{"city":"Rome"}' },
    ]);
    expect(calls.map((c) => c.type === "tool_call" && c.args)).toEqual([{ city: "Paris" }, { city: "Rome" }]);
  });

  it("the same finished call sent twice is one call", async () => {
    const call = { type: "tool-call", toolCallId: "c1", toolName: "get_weather", input: '{"city":"Paris"}' } as const;
    const { calls } = await callsOf([call, call]);
    expect(calls).toHaveLength(1);
  });
});
