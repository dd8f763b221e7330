/**
 * The rule table: rules as written (compact strings or objects), checked and compiled once.
 * A malformed rule is an issue located at its index and field (`rules.3.args.command`).
 */
import type { ToolCategory } from "@keel/kernel";
import { truncate } from "@keel/text";
import { compileGlob, type Glob } from "./glob.ts";
import { type ArgMatcher, type ArgMatcherInput, compileMatcher, type MatchSettings } from "./matchers.ts";

/** What a rule decides. */
export type Decision = "allow" | "ask" | "deny";

/** Where a tool comes from, as trust tiers: the agent's own tools, a plugin's, an MCP server's. */
export type Tier = "builtin" | "plugin" | "mcp";

/**
 * One rule as an object. Every field given must hold for the rule to match (an absent field
 * matches anything); a list is any of its entries.
 * Contract: `decision` is required; globs follow glob.ts; `args` keys are top-level argument names.
 */
export interface PermissionRule {
  decision: Decision;
  /** A name for the rule in decisions and the log (default: its text). */
  id?: string;
  /** Tool name globs, e.g. `"exec"`, `"mcp__github__*"`. */
  tool?: string | readonly string[];
  /** Per-argument matchers; all must hold. A string is a glob (a path glob for path-like names: PATH_KEYS). */
  args?: Readonly<Record<string, ArgMatcherInput>>;
  /** Tool categories. */
  category?: ToolCategory | readonly ToolCategory[];
  /** Trust tier of the tool's source. */
  source?: Tier | readonly Tier[];
  /** Globs on the name of the plugin that contributed the tool. */
  plugin?: string | readonly string[];
  /** Globs on the MCP server (its key in plugin-mcp's `servers`) the tool comes from. */
  mcpServer?: string | readonly string[];
  /** Globs on the turn's namespace (the turn metadata's user id, as memory and user-model use it). */
  namespace?: string | readonly string[];
  /** Said to the model and the person with the decision. */
  reason?: string;
}

/** A rule as written: an object, or `"<decision> <tool glob>[(<specifier>)]"`, e.g. `"allow exec(npm test*)"`. */
export type RuleInput = string | PermissionRule;

/** A rule ready to match. Contract: immutable; `index` is its place in the table (0-based). */
export interface CompiledRule {
  readonly index: number;
  readonly id?: string;
  readonly text: string;
  readonly decision: Decision;
  readonly reason?: string;
  readonly tools?: readonly Glob[];
  readonly categories?: ReadonlySet<string>;
  readonly sources?: ReadonlySet<string>;
  readonly plugins?: readonly Glob[];
  readonly mcpServers?: readonly Glob[];
  readonly namespaces?: readonly Glob[];
  readonly args: ReadonlyArray<{ key: string; matcher: ArgMatcher }>;
  /** A compact rule's bare specifier: matched against the call's first SUBJECT_KEYS argument. */
  readonly subject?: { text: ArgMatcher; path: ArgMatcher; url: ArgMatcher; pattern: string };
}

/** A problem in the table. Contract: `path` starts `["rules", index]`; `message` starts `rules[index]`. */
export interface RuleIssue {
  path: Array<string | number>;
  message: string;
}

const DECISIONS: readonly string[] = ["allow", "ask", "deny"];
const CATEGORIES: readonly string[] = ["exec", "mcp", "info", "edit"];
const TIERS: readonly string[] = ["builtin", "plugin", "mcp"];
const FIELDS = ["decision", "id", "tool", "args", "category", "source", "plugin", "mcpServer", "namespace", "reason"];
const TOOL_CHARS = /^[a-zA-Z0-9_*?\\-]+$/;

/** A located failure while compiling one field. */
class Located extends Error {
  readonly at: Array<string | number>;
  constructor(at: Array<string | number>, message: string) {
    super(message);
    this.at = at;
  }
}

function at<T>(path: Array<string | number>, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof Located) throw new Located([...path, ...err.at], err.message);
    throw new Located(path, err instanceof Error ? err.message : String(err));
  }
}

function list(field: string, v: unknown): unknown[] {
  const items = Array.isArray(v) ? v : [v];
  if (!items.length) throw new Located([field], "an empty list matches nothing: leave the field out to match anything");
  return items;
}

function globs(field: string, v: unknown, check?: (p: string) => void): Glob[] {
  return list(field, v).map((p, i) =>
    at(Array.isArray(v) ? [field, i] : [field], () => {
      if (typeof p !== "string") throw new Error(`expected a glob string, found ${typeof p}`);
      check?.(p);
      return compileGlob(p, "text");
    }),
  );
}

function oneOf(field: string, v: unknown, allowed: readonly string[]): Set<string> {
  const items = list(field, v);
  items.forEach((x, i) => {
    if (typeof x !== "string" || !allowed.includes(x))
      throw new Located(
        Array.isArray(v) ? [field, i] : [field],
        `expected one of ${allowed.join(", ")}, found ${JSON.stringify(x)}`,
      );
  });
  return new Set(items as string[]);
}

function toolCheck(p: string): void {
  if (!TOOL_CHARS.test(p))
    throw new Error(`tool names are [a-zA-Z0-9_-]{1,64}, so ${JSON.stringify(p)} can never match one (globs: * and ?)`);
}

function compileArgs(v: unknown, s: MatchSettings): CompiledRule["args"] {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new Located(["args"], "expected an object of argument name → matcher");
  return Object.keys(v).map((key) => ({
    key,
    matcher: at(["args", key], () => compileMatcher(key, (v as Record<string, unknown>)[key], s)),
  }));
}

/** Parse `"<decision> <tool glob>[(<specifier>)]"`; `key=pattern` names the argument. */
function compileCompact(text: string, index: number, s: MatchSettings): CompiledRule {
  const m = /^\s*(\S+)\s+([^(\s]+)(?:\((.*)\))?\s*$/s.exec(text);
  if (!m)
    throw new Located(
      [],
      'expected "<allow|ask|deny> <tool glob>" or "<decision> <tool glob>(<specifier>)", e.g. "allow exec(npm test*)"',
    );
  const [, decision, tool, spec] = m;
  if (!DECISIONS.includes(decision!))
    throw new Located([], `unknown decision ${JSON.stringify(decision)}: expected allow, ask or deny`);
  const tools = globs("tool", tool, toolCheck);
  const base = { index, text, decision: decision as Decision, tools };
  if (spec === undefined) return { ...base, args: [] };
  const named = /^([A-Za-z_][\w.-]*)=(.*)$/s.exec(spec);
  if (named)
    return {
      ...base,
      args: [{ key: named[1]!, matcher: at(["args", named[1]!], () => compileMatcher(named[1]!, named[2], s)) }],
    };
  const subject = at(["specifier"], () => ({
    text: compileMatcher("command", spec, s),
    path: compileMatcher("path", spec, s),
    url: compileMatcher("url", spec, s),
    pattern: spec,
  }));
  return { ...base, args: [], subject };
}

function describeRule(r: PermissionRule): string {
  const { id: _id, reason: _reason, ...rest } = r;
  return truncate(
    JSON.stringify(rest, (_k, v) => (v instanceof RegExp ? String(v) : v)),
    200,
  );
}

function compileObject(r: Record<string, unknown>, index: number, s: MatchSettings): CompiledRule {
  const unknown = Object.keys(r).find((k) => !FIELDS.includes(k));
  if (unknown) throw new Located([unknown], `unknown field; a rule has ${FIELDS.join(", ")}`);
  if (typeof r.decision !== "string" || !DECISIONS.includes(r.decision))
    throw new Located(["decision"], `expected allow, ask or deny, found ${JSON.stringify(r.decision)}`);
  for (const f of ["id", "reason"] as const)
    if (r[f] !== undefined && (typeof r[f] !== "string" || !r[f] || [...(r[f] as string)].length > 500))
      throw new Located([f], "expected a non-empty string of at most 500 characters");
  return {
    index,
    text: describeRule(r as unknown as PermissionRule),
    decision: r.decision as Decision,
    ...(r.id !== undefined ? { id: r.id as string } : {}),
    ...(r.reason !== undefined ? { reason: r.reason as string } : {}),
    ...(r.tool !== undefined ? { tools: globs("tool", r.tool, toolCheck) } : {}),
    ...(r.category !== undefined ? { categories: oneOf("category", r.category, CATEGORIES) } : {}),
    ...(r.source !== undefined ? { sources: oneOf("source", r.source, TIERS) } : {}),
    ...(r.plugin !== undefined ? { plugins: globs("plugin", r.plugin) } : {}),
    ...(r.mcpServer !== undefined ? { mcpServers: globs("mcpServer", r.mcpServer) } : {}),
    ...(r.namespace !== undefined ? { namespaces: globs("namespace", r.namespace) } : {}),
    args: r.args === undefined ? [] : compileArgs(r.args, s),
  };
}

/**
 * Compile a rule table. Contract: never throws; returns the compiled rules, or every issue
 * found (one per malformed rule), each located at `["rules", index, field…]`.
 */
export function compileRules(
  rules: readonly unknown[],
  s: MatchSettings,
): { ok: true; rules: CompiledRule[] } | { ok: false; issues: RuleIssue[] } {
  const out: CompiledRule[] = [];
  const issues: RuleIssue[] = [];
  rules.forEach((r, index) => {
    try {
      if (typeof r === "string") out.push(compileCompact(r, index, s));
      else if (typeof r === "object" && r !== null && !Array.isArray(r))
        out.push(compileObject(r as Record<string, unknown>, index, s));
      else
        throw new Located(
          [],
          `expected a rule string ("deny exec(rm *)") or a rule object, found ${r === null ? "null" : Array.isArray(r) ? "a list" : typeof r}`,
        );
    } catch (err) {
      const e = err instanceof Located ? err : new Located([], err instanceof Error ? err.message : String(err));
      // A compact rule is one string: located at its index, the part named in the message.
      const part = typeof r === "string" && e.at.length ? ` (${e.at.join(".")})` : "";
      const path = typeof r === "string" ? ["rules", index] : ["rules", index, ...e.at];
      issues.push({ path, message: `rules[${index}]${part}: ${e.message}` });
    }
  });
  return issues.length ? { ok: false, issues } : { ok: true, rules: out };
}
