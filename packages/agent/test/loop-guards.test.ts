/**
 * Loop guards end to end: each guard trips a `guard.tripped` event and gives the model exactly
 * one final round without tools; stop contributions end the loop; limits override defaults.
 */
import { describe, expect, it } from "vitest";
import { createAgent, DEFAULT_LIMITS, definePlugin, defineTool, messageText } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { AgentOptions, Message } from "../src/index.ts";
import type { ScriptedProvider, ScriptStep } from "../../testkit/src/index.ts";
import { ofType, pairResults, pingTool } from "./support/helpers.ts";

function toolResults(messages: readonly Message[]): Array<{ id: string; text: string; isError: boolean }> {
  return messages.flatMap((m) =>
    m.role === "tool" ? [{ id: m.toolCallId, text: messageText(m), isError: m.isError }] : [],
  );
}

async function setup(steps: ScriptStep[] | ScriptedProvider, extra: Partial<AgentOptions> = {}) {
  const provider = Array.isArray(steps) ? scriptedProvider(steps) : steps;
  const pings = { n: 0 };
  const agent = await createAgent({ provider, store: new MemorySessionStore(), tools: [pingTool(pings)], ...extra });
  const session = await agent.session();
  return { provider, agent, session, pings };
}

const FINAL_MARK = "Tools are disabled for this last response";

/** The last request is a final round for `guard`; every earlier request offered tools without the instruction. */
function expectFinalRound(provider: ScriptedProvider, guard: string): void {
  const reqs = provider.requests;
  const last = reqs[reqs.length - 1]!;
  expect(last.tools).toEqual([]);
  expect(last.system).toContain(`Limit reached: ${guard}.`);
  expect(last.system).toContain(FINAL_MARK);
  for (const r of reqs.slice(0, -1)) {
    expect(r.tools.length).toBeGreaterThan(0);
    expect(r.system).not.toContain(FINAL_MARK);
  }
}

const call = (name = "ping", args: unknown = {}) => ({ name, args });

describe("loop guards", () => {
  it("max_rounds: after maxRounds rounds the model gets one final round without tools", async () => {
    const { provider, session, agent, pings } = await setup(
      [{ toolCalls: [call()] }, { toolCalls: [call()] }, { text: "final answer" }, { text: "never used" }],
      { limits: { maxRounds: 2 } },
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "max_rounds" });
    expect(r.text).toBe("final answer");
    expect(provider.requests).toHaveLength(3);
    expect(provider.remaining).toBe(1);
    expectFinalRound(provider, "max_rounds");
    expect(pings.n).toBe(2);
    const events = await session.events();
    const tripped = ofType(events, "guard.tripped");
    expect(tripped).toHaveLength(1);
    expect(tripped[0]).toMatchObject({ guard: "max_rounds", limit: 2, value: 2 });
    // The trip comes before the final round's request is compiled.
    const compiled = ofType(events, "prompt.compiled");
    expect(compiled.at(-1)!.manifest.finalRound).toBe(true);
    expect(compiled.at(-1)!.manifest.tools).toEqual([]);
    expect(tripped[0]!.seq).toBeLessThan(compiled.at(-1)!.seq);
    expect(ofType(events, "turn.completed").at(-1)!.verdict).toEqual({ status: "stopped", reason: "max_rounds" });
    pairResults(session.messages);
    await agent.close();
  });

  it("max_tool_calls: trips once the calls made reach the limit", async () => {
    const { provider, session, agent, pings } = await setup(
      [{ toolCalls: [call(), call()] }, { toolCalls: [call()] }, { text: "wrapping up" }],
      { limits: { maxToolCalls: 3 } },
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "max_tool_calls" });
    expect(r.toolCalls).toBe(3);
    expect(pings.n).toBe(3);
    expect(provider.requests).toHaveLength(3);
    expectFinalRound(provider, "max_tool_calls");
    const tripped = ofType(await session.events(), "guard.tripped");
    expect(tripped.map((e) => [e.guard, e.limit, e.value])).toEqual([["max_tool_calls", 3, 3]]);
    await agent.close();
  });

  it("token_budget: counts input+output usage reported by the provider", async () => {
    const { provider, session, agent } = await setup(
      [
        { toolCalls: [call()], usage: { inputTokens: 400, outputTokens: 100 } },
        { toolCalls: [call()], usage: { inputTokens: 450, outputTokens: 50 } },
        { text: "out of budget", usage: { inputTokens: 7, outputTokens: 3 } },
      ],
      { limits: { tokenBudget: 1000 } },
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "token_budget" });
    expect(provider.requests).toHaveLength(3);
    expectFinalRound(provider, "token_budget");
    expect(r.usage.inputTokens).toBe(857);
    expect(r.usage.outputTokens).toBe(153);
    const tripped = ofType(await session.events(), "guard.tripped");
    expect(tripped.map((e) => [e.guard, e.limit, e.value])).toEqual([["token_budget", 1000, 1000]]);
    await agent.close();
  });

  it("token_budget: usage just under the budget does not trip", async () => {
    const { provider, session, agent } = await setup(
      [
        { toolCalls: [call()], usage: { inputTokens: 400, outputTokens: 100 } },
        { toolCalls: [call()], usage: { inputTokens: 450, outputTokens: 49 } },
        { text: "done", usage: { inputTokens: 1, outputTokens: 1 } },
      ],
      { limits: { tokenBudget: 1000 } },
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(provider.requests.every((q) => q.tools.length === 1)).toBe(true);
    expect(ofType(await session.events(), "guard.tripped")).toEqual([]);
    await agent.close();
  });

  it("wall_time: a tool still running when wallTimeMs runs out is cut; the turn ends stopped without another round", async () => {
    const slow = defineTool({
      name: "slow",
      description: "Takes a while.",
      execute: (_args, ctx) =>
        new Promise<string>((resolve, reject) => {
          const t = setTimeout(() => resolve("slow done"), 80);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(t);
            reject(new Error("aborted"));
          });
        }),
    });
    const provider = scriptedProvider([{ toolCalls: [call("slow")] }, { text: "late" }, { text: "never used" }]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: [slow],
      limits: { wallTimeMs: 40 },
    });
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "wall_time" });
    expect(provider.requests).toHaveLength(1);
    expect(provider.remaining).toBe(2);
    expect(toolResults(session.messages)).toEqual([
      {
        id: "call_0_0",
        text: 'Cancelled: the turn\'s wall-time limit ran out while "slow" was running.',
        isError: true,
      },
    ]);
    const tripped = ofType(await session.events(), "guard.tripped");
    expect(tripped).toHaveLength(1);
    expect(tripped[0]!.guard).toBe("wall_time");
    expect(tripped[0]!.limit).toBe(40);
    expect(tripped[0]!.value).toBeGreaterThanOrEqual(40);
    await agent.close();
  });

  it("wall_time: a provider stream that ignores its signal is cut when wallTimeMs runs out; the stored turn is stopped (wall_time)", async () => {
    const hanging = {
      id: "hanging",
      stream: () => ({ [Symbol.asyncIterator]: () => ({ next: () => new Promise<never>(() => {}) }) }),
    };
    const agent = await createAgent({
      provider: hanging as never,
      store: new MemorySessionStore(),
      limits: { wallTimeMs: 60 },
    });
    const session = await agent.session();
    const t0 = performance.now();
    const r = await session.run("go");
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(r.verdict).toEqual({ status: "stopped", reason: "wall_time" });
    const events = await session.events();
    expect(ofType(events, "guard.tripped").map((e) => e.guard)).toEqual(["wall_time"]);
    expect(ofType(events, "model.failed")[0]!.message).toContain(
      "wall-time limit (60 ms) ran out during the model call",
    );
    expect(ofType(events, "turn.completed")).toHaveLength(1);
    await agent.close();
  });

  it("wall_time: cutting one call of a parallel group still gives every call exactly one result", async () => {
    const never = defineTool({
      name: "never",
      description: "Never settles.",
      execute: () => new Promise<string>(() => {}),
    });
    const provider = scriptedProvider([
      { toolCalls: [call("never"), call("never"), call("never")] },
      { text: "unused" },
    ]);
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: [never],
      limits: { wallTimeMs: 50 },
    });
    const session = await agent.session();
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "wall_time" });
    const results = toolResults(session.messages);
    expect(results.map((x) => x.id).sort()).toEqual(["call_0_0", "call_0_1", "call_0_2"]);
    expect(results.every((x) => x.isError && x.text.includes("wall-time limit ran out"))).toBe(true);
    await agent.close();
  });

  it("context_ceiling: a request that outgrows the provider's window turns into a final round", async () => {
    const big = "lorem ipsum dolor sit amet ".repeat(300); // ~1,500 tokens: over the ceiling (1,000), under the window (2,000)
    const dump = defineTool({ name: "dump", description: "Returns a lot of text.", execute: () => big });
    const provider = scriptedProvider(
      [{ toolCalls: [call("dump")] }, { text: "summary of what I saw" }, { text: "never used" }],
      { contextWindow: 2000 },
    );
    const agent = await createAgent({
      provider,
      store: new MemorySessionStore(),
      tools: [dump],
      limits: { contextCeiling: 0.5 },
    });
    expect(agent.limits.contextCeiling).toBe(0.5);
    const session = await agent.session();
    const r = await session.run("read it");
    expect(r.verdict).toEqual({ status: "stopped", reason: "context_ceiling" });
    expect(r.text).toBe("summary of what I saw");
    // Round 1 fit and offered the tool; round 2 was re-planned as the final round, one request.
    expect(provider.requests).toHaveLength(2);
    expectFinalRound(provider, "context_ceiling");
    const events = await session.events();
    const tripped = ofType(events, "guard.tripped");
    expect(tripped).toHaveLength(1);
    expect(tripped[0]).toMatchObject({ guard: "context_ceiling", limit: 1000 });
    expect(tripped[0]!.value).toBeGreaterThan(1000);
    // Nothing was sent with the oversize tool list: every prompt.compiled of round 2 is final.
    const round2 = ofType(events, "prompt.compiled").filter((e) => e.manifest.round === 2);
    expect(round2.map((e) => e.manifest.finalRound)).toEqual([true]);
    await agent.close();
  });

  it("context_ceiling: a request over a tiny script contextWindow is never sent; the turn fails with KEEL_CONTEXT_OVERFLOW and the message is kept", async () => {
    const provider = scriptedProvider({ contextWindow: 10, steps: [{ text: "short answer" }] });
    const { session, agent, pings } = await setup(provider);
    const input = "a question long enough to pass ten tokens with the system prompt and tools";
    const r = await session.run(input);
    expect(r.verdict).toMatchObject({ status: "failed", reason: "context_overflow", code: "KEEL_CONTEXT_OVERFLOW" });
    expect(r.verdict.status === "failed" && r.verdict.message).toMatch(/context window is 10; it was not sent/);
    expect(provider.requests).toHaveLength(0);
    expect(pings.n).toBe(0);
    const events = await session.events();
    expect(ofType(events, "guard.tripped").map((e) => [e.guard, e.limit])).toEqual([["context_ceiling", 9]]);
    expect(
      events.some(
        (e) => e.type === "message.appended" && e.message.role === "user" && JSON.stringify(e.message).includes(input),
      ),
    ).toBe(true);
    await agent.close();
  });

  it("context_ceiling: a final round that fits the window (over the ceiling) is still sent", async () => {
    const provider = scriptedProvider({ contextWindow: 60, steps: [{ text: "short answer" }] });
    const { session, agent } = await setup(provider, { limits: { contextCeiling: 0.1 } });
    const r = await session.run("a question long enough to pass six tokens");
    expect(r.verdict).toEqual({ status: "stopped", reason: "context_ceiling" });
    expect(provider.requests).toHaveLength(1);
    expectFinalRound(provider, "context_ceiling");
    await agent.close();
  });

  it("a model that still calls tools in the final round gets an error result per call and a failed verdict", async () => {
    const { provider, session, agent, pings } = await setup(
      [
        { toolCalls: [call()] },
        { text: "one more try", toolCalls: [call(), call("nonexistent")] },
        { text: "never used" },
      ],
      { limits: { maxRounds: 1 } },
    );
    const r = await session.run("go");
    expect(r.verdict).toMatchObject({ status: "failed", reason: "final_round_tool_use", code: "KEEL_GUARD_TRIPPED" });
    expect(r.verdict.status === "failed" && r.verdict.message).toContain("max_rounds");
    expect(provider.requests).toHaveLength(2);
    expect(provider.remaining).toBe(1);
    expectFinalRound(provider, "max_rounds");
    expect(pings.n).toBe(1); // the final-round call never ran
    pairResults(session.messages);
    const results = toolResults(session.messages);
    expect(results).toHaveLength(3);
    expect(results[0]).toEqual({ id: "call_0_0", text: "pong", isError: false });
    for (const res of results.slice(1)) {
      expect(res.isError).toBe(true);
      expect(res.text).toContain("tools are disabled in the final round");
    }
    const events = await session.events();
    const completed = ofType(events, "tool.completed").filter((e) => e.round === 2);
    expect(completed.map((e) => [e.callId, e.status])).toEqual([
      ["call_1_0", "skipped"],
      ["call_1_1", "skipped"],
    ]);
    expect(ofType(events, "turn.failed")).toHaveLength(1);
    await agent.close();
  });

  it("limits override the defaults field by field", async () => {
    const { agent, session, provider } = await setup([{ toolCalls: [call()] }, { text: "stopped" }], {
      limits: { maxRounds: 1 },
    });
    expect(agent.limits).toEqual({ ...DEFAULT_LIMITS, maxRounds: 1 });
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "stopped", reason: "max_rounds" });
    expect(provider.requests).toHaveLength(2);
    await agent.close();

    // The same script shape under the defaults runs many rounds without any guard.
    const steps: ScriptStep[] = [...Array.from({ length: 6 }, () => ({ toolCalls: [call()] })), { text: "all done" }];
    const d = await setup(steps);
    expect(d.agent.limits).toEqual(DEFAULT_LIMITS);
    const rd = await d.session.run("go");
    expect(rd.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(rd.rounds).toBe(7);
    expect(d.pings.n).toBe(6);
    expect(ofType(await d.session.events(), "guard.tripped")).toEqual([]);
    await d.agent.close();
  });

  it("a normal turn completes with end_turn, offers tools every round and never adds the final instruction", async () => {
    const { provider, session, agent } = await setup([{ toolCalls: [call()] }, { text: "pong received" }]);
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.rounds).toBe(2);
    expect(r.toolCalls).toBe(1);
    for (const q of provider.requests) {
      expect(q.tools.map((t) => t.name)).toEqual(["ping"]);
      expect(q.system).not.toContain(FINAL_MARK);
    }
    const events = await session.events();
    expect(ofType(events, "guard.tripped")).toEqual([]);
    expect(ofType(events, "turn.completed").map((e) => e.verdict)).toEqual([
      { status: "completed", reason: "end_turn" },
    ]);
    await agent.close();
  });

  it("a max_tokens stop reason is reported in the completed verdict", async () => {
    const { session, agent } = await setup([{ text: "cut o", stopReason: "max_tokens" }]);
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "max_tokens" });
    await agent.close();
  });

  describe("stop contributions", () => {
    function stopper(
      phase: "round.post_response" | "round.pre_request",
      when: (round: number) => boolean,
      seen: number[],
    ) {
      return definePlugin({
        name: "stopper",
        version: "1.0.0",
        setup(ctx) {
          ctx.on(phase, (e) => {
            seen.push(e.round);
            return when(e.round) ? { kind: "stop", reason: "budget exhausted" } : undefined;
          });
        },
      });
    }

    it("a stop from round.post_response skips the pending tool calls, one skipped result each", async () => {
      const seen: number[] = [];
      const { provider, session, agent, pings } = await setup(
        [{ toolCalls: [call(), call(), call("nonexistent")] }, { text: "never used" }],
        { plugins: [stopper("round.post_response", () => true, seen)] },
      );
      const r = await session.run("go");
      expect(r.verdict).toEqual({ status: "stopped", reason: "plugin_stop", detail: "budget exhausted" });
      expect(provider.requests).toHaveLength(1);
      expect(pings.n).toBe(0);
      pairResults(session.messages);
      const results = toolResults(session.messages);
      expect(results.map((x) => x.id)).toEqual(["call_0_0", "call_0_1", "call_0_2"]);
      for (const res of results) {
        expect(res.isError).toBe(true);
        expect(res.text).toContain("a plugin asked to stop (budget exhausted)");
      }
      const completed = ofType(await session.events(), "tool.completed");
      expect(completed.map((e) => e.status)).toEqual(["skipped", "skipped", "skipped"]);
      await agent.close();
    });

    it("a stop from round.post_response on a later text response ends the loop before follow-ups", async () => {
      const seen: number[] = [];
      const { provider, session, agent, pings } = await setup(
        [{ toolCalls: [call()] }, { text: "answer" }, { text: "never used" }],
        {
          plugins: [stopper("round.post_response", (round) => round === 2, seen)],
        },
      );
      // Queue the follow-up while the turn runs (after its first response).
      const unsubscribe = agent.subscribe((e) => {
        if (e.type === "tool.started") void session.followUp("and then?");
      });
      const r = await session.run("go");
      unsubscribe();
      expect(r.verdict).toEqual({ status: "stopped", reason: "plugin_stop", detail: "budget exhausted" });
      expect(r.text).toBe("answer");
      expect(seen).toEqual([1, 2]);
      expect(pings.n).toBe(1);
      expect(provider.requests).toHaveLength(2);
      // The follow-up was not consumed by the stopped turn.
      expect(session.followUps.map((f) => f.text)).toEqual(["and then?"]);
      await agent.close();
    });

    it("a stop from round.pre_request ends the turn without a provider request", async () => {
      const seen: number[] = [];
      const { provider, session, agent } = await setup([{ toolCalls: [call()] }, { text: "never used" }], {
        plugins: [stopper("round.pre_request", (round) => round === 2, seen)],
      });
      const r = await session.run("go");
      expect(r.verdict).toEqual({ status: "stopped", reason: "plugin_stop", detail: "budget exhausted" });
      expect(provider.requests).toHaveLength(1);
      expect(seen).toEqual([1, 2]);
      pairResults(session.messages);
      await agent.close();
    });
  });
});
