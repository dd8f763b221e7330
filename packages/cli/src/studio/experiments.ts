/**
 * What the studio shows of experiments: the list, and one experiment with its pass rate per
 * scorer and each case compared with the baseline's case of the same id. Text a case holds
 * (its input and output are untrusted model text) is cut by code points here and escaped by
 * the page.
 */
import type { CaseResult, ExperimentRecord, ExperimentStore, ExperimentSummary } from "@keel/eval";
import { codePointLength, headOf } from "@keel/text";

/** Experiments listed (most recent first). */
const LIST_LIMIT = 200;
/** Code points of a case's output (and of each input turn) sent to the page; the rest is counted. */
const TEXT_SHOWN = 4_000;

/** How a case (or one scorer of it) changed from the baseline. Contract: by its pass flag (a case passes when its status is `passed`); `new` when the baseline has no such case (or scorer). */
export type Change = "regression" | "fixed" | "unchanged" | "new";

/** One row of the list. Contract: the record as stored, plus its totals. */
export interface ExperimentRow extends ExperimentRecord {
  /** The summary stored when it ended, else counted from its cases so far. */
  totals: ExperimentSummary;
  /** The baseline experiment's name, when it is in the store. */
  baselineName?: string;
}

/** A text as the page gets it: its head, and how many code points were left off. */
interface Shown {
  text: string;
  more: number;
}

/** One case as the page shows it. Contract: every text cut to 4,000 code points, with what was left off counted. */
export interface CaseView extends Omit<CaseResult, "input" | "output"> {
  input: Shown[];
  output: Shown;
  /** The command that re-runs its session against today's plugins, when it has one. */
  replay?: string;
  /** Against the baseline's case of the same id; absent without a baseline. */
  diff?: {
    change: Change;
    before?: { status: CaseResult["status"]; output: Shown };
    scorers: Array<{ scorer: string; change: Change; before?: boolean; after: boolean }>;
  };
}

/** One experiment as the page shows it. Contract: cases in dataset order; `changes` and `missing` only with a baseline in the store. */
export interface ExperimentView {
  experiment: ExperimentRow;
  baseline?: ExperimentRecord;
  /** Pass counts per scorer, sorted by name. */
  scorers: Array<{ scorer: string; passed: number; total: number; mean: number }>;
  cases: CaseView[];
  /** Counts of each change (with a baseline). */
  changes?: Record<Change, number>;
  /** Ids of the baseline's cases this run does not have. */
  missing?: string[];
}

/** Totals of cases. Contract: the ExperimentSummary contract (`passRate` = passed / cases, 0 for none). */
export function summarize(cases: readonly CaseResult[]): ExperimentSummary {
  const scorers: ExperimentSummary["scorers"] = {};
  const sum: Record<string, number> = {};
  let costUsd = 0;
  let durationMs = 0;
  for (const c of cases) {
    costUsd += finite(c.metrics?.costUsd);
    durationMs += finite(c.metrics?.durationMs);
    for (const s of c.scores) {
      const t = (scorers[s.scorer] ??= { passed: 0, total: 0, mean: 0 });
      t.total++;
      if (s.pass) t.passed++;
      sum[s.scorer] = (sum[s.scorer] ?? 0) + finite(s.score);
    }
  }
  for (const [name, t] of Object.entries(scorers)) t.mean = t.total ? (sum[name] ?? 0) / t.total : 0;
  const passed = cases.filter((c) => c.status === "passed").length;
  const failed = cases.filter((c) => c.status === "failed").length;
  return {
    cases: cases.length,
    passed,
    failed,
    errored: cases.length - passed - failed,
    passRate: cases.length ? passed / cases.length : 0,
    scorers,
    costUsd,
    durationMs,
  };
}

/**
 * The studio's reads of an ExperimentStore.
 * Contract: only experiments of `agent` when it is set (another agent's reads as unknown);
 * `view` of an unknown id is undefined.
 */
export function experimentReader(store: ExperimentStore, agent: string | undefined) {
  const of = async (id: string): Promise<ExperimentRecord | undefined> => {
    const e = await store.get(id);
    return e && (!agent || e.agent === agent) ? e : undefined;
  };
  const row = async (e: ExperimentRecord, cases?: readonly CaseResult[]): Promise<ExperimentRow> => {
    const baseline = e.baseline ? await of(e.baseline) : undefined;
    return {
      ...e,
      totals: e.summary ?? summarize(cases ?? (await store.cases(e.id))),
      ...(baseline ? { baselineName: baseline.name } : {}),
    };
  };
  return {
    list: async (): Promise<ExperimentRow[]> =>
      Promise.all((await store.list({ ...(agent ? { agent } : {}), limit: LIST_LIMIT })).map((e) => row(e))),
    view: async (id: string): Promise<ExperimentView | undefined> => {
      const e = await of(id);
      if (!e) return undefined;
      const cases = await store.cases(id);
      const baseline = e.baseline ? await of(e.baseline) : undefined;
      const before = baseline ? new Map((await store.cases(baseline.id)).map((c) => [c.caseId, c])) : undefined;
      const totals = summarize(cases);
      const views = cases.map((c) => caseView(c, before));
      const changes = before
        ? views.reduce((n, v) => ((n[v.diff!.change] += 1), n), {
            regression: 0,
            fixed: 0,
            unchanged: 0,
            new: 0,
          } as Record<Change, number>)
        : undefined;
      const seen = new Set(cases.map((c) => c.caseId));
      return {
        experiment: await row(e, cases),
        ...(baseline ? { baseline } : {}),
        scorers: Object.entries(totals.scorers)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([scorer, s]) => ({ scorer, ...s })),
        cases: views,
        ...(changes ? { changes } : {}),
        ...(before ? { missing: [...before.keys()].filter((k) => !seen.has(k)) } : {}),
      };
    },
  };
}

function caseView(c: CaseResult, baseline: Map<string, CaseResult> | undefined): CaseView {
  const { input, output, ...rest } = c;
  const view: CaseView = {
    ...rest,
    input: (typeof input === "string" ? [input] : Array.isArray(input) ? input : []).map((t) => shown(String(t))),
    output: shown(output),
    ...(c.sessionId ? { replay: `keel replay ${shellWord(c.sessionId)}` } : {}),
  };
  if (!baseline) return view;
  const b = baseline.get(c.caseId);
  const was = new Map(b?.scores.map((s) => [s.scorer, s.pass]));
  view.diff = {
    change: b ? change(b.status === "passed", c.status === "passed") : "new",
    ...(b ? { before: { status: b.status, output: shown(b.output) } } : {}),
    scorers: c.scores.map((s) => {
      const prior = was.get(s.scorer);
      return {
        scorer: s.scorer,
        change: prior === undefined ? "new" : change(prior, s.pass),
        ...(prior === undefined ? {} : { before: prior }),
        after: s.pass,
      };
    }),
  };
  return view;
}

function change(before: boolean, after: boolean): Change {
  return before === after ? "unchanged" : before ? "regression" : "fixed";
}

function shown(text: string): Shown {
  const s = String(text ?? "");
  const head = headOf(s, TEXT_SHOWN);
  return { text: head, more: Math.max(0, codePointLength(s) - codePointLength(head)) };
}

function finite(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** A word a POSIX shell reads back as `s` (quoted only when it must be). */
function shellWord(s: string): string {
  return /^[\w.:@%+=,/-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`;
}
