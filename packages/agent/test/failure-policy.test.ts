/**
 * Failure policies (best_effort, required, fallback, fail_closed) × faults (a handler that
 * throws, one that hangs past its deadline, one that returns an invalid contribution), on a
 * collect turn phase (turn.pre_prompt_context) and on the waterfall tool phase
 * (tool.pre_call); plus rejection codes, await policies, defaults and background jobs.
 * Every case checks the verdict, what reached the model, the recorded diagnostics and
 * handler summaries, and that the user's message survived.
 */
import { describe, expect, it } from "vitest";
import type {
  FailurePolicy,
  HookContext,
  KeelEvent,
  KeelPlugin,
  Session,
  SubscribeOptions,
  ToolDefinition,
} from "../src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import {
  createAgent,
  DEFAULT_TIMEOUTS,
  definePlugin,
  KeelError,
  messageText,
  PHASE_NAMES,
  PHASES,
} from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

type Ev<T extends KeelEvent["type"]> = Extract<KeelEvent, { type: T }>;
const ofType = <T extends KeelEvent["type"]>(events: readonly KeelEvent[], type: T): Ev<T>[] =>
  events.filter((e): e is Ev<T> => e.type === type);

const POLICIES: readonly FailurePolicy[] = ["best_effort", "required", "fallback", "fail_closed"];
type Fault = "throws" | "hangs" | "invalid";
const FAULTS: readonly Fault[] = ["throws", "hangs", "invalid"];
const TIMEOUT_MS = 30;
const INPUT = "Please keep every word I said: the launch code is 4711.";

const FAULT_CODE: Record<Fault, string> = {
  throws: "KEEL_HANDLER_THREW",
  hangs: "KEEL_HANDLER_TIMEOUT",
  invalid: "KEEL_CONTRIBUTION_INVALID",
};
const FAULT_STATUS: Record<Fault, string> = { throws: "threw", hangs: "timeout", invalid: "invalid" };
const FAULT_PHRASE: Record<Fault, string> = {
  throws: "threw: boom in faulty",
  hangs: "timed out",
  invalid: "returned an invalid contribution",
};

interface Probe {
  calls: number;
  abortedAtStart: boolean[];
  abortReasons: unknown[];
  order: string[];
}

const newProbe = (): Probe => ({ calls: 0, abortedAtStart: [], abortReasons: [], order: [] });

/**
 * A handler with the given fault. `late` is what a hanging handler resolves with once its
 * signal aborts (too late: the kernel must ignore it); `bad` is the invalid contribution.
 */
function faultyHandler(fault: Fault, probe: Probe, late: unknown, bad: unknown) {
  return (_event: unknown, hctx: HookContext): unknown => {
    probe.calls++;
    probe.abortedAtStart.push(hctx.signal.aborted);
    if (fault === "throws") throw new Error("boom in faulty");
    if (fault === "invalid") return bad;
    return new Promise((resolve) => {
      hctx.signal.addEventListener("abort", () => {
        probe.abortReasons.push(hctx.signal.reason);
        probe.order.push("handler aborted");
        resolve(late);
      });
    });
  };
}

function readTool(counter: { runs: number }): ToolDefinition {
  return {
    name: "read",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } } },
    execute(args: { path: string }) {
      counter.runs++;
      return `contents of ${args.path}`;
    },
  };
}

/** Records the verdict the post_turn phase received, and contributes GOOD-CONTEXT. */
function goodPlugin(seen: { postTurnVerdicts: unknown[] }): KeelPlugin {
  return definePlugin({
    name: "good",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("turn.pre_prompt_context", () => ({
        kind: "prompt_context",
        id: "good",
        domain: "test",
        content: "GOOD-CONTEXT",
      }));
      ctx.on("turn.post_turn", (e) => void seen.postTurnVerdicts.push(e.verdict));
    },
  });
}

async function setup(plugins: KeelPlugin[], steps: ScriptStep[], counter = { runs: 0 }) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    instructions: "You are a test agent.",
    tools: [readTool(counter)],
    plugins,
  });
  const session = await agent.session();
  return { provider, agent, session, counter };
}

/** Nothing the user said is lost: it is the first message, and stored before any phase ran. */
function expectUserKept(session: Session, events: readonly KeelEvent[]): void {
  expect(session.messages[0]).toEqual({ role: "user", content: [{ type: "text", text: INPUT }] });
  const started = ofType(events, "turn.started");
  expect(started[0]?.input).toBe(INPUT);
  const appended = ofType(events, "message.appended").find((e) => e.message.role === "user");
  expect(appended && messageText(appended.message)).toBe(INPUT);
  const firstTurnPhase = ofType(events, "phase.completed").find((e) => e.turnId !== null);
  if (firstTurnPhase) expect(appended!.seq).toBeLessThan(firstTurnPhase.seq);
}

function diagnosticsOf(events: readonly KeelEvent[], plugin: string): Ev<"diagnostic">[] {
  return ofType(events, "diagnostic").filter((d) => d.plugin === plugin);
}

function expectedLevel(policy: FailurePolicy, fault: Fault): "warn" | "error" {
  if (fault === "invalid") return "warn";
  return policy === "required" || policy === "fail_closed" ? "error" : "warn";
}

describe("failure policies on turn.pre_prompt_context (a collect phase)", () => {
  const cases = POLICIES.flatMap((policy) => FAULTS.map((fault) => ({ policy, fault })));

  it.each(cases)("$policy × handler that $fault", async ({ policy, fault }) => {
    const probe = newProbe();
    const seen = { postTurnVerdicts: [] as unknown[] };
    const phase = "turn.pre_prompt_context";
    const faulty = definePlugin({
      name: "faulty",
      version: "1.0.0",
      setup(ctx) {
        const opts: SubscribeOptions<typeof phase> = { failure: policy, timeoutMs: TIMEOUT_MS };
        if (policy === "fallback")
          opts.fallback = [{ kind: "prompt_context", id: "fb", domain: "test", content: "FALLBACK-CONTEXT" }];
        const late = { kind: "prompt_context", id: "faulty-late", domain: "test", content: "FAULTY-CONTEXT" };
        const bad = { kind: "prompt_context", id: "", domain: "test", content: "FAULTY-CONTEXT" };
        ctx.on(phase, faultyHandler(fault, probe, late, bad) as never, opts);
      },
    });
    const { provider, agent, session } = await setup([goodPlugin(seen), faulty], [{ text: "Understood." }]);
    const result = await session.run(INPUT);
    const events = await session.events();

    expect(probe.calls).toBe(1);
    const failsTurn = policy === "required" || policy === "fail_closed";

    // The verdict.
    if (failsTurn) {
      expect(result.verdict).toEqual({
        status: "failed",
        reason: "phase_failed",
        code: "KEEL_PHASE_FAILED",
        message: expect.stringContaining(`Subscription "faulty:${phase}" (failure: ${policy}) ${FAULT_PHRASE[fault]}`),
        plugin: "faulty",
        phase,
      });
      expect(ofType(events, "turn.failed").map((e) => e.verdict)).toEqual([result.verdict]);
      expect(seen.postTurnVerdicts).toEqual([result.verdict]);
    } else {
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(result.text).toBe("Understood.");
    }

    // What reached the model.
    if (failsTurn) {
      expect(provider.requests).toHaveLength(0);
      expect(provider.remaining).toBe(1);
    } else {
      expect(provider.requests).toHaveLength(1);
      const system = provider.requests[0]!.system;
      expect(system).toContain("GOOD-CONTEXT");
      expect(system).not.toContain("FAULTY-CONTEXT");
      if (policy === "fallback") expect(system).toContain('<entry id="fb" domain="test">\nFALLBACK-CONTEXT\n</entry>');
      else expect(system).not.toContain("FALLBACK-CONTEXT");
      expect(messageText(provider.requests[0]!.messages[0]!)).toBe(INPUT);
    }

    // The diagnostics: one, with the fault's code, naming plugin and phase.
    const diags = diagnosticsOf(events, "faulty");
    expect(diags).toHaveLength(1);
    expect(diags[0]).toMatchObject({
      code: FAULT_CODE[fault],
      plugin: "faulty",
      phase,
      level: expectedLevel(policy, fault),
    });
    expect(diags[0]!.message).toContain(FAULT_CODE[fault]);
    expect(diags[0]!.message).toContain(`plugin "faulty", phase "${phase}"`);

    // The handler summaries of the phase.
    const completed = ofType(events, "phase.completed").filter((e) => e.phase === phase);
    expect(completed).toHaveLength(1);
    const [goodSummary, faultySummary] = completed[0]!.handlers;
    expect(goodSummary).toMatchObject({
      plugin: "good",
      subscription: `good:${phase}`,
      status: "ok",
      contributions: 1,
    });
    expect(faultySummary).toMatchObject({
      plugin: "faulty",
      subscription: `faulty:${phase}`,
      status: FAULT_STATUS[fault],
      contributions: 0,
    });
    if (fault === "throws") expect(faultySummary!.error).toBe("boom in faulty");
    if (fault === "hangs") {
      expect(faultySummary!.error).toContain("KEEL_HANDLER_TIMEOUT");
      expect(probe.abortReasons).toHaveLength(1);
    }
    const records = completed[0]!.contributions.filter((r) => r.plugin === "faulty");
    const expectedRecords: unknown[] = [];
    if (fault === "invalid")
      expectedRecords.push({
        plugin: "faulty",
        kind: "prompt_context",
        status: "rejected",
        reason: expect.stringMatching(/^invalid at id: /),
      });
    if (policy === "fallback")
      expectedRecords.push({
        plugin: "faulty",
        kind: "prompt_context",
        id: "fb",
        status: "fallback",
        reason: `handler ${FAULT_STATUS[fault]}`,
      });
    expect(records).toEqual(expectedRecords);

    expectUserKept(session, events);
    await agent.close();
  });
});

describe("failure policies on tool.pre_call (a waterfall phase)", () => {
  const cases = POLICIES.flatMap((policy) => FAULTS.map((fault) => ({ policy, fault })));

  it.each(cases)("$policy × handler that $fault", async ({ policy, fault }) => {
    const probe = newProbe();
    const seen = { postTurnVerdicts: [] as unknown[] };
    const phase = "tool.pre_call";
    const faulty = definePlugin({
      name: "faulty",
      version: "1.0.0",
      setup(ctx) {
        const opts: SubscribeOptions<typeof phase> = { failure: policy, timeoutMs: TIMEOUT_MS };
        if (policy === "fallback")
          opts.fallback = [{ kind: "tool_decision", decision: "deny", reason: "fallback: the guard is unavailable" }];
        const late = { kind: "tool_decision", decision: "allow" };
        const bad = { kind: "tool_decision", decision: "maybe" };
        ctx.on(phase, faultyHandler(fault, probe, late, bad) as never, opts);
      },
    });
    const { provider, agent, session, counter } = await setup(
      [goodPlugin(seen), faulty],
      [{ text: "Reading.", toolCalls: [{ id: "c1", name: "read", args: { path: "a" } }] }, { text: "Done." }],
    );
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(probe.calls).toBe(1);

    const toolDone = ofType(events, "tool.completed");
    if (policy === "required") {
      // The phase failed: the turn fails, the tool never ran, the model was not called again.
      expect(result.verdict).toEqual({
        status: "failed",
        reason: "phase_failed",
        code: "KEEL_PHASE_FAILED",
        message: expect.stringContaining(`Subscription "faulty:${phase}" (failure: required) ${FAULT_PHRASE[fault]}`),
        plugin: "faulty",
        phase,
      });
      expect(seen.postTurnVerdicts).toEqual([result.verdict]);
      expect(counter.runs).toBe(0);
      expect(provider.requests).toHaveLength(1);
      expect(toolDone).toEqual([]);
      // The history stays valid: the unanswered call got a synthesized result.
      expect(session.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
      expect(ofType(events, "context.repaired").flatMap((e) => e.synthesizedResults)).toEqual(["c1"]);
    } else {
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(result.text).toBe("Done.");
      expect(provider.requests).toHaveLength(2);
      const toolMsg = provider.requests[1]!.messages.find((m) => m.role === "tool");
      expect(toolMsg?.role === "tool" && toolMsg.toolCallId).toBe("c1");
      const text = messageText(toolMsg!);
      if (policy === "best_effort") {
        // The failing check is ignored: the call runs.
        expect(counter.runs).toBe(1);
        expect(text).toBe("contents of a");
        expect(toolDone.map((e) => e.status)).toEqual(["ok"]);
      } else {
        // Denied: by the declared fallback decision, or fail-closed.
        expect(counter.runs).toBe(0);
        expect(toolMsg?.role === "tool" && toolMsg.isError).toBe(true);
        expect(text).toContain("KEEL_TOOL_DENIED");
        expect(text).toContain("denied by faulty");
        if (policy === "fallback") expect(text).toContain("fallback: the guard is unavailable");
        else {
          expect(text).toContain("a fail-closed check failed");
          expect(text).toContain("KEEL_PHASE_FAILED");
        }
        expect(toolDone).toEqual([
          expect.objectContaining({ callId: "c1", status: "denied", decision: "deny by faulty" }),
        ]);
      }
    }

    const diags = diagnosticsOf(events, "faulty");
    expect(diags).toHaveLength(1);
    expect(diags[0]).toMatchObject({
      code: FAULT_CODE[fault],
      plugin: "faulty",
      phase,
      level: expectedLevel(policy, fault),
    });
    expect(diags[0]!.message).toContain(`plugin "faulty", phase "${phase}"`);

    const completed = ofType(events, "phase.completed").filter((e) => e.phase === phase);
    expect(completed).toHaveLength(1);
    expect(completed[0]!.handlers).toEqual([
      expect.objectContaining({
        plugin: "faulty",
        subscription: `faulty:${phase}`,
        status: FAULT_STATUS[fault],
        contributions: 0,
      }),
    ]);
    if (policy === "fallback")
      expect(completed[0]!.contributions).toContainEqual({
        plugin: "faulty",
        kind: "tool_decision",
        status: "fallback",
        reason: `handler ${FAULT_STATUS[fault]}`,
      });

    expectUserKept(session, events);
    await agent.close();
  });
});

describe("deadlines and signals", () => {
  it("aborts a hanging handler's ctx.signal at its deadline, before the model is called", async () => {
    const probe = newProbe();
    const faulty = definePlugin({
      name: "faulty",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", faultyHandler("hangs", probe, undefined, undefined) as never, {
          timeoutMs: TIMEOUT_MS,
        });
      },
    });
    const { agent, session } = await setup([faulty], [{ text: "ok" }]);
    agent.subscribe((e) => {
      if (e.type === "prompt.compiled") probe.order.push("prompt.compiled");
    });
    const t0 = performance.now();
    const result = await session.run(INPUT);
    expect(result.verdict.status).toBe("completed");
    expect(probe.abortedAtStart).toEqual([false]);
    expect(probe.abortReasons).toHaveLength(1);
    const reason = probe.abortReasons[0];
    expect(reason).toBeInstanceOf(KeelError);
    expect(reason).toMatchObject({ code: "KEEL_HANDLER_TIMEOUT", plugin: "faulty", phase: "turn.pre_prompt_context" });
    expect((reason as KeelError).location.subscription).toBe("faulty:turn.pre_prompt_context");
    expect((reason as KeelError).message).toContain(`${TIMEOUT_MS} ms deadline`);
    // Aborted at the deadline: not before it, and before the turn went on to the model.
    expect(probe.order).toEqual(["handler aborted", "prompt.compiled"]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    await agent.close();
  });

  it("await defaults: deadline 1000 ms, blocking 30 s, background 180 s; an explicit timeoutMs wins", async () => {
    const plugin = definePlugin({
      name: "waits",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => {}, { await: "deadline" });
        ctx.on("turn.pre_policy", () => {}, { await: "background" });
        ctx.on("round.pre_request", () => {});
        ctx.on("round.post_response", () => {}, { await: "deadline", timeoutMs: 50 });
      },
    });
    const { agent } = await setup([plugin], []);
    const rows = new Map(agent.inspect().map((r) => [r.phase, r.subscriptions]));
    expect(rows.get("turn.pre_prompt_context")).toEqual([
      expect.objectContaining({ id: "waits:turn.pre_prompt_context", await: "deadline", timeoutMs: 1000 }),
    ]);
    expect(rows.get("turn.pre_policy")).toEqual([expect.objectContaining({ await: "background", timeoutMs: 180_000 })]);
    expect(rows.get("round.pre_request")).toEqual([expect.objectContaining({ await: "blocking", timeoutMs: 30_000 })]);
    expect(rows.get("round.post_response")).toEqual([expect.objectContaining({ await: "deadline", timeoutMs: 50 })]);
    expect(DEFAULT_TIMEOUTS).toEqual({ blocking: 30_000, deadline: 1_000, background: 180_000 });
    await agent.close();
  });

  it("a deadline handler past its timeout is dropped like a timeout and the turn goes on", async () => {
    const plugin = definePlugin({
      name: "slowctx",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => new Promise(() => {}), { await: "deadline", timeoutMs: 20 });
      },
    });
    const { agent, session, provider } = await setup([plugin, goodPlugin({ postTurnVerdicts: [] })], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(provider.requests[0]!.system).toContain("GOOD-CONTEXT");
    expect(diagnosticsOf(events, "slowctx")).toEqual([
      expect.objectContaining({ code: "KEEL_HANDLER_TIMEOUT", phase: "turn.pre_prompt_context", level: "warn" }),
    ]);
    await agent.close();
  });
});

describe("default failure policies", () => {
  it("tool.pre_call defaults to fail_closed and every other phase to best_effort (the PHASES table)", async () => {
    expect(Object.fromEntries(PHASE_NAMES.map((p) => [p, PHASES[p].failure]))).toEqual(
      Object.fromEntries(PHASE_NAMES.map((p) => [p, p === "tool.pre_call" ? "fail_closed" : "best_effort"])),
    );
    const everywhere = definePlugin({
      name: "everywhere",
      version: "1.0.0",
      setup(ctx) {
        for (const p of PHASE_NAMES) ctx.on(p, () => {});
      },
    });
    const { agent } = await setup([everywhere], []);
    const rows = agent.inspect();
    expect(rows.map((r) => r.phase)).toEqual(PHASE_NAMES);
    for (const row of rows)
      expect(
        row.subscriptions.map((s) => s.failure),
        row.phase,
      ).toEqual([row.phase === "tool.pre_call" ? "fail_closed" : "best_effort"]);
    await agent.close();
  });

  it("with no failure option, a throwing tool.pre_call handler denies the call and a throwing context handler is skipped", async () => {
    const thrower = definePlugin({
      name: "thrower",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", () => {
          throw new Error("context broke");
        });
        ctx.on("tool.pre_call", () => {
          throw new Error("guard broke");
        });
      },
    });
    const { agent, session, provider, counter } = await setup(
      [goodPlugin({ postTurnVerdicts: [] }), thrower],
      [{ toolCalls: [{ id: "c1", name: "read", args: { path: "a" } }] }, { text: "ok" }],
    );
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(provider.requests[0]!.system).toContain("GOOD-CONTEXT");
    expect(counter.runs).toBe(0);
    const denial = provider.requests[1]!.messages.find((m) => m.role === "tool")!;
    expect(messageText(denial)).toContain("a fail-closed check failed");
    expect(diagnosticsOf(events, "thrower").map((d) => [d.phase, d.code, d.level])).toEqual([
      ["turn.pre_prompt_context", "KEEL_HANDLER_THREW", "warn"],
      ["tool.pre_call", "KEEL_HANDLER_THREW", "error"],
    ]);
    expectUserKept(session, events);
    await agent.close();
  });
});

describe("contribution rejection", () => {
  it("rejects a valid contribution of a kind the phase does not accept with KEEL_CONTRIBUTION_NOT_ACCEPTED", async () => {
    const wrong = definePlugin({
      name: "wrong",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", (() => ({
          kind: "tool_decision",
          decision: "deny",
          reason: "not here",
        })) as never);
      },
    });
    const { agent, session, provider } = await setup([wrong, goodPlugin({ postTurnVerdicts: [] })], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(provider.requests[0]!.system).toContain("GOOD-CONTEXT");
    expect(diagnosticsOf(events, "wrong")).toEqual([
      expect.objectContaining({
        level: "warn",
        code: "KEEL_CONTRIBUTION_NOT_ACCEPTED",
        plugin: "wrong",
        phase: "turn.pre_prompt_context",
        message: expect.stringContaining('Rejected a "tool_decision" contribution'),
      }),
    ]);
    const completed = ofType(events, "phase.completed").find((e) => e.phase === "turn.pre_prompt_context")!;
    expect(completed.handlers[0]).toMatchObject({ plugin: "wrong", status: "invalid", contributions: 0 });
    expect(completed.contributions).toContainEqual({
      plugin: "wrong",
      kind: "tool_decision",
      status: "rejected",
      reason: expect.stringMatching(/^not accepted by turn\.pre_prompt_context \(accepts prompt_context, diagnostic\)/),
    });
    expectUserKept(session, events);
    await agent.close();
  });

  it("a not-accepted contribution from a required subscription fails the phase", async () => {
    const wrong = definePlugin({
      name: "wrong",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", (() => ({ kind: "stop", reason: "nope" })) as never, { failure: "required" });
      },
    });
    const { agent, session, provider } = await setup([wrong], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(result.verdict).toMatchObject({
      status: "failed",
      reason: "phase_failed",
      code: "KEEL_PHASE_FAILED",
      plugin: "wrong",
      phase: "turn.pre_prompt_context",
    });
    expect(provider.requests).toHaveLength(0);
    expect(diagnosticsOf(events, "wrong").map((d) => d.code)).toEqual(["KEEL_CONTRIBUTION_NOT_ACCEPTED"]);
    expectUserKept(session, events);
    await agent.close();
  });

  it("applies the valid contributions of a best_effort handler that also returned invalid ones", async () => {
    const mixed = definePlugin({
      name: "mixed",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_context", (async () => {
          await Promise.resolve();
          return [
            { kind: "prompt_context", id: "mix-ok", domain: "test", content: "MIX-OK" },
            { kind: "prompt_context", id: "mix-bad", domain: "", content: "MIX-BAD" },
            { kind: "stop", reason: "not accepted here" },
            { kind: "bogus", content: "MIX-BOGUS" },
            { kind: "diagnostic", code: "mixed.note", message: "a valid diagnostic" },
          ];
        }) as never);
      },
    });
    const { agent, session, provider } = await setup([mixed], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    const events = await session.events();
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    const system = provider.requests[0]!.system;
    expect(system).toContain('<entry id="mix-ok" domain="test">\nMIX-OK\n</entry>');
    expect(system).not.toContain("MIX-BAD");
    expect(system).not.toContain("MIX-BOGUS");
    const completed = ofType(events, "phase.completed").find((e) => e.phase === "turn.pre_prompt_context")!;
    expect(completed.handlers).toEqual([
      expect.objectContaining({ plugin: "mixed", status: "invalid", contributions: 2 }),
    ]);
    expect(completed.contributions.map((r) => [r.kind, r.status])).toEqual([
      ["prompt_context", "rejected"],
      ["stop", "rejected"],
      ["bogus", "rejected"],
    ]);
    const merge = ofType(events, "contributions.merged").find((e) => e.phase === "turn.pre_prompt_context")!;
    expect(merge.contributions).toEqual([{ plugin: "mixed", kind: "prompt_context", id: "mix-ok", status: "applied" }]);
    expect(diagnosticsOf(events, "mixed").map((d) => d.code)).toEqual([
      "KEEL_CONTRIBUTION_INVALID",
      "KEEL_CONTRIBUTION_NOT_ACCEPTED",
      "KEEL_CONTRIBUTION_INVALID",
      "mixed.note",
    ]);
    expectUserKept(session, events);
    await agent.close();
  });
});

describe("background handlers", () => {
  it("is not awaited by the turn; its late diagnostic is recorded afterwards and a late prompt_context is rejected", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const state = { started: false, finished: false };
    const bg = definePlugin({
      name: "bg",
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "turn.pre_prompt_context",
          async () => {
            state.started = true;
            await gate;
            state.finished = true;
            return [
              { kind: "prompt_context", id: "late", domain: "test", content: "LATE-CONTEXT" },
              { kind: "diagnostic", level: "info", code: "bg.done", message: "background work finished" },
            ];
          },
          { await: "background" },
        );
      },
    });
    const { agent, session, provider } = await setup([bg, goodPlugin({ postTurnVerdicts: [] })], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    // The turn finished while the handler was still pending.
    expect(state).toEqual({ started: true, finished: false });
    expect(provider.requests[0]!.system).toContain("GOOD-CONTEXT");
    expect(provider.requests[0]!.system).not.toContain("LATE-CONTEXT");
    let events = await session.events();
    const completed = ofType(events, "phase.completed").find((e) => e.phase === "turn.pre_prompt_context")!;
    expect(completed.handlers[0]).toMatchObject({
      plugin: "bg",
      subscription: "bg:turn.pre_prompt_context",
      status: "queued",
    });
    expect(ofType(events, "phase.background")).toEqual([]);
    expect(diagnosticsOf(events, "bg")).toEqual([]);

    release();
    await agent.drain();
    expect(state.finished).toBe(true);
    events = await session.events();
    const turnEnd = ofType(events, "turn.completed")[0]!;
    const background = ofType(events, "phase.background");
    expect(background).toHaveLength(1);
    expect(background[0]).toMatchObject({
      phase: "turn.pre_prompt_context",
      turnId: result.turnId,
      handler: { plugin: "bg", subscription: "bg:turn.pre_prompt_context", status: "ok", contributions: 1 },
    });
    expect(background[0]!.contributions).toEqual([
      { plugin: "bg", kind: "prompt_context", status: "rejected", reason: "arrived after the phase closed" },
    ]);
    expect(background[0]!.seq).toBeGreaterThan(turnEnd.seq);
    const diags = diagnosticsOf(events, "bg");
    expect(diags.map((d) => [d.code, d.level, d.phase])).toEqual([
      ["KEEL_CONTRIBUTION_LATE", "warn", "turn.pre_prompt_context"],
      ["bg.done", "info", "turn.pre_prompt_context"],
    ]);
    for (const d of diags) expect(d.seq).toBeGreaterThan(turnEnd.seq);
    expectUserKept(session, events);
    await agent.close();
  });

  it("a background handler that throws later is recorded as a late KEEL_HANDLER_THREW without touching the verdict", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const bg = definePlugin({
      name: "bg",
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "turn.post_turn",
          async () => {
            await gate;
            throw new Error("late failure");
          },
          { await: "background" },
        );
      },
    });
    const { agent, session } = await setup([bg], [{ text: "ok" }]);
    const result = await session.run(INPUT);
    expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
    release();
    await agent.drain();
    const events = await session.events();
    expect(ofType(events, "phase.background")).toEqual([
      expect.objectContaining({
        phase: "turn.post_turn",
        handler: expect.objectContaining({ status: "threw", error: "late failure" }),
      }),
    ]);
    expect(diagnosticsOf(events, "bg")).toEqual([
      expect.objectContaining({ code: "KEEL_HANDLER_THREW", phase: "turn.post_turn" }),
    ]);
    expect(ofType(events, "turn.completed").map((e) => e.verdict)).toEqual([
      { status: "completed", reason: "end_turn" },
    ]);
    await agent.close();
  });
});

describe("post_turn background jobs", () => {
  function jobPlugin(job: { key: string; run: () => unknown; attempts?: number }): KeelPlugin {
    return definePlugin({
      name: "indexer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.post_turn", () => ({
          kind: "background_job",
          idempotencyKey: job.key,
          name: "index",
          run: job.run,
          ...(job.attempts ? { attempts: job.attempts, retryDelayMs: 5 } : {}),
        }));
      },
    });
  }

  it("runs once per idempotencyKey: a second turn returning the same key records skipped_duplicate", async () => {
    let runs = 0;
    const { agent, session } = await setup(
      [jobPlugin({ key: "index-v1", run: async () => void runs++ })],
      [{ text: "one" }, { text: "two" }],
    );
    const first = await session.run(INPUT);
    await agent.drain();
    expect(runs).toBe(1);
    const second = await session.run("again");
    await agent.drain();
    expect(runs).toBe(1);
    expect(first.verdict.status).toBe("completed");
    expect(second.verdict.status).toBe("completed");
    const jobs = ofType(await session.events(), "job.completed");
    expect(jobs.map((j) => [j.turnId, j.plugin, j.name, j.idempotencyKey, j.status])).toEqual([
      [first.turnId, "indexer", "index", "index-v1", "ok"],
      [second.turnId, "indexer", "index", "index-v1", "skipped_duplicate"],
    ]);
    await agent.close();
  });

  it("a job with attempts is retried after a failure and records one job.completed with the attempts it took", async () => {
    let runs = 0;
    const flaky = jobPlugin({
      key: "flaky-v1",
      attempts: 3,
      run: () => {
        runs++;
        if (runs < 3) throw new Error(`attempt ${runs} failed`);
      },
    });
    const { agent, session } = await setup([flaky], [{ text: "one" }]);
    await session.run(INPUT);
    await agent.drain();
    expect(runs).toBe(3);
    expect(ofType(await session.events(), "job.completed")).toEqual([
      expect.objectContaining({ idempotencyKey: "flaky-v1", status: "ok", attempts: 3 }),
    ]);
    await agent.close();

    let broken = 0;
    const never = await setup(
      [
        jobPlugin({
          key: "never-v1",
          attempts: 2,
          run: () => {
            broken++;
            throw new Error("still broken");
          },
        }),
      ],
      [{ text: "one" }],
    );
    await never.session.run(INPUT);
    await never.agent.drain();
    expect(broken).toBe(2);
    expect(ofType(await never.session.events(), "job.completed")).toEqual([
      expect.objectContaining({ status: "failed", attempts: 2, error: "still broken" }),
    ]);
    await never.agent.close();
  });

  it("a throwing job records job.completed failed, does not affect the verdict, and may run again", async () => {
    let runs = 0;
    const { agent, session } = await setup(
      [
        jobPlugin({
          key: "explode-v1",
          run: () => {
            runs++;
            throw new Error("job exploded");
          },
        }),
      ],
      [{ text: "one" }, { text: "two" }],
    );
    const first = await session.run(INPUT);
    await agent.drain();
    expect(first.verdict).toEqual({ status: "completed", reason: "end_turn" });
    let events = await session.events();
    const failed = ofType(events, "job.completed");
    expect(failed).toEqual([
      expect.objectContaining({
        plugin: "indexer",
        idempotencyKey: "explode-v1",
        status: "failed",
        error: "job exploded",
      }),
    ]);
    expect(failed[0]!.seq).toBeGreaterThan(ofType(events, "turn.completed")[0]!.seq);
    expect(ofType(events, "turn.completed").map((e) => e.verdict)).toEqual([
      { status: "completed", reason: "end_turn" },
    ]);
    // Only a successful run consumes the key.
    await session.run("again");
    await agent.drain();
    events = await session.events();
    expect(runs).toBe(2);
    expect(ofType(events, "job.completed").map((j) => j.status)).toEqual(["failed", "failed"]);
    expectUserKept(session, events);
    await agent.close();
  });
});
