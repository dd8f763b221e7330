/**
 * The CI gate: an experiment compared with a baseline case by case, and the thresholds that
 * fail the build (`--fail-under`, `--max-regressions`).
 */
import type { CaseResult, ExperimentSummary } from "./types.ts";

/** How one case moved against the baseline. Contract: passing is `status === "passed"`; failed and error are alike. */
export type CaseChange = "regression" | "fixed" | "unchanged" | "new" | "missing";

/** One case compared with the baseline. Contract: `status` absent only for `missing`, `baseline` only for `new`. */
export interface CaseComparison {
  caseId: string;
  change: CaseChange;
  /** The case's status now (absent for `missing`). */
  status?: CaseResult["status"];
  /** Its status in the baseline (absent for `new`). */
  baseline?: CaseResult["status"];
}

/** A run against its baseline. Contract: `counts` has every change, 0 when none; `cases` in the current order, then the missing ones. */
export interface Comparison {
  baseline: string;
  cases: CaseComparison[];
  counts: Record<CaseChange, number>;
}

/**
 * Compare `current` with `baseline` by case id. Contract: a case that passed in the baseline and
 * does not now is a regression; one that did not pass and does now is fixed; the same pass or not
 * is unchanged; only now is new; only in the baseline is missing.
 */
export function compareRuns(
  baselineId: string,
  current: readonly CaseResult[],
  baseline: readonly CaseResult[],
): Comparison {
  const before = new Map(baseline.map((r) => [r.caseId, r]));
  const now = new Set(current.map((r) => r.caseId));
  const cases: CaseComparison[] = current.map((r) => {
    const b = before.get(r.caseId);
    if (!b) return { caseId: r.caseId, change: "new", status: r.status };
    const wasOk = b.status === "passed";
    const isOk = r.status === "passed";
    return {
      caseId: r.caseId,
      change: wasOk === isOk ? "unchanged" : wasOk ? "regression" : "fixed",
      status: r.status,
      baseline: b.status,
    };
  });
  for (const b of baseline)
    if (!now.has(b.caseId)) cases.push({ caseId: b.caseId, change: "missing", baseline: b.status });
  const counts: Record<CaseChange, number> = { regression: 0, fixed: 0, unchanged: 0, new: 0, missing: 0 };
  for (const c of cases) counts[c.change]++;
  return { baseline: baselineId, cases, counts };
}

/** The thresholds of the gate. Contract: an absent threshold is not checked. */
export interface GateOptions {
  /** Fail when the pass rate is below this, in [0, 1]. */
  failUnder?: number;
  /** Fail when more cases than this regressed against the baseline. */
  maxRegressions?: number;
}

/** The gate's verdict. Contract: `pass` is false exactly when `reasons` is non-empty. */
export interface GateResult {
  pass: boolean;
  reasons: string[];
}

/** Apply the gate. Contract: with no threshold set it passes; `maxRegressions` without a comparison is not checked. */
export function applyGate(
  summary: ExperimentSummary,
  comparison: Comparison | undefined,
  options: GateOptions,
): GateResult {
  const reasons: string[] = [];
  if (options.failUnder !== undefined && summary.passRate < options.failUnder)
    reasons.push(`pass rate ${pct(summary.passRate)} is under ${pct(options.failUnder)} (--fail-under)`);
  if (options.maxRegressions !== undefined && comparison && comparison.counts.regression > options.maxRegressions)
    reasons.push(
      `${comparison.counts.regression} regression${comparison.counts.regression === 1 ? "" : "s"} against ${comparison.baseline}, more than ${options.maxRegressions} (--max-regressions): ${comparison.cases
        .filter((c) => c.change === "regression")
        .slice(0, 10)
        .map((c) => c.caseId)
        .join(", ")}`,
    );
  return { pass: reasons.length === 0, reasons };
}

/** A rate as a percentage. Contract: at most one decimal, e.g. `66.7%`. */
export function pct(rate: number): string {
  return `${Math.round(rate * 1000) / 10}%`;
}
