/** "Did you mean …?" for names a plugin author or a config mistyped (phases, kinds, plugins). */

/** Edit distance by code point (insert, delete, substitute, swap two neighbours), stopping early past `limit`. */
function distance(a: string, b: string, limit: number): number {
  const x = [...a];
  const y = [...b];
  if (Math.abs(x.length - y.length) > limit) return limit + 1;
  let before: number[] = [];
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    let best = i;
    for (let j = 1; j <= y.length; j++) {
      let v = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) v = Math.min(v, before[j - 2]! + 1);
      cur.push(v);
      if (v < best) best = v;
    }
    if (best > limit) return limit + 1;
    before = prev;
    prev = cur;
  }
  return prev[y.length]!;
}

/**
 * The known name closest to `input`, when it is close enough to be a typo.
 * Contract: case-insensitive; at most a third of the longer name may differ (at least 1
 * edit, at most 4); ties go to the first candidate; `undefined` when nothing is close.
 */
export function closestName(input: string, candidates: Iterable<string>): string | undefined {
  const needle = input.toLowerCase();
  let best: { name: string; d: number } | undefined;
  for (const c of candidates) {
    const limit = Math.min(4, Math.max(1, Math.floor(Math.max([...needle].length, [...c].length) / 3)));
    const d = distance(needle, c.toLowerCase(), limit);
    if (d <= limit && (!best || d < best.d)) best = { name: c, d };
  }
  return best?.name;
}

/** ` Did you mean "x"?` or an empty string. Contract: ready to append to an error's problem text. */
export function didYouMean(input: unknown, candidates: Iterable<string>): string {
  if (typeof input !== "string" || !input) return "";
  const hit = closestName(input, candidates);
  return hit && hit !== input ? ` Did you mean "${hit}"?` : "";
}
