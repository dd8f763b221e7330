/**
 * The gate's test: does an input ask for a learned workflow, and can its parameters be filled
 * from it? An input matches when it holds enough of the workflow's cue words and exactly the
 * values its slots need (a value of each slot's shape, no more of that shape than slots).
 */
import { occurrences, words } from "./learn.ts";
import type { Workflow } from "./learn.ts";

/** How strict the gate is. Contract: `minCue` in [0, 1]; the share of cue words an input must hold. */
export interface MatchOptions {
  minCue: number;
}

/** A workflow an input asks for, with its slots filled. */
export interface Match {
  workflow: Workflow;
  params: Record<string, string>;
  /** Share of the cue words the input holds (1 with no cue words). */
  score: number;
}

/** What the gate decided for an input. */
export type GateDecision =
  | { kind: "match"; match: Match }
  | { kind: "none" }
  | { kind: "ambiguous"; candidates: string[] };

/** Longest input the gate reads, in UTF-16 units: a pasted log is not a workflow request. */
const MAX_INPUT = 4_000;

/** The slot values of `input` for `w`; undefined when a slot has no value or its shape occurs more often than slots take it. */
export function fill(w: Workflow, input: string): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (const shape of new Set(w.slots.map((s) => s.shape))) {
    const of = w.slots.filter((s) => s.shape === shape);
    const found = [...new Set(occurrences(shape, input))];
    if (found.length !== Math.max(...of.map((s) => s.order)) + 1) return undefined;
    for (const s of of) params[s.name] = found[s.order]!;
  }
  return params;
}

/** Score one workflow against an input's words; undefined below `minCue` or when a slot cannot be filled. */
function scoreOf(w: Workflow, input: string, have: ReadonlySet<string>, o: MatchOptions): Match | undefined {
  const hits = w.cue.filter((c) => have.has(c)).length;
  const score = w.cue.length ? hits / w.cue.length : 1;
  if (score < o.minCue || (w.cue.length && !hits)) return undefined;
  const params = fill(w, input);
  return params ? { workflow: w, params, score } : undefined;
}

/**
 * Decide for an input. Contract: the best match wins (score, then steps, then evidence); two
 * best matches that would run different steps are ambiguous and nothing is offered.
 */
export function decide(input: string, workflows: readonly Workflow[], o: MatchOptions): GateDecision {
  if (!input.trim() || input.length > MAX_INPUT) return { kind: "none" };
  const have = new Set(words(input));
  const found = workflows.flatMap((w) => scoreOf(w, input, have, o) ?? []);
  if (!found.length) return { kind: "none" };
  found.sort(
    (a, b) =>
      b.score - a.score ||
      b.workflow.steps.length - a.workflow.steps.length ||
      b.workflow.examples - a.workflow.examples,
  );
  const [best, next] = found;
  if (next && next.score === best!.score && next.workflow.id !== best!.workflow.id)
    return { kind: "ambiguous", candidates: [best!.workflow.id, next.workflow.id] };
  return { kind: "match", match: best! };
}
