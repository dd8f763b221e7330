/**
 * Runs that finish themselves: a turn a stopped process left unfinished goes on from its log
 * (agent `recovery: "auto"`, Session.recover). The "process" dies by having its SQLite store
 * closed under it mid-tool: nothing more it does reaches the log, as after a SIGKILL; a second
 * agent then opens the same file (the crash-safety and fault suites kill real processes).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, defineTool, messageText } from "../src/index.ts";
import { scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";
import type { AgentOptions, KeelEvent, ToolDefinition } from "../src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { deferred, expectContiguousSeqs, ofType, pairResults } from "./support/helpers.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-recovery-"));
  dirs.push(dir);
  return path.join(dir, "sessions.sqlite");
}

/** A tool that counts its runs; the first run blocks until released (the process dies meanwhile). */
function counted(name: string, extra: Partial<ToolDefinition> = {}) {
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
      if (runs.length === 1) {
        started.resolve();
        return release.promise;
      }
      return `${name} done (run ${runs.length})`;
    },
  });
  return { tool, runs, started, release };
}

/** Agent A runs a turn until `started`, then its "process" dies; returns the session id. */
async function dieMidTool(
  db: string,
  steps: ScriptStep[],
  tools: ToolDefinition[],
  started: Promise<void>,
  release: (v: string) => void,
): Promise<string> {
  const store = new SqliteSessionStore({ path: db });
  const agent = await createAgent({
    provider: scriptedProvider(steps),
    store,
    tools,
    // A lease no run outlives: the next agent takes it because its holder is dead (at once), never because it expired.
    lease: { ttlMs: 60_000 },
    recovery: "auto",
  });
  const s = await agent.session();
  const running = s.run("do the work");
  await started;
  store.close();
  release("too late");
  await running.catch(() => undefined);
  return s.id;
}

async function second(db: string, steps: ScriptStep[], tools: ToolDefinition[], extra: Partial<AgentOptions> = {}) {
  const store = new SqliteSessionStore({ path: db });
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store, tools, recovery: "auto", ...extra });
  return {
    provider,
    agent,
    close: async () => {
      await agent.close();
      store.close();
    },
  };
}

function toolResults(events: readonly KeelEvent[]): Map<string, number> {
  const n = new Map<string, number>();
  for (const e of ofType(events, "message.appended"))
    if (e.message.role === "tool") n.set(e.message.toolCallId, (n.get(e.message.toolCallId) ?? 0) + 1);
  return n;
}

describe("recovery: a turn a stopped process left unfinished goes on", () => {
  it("a cut call of a repeatable tool runs again and the turn completes under its own id", async () => {
    const db = tmpDb();
    const look = counted("look", { category: "info" });
    const id = await dieMidTool(
      db,
      [{ toolCalls: [{ id: "c1", name: "look", args: { q: "x" } }] }, { text: "never" }],
      [look.tool],
      look.started.promise,
      look.release.resolve,
    );
    const b = await second(db, [{ text: "found it" }], [look.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    expect(s.unfinished?.turnId).toBe(`${id}/1`);
    const r = await s.recover();
    expect(r.turnId).toBe(`${id}/1`);
    expect(r.verdict).toEqual({ status: "completed", reason: "end_turn" });
    expect(r.text).toBe("found it");
    expect(look.runs).toEqual([{ q: "x" }, { q: "x" }]);
    const events = await s.events();
    expectContiguousSeqs(events);
    expect(ofType(events, "turn.resumed").at(-1)!.recovered).toMatchObject({
      cut: ["c1"],
      leaseTakenOver: { reason: "holder_dead" },
    });
    expect(ofType(events, "session.resumed").at(-1)!.unfinishedTurn).toBe(`${id}/1`);
    expect(ofType(events, "turn.interrupted")).toEqual([]);
    expect(ofType(events, "turn.completed").map((e) => e.turnId)).toEqual([`${id}/1`]);
    expect(toolResults(events)).toEqual(new Map([["c1", 1]]));
    // The model's second request holds the call's one result, from the run after the crash.
    const sent = b.provider.requests[0]!.messages;
    expect(pairResults(sent).get("c1")!.text).toContain("look done (run 2)");
    await b.close();
  });

  it("a cut call of a tool not marked repeatable is not run again: it gets one interrupted result; a call after it that never started runs", async () => {
    const db = tmpDb();
    const pay = counted("pay");
    const note = counted("note");
    const id = await dieMidTool(
      db,
      [
        {
          toolCalls: [
            { id: "p1", name: "pay", args: { amount: 5 } },
            { id: "n1", name: "note", args: { text: "paid" } },
          ],
        },
        { text: "never" },
      ],
      [pay.tool, note.tool],
      pay.started.promise,
      pay.release.resolve,
    );
    // The note was never started (pay runs alone, exec tools are serial): a first run of it is no repeat.
    note.runs.push("placeholder so the next run does not block");
    const b = await second(db, [{ text: "I could not confirm the payment." }], [pay.tool, note.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(pay.runs).toHaveLength(1);
    expect(note.runs).toHaveLength(2);
    const events = await s.events();
    expect(ofType(events, "turn.resumed").at(-1)!.recovered!.cut).toEqual(["p1"]);
    expect(toolResults(events)).toEqual(
      new Map([
        ["p1", 1],
        ["n1", 1],
      ]),
    );
    const results = pairResults(b.provider.requests[0]!.messages);
    expect(results.get("p1")!.isError).toBe(true);
    expect(results.get("p1")!.text).toContain("not marked safe to repeat");
    expect(results.get("n1")!.text).toContain("note done");
    const completed = ofType(events, "tool.completed").find((e) => e.callId === "p1")!;
    expect(completed.status).toBe("cancelled");
    await b.close();
  });

  it('with recovery "auto", run() on the session finishes the unfinished turn first, then runs the input', async () => {
    const db = tmpDb();
    const look = counted("look", { repeatable: true });
    const id = await dieMidTool(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "never" }],
      [look.tool],
      look.started.promise,
      look.release.resolve,
    );
    const b = await second(db, [{ text: "first answer" }, { text: "second answer" }], [look.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.run("and now?");
    expect(r.turnId).toBe(`${id}/2`);
    expect(r.text).toBe("second answer");
    const texts = s.messages.map((m) => `${m.role}:${messageText(m)}`);
    expect(texts).toEqual([
      "user:do the work",
      "assistant:",
      "tool:look done (run 2)",
      "assistant:first answer",
      "user:and now?",
      "assistant:second answer",
    ]);
    const events = await s.events();
    expect(ofType(events, "turn.completed").map((e) => e.turnId)).toEqual([`${id}/1`, `${id}/2`]);
    await b.close();
  });

  it('with recovery "manual" (the default) opening marks the turn interrupted, as before', async () => {
    const db = tmpDb();
    const look = counted("look", { repeatable: true });
    const id = await dieMidTool(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "never" }],
      [look.tool],
      look.started.promise,
      look.release.resolve,
    );
    const b = await second(db, [], [look.tool], { recovery: undefined });
    const s = await b.agent.session(id, { waitMs: 5_000 });
    expect(s.unfinished).toBeUndefined();
    await expect(s.recover()).rejects.toMatchObject({ code: "KEEL_NOT_UNFINISHED" });
    expect(ofType(await s.events(), "turn.interrupted").map((e) => e.verdict)).toEqual([
      { status: "interrupted", reason: "process_exit" },
    ]);
    expect(look.runs).toHaveLength(1);
    await b.close();
  });

  it("a handle that found the turn unfinished while another instance finished it does not run it again", async () => {
    const db = tmpDb();
    const look = counted("look", { category: "info" });
    const id = await dieMidTool(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "never" }],
      [look.tool],
      look.started.promise,
      look.release.resolve,
    );
    const late = await second(db, [{ text: "late" }], [look.tool]);
    const stale = await late.agent.session(id, { waitMs: 5_000 });
    expect(stale.unfinished?.turnId).toBe(`${id}/1`);
    const first = await second(db, [{ text: "finished elsewhere" }], [look.tool]);
    expect((await (await first.agent.session(id, { waitMs: 5_000 })).recover()).text).toBe("finished elsewhere");
    await first.close();
    await expect(stale.recover()).rejects.toMatchObject({ code: "KEEL_NOT_UNFINISHED" });
    expect(look.runs).toHaveLength(2);
    const events = await stale.events();
    expect(ofType(events, "turn.completed")).toHaveLength(1);
    expect(late.provider.requests).toHaveLength(0);
    await late.close();
  });

  it("a stalled holder's lease taken over by a handle that does not go on with the turn (it found the session busy, then closed): whoever goes on says the lease was taken over", async () => {
    const db = tmpDb();
    const look = counted("look", { category: "info" });
    const id = await dieMidTool(
      db,
      [{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "never" }],
      [look.tool],
      look.started.promise,
      look.release.resolve,
    );
    // The turn's holder is now a live process of this host that stalled (a SIGSTOPped worker): its lease only expires.
    const raw = new SqliteSessionStore({ path: db });
    const stall = { owner: "turn:stalled", pid: process.ppid, host: os.hostname() };
    expect(
      raw.acquireLease(id, { ...stall, ttlMs: 60_000, replaces: raw.unfinished()[0]!.holder!.owner }).acquired,
    ).toBe(true);
    const b = await second(db, [{ text: "found it" }], [look.tool]);
    // A worker's look while the lease holds: busy, nothing to go on with; its close (or idle write) comes after the expiry.
    const early = await b.agent.session(id, { waitMs: 0 });
    expect(early.unfinished).toBeUndefined();
    raw.acquireLease(id, { ...stall, ttlMs: 0 }); // the stalled holder's lease runs out now
    raw.close();
    await early.close();
    const s = await b.agent.session(id, { waitMs: 0 });
    expect(s.unfinished?.turnId).toBe(`${id}/1`);
    expect((await s.recover()).verdict.status).toBe("completed");
    const events = await s.events();
    expect(ofType(events, "turn.resumed").at(-1)!.recovered?.leaseTakenOver).toEqual({
      pid: process.ppid,
      host: os.hostname(),
      reason: "expired",
    });
    expect(ofType(events, "turn.completed").map((e) => e.turnId)).toEqual([`${id}/1`]);
    await b.close();
  });

  it("recover() with nothing unfinished is KEEL_NOT_UNFINISHED", async () => {
    const db = tmpDb();
    const b = await second(db, [{ text: "hi" }], []);
    const s = await b.agent.session();
    await s.run("hello");
    await expect(s.recover()).rejects.toMatchObject({ code: "KEEL_NOT_UNFINISHED" });
    await b.close();
  });

  it("close({ handBack: true }) leaves the running turn unfinished (no terminal event) and another agent finishes it", async () => {
    const db = tmpDb();
    const look = counted("look", { repeatable: true });
    const storeA = new SqliteSessionStore({ path: db });
    const a = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ id: "c1", name: "look" }] }, { text: "never" }]),
      store: storeA,
      tools: [look.tool],
      recovery: "auto",
    });
    const sa = await a.session();
    const running = sa.run("work");
    await look.started.promise;
    const closing = a.close({ handBack: true });
    look.release.resolve("late");
    const r = await running;
    await closing;
    expect(r.verdict).toEqual({ status: "interrupted", reason: "handed_back" });
    storeA.close();
    const b = await second(db, [{ text: "done elsewhere" }], [look.tool]);
    const s = await b.agent.session(sa.id, { waitMs: 5_000 });
    expect(s.unfinished?.turnId).toBe(`${sa.id}/1`);
    const done = await s.recover();
    expect(done.text).toBe("done elsewhere");
    const events = await s.events();
    expect(ofType(events, "turn.interrupted")).toEqual([]);
    expect(toolResults(events).get("c1")).toBe(1);
    // The call the hand-back cut got no "cancelled" result: it was settled by the next claimer (run again: repeatable).
    expect(look.runs).toHaveLength(2);
    expect(ofType(events, "turn.resumed").at(-1)!.recovered!.cut).toEqual(["c1"]);
    expect(pairResults(s.messages).get("c1")!.text).toBe("look done (run 2)");
    await b.close();
  });
});

describe("recovery of a parent whose call ran a child session", () => {
  it("the child continues where it stopped instead of being delegated again", async () => {
    const db = tmpDb();
    const inner = counted("inner", { category: "info" });
    let delegations = 0;
    const delegate = defineTool({
      name: "delegate",
      description: "asks a helper",
      category: "exec",
      execute: async (_args: unknown, ctx) => {
        delegations++;
        const run = await ctx.child({ name: "helper", input: "look it up", agent: { tools: [inner.tool] } });
        return `helper said: ${run.result.text}`;
      },
    });
    // One scripted provider serves parent and child in order: parent asks delegate, child asks inner, (crash).
    const steps: ScriptStep[] = [
      { toolCalls: [{ id: "d1", name: "delegate" }] },
      { toolCalls: [{ id: "i1", name: "inner" }] },
      { text: "never" },
    ];
    const id = await dieMidTool(db, steps, [delegate, inner.tool], inner.started.promise, inner.release.resolve);
    // After the crash: the child's turn goes on (inner runs again, it is info), the child answers, then the parent.
    const b = await second(db, [{ text: "the helper's answer" }, { text: "all done" }], [delegate, inner.tool]);
    const s = await b.agent.session(id, { waitMs: 5_000 });
    const r = await s.recover();
    expect(r.verdict.status).toBe("completed");
    expect(r.text).toBe("all done");
    expect(delegations).toBe(2);
    expect(inner.runs).toHaveLength(2);
    const events = await s.events();
    // One child session only: the call ran again and its child() went on in the same session.
    const kids = ofType(events, "child.started");
    expect(new Set(kids.map((k) => k.childSessionId)).size).toBe(1);
    expect(pairResults(s.messages).get("d1")!.text).toBe("helper said: the helper's answer");
    const child = await b.agent.store.events(kids[0]!.childSessionId);
    expect(ofType(child, "turn.resumed").at(-1)!.recovered!.cut).toEqual(["i1"]);
    expect(ofType(child, "turn.started")).toHaveLength(1);
    expect(toolResults(child).get("i1")).toBe(1);
    await b.close();
  });
});
