/**
 * What an eval prints and writes: a progress line or bar, the summary table, JUnit XML (one
 * testcase per case, for CI systems) and the JSON report.
 */
import { toWellFormed, truncate } from "@keel/text";
import { pct } from "./gate.ts";
import type { Comparison, GateResult } from "./gate.ts";
import type { CaseResult, ExperimentRecord, ExperimentSummary } from "./types.ts";

/** Contract: XML 1.0 text: markup escaped; characters XML cannot carry (C0 controls but tab/LF/CR, U+FFFE/U+FFFF, lone surrogates) as U+FFFD. */
export function xmlText(s: string): string {
  let clean = "";
  for (const ch of toWellFormed(s)) {
    const c = ch.codePointAt(0)!;
    clean += (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0xfffe || c === 0xffff ? "\uFFFD" : ch;
  }
  return clean.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** Contract: an XML attribute value: as xmlText, quotes escaped, and line breaks and tabs as character references (kept by parsers). */
export function xmlAttr(s: string): string {
  return xmlText(s)
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;")
    .replaceAll("\n", "&#10;")
    .replaceAll("\r", "&#13;")
    .replaceAll("\t", "&#9;");
}

const seconds = (ms: number) => (Number.isFinite(ms) ? Math.max(0, ms) / 1000 : 0).toFixed(3);

/** Why a case did not pass. Contract: one line per failed scorer (`scorer: reason`), or the error of a case that could not run; none for a passed case. */
export function failureLines(r: CaseResult): string[] {
  if (r.status === "error") return [`error: ${r.error ?? "unknown"}`];
  return r.scores.filter((s) => !s.pass).map((s) => `${s.scorer}: ${s.reason ?? `score ${s.score}`}`);
}

/**
 * JUnit XML of an experiment. Contract: well-formed XML 1.0 whatever the texts hold (escaped,
 * never CDATA; output and reasons cut by code points to 4,000 and 1,000); one `testcase` per
 * case (classname: the dataset, name: the case id), `failure` for a failed case carrying every
 * failed scorer's reason, `error` for a case that could not run.
 */
export function junitXml(
  experiment: ExperimentRecord,
  results: readonly CaseResult[],
  summary: ExperimentSummary,
): string {
  const cut = (s: string, n: number) => truncate(s, n);
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>'];
  const totals = `tests="${results.length}" failures="${summary.failed}" errors="${summary.errored}" time="${seconds(summary.durationMs)}"`;
  out.push(`<testsuites name="keel eval" ${totals}>`);
  out.push(
    `  <testsuite name="${xmlAttr(cut(experiment.name, 500))}" ${totals} skipped="0" timestamp="${new Date(experiment.startedAt).toISOString().slice(0, 19)}">`,
  );
  out.push("    <properties>");
  const props: Array<[string, string]> = [
    ["experiment", experiment.id],
    ["dataset", experiment.dataset],
    ["agent", experiment.agent],
    ...(experiment.baseline ? ([["baseline", experiment.baseline]] as Array<[string, string]>) : []),
  ];
  for (const [k, v] of props) out.push(`      <property name="${k}" value="${xmlAttr(cut(v, 1_000))}"/>`);
  out.push("    </properties>");
  for (const r of results) {
    out.push(
      `    <testcase classname="${xmlAttr(cut(experiment.dataset, 500))}" name="${xmlAttr(cut(r.caseId, 500))}" time="${seconds(r.metrics.durationMs)}">`,
    );
    const lines = failureLines(r).map((l) => cut(l, 1_000));
    if (r.status === "failed") {
      const failed = r.scores.filter((s) => !s.pass).map((s) => s.scorer);
      out.push(
        `      <failure message="${xmlAttr(cut(lines.join("; "), 1_000))}" type="${xmlAttr(failed.join(","))}">${xmlText(lines.join("\n"))}</failure>`,
      );
    } else if (r.status === "error")
      out.push(`      <error message="${xmlAttr(lines[0]!)}" type="error">${xmlText(lines[0]!)}</error>`);
    const session = r.sessionId ? `session: ${r.sessionId}\n` : "";
    out.push(`      <system-out>${xmlText(`${session}${cut(r.output, 4_000)}`)}</system-out>`);
    out.push("    </testcase>");
  }
  out.push("  </testsuite>", "</testsuites>", "");
  return out.join("\n");
}

/** The JSON report. Contract: one object `{ experiment, summary, gate?, comparison?, cases }`. */
export function jsonReport(
  experiment: ExperimentRecord,
  results: readonly CaseResult[],
  summary: ExperimentSummary,
  extra: { comparison?: Comparison | undefined; gate?: GateResult | undefined } = {},
): string {
  return `${JSON.stringify(
    {
      experiment,
      summary,
      ...(extra.gate ? { gate: extra.gate } : {}),
      ...(extra.comparison ? { comparison: extra.comparison } : {}),
      cases: results,
    },
    null,
    2,
  )}\n`;
}

/** The summary printed at the end of `keel eval`. Contract: totals, one row per scorer, up to 20 cases not passed, the comparison and the gate; ends with a newline. */
export function summaryTable(
  experiment: ExperimentRecord,
  summary: ExperimentSummary,
  results: readonly CaseResult[],
  extra: { comparison?: Comparison | undefined; gate?: GateResult | undefined } = {},
): string {
  const rows: string[][] = [["scorer", "passed", "mean"]];
  for (const [name, s] of Object.entries(summary.scorers))
    rows.push([name, `${s.passed}/${s.total}`, s.mean.toFixed(2)]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...r[i]!].length)));
  const table = rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join("  ")}`.trimEnd());
  const lines = [
    `experiment ${experiment.id} (${experiment.name})`,
    `  ${summary.passed}/${summary.cases} passed (${pct(summary.passRate)}) · ${summary.failed} failed · ${summary.errored} errored · ${seconds(summary.durationMs)} s${summary.costUsd ? ` · $${summary.costUsd.toFixed(4)}` : ""}`,
    ...(rows.length > 1 ? table : []),
  ];
  const bad = results.filter((r) => r.status !== "passed").slice(0, 20);
  if (bad.length) {
    lines.push("not passed:");
    for (const r of bad) lines.push(`  ${truncate(r.caseId, 60)}: ${truncate(failureLines(r).join("; "), 200)}`);
  }
  const c = extra.comparison;
  if (c) {
    lines.push(
      `against ${c.baseline}: ${c.counts.regression} regression(s) · ${c.counts.fixed} fixed · ${c.counts.unchanged} unchanged · ${c.counts.new} new · ${c.counts.missing} missing`,
    );
    for (const x of c.cases.filter((x) => x.change === "regression").slice(0, 20))
      lines.push(`  regression: ${truncate(x.caseId, 60)} (${x.baseline} → ${x.status})`);
  }
  if (extra.gate)
    lines.push(
      extra.gate.pass ? "gate: passed" : `gate: FAILED\n${extra.gate.reasons.map((r) => `  ${r}`).join("\n")}`,
    );
  return `${lines.join("\n")}\n`;
}

/** One plain line per finished case (stderr when it is not a terminal). Contract: one line, no newline; the case id cut to 60 code points. */
export function caseLine(r: CaseResult, done: number, total: number): string {
  const mark = r.status === "passed" ? "pass" : r.status === "failed" ? "FAIL" : "ERROR";
  const why = r.status === "passed" ? "" : `: ${truncate(failureLines(r).join("; "), 160)}`;
  return `[${done}/${total}] ${mark} ${truncate(r.caseId, 60)} (${seconds(r.metrics.durationMs)} s)${why}`;
}

/** A progress bar for a terminal. Contract: one line, no newline, at most `width` columns for widths of 30 and more. */
export function progressBar(
  done: number,
  total: number,
  counts: { failed: number; errored: number },
  width: number,
): string {
  const label = ` ${done}/${total} · ${counts.failed} failed · ${counts.errored} errored`;
  const room = Math.max(10, Math.min(40, width - label.length - 3));
  const filled = total ? Math.round((done / total) * room) : room;
  return `[${"#".repeat(filled)}${".".repeat(room - filled)}]${label}`;
}
