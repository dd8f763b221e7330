/**
 * `keel eval`: score the config's agent on a dataset (JSONL or YAML, or an `*.eval.ts` file
 * naming one with its scorers), store the run as an experiment beside the sessions, compare it
 * with a baseline and gate CI on it. `keel eval list`, `keel eval show EXP` read experiments;
 * `keel eval add SESSION…` turns sessions into cases.
 */
import { statSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { KeelError, errorMessage } from "@keel/kernel";
import type { Agent, SessionStore } from "@keel/agent";
import {
  EVAL_TOOLS_MODES,
  addSessionsToDataset,
  applyGate,
  caseLine,
  compareRuns,
  jsonReport,
  junitXml,
  loadDataset,
  openExperimentStore,
  pct,
  progressBar,
  runEval,
  summarize,
  summaryTable,
} from "@keel/eval";
import type {
  CaseResult,
  Dataset,
  EvalDefinition,
  EvalTools,
  EvalToolsMode,
  ExperimentRecord,
  ExperimentStore,
  Scorer,
} from "@keel/eval";
import { headOf } from "@keel/text";
import { importEvalFile } from "./load-config.ts";
import { exitNow, onSignal } from "./exit.ts";
import { guardEvalRun } from "./eval-guard.ts";
import type { CliEnv } from "./stdio.ts";
import { terminalColumns } from "./render.ts";

/** Exit status when the eval ran but its gate failed (`--fail-under`, `--max-regressions`, or a case not passing). Contract: 3, stable. */
export const EXIT_GATE_FAILED = 3;

/** The flags of `keel eval DATASET`, as typed. Contract: checked by `gateFlags` before anything runs. */
export interface EvalFlags {
  concurrency?: string | undefined;
  name?: string | undefined;
  baseline?: string | undefined;
  failUnder?: string | undefined;
  maxRegressions?: string | undefined;
  junit?: string | undefined;
  jsonFile?: string | undefined;
  resume?: boolean | undefined;
  /** `--tools live|fixtures|recorded`: what answers a call no fixture answers. */
  tools?: string | undefined;
}

/** What `keel eval DATASET` runs. Contract: the dataset is validated; `scorers` are the eval file's (none for a bare dataset). */
export interface EvalTarget {
  dataset: Dataset;
  /** The path as typed (relative to the current folder), kept on the experiment. */
  shown: string;
  scorers: Scorer[];
  concurrency?: number;
  name?: string;
  /** The eval file's `tools` mode (`--tools` wins). */
  tools?: EvalToolsMode;
}

const usage = (problem: string) => new KeelError("KEEL_CLI_USAGE", problem);

/** Contract: true when `path` names an eval file (`*.eval.ts`, `.mts`, `.cts`, `.js`, `.mjs`, `.cjs`) rather than a dataset. */
export function isEvalFile(path: string): boolean {
  return /\.eval\.(m?ts|m?js|cts|cjs)$/.test(path);
}

/**
 * Load what `keel eval PATH` runs, before any agent exists: a dataset, or an eval file and the
 * dataset it names. Contract: a malformed case throws KEEL_EVAL_DATASET_INVALID, a bad eval file
 * KEEL_EVAL_CONFIG_INVALID; no model is called and no session is created.
 */
export async function loadEvalTarget(path: string, cwd: string): Promise<EvalTarget> {
  const file = resolve(cwd, path);
  if (!isEvalFile(file)) return { dataset: loadDataset(file), shown: relative(cwd, file) || path, scorers: [] };
  let def: unknown;
  try {
    // Before the import: jiti reads the file synchronously, and a FIFO or a device would block
    // the process for good (a dataset is checked the same way by loadDataset).
    if (!statSync(file).isFile()) throw new Error("not a regular file");
    // The config's resolution: an uninstalled `@keel/*` package (this very @keel/eval) comes
    // from the CLI's own installation.
    def = await importEvalFile(file);
  } catch (err) {
    throw new KeelError("KEEL_EVAL_CONFIG_INVALID", `${file} could not be loaded: ${errorMessage(err)}`, {
      path: file,
    });
  }
  const bad = (field: string, what: string) =>
    new KeelError("KEEL_EVAL_CONFIG_INVALID", `${file}: ${field} ${what}.`, { path: field });
  if (!def || typeof def !== "object") throw bad("the default export", "is not defineEval({ … })");
  const d = def as Partial<EvalDefinition>;
  if (typeof d.dataset !== "string" || !d.dataset) throw bad("dataset", "must be the dataset's path (JSONL or YAML)");
  if (d.scorers !== undefined && !Array.isArray(d.scorers)) throw bad("scorers", "must be a list of defineScorer(…)");
  const names = new Set<string>();
  for (const [i, s] of (d.scorers ?? []).entries()) {
    if (!s || typeof s !== "object" || typeof s.name !== "string" || !s.name || typeof s.score !== "function")
      throw bad(`scorers[${i}]`, "must be defineScorer({ name, score(ctx) })");
    if (names.has(s.name)) throw bad(`scorers[${i}]`, `repeats the name "${s.name}"`);
    names.add(s.name);
  }
  if (d.concurrency !== undefined && !(Number.isInteger(d.concurrency) && d.concurrency >= 1))
    throw bad("concurrency", "must be a whole number ≥ 1");
  if (d.name !== undefined && typeof d.name !== "string") throw bad("name", "must be a string");
  if (d.tools !== undefined && !EVAL_TOOLS_MODES.includes(d.tools))
    throw bad("tools", `must be one of ${EVAL_TOOLS_MODES.join(", ")}`);
  const datasetFile = resolve(dirname(file), d.dataset);
  return {
    dataset: loadDataset(datasetFile),
    shown: relative(cwd, datasetFile) || d.dataset,
    scorers: d.scorers ?? [],
    ...(d.concurrency !== undefined ? { concurrency: d.concurrency } : {}),
    ...(d.name !== undefined ? { name: d.name } : {}),
    ...(d.tools !== undefined ? { tools: d.tools } : {}),
  };
}

/** Check the numeric flags and `--tools` before anything runs. Contract: throws KEEL_CLI_USAGE naming the flag and what it takes. */
export function gateFlags(flags: EvalFlags): {
  concurrency?: number;
  failUnder?: number;
  maxRegressions?: number;
  tools?: EvalToolsMode;
} {
  const out: { concurrency?: number; failUnder?: number; maxRegressions?: number; tools?: EvalToolsMode } = {};
  if (flags.tools !== undefined) {
    if (!EVAL_TOOLS_MODES.includes(flags.tools as EvalToolsMode))
      throw usage(
        `--tools takes live (run every tool), fixtures (the case's fixtures; only read-only tools run) or recorded (the case's recording), not "${headOf(flags.tools, 20)}".`,
      );
    out.tools = flags.tools as EvalToolsMode;
  }
  if (flags.concurrency !== undefined) {
    const n = Number(flags.concurrency);
    if (!Number.isInteger(n) || n < 1)
      throw usage(`--concurrency takes a whole number ≥ 1, not "${headOf(flags.concurrency, 20)}".`);
    out.concurrency = n;
  }
  if (flags.failUnder !== undefined) {
    const raw = flags.failUnder.trim();
    const n = raw.endsWith("%") ? Number(raw.slice(0, -1)) / 100 : Number(raw);
    if (!raw || !Number.isFinite(n) || n < 0 || n > 1)
      throw usage(`--fail-under takes a pass rate from 0 to 1 (or 0% to 100%), not "${headOf(flags.failUnder, 20)}".`);
    out.failUnder = n;
  }
  if (flags.maxRegressions !== undefined) {
    const n = Number(flags.maxRegressions);
    if (!Number.isInteger(n) || n < 0)
      throw usage(`--max-regressions takes a whole number ≥ 0, not "${headOf(flags.maxRegressions, 20)}".`);
    out.maxRegressions = n;
  }
  return out;
}

/**
 * The experiment `--baseline` names: an id, a name, or `latest` (the agent's most recent completed
 * run that shares a case with this dataset: a run of another dataset would count every case as
 * new and hide a regression). Contract: `latest` with none yet is undefined (a first CI run has
 * nothing to compare with); an id or name that matches nothing, or one that did not complete (its
 * unscored cases would count as new), throws KEEL_EVAL_EXPERIMENT_NOT_FOUND.
 */
async function findBaseline(
  store: ExperimentStore,
  ref: string,
  agent: string,
  caseIds: readonly string[],
): Promise<ExperimentRecord | undefined> {
  if (ref === "latest") {
    const wanted = new Set(caseIds);
    for (const e of await store.list({ agent, limit: 50 }))
      if (e.status === "completed" && (await store.cases(e.id)).some((c) => wanted.has(c.caseId))) return e;
    return undefined;
  }
  const found = await findExperiment(store, ref, agent);
  if (found.status !== "completed")
    throw new KeelError(
      "KEEL_EVAL_EXPERIMENT_NOT_FOUND",
      `Experiment "${headOf(ref, 80)}" is ${found.status}, not completed: it cannot be a baseline (finish it with keel eval --resume=${found.id}, or pick another).`,
    );
  return found;
}

async function findExperiment(store: ExperimentStore, ref: string, agent?: string): Promise<ExperimentRecord> {
  const byId = await store.get(ref);
  if (byId) return byId;
  const byName = (await store.list({ ...(agent ? { agent } : {}), limit: 500 })).find((e) => e.name === ref);
  if (byName) return byName;
  throw new KeelError("KEEL_EVAL_EXPERIMENT_NOT_FOUND", `No experiment "${headOf(ref, 80)}".`);
}

/**
 * `keel eval DATASET`. Contract: exit 0 when the gate passes, EXIT_GATE_FAILED (3) when it
 * fails, 130/143 when stopped by a signal (the experiment stays resumable); errors are thrown.
 * Without --fail-under or --max-regressions the gate is "every case passed".
 */
export async function evalCommand(
  agent: Agent,
  io: CliEnv,
  target: EvalTarget,
  flags: EvalFlags,
  resumeRef: string | undefined,
  configFile: string,
  tools?: EvalTools,
): Promise<number> {
  const numbers = gateFlags(flags);
  const store = await openExperimentStore(agent.storage);
  let experimentId: string | undefined;
  // Until the report is out, the process does not end quietly: process.exit() throws, and an
  // exit that still happens is non-zero and says how to continue.
  const guard = guardEvalRun(io, () =>
    experimentId
      ? `continue with: keel eval ${target.shown} --resume ${experimentId}`
      : "no experiment was started yet; run keel eval again",
  );
  const stop = new AbortController();
  let signalled: "SIGINT" | "SIGTERM" | undefined;
  const offSignals = onSignal((signal) => {
    if (signalled) exitNow(signal, "keel eval: a second signal; exiting now (the experiment stays resumable)\n");
    signalled = signal;
    io.err(`\nkeel eval: ${signal}; cancelling the cases in flight (finished ones are stored)\n`);
    stop.abort();
  });
  try {
    const baseline = flags.baseline
      ? await findBaseline(
          store,
          flags.baseline,
          agent.name,
          target.dataset.cases.map((c) => c.id),
        )
      : undefined;
    if (flags.baseline && !baseline)
      io.err(
        `keel eval: --baseline latest: agent "${agent.name}" has no completed experiment with these cases yet; nothing to compare with\n`,
      );
    let resume: string | undefined;
    if (flags.resume) {
      if (resumeRef) resume = (await findExperiment(store, resumeRef, agent.name)).id;
      else {
        const running = (await store.list({ agent: agent.name, limit: 200 })).find(
          (e) => e.status === "running" && e.datasetHash === target.dataset.hash,
        );
        if (!running)
          throw new KeelError(
            "KEEL_EVAL_EXPERIMENT_NOT_FOUND",
            `--resume: agent "${agent.name}" has no unfinished experiment of ${target.shown} with these cases.`,
          );
        resume = running.id;
      }
    }
    // A tool the default refused is said once: a case failing for it is then no mystery.
    const refused = new Set<string>();
    if (tools)
      tools.onRefused = (r) => {
        if (refused.has(r.tool)) return;
        refused.add(r.tool);
        io.err(
          `keel eval: ${r.tool} was not run (case ${headOf(r.case, 60)}): it has no fixture and is not declared read-only; give the case tools: { ${r.tool}: { result: … } }, or run with --tools live\n`,
        );
      };
    const tty = (process.stderr as { isTTY?: boolean }).isTTY === true && io.env.CI === undefined;
    const counts = { failed: 0, errored: 0 };
    let barShown = false;
    const clearBar = () => {
      if (barShown) io.err("\r\u001b[2K");
      barShown = false;
    };
    const run = await runEval({
      agent,
      cases: target.dataset.cases,
      store,
      scorers: target.scorers,
      concurrency: numbers.concurrency ?? target.concurrency ?? 4,
      dataset: { file: target.shown, hash: target.dataset.hash },
      ...((flags.name ?? target.name) ? { name: (flags.name ?? target.name)! } : {}),
      config: configFile,
      // Which model answered: experiments of one dataset are compared across models too.
      // And how its tools were answered: a run with tools refused is not one with them run.
      metadata: { model: agent.options.provider.id, tools: numbers.tools ?? target.tools ?? "fixtures" },
      ...(baseline ? { baseline: baseline.id } : {}),
      ...(resume ? { resume } : {}),
      signal: stop.signal,
      ...(tools ? { tools } : {}),
      toolsMode: numbers.tools ?? target.tools ?? "fixtures",
      // Each case's session gets the exit grace to finish its background work (memory extraction) when it closes.
      ...(Number.isFinite(Number(io.env.KEEL_EXIT_GRACE_MS)) && io.env.KEEL_EXIT_GRACE_MS !== undefined
        ? { closeGraceMs: Math.max(0, Number(io.env.KEEL_EXIT_GRACE_MS)) }
        : {}),
      onProgress: (e) => {
        if (e.type === "start") {
          experimentId = e.experiment.id;
          io.err(
            `keel eval: experiment ${e.experiment.id} · ${e.total} case${e.total === 1 ? "" : "s"}${e.skipped ? ` (${e.skipped} already scored, resumed)` : ""} · agent "${agent.name}"\n`,
          );
          return;
        }
        if (e.result.status === "failed") counts.failed++;
        if (e.result.status === "error") counts.errored++;
        if (!tty) return io.err(`${caseLine(e.result, e.done, e.total)}\n`);
        clearBar();
        if (e.result.status !== "passed") io.err(`${caseLine(e.result, e.done, e.total)}\n`);
        io.err(progressBar(e.done, e.total, counts, terminalColumns()));
        barShown = true;
        if (e.done === e.total) clearBar();
      },
    });
    clearBar();
    if (!run.complete) {
      io.err(
        `keel eval: stopped with ${run.results.length} of ${target.dataset.cases.length} cases scored; continue with: keel eval ${target.shown} --resume ${run.experiment.id}\n`,
      );
      guard.finished();
      return signalled === "SIGTERM" ? 143 : 130;
    }
    const comparison = baseline ? compareRuns(baseline.id, run.results, await store.cases(baseline.id)) : undefined;
    const byDefault = numbers.failUnder === undefined && numbers.maxRegressions === undefined;
    const gate = applyGate(run.summary, comparison, byDefault ? { failUnder: 1 } : numbers);
    if (byDefault)
      gate.reasons = gate.reasons.map((r) =>
        r.replace(
          "(--fail-under)",
          "(the default gate: every case passes; --fail-under or --max-regressions set another)",
        ),
      );
    const extra = { comparison, gate };
    if (flags.junit) writeFileSync(resolve(io.cwd, flags.junit), junitXml(run.experiment, run.results, run.summary));
    const json = jsonReport(run.experiment, run.results, run.summary, extra);
    if (flags.jsonFile && flags.jsonFile !== "-") writeFileSync(resolve(io.cwd, flags.jsonFile), json);
    const table = summaryTable(run.experiment, run.summary, run.results, extra);
    if (flags.jsonFile === "-") {
      io.out(json);
      io.err(table);
    } else io.out(table);
    guard.finished();
    return gate.pass ? 0 : EXIT_GATE_FAILED;
  } finally {
    guard.release();
    offSignals();
    await store.close().catch(() => undefined);
  }
}

/** `keel eval list`: the experiments of this store. Contract: most recent first, at most 100, one line each (JSON with `json`). */
export async function listExperiments(store: ExperimentStore, io: CliEnv, agent: string | undefined, json: boolean) {
  const list = await store.list({ ...(agent ? { agent } : {}), limit: 100 });
  if (json) return void io.out(`${JSON.stringify(list)}\n`);
  if (!list.length) return void io.err("keel eval: no experiments yet (run keel eval DATASET)\n");
  for (const e of list)
    io.out(
      `${e.id}  ${new Date(e.startedAt).toISOString()}  ${e.status.padEnd(9)}  ${e.summary ? `${e.summary.passed}/${e.summary.cases} (${pct(e.summary.passRate)})` : "-"}  ${headOf(e.name, 60)}\n`,
    );
}

/** `keel eval show EXP`: one experiment (by id or name) and its cases. Contract: KEEL_EVAL_EXPERIMENT_NOT_FOUND for neither. */
export async function showExperiment(store: ExperimentStore, io: CliEnv, ref: string, json: boolean) {
  const e = await findExperiment(store, ref);
  const cases = await store.cases(e.id);
  if (json) return void io.out(`${JSON.stringify({ experiment: e, cases })}\n`);
  const summary = e.summary ?? summarize(cases);
  io.out(summaryTable(e, summary, cases));
  for (const c of cases) io.out(`${caseRow(c)}\n`);
}

function caseRow(c: CaseResult): string {
  return `  ${c.status.padEnd(6)} ${headOf(c.caseId, 40).padEnd(40)} session ${c.sessionId ?? "-"}`;
}

/** `keel eval add SESSION… [--to FILE]`: append the sessions as cases to a JSONL dataset. Contract: exit 0, or 2 when a session did not exist (the others are added). */
export async function addCommand(
  store: SessionStore,
  io: CliEnv,
  sessions: readonly string[],
  to: string | undefined,
): Promise<number> {
  const file = resolve(io.cwd, to ?? "evals/cases.jsonl");
  if (!/\.(jsonl|ndjson)$/i.test(file))
    throw usage(`--to takes a .jsonl file (cases are appended one a line), not "${to}".`);
  const { mkdirSync } = await import("node:fs");
  mkdirSync(dirname(file), { recursive: true });
  const r = await addSessionsToDataset(store, sessions, file);
  for (const s of r.skipped) io.err(`keel eval add: skipped session ${s.session}: ${s.why}\n`);
  const shown = relative(io.cwd, file);
  io.err(
    `keel eval add: ${r.added.length} case${r.added.length === 1 ? "" : "s"} appended to ${shown.startsWith("..") ? file : shown || file}\n`,
  );
  for (const id of r.added) io.out(`${id}\n`);
  if (!r.missing.length) return 0;
  // The sessions that exist were added; the ones that do not are named, and the exit says so.
  for (const id of r.missing)
    io.err(
      `${new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${headOf(id, 80)}" in this store; it was skipped (keel sessions list shows the ids).`).message}\n`,
    );
  return 2;
}
