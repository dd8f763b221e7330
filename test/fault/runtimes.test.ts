/**
 * Class 25, the kernel that runs anywhere, attacked where the split changed the mechanism:
 * the host's Node runtime loaded by name (a SIGKILL mid-tool must still find the user's message
 * on disk), the kernel's own phase runner (thousands of handlers, one that never settles), the
 * off-Node token estimate (a huge input), and the storage rule's errors (an emoji where a
 * scheme should be). The turns in workerd and in a page, and the host's promises there (store
 * "sqlite" refused, a child session, an approval, a durable job), are in test/runtime/.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  createAgent,
  definePlugin,
  isWellFormed,
  MemorySessionStore,
  resolveStorage,
} from "../../packages/agent/src/index.ts";
import { estimateTokens } from "../../packages/agent/src/estimate-counter.ts";
import { scriptedProvider } from "../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";

const REPO = join(import.meta.dirname, "..", "..");
const dirs: string[] = [];
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), "keel-fault-rt-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("class 25: the host's Node runtime, loaded by name", () => {
  it("an app importing only @keel/agent, SIGKILLed mid-tool, left the user's message in KEEL_HOME's SQLite file, the turn open", async () => {
    const home = tempDir();
    const child = join(home, "app.ts");
    const agentUrl = pathToFileURL(join(REPO, "packages/agent/src/index.ts")).href;
    const testkitUrl = pathToFileURL(join(REPO, "packages/testkit/src/index.ts")).href;
    writeFileSync(
      child,
      `import { createAgent, defineTool } from ${JSON.stringify(agentUrl)};
import { scriptedProvider } from ${JSON.stringify(testkitUrl)};
const wait = defineTool({ name: "wait", description: "Waits.", execute: () => { process.stdout.write("IN_TOOL\\n"); return new Promise(() => {}); } });
const agent = await createAgent({ name: "auto", provider: scriptedProvider([{ toolCalls: [{ name: "wait", args: {} }] }, { text: "done" }]), tools: [wait] });
const session = await agent.session();
console.log("SESSION", session.id);
await session.run("remember the blue door 🚪");
`,
    );
    const proc = spawn(process.execPath, [child], { env: { ...process.env, KEEL_HOME: home, KEEL_DATABASE_URL: "" } });
    let err = "";
    let out = "";
    proc.stderr.on("data", (d) => (err += d));
    await new Promise<void>((resolve, reject) => {
      proc.stdout.on("data", (d) => {
        out += d;
        if (out.includes("IN_TOOL")) resolve();
      });
      proc.on("exit", (code) => reject(new Error(`the app exited ${code} before its tool ran: ${err}`)));
    });
    proc.kill("SIGKILL");
    await new Promise((r) => proc.on("exit", r));
    // No store was given: the Node entry was loaded by name and put the log in KEEL_HOME.
    const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    try {
      const id = /SESSION (\S+)/.exec(out)?.[1] ?? "";
      const events = await store.events(id);
      const started = events.find((e) => e.type === "turn.started");
      expect(JSON.stringify(started)).toContain("remember the blue door 🚪");
      expect(events.some((e) => e.type === "turn.completed" || e.type === "turn.failed")).toBe(false);
    } finally {
      store.close();
    }
  });
});

describe("class 25: the kernel's own phase runner", () => {
  it("3,000 handlers on a waterfall and a collect phase run in order without exhausting the stack, and the turn completes", async () => {
    const order: number[] = [];
    const plugins = Array.from({ length: 3_000 }, (_, i) =>
      definePlugin({
        name: `p${i}`,
        version: "1.0.0",
        setup(ctx) {
          ctx.on("tool.pre_call", () => undefined);
          ctx.on("turn.pre_policy", () => void order.push(i));
        },
      }),
    );
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ name: "ping", args: {} }] }, { text: "ok" }]),
      store: new MemorySessionStore(),
      tools: [{ name: "ping", description: "p", category: "info", execute: () => "pong" }],
      plugins,
    });
    const result = await (await agent.session()).run("go");
    await agent.close();
    expect(result.verdict.status).toBe("completed");
    expect(order).toEqual(Array.from({ length: 3_000 }, (_, i) => i));
  });

  it("a tool.pre_call handler that never settles is cut at its deadline and, fail-closed, denies the call: the tool never runs, its result names the plugin, the turn completes", async () => {
    let runs = 0;
    const hang = definePlugin({
      name: "hang",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("tool.pre_call", () => new Promise(() => {}), { timeoutMs: 50 });
      },
    });
    const agent = await createAgent({
      provider: scriptedProvider([{ toolCalls: [{ name: "ping", args: {} }] }, { text: "ok" }]),
      store: new MemorySessionStore(),
      tools: [{ name: "ping", description: "p", category: "info", execute: () => `pong ${++runs}` }],
      plugins: [hang],
    });
    const session = await agent.session();
    const result = await session.run("go");
    const tool = session.messages.find((m) => m.role === "tool");
    await agent.close();
    expect(result.verdict.status).toBe("completed");
    expect(runs).toBe(0);
    expect(JSON.stringify(tool)).toContain("KEEL_TOOL_DENIED");
    expect(JSON.stringify(tool)).toContain('plugin \\"hang\\"');
  });
});

describe("class 25: off Node", () => {
  it("a 3 MB input of every kind of text is estimated at once, never below a quarter of its code points", () => {
    const text = 'prose words here. 今天的会议 🚀🎉 a1b2c3d4e5f6a7b8c9d0e1f2 {"k":[1,2]}\n'.repeat(50_000);
    const t0 = performance.now();
    const est = estimateTokens(text);
    // A hang detector, not a speed target: a quadratic estimate would take minutes.
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(est).toBeGreaterThanOrEqual(Math.ceil(Array.from(text).length / 4));
  });

  it("a store string opening with an emoji is refused with that emoji quoted whole (no lone surrogate in the message)", async () => {
    const err = await resolveStorage({ store: "🚪://door" }, {}, undefined).catch((e: Error) => e);
    expect(err).toMatchObject({ code: "KEEL_AGENT_OPTIONS_INVALID" });
    const message = (err as Error).message;
    expect(message).toContain('"🚪"');
    expect(isWellFormed(message)).toBe(true);
  });
});
