/** The real binary: run --json, exit statuses, sessions, inspect, usage errors. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { KeelEvent } from "@keel/kernel";
import { PHASE_NAMES } from "@keel/kernel";
import { configJsonSchema } from "../src/index.ts";
import { REPO, offlineEnv, runKeel } from "./support/run-keel.ts";

const home = mkdtempSync(join(tmpdir(), "keel-cli-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = offlineEnv({ KEEL_HOME: home });
const minimal = join(REPO, "examples", "minimal", "agent.config.ts");
const custom = join(REPO, "examples", "custom-plugin", "agent.config.ts");
/** The stored events of a --json run (live lines, which have no seq, left out). */
const lines = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as KeelEvent)
    .filter((e) => "seq" in e);

describe("keel run", () => {
  it("--json prints the session's stored events as JSON lines, in order, with the live text deltas between them, and nothing else", async () => {
    const run = await runKeel(["run", "--json", "--config", minimal, "Which items are open?"], { env });
    expect(run.code, run.stderr).toBe(0);
    const all = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; seq?: number; channel?: string; text?: string });
    const live = all.filter((e) => e.seq === undefined);
    expect(live.length).toBeGreaterThan(0);
    expect(new Set(live.map((e) => e.type))).toEqual(new Set(["model.delta"]));
    // The deltas add up to the answer the session stored.
    const answer = all
      .filter((e) => e.type === "model.delta" && e.channel === "text")
      .map((e) => e.text)
      .join("");
    const stored = lines(run.stdout)
      .filter((e) => e.type === "message.appended" && e.message.role === "assistant")
      .map((e) =>
        e.type === "message.appended"
          ? e.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("")
          : "",
      )
      .join("");
    expect(answer).toBe(stored);
    const events = lines(run.stdout);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(new Set(events.map((e) => e.sessionId)).size).toBe(1);
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("session.created");
    expect(types.at(-1)).toBe("turn.completed");
    expect(types.filter((t) => t === "tool.completed")).toHaveLength(2);
    expect(types.indexOf("turn.started")).toBeLessThan(types.indexOf("prompt.compiled"));
    for (const e of events)
      expect(e).toMatchObject({
        sessionId: expect.any(String),
        seq: expect.any(Number),
        ts: expect.any(Number),
        type: expect.any(String),
      });
    expect(run.stderr).toContain("keel: offline");
  });

  it("streams the answer on stdout and progress on stderr; --session continues a session", async () => {
    const first = await runKeel(["run", "--config", custom, "Delete the retro note"], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain("I could not delete the retro note");
    expect(first.stderr).toMatch(/✗ delete_note denied \(deny by house-rules\)/);
    const id = /session ([0-9a-f-]{36})/.exec(first.stderr)![1]!;
    const again = await runKeel(["run", "--json", "--config", custom, "--session", id, "Read the standup note"], {
      env,
    });
    expect(again.code, again.stderr).toBe(0);
    const events = lines(again.stdout);
    expect(events.every((e) => e.sessionId === id)).toBe(true);
    expect(events[0]!.type).toBe("session.resumed");
    const shown = await runKeel(["sessions", "show", id, "--config", custom], { env });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.match(/turn\.started/g)).toHaveLength(2);
    const listed = await runKeel(["sessions", "list", "--config", custom], { env });
    expect(listed.stdout).toContain(id);
  });

  it("exits 1 when the turn fails, and says why", async () => {
    const dir = mkdtempSync(join(home, "fail-"));
    writeFileSync(
      join(dir, "agent.config.mjs"),
      'export default { name: "failing", offline: { script: { steps: [{ error: { class: "overloaded" } }] } } };\n',
    );
    const run = await runKeel(["run", "hello"], { cwd: dir, env });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("overloaded");
    expect(run.stderr).toMatch(/keel: failed/);
  });

  it.each([
    [["run"], "keel run needs the input"],
    [["frobnicate"], 'Unknown command "frobnicate"'],
    [["run", "--session", "x", "--new", "hi"], "--session and --new exclude each other"],
    [["run", "--bogus", "hi"], "Unknown option '--bogus'"],
    [["sessions", "show"], "keel sessions [list | show ID]"],
  ])("usage error %j exits 2", async (args, says) => {
    const run = await runKeel(["--config", minimal, ...args] as string[], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("KEEL_CLI_USAGE");
    expect(run.stderr).toContain(says);
  });

  it("an unknown --session id is reported, exit 2", async () => {
    const run = await runKeel(["run", "--config", minimal, "--session", "no-such-session", "hi"], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("KEEL_SESSION_NOT_FOUND");
  });
});

describe("keel run --mode", () => {
  it("chat sends no tools, later runs of the session stay in chat, --mode agent switches back; a bad value is a usage error", async () => {
    const dir = mkdtempSync(join(home, "mode-"));
    // The offline script (replayed from its start by each process) asserts what each request carries.
    writeFileSync(
      join(dir, "agent.config.mjs"),
      `export default {
  name: "modes",
  tools: [{ name: "lookup", description: "Looks a value up.", execute: () => "42" }],
  offline: { script: { steps: [
    { when: { lastUserIncludes: "hello" }, expect: { noTools: true }, text: "chatting" },
    { when: { lastUserIncludes: "and now" }, expect: { noTools: true }, text: "still chatting" },
    { when: { lastUserIncludes: "use tools" }, expect: { toolsInclude: ["lookup"] }, text: "tools are back" },
  ] } },
};\n`,
    );
    const e = offlineEnv({ KEEL_HOME: join(dir, ".keel") });
    const first = await runKeel(["run", "--mode", "chat", "hello"], { cwd: dir, env: e });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain("chatting");
    expect(first.stderr).toContain(
      "keel: chat mode — no tools are sent in this session; --mode agent switches it back",
    );
    const second = await runKeel(["run", "-c", "and now?"], { cwd: dir, env: e });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain("chat mode — no tools are sent in this session (its last --mode)");
    const third = await runKeel(["run", "-c", "--mode", "agent", "use tools"], { cwd: dir, env: e });
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toContain("tools are back");
    expect(third.stderr).not.toContain("chat mode");
    const bad = await runKeel(["run", "--mode", "tools", "x"], { cwd: dir, env: e });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--mode takes agent (tools) or chat (no tools), not "tools"');
    const misplaced = await runKeel(["sessions", "--mode", "chat"], { cwd: dir, env: e });
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toContain("--mode is an option of keel run and keel chat");
  }, 60_000);
});

describe("keel inspect", () => {
  it("prints the plugin tree and every phase with its subscriptions in order", async () => {
    const run = await runKeel(["inspect", "--config", custom], { env });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`agent "custom-plugin" (${custom})`);
    expect(run.stdout).toContain("plugins:\n  house-rules@1.0.0\n");
    expect(run.stdout).toContain(
      "  turn.pre_prompt_compile [collect; accepts prompt_section, diagnostic]\n    └─ house-rules  blocking 30000 ms, best_effort\n",
    );
    expect(run.stdout).toMatch(
      / {2}tool\.pre_call \[waterfall[^\]]*\]\n {4}└─ house-rules {2}blocking 30000 ms, \w+\n/,
    );
    for (const phase of PHASE_NAMES) expect(run.stdout).toContain(`  ${phase} [`);
    expect(run.stderr).toBe("");
  });

  it("--json gives the same map as data", async () => {
    const run = await runKeel(["inspect", "--json", "--config", custom], { env });
    const map = JSON.parse(run.stdout) as {
      plugins: Array<{ name: string }>;
      phases: Array<{ phase: string; subscriptions: Array<{ plugin: string; failure: string; timeoutMs: number }> }>;
    };
    expect(map.plugins.map((p) => p.name)).toEqual(["house-rules"]);
    expect(map.phases.map((p) => p.phase)).toEqual([...PHASE_NAMES]);
    const subscribed = map.phases.filter((p) => p.subscriptions.length).map((p) => p.phase);
    expect(subscribed).toEqual(["turn.pre_prompt_compile", "tool.pre_call"]);
  });
});

describe("config JSON Schema", () => {
  it("the committed agent.config.schema.json is generated from the zod schema (run `keel schema` to refresh)", () => {
    const committed = JSON.parse(readFileSync(join(REPO, "packages", "cli", "agent.config.schema.json"), "utf8"));
    expect(committed).toEqual(configJsonSchema());
    expect(Object.keys((committed as { properties: object }).properties)).toEqual(
      expect.arrayContaining(["model", "plugins", "tools", "limits", "offline"]),
    );
  });
});
