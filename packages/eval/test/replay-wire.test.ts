/**
 * Replay of sessions recorded through the real provider SDKs (Anthropic Messages, OpenAI
 * Responses, OpenAI Chat Completions) against the wire server: thinking signatures, encrypted
 * reasoning, split surrogate pairs, SDK retries and a provider fallback are all served back
 * from the log, and the same plugins replay identically without a request to the server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import type { KeelEvent, ModelProvider } from "@keel/kernel";
import { fallback, resolveModel } from "@keel/providers";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { startWireServer } from "@keel/wire-server";
import type { WireResponse, WireServer } from "@keel/wire-server";
import { replaySession } from "../src/index.ts";

let server: WireServer;
const dir = mkdtempSync(join(tmpdir(), "keel-replay-wire-"));
beforeAll(async () => {
  server = await startWireServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  execute: (a: unknown) => `definition of ${(a as { word?: string }).word ?? "?"}: a small 😀 thing`,
});

async function recordWith(provider: ModelProvider, name: string, replies: WireResponse[]): Promise<KeelEvent[]> {
  server.enqueue(...replies);
  const path = join(dir, `${name}.sqlite`);
  const agent = await createAgent({ provider, store: new SqliteSessionStore({ path }), home: dir, tools: [lookup] });
  const session = await agent.session();
  const r = await session.run("Define 'tiny', then say it in one line 🙂");
  expect(r.verdict.status, JSON.stringify(r.verdict)).toBe("completed");
  const id = session.id;
  await agent.close();
  const store = new SqliteSessionStore({ path });
  const events = await store.events(id);
  store.close();
  expect(server.pending()).toBe(0);
  return events;
}

async function replayed(events: KeelEvent[], contextWindow: number | undefined) {
  const asked = server.requests.length;
  const report = await replaySession({
    events,
    build: (rig) =>
      createAgent({
        provider: rig.provider,
        sideModel: rig.sideModel,
        store: rig.store,
        home: dir,
        tools: [lookup],
        plugins: rig.plugins,
        ...(rig.approve ? { approve: rig.approve } : {}),
      }),
  });
  expect(server.requests.length).toBe(asked);
  expect(report.notes).toEqual([]);
  expect(report.requests.filter((q) => !q.same)).toEqual([]);
  expect(report.identical).toBe(true);
  expect(report.requests.length).toBeGreaterThanOrEqual(2);
  if (contextWindow)
    expect(events.find((e) => e.type === "prompt.compiled")).toMatchObject({ manifest: { contextWindow } });
  return report;
}

const env = () => ({ ANTHROPIC_API_KEY: "sk-test", OPENAI_API_KEY: "sk-test" });

describe("replay of sessions recorded through the provider SDKs", () => {
  it("Anthropic Messages: signed thinking, a tool call, a 429 retried by the SDK, split surrogate pairs", async () => {
    const provider = resolveModel("anthropic:claude-sonnet-4-6", { env: env(), baseURL: server.anthropicBaseURL });
    const events = await recordWith(provider, "anthropic", [
      {
        thinking: { text: "I should look it up.", signature: "sig-abc" },
        toolCalls: [{ id: "toolu_1", name: "lookup", args: { word: "tiny" } }],
        api: "anthropic",
      },
      { error: "rate_limit", retryAfter: "0" },
      { text: "Tiny: a small 😀 thing, in one line 🙂.", splitPairs: true, api: "anthropic" },
    ]);
    expect(events.some((e) => e.type === "message.appended" && JSON.stringify(e.message).includes("sig-abc"))).toBe(
      true,
    );
    await replayed(events, provider.contextWindow);
  }, 60_000);

  it("OpenAI Responses: encrypted reasoning and a tool call", async () => {
    const provider = resolveModel("openai:gpt-5", { env: env(), baseURL: server.openaiBaseURL });
    const events = await recordWith(provider, "openai", [
      {
        thinking: { text: "Look it up.", encrypted: "enc-xyz" },
        toolCalls: [{ id: "call_1", name: "lookup", args: { word: "tiny" } }],
        api: "responses",
      },
      { text: "Tiny: a small thing.", api: "responses" },
    ]);
    await replayed(events, provider.contextWindow);
  }, 60_000);

  it("OpenAI Chat Completions behind a fallback chain whose first member is down", async () => {
    const down = resolveModel("anthropic:claude-sonnet-4-6", {
      env: env(),
      baseURL: server.anthropicBaseURL,
      maxRetries: 0,
    });
    const chat = resolveModel("openai-compatible:local-model", {
      env: env(),
      baseURL: server.openaiBaseURL,
      contextWindow: 32_000,
    });
    const provider = fallback([down, chat]);
    const events = await recordWith(provider, "chain", [
      { error: "overloaded" },
      {
        toolCalls: [
          { id: "call_a", name: "lookup", args: { word: "tiny" } },
          { id: "call_b", name: "lookup", args: { word: "small" } },
        ],
        interleave: true,
        api: "chat",
      },
      { text: "Both are small.", api: "chat" },
    ]);
    await replayed(events, 32_000);
  }, 60_000);
});
