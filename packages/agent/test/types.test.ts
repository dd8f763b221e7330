/**
 * Compile-time contracts, checked by `tsc` in `pnpm test`: a handler can only return the
 * contribution kinds its phase accepts, and its event is the phase's own type. Each
 * `@ts-expect-error` line fails the typecheck if the kernel's types stop rejecting it.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { definePlugin, PHASES } from "../src/index.ts";
import type { PhaseEvent } from "../src/index.ts";

describe("phase types", () => {
  it("derive what a handler may return and receive from the phase table", () => {
    const plugin = definePlugin({
      name: "typed",
      version: "1.0.0",
      options: z.object({ topK: z.number().default(3) }),
      setup(ctx) {
        const topK: number = ctx.options.topK;
        ctx.on("turn.pre_prompt_context", (event) => ({
          kind: "prompt_context",
          id: "a",
          domain: "d",
          content: `${event.input} ${topK}`,
        }));
        ctx.on(
          "turn.pre_prompt_context",
          // @ts-expect-error a prompt_section is not accepted by turn.pre_prompt_context
          () => ({ kind: "prompt_section", id: "a", sectionId: "s", domain: "d", content: "x" }),
          { id: "wrong-kind" },
        );
        // @ts-expect-error tool.pre_call events have a call, not a verdict
        ctx.on("tool.pre_call", (event) => void event.verdict, { id: "wrong-field" });
        ctx.on("tool.pre_call", (event) =>
          event.call.name === "rm" ? { kind: "tool_decision", decision: "deny", reason: "no" } : undefined,
        );
        ctx.on("turn.post_turn", (event) => [{ kind: "diagnostic", code: "x", message: event.verdict.status }]);
        // @ts-expect-error unknown phase names do not compile
        ctx.on("turn.pre_prompt", () => undefined);
        // @ts-expect-error the await policy is a closed set
        ctx.on("turn.pre_policy", () => undefined, { await: "sometimes" });
      },
    });
    const e = { phase: "round.pre_request" } as PhaseEvent;
    if (e.phase === "round.pre_request") {
      const round: number = e.round; // narrowed by the discriminant
      void round;
    }
    expect(plugin.name).toBe("typed");
    // The table is readonly in its type and frozen at run time: no plugin can widen a phase.
    expect(Object.isFrozen(PHASES)).toBe(true);
    expect(Object.isFrozen(PHASES["tool.pre_call"].accepts)).toBe(true);
  });
});
