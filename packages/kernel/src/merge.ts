/**
 * Deterministic merge of contributions, with the caps and conflict rules of the reference
 * hook runtime. Every function returns what it applied plus a record (and, for conflicts
 * and caps, a diagnostic) for each contribution it touched.
 */
import type { ContributionOf, MessageEdit } from "./contributions.ts";
import type { Contributed, PhaseDiagnostic } from "./dispatch.ts";
import type { ContributionRecord } from "./events.ts";
import type { ContentBlock, Message, ToolResultMessage } from "./messages.ts";
import { textContent } from "./messages.ts";
import type { PhaseName, PolicyView, PromptContextEntry } from "./phases.ts";
import { maskCredentials, preview } from "./errors.ts";
import { freezeEvent } from "./snapshot.ts";
import type { RequestOptions } from "./provider.ts";
import { codePointLength, toWellFormed, truncate } from "./text.ts";
import type { ToolDefinition, ToolSource } from "./tools.ts";

/** Caps on prompt material. Contract: the defaults of the reference runtime; overridable per agent. */
export interface MergeCaps {
  contextEntries: number;
  contextChars: number;
  sections: number;
  sectionChars: number;
  sectionsTotalChars: number;
}

export const DEFAULT_CAPS: MergeCaps = {
  contextEntries: 16,
  contextChars: 12_000,
  sections: 16,
  sectionChars: 8_000,
  sectionsTotalChars: 16_000,
};

/** What a merge produced besides its value. */
export interface MergeLog {
  records: ContributionRecord[];
  diagnostics: PhaseDiagnostic[];
}

function log(): MergeLog {
  return { records: [], diagnostics: [] };
}

/** `text` cut to `max` code points with "…" (the caps count code points); its length and whether it was cut. */
function cap(text: string, max: number): { content: string; chars: number; from: number; cut: boolean } {
  const from = codePointLength(text);
  if (from <= max) return { content: toWellFormed(text), chars: from, from, cut: false };
  const content = truncate(text, max, { graphemes: true });
  return { content, chars: codePointLength(content), from, cut: true };
}

/** Merged policies of one turn. Contract: higher priority wins; equal priority keeps the first. */
export class PolicySet implements PolicyView {
  private readonly map = new Map<
    string,
    { domain: string; key: string; value: unknown; priority: number; plugin: string }
  >();

  get(domain: string, key: string): unknown {
    return this.map.get(`${domain}\u0000${key}`)?.value;
  }

  has(domain: string, key: string): boolean {
    return this.map.has(`${domain}\u0000${key}`);
  }

  entries(): Array<{ domain: string; key: string; value: unknown; plugin: string }> {
    return [...this.map.values()].map(({ domain, key, value, plugin }) => ({ domain, key, value, plugin }));
  }

  /** A frozen read-only view (what handlers get: they cannot call `merge`). */
  view(): PolicyView {
    return Object.freeze({
      get: (d: string, k: string) => freezeEvent(this.get(d, k)),
      has: (d: string, k: string) => this.has(d, k),
      entries: () => this.entries(),
    });
  }

  /** Merge policy contributions in order. */
  merge(items: readonly Contributed<ContributionOf<"policy">>[], phase: PhaseName): MergeLog {
    const out = log();
    for (const { plugin, value: c } of items) {
      const k = `${c.domain}\u0000${c.key}`;
      const prev = this.map.get(k);
      if (!prev || c.priority > prev.priority) {
        this.map.set(k, { domain: c.domain, key: c.key, value: c.value, priority: c.priority, plugin });
        out.records.push({
          plugin,
          kind: "policy",
          id: `${c.domain}.${c.key}`,
          status: "applied",
          ...(prev ? { reason: `overrides ${prev.plugin} (priority ${prev.priority})` } : {}),
        });
        continue;
      }
      const same = JSON.stringify(prev.value) === JSON.stringify(c.value);
      out.records.push({
        plugin,
        kind: "policy",
        id: `${c.domain}.${c.key}`,
        status: "rejected",
        reason: same ? "duplicate of an applied value" : `lower or equal priority than ${prev.plugin}`,
      });
      if (!same && c.priority === prev.priority) {
        out.diagnostics.push({
          level: "warn",
          code: "policy.merge.conflict",
          message: `KEEL_MERGE_CONFLICT: policy ${c.domain}.${c.key}: ${plugin} conflicts with ${prev.plugin} at priority ${c.priority}; kept ${prev.plugin}'s value.`,
          plugin,
          phase,
        });
      }
    }
    return out;
  }
}

/** Sort, cap and truncate prompt context entries (priority desc, domain, id, arrival). */
export function mergePromptContext(
  items: readonly Contributed<ContributionOf<"prompt_context">>[],
  phase: PhaseName,
  caps: MergeCaps = DEFAULT_CAPS,
): { entries: PromptContextEntry[] } & MergeLog {
  const out = log();
  const sorted = items
    .map((it, i) => ({ ...it, i }))
    .sort(
      (a, b) =>
        b.value.priority - a.value.priority ||
        cmp(a.value.domain, b.value.domain) ||
        cmp(a.value.id, b.value.id) ||
        a.i - b.i,
    );
  const entries: PromptContextEntry[] = [];
  let chars = 0;
  for (const { plugin, value: c } of sorted) {
    if (entries.length >= caps.contextEntries || chars >= caps.contextChars) {
      out.records.push({
        plugin,
        kind: "prompt_context",
        id: c.id,
        status: "omitted",
        reason:
          entries.length >= caps.contextEntries
            ? `over ${caps.contextEntries} entries`
            : `over ${caps.contextChars} chars`,
      });
      out.diagnostics.push({
        level: "warn",
        code: "KEEL_MERGE_CAPPED",
        message: `KEEL_MERGE_CAPPED: prompt context "${c.id}" omitted (cap reached).`,
        plugin,
        phase,
      });
      continue;
    }
    const limit = Math.min(c.maxChars ?? Infinity, caps.contextChars - chars);
    const { content, chars: n, from, cut } = cap(c.content, limit);
    chars += n;
    entries.push({ id: c.id, domain: c.domain, priority: c.priority, content, plugin });
    out.records.push({
      plugin,
      kind: "prompt_context",
      id: c.id,
      status: cut ? "truncated" : "applied",
      ...(cut ? { reason: `${from} → ${n} chars` } : {}),
    });
    if (cut)
      out.diagnostics.push({
        level: "info",
        code: "KEEL_MERGE_CAPPED",
        message: `KEEL_MERGE_CAPPED: prompt context "${c.id}" truncated to ${n} chars.`,
        plugin,
        phase,
      });
  }
  return { entries, ...out };
}

/** A merged system-prompt section. */
export interface MergedSection {
  sectionId: string;
  title?: string;
  content: string;
  plugins: string[];
}

/** Group prompt sections by section id (fragments joined, first title wins) within caps. */
export function mergePromptSections(
  items: readonly Contributed<ContributionOf<"prompt_section">>[],
  phase: PhaseName,
  caps: MergeCaps = DEFAULT_CAPS,
): { sections: MergedSection[] } & MergeLog {
  const out = log();
  const sorted = items.map((it, i) => ({ ...it, i })).sort((a, b) => b.value.priority - a.value.priority || a.i - b.i);
  const groups = new Map<string, { title?: string; parts: string[]; plugins: string[]; chars: number }>();
  let total = 0;
  for (const { plugin, value: c } of sorted) {
    let g = groups.get(c.sectionId);
    if (!g) {
      if (groups.size >= caps.sections) {
        out.records.push({
          plugin,
          kind: "prompt_section",
          id: c.id,
          status: "omitted",
          reason: `over ${caps.sections} sections`,
        });
        out.diagnostics.push({
          level: "warn",
          code: "KEEL_MERGE_CAPPED",
          message: `KEEL_MERGE_CAPPED: section "${c.sectionId}" omitted (${caps.sections} sections max).`,
          plugin,
          phase,
        });
        continue;
      }
      g = { parts: [], plugins: [], chars: 0, ...(c.title !== undefined ? { title: c.title } : {}) };
      groups.set(c.sectionId, g);
    } else if (g.title === undefined && c.title !== undefined) g.title = c.title;
    const room = Math.min(c.maxChars ?? Infinity, caps.sectionChars - g.chars, caps.sectionsTotalChars - total);
    if (room <= 0) {
      out.records.push({
        plugin,
        kind: "prompt_section",
        id: c.id,
        status: "omitted",
        reason: "no room left in the section or the prompt",
      });
      out.diagnostics.push({
        level: "warn",
        code: "KEEL_MERGE_CAPPED",
        message: `KEEL_MERGE_CAPPED: fragment "${c.id}" of section "${c.sectionId}" omitted (char cap).`,
        plugin,
        phase,
      });
      continue;
    }
    const { content, chars: n, from, cut } = cap(c.content, room);
    g.parts.push(content);
    g.chars += n;
    total += n;
    if (!g.plugins.includes(plugin)) g.plugins.push(plugin);
    out.records.push({
      plugin,
      kind: "prompt_section",
      id: c.id,
      status: cut ? "truncated" : "applied",
      ...(cut ? { reason: `${from} → ${n} chars` } : {}),
    });
  }
  const sections = [...groups]
    .filter(([, g]) => g.parts.length)
    .map(([sectionId, g]) => ({
      sectionId,
      ...(g.title !== undefined ? { title: g.title } : {}),
      content: g.parts.join("\n\n"),
      plugins: g.plugins,
    }));
  return { sections, ...out };
}

/** A tool with its provenance. */
export interface ResolvedTool {
  def: ToolDefinition;
  source: ToolSource;
}

/** Merge tool bundles after the built-in tools: first bundle id and first tool name win; built-ins always win. */
export function mergeToolBundles(
  builtin: readonly ToolDefinition[],
  items: readonly Contributed<ContributionOf<"tool_bundle">>[],
  phase: PhaseName,
): { tools: ResolvedTool[] } & MergeLog {
  const out = log();
  const tools: ResolvedTool[] = builtin.map((def) => ({ def, source: { kind: "builtin" } }));
  const names = new Map<string, string>(builtin.map((t) => [t.name, "built-in tools"]));
  const bundles = new Map<string, string>();
  const sorted = items.map((it, i) => ({ ...it, i })).sort((a, b) => b.value.priority - a.value.priority || a.i - b.i);
  for (const { plugin, value: b } of sorted) {
    const owner = bundles.get(b.bundleId);
    if (owner) {
      out.records.push({
        plugin,
        kind: "tool_bundle",
        id: b.bundleId,
        status: "rejected",
        reason: `bundle id already contributed by ${owner}`,
      });
      out.diagnostics.push({
        level: "warn",
        code: "KEEL_MERGE_CONFLICT",
        message: `KEEL_MERGE_CONFLICT: tool bundle "${b.bundleId}" from ${plugin} duplicates one from ${owner}; kept the first.`,
        plugin,
        phase,
      });
      continue;
    }
    bundles.set(b.bundleId, plugin);
    let kept = 0;
    for (const def of b.tools) {
      const prev = names.get(def.name);
      if (prev) {
        out.diagnostics.push({
          level: "warn",
          code: "KEEL_TOOL_DUPLICATE",
          message: `KEEL_TOOL_DUPLICATE: tool "${def.name}" in bundle "${b.bundleId}" of ${plugin} is already provided by ${prev}; dropped.`,
          plugin,
          phase,
        });
        continue;
      }
      names.set(def.name, `${plugin} (bundle ${b.bundleId})`);
      tools.push({
        def,
        source: { kind: "plugin", plugin, bundle: b.bundleId, ...(def.meta ? { meta: def.meta } : {}) },
      });
      kept++;
    }
    out.records.push({
      plugin,
      kind: "tool_bundle",
      id: b.bundleId,
      status: kept === b.tools.length ? "applied" : "truncated",
      ...(kept < b.tools.length ? { reason: `${b.tools.length - kept} tool(s) shadowed` } : {}),
    });
  }
  return { tools, ...out };
}

/** Merge request options over a base: per option, the highest priority wins; ties keep the first. */
export function mergeRequestOptions(
  base: RequestOptions,
  items: readonly Contributed<ContributionOf<"request_options">>[],
  phase: PhaseName,
): { options: RequestOptions } & MergeLog {
  const out = log();
  const options: Record<string, unknown> = { ...base };
  const owner = new Map<string, { plugin: string; priority: number }>();
  for (const { plugin, value: c } of items) {
    const applied: string[] = [];
    for (const [k, v] of Object.entries(c.options)) {
      if (v === undefined) continue;
      const prev = owner.get(k);
      if (prev && c.priority <= prev.priority) {
        if (c.priority === prev.priority && JSON.stringify(options[k]) !== JSON.stringify(v)) {
          out.diagnostics.push({
            level: "warn",
            code: "KEEL_MERGE_CONFLICT",
            message: `KEEL_MERGE_CONFLICT: request option "${k}" from ${plugin} conflicts with ${prev.plugin} at priority ${c.priority}; kept ${prev.plugin}'s.`,
            plugin,
            phase,
          });
        }
        continue;
      }
      owner.set(k, { plugin, priority: c.priority });
      options[k] = v;
      applied.push(k);
    }
    out.records.push({
      plugin,
      kind: "request_options",
      status: applied.length ? "applied" : "rejected",
      ...(applied.length ? {} : { reason: "every option was outranked" }),
    });
  }
  return { options: options as RequestOptions, ...out };
}

/** The merged decision on a tool call. Contract: deny beats ask beats allow; no decision is allow. */
export interface ToolDecision {
  decision: "allow" | "ask" | "deny";
  reason?: string;
  plugin?: string;
  /** A plugin answered the call: the tool does not run (unless the call is denied). */
  answer?: { content: string | ContentBlock[]; isError: boolean; plugin: string; reveal?: readonly string[] };
}

const RANK = { allow: 0, ask: 1, deny: 2 } as const;

/** Longest reason a tool decision keeps (code points): it is shown to approvers, stored in the log and read by the model. */
export const DECISION_REASON_CHARS = 1_000;

/** A plugin's decision reason as it is shown and stored: credentials masked, cut by code points. */
function decisionReason(text: string): string {
  return preview(maskCredentials(text), DECISION_REASON_CHARS);
}

/** Merge tool decisions: the most restrictive wins. */
export function mergeDecisions(items: readonly Contributed<ContributionOf<"tool_decision">>[]): ToolDecision {
  let best: ToolDecision = { decision: "allow" };
  let answer: ToolDecision["answer"];
  for (const { plugin, value } of items) {
    if (RANK[value.decision] > RANK[best.decision])
      best = {
        decision: value.decision,
        plugin,
        ...(value.reason !== undefined ? { reason: decisionReason(value.reason) } : {}),
      };
    if (!answer && value.result)
      answer = {
        content: value.result.content,
        isError: value.result.isError ?? false,
        plugin,
        ...(value.result.reveal?.length ? { reveal: value.result.reveal } : {}),
      };
  }
  return answer ? { ...best, answer } : best;
}

/**
 * Apply message edits to a copy of `messages`.
 * Contract: throws a plain Error naming the bad edit when an index is out of range or a
 * tool call id is unknown; `messages` itself is never modified.
 */
export function applyMessageEdits(messages: readonly Message[], edits: readonly MessageEdit[]): Message[] {
  let next = [...messages];
  for (const [i, e] of edits.entries()) {
    if (e.op === "replace") {
      if (e.end < e.start || e.end > next.length)
        throw new Error(`edits[${i}]: replace ${e.start}..${e.end} is outside 0..${next.length}`);
      next = [...next.slice(0, e.start), ...(e.messages as Message[]), ...next.slice(e.end)];
    } else {
      const at = next.findIndex((m) => m.role === "tool" && m.toolCallId === e.toolCallId);
      if (at < 0) throw new Error(`edits[${i}]: no tool result with id "${e.toolCallId}"`);
      const old = next[at] as ToolResultMessage;
      next[at] = { ...old, content: textContent(e.text) };
    }
  }
  return next;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
