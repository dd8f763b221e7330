/**
 * A server killed mid-turn (SIGKILL, a crashed pod): another server's worker finishes the turn
 * with no user action, and the client rejoins the stream there and gets the verdict. Two real
 * `node server.ts` processes on one store (a SQLite file, then PostgreSQL with their own
 * homes), the offline model. The cut call is a deploy (exec, not safe to repeat): it never
 * runs twice; the model reads that it was interrupted.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { frames } from "./sse-frames.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";

const SERVER = fileURLToPath(new URL("./server.ts", import.meta.url));
const procs: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const p of procs.splice(0)) p.kill("SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
beforeAll(requirePostgres);
afterAll(dropTestSchemas);

/** A server process; resolves with its URL once it listens. */
async function server(home: string, env: Record<string, string> = {}): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [SERVER], {
    env: { ...process.env, KEEL_HOME: home, PORT: "0", DEPLOY_STEP_MS: "2000", LEASE_TTL_MS: "1000", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  procs.push(proc);
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.once("exit", (code) => reject(new Error(`server exited (${code}) before listening: ${out}`)));
  });
  return { url, proc };
}

const post = (url: string, body?: unknown) =>
  fetch(url, { method: "POST", ...(body ? { body: JSON.stringify(body) } : {}) });

describe.each([
  { store: "SQLite", pg: false },
  { store: "PostgreSQL", pg: true },
])("a server killed mid-deploy ($store)", ({ pg }) => {
  it("another server's worker finishes the turn; the client rejoins there and gets the verdict; the deploy never ran twice", async () => {
    const root = mkdtempSync(join(tmpdir(), "keel-http-recovery-"));
    dirs.push(root);
    const schema = testSchema();
    const env: Record<string, string> = pg ? { KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema } : {};
    // One home on SQLite (the store is its file); two homes on PostgreSQL (the store is the database).
    const [homeA, homeB] = pg ? [join(root, "a"), join(root, "b")] : [join(root, "home"), join(root, "home")];
    const a = await server(homeA, env);
    const b = await server(homeB, env);
    const { id } = (await (await post(`${a.url}/sessions`)).json()) as { id: string };
    const paused = await frames(await post(`${a.url}/sessions/${id}/turns`, { input: "please deploy v1.4.2" }));
    expect(paused.at(-1)).toMatchObject({ type: "verdict", result: { verdict: { status: "paused" } } });
    const pending = (await (await fetch(`${a.url}/sessions/${id}/approvals`)).json()) as {
      pending: Array<{ callId: string }>;
    };
    const callId = pending.pending[0]!.callId;
    // Approved: the deploy starts on A; A dies in the middle of it.
    const seen = await frames(
      await post(`${a.url}/sessions/${id}/approvals`, { answers: [{ callId, approve: true }] }),
      (f) => f.type === "tool.progress",
    );
    a.proc.kill("SIGKILL");
    await new Promise((r) => a.proc.once("exit", r));
    const last = seen.findLast((f) => !f.id.includes("."))!.id;
    // The client comes back, on B, with the last stored id it saw.
    const rejoined = await frames(
      await fetch(`${b.url}/sessions/${id}/stream`, { headers: { "last-event-id": last } }),
    );
    const verdict = rejoined.at(-1)!;
    expect(verdict).toMatchObject({ type: "verdict", result: { verdict: { status: "completed" } } });
    expect(verdict.type === "verdict" && verdict.result.text).toContain("not marked safe to repeat");
    // The cut deploy never finished and never ran again: nothing in any deployments.log.
    for (const home of new Set([homeA, homeB])) expect(existsSync(join(home, "deployments.log"))).toBe(false);
    const store = pg
      ? new PostgresSessionStore({ url: PG_URL, schema })
      : new SqliteSessionStore({ path: join(homeA, "sessions.sqlite"), readOnly: true });
    try {
      const events: KeelEvent[] = await store.events(id);
      const resumed = events.filter((e) => e.type === "turn.resumed");
      expect(resumed.at(-1)).toMatchObject({ recovered: { cut: [callId] } });
      const results = events.filter((e) => e.type === "message.appended" && e.message.role === "tool");
      expect(results).toHaveLength(1);
      expect(events.filter((e) => e.type === "turn.completed").map((e) => e.turnId)).toEqual([`${id}/1`]);
      expect(events.filter((e) => e.type === "tool.started" && e.name === "deploy")).toHaveLength(1);
      // What the rejoin sent matches the log: every stored id after the last one seen, once.
      const ids = rejoined.map((f) => Number(f.id)).filter((n) => Number.isInteger(n));
      expect(ids).toEqual([...ids].sort((x, y) => x - y));
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids[0]).toBeGreaterThan(Number(last));
    } finally {
      await store.close();
    }
  });
});
