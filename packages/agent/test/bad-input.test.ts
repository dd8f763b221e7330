import { describe, expect, it } from "vitest";
import type { ModelEvent, ModelProvider } from "../src/index.ts";
import { createAgent, defineTool, ProviderError } from "../src/index.ts";
import { MemorySessionStore } from "../../testkit/src/index.ts";

function provider(events: () => AsyncIterable<ModelEvent>): ModelProvider {
  return { id: "test:bad", stream: () => events() };
}

async function runWith(p: ModelProvider, tools = [] as ReturnType<typeof defineTool>[]) {
  const agent = await createAgent({ provider: p, store: new MemorySessionStore(), tools });
  const session = await agent.session();
  const result = await session.run("keep this message");
  const events = await session.events();
  await agent.close();
  return { result, session, events };
}

describe("a misbehaving provider", () => {
  it("a malformed response message fails the turn with a located reason, keeping the user's message", async () => {
    const { result, session, events } = await runWith(
      provider(async function* () {
        yield {
          type: "response",
          message: { role: "assistant", content: "not an array" } as never,
          stopReason: "end_turn",
          usage: {},
        };
      }),
    );
    expect(result.verdict).toMatchObject({
      status: "failed",
      reason: "provider_error",
      errorClass: "unknown",
      code: "KEEL_PROVIDER_ERROR",
    });
    expect(result.verdict.status === "failed" && result.verdict.message).toContain(
      "malformed response message (content:",
    );
    expect(session.messages).toEqual([{ role: "user", content: [{ type: "text", text: "keep this message" }] }]);
    expect(events.some((e) => e.type === "model.failed")).toBe(true);
  });

  it("a stream that ends without its final response is a network failure", async () => {
    const { result } = await runWith(
      provider(async function* () {
        yield { type: "text_delta", text: "partial" };
      }),
    );
    expect(result.verdict).toMatchObject({ status: "failed", errorClass: "network" });
  });

  it("a stream that throws a plain error is classified unknown, not a crash", async () => {
    const { result, session } = await runWith(
      provider(async function* () {
        yield { type: "text_delta", text: "x" };
        throw new TypeError("socket exploded");
      }),
    );
    expect(result.verdict).toMatchObject({ status: "failed", reason: "provider_error", errorClass: "unknown" });
    expect(result.verdict.status === "failed" && result.verdict.message).toContain("socket exploded");
    expect(session.messages).toHaveLength(1);
  });

  it("garbage usage numbers are ignored, not summed into NaN", async () => {
    const { result } = await runWith(
      provider(async function* () {
        yield {
          type: "response",
          message: { role: "assistant", content: [{ type: "text", text: "hi" }] },
          stopReason: "end_turn",
          usage: { inputTokens: Number.NaN, outputTokens: -5, cacheReadTokens: "7" as never },
        };
      }),
    );
    expect(result.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });

  it("a classified ProviderError keeps its class and status in the log", async () => {
    const { result, events } = await runWith(
      provider(async function* () {
        yield* [];
        throw new ProviderError("overloaded", "try later", { status: 529 });
      }),
    );
    expect(result.verdict).toMatchObject({ status: "failed", errorClass: "overloaded" });
    expect(events.find((e) => e.type === "model.failed")).toMatchObject({ errorClass: "overloaded", status: 529 });
  });
});

describe("tools that return odd things", () => {
  it("every output becomes well-formed content blocks", async () => {
    const outputs: unknown[] = [
      undefined,
      42,
      { a: 1 },
      { content: [{ type: "text", text: "fine" }, { type: "video", url: "x" }, null] },
      { content: { nested: true } },
      { content: "plain", isError: true },
    ];
    const tools = outputs.map((out, i) =>
      defineTool({ name: `t${i}`, description: "odd", execute: () => out as never }),
    );
    let round = 0;
    const p: ModelProvider = {
      id: "test:calls",
      async *stream() {
        round++;
        const content =
          round === 1
            ? outputs.map((_, i) => ({ type: "tool_call" as const, id: `c${i}`, name: `t${i}`, args: {} }))
            : [{ type: "text" as const, text: "done" }];
        yield {
          type: "response",
          message: { role: "assistant", content },
          stopReason: round === 1 ? "tool_use" : "end_turn",
          usage: {},
        };
      },
    };
    const { session } = await runWith(p, tools);
    const results = session.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => (m.role === "tool" ? [m.content, m.isError] : null))).toEqual([
      [[{ type: "text", text: "" }], false],
      [[{ type: "text", text: "42" }], false],
      [[{ type: "text", text: '{"a":1}' }], false],
      [
        [
          { type: "text", text: "fine" },
          { type: "text", text: '{"type":"video","url":"x"}' },
          { type: "text", text: "null" },
        ],
        false,
      ],
      [[{ type: "text", text: '{"nested":true}' }], false],
      [[{ type: "text", text: "plain" }], true],
    ]);
  });
});

describe("oversized plugin messages", () => {
  it("a handler's 10,000-char error and diagnostic are kept as 512-char previews in the log", async () => {
    const { definePlugin, PREVIEW_CHARS } = await import("../src/index.ts");
    const { scriptedProvider } = await import("../../testkit/src/index.ts");
    const loud = definePlugin({
      name: "loud",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_policy", () => {
          throw new Error("x".repeat(10_000));
        });
        ctx.on("turn.pre_prompt_context", () => ({
          kind: "diagnostic",
          code: "loud.note",
          message: "y".repeat(10_000),
        }));
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store: new MemorySessionStore(),
      plugins: [loud],
    });
    const session = await agent.session();
    await session.run("hi");
    const events = await session.events();
    const diagnostics = events.filter((e) => e.type === "diagnostic");
    expect(diagnostics).toHaveLength(2);
    for (const d of diagnostics) {
      expect(d.type === "diagnostic" && d.message.length).toBeLessThan(PREVIEW_CHARS + 300);
      expect(d.type === "diagnostic" && d.message).toContain("9488 more chars");
    }
    const summary = events.find((e) => e.type === "phase.completed" && e.phase === "turn.pre_policy");
    expect(summary?.type === "phase.completed" && summary.handlers[0]!.error!.length).toBeLessThan(PREVIEW_CHARS + 40);
    await agent.close();
  });
});
