/**
 * Just enough semver to check plugin `kernel` and dependency ranges without a dependency:
 * exact, `*`/`x` wildcards, `^`, `~`, comparators (`>=1.2 <2`), and `||` alternatives.
 * Pre-release tags are ignored.
 */
type Triple = [number, number, number];

function parse(v: string): { t: Triple; parts: number } | undefined {
  const m = /^v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+].*)?$/.exec(v.trim());
  if (!m) return undefined;
  const raw = [m[1], m[2], m[3]];
  let parts = 0;
  const t: number[] = [];
  for (const r of raw) {
    if (r === undefined || /[xX*]/.test(r)) break;
    t.push(Number(r));
    parts++;
  }
  while (t.length < 3) t.push(0);
  return { t: t as Triple, parts };
}

function cmp(a: Triple, b: Triple): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

function bump(t: Triple, at: number): Triple {
  if (at === 0) return [t[0] + 1, 0, 0];
  if (at === 1) return [t[0], t[1] + 1, 0];
  return [t[0], t[1], t[2] + 1];
}

/** [min inclusive, max exclusive] of one comparator, or undefined if malformed. */
function bounds(c: string): Array<(v: Triple) => boolean> | undefined {
  const m = /^(\^|~|>=|<=|>|<|=)?\s*(.+)$/.exec(c);
  if (!m) return undefined;
  const op = m[1] ?? "";
  const p = parse(m[2]!);
  if (!p) return undefined;
  const { t, parts } = p;
  if (parts === 0) return [() => true];
  switch (op) {
    case ">=": return [(v) => cmp(v, t) >= 0];
    case ">": return [(v) => (parts < 3 ? cmp(v, bump(t, parts - 1)) >= 0 : cmp(v, t) > 0)];
    case "<=": return [(v) => (parts < 3 ? cmp(v, bump(t, parts - 1)) < 0 : cmp(v, t) <= 0)];
    case "<": return [(v) => cmp(v, t) < 0];
    case "~": {
      const hi = bump(t, parts === 1 ? 0 : 1);
      return [(v) => cmp(v, t) >= 0, (v) => cmp(v, hi) < 0];
    }
    case "^": {
      const at = t[0] > 0 || parts === 1 ? 0 : t[1] > 0 || parts === 2 ? 1 : 2;
      const hi = bump(t, at);
      return [(v) => cmp(v, t) >= 0, (v) => cmp(v, hi) < 0];
    }
    default: {
      if (parts === 3) return [(v) => cmp(v, t) === 0];
      const hi = bump(t, parts - 1);
      return [(v) => cmp(v, t) >= 0, (v) => cmp(v, hi) < 0];
    }
  }
}

/** The comparators of one `||` alternative; `>= 1.2` is read as `>=1.2`, as npm does. */
function comparators(alt: string): string[] {
  return alt.replace(/(\^|~|>=|<=|>|<|=)\s+/g, "$1").trim().split(/\s+/).filter(Boolean);
}

/** True when `range` is a range this module understands. */
export function validRange(range: string): boolean {
  if (typeof range !== "string") return false;
  return range.split("||").every((alt) => {
    const cs = comparators(alt);
    return cs.length === 0 || cs.every((c) => bounds(c) !== undefined);
  });
}

/**
 * True when `version` satisfies `range`.
 * Contract: a malformed version or range never satisfies.
 */
export function satisfies(version: string, range: string): boolean {
  if (typeof version !== "string" || typeof range !== "string") return false;
  const v = parse(version);
  if (!v || v.parts < 3 || !validRange(range)) return false;
  return range.split("||").some((alt) => {
    const cs = comparators(alt);
    if (cs.length === 0) return true;
    const tests: Array<(v: Triple) => boolean> = [];
    for (const c of cs) {
      const b = bounds(c);
      if (!b) return false;
      tests.push(...b);
    }
    return tests.every((f) => f(v.t));
  });
}
