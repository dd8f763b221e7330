/**
 * What a provider package did not apply must not pass silently: @ai-sdk/openai-compatible with its
 * defaults drops an output schema (it sends `json_object` and only warns), so the model never sees
 * the schema the caller asked for; the provider's call warnings arrive as an `info` notice.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { startWireServer, type WireServer } from "@keel/wire-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ask, run } from "../../providers/test/support/helpers.ts";
import { aiSdkModel } from "../src/index.ts";

let server: WireServer;
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(() => server.close());

const output = {
  name: "answer",
  schema: { type: "object", properties: { a: { type: "number" } }, required: ["a"] },
};

describe("provider warnings", () => {
  it("a dropped output schema (openai-compatible defaults) is announced, saying what to set", async () => {
    const from = server.requests.length;
    server.enqueue({ text: '{"a":1}', api: "chat" });
    const model = createOpenAICompatible({ name: "local", baseURL: server.openaiBaseURL, includeUsage: true })("m");
    const r = await run(aiSdkModel(model), ask("hi", { options: { output } }));
    expect(r.error).toBeUndefined();
    // The schema did not reach the server…
    expect(server.requests[from]!.body.response_format).toEqual({ type: "json_object" });
    // …and the caller is told so.
    expect(r.notices).toHaveLength(1);
    expect(r.notices[0]).toMatchObject({ kind: "info", data: { reason: "provider_warnings" } });
    expect(r.notices[0]!.message).toContain("responseFormat");
    expect(r.notices[0]!.message).toContain("supportsStructuredOutputs");
  });

  it("with the schema supported, nothing is announced", async () => {
    server.enqueue({ text: '{"a":1}', api: "chat" });
    const model = createOpenAICompatible({
      name: "local",
      baseURL: server.openaiBaseURL,
      includeUsage: true,
      supportsStructuredOutputs: true,
    })("m");
    const r = await run(aiSdkModel(model), ask("hi", { options: { output } }));
    expect(r.notices).toEqual([]);
  });

  it("a hand-built provider's odd warnings (non-objects, giant details) give a bounded notice, cut by code points", async () => {
    const giant = "😀".repeat(5_000);
    const model = {
      specificationVersion: "v3" as const,
      provider: "hand.chat",
      modelId: "m",
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error("not used")),
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(c) {
            c.enqueue({
              type: "stream-start",
              warnings: [{ type: "other", message: giant }, 7, null] as never,
            });
            c.enqueue({
              type: "finish",
              finishReason: { unified: "stop", raw: "stop" },
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
    const r = await run(aiSdkModel(model), ask("hi"));
    expect(r.response).toBeDefined();
    const message = r.notices[0]!.message;
    expect(message.length).toBeLessThan(2_000);
    expect(/\p{Cs}/u.test(message)).toBe(false); // no half of a surrogate pair
  });
});
