/**
 * Start behaviour through the kernel (createAgent + scriptedProvider) with real MCP servers
 * over stdio: a fast fixture server and a slow one (delayed-server.mjs, which writes its
 * spawn and ready times). The first request must not wait for the slow server; it joins a
 * later turn as a tools change; `required` servers are waited for; late failures are
 * diagnostics; closing while a server starts leaves no process and no unhandled rejection.
 * A slow server is gated: it stays "starting" until the test opens its gate, once what must
 * happen before it is ready (a request left, a turn started) has happened — no fixed delays.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAgent, type AgentEvent, type KeelEvent } from "@keel/agent";
import { MemorySessionStore, scriptedProvider, type ScriptStep } from "@keel/testkit";
import { SqliteSessionStore } from "@keel/store-sqlite";
import { mcp, type McpOptions } from "../src/index.ts";
import { alive, childPids, fixture, tempDirs, until } from "./support.ts";

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

// Unhandled rejections anywhere in these tests fail them (vitest reports them too, but says less).
const rejections: unknown[] = [];
const onRejection = (reason: unknown) => rejections.push(reason);
beforeAll(() => process.on("unhandledRejection", onRejection));
afterAll(() => {
  process.off("unhandledRejection", onRejection);
  expect(rejections).toEqual([]);
  expect(childPids().filter(alive)).toEqual([]);
});

interface Milestone {
  event: "spawned" | "ready" | "listed";
  pid: number;
  t: number;
}
const milestones = (log: string): Milestone[] =>
  existsSync(log)
    ? readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Milestone)
    : [];
const readyAt = (log: string) => milestones(log).find((m) => m.event === "ready")?.t;
const reached = (log: string, event: Milestone["event"]) => milestones(log).some((m) => m.event === event);

/**
 * A delayed fixture server whose tools are `<prefix>_lookup` and `<prefix>_echo`: ready at
 * once (`0`), or `"gated"`: starting (stdin unread, like a server loading) until `release()`.
 */
function delayed(prefix: string, delay: 0 | "gated", extra: Record<string, unknown> = {}) {
  const dir = dirs.make();
  const log = join(dir, `${prefix}.jsonl`);
  const gate = join(dir, `${prefix}.release`);
  return {
    log,
    config: {
      ...fixture("delayed-server.mjs", {
        TOOL_PREFIX: prefix,
        FIXTURE_LOG: log,
        ...(delay === "gated" ? { RELEASE_FILE: gate } : { DELAY_MS: "0" }),
      }),
      ...extra,
    },
    release: () => writeFileSync(gate, ""),
  };
}

/** A server that fails (stderr `message`, exit `code`) once `release()` is called: a start failure after the first turn began. */
function failing(message: string, code: number) {
  const gate = join(dirs.make(), "fail.release");
  const script = `const { existsSync } = require("node:fs"); const check = () => existsSync(process.env.RELEASE_FILE) ? (console.error(${JSON.stringify(message)}), process.exit(${code})) : setTimeout(check, 10); check();`;
  return {
    config: { command: process.execPath, args: ["-e", script], env: { RELEASE_FILE: gate } },
    release: () => writeFileSync(gate, ""),
  };
}

/**
 * An agent on a memory store and its first session. `whileOpening` runs while the session
 * opens (session.start, which may wait for servers); the session is not open before it ends.
 */
async function setup(
  steps: ScriptStep[],
  options: McpOptions,
  whileOpening?: (opened: () => boolean) => Promise<void>,
) {
  const provider = scriptedProvider(steps);
  // When each request left (the provider is called the moment the kernel sends it).
  const sentAt: number[] = [];
  const stream = provider.stream.bind(provider);
  provider.stream = (request, o) => (sentAt.push(Date.now()), stream(request, o));
  const agent = await createAgent({
    provider,
    store: new MemorySessionStore(),
    plugins: [mcp({ auditPath: false, ...options })],
  });
  const live: AgentEvent[] = [];
  agent.subscribe((e) => void live.push(e));
  const t0 = Date.now();
  let open = false;
  const [session] = await Promise.all([agent.session().then((s) => ((open = true), s)), whileOpening?.(() => open)]);
  return { provider, agent, session, sentAt, live, t0 };
}

const mcpNames = (tools: ReadonlyArray<{ name: string }>) =>
  tools.map((t) => t.name).filter((n) => n.startsWith("mcp__"));
const diagnostics = (events: readonly (AgentEvent | KeelEvent)[], code: string) =>
  events.filter((e): e is Extract<KeelEvent, { type: "diagnostic" }> => e.type === "diagnostic" && e.code === code);

describe("start: the first turn does not wait for slow servers", () => {
  it("the first request leaves before the slow server is ready, with the fast server's tools; the slow one joins the next turn as a tools change, appended", async () => {
    const fast = delayed("fast", 0);
    const slow = delayed("slow", "gated");
    const { provider, agent, session, sentAt, live, t0 } = await setup([{ text: "one" }, { text: "two" }], {
      servers: { fast: fast.config, slow: slow.config },
    });
    try {
      await session.run("look up the record with key 7");
      const first = provider.requests[0]!;
      expect(mcpNames(first.tools)).toEqual(expect.arrayContaining(["mcp__fast__fast_lookup", "mcp__fast__fast_echo"]));
      expect(mcpNames(first.tools).some((n) => n.startsWith("mcp__slow__"))).toBe(false);
      // The slow server's gate is still shut: the turn went on without it, long before its
      // 30 s connect timeout (the first request waited for the fast one and the grace only).
      expect(readyAt(slow.log)).toBeUndefined();
      expect(sentAt[0]! - t0).toBeLessThan(15_000);
      slow.release();

      // Once every server settled, a background diagnostic says who joined late and their start times.
      await until(() => diagnostics(live, "mcp.servers_started").length > 0, 20_000, "mcp.servers_started");
      const started = diagnostics(live, "mcp.servers_started")[0]!;
      expect(started.data).toMatchObject({
        late: ["slow"],
        servers: expect.arrayContaining([expect.objectContaining({ server: "slow", ok: true, tools: 2 })]),
      });
      expect(readyAt(slow.log)).toBeGreaterThan(sentAt[0]!);

      await session.run("echo the text hello");
      const second = provider.requests[1]!;
      const firstMcp = mcpNames(first.tools);
      const secondMcp = mcpNames(second.tools);
      expect(secondMcp).toEqual(expect.arrayContaining(["mcp__slow__slow_lookup", "mcp__slow__slow_echo"]));
      // Cache friendly: the tools sent before are still the prefix; the late ones come after.
      expect(secondMcp.slice(0, firstMcp.length)).toEqual(firstMcp);
      const events = await session.events();
      const changed = diagnostics(events, "mcp.tools_changed");
      expect(changed).toHaveLength(1);
      expect(changed[0]!.data).toMatchObject({ joined: ["slow"], changed: [], left: [] });
      // Announced in the turn the tools joined.
      expect(changed[0]!.turnId).toBe(
        events.find((e) => e.type === "turn.started" && e.input === "echo the text hello")!.turnId,
      );
      const curation = diagnostics(events, "mcp.curation");
      expect(curation.map((d) => (d.data as { reset: boolean }).reset)).toEqual([false, false]);
    } finally {
      await agent.close();
    }
  });

  it("a required server is waited for: the first request carries its tools", async () => {
    const fast = delayed("fast", 0);
    const slow = delayed("slow", "gated", { required: true });
    // No grace: without `required` the session would open the moment the fast server is ready.
    const { provider, agent, session, sentAt, live } = await setup(
      [{ text: "one" }],
      { servers: { fast: fast.config, slow: slow.config }, startGraceMs: 0 },
      async (opened) => {
        try {
          await until(() => reached(fast.log, "listed"), 20_000, "the fast server's tools/list");
          expect(opened()).toBe(false);
        } finally {
          slow.release();
        }
      },
    );
    try {
      await session.run("look up key 1");
      expect(sentAt[0]!).toBeGreaterThanOrEqual(readyAt(slow.log)!);
      expect(mcpNames(provider.requests[0]!.tools)).toEqual(
        expect.arrayContaining(["mcp__fast__fast_lookup", "mcp__slow__slow_lookup"]),
      );
      expect(diagnostics(live, "mcp.servers_started")).toEqual([]);
    } finally {
      await agent.close();
    }
  });

  it("startGraceMs at least connectTimeoutMs waits for every server (the old behaviour)", async () => {
    const fast = delayed("fast", 0);
    const slow = delayed("slow", "gated");
    const { provider, agent, session, sentAt } = await setup(
      [{ text: "one" }],
      { servers: { fast: fast.config, slow: slow.config }, startGraceMs: 30_000 },
      // The gate stays shut past the default grace (500 ms) after the fast server was ready.
      async (opened) => {
        try {
          await until(() => reached(fast.log, "listed"), 20_000, "the fast server's tools/list");
          await new Promise((r) => setTimeout(r, 800));
          expect(opened()).toBe(false);
        } finally {
          slow.release();
        }
      },
    );
    try {
      await session.run("look up key 1");
      expect(sentAt[0]!).toBeGreaterThanOrEqual(readyAt(slow.log)!);
      expect(mcpNames(provider.requests[0]!.tools)).toContain("mcp__slow__slow_echo");
    } finally {
      await agent.close();
    }
  });

  it("a server that fails after the first turn started is a KEEL_MCP_SERVER_START_FAILED diagnostic with its stderr, without another turn", async () => {
    const fast = delayed("fast", 0);
    const late = failing("late boom: no token", 4);
    const { agent, session, live } = await setup([{ text: "one" }], {
      servers: { fast: fast.config, late: late.config },
    });
    try {
      await session.run("hi");
      expect(diagnostics(live, "KEEL_MCP_SERVER_START_FAILED")).toEqual([]);
      late.release();
      await until(() => diagnostics(live, "KEEL_MCP_SERVER_START_FAILED").length > 0, 20_000, "the late failure");
      const [failed] = diagnostics(live, "KEEL_MCP_SERVER_START_FAILED");
      expect(failed!.message).toContain('"late"');
      expect(failed!.message).toContain("late boom: no token");
      expect(failed!.plugin).toBe("@keel/plugin-mcp");
      expect(failed!.phase).toBe("session.start");
      expect(failed!.data).toMatchObject({
        server: "late",
        stderrTail: expect.stringContaining("late boom"),
        durationMs: expect.any(Number),
      });
      // Reported once: the next turn does not repeat it.
      await session.run("again");
      expect(diagnostics(await session.events(), "KEEL_MCP_SERVER_START_FAILED")).toHaveLength(1);
    } finally {
      await agent.close();
    }
  });

  it("a tool of a server still starting, called again by name from history, waits for the server and runs", async () => {
    const fast = delayed("fast", 0);
    const slow = delayed("slow", "gated");
    const { provider, agent, session, sentAt } = await setup(
      [
        // Turn 1: the server is not in the catalog yet, so the kernel answers "no such tool".
        { toolCalls: [{ id: "a1", name: "mcp__slow__slow_echo", args: { text: "first" } }] },
        { text: "not there yet" },
        // Turn 2: the same name, now in history: a hidden stand-in waits for the server.
        { toolCalls: [{ id: "a2", name: "mcp__slow__slow_echo", args: { text: "second" } }] },
        { text: "done" },
      ],
      { servers: { fast: fast.config, slow: slow.config } },
    );
    try {
      await session.run("echo first");
      expect(readyAt(slow.log)).toBeUndefined();
      const second = session.run("echo second");
      // The second turn's first request (the call) has left while the server is still starting.
      await until(() => sentAt.length >= 3, 20_000, "the second turn's first request");
      expect(readyAt(slow.log)).toBeUndefined();
      slow.release();
      await second;
      const results = session.messages.filter((m) => m.role === "tool");
      const text = (i: number) => results[i]!.content.map((b) => (b.type === "text" ? b.text : "")).join("");
      expect(text(0)).toContain("KEEL_TOOL_UNKNOWN");
      expect(text(1)).toBe("slow: second");
      // The stand-in was hidden: the second turn's first request did not advertise it.
      expect(mcpNames(provider.requests[2]!.tools)).not.toContain("mcp__slow__slow_echo");
    } finally {
      await agent.close();
    }
  });

  it("closing the session while a server is still starting ends its process, reports no failure and rejects nothing", async () => {
    const fast = delayed("fast", 0);
    const slow = delayed("slow", "gated");
    // Its gate never opens; it reads no stdin meanwhile, so the close ends it by SIGTERM, stopGraceMs in.
    const { agent, session, live } = await setup([{ text: "one" }], {
      servers: { fast: fast.config, slow: slow.config },
      stopGraceMs: 200,
    });
    await session.run("hi");
    await until(() => milestones(slow.log).some((m) => m.event === "spawned"), 10_000, "the slow server to spawn");
    const pid = milestones(slow.log)[0]!.pid;
    expect(alive(pid)).toBe(true);
    const t = Date.now();
    await session.close();
    await agent.close();
    // The close does not wait for the slow server (nor for the session's background grace).
    expect(Date.now() - t).toBeLessThan(15_000);
    await until(() => !alive(pid), 10_000, "the slow server's process to end");
    expect(readyAt(slow.log)).toBeUndefined();
    expect(diagnostics(live, "KEEL_MCP_SERVER_START_FAILED")).toEqual([]);
    await new Promise((r) => setTimeout(r, 200));
    expect(rejections).toEqual([]);
  });
});

describe("start: a session resumed in a new process sends its stored tool list from the first request", () => {
  /**
   * An agent on `dir`'s session and audit files (a new one per call: a new process, as far as
   * the plugin knows); `turnsStarted()` counts the turns it has started.
   */
  async function agentOn(
    dir: string,
    steps: ScriptStep[],
    servers: McpOptions["servers"],
    more: Omit<McpOptions, "servers"> = {},
    internals?: Parameters<typeof mcp>[1],
  ) {
    const provider = scriptedProvider(steps);
    const sentAt: number[] = [];
    const stream = provider.stream.bind(provider);
    provider.stream = (request, o) => (sentAt.push(Date.now()), stream(request, o));
    const agent = await createAgent({
      provider,
      store: new SqliteSessionStore({ path: join(dir, "sessions.sqlite") }),
      plugins: [mcp({ auditPath: join(dir, "mcp-audit.sqlite"), servers, ...more }, internals)],
    });
    let started = 0;
    agent.subscribe((e) => void (e.type === "turn.started" && started++));
    return { provider, agent, sentAt, turnsStarted: () => started };
  }

  /** Open `gated` once `n` turns have started and no request has left (they wait for it), then run on. */
  async function releaseWhenWaiting(p: { turnsStarted(): number; sentAt: number[] }, n: number, gated: () => void) {
    try {
      await until(() => p.turnsStarted() >= n, 20_000, `${n} turns to start`);
      expect(p.sentAt).toEqual([]);
    } finally {
      gated();
    }
  }

  it("a kept server still starting is waited for: the first request's tools equal the stored list, and the next turn's too", async () => {
    const dir = dirs.make();
    const fast = delayed("fast", 0);
    const p1 = await agentOn(dir, [{ text: "one" }, { text: "two" }], {
      fast: fast.config,
      slow: delayed("slow", 0, { required: true }).config,
    });
    const s1 = await p1.agent.session();
    await s1.run("look up the record with key 7");
    await s1.run("echo the text hello");
    const stored = mcpNames(p1.provider.requests[1]!.tools);
    expect(stored).toEqual(expect.arrayContaining(["mcp__slow__slow_lookup", "mcp__slow__slow_echo"]));
    await p1.agent.close();

    // The same session in a new agent, while the slow server is still starting (past startGraceMs).
    const slow = delayed("slow", "gated");
    const p2 = await agentOn(dir, [{ text: "three" }, { text: "four" }], { fast: fast.config, slow: slow.config });
    try {
      const s2 = await p2.agent.session(s1.id);
      await Promise.all([s2.run("look up key 8"), releaseWhenWaiting(p2, 1, slow.release)]);
      expect(mcpNames(p2.provider.requests[0]!.tools)).toEqual(stored);
      // Ordered against the slow server's own clock: the request left once it was ready.
      expect(p2.sentAt[0]!).toBeGreaterThanOrEqual(readyAt(slow.log)!);
      await s2.run("echo the text again");
      expect(mcpNames(p2.provider.requests[1]!.tools)).toEqual(stored);
      const events = await s2.events();
      const waited = diagnostics(events, "mcp.kept_servers_waited");
      expect(waited).toHaveLength(1);
      // The product's bound (no internal knob here): 10 s, below the 30 s connect timeout.
      expect(waited[0]!.data).toMatchObject({
        servers: ["slow"],
        ready: ["slow"],
        failed: [],
        starting: [],
        limitMs: 10_000,
      });
      // Nothing joined later: the list did not change.
      expect(diagnostics(events, "mcp.tools_changed")).toEqual([]);
      expect(diagnostics(events, "mcp.curation").map((d) => (d.data as { reset: boolean }).reset)).toEqual([
        false,
        false,
        false,
        false,
      ]);
    } finally {
      await p2.agent.close();
    }
  });

  it("a kept server that fails is dropped once with KEEL_MCP_SERVER_START_FAILED in that first turn; a server gone from the config and a new slow one hold nothing up", async () => {
    const dir = dirs.make();
    const fast = delayed("fast", 0);
    const p1 = await agentOn(dir, [{ text: "one" }], {
      fast: fast.config,
      slow: delayed("slow", 0, { required: true }).config,
      gone: delayed("gone", 0, { required: true }).config,
    });
    const s1 = await p1.agent.session();
    await s1.run("look up the record with key 7");
    const stored = mcpNames(p1.provider.requests[0]!.tools);
    expect(stored).toEqual(expect.arrayContaining(["mcp__slow__slow_echo", "mcp__gone__gone_echo"]));
    await p1.agent.close();

    // "slow" now fails once the first turn waits for it, "gone" left the config, "other" (never kept) never gets ready.
    const slow = failing("slow boom: login refused", 3);
    const other = delayed("other", "gated");
    const p2 = await agentOn(
      dir,
      [{ text: "two" }, { text: "three" }],
      { fast: fast.config, slow: slow.config, other: other.config },
      { stopGraceMs: 200 },
    );
    try {
      const s2 = await p2.agent.session(s1.id);
      await Promise.all([s2.run("look up key 8"), releaseWhenWaiting(p2, 1, slow.release)]);
      expect(mcpNames(p2.provider.requests[0]!.tools)).toEqual(
        stored.filter((n) => !n.startsWith("mcp__slow__") && !n.startsWith("mcp__gone__")),
      );
      expect(readyAt(other.log)).toBeUndefined();
      const events = await s2.events();
      const firstTurn = events.find((e) => e.type === "turn.started" && e.input === "look up key 8")!.turnId;
      const failed = diagnostics(events, "KEEL_MCP_SERVER_START_FAILED");
      expect(failed).toHaveLength(1);
      expect(failed[0]!.turnId).toBe(firstTurn);
      expect(failed[0]!.message).toContain("slow boom: login refused");
      const waited = diagnostics(events, "mcp.kept_servers_waited")[0]!;
      expect(waited.data).toMatchObject({ servers: ["slow"], ready: [], failed: ["slow"], starting: [] });
      expect(waited.message).not.toContain("stays the same");
      expect(waited.message).toContain('"slow" failed to start: its tools are left out');
      await s2.run("echo again");
      expect(mcpNames(p2.provider.requests[1]!.tools)).toEqual(mcpNames(p2.provider.requests[0]!.tools));
      expect(diagnostics(await s2.events(), "KEEL_MCP_SERVER_START_FAILED")).toHaveLength(1);
    } finally {
      await p2.agent.close();
    }
  });

  // The wait's bound is 10 s (asserted as `limitMs` above); here an internal knob makes it 1 s.
  it("a kept server that hangs with a huge connectTimeoutMs holds the first turn at most the wait's bound (10 s; 1 s here), and no later turn waits again", async () => {
    const dir = dirs.make();
    const fast = delayed("fast", 0);
    const p1 = await agentOn(dir, [{ text: "one" }], {
      fast: fast.config,
      slow: delayed("slow", 0, { required: true }).config,
    });
    const s1 = await p1.agent.session();
    await s1.run("look up the record with key 7");
    expect(mcpNames(p1.provider.requests[0]!.tools)).toEqual(expect.arrayContaining(["mcp__slow__slow_echo"]));
    await p1.agent.close();

    // "slow" now never answers, and may take ten minutes to say so.
    const hung = delayed("slow", "gated", { connectTimeoutMs: 600_000 });
    const p2 = await agentOn(
      dir,
      [{ text: "two" }, { text: "three" }, { text: "four" }],
      { fast: fast.config, slow: hung.config },
      { stopGraceMs: 200 },
      { keptWaitMaxMs: 1_000 },
    );
    try {
      const s2 = await p2.agent.session(s1.id);
      await s2.run("look up key 8");
      const waited = diagnostics(await s2.events(), "mcp.kept_servers_waited");
      expect(waited).toHaveLength(1);
      expect(waited[0]!.data).toMatchObject({
        servers: ["slow"],
        ready: [],
        failed: [],
        starting: ["slow"],
        limitMs: 1_000,
      });
      // It waited out the bound, not the 600 s connect timeout (a busy machine may add seconds).
      const { waitedMs } = waited[0]!.data as { waitedMs: number };
      expect(waitedMs).toBeGreaterThanOrEqual(990);
      expect(waitedMs).toBeLessThan(10_000);
      expect(readyAt(hung.log)).toBeUndefined();
      // It says what happened: the list is shorter this time, not "the same".
      expect(waited[0]!.message).not.toContain("stays the same");
      expect(waited[0]!.message).toMatch(
        /"slow" still starting after the wait's limit of 1000 ms: its tools join a later turn/,
      );
      // The first request has gone out without "slow": later turns must not wait for it again.
      await s2.run("echo again");
      await s2.run("and again");
      expect(diagnostics(await s2.events(), "mcp.kept_servers_waited")).toHaveLength(1);
      expect(p2.provider.requests).toHaveLength(3);
    } finally {
      await p2.agent.close();
    }
  });

  it("a kept server whose key is long enough to be cut out of the 64-character tool names is waited for too", async () => {
    const dir = dirs.make();
    const key = "records-service-of-the-internal-platform-team-eu-west-1";
    const fast = delayed("fast", 0);
    const p1 = await agentOn(dir, [{ text: "one" }], {
      fast: fast.config,
      [key]: delayed("slow", 0, { required: true }).config,
    });
    const s1 = await p1.agent.session();
    await s1.run("look up the record with key 7");
    const stored = mcpNames(p1.provider.requests[0]!.tools);
    const cut = stored.filter((n) => !n.startsWith("mcp__fast__"));
    // Its names no longer hold the whole key.
    expect(cut.length).toBeGreaterThan(0);
    expect(cut.every((n) => n.length === 64 && !n.startsWith(`mcp__${key}__`))).toBe(true);
    await p1.agent.close();

    const slow = delayed("slow", "gated");
    const p2 = await agentOn(dir, [{ text: "two" }], { fast: fast.config, [key]: slow.config });
    try {
      const s2 = await p2.agent.session(s1.id);
      await Promise.all([s2.run("look up key 8"), releaseWhenWaiting(p2, 1, slow.release)]);
      expect(mcpNames(p2.provider.requests[0]!.tools)).toEqual(stored);
      expect(diagnostics(await s2.events(), "mcp.kept_servers_waited")[0]!.data).toMatchObject({
        servers: [key],
        ready: [key],
      });
    } finally {
      await p2.agent.close();
    }
  });

  it("two sessions resumed at once in one process both send their stored lists; a fresh session alongside them does not wait", async () => {
    const dir = dirs.make();
    const fast = delayed("fast", 0);
    const p1 = await agentOn(dir, [{ text: "a1" }, { text: "b1" }], {
      fast: fast.config,
      slow: delayed("slow", 0, { required: true }).config,
    });
    const a1 = await p1.agent.session();
    await a1.run("look up the record with key 7");
    const b1 = await p1.agent.session();
    await b1.run("echo the text hello");
    const storedA = mcpNames(p1.provider.requests[0]!.tools);
    const storedB = mcpNames(p1.provider.requests[1]!.tools);
    await p1.agent.close();

    const slow = delayed("slow", "gated");
    const p2 = await agentOn(dir, [{ text: "x" }, { text: "y" }, { text: "z" }], {
      fast: fast.config,
      slow: slow.config,
    });
    try {
      const [a2, b2, c2] = await Promise.all([p2.agent.session(a1.id), p2.agent.session(b1.id), p2.agent.session()]);
      const sent = (input: string) => p2.provider.requests.find((r) => JSON.stringify(r.messages).includes(input));
      // The gate opens once the three turns started and the fresh session's request has left
      // (it does not wait); the resumed ones' have not (they wait for "slow").
      const gate = (async () => {
        try {
          await until(() => p2.turnsStarted() >= 3 && !!sent("say hi"), 20_000, "the fresh session's request");
          expect(p2.provider.requests).toHaveLength(1);
        } finally {
          slow.release();
        }
      })();
      await Promise.all([a2.run("look up key 8"), b2.run("echo again"), c2.run("say hi"), gate]);
      expect(mcpNames(sent("look up key 8")!.tools)).toEqual(storedA);
      expect(mcpNames(sent("echo again")!.tools)).toEqual(storedB);
      // The fresh one: not held for "slow" (its request has none of its tools), no wait diagnostic.
      expect(mcpNames(sent("say hi")!.tools).some((n) => n.startsWith("mcp__slow__"))).toBe(false);
      expect(diagnostics(await c2.events(), "mcp.kept_servers_waited")).toEqual([]);
      for (const s of [a2, b2]) expect(diagnostics(await s.events(), "mcp.kept_servers_waited")).toHaveLength(1);
    } finally {
      await p2.agent.close();
    }
  });
});
