/**
 * The `answer` contribution: a plugin answers a round without asking the model (a workflow's
 * steps). Its calls run as the model's would (decisions, durable approvals, results), the turn
 * ends on an answer without calls, and a round answered with calls where no tools may be called
 * goes to the model instead.
 */
import { describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool, digestOf, messageText } from "../src/node/index.ts";
import type { KeelEvent, KeelPlugin, Message } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";

/** The scripted provider: `requests` holds every request it was sent. */
const counted = (steps: ScriptStep[]) => scriptedProvider(steps);

/** Answers round 1 with `ping`, then (once its result is in) with the result's text. */
function stepper(opts: { ask?: boolean } = {}): KeelPlugin {
  return definePlugin({
    name: "stepper",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("round.pre_request", (e) => {
        const turn = e.messages.slice(e.messages.findLastIndex((m: Message) => m.role === "user"));
        const result = turn.find((m: Message) => m.role === "tool");
        if (!result) return { kind: "answer", reason: "step 1", calls: [{ name: "ping", args: { n: 7 } }] };
        if (result.isError) return undefined;
        return { kind: "answer", reason: "done", text: `result: ${messageText(result)}` };
      });
      if (opts.ask) ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "run step?" }));
    },
  });
}

const ping = defineTool({
  name: "ping",
  description: "Answers pong.",
  parameters: { type: "object", properties: { n: { type: "number" } } },
  execute: (args: { n: number }) => `pong ${args.n}`,
});

describe("round answers", () => {
  it("a plugin answers every round: the tool runs, the model is never asked, the turn ends with the answer", async () => {
    const store = new MemorySessionStore();
    const provider = counted([{ text: "the model" }]);
    const agent = await createAgent({ provider, store, tools: [ping], plugins: [stepper()] });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    expect(provider.requests.length).toBe(0);
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("result: pong 7");
    const events = await store.events(session.id);
    const answered = events.filter(
      (e): e is Extract<KeelEvent, { type: "round.answered" }> => e.type === "round.answered",
    );
    expect(answered.map((e) => [e.round, e.plugin, e.reason, e.calls])).toEqual([
      [1, "stepper", "step 1", 1],
      [2, "stepper", "done", 0],
    ]);
    expect(events.some((e) => e.type === "prompt.compiled" || e.type === "model.responded")).toBe(false);
    const call = events.find((e) => e.type === "tool.completed");
    expect(call).toMatchObject({ name: "ping", status: "ok" });
  });

  it("call ids derive from the turn, round and position (a replay under the same ids gets the same calls)", async () => {
    const store = new MemorySessionStore();
    const agent = await createAgent({ provider: counted([]), store, tools: [ping], plugins: [stepper()] });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    const m = (await store.events(session.id)).find(
      (e) => e.type === "message.appended" && e.message.role === "assistant",
    ) as Extract<KeelEvent, { type: "message.appended" }>;
    const block = m.message.content[0] as { type: string; id: string };
    expect(block.id).toBe(`call_${digestOf(`${r.turnId}\u0000${1}\u0000${0}`)}`);
  });

  it("an answered call that asks pauses durably; approved in a new agent on the same store, the turn finishes", async () => {
    const store = new MemorySessionStore();
    const first = await createAgent({ provider: counted([]), store, tools: [ping], plugins: [stepper({ ask: true })] });
    const s1 = await first.session();
    const paused = await s1.run("go");
    expect(paused.verdict).toMatchObject({ status: "paused", reason: "approval" });
    await first.close();
    const provider = counted([]);
    const second = await createAgent({ provider, store, tools: [ping], plugins: [stepper({ ask: true })] });
    const s2 = await second.session(s1.id);
    const pending = s2.pendingApprovals();
    expect(pending).toHaveLength(1);
    await s2.approve(pending[0]!.callId);
    const done = await s2.resume();
    await second.close();
    expect(done.verdict.status).toBe("completed");
    expect(done.text).toBe("result: pong 7");
    expect(provider.requests.length).toBe(0);
  });

  it("a failed step hands the turn to the model, which sees what happened", async () => {
    const store = new MemorySessionStore();
    const failing = defineTool({
      name: "ping",
      description: "Fails.",
      execute: () => {
        throw new Error("service down");
      },
    });
    const provider = counted([{ text: "The step failed: service down." }]);
    const agent = await createAgent({ provider, store, tools: [failing], plugins: [stepper()] });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("The step failed: service down.");
    const msgs = session.messages;
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(messageText(msgs[2]!)).toContain("service down");
  });

  it("calls in a final round (a guard ran out) are not used: the model answers, a diagnostic says why", async () => {
    const store = new MemorySessionStore();
    const always = definePlugin({
      name: "always",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", () => ({
          kind: "answer",
          reason: "loop",
          calls: [{ name: "ping", args: { n: 1 } }],
        }));
      },
    });
    const provider = counted([{ text: "final words" }]);
    const agent = await createAgent({ provider, store, tools: [ping], plugins: [always], limits: { maxRounds: 2 } });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    expect(provider.requests.length).toBe(1);
    expect(r.text).toBe("final words");
    const events = await store.events(session.id);
    expect(events.filter((e) => e.type === "tool.completed")).toHaveLength(2);
    expect(events.find((e) => e.type === "diagnostic" && e.code === "KEEL_ANSWER_IGNORED")).toMatchObject({
      plugin: "always",
      phase: "round.pre_request",
    });
  });

  it("an answer with neither text nor calls is rejected as invalid and the model is asked", async () => {
    const store = new MemorySessionStore();
    const empty = definePlugin({
      name: "empty",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", () => ({ kind: "answer", reason: "nothing" }) as never);
      },
    });
    const provider = counted([{ text: "asked" }]);
    const agent = await createAgent({ provider, store, plugins: [empty] });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    expect(r.text).toBe("asked");
    const events = await store.events(session.id);
    expect(JSON.stringify(events.filter((e) => e.type === "diagnostic"))).toContain(
      "an answer needs text or at least one call",
    );
  });
});
