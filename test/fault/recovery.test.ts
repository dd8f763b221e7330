/**
 * Fault suite, class 15 — runs that finish themselves. The real `keel` binary (agent
 * `recovery: "auto"`) with the official Anthropic SDK against the wire server is SIGKILLed in
 * the middle of a tool call; `keel worker` then finishes the turn with no user action: no tool
 * runs twice unless it is repeatable, every call has exactly one result, and the turn ends
 * under its own id. On SQLite and on PostgreSQL, and as a small campaign with two workers
 * running beside the killed processes (one of them killed and restarted too).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { seededRandom } from "../../packages/testkit/src/index.ts";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import {
  faultConfig,
  pairingProblems,
  project,
  runKeel,
  startKeel,
  storedEvents,
  storedSessions,
  until,
  useSharedWire,
  wireEnv,
} from "./support/storage.ts";
import type { KeelProc } from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-recovery-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

/** The fault config with recovery on, a short lease, and `charge`: a tool with an effect, not safe to repeat. */
function recoveryConfig(): string {
  const charge = `{
    name: "charge",
    description: "Charges the card once; waits like pause.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "exec",
    execute: (args, ctx) => {
      appendFileSync(process.env.FAULT_CHARGE_LOG, ctx.callId + "\\n");
      return new Promise((resolve) => {
        const poll = setInterval(() => { if (existsSync(process.env.FAULT_PAUSE_RELEASE)) { clearInterval(poll); resolve("charged"); } }, 50);
      });
    },
  }, {`;
  return faultConfig(`recovery: "auto",\n  lease: { ttlMs: 2000 },`)
    .replace('import { existsSync } from "node:fs";', 'import { appendFileSync, existsSync } from "node:fs";')
    .replace("tools: [{", `tools: [${charge}`);
}

function setup(name: string, extra: Record<string, string> = {}) {
  const p = project(root, name, recoveryConfig());
  const release = join(p.dir, "release");
  const charges = join(p.dir, "charges.log");
  writeFileSync(charges, "");
  const env = wireEnv(p.home, server.anthropicBaseURL, {
    FAULT_PAUSE_RELEASE: release,
    FAULT_CHARGE_LOG: charges,
    KEEL_WORKER_MIN_IDLE_MS: "0",
    KEEL_WORKER_INTERVAL_MS: "100",
    ...extra,
  });
  return { ...p, env, release, charges: () => readFileSync(charges, "utf8").split("\n").filter(Boolean) };
}

const requestsWith = (needle: string) =>
  server.requests.filter((r) => JSON.stringify(r.body?.messages ?? []).includes(needle));

/** Each tool call of the session's log has exactly one result message. */
function resultsPerCall(events: readonly KeelEvent[]): Map<string, number> {
  const n = new Map<string, number>();
  for (const e of events) {
    if (e.type !== "message.appended") continue;
    const m = e.message;
    if (m.role === "assistant") for (const b of m.content) if (b.type === "tool_call") n.set(b.id, n.get(b.id) ?? 0);
    if (m.role === "tool") n.set(m.toolCallId, (n.get(m.toolCallId) ?? 0) + 1);
  }
  return n;
}

const terminals = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

async function killed(proc: KeelProc): Promise<void> {
  proc.child.kill("SIGKILL");
  expect((await proc.exit).signal).toBe("SIGKILL");
}

/** Where a campaign reads the sessions it checks (the SQLite file, or PostgreSQL). */
interface LogReader {
  sessions(): Promise<string[]>;
  events(id: string): Promise<KeelEvent[]>;
}

/** Poll an async `pred` until true; throws after `timeoutMs` naming `what`. */
async function untilAsync(pred: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * 6 `keel run` turns of 3 tool rounds, each SIGKILLed at a seeded moment, while 2 `keel worker`
 * processes run (one SIGKILLed and replaced): every turn completes under its id, each call has
 * exactly one result, what was last sent pairs, and the workers exit 0 on SIGTERM.
 */
async function campaign(p: ReturnType<typeof setup>, read: LogReader): Promise<void> {
  writeFileSync(p.release, "");
  const rand = seededRandom(20261127);
  const tag = p.dir.split("/").at(-1);
  const workers: KeelProc[] = [0, 1].map(() => startKeel(["worker", "--json"], { cwd: p.dir, env: p.env }));
  const inputs = Array.from({ length: 6 }, (_, i) => `${tag}-${i} tools:3 pause:${150 + Math.floor(rand() * 150)}`);
  let kills = 0;
  await Promise.all(
    inputs.map(async (input, i) => {
      await new Promise((r) => setTimeout(r, i * 150));
      const proc = startKeel(["run", input], { cwd: p.dir, env: p.env });
      await until(() => requestsWith(input).length >= 1, `${input} to reach the model`, 40_000, 20);
      await new Promise((r) => setTimeout(r, Math.floor(rand() * 600)));
      if (proc.child.exitCode === null) {
        proc.child.kill("SIGKILL");
        kills++;
      }
      await proc.exit;
    }),
  );
  // One worker dies mid-way and another takes its place.
  workers[0]!.child.kill("SIGKILL");
  workers.push(startKeel(["worker", "--json"], { cwd: p.dir, env: p.env }));
  await untilAsync(
    async () => {
      const ids = await read.sessions();
      if (ids.length !== 6) return false;
      for (const id of ids) if (terminals(await read.events(id)).length !== 1) return false;
      return true;
    },
    "every turn to end",
    90_000,
  );
  for (const id of await read.sessions()) {
    const events = await read.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect([...resultsPerCall(events).values()].every((n) => n === 1)).toBe(true);
    const input = events.find((e) => e.type === "turn.started");
    const last = requestsWith(input?.type === "turn.started" ? input.input : "?").at(-1)!;
    expect(pairingProblems(last.body as never)).toEqual([]);
  }
  // A worker's "continuing" line says it listens for SIGTERM (a process still loading would die of it).
  for (const w of workers.slice(1))
    await until(() => w.stderr().includes("keel worker: continuing"), "the worker to start", 40_000, 20);
  for (const w of workers.slice(1)) w.child.kill("SIGTERM");
  const exits = await Promise.all(workers.slice(1).map((w) => w.exit));
  expect(exits.map((e) => e.code)).toEqual([0, 0]);
  expect(kills).toBeGreaterThan(0);
}

describe("recovery: a SIGKILLed turn is finished by keel worker with no user action", () => {
  it("killed mid-call of a repeatable tool: keel worker --once runs the call again and completes the turn under its id", async () => {
    const p = setup("repeatable");
    const proc = startKeel(["run", "recover-a tools:2 pause:60000"], { cwd: p.dir, env: p.env });
    let id = "";
    await until(
      () => {
        try {
          id = storedSessions(p.home)[0] ?? "";
          return !!id && storedEvents(p.home, id).some((e) => e.type === "tool.started");
        } catch {
          return false; // the database is still being created by keel run
        }
      },
      "the first call to start",
      40_000,
      50,
    );
    await killed(proc);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 50_000 });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string });
    expect(lines.map((l) => l.type)).toEqual(["claimed", "finished", "report"]);
    expect(lines[1]).toMatchObject({ sessionId: id, turnId: `${id}/1`, verdict: { status: "completed" } });
    const events = storedEvents(p.home, id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    const resumed = events.find((e) => e.type === "turn.resumed");
    expect(resumed?.type === "turn.resumed" && resumed.recovered?.cut).toHaveLength(1);
    expect([...resultsPerCall(events).values()]).toEqual([1, 1]);
    const last = requestsWith("recover-a").at(-1)!;
    expect(pairingProblems(last.body as never)).toEqual([]);
  });

  it("killed mid-call of a tool not safe to repeat: it never runs again, and the model reads that it was interrupted", async () => {
    const p = setup("charge");
    const proc = startKeel(["run", "recover-b tools:1 tool:charge"], { cwd: p.dir, env: p.env });
    await until(() => p.charges().length === 1, "the charge to start", 40_000, 50);
    await killed(proc);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once"], { cwd: p.dir, env: p.env, timeoutMs: 50_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^claimed {2}\S+\/1 \(left unfinished\)\nfinished \S+\/1 completed \(end_turn\) in \d+ ms\n$/,
    );
    expect(p.charges()).toHaveLength(1);
    const id = storedSessions(p.home)[0]!;
    const events = storedEvents(p.home, id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect([...resultsPerCall(events).values()]).toEqual([1]);
    const last = requestsWith("recover-b").at(-1)!;
    expect(pairingProblems(last.body as never)).toEqual([]);
    expect(JSON.stringify(last.body)).toContain("not marked safe to repeat");
  });

  it("a campaign: 6 turns killed at seeded moments while 2 workers run (one of them killed and restarted): every turn completes, each call has one result", async () => {
    const p = setup("campaign");
    await campaign(p, {
      sessions: async () => storedSessions(p.home),
      events: async (id) => storedEvents(p.home, id),
    });
  }, 120_000);
});

describe("recovery of a parent killed while its child session runs", () => {
  it("keel worker resumes the parent; the child goes on where it stopped instead of being delegated again", async () => {
    const config = `import { existsSync } from "node:fs";
const pause = {
  name: "pause",
  description: "Waits until released.",
  parameters: { type: "object", properties: { ms: { type: "number" } } },
  category: "info",
  execute: () => new Promise((resolve) => {
    const poll = setInterval(() => { if (existsSync(process.env.FAULT_PAUSE_RELEASE)) { clearInterval(poll); resolve("released"); } }, 50);
  }),
};
export default {
  name: "fault",
  model: "anthropic:claude-sonnet-4-6",
  recovery: "auto",
  lease: { ttlMs: 2000 },
  tools: [pause, {
    name: "delegate",
    description: "Asks a helper.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "exec",
    execute: async (_args, ctx) => {
      const run = await ctx.child({ name: "helper", input: "child-task tools:1", agent: { tools: [pause] } });
      return "helper: " + run.result.text;
    },
  }],
};
`;
    const p = project(root, "children", config);
    const release = join(p.dir, "release");
    const env = wireEnv(p.home, server.anthropicBaseURL, {
      FAULT_PAUSE_RELEASE: release,
      KEEL_WORKER_MIN_IDLE_MS: "0",
    });
    const proc = startKeel(["run", "parent-task tools:1 tool:delegate"], { cwd: p.dir, env });
    // Killed once the child's own tool call is running.
    await until(
      () => {
        try {
          const ids = storedSessions(p.home);
          return (
            ids.length === 2 &&
            ids.some((id) => storedEvents(p.home, id).some((e) => e.type === "tool.started" && e.name === "pause"))
          );
        } catch {
          return false;
        }
      },
      "the child's tool to start",
      40_000,
      50,
    );
    await killed(proc);
    writeFileSync(release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env, timeoutMs: 50_000 });
    expect(r.code, r.stderr).toBe(0);
    const ids = storedSessions(p.home);
    expect(ids).toHaveLength(2);
    const logs = ids.map((id) => ({ id, events: storedEvents(p.home, id) }));
    const parent = logs.find((l) => l.events.some((e) => e.type === "child.started"))!;
    const child = logs.find((l) => l !== parent)!;
    expect(terminals(parent.events)).toEqual([`turn.completed:${parent.id}/1`]);
    expect(terminals(child.events)).toEqual([`turn.completed:${child.id}/1`]);
    expect(parent.events.filter((e) => e.type === "child.started")).toHaveLength(1);
    expect(child.events.filter((e) => e.type === "turn.started")).toHaveLength(1);
    const resumed = child.events.find((e) => e.type === "turn.resumed");
    expect(resumed?.type === "turn.resumed" && resumed.recovered?.cut).toHaveLength(1);
    const answer = parent.events.find((e) => e.type === "message.appended" && e.message.role === "tool");
    expect(JSON.stringify(answer)).toContain("helper: Done after 1 tool results");
    for (const l of logs) expect([...resultsPerCall(l.events).values()].every((n) => n === 1)).toBe(true);
  });
});

describe("recovery on PostgreSQL", () => {
  beforeAll(requirePostgres);
  afterAll(dropTestSchemas);

  it("the campaign on PostgreSQL: 6 turns killed at seeded moments, 2 workers (one killed): every turn completes once", async () => {
    const schema = testSchema();
    const p = setup("pg-campaign", { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema });
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    try {
      await campaign(p, {
        sessions: async () => (await store.listSessions()).map((s) => s.id),
        events: (id) => store.events(id),
      });
      expect(await store.unfinished()).toEqual([]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it("a keel run killed mid-tool on a shared PostgreSQL store is finished by keel worker from another home", async () => {
    const schema = testSchema();
    const pg = { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema };
    const a = setup("pg-a", pg);
    const b = setup("pg-b", { ...pg, FAULT_PAUSE_RELEASE: a.release, FAULT_CHARGE_LOG: join(a.dir, "charges.log") });
    const proc = startKeel(["run", "recover-pg tools:2 pause:60000"], { cwd: a.dir, env: a.env });
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    try {
      let id = "";
      for (let i = 0; !id; i++) {
        if (i > 800) throw new Error("the first call never started");
        const [u] = await store.unfinished();
        if (u && (await store.events(u.sessionId)).some((e) => e.type === "tool.started")) id = u.sessionId;
        else await new Promise((r) => setTimeout(r, 50));
      }
      await killed(proc);
      expect((await store.unfinished()).map((u) => [u.sessionId, u.state])).toEqual([[id, "running"]]);
      writeFileSync(a.release, "");
      const r = await runKeel(["worker", "--once"], { cwd: b.dir, env: b.env, timeoutMs: 50_000 });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`finished ${id}/1 completed`);
      const events = await store.events(id);
      expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
      expect([...resultsPerCall(events).values()].every((n) => n === 1)).toBe(true);
      expect(await store.unfinished()).toEqual([]);
      expect(existsSync(join(b.home, "sessions.sqlite"))).toBe(false);
    } finally {
      await store.close();
    }
  });
});

describe("recovery on the same machine: a dead holder's lease is taken at once", () => {
  /** A `keel run` SIGKILLed mid-tool, then `keel worker --once` with the default minimum idle time (the lease TTL, 30 s here). */
  async function killedThenWorker(name: string, extra: Record<string, string>, read: LogReader) {
    const p = project(root, name, faultConfig(`recovery: "auto",\n  lease: { ttlMs: 30000 },`));
    const release = join(p.dir, "release");
    const env = wireEnv(p.home, server.anthropicBaseURL, { FAULT_PAUSE_RELEASE: release, ...extra });
    const proc = startKeel(["run", `${name} tools:2 pause:60000`], { cwd: p.dir, env });
    let id = "";
    await untilAsync(
      async () => {
        id = (await read.sessions())[0] ?? "";
        return !!id && (await read.events(id)).some((e) => e.type === "tool.started");
      },
      "the first call to start",
      40_000,
    );
    await killed(proc);
    const t0 = Date.now();
    writeFileSync(release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env, timeoutMs: 50_000 });
    const took = Date.now() - t0;
    expect(r.code, r.stderr).toBe(0);
    const events = await read.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect([...resultsPerCall(events).values()]).toEqual([1, 1]);
    // Nothing waited for the 30 s lease (nor the quiet time): the holder's process is gone, and the worker knows it.
    expect(took).toBeLessThan(30_000);
    const resumed = events.find((e) => e.type === "turn.resumed");
    expect(resumed?.type === "turn.resumed" && resumed.recovered?.leaseTakenOver?.reason).toBe("holder_dead");
  }

  it("SQLite: keel worker --once finishes a keel run SIGKILLed a moment ago, well under the 30 s lease TTL", async () => {
    const home = join(root, "same-host-sqlite", "home");
    await killedThenWorker(
      "same-host-sqlite",
      {},
      {
        sessions: async () => storedSessions(home),
        events: async (id) => storedEvents(home, id),
      },
    );
  }, 90_000);

  it("PostgreSQL: the same on a shared store", async () => {
    await requirePostgres();
    const schema = testSchema();
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    try {
      await killedThenWorker(
        "same-host-pg",
        { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema },
        { sessions: async () => (await store.listSessions()).map((s) => s.id), events: (id) => store.events(id) },
      );
    } finally {
      await store.close();
      await dropTestSchemas();
    }
  }, 90_000);
});
