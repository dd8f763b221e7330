/** Experiment records for the store and studio tests. */
import type { CaseResult, ExperimentRecord, ExperimentSummary } from "../src/index.ts";

export function experiment(over: Partial<ExperimentRecord> = {}): ExperimentRecord {
  return {
    id: "exp-1",
    name: "nightly",
    dataset: "evals/support.jsonl",
    datasetHash: "sha256:abc",
    agent: "support",
    status: "running",
    startedAt: 1_700_000_000_000,
    ...over,
  };
}

export function caseResult(over: Partial<CaseResult> = {}): CaseResult {
  return {
    experimentId: "exp-1",
    caseId: "c1",
    index: 0,
    input: "hello",
    status: "passed",
    output: "hi",
    scores: [{ scorer: "contains", pass: true, score: 1 }],
    metrics: { rounds: 1, toolCalls: 0, inputTokens: 10, outputTokens: 2, costUsd: 0.0001, durationMs: 12 },
    startedAt: 1_700_000_000_100,
    endedAt: 1_700_000_000_200,
    ...over,
  };
}

export const SUMMARY: ExperimentSummary = {
  cases: 2,
  passed: 1,
  failed: 1,
  errored: 0,
  passRate: 0.5,
  scorers: { contains: { passed: 1, total: 2, mean: 0.5 }, "llm-judge": { passed: 2, total: 2, mean: 0.875 } },
  costUsd: 0.0123,
  durationMs: 4567,
};
