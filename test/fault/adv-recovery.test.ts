/**
 * Adversarial recovery, from outside: real `keel run` / `keel worker` processes against the wire
 * server, SIGKILLed, SIGSTOPped and SIGCONTed at the worst moments. What must hold whatever the
 * kill: every turn finishes with no user action; a tool not safe to repeat (`charge`, `deploy`:
 * category "exec", each run appends its call id to a ledger) never runs twice for one call;
 * every call has exactly one result; what is sent to the model pairs; a worker that lost its
 * lease (stalled past it) writes nothing more; a turn paused for approval waits for its answer;
 * a schema migration cut by a kill leaves the file at the old or the new version, never between;
 * a secret in a killed turn's input never reaches the log, and its text stays whole.
 */
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import { seededRandom } from "../../packages/testkit/src/index.ts";
import { defaultSessionDbPath } from "../../packages/store-sqlite/src/index.ts";
import {
  faultConfig,
  pairingProblems,
  project,
  runKeel,
  startKeel,
  storedEvents,
  storedSessions,
  storedUserTexts,
  until,
  useSharedWire,
  wireEnv,
} from "./support/storage.ts";
import type { KeelProc } from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-adv-recovery-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

/** A tool with an effect (its call id appended to $FAULT_LEDGER when it starts), then waiting for the release file. */
const effectTool = (name: string) => `{
    name: "${name}",
    description: "An effect not safe to repeat; waits for the release.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "exec",
    execute: (args, ctx) => {
      appendFileSync(process.env.FAULT_LEDGER, "${name} " + ctx.callId + " " + process.pid + "\\n");
      return new Promise((resolve) => {
        const poll = setInterval(() => { if (existsSync(process.env.FAULT_PAUSE_RELEASE)) { clearInterval(poll); resolve("${name} done " + ctx.callId); } }, 25);
      });
    },
  }`;

/** The fault config with recovery on, `charge` and `deploy` (deploy asks for approval), and the lease TTL given. */
function advConfig(ttlMs: number): string {
  const review = `plugins: [{
    name: "review",
    version: "1.0.0",
    setup(ctx) {
      ctx.on("tool.pre_call", (e) => e.call.name === "deploy" ? { kind: "tool_decision", decision: "ask", reason: "deploys are reviewed" } : undefined);
    },
  }],`;
  return faultConfig(`recovery: "auto",\n  lease: { ttlMs: ${ttlMs} },\n  ${review}`)
    .replace('import { existsSync } from "node:fs";', 'import { appendFileSync, existsSync } from "node:fs";')
    .replace("tools: [{", `tools: [${effectTool("charge")}, ${effectTool("deploy")}, {`);
}

function setup(name: string, ttlMs = 2000) {
  const p = project(root, name, advConfig(ttlMs));
  const release = join(p.dir, "release");
  const ledger = join(p.dir, "ledger.log");
  writeFileSync(ledger, "");
  const env = wireEnv(p.home, server.anthropicBaseURL, {
    FAULT_PAUSE_RELEASE: release,
    FAULT_LEDGER: ledger,
    KEEL_WORKER_MIN_IDLE_MS: "0",
    KEEL_WORKER_INTERVAL_MS: "100",
    KEEL_EXIT_GRACE_MS: "500",
  });
  /** The effects run so far: `tool callId pid` per line. */
  const effects = () =>
    readFileSync(ledger, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => {
        const [tool, callId, pid] = l.split(" ");
        return { tool: tool!, callId: callId!, pid: Number(pid) };
      });
  return { ...p, env, release, effects, tag: name };
}

const requestsWith = (needle: string) =>
  server.requests.filter((r) => JSON.stringify(r.body?.messages ?? []).includes(needle));

/** Each tool call of the log with its results' texts. */
function resultsOf(events: readonly KeelEvent[]): Map<string, string[]> {
  const n = new Map<string, string[]>();
  for (const e of events) {
    if (e.type !== "message.appended") continue;
    const m = e.message;
    if (m.role === "assistant") for (const b of m.content) if (b.type === "tool_call") n.set(b.id, n.get(b.id) ?? []);
    if (m.role === "tool")
      n.set(m.toolCallId, [
        ...(n.get(m.toolCallId) ?? []),
        m.content.map((b) => (b.type === "text" ? b.text : "")).join(""),
      ]);
  }
  return n;
}

const terminals = (events: readonly KeelEvent[]) =>
  events.filter((e) => e.type.startsWith("turn.") && "verdict" in e).map((e) => `${e.type}:${e.turnId}`);

/** Stored events of the home's only session, or [] while keel run is still creating it. */
function soleSession(home: string): { id: string; events: KeelEvent[] } | undefined {
  try {
    const [id] = storedSessions(home);
    return id ? { id, events: storedEvents(home, id) } : undefined;
  } catch {
    return undefined; // the database is being created
  }
}

async function killed(proc: KeelProc): Promise<void> {
  proc.child.kill("SIGKILL");
  expect((await proc.exit).signal).toBe("SIGKILL");
}

/**
 * The promises every scenario checks on a finished session: one terminal (completed) under the
 * first turn's id, one result per call, no effect run twice for a call, an effect whose result
 * says it finished ran exactly once, and every request the model got for `tag` pairs.
 */
function checkFinished(
  p: ReturnType<typeof setup>,
  id: string,
): { events: KeelEvent[]; results: Map<string, string[]> } {
  const events = storedEvents(p.home, id);
  // A turn paused for approval ends paused first, then (answered) completed: one completion, nothing after it.
  const ends = terminals(events);
  expect(ends.filter((x) => x !== `turn.paused:${id}/1`)).toEqual([`turn.completed:${id}/1`]);
  expect(ends.at(-1)).toBe(`turn.completed:${id}/1`);
  const results = resultsOf(events);
  for (const [callId, texts] of results) expect(texts, `results of ${callId}`).toHaveLength(1);
  const ran = p.effects().map((e) => e.callId);
  expect(new Set(ran).size, `effects ${ran.join(", ")}`).toBe(ran.length);
  for (const [callId, [text]] of results)
    if (/^(charge|deploy) done/.test(text ?? "")) expect(ran, `${callId} finished`).toContain(callId);
  for (const callId of ran) expect(results.has(callId), `effect ${callId} is a call of the log`).toBe(true);
  const reqs = requestsWith(p.tag);
  expect(reqs.length).toBeGreaterThan(0);
  for (const r of reqs) expect(pairingProblems(r.body as never)).toEqual([]);
  return { events, results };
}

const jsonLines = (out: string) =>
  out
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { type: string; sessionId?: string; reason?: string });

describe("adversarial recovery: keel worker itself is killed, stalled and cut", () => {
  it("keel worker SIGKILLed again and again while it runs the recovered turn (mid-tool and mid-model call): the effect never runs twice, the last worker completes the turn", async () => {
    const p = setup("adv-worker-kills");
    const rand = seededRandom(4242);
    const proc = startKeel(["run", `${p.tag} tools:6 tool:charge delay:150`], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 1, "the first charge to start", 40_000, 20);
    await killed(proc);
    let workerKills = 0;
    for (let k = 0; k < 5; k++) {
      const before = p.effects().length;
      const w = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
      // Killed either once it runs a new charge, or at a seeded moment after it claimed the turn.
      const early = rand() < 0.5;
      await until(
        () => (early ? w.stdout().includes('"claimed"') : p.effects().length > before) || w.child.exitCode !== null,
        "the worker to claim the turn or start a charge",
        40_000,
        10,
      );
      if (early) await new Promise((r) => setTimeout(r, Math.floor(rand() * 400)));
      await killed(w);
      workerKills++;
    }
    expect(workerKills).toBe(5);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const id = storedSessions(p.home)[0]!;
    const { events } = checkFinished(p, id);
    // Each worker that got as far as writing said it resumed the turn; the turn kept its user input.
    expect(events.filter((e) => e.type === "turn.started")).toHaveLength(1);
    expect(storedUserTexts(events)).toEqual([`${p.tag} tools:6 tool:charge delay:150`]);
    expect(jsonLines(r.stdout).map((l) => l.type)).toEqual(["claimed", "finished", "report"]);
  }, 120_000);

  it("a worker SIGSTOPped mid-tool past its lease: a second one takes the turn over and completes it; the first, continued, writes nothing more", async () => {
    const p = setup("adv-stalled", 1000);
    const proc = startKeel(["run", `${p.tag} tools:2 tool:charge`], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 1, "the first charge to start", 40_000, 20);
    await killed(proc);
    const w1 = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 2, "the first worker to start the next charge", 40_000, 10);
    w1.child.kill("SIGSTOP");
    const id = storedSessions(p.home)[0]!;
    const w2 = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
    await until(() => terminals(storedEvents(p.home, id)).length > 0, "the second worker to end the turn", 60_000, 50);
    const atStop = storedEvents(p.home, id);
    // The stalled worker's charge now returns: its result must be fenced off.
    writeFileSync(p.release, "");
    w1.child.kill("SIGCONT");
    await until(
      () => w1.stdout().includes(id) && jsonLines(w1.stdout()).some((l) => l.type !== "claimed"),
      "the first worker to give the turn up",
      40_000,
      20,
    );
    await new Promise((r) => setTimeout(r, 500));
    const after = storedEvents(p.home, id);
    expect(after.slice(atStop.length).map((e) => e.type)).toEqual([]);
    const w1Lines = jsonLines(w1.stdout());
    expect(w1Lines.filter((l) => l.type === "finished")).toEqual([]);
    checkFinished(p, id);
    expect(p.effects().map((e) => e.pid)).not.toContain(w2.child.pid);
    const resumed = after.filter((e) => e.type === "turn.resumed");
    expect(resumed).toHaveLength(2);
    const last = resumed.at(-1);
    expect(last?.type === "turn.resumed" && last.recovered?.leaseTakenOver?.reason).toBe("expired");
    for (const w of [w1, w2]) {
      await until(() => w.stderr().includes("keel worker: continuing"), "the worker to listen", 40_000, 20);
      w.child.kill("SIGTERM");
    }
    expect((await Promise.all([w1.exit, w2.exit])).map((e) => e.code)).toEqual([0, 0]);
  }, 120_000);
});

describe("adversarial recovery: a stalled keel run and delegated children", () => {
  it("keel run SIGSTOPped mid-tool past its lease: a worker takes the turn and completes it; keel run, continued, writes nothing and does not claim success", async () => {
    const p = setup("adv-run-stalled", 1000);
    const input = `${p.tag} tools:2 tool:charge`;
    const proc = startKeel(["run", input], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 1, "the first charge to start", 40_000, 20);
    proc.child.kill("SIGSTOP");
    const id = storedSessions(p.home)[0]!;
    const w = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 2, "the worker to run the next charge", 60_000, 20);
    writeFileSync(p.release, "");
    await until(() => terminals(storedEvents(p.home, id)).length > 0, "the worker to end the turn", 60_000, 50);
    const atStop = storedEvents(p.home, id);
    proc.child.kill("SIGCONT");
    const exit = await proc.exit;
    const after = storedEvents(p.home, id);
    expect(after.slice(atStop.length).map((e) => e.type)).toEqual([]);
    expect(exit.code, proc.stderr()).not.toBe(0);
    expect(proc.stderr()).not.toMatch(/keel: completed/);
    const { events } = checkFinished(p, id);
    expect(storedUserTexts(events)).toEqual([input]);
    // The stalled run's charge is cut (not repeated), the worker's ran to its end.
    expect(p.effects().map((e) => e.pid)).toEqual([proc.child.pid, w.child.pid]);
    await until(() => w.stderr().includes("keel worker: continuing"), "the worker to listen", 40_000, 20);
    w.child.kill("SIGTERM");
    expect((await w.exit).code).toBe(0);
  }, 120_000);

  it("a parent killed while its child runs an effect, then two workers killed while they recover the child: the child is not delegated again, no effect runs twice, both turns complete", async () => {
    const p = setup("adv-children");
    const config = readFileSync(join(p.dir, "agent.config.mjs"), "utf8")
      .replace("export default {", `const chargeTool = ${effectTool("charge")};\nexport default {`)
      .replace(
        "tools: [",
        `tools: [{
    name: "delegate",
    description: "Asks a helper.",
    parameters: { type: "object", properties: { ms: { type: "number" } } },
    category: "exec",
    execute: async (_args, ctx) => {
      const run = await ctx.child({ name: "helper", input: "${p.tag}-child tools:4 tool:charge", agent: { tools: [chargeTool] } });
      return "helper: " + run.result.text;
    },
  }, `,
      );
    writeFileSync(join(p.dir, "agent.config.mjs"), config);
    const proc = startKeel(["run", `${p.tag}-parent tools:1 tool:delegate`], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 1, "the child's first charge", 40_000, 20);
    await killed(proc);
    for (let k = 0; k < 2; k++) {
      const before = p.effects().length;
      const w = startKeel(["worker", "--json"], { cwd: p.dir, env: p.env });
      await until(() => p.effects().length > before, `worker ${k} to run the child's next charge`, 40_000, 10).catch(
        (err) => {
          const dump = storedSessions(p.home).map(
            (id) =>
              `${id}\n` +
              storedEvents(p.home, id)
                .map((e) => `  ${e.seq} ${e.turnId} ${e.type} ${JSON.stringify(e).slice(0, 300)}`)
                .join("\n"),
          );
          throw new Error(`${err}\nSTDOUT ${w.stdout()}\nSTDERR ${w.stderr()}\n${dump.join("\n")}`);
        },
      );
      await killed(w);
    }
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const ids = storedSessions(p.home);
    expect(ids).toHaveLength(2);
    const logs = ids.map((id) => ({ id, events: storedEvents(p.home, id) }));
    const parent = logs.find((l) => l.events.some((e) => e.type === "child.started"))!;
    const child = logs.find((l) => l !== parent)!;
    for (const l of logs) {
      const ends = terminals(l.events);
      expect(ends, l.id).toEqual([`turn.completed:${l.id}/1`]);
      for (const [callId, texts] of resultsOf(l.events)) expect(texts, callId).toHaveLength(1);
    }
    expect(parent.events.filter((e) => e.type === "child.started")).toHaveLength(1);
    expect(child.events.filter((e) => e.type === "turn.started")).toHaveLength(1);
    const ran = p.effects().map((e) => e.callId);
    expect(new Set(ran).size, ran.join(", ")).toBe(ran.length);
    // 4 charges in the child: the first three cut (interrupted, never repeated), the last run by the final worker.
    expect(ran).toHaveLength(4);
    const answer = parent.events.find((e) => e.type === "message.appended" && e.message.role === "tool");
    expect(JSON.stringify(answer)).toContain("helper: Done after 4 tool results");
    for (const r of requestsWith(p.tag)) expect(pairingProblems(r.body as never)).toEqual([]);
  }, 120_000);
});

describe("adversarial recovery: approvals", () => {
  const approver = fileURLToPath(new URL("./support/adv-recovery-approve.ts", import.meta.url));

  async function pausedRun(p: ReturnType<typeof setup>): Promise<string> {
    const proc = startKeel(["run", "--ask", "ask", `${p.tag} tools:1 tool:deploy`], {
      cwd: p.dir,
      env: p.env,
      keepStdin: true,
    });
    // The question itself (asked once the pause is on disk), not the live "? deploy needs approval" line before it.
    await until(() => proc.stderr().includes("[y] allow once"), "the approval question", 40_000, 20);
    await killed(proc);
    const s = soleSession(p.home)!;
    expect(terminals(s.events)).toEqual([`turn.paused:${s.id}/1`]);
    // Not answered: the worker leaves it paused.
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).filter((l) => l.type === "claimed" || l.type === "finished")).toEqual([]);
    expect(terminals(storedEvents(p.home, s.id))).toEqual([`turn.paused:${s.id}/1`]);
    expect(p.effects()).toEqual([]);
    return s.id;
  }

  it("killed while asking: the worker waits; answered by a process killed before it resumed: the worker resumes and deploys once", async () => {
    const p = setup("adv-approve-die");
    const id = await pausedRun(p);
    const child = spawn(process.execPath, [approver, id], { env: p.env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const sig = await new Promise((r) => child.on("close", (_c, s) => r(s)));
    expect(sig, err).toBe("SIGKILL");
    expect(out).toBe("APPROVED\n");
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).map((l) => l.type)).toEqual(["claimed", "finished", "report"]);
    const { results } = checkFinished(p, id);
    expect(p.effects()).toHaveLength(1);
    expect([...results.values()].flat()).toEqual([expect.stringMatching(/^deploy done /)]);
  });

  it("answered by keel run --session, killed mid-deploy: the worker finishes the turn without deploying again", async () => {
    const p = setup("adv-approve-cut");
    const id = await pausedRun(p);
    const proc = startKeel(["run", "--session", id, "--ask", "allow", `${p.tag}-next`], { cwd: p.dir, env: p.env });
    await until(() => p.effects().length === 1, "the approved deploy to start", 40_000, 20);
    await killed(proc);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const { results, events } = checkFinished(p, id);
    expect(p.effects()).toHaveLength(1);
    expect([...results.values()].flat()).toEqual([expect.stringContaining("not marked safe to repeat")]);
    // The input of the killed second run never started a turn: nothing half-written of it.
    expect(events.filter((e) => e.type === "turn.started")).toHaveLength(1);
  });
});

describe("adversarial recovery: the store under the kill", () => {
  it("keel worker SIGKILLed at seeded moments while it migrates a v3 database (v4 adds turn_state): the file is v3 or v4, never between; a last worker finishes the turn", async () => {
    const p = setup("adv-migrate");
    const proc = startKeel(["run", `${p.tag} tools:2 pause:60000`], { cwd: p.dir, env: p.env });
    await until(
      () => !!soleSession(p.home)?.events.some((e) => e.type === "tool.started"),
      "the first call to start",
      40_000,
      20,
    );
    await killed(proc);
    const dbPath = defaultSessionDbPath(p.home);
    // Back to v3 (what v4 added, removed), with enough other sessions that the migration's fill takes a while.
    const db = new DatabaseSync(dbPath);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.exec("DROP INDEX sessions_to_continue; ALTER TABLE sessions DROP COLUMN turn_state; PRAGMA user_version=3;");
    db.exec("BEGIN");
    const s = db.prepare(
      "INSERT INTO sessions (id, agent, created_at, updated_at, event_count) VALUES (?, 'other', 1, 1, 40)",
    );
    const e = db.prepare("INSERT INTO events (session_id, seq, ts, turn_id, type, data) VALUES (?, ?, 1, ?, ?, '{}')");
    for (let i = 0; i < 4000; i++) {
      s.run(`filler-${i}`);
      for (let q = 1; q <= 40; q++)
        e.run(`filler-${i}`, q, `filler-${i}/1`, q % 10 === 0 ? "turn.started" : "tool.started");
    }
    db.exec("COMMIT");
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.close();
    const v3 = join(p.dir, "v3.sqlite");
    copyFileSync(dbPath, v3);
    const rand = seededRandom(777);
    const seen = new Set<number>();
    for (let k = 0; k < 6; k++) {
      copyFileSync(v3, dbPath);
      for (const x of ["-wal", "-shm"]) rmSync(dbPath + x, { force: true });
      const w = startKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env });
      await new Promise((r) => setTimeout(r, 300 + Math.floor(rand() * 1500)));
      w.child.kill("SIGKILL");
      await w.exit;
      const check = new DatabaseSync(dbPath);
      try {
        expect((check.prepare("PRAGMA integrity_check").get() as { integrity_check: string }).integrity_check).toBe(
          "ok",
        );
        const version = (check.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
        const cols = (check.prepare("PRAGMA table_info(sessions)").all() as Array<{ name: string }>).map((c) => c.name);
        const index = check.prepare("SELECT name FROM sqlite_schema WHERE name = 'sessions_to_continue'").get();
        seen.add(version);
        if (version === 3) expect([cols.includes("turn_state"), !!index]).toEqual([false, false]);
        else {
          expect(version).toBe(4);
          expect([cols.includes("turn_state"), !!index]).toEqual([true, true]);
          const mine = check.prepare("SELECT turn_state FROM sessions WHERE agent = 'fault'").get() as {
            turn_state: string;
          };
          expect(["running", null]).toContain(mine.turn_state);
        }
      } finally {
        check.close();
      }
    }
    expect(seen.size).toBeGreaterThan(0);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const id = storedSessions(p.home).find((x) => !x.startsWith("filler-"))!;
    checkFinished(p, id);
  }, 120_000);

  it("a killed turn whose input holds a secret, 300 KB of text and astral characters: recovered, the log never holds the key, the text is whole and well-formed", async () => {
    const p = setup("adv-secret");
    const key = `sk-ant-api03-${"Zq7xW2mK9pL4vR8t".repeat(6).slice(0, 93)}AA`;
    // As much as fits the model's window (the rest of a megabyte would be refused before any call ran).
    const chunk = "the quick brown fox jumps over the lazy dog, naïve café 𝄞 🚀 — ";
    const payload = `${chunk.repeat(Math.ceil(300_000 / chunk.length))}\nmy key is ${key} please keep it\nEND-OF-PAYLOAD`;
    const proc = startKeel(["run", `${p.tag} tools:2 pause:60000`, "-"], { cwd: p.dir, env: p.env, keepStdin: true });
    proc.child.stdin!.end(payload);
    await until(
      () => !!soleSession(p.home)?.events.some((e) => e.type === "tool.started"),
      "the first call to start",
      60_000,
      50,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${proc.stderr().slice(-2000)}`);
    });
    await killed(proc);
    writeFileSync(p.release, "");
    const r = await runKeel(["worker", "--once", "--json"], { cwd: p.dir, env: p.env, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const id = storedSessions(p.home)[0]!;
    const { events } = checkFinished(p, id);
    for (const x of ["", "-wal"]) {
      const file = defaultSessionDbPath(p.home) + x;
      if (existsSync(file)) expect(readFileSync(file).includes(key), file).toBe(false);
    }
    expect(JSON.stringify(events)).not.toContain(key);
    const [text] = storedUserTexts(events);
    expect(isWellFormed(text!)).toBe(true);
    expect(text).toContain("END-OF-PAYLOAD");
    expect(text).toContain(chunk.repeat(100));
    expect(text!.length).toBeGreaterThan(300_000);
    // What the recovered turn sent: the same words (the key redacted), the whole payload.
    const sent = JSON.stringify(requestsWith(p.tag).at(-1)!.body);
    expect(sent).not.toContain(key);
    expect(sent).toContain("END-OF-PAYLOAD");
  }, 120_000);
});
