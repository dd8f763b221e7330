/**
 * Learning a workflow from repeated successful turns that made the same tool calls: each
 * argument that stayed the same is a constant; one that varied is lifted out as a parameter,
 * filled from the input (a value of the same shape), from an earlier step's JSON result (the
 * same path each time), or, failing both, by a model call.
 */
import { createHash } from "node:crypto";
import { terms } from "@keel/text/retrieval";

/** JSON as tool arguments and results hold it. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** One successful turn, as the plugin records it (redacted). */
export interface Example {
  input: string;
  calls: Array<{ name: string; args: Record<string, Json> }>;
  /** Each call's result text, in call order. */
  results: string[];
  /** The turn's final answer. */
  answer: string;
  /** What the assistant said last before this input (what the input answers), if anything. */
  lead?: string;
}

/** A value every example's result held at one place (`path` into its JSON, or [] for the whole text). */
export interface Invariant {
  step: number;
  path: Array<string | number>;
  value: Json;
}

/** Where a step's argument comes from. */
export type ArgSource =
  | { from: "const"; value: Json }
  | { from: "input"; slot: string }
  | { from: "step"; step: number; path: Array<string | number> }
  | { from: "model"; param: string };

/** A parameter filled from the input: a value of `shape`, the `order`-th of its shape there. */
export interface Slot {
  name: string;
  /** A regular expression source for the whole value (letters, digits and separators, with lengths). */
  shape: string;
  order: number;
}

/**
 * A learned workflow.
 * Contract: `steps` run in order; every `input` source names a slot of `slots`; a `step`
 * source names an earlier step; `cue` are words every example's input held.
 */
export interface Workflow {
  id: string;
  name: string;
  steps: Array<{ tool: string; args: Record<string, ArgSource> }>;
  slots: Slot[];
  /** Parameters a model must fill (no input value or earlier result gave them). */
  modelParams: string[];
  cue: string[];
  /** Words every example's lead (the assistant's message before the input) held: the state of the conversation. */
  leadCue?: string[];
  /** The final answer with `{{slot}}` holes, when every example's answer fits it; else undefined. */
  answer?: string;
  /** With `answer`: the result values every example agreed on; the answer is given only while a run's results hold them too. */
  expect?: Invariant[];
  examples: number;
}

/** Words of an input, as matching compares them (lowercase, no stopwords, unstemmed). */
export function words(text: string): string[] {
  return terms(text, { stem: false });
}

/** The tool names of a turn, joined: what groups examples. */
export function sequenceKey(calls: ReadonlyArray<{ name: string }>): string {
  return calls.map((c) => c.name).join(">");
}

const same = (a: Json | undefined, b: Json | undefined) => JSON.stringify(a) === JSON.stringify(b);

/** True when `value` holds a stored secret's placeholder (`[REDACTED:<kind>]`): never an argument to send. */
export function holdsPlaceholder(value: Json | undefined): boolean {
  return /\[REDACTED:[a-z0-9_]+\]/.test(JSON.stringify(value) ?? "");
}

/** The character class of one character: a letter (by case), a digit, or itself. */
function classOf(ch: string): string {
  if (/[a-z]/.test(ch)) return "a";
  if (/[A-Z]/.test(ch)) return "A";
  if (/[0-9]/.test(ch)) return "9";
  return ch;
}

/** Runs of one class: [class, length]. */
function runs(value: string): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  for (const ch of value) {
    const c = classOf(ch);
    const last = out.at(-1);
    if (last && last[0] === c && c.length === 1 && "aA9".includes(c)) last[1]++;
    else out.push([c, 1]);
  }
  return out;
}

const CLASS: Record<string, string> = { a: "[a-z]", A: "[A-Z]", "9": "[0-9]" };
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The shape every value has: the same runs of classes, each with its length range. A value made
 * of mixed upper case and digits (an id like "Z7GOZK") is one [A-Z0-9] run. Undefined when the
 * values differ in structure.
 */
export function shapeOf(values: readonly string[]): string | undefined {
  const mixed = values.every((v) => /^[A-Z0-9]{4,}$/.test(v) && /[A-Z]/.test(v) && /[0-9]/.test(v));
  if (mixed) return `[A-Z0-9]{${Math.min(...values.map((v) => v.length))},${Math.max(...values.map((v) => v.length))}}`;
  const all = values.map(runs);
  const first = all[0];
  if (!first || all.some((r) => r.length !== first.length || r.some((x, i) => x[0] !== first[i]![0]))) return undefined;
  if (!first.some(([c]) => c in CLASS)) return undefined;
  return first
    .map(([c], i) => {
      if (!(c in CLASS)) return escapeRe(c);
      const lens = all.map((r) => r[i]![1]);
      const lo = Math.min(...lens);
      const hi = Math.max(...lens);
      return lo === hi ? `${CLASS[c]}{${lo}}` : `${CLASS[c]}{${Math.max(1, lo - 2)},${hi + 4}}`;
    })
    .join("");
}

/** Whole-token occurrences of `shape` in `text`, in order (a token is bounded by non-word characters). */
export function occurrences(shape: string, text: string): string[] {
  const re = new RegExp(`(?<![A-Za-z0-9_])${shape}(?![A-Za-z0-9_])`, "g");
  return [...text.matchAll(re)].map((m) => m[0]);
}

/** The paths under which `value` sits in `doc`, depth-first (at most 4 levels, 16 paths). */
function pathsOf(doc: Json, value: Json, path: Array<string | number> = [], out: Array<Array<string | number>> = []) {
  if (path.length > 4 || out.length > 16) return out;
  if (same(doc, value)) out.push(path);
  else if (Array.isArray(doc)) for (const [i, d] of doc.entries()) pathsOf(d, value, [...path, i], out);
  else if (doc && typeof doc === "object")
    for (const [k, d] of Object.entries(doc)) pathsOf(d, value, [...path, k], out);
  return out;
}

/** Read a JSON result; undefined when it is not JSON. */
export function parseResult(text: string): Json | undefined {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
}

/** The value at `path` in `doc`. */
export function at(doc: Json | undefined, path: ReadonlyArray<string | number>): Json | undefined {
  let cur: Json | undefined = doc;
  for (const p of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string | number, Json>)[p];
  }
  return cur;
}

/** A step source for a varying argument: the same path of one earlier step's JSON result in every example. */
function fromStep(examples: readonly Example[], step: number, values: Json[]): ArgSource | undefined {
  for (let s = 0; s < step; s++) {
    const docs = examples.map((e) => parseResult(e.results[s] ?? ""));
    if (docs.some((d) => d === undefined)) continue;
    for (const path of pathsOf(docs[0]!, values[0]!))
      if (docs.every((d, i) => same(at(d, path), values[i]))) return { from: "step", step: s, path };
  }
  return undefined;
}

/** Longest value an input slot takes, in UTF-16 units: an id or a name, not a paragraph (its shape is a regular expression run over every input). */
export const MAX_SLOT = 100;

/** An input slot for a varying argument: a string value each example's input holds, of one shape, in a stable order. */
function fromInput(examples: readonly Example[], values: Json[], slots: Slot[]): ArgSource | undefined {
  if (!values.every((v) => typeof v === "string" && v.length >= 2 && v.length <= MAX_SLOT)) return undefined;
  const strings = values as string[];
  const shape = shapeOf(strings);
  if (!shape) return undefined;
  const orders = examples.map((e, i) => occurrences(shape, e.input).indexOf(strings[i]!));
  if (orders.some((o) => o < 0) || orders.some((o) => o !== orders[0])) return undefined;
  const found = slots.find((s) => s.shape === shape && s.order === orders[0]);
  if (found) return { from: "input", slot: found.name };
  const slot = { name: `p${slots.length + 1}`, shape, order: orders[0]! };
  slots.push(slot);
  return { from: "input", slot: slot.name };
}

/**
 * Synthesise a workflow from examples that made the same calls (same names, same argument keys).
 * Contract: undefined when the examples disagree in structure, when no word is common to
 * every example's input (a value's shape alone does not say what is asked), or when an
 * argument held a secret (stored examples hold its placeholder, which a workflow must never send).
 */
export function synthesise(examples: readonly Example[]): Workflow | undefined {
  const first = examples[0];
  if (!first || examples.length < 2 || !first.calls.length) return undefined;
  if (examples.some((e) => e.calls.some((c) => holdsPlaceholder(c.args)))) return undefined;
  const key = sequenceKey(first.calls);
  const keys = (e: Example, i: number) => JSON.stringify(Object.keys(e.calls[i]!.args).sort());
  if (examples.some((e) => sequenceKey(e.calls) !== key || e.calls.some((_, i) => keys(e, i) !== keys(first, i))))
    return undefined;
  const slots: Slot[] = [];
  const modelParams: string[] = [];
  const steps = first.calls.map((call, step) => {
    const args: Record<string, ArgSource> = {};
    for (const name of Object.keys(call.args)) {
      const values = examples.map((e) => e.calls[step]!.args[name]!);
      if (values.every((v) => same(v, values[0]))) args[name] = { from: "const", value: values[0]! };
      else
        args[name] = fromInput(examples, values, slots) ??
          fromStep(examples, step, values) ?? { from: "model", param: modelParam(modelParams, step, name) };
    }
    return { tool: call.name, args };
  });
  // The values the slots took (not every token of their shapes: "deploy" is a word like "staging").
  const slotValues = new Set(
    examples.flatMap((e) => slots.flatMap((s) => words(occurrences(s.shape, e.input)[s.order] ?? ""))),
  );
  const sets = examples.map((e) => new Set(words(e.input)));
  const cue = [...sets[0]!].filter((w) => !slotValues.has(w) && sets.every((s) => s.has(w)));
  if (!cue.length) return undefined;
  const leads = examples.map((e) => new Set(words(e.lead ?? "")));
  const leadCue = [...leads[0]!].filter((w) => leads.every((s) => s.has(w))).sort();
  const expect = invariantsOf(examples);
  const answer = expect ? answerTemplate(examples, slots) : undefined;
  return {
    id: workflowId(key, steps),
    name: first.calls.map((c) => c.name).join(" → "),
    steps,
    slots,
    modelParams,
    cue: cue.sort(),
    ...(leadCue.length ? { leadCue } : {}),
    ...(answer !== undefined ? { answer, expect: expect! } : {}),
    examples: examples.length,
  };
}

function modelParam(params: string[], step: number, name: string): string {
  const p = `step${step + 1}.${name}`;
  params.push(p);
  return p;
}

/** Most invariants a workflow keeps; with more, its learned answer is not kept (it could not be checked). */
export const MAX_INVARIANTS = 64;

/** A result as the invariants read it: its JSON, else its text. */
export const resultDoc = (text: string): Json => parseResult(text) ?? text;

/**
 * The result values every example agreed on (leaves to depth 4, the whole text of a result that
 * is not JSON). Undefined when they cannot vouch for a learned answer: a result that is not
 * JSON varied (what in it the answer rests on is unknown), or there are too many to keep.
 */
function invariantsOf(examples: readonly Example[]): Invariant[] | undefined {
  const out: Invariant[] = [];
  for (let step = 0; step < examples[0]!.results.length; step++) {
    const docs = examples.map((e) => resultDoc(e.results[step] ?? ""));
    if (typeof docs[0] === "string" && docs.some((d) => !same(d, docs[0]))) return undefined;
    leaves(docs[0]!, [], (path, value) => {
      if (docs.every((d) => same(at(d, path), value))) out.push({ step, path, value });
    });
  }
  return out.length <= MAX_INVARIANTS ? out : undefined;
}

/** Visit the leaves of `doc` (a subtree 4 levels down counts as one). */
function leaves(doc: Json, path: Array<string | number>, visit: (path: Array<string | number>, v: Json) => void) {
  if (path.length >= 4 || doc === null || typeof doc !== "object") return visit(path, doc);
  for (const [k, d] of Array.isArray(doc) ? doc.entries() : Object.entries(doc)) leaves(d, [...path, k], visit);
}

/** The answer with each slot's value replaced by `{{slot}}`, when that makes every example's answer the same. */
function answerTemplate(examples: readonly Example[], slots: readonly Slot[]): string | undefined {
  const templated = examples.map((e) => {
    let text = e.answer;
    for (const s of slots) {
      const v = occurrences(s.shape, e.input)[s.order];
      if (v) text = text.split(v).join(`{{${s.name}}}`);
    }
    return text;
  });
  return templated.every((t) => t === templated[0]) && templated[0] ? templated[0] : undefined;
}

/** A stable id: the tool sequence and how each argument is filled. */
function workflowId(key: string, steps: Workflow["steps"]): string {
  const h = createHash("sha256")
    .update(JSON.stringify([key, steps]))
    .digest("hex")
    .slice(0, 12);
  return `wf-${h}`;
}
