/**
 * The records of an eval: cases, scores and experiments. One contract shared by the runner
 * (`keel eval`), the experiment stores (SQLite and PostgreSQL) and the studio.
 */
import type { KeelEvent, ModelProvider } from "@keel/kernel";

/** One case of a dataset. Contract: `id` is unique in its dataset (the line number when the file gives none). */
export interface EvalCase {
  id: string;
  /** The user's input of each turn, in order (a string is one turn). */
  input: string | string[];
  metadata?: Record<string, unknown>;
  /** What the scorers check; built-in scorers read their own key (see scorers.ts). */
  expect?: Record<string, unknown>;
  /** A reference answer (from `keel eval add`: the answer the session gave). */
  reference?: string;
  /**
   * Answers for the case's tool calls, by tool name: `{ result, args?, isError? }` or a list of
   * them (the first whose `args` match answers). The tool does not run (see `RunEvalOptions.tools`).
   */
  tools?: Record<string, ToolFixtureSpec | ToolFixtureSpec[]>;
  /** Where the case came from: file and 1-based line, for located errors. */
  source?: { file: string; line: number };
}

/** One fixture of a case's tool. Contract: `args` is matched as a subset of the call's arguments; absent matches any call. */
export interface ToolFixtureSpec {
  args?: Record<string, unknown>;
  result: unknown;
  isError?: boolean;
}

/** One scorer's verdict on one case. Contract: `score` is in [0, 1]; `error` set means the scorer threw (the case fails, the run goes on). */
export interface ScoreResult {
  scorer: string;
  pass: boolean;
  score: number;
  reason?: string;
  error?: string;
}

/** What one case's run measured. */
export interface CaseMetrics {
  rounds: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  durationMs: number;
}

/**
 * One case's outcome in an experiment.
 * Contract: `status` is `passed` when every score passed, `failed` when one did not, `error`
 * when the case could not run (its `error` says why); `sessionId` links the session it ran in.
 */
export interface CaseResult {
  experimentId: string;
  caseId: string;
  /** 0-based position in the dataset. */
  index: number;
  input: string | string[];
  sessionId?: string;
  status: "passed" | "failed" | "error";
  output: string;
  scores: ScoreResult[];
  metrics: CaseMetrics;
  error?: string;
  startedAt: number;
  endedAt: number;
}

/** Pass counts of one scorer over an experiment. */
export interface ScorerSummary {
  passed: number;
  total: number;
  /** Mean score in [0, 1]. */
  mean: number;
}

/** An experiment's totals. Contract: `passRate` = passed / cases (0 when there are none). */
export interface ExperimentSummary {
  cases: number;
  passed: number;
  failed: number;
  errored: number;
  passRate: number;
  scorers: Record<string, ScorerSummary>;
  costUsd: number;
  durationMs: number;
}

/**
 * One run of a dataset against an agent.
 * Contract: `status` is `running` until the run ends (a killed run stays `running` and is
 * continued with `--resume`); `baseline` names the experiment it was compared to.
 */
export interface ExperimentRecord {
  id: string;
  name: string;
  /** The dataset's path as given, and a hash of its cases (a resumed run must match it). */
  dataset: string;
  datasetHash: string;
  agent: string;
  /** The config file it ran with, when there was one. */
  config?: string;
  baseline?: string;
  status: "running" | "completed" | "failed";
  startedAt: number;
  endedAt?: number;
  summary?: ExperimentSummary;
  metadata?: Record<string, unknown>;
}

/**
 * Where experiments are kept: beside the sessions, in the same SQLite file or PostgreSQL
 * database and schema. Contract: `putCase` replaces the case of the same experiment and
 * `caseId`; `list` is most recent first; reads of an unknown id give undefined / [].
 */
export interface ExperimentStore {
  create(experiment: ExperimentRecord): Promise<void>;
  finish(id: string, status: "completed" | "failed", summary: ExperimentSummary, endedAt: number): Promise<void>;
  putCase(result: CaseResult): Promise<void>;
  get(id: string): Promise<ExperimentRecord | undefined>;
  list(options?: { agent?: string; limit?: number }): Promise<ExperimentRecord[]>;
  cases(experimentId: string): Promise<CaseResult[]>;
  close(): Promise<void>;
}

/** What a scorer is given about one case's run. Contract: read-only; `events` are the case session's stored events. */
export interface ScoreContext {
  case: EvalCase;
  /** The answer of the case's last turn. */
  output: string;
  /** Every turn's answer, in order (one per entry of a multi-turn input). */
  outputs: readonly string[];
  events: readonly KeelEvent[];
  metrics: CaseMetrics;
  /** The model a judge asks: the agent's side model, else its main model. */
  model?: ModelProvider;
  /** Aborted when the scorer's time is up or the run is stopped. */
  signal: AbortSignal;
}

/**
 * What a scorer may return. Contract: a boolean (pass or fail), a number in [0, 1] (passes at or over
 * the scorer's `threshold`, default 0.5), or `{ pass?, score?, reason? }` (one of pass or score).
 */
export type ScorerVerdict = boolean | number | { pass?: boolean; score?: number; reason?: string };

/** A scorer. Contract: `name` is unique in a run; `score` may be async; `appliesTo` false skips the case. */
export interface Scorer {
  name: string;
  score(ctx: ScoreContext): ScorerVerdict | Promise<ScorerVerdict>;
  /** Which cases it scores (default: every case). */
  appliesTo?(c: EvalCase): boolean;
  /** A number verdict passes at or over this (default 0.5). */
  threshold?: number;
  /** How long `score` may take (default 60,000 ms); past it the case fails with the scorer's name. */
  timeoutMs?: number;
}
