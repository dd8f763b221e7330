/**
 * Adversarial worker scenarios on one SQLite file: two workers race over the same unfinished
 * sessions (each turn is finished once, by one of them), and a host's run() races a worker on
 * the same session (the turn is finished once and the input runs after it).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "@keel/agent";
import type { KeelEvent } from "@keel/kernel";
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-worker-adv-"));
  dirs.push(dir);
  return path.join(dir, "sessions.sqlite");
}

/** A counted info tool; the first `blocking` runs wait until released. */
function lookTool(blocking: number) {
  const runs: string[] = [];
  let started!: () => void;
  const allStarted = new Promise<void>((r) => (started = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const tool = defineTool({
    name: "look",
    description: "look",
    category: "info",
    execute: async (_a: unknown, ctx) => {
      runs.push(ctx.sessionId);
      if (runs.length <= blocking) {
        if (runs.length === blocking) started();
        await released;
      }
      return "seen";
    },
  });
  return { tool, runs, allStarted, release };
}

async function leaveUnfinished(db: string, n: number): Promise<string[]> {
  const look = lookTool(n);
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
  await look.allStarted;
  store.close();
  look.release();
  await Promise.all(runs);
  return sessions.map((s) => s.id);
}

const terminal = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

const toolResultCount = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type === "message.appended" && e.message.role === "tool").length;

describe("workers racing", () => {
  it("two workers over the same unfinished sessions: each turn is finished once, by one of them", async () => {
    const db = tmpDb();
    const n = 6;
    const ids = await leaveUnfinished(db, n);
    const look = lookTool(0);
    const texts = Array.from({ length: n }, (_, i) => ({ text: `answer ${i}` }));
    const mk = async () => {
      const store = new SqliteSessionStore({ path: db });
      const agent = await createAgent({
        provider: scriptedProvider(texts),
        store,
        tools: [look.tool],
        recovery: "auto",
        lease: { ttlMs: 200 },
      });
      return { store, agent };
    };
    const [w1, w2] = [await mk(), await mk()];
    const events: WorkerEvent[] = [];
    const reports = await Promise.all(
      [w1, w2].map((w) =>
        runWorker({ agent: w.agent, once: true, minIdleMs: 0, concurrency: 3, onEvent: (e) => events.push(e) }),
      ),
    );
    expect(reports[0]!.finished + reports[1]!.finished).toBe(n);
    expect(reports[0]!.failed + reports[1]!.failed).toBe(0);
    expect(look.runs.sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const log = await w1.store.events(id);
      expect(terminal(log)).toEqual([`turn.completed:${id}/1`]);
      expect(log.filter((e) => e.type === "turn.resumed")).toHaveLength(1);
      expect(toolResultCount(log)).toBe(1);
    }
    expect(events.filter((e) => e.type === "finished")).toHaveLength(n);
    expect(await w1.store.unfinished()).toEqual([]);
    for (const w of [w1, w2]) {
      await w.agent.close();
      w.store.close();
    }
  });

  it("a host's run() and a worker on the same unfinished session: the turn is finished once and the input runs after it", async () => {
    const db = tmpDb();
    const [id] = await leaveUnfinished(db, 1);
    const look = lookTool(0);
    const hostStore = new SqliteSessionStore({ path: db });
    const host = await createAgent({
      provider: scriptedProvider([{ text: "host finished it" }, { text: "host answers the input" }]),
      store: hostStore,
      tools: [look.tool],
      recovery: "auto",
      lease: { ttlMs: 200 },
    });
    const workerStore = new SqliteSessionStore({ path: db });
    const worker = await createAgent({
      provider: scriptedProvider([{ text: "worker finished it" }]),
      store: workerStore,
      tools: [look.tool],
      recovery: "auto",
      lease: { ttlMs: 200 },
    });
    // The host opened the session (it saw the turn unfinished) before the worker's pass.
    const s = await host.session(id!, { waitMs: 5_000 });
    expect(s.unfinished?.turnId).toBe(`${id}/1`);
    const [report, r] = await Promise.all([runWorker({ agent: worker, once: true, minIdleMs: 0 }), s.run("and then?")]);
    expect(r.turnId).toBe(`${id}/2`);
    // Whoever won the lease finished turn 1; the host's provider answered turn 2 with its next step.
    expect(["host finished it", "host answers the input"]).toContain(r.text);
    const log = await hostStore.events(id!);
    expect(terminal(log)).toEqual([`turn.completed:${id}/1`, `turn.completed:${id}/2`]);
    expect(look.runs).toHaveLength(1);
    expect(report.failed).toBe(0);
    await host.close();
    await worker.close();
    hostStore.close();
    workerStore.close();
  });
});
