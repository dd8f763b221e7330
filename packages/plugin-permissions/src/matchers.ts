/**
 * Argument matchers: what one entry of a rule's `args` (or a compact rule's specifier) checks
 * about one argument. Each answers yes, no or unknown; unknown (a value it cannot check: too
 * long, not text) is never permissive: a deny or ask rule counts it as a match, an allow
 * rule does not. Text matchers are linear (globs: glob.ts; regexes: RE2, no backtracking).
 */
import { isAbsolute, posix, resolve } from "node:path";
import { homedir } from "node:os";
import { RE2JS } from "re2js";
import { codePointLength } from "@keel/text";
import { compileGlob, type GlobMode, MAX_PATTERN_CHARS } from "./glob.ts";

/** Whether a matcher holds for a value. */
export type Verdict = "yes" | "no" | "unknown";

/** One compiled argument matcher. Contract: `test` never throws and is linear in the value's size. */
export interface ArgMatcher {
  /** How it reads in a decision's reason, e.g. `command glob "npm test*"`. */
  readonly text: string;
  test(value: unknown): Verdict;
}

/** What matching needs from the plugin's options. Contract: `cwd` is absolute; `maxArgChars` is positive. */
export interface MatchSettings {
  /** Paths in arguments and path patterns are resolved against this folder. */
  cwd: string;
  /** Text longer than this (code points; a list's entries counted together) is not matched: the matcher answers unknown. */
  maxArgChars: number;
  /**
   * Whether the file system ignores case (`insensitive`: `.ENV` is `.env`, and NFD is NFC).
   * A path that matches a path glob only when case and Unicode form are ignored is then
   * unknown: a deny or ask fires, an allow does not. Default: `insensitive` on macOS and
   * Windows, else `sensitive`.
   */
  pathCase?: "sensitive" | "insensitive" | undefined;
}

/** The default of `pathCase`: the platform's usual file system. */
export const DEFAULT_PATH_CASE: "sensitive" | "insensitive" =
  process.platform === "darwin" || process.platform === "win32" ? "insensitive" : "sensitive";

/** Argument names whose values are paths: a string pattern for them is a path glob. */
export const PATH_KEYS: ReadonlySet<string> = new Set([
  "path",
  "file",
  "file_path",
  "filePath",
  "filename",
  "dir",
  "directory",
  "cwd",
]);

/** The argument a compact rule's bare specifier (`exec(npm test*)`) is matched against: the first of these the call has. */
export const SUBJECT_KEYS: readonly string[] = [
  "command",
  "cmd",
  "path",
  "file_path",
  "filePath",
  "file",
  "url",
  "uri",
];

/** The raw forms of a matcher, as written in a rule's `args`. */
export type ArgMatcherInput =
  | string
  | number
  | boolean
  | null
  | RegExp
  | { glob: string }
  | { path: string }
  | { prefix: string }
  | { regex: string | RegExp; flags?: string }
  | { equals: unknown };

/**
 * What matchers derive from one argument (its length, its readings as a path), kept for one
 * decision: every rule of a call tests the same arguments, so a 10,000-rule table derives them
 * once, not 10,000 times. Active only inside `memoized`.
 */
let memo: { texts: Map<string, Map<string, unknown>>; lists: WeakMap<object, number> } | undefined;

/** Run `f` (one decision) with the per-call memo. Contract: nothing is kept after `f` returns. */
export function memoized<T>(f: () => T): T {
  const outer = memo;
  memo = { texts: new Map(), lists: new WeakMap() };
  try {
    return f();
  } finally {
    memo = outer;
  }
}

/** `make(text)` once per call and kind. Contract: `make` never returns undefined. */
function derived<T>(kind: string, text: string, make: () => T): T {
  if (!memo) return make();
  let m = memo.texts.get(kind);
  if (!m) memo.texts.set(kind, (m = new Map()));
  const hit = m.get(text);
  if (hit !== undefined) return hit as T;
  const v = make();
  if (m.size < 4_096) m.set(text, v);
  return v;
}

/** Code points in strings together (UTF-16 length first: it is never less). */
function points(texts: readonly string[], max: number): number {
  let units = 0;
  for (const t of texts) units += t.length;
  if (units <= max) return units;
  let n = 0;
  for (const t of texts) n += derived("points", t, () => codePointLength(t));
  return n;
}

/** Whether a value (a string or a list of them) holds more than `max` code points. */
function tooLong(value: string | readonly string[], max: number): boolean {
  if (typeof value === "string") return points([value], max) > max;
  const known = memo?.lists.get(value);
  const n = known ?? points(value, max);
  if (known === undefined) memo?.lists.set(value, n);
  return n > max;
}

/**
 * A string matcher applied to one value: arrays of strings count element by element, and
 * `maxArgChars` bounds the whole list (1,000 entries of 10,000 characters each are 10 M to match
 * per rule, not 10,000).
 */
function overText(s: MatchSettings, check: (text: string) => boolean | Verdict): (value: unknown) => Verdict {
  const one = (v: string): Verdict => {
    const r = check(v);
    return r === true ? "yes" : r === false ? "no" : r;
  };
  return (value) => {
    const list = Array.isArray(value) ? value : [value];
    if (list.length > 1_000 || !list.every((v) => typeof v === "string")) return "unknown";
    if (tooLong(value as string | string[], s.maxArgChars)) return "unknown";
    if (!Array.isArray(value)) return one(value as string);
    const all = (list as string[]).map(one);
    if (all.includes("unknown")) return "unknown";
    if (all.every((v) => v === "yes")) return all.length ? "yes" : "no";
    return all.includes("yes") ? "unknown" : "no";
  };
}

function expandHome(p: string): string {
  return p === "~" || p.startsWith("~/") ? homedir() + p.slice(1) : p;
}

/** A path pattern anchored at `cwd` (one starting with `**` stays unanchored). */
function pathPattern(pattern: string, cwd: string): string {
  const p = expandHome(pattern);
  if (p.startsWith("**")) return p;
  // Keep a trailing `/**` (resolve would keep it, but not a trailing `/`).
  return isAbsolute(p) ? resolve(p) + (p.endsWith("/") ? "/" : "") : resolve(cwd, p) + (p.endsWith("/") ? "/" : "");
}

/**
 * The other ways a tool may read an argument, beside the text as written: trimmed (a shell
 * ignores the blanks around a command, many tools trim a path); for a path (PATH_KEYS)
 * backslashes as separators (a Windows host, a remote server) with `.`/`..` applied; for a URL
 * (URL_KEYS) the URL a client fetches.
 */
function otherReadings(key: string, v: string): readonly string[] {
  const kind = PATH_KEYS.has(key) ? "path" : URL_KEYS.has(key) ? "url" : "text";
  return derived(`readings:${kind}`, v, () => {
    const trimmed = v.trim();
    const out = new Set([trimmed]);
    for (const t of [v, trimmed]) {
      if (kind === "path") {
        const slashed = t.replaceAll("\\", "/");
        if (slashed !== t || /(^|\/)\.\.(\/|$)/.test(t)) out.add(posix.normalize(slashed));
      } else if (kind === "url" && URL.canParse(t)) out.add(new URL(t).href);
    }
    out.delete(v);
    return [...out];
  });
}

/** Argument names whose values are URLs: also read as the URL a client fetches (host case and `%2e` folded, `..` applied). */
export const URL_KEYS: ReadonlySet<string> = new Set(["url", "uri"]);

/** The other readings of a path for a path glob (`..` is applied by resolving): trimmed, backslashes as separators. */
function pathReadings(v: string): readonly string[] {
  return derived("readings:glob", v, () => {
    const trimmed = v.trim();
    const out = new Set([trimmed, v.replaceAll("\\", "/"), trimmed.replaceAll("\\", "/")]);
    out.delete(v);
    return [...out];
  });
}

/**
 * A text check (prefix, text glob, regex) on an argument: it holds or fails only when every
 * reading of the argument agrees (` rm -rf /` is `rm -rf /` to a shell; `src/../.env` is not
 * under `src/`; `/tmp/../etc/x` is under `/etc/`), else it is unknown.
 */
function textCheck(key: string, check: (text: string) => boolean): (text: string) => Verdict {
  return (v) => {
    const as = check(v);
    return otherReadings(key, v).every((r) => check(r) === as) ? (as ? "yes" : "no") : "unknown";
  };
}

function globMatcher(key: string, pattern: string, mode: GlobMode, s: MatchSettings): ArgMatcher {
  if (mode === "text") {
    const g = compileGlob(pattern, "text");
    return {
      text: `${key} glob ${JSON.stringify(pattern)}`,
      test: overText(
        s,
        textCheck(key, (v) => g.test(v)),
      ),
    };
  }
  const full = pathPattern(pattern, s.cwd);
  const g = compileGlob(full, "path");
  // On a case-insensitive file system: the same pattern with case and Unicode form folded.
  const folded = (s.pathCase ?? DEFAULT_PATH_CASE) === "insensitive" ? compileGlob(fold(full), "path") : undefined;
  return {
    text: `${key} path ${JSON.stringify(pattern)}`,
    // The argument as the tool will see it: `~`, `.` and `..` resolved, so `src/../.env` is not under `src/`.
    // A NUL byte ends the path for C and many servers, and makes it invalid for Node: it cannot be checked.
    test: overText(s, (v) => {
      // `~name/…` is another user's home to a shell, a folder named `~name` to a file tool: not one path.
      if (v.includes("\0") || /^~[^/]/.test(v)) return "unknown";
      const one = (text: string): Verdict => {
        const p = resolved(s.cwd, text);
        if (g.test(p)) return "yes";
        return folded?.test(derived("fold", p, () => fold(p))) ? "unknown" : "no";
      };
      const as = one(v);
      // Trimmed, and with backslashes as separators: every reading must agree.
      if (as === "unknown") return as;
      return pathReadings(v).every((r) => one(r) === as) ? as : "unknown";
    }),
  };
}

/** Case and Unicode form folded, as a case-insensitive file system compares names. */
function fold(text: string): string {
  return text.normalize("NFC").toLowerCase();
}

/** A path argument resolved against `cwd` (once per call: `derived`). */
function resolved(cwd: string, raw: string): string {
  return derived(`resolved\0${cwd}`, raw, () => resolve(cwd, expandHome(raw)));
}

function regexMatcher(key: string, source: string, flags: string, s: MatchSettings): ArgMatcher {
  let bits = 0;
  if (flags.includes("i")) bits |= RE2JS.CASE_INSENSITIVE;
  if (flags.includes("s")) bits |= RE2JS.DOTALL;
  if (flags.includes("m")) bits |= RE2JS.MULTILINE;
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, bits);
  } catch (err) {
    throw new Error(
      `the regex does not compile (RE2 syntax: no lookaround, no backreferences): ${(err as Error).message}`,
    );
  }
  return {
    text: `${key} regex /${source}/${flags}`,
    test: overText(
      s,
      textCheck(key, (v) => re.matcher(v).find()),
    ),
  };
}

/** Deep JSON equality, bounded in depth (deeper values are unknown). */
function equal(a: unknown, b: unknown, depth = 0): Verdict {
  if (depth > 64) return "unknown";
  if (a === b) return "yes";
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return "no";
  if (Array.isArray(a) !== Array.isArray(b)) return "no";
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return "no";
  let out: Verdict = "yes";
  for (const k of ka) {
    if (!Object.hasOwn(b, k)) return "no";
    const v = equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], depth + 1);
    if (v === "no") return "no";
    if (v === "unknown") out = "unknown";
  }
  return out;
}

/** Read a matcher's single field, or say what was expected. */
function only(input: object): [string, unknown] {
  const keys = Object.keys(input);
  const known = ["glob", "path", "prefix", "regex", "equals"];
  const main = keys.filter((k) => known.includes(k));
  const extra = keys.filter((k) => !known.includes(k) && !(k === "flags" && main[0] === "regex"));
  if (main.length !== 1 || extra.length)
    throw new Error(
      `expected a string pattern or one of { glob }, { path }, { prefix }, { regex, flags? }, { equals }, found keys ${JSON.stringify(keys)}`,
    );
  return [main[0]!, (input as Record<string, unknown>)[main[0]!]];
}

function needString(field: string, v: unknown): string {
  if (typeof v !== "string") throw new Error(`\`${field}\` must be a string, found ${typeof v}`);
  if (!v) throw new Error(`\`${field}\` is empty`);
  if (codePointLength(v) > MAX_PATTERN_CHARS)
    throw new Error(`\`${field}\` is longer than ${MAX_PATTERN_CHARS} characters`);
  return v;
}

/**
 * Compile one matcher for the argument `key` (`null`: the call's subject, SUBJECT_KEYS).
 * A string is a glob: a path glob when the argument is a path (PATH_KEYS, or a subject that
 * turns out to be one), else a text glob. Contract: throws an Error naming the problem.
 */
export function compileMatcher(key: string, input: unknown, s: MatchSettings): ArgMatcher {
  if (typeof input === "string") return globMatcher(key, input, PATH_KEYS.has(key) ? "path" : "text", s);
  if (input === null || typeof input === "number" || typeof input === "boolean")
    return { text: `${key} = ${JSON.stringify(input)}`, test: (v) => equal(v, input) };
  if (typeof input !== "object" || Array.isArray(input))
    throw new Error(
      `expected a string pattern or a matcher object, found ${Array.isArray(input) ? "a list" : typeof input}`,
    );
  if (input instanceof RegExp) return compileMatcher(key, { regex: input }, s);
  const [kind, value] = only(input);
  if (kind === "glob") return globMatcher(key, needString("glob", value), "text", s);
  if (kind === "path") return globMatcher(key, needString("path", value), "path", s);
  if (kind === "prefix") {
    const p = needString("prefix", value);
    return {
      text: `${key} prefix ${JSON.stringify(p)}`,
      test: overText(
        s,
        textCheck(key, (v) => v.startsWith(p)),
      ),
    };
  }
  if (kind === "equals") {
    const json = JSON.stringify(value ?? null);
    if (json.length > 10_000) throw new Error("`equals` holds more than 10,000 characters of JSON");
    const want = JSON.parse(json) as unknown;
    // A string compared as text: every reading of the argument (trimmed, a path's `..`) must agree.
    const asText =
      typeof want === "string"
        ? overText(
            s,
            textCheck(key, (v) => v === want),
          )
        : undefined;
    return {
      text: `${key} = ${JSON.stringify(want)}`,
      test: (v) => (asText && typeof v === "string" ? asText(v) : equal(v, want)),
    };
  }
  const re = value instanceof RegExp ? value : needString("regex", value);
  const flags = (input as { flags?: unknown }).flags;
  if (flags !== undefined && (typeof flags !== "string" || !/^[imsguyd]*$/.test(flags)))
    throw new Error("`flags` must be a string of regex flags (i, m, s are honoured)");
  if ((typeof flags === "string" && flags.includes("y")) || (re instanceof RegExp && re.flags.includes("y")))
    throw new Error(
      "the sticky flag `y` cannot be honoured (RE2 finds a match anywhere): anchor the regex with `^` instead",
    );
  return typeof re === "string"
    ? regexMatcher(key, re, (flags as string | undefined) ?? "", s)
    : regexMatcher(key, needString("regex", re.source), re.flags, s);
}
