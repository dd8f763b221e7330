/**
 * npm's version ranges, as much as the registry needs: is a string a range, and does a version satisfy it.
 * No dependencies, so the kernel runs in browsers and Workers. The grammar and the desugaring into comparators
 * follow npm's `semver/classes/range.js` in strict mode with `includePrerelease: true`.
 */

/** A version: major, minor, patch, and its pre-release identifiers (none for a release). */
type Version = { n: number[]; pre: string[] };
/** `version op v` must hold. A comparator set (all must hold) is an array of them; a range, an array of sets (one must). */
type Comparator = { op: "<" | "<=" | ">" | ">=" | "="; v: Version };
/** A version as a range writes it: its `v`/`=` prefix, its numbers before the first wildcard, its pre-release. */
type Written = { prefix: string; n: number[]; pre: string[] };

const ID = "(?:0|[1-9]\\d*|\\d*[a-zA-Z-][a-zA-Z0-9-]*)";
const PRE = `(?:-(${ID}(?:\\.${ID})*))?`;
const BUILD = /\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*/g;
const VERSION = new RegExp(`^v?(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)${PRE}(?:${BUILD.source})?$`);
const XID = "(0|[1-9]\\d*|[xX*])";
/** `1`, `1.x`, `=v1.2.3-rc.1`; groups: prefix, major, minor, patch, pre-release (build metadata is stripped first). */
const WRITTEN = `([v= ]*)${XID}(?:\\.${XID}(?:\\.${XID}${PRE})?)?`;
const HYPHEN = new RegExp(`^ ?${WRITTEN} - ${WRITTEN} ?$`);
const TOKEN = new RegExp(`^(\\^|~>?|[<>]=?|=)?${WRITTEN}$`);
/** Thrown inside `parse` only: the range is not one. */
const INVALID = new Error("invalid range");

const isX = (id: string | undefined) => id === undefined || id === "x" || id === "X" || id === "*";

/** npm's limits: numbers up to 2^53 - 1, a version's text (with its `v`) up to 256 characters. */
function version(n: number[], pre: string[], prefix = ""): Version {
  const text = `${prefix}${n.join(".")}${pre.length ? `-${pre.join(".")}` : ""}`;
  if (text.length > 256 || n.some((x) => x > Number.MAX_SAFE_INTEGER)) throw INVALID;
  return { n, pre };
}

/** `ordered`: plain x-ranges reject a number after a wildcard (`1.x.3`); carets, tildes and hyphens ignore it. */
function written([prefix = "", ...ids]: (string | undefined)[], ordered: boolean): Written {
  const k = [0, 1, 2].find((i) => isX(ids[i])) ?? 3;
  if (ordered && ids.slice(k, 3).some((id) => !isX(id))) throw INVALID;
  return { prefix, n: ids.slice(0, k).map(Number), pre: k === 3 && ids[3] ? ids[3].split(".") : [] };
}

/** A full version kept as written: npm accepts one `v` before it, nothing else. */
function exact(w: Written, pre = w.pre): Version {
  if (w.prefix !== "" && w.prefix !== "v") throw INVALID;
  return version(w.n, pre, w.prefix);
}

/** `w` as a pre-release `0`: missing numbers 0 (`1.2` → `1.2.0-0`); with `i`, number `i` raised and the rest 0. */
function bound(w: Written, i = 3): Version {
  const n = [0, 1, 2].map((j) => (j < i ? (w.n[j] ?? 0) : j === i ? w.n[j]! + 1 : 0));
  return version(n, ["0"]);
}

/** The lowest version above all those starting with `w`'s numbers up to `i` (`1.2.3`, 1 → `1.3.0-0`); none for -1. */
const raised = (w: Written, i: number) => (i < 0 ? undefined : bound(w, i));
const at = (op: Comparator["op"], v: Version): Comparator => ({ op, v });
const between = (lo: Version, hi: Version | undefined) => (hi ? [at(">=", lo), at("<", hi)] : [at(">=", lo)]);

/** `a` - `b`: from `a` (or its pre-releases) through `b`. */
function hyphen(a: Written, b: Written): Comparator[] {
  const from = a.n.length === 3 ? exact(a, a.pre.length ? a.pre : ["0"]) : bound(a);
  if (b.n.length === 3 && b.pre.length) return [at(">=", from), at("<=", version(b.n, b.pre))];
  if (b.n.length === 3) exact(b); // npm's validRange keeps it as written (`<=1.2.3`), so `=1.2.3` is no end
  return between(from, raised(b, b.n.length - 1));
}

/** One space-free comparator of a set: `^1.2`, `~>1`, `>=1.2.3-rc.1`, `1.x`, `<=2`, `*`. */
function comparators(token: string): Comparator[] {
  const m = TOKEN.exec(token);
  if (!m) throw INVALID;
  const op = m[1] ?? "";
  const w = written(m.slice(2), op !== "^" && !op.startsWith("~"));
  const full = w.n.length === 3;
  if (op === "^" || op.startsWith("~")) {
    const nonzero = w.n.findIndex((x) => x !== 0);
    const upTo = op === "^" ? (nonzero < 0 ? 2 : nonzero) : 1;
    return between(full ? version(w.n, w.pre) : bound(w), raised(w, Math.min(upTo, w.n.length - 1)));
  }
  if (full) return [at(op === "" ? "=" : (op as Comparator["op"]), exact(w))];
  const [lo, hi] = [bound(w), raised(w, w.n.length - 1)];
  if (op === ">=" || op === "<") return [at(op, lo)];
  if (op === ">") return [hi ? at(">=", hi) : at("<", lo)]; // `>*` is nothing: below 0.0.0-0
  if (op === "<=") return hi ? [at("<", hi)] : [];
  return between(lo, hi);
}

/** The range's comparator sets, or undefined when it is not a range. */
function parse(range: unknown): Comparator[][] | undefined {
  if (typeof range !== "string") return undefined;
  try {
    // npm's order: one space for each run of whitespace, `||`, build metadata out, operators joined to versions.
    const parts = range.replace(/\s+/g, " ").split("||");
    return parts.map((part) => {
      const text = part
        .trim()
        .replace(BUILD, "")
        .replace(/([<>]=?) (?=[v=]*[\dxX*])/g, "$1")
        .replace(/(?<![v=]|[v=\s]\s)= (?=[v=]*[\dxX*])/g, "=")
        .replace(/(~>?|\^) +/g, "$1");
      const h = HYPHEN.exec(text);
      if (h) return hyphen(written(h.slice(1, 6), false), written(h.slice(6), false));
      return text.split(" ").filter(Boolean).flatMap(comparators);
    });
  } catch (error) {
    if (error === INVALID) return undefined;
    throw error;
  }
}

/** < 0, 0, > 0 as `a` is below, equal to, above `b` (semver's order: a release is above its pre-releases). */
function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a.n[i] !== b.n[i]) return a.n[i]! - b.n[i]!;
  if (!a.pre.length || !b.pre.length) return b.pre.length - a.pre.length;
  for (let i = 0; i < Math.max(a.pre.length, b.pre.length); i++) {
    const [x, y] = [a.pre[i], b.pre[i]];
    if (x === y) continue;
    if (x === undefined || y === undefined) return x === undefined ? -1 : 1;
    const [xn, yn] = [/^\d+$/.test(x), /^\d+$/.test(y)];
    return xn && yn ? Number(x) - Number(y) : xn !== yn ? (xn ? -1 : 1) : x < y ? -1 : 1;
  }
  return 0;
}

function holds({ op, v }: Comparator, version: Version): boolean {
  const d = compare(version, v);
  return op === "<" ? d < 0 : op === "<=" ? d <= 0 : op === ">" ? d > 0 : op === ">=" ? d >= 0 : d === 0;
}

/**
 * `range` as npm reads it; a value that is not a string, or not a valid range, is no range.
 * Contract: pure, never throws; true exactly when npm's `semver` `validRange(range)` is not null (strict mode), but
 * for a `*` glued to a version (`*1.2.3`, `>*1.2.3`): npm deletes that star and reads the rest; this rejects it.
 */
export function validRange(range: unknown): range is string {
  return parse(range) !== undefined;
}

/**
 * True when `version` satisfies `range`, pre-release tags compared like releases (npm semver's `includePrerelease: true`).
 * Contract: pure, never throws; false when `version` is not a strict semver string or `range` is no range (by
 * validRange: npm's satisfies alone would also take a hyphen range ending in `=1.2.3`).
 */
export function satisfies(version: unknown, range: unknown): boolean {
  const sets = parse(range);
  const m = typeof version === "string" && version.length <= 256 ? VERSION.exec(version.trim()) : null;
  if (!sets || !m) return false;
  const v: Version = { n: [m[1], m[2], m[3]].map(Number), pre: m[4]?.split(".") ?? [] };
  return v.n.every((x) => x <= Number.MAX_SAFE_INTEGER) && sets.some((set) => set.every((c) => holds(c, v)));
}
