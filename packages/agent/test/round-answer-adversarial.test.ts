/**
 * The `answer` seam under hostile answers: arguments that do not fit the tool, a tool that is
 * gone, two plugins answering one round, more calls than the guard allows, chat mode, a
 * process that lost the session's lease.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, definePlugin, defineTool, messageText } from "../src/index.ts";
import type { KeelEvent, KeelPlugin, Message } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import type { ScriptStep } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";

/** The scripted provider: `requests` holds every request it was sent. */
const counted = (steps: ScriptStep[]) => scriptedProvider(steps);

const ran: unknown[] = [];
const ping = defineTool({
  name: "ping",
  description: "Answers pong.",
  parameters: { type: "object", properties: { n: { type: "number" } }, required: ["n"], additionalProperties: false },
  execute: (args: { n: number }) => (ran.push(args), `pong ${args.n}`),
});

/** Answers the turn's first round with `calls`, then leaves the rest to the model. */
function once(name: string, calls: Array<{ name: string; args: unknown }>): KeelPlugin {
  return definePlugin({
    name,
    version: "1.0.0",
    setup(ctx) {
      ctx.on("round.pre_request", (e) => {
        const turn = e.messages.slice(e.messages.findLastIndex((m: Message) => m.role === "user"));
        if (turn.some((m: Message) => m.role === "assistant")) return undefined;
        return { kind: "answer", reason: `${name} first`, calls } as never;
      });
    },
  });
}

/** A memory store that remembers who holds each session's lease, so a test can take it over as a stalled holder's successor would. */
class StealableStore extends MemorySessionStore {
  readonly owners = new Map<string, string>();
  override acquireLease(sessionId: string, claim: Parameters<MemorySessionStore["acquireLease"]>[1]) {
    const out = super.acquireLease(sessionId, claim);
    if (out.acquired) this.owners.set(sessionId, claim.owner);
    return out;
  }
  steal(sessionId: string): void {
    const replaces = this.owners.get(sessionId);
    this.acquireLease(sessionId, {
      owner: "successor",
      pid: process.pid + 1,
      host: "elsewhere",
      ttlMs: 60_000,
      ...(replaces ? { replaces } : {}),
    });
  }
}

describe("round answers, adversarial: the lease", () => {
  it("a process that lost the session's lease runs no answered call (as it sends no request)", async () => {
    ran.length = 0;
    const store = new StealableStore();
    const stealer = definePlugin({
      name: "stealer",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", (e) => {
          store.steal(e.sessionId);
          return undefined;
        });
      },
    });
    const provider = counted([{ text: "model" }]);
    const agent = await createAgent({
      provider,
      store,
      tools: [ping],
      plugins: [stealer, once("a", [{ name: "ping", args: { n: 1 } }])],
    });
    const session = await agent.session();
    const r = await session.run("go").catch((err: unknown) => err);
    await agent.close().catch(() => undefined);
    expect(ran).toEqual([]);
    expect(r).toMatchObject({ code: "KEEL_SESSION_BUSY" });
  });
});

describe("round answers, adversarial: answered calls take the model's path", () => {
  async function run(plugins: KeelPlugin[], extra: { chat?: boolean; maxToolCalls?: number; tools?: unknown[] } = {}) {
    ran.length = 0;
    const store = new MemorySessionStore();
    const provider = counted([{ text: "model" }]);
    const agent = await createAgent({
      provider,
      store,
      tools: (extra.tools as [typeof ping]) ?? [ping],
      plugins,
      ...(extra.maxToolCalls ? { limits: { maxToolCalls: extra.maxToolCalls } } : {}),
    });
    const session = await agent.session();
    if (extra.chat) session.setMode("chat");
    const r = await session.run("go");
    const events = await store.events(session.id);
    await agent.close();
    const results = session.messages.filter((m) => m.role === "tool").map((m) => messageText(m));
    return { r, events, provider, results };
  }

  it("arguments that do not fit the tool's input schema: not run, KEEL_TOOL_ARGS_INVALID, the model takes over", async () => {
    const typed = defineTool({
      name: "typed",
      description: "Takes a number.",
      input: z.object({ n: z.number() }),
      execute: (a: { n: number }) => (ran.push(a), "ran"),
    });
    for (const args of [null, "x", [1], { n: "seven" }]) {
      const { r, results, provider } = await run([once("a", [{ name: "typed", args }])], { tools: [typed] });
      expect(ran).toEqual([]);
      expect(results).toEqual([expect.stringContaining("KEEL_TOOL_ARGS_INVALID")]);
      expect(provider.requests.length).toBe(1);
      expect(r.text).toBe("model");
    }
  });

  it("a tool that is not there (removed from the config since): KEEL_TOOL_UNKNOWN, the model takes over", async () => {
    const { r, results } = await run([once("a", [{ name: "gone", args: {} }])]);
    expect(results).toEqual([expect.stringContaining("KEEL_TOOL_UNKNOWN")]);
    expect(r.text).toBe("model");
  });

  it("chat mode: an answer with calls is not used (KEEL_ANSWER_IGNORED), nothing runs", async () => {
    const { r, events } = await run([once("a", [{ name: "ping", args: { n: 1 } }])], { chat: true });
    expect(ran).toEqual([]);
    expect(r.text).toBe("model");
    expect(events.find((e) => e.type === "diagnostic" && e.code === "KEEL_ANSWER_IGNORED")).toMatchObject({
      plugin: "a",
    });
    expect(events.some((e) => e.type === "round.answered")).toBe(false);
  });

  it("two plugins answer one round: the first registered wins, the other's calls never run", async () => {
    const { events } = await run([
      once("a", [{ name: "ping", args: { n: 1 } }]),
      once("b", [{ name: "ping", args: { n: 2 } }]),
    ]);
    expect(ran).toEqual([{ n: 1 }]);
    const answered = events.filter((e) => e.type === "round.answered") as Array<
      Extract<KeelEvent, { type: "round.answered" }>
    >;
    expect(answered.map((e) => e.plugin)).toEqual(["a"]);
  });

  it("answered calls count against maxToolCalls like the model's", async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ name: "ping", args: { n: i } }));
    const { r } = await run([once("a", many)], { maxToolCalls: 3 });
    expect(ran).toHaveLength(3);
    expect(r.verdict).toMatchObject({ status: "stopped", reason: "max_tool_calls" });
  });
});

describe("round answers, adversarial: recovery", () => {
  it("a turn recovered after a crash (its rounds counted anew) never gives an answered call an id the session already holds", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keel-answer-rec-"));
    const db = path.join(dir, "sessions.sqlite");
    const runs: string[] = [];
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    let release!: (v: string) => void;
    const releaseP = new Promise<string>((r) => (release = r));
    const step = (name: string) =>
      defineTool({
        name,
        description: name,
        category: "info",
        execute: () => {
          runs.push(name);
          if (name === "slow" && runs.filter((n) => n === "slow").length === 1) {
            started();
            return releaseP;
          }
          return `${name} done`;
        },
      });
    const tools = [step("look"), step("slow"), step("look2")];
    const plan = ["look", "slow", "look2"];
    const planner = definePlugin({
      name: "planner",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", (e) => {
          const turn = e.messages.slice(e.messages.findLastIndex((m: Message) => m.role === "user"));
          const done = turn.filter((m: Message) => m.role === "tool").length;
          if (done < plan.length)
            return { kind: "answer", reason: `step ${done + 1}`, calls: [{ name: plan[done]!, args: {} }] };
          return { kind: "answer", reason: "done", text: "all done" };
        });
      },
    });
    const store1 = new SqliteSessionStore({ path: db });
    const a1 = await createAgent({
      provider: counted([]),
      store: store1,
      tools,
      plugins: [planner],
      lease: { ttlMs: 200 },
      recovery: "auto",
    });
    const s1 = await a1.session();
    const running = s1.run("go").catch(() => undefined);
    await startedP;
    store1.close();
    release("late");
    await running;
    const store2 = new SqliteSessionStore({ path: db });
    const a2 = await createAgent({
      provider: counted([{ text: "model" }]),
      store: store2,
      tools,
      plugins: [planner],
      lease: { ttlMs: 200 },
      recovery: "auto",
    });
    const s2 = await a2.session(s1.id, { waitMs: 5_000 });
    const r = await s2.recover().catch((e: unknown) => e);
    const ids = s2.messages.flatMap((m) =>
      m.role === "assistant" ? m.content.flatMap((b) => (b.type === "tool_call" ? [`${b.name}:${b.id}`] : [])) : [],
    );
    expect((r as { text?: string }).text).toBe("all done");
    expect(runs).toEqual(["look", "slow", "slow", "look2"]);
    expect(ids.map((i) => i.split(":")[0])).toEqual(["look", "slow", "look2"]);
    expect(new Set(ids.map((i) => i.split(":")[1])).size).toBe(3);
    await a2.close();
    store2.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe("round answers, adversarial: what listeners see", () => {
  it("an answer's text reaches listeners as the model's streamed text does (a CLI prints the answer from it)", async () => {
    const store = new MemorySessionStore();
    const texter = definePlugin({
      name: "texter",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("round.pre_request", () => ({ kind: "answer", reason: "canned", text: "the canned answer" }));
      },
    });
    const agent = await createAgent({ provider: counted([]), store, plugins: [texter] });
    const deltas: string[] = [];
    agent.subscribe((e) => {
      if (e.type === "model.delta" && e.channel === "text") deltas.push(e.text);
    });
    const session = await agent.session();
    const r = await session.run("go");
    await agent.close();
    expect(r.text).toBe("the canned answer");
    expect(deltas.join("")).toBe("the canned answer");
  });
});
