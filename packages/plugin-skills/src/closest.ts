/** The skills closest to a name or a few words: name similarity plus BM25 over descriptions. */
import { Bm25 } from "@keel/text/retrieval";
import type { RoutableSkill } from "./router.ts";
import { terms, tokenize } from "./text.ts";

/** Character bigrams of a lowercased text, letters and digits only, by code point. */
function bigrams(text: string): Map<string, number> {
  const chars = [
    ...text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}]+/gu, " ")
      .trim(),
  ];
  const out = new Map<string, number>();
  for (let i = 0; i + 1 < chars.length; i++) {
    const g = chars[i]! + chars[i + 1]!;
    out.set(g, (out.get(g) ?? 0) + 1);
  }
  return out;
}

/** Dice coefficient of character bigrams (0..1); 1 for equal texts. */
export function nameSimilarity(a: string, b: string): number {
  const x = bigrams(a);
  const y = bigrams(b);
  let shared = 0;
  let total = 0;
  for (const [g, n] of x) (shared += Math.min(n, y.get(g) ?? 0)), (total += n);
  for (const n of y.values()) total += n;
  return total ? (2 * shared) / total : 0;
}

/**
 * Up to `k` skills closest to `query`, best first: name similarity (bigram Dice) plus BM25 of
 * the query's terms over name and description, scaled to the best match (0..1 each).
 * Contract: deterministic; skills with no similarity and no matching term are left out.
 */
export function closestSkills<T extends RoutableSkill>(skills: readonly T[], query: string, k = 8): T[] {
  const rel = new Bm25(skills.map((s) => tokenize(`${s.name} ${s.description}`))).score(terms(query));
  let max = 0;
  for (const r of rel) max = Math.max(max, r);
  return skills
    .map((skill, i) => ({ skill, score: nameSimilarity(query, skill.name) + (max > 0 ? rel[i]! / max : 0) }))
    .filter((s) => s.score > 0.2)
    .sort((a, b) => b.score - a.score || a.skill.name.localeCompare(b.skill.name))
    .slice(0, Math.max(0, k))
    .map((s) => s.skill);
}
