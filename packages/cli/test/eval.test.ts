/**
 * `keel eval` at the command line: flags checked before anything runs, YAML and multi-turn
 * datasets, `--json -`, list and show, and what an empty home says.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { offlineEnv, runKeel } from "./support/run-keel.ts";

const root = mkdtempSync(join(tmpdir(), "keel-cli-eval-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(name: string, steps: unknown[]) {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "agent.config.json"), JSON.stringify({ name, offline: { script: "./script.json" } }));
  writeFileSync(join(dir, "script.json"), JSON.stringify({ steps }));
  const home = join(dir, "home");
  return { dir, home, env: offlineEnv({ KEEL_HOME: home, KEEL_EXIT_GRACE_MS: "500" }) };
}

describe("keel eval", () => {
  it("--baseline latest is the last completed run sharing a case with the dataset; a run of another dataset is not compared", async () => {
    const p = project("baseline", [{ text: "hello there" }]);
    writeFileSync(
      join(p.dir, "a.jsonl"),
      `${JSON.stringify({ id: "a", input: "hi", expect: { contains: "hello" } })}\n`,
    );
    writeFileSync(
      join(p.dir, "b.jsonl"),
      `${JSON.stringify({ id: "b", input: "yo", expect: { contains: "nope" } })}\n`,
    );
    const a = await runKeel(["eval", "a.jsonl", "--name", "run-a", "--json", "-"], { cwd: p.dir, env: p.env });
    expect(a.code, a.stderr).toBe(0);
    const runA = (JSON.parse(a.stdout) as { experiment: { id: string } }).experiment.id;
    // Another dataset: run-a is not its baseline (every case would count as new and hide a regression).
    const b = await runKeel(["eval", "b.jsonl", "--baseline", "latest", "--fail-under", "0"], {
      cwd: p.dir,
      env: p.env,
    });
    expect(b.code, b.stderr).toBe(0);
    expect(b.stderr).toContain("has no completed experiment with these cases yet");
    const again = await runKeel(["eval", "a.jsonl", "--baseline", "latest", "--json", "-"], { cwd: p.dir, env: p.env });
    expect(again.code, again.stderr).toBe(0);
    const report = JSON.parse(again.stdout) as { experiment: { baseline?: string }; comparison?: { counts: object } };
    expect(report.experiment.baseline).toBe(runA);
    expect(report.comparison?.counts).toMatchObject({ unchanged: 1, regression: 0 });
  });

  it("bad flags are usage errors (exit 2) before the dataset is read or the agent built", async () => {
    const p = project("flags", []);
    const cases: Array<[string[], string]> = [
      [["eval"], "keel eval needs a dataset"],
      [["eval", "x.jsonl", "--fail-under", "2"], "--fail-under takes a pass rate from 0 to 1"],
      [["eval", "x.jsonl", "--fail-under", "abc%"], "--fail-under takes a pass rate"],
      [["eval", "x.jsonl", "--max-regressions=-1"], "--max-regressions takes a whole number ≥ 0"],
      [["eval", "x.jsonl", "--concurrency", "0"], "--concurrency takes a whole number ≥ 1"],
      [["eval", "x.jsonl", "y.jsonl"], "keel eval takes one dataset"],
      [["eval", "x.jsonl", "--to", "c.jsonl"], "--to is an option of keel eval add"],
      [["eval", "x.jsonl", "--json"], "--json takes the FILE"],
      [["run", "--junit", "x.xml", "hello"], "--junit is an option of keel eval"],
      [["run", "--concurrency", "2", "hello"], "--concurrency is an option of keel worker and keel eval"],
      [["eval", "add"], "name at least one session"],
    ];
    for (const [args, message] of cases) {
      const r = await runKeel(args, { cwd: p.dir, env: p.env });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toContain(message);
    }
    const missing = await runKeel(["eval", "nope.jsonl"], { cwd: p.dir, env: p.env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("KEEL_EVAL_DATASET_INVALID");
    expect(missing.stderr).toContain("cannot be read");
    expect(existsSync(p.home)).toBe(false);
  });

  it("--tools takes fixtures, recorded or live, and so does an eval file's tools, before the agent is built", async () => {
    const p = project("tools-flag", []);
    const bad = await runKeel(["eval", "x.jsonl", "--tools", "log"], { cwd: p.dir, env: p.env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--tools takes live (run every tool), fixtures");
    writeFileSync(join(p.dir, "x.jsonl"), '{"input": "hi"}\n');
    writeFileSync(join(p.dir, "t.eval.mjs"), 'export default { dataset: "./x.jsonl", tools: "sometimes" };\n');
    const file = await runKeel(["eval", "t.eval.mjs"], { cwd: p.dir, env: p.env });
    expect(file.code).toBe(2);
    expect(file.stderr).toContain("KEEL_EVAL_CONFIG_INVALID");
    expect(file.stderr).toContain("tools must be one of live, fixtures, recorded");
    expect(existsSync(p.home)).toBe(false);
  });

  it("runs a YAML dataset with a multi-turn case; --json - puts the report on stdout; flags before the command work", async () => {
    const p = project("yaml", [
      { when: { lastUserIncludes: "first" }, text: "one" },
      { when: { lastUserIncludes: "second" }, text: "two" },
      { when: { lastUserIncludes: "alone" }, text: "solo" },
    ]);
    writeFileSync(
      join(p.dir, "cases.yaml"),
      [
        "cases:",
        "  - id: multi",
        "    input: [first, second]",
        "    expect: { exact: two }",
        "  - id: single",
        "    input: alone",
        "    expect:",
        "      regex: '^so'",
      ].join("\n"),
    );
    const r = await runKeel(
      ["--config", "agent.config.json", "eval", "cases.yaml", "--json", "-", "--name", "yaml run"],
      {
        cwd: p.dir,
        env: p.env,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.experiment).toMatchObject({
      name: "yaml run",
      dataset: "cases.yaml",
      status: "completed",
      metadata: { model: "scripted:script" },
    });
    expect(
      report.cases.map((c: { caseId: string; status: string; output: string }) => [c.caseId, c.status, c.output]),
    ).toEqual([
      ["multi", "passed", "two"],
      ["single", "passed", "solo"],
    ]);
    expect(report.cases[0].metrics.rounds).toBe(2);
    expect(r.stderr).toContain("2/2 passed (100%)");

    const list = await runKeel(["eval", "list"], { cwd: p.dir, env: p.env });
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(`${report.experiment.id}  `);
    expect(list.stdout).toContain("completed  2/2 (100%)  yaml run");
    const show = await runKeel(["eval", "show", "yaml run", "--json"], { cwd: p.dir, env: p.env });
    expect(JSON.parse(show.stdout).cases.map((c: { sessionId: string }) => typeof c.sessionId)).toEqual([
      "string",
      "string",
    ]);
    const unknown = await runKeel(["eval", "show", "exp_nope"], { cwd: p.dir, env: p.env });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("KEEL_EVAL_EXPERIMENT_NOT_FOUND");
  });

  it("without --fail-under or --max-regressions every case must pass, and the reason says it is the default", async () => {
    const p = project("default-gate", [
      { when: { lastUserIncludes: "good" }, text: "yes" },
      { when: { lastUserIncludes: "bad" }, text: "no" },
    ]);
    writeFileSync(
      join(p.dir, "cases.jsonl"),
      '{"id": "good", "input": "good", "expect": {"exact": "yes"}}\n{"id": "bad", "input": "bad", "expect": {"exact": "yes"}}\n',
    );
    const r = await runKeel(["eval", "cases.jsonl"], { cwd: p.dir, env: p.env });
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toContain("pass rate 50% is under 100% (the default gate: every case passes;");
    expect(r.stderr).toMatch(/\[\d\/2\] FAIL bad \(/);
    expect(r.stderr).toContain('exact: expected exactly "yes", got "no"');
  });

  it("list and show on a home with no database say so and create nothing", async () => {
    const p = project("empty", []);
    const list = await runKeel(["eval", "list"], { cwd: p.dir, env: p.env });
    expect(list.code).toBe(0);
    expect(list.stderr).toContain("no experiments in");
    const json = await runKeel(["eval", "list", "--json"], { cwd: p.dir, env: p.env });
    expect(json.stdout).toBe("[]\n");
    const show = await runKeel(["eval", "show", "x"], { cwd: p.dir, env: p.env });
    expect(show.code).toBe(2);
    expect(existsSync(join(p.home, "sessions.sqlite"))).toBe(false);
  });
});
