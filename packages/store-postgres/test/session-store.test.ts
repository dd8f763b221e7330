/**
 * What only the PostgreSQL store has to show (the shared contract runs in the kernel's
 * session-store and lease suites): migrations across instances, an unreachable server,
 * redaction in the raw rows, and two processes sharing one session through a real agent.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { PostgresSessionStore, SESSION_MIGRATIONS } from "../src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "./support/pg.ts";

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}

const errorOf = async (f: () => Promise<unknown>) =>
  f().then(
    () => undefined,
    (e: unknown) => e as { code?: string; message: string },
  );

describe("PostgresSessionStore", () => {
  it("four instances starting together on a new schema migrate it once; reopening changes nothing", async () => {
    const schema = testSchema();
    const stores = Array.from({ length: 4 }, () => new PostgresSessionStore({ url: PG_URL, schema }));
    await Promise.all(stores.map((s) => s.ready()));
    expect(await sql(`SELECT component, version FROM "${schema}".keel_migrations`)).toEqual([
      { component: "sessions", version: SESSION_MIGRATIONS.length },
    ]);
    await stores[0]!.createSession({ id: "s", agent: "a", createdAt: 1 });
    expect(await stores[3]!.getSession("s")).toMatchObject({ id: "s" });
    await Promise.all(stores.map((s) => s.close()));
    const again = new PostgresSessionStore({ url: PG_URL, schema });
    expect((await again.listSessions()).map((s) => s.id)).toEqual(["s"]);
    await again.close();
  });

  it("refuses tables written by a newer Keel, changing nothing", async () => {
    const schema = testSchema();
    const first = new PostgresSessionStore({ url: PG_URL, schema });
    await first.ready();
    await first.close();
    await sql(`UPDATE "${schema}".keel_migrations SET version = 99 WHERE component = 'sessions'`);
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    const err = await errorOf(() => store.listSessions());
    expect(err?.code).toBe("KEEL_STORE_FAILED");
    expect(err?.message).toContain(
      `version 99 but this Keel only knows up to ${SESSION_MIGRATIONS.length}; upgrade Keel`,
    );
    await store.close();
  });

  it("an unreachable server is KEEL_STORE_FAILED saying so, and the URL's password is never shown", async () => {
    const store = new PostgresSessionStore({ url: "postgres://keel:hunter2-secret@127.0.0.1:1/nowhere" });
    const err = await errorOf(() => store.createSession({ id: "s", agent: "a", createdAt: 1 }));
    expect(err?.code).toBe("KEEL_STORE_FAILED");
    expect(err?.message).toContain(
      "the server is not reachable (ECONNREFUSED); start PostgreSQL or fix the connection URL (KEEL_DATABASE_URL)",
    );
    expect(err?.message).toContain("postgres://keel:***@127.0.0.1:1/nowhere");
    expect(err?.message).not.toContain("hunter2");
    await store.close();
  });

  it("a secret in any string of an event is redacted in the stored row", async () => {
    const schema = testSchema();
    const store = new PostgresSessionStore({ url: PG_URL, schema });
    await store.createSession({ id: "s", agent: "a", createdAt: 1 });
    const key = `sk-ant-api03-${"Zx9Qw7Er5Ty3Ui1Op0As8Df6Gh4Jk2Lz".repeat(3)}-AAAAAA`;
    await store.append(
      {
        type: "message.appended",
        message: { role: "user", content: [{ type: "text", text: `my key is ${key}` }] },
        sessionId: "s",
        seq: 1,
        ts: 5,
        turnId: "t",
      } as KeelEvent,
      { durable: true },
    );
    const raw = await sql<{ data: string }>(`SELECT data FROM "${schema}".keel_events`);
    expect(raw[0]!.data).not.toContain("Zx9Qw7Er5Ty3");
    expect(raw[0]!.data).toContain("[REDACTED:");
    await store.close();
  });
});

describe("two processes, one session, one database", () => {
  const child = fileURLToPath(new URL("./support/agent-child.ts", import.meta.url));
  const run = (args: string[], killAt?: string) =>
    new Promise<{ out: string; err: string; code: number | null; signal: string | null }>((resolve) => {
      const p = spawn(process.execPath, [child, ...args], {
        env: { ...process.env, KEEL_TEST_PG_URL: PG_URL },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      p.stdout.on("data", (d: Buffer) => {
        out += d;
        if (killAt && out.includes(killAt)) p.kill("SIGKILL");
      });
      p.stderr.on("data", (d: Buffer) => (err += d));
      p.on("exit", (code, signal) => resolve({ out, err, code, signal }));
    });

  it("SIGKILLed mid-turn: the next process marks the turn interrupted and goes on, with every user message stored once", async () => {
    const schema = testSchema();
    const held = await run(["hang", schema, "sess-1"], "STREAMING");
    expect(held.signal).toBe("SIGKILL");
    // The killed holder's lease row is still there; same host and its pid is gone, so it is taken over at once.
    const next = await run(["turn", schema, "sess-1", "second question"]);
    expect(next.err).toBe("");
    expect(next.out).toContain("RESULT completed");
    const events = await sql<{ type: string; data: string }>(
      `SELECT type, data FROM "${schema}".keel_events WHERE session_id = 'sess-1' ORDER BY seq`,
    );
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === "turn.interrupted")).toHaveLength(1);
    expect(types.filter((t) => t === "turn.completed")).toHaveLength(1);
    const users = events
      .filter((e) => e.type === "message.appended" && JSON.parse(e.data).message.role === "user")
      .map((e) => JSON.parse(e.data).message.content[0].text);
    expect(users).toEqual(["first question", "second question"]);
  }, 60_000);

  it("while one process holds the session, another is refused before any provider call", async () => {
    const schema = testSchema();
    const holder = spawn(process.execPath, [child, "hang", schema, "sess-2"], {
      env: { ...process.env, KEEL_TEST_PG_URL: PG_URL },
      stdio: ["ignore", "pipe", "pipe"],
    });
    await new Promise<void>((resolve) =>
      holder.stdout.on("data", (d: Buffer) => String(d).includes("STREAMING") && resolve()),
    );
    const second = await run(["turn", schema, "sess-2", "me too"]);
    holder.kill("SIGKILL");
    expect(second.out).toContain("BUSY KEEL_SESSION_BUSY");
    expect(second.out).toContain(`process ${holder.pid}`);
    expect(second.out).toContain("PROVIDER_CALLS 0");
  }, 60_000);
});
