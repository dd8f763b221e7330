/**
 * Running an approved workflow, one round at a time, from the conversation alone: the offer
 * call carries the plan, and the results after it say how far it got. Nothing is kept in
 * memory, so a turn paused on the offer and resumed in another process goes on the same way.
 */
import { isDeepStrictEqual } from "node:util";
import { z } from "zod";
import type { Message, ToolCallBlock } from "@keel/kernel";
import { messageText, toolCallsOf } from "@keel/kernel";
import { codePointSlice } from "@keel/text";
import type { ArgSource, Json } from "./learn.ts";
import { at, holdsPlaceholder, MAX_INVARIANTS, parseResult, resultDoc } from "./learn.ts";

/** The name of the offer call: the tool the person approves a workflow through. */
export const OFFER_TOOL = "workflow_run";

/** Where a step argument comes from, as stored and offered. */
export const SourceSchema = z.union([
  z.strictObject({ from: z.literal("const"), value: z.json() }),
  z.strictObject({ from: z.literal("input"), slot: z.string() }),
  z.strictObject({
    from: z.literal("step"),
    step: z.number().int().min(0),
    path: z.array(z.union([z.string(), z.number()])),
  }),
  z.strictObject({ from: z.literal("model"), param: z.string() }),
]);

/** The plan an offer carries (what the person approves). Contract: checked when read back from the log. */
export const PlanSchema = z.strictObject({
  workflow: z.string().min(1),
  name: z.string(),
  params: z.record(z.string(), z.json()),
  steps: z
    .array(z.strictObject({ tool: z.string().min(1), args: z.record(z.string(), SourceSchema) }))
    .min(1)
    .max(64),
  answer: z.string().optional(),
  expect: z
    .array(
      z.strictObject({
        step: z.number().int().min(0),
        path: z.array(z.union([z.string(), z.number()])),
        value: z.json(),
      }),
    )
    .max(MAX_INVARIANTS)
    .optional(),
});

/** An offered workflow's plan. */
export type Plan = z.output<typeof PlanSchema>;

/** What the next round of a workflow is. */
export type Next =
  | { kind: "call"; plan: Plan; step: number; tool: string; args: Record<string, Json> }
  | { kind: "done"; plan: Plan; text: string }
  | {
      kind: "stop";
      why: "declined" | "failed" | "unresolved" | "invalid" | "revoked" | "redacted" | "taken_over" | "cut_short";
    };

/** Longest text of the last result a workflow's answer quotes, in code points. */
const ANSWER_QUOTE = 2_000;

/**
 * The next round of the workflow this turn runs, or undefined when the turn runs none (no offer
 * since the last user message) or the offer is not answered yet. Contract: once stopped, a
 * workflow stays stopped: a call after the offer that is not the plan's next step (the model's,
 * once it took over) ends it, so the model's calls are never counted as steps.
 */
export function nextRound(messages: readonly Message[]): Next | undefined {
  const since = messages.slice(messages.findLastIndex((m) => m.role === "user") + 1);
  const offerAt = since.findIndex((m) => m.role === "assistant" && toolCallsOf(m).some((c) => c.name === OFFER_TOOL));
  if (offerAt < 0) return undefined;
  const offer = toolCallsOf(since[offerAt]!).find((c) => c.name === OFFER_TOOL)!;
  const results = new Map(since.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m] as const] : [])));
  const answer = results.get(offer.id);
  if (!answer) return undefined;
  if (answer.isError) return { kind: "stop", why: "declined" };
  const plan = PlanSchema.safeParse(offer.args);
  if (!plan.success) return { kind: "stop", why: "invalid" };
  const done: string[] = [];
  for (const m of since.slice(offerAt + 1))
    for (const c of m.role === "assistant" ? toolCallsOf(m) : ([] as ToolCallBlock[])) {
      // Only the call the plan makes next is a step: any other call is the model's, after the workflow stopped.
      const expected = step(plan.data, done);
      if (expected.kind !== "call" || expected.tool !== c.name || !isDeepStrictEqual(expected.args, c.args))
        return { kind: "stop", why: expected.kind === "stop" ? expected.why : "taken_over" };
      const r = results.get(c.id);
      if (!r) return undefined;
      if (r.isError) return { kind: "stop", why: "failed" };
      done.push(messageText(r));
    }
  return step(plan.data, done);
}

/** The call of step `done.length`, or the answer once every step ran. */
function step(plan: Plan, done: readonly string[]): Next {
  if (done.length >= plan.steps.length) return { kind: "done", plan, text: answerOf(plan, done) };
  const s = plan.steps[done.length]!;
  const args: Record<string, Json> = {};
  for (const [name, src] of Object.entries(s.args)) {
    const v = resolve(src as ArgSource, plan, done);
    if (v === undefined) return { kind: "stop", why: "unresolved" };
    // Read back from a store (a resumed turn), a value that held a secret holds its placeholder: never send it.
    if (holdsPlaceholder(v)) return { kind: "stop", why: "redacted" };
    args[name] = v;
  }
  return { kind: "call", plan, step: done.length, tool: s.tool, args };
}

function resolve(src: ArgSource, plan: Plan, done: readonly string[]): Json | undefined {
  switch (src.from) {
    case "const":
      return src.value;
    case "input":
      return plan.params[src.slot] as Json | undefined;
    case "model":
      return plan.params[src.param] as Json | undefined;
    case "step":
      return at(parseResult(done[src.step] ?? ""), src.path);
  }
}

/**
 * The workflow's result: its learned answer with the parameters in, while every result holds
 * what every example's did (else that answer could be wrong: a cancelled booking told
 * "confirmed"); otherwise what it ran and the last result.
 */
function answerOf(plan: Plan, done: readonly string[]): string {
  const holds = (plan.expect ?? []).every((x) => isDeepStrictEqual(at(resultDoc(done[x.step] ?? ""), x.path), x.value));
  if (plan.answer && plan.expect && holds)
    return plan.answer.replace(/\{\{(p\d+)\}\}/g, (hole, name: string) => {
      const v = plan.params[name];
      return typeof v === "string" ? v : hole;
    });
  const last = done.at(-1) ?? "";
  const quote = codePointSlice(last, 0, ANSWER_QUOTE);
  const cut = quote.length < last.length ? "\n[…]" : "";
  return `Done with the workflow "${plan.name}" (${plan.steps.length} step${plan.steps.length === 1 ? "" : "s"}). Last result:\n${quote}${cut}`;
}
