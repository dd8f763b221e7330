/**
 * Durable background jobs: recorded as pending before they run, settled once, re-run on
 * resume or by a later session of the same store, with attempts bounded across restarts.
 */
import { describe, expect, it } from "vitest";
import type { JobContext, KeelEvent, KeelPlugin } from "../src/index.ts";
import { createAgent, definePlugin } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";

type Behaviour = (payload: unknown, ctx: JobContext) => unknown;

/** A plugin queueing one durable job per turn; `behave` is what its runner does (swappable between "processes"). */
function jobber(behave: { run: Behaviour }, extra: Record<string, unknown> = {}): KeelPlugin {
  return definePlugin({
    name: "jobber",
    version: "1.0.0",
    setup(ctx) {
      ctx.registerJob("work", (payload, job) => behave.run(payload, job));
      ctx.on("turn.post_turn", (e) => ({
        kind: "background_job",
        name: "work",
        idempotencyKey: `work:${e.turnId}`,
        durable: true,
        payload: { turn: e.turnId },
        retryDelayMs: 1,
        ...extra,
      }));
    },
  });
}

const script = () => scriptedProvider(Array.from({ length: 6 }, () => ({ text: "ok" })));
const jobEvents = (events: KeelEvent[]) =>
  events
    .filter((e) => e.type.startsWith("job."))
    .map((e) => `${e.type}${"status" in e ? `:${e.status}` : ""}${"attempt" in e ? `#${e.attempt}` : ""}`);

describe("durable background jobs", () => {
  it("records job.pending before the runner starts and job.completed once; the runner reads its turn from the log", async () => {
    const store = new MemorySessionStore();
    const seen: unknown[] = [];
    const agent = await createAgent({
      provider: script(),
      store,
      plugins: [jobber({ run: async (p, job) => seen.push(p, (await job.turn())?.input, job.attempt, job.recovered) })],
    });
    const s = await agent.session();
    await s.run("remember the blue door");
    await agent.drain();
    expect(seen).toEqual([{ turn: `${s.id}/1` }, "remember the blue door", 1, false]);
    expect(jobEvents(await s.events())).toEqual(["job.pending", "job.started#1", "job.completed:ok"]);
    const events = await s.events();
    // The pending record is in the log no later than the turn's terminal event.
    expect(events.findIndex((e) => e.type === "job.pending")).toBeLessThan(
      events.findIndex((e) => e.type === "turn.completed"),
    );
    await agent.close();
  });

  it("a job cut by the close grace is deferred, re-run on resume and never run again once it completed", async () => {
    const store = new MemorySessionStore();
    const hang: { run: Behaviour } = {
      run: (_p, job) =>
        new Promise((_r, reject) => job.signal.addEventListener("abort", () => reject(new Error("aborted")))),
    };
    const a1 = await createAgent({ provider: script(), store, plugins: [jobber(hang)] });
    const s1 = await a1.session();
    await s1.run("first");
    await a1.close({ graceMs: 20 });
    expect(a1.unfinishedJobs).toMatchObject([{ status: "pending", sessionId: s1.id, name: "work" }]);
    expect(jobEvents(await store.events(s1.id))).toEqual(["job.pending", "job.started#1", "job.deferred"]);

    let runs = 0;
    const ok = { run: (_p: unknown, job: JobContext) => ((runs += 1), expect(job.recovered).toBe(true)) };
    const a2 = await createAgent({ provider: script(), store, plugins: [jobber(ok)] });
    const s2 = await a2.session(s1.id);
    await a2.drain();
    expect(runs).toBe(1);
    await a2.close();
    const a3 = await createAgent({ provider: script(), store, plugins: [jobber(ok)] });
    await a3.session(s1.id);
    await a3.drain();
    await a3.close();
    expect(runs).toBe(1);
    expect(jobEvents(await store.events(s2.id)).filter((e) => e === "job.completed:ok")).toHaveLength(1);
  });

  it("a new session of the same store adopts a deferred job of another session and runs it once", async () => {
    const store = new MemorySessionStore();
    const hang: { run: Behaviour } = {
      run: (_p, job) =>
        new Promise((_r, reject) => job.signal.addEventListener("abort", () => reject(new Error("aborted")))),
    };
    const a1 = await createAgent({ provider: script(), store, plugins: [jobber(hang)] });
    const s1 = await a1.session();
    await s1.run("first");
    await a1.close({ graceMs: 10 });
    const got: Array<[string, string | null, string | undefined]> = [];
    const a2 = await createAgent({
      provider: script(),
      store,
      plugins: [jobber({ run: async (_p, job) => got.push([job.sessionId, job.turnId, (await job.turn())?.input]) })],
    });
    const s2 = await a2.session();
    await a2.drain();
    expect(got).toEqual([[s1.id, `${s1.id}/1`, "first"]]);
    expect(jobEvents(await s2.events())).toEqual(["job.pending", "job.started#2", "job.completed:ok"]);
    // Resuming the first session later finds it settled.
    const s1b = await a2.session(s1.id);
    await a2.drain();
    expect(got).toHaveLength(1);
    expect(jobEvents(await s1b.events())).toEqual(["job.pending", "job.started#1", "job.deferred"]);
    await a2.close();
  });

  it("a job that always fails stops after its attempts, counted across restarts, and is reported", async () => {
    const store = new MemorySessionStore();
    let calls = 0;
    const failing = { run: () => ((calls += 1), Promise.reject(new Error("boom"))) };
    const a1 = await createAgent({ provider: script(), store, plugins: [jobber(failing, { attempts: 3 })] });
    const s = await a1.session();
    await s.run("x");
    await a1.drain();
    await a1.close();
    expect(calls).toBe(3);
    expect(a1.unfinishedJobs).toMatchObject([
      { status: "failed", attempts: 3, error: expect.stringContaining("boom") },
    ]);
    const events = await store.events(s.id);
    expect(events.find((e) => e.type === "diagnostic" && e.code === "KEEL_JOB_FAILED")).toMatchObject({
      plugin: "jobber",
    });
    const a2 = await createAgent({ provider: script(), store, plugins: [jobber(failing, { attempts: 3 })] });
    await a2.session(s.id);
    await a2.drain();
    await a2.close();
    expect(calls).toBe(3);
  });

  it("rejects a durable job with no registered runner or a payload that is not small JSON, with a coded diagnostic", async () => {
    const bad = definePlugin({
      name: "bad-jobs",
      version: "1.0.0",
      setup(ctx) {
        ctx.registerJob("big", () => undefined);
        ctx.on("turn.post_turn", () => [
          { kind: "background_job", name: "nobody", idempotencyKey: "a", durable: true },
          {
            kind: "background_job",
            name: "big",
            idempotencyKey: "b",
            durable: true,
            payload: { text: "x".repeat(5000) },
          },
        ]);
      },
    });
    const agent = await createAgent({ provider: script(), store: new MemorySessionStore(), plugins: [bad] });
    const s = await agent.session();
    await s.run("x");
    const events = await s.events();
    expect(
      events
        .filter((e) => e.type === "diagnostic")
        .map((e) => (e as { code: string }).code)
        .sort(),
    ).toEqual(["KEEL_JOB_PAYLOAD_INVALID", "KEEL_JOB_RUNNER_MISSING"]);
    expect(jobEvents(events)).toEqual([]);
    await agent.close();
  });
});
