import { XMLParser, XMLValidator } from "fast-xml-parser";
import { describe, expect, it } from "vitest";
import { isWellFormed } from "@keel/text";
import { applyGate, compareRuns } from "../src/gate.ts";
import { caseLine, jsonReport, junitXml, progressBar, summaryTable } from "../src/reporters.ts";
import { summarize } from "../src/runner.ts";
import type { CaseResult, ExperimentRecord } from "../src/types.ts";

const metrics = { rounds: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1, costUsd: 0, durationMs: 10 };
function result(caseId: string, status: CaseResult["status"], extra: Partial<CaseResult> = {}): CaseResult {
  return {
    experimentId: "exp_1",
    caseId,
    index: 0,
    input: "x",
    status,
    output: "out",
    scores:
      status === "passed"
        ? [{ scorer: "contains", pass: true, score: 1 }]
        : status === "failed"
          ? [{ scorer: "contains", pass: false, score: 0, reason: 'missing: "x"' }]
          : [],
    ...(status === "error" ? { error: "turn 1 failed: boom" } : {}),
    metrics,
    startedAt: 1_000,
    endedAt: 2_000,
    ...extra,
  };
}
const experiment: ExperimentRecord = {
  id: "exp_1",
  name: "nightly",
  dataset: "evals/cases.jsonl",
  datasetHash: "h",
  agent: "a",
  status: "completed",
  startedAt: Date.UTC(2026, 0, 1),
};

describe("baseline comparison and the gate", () => {
  it("classifies every case: regression, fixed, unchanged, new, missing", () => {
    const before = [result("a", "passed"), result("b", "failed"), result("c", "passed"), result("gone", "passed")];
    const now = [result("a", "failed"), result("b", "passed"), result("c", "passed"), result("fresh", "error")];
    const c = compareRuns("exp_0", now, before);
    expect(c.cases.map((x) => [x.caseId, x.change])).toEqual([
      ["a", "regression"],
      ["b", "fixed"],
      ["c", "unchanged"],
      ["fresh", "new"],
      ["gone", "missing"],
    ]);
    expect(c.counts).toEqual({ regression: 1, fixed: 1, unchanged: 1, new: 1, missing: 1 });
    const summary = summarize(now);
    expect(applyGate(summary, c, {})).toEqual({ pass: true, reasons: [] });
    expect(applyGate(summary, c, { maxRegressions: 1 }).pass).toBe(true);
    const g = applyGate(summary, c, { maxRegressions: 0, failUnder: 0.9 });
    expect(g.pass).toBe(false);
    expect(g.reasons).toEqual([
      "pass rate 50% is under 90% (--fail-under)",
      "1 regression against exp_0, more than 0 (--max-regressions): a",
    ]);
  });
});

describe("reporters", () => {
  it("JUnit: one testcase per case, failures with the scorers' reasons, errors for cases that could not run", () => {
    const results = [result("ok", "passed"), result("bad", "failed"), result("broke", "error")];
    const xml = junitXml(experiment, results, summarize(results));
    expect(XMLValidator.validate(xml)).toBe(true);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(xml);
    const suite = doc.testsuites.testsuite;
    expect(suite).toMatchObject({ name: "nightly", tests: "3", failures: "1", errors: "1" });
    expect(suite.testcase.map((t: { name: string }) => t.name)).toEqual(["ok", "bad", "broke"]);
    expect(suite.testcase[1].failure).toMatchObject({ message: 'contains: missing: "x"', type: "contains" });
    expect(suite.testcase[2].error.message).toBe("error: turn 1 failed: boom");
  });

  it("JUnit stays well-formed with hostile text: ]]>, markup, control characters, lone surrogates, emoji cut", () => {
    const hostile = `]]><script>&amp;"'\u0000\u0001\u001b[31m\u000b\ud800 ${"😀".repeat(3000)}`;
    const results = [
      result(hostile, "failed", {
        output: hostile,
        scores: [{ scorer: `s]]>${hostile}`, pass: false, score: 0, reason: hostile }],
      }),
      result("e", "error", { error: hostile }),
    ];
    const xml = junitXml({ ...experiment, name: hostile }, results, summarize(results));
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(isWellFormed(xml)).toBe(true);
    expect(xml).not.toContain("<script>");
    expect([...xml].filter((ch) => ch < " " && !"\t\n\r".includes(ch))).toEqual([]);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(xml);
    expect(doc.testsuites.testsuite.testcase[0]["system-out"]).toContain("]]><script>");
  });

  it("JSON report, summary table, progress line and bar", () => {
    const results = [result("ok", "passed"), result("bad", "failed")];
    const summary = summarize(results);
    const comparison = compareRuns("exp_0", results, [result("bad", "passed")]);
    const gate = applyGate(summary, comparison, { maxRegressions: 0 });
    const json = JSON.parse(jsonReport(experiment, results, summary, { comparison, gate }));
    expect(Object.keys(json)).toEqual(["experiment", "summary", "gate", "comparison", "cases"]);
    const table = summaryTable(experiment, summary, results, { comparison, gate });
    expect(table).toContain("1/2 passed (50%)");
    expect(table).toContain("contains  1/2     0.50");
    expect(table).toContain("regression: bad (passed → failed)");
    expect(table).toContain("gate: FAILED");
    expect(caseLine(results[1]!, 2, 2)).toBe('[2/2] FAIL bad (0.010 s): contains: missing: "x"');
    expect(progressBar(5, 10, { failed: 1, errored: 0 }, 80)).toMatch(/^\[#{20}\.{20}\] 5\/10 · 1 failed · 0 errored$/);
  });
});
