/**
 * Fault suite, class 15 — runs that finish themselves, through a database outage. A TCP proxy
 * (node:net) stands between every `keel` process and the shared PostgreSQL server: it refuses
 * connections and destroys the live ones (the backends are gone) for a few seconds, without
 * stopping the server. A `keel run` SIGKILLed mid-tool while the database is down is finished
 * by the `keel worker` that was already running, once the database is back: the worker never
 * exits, says once that the store is unavailable and once that it is back. An outage that
 * cuts the worker's own recovery mid-turn: the turn is taken again and completes, never ends
 * interrupted.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";
import { startPgProxy } from "../../packages/store-postgres/test/support/proxy.ts";
import type { PgProxy } from "../../packages/store-postgres/test/support/proxy.ts";
import { faultConfig, project, startKeel, until, useSharedWire, wireEnv } from "./support/storage.ts";
import type { KeelProc } from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-outage-");
let server: WireServer;
let proxy: PgProxy | undefined;
const stores: PostgresSessionStore[] = [];
beforeAll(async () => {
  await requirePostgres();
  server = sharedServer();
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  for (const s of stores.splice(0)) await s.close();
});
afterAll(dropTestSchemas);

const terminals = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

/** Poll an async `pred` until true; throws after `timeoutMs` naming `what`. */
async function untilAsync(pred: () => Promise<boolean>, what: string, timeoutMs = 40_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every process on the proxy; the scenario reads PostgreSQL directly. The lease TTL is 30 s: nothing here waits for it. */
async function setup(name: string) {
  proxy = await startPgProxy();
  const schema = testSchema();
  const p = project(root, name, faultConfig(`recovery: "auto",\n  lease: { ttlMs: 30000 },`));
  const release = join(p.dir, "release");
  const env = wireEnv(p.home, server.anthropicBaseURL, {
    FAULT_PAUSE_RELEASE: release,
    KEEL_DATABASE_URL: proxy.url,
    KEEL_DATABASE_SCHEMA: schema,
    KEEL_WORKER_INTERVAL_MS: "100",
    KEEL_WORKER_MAX_BACKOFF_MS: "1000",
    KEEL_DATABASE_CONNECT_TIMEOUT_MS: "2000",
  });
  const store = new PostgresSessionStore({ url: PG_URL, schema });
  stores.push(store);
  return { ...p, env, release, store };
}

/** `keel worker --json`, once it says it listens for SIGTERM. */
async function worker(p: Awaited<ReturnType<typeof setup>>): Promise<KeelProc> {
  const w = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
  await until(() => w.stderr().includes("keel worker: continuing"), "the worker to start", 40_000, 20);
  return w;
}

const lines = (w: KeelProc) =>
  w
    .stdout()
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });

/** The session of the one `keel run`, once its first call started. */
async function firstCallStarted(store: PostgresSessionStore): Promise<string> {
  let id = "";
  await untilAsync(async () => {
    const [s] = await store.listSessions();
    if (s && (await store.events(s.id)).some((e) => e.type === "tool.started")) id = s.id;
    return !!id;
  }, "the first call to start");
  return id;
}

describe("outage: keel worker through a PostgreSQL outage", () => {
  beforeAll(requirePostgres);

  it("a keel run SIGKILLed mid-tool while the database is down is finished by the running worker once it is back; the worker never exits", async () => {
    const p = await setup("down-kill");
    const w = await worker(p);
    const run = startKeel(["run", "outage-a tools:2 pause:60000"], { cwd: p.dir, env: p.env });
    const id = await firstCallStarted(p.store);
    await proxy!.down();
    run.child.kill("SIGKILL");
    expect((await run.exit).signal).toBe("SIGKILL");
    // Down for 4 s: the worker told it once and is still there.
    await until(() => lines(w).some((l) => l.type === "store_unavailable"), "the worker to report the outage");
    await new Promise((r) => setTimeout(r, 4_000));
    expect(w.child.exitCode, w.stderr()).toBeNull();
    writeFileSync(p.release, "");
    const back = Date.now();
    await proxy!.up();
    await untilAsync(async () => terminals(await p.store.events(id)).length > 0, "the turn to end");
    const finishedIn = Date.now() - back;
    const events = await p.store.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect(events.filter((e) => e.type === "turn.interrupted")).toEqual([]);
    // A dead holder on this host: taken when the store is back, not after the 30 s lease.
    expect(finishedIn).toBeLessThan(30_000);
    await until(
      () => lines(w).some((l) => l.type === "store_recovered") && lines(w).some((l) => l.type === "finished"),
      "the worker to report the store back and the turn finished",
    );
    const seen = lines(w);
    expect(seen.filter((l) => l.type === "store_unavailable")).toHaveLength(1);
    expect(seen.filter((l) => l.type === "store_recovered")).toHaveLength(1);
    // The outage refuses new connections and destroys the live ones: a poll in flight then (a loaded machine) is told its connection ended.
    expect(seen.find((l) => l.type === "store_unavailable")?.message).toMatch(
      /ECONNREFUSED|not reachable|Connection terminated unexpectedly/,
    );
    expect(seen.filter((l) => l.type === "failed")).toEqual([]);
    expect(seen.find((l) => l.type === "finished")).toMatchObject({ sessionId: id, verdict: { status: "completed" } });
    w.child.kill("SIGTERM");
    expect((await w.exit).code, w.stderr()).toBe(0);
  }, 90_000);

  it("an outage (every backend gone, connections refused) while the worker recovers a turn: it is taken again and completes, not interrupted", async () => {
    const p = await setup("down-recovering");
    const run = startKeel(["run", "outage-b tools:1 pause:60000"], { cwd: p.dir, env: p.env });
    const id = await firstCallStarted(p.store);
    run.child.kill("SIGKILL");
    await run.exit;
    const w = await worker(p);
    // The worker runs the cut call again (a repeatable tool) and waits in it for the release.
    await until(() => lines(w).some((l) => l.type === "claimed"), "the worker to claim the turn");
    await untilAsync(
      async () => (await p.store.events(id)).filter((e) => e.type === "tool.started").length === 2,
      "the call to run again",
    );
    await proxy!.down();
    writeFileSync(p.release, "");
    await until(() => lines(w).some((l) => l.type === "store_unavailable"), "the worker to report the outage");
    await new Promise((r) => setTimeout(r, 1_500));
    await proxy!.up();
    await untilAsync(async () => terminals(await p.store.events(id)).length > 0, "the turn to end");
    const events = await p.store.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    const results = events.filter((e) => e.type === "message.appended" && e.message.role === "tool");
    expect(results).toHaveLength(1);
    await until(() => lines(w).some((l) => l.type === "finished"), "the worker to report the turn finished");
    const seen = lines(w);
    expect(seen.filter((l) => l.type === "failed")).toEqual([]);
    expect(seen.filter((l) => l.type === "finished")).toMatchObject([{ verdict: { status: "completed" } }]);
    expect(w.child.exitCode).toBeNull();
    w.child.kill("SIGTERM");
    expect((await w.exit).code, w.stderr()).toBe(0);
  }, 90_000);

  it("the database goes down while a keel run's tool runs: no further model call is paid for; keel run exits with KEEL_STORE_FAILED and the worker finishes the turn with one request per round", async () => {
    const p = await setup("down-mid-turn");
    const input = "outage-d tools:1 pause:60000";
    const round2 = () =>
      server.requests.filter((r) => {
        const sent = JSON.stringify(r.body?.messages ?? []);
        return sent.includes(input) && sent.includes('"tool_result"');
      });
    const run = startKeel(["run", input], { cwd: p.dir, env: p.env });
    const id = await firstCallStarted(p.store);
    // The database goes away while the tool runs; the tool then finishes, with nothing able to store its result.
    await proxy!.down();
    writeFileSync(p.release, "");
    const exit = await run.exit;
    expect(exit.code, run.stderr()).not.toBe(0);
    expect(exit.signal).toBeNull();
    // The round-2 request was never sent while the store could not record it (nor its answer printed).
    expect(round2()).toHaveLength(0);
    expect(run.stdout()).not.toContain("Done after");
    expect(run.stderr()).toContain("KEEL_STORE_FAILED");
    expect(run.stderr()).toMatch(/no model call was made/);
    expect(run.stderr()).toMatch(/keel worker/);
    await proxy!.up();
    // What was stored is kept: the user's message and the call; a worker finishes the turn.
    const before = await p.store.events(id);
    expect(before.some((e) => e.type === "message.appended" && e.message.role === "user")).toBe(true);
    expect(terminals(before)).toEqual([]);
    const w = startKeel(["worker", "--once", "--json"], {
      cwd: p.dir,
      env: { ...p.env, KEEL_WORKER_MIN_IDLE_MS: "0" },
    });
    expect((await w.exit).code, w.stderr()).toBe(0);
    const events = await p.store.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect(round2()).toHaveLength(1);
    // Every request of the turn is on the log: one model.responded per request served.
    const served = server.requests.filter((r) => JSON.stringify(r.body?.messages ?? []).includes(input));
    expect(events.filter((e) => e.type === "model.responded")).toHaveLength(served.length);
  }, 90_000);

  it("every backend killed again and again while the worker recovers a turn (no refusal): the turn completes, the worker goes on", async () => {
    const p = await setup("backends-killed");
    const run = startKeel(["run", "outage-c tools:2 pause:60000"], { cwd: p.dir, env: p.env });
    const id = await firstCallStarted(p.store);
    run.child.kill("SIGKILL");
    await run.exit;
    const w = await worker(p);
    await untilAsync(
      async () => (await p.store.events(id)).filter((e) => e.type === "tool.started").length === 2,
      "the call to run again",
    );
    // Released while every connection is dropped each 30 ms (writes, renewals and polls cut mid-query and
    // mid-transaction) for 1 s at least, and until the processes connected again 12 times and lost those too.
    writeFileSync(p.release, "");
    const connected = proxy!.accepted();
    const end = Date.now() + 40_000;
    const least = Date.now() + 1_000;
    while (proxy!.accepted() - connected < 12 || Date.now() < least) {
      if (Date.now() > end) throw new Error(`${proxy!.accepted() - connected} reconnections in 40 s: ${w.stdout()}`);
      proxy!.reset();
      await new Promise((r) => setTimeout(r, 30));
    }
    await untilAsync(async () => terminals(await p.store.events(id)).length > 0, "the turn to end");
    const events = await p.store.events(id);
    expect(terminals(events)).toEqual([`turn.completed:${id}/1`]);
    expect(events.filter((e) => e.type === "message.appended" && e.message.role === "tool")).toHaveLength(2);
    await until(() => lines(w).some((l) => l.type === "finished"), "the worker to report the turn finished");
    expect(lines(w).filter((l) => l.type === "failed")).toEqual([]);
    expect(w.child.exitCode, w.stderr()).toBeNull();
    w.child.kill("SIGTERM");
    expect((await w.exit).code, w.stderr()).toBe(0);
  }, 90_000);
});
