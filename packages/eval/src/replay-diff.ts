/**
 * Request by request: what a replay sent compared with what the recording sent, from the two
 * logs' prompt manifests and compaction edits.
 */
import type { KeelEvent, PromptManifest } from "@keel/kernel";
import { truncate } from "@keel/text";

type Section = PromptManifest["sections"][number];
type Context = PromptManifest["context"][number];

/** A compaction (or other) edit of the history before a request. */
export interface EditSummary {
  plugin: string;
  reason: string;
  before: number;
  after: number;
}

/**
 * One request, recorded and replayed.
 * Contract: `same` is true when both exist and their content digests match (`compared:
 * "digest"`), or, for a log written before digests, their manifests match (`"manifest"`).
 */
export interface RequestChange {
  index: number;
  round: number;
  same: boolean;
  compared: "digest" | "manifest";
  /** Set when only one side made this request. */
  only?: "recorded" | "replayed";
  sections: Array<{
    sectionId: string;
    change: "added" | "removed" | "changed";
    plugins: string[];
    chars: [number, number];
  }>;
  context: Array<{ id: string; domain: string; plugin: string; change: "added" | "removed" | "changed" }>;
  tools: { added: string[]; removed: string[] };
  messages: { recorded: number; replayed: number; same: boolean };
  optionsSame: boolean;
  systemSame: boolean;
  tokens: { recorded: number; replayed: number };
  edits: { recorded: EditSummary[]; replayed: EditSummary[] };
  /** The pool member each side routed to (manifest `route`); absent when neither side was routed. A different member is a change. */
  route?: { recorded?: string; replayed?: string };
}

interface Entry {
  seq: number;
  manifest: PromptManifest;
}

function editsBefore(log: readonly KeelEvent[], from: number, to: number): EditSummary[] {
  const out: EditSummary[] = [];
  for (const e of log)
    if (e.type === "context.edited" && e.seq > from && e.seq < to)
      out.push({ plugin: e.plugin, reason: e.reason, before: e.before, after: e.after });
  return out;
}

/** Hashes differ: only when both sides have one (a log written before hashes has none). */
function hashesDiffer(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && a !== b;
}

function byKey<T>(rows: readonly T[], key: (t: T) => string): Map<string, T> {
  return new Map(rows.map((r) => [key(r), r]));
}

function sectionChanges(a: readonly Section[], b: readonly Section[]): RequestChange["sections"] {
  const before = byKey(a, (s) => s.sectionId);
  const after = byKey(b, (s) => s.sectionId);
  const out: RequestChange["sections"] = [];
  for (const [id, s] of before) {
    const n = after.get(id);
    if (!n) out.push({ sectionId: id, change: "removed", plugins: s.plugins, chars: [s.chars, 0] });
    else if (s.chars !== n.chars || hashesDiffer(s.hash, n.hash) || s.plugins.join() !== n.plugins.join())
      out.push({ sectionId: id, change: "changed", plugins: n.plugins, chars: [s.chars, n.chars] });
  }
  for (const [id, n] of after)
    if (!before.has(id)) out.push({ sectionId: id, change: "added", plugins: n.plugins, chars: [0, n.chars] });
  return out;
}

function contextChanges(a: readonly Context[], b: readonly Context[]): RequestChange["context"] {
  const before = byKey(a, (c) => c.id);
  const after = byKey(b, (c) => c.id);
  const out: RequestChange["context"] = [];
  const row = (c: Context, change: "added" | "removed" | "changed") => ({
    id: c.id,
    domain: c.domain,
    plugin: c.plugin,
    change,
  });
  for (const [id, c] of before) {
    const n = after.get(id);
    if (!n) out.push(row(c, "removed"));
    else if (c.chars !== n.chars || hashesDiffer(c.hash, n.hash)) out.push(row(n, "changed"));
  }
  for (const [id, n] of after) if (!before.has(id)) out.push(row(n, "added"));
  return out;
}

const EMPTY: PromptManifest = {
  round: 0,
  sections: [],
  context: [],
  tools: [],
  messageCount: 0,
  systemChars: 0,
  tokenEstimate: { exact: false, system: 0, tools: 0, messages: 0, total: 0 },
  options: {},
  finalRound: false,
};

/** Compare the requests of a recording and of its replay, in order. Contract: one row per request either side made. */
export function compareRequests(
  recordedLog: readonly KeelEvent[],
  recorded: readonly Entry[],
  replayedLog: readonly KeelEvent[],
  replayed: readonly Entry[],
): RequestChange[] {
  const out: RequestChange[] = [];
  for (let i = 0; i < Math.max(recorded.length, replayed.length); i++) {
    const r = recorded[i];
    const p = replayed[i];
    const a = r?.manifest ?? EMPTY;
    const b = p?.manifest ?? EMPTY;
    const digests = a.digest && b.digest;
    const tA = new Set(a.tools.map((t) => t.name));
    const tB = new Set(b.tools.map((t) => t.name));
    const change: RequestChange = {
      index: i,
      round: (p ?? r)!.manifest.round,
      same: false,
      compared: digests ? "digest" : "manifest",
      ...(!r ? { only: "replayed" as const } : !p ? { only: "recorded" as const } : {}),
      sections: sectionChanges(a.sections, b.sections),
      context: contextChanges(a.context, b.context),
      tools: { added: [...tB].filter((n) => !tA.has(n)), removed: [...tA].filter((n) => !tB.has(n)) },
      messages: {
        recorded: a.messageCount,
        replayed: b.messageCount,
        same: digests ? a.digest!.messages === b.digest!.messages : a.messageCount === b.messageCount,
      },
      optionsSame: digests
        ? a.digest!.options === b.digest!.options
        : JSON.stringify(a.options) === JSON.stringify(b.options),
      systemSame: digests ? a.digest!.system === b.digest!.system : a.systemChars === b.systemChars,
      tokens: { recorded: a.tokenEstimate.total, replayed: b.tokenEstimate.total },
      edits: {
        recorded: r ? editsBefore(recordedLog, recorded[i - 1]?.seq ?? 0, r.seq) : [],
        replayed: p ? editsBefore(replayedLog, replayed[i - 1]?.seq ?? 0, p.seq) : [],
      },
    };
    if (a.route || b.route)
      change.route = {
        ...(a.route ? { recorded: a.route.model } : {}),
        ...(b.route ? { replayed: b.route.model } : {}),
      };
    const toolsSame = digests
      ? a.digest!.tools === b.digest!.tools
      : !change.tools.added.length && !change.tools.removed.length;
    change.same =
      !!r &&
      !!p &&
      (digests
        ? a.digest!.request === b.digest!.request
        : change.systemSame && toolsSame && change.messages.same && change.optionsSame && !change.sections.length) &&
      JSON.stringify(change.edits.recorded) === JSON.stringify(change.edits.replayed) &&
      a.route?.model === b.route?.model;
    out.push(change);
  }
  return out;
}

/** Lines of a diff shown at most, and code points of each line. */
const DIFF_LINES = 60;
const DIFF_LINE_CHARS = 200;
/** Above this many line pairs the middle is shown as removed then added, without matching it line by line. */
const DIFF_CELLS = 1_000_000;

/**
 * A compact line diff of `a` (the recording) to `b` (today): `- ` removed, `+ ` added, `  ` one
 * line of context around each change, `  … N unchanged lines` between. Contract: at most 60 lines
 * (the last says how many changed lines were left out), each cut to 200 code points; empty when equal.
 */
export function lineDiff(a: string, b: string): string[] {
  if (a === b) return [];
  const x = a.split("\n");
  const y = b.split("\n");
  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (tail < x.length - head && tail < y.length - head && x[x.length - 1 - tail] === y[y.length - 1 - tail]) tail++;
  const mx = x.slice(head, x.length - tail);
  const my = y.slice(head, y.length - tail);
  // The middle: matched line by line (LCS) when small enough, else all of it removed then added.
  const ops: Array<[" " | "-" | "+", string]> = [];
  if (mx.length * my.length <= DIFF_CELLS) {
    const n = mx.length;
    const m = my.length;
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        lcs[i]![j] = mx[i] === my[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && mx[i] === my[j]) {
        ops.push([" ", mx[i++]!]);
        j++;
      } else if (i < n && (j === m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) ops.push(["-", mx[i++]!]);
      else ops.push(["+", my[j++]!]);
    }
  } else ops.push(...mx.map((l) => ["-", l] as ["-", string]), ...my.map((l) => ["+", l] as ["+", string]));
  const all: Array<[" " | "-" | "+", string]> = [
    ...x.slice(0, head).map((l) => [" ", l] as [" ", string]),
    ...ops,
    ...x.slice(x.length - tail).map((l) => [" ", l] as [" ", string]),
  ];
  // Keep the changes and one line of context around each; count what is skipped.
  const changed = (i: number) => i >= 0 && i < all.length && all[i]![0] !== " ";
  const keep = all.map((_, i) => changed(i) || changed(i - 1) || changed(i + 1));
  const out: string[] = [];
  let skipped = 0;
  let changesLeft = all.filter(([op]) => op !== " ").length;
  for (let i = 0; i < all.length; i++) {
    const [op, line] = all[i]!;
    if (!keep[i]) {
      skipped++;
      continue;
    }
    if (skipped) out.push(`  … ${skipped} unchanged line${skipped === 1 ? "" : "s"}`);
    skipped = 0;
    if (out.length >= DIFF_LINES - 1) {
      out.push(`  … ${changesLeft} more changed line${changesLeft === 1 ? "" : "s"}`);
      return out;
    }
    out.push(truncate(`${op} ${line}`, DIFF_LINE_CHARS));
    if (op !== " ") changesLeft--;
  }
  if (skipped) out.push(`  … ${skipped} unchanged line${skipped === 1 ? "" : "s"}`);
  return out;
}
