/** Eviction scores of tool-output blocks: subgoal tier + position, and the MIG redundancy penalty. */
import type { Message } from "@keel/kernel";
import { plainText } from "./messages.ts";

const STOP = new Set(
  "the a an and or of to in on for is are was were be been it this that with as at by from not no but if then else than so do does did have has had i you we they he she its our your their can will would should could may might must into out up down over under about after before there here what which who when where why how all any some each more most other such only own same too very just also line lines file".split(
    " ",
  ),
);
const TERM = /[A-Za-z_][A-Za-z0-9_]{1,}|\d+(?:\.\d+)?/g;

const termCache = new WeakMap<Message, Map<string, number>>();

/** Term frequencies of a message's text, stopwords removed (cached per message). */
export function terms(m: Message): Map<string, number> {
  let tf = termCache.get(m);
  if (!tf) {
    tf = new Map();
    for (const t of plainText(m).toLowerCase().match(TERM) ?? []) if (!STOP.has(t)) tf.set(t, (tf.get(t) ?? 0) + 1);
    termCache.set(m, tf);
  }
  return tf;
}

/** Term-frequency weighted Jaccard similarity in [0, 1]: Σ min(tf) / Σ max(tf). */
export function weightedJaccard(a: Map<string, number>, b: Map<string, number>): number {
  if (a.size === 0 || b.size === 0) return 0;
  let min = 0;
  let max = 0;
  for (const [t, x] of a) {
    const y = b.get(t) ?? 0;
    min += Math.min(x, y);
    max += Math.max(x, y);
  }
  for (const [t, y] of b) if (!a.has(t)) max += y;
  return max === 0 ? 0 : min / max;
}

/** A tool output considered for eviction. */
export interface ScoredBlock {
  index: number;
  score: number;
  tier: number;
  redundancy?: number;
}

/**
 * Scores of the tool results at `indices`: tier + index/len × 0.05; with `mig`, minus the
 * largest similarity to a higher-scored tool result among `pool` (all tool results).
 * Contract: sorted lowest score first (evicted first), ties by index.
 */
export function scoreBlocks(
  messages: readonly Message[],
  indices: readonly number[],
  tierOf: (i: number) => number,
  options: { mig: boolean; pool?: readonly number[] },
): ScoredBlock[] {
  const len = Math.max(1, messages.length);
  const base = (i: number) => tierOf(i) + (i / len) * 0.05;
  const out: ScoredBlock[] = indices.map((i) => ({ index: i, tier: tierOf(i), score: base(i) }));
  if (options.mig) {
    const pool = (options.pool ?? indices).map((i) => ({ i, s: base(i) }));
    for (const b of out) {
      const tb = terms(messages[b.index]!);
      let worst = 0;
      for (const p of pool) {
        if (p.s <= b.score || p.i === b.index) continue;
        const sim = weightedJaccard(tb, terms(messages[p.i]!));
        if (sim > worst) worst = sim;
      }
      b.redundancy = worst;
      b.score -= worst;
    }
  }
  return out.sort((a, b) => a.score - b.score || a.index - b.index);
}
