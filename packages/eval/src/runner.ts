/**
 * The eval runner: each case in its own session of the agent (turn metadata `{ experiment, case }`),
 * at most `concurrency` at once; each case's result is stored as soon as it is scored, so a
 * killed run loses only the cases in flight and `resume` continues it.
 */
import { randomUUID } from "node:crypto";
import type { Agent, KeelEvent, ModelProvider, Session, ToolDefinition } from "@keel/agent";
import { errorMessage, KeelError } from "@keel/kernel";
import { redact } from "@keel/secrets";
import { headOf } from "@keel/text";
import { expectScorers, runScorer } from "./scorers.ts";
import type { Scorer } from "./scorers.ts";
import { earlierCalls, fixturesOf, recordedCalls } from "./tools.ts";
import type { EvalTools, EvalToolsMode } from "./tools.ts";
import type {
  CaseMetrics,
  CaseResult,
  EvalCase,
  ExperimentRecord,
  ExperimentStore,
  ExperimentSummary,
  ScoreResult,
} from "./types.ts";

/** An eval file's default export (`*.eval.ts`). Contract: `dataset` is resolved from the eval file's folder; scorer names are unique. */
export interface EvalDefinition {
  /** The dataset, relative to the eval file. */
  dataset: string;
  /** Scorers run on every case (their `appliesTo` may narrow it), after the case's `expect` scorers. */
  scorers?: Scorer[];
  /** Cases run at once (default 4; `--concurrency` wins). */
  concurrency?: number;
  /** The experiment's name (default: the dataset's file name and the time; `--name` wins). */
  name?: string;
  /** What answers a tool call no fixture answers (default `fixtures`; `--tools` wins). See EvalToolsMode. */
  tools?: EvalToolsMode;
}

/** Declare an eval file's content, typed. Contract: returns its argument unchanged. */
export function defineEval<D extends EvalDefinition>(definition: D): D {
  return definition;
}

/** What the runner reports while it runs. Contract: one `start`, then one `case` per case scored in this run, `done` counting resumed ones too. */
export type EvalProgress =
  | { type: "start"; experiment: ExperimentRecord; total: number; skipped: number }
  | { type: "case"; result: CaseResult; done: number; total: number };

/** Options of runEval. Contract: only `agent`, `cases`, `store` and `dataset` are required. */
export interface RunEvalOptions {
  agent: Agent;
  cases: readonly EvalCase[];
  store: ExperimentStore;
  /** Run-level scorers, added to each case's `expect` scorers. */
  scorers?: readonly Scorer[];
  /** Cases at once (default 4). */
  concurrency?: number;
  /** The dataset's path as shown, and its hash (loadDataset's). */
  dataset: { file: string; hash: string };
  name?: string;
  config?: string;
  /** The experiment this run is compared to (recorded on the experiment). */
  baseline?: string;
  /** Continue this experiment: the same dataset hash is required; stored cases are skipped. */
  resume?: string;
  /** The model judges ask (default: the agent's side model, else its main model). */
  judgeModel?: ModelProvider;
  metadata?: Record<string, unknown>;
  onProgress?: (event: EvalProgress) => void;
  /** Stops the run: cases in flight are cancelled and not stored; the experiment stays `running` (resumable). */
  signal?: AbortSignal;
  /** Milliseconds a case's session gets to close (its background jobs); default 5,000. */
  closeGraceMs?: number;
  /**
   * The tool seam (`evalTools()`, its `plugin` in the agent's plugins): answers calls from the
   * case's fixtures or recording by `toolsMode`, and on resume never runs again a call that ran
   * in an interrupted attempt of the case. Without it every tool runs, on resume too.
   */
  tools?: EvalTools;
  /** What answers a call no fixture answers (default `fixtures`: only read-only tools run). */
  toolsMode?: EvalToolsMode;
}

/** What runEval returns. Contract: `summary` covers `results`; `experiment` is as stored. */
export interface EvalRun {
  experiment: ExperimentRecord;
  /** Every case of the experiment (resumed ones included), in dataset order. */
  results: CaseResult[];
  summary: ExperimentSummary;
  /** False when the run was stopped before every case was scored. */
  complete: boolean;
}

/**
 * Run `cases` against `agent` as one experiment.
 * Contract: every case runs in a new session; a case's result is in the store before the next
 * progress event; a case that throws is `error` with the reason, never the run; a stopped run
 * leaves the experiment `running` with the finished cases stored; a finished one is `completed`
 * with its summary. Resuming with another dataset hash, or a finished experiment, throws
 * KEEL_EVAL_RESUME_MISMATCH; an unknown id KEEL_EVAL_EXPERIMENT_NOT_FOUND.
 */
export async function runEval(options: RunEvalOptions): Promise<EvalRun> {
  const { agent, store, cases } = options;
  const concurrency = Math.max(1, Math.floor(options.concurrency ?? 4));
  let experiment: ExperimentRecord;
  const done = new Map<string, CaseResult>();
  if (options.resume) {
    const found = await store.get(options.resume);
    if (!found) throw new KeelError("KEEL_EVAL_EXPERIMENT_NOT_FOUND", `No experiment "${options.resume}" to resume.`);
    if (found.datasetHash !== options.dataset.hash)
      throw new KeelError(
        "KEEL_EVAL_RESUME_MISMATCH",
        `Experiment "${found.id}" ran ${found.dataset} with hash ${found.datasetHash.slice(0, 12)}; ${options.dataset.file} now hashes to ${options.dataset.hash.slice(0, 12)}.`,
      );
    if (found.agent !== agent.name)
      throw new KeelError(
        "KEEL_EVAL_RESUME_MISMATCH",
        `Experiment "${found.id}" is agent "${found.agent}"'s; this config's agent is "${agent.name}" (resuming would mix two agents' answers in one experiment).`,
      );
    if (found.status !== "running")
      throw new KeelError("KEEL_EVAL_RESUME_MISMATCH", `Experiment "${found.id}" already ${found.status}.`);
    experiment = found;
    const ids = new Set(cases.map((c) => c.id));
    for (const r of await store.cases(found.id)) if (ids.has(r.caseId)) done.set(r.caseId, r);
  } else {
    experiment = {
      id: `exp_${randomUUID().replaceAll("-", "").slice(0, 16)}`,
      name: options.name ?? `${options.dataset.file} ${new Date().toISOString()}`,
      dataset: options.dataset.file,
      datasetHash: options.dataset.hash,
      agent: agent.name,
      ...(options.config ? { config: options.config } : {}),
      ...(options.baseline ? { baseline: options.baseline } : {}),
      status: "running",
      startedAt: Date.now(),
      ...(options.metadata ? { metadata: options.metadata } : {}),
    };
    await store.create(experiment);
  }
  const todo = cases.map((c, index) => ({ c, index })).filter(({ c }) => !done.has(c.id));
  if (options.tools) {
    const known = new Map<string, ToolDefinition>();
    try {
      for (const t of agent.options.tools ?? []) known.set(t.name, t);
    } catch {
      // Unreadable tools: each is judged by its resolved category.
    }
    options.tools.known = known;
  }
  // What earlier, interrupted attempts of the remaining cases ran: never run again.
  const earlier = options.resume
    ? await earlierCalls(agent.store, agent.name, experiment, new Set(todo.map(({ c }) => c.id)))
    : new Map();
  options.onProgress?.({ type: "start", experiment, total: cases.length, skipped: cases.length - todo.length });
  const judgeModel = options.judgeModel ?? (agent.options.sideModel || agent.options.provider);
  let next = 0;
  let finished = done.size;
  const stopped = () => options.signal?.aborted === true;
  const worker = async () => {
    while (next < todo.length && !stopped()) {
      const { c, index } = todo[next++]!;
      const result = await runCase(options, experiment.id, c, index, judgeModel, earlier.get(c.id) ?? []);
      if (!result) continue; // stopped mid-case: not stored, re-run on resume
      await store.putCase(result);
      done.set(c.id, result);
      options.onProgress?.({ type: "case", result, done: ++finished, total: cases.length });
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, todo.length) }, worker));
  const results = cases.flatMap((c) => (done.has(c.id) ? [done.get(c.id)!] : []));
  const summary = summarize(results);
  const complete = results.length === cases.length;
  if (complete) {
    const endedAt = Date.now();
    await store.finish(experiment.id, "completed", summary, endedAt);
    experiment = { ...experiment, status: "completed", endedAt, summary };
  }
  return { experiment, results, summary, complete };
}

/** One case: its session, its turns, its scores. Undefined when the run was stopped during it. */
async function runCase(
  options: RunEvalOptions,
  experimentId: string,
  c: EvalCase,
  index: number,
  judgeModel: ModelProvider | undefined,
  earlier: Parameters<EvalTools["bind"]>[2]["earlier"],
): Promise<CaseResult | undefined> {
  const startedAt = Date.now();
  const mode = options.toolsMode ?? "fixtures";
  const unbind = options.tools?.bind(experimentId, c.id, {
    mode,
    fixtures: fixturesOf(c),
    recorded: mode === "recorded" ? await recordedCalls(options.agent.store, c) : [],
    earlier,
  });
  const inputs = typeof c.input === "string" ? [c.input] : c.input;
  const outputs: string[] = [];
  let session: Session | undefined;
  let events: KeelEvent[] = [];
  let error: string | undefined;
  const onStop = () => session?.cancel();
  options.signal?.addEventListener("abort", onStop, { once: true });
  try {
    session = await options.agent.session();
    for (const input of inputs) {
      if (options.signal?.aborted) return undefined;
      const r = await session.run(input, { metadata: { experiment: experimentId, case: c.id } });
      outputs.push(r.text);
      if (r.verdict.status !== "completed") {
        error = `turn ${outputs.length} ${r.verdict.status}: ${"reason" in r.verdict ? r.verdict.reason : ""}`;
        break;
      }
    }
    events = await session.events();
  } catch (err) {
    if (options.signal?.aborted) return undefined;
    error = errorMessage(err);
    if (session) events = await session.events().catch(() => []);
  } finally {
    options.signal?.removeEventListener("abort", onStop);
    await session?.close({ graceMs: options.closeGraceMs ?? 5_000 }).catch(() => undefined);
    unbind?.();
  }
  if (options.signal?.aborted && error !== undefined) return undefined;
  const metrics = metricsOf(events, Date.now() - startedAt);
  const output = outputs.at(-1) ?? "";
  const scorers = [...expectScorers(c), ...(options.scorers ?? []).filter((s) => appliesTo(s, c))];
  const scores: ScoreResult[] = [];
  if (error === undefined)
    for (const s of scorers)
      scores.push(
        await runScorer(
          s,
          { case: c, output, outputs, events, metrics, ...(judgeModel ? { model: judgeModel } : {}) },
          options.signal,
        ),
      );
  // Scorers read the answer as said; what is stored (and so reported in JUnit and JSON) is
  // redacted, as the session store redacts the case's events: a reason may quote the answer.
  return {
    experimentId,
    caseId: c.id,
    index,
    input: typeof c.input === "string" ? redact(c.input) : c.input.map(redact),
    ...(session ? { sessionId: session.id } : {}),
    status: error !== undefined ? "error" : scores.every((s) => s.pass) ? "passed" : "failed",
    output: redact(output),
    scores: scores.map((s) => ({
      ...s,
      ...(s.reason !== undefined ? { reason: redact(s.reason) } : {}),
      ...(s.error !== undefined ? { error: redact(s.error) } : {}),
    })),
    metrics,
    ...(error !== undefined ? { error: redact(headOf(error, 2_000)) } : {}),
    startedAt,
    endedAt: Date.now(),
  };
}

function appliesTo(s: Scorer, c: EvalCase): boolean {
  try {
    return s.appliesTo ? s.appliesTo(c) !== false : true;
  } catch {
    return true; // scored, so that its own failure shows under its name
  }
}

/**
 * A case's metrics from its session's events. Contract: sums over every turn's last terminal
 * event (a turn that paused and resumed counts once: its last event holds the whole turn).
 */
export function metricsOf(events: readonly KeelEvent[], durationMs: number): CaseMetrics {
  const m: CaseMetrics = { rounds: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, durationMs };
  const last = new Map<string | null, Extract<KeelEvent, { type: "turn.completed" }>>();
  for (const e of events)
    if (
      e.type === "turn.completed" ||
      e.type === "turn.failed" ||
      e.type === "turn.interrupted" ||
      e.type === "turn.paused"
    )
      last.set(e.turnId ?? null, e as Extract<KeelEvent, { type: "turn.completed" }>);
  for (const e of last.values()) {
    m.rounds += e.rounds;
    m.toolCalls += e.toolCalls;
    m.inputTokens += e.usage.inputTokens + e.usage.cacheReadTokens + e.usage.cacheWriteTokens;
    m.outputTokens += e.usage.outputTokens;
    m.costUsd += e.usage.costUsd ?? 0;
  }
  return m;
}

/** An experiment's totals. Contract: the ExperimentSummary contract; `durationMs` spans the first start to the last end. */
export function summarize(results: readonly CaseResult[]): ExperimentSummary {
  const s: ExperimentSummary = {
    cases: results.length,
    passed: 0,
    failed: 0,
    errored: 0,
    passRate: 0,
    scorers: {},
    costUsd: 0,
    durationMs: 0,
  };
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const r of results) {
    if (r.status === "passed") s.passed++;
    else if (r.status === "failed") s.failed++;
    else s.errored++;
    s.costUsd += r.metrics.costUsd;
    first = Math.min(first, r.startedAt);
    last = Math.max(last, r.endedAt);
    for (const sc of r.scores) {
      const t = (s.scorers[sc.scorer] ??= { passed: 0, total: 0, mean: 0 });
      t.mean = (t.mean * t.total + sc.score) / (t.total + 1);
      t.total++;
      if (sc.pass) t.passed++;
    }
  }
  s.passRate = results.length ? s.passed / results.length : 0;
  s.durationMs = results.length ? last - first : 0;
  return s;
}
