/**
 * Fault class 12, the seed systems of part 2 (goals, the retry controller, intra-turn pruning,
 * prun, the user model), against hostile input:
 * - `keel goal` SIGKILLed mid-run: the next `keel goal status` marks the run orphaned;
 * - a 1 MB goal with lone surrogates and a key: stored bounded, well-formed, redacted;
 * - a 1 MB user message with lone surrogates and a key: the user model stays bounded and
 *   keeps nothing secret; another user never sees the first one's words;
 * - a tool failing with 3 MB of broken text, again and again, on a server that reuses call ids:
 *   every request keeps its pairs, the text is capped and well-formed, the repeat is refused;
 * - prun asked to drop 5,000 outputs: a located error, nothing pruned, the turn goes on.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, defineTool } from "../../packages/agent/src/index.ts";
import { MemorySessionStore, scriptedProvider } from "../../packages/testkit/src/index.ts";
import { isWellFormed } from "../../packages/text/src/index.ts";
import type { Message } from "../../packages/kernel/src/index.ts";
import { compaction } from "../../packages/plugin-compaction/src/index.ts";
import { GoalStore, goals, runGoal } from "../../packages/plugin-goals/src/index.ts";
import { retry } from "../../packages/plugin-retry/src/index.ts";
import { UserModelStore, userModel } from "../../packages/plugin-user-model/src/index.ts";
import { KEEL_BIN, offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-fault-seeds-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const KEY = `sk-ant-api03-${"Qw7".repeat(22)}`;
/** Files under `dir` whose raw bytes hold `needle`. */
const holding = (dir: string, needle: string) =>
  (readdirSync(dir, { recursive: true }) as string[]).filter((f) => {
    try {
      return readFileSync(join(dir, f)).includes(needle);
    } catch {
      return false;
    }
  });
/** Every call has exactly one result before the next assistant message, and no result is orphaned. */
function pairsHold(messages: readonly Message[]): boolean {
  let open: string[] = [];
  for (const m of messages) {
    if (m.role === "assistant") {
      if (open.length) return false;
      open = m.content.flatMap((b) => (b.type === "tool_call" ? [b.id] : []));
    } else if (m.role === "tool") {
      const at = open.indexOf(m.toolCallId);
      if (at < 0) return false;
      open.splice(at, 1);
    } else if (open.length) return false;
  }
  return open.length === 0;
}

describe("fault/seeds: goals", () => {
  it("keel goal SIGKILLed mid-run: the next keel goal status marks the run orphaned", async () => {
    const dir = mkdtempSync(join(root, "goal-kill-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default { name: "goalie", offline: { script: { steps: [{ text: "working" }, { hang: true }] } } };\n`,
    );
    const env = offlineEnv({ KEEL_HOME: join(dir, ".keel") });
    const child = spawn(process.execPath, [KEEL_BIN, "goal", "ship the notes", "--turns", "5"], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    await new Promise<void>((resolve) =>
      child.stderr.on("data", (d: Buffer) => ((err += d.toString()), err.includes("goal turn 1") && resolve())),
    );
    await new Promise((r) => setTimeout(r, 200));
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    const status = await runKeel(["goal", "status", "--json"], { cwd: dir, env });
    expect(status.code, status.stderr).toBe(0);
    const runs = JSON.parse(status.stdout) as Array<{ status: string; turns: number; reason: string }>;
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: "orphaned", turns: 1 });
    expect(runs[0]!.reason).toMatch(/its process \(pid \d+/);
  }, 60_000);

  it("a 1 MB goal with lone surrogates and a key is stored bounded, well-formed and redacted", async () => {
    const dir = mkdtempSync(join(root, "goal-huge-"));
    const path = join(dir, "goals.sqlite");
    const goal = `Rotate ${KEY} then \ud800 ${"🎉x\udc00".repeat(250_000)}`;
    const agent = await createAgent({
      provider: scriptedProvider([{ text: "GOAL COMPLETE" }], { contextWindow: 50_000_000 }),
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [goals({ path })],
    });
    const db = new GoalStore(path);
    const t0 = performance.now();
    const r = await runGoal(await agent.session(), { goal, store: db, maxTurns: 2 });
    expect(performance.now() - t0).toBeLessThan(20_000);
    expect(r.status, r.reason).toBe("achieved");
    const stored = db.runs()[0]!.goal;
    expect([...stored].length).toBeLessThanOrEqual(2_001);
    expect(isWellFormed(stored)).toBe(true);
    await agent.close();
    db.close();
    expect(holding(dir, KEY.slice(14, 50))).toEqual([]);
  }, 60_000);
});

describe("fault/seeds: user model", () => {
  it("a 1 MB message with lone surrogates and a key: the profile stays bounded and holds no key; the other user never sees these words", async () => {
    const dir = mkdtempSync(join(root, "um-"));
    const path = join(dir, "user-model.sqlite");
    const provider = scriptedProvider(
      Array.from({ length: 8 }, () => ({ text: "ok" })),
      { contextWindow: 50_000_000 },
    );
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      plugins: [userModel({ path, minTurns: 1 })],
    });
    const s = await agent.session();
    const huge =
      `deploy ${KEY} zanzibarian \ud83d ${Array.from({ length: 60_000 }, (_, i) => `word${String.fromCharCode(97 + (i % 26))}${i % 977}qq`).join(" ")}`.slice(
        0,
        1_000_000,
      );
    const t0 = performance.now();
    for (let i = 0; i < 2; i++)
      expect((await s.run(huge, { metadata: { userId: "mallory" } })).verdict.status).toBe("completed");
    await s.run("hello", { metadata: { userId: "alice" } });
    expect(performance.now() - t0).toBeLessThan(20_000);
    const db = new UserModelStore(path);
    const p = db.profile("mallory");
    expect(Object.keys(p.terms).length).toBeLessThanOrEqual(300);
    expect(Object.keys(p.terms).every((t) => [...t].length <= 31 && isWellFormed(t))).toBe(true);
    expect(Object.keys(p.terms)).toContain("zanzibarian");
    // Alice's request carries none of mallory's words.
    expect(provider.requests.at(-1)!.system).not.toContain("zanzibarian");
    await agent.close();
    db.close();
    expect(holding(dir, KEY.slice(14, 50))).toEqual([]);
  }, 60_000);
});

describe("fault/seeds: retry, pruning and prun", () => {
  it("a tool failing with 3 MB of broken text, again and again, with call ids the server reuses: pairs hold in every request, text capped and well-formed, the blind repeat refused", async () => {
    const dir = mkdtempSync(join(root, "retry-"));
    let runs = 0;
    const flaky = defineTool({
      name: "fetch",
      description: "Fetches.",
      parameters: { type: "object", properties: { url: { type: "string" } } },
      category: "info",
      execute: () => (
        runs++, { content: `Error: upstream broke \ud800 ${"x\udfff🎉".repeat(1_000_000)}`, isError: true }
      ),
    });
    const ok = defineTool({
      name: "read",
      description: "Reads.",
      category: "info",
      execute: () => `contents ${"line of text ".repeat(400)}`,
    });
    const same = (name: string, args: unknown) => ({ toolCalls: [{ id: "call_0", name, args }] });
    const provider = scriptedProvider([
      same("fetch", { url: "u" }),
      same("read", {}),
      same("fetch", { url: "u" }),
      same("read", {}),
      same("fetch", { url: "u" }),
      { text: "gave up" },
    ]);
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [flaky, ok],
      plugins: [retry(), compaction({ path: join(dir, "c.sqlite"), model: false, prune: { minCandidateTokens: 0 } })],
    });
    const s = await agent.session();
    const r = await s.run("fetch u");
    expect(r.verdict.status).toBe("completed");
    // internal failures get no retry: the same fetch is refused after the first failure.
    expect(runs).toBe(1);
    for (const req of provider.requests) {
      expect(pairsHold(req.messages)).toBe(true);
      expect(req.messages.at(-1)!.role).not.toBe("assistant");
      const text = JSON.stringify(req.messages);
      expect(text.length).toBeLessThan(1_000_000);
      expect(req.messages.every((m) => m.content.every((b) => !("text" in b) || isWellFormed(b.text)))).toBe(true);
    }
    expect(JSON.stringify(s.messages)).toContain("KEEL_TOOL_DENIED");
    await agent.close();
  }, 60_000);

  it("prun asked to drop 5,000 outputs is a located error; nothing is pruned and the turn goes on", async () => {
    const dir = mkdtempSync(join(root, "prun-"));
    const read = defineTool({ name: "read", description: "Reads.", category: "info", execute: () => "file body" });
    const provider = scriptedProvider([
      { toolCalls: [{ id: "r1", name: "read", args: {} }] },
      { toolCalls: [{ id: "p1", name: "prun", args: { ids: Array.from({ length: 5_000 }, (_, i) => `id${i}`) } }] },
      { text: "fine" },
    ]);
    const agent = await createAgent({
      provider,
      sideModel: false,
      store: new MemorySessionStore(),
      tools: [read],
      plugins: [compaction({ path: join(dir, "c.sqlite"), prun: "prun" })],
    });
    const s = await agent.session();
    expect((await s.run("go")).text).toBe("fine");
    expect(JSON.stringify(s.messages.find((m) => m.role === "tool" && m.toolCallId === "p1"))).toContain(
      "KEEL_TOOL_ARGS_INVALID",
    );
    expect(JSON.stringify(provider.requests[2]!.messages)).toContain("file body");
    await agent.close();
  });
});
