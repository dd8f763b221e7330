/**
 * A provider that reports no token usage must not be billed as free: @ai-sdk/openai-compatible
 * asks for the usage chunk only with `includeUsage: true`, so by default every call came back as
 * 0 tokens and `costUsd: 0` although a price was set (Keel's native adapter asks for usage by
 * default). Unreported usage now leaves the cost unknown and says so in an `info` notice.
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

const price = { input: 1, output: 2 };

describe("usage a provider did not report", () => {
  it("openai-compatible defaults: no cost claimed, and a notice saying what to set", async () => {
    server.enqueue({ text: "ok", api: "chat", usage: { input: 50, output: 7 } });
    const model = createOpenAICompatible({ name: "local", baseURL: server.openaiBaseURL })("m");
    const provider = aiSdkModel(model, { price });
    const r = await run(provider, ask("hi"));
    expect(r.error).toBeUndefined();
    expect(r.response!.usage.costUsd).toBeUndefined();
    expect(r.notices).toHaveLength(1);
    expect(r.notices[0]).toMatchObject({ kind: "info", data: { reason: "usage_unreported" } });
    expect(r.notices[0]!.message).toContain("includeUsage");
    // Said once per provider, not on every call; the cost stays unknown.
    server.enqueue({ text: "again", api: "chat" });
    const again = await run(provider, ask("hi"));
    expect(again.notices).toEqual([]);
    expect(again.response!.usage.costUsd).toBeUndefined();
  });

  it("with includeUsage: the counts and their cost, no notice", async () => {
    server.enqueue({ text: "ok", api: "chat", usage: { input: 50, output: 7 } });
    const model = createOpenAICompatible({ name: "local", baseURL: server.openaiBaseURL, includeUsage: true })("m");
    const r = await run(aiSdkModel(model, { price }), ask("hi"));
    expect(r.notices).toEqual([]);
    expect(r.response!.usage).toMatchObject({ inputTokens: 50, outputTokens: 7 });
    expect(r.response!.usage.costUsd).toBeCloseTo((50 * 1 + 7 * 2) / 1e6, 12);
  });

  it("usage fields that are NaN, objects or missing count as unreported; a reported 0 does not", async () => {
    const finishWith = (usage: unknown) => ({
      specificationVersion: "v3" as const,
      provider: "hand.chat",
      modelId: "m",
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error("not used")),
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(c) {
            c.enqueue({ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage as never });
            c.close();
          },
        }),
      }),
    });
    for (const usage of [undefined, { inputTokens: { total: Number.NaN }, outputTokens: { total: {} } }]) {
      const r = await run(aiSdkModel(finishWith(usage), { price }), ask("hi"));
      expect(r.response!.usage.costUsd).toBeUndefined();
      expect(r.notices.map((n) => n.data?.reason)).toEqual(["usage_unreported"]);
    }
    const zero = await run(
      aiSdkModel(finishWith({ inputTokens: { total: 0 }, outputTokens: { total: 0 } }), { price }),
      ask("hi"),
    );
    expect(zero.response!.usage.costUsd).toBe(0);
    expect(zero.notices).toEqual([]);
  });
});
