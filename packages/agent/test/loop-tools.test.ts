/**
 * Tool dispatch in the agent loop, end to end: concurrency, exactly one result per call,
 * timeouts, decisions and approval, cancellation, history repair, context_too_long retry and
 * provider errors.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool, isKeelError, messageText, repairToolPairs } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { AgentOptions, ApprovalRequest, ToolDefinition } from "../src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { ofType, deferred, pairResults } from "./support/helpers.ts";

/** Timers of tools that ignore their signal; cleared after each test so nothing lingers. */
const timers: Array<ReturnType<typeof setTimeout>> = [];
const tmpDirs: string[] = [];
afterEach(() => {
  for (const t of timers.splice(0)) clearTimeout(t);
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** Resolves after `ms` no matter what the signal says. */
function stubborn(ms: number, value: string): Promise<string> {
  return new Promise((r) => timers.push(setTimeout(() => r(value), ms)));
}

/** Resolves after `ms`, rejects when `signal` aborts. */
function sleepWith(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new Error("aborted"));
    });
  });
}

async function setup(steps: ScriptStep[], tools: ToolDefinition[], extra: Partial<AgentOptions> = {}) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store: new MemorySessionStore(), tools, ...extra });
  const session = await agent.session();
  return { provider, agent, session };
}

const ping = (counter: { n: number; args?: unknown[] } = { n: 0 }) =>
  defineTool({
    name: "ping",
    description: "Answers pong.",
    execute: (args) => {
      counter.n++;
      counter.args?.push(args);
      return "pong";
    },
  });

describe("parallel and sequential tool calls", () => {
  it("info tools of one response run concurrently: two that wait for each other both finish", async () => {
    const arrived = { a: deferred(), b: deferred() };
    const meet = (me: "a" | "b", other: "a" | "b") =>
      defineTool({
        name: `meet_${me}`,
        description: "Waits for the other one.",
        category: "info",
        execute: async () => {
          arrived[me].resolve();
          await arrived[other].promise;
          return `${me} met ${other}`;
        },
      });
    const { agent, session } = await setup(
      [
        {
          toolCalls: [
            { id: "ca", name: "meet_a" },
            { id: "cb", name: "meet_b" },
          ],
        },
        { text: "both met" },
      ],
      [meet("a", "b"), meet("b", "a")],
      { toolTimeouts: { info: 1_000 } }, // run one at a time they would time out instead of hanging
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    const results = pairResults(session.messages);
    expect(results.get("ca")).toMatchObject({ text: "a met b", isError: false });
    expect(results.get("cb")).toMatchObject({ text: "b met a", isError: false });
    // Results land in call order regardless of finishing order.
    expect(
      session.messages.filter((m) => m.role === "tool").map((m) => (m.role === "tool" ? m.toolCallId : "")),
    ).toEqual(["ca", "cb"]);
    await agent.close();
  });

  it("an exec tool runs alone: no other call overlaps it, while info neighbours overlap each other", async () => {
    let active = 0;
    let maxInfoActive = 0;
    const execSaw: number[] = [];
    const log: string[] = [];
    const probe = defineTool({
      name: "probe",
      description: "Info probe.",
      input: z.object({ tag: z.string() }),
      execute: async ({ tag }, ctx) => {
        active++;
        maxInfoActive = Math.max(maxInfoActive, active);
        log.push(`start ${tag}`);
        await sleepWith(ctx.signal, 25);
        log.push(`end ${tag}`);
        active--;
        return tag;
      },
    });
    const run = defineTool({
      name: "run",
      description: "Exec.",
      category: "exec",
      execute: async (_a, ctx) => {
        active++;
        execSaw.push(active);
        log.push("start run");
        await sleepWith(ctx.signal, 25);
        execSaw.push(active);
        log.push("end run");
        active--;
        return "ran";
      },
    });
    const { agent, session } = await setup(
      [
        {
          toolCalls: [
            { name: "probe", args: { tag: "p1" } },
            { name: "probe", args: { tag: "p2" } },
            { name: "run" },
            { name: "probe", args: { tag: "p3" } },
            { name: "probe", args: { tag: "p4" } },
          ],
        },
        { text: "done" },
      ],
      [probe, run],
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(maxInfoActive).toBe(2);
    expect(execSaw).toEqual([1, 1]);
    const iStart = log.indexOf("start run");
    const iEnd = log.indexOf("end run");
    expect(iEnd).toBe(iStart + 1);
    expect(log.slice(0, iStart).sort()).toEqual(["end p1", "end p2", "start p1", "start p2"]);
    expect(log.slice(iEnd + 1).sort()).toEqual(["end p3", "end p4", "start p3", "start p4"]);
    const results = pairResults(session.messages);
    expect([...results.values()].map((v) => v.text)).toEqual(["p1", "p2", "ran", "p3", "p4"]);
    await agent.close();
  });

  it("an info tool marked parallel: false also runs alone", async () => {
    let active = 0;
    const seen: number[] = [];
    const mk = (name: string, parallel?: boolean) =>
      defineTool({
        name,
        description: name,
        ...(parallel === undefined ? {} : { parallel }),
        execute: async (_a, ctx) => {
          active++;
          seen.push(active);
          await sleepWith(ctx.signal, 15);
          active--;
          return name;
        },
      });
    const { agent, session } = await setup(
      [{ toolCalls: [{ name: "solo" }, { name: "solo" }] }, { text: "ok" }],
      [mk("solo", false)],
    );
    await session.run("go");
    expect(seen).toEqual([1, 1]);
    await agent.close();
  });
});

describe("exactly one result per tool call", () => {
  it("success, throw, unknown tool, invalid args, denial and timeout each get one result, and the turn goes on", async () => {
    const ran: string[] = [];
    const tools = [
      defineTool({ name: "ok", description: "ok", execute: () => (ran.push("ok"), "fine") }),
      defineTool({
        name: "boom",
        description: "throws",
        execute: () => {
          ran.push("boom");
          throw new Error("kaboom");
        },
      }),
      defineTool({
        name: "typed",
        description: "typed",
        input: z.object({ n: z.number() }),
        execute: ({ n }) => (ran.push("typed"), String(n * 2)),
      }),
      defineTool({
        name: "forbidden",
        description: "denied",
        execute: () => (ran.push("forbidden"), "should not run"),
      }),
      defineTool({
        name: "sloth",
        description: "never finishes in time",
        timeoutMs: 30,
        execute: () => (ran.push("sloth"), stubborn(5_000, "too late")),
      }),
      defineTool({
        name: "soft",
        description: "returns an error result",
        execute: () => ({ content: "soft failure", isError: true }),
      }),
    ];
    const guard = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", (e) =>
          e.call.name === "forbidden"
            ? { kind: "tool_decision", decision: "deny", reason: "not allowed here" }
            : undefined,
        );
      },
    });
    const { agent, session, provider } = await setup(
      [
        {
          toolCalls: [
            { id: "c_ok", name: "ok" },
            { id: "c_boom", name: "boom" },
            { id: "c_unknown", name: "nope" },
            { id: "c_bad", name: "typed", args: { n: "two" } },
            { id: "c_deny", name: "forbidden" },
            { id: "c_slow", name: "sloth" },
            { id: "c_soft", name: "soft" },
            { id: "c_typed", name: "typed", args: { n: 21 } },
          ],
        },
        { text: "handled" },
      ],
      tools,
      { plugins: [guard] },
    );
    const r = await session.run("go");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.toolCalls).toBe(8);
    expect(ran.sort()).toEqual(["boom", "ok", "sloth", "typed"]);
    const results = pairResults(session.messages);
    expect(results.size).toBe(8);
    expect(results.get("c_ok")).toEqual({ text: "fine", isError: false, name: "ok" });
    expect(results.get("c_boom")).toMatchObject({ text: "Error: kaboom", isError: true });
    expect(results.get("c_unknown")!.isError).toBe(true);
    expect(results.get("c_unknown")!.text).toMatch(
      /KEEL_TOOL_UNKNOWN.*"nope".*Available: ok, boom, typed, forbidden, sloth, soft/,
    );
    expect(results.get("c_bad")!.isError).toBe(true);
    expect(results.get("c_bad")!.text).toMatch(/KEEL_TOOL_ARGS_INVALID.*n:/);
    expect(results.get("c_deny")!.isError).toBe(true);
    expect(results.get("c_deny")!.text).toMatch(/KEEL_TOOL_DENIED.*The call was denied by guard: not allowed here\./);
    expect(results.get("c_slow")!.isError).toBe(true);
    expect(results.get("c_slow")!.text).toMatch(/KEEL_TOOL_TIMEOUT.*"sloth" ran past 30 ms\./);
    expect(results.get("c_soft")).toMatchObject({ text: "soft failure", isError: true });
    expect(results.get("c_typed")).toMatchObject({ text: "42", isError: false });
    const events = await session.events();
    const status = Object.fromEntries(ofType(events, "tool.completed").map((e) => [e.callId, e.status]));
    expect(status).toEqual({
      c_ok: "ok",
      c_boom: "error",
      c_unknown: "error",
      c_bad: "error",
      c_deny: "denied",
      c_slow: "timeout",
      c_soft: "error",
      c_typed: "ok",
    });
    // Exactly one tool.completed per call; tool.started only for calls that really ran.
    expect(ofType(events, "tool.completed")).toHaveLength(8);
    expect(
      ofType(events, "tool.started")
        .map((e) => e.callId)
        .sort(),
    ).toEqual(["c_boom", "c_ok", "c_slow", "c_soft", "c_typed"]);
    // The next request carries every result.
    expect(provider.requests[1]!.messages.filter((m) => m.role === "tool")).toHaveLength(8);
    await agent.close();
  });
});

describe("timeouts", () => {
  it("a category timeout aborts a tool that ignores its signal, and the turn continues", async () => {
    let seen: AbortSignal | undefined;
    const deaf = defineTool({
      name: "deaf",
      description: "Ignores its signal.",
      execute: (_a, ctx) => {
        seen = ctx.signal;
        return stubborn(5_000, "finally");
      },
    });
    const { agent, session, provider } = await setup(
      [{ toolCalls: [{ id: "c1", name: "deaf" }] }, { text: "gave up on it" }],
      [deaf],
      {
        toolTimeouts: { info: 50 },
      },
    );
    expect(agent.toolTimeouts.info).toBe(50);
    expect(agent.toolTimeouts.exec).toBe(600_000);
    const t0 = performance.now();
    const r = await session.run("go");
    const elapsed = performance.now() - t0;
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("gave up on it");
    expect(elapsed).toBeLessThan(4_000); // did not wait for the tool's 5 s
    expect(seen?.aborted).toBe(true);
    expect(isKeelError(seen?.reason) && seen.reason.code).toBe("KEEL_TOOL_TIMEOUT");
    const completed = ofType(await session.events(), "tool.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]!.status).toBe("timeout");
    expect(completed[0]!.durationMs).toBeGreaterThanOrEqual(45);
    expect(completed[0]!.durationMs).toBeLessThan(4_000);
    // Round 2 saw the timeout result.
    expect(provider.requests).toHaveLength(2);
    const res = provider.requests[1]!.messages.find((m) => m.role === "tool");
    expect(res && messageText(res)).toContain('"deaf" ran past 50 ms');
    await agent.close();
  });

  it("a tool's own timeoutMs beats its category's timeout, in both directions", async () => {
    const patient = defineTool({
      name: "patient",
      description: "Takes 80 ms; its own timeout is generous.",
      timeoutMs: 2_000,
      execute: async (_a, ctx) => {
        await sleepWith(ctx.signal, 80);
        return "patient done";
      },
    });
    const hasty = defineTool({
      name: "hasty",
      description: "exec with a short own timeout.",
      category: "exec",
      timeoutMs: 30,
      execute: () => stubborn(5_000, "never"),
    });
    const { agent, session } = await setup(
      [
        {
          toolCalls: [
            { id: "p", name: "patient" },
            { id: "h", name: "hasty" },
          ],
        },
        { text: "ok" },
      ],
      [patient, hasty],
      {
        toolTimeouts: { info: 20, exec: 5_000 },
      },
    );
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    const results = pairResults(session.messages);
    expect(results.get("p")).toMatchObject({ text: "patient done", isError: false });
    expect(results.get("h")!.text).toContain('"hasty" ran past 30 ms');
    const status = Object.fromEntries(
      ofType(await session.events(), "tool.completed").map((e) => [e.callId, e.status]),
    );
    expect(status).toEqual({ p: "ok", h: "timeout" });
    await agent.close();
  });
});

describe("decisions and approval", () => {
  function decider(
    name: string,
    decision: "allow" | "deny" | "ask",
    stage: "pre" | "normal" | "post",
    order: string[],
    extra: Record<string, unknown> = {},
  ) {
    return definePlugin({
      name,
      version: "1.0.0",
      setup(ctx) {
        ctx.on(
          "tool.pre_call",
          () => {
            order.push(name);
            return { kind: "tool_decision", decision, reason: `${name} says ${decision}`, ...extra };
          },
          { stage },
        );
      },
    });
  }

  for (const denyFirst of [true, false]) {
    it(`a deny wins over another plugin's allow (deny runs ${denyFirst ? "first" : "last"})`, async () => {
      const order: string[] = [];
      const counter = { n: 0 };
      const plugins = [
        decider("denier", "deny", denyFirst ? "pre" : "post", order),
        decider("allower", "allow", denyFirst ? "post" : "pre", order),
      ];
      const { agent, session } = await setup(
        [{ toolCalls: [{ id: "c", name: "ping" }] }, { text: "ok" }],
        [ping(counter)],
        { plugins },
      );
      await session.run("go");
      expect(order).toEqual(denyFirst ? ["denier", "allower"] : ["allower", "denier"]);
      expect(counter.n).toBe(0);
      const res = pairResults(session.messages).get("c")!;
      expect(res.isError).toBe(true);
      expect(res.text).toContain("denied by denier: denier says deny");
      const completed = ofType(await session.events(), "tool.completed");
      expect(completed.map((e) => [e.status, e.decision])).toEqual([["denied", "deny by denier"]]);
      await agent.close();
    });
  }

  it("a deny also wins over an ask, and the approve callback is not consulted", async () => {
    const order: string[] = [];
    const asked: ApprovalRequest[] = [];
    const counter = { n: 0 };
    const { agent, session } = await setup(
      [{ toolCalls: [{ id: "c", name: "ping" }] }, { text: "ok" }],
      [ping(counter)],
      {
        plugins: [decider("asker", "ask", "pre", order), decider("denier", "deny", "post", order)],
        approve: (req) => (asked.push(req), true),
      },
    );
    await session.run("go");
    expect(counter.n).toBe(0);
    expect(asked).toEqual([]);
    expect(pairResults(session.messages).get("c")!.text).toContain("denied by denier");
    await agent.close();
  });

  it("ask + approve() true runs the tool and tool.post_result sees approvedByUser", async () => {
    const order: string[] = [];
    const asked: ApprovalRequest[] = [];
    const postSeen: boolean[] = [];
    const counter = { n: 0 };
    const observer = definePlugin({
      name: "observer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.post_result", (e) => void postSeen.push(e.approvedByUser));
      },
    });
    const { agent, session } = await setup(
      [{ toolCalls: [{ id: "c", name: "ping", args: { x: 1 } }] }, { text: "ok" }],
      [ping(counter)],
      {
        plugins: [decider("asker", "ask", "normal", order), observer],
        approve: async (req) => {
          asked.push(req);
          return true;
        },
      },
    );
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(counter.n).toBe(1);
    expect(postSeen).toEqual([true]);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      sessionId: session.id,
      turnId: r.turnId,
      reason: "asker says ask",
      plugin: "asker",
      call: { id: "c", name: "ping", args: { x: 1 }, category: "info" },
    });
    expect(pairResults(session.messages).get("c")).toMatchObject({ text: "pong", isError: false });
    const completed = ofType(await session.events(), "tool.completed");
    expect(completed.map((e) => e.status)).toEqual(["ok"]);
    await agent.close();
  });

  it("ask + approve() false denies", async () => {
    const counter = { n: 0 };
    const { agent, session } = await setup(
      [{ toolCalls: [{ id: "c", name: "ping" }] }, { text: "ok" }],
      [ping(counter)],
      {
        plugins: [decider("asker", "ask", "pre", [])],
        approve: () => false,
      },
    );
    await session.run("go");
    expect(counter.n).toBe(0);
    const res = pairResults(session.messages).get("c")!;
    expect(res.isError).toBe(true);
    expect(res.text).toContain("the user did not approve it");
    expect(ofType(await session.events(), "tool.completed").map((e) => e.status)).toEqual(["denied"]);
    await agent.close();
  });

  it("ask + an approve() that throws denies", async () => {
    const counter = { n: 0 };
    const { agent, session } = await setup(
      [{ toolCalls: [{ id: "c", name: "ping" }] }, { text: "ok" }],
      [ping(counter)],
      {
        plugins: [decider("asker", "ask", "pre", [])],
        approve: () => {
          throw new Error("UI crashed");
        },
      },
    );
    const r = await session.run("go");
    expect(r.verdict.status).toBe("completed");
    expect(counter.n).toBe(0);
    expect(pairResults(session.messages).get("c")!.text).toContain("denied");
    await agent.close();
  });

  it('ask without an approve callback and ask: "deny" denies with a message saying so', async () => {
    const counter = { n: 0 };
    const { agent, session } = await setup(
      [{ toolCalls: [{ id: "c", name: "ping" }] }, { text: "ok" }],
      [ping(counter)],
      {
        plugins: [decider("asker", "ask", "pre", [])],
        ask: "deny",
      },
    );
    await session.run("go");
    expect(counter.n).toBe(0);
    const res = pairResults(session.messages).get("c")!;
    expect(res.isError).toBe(true);
    expect(res.text).toContain('denies asks (ask: "deny") without an approve() callback');
    await agent.close();
  });

  it("the tool receives args rewritten by a tool_decision, validated by its input schema", async () => {
    const got: unknown[] = [];
    const typed = defineTool({
      name: "typed",
      description: "typed",
      input: z.object({ path: z.string() }),
      execute: (args) => (got.push(args), `read ${args.path}`),
    });
    const rewriter = definePlugin({
      name: "sandbox",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", (e) => {
          const a = e.call.args as { path?: unknown };
          if (a.path === "/etc/passwd")
            return { kind: "tool_decision", decision: "allow", args: { path: "/sandbox/passwd" } };
          if (a.path === "bad") return { kind: "tool_decision", decision: "allow", args: { path: 42 } };
          return undefined;
        });
      },
    });
    const seenByLater: unknown[] = [];
    const later = definePlugin({
      name: "later",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", (e) => void seenByLater.push(e.call.args), { stage: "post" });
      },
    });
    const { agent, session } = await setup(
      [
        {
          toolCalls: [
            { id: "c1", name: "typed", args: { path: "/etc/passwd" } },
            { id: "c2", name: "typed", args: { path: "bad" } },
          ],
        },
        { text: "ok" },
      ],
      [typed],
      { plugins: [rewriter, later] },
    );
    await session.run("go");
    expect(got).toEqual([{ path: "/sandbox/passwd" }]);
    expect(seenByLater).toEqual([{ path: "/sandbox/passwd" }, { path: 42 }]);
    const results = pairResults(session.messages);
    expect(results.get("c1")!.text).toBe("read /sandbox/passwd");
    expect(results.get("c2")!.text).toContain("KEEL_TOOL_ARGS_INVALID");
    const started = ofType(await session.events(), "tool.started");
    expect(started.map((e) => e.args)).toEqual([{ path: "/sandbox/passwd" }]);
    await agent.close();
  });
});

describe("cancellation", () => {
  it("aborting the run's signal mid-tool cancels it, cancels the rest, and sends no further request", async () => {
    const started = deferred();
    let toolSignal: AbortSignal | undefined;
    const counter = { n: 0 };
    const work = defineTool({
      name: "work",
      description: "exec that waits forever (ignores its signal).",
      category: "exec",
      execute: (_a, ctx) => {
        toolSignal = ctx.signal;
        started.resolve();
        return stubborn(5_000, "never");
      },
    });
    const { agent, session, provider } = await setup(
      [
        {
          toolCalls: [
            { id: "w", name: "work" },
            { id: "p1", name: "ping" },
            { id: "p2", name: "ping" },
          ],
        },
        { text: "never used" },
      ],
      [work, ping(counter)],
    );
    const ctrl = new AbortController();
    const running = session.run("go", { signal: ctrl.signal });
    await started.promise;
    ctrl.abort(new Error("user hit ctrl-c"));
    const r = await running;
    expect(r.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(toolSignal?.aborted).toBe(true);
    expect(counter.n).toBe(0);
    expect(provider.requests).toHaveLength(1);
    const results = pairResults(session.messages);
    expect(results.get("w")!.text).toContain('Cancelled: the turn was cancelled while "work" was running.');
    for (const id of ["p1", "p2"]) {
      expect(results.get(id)!.isError).toBe(true);
      expect(results.get(id)!.text).toMatch(/cancelled before this call started/i);
    }
    const events = await session.events();
    expect(Object.fromEntries(ofType(events, "tool.completed").map((e) => [e.callId, e.status]))).toEqual({
      w: "cancelled",
      p1: "cancelled",
      p2: "cancelled",
    });
    expect(ofType(events, "turn.interrupted")).toHaveLength(1);
    expect(session.busy).toBe(false);
    await agent.close();
  });

  it("aborting mid-stream interrupts the turn, appends no assistant message and leaves a usable history", async () => {
    const ctrl = new AbortController();
    const { agent, session, provider } = await setup(
      [{ text: "a long answer that streams in many small pieces", chunkSize: 4 }, { text: "second turn works" }],
      [ping()],
    );
    let deltas = 0;
    agent.subscribe((e) => {
      if (e.type === "model.delta" && ++deltas === 2) ctrl.abort();
    });
    const r = await session.run("first", { signal: ctrl.signal });
    expect(r.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(r.text).toBe("");
    expect(deltas).toBe(2);
    expect(session.messages.map((m) => m.role)).toEqual(["user"]);
    const events = await session.events();
    expect(ofType(events, "message.appended").map((e) => e.message.role)).toEqual(["user"]);
    expect(ofType(events, "model.responded")).toEqual([]);
    expect(repairToolPairs(session.messages).messages).toBe(session.messages);
    const r2 = await session.run("second");
    expect(r2.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(provider.requests[1]!.messages.map((m) => messageText(m))).toEqual(["first", "second"]);
    await agent.close();
  });

  it("aborting during a hanging provider call (delayMs / hang) interrupts the turn", async () => {
    for (const step of [{ hang: true }, { delayMs: 5_000, text: "never" }] as ScriptStep[]) {
      const { agent, session } = await setup([step], [ping()]);
      const ctrl = new AbortController();
      setTimeout(() => ctrl.abort(), 20);
      const t0 = performance.now();
      const r = await session.run("go", { signal: ctrl.signal });
      expect(performance.now() - t0).toBeLessThan(4_000);
      expect(r.verdict).toEqual({ status: "interrupted", reason: "aborted" });
      expect(session.messages.map((m) => m.role)).toEqual(["user"]);
      await agent.close();
    }
  });
});

describe("orphaned tool calls", () => {
  function tmpDb(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-loop-"));
    tmpDirs.push(dir);
    return path.join(dir, "sessions.sqlite");
  }

  it("a turn cancelled mid-tool stores a cancelled result, so a resumed session needs no repair", async () => {
    const db = tmpDb();
    const started = deferred();
    const work = defineTool({
      name: "work",
      description: "waits",
      category: "exec",
      execute: () => (started.resolve(), stubborn(5_000, "never")),
    });
    const store1 = new SqliteSessionStore({ path: db });
    const agent1 = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "w1", name: "work" }] }]),
      store: store1,
      tools: [work],
    });
    const s1 = await agent1.session();
    const running = s1.run("go");
    await started.promise;
    s1.cancel();
    expect((await running).verdict.status).toBe("interrupted");
    await agent1.close();
    store1.close();

    const store2 = new SqliteSessionStore({ path: db });
    const provider2 = scriptedProvider([{ text: "resumed" }]);
    const agent2 = await createAgent({ provider: provider2, store: store2, tools: [work] });
    const s2 = await agent2.session(s1.id);
    expect(pairResults(s2.messages).get("w1")!.text).toContain("Cancelled");
    await s2.run("again");
    expect(ofType(await s2.events(), "context.repaired")).toEqual([]);
    await agent2.close();
    store2.close();
  });

  it("a store that fails when the lease is due for renewal before the next model call: KEEL_STORE_FAILED saying no model call was made", async () => {
    const started = deferred();
    const release = deferred<string>();
    const work = defineTool({
      name: "work",
      description: "waits",
      category: "exec",
      execute: () => (started.resolve(), release.promise),
    });
    const store = new SqliteSessionStore({ path: tmpDb() });
    const provider = scriptedProvider([{ toolCalls: [{ id: "c1", name: "work" }] }, { text: "never" }]);
    const agent = await createAgent({ provider, store, tools: [work], lease: { ttlMs: 200 } });
    const s = await agent.session();
    const running = s.run("do the work");
    await started.promise;
    store.close();
    // Past a third of the TTL: the lease is renewed (on the closed store) before round 2's request.
    await new Promise((r) => setTimeout(r, 120));
    release.resolve("done");
    await expect(running).rejects.toMatchObject({
      code: "KEEL_STORE_FAILED",
      message: expect.stringMatching(
        /its lease could not be confirmed before its next model call, so no model call was made/,
      ),
    });
    expect(provider.requests).toHaveLength(1);
  });

  it("history that ends in a tool call without a result (the process died mid-tool) is repaired before the next request", async () => {
    const db = tmpDb();
    const started = deferred();
    const release = deferred<string>();
    const work = defineTool({
      name: "work",
      description: "waits",
      category: "exec",
      execute: () => (started.resolve(), release.promise),
    });
    const store1 = new SqliteSessionStore({ path: db });
    // A short lease: the "dead" holder stops renewing it, so it expires soon after.
    const provider1 = scriptedProvider([{ toolCalls: [{ id: "orphan", name: "work" }] }, { text: "never" }]);
    const agent1 = await createAgent({ provider: provider1, store: store1, tools: [work], lease: { ttlMs: 200 } });
    const s1 = await agent1.session();
    const running = s1.run("do the work");
    await started.promise;
    // The "process" dies: nothing more reaches the database.
    store1.close();
    release.resolve("done");
    await expect(running).rejects.toMatchObject({
      code: "KEEL_STORE_FAILED",
      message: expect.stringContaining("no model call was made"),
    });
    // The store failed before round 2: its call (whose answer could not be recorded) was never paid for.
    expect(provider1.requests).toHaveLength(1);

    const store2 = new SqliteSessionStore({ path: db });
    const provider2 = scriptedProvider([{ text: "picking up where we left off" }]);
    const agent2 = await createAgent({ provider: provider2, store: store2, tools: [work] });
    const s2 = await agent2.session(s1.id, { waitMs: 5_000 });
    expect(s2.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    const resumed = ofType(await s2.events(), "session.resumed").at(-1)!;
    expect(resumed.interruptedTurn).toBe(`${s1.id}/1`);
    // The dead turn's lease was given up by its (failed) hold, but never released in the closed store: this process holds no such owner.
    expect(resumed.leaseTakenOver).toMatchObject({ pid: process.pid, reason: "holder_dead" });
    const r = await s2.run("continue");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    const sent = provider2.requests[0]!.messages;
    expect(sent.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"]);
    const synth = sent[2]!;
    expect(synth.role === "tool" && synth.toolCallId).toBe("orphan");
    expect(synth.role === "tool" && synth.isError).toBe(true);
    expect(messageText(synth)).toContain("interrupted");
    pairResults(sent);
    const repaired = ofType(await s2.events(), "context.repaired");
    expect(repaired).toHaveLength(1);
    expect(repaired[0]!.synthesizedResults).toEqual(["orphan"]);
    expect(repaired[0]!.droppedResults).toEqual([]);
    await agent2.close();
    store2.close();

    // A third process replays the repair from the log.
    const store3 = new SqliteSessionStore({ path: db });
    const agent3 = await createAgent({ provider: scriptedProvider([]), store: store3 });
    const s3 = await agent3.session(s1.id);
    expect(s3.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user", "assistant"]);
    pairResults(s3.messages);
    await agent3.close();
    store3.close();
  });
});

describe("provider failures", () => {
  function trimmer(seen: Array<{ round: number; retry: unknown; messages: number }>) {
    return definePlugin({
      name: "trimmer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", (e) => {
          seen.push({ round: e.round, retry: e.retry, messages: e.messages.length });
          if (e.retry?.reason !== "context_too_long") return undefined;
          return {
            kind: "message_edit",
            reason: "shrink after context_too_long",
            edits: [{ op: "replace", start: 0, end: e.messages.length - 1, messages: [] }],
          };
        });
      },
    });
  }

  it("context_too_long retries round.pre_request once with retry.reason, and a message_edit shrinks the history", async () => {
    const seen: Array<{ round: number; retry: unknown; messages: number }> = [];
    const { agent, session, provider } = await setup(
      [{ text: "first answer" }, { error: { class: "context_too_long", status: 400 } }, { text: "fits now" }],
      [ping()],
      { plugins: [trimmer(seen)] },
    );
    await session.run("first question");
    const r = await session.run("second question");
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("fits now");
    expect(provider.requests).toHaveLength(3);
    expect(provider.requests[1]!.messages).toHaveLength(3);
    expect(provider.requests[2]!.messages.map((m) => messageText(m))).toEqual(["second question"]);
    expect(seen.slice(1)).toEqual([
      { round: 1, retry: undefined, messages: 3 },
      { round: 1, retry: { reason: "context_too_long" }, messages: 3 },
    ]);
    const events = await session.events();
    expect(ofType(events, "model.failed").map((e) => e.errorClass)).toEqual(["context_too_long"]);
    expect(ofType(events, "context.edited")).toHaveLength(1);
    expect(ofType(events, "model.responded").at(-1)!.attempt).toBe(2);
    await agent.close();
  });

  it("a second context_too_long fails the turn instead of looping", async () => {
    const seen: Array<{ round: number; retry: unknown; messages: number }> = [];
    const { agent, session, provider } = await setup(
      [{ error: { class: "context_too_long" } }, { error: { class: "context_too_long" } }, { text: "never used" }],
      [ping()],
      { plugins: [trimmer(seen)] },
    );
    const r = await session.run("question");
    expect(r.verdict).toMatchObject({
      status: "failed",
      reason: "provider_error",
      errorClass: "context_too_long",
      code: "KEEL_PROVIDER_ERROR",
    });
    expect(provider.requests).toHaveLength(2);
    expect(seen.map((s) => s.retry)).toEqual([undefined, { reason: "context_too_long" }]);
    expect(session.messages.map((m) => messageText(m))).toEqual(["question"]);
    await agent.close();
  });

  it("context_too_long without a round.pre_request subscriber fails at once", async () => {
    const { agent, session, provider } = await setup(
      [{ error: { class: "context_too_long" } }, { text: "never used" }],
      [ping()],
    );
    const r = await session.run("question");
    expect(r.verdict).toMatchObject({ status: "failed", reason: "provider_error", errorClass: "context_too_long" });
    expect(provider.requests).toHaveLength(1);
    await agent.close();
  });

  it("a rate_limited error mid-stream fails the turn with provider_error, a model.failed event, and keeps the user message", async () => {
    const { agent, session, provider } = await setup(
      [
        { toolCalls: [{ id: "c", name: "ping" }] },
        {
          text: "partial answer streaming",
          chunkSize: 4,
          error: { class: "rate_limited", status: 429, message: "slow down", afterDeltas: 2 },
        },
      ],
      [ping()],
    );
    const r = await session.run("question");
    expect(r.verdict).toMatchObject({
      status: "failed",
      reason: "provider_error",
      errorClass: "rate_limited",
      code: "KEEL_PROVIDER_ERROR",
    });
    expect(r.verdict.status === "failed" && r.verdict.message).toContain("slow down");
    expect(provider.requests).toHaveLength(2);
    const events = await session.events();
    const failed = ofType(events, "model.failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ round: 2, errorClass: "rate_limited", status: 429 });
    expect(ofType(events, "turn.failed")).toHaveLength(1);
    // The user's words and the completed round stay; the failed response leaves nothing.
    expect(session.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(messageText(session.messages[0]!)).toBe("question");
    expect(ofType(events, "message.appended").map((e) => e.message.role)).toEqual(["user", "assistant", "tool"]);
    await agent.close();
  });
});
