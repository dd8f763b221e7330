/**
 * The full-stack example's eval, run as a user runs it: the real `keel eval` process, offline
 * (the scripted model), experiments in a throwaway home's session database. A second run with
 * a regressed agent (evals/regressed.config.ts) is caught by the baseline gate.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "../../packages/cli/test/support/run-keel.ts";

const here = dirname(fileURLToPath(import.meta.url));
const home = mkdtempSync(join(tmpdir(), "keel-full-stack-eval-"));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = offlineEnv({ KEEL_HOME: home, KEEL_EXIT_GRACE_MS: "1000" });
const keel = (args: string[]) => runKeel(args, { cwd: here, env });
type Report = {
  experiment: { id: string; status: string; agent: string; baseline?: string };
  summary: { cases: number; passed: number; passRate: number; scorers: Record<string, { passed: number }> };
  gate: { pass: boolean; reasons: string[] };
  comparison?: { counts: Record<string, number>; cases: Array<{ caseId: string; change: string }> };
  cases: Array<{ caseId: string; status: string; sessionId: string; metrics: { rounds: number; toolCalls: number } }>;
};
const xml = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (n) => n === "testcase" });

describe("examples/full-stack: keel eval", () => {
  let baseline: Report;

  it("the eval file runs every case in its own session, stores the experiment, writes JUnit and JSON, exit 0", async () => {
    const r = await keel([
      "eval",
      "evals/full-stack.eval.ts",
      "--name",
      "baseline",
      "--baseline",
      "latest",
      "--junit",
      join(home, "baseline.xml"),
      "--json",
      join(home, "baseline.json"),
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/\[3\/3\] pass /);
    // A first CI run has no baseline yet: it says so and runs without comparison.
    expect(r.stderr).toContain(
      'agent "full-stack" has no completed experiment with these cases yet; nothing to compare with',
    );
    expect(r.stdout).toContain("3/3 passed (100%)");
    expect(r.stdout).toContain("gate: passed");
    baseline = JSON.parse(readFileSync(join(home, "baseline.json"), "utf8")) as Report;
    expect(baseline.experiment).toMatchObject({ status: "completed", agent: "full-stack" });
    expect(baseline.summary.scorers).toMatchObject({
      brief: { passed: 3 },
      focused: { passed: 3 },
      toolCalled: { passed: 2 },
    });
    const remember = baseline.cases.find((c) => c.caseId === "remember-release-day")!;
    expect(remember.metrics).toMatchObject({ rounds: 4, toolCalls: 3 });

    const junit = readFileSync(join(home, "baseline.xml"), "utf8");
    expect(XMLValidator.validate(junit)).toBe(true);
    const suite = xml.parse(junit).testsuites.testsuite;
    expect(suite.testcase.map((t: { name: string }) => t.name)).toEqual([
      "remember-release-day",
      "recall-release-day",
      "todo-as-json",
    ]);

    // Each case's session is in the agent's session store, its turn tagged with the experiment and the case.
    const shown = await keel(["sessions", "show", remember.sessionId, "--json"]);
    expect(shown.code, shown.stderr).toBe(0);
    const started = shown.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; metadata?: unknown })
      .find((e) => e.type === "turn.started");
    expect(started?.metadata).toEqual({ experiment: baseline.experiment.id, case: "remember-release-day" });

    const list = await keel(["eval", "list", "--json"]);
    expect(JSON.parse(list.stdout).map((e: { name: string }) => e.name)).toEqual(["baseline"]);
  }, 90_000);

  it("a regressed agent against --baseline latest: the regression is named and the gate exits 3", async () => {
    const r = await keel([
      "eval",
      "evals/cases.jsonl",
      "--tools",
      "live", // as the eval file runs them: its MCP and memory tools
      "--config",
      "evals/regressed.config.ts",
      "--baseline",
      "latest",
      "--max-regressions",
      "0",
      "--junit",
      join(home, "regressed.xml"),
      "--json",
      "-",
    ]);
    expect(r.code, r.stderr).toBe(3);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.experiment.baseline).toBe(baseline.experiment.id);
    expect(report.comparison!.counts).toEqual({ regression: 1, fixed: 0, unchanged: 2, new: 0, missing: 0 });
    expect(report.comparison!.cases.find((c) => c.change === "regression")!.caseId).toBe("recall-release-day");
    expect(report.gate.reasons[0]).toContain("1 regression against");
    expect(r.stderr).toContain("regression: recall-release-day (passed → failed)");
    const junit = readFileSync(join(home, "regressed.xml"), "utf8");
    expect(XMLValidator.validate(junit)).toBe(true);
    const failed = xml
      .parse(junit)
      .testsuites.testsuite.testcase.find((t: { name: string }) => t.name === "recall-release-day");
    expect(failed.failure.message).toContain('contains: missing: "Thursday"');

    // The same run passes a looser gate and fails a stricter one.
    const loose = await keel([
      "eval",
      "evals/cases.jsonl",
      "--tools",
      "live", // as the eval file runs them: its MCP and memory tools
      "--config",
      "evals/regressed.config.ts",
      "--fail-under",
      "60%",
    ]);
    expect(loose.code, loose.stderr).toBe(0);
    const strict = await keel([
      "eval",
      "evals/cases.jsonl",
      "--tools",
      "live", // as the eval file runs them: its MCP and memory tools
      "--config",
      "evals/regressed.config.ts",
      "--fail-under",
      "0.9",
    ]);
    expect(strict.code).toBe(3);
    expect(strict.stdout).toContain("pass rate 66.7% is under 90% (--fail-under)");
  }, 120_000);

  it("keel eval add turns a session into a case (its answer as the reference); a missing session is named and skipped", async () => {
    const session = baseline.cases.find((c) => c.caseId === "recall-release-day")!.sessionId;
    const to = join(home, "from-sessions.jsonl");
    // A session that does not exist is named and skipped (exit 2); the one that exists is added.
    const missing = await keel(["eval", "add", "no-such-session", session, "--to", to]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(
      'KEEL_SESSION_NOT_FOUND: No session "no-such-session" in this store; it was skipped',
    );
    expect(missing.stdout).toBe(`session-${session}\n`);
    const again = await keel(["eval", "add", session, "--to", to]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`the dataset already holds session-${session}`);
    const line = JSON.parse(readFileSync(to, "utf8").trim());
    expect(line).toMatchObject({
      id: `session-${session}`,
      input: "When do we release?",
      reference: expect.stringContaining("Thursday"),
      metadata: { session, agent: "full-stack" },
    });
  }, 60_000);
});
