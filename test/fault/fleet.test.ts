/**
 * Past one machine: four processes serve interleaved turns of shared sessions against one
 * PostgreSQL database while random ones are SIGKILLed and replaced. Afterwards every user
 * message is stored at most once (exactly once when its turn finished), every tool call has
 * at most one stored result (exactly one in finished turns), no session has interleaved turns,
 * and what one instance remembered is recalled by another.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { KeelEvent, Message } from "../../packages/kernel/src/index.ts";
import { repairToolPairs } from "../../packages/kernel/src/repair.ts";
import { seededRandom } from "../../packages/testkit/src/index.ts";
import { PostgresSessionStore } from "../../packages/store-postgres/src/index.ts";
import { dropTestSchemas, PG_URL, requirePostgres, testSchema } from "../../packages/store-postgres/test/support/pg.ts";

const WORKER = fileURLToPath(new URL("./support/fleet-worker.ts", import.meta.url));
const SESSIONS = 5;
const JOBS = 40;

beforeAll(requirePostgres);
afterAll(dropTestSchemas);

interface Worker {
  child: ChildProcess;
  ready: Promise<void>;
  busy: string | undefined;
  /** Settles with the line that ended the current job, or "KILLED". */
  waiter: ((line: string) => void) | undefined;
  dead: boolean;
}

function startWorker(schema: string): Worker {
  const child = spawn(process.execPath, [WORKER], {
    env: { ...process.env, KEEL_DATABASE_URL: PG_URL, KEEL_DATABASE_SCHEMA: schema },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let ready!: () => void;
  const w: Worker = { child, ready: new Promise((r) => (ready = r)), busy: undefined, waiter: undefined, dead: false };
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line === "READY") ready();
    else if (line.startsWith("DONE ") || line.startsWith("FAILED ")) w.waiter?.(line);
  });
  child.on("exit", () => {
    w.dead = true;
    ready();
    w.waiter?.("KILLED");
  });
  return w;
}

/** Send one job; resolves with the worker's last line about it. */
function send(w: Worker, sessionId: string, text: string, expect = ""): Promise<string> {
  return new Promise((resolve) => {
    w.busy = text;
    w.waiter = (line) => {
      w.busy = undefined;
      w.waiter = undefined;
      resolve(line);
    };
    w.child.stdin!.write(`${sessionId} ${text}${expect ? `\t${expect}` : ""}\n`);
  });
}

describe("a fleet of four instances on one PostgreSQL database", () => {
  it("survives random SIGKILLs: nothing lost, duplicated or interleaved, and memories cross instances", async () => {
    const schema = testSchema();
    const rng = seededRandom(20261124);
    const setup = new PostgresSessionStore({ url: PG_URL, schema });
    const ids = Array.from({ length: SESSIONS }, (_, i) => `fleet-${i}`);
    for (const id of ids) await setup.createSession({ id, agent: "fleet", createdAt: Date.now() });

    const workers: Worker[] = Array.from({ length: 4 }, () => startWorker(schema));
    onTestFinished(() => {
      for (const w of workers) if (!w.dead) w.child.kill("SIGKILL");
    });
    await Promise.all(workers.map((w) => w.ready));
    const jobs = Array.from({ length: JOBS }, (_, i) => ({
      sessionId: ids[i % SESSIONS]!,
      text: `The code word for topic${i} is ${codeWord(i)}`,
    }));
    const outcome = new Map<string, { line: string; pid: number | undefined }>();
    let next = 0;
    let kills = 0;
    // Each slot keeps a live worker busy with the next job; a killed worker is replaced.
    const serve = async (slot: number): Promise<void> => {
      while (next < jobs.length) {
        let w = workers[slot]!;
        if (w.dead) {
          w = workers[slot] = startWorker(schema);
          await w.ready;
        }
        if (next >= jobs.length) break;
        const job = jobs[next++]!;
        outcome.set(job.text, { line: await send(w, job.sessionId, job.text), pid: w.child.pid });
      }
    };
    const sessionOf = new Map(jobs.map((j) => [j.text, j.sessionId]));
    /** True when the worker's job has a turn started in the store and not ended: a kill now lands mid-turn. */
    const midTurn = async (w: Worker): Promise<boolean> => {
      const events = await setup.events(sessionOf.get(w.busy ?? "") ?? "");
      const start = events.findLast((e) => e.type === "turn.started");
      return (
        start?.type === "turn.started" &&
        start.input === w.busy &&
        !events.some((e) => e.seq > start.seq && "verdict" in e && e.turnId === start.turnId)
      );
    };
    const killer = (async () => {
      while (next < jobs.length && kills < 6) {
        await new Promise((r) => setTimeout(r, 100 + rng() * 250));
        // Aimed at a turn in flight (under load a random moment often falls before the turn starts).
        const victims = workers.filter((w) => !w.dead && w.busy !== undefined);
        const from = Math.floor(rng() * victims.length);
        for (let i = 0; i < victims.length; i++) {
          const v = victims[(from + i) % victims.length]!;
          if (v.dead || !(await midTurn(v))) continue;
          v.child.kill("SIGKILL");
          kills++;
          break;
        }
      }
    })();
    await Promise.all([0, 1, 2, 3].map(serve));
    await killer;
    expect(kills).toBeGreaterThan(2);

    const done = [...outcome].filter(([, o]) => o.line.startsWith("DONE ") && o.line.split("\t")[1] === "completed");
    const killed = [...outcome].filter(([, o]) => o.line === "KILLED");
    expect(done.length).toBeGreaterThan(JOBS / 2);
    expect(killed.length).toBeGreaterThan(0);

    // Memories written by one instance are recalled by another (a different process).
    for (const [text, o] of done.slice(0, 4)) {
      const i = Number(/topic(\d+)/.exec(text)![1]);
      const other = workers.find((w) => !w.dead && w.child.pid !== o.pid)!;
      const line = await send(other, ids[(i + 1) % SESSIONS]!, `ASK What is the code word for topic${i}?`, codeWord(i));
      expect(`${line} (recall of topic${i} stored by pid ${o.pid}, asked in pid ${other.child.pid})`).toMatch(
        /\tcompleted\tFOUND \(/,
      );
    }
    for (const w of workers) w.child.stdin!.end();
    await Promise.all(workers.map((w) => (w.dead ? undefined : new Promise((r) => w.child.once("exit", r)))));

    // A last open of every session by a fresh store marks any turn left dangling by the last kills.
    const all: KeelEvent[] = [];
    for (const id of ids) all.push(...(await setup.events(id)));
    const stored = new Map<string, number>();
    for (const e of all)
      if (e.type === "message.appended" && e.message.role === "user") {
        const t = e.message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
        stored.set(t, (stored.get(t) ?? 0) + 1);
      }
    // Kills landed mid-turn: another instance took the session over and marked the turn interrupted, or
    // (a kill in one of the last turns of its session) the turn is left for the next open to mark.
    const ended = new Set(all.flatMap((e) => ("verdict" in e && e.turnId ? [e.turnId] : [])));
    const dangling = all.filter((e) => e.type === "turn.started" && e.turnId && !ended.has(e.turnId));
    expect(all.filter((e) => e.type === "turn.interrupted").length + dangling.length).toBeGreaterThan(0);
    for (const [text] of done) expect(stored.get(text), text).toBe(1);
    for (const job of jobs) expect(stored.get(job.text) ?? 0, job.text).toBeLessThanOrEqual(1);

    for (const id of ids) {
      const events = await setup.events(id);
      // No interleaving: the events of each turn are one contiguous run in its session's log.
      const runs: string[] = [];
      for (const e of events) if (e.turnId && runs.at(-1) !== e.turnId) runs.push(e.turnId);
      expect(new Set(runs).size, `session ${id}: turns ${runs.join(", ")}`).toBe(runs.length);
      // Tool calls: never two results; a finished turn has exactly one per call.
      const messages: Message[] = events.flatMap((e) => (e.type === "message.appended" ? [e.message] : []));
      expect(repairToolPairs(messages).dropped, `session ${id}: results without a call or twice`).toEqual([]);
      const finished = new Set(events.filter((e) => e.type === "turn.completed").map((e) => e.turnId));
      for (const e of events) {
        if (e.type !== "message.appended" || e.message.role !== "assistant" || !finished.has(e.turnId)) continue;
        for (const b of e.message.content) {
          if (b.type !== "tool_call") continue;
          const results = events.filter(
            (x) => x.type === "message.appended" && x.message.role === "tool" && x.message.toolCallId === b.id,
          );
          expect(results.length, `call ${b.id} in session ${id}`).toBe(1);
        }
      }
    }
    await setup.close();
  }, 120_000);
});

function codeWord(i: number): string {
  return `zx${(i * 7919 + 104729).toString(36)}q`;
}
