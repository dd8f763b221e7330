/**
 * The rows both database stores keep: one per experiment, one per case, with every structured
 * field as JSON text (not PostgreSQL's jsonb, which reorders keys), so it reads back exactly.
 */
import { KeelError } from "@keel/kernel";
import { toWellFormed } from "@keel/text";
import type { CaseResult, ExperimentRecord } from "../types.ts";

type Row = Record<string, unknown>;

/** The experiment columns, in the order `experimentParams` gives them. */
export const EXPERIMENT_COLUMNS =
  "id, name, dataset, dataset_hash, agent, config, baseline, status, started_at, ended_at, summary, metadata";

/** The case columns, in the order `caseParams` gives them. */
export const CASE_COLUMNS =
  "experiment_id, case_id, idx, input, session_id, status, output, scores, metrics, error, started_at, ended_at";

const json = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));
const parsed = (v: unknown): unknown => (v === null || v === undefined ? undefined : JSON.parse(String(v)));

/**
 * Text as both databases keep it: PostgreSQL TEXT refuses a NUL (its store writes U+FFFD) and
 * both turn a lone surrogate into U+FFFD; SQLite kept the NUL, so the same experiment read back
 * differently from the two. JSON columns are unchanged (JSON.stringify escapes both).
 */
const stored = (params: unknown[]): unknown[] =>
  params.map((p) => (typeof p === "string" ? toWellFormed(p).replaceAll("\0", "\uFFFD") : p));

export function experimentParams(e: ExperimentRecord): unknown[] {
  return stored([
    e.id,
    e.name,
    e.dataset,
    e.datasetHash,
    e.agent,
    e.config ?? null,
    e.baseline ?? null,
    e.status,
    e.startedAt,
    e.endedAt ?? null,
    json(e.summary),
    json(e.metadata),
  ]);
}

export function caseParams(c: CaseResult): unknown[] {
  return stored([
    c.experimentId,
    c.caseId,
    c.index,
    JSON.stringify(c.input),
    c.sessionId ?? null,
    c.status,
    c.output,
    JSON.stringify(c.scores),
    JSON.stringify(c.metrics),
    c.error ?? null,
    c.startedAt,
    c.endedAt,
  ]);
}

/** Optional fields absent (never `undefined`-valued) when their column is NULL. */
function optional<K extends string>(key: K, value: unknown): { [P in K]?: unknown } {
  return value === null || value === undefined ? {} : ({ [key]: value } as { [P in K]: unknown });
}

export function toExperiment(r: Row): ExperimentRecord {
  return {
    id: String(r.id),
    name: String(r.name),
    dataset: String(r.dataset),
    datasetHash: String(r.dataset_hash),
    agent: String(r.agent),
    ...optional("config", r.config),
    ...optional("baseline", r.baseline),
    status: r.status as ExperimentRecord["status"],
    startedAt: Number(r.started_at),
    ...optional("endedAt", r.ended_at === null ? null : Number(r.ended_at)),
    ...optional("summary", parsed(r.summary)),
    ...optional("metadata", parsed(r.metadata)),
  } as ExperimentRecord;
}

export function toCase(r: Row): CaseResult {
  return {
    experimentId: String(r.experiment_id),
    caseId: String(r.case_id),
    index: Number(r.idx),
    input: parsed(r.input) as CaseResult["input"],
    ...optional("sessionId", r.session_id),
    status: r.status as CaseResult["status"],
    output: String(r.output),
    scores: parsed(r.scores) as CaseResult["scores"],
    metrics: parsed(r.metrics) as CaseResult["metrics"],
    ...optional("error", r.error),
    startedAt: Number(r.started_at),
    endedAt: Number(r.ended_at),
  } as CaseResult;
}

/** `list`'s limit as a row count: undefined (all) when not a finite number, else a whole number ≥ 0. */
export function listLimit(limit: number | undefined): number | undefined {
  return limit === undefined || !Number.isFinite(limit) ? undefined : Math.max(0, Math.floor(limit));
}

/** The error for a write that found no experiment `id` (finish, or a case of an unknown experiment). */
export function unknownExperiment(id: string, where: string): KeelError {
  return new KeelError(
    "KEEL_STORE_FAILED",
    `No experiment "${id}" in ${where}: create it before finishing it or adding cases.`,
    { path: where },
  );
}

/** The error of any call after `close()`. */
export function closedStore(where: string): KeelError {
  return new KeelError("KEEL_STORE_FAILED", `The experiment store on ${where} is closed.`, { path: where });
}
