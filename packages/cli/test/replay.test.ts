/** The real binary: keel replay of a session recorded by keel run, before and after a plugin change. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-replay-cli-"));
const home = join(dir, "home");
const config = join(dir, "agent.config.ts");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// One plugin builds a prompt section from RULES and one tool reads "files"; the model is a script.
writeFileSync(
  config,
  `export default {
  name: "replayer",
  instructions: "You help with the project.",
  offline: {
    script: [
      { toolCalls: [{ id: "c1", name: "read", args: { path: "TODO.md" } }] },
      { text: "Two things are left." },
    ],
  },
  tools: [{ name: "read", description: "Reads a file.", execute: (a) => "contents of " + a.path + " at " + (process.env.STAMP ?? "") }],
  plugins: [
    {
      name: "rules",
      version: "1.0.0",
      setup(ctx) {
        ctx.on("turn.pre_prompt_compile", () => ({
          kind: "prompt_section", id: "rules", domain: "policy", sectionId: "rules",
          content: process.env.RULES ?? "Be brief.",
        }));
      },
    },
  ],
};
`,
);

const keel = (args: string[], extra: Record<string, string> = {}) =>
  runKeel([...args, "--config", config, "--home", home], { env: offlineEnv({ STAMP: "t1", ...extra }) });

let sessionId = "";
beforeAll(async () => {
  const run = await keel(["run", "What is left in TODO.md?"]);
  expect(run.code, run.stderr).toBe(0);
  const list = await keel(["sessions", "--json"]);
  sessionId = (JSON.parse(list.stdout) as Array<{ id: string }>)[0]!.id;
}, 60_000);

describe("keel replay", () => {
  it("with the config unchanged: identical, exit 0 under --strict, and the tool does not run", async () => {
    // A tool run now would return another stamp, and the request after it would differ.
    const r = await keel(["replay", sessionId, "--strict"], { STAMP: "t2" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("#1 round 1  same");
    expect(r.stdout).toContain("#2 round 2  same");
    expect(r.stdout).toContain("Result: identical.");
  });

  it("--tools live runs the tool: the request after the call is the first to differ", async () => {
    const r = await keel(["replay", sessionId, "--tools", "live", "--json"], { STAMP: "t2" });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      identical: boolean;
      firstDivergence: number;
      asked: { lastMessages: Array<{ text: string }> };
    };
    expect(report.identical).toBe(false);
    expect(report.firstDivergence).toBe(1);
    expect(report.asked.lastMessages.at(-1)!.text).toBe("contents of TODO.md at t2");
  });

  it("after a plugin change: exit 1 under --strict, naming the section, the plugin and what the model would be asked", async () => {
    const r = await keel(["replay", sessionId, "--strict"], { RULES: "Be thorough; cite every file." });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("#1 round 1  CHANGED");
    expect(r.stdout).toContain("section rules changed (by rules, 9 → 29 chars)");
    expect(r.stdout).toContain("First divergence: request #1.");
    expect(r.stdout).toContain("Be thorough; cite every file.");
    expect(r.stdout).toContain("Result: diverged");
    // Without --strict the same report exits 0.
    const loose = await keel(["replay", sessionId], { RULES: "Be thorough; cite every file." });
    expect(loose.code).toBe(0);
  });

  it("--last N replays the agent's most recent sessions: a line each, a total, exit 1 under --strict when one diverged", async () => {
    const second = await keel(["run", "And in NOTES.md?"]);
    expect(second.code, second.stderr).toBe(0);
    const same = await keel(["replay", "--last", "5", "--strict"]);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toContain(`${sessionId}  identical (2 requests)`);
    expect(same.stdout).toContain("2 of 2 sessions replayed identically.");
    const changed = await keel(["replay", "--last", "5", "--strict", "--json"], { RULES: "Be thorough." });
    expect(changed.code).toBe(1);
    const reports = JSON.parse(changed.stdout) as Array<{ identical: boolean; firstDivergence: number }>;
    expect(reports.map((r) => [r.identical, r.firstDivergence])).toEqual([
      [false, 0],
      [false, 0],
    ]);
    const lines = await keel(["replay", "--last", "1"], { RULES: "Be thorough." });
    expect(lines.stdout).toMatch(/DIVERGED at request #1: section rules changed by rules/);
    expect(lines.stdout).toContain("0 of 1 session replayed identically.");
    const both = await keel(["replay", sessionId, "--last", "2"]);
    expect(both.code).toBe(2);
  });

  it("a session deleted since it was recorded is a clear error, and bad flags are usage errors", async () => {
    const db = new DatabaseSync(join(home, "sessions.sqlite"));
    const list = JSON.parse((await keel(["sessions", "--json"])).stdout) as Array<{ id: string }>;
    const gone = list.find((s) => s.id !== sessionId)!.id;
    db.prepare("DELETE FROM events WHERE session_id = ?").run(gone);
    db.prepare("DELETE FROM sessions WHERE id = ?").run(gone);
    db.close();
    const r = await keel(["replay", gone]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("KEEL_SESSION_NOT_FOUND");
    expect(r.stderr).toContain("deleted since it was recorded");
    const bad = await keel(["replay", sessionId, "--tools", "cached"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--tools takes log");
    const misplaced = await keel(["run", "--tools", "log", "hi"]);
    expect(misplaced.stderr).toContain("--tools is an option of keel replay");
  });
});
