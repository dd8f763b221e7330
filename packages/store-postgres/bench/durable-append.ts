/**
 * The session log, SQLite (one WAL file) versus PostgreSQL (the local server), in one run:
 * p50/p99 of one durable append (fenced by the session's lease, as a turn appends) and whole
 * agent turns per second, with 1, 4 and 16 sessions served at once by one process.
 * Run with `pnpm bench store-postgres` (PostgreSQL at KEEL_TEST_PG_URL or 127.0.0.1:5432/test).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "../../agent/src/index.ts";
import { SqliteSessionStore } from "@keel/store-sqlite";
import type { LeasePrimitives } from "@keel/store-kit";
import type { KeelEvent, ModelProvider, SessionStore } from "@keel/kernel";
import { endSharedPools, PostgresSessionStore } from "../src/index.ts";
import { dropTestSchemas, testSchema, PG_URL } from "../test/support/pg.ts";

const APPENDS = Number(process.env.BENCH_APPENDS ?? 400);
const TURNS = Number(process.env.BENCH_TURNS ?? 96);
/** A model that answers every request at once, so a turn's cost is the kernel and its store. */
const answering: ModelProvider = {
  id: "bench:answer",
  async *stream() {
    yield {
      type: "response",
      message: { role: "assistant", content: [{ type: "text", text: "ok" }] },
      stopReason: "end_turn",
      usage: { inputTokens: 10, outputTokens: 1 },
    };
  },
};
const pct = (xs: number[], p: number) =>
  xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function appendLatency(store: SessionStore & LeasePrimitives, sessions: number): Promise<number[]> {
  const out: number[] = [];
  const per = Math.ceil(APPENDS / sessions);
  await Promise.all(
    Array.from({ length: sessions }, async (_, k) => {
      const id = `bench-${sessions}-${k}-${Date.now()}`;
      await store.createSession({ id, agent: "bench", createdAt: Date.now() });
      const owner = `bench-${k}`;
      await store.acquireLease(id, { owner, pid: process.pid, host: hostname(), ttlMs: 30_000 });
      for (let seq = 1; seq <= per; seq++) {
        const event = {
          type: "diagnostic",
          sessionId: id,
          seq,
          ts: Date.now(),
          turnId: null,
          level: "info",
          code: "bench",
          message: "x".repeat(300),
        } as unknown as KeelEvent;
        const t = performance.now();
        await store.append(event, { durable: true, lease: owner });
        out.push(performance.now() - t);
      }
    }),
  );
  return out;
}

async function turnsPerSecond(store: SessionStore, sessions: number): Promise<number> {
  const agent = await createAgent({ name: "bench", store, provider: answering });
  const per = Math.ceil(TURNS / sessions);
  const t = performance.now();
  await Promise.all(
    Array.from({ length: sessions }, async () => {
      const s = await agent.session();
      for (let i = 0; i < per; i++) await s.run(`question ${i}`);
      await s.close();
    }),
  );
  const secs = (performance.now() - t) / 1000;
  await agent.close();
  return (per * sessions) / secs;
}

const dir = mkdtempSync(join(tmpdir(), "keel-append-bench-"));
const open: Record<string, () => SessionStore> = {
  sqlite: () => new SqliteSessionStore({ path: join(dir, `s-${Math.random().toString(36).slice(2)}.sqlite`) }),
  postgres: () => new PostgresSessionStore({ url: PG_URL, schema: testSchema() }),
};
const rows: Array<{ backend: string; sessions: number; p50: number; p99: number; tps: number }> = [];
// Interleaved: each concurrency level runs on both backends before the next.
for (const sessions of [1, 4, 16]) {
  for (const backend of ["sqlite", "postgres"]) {
    const a = open[backend]!();
    const lat = await appendLatency(a as SessionStore & LeasePrimitives, sessions);
    await a.close();
    const b = open[backend]!();
    const tps = await turnsPerSecond(b, sessions);
    await b.close();
    rows.push({ backend, sessions, p50: pct(lat, 50), p99: pct(lat, 99), tps });
  }
}
console.log(
  `durable append (${APPENDS} per level, fenced by the lease) and turns/s (${TURNS} scripted turns per level), one process`,
);
console.log("backend    sessions  append p50 ms  append p99 ms  turns/s");
for (const r of rows)
  console.log(
    `${r.backend.padEnd(10)} ${String(r.sessions).padStart(8)}  ${r.p50.toFixed(3).padStart(13)}  ${r.p99.toFixed(3).padStart(13)}  ${r.tps.toFixed(1).padStart(7)}`,
  );
for (const sessions of [1, 4, 16]) {
  const s = rows.find((r) => r.backend === "sqlite" && r.sessions === sessions)!;
  const p = rows.find((r) => r.backend === "postgres" && r.sessions === sessions)!;
  console.log(
    `${sessions} sessions: PostgreSQL / SQLite append p50 ${(p.p50 / s.p50).toFixed(2)}x, turns/s ${(p.tps / s.tps).toFixed(2)}x`,
  );
}
rmSync(dir, { recursive: true, force: true });
await dropTestSchemas();
await endSharedPools();
