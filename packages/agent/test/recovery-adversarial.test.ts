/**
 * Adversarial scenarios for runs that finish themselves (agent `recovery: "auto"`): a process
 * "dies" (its SQLite store is closed under it, so nothing more it does reaches the log) at the
 * awkward moments, and the promises are checked on what the next agent does: no tool runs
 * twice unless repeatable; every call has exactly one result; what is sent to the model pairs;
 * nothing the user said is lost; the turn finishes under its own id; two handles never both
 * finish one turn.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, definePlugin, defineTool, messageText } from "../src/index.ts";
import { scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { AgentOptions, KeelEvent, Message, Session, ToolDefinition } from "../src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { deferred, expectContiguousSeqs, ofType, pairResults } from "./support/helpers.ts";

const dirs: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-recovery-adv-"));
  dirs.push(dir);
  return path.join(dir, "sessions.sqlite");
}

/** A tool that counts its runs; the runs numbered in `block` wait on a gate that never opens until `release`. */
function gated(name: string, extra: Partial<ToolDefinition> = {}, block: number[] = [1]) {
  const runs: unknown[] = [];
  const started = deferred();
  const release = deferred<string>();
  const tool = defineTool({
    name,
    description: `${name} something`,
    category: "exec",
    ...extra,
    execute: (args: unknown) => {
      runs.push(args);
      if (block.includes(runs.length)) {
        started.resolve();
        return release.promise;
      }
      return `${name} done (run ${runs.length})`;
    },
  });
  return { tool, runs, started, release };
}

/**
 * An agent on `db` whose "process" dies when `dies` settles: the store is closed under it, then
 * `release` lets whatever it was blocked on go (too late to reach the log).
 */
async function dying(db: string, steps: ScriptStep[], tools: ToolDefinition[], extra: Partial<AgentOptions> = {}) {
  const store = new SqliteSessionStore({ path: db });
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    store,
    tools,
    lease: { ttlMs: 200 },
    recovery: "auto",
    ...extra,
  });
  return {
    agent,
    store,
    /** Run `input` in a new session (or `sessionId`) until `dies`, then die. */
    async runUntil(dies: Promise<unknown>, release: () => void, lastWords?: (s: Session) => Promise<void>) {
      const s = await agent.session();
      const running = s.run("do the work").catch(() => undefined);
      await dies;
      await lastWords?.(s);
      store.close();
      release();
      await running;
      return s;
    },
  };
}

async function live(db: string, steps: ScriptStep[], tools: ToolDefinition[], extra: Partial<AgentOptions> = {}) {
  const store = new SqliteSessionStore({ path: db });
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store, tools, recovery: "auto", lease: { ttlMs: 200 }, ...extra });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await agent.close();
    store.close();
  };
  cleanups.push(close);
  return { provider, agent, store, close };
}

function toolResults(events: readonly KeelEvent[]): Map<string, number> {
  const n = new Map<string, number>();
  for (const e of ofType(events, "message.appended"))
    if (e.message.role === "tool") n.set(e.message.toolCallId, (n.get(e.message.toolCallId) ?? 0) + 1);
  return n;
}

const terminal = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

/** A request as the model gets it: pairs valid, never ending with an assistant message (that would be a prefill). */
function expectWellFormedRequest(messages: readonly Message[]): void {
  pairResults(messages);
  expect(messages[0]?.role).toBe("user");
  expect(messages.at(-1)?.role).not.toBe("assistant");
}

describe("recovery, adversarial: who finishes the turn", () => {
  it("two handles both saw the unfinished turn: once one finished it, the other's recover() finds nothing to do", async () => {
    const db = tmpDb();
    const look = gated("look", { category: "info" });
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look.tool]);
    const { id } = await a.runUntil(look.started.promise, () => look.release.resolve("late"));
    const one = await live(db, [{ text: "finished by one" }], [look.tool]);
    const two = await live(db, [{ text: "finished AGAIN by two" }], [look.tool]);
    const s1 = await one.agent.session(id, { waitMs: 5_000 });
    const s2 = await two.agent.session(id, { waitMs: 5_000 });
    expect(s1.unfinished?.turnId).toBe(`${id}/1`);
    expect(s2.unfinished?.turnId).toBe(`${id}/1`);
    expect((await s1.recover()).text).toBe("finished by one");
    await expect(s2.recover()).rejects.toMatchObject({ code: "KEEL_NOT_UNFINISHED" });
    expect(two.provider.requests).toHaveLength(0);
    expect(look.runs).toHaveLength(2);
    const events = await one.store.events(id);
    expect(terminal(events)).toEqual([`turn.completed:${id}/1`]);
    expect(ofType(events, "turn.resumed")).toHaveLength(1);
  });

  it('run() on a handle that saw the turn unfinished, after another handle finished it, runs only its input (recovery "auto")', async () => {
    const db = tmpDb();
    const look = gated("look", { category: "info" });
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look.tool]);
    const { id } = await a.runUntil(look.started.promise, () => look.release.resolve("late"));
    const one = await live(db, [{ text: "finished by one" }], [look.tool]);
    const two = await live(db, [{ text: "answer to the new input" }, { text: "spare" }], [look.tool]);
    const s2 = await two.agent.session(id, { waitMs: 5_000 });
    const s1 = await one.agent.session(id, { waitMs: 5_000 });
    await s1.recover();
    const r = await s2.run("and now?");
    expect(r.turnId).toBe(`${id}/2`);
    expect(r.text).toBe("answer to the new input");
    expect(two.provider.requests).toHaveLength(1);
    const events = await two.store.events(id);
    expect(terminal(events)).toEqual([`turn.completed:${id}/1`, `turn.completed:${id}/2`]);
    expectWellFormedRequest(two.provider.requests[0]!.messages);
  });
  it("a handle that noted the turn unfinished, while another recovered it and died in a call that had not started before: that call does not run again", async () => {
    const db = tmpDb();
    const look = gated("look", { category: "info" });
    const pay = gated("pay", {}, [1]);
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look.tool, pay.tool]);
    const { id } = await a.runUntil(look.started.promise, () => look.release.resolve("late"));
    // The stale handle notes the turn first.
    const stale = await live(db, [{ text: "finished by the stale handle" }], [look.tool, pay.tool]);
    const s2 = await stale.agent.session(id, { waitMs: 5_000 });
    expect(s2.unfinished?.turnId).toBe(`${id}/1`);
    // Another process recovers it: look runs again, the model asks to pay, and the process dies while paying.
    const b = await dying(db, [{ toolCalls: [{ id: "p1", name: "pay" }] }], [look.tool, pay.tool]);
    const s1 = await b.agent.session(id, { waitMs: 5_000 });
    const recovering = s1.recover().catch(() => undefined);
    await pay.started.promise;
    b.store.close();
    pay.release.resolve("late");
    await recovering;
    await new Promise((r) => setTimeout(r, 250)); // its lease lapses
    const r = await s2.recover();
    expect(r.text).toBe("finished by the stale handle");
    expect(pay.runs).toHaveLength(1);
    const events = await stale.store.events(id);
    expect(terminal(events)).toEqual([`turn.completed:${id}/1`]);
    expect(toolResults(events)).toEqual(
      new Map([
        ["c1", 1],
        ["p1", 1],
      ]),
    );
    const results = pairResults(stale.provider.requests[0]!.messages);
    expect(results.get("p1")!.isError).toBe(true);
  });
});

describe("recovery, adversarial: where the process dies", () => {
  it("after the final answer, in turn.post_turn: the turn ends with that answer and the model is not asked again", async () => {
    const db = tmpDb();
    const inPost = deferred();
    const hold = deferred();
    const slowPost = definePlugin({
      name: "slow-post",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.post_turn", async () => {
          // It runs a while (a memory extraction, say): what the turn wrote before it is in the log.
          setTimeout(inPost.resolve, 50);
          await hold.promise;
          return undefined;
        }),
    });
    const a = await dying(db, [{ text: "the answer" }], [], { plugins: [slowPost] });
    const { id } = await a.runUntil(inPost.promise, () => hold.resolve());
    const b = await live(db, [{ text: "a second answer nobody asked for" }], []);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    expect(s.unfinished?.turnId).toBe(`${id}/1`);
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("the answer");
    for (const req of b.provider.requests) expectWellFormedRequest(req.messages);
    expect(b.provider.requests).toHaveLength(0);
    expect(s.messages.map((m) => `${m.role}:${messageText(m)}`)).toEqual(["user:do the work", "assistant:the answer"]);
    expect(terminal(await b.store.events(id))).toEqual([`turn.completed:${id}/1`]);
  });

  it("parallel calls: a repeatable one and a non-repeatable one cut together; each gets one result, in call order", async () => {
    const db = tmpDb();
    const both = deferred();
    let began = 0;
    const release = deferred<string>();
    const runs = { look: 0, fetch: 0 };
    const mk = (name: "look" | "fetch", category: "info" | "mcp") =>
      defineTool({
        name,
        description: name,
        category,
        execute: () => {
          runs[name]++;
          if (runs[name] === 1) {
            if (++began === 2) both.resolve();
            return release.promise;
          }
          return `${name} again`;
        },
      });
    const tools = [mk("look", "info"), mk("fetch", "mcp")];
    const a = await dying(
      db,
      [
        {
          toolCalls: [
            { id: "l1", name: "look" },
            { id: "f1", name: "fetch" },
          ],
        },
      ],
      tools,
    );
    const { id } = await a.runUntil(both.promise, () => release.resolve("late"));
    const b = await live(db, [{ text: "done" }], tools);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(runs).toEqual({ look: 2, fetch: 1 });
    const events = await s.events();
    expectContiguousSeqs(events);
    expect(toolResults(events)).toEqual(
      new Map([
        ["l1", 1],
        ["f1", 1],
      ]),
    );
    const sent = b.provider.requests[0]!.messages;
    expectWellFormedRequest(sent);
    const results = pairResults(sent);
    expect(results.get("l1")!.text).toBe("look again");
    expect(results.get("f1")!.isError).toBe(true);
    // Results follow the order of the calls (as a live turn appends them).
    expect(sent.filter((m) => m.role === "tool").map((m) => (m.role === "tool" ? m.toolCallId : ""))).toEqual([
      "l1",
      "f1",
    ]);
  });

  it("twice cut: the recovering process dies too; the third finishes the turn, a non-repeatable call never runs again", async () => {
    const db = tmpDb();
    // Process 1: pay (exec) finished, then look (info) is cut.
    const pay = gated("pay", {}, []);
    const look1 = gated("look", { category: "info" });
    const a = await dying(
      db,
      [{ toolCalls: [{ id: "p1", name: "pay" }] }, { toolCalls: [{ id: "l1", name: "look" }] }],
      [pay.tool, look1.tool],
    );
    const { id } = await a.runUntil(look1.started.promise, () => look1.release.resolve("late"));
    expect(pay.runs).toHaveLength(1);
    // Process 2 recovers, runs look again, and dies in it.
    const look2 = gated("look", { category: "info" });
    const b = await dying(db, [], [pay.tool, look2.tool]);
    const s2 = await b.agent.session(id, { waitMs: 5_000 });
    expect(s2.unfinished?.turnId).toBe(`${id}/1`);
    const recovering = s2.recover().catch(() => undefined);
    await look2.started.promise;
    b.store.close();
    look2.release.resolve("late again");
    await recovering;
    // Process 3 finishes it.
    const look3 = gated("look", { category: "info" }, []);
    const c = await live(db, [{ text: "third time" }], [pay.tool, look3.tool]);
    const s3 = await c.agent.session(id, { waitMs: 5_000 });
    expect(s3.unfinished?.turnId).toBe(`${id}/1`);
    const r = await s3.recover();
    expect(r.turnId).toBe(`${id}/1`);
    expect(r.text).toBe("third time");
    expect(pay.runs).toHaveLength(1);
    expect(look3.runs).toHaveLength(1);
    const events = await s3.events();
    expectContiguousSeqs(events);
    expect(terminal(events)).toEqual([`turn.completed:${id}/1`]);
    expect(toolResults(events)).toEqual(
      new Map([
        ["p1", 1],
        ["l1", 1],
      ]),
    );
    expectWellFormedRequest(c.provider.requests[0]!.messages);
    // The counted tool calls do not grow with every restart of the same call.
    expect(r.toolCalls).toBe(2);
  });

  it("a cut call whose tool is gone, and one whose arguments no longer fit, each get one error result", async () => {
    const db = tmpDb();
    const { z } = await import("zod");
    const old = gated("look", { category: "info", input: z.object({ q: z.string() }) as never });
    const gone = gated("gone", { category: "info" }, []);
    const a = await dying(
      db,
      [
        {
          toolCalls: [
            { id: "g1", name: "gone", args: {} },
            { id: "l1", name: "look", args: { q: "x" } },
          ],
        },
      ],
      [gone.tool, old.tool],
    );
    const { id } = await a.runUntil(old.started.promise, () => old.release.resolve("late"));
    const changed = gated("look", { category: "info", input: z.object({ query: z.number() }) as never }, []);
    const b = await live(db, [{ text: "done" }], [changed.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(changed.runs).toEqual([]);
    const sent = b.provider.requests[0]!.messages;
    expectWellFormedRequest(sent);
    const results = pairResults(sent);
    expect(results.get("l1")!.isError).toBe(true);
    expect(results.get("l1")!.text).toContain("started with no longer fit");
    expect(results.get("g1")!.isError).toBe(true);
    expect(toolResults(await s.events())).toEqual(
      new Map([
        ["g1", 1],
        ["l1", 1],
      ]),
    );
  });

  it("a steer sent while the tool ran, before the crash, reaches the model in the recovered turn", async () => {
    const db = tmpDb();
    const look = gated("look", { category: "info" });
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look.tool]);
    const { id } = await a.runUntil(
      look.started.promise,
      () => look.release.resolve("late"),
      (s) => s.steer("also check the other drawer"),
    );
    const b = await live(db, [{ text: "checked both" }], [look.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    const sent = b.provider.requests[0]!.messages;
    expectWellFormedRequest(sent);
    expect(sent.some((m) => m.role === "user" && messageText(m) === "also check the other drawer")).toBe(true);
    expect(toolResults(await s.events()).get("c1")).toBe(1);
    expect(s.steering).toEqual([]);
  });

  it("a call cut while its approval was asked in process: the recovered turn pauses on it; approved and resumed, it runs once", async () => {
    const db = tmpDb();
    const pay = gated("pay", {}, []);
    const asker = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask", reason: "review" })),
    });
    const asked = deferred();
    const never = deferred<boolean>();
    const a = await dying(db, [{ toolCalls: [{ id: "p1", name: "pay", args: { amount: 5 } }] }], [pay.tool], {
      plugins: [asker],
      // The answer never comes; the process dies once the call and its request are in the log.
      approve: () => (setTimeout(asked.resolve, 50), never.promise),
    });
    const { id } = await a.runUntil(asked.promise, () => never.resolve(true));
    expect(pay.runs).toEqual([]);
    const b = await live(db, [{ text: "paid" }], [pay.tool], { plugins: [asker] });
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict).toMatchObject({ status: "paused", pending: ["p1"] });
    expect(pay.runs).toEqual([]);
    expect(s.pendingApprovals().map((p) => p.callId)).toEqual(["p1"]);
    await s.approve("p1");
    const done = await s.resume();
    expect(done.turnId).toBe(`${id}/1`);
    expect(done.text).toBe("paid");
    expect(pay.runs).toEqual([{ amount: 5 }]);
    const events = await s.events();
    expect(terminal(events)).toEqual([`turn.paused:${id}/1`, `turn.completed:${id}/1`]);
    expect(toolResults(events).get("p1")).toBe(1);
    expectWellFormedRequest(b.provider.requests[0]!.messages);
    expect(await b.store.unfinished!()).toEqual([]);
  });

  it("a recovered turn keeps the rounds it used before the crash: past maxRounds it gets only its final round", async () => {
    const db = tmpDb();
    const look = gated("look", { category: "info" }, [2]);
    const a = await dying(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { toolCalls: [{ id: "c2", name: "look" }] }],
      [look.tool],
      { limits: { maxRounds: 2 } },
    );
    const { id } = await a.runUntil(look.started.promise, () => look.release.resolve("late"));
    const b = await live(db, [{ text: "final words" }, { text: "spare" }], [look.tool], { limits: { maxRounds: 2 } });
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict).toEqual({ status: "stopped", reason: "max_rounds" });
    expect(b.provider.requests).toHaveLength(1);
    expect(b.provider.requests[0]!.tools).toEqual([]);
    expect(r.rounds).toBe(3);
  });

  it("a turn handed back twice is finished by the third instance under its own id", async () => {
    const db = tmpDb();
    // Every run of look waits until its turn is cut (its signal aborts) or the first process "dies".
    let runs = 0;
    let onRun: () => void = () => undefined;
    const died = deferred<string>();
    const look = defineTool({
      name: "look",
      description: "look",
      category: "info",
      execute: (_a: unknown, ctx) => {
        runs++;
        onRun();
        return new Promise<string>((res) => {
          void died.promise.then(res);
          ctx.signal.addEventListener("abort", () => res("cut"), { once: true });
        });
      },
    });
    const first = new Promise<void>((res) => (onRun = res));
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look]);
    const { id } = await a.runUntil(first, () => died.resolve("late"));
    // Two instances take it in turn, and each is stopped (handBack) while a call runs: each reruns
    // the cut c1 (repeatable), and the hand-back leaves it cut again (no "cancelled" result).
    for (const i of [2, 3]) {
      const w = await live(db, [{ toolCalls: [{ id: `c${i}`, name: "look" }] }], [look]);
      const s = await w.agent.session(id, { waitMs: 5_000 });
      expect(s.unfinished?.turnId).toBe(`${id}/1`);
      const running = new Promise<void>((res) => (onRun = res));
      const r = s.recover();
      await running;
      await w.agent.close({ handBack: true });
      expect((await r).verdict).toEqual({ status: "interrupted", reason: "handed_back" });
      expect(terminal(await w.store.events(id))).toEqual([]);
      await w.close();
    }
    const c = await live(db, [{ text: "at last" }], [look]);
    const s = await c.agent.session(id, { waitMs: 5_000 });
    expect(s.unfinished?.turnId).toBe(`${id}/1`);
    const r = await s.recover();
    expect(r.turnId).toBe(`${id}/1`);
    expect(r.text).toBe("at last");
    const events = await s.events();
    expectContiguousSeqs(events);
    expect(terminal(events)).toEqual([`turn.completed:${id}/1`]);
    expect(toolResults(events)).toEqual(new Map([["c1", 1]]));
    expect(runs).toBe(4);
    expect(ofType(events, "turn.resumed")).toHaveLength(3);
    expectWellFormedRequest(c.provider.requests[0]!.messages);
    expect(await c.store.unfinished!()).toEqual([]);
  });
});

describe("recovery, adversarial: child sessions", () => {
  it("a parent's cut call whose tool is gone: its unfinished child turn does not stay open forever", async () => {
    const db = tmpDb();
    const inner = gated("inner", { category: "info" });
    const delegate = defineTool({
      name: "delegate",
      description: "asks a helper",
      category: "exec",
      execute: async (_args: unknown, ctx) => {
        const run = await ctx.child({ name: "helper", input: "look it up", agent: { tools: [inner.tool] } });
        return `helper said: ${run.result.text}`;
      },
    });
    const a = await dying(
      db,
      [{ toolCalls: [{ id: "d1", name: "delegate" }] }, { toolCalls: [{ id: "i1", name: "inner" }] }],
      [delegate, inner.tool],
    );
    const { id } = await a.runUntil(inner.started.promise, () => inner.release.resolve("late"));
    const b = await live(db, [{ text: "could not delegate" }], [inner.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(pairResults(b.provider.requests[0]!.messages).get("d1")!.isError).toBe(true);
    // Nothing is left unfinished: the child's turn ended with its parent's call.
    expect((await b.store.unfinished!()).map((u) => u.sessionId)).toEqual([]);
    const kids = ofType(await s.events(), "child.started");
    expect(kids).toHaveLength(1);
    const child = await b.store.events(kids[0]!.childSessionId);
    expect(terminal(child)).toEqual([`turn.interrupted:${kids[0]!.childSessionId}/1`]);
  });
});

describe("recovery, adversarial: a v3 session file meets the v4 turn_state", () => {
  it("the migration fills turn_state from the logs: an open turn is running, an answered pause is answered, an ended turn is idle", async () => {
    const db = tmpDb();
    // Three sessions written by this Keel, then the file is taken back to the v3 shape (no turn_state).
    const look = gated("look", { category: "info" });
    const pay = gated("pay", {}, []);
    const asker = definePlugin({
      name: "guard",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("tool.pre_call", (e) =>
          e.call.name === "pay" ? { kind: "tool_decision", decision: "ask", reason: "review" } : undefined,
        ),
    });
    const host = await live(db, [{ text: "done" }, { toolCalls: [{ id: "p1", name: "pay" }] }], [look.tool, pay.tool], {
      plugins: [asker],
    });
    const ended = await host.agent.session();
    await ended.run("hello");
    const answered = await host.agent.session();
    expect((await answered.run("pay it")).verdict.status).toBe("paused");
    await answered.approve("p1");
    await host.close();
    const a = await dying(db, [{ toolCalls: [{ id: "c1", name: "look" }] }], [look.tool, pay.tool]);
    const { id: open } = await a.runUntil(look.started.promise, () => look.release.resolve("late"));
    const { DatabaseSync } = await import("node:sqlite");
    const raw = new DatabaseSync(db);
    raw.exec("DROP INDEX sessions_to_continue; ALTER TABLE sessions DROP COLUMN turn_state; PRAGMA user_version=3;");
    raw.close();

    const w = await live(db, [{ text: "finished the look" }, { text: "paid" }], [look.tool, pay.tool], {
      plugins: [asker],
    });
    const found = new Map((await w.store.unfinished!()).map((u) => [u.sessionId, u.state]));
    expect(found).toEqual(
      new Map([
        [open, "running"],
        [answered.id, "answered"],
      ]),
    );
  });
});
