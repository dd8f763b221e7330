import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool, PHASE_NAMES } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

describe("smoke", () => {
  it("runs a turn with tool calls through every phase", async () => {
    const seen: string[] = [];
    const tracer = definePlugin({
      name: "tracer",
      version: "1.0.0",
      kernel: "^1",
      setup(ctx) {
        for (const p of PHASE_NAMES) ctx.on(p, (e) => void seen.push(e.phase));
      },
    });
    const provider = scriptedProvider([
      {
        toolCalls: [
          { name: "add", args: { a: 1, b: 2 } },
          { name: "add", args: { a: 3, b: 4 } },
        ],
      },
      { text: "The sums are 3 and 7." },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      plugins: [tracer],
      tools: [
        defineTool({
          name: "add",
          description: "add",
          input: z.object({ a: z.number(), b: z.number() }),
          execute: ({ a, b }) => String(a + b),
        }),
      ],
    });
    const s = await agent.session();
    const r = await s.run("add things");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("The sums are 3 and 7.");
    expect(s.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(seen).toEqual([
      "session.start",
      "turn.pre_policy",
      "turn.pre_prompt_context",
      "turn.pre_tool_materialization",
      "turn.post_preflight_prompt_context",
      "turn.pre_prompt_compile",
      "turn.post_prompt_compile",
      "round.pre_request",
      "round.post_response",
      "tool.pre_call",
      "tool.pre_call",
      "tool.post_result",
      "tool.post_result",
      "round.pre_request",
      "round.post_response",
      "turn.post_turn",
    ]);
    const events = await s.events();
    expect(events.map((e) => e.type)).toContain("prompt.compiled");
    await agent.close();
  });
});
