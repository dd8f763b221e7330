/**
 * @keel/plugin-permissions — permission rules. An ordered table of allow / ask / deny rules
 * over tool names, arguments, the tool's source (builtin, plugin, MCP server) and the turn's
 * namespace, decided at `tool.pre_call` as `tool_decision` contributions: `ask` goes through
 * the kernel's durable approvals unchanged, `deny` beats every allow (this table's and any
 * other plugin's). Each decision names its rule in the reason and in a `permissions.decision`
 * diagnostic the session log keeps. The table is checked when the agent is created: a
 * malformed rule is KEEL_PLUGIN_OPTIONS_INVALID at `plugins[i].options.rules.<n>.<field>`.
 */
import { z } from "zod";
import type { ContributionFor, ToolCategory } from "@keel/kernel";
import { definePlugin } from "@keel/kernel";
import { codePointLength } from "@keel/text";
import { type CallFacts, decide, nameOf, type PermissionDecision, tierOf } from "./match.ts";
import { DEFAULT_PATH_CASE } from "./matchers.ts";
import { type CompiledRule, compileRules, type Decision, type RuleInput } from "./rules.ts";

export type { ArgMatcherInput } from "./matchers.ts";
export { DEFAULT_PATH_CASE, PATH_KEYS, SUBJECT_KEYS, URL_KEYS } from "./matchers.ts";
export type { CallFacts, PermissionDecision, RuleRef } from "./match.ts";
export { decide, tierOf } from "./match.ts";
export type { CompiledRule, Decision, PermissionRule, RuleInput, RuleIssue, Tier } from "./rules.ts";
export { compileRules } from "./rules.ts";
export { compileGlob } from "./glob.ts";

export const PLUGIN_NAME = "@keel/plugin-permissions";
export const PLUGIN_VERSION = "0.1.0";
/** The code of the diagnostic every decision is logged as. */
export const DECISION_CODE = "permissions.decision";

/** The default for calls no rule matches: a dangerous tool asks (y-agent), an information tool runs. */
export const DEFAULTS: Readonly<Record<ToolCategory, Decision>> = Object.freeze({
  info: "allow",
  edit: "ask",
  exec: "ask",
  mcp: "ask",
});

/**
 * Options of permissions(). Contract: `rules` is checked when the agent is created; everything is optional.
 */
export interface PermissionsOptions {
  /** The ordered rule table. Default: none (every call takes the default). */
  rules?: readonly RuleInput[];
  /** For calls no rule matches: one decision, or one per tool category (missing ones from DEFAULTS). */
  default?: Decision | Partial<Record<ToolCategory, Decision>>;
  /** `bypass` turns every ask into allow (deny stays deny). Default "default"; a turn's metadata may set it (`modeKey`). */
  mode?: "default" | "bypass";
  /** The turn metadata field that may set the mode for one turn. Default "permissionMode". */
  modeKey?: string;
  /** The turn metadata field naming the user, whose value is the namespace (as plugin-memory). Default "userId". */
  namespaceKey?: string;
  /** The namespace of a turn whose metadata names none. Default "default". */
  namespace?: string;
  /** Path arguments and path patterns are resolved against this folder. Default: the process's cwd. */
  cwd?: string;
  /** Longest argument text matched, in code points (a list's entries together); a longer one cannot be checked (never allows). Default 10,000. */
  maxArgChars?: number;
  /**
   * Whether the file system ignores case: `insensitive` makes a path that matches a path glob
   * only with case and Unicode form folded fire deny and ask rules (never allow ones).
   * Default: `insensitive` on macOS and Windows, else `sensitive`.
   */
  pathCase?: "sensitive" | "insensitive";
}

const decision = z.enum(["allow", "ask", "deny"]);
const Options = z
  .strictObject({
    rules: z.array(z.unknown()).max(10_000).default([]),
    default: z
      .union([decision, z.strictObject({ info: decision, edit: decision, exec: decision, mcp: decision }).partial()])
      .default({}),
    mode: z.enum(["default", "bypass"]).default("default"),
    modeKey: z.string().min(1).max(200).default("permissionMode"),
    namespaceKey: z.string().min(1).max(200).default("userId"),
    namespace: z.string().min(1).max(200).default("default"),
    cwd: z.string().min(1).optional(),
    maxArgChars: z.number().int().min(1).max(10_000_000).default(10_000),
    pathCase: z.enum(["sensitive", "insensitive"]).default(DEFAULT_PATH_CASE),
  })
  .transform((o, ctx) => {
    const settings = { cwd: o.cwd ?? process.cwd(), maxArgChars: o.maxArgChars, pathCase: o.pathCase };
    const compiled = compileRules(o.rules, settings);
    if (!compiled.ok) {
      for (const issue of compiled.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
      return z.NEVER;
    }
    const defaults: Record<string, Decision> =
      typeof o.default === "string"
        ? { info: o.default, edit: o.default, exec: o.default, mcp: o.default }
        : { ...DEFAULTS, ...o.default };
    return { ...o, compiled: compiled.rules, defaults };
  });

type Resolved = z.output<typeof Options>;

/**
 * The turn's namespace, read as plugin-memory and plugin-user-model read it. A value the turn
 * gives that cannot be read as one (too long, not text) is not taken as the default: it is
 * `unreadable`, and rules on namespaces then fire if they deny or ask, never if they allow.
 */
function namespaceOf(
  o: Resolved,
  metadata: Readonly<Record<string, unknown>>,
): Pick<CallFacts, "namespace" | "namespaceUnreadable"> {
  const v = metadata[o.namespaceKey];
  if (v === undefined || v === null || v === "") return { namespace: o.namespace };
  if (typeof v === "string" && v.length <= 400 && codePointLength(v) <= 200) return { namespace: v };
  if (typeof v === "number" && Number.isFinite(v)) return { namespace: String(v) };
  const why =
    typeof v === "string"
      ? `the turn's ${o.namespaceKey} is longer than 200 characters`
      : `the turn's ${o.namespaceKey} is ${Array.isArray(v) ? "a list" : `${typeof v === "object" ? "an" : "a"} ${typeof v}`}, not text`;
  return { namespace: o.namespace, namespaceUnreadable: why };
}

/** Decide a call with the plugin's options (bypass applied). Contract: pure; deny is never bypassed. */
export function decideWith(
  rules: readonly CompiledRule[],
  facts: CallFacts,
  defaults: Readonly<Record<string, Decision>>,
  bypass: boolean,
): PermissionDecision & { bypassed?: true } {
  const d = decide(rules, facts, (c) => defaults[c] ?? "ask");
  if (!bypass || d.decision !== "ask") return d;
  return { ...d, decision: "allow", reason: `${d.reason} — allowed: the turn runs in bypass mode`, bypassed: true };
}

/** The tool_decision and the diagnostic the log keeps for one decision. */
function contributions(
  d: ReturnType<typeof decideWith>,
  facts: CallFacts,
  callId: string,
  warned: Set<string>,
): ContributionFor<"tool.pre_call">[] {
  const out: ContributionFor<"tool.pre_call">[] = [{ kind: "tool_decision", decision: d.decision, reason: d.reason }];
  out.push({
    kind: "diagnostic",
    level: d.decision === "deny" ? "warn" : "info",
    code: DECISION_CODE,
    message: `${facts.call.name}: ${d.decision} — ${d.reason}`,
    data: {
      callId,
      tool: facts.call.name,
      decision: d.decision,
      rule: d.rule ? { ...d.rule } : null,
      tier: tierOf(facts.call.source),
      namespace: facts.namespace,
      ...(facts.namespaceUnreadable ? { namespaceUnreadable: facts.namespaceUnreadable } : {}),
      ...(d.bypassed ? { bypassed: true } : {}),
      ...(d.uncertain ? { uncertain: d.uncertain } : {}),
    },
  });
  // Once per rule and tool while the agent lives: the table, not the call, needs fixing.
  for (const r of (d.subjectMissing ?? []).filter((r) => !warned.has(`${r.index}:${facts.call.name}`))) {
    if (warned.size < 10_000) warned.add(`${r.index}:${facts.call.name}`);
    out.push({
      kind: "diagnostic",
      level: "warn",
      code: "permissions.rule_unchecked",
      message: `${nameOf(r)} names ${facts.call.name}, but its call has none of the arguments a bare specifier reads; name the argument, e.g. ${facts.call.name}(command=…)`,
      data: { rule: { ...r }, tool: facts.call.name },
    });
  }
  return out;
}

/**
 * The options as they are now: a deep copy (RegExps included), with the default `cwd` fixed, so
 * a table changed after `permissions()` returns (before this agent, or a subagent built later
 * from the same entry, reads it) changes nothing. Options that cannot be copied (a getter that
 * throws, a function) are passed as given, for the kernel's options guard to report.
 */
function snapshot(options: PermissionsOptions): unknown {
  try {
    const copy = structuredClone(options) as PermissionsOptions;
    return typeof copy === "object" && copy !== null && copy.cwd === undefined ? { ...copy, cwd: process.cwd() } : copy;
  } catch {
    return options;
  }
}

/**
 * The plugin. Contract: one `tool.pre_call` handler at stage `final` (it sees the arguments as
 * every other handler rewrote them, and the kernel lets no handler rewrite them after it),
 * returning one tool_decision and one diagnostic per call.
 */
export function permissions(options: PermissionsOptions = {}) {
  const input = snapshot(options);
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "Permission rules: an ordered allow/ask/deny table decided at tool.pre_call.",
    options: Options,
    input: input as z.input<typeof Options>,
    setup(ctx) {
      const o = ctx.options as Resolved;
      const warned = new Set<string>();
      ctx.on(
        "tool.pre_call",
        (e) => {
          const facts: CallFacts = { call: e.call, ...namespaceOf(o, e.metadata) };
          const bypass = o.mode === "bypass" || e.metadata[o.modeKey] === "bypass";
          return contributions(decideWith(o.compiled, facts, o.defaults, bypass), facts, e.call.id, warned);
        },
        { stage: "final", id: "rules" },
      );
    },
  });
}

export default permissions;
