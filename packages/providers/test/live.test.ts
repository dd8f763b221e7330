/**
 * Live tests against the real APIs. They run only when ANTHROPIC_API_KEY / OPENAI_API_KEY are set
 * (models: KEEL_LIVE_ANTHROPIC_MODEL, default claude-haiku-4-5; KEEL_LIVE_OPENAI_MODEL, default gpt-4o-mini).
 */
import { createAgent, defineTool, type ModelProvider } from "@keel/agent";
import { MemorySessionStore } from "@keel/testkit";
import { describe, expect, it } from "vitest";
import { resolveModel } from "../src/index.ts";
import { ask, run } from "./support/helpers.ts";

const anthropicModel = process.env.KEEL_LIVE_ANTHROPIC_MODEL ?? "claude-haiku-4-5";
const openaiModel = process.env.KEEL_LIVE_OPENAI_MODEL ?? "gpt-4o-mini";

async function toolTurn(provider: ModelProvider) {
  const calls: string[] = [];
  const tool = defineTool({
    name: "get_weather",
    description: "Current weather for a city. Always use it for weather questions.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    execute: ({ city }: { city: string }) => (calls.push(city), `${city}: 21 degrees Celsius, sunny`),
  });
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    tools: [tool],
    instructions: "Answer in one short sentence.",
  });
  const session = await agent.session();
  const result = await session.run("What is the weather in Paris right now?");
  await agent.close();
  return { result, calls };
}

describe.skipIf(!process.env.ANTHROPIC_API_KEY)(`live Anthropic (${anthropicModel})`, () => {
  it("streams a short answer with usage", async () => {
    const r = await run(
      resolveModel(`anthropic:${anthropicModel}`),
      ask("Reply with the single word: pong", { options: { maxTokens: 20 } }),
    );
    expect(r.error).toBeUndefined();
    expect(r.text.toLowerCase()).toContain("pong");
    expect(r.response!.usage.inputTokens).toBeGreaterThan(0);
  }, 60_000);

  it("runs a tool call through the kernel", async () => {
    const { result, calls } = await toolTurn(resolveModel(`anthropic:${anthropicModel}`));
    expect(result.verdict.status).toBe("completed");
    expect(calls.length).toBeGreaterThan(0);
    expect(result.text).toMatch(/21|sunny/i);
  }, 120_000);

  it("classifies a bad key as auth", async () => {
    const r = await run(
      resolveModel(`anthropic:${anthropicModel}`, { apiKey: "sk-ant-invalid", maxRetries: 0 }),
      ask("hi"),
    );
    expect(r.error?.errorClass).toBe("auth");
  }, 60_000);
});

describe.skipIf(!process.env.OPENAI_API_KEY)(`live OpenAI (${openaiModel})`, () => {
  for (const api of ["responses", "chat"] as const) {
    it(`${api}: streams a short answer with usage`, async () => {
      const r = await run(
        resolveModel(`openai:${openaiModel}`, { api }),
        ask("Reply with the single word: pong", { options: { maxTokens: 20 } }),
      );
      expect(r.error).toBeUndefined();
      expect(r.text.toLowerCase()).toContain("pong");
      expect((r.response!.usage.inputTokens ?? 0) + (r.response!.usage.cacheReadTokens ?? 0)).toBeGreaterThan(0);
    }, 60_000);

    it(`${api}: runs a tool call through the kernel`, async () => {
      const { result, calls } = await toolTurn(resolveModel(`openai:${openaiModel}`, { api }));
      expect(result.verdict.status).toBe("completed");
      expect(calls.length).toBeGreaterThan(0);
    }, 120_000);
  }

  it("classifies a bad key as auth", async () => {
    const r = await run(resolveModel(`openai:${openaiModel}`, { apiKey: "sk-invalid", maxRetries: 0 }), ask("hi"));
    expect(r.error?.errorClass).toBe("auth");
  }, 60_000);
});
