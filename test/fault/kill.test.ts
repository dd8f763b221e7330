/**
 * Fault suite, class 7 — SIGKILL at any moment. The real `keel` binary with the official
 * Anthropic SDK against the wire server runs a multi-round tool-using script; processes are
 * killed at seeded random moments and at chosen ones (mid-takeover, while waiting for a lease,
 * with parallel tool calls, an idle chat). After each kill: the user's message is in the log,
 * tool-call/result pairing is intact in what the next turn sends, and the next turn succeeds.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { WireServer } from "../../packages/wire-server/src/index.ts";
import type { KeelEvent } from "../../packages/kernel/src/index.ts";
import { isTerminalEvent } from "../../packages/kernel/src/index.ts";
import { seededRandom } from "../../packages/testkit/src/index.ts";
import {
  useSharedWire,
  faultConfig,
  inProcessAgent,
  pairingProblems,
  project,
  runKeel,
  seedSession,
  startKeel,
  storedEvents,
  storedUserTexts,
  until,
  wireEnv,
} from "./support/storage.ts";

const { root, server: sharedServer } = useSharedWire("keel-fault-kill-");
let server: WireServer;
beforeAll(() => {
  server = sharedServer();
});

const SEED = 20261123;
const KILLS = 20;
const LANES = 2;
const env = (home: string) => wireEnv(home, server.anthropicBaseURL);
const requestsFor = (from: number, needle: string) =>
  server.requests.slice(from).filter((r) => JSON.stringify(r.body?.messages ?? []).includes(needle));
const firstJsonSession = (stdout: string) => /"sessionId":"([0-9a-f-]{36})"/.exec(stdout)?.[1];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The turn whose turn.started input is `input`. */
function turnOf(events: readonly KeelEvent[], input: string): string {
  const started = events.find((e) => e.type === "turn.started" && e.input === input);
  if (!started?.turnId) throw new Error(`no turn for ${input}`);
  return started.turnId;
}

/** Seqs 1..n with no gap or duplicate: nothing half-written. */
function expectContiguous(events: readonly KeelEvent[]): void {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
}

describe("kill: randomised SIGKILL campaign", () => {
  it(`${KILLS} SIGKILLs at seeded random moments of multi-round tool turns (seed ${SEED}, two sessions at once): each time the message is kept, pairing holds and the next turn succeeds`, async () => {
    const p = project(root, "campaign", faultConfig("lease: { ttlMs: 60000 },"));
    let midTurn = 0;
    let interrupted = 0;
    /** One lane: its own session and seeded moments, KILLS / LANES kills in a row. */
    const lane = async (l: number): Promise<void> => {
      const rand = seededRandom(SEED + l);
      const opening = `tools:0 lane ${l} opens`;
      const id = await seedSession(p.home, [opening]);
      const said = [opening];
      for (let i = 0; i < KILLS / LANES; i++) {
        const tag = `kill-${l}-${i} `;
        const parallel = rand() < 0.3 ? 2 : 1;
        const rounds = 1 + Math.floor(rand() * 3);
        const pause = 20 + Math.floor(rand() * 100);
        const delay = 2 + Math.floor(rand() * 12);
        const input = `${tag}tools:${rounds} parallel:${parallel} pause:${pause} delay:${delay}`;
        // About how long the turn runs after its first request: SSE events × delay, tool
        // pauses and the kernel's work per round; the kill lands anywhere in it (a few after).
        const span = rounds * (8 * delay + pause + 40) + 12 * delay + 40;
        const from = server.requests.length;
        const proc = startKeel(["run", "--session", id, input], { cwd: p.dir, env: env(p.home) });
        // From the first provider request on, the user's message is durable (the kernel's promise).
        await until(() => requestsFor(from, tag).length >= 1 || proc.child.exitCode !== null, `${tag}'s first request`);
        await sleep(Math.floor(rand() * span));
        proc.child.kill("SIGKILL");
        const exit = await proc.exit;
        if (exit.signal === "SIGKILL") midTurn++;
        else expect(exit.code, proc.stderr()).toBe(0);
        said.push(input);
        const killed = storedEvents(p.home, id);
        expect(storedUserTexts(killed)).toEqual(said);
        expectContiguous(killed);

        // The next turn: every fifth through the CLI, the others through the same kernel, SDK
        // and database in this process (a CLI start costs ~1 s; the campaign stays under 40 s).
        const recover = `recover-${l}-${i} tools:${rand() < 0.5 ? 1 : 0} pause:5`;
        const from2 = server.requests.length;
        if (i % 5 === 4) {
          const next = await runKeel(["run", "--session", id, recover], { cwd: p.dir, env: env(p.home) });
          expect(next.code, next.stderr).toBe(0);
        } else {
          const agent = await inProcessAgent(p.home, server.anthropicBaseURL);
          try {
            const session = await agent.session(id);
            expect((await session.run(recover)).verdict).toEqual({ status: "completed", reason: "end_turn" });
          } finally {
            await agent.close();
          }
        }
        said.push(recover);
        const sent = requestsFor(from2, `recover-${l}-${i} `);
        expect(sent.length).toBeGreaterThanOrEqual(1);
        for (const r of sent)
          expect(pairingProblems(r.body), JSON.stringify(r.body.messages).slice(0, 2000)).toEqual([]);
        expect(JSON.stringify(sent[0]!.body.messages)).toContain(tag);
        const after = storedEvents(p.home, id);
        expectContiguous(after);
        expect(storedUserTexts(after)).toEqual(said);
        // The killed turn has exactly one end: its own, or `turn.interrupted` written on resume.
        const turn = turnOf(after, input);
        const ends = after.filter((e) => isTerminalEvent(e) && e.turnId === turn);
        expect(ends).toHaveLength(1);
        if (ends[0]!.type === "turn.interrupted") {
          interrupted++;
          expect(after.some((e) => e.type === "session.resumed" && e.interruptedTurn === turn)).toBe(true);
        }
        expect(
          after.filter((e) => isTerminalEvent(e) && e.turnId === turnOf(after, recover)).map((e) => e.type),
        ).toEqual(["turn.completed"]);
      }
    };
    // Two lanes at once (two CLIs at most): two sessions in one home, killed independently.
    await Promise.all(Array.from({ length: LANES }, (_, l) => lane(l)));
    // Most kills landed inside the turn (the rest just after it ended).
    expect(midTurn).toBeGreaterThanOrEqual(KILLS * 0.6);
    expect(interrupted).toBeGreaterThanOrEqual(KILLS * 0.5);
  }, 90_000);
});

describe("kill: chosen moments", () => {
  it("a process killed right after it took over a dead holder's lease: the third run takes over again, and both turns are interrupted with their messages kept", async () => {
    const p = project(root, "double", faultConfig("lease: { ttlMs: 60000 },"));
    const from = server.requests.length;
    const a = startKeel(["run", "--json", "tools:1 pause:60000 first doomed"], { cwd: p.dir, env: env(p.home) });
    await until(
      () => firstJsonSession(a.stdout()) !== undefined && a.stdout().includes('"tool.started"'),
      "the first tool",
    );
    const id = firstJsonSession(a.stdout())!;
    a.child.kill("SIGKILL");
    await a.exit;
    const b = startKeel(["run", "--json", "--session", id, "tools:1 pause:60000 second doomed"], {
      cwd: p.dir,
      env: env(p.home),
    });
    await until(() => b.stdout().includes('"tool.started"'), "the second tool");
    b.child.kill("SIGKILL");
    await b.exit;
    const c = await runKeel(["run", "--session", id, "third lives"], { cwd: p.dir, env: env(p.home) });
    expect(c.code, c.stderr).toBe(0);
    expect(c.ms).toBeLessThan(10_000);
    const events = storedEvents(p.home, id);
    expect(
      events.filter((e) => e.type === "session.resumed").map((e) => e.type === "session.resumed" && e.leaseTakenOver),
    ).toEqual([
      { pid: a.child.pid, host: expect.any(String), reason: "holder_dead" },
      { pid: b.child.pid, host: expect.any(String), reason: "holder_dead" },
    ]);
    expect(events.filter((e) => e.type === "turn.interrupted").map((e) => e.turnId)).toEqual([`${id}/1`, `${id}/2`]);
    const sent = requestsFor(from, "third lives");
    expect(sent).toHaveLength(1);
    expect(pairingProblems(sent[0]!.body)).toEqual([]);
    expect(JSON.stringify(sent[0]!.body.messages)).toMatch(/first doomed[\s\S]*second doomed[\s\S]*third lives/);
  });

  it("a process killed while it waits (--wait) for a held session leaves no trace; the holder finishes and the next run proceeds", async () => {
    const p = project(root, "waiter", faultConfig());
    // The holder's tool holds its turn until the waiter is gone (a file releases it).
    const release = join(p.dir, "release");
    const a = startKeel(["run", "--json", "tools:1 pause:60000 holder turn"], {
      cwd: p.dir,
      env: { ...env(p.home), FAULT_PAUSE_RELEASE: release },
    });
    await until(
      () => firstJsonSession(a.stdout()) !== undefined && a.stdout().includes('"tool.started"'),
      "the holder's tool",
    );
    const id = firstJsonSession(a.stdout())!;
    const from = server.requests.length;
    const w = startKeel(["run", "--wait", "--session", id, "impatient waiter"], { cwd: p.dir, env: env(p.home) });
    await until(() => /waiting for it/.test(w.stderr()), "the waiter to wait");
    w.child.kill("SIGKILL");
    await w.exit;
    writeFileSync(release, "");
    expect((await a.exit).code, a.stderr()).toBe(0);
    expect(requestsFor(from, "impatient waiter")).toHaveLength(0);
    const next = await runKeel(["run", "--session", id, "tools:0 next one"], { cwd: p.dir, env: env(p.home) });
    expect(next.code, next.stderr).toBe(0);
    const events = storedEvents(p.home, id);
    expect(storedUserTexts(events)).toEqual(["tools:1 pause:60000 holder turn", "tools:0 next one"]);
    expect(events.filter((e) => e.type === "turn.interrupted")).toHaveLength(0);
    expect(
      events.filter((e) => e.type === "session.resumed").map((e) => e.type === "session.resumed" && e.leaseTakenOver),
    ).toEqual([undefined]);
  });

  it("killed while two parallel tool calls run: the next request answers each call exactly once (synthesized), and the turn completes", async () => {
    const p = project(root, "parallel", faultConfig());
    const a = startKeel(["run", "--json", "tools:1 parallel:2 pause:60000 two at once"], {
      cwd: p.dir,
      env: env(p.home),
    });
    await until(
      () => firstJsonSession(a.stdout()) !== undefined && (a.stdout().match(/"tool\.started"/g) ?? []).length >= 2,
      "both tools",
    );
    const id = firstJsonSession(a.stdout())!;
    // tool.started is printed as it is emitted; the calls reach the disk just before the tools
    // run. Kill well inside the pauses, when both are running.
    await sleep(300);
    a.child.kill("SIGKILL");
    await a.exit;
    const from = server.requests.length;
    const next = await runKeel(["run", "--session", id, "tools:1 pause:5 carry on"], { cwd: p.dir, env: env(p.home) });
    expect(next.code, next.stderr).toBe(0);
    const sent = requestsFor(from, "carry on");
    expect(sent).toHaveLength(2);
    for (const r of sent) expect(pairingProblems(r.body)).toEqual([]);
    const results = (sent[0]!.body.messages as Array<{ content: unknown }>)
      .flatMap((m) =>
        Array.isArray(m.content)
          ? (m.content as Array<{ type: string; tool_use_id?: string; is_error?: boolean }>)
          : [],
      )
      .filter((b) => b.type === "tool_result");
    expect(results).toHaveLength(2);
    expect(results.every((r) => r.is_error === true)).toBe(true);
  });

  it("an idle chat on a session is SIGKILLed: it held no lease, so the next run goes at once and nothing is marked interrupted", async () => {
    const p = project(root, "chat", faultConfig("lease: { ttlMs: 60000 },"));
    const id = await seedSession(p.home, ["tools:0 first words"]);
    const chat = startKeel(["chat", "--session", id], { cwd: p.dir, env: env(p.home), keepStdin: true });
    await until(() => chat.stderr().includes(`keel chat · session ${id}`), "the chat to open");
    chat.child.kill("SIGKILL");
    await chat.exit;
    const next = await runKeel(["run", "--session", id, "tools:0 after the chat"], { cwd: p.dir, env: env(p.home) });
    expect(next.code, next.stderr).toBe(0);
    expect(next.ms).toBeLessThan(10_000);
    const events = storedEvents(p.home, id);
    expect(events.filter((e) => e.type === "turn.interrupted")).toHaveLength(0);
    expect(events.filter((e) => e.type === "session.resumed").every((e) => !("leaseTakenOver" in e))).toBe(true);
    expect(storedUserTexts(events)).toEqual(["tools:0 first words", "tools:0 after the chat"]);
  });
});
