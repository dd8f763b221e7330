/**
 * Faults from plugins, hosts and providers that must never crash the process, hang a turn,
 * or make the stored session differ from the live one.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { AgentOptions, KeelEvent, ModelProvider } from "../src/index.ts";
import { createAgent, definePlugin, defineTool } from "../src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../testkit/src/index.ts";
import { SqliteSessionStore } from "../../store-sqlite/src/index.ts";

const diagnostics = (events: KeelEvent[]) =>
  events.filter((e): e is Extract<KeelEvent, { type: "diagnostic" }> => e.type === "diagnostic");

async function turnWith(plugins: AgentOptions["plugins"], steps = [{ text: "ok" }], extra: Partial<AgentOptions> = {}) {
  const provider = scriptedProvider(steps);
  const agent = await createAgent({ provider, store: new MemorySessionStore(), plugins, ...extra });
  const session = await agent.session();
  const result = await session.run("hello");
  const events = await session.events();
  return { agent, session, result, events, provider };
}

describe("handlers that return hostile values", () => {
  const throwingThenable = {
    // biome-ignore lint/suspicious/noThenProperty: a hostile thenable is what this test hands the kernel
    then() {
      throw new Error("then() exploded");
    },
  };
  const throwingGetter = {
    kind: "prompt_context",
    id: "g",
    domain: "d",
    get content(): string {
      throw new Error("getter exploded");
    },
  };

  it.each([
    [
      "a thenable whose then() throws (collect phase)",
      "turn.pre_prompt_context",
      () => throwingThenable,
      "KEEL_HANDLER_THREW",
    ],
    [
      "an async handler whose contribution's getter throws",
      "turn.pre_prompt_context",
      async () => throwingGetter,
      "KEEL_OUTPUT_UNREADABLE",
    ],
    [
      "a sync handler whose contribution's getter throws",
      "turn.pre_prompt_context",
      () => throwingGetter,
      "KEEL_OUTPUT_UNREADABLE",
    ],
    [
      "a thenable whose then() throws (waterfall phase)",
      "round.pre_request",
      () => throwingThenable,
      "KEEL_HANDLER_THREW",
    ],
  ] as const)(
    "%s is a failed handler, the next plugin still runs, the turn completes",
    async (_name, phase, handler, code) => {
      const after: string[] = [];
      const hostile = definePlugin({
        name: "hostile",
        version: "1.0.0",
        setup: (ctx) => ctx.on(phase, handler as never),
      });
      const next = definePlugin({
        name: "next",
        version: "1.0.0",
        setup: (ctx) => ctx.on(phase, () => void after.push(phase), { after: ["hostile"] }),
      });
      const { result, events, agent } = await turnWith([hostile, next]);
      expect(result.verdict).toEqual({ status: "completed", reason: "end_turn" });
      expect(after).toEqual([phase]);
      expect(diagnostics(events).map((d) => [d.code, d.plugin, d.phase])).toEqual([[code, "hostile", phase]]);
      await agent.close();
    },
  );
});

describe("values the log cannot hold", () => {
  it("a diagnostic with non-JSON data (a bigint) is rejected as unreadable; the SQLite log stays whole", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-robust-"));
    const odd = definePlugin({
      name: "odd",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.pre_policy", () => ({ kind: "diagnostic", code: "odd", message: "m", data: { n: 1n } as never })),
    });
    const agent = await createAgent({ provider: scriptedProvider([{ text: "ok" }]), plugins: [odd], home });
    const session = await agent.session();
    const result = await session.run("hello");
    expect(result.verdict.status).toBe("completed");
    const events = await session.events();
    expect(diagnostics(events)[0]).toMatchObject({ code: "KEEL_OUTPUT_UNREADABLE", plugin: "odd" });
    await agent.close();
    const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    expect(store.events(session.id).map((e) => e.type)).toEqual(events.map((e) => e.type));
    store.close();
  });

  it("tool arguments transformed into BigInts are stored (as strings), not lost with their batch", async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-robust-"));
    const big = defineTool({
      name: "big",
      description: "big",
      input: z.object({ n: z.string().transform((v) => BigInt(v)) }),
      execute: ({ n }) => String(n * 2n),
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ name: "big", args: { n: "21" } }] }, { text: "42" }]),
      tools: [big],
      home,
    });
    const session = await agent.session();
    const result = await session.run("double it");
    expect(result.verdict.status).toBe("completed");
    await agent.close();
    const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    const stored = store.events(session.id);
    expect(stored.find((e) => e.type === "tool.started")).toMatchObject({ args: { n: "21" } });
    const agent2 = await createAgent({ provider: scriptedProvider([]), store });
    const resumed = await agent2.session(session.id);
    expect(resumed.messages).toEqual(session.messages);
    await agent2.close();
    store.close();
  });
});

describe("cancel() always ends the turn", () => {
  it("while the approval callback never answers", async () => {
    const ask = definePlugin({
      name: "ask",
      version: "1.0.0",
      setup: (ctx) => ctx.on("tool.pre_call", () => ({ kind: "tool_decision", decision: "ask" })),
    });
    let seenSignal: AbortSignal | undefined;
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ name: "t", args: {} }] }]),
      store: new MemorySessionStore(),
      tools: [defineTool({ name: "t", description: "t", execute: () => "ran" })],
      plugins: [ask],
      approve: (req) => {
        seenSignal = req.signal;
        return new Promise<boolean>(() => {});
      },
    });
    const session = await agent.session();
    const running = session.run("go");
    while (!seenSignal) await new Promise((r) => setTimeout(r, 5));
    session.cancel();
    const result = await running;
    expect(result.verdict).toEqual({ status: "interrupted", reason: "aborted" });
    expect(seenSignal.aborted).toBe(true);
    const tool = session.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(tool)).toContain("waiting for approval");
    await agent.close();
  });

  it("while a provider ignores the abort signal", async () => {
    let started = false;
    const deaf: ModelProvider = {
      id: "test:deaf",
      async *stream() {
        started = true;
        await new Promise(() => {});
      },
    };
    const agent = await createAgent({ provider: deaf, store: new MemorySessionStore() });
    const session = await agent.session();
    const running = session.run("go");
    while (!started) await new Promise((r) => setTimeout(r, 5));
    session.cancel();
    expect((await running).verdict).toEqual({ status: "interrupted", reason: "aborted" });
    await agent.close();
  });
});

describe("closing", () => {
  it("session.close() cancels the running turn and waits for it before session.end", async () => {
    const order: string[] = [];
    const tracer = definePlugin({
      name: "tracer",
      version: "1.0.0",
      setup: (ctx) => ctx.on("session.end", () => void order.push("session.end")),
    });
    const slow = defineTool({
      name: "slow",
      description: "slow",
      execute: (_a, { signal }) =>
        new Promise((resolve) =>
          signal.addEventListener("abort", () => {
            order.push("tool aborted");
            resolve("stopped");
          }),
        ),
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ name: "slow", args: {} }] }]),
      store: new MemorySessionStore(),
      tools: [slow],
      plugins: [tracer],
    });
    const session = await agent.session();
    const running = session.run("go");
    await new Promise((r) => setTimeout(r, 20));
    await session.close();
    order.push("closed");
    expect((await running).verdict.status).toBe("interrupted");
    expect(order).toEqual(["tool aborted", "session.end", "closed"]);
    const types = (await agent.store.events(session.id)).map((e) => e.type);
    expect(types.at(-1)).toBe("turn.interrupted");
    await agent.close();
  });

  it("agent.close() waits for background jobs within the grace period, then aborts them and records it", async () => {
    let jobSignal: AbortSignal | undefined;
    const jobs = definePlugin({
      name: "jobs",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.post_turn", (e) => [
          {
            kind: "background_job",
            idempotencyKey: `quick-${e.turnId}`,
            name: "quick",
            run: () => new Promise((r) => setTimeout(r, 20)),
          },
          {
            kind: "background_job",
            idempotencyKey: `stuck-${e.turnId}`,
            name: "stuck",
            run: (signal: AbortSignal) => {
              jobSignal = signal;
              return new Promise(() => {});
            },
          },
        ]),
    });
    const store = new MemorySessionStore();
    const agent = await createAgent({ provider: scriptedProvider([{ text: "ok" }]), store, plugins: [jobs] });
    const session = await agent.session();
    await session.run("go");
    const t0 = performance.now();
    await agent.close({ graceMs: 100 });
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(jobSignal?.aborted).toBe(true);
    const done = store
      .events(session.id)
      .filter((e) => e.type === "job.completed")
      .map((e) => (e.type === "job.completed" ? [e.name, e.status] : []));
    expect(done).toEqual([
      ["quick", "ok"],
      ["stuck", "aborted"],
    ]);
    await expect(agent.session()).rejects.toMatchObject({ code: "KEEL_AGENT_CLOSED" });
  });
});

describe("sessions and edits", () => {
  it("two concurrent agent.session(id) calls return the same session", async () => {
    const store = new MemorySessionStore();
    const first = await createAgent({ provider: scriptedProvider([{ text: "a" }]), store });
    const s = await first.session();
    await s.run("hi");
    await first.close();
    const agent = await createAgent({ provider: scriptedProvider([{ text: "b" }]), store });
    const [a, b] = await Promise.all([agent.session(s.id), agent.session(s.id)]);
    expect(a).toBe(b);
    expect((await a.run("again")).verdict.status).toBe("completed");
    await agent.close();
  });

  it("a message_edit that would empty the history or drop this turn's input is rejected; the request stays valid", async () => {
    const wiper = definePlugin({
      name: "wiper",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("round.pre_request", (e) => ({
          kind: "message_edit",
          reason: "wipe",
          edits: [{ op: "replace", start: 0, end: e.messages.length, messages: [] }],
        })),
    });
    const { provider, events, agent } = await turnWith([wiper]);
    expect(provider.requests[0]!.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hello" }] }]);
    expect(
      diagnostics(events)
        .map((d) => d.message)
        .join(),
    ).toContain("message_edit rejected (history left as it was)");
    expect(events.some((e) => e.type === "context.edited")).toBe(false);
    await agent.close();
  });

  it("round.post_response sees the response's usage", async () => {
    let seen: unknown;
    const watcher = definePlugin({
      name: "watcher",
      version: "1.0.0",
      setup: (ctx) => ctx.on("round.post_response", (e) => void (seen = e.usage)),
    });
    const { agent } = await turnWith(
      [watcher],
      [{ text: "ok", usage: { inputTokens: 120, outputTokens: 7 } } as never],
    );
    expect(seen).toMatchObject({ inputTokens: 120, outputTokens: 7 });
    await agent.close();
  });

  it("a plugin tool whose input is not a zod schema is rejected at merge with a diagnostic; the turn goes on", async () => {
    const bad = definePlugin({
      name: "bad-tools",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.pre_tool_materialization", () => ({
          kind: "tool_bundle",
          bundleId: "b",
          tools: [{ name: "t", description: "t", input: { type: "object" } as never, execute: () => "x" }],
        })),
    });
    const { result, events, provider, agent } = await turnWith([bad]);
    expect(result.verdict.status).toBe("completed");
    expect(provider.requests[0]!.tools).toEqual([]);
    expect(diagnostics(events)[0]).toMatchObject({ code: "KEEL_CONTRIBUTION_INVALID", plugin: "bad-tools" });
    expect(diagnostics(events)[0]!.message).toContain("tools.0.input");
    await agent.close();
  });
});

describe("handler signals", () => {
  it("a settled handler's signal is never aborted later, and a plugin's throwing abort listener cannot crash the turn", async () => {
    let kept: AbortSignal | undefined;
    const listener = definePlugin({
      name: "listener",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("turn.pre_prompt_context", (_e, hook) => {
          kept = hook.signal;
          hook.signal.addEventListener("abort", () => {
            throw new Error("listener exploded");
          });
        }),
    });
    let started = false;
    const slowProvider: ModelProvider = {
      id: "test:slow",
      async *stream(_req, { signal }) {
        started = true;
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      },
    };
    const agent = await createAgent({ provider: slowProvider, store: new MemorySessionStore(), plugins: [listener] });
    const session = await agent.session();
    const running = session.run("go");
    while (!started) await new Promise((r) => setTimeout(r, 5));
    session.cancel();
    expect((await running).verdict.status).toBe("interrupted");
    expect(kept?.aborted).toBe(false);
    await agent.close();
  });
});
