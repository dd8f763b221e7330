/**
 * The workflow gate: turns that succeeded with the same tool calls become a workflow; an input
 * that asks for one is offered to the person (turn.pre_policy, then the offer call through the
 * durable approval flow); approved, its steps run as tool calls the plugin answers rounds with
 * (round.pre_request), and the turn ends with the workflow's result. Declined, failed or cut
 * short, the model takes the turn over with what happened in the conversation.
 */
import { join, resolve } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { z } from "zod";
import type { ContributionFor, HookContext, Message, ModelProvider, PhaseEvent, ToolResultMessage } from "@keel/kernel";
import { codePointSlice } from "@keel/text";
import { complete, definePlugin, defineTool, messageText, toolCallsOf } from "@keel/kernel";
import type { Example, Json, Workflow } from "./learn.ts";
import { sequenceKey, synthesise } from "./learn.ts";
import { decide, MAX_INPUT, offerable } from "./match.ts";
import type { Plan } from "./steps.ts";
import { nextRound, OFFER_TOOL, PlanSchema } from "./steps.ts";
import { WorkflowStore } from "./store.ts";

export const PLUGIN_NAME = "workflows";
export const PLUGIN_VERSION = "0.1.0";
/** The bundle the offer tool comes in (a call to a tool of the same name from elsewhere is not the plugin's). */
const BUNDLE = "workflows";

/** Options. Contract: strict; defaults as documented on each field. */
export const WorkflowsOptions = z.strictObject({
  /** Successful turns with the same tool calls needed before a workflow is learned (default 3). */
  minExamples: z.number().int().min(2).max(8).default(3),
  /** Share of a workflow's cue words an input must hold to be offered it (default 1: all). */
  minCue: z.number().min(0).max(1).default(1),
  /** Learn from successful turns (default true); false only offers what is stored. */
  learn: z.boolean().default(true),
  /** The namespace of a turn: `metadata[namespaceKey]`, else `namespace`. */
  namespace: z.string().min(1).default("default"),
  namespaceKey: z.string().min(1).default("namespace"),
  /** The SQLite file (default `<home>/workflows.sqlite`). */
  db: z.string().min(1).optional(),
});

/** Options as written. */
export type WorkflowsOptionsInput = z.input<typeof WorkflowsOptions>;

type Options = z.output<typeof WorkflowsOptions>;

const offerTool = defineTool({
  name: OFFER_TOOL,
  description: "Run a learned workflow the person approved (the workflows plugin offers it; do not call it yourself).",
  hidden: true,
  category: "exec",
  parallel: false,
  execute: (args: { name?: unknown; steps?: unknown[] }) =>
    `Approved: running the workflow "${String(args.name)}" (${args.steps?.length ?? 0} steps).`,
});

/** The workflows plugin. Contract: handlers return diagnostics for expected faults (a broken database, a model that cannot fill a parameter); they never throw for them. */
export function workflows(input: WorkflowsOptionsInput = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description:
      "Workflows learned from repeated successful turns, offered before the model loop and run without model rounds",
    options: WorkflowsOptions,
    input,
    setup(ctx) {
      const o = ctx.options as Options;
      const s: State = {
        o,
        path: o.db ?? join(resolve(ctx.storage.home), "workflows.sqlite"),
        store: undefined,
        offers: new Map(),
        stopped: new Set(),
        taken: new Set(),
      };
      ctx.on("turn.pre_policy", (e, hc) => atPolicy(s, e, hc));
      ctx.on("turn.pre_tool_materialization", (e) => toolsOf(s, e));
      ctx.on("tool.pre_call", (e) => offerDecision(s, e));
      ctx.on("round.pre_request", (e) => roundAnswer(s, e));
      ctx.on("turn.post_turn", (e) => atPostTurn(s, e));
    },
  });
}

/** What the plugin keeps between phases, in this process. */
interface State {
  o: Options;
  path: string;
  store: WorkflowStore | undefined;
  /** Plans matched at turn.pre_policy, offered at the turn's first round. */
  offers: Map<string, Plan>;
  /** Turns whose workflow stopped (said once). */
  stopped: Set<string>;
  /** Turns whose agent has its own tool named like the offer tool: the plugin stays out of them. */
  taken: Set<string>;
}

type Diagnostic = ReturnType<typeof diag>;

/** The namespace of a turn: `metadata[namespaceKey]`, else `namespace`. */
function nsOf(s: State, metadata: Readonly<Record<string, unknown>>): string {
  const v = metadata[s.o.namespaceKey];
  return (typeof v === "string" && v) || s.o.namespace;
}

/** Run `fn` on the store; a broken or unreadable file is a diagnostic naming it, never a thrown handler. */
function guarded<T>(s: State, fn: (store: WorkflowStore) => T): { value: T } | { fault: Diagnostic } {
  try {
    s.store ??= new WorkflowStore(s.path);
    return { value: fn(s.store) };
  } catch (err) {
    s.store = undefined;
    const why = codePointSlice(err instanceof Error ? err.message : String(err), 0, 600);
    return {
      fault: diag(
        "warn",
        "workflow.store",
        `The workflows database ${s.path} could not be used (${why}); no workflow is offered, run or learned until it is fixed or moved aside.`,
      ),
    };
  }
}

/** turn.pre_policy: the gate. A matching input's plan is kept for the turn's first round. */
async function atPolicy(s: State, e: PhaseEvent<"turn.pre_policy">, hc: HookContext) {
  if (e.trigger === "resume" || e.mode === "chat") return undefined;
  const read = guarded(s, (store) => store.visible(nsOf(s, e.metadata)));
  if ("fault" in read) return read.fault;
  const d = decide(
    e.input,
    read.value.filter((w) => offerable(w)).map((w) => w.workflow),
    { minCue: s.o.minCue },
    leadOf(e.history),
  );
  if (d.kind === "ambiguous")
    return diag(
      "info",
      "workflow.ambiguous",
      `The input matches ${d.candidates.join(" and ")} equally; none is offered.`,
    );
  if (d.kind === "none") return undefined;
  const w = d.match.workflow;
  const params = await modelParams(w, e.input, d.match.params, hc.model, hc.signal);
  if (!params)
    return diag(
      "warn",
      "workflow.unfilled",
      `The input matches ${w.id}, but a model could not fill ${w.modelParams.join(", ")}; it is not offered.`,
    );
  s.offers.set(e.turnId, planOf(w, params));
  return diag("info", "workflow.matched", `Offering ${w.id} (${w.name}).`, { workflow: w.id, score: d.match.score });
}

/** turn.pre_tool_materialization: the offer tool, unless the agent has a tool of that name (then nothing is offered or run). */
function toolsOf(s: State, e: PhaseEvent<"turn.pre_tool_materialization">) {
  const bundle = { kind: "tool_bundle" as const, bundleId: BUNDLE, tools: [offerTool] };
  if (!e.tools.includes(OFFER_TOOL)) return bundle;
  s.taken.add(e.turnId);
  const had = s.offers.delete(e.turnId);
  return [
    bundle,
    diag(
      "warn",
      "workflow.tool_taken",
      `The agent has its own tool named "${OFFER_TOOL}", so the workflows plugin cannot offer through it${had ? " (this turn's offer was dropped)" : ""}; rename that tool to use learned workflows.`,
    ),
  ];
}

/** tool.pre_call: ask the person about the plugin's own offer of a stored workflow; deny a made-up plan, or an offer that reached another tool of that name. */
function offerDecision(s: State, e: PhaseEvent<"tool.pre_call">): ContributionFor<"tool.pre_call"> | undefined {
  if (e.call.name !== OFFER_TOOL) return undefined;
  const plan = PlanSchema.safeParse(e.call.args);
  const deny = (reason: string) => ({ kind: "tool_decision" as const, decision: "deny" as const, reason });
  if (e.call.source.plugin !== PLUGIN_NAME || e.call.source.bundle !== BUNDLE)
    return plan.success
      ? deny(
          `"${OFFER_TOOL}" here is not the workflows plugin's tool (another one has its name), so the workflow offer was not sent to it.`,
        )
      : undefined;
  const known = plan.success ? guarded(s, (store) => trusted(store, nsOf(s, e.metadata), plan.data)) : undefined;
  if (!plan.success || !known || "fault" in known || !known.value)
    return deny(
      `${OFFER_TOOL} runs only a workflow this plugin offered; this call's plan is not a stored workflow (made up, or revoked since). Do the task with the other tools.`,
    );
  const p = plan.data;
  return {
    kind: "tool_decision",
    decision: "ask",
    reason: `Run the learned workflow "${p.name}" (${p.steps.map((x) => x.tool).join(" → ")}) with ${JSON.stringify(p.params)} instead of asking the model?`,
  };
}

/** round.pre_request: the offer at the turn's first round, then the workflow's next step or answer while its plan is still stored. */
function roundAnswer(s: State, e: PhaseEvent<"round.pre_request">): ContributionFor<"round.pre_request"> | undefined {
  const plan = s.offers.get(e.turnId);
  s.offers.delete(e.turnId);
  if (plan && !e.final)
    return { kind: "answer", reason: `offer workflow ${plan.workflow}`, calls: [{ name: OFFER_TOOL, args: plan }] };
  let next = s.taken.has(e.turnId) ? undefined : nextRound(e.messages);
  if (!next) return undefined;
  // A guard ran out (a final round has no tools): the model gives the turn's last answer.
  if (next.kind === "call" && e.final) next = { kind: "stop", why: "cut_short" };
  if (next.kind !== "stop") {
    const running = next.plan;
    const known = guarded(s, (store) => trusted(store, nsOf(s, e.metadata), running));
    if ("fault" in known || !known.value) next = { kind: "stop", why: "revoked" };
  }
  if (next.kind === "call")
    return { kind: "answer", reason: `workflow step ${next.step + 1}`, calls: [{ name: next.tool, args: next.args }] };
  if (next.kind === "done") return { kind: "answer", reason: "workflow done", text: next.text };
  if (s.stopped.has(e.turnId)) return undefined;
  s.stopped.add(e.turnId);
  return diag("info", `workflow.${next.why}`, `The workflow stopped (${next.why}); the model takes the turn over.`);
}

/** turn.post_turn: forget the turn, count its offer, learn from it. */
function atPostTurn(s: State, e: PhaseEvent<"turn.post_turn">) {
  s.offers.delete(e.turnId);
  s.stopped.delete(e.turnId);
  s.taken.delete(e.turnId);
  const done = guarded(s, (store) => afterTurn(store, s.o, nsOf(s, e.metadata), e));
  if ("fault" in done) return done.fault;
  const w = done.value;
  if (!w) return undefined;
  return diag("info", "workflow.learned", `Learned ${w.id} (${w.name}) from ${w.examples} turns.`, { workflow: w.id });
}

/** After a turn: count how its offer ended, and learn from it when it succeeded; returns what was learned. */
function afterTurn(
  store: WorkflowStore,
  o: Options,
  namespace: string,
  e: {
    input: string;
    history: readonly Message[];
    messages: readonly Message[];
    finalText: string;
    verdict: { status: string };
  },
): Workflow | undefined {
  const offered = offerOutcome(e.messages);
  // Only an offer of what the store holds counts: a plan a model made up never silences a workflow.
  if (offered && trusted(store, namespace, offered.plan)) store.outcome(namespace, offered.workflow, offered.accepted);
  if (!o.learn || e.verdict.status !== "completed") return undefined;
  const example = exampleOf(e.input, e.messages, e.finalText, leadOf(e.history));
  return example ? learnFrom(store, namespace, example, o.minExamples) : undefined;
}

/**
 * True when `plan` runs what a workflow visible in `namespace` runs (its id and steps): never a
 * plan a model made up (it may call the offer tool itself), nor one whose workflow was revoked
 * since. Contract: a workflow relearned since with the same steps (a new example changed its
 * learned answer or cue) still runs the plan the person approved.
 */
export function trusted(store: WorkflowStore, namespace: string, plan: Plan | undefined): boolean {
  const w = plan && store.visible(namespace).find((s) => s.workflow.id === plan.workflow);
  return !!w && w.workflow.name === plan.name && isDeepStrictEqual(w.workflow.steps, plan.steps);
}

/**
 * How this turn's offer ended, if it made one: accepted when approved and every step succeeded.
 * Contract: judged on the turn up to the first user message after the offer (a steer, a
 * structured-output correction): what the model did after the workflow is not the workflow's.
 */
export function offerOutcome(
  messages: readonly Message[],
): { workflow: string; accepted: boolean; plan: Plan | undefined } | undefined {
  const at = messages.findIndex((m) => m.role === "assistant" && toolCallsOf(m).some((c) => c.name === OFFER_TOOL));
  if (at < 0) return undefined;
  const offer = toolCallsOf(messages[at]!).find((c) => c.name === OFFER_TOOL)!;
  const workflow = (offer.args as { workflow?: unknown } | undefined)?.workflow;
  if (typeof workflow !== "string") return undefined;
  const after = messages.findIndex((m, i) => i > at && m.role === "user");
  const plan = PlanSchema.safeParse(offer.args);
  return {
    workflow,
    accepted: nextRound(after < 0 ? messages : messages.slice(0, after))?.kind === "done",
    plan: plan.success ? plan.data : undefined,
  };
}

/**
 * A successful turn's example: its calls and results, none an error, none a workflow's.
 * Contract: an input longer than the gate reads (MAX_INPUT) teaches nothing: a workflow is
 * never learned from what it could not be offered for, and learning never scans a pasted log.
 */
export function exampleOf(input: string, messages: readonly Message[], answer: string, lead = ""): Example | undefined {
  if (input.length > MAX_INPUT) return undefined;
  const calls = messages.flatMap((m) => (m.role === "assistant" ? toolCallsOf(m) : []));
  if (!calls.length || calls.some((c) => c.name === OFFER_TOOL)) return undefined;
  if (messages.slice(1).some((m) => m.role === "user")) return undefined;
  const results = new Map(
    messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m as ToolResultMessage] as const] : [])),
  );
  if (calls.some((c) => !results.get(c.id) || results.get(c.id)!.isError)) return undefined;
  if (calls.some((c) => !c.args || typeof c.args !== "object" || Array.isArray(c.args))) return undefined;
  return {
    input,
    calls: calls.map((c) => ({ name: c.name, args: c.args as Record<string, Json> })),
    results: calls.map((c) => messageText(results.get(c.id)!)),
    answer,
    ...(lead ? { lead } : {}),
  };
}

/** The assistant's last text before a turn (what its input answers), cut to 2,000 code points. */
export function leadOf(history: readonly Message[]): string {
  const last = history.findLast((m) => m.role === "assistant" && messageText(m).trim());
  return last ? codePointSlice(messageText(last), 0, 2_000) : "";
}

/**
 * Record a successful turn's example and (re)learn its tool sequence's workflow once there are
 * `minExamples`. Contract: a revoked sequence is recorded but never learned; returns what was learned.
 */
export function learnFrom(
  store: WorkflowStore,
  namespace: string,
  example: Example,
  minExamples: number,
): Workflow | undefined {
  const key = sequenceKey(example.calls);
  const examples = store.addExample(namespace, key, example);
  if (examples.length < minExamples || store.isRevoked(namespace, key)) return undefined;
  const w = synthesise(examples) ?? synthesise(examples.slice(-minExamples));
  if (w) store.save(namespace, key, w);
  return w;
}

/** The plan an offer carries. */
export function planOf(w: Workflow, params: Record<string, Json>): Plan {
  return {
    workflow: w.id,
    name: w.name,
    params,
    steps: w.steps,
    ...(w.answer !== undefined ? { answer: w.answer } : {}),
    ...(w.answer !== undefined && w.expect ? { expect: w.expect } : {}),
  };
}

/** Fill the parameters no input value gives, with one model call; undefined when it cannot. */
async function modelParams(
  w: Workflow,
  input: string,
  filled: Record<string, string>,
  model: ModelProvider | undefined,
  signal: AbortSignal,
): Promise<Record<string, Json> | undefined> {
  if (!w.modelParams.length) return filled;
  if (!model) return undefined;
  try {
    const answer = await complete(
      model,
      {
        system:
          "You fill the parameters of a tool workflow from a request. Answer with one JSON object whose keys are the parameter names, nothing else.",
        messages: [
          {
            role: "user",
            content: [
              {
                type: "text",
                text: `Request: ${input}\n\nWorkflow: ${w.name}\nParameters: ${w.modelParams.join(", ")}\nKnown: ${JSON.stringify(filled)}`,
              },
            ],
          },
        ],
        options: { maxTokens: 400 },
      },
      { signal },
    );
    const got = JSON.parse(answer.text.replace(/^```(?:json)?\s*|\s*```$/g, "")) as Record<string, Json>;
    if (w.modelParams.some((p) => got[p] === undefined)) return undefined;
    return { ...filled, ...Object.fromEntries(w.modelParams.map((p) => [p, got[p]!])) };
  } catch {
    return undefined;
  }
}

function diag(level: "info" | "warn", code: string, message: string, data?: Json) {
  return { kind: "diagnostic" as const, level, code, message, ...(data !== undefined ? { data } : {}) };
}
