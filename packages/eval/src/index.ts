/**
 * @keel/eval: prove a change to a prompt, a plugin or a model before it ships. `replaySession`
 * re-runs a recorded session against today's plugins and reports what changed per request;
 * the eval runner scores an agent on a dataset, stores each run as an experiment beside the
 * sessions and compares it with a baseline for a CI gate.
 */
export type {
  CaseMetrics,
  CaseResult,
  EvalCase,
  ExperimentRecord,
  ExperimentStore,
  ExperimentSummary,
  ScoreResult,
  ScorerSummary,
  ToolFixtureSpec,
} from "./types.ts";
export {
  CaseSchema,
  EXPECT_KEYS,
  ToolFixturesSchema,
  ExpectSchema,
  compileJsonSchema,
  datasetHash,
  loadDataset,
  parseDataset,
} from "./dataset.ts";
export type { Dataset, DatasetIssue, Expectations } from "./dataset.ts";
export { defineScorer, expectScorers, jsonOf, runScorer, subsetMatch } from "./scorers.ts";
export type { ScoreContext, Scorer, ScorerVerdict } from "./scorers.ts";
export { judgePrompt, llmJudge, parseVerdict } from "./judge.ts";
export type { JudgeOptions } from "./judge.ts";
export { defineEval, metricsOf, runEval, summarize } from "./runner.ts";
export type { EvalDefinition, EvalProgress, EvalRun, RunEvalOptions } from "./runner.ts";
export { EVAL_TOOLS_MODES, evalMark, evalTools } from "./tools.ts";
export type { EvalTools, EvalToolsMode, ToolFixture } from "./tools.ts";
export { applyGate, compareRuns, pct } from "./gate.ts";
export type { CaseChange, CaseComparison, Comparison, GateOptions, GateResult } from "./gate.ts";
export {
  caseLine,
  failureLines,
  jsonReport,
  junitXml,
  progressBar,
  summaryTable,
  xmlAttr,
  xmlText,
} from "./reporters.ts";
export { addSessionsToDataset, caseFromSession } from "./from-sessions.ts";
export type { DatasetLine } from "./from-sessions.ts";
export { replaySession } from "./replay.ts";
export type { ReplayOptions, ReplayReport, ReplayRig, TurnOutcome } from "./replay.ts";
export { compareRequests, lineDiff } from "./replay-diff.ts";
export type { EditSummary, RequestChange } from "./replay-diff.ts";
export { memoryExperimentStore } from "./store/memory.ts";
export { SQLITE_EXPERIMENT_MIGRATIONS, sqliteExperimentStore } from "./store/sqlite.ts";
export type { SqliteExperimentStoreOptions } from "./store/sqlite.ts";
export { POSTGRES_EXPERIMENT_MIGRATIONS, postgresExperimentStore } from "./store/postgres.ts";
export type { PostgresExperimentStoreOptions } from "./store/postgres.ts";
export { openExperimentStore } from "./store/open.ts";
export type { OpenExperimentStoreOptions } from "./store/open.ts";
