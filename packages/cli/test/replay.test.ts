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

  it("--since / --until replay the sessions with a turn started in the window (an ISO time or a duration back from now); bad values are usage errors", async () => {
    const db = new DatabaseSync(join(home, "sessions.sqlite"), { readOnly: true });
    const starts = db
      .prepare(
        "SELECT session_id AS id, MIN(ts) AS ts FROM events WHERE type = 'turn.started' GROUP BY session_id ORDER BY ts",
      )
      .all() as Array<{ id: string; ts: number }>;
    db.close();
    expect(starts).toHaveLength(2);
    const [older, newer] = starts as [{ id: string; ts: number }, { id: string; ts: number }];
    expect(older.id).toBe(sessionId);
    const between = new Date(Math.floor((older.ts + newer.ts) / 2)).toISOString();
    const ids = async (args: string[]) => {
      const r = await keel(["replay", ...args, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as Array<{ sessionId: string }>).map((x) => x.sessionId);
    };
    expect(await ids(["--since", between])).toEqual([newer.id]);
    expect(await ids(["--until", between])).toEqual([older.id]);
    expect((await ids(["--since", "1h"])).sort()).toEqual([older.id, newer.id].sort());
    // --last N chooses within the window: the most recent.
    expect(await ids(["--since", "2d", "--last", "1"])).toEqual([newer.id]);
    // A window with no turn in it: nothing replayed, and it says so.
    const none = await keel(["replay", "--until", "2001-01-01"]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stderr).toContain(
      'keel: no session of agent "replayer" had a turn started until 2001-01-01T00:00:00.000Z.',
    );
    expect(none.stdout).toContain("0 of 0 sessions replayed identically.");
    const bad = await keel(["replay", "--since", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      '--since takes an ISO date or time (2026-11-28, 2026-11-28T09:00Z) or a duration back from now (30m, 2h, 7d), not "yesterday"',
    );
    const backwards = await keel(["replay", "--since", "1h", "--until", "2h"]);
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toMatch(/--since \(.*\) is after --until/);
    expect((await keel(["replay", sessionId, "--since", "1h"])).code).toBe(2);
    expect((await keel(["run", "--since", "1h", "hi"])).stderr).toContain("--since is an option of keel replay");
  });

  it("a changed prompt is shown as a compact line diff of the recorded prompt and today's, not the whole text", async () => {
    const rules = (changed: boolean) =>
      Array.from({ length: 40 }, (_, i) =>
        i === 19 && changed ? "Rule 20: cite every file 📎." : `Rule ${i + 1}: keep item ${i + 1} short.`,
      ).join("\n");
    const home2 = join(dir, "home-diff");
    const run = (args: string[], extra: Record<string, string>) =>
      runKeel([...args, "--config", config, "--home", home2], { env: offlineEnv({ STAMP: "t1", ...extra }) });
    const recorded = await run(["run", "What is left in TODO.md?"], { RULES: rules(false) });
    expect(recorded.code, recorded.stderr).toBe(0);
    const r = await run(["replay", "--last", "1", "--json"], { RULES: rules(true) });
    expect(r.code, r.stderr).toBe(0);
    const [report] = JSON.parse(r.stdout) as Array<{ sessionId: string; systemDiff: { lines: string[] } }>;
    // The instructions and rules 1–18 are skipped, counted; one line of context on each side of the change.
    expect(report!.systemDiff.lines).toEqual([
      expect.stringMatching(/^ {2}… \d+ unchanged lines$/),
      "  Rule 19: keep item 19 short.",
      "- Rule 20: keep item 20 short.",
      "+ Rule 20: cite every file 📎.",
      "  Rule 21: keep item 21 short.",
      expect.stringMatching(/^ {2}… \d+ unchanged lines$/),
    ]);
    const text = await run(["replay", report!.sessionId], { RULES: rules(true) });
    expect(text.stdout).toMatch(/system prompt changed \(\d+ → \d+ chars; - recorded, \+ today\):/);
    expect(text.stdout).toContain("    + Rule 20: cite every file 📎.");
    // The unchanged rules are not printed again.
    expect(text.stdout).not.toContain("Rule 5: keep item 5 short.");
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
