/**
 * The worker on a real SQLite file: turns a "dead" agent left (its store closed under it
 * mid-tool: nothing more reaches the log, as after a SIGKILL) are finished by another agent's
 * worker with no user action; live turns, unanswered pauses and child sessions are left alone;
 * a corrupt session is reported by id; a stopping worker hands its turns back. The fault suite
 * kills real processes (test/fault/recovery.test.ts).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool } from "@keel/agent";
import type { AgentOptions, KeelEvent, ToolDefinition } from "@keel/agent";
import { scriptedProvider } from "@keel/testkit";
import type { ScriptStep } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { runWorker } from "../src/index.ts";
import type { WorkerEvent } from "../src/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-worker-"));
  dirs.push(dir);
  return path.join(dir, "sessions.sqlite");
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

/** A tool whose first `blocking` runs wait on a gate; every run is counted. */
function slowTool(name: string, blocking: number, extra: Partial<ToolDefinition> = {}) {
  const runs: string[] = [];
  const started = gate();
  const release = gate();
  const tool = defineTool({
    name,
    description: name,
    category: "info",
    ...extra,
    execute: async (_a: unknown, ctx) => {
      runs.push(ctx.sessionId);
      if (runs.length <= blocking) {
        if (runs.length === blocking) started.open();
        await release.opened;
      }
      return `${name} ok`;
    },
  });
  return { tool, runs, started, release };
}

const callThenAnswer = (n: number): ScriptStep[] =>
  Array.from({ length: n }, (_, i) => [{ toolCalls: [{ id: `c${i}`, name: "look" }] }, { text: `answer ${i}` }]).flat();

/** `n` sessions whose turns a "dead" agent left mid-tool. */
async function leaveUnfinished(db: string, n: number): Promise<string[]> {
  const look = slowTool("look", n);
  const store = new SqliteSessionStore({ path: db });
  const steps: ScriptStep[] = Array.from({ length: n }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: "look" }] }));
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    store,
    tools: [look.tool],
    lease: { ttlMs: 200 },
  });
  const sessions = await Promise.all(Array.from({ length: n }, () => agent.session()));
  const runs = sessions.map((s) => s.run("look it up").catch(() => undefined));
  await look.started.opened;
  store.close();
  look.release.open();
  await Promise.all(runs);
  return sessions.map((s) => s.id);
}

async function workerAgent(
  db: string,
  steps: ScriptStep[],
  tools: ToolDefinition[],
  extra: Partial<AgentOptions> = {},
) {
  const store = new SqliteSessionStore({ path: db });
  const agent = await createAgent({ provider: scriptedProvider(steps), store, tools, recovery: "auto", ...extra });
  return { agent, store, close: async () => (await agent.close(), store.close()) };
}

const terminal = (events: KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

/** A session written straight into the store: its created event (a child's link when `parent`), then `more`. */
async function rawSession(
  store: SqliteSessionStore,
  agent: string,
  id: string,
  more: Array<Record<string, unknown>>,
  parent?: { sessionId: string; turnId: string },
): Promise<void> {
  await store.createSession({ id, agent, createdAt: 1 });
  const link = parent ? { parent: { ...parent, callId: "c1", name: "helper", depth: 1 } } : {};
  const events = [{ type: "session.created", agent, ...link }, ...more].map((e, i) => ({
    turnId: null,
    ...e,
    sessionId: id,
    seq: i + 1,
    ts: i + 1,
  }));
  await store.appendMany(events as unknown as KeelEvent[]);
}

const childStarted = (id: string) => ({
  type: "turn.started",
  input: "x",
  trigger: "subagent",
  metadata: {},
  turnId: `${id}/1`,
});

describe("runWorker", () => {
  it("finishes every turn a dead process left, once each, with no user action", async () => {
    const db = tmpDb();
    const ids = await leaveUnfinished(db, 3);
    const look = slowTool("look", 0);
    const w = await workerAgent(db, callThenAnswer(0).concat([{ text: "a" }, { text: "b" }, { text: "c" }]), [
      look.tool,
    ]);
    const events: WorkerEvent[] = [];
    const report = await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(report).toMatchObject({ passes: 1, finished: 3, failed: 0, handedBack: 0 });
    expect(
      events
        .filter((e) => e.type === "claimed")
        .map((e) => e.sessionId)
        .sort(),
    ).toEqual([...ids].sort());
    for (const id of ids) {
      const log = await w.store.events(id);
      expect(terminal(log)).toEqual([`turn.completed:${id}/1`]);
      // The cut call (info: repeatable) ran again in the worker, and has exactly one result.
      expect(log.filter((e) => e.type === "message.appended" && e.message.role === "tool")).toHaveLength(1);
    }
    expect(look.runs.sort()).toEqual([...ids].sort());
    expect(await w.store.unfinished()).toEqual([]);
    // A second pass finds nothing to do.
    expect(await runWorker({ agent: w.agent, once: true, minIdleMs: 0 })).toMatchObject({ finished: 0 });
    await w.close();
  });

  it("leaves a turn a live instance runs alone, and a session quieter than minIdleMs", async () => {
    const db = tmpDb();
    const look = slowTool("look", 1);
    const live = await workerAgent(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "done live" }],
      [look.tool],
    );
    const s = await live.agent.session();
    const running = s.run("go");
    await look.started.opened;
    const w = await workerAgent(db, [], [look.tool]);
    const events: WorkerEvent[] = [];
    await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(events).toEqual([{ type: "skipped", sessionId: s.id, reason: "busy" }]);
    expect(await runWorker({ agent: w.agent, once: true, minIdleMs: 60_000 })).toMatchObject({ finished: 0 });
    look.release.open();
    expect((await running).text).toBe("done live");
    expect(look.runs).toHaveLength(1);
    await w.close();
    await live.close();
  });

  it("resumes a paused turn whose approvals were all answered but never resumed; an unanswered one waits", async () => {
    const db = tmpDb();
    const paid: string[] = [];
    const pay = defineTool({
      name: "pay",
      description: "pays",
      category: "exec",
      execute: (_a: unknown, ctx) => (paid.push(ctx.sessionId), "paid"),
    });
    const asker = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "review" })),
    });
    const steps: ScriptStep[] = [
      { toolCalls: [{ id: "p1", name: "pay" }] },
      { toolCalls: [{ id: "p2", name: "pay" }] },
    ];
    const host = await workerAgent(db, steps, [pay], { plugins: [asker] });
    const [a, b] = [await host.agent.session(), await host.agent.session()];
    expect((await a.run("pay one")).verdict.status).toBe("paused");
    expect((await b.run("pay two")).verdict.status).toBe("paused");
    // The host answers a's call and goes away before resuming it (a crash, a closed tab).
    await a.approve("p1");
    await host.close();
    const w = await workerAgent(db, [{ text: "paid it" }], [pay], { plugins: [asker] });
    const events: WorkerEvent[] = [];
    const report = await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(report.finished).toBe(1);
    expect(paid).toEqual([a.id]);
    expect(terminal(await w.store.events(a.id))).toEqual([`turn.paused:${a.id}/1`, `turn.completed:${a.id}/1`]);
    expect(events.filter((e) => e.type === "claimed")).toEqual([
      { type: "claimed", sessionId: a.id, state: "answered", turnId: `${a.id}/1` },
    ]);
    expect((await w.store.unfinished()).map((u) => u.sessionId)).toEqual([]);
    expect(terminal(await w.store.events(b.id))).toEqual([`turn.paused:${b.id}/1`]);
    // A pause still waiting for its answer is not even opened, however many passes run (an open records itself).
    const before = (await w.store.events(b.id)).length;
    const w2 = await workerAgent(db, [], [pay], { plugins: [asker] });
    const skips: WorkerEvent[] = [];
    const stop = new AbortController();
    const looping = runWorker({
      agent: w2.agent,
      minIdleMs: 0,
      intervalMs: 10,
      signal: stop.signal,
      onEvent: (e) => skips.push(e),
    });
    await new Promise((r) => setTimeout(r, 300));
    stop.abort();
    await looping;
    expect(skips).toEqual([]);
    expect((await w.store.events(b.id)).length).toBe(before);
    await w2.close();
    await w.close();
  });

  it("reports a session it cannot read by id and finishes the others", async () => {
    const db = tmpDb();
    const ids = await leaveUnfinished(db, 2);
    const raw = new DatabaseSync(db);
    raw.prepare("UPDATE events SET data = '{not json' WHERE session_id = ? AND seq = 1").run(ids[0]!);
    raw.close();
    const look = slowTool("look", 0);
    const w = await workerAgent(db, [{ text: "fine" }], [look.tool]);
    const events: WorkerEvent[] = [];
    const report = await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(report).toMatchObject({ finished: 1, failed: 1 });
    const failed = events.find((e) => e.type === "failed");
    expect(failed).toMatchObject({ sessionId: ids[0] });
    expect(terminal(await w.store.events(ids[1]!))).toEqual([`turn.completed:${ids[1]}/1`]);
    await w.close();
  });

  it("stopping: a running turn gets the grace, then is handed back unfinished, and the next worker finishes it", async () => {
    const db = tmpDb();
    const [id] = await leaveUnfinished(db, 1);
    const look = slowTool("look", 1);
    const w1 = await workerAgent(db, [], [look.tool]);
    const stop = new AbortController();
    const events: WorkerEvent[] = [];
    const running = runWorker({
      agent: w1.agent,
      minIdleMs: 0,
      intervalMs: 50,
      signal: stop.signal,
      graceMs: 100,
      onEvent: (e) => events.push(e),
    });
    await look.started.opened;
    stop.abort();
    const report = await running;
    expect(report).toMatchObject({ finished: 0, handedBack: 1 });
    expect(events.at(-1)).toEqual({ type: "handed_back", sessionId: id, turnId: `${id}/1` });
    look.release.open();
    await w1.close();
    const peek = new SqliteSessionStore({ path: db, readOnly: true });
    expect(terminal(peek.events(id!))).toEqual([]);
    peek.close();
    const w2 = await workerAgent(db, [{ text: "finished by the next" }], [look.tool]);
    expect(await runWorker({ agent: w2.agent, once: true, minIdleMs: 0 })).toMatchObject({ finished: 1 });
    expect(terminal(await w2.store.events(id!))).toEqual([`turn.completed:${id}/1`]);
    await w2.close();
  });

  it("runs durable jobs left pending by a dead process, in their session", async () => {
    const db = tmpDb();
    const jobber = (run: () => unknown) =>
      definePlugin({
        name: "jobber",
        version: "1.0.0",
        setup(ctx) {
          ctx.registerJob("work", () => run());
          ctx.on("turn.post_turn", (e) => ({
            kind: "background_job",
            name: "work",
            idempotencyKey: `work:${e.turnId}`,
            durable: true,
            payload: { turn: e.turnId },
            timeoutMs: 100,
            attempts: 2,
          }));
        },
      });
    const started = gate();
    const storeA = new SqliteSessionStore({ path: db });
    const a = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store: storeA,
      plugins: [jobber(() => (started.open(), new Promise(() => undefined)))],
    });
    const s = await a.session();
    await s.run("hello");
    await started.opened;
    storeA.close(); // the process dies with its job running
    let ran = 0;
    const w = await workerAgent(db, [], [], { plugins: [jobber(() => void ran++)] });
    await new Promise((r) => setTimeout(r, 150)); // past the job's timeout: its runner is presumed gone
    const events: WorkerEvent[] = [];
    await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(ran).toBe(1);
    expect(events.map((e) => e.type)).toEqual(["jobs"]);
    const log = await w.store.events(s.id);
    expect(log.filter((e) => e.type === "job.completed").map((e) => e.type === "job.completed" && e.status)).toEqual([
      "ok",
    ]);
    await w.close();
  });

  it("a child session left running is its parent's to continue: skipped once, and its log is not written at every pass", async () => {
    const db = tmpDb();
    const w = await workerAgent(db, [], []);
    const id = "orphan-child";
    await rawSession(w.store, w.agent.name, id, [childStarted(id)], { sessionId: "gone", turnId: "gone/1" });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const looping = runWorker({
      agent: w.agent,
      minIdleMs: 0,
      intervalMs: 10,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
    });
    await new Promise((r) => setTimeout(r, 400));
    stop.abort();
    await looping;
    expect(events).toEqual([{ type: "skipped", sessionId: id, reason: "child" }]);
    expect((await w.store.events(id)).length).toBeLessThanOrEqual(3);
    await w.close();
  });

  it("a child session left running whose parent turn has ended is ended interrupted, not skipped forever", async () => {
    const db = tmpDb();
    const w = await workerAgent(db, [], []);
    const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    await rawSession(w.store, w.agent.name, "parent", [
      { type: "turn.started", input: "x", trigger: "user", metadata: {}, turnId: "parent/1" },
      {
        type: "turn.completed",
        verdict: { status: "completed", reason: "end_turn" },
        usage,
        rounds: 1,
        toolCalls: 1,
        turnId: "parent/1",
      },
    ]);
    const id = "left-child";
    await rawSession(w.store, w.agent.name, id, [childStarted(id)], { sessionId: "parent", turnId: "parent/1" });
    const events: WorkerEvent[] = [];
    await runWorker({ agent: w.agent, once: true, minIdleMs: 0, onEvent: (e) => events.push(e) });
    expect(events).toEqual([
      {
        type: "finished",
        sessionId: id,
        turnId: `${id}/1`,
        verdict: { status: "interrupted", reason: "process_exit" },
        ms: 0,
      },
    ]);
    expect(await w.store.unfinished!()).toEqual([]);
    expect((await w.store.events(id)).some((e) => e.type === "turn.interrupted")).toBe(true);
    await w.close();
  });

  it("refuses an agent whose recovery is manual", async () => {
    const db = tmpDb();
    const w = await workerAgent(db, [], [], { recovery: "manual" });
    await expect(runWorker({ agent: w.agent, once: true })).rejects.toMatchObject({
      code: "KEEL_AGENT_OPTIONS_INVALID",
    });
    await w.close();
  });
});
