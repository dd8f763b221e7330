/**
 * `keel goal` end to end through the binary, offline: the agent works two turns unattended,
 * says the goal is complete, the supervisor (the side model, here the same script) confirms,
 * exit 0; `keel goal status` lists the run; a run that never gets there stops at --turns.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-goal-cli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(steps: object[]): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = mkdtempSync(join(root, "p-"));
  writeFileSync(
    join(dir, "agent.config.mjs"),
    `export default { name: "goalie", offline: { script: { steps: ${JSON.stringify(steps)} } } };\n`,
  );
  return { dir, env: offlineEnv({ KEEL_HOME: join(dir, ".keel") }) };
}

describe("keel goal", () => {
  it("runs unattended until the agent says it is done and the supervisor confirms; status lists the run", async () => {
    const { dir, env } = project([
      { when: { lastUserIncludes: "write the notes" }, text: "Drafted the first half." },
      { when: { lastUserIncludes: "Continue working" }, text: "Both halves written. GOAL COMPLETE" },
      {
        when: { lastUserIncludes: "Goal: write the notes" },
        text: '{"achieved": true, "reason": "both halves are written"}',
      },
    ]);
    const r = await runKeel(["goal", "write the notes", "--turns", "5"], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("keel: goal turn 1: completed");
    expect(r.stderr).toMatch(
      /keel: goal achieved \(the supervisor confirmed it: both halves are written\) · 2 turns · run [0-9a-f-]{36}/,
    );
    const status = await runKeel(["goal", "status"], { cwd: dir, env });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^achieved\s+2\/5 turns .* write the notes/m);
  }, 60_000);

  it("stops at --turns when the goal is never reached (exit 1); bad numbers are usage errors", async () => {
    const { dir, env } = project([{ text: "still working" }, { text: "still going" }]);
    const r = await runKeel(["goal", "an endless task", "--turns", "2", "--every", "9"], { cwd: dir, env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("keel: goal limit (the turn limit (2) was reached before the goal) · 2 turns");
    const bad = await runKeel(["goal", "x", "--turns", "0"], { cwd: dir, env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--turns takes a whole number ≥ 1");
    const misplaced = await runKeel(["run", "x", "--turns", "3"], { cwd: dir, env });
    expect(misplaced.stderr).toContain("--turns is an option of keel goal");
  }, 60_000);
});
