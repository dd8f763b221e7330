/**
 * Class 6, crashes a plugin or tool can cause: every value from plugin or tool code is read
 * once inside a guard, every event is deep-frozen, ctx.on after setup is a diagnostic, and
 * an error escaping plugin code in a timer or a floating promise is recorded, closes the
 * open turn with a failed verdict and makes the CLI exit non-zero naming the plugin.
 */
import { describe, expect, it } from "vitest";
import type { KeelEvent, Message } from "../../packages/kernel/src/index.ts";
import { createAgent, definePlugin, guardProcess, PHASE_NAMES } from "../../packages/agent/src/node/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../packages/testkit/src/index.ts";
import type { PhaseName } from "../../packages/kernel/src/index.ts";
import { allEvents, keel, makeHome, sessionOf } from "./support/jobs.ts";

/** Node's stack frames, which must never reach the user. */
const STACK = /\n\s+at .+:\d+:\d+\)?\n/;

function toolConfig(execute: string): string {
  return `export default defineConfig({ name: "tools", tools: [{ name: "weird", description: "returns something odd", execute: ${execute} }], offline: { script: [{ toolCalls: [{ id: "c1", name: "weird", args: {} }] }, { text: "done" }] } });`;
}

/** Run a one-tool config; return the tool result text the model got and the run. */
async function toolRun(execute: string) {
  const { dir, home } = makeHome(toolConfig(execute));
  const r = await keel(dir, home, ["run", "call it"]);
  const events = allEvents(home);
  const result = events.find((e) => e.type === "message.appended" && e.message.role === "tool")! as Extract<
    KeelEvent,
    { type: "message.appended" }
  >;
  const text = (result.message as Extract<Message, { role: "tool" }>).content
    .map((b) => (b.type === "text" ? b.text : ""))
    .join("");
  return { r, events, text, isError: (result.message as { isError: boolean }).isError };
}

function closedOnce(events: readonly KeelEvent[]): KeelEvent[] {
  return events.filter((e) => e.type === "turn.completed" || e.type === "turn.failed" || e.type === "turn.interrupted");
}

describe("crashes: tool output read inside a guard (real CLI)", () => {
  it("a tool result whose content getter throws becomes an error result; the turn completes, exit 0, no stack trace", async () => {
    const { r, events, text, isError } = await toolRun(`() => ({ get content() { throw new Error("getter boom"); } })`);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(STACK);
    expect(isError).toBe(true);
    expect(text).toContain("KEEL_OUTPUT_UNREADABLE");
    expect(text).toContain("getter boom");
    expect(events.find((e) => e.type === "tool.completed")).toMatchObject({ status: "error" });
    expect(closedOnce(events).map((e) => e.type)).toEqual(["turn.completed"]);
  }, 60_000);

  it("a tool result that is a Proxy whose traps all throw becomes an error result", async () => {
    const { r, text, isError } = await toolRun(
      `() => new Proxy({}, { get() { throw new Error("trap get"); }, has() { throw new Error("trap has"); }, ownKeys() { throw new Error("trap keys"); }, getPrototypeOf() { throw new Error("trap proto"); } })`,
    );
    expect(r.code).toBe(0);
    expect(isError).toBe(true);
    expect(text).toContain("KEEL_OUTPUT_UNREADABLE");
  }, 60_000);

  it("a cyclic tool result, or one holding a bigint, is an error result that says why", async () => {
    const cyc = await toolRun(
      `() => { const o = { content: [] }; o.content.push({ type: "text", text: "x", self: o }); return o; }`,
    );
    expect(cyc.isError).toBe(true);
    expect(cyc.text).toContain("a cycle");
    const big = await toolRun(`() => ({ content: "n", extra: 10n })`);
    expect(big.isError).toBe(true);
    expect(big.text).toContain("bigint");
  }, 60_000);

  it("a tool result is read once: a getter that answers, then throws on a second read, gives its first answer", async () => {
    const { r, text, isError } = await toolRun(
      `() => { let n = 0; return { get content() { if (n++) throw new Error("read twice"); return "first read"; }, toJSON() { throw new Error("toJSON boom"); } }; }`,
    );
    expect(r.code).toBe(0);
    expect(isError).toBe(false);
    expect(text).toBe("first read");
  }, 60_000);
});

describe("crashes: contributions read inside a guard (real CLI)", () => {
  const hostile = (ret: string) => `
const hostile = definePlugin({ name: "hostile", version: "1.0.0", setup(ctx) { ctx.on("turn.pre_prompt_context", () => ${ret}); } });
const polite = definePlugin({ name: "polite", version: "1.0.0", setup(ctx) { ctx.on("turn.pre_prompt_context", () => ({ kind: "prompt_context", id: "polite", domain: "test", content: "polite context" })); } });
export default defineConfig({ name: "contrib", plugins: [hostile, polite], offline: { script: [{ text: "ok" }] } });`;

  it("a contribution with a throwing getter is rejected with KEEL_OUTPUT_UNREADABLE naming plugin and phase; the turn goes on", async () => {
    const { dir, home } = makeHome(
      hostile(
        `({ kind: "prompt_context", id: "x", domain: "test", get content() { throw new Error("content getter"); } })`,
      ),
    );
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(0);
    const events = allEvents(home);
    const d = events.find((e) => e.type === "diagnostic" && e.code === "KEEL_OUTPUT_UNREADABLE");
    expect(d).toMatchObject({ plugin: "hostile", phase: "turn.pre_prompt_context" });
    expect((d as { message: string }).message).toContain("content getter");
    const manifest = events.find((e) => e.type === "prompt.compiled") as Extract<
      KeelEvent,
      { type: "prompt.compiled" }
    >;
    expect(manifest.manifest.context.map((c) => c.plugin)).toEqual(["polite"]);
    expect(closedOnce(events).map((e) => e.type)).toEqual(["turn.completed"]);
  }, 60_000);

  it("a Proxy contribution whose traps throw is rejected, coded, and the turn completes", async () => {
    const { dir, home } = makeHome(
      hostile(
        `new Proxy({}, { get() { throw new Error("proxy get"); }, ownKeys() { throw new Error("proxy keys"); } })`,
      ),
    );
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(STACK);
    expect(allEvents(home).find((e) => e.type === "diagnostic" && e.plugin === "hostile")).toMatchObject({
      phase: "turn.pre_prompt_context",
    });
  }, 60_000);

  it("a Proxy contribution that answers differently on each read is read once: what was validated is what is used", async () => {
    const { dir, home } = makeHome(
      hostile(
        `(() => { let reads = 0; return new Proxy({ kind: "prompt_context", id: "shifty", domain: "test", content: "short" }, { get(t, k) { if (k === "content") return reads++ ? "x".repeat(5000) : "short"; return t[k]; } }); })()`,
      ),
    );
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(0);
    const manifest = allEvents(home).find((e) => e.type === "prompt.compiled") as Extract<
      KeelEvent,
      { type: "prompt.compiled" }
    >;
    expect(manifest.manifest.context.find((c) => c.id === "shifty")).toMatchObject({ chars: 5 });
  }, 60_000);

  it("a diagnostic whose data has a throwing toJSON is stored without it; the log stays whole", async () => {
    const { dir, home } = makeHome(
      hostile(
        `({ kind: "diagnostic", code: "hostile.note", message: "m", data: { ok: 1, toJSON() { throw new Error("toJSON boom"); } } })`,
      ),
    );
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(0);
    const events = allEvents(home);
    expect(events.find((e) => e.type === "diagnostic" && e.code === "hostile.note")).toMatchObject({ data: { ok: 1 } });
    expect(closedOnce(events).map((e) => e.type)).toEqual(["turn.completed"]);
  }, 60_000);
});

describe("crashes: late ctx.on and the process-level last line of defence (real CLI)", () => {
  it("ctx.on from a timer after setup is recorded as KEEL_REGISTRY_FROZEN naming the plugin; no crash, exit 0", async () => {
    const { dir, home } = makeHome(`
const late = definePlugin({ name: "late-subscriber", version: "1.0.0", setup(ctx) { setTimeout(() => ctx.on("turn.post_turn", () => undefined), 50); } });
export default defineConfig({ name: "late", plugins: [late], offline: { script: [{ text: "ok", delayMs: 400 }] } });`);
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(STACK);
    const d = allEvents(home).find((e) => e.type === "diagnostic" && e.code === "KEEL_REGISTRY_FROZEN");
    expect(d).toMatchObject({ plugin: "late-subscriber", phase: "turn.post_turn", level: "error" });
  }, 60_000);

  it("an uncaught exception from a plugin timer mid-turn: fault recorded, turn closed failed, exit 1 within bounds, message names the plugin", async () => {
    const { dir, home } = makeHome(`
const ticker = definePlugin({ name: "ticker", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { setTimeout(() => { throw new Error("tick exploded"); }, 50); }); } });
export default defineConfig({ name: "fault", plugins: [ticker], offline: { script: [{ hang: true }] } });`);
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(10_000);
    expect(r.stderr).toContain('KEEL_PROCESS_FAULT (plugin "ticker", phase "round.pre_request")');
    expect(r.stderr).toContain("tick exploded");
    expect(r.stderr).not.toMatch(STACK);
    const events = allEvents(home);
    const session = sessionOf(r);
    expect(events.find((e) => e.type === "fault")).toMatchObject({
      code: "KEEL_PROCESS_FAULT",
      source: "uncaughtException",
      plugin: "ticker",
      turnId: `${session}/1`,
    });
    const closed = closedOnce(events);
    expect(closed).toHaveLength(1);
    expect(closed[0]).toMatchObject({
      type: "turn.failed",
      verdict: { status: "failed", reason: "process_fault", code: "KEEL_PROCESS_FAULT", plugin: "ticker" },
    });
  }, 60_000);

  it("an unhandled rejection from a plugin tool mid-call: the call gets a result (pairing intact), the turn fails, message names plugin and tool", async () => {
    const { dir, home } = makeHome(`
const sloppy = definePlugin({ name: "sloppy-tools", version: "1.0.0", setup(ctx) {
  ctx.on("turn.pre_tool_materialization", () => ({ kind: "tool_bundle", bundleId: "sloppy", tools: [{ name: "fetchy", description: "fetches", execute: (_a, { signal }) => {
    setTimeout(() => { Promise.reject(new Error("lost rejection")); }, 30);
    return new Promise((resolve) => { const t = setTimeout(resolve, 5000, "late"); signal.addEventListener("abort", () => { clearTimeout(t); resolve("aborted"); }); });
  } }] }));
} });
export default defineConfig({ name: "fault2", plugins: [sloppy], offline: { script: [{ toolCalls: [{ id: "f1", name: "fetchy", args: {} }] }, { text: "never" }] } });`);
    const r = await keel(dir, home, ["run", "fetch"]);
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(10_000);
    expect(r.stderr).toMatch(
      /KEEL_PROCESS_FAULT \(plugin "sloppy-tools", tool "fetchy"\): An unhandled promise rejection/,
    );
    expect(r.stderr).not.toMatch(STACK);
    const events = allEvents(home);
    expect(events.find((e) => e.type === "fault")).toMatchObject({
      source: "unhandledRejection",
      plugin: "sloppy-tools",
    });
    const calls = events
      .filter((e) => e.type === "message.appended" && e.message.role === "assistant")
      .flatMap((e) =>
        (e as Extract<KeelEvent, { type: "message.appended" }>).message.content
          .filter((b) => b.type === "tool_call")
          .map((b) => (b as { id: string }).id),
      );
    const results = events
      .filter((e) => e.type === "message.appended" && e.message.role === "tool")
      .map(
        (e) => ((e as Extract<KeelEvent, { type: "message.appended" }>).message as { toolCallId: string }).toolCallId,
      );
    expect(results).toEqual(calls);
    expect(closedOnce(events)).toMatchObject([
      { type: "turn.failed", verdict: { reason: "process_fault", plugin: "sloppy-tools" } },
    ]);
  }, 60_000);

  it("an uncaught exception after the turn (a background handler's timer) still makes the exit non-zero with a coded message", async () => {
    const { dir, home } = makeHome(`
const after = definePlugin({ name: "afterburner", version: "1.0.0", setup(ctx) { ctx.on("turn.post_turn", () => new Promise((resolve) => setTimeout(() => { resolve(undefined); setTimeout(() => { throw new Error("after the turn"); }, 10); }, 20)), { await: "background" }); } });
export default defineConfig({ name: "fault3", plugins: [after], offline: { script: [{ text: "ok" }] } });`);
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('KEEL_PROCESS_FAULT (plugin "afterburner"');
    expect(r.stderr).not.toMatch(STACK);
    expect(closedOnce(allEvents(home))).toMatchObject([{ type: "turn.completed" }]);
  }, 60_000);
});

describe("crashes: faults outside a turn (real CLI)", () => {
  it("a timer left by a plugin's setup that throws while the agent is still being built: coded message, exit 1, no stack trace", async () => {
    const { dir, home } = makeHome(`
const early = definePlugin({ name: "early-bird", version: "1.0.0", setup() { setTimeout(() => { throw new Error("too early"); }, 5); } });
const slow = definePlugin({ name: "slow-setup", version: "1.0.0", async setup() { await new Promise((r) => setTimeout(r, 100)); } });
export default defineConfig({ name: "early", plugins: [early, slow], offline: { script: [{ text: "ok" }] } });`);
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('KEEL_PROCESS_FAULT (plugin "early-bird", phase "setup")');
    expect(r.stderr).not.toMatch(STACK);
  }, 60_000);

  it("a plugin interval that throws on every tick: the turn closes once, the log keeps a bounded number of fault events, stderr a bounded number of lines", async () => {
    const { dir, home } = makeHome(`
const noisy = definePlugin({ name: "noisy", version: "1.0.0", setup(ctx) { ctx.on("round.pre_request", () => { const t = setInterval(() => { throw new Error("tick"); }, 1); setTimeout(() => clearInterval(t), 600); }); } });
export default defineConfig({ name: "noisy", plugins: [noisy], offline: { script: [{ hang: true }] } });`);
    const r = await keel(dir, home, ["run", "hi"]);
    expect(r.code).toBe(1);
    const events = allEvents(home);
    const faults = events.filter((e) => e.type === "fault");
    expect(faults.length).toBeGreaterThan(0);
    expect(faults.length).toBeLessThanOrEqual(20);
    expect(closedOnce(events)).toMatchObject([
      { type: "turn.failed", verdict: { reason: "process_fault", plugin: "noisy" } },
    ]);
    // At most 5 fault lines, one "more faults followed", and the failed turn's own coded line.
    expect(r.stderr.split("\n").filter((l) => l.includes("KEEL_PROCESS_FAULT")).length).toBeLessThanOrEqual(7);
  }, 60_000);
});

describe("crashes: frozen events and the library default", () => {
  it("every event handed to every phase's handlers is deep-frozen (no plain object or array left writable)", async () => {
    const unfrozen: string[] = [];
    const walk = (v: unknown, path: string, seen: Set<object>) => {
      if (v === null || typeof v !== "object" || seen.has(v)) return;
      seen.add(v);
      const proto = Object.getPrototypeOf(v);
      if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) return;
      if (!Object.isFrozen(v)) unfrozen.push(path);
      for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`, seen);
    };
    const seenPhases = new Set<string>();
    const watcher = definePlugin({
      name: "watcher",
      version: "1.0.0",
      setup(ctx) {
        for (const phase of PHASE_NAMES)
          ctx.on(phase as PhaseName, ((e: object) => void (seenPhases.add(phase), walk(e, phase, new Set()))) as never);
        ctx.on(
          "turn.pre_tool_materialization",
          () => ({
            kind: "tool_bundle",
            bundleId: "t",
            tools: [{ name: "echo", description: "echo", execute: (a: unknown) => JSON.stringify(a) }],
          }),
          { id: "tools" },
        );
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ name: "echo", args: { deep: { list: [1, { x: 2 }] } } }] },
        { text: "done" },
      ]),
      store: new MemorySessionStore(),
      plugins: [watcher],
    });
    const s = await agent.session();
    await s.run("hi", { metadata: { user: { id: "u1", tags: ["a"] } } });
    await agent.close();
    expect(seenPhases.size).toBe(PHASE_NAMES.length);
    expect(unfrozen).toEqual([]);
  });

  it("a history read back from the log on resume is deep-frozen too: a plugin cannot rewrite what the provider is sent", async () => {
    const store = new MemorySessionStore();
    const first = await createAgent({ provider: scriptedProvider([{ text: "ok" }]), store });
    const s1 = await first.session();
    await s1.run("the original words");
    await first.close();
    // The log hands back plain (unfrozen) copies, as SQLite does.
    const thawed = new MemorySessionStore();
    thawed.createSession({ id: s1.id, agent: "agent", createdAt: Date.now() });
    for (const e of store.events(s1.id)) thawed.append(JSON.parse(JSON.stringify(e)));
    let threw = false;
    const rewriter = definePlugin({
      name: "rewriter",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on("round.pre_request", (e) => {
          try {
            (e.history[0]!.content[0] as { text: string }).text = "planted";
          } catch {
            threw = true;
          }
        }),
    });
    const provider = scriptedProvider([{ text: "ok" }]);
    const second = await createAgent({ provider, store: thawed, plugins: [rewriter] });
    await (await second.session(s1.id)).run("next");
    await second.close();
    expect(threw).toBe(true);
    expect(JSON.stringify(provider.requests[0]!.messages)).toContain("the original words");
    expect(JSON.stringify(provider.requests[0]!.messages)).not.toContain("planted");
  });

  it("handlers get a read-only policy view (no merge) and a copy of the host's metadata (the host's objects stay writable)", async () => {
    let mergeType = "";
    const hostMeta = { user: { id: "u1" } };
    const p = definePlugin({
      name: "peek",
      version: "1.0.0",
      setup: (ctx) =>
        ctx.on(
          "turn.pre_policy",
          (e) => void (mergeType = typeof (e.policies as unknown as { merge?: unknown }).merge),
        ),
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "ok" }]),
      store: new MemorySessionStore(),
      plugins: [p],
    });
    await (await agent.session()).run("hi", { metadata: hostMeta });
    await agent.close();
    expect(mergeType).toBe("undefined");
    expect(Object.isFrozen(hostMeta.user)).toBe(false);
  });

  it("a plugin object that is a Proxy with throwing traps, or whose options schema throws, is a located registration error, not a raw throw", async () => {
    const proxy = new Proxy(
      {},
      {
        get() {
          throw new Error("plugin trap");
        },
      },
    );
    await expect(
      createAgent({ provider: scriptedProvider([]), store: new MemorySessionStore(), plugins: [proxy as never] }),
    ).rejects.toMatchObject({
      code: "KEEL_PLUGIN_INVALID",
      location: { path: "plugins[0]" },
      message: expect.stringContaining("plugin trap"),
    });
    // A schema whose validation runs plugin code that throws (as a zod refine would).
    const options = {
      safeParse: () => {
        throw new Error("refine trap");
      },
    };
    const schemer = definePlugin({
      name: "schemer",
      version: "1.0.0",
      options: options as never,
      input: { a: 1 } as never,
      setup() {},
    });
    await expect(
      createAgent({ provider: scriptedProvider([]), store: new MemorySessionStore(), plugins: [schemer] }),
    ).rejects.toMatchObject({
      code: "KEEL_PLUGIN_OPTIONS_INVALID",
      plugin: "schemer",
      message: expect.stringContaining("refine trap"),
    });
  });

  it("the kernel installs no process handlers by itself; guardProcess is opt-in and uninstall restores the host's handlers", async () => {
    const before = [process.listenerCount("uncaughtException"), process.listenerCount("unhandledRejection")];
    const agent = await createAgent({ provider: scriptedProvider([{ text: "ok" }]), store: new MemorySessionStore() });
    await (await agent.session()).run("hi");
    expect([process.listenerCount("uncaughtException"), process.listenerCount("unhandledRejection")]).toEqual(before);
    const guard = guardProcess(agent);
    expect([process.listenerCount("uncaughtException"), process.listenerCount("unhandledRejection")]).toEqual([
      before[0]! + 1,
      before[1]! + 1,
    ]);
    guard.uninstall();
    guard.uninstall();
    expect([process.listenerCount("uncaughtException"), process.listenerCount("unhandledRejection")]).toEqual(before);
    await agent.close();
  });

  it("a guarded embedding app: a fault while a turn is open closes that turn with a failed verdict naming the plugin", async () => {
    const gate = definePlugin({
      name: "gatekeeper",
      version: "1.0.0",
      setup: (ctx) => ctx.on("round.pre_request", () => undefined),
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ hang: true }]),
      store: new MemorySessionStore(),
      plugins: [gate],
    });
    const s = await agent.session();
    const faults: string[] = [];
    const guard = guardProcess(agent, { onFault: (f) => faults.push(f.error.message) });
    const running = s.run("hi");
    await new Promise((r) => setTimeout(r, 30));
    // What the process handler does for a real uncaught exception (emitting it here would also reach vitest's own handler).
    const recorded = agent.recordFault({
      source: "uncaughtException",
      error: new (await import("../../packages/kernel/src/index.ts")).KeelError("KEEL_PROCESS_FAULT", "boom", {
        plugin: "gatekeeper",
      }),
    });
    const result = await running;
    guard.uninstall();
    expect(recorded).toEqual([result.turnId]);
    expect(result.verdict).toMatchObject({ status: "failed", reason: "process_fault", plugin: "gatekeeper" });
    const events = await s.events();
    expect(events.filter((e) => e.type === "fault")).toHaveLength(1);
    expect(closedOnce(events)).toHaveLength(1);
    await agent.close();
  });
});
