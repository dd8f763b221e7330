/**
 * The promises added with subagents, modes and tracing, against hostile input:
 * - a child that hangs is cut by what its parent turn has left (no budget outlives the parent);
 * - a child's answer with lone surrogates reaches the parent's provider well-formed, and a
 *   megabytes-long one arrives cut;
 * - a secret in a child's tool result is in no file under KEEL_HOME (its session is stored too);
 * - a subagent's ask waits durably in the parent session when nobody answers, and the next
 *   process asks it first, then the child goes on;
 * - chat mode survives a SIGKILL: the next process still sends no tools;
 * - traced content (opt-in) is redacted, well-formed and bounded, whatever the input.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "../../packages/agent/src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../packages/testkit/src/index.ts";
import { SqliteSessionStore } from "../../packages/store-sqlite/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import type { KeelEvent, Message } from "../../packages/kernel/src/index.ts";
import { traceAgent } from "../../packages/otel/src/index.ts";
import { tasks } from "../../packages/plugin-tasks/src/index.ts";
import { KEEL_BIN, offlineEnv, REPO, runKeel } from "../../packages/cli/test/support/run-keel.ts";
import { filesContaining } from "./support/adversarial-b.ts";

const root = mkdtempSync(join(tmpdir(), "keel-fault-delegation-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const textOf = (m: Message) => JSON.stringify(m.content);

describe("fault/delegation: subagents", () => {
  it("a child whose model never answers is cut by the parent's remaining wall time: the parent returns within the bound, both logs end", async () => {
    const store = new MemorySessionStore();
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "stuck", prompt: "think" } }] },
        { text: "gave up on the child" },
      ]),
      sideModel: false,
      store,
      limits: { wallTimeMs: 1_500 },
      plugins: [
        tasks({
          profiles: {
            stuck: {
              description: "Never answers.",
              model: scriptedProvider([{ hang: true }]),
              limits: { wallTimeMs: 600_000 },
            },
          },
        }),
      ],
    });
    const session = await agent.session();
    const t0 = performance.now();
    const r = await session.run("go");
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(["stopped", "completed", "failed"]).toContain(r.verdict.status);
    const link = (await store.events(session.id)).find((e) => e.type === "child.started") as Extract<
      KeelEvent,
      { type: "child.started" }
    >;
    const childLog = await store.events(link.childSessionId);
    expect(["turn.completed", "turn.failed", "turn.interrupted"]).toContain(childLog.at(-1)!.type);
    await agent.close();
  });

  it("a child's answer with lone surrogates reaches the parent's model well-formed; a 3 MB answer arrives cut", async () => {
    const huge = "x".repeat(3_000_000);
    const child = scriptedProvider([
      { when: { lastUserIncludes: "broken" }, text: "half \ud83d pair and \udc00 alone 🎉" },
      { when: { lastUserIncludes: "huge" }, text: huge },
    ]);
    const parent = scriptedProvider([
      {
        toolCalls: [
          { id: "t1", name: "task", args: { profile: "w", prompt: "broken text" } },
          { id: "t2", name: "task", args: { profile: "w", prompt: "huge text" } },
        ],
      },
      { text: "received" },
    ]);
    const agent = await createAgent({
      provider: parent,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [tasks({ profiles: { w: { description: "Writes.", model: child } } })],
    });
    await (await agent.session()).run("go");
    const results = parent.requests[1]!.messages.filter((m) => m.role === "tool");
    const broken = textOf(results[0]!);
    expect(isWellFormed(JSON.parse(broken)[0].text)).toBe(true);
    expect(JSON.parse(broken)[0].text).toContain("half \ufffd pair and \ufffd alone 🎉");
    expect(textOf(results[1]!).length).toBeLessThan(200_000);
    await agent.close();
  });

  it("a secret a child's tool returns is in no file under KEEL_HOME, the child's session included", async () => {
    const home = mkdtempSync(join(root, "secret-"));
    const key = `sk-ant-api03-${"Zq8".repeat(22)}`;
    const leaky = defineTool({
      name: "env",
      description: "Prints the environment.",
      execute: () => `ANTHROPIC_API_KEY=${key}`,
    });
    const store = new SqliteSessionStore({ path: join(home, "sessions.sqlite") });
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "t1", name: "task", args: { profile: "ops", prompt: "show the env" } }] },
        { text: "done" },
      ]),
      sideModel: false,
      store,
      plugins: [
        tasks({
          profiles: {
            ops: {
              description: "Ops.",
              tools: [leaky],
              model: scriptedProvider([
                { toolCalls: [{ id: "e1", name: "env", args: {} }] },
                { text: `the key is ${key}` },
              ]),
            },
          },
        }),
      ],
    });
    await (await agent.session()).run("go");
    await agent.close();
    store.close();
    expect(filesContaining(home, [key, key.slice(14)])).toEqual([]);
  });
});

describe("fault/delegation: chat mode", () => {
  it("a subagent's ask in `keel run` is asked at the terminal naming the subagent; with nobody to answer it stays paused, and the next run asks it first and the child goes on", async () => {
    const dir = mkdtempSync(join(root, "child-ask-"));
    const src = (p: string) => JSON.stringify(join(REPO, "packages", p, "src", "index.ts"));
    writeFileSync(
      join(dir, "agent.config.ts"),
      `import { definePlugin, defineTool } from ${src("kernel")};
import { tasks } from ${src("plugin-tasks")};
import { writeFileSync } from "node:fs";
const count = defineTool({ name: "count", description: "Counts apples.", category: "info", execute: () => (writeFileSync(${JSON.stringify(join(dir, "counted"))}, "yes"), "12") });
const guard = definePlugin({ name: "guard", version: "1.0.0", setup: (ctx) => ctx.on("tool.pre_call", (e) => e.call.name === "count" ? { kind: "tool_decision", decision: "ask", reason: "counting costs money" } : undefined) });
export default { name: "child-ask", plugins: [tasks({ profiles: { counter: { description: "Counts.", tools: [count], plugins: [guard] } } })], offline: { script: process.env.SCRIPT } };
`,
    );
    const step = (when: string, rest: object) => ({ when: { lastUserIncludes: when }, ...rest });
    writeFileSync(
      join(dir, "first.json"),
      JSON.stringify({
        steps: [
          step("how many", {
            toolCalls: [{ id: "t1", name: "task", args: { profile: "counter", prompt: "count the apples" } }],
          }),
          step("count the apples", { toolCalls: [{ id: "c1", name: "count", args: {} }] }),
        ],
      }),
    );
    writeFileSync(
      join(dir, "second.json"),
      JSON.stringify({
        steps: [
          step("count the apples", { text: "12 apples" }),
          step("how many", { text: "The counter says 12." }),
          step("thanks", { text: "You're welcome." }),
        ],
      }),
    );
    // No one answers (stdin ends): the turn stays paused, durable, and nothing was counted.
    const env = offlineEnv({ KEEL_HOME: join(dir, ".keel"), SCRIPT: "first.json" });
    const first = await runKeel(["run", "--ask", "ask", "how many apples?"], { cwd: dir, env });
    expect(first.stderr).toMatch(
      /\? count \(subagent counter, session [0-9a-f-]{36}\) \{\} — guard: counting costs money/,
    );
    expect(first.code).not.toBe(0);
    expect(existsSync(join(dir, "counted"))).toBe(false);
    // The next process asks the same question first; "y" lets the child count and finish, then the parent.
    const second = await runKeel(["run", "--ask", "ask", "-c", "thanks"], {
      cwd: dir,
      env: { ...env, SCRIPT: "second.json" },
      stdin: ["y"],
    });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain("has a turn paused for approval; answering it first");
    expect(second.stderr).toMatch(/\? count \(subagent counter/);
    expect(existsSync(join(dir, "counted"))).toBe(true);
    expect(second.stdout).toContain("You're welcome.");
  }, 60_000);

  it("a session switched to chat mode and SIGKILLed mid-turn is still in chat mode in the next process", async () => {
    const dir = mkdtempSync(join(root, "chat-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default { name: "modes",
  tools: [{ name: "lookup", description: "Looks up.", execute: () => "42" }],
  offline: { script: { steps: [
    { when: { lastUserIncludes: "slow" }, expect: { noTools: true }, hang: true },
    { when: { lastUserIncludes: "after" }, expect: { noTools: true }, text: "still chatting" },
  ] } } };\n`,
    );
    const env = offlineEnv({ KEEL_HOME: join(dir, ".keel") });
    const child = spawn(process.execPath, [KEEL_BIN, "run", "--mode", "chat", "slow question"], {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    await new Promise<void>((resolve) =>
      child.stderr.on("data", (d: Buffer) => ((err += d.toString()), err.includes("chat mode") && resolve())),
    );
    await new Promise((r) => setTimeout(r, 300));
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const next = await runKeel(["run", "-c", "after the kill"], { cwd: dir, env });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toContain("still chatting");
    expect(next.stderr).toContain("chat mode — no tools are sent in this session (its last --mode)");
  }, 60_000);
});

describe("fault/delegation: traced content", () => {
  it("with content capture on, a key, lone surrogates, a 300 KB input and a 1 MB tool result are exported redacted, well-formed and bounded", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const key = `sk-ant-api03-${"Qw7".repeat(22)}`;
    const echo = defineTool({
      name: "echo",
      description: "Echoes.",
      execute: () => `token ${key} \ud800 ${"y".repeat(1_000_000)}`,
    });
    const agent = await createAgent({
      provider: scriptedProvider([
        { toolCalls: [{ id: "e1", name: "echo", args: { note: `use ${key}` } }] },
        { text: `done with ${key}` },
      ]),
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [echo],
    });
    traceAgent(agent, { tracerProvider: provider, captureContent: true, maxContentChars: 4_000 });
    const r = await (await agent.session()).run(`here is ${key} \udc00 ${"z".repeat(300_000)}`);
    expect(r.text).toContain("done with");
    await agent.close();
    const values = exporter
      .getFinishedSpans()
      .flatMap((s) => Object.values(s.attributes))
      .filter((v): v is string => typeof v === "string");
    const content = values.filter((v) => v.length > 100);
    expect(content.length).toBeGreaterThanOrEqual(3);
    for (const v of values) {
      expect(v).not.toContain(key.slice(14));
      expect(isWellFormed(v)).toBe(true);
      expect([...v].length).toBeLessThanOrEqual(4_000);
    }
  });
});
