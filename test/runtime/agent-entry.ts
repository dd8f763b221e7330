/**
 * The smallest whole Keel agent, bundled by the runtime tests for workerd and for a page in
 * Chromium (test/runtime/*.test.ts): createAgent with an in-memory store, one plugin that adds a
 * prompt section, one zod-typed tool, and a model written inline that needs no network. Round 1
 * asks for the tool; round 2 answers with the tool's result and says whether the system prompt
 * it was sent held the plugin's section. Nothing here may import a `node:` module.
 */
import { createAgent, MemorySessionStore } from "@keel/agent";
import { codePointSlice, definePlugin, defineTool } from "@keel/kernel";
import type { ModelEvent, ModelProvider, ModelRequest } from "@keel/kernel";
// zod/mini, as a user who wants the smallest bundle writes it (classic "zod" works as well).
import * as z from "zod/mini";

/** The plugin's section: the model below looks for this text in the system prompt. */
export const HOUSE_RULE = "Answer with the product and nothing else (runtime proof 7f3a).";

/** What one turn did, in plain JSON (it crosses a Worker's response and page.evaluate). */
export interface RunOutcome {
  text: string;
  toolRan: boolean;
  systemHadSection: boolean;
  verdict: string;
  events: string[];
}

export async function runOnce(): Promise<RunOutcome> {
  let toolRan = false;
  let systemHadSection = false;

  const houseRules = definePlugin({
    name: "house-rules",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_compile", () => ({
        kind: "prompt_section",
        id: "house-rules:rule",
        sectionId: "house-rules",
        domain: "style",
        title: "House rules",
        content: HOUSE_RULE,
      }));
    },
  });

  const multiply = defineTool({
    name: "multiply",
    description: "Multiply two integers.",
    input: z.object({ a: z.int(), b: z.int() }),
    category: "info",
    execute: ({ a, b }) => {
      toolRan = true;
      return String(a * b);
    },
  });

  // Stateless, like a real model: the conversation so far decides the round.
  const model: ModelProvider = {
    id: "inline:scripted",
    contextWindow: 8_000,
    async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
      const last = request.messages.at(-1);
      const usage = { inputTokens: 10, outputTokens: 5 };
      if (last?.role !== "tool") {
        const args = { a: 6, b: 7 };
        yield { type: "tool_call_delta", id: "call_1", name: "multiply", argsText: JSON.stringify(args) };
        const message = {
          role: "assistant" as const,
          content: [{ type: "tool_call" as const, id: "call_1", name: "multiply", args }],
        };
        yield { type: "response", message, stopReason: "tool_use", usage };
        return;
      }
      systemHadSection = request.system.includes(HOUSE_RULE);
      const product = last.content.map((b) => (b.type === "text" ? b.text : "")).join("");
      const text = `6 × 7 = ${product}. The house rules were ${systemHadSection ? "" : "not "}in my prompt.`;
      for (const piece of [codePointSlice(text, 0, 10), codePointSlice(text, 10)])
        yield { type: "text_delta", text: piece };
      yield {
        type: "response",
        message: { role: "assistant", content: [{ type: "text", text }] },
        stopReason: "end_turn",
        usage,
      };
    },
  };

  const agent = await createAgent({
    name: "runtime-proof",
    provider: model,
    tools: [multiply],
    plugins: [houseRules],
    store: new MemorySessionStore(),
  });
  try {
    const session = await agent.session();
    const result = await session.run("What is 6 times 7? Use the tool.");
    const events = (await session.events()).map((e) => e.type);
    await session.close();
    return { text: result.text, toolRan, systemHadSection, verdict: result.verdict.status, events };
  } finally {
    await agent.close();
  }
}
