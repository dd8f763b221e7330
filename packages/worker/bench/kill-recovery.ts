/**
 * Runs that finish themselves, under load (issue 32 goal 5): 3 instances (server + worker
 * each) on one store serve SESSIONS concurrent sessions, each turn ROUNDS rounds of a slow
 * tool against the wire server; a random instance is SIGKILLed at random moments KILLS times
 * (and started again). Reports, for the turns a kill cut, the time from the kill to the turn's
 * end (p50, p99), tool runs beyond one per call (repeatable tools only), and the throughput
 * against a run without kills. `pnpm bench kill-recovery [--pg]`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { PostgresSessionStore } from "@keel/store-postgres";
import { SqliteSessionStore } from "@keel/store-sqlite";
import type { KeelEvent, SessionStore } from "@keel/kernel";
import { startWireServer } from "@keel/wire-server";
import type { RecordedRequest } from "@keel/wire-server";

const SESSIONS = Number(process.env.SESSIONS ?? 50);
const KILLS = Number(process.env.KILLS ?? 20);
const LEASE_TTL_MS = 2_000;
const pg = process.argv.includes("--pg");
const PG_URL = process.env.KEEL_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
const INSTANCE = fileURLToPath(new URL("./instance.ts", import.meta.url));

/** Stateless model: `slow` until ROUNDS results followed the user's text, then an answer. */
function script(r: RecordedRequest) {
  const msgs = (r.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  let results = 0;
  let rounds = 3;
  for (let i = msgs.length - 1; i >= 0; i--) {
    const c = msgs[i]!.content;
    const blocks = Array.isArray(c)
      ? (c as Array<{ type: string; text?: string }>)
      : [{ type: "text", text: String(c) }];
    const text = blocks.find((b) => b.type === "text")?.text;
    if (msgs[i]!.role === "user" && text) {
      rounds = Number(/rounds:(\d+)/.exec(text)?.[1] ?? 3);
      break;
    }
    results += blocks.filter((b) => b.type === "tool_result").length;
  }
  if (results < rounds)
    return { toolCalls: [{ id: `toolu_${r.index}`, name: "slow", args: {} }], delayMs: 5, api: "anthropic" as const };
  return { text: `done after ${results}`, chunks: 3, delayMs: 5, api: "anthropic" as const };
}

async function trial(
  kills: number,
): Promise<{ ms: number; tail: number; cut: number[]; extraRuns: number; unpaired: number; done: number }> {
  const dir = mkdtempSync(join(tmpdir(), "keel-bench-recovery-"));
  const schema = `bench_recovery_${process.pid}_${kills}`;
  const wire = await startWireServer({ onEmpty: script });
  const env = {
    ...process.env,
    BENCH_WIRE: wire.anthropicBaseURL,
    BENCH_DB: join(dir, "sessions.sqlite"),
    ...(pg ? { BENCH_PG_URL: PG_URL, BENCH_PG_SCHEMA: schema } : {}),
    LEASE_TTL_MS: String(LEASE_TTL_MS),
  };
  const ended = new Map<string, number>();
  /** RUN lines an instance has not begun yet, by label: a client sends them again elsewhere if it dies. */
  const unacked = new Map<string, number>();
  const start = (): { proc: ChildProcess; ready: Promise<void> } => {
    const proc = spawn(process.execPath, [INSTANCE], { env, stdio: ["pipe", "pipe", "inherit"] });
    let ready!: () => void;
    const r = new Promise<void>((res) => (ready = res));
    createInterface({ input: proc.stdout! }).on("line", (l) => {
      const [k, id, a, b] = l.split(" ");
      if (k === "READY") ready();
      if (k === "STARTED") unacked.delete(id!);
      if (k === "DONE") ended.set(id!, Number(b));
      if (k === "RECOVERED") ended.set(id!, Number(a));
    });
    return { proc, ready: r };
  };
  const instances = [start(), start(), start()];
  await Promise.all(instances.map((i) => i.ready));
  const t0 = Date.now();
  for (let i = 0; i < SESSIONS; i++) {
    unacked.set(`s${i}`, i % 3);
    instances[i % 3]!.proc.stdin!.write(`RUN s${i}\n`);
  }
  const killAt: Array<{ at: number }> = [];
  for (let k = 0; k < kills; k++) {
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    const n = Math.floor(Math.random() * 3);
    instances[n]!.proc.kill("SIGKILL");
    killAt.push({ at: Date.now() });
    instances[n] = start();
    await instances[n]!.ready;
    // What the dead instance never began, the client sends again (to its replacement).
    for (const [label, at] of unacked) if (at === n) instances[n]!.proc.stdin!.write(`RUN ${label}\n`);
  }
  const store: SessionStore = pg
    ? new PostgresSessionStore({ url: PG_URL, schema })
    : new SqliteSessionStore({ path: env.BENCH_DB, readOnly: true });
  // Every session created must end; the sessions are read from the store, not from what was said.
  // A session whose instance died before its turn began (no turn.started) was never accepted: not counted.
  let seen = -1;
  let since = Date.now();
  for (;;) {
    let open = 0;
    let started = 0;
    for (const s of await store.listSessions()) {
      const events = await store.events(s.id);
      if (!events.some((e) => e.type === "turn.started")) continue;
      started++;
      if (!events.some((e) => e.type === "turn.completed")) open++;
    }
    if (started !== seen) (seen = started), (since = Date.now());
    // Done: nothing open, and no new turn began for a second (every RUN sent was taken or lost with its instance).
    if (open === 0 && started > 0 && (started >= SESSIONS || Date.now() - since > 1_000)) break;
    if (Date.now() - t0 > 600_000) throw new Error(`not finished: ${open} turns still open`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const ms = Date.now() - t0;
  const tail = killAt.length ? Date.now() - killAt.at(-1)!.at : 0;
  const cut: number[] = [];
  let extraRuns = 0;
  let unpaired = 0;
  const labels = new Set<string>();
  for (const s of await store.listSessions()) {
    const events: KeelEvent[] = await store.events(s.id);
    const resumed = events.find((e) => e.type === "turn.resumed");
    const end = events.find((e) => e.type === "turn.completed");
    const input = events.find((e) => e.type === "turn.started");
    // A request sent again by its client after its instance died may have begun twice: counted once.
    if (end && input?.type === "turn.started") labels.add(input.input.split(" ")[0]!);
    if (resumed?.type === "turn.resumed" && resumed.recovered && end) {
      // The kill that cut it: the first after the dead process's last write to the turn.
      const lastWrite = Math.max(
        ...events.filter((e) => e.seq < resumed.seq && e.turnId === resumed.turnId).map((e) => e.ts),
      );
      const kill = killAt.find((k) => k.at >= lastWrite && k.at <= resumed.ts);
      if (kill) cut.push(end.ts - kill.at);
    }
    // Pairing: every call of the log has exactly one result.
    const results = new Map<string, number>();
    for (const e of events) {
      if (e.type !== "message.appended") continue;
      if (e.message.role === "assistant")
        for (const b of e.message.content) if (b.type === "tool_call") results.set(b.id, results.get(b.id) ?? 0);
      if (e.message.role === "tool") results.set(e.message.toolCallId, (results.get(e.message.toolCallId) ?? 0) + 1);
    }
    unpaired += [...results.values()].filter((n) => n !== 1).length;
    const started = events.filter((e) => e.type === "tool.started").length;
    const calls = new Set(events.flatMap((e) => (e.type === "tool.started" ? [e.callId] : []))).size;
    extraRuns += started - calls;
  }
  for (const i of instances) i.proc.kill("SIGKILL");
  await store.close();
  await wire.close();
  rmSync(dir, { recursive: true, force: true });
  return { ms, tail, cut, extraRuns, unpaired, done: labels.size };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : Number.NaN;
};
const base = await trial(0);
const killed = await trial(KILLS);
console.log(
  `store: ${pg ? "PostgreSQL" : "SQLite (one file, 3 processes)"}; ${SESSIONS} sessions sent, 3 instances, lease TTL ${LEASE_TTL_MS} ms`,
);
console.log(
  `no kills: ${base.done} turns completed in ${base.ms} ms (${((base.done / base.ms) * 1000).toFixed(1)} turns/s)`,
);
console.log(
  `${KILLS} kills: ${killed.done} turns completed in ${killed.ms} ms (${((killed.done / killed.ms) * 1000).toFixed(1)} turns/s, ${(100 * (1 - killed.done / killed.ms / (base.done / base.ms))).toFixed(0)}% throughput lost, most of it the kill schedule itself; all done ${killed.tail} ms after the last kill)`,
);
console.log(
  `turns cut and recovered: ${killed.cut.length}; kill to finish p50 ${pct(killed.cut, 50)} ms, p99 ${pct(killed.cut, 99)} ms (goal: p99 within 2 × TTL + the cut call's timeout); repeat runs of repeatable calls: ${killed.extraRuns}; calls without exactly one result: ${killed.unpaired}`,
);
