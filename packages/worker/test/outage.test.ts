/**
 * The worker through a PostgreSQL outage, in process (as the HTTP example runs it): a TCP proxy
 * between the worker and the shared test server refuses connections and drops the live ones
 * (the backends are gone), without stopping the server. The worker waits it out, says so once
 * each way, its health shows it, and the turn is finished when the store is back; a turn whose
 * recovery the outage cut is taken again and completes, never ends interrupted. Which errors
 * count as transient is checked against real failures of both stores.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAgent, defineTool, isTransientStoreError, KeelError } from "@keel/agent";
import type { KeelEvent } from "@keel/agent";
import { scriptedProvider } from "@keel/testkit";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../store-postgres/test/support/pg.ts";
import { startPgProxy, syntaxError, terminatedQueryError } from "../../store-postgres/test/support/proxy.ts";
import type { PgProxy } from "../../store-postgres/test/support/proxy.ts";
import { startWorker } from "../src/index.ts";
import type { WorkerEvent } from "../src/index.ts";

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

let proxy: PgProxy | undefined;
const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await Promise.resolve(c()).catch(() => undefined);
  await proxy?.close();
  proxy = undefined;
});

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

async function until(pred: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await Promise.resolve(pred()).catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const terminals = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

/** A session whose turn a "dead" agent left mid-tool on PostgreSQL (its store closed under it, as after a SIGKILL). */
async function leftMidTool(schema: string): Promise<string> {
  const started = gate();
  const release = gate();
  const look = defineTool({
    name: "look",
    description: "look",
    category: "info",
    execute: async () => {
      started.open();
      await release.opened;
      return "too late";
    },
  });
  const store = new PostgresSessionStore({ url: PG_URL, schema });
  const agent = await createAgent({
    provider: scriptedProvider([{ toolCalls: [{ id: "c1", name: "look" }] }]),
    store,
    tools: [look],
    lease: { ttlMs: 30_000 },
  });
  const s = await agent.session();
  const run = s.run("look it up").catch(() => undefined);
  await started.opened;
  await new Promise((r) => setTimeout(r, 100));
  // Nothing more reaches the log; its turn ends here with the store failure, and this process holds its lease no more.
  await store.close();
  release.open();
  await run;
  return s.id;
}

/** The agent of the in-process worker, on the store behind the proxy (lease TTL 30 s: a dead holder on this host is not waited for). */
async function workerAgent(schema: string, url: string, execute: () => Promise<string>) {
  const store = new PostgresSessionStore({ url, schema });
  const look = defineTool({ name: "look", description: "look", category: "info", repeatable: true, execute });
  const agent = await createAgent({
    provider: scriptedProvider([{ text: "done" }, { text: "done" }, { text: "done" }]),
    store,
    tools: [look],
    recovery: "auto",
    lease: { ttlMs: 30_000 },
  });
  closers.push(
    () => store.close(),
    () => agent.close(),
  );
  return agent;
}

describe("the in-process worker through a PostgreSQL outage", () => {
  it("waits out refused connections (health says so), then finishes the turn; one notice each way", async () => {
    const schema = testSchema();
    const id = await leftMidTool(schema);
    proxy = await startPgProxy();
    await proxy.down();
    const agent = await workerAgent(schema, proxy.url, async () => "looked");
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const w = startWorker({
      agent,
      signal: stop.signal,
      intervalMs: 50,
      maxBackoffMs: 400,
      onEvent: (e) => events.push(e),
    });
    let settled = false;
    void w.done.then(
      () => (settled = true),
      () => (settled = true),
    );
    closers.push(async () => (stop.abort(), await w.done.catch(() => undefined)));
    await until(() => w.health().consecutiveFailures >= 4, "the worker to retry 4 times");
    const h = w.health();
    expect(h.state).toBe("retrying");
    expect(h.lastPollAt).toBeUndefined();
    expect(h.backoffMs).toBeGreaterThan(0);
    expect(h.backoffMs).toBeLessThanOrEqual(400);
    expect(h.lastError?.message).toMatch(/ECONNREFUSED|not reachable/);
    expect(settled).toBe(false);
    await proxy.up();
    const direct = new PostgresSessionStore({ url: PG_URL, schema });
    closers.push(() => direct.close());
    await until(async () => terminals(await direct.events(id)).length > 0, "the turn to end");
    expect(terminals(await direct.events(id))).toEqual([`turn.completed:${id}/1`]);
    expect(events.filter((e) => e.type === "store_unavailable")).toHaveLength(1);
    await until(() => events.some((e) => e.type === "store_recovered"), "the recovery notice");
    expect(events.filter((e) => e.type === "store_recovered")).toHaveLength(1);
    await until(() => events.some((e) => e.type === "finished"), "the worker to report the turn finished");
    expect(events.filter((e) => e.type === "failed")).toEqual([]);
    expect(w.health()).toMatchObject({ state: "ok", consecutiveFailures: 0, backoffMs: 0 });
    expect(w.health().lastPollAt).toBeGreaterThan(h.failingSince!);
    stop.abort();
    await w.done;
    expect(w.health().state).toBe("stopped");
  });

  it("an outage that cuts the recovery mid-turn: the turn is taken again and completes, never ends interrupted", async () => {
    const schema = testSchema();
    const id = await leftMidTool(schema);
    proxy = await startPgProxy();
    const running = gate();
    const release = gate();
    let runs = 0;
    const agent = await workerAgent(schema, proxy.url, async () => {
      if (++runs === 1) {
        running.open();
        await release.opened;
      }
      return "looked";
    });
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const w = startWorker({
      agent,
      signal: stop.signal,
      intervalMs: 50,
      maxBackoffMs: 400,
      onEvent: (e) => events.push(e),
    });
    closers.push(async () => (stop.abort(), await w.done.catch(() => undefined)));
    await running.opened;
    // Every backend is gone and new connections are refused while the recovered call returns and its result is written.
    await proxy.down();
    release.open();
    await until(() => w.health().state === "retrying", "the worker to see the outage");
    await new Promise((r) => setTimeout(r, 500));
    await proxy.up();
    const direct = new PostgresSessionStore({ url: PG_URL, schema });
    closers.push(() => direct.close());
    await until(async () => terminals(await direct.events(id)).length > 0, "the turn to end");
    const log = await direct.events(id);
    expect(terminals(log)).toEqual([`turn.completed:${id}/1`]);
    expect(log.filter((e) => e.type === "turn.interrupted")).toEqual([]);
    const results = log.filter((e) => e.type === "message.appended" && e.message.role === "tool");
    expect(results).toHaveLength(1);
    await until(() => events.some((e) => e.type === "finished"), "the worker to report the turn finished");
    expect(events.filter((e) => e.type === "failed")).toEqual([]);
    expect(events.filter((e) => e.type === "finished")).toMatchObject([{ verdict: { status: "completed" } }]);
    stop.abort();
    await w.done;
  });
});

describe("the turn's end is stored but the outage loses the answer", () => {
  it("the worker reports the turn finished from the log, once, and takes it no more", async () => {
    const schema = testSchema();
    const id = await leftMidTool(schema);
    const real = new PostgresSessionStore({ url: PG_URL, schema });
    let lost = 0;
    // The terminal event reaches the database; the connection then drops before its answer comes back.
    const loseAnswer =
      <A extends unknown[]>(write: (...a: A) => unknown) =>
      async (...a: A) => {
        await write.apply(real, a);
        const batch = (Array.isArray(a[0]) ? a[0] : [a[0]]) as KeelEvent[];
        if (!lost && batch.some((e) => e.type === "turn.completed")) {
          lost++;
          throw Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
        }
      };
    const store = new Proxy(real, {
      get(target, key, receiver) {
        if (key === "append") return loseAnswer(target.append);
        if (key === "appendMany") return loseAnswer(target.appendMany!);
        const v = Reflect.get(target, key, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const look = defineTool({
      name: "look",
      description: "look",
      category: "info",
      repeatable: true,
      execute: async () => "looked",
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "done" }, { text: "done" }]),
      store,
      tools: [look],
      recovery: "auto",
      lease: { ttlMs: 30_000 },
    });
    closers.push(
      () => real.close(),
      () => agent.close(),
    );
    const events: WorkerEvent[] = [];
    const stop = new AbortController();
    const w = startWorker({
      agent,
      signal: stop.signal,
      intervalMs: 50,
      maxBackoffMs: 200,
      onEvent: (e) => events.push(e),
    });
    closers.push(async () => (stop.abort(), await w.done.catch(() => undefined)));
    await until(() => events.some((e) => e.type === "finished"), "the worker to report the turn finished");
    expect(lost).toBe(1);
    expect(terminals(await real.events(id))).toEqual([`turn.completed:${id}/1`]);
    await new Promise((r) => setTimeout(r, 200));
    expect(events.filter((e) => e.type === "finished")).toMatchObject([
      { sessionId: id, turnId: `${id}/1`, verdict: { status: "completed" } },
    ]);
    expect(events.filter((e) => e.type === "failed")).toEqual([]);
    expect(events.filter((e) => e.type === "claimed")).toHaveLength(1);
  });
});

describe("one pass (a cron job) while the store is down", () => {
  it("retries within maxBackoffMs, then rejects with the store's error (exit 1), not hanging and not reporting a session failed", async () => {
    proxy = await startPgProxy();
    await proxy.down();
    const agent = await workerAgent(testSchema(), proxy.url, async () => "looked");
    const events: WorkerEvent[] = [];
    const w = startWorker({ agent, once: true, intervalMs: 20, maxBackoffMs: 300, onEvent: (e) => events.push(e) });
    const err = await w.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KeelError);
    expect(isTransientStoreError(err)).toBe(true);
    expect(w.health().consecutiveFailures).toBeGreaterThan(1);
    expect(w.health().state).toBe("stopped");
    expect(events.map((e) => e.type)).toEqual(["store_unavailable"]);
  });
});

describe("isTransientStoreError against real failures", () => {
  it("PostgreSQL: refused and terminated connections are transient; a missing database, an unknown host and bad SQL are not", async () => {
    proxy = await startPgProxy();
    await proxy.down();
    const refused = new PostgresSessionStore({ url: proxy.url, schema: testSchema() });
    const e1 = await Promise.resolve(refused.listSessions()).catch((e: unknown) => e);
    await refused.close();
    expect(e1).toBeInstanceOf(KeelError);
    expect(isTransientStoreError(e1)).toBe(true);

    const e2 = await terminatedQueryError();
    expect((e2 as { code?: string }).code).toBe("57P01");
    expect(isTransientStoreError(e2)).toBe(true);

    const missing = new URL(PG_URL);
    missing.pathname = "/keel_no_such_database";
    const nodb = new PostgresSessionStore({ url: missing.toString(), schema: testSchema() });
    const e3 = await Promise.resolve(nodb.listSessions()).catch((e: unknown) => e);
    await nodb.close();
    expect(e3).toBeInstanceOf(KeelError);
    expect(isTransientStoreError(e3)).toBe(false);

    const nohost = new PostgresSessionStore({
      url: "postgres://postgres@keel-no-such-host.invalid/test",
      schema: testSchema(),
    });
    const e4 = await Promise.resolve(nohost.listSessions()).catch((e: unknown) => e);
    await nohost.close();
    expect(isTransientStoreError(e4)).toBe(false);

    const e5 = await syntaxError();
    expect(isTransientStoreError(e5)).toBe(false);
  });

  it("SQLite: a write lock held past the busy timeout is transient; a file that is not a database is not", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-transient-"));
    closers.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const db = path.join(dir, "sessions.sqlite");
    const store = new SqliteSessionStore({ path: db, busyTimeoutMs: 50 });
    closers.push(() => store.close());
    store.createSession({ id: "a", agent: "x", createdAt: 1 });
    const locker = new DatabaseSync(db);
    locker.exec("BEGIN IMMEDIATE");
    let busy: unknown;
    try {
      store.createSession({ id: "b", agent: "x", createdAt: 2 });
    } catch (err) {
      busy = err;
    } finally {
      locker.exec("ROLLBACK");
      locker.close();
    }
    expect(busy).toBeInstanceOf(KeelError);
    expect(isTransientStoreError(busy)).toBe(true);

    const junk = path.join(dir, "junk.sqlite");
    fs.writeFileSync(junk, "not a database, ".repeat(512));
    let corrupt: unknown;
    try {
      new SqliteSessionStore({ path: junk }).listSessions();
    } catch (err) {
      corrupt = err;
    }
    expect(corrupt).toBeInstanceOf(KeelError);
    expect(isTransientStoreError(corrupt)).toBe(false);
    expect(
      isTransientStoreError(
        new Proxy(
          {},
          {
            get: () => {
              throw new Error("hostile");
            },
          },
        ),
      ),
    ).toBe(false);
  });
});
