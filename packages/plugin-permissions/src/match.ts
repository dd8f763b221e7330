/**
 * Deciding one call against the table: deny beats ask beats allow whatever their order, and
 * within the winning decision the first matching rule in table order is the one named. A call
 * no rule matches takes the default of its category.
 */
import type { ToolCallView } from "@keel/kernel";
import type { Glob } from "./glob.ts";
import { memoized, PATH_KEYS, SUBJECT_KEYS, URL_KEYS, type Verdict } from "./matchers.ts";
import type { CompiledRule, Decision, Tier } from "./rules.ts";

/** The plugin name plugin-mcp's tools carry in their source (the only tools counted as an MCP server's). */
export const MCP_PLUGIN = "@keel/plugin-mcp";

/** What a call is matched on: the call as the kernel shows it, and the turn's namespace. Contract: read-only. */
export interface CallFacts {
  call: Pick<ToolCallView, "name" | "args" | "category" | "source">;
  namespace: string;
  /** Set when the turn names a namespace that cannot be read (why): rules on namespaces are then unknown. */
  namespaceUnreadable?: string;
}

/** The rule that decided, as the log keeps it. Contract: `index` is 0-based in `rules`; `text` is at most 200 code points. */
export interface RuleRef {
  index: number;
  id?: string;
  text: string;
}

/**
 * One decision. Contract: `rule` is absent only when no rule matched (`reason` then names the
 * default); `uncertain` lists the matchers that could not check their argument (counted as
 * matching for deny and ask); `subjectMissing` says a bare specifier found no argument to match.
 */
export interface PermissionDecision {
  decision: Decision;
  rule?: RuleRef;
  reason: string;
  uncertain?: string[];
  subjectMissing?: RuleRef[];
}

/** The trust tier of a call's tool. */
export function tierOf(source: CallFacts["call"]["source"]): Tier {
  if (source.kind === "builtin") return "builtin";
  return source.plugin === MCP_PLUGIN && typeof source.meta?.mcpServer === "string" ? "mcp" : "plugin";
}

const anyGlob = (gs: readonly Glob[] | undefined, v: string | undefined): boolean =>
  gs === undefined || (v !== undefined && gs.some((g) => g.test(v)));

/** plugin-mcp's sanitising of a server key in tool names (`mcp__<server>__<tool>`). */
const sanitized = (server: string): string => server.replace(/[^a-zA-Z0-9_-]+/g, "_") || "_";

/**
 * Whether an allow rule's tool glob that reads as an MCP name (`mcp__…`) may allow this call:
 * only a tool of plugin-mcp, and, when the glob spells out a server (`mcp__fs__*`), only that
 * server's (server `fs__admin` names its tools `mcp__fs__admin__…`, which `mcp__fs__*` also matches).
 */
function mcpNameHolds(pattern: string, source: CallFacts["call"]["source"]): boolean {
  if (!pattern.startsWith("mcp__")) return true;
  if (tierOf(source) !== "mcp") return false;
  const literal = /^[^*?\\]*/.exec(pattern)![0];
  if (!literal.slice(5).includes("__")) return true;
  return literal.startsWith(`mcp__${sanitized(source.meta!.mcpServer as string)}__`);
}

/** The tool name globs: an allow's MCP-looking globs hold only for MCP tools (mcpNameHolds). */
function toolHolds(r: CompiledRule, call: CallFacts["call"]): boolean {
  if (r.tools === undefined) return true;
  return r.tools.some((g) => g.test(call.name) && (r.decision !== "allow" || mcpNameHolds(g.pattern, call.source)));
}

/** The conditions on the call's scope: name, category, tier, plugin, server, namespace (unknown when the namespace cannot be read). */
function scopeHolds(r: CompiledRule, f: CallFacts, unsure: string[]): Verdict {
  const { call } = f;
  const server = tierOf(call.source) === "mcp" ? (call.source.meta!.mcpServer as string) : undefined;
  const definite =
    toolHolds(r, call) &&
    (r.categories === undefined || r.categories.has(call.category)) &&
    (r.sources === undefined || r.sources.has(tierOf(call.source))) &&
    anyGlob(r.plugins, call.source.plugin) &&
    anyGlob(r.mcpServers, server);
  if (!definite) return "no";
  if (r.namespaces === undefined) return "yes";
  if (f.namespaceUnreadable === undefined) return anyGlob(r.namespaces, f.namespace) ? "yes" : "no";
  unsure.push(`the namespace could not be checked: ${f.namespaceUnreadable}`);
  return "unknown";
}

type ArgsRecord = Readonly<Record<string, unknown>>;

/**
 * A bare specifier against every subject argument the call has (a decoy under an earlier key
 * must not hide the one the tool reads): yes when all match, no when none does, else unknown
 * (a deny or ask fires, an allow does not).
 */
function subjectHolds(r: CompiledRule, args: ArgsRecord, unsure: string[]): Verdict | "no-subject" {
  const keys = SUBJECT_KEYS.filter((k) => Object.hasOwn(args, k) && args[k] !== undefined);
  if (!keys.length) return "no-subject";
  const seen = keys.map((key) => {
    const m = PATH_KEYS.has(key) ? r.subject!.path : URL_KEYS.has(key) ? r.subject!.url : r.subject!.text;
    return { key, m, v: m.test(args[key]) };
  });
  if (seen.every((s) => s.v === "yes")) return "yes";
  if (seen.every((s) => s.v === "no")) return "no";
  for (const s of seen.filter((s) => s.v === "unknown"))
    unsure.push(`${s.m.text} (argument "${s.key}" could not be checked)`);
  const yes = seen.filter((s) => s.v === "yes").map((s) => `"${s.key}"`);
  const no = seen.filter((s) => s.v === "no").map((s) => `"${s.key}"`);
  if (yes.length && no.length)
    unsure.push(
      `the specifier ${JSON.stringify(r.subject!.pattern)} matches argument ${yes.join(", ")} but not ${no.join(", ")}: every subject argument must match to allow`,
    );
  return "unknown";
}

/** The call's arguments against the rule's matchers: no if any says no, else unknown if any is unsure. */
function argsHold(r: CompiledRule, args: ArgsRecord, unsure: string[]): Verdict | "no-subject" {
  let out: Verdict = "yes";
  if (r.subject) {
    const v = subjectHolds(r, args, unsure);
    if (v === "no-subject" || v === "no") return v;
    out = v;
  }
  for (const { key, matcher: m } of r.args) {
    // An argument the call does not have cannot match: the call does not touch what it names.
    if (!Object.hasOwn(args, key) || args[key] === undefined) return "no";
    const v = m.test(args[key]);
    if (v === "no") return "no";
    if (v === "unknown") {
      out = "unknown";
      unsure.push(`${m.text} (argument "${key}" could not be checked)`);
    }
  }
  return out;
}

/** Arguments that are not an object (a string of JSON, a list): a rule naming an argument cannot check them. */
function notAnObject(r: CompiledRule, a: unknown, unsure: string[]): Verdict {
  if (!r.subject && !r.args.length) return "yes";
  const what = typeof a === "string" ? "a string" : Array.isArray(a) ? "a list" : a === null ? "null" : typeof a;
  unsure.push(`the call's arguments are not an object (${what}), so the rule's arguments could not be checked`);
  return "unknown";
}

/** A rule reference for reasons and the log. */
export function refOf(r: CompiledRule): RuleRef {
  return { index: r.index, ...(r.id !== undefined ? { id: r.id } : {}), text: r.text };
}

/** How a rule reads in a reason: `rules[2] "deny exec(rm *)"`. */
export function nameOf(r: RuleRef): string {
  return `rules[${r.index}]${r.id !== undefined ? ` (${r.id})` : ""} ${JSON.stringify(r.text)}`;
}

/**
 * Decide one call. Contract: pure and total (never throws on any arguments); the first
 * matching rule of the strongest decision is named; unknown verdicts fire deny and ask rules only.
 */
export function decide(
  rules: readonly CompiledRule[],
  facts: CallFacts,
  fallback: (category: string) => Decision,
): PermissionDecision {
  return memoized(() => decideOnce(rules, facts, fallback));
}

function decideOnce(
  rules: readonly CompiledRule[],
  facts: CallFacts,
  fallback: (category: string) => Decision,
): PermissionDecision {
  const first: Partial<Record<Decision, CompiledRule>> = {};
  const unsure: Record<Decision, string[]> = { allow: [], ask: [], deny: [] };
  const missing: RuleRef[] = [];
  const a = facts.call.args;
  const args = typeof a === "object" && a !== null && !Array.isArray(a) ? (a as ArgsRecord) : undefined;
  for (const r of rules) {
    // A deny decides (nothing after it can change that); after an ask, allow rules cannot win.
    if (first.deny) break;
    if (first[r.decision] || (first.ask && r.decision === "allow")) continue;
    const notes: string[] = [];
    const scope = scopeHolds(r, facts, notes);
    if (scope === "no") continue;
    const v = args === undefined ? notAnObject(r, a, notes) : argsHold(r, args, notes);
    if (v === "no-subject") missing.push(refOf(r));
    if (v === "no" || v === "no-subject") continue;
    if ((v === "yes" && scope === "yes") || r.decision !== "allow") {
      first[r.decision] = r;
      unsure[r.decision] = notes;
    }
  }
  const pick = first.deny ?? first.ask ?? first.allow;
  const extra = missing.length ? { subjectMissing: missing } : {};
  if (!pick) {
    const d = fallback(facts.call.category);
    return { decision: d, reason: `no rule matched; the default for ${facts.call.category} tools is ${d}`, ...extra };
  }
  const ref = refOf(pick);
  const notes = unsure[pick.decision];
  return {
    decision: pick.decision,
    rule: ref,
    reason: `${nameOf(ref)} ${VERB[pick.decision]} it${pick.reason ? `: ${pick.reason}` : ""}${notes.length ? ` (${notes.join("; ")}; what cannot be checked never allows)` : ""}`,
    ...(notes.length ? { uncertain: notes } : {}),
    ...extra,
  };
}

const VERB: Record<Decision, string> = { allow: "allows", ask: "asks about", deny: "denies" };
