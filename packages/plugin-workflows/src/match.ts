/**
 * The gate's test: does an input ask for a learned workflow, and can its parameters be filled
 * from it? An input matches when it holds enough of the workflow's cue words and exactly the
 * values its slots need (a value of each slot's shape, no more of that shape than slots).
 */
import { codePointSlice } from "@keel/text";
import { occurrences, words } from "./learn.ts";
import type { Workflow } from "./learn.ts";

/** How strict the gate is. Contract: `minCue` in [0, 1]; the share of cue words an input must hold. */
export interface MatchOptions {
  minCue: number;
}

interface Words {
  input: ReadonlySet<string>;
  lead: ReadonlySet<string>;
}

/** A workflow an input asks for, with its slots filled. */
export interface Match {
  workflow: Workflow;
  params: Record<string, string>;
  /** Share of the cue words the input holds (1 with no cue words). */
  score: number;
  /** Cue words found, in the input and the lead: the more, the more specific the match. */
  matched: number;
}

/** What the gate decided for an input. */
export type GateDecision =
  | { kind: "match"; match: Match }
  | { kind: "none" }
  | { kind: "ambiguous"; candidates: string[] };

/**
 * Whether a workflow is still offered, given how its offers ended. Contract: one declined too
 * many silences it: it is offered while it was declined at most once more than it was accepted.
 */
export function offerable(outcomes: { accepted: number; declined: number }): boolean {
  return outcomes.declined - outcomes.accepted < 2;
}

/** Longest input the gate reads, in UTF-16 units: a pasted log is not a workflow request (nor is it learned from). */
export const MAX_INPUT = 4_000;

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

/** Share of `cue` in `have` (1 for no cue). */
const coverage = (cue: readonly string[], have: ReadonlySet<string>) =>
  cue.length ? cue.filter((c) => have.has(c)).length / cue.length : 1;

/**
 * Score one workflow against an input's words; undefined below `minCue` (for the input and for
 * the lead, the assistant's message the input answers), when a cue word holding a digit (an id
 * every example named) is missing, or when a slot cannot be filled.
 */
function scoreOf(w: Workflow, input: string, have: Words, o: MatchOptions): Match | undefined {
  const score = coverage(w.cue, have.input);
  if (score < o.minCue || !w.cue.some((c) => have.input.has(c))) return undefined;
  if (w.cue.some((c) => /[0-9]/.test(c) && !have.input.has(c))) return undefined;
  if (coverage(w.leadCue ?? [], have.lead) < o.minCue) return undefined;
  const params = fill(w, input);
  const matched =
    w.cue.filter((c) => have.input.has(c)).length + (w.leadCue ?? []).filter((c) => have.lead.has(c)).length;
  return params ? { workflow: w, params, score, matched } : undefined;
}

/**
 * Decide for an input. Contract: the best match wins (score, then cue words found, then steps,
 * then evidence); two best matches equal in score and cue words are ambiguous: nothing is offered.
 */
export function decide(input: string, workflows: readonly Workflow[], o: MatchOptions, lead = ""): GateDecision {
  if (!input.trim() || input.length > MAX_INPUT) return { kind: "none" };
  const have = { input: new Set(words(input)), lead: new Set(words(codePointSlice(lead, 0, MAX_INPUT))) };
  const found = workflows.flatMap((w) => scoreOf(w, input, have, o) ?? []);
  if (!found.length) return { kind: "none" };
  found.sort(
    (a, b) =>
      b.score - a.score ||
      b.matched - a.matched ||
      b.workflow.steps.length - a.workflow.steps.length ||
      b.workflow.examples - a.workflow.examples,
  );
  const [best, next] = found;
  if (next && next.score === best!.score && next.matched === best!.matched && next.workflow.id !== best!.workflow.id)
    return { kind: "ambiguous", candidates: [best!.workflow.id, next.workflow.id] };
  return { kind: "match", match: best! };
}
