/**
 * Goals through real kernel turns on the scripted provider: the lifecycle (a message opens a
 * goal, a completion phrase closes it, a new message opens the next) stored across a restart and
 * never shown to the model unless asked; autonomous runs reaching the goal (by phrase or by the
 * supervisor), hitting the limit, stopped by the host, paused by the supervisor's circuit
 * breaker, deferred on 429, stuck; and a run whose process was SIGKILLed marked on the next start.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, messageText } from "@keel/agent";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { runWorker } from "@keel/worker";
import type { WorkerEvent } from "@keel/worker";
import { MemorySessionStore, scriptedProvider } from "@keel/testkit";
import type { KeelEvent, SessionStore } from "@keel/kernel";
import type { ScriptStep } from "@keel/testkit";
import { GoalStore, goalRunWork, goals, runGoal } from "../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-goals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const dbPath = () => join(dir, `goals-${++n}.sqlite`);
const codes = async (store: SessionStore, id: string) =>
  ((await store.events(id)) as KeelEvent[]).flatMap((e) =>
    e.type === "diagnostic" && e.code.toLowerCase().startsWith("goal") ? [e.code] : [],
  );

describe("goal lifecycle", () => {
  it("a message opens the goal, a completion phrase closes it, the next message opens another; the state survives a restart", async () => {
    const path = dbPath();
    const sessions = new MemorySessionStore();
    const provider = scriptedProvider([{ text: "Working on it." }, { text: "Release notes written. Task complete." }]);
    const a1 = await createAgent({ provider, sideModel: false, store: sessions, plugins: [goals({ path })] });
    const s = await a1.session();
    await s.run("Write the release notes");
    const db = new GoalStore(path);
    expect(db.goal(s.id)).toMatchObject({ status: "active", goal: "Write the release notes" });
    // Not shown to the model by default.
    expect(provider.requests[0]!.system).not.toContain("Write the release notes");
    await s.run("go on");
    expect(db.goal(s.id)).toMatchObject({ status: "completed", completedBy: "phrase" });
    await a1.close();
    // Another process: the completed goal is there; the next message opens a new one.
    const p2 = scriptedProvider([{ text: "On it." }]);
    const a2 = await createAgent({
      provider: p2,
      sideModel: false,
      store: sessions,
      plugins: [goals({ path, prompt: true })],
    });
    const s2 = await a2.session(s.id);
    expect(db.goal(s.id).status).toBe("completed");
    await s2.run("Now tag the release");
    expect(db.goal(s.id)).toMatchObject({ status: "active", goal: "Now tag the release" });
    // With prompt: true the model sees it as a section.
    expect(p2.requests[0]!.system).toMatch(/Current goal[\s\S]*Now tag the release/);
    expect(await codes(sessions, s.id)).toEqual(["goal.active", "goal.completed", "goal.active"]);
    await a2.close();
    db.close();
  });

  it("a goal holding a secret is stored redacted", async () => {
    const path = dbPath();
    const key = `sk-ant-api03-${"Zq8".repeat(22)}`;
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [goals({ path })],
    });
    const s = await agent.session();
    await s.run(`Rotate the key ${key} today`);
    await agent.close();
    const db = new GoalStore(path);
    expect(db.goal(s.id).goal).not.toContain(key.slice(14));
    expect(db.goal(s.id).goal).toContain("[REDACTED");
    db.close();
  });
});

describe("autonomous runs", () => {
  const setup = async (steps: ScriptStep[]) => {
    const path = dbPath();
    const provider = scriptedProvider(steps);
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [goals({ path })],
    });
    return { agent, provider, session: await agent.session(), db: new GoalStore(path) };
  };

  it("reaches the goal: the agent works unattended and says it is done; the goal is completed", async () => {
    const { agent, session, db, provider } = await setup([
      { text: "Step 1 done." },
      { text: "Step 2 done." },
      { text: "All written. GOAL COMPLETE" },
    ]);
    const r = await runGoal(session, { goal: "Write three notes", store: db, maxTurns: 10 });
    expect(r).toMatchObject({ status: "achieved", turns: 3 });
    expect(db.goal(session.id)).toMatchObject({ status: "completed", completedBy: "phrase" });
    expect(db.run(r.run.id)).toMatchObject({ status: "achieved", turns: 3 });
    // Turns after the first are driven by the continue prompt, tagged with the run in their metadata.
    expect(JSON.stringify(provider.requests[1]!.messages.at(-1))).toContain("Continue working toward the goal");
    await agent.close();
    db.close();
  });

  it("hits its turn limit", async () => {
    const { agent, session, db } = await setup([{ text: "a" }, { text: "b" }, { text: "c" }]);
    const r = await runGoal(session, { goal: "Never done", store: db, maxTurns: 3 });
    expect(r).toMatchObject({ status: "limit", turns: 3 });
    expect(db.goal(session.id).status).toBe("active");
    await agent.close();
    db.close();
  });

  it("is stopped by the host mid-turn", async () => {
    const { agent, session, db } = await setup([{ text: "a" }, { hang: true }]);
    const ctrl = new AbortController();
    const r = runGoal(session, {
      goal: "Long job",
      store: db,
      maxTurns: 10,
      onTurn: (t) => t === 1 && setTimeout(() => ctrl.abort(), 50),
      signal: ctrl.signal,
    });
    expect(await r).toMatchObject({ status: "stopped", turns: 2 });
    await agent.close();
    db.close();
  });

  it("the supervisor decides: a claim it rejects goes on, its confirmation ends the run; a 429 defers it without counting", async () => {
    const { agent, session, db } = await setup([
      { text: "GOAL COMPLETE (not really)" },
      { text: "more work" },
      { text: "now truly done" },
    ]);
    const supervisor = scriptedProvider([
      { text: '{"achieved": false, "reason": "nothing was written yet"}' },
      { error: { class: "rate_limited", status: 429 } },
      { text: '{"achieved": true, "reason": "the notes exist"}' },
    ]);
    const r = await runGoal(session, {
      goal: "Write the notes",
      store: db,
      maxTurns: 10,
      supervisor: { model: supervisor, every: 2 },
    });
    // Turn 1 claimed: checked, rejected. Turn 2: the regular check got a 429 (deferred). Turn 3: checked again, confirmed.
    expect(r).toMatchObject({ status: "achieved", turns: 3 });
    expect(r.run.verdict).toEqual({ achieved: true, reason: "the notes exist" });
    expect(r.run.supervisorFails).toBe(0);
    expect(supervisor.requests).toHaveLength(3);
    expect(db.goal(session.id)).toMatchObject({ status: "completed", completedBy: "supervisor" });
    await agent.close();
    db.close();
  });

  it("pauses after the supervisor fails K times in a row (circuit breaker)", async () => {
    const { agent, session, db } = await setup([{ text: "a" }, { text: "b" }, { text: "c" }, { text: "d" }]);
    const supervisor = scriptedProvider([{ text: "I think so?" }, { error: { class: "overloaded" } }]);
    const r = await runGoal(session, {
      goal: "Something",
      store: db,
      maxTurns: 10,
      supervisor: { model: supervisor, every: 1, maxFails: 2 },
    });
    expect(r).toMatchObject({ status: "paused", turns: 2 });
    expect(r.reason).toContain("the supervisor failed 2 times in a row");
    expect(r.run.supervisorFails).toBe(2);
    await agent.close();
    db.close();
  });

  it("ends as stuck when the answers repeat", async () => {
    const { agent, session, db } = await setup([{ text: "same" }, { text: "same" }, { text: "same" }, { text: "x" }]);
    expect(await runGoal(session, { goal: "Loop", store: db, maxTurns: 10, stuckAfter: 3 })).toMatchObject({
      status: "stuck",
      turns: 3,
    });
    await agent.close();
    db.close();
  });

  it("bad options are refused before a run is recorded; a throwing onTurn does not end the run", async () => {
    const { agent, session, db } = await setup([{ text: "a" }, { text: "GOAL COMPLETE" }]);
    for (const bad of [
      { supervisor: { model: scriptedProvider([]), timeoutMs: -1 } },
      { stuckAfter: 1 },
      { phrases: "done" as never },
      { turnDelayMs: Number.NaN },
    ]) {
      await expect(runGoal(session, { goal: "g", store: db, ...bad })).rejects.toMatchObject({
        code: "KEEL_CONFIG_INVALID",
      });
    }
    expect(db.runs()).toEqual([]);
    const r = await runGoal(session, {
      goal: "g",
      store: db,
      onTurn: () => {
        throw new Error("host bug");
      },
    });
    expect(r).toMatchObject({ status: "achieved", turns: 2 });
    await agent.close();
    db.close();
  });

  it("a supervisor that ignores its signal is cut at its timeout; a stop during the pause between turns is prompt", async () => {
    const { agent, session, db } = await setup([{ text: "a" }, { text: "b" }, { text: "c" }]);
    const deaf = {
      id: "deaf:m",
      stream: async function* () {
        await new Promise(() => {});
      },
    } as never;
    const t0 = performance.now();
    const r = await runGoal(session, {
      goal: "g",
      store: db,
      maxTurns: 2,
      supervisor: { model: deaf, every: 1, timeoutMs: 150, maxFails: 2 },
    });
    expect(r).toMatchObject({ status: "paused" });
    expect(r.reason).toContain("timed out after 150 ms");
    expect(performance.now() - t0).toBeLessThan(3_000);
    await agent.close();
    db.close();
    const second = await setup([{ text: "a" }, { text: "b" }]);
    const ctrl = new AbortController();
    const t1 = performance.now();
    const stopped = await runGoal(second.session, {
      goal: "g",
      store: second.db,
      turnDelayMs: 10_000,
      signal: ctrl.signal,
      onTurn: () => setTimeout(() => ctrl.abort(), 30),
    });
    expect(stopped.status).toBe("stopped");
    expect(performance.now() - t1).toBeLessThan(3_000);
    await second.agent.close();
    second.db.close();
  });

  it("with the plugin on, a claim the supervisor rejects leaves the goal active; a busy session keeps its goal", async () => {
    const path = dbPath();
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "GOAL COMPLETE" }, { text: "hmm" }, { hang: true }]),
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [goals({ path })],
    });
    const session = await agent.session();
    const db = new GoalStore(path);
    const r = await runGoal(session, {
      goal: "Write it",
      store: db,
      maxTurns: 2,
      supervisor: {
        model: scriptedProvider([
          { text: '{"achieved": false, "reason": "no"}' },
          { text: '{"achieved": false, "reason": "no"}' },
        ]),
        every: 1,
      },
    });
    expect(r.status).toBe("limit");
    expect(db.goal(session.id)).toMatchObject({ status: "active", goal: "Write it" });
    const busy = session.run("something long");
    await new Promise((res) => setTimeout(res, 20));
    const refused = await runGoal(session, { goal: "Another goal", store: db });
    expect(refused.status).toBe("failed");
    expect(refused.reason).toContain("KEEL_TURN_BUSY");
    expect(db.goal(session.id).goal).toBe("Write it");
    session.cancel();
    await busy.catch(() => {});
    await agent.close();
    db.close();
  });

  it("the plugin's database outlives a closed session: the next session of the agent still records its goal", async () => {
    const path = dbPath();
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }, { text: "ok" }]),
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [goals({ path })],
    });
    const s1 = await agent.session();
    await s1.run("Goal one");
    await s1.close();
    const s2 = await agent.session();
    await s2.run("Goal two");
    const db = new GoalStore(path);
    expect(db.goal(s2.id)).toMatchObject({ status: "active", goal: "Goal two" });
    await agent.close();
    db.close();
  });

  it("a worker goes on with a SIGKILLed run: the cut turn is finished, then the run continues under its id until achieved", async () => {
    const path = dbPath();
    const sessionsDb = join(dirname(path), "sessions.sqlite");
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(process.execPath, [join(here, "fixtures", "crash-run.ts"), path, sessionsDb], {
      stdio: "ignore",
    });
    const db = new GoalStore(path);
    await expect.poll(() => db.runs().length, { timeout: 20_000 }).toBe(1);
    const sessions = new SqliteSessionStore({ path: sessionsDb });
    await expect.poll(async () => (await sessions.unfinished()).length, { timeout: 20_000 }).toBe(1);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const provider = scriptedProvider([{ text: "Drafting the notes." }, { text: "Done. GOAL COMPLETE" }]);
    const agent = await createAgent({ provider, sideModel: false, store: sessions, recovery: "auto" });
    const events: WorkerEvent[] = [];
    await runWorker({
      agent,
      once: true,
      minIdleMs: 0,
      sources: [goalRunWork({ store: db })],
      onEvent: (e) => events.push(e),
    });
    expect(events.map((e) => e.type)).toEqual(["claimed", "finished", "work"]);
    const run = db.runs()[0]!;
    expect(run).toMatchObject({ status: "achieved", turns: 1, goal: "Ship the release notes" });
    expect(events[2]).toMatchObject({ type: "work", source: "goal-runs", id: run.id });
    // The goal was sent once (the cut turn's input, kept); the run went on with the continue prompt.
    const texts = provider.requests
      .at(-1)!
      .messages.filter((m) => m.role === "user")
      .map((m) => messageText(m));
    expect(texts[0]).toBe("Ship the release notes");
    expect(texts.slice(1).every((t) => t.startsWith("Continue working toward the goal"))).toBe(true);
    // A second worker pass finds nothing more.
    await runWorker({ agent, once: true, minIdleMs: 0, sources: [goalRunWork({ store: db })] });
    expect(db.runs()[0]!.status).toBe("achieved");
    await agent.close();
    sessions.close();
    db.close();
  }, 60_000);

  it("a run whose process was SIGKILLed is marked orphaned when the next agent starts, with a warning in its first session's log", async () => {
    const path = dbPath();
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(process.execPath, [join(here, "fixtures", "crash-run.ts"), path], { stdio: "ignore" });
    const db = new GoalStore(path);
    await expect.poll(() => db.runs().length, { timeout: 20_000 }).toBe(1);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    expect(db.runs()[0]!.status).toBe("running");
    const sessions = new MemorySessionStore();
    const agent = await createAgent({
      provider: scriptedProvider([]),
      sideModel: false,
      store: sessions,
      plugins: [goals({ path })],
    });
    const s = await agent.session();
    expect(db.runs()[0]).toMatchObject({ status: "orphaned", goal: "Ship the release notes" });
    await s.flush();
    expect(await codes(sessions, s.id)).toEqual(["GOAL_RUNS_ORPHANED"]);
    await agent.close();
    db.close();
  }, 60_000);
});
