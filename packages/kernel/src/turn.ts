/**
 * One turn of the agent loop: persist the input, run the turn phases, then rounds of
 * [pre_request → provider stream → post_response → tool calls] until the model stops, a
 * guard trips, the signal aborts or a plugin asks to stop; then post_turn.
 */
import type { ContributionRecord } from "./events.ts";
import { abandonChild, runChild } from "./child.ts";
import type { ChildHold, ChildResumes } from "./child.ts";
import type { TurnBudget } from "./tools.ts";
import type { Session, Limits } from "./agent.ts";
import type { ContributionOf } from "./contributions.ts";
import { MessageSchema } from "./contributions.ts";
import type { Contributed, PhaseResult } from "./dispatch.ts";
import { errorMessage, isKeelError, KeelError, plainThrown } from "./errors.ts";
import type { PromptManifest } from "./manifest.ts";
import type { ResolvedTool, ToolDecision } from "./merge.ts";
import { applyMessageEdits, mergeDecisions, mergePromptContext, mergePromptSections, mergeRequestOptions, mergeToolBundles, PolicySet } from "./merge.ts";
import type { AssistantMessage, ContentBlock, Message, ToolCallBlock, ToolResultMessage, UserMessage } from "./messages.ts";
import { freezeDeep, messageText, textContent, toolCallsOf } from "./messages.ts";
import type { PhaseEvents, PhaseName, ToolCallView, TurnEventBase } from "./phases.ts";
import { compileSystemPrompt, finalRoundInstruction } from "./prompt.ts";
import type { ModelEvent, ModelRequest, OutputFormat, RequestOptions, StopReason } from "./provider.ts";
import { ProviderError } from "./provider.ts";
import { repairToolPairs } from "./repair.ts";
import type { ToolRun } from "./tool-exec.ts";
import { boundResult, errorResult, executeTool } from "./tool-exec.ts";
import { codePointSlice, deltaJoiner, wellFormedDeep } from "./text.ts";
import { runPreflight } from "./preflight.ts";
import type { PreflightOutcome } from "./preflight.ts";
import type { ToolDefinition, ToolSchema } from "./tools.ts";
import type { Usage } from "./usage.ts";
import { addUsage, emptyUsage } from "./usage.ts";
import type { ApprovalAnswer, GuardName, PendingApproval, TurnResult, TurnVerdict } from "./verdict.ts";
import { z } from "zod";

interface Prepared {
  call: ToolCallBlock;
  result?: ToolResultMessage;
  /** The call waits for the host's answer: the turn pauses after this group. */
  pause?: PendingApproval;
  ready?: { def: ToolDefinition; args: unknown; timeoutMs: number; view: ToolCallView; approvedByUser: boolean; decision: ToolDecision };
  /** The call's child sessions that wait for approval, with the host's answers (a resumed call). */
  children?: ChildResumes;
  /** Refused before running (invalid arguments): tool.post_result still sees its error result. */
  rejected?: ToolCallView;
}

const SKIPPED_STEERING = "Skipped due to queued user message.";

class TurnFailure extends Error {
  readonly verdict: TurnVerdict;
  constructor(verdict: TurnVerdict) {
    super("turn failed");
    this.verdict = verdict;
  }
}

function phaseFailed(err: KeelError): TurnFailure {
  return new TurnFailure({ status: "failed", reason: "phase_failed", code: err.code, message: err.message, ...(err.plugin ? { plugin: err.plugin } : {}), ...(err.phase ? { phase: err.phase } : {}) });
}

function userMessage(text: string): UserMessage {
  return { role: "user", content: textContent(text) };
}

/** What a turn is given: the user's text, or content blocks (validated and copied by Session.run). */
/** Hidden tools named in a prompt manifest, at most (a catalog may hold thousands). */
const MAX_HIDDEN_LISTED = 200;

export type TurnInput = string | readonly ContentBlock[];

/** The text parts of an input, joined by blank lines (what plugins read as `input`). */
export function inputText(input: TurnInput): string {
  return typeof input === "string" ? input : input.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n\n");
}

/** A paused turn, as the session keeps it between run() and resume(). */
export interface PausedTurn {
  turnId: string;
  input: string;
  metadata: Record<string, unknown>;
  rounds: number;
  toolCalls: number;
  requests: Map<string, PendingApproval>;
  /** Calls that wait in a child session (PendingApproval.via), with the arguments they run with again. */
  childCalls?: Map<string, unknown>;
}

/** How a turn runs besides its input. */
export interface TurnOptions {
  metadata: Record<string, unknown>;
  /** Continue this paused turn (its approvals answered) instead of starting one. */
  resume?: PausedTurn;
  /** Structured output: the schema the final answer must match. */
  output?: OutputSpec;
  /** Limits of this turn only (a child turn's, clamped to its parent's budget). */
  limits?: Partial<Limits>;
  /** `subagent` for a child session's turn. */
  trigger?: "user" | "subagent";
}

/** A structured-output request: the zod schema and the JSON Schema sent to the provider. */
export interface OutputSpec {
  schema: { safeParse(v: unknown): { success: true; data: unknown } | { success: false; error: { issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }> } } };
  format: OutputFormat;
}

/** The calls of the last assistant message that have no result yet, in order. */
export function unansweredCalls(messages: readonly Message[]): ToolCallBlock[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "assistant") continue;
    const answered = new Set(messages.slice(i + 1).flatMap((r) => (r.role === "tool" ? [r.toolCallId] : [])));
    return toolCallsOf(m).filter((c) => !answered.has(c.id));
  }
  return [];
}

/** The answer text as JSON: the whole text, or the body of one fenced block. */
function parseAnswer(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  const t = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(t);
  try {
    return { ok: true, value: JSON.parse(fenced ? fenced[1]! : t) };
  } catch (err) {
    return { ok: false, error: `the answer is not JSON (${errorMessage(err)})` };
  }
}

/** `p`, or a rejection as soon as `signal` aborts. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

const schemaCache = new WeakMap<object, ToolSchema>();

function toolSchema(t: ResolvedTool): ToolSchema {
  let s = schemaCache.get(t.def);
  if (!s) {
    let parameters: Record<string, unknown>;
    try {
      parameters = t.def.parameters ?? (t.def.input ? (z.toJSONSchema(t.def.input, { io: "input", unrepresentable: "any" }) as Record<string, unknown>) : { type: "object", properties: {} });
    } catch {
      // A schema that cannot be described (or whose getters throw) is sent as an open object; its safeParse still checks the call.
      parameters = { type: "object", properties: {} };
    }
    // Sent every round: kept as a frozen, well-formed copy, so the request's repair walk finds it done.
    let own = true;
    try {
      parameters = structuredClone(parameters);
    } catch {
      // A schema holding what cannot be cloned is sent as it is (and walked every round), never frozen: it is the host's object.
      own = false;
    }
    const schema = { name: t.def.name, description: t.def.description, parameters };
    s = wellFormedDeep(own ? freezeDeep(schema) : schema);
    schemaCache.set(t.def, s);
  }
  return s;
}

/** The host's metadata as handlers see it: a copy (the event freeze must not freeze the host's objects). */
function copyMetadata(metadata: Record<string, unknown>): Readonly<Record<string, unknown>> {
  try {
    for (const _ in metadata) return structuredClone(metadata);
    return {};
  } catch {
    return { ...metadata };
  }
}

/** True when `args` hold a secret's storage placeholder (`[REDACTED:<kind>]`). Contract: never throws. */
function holdsPlaceholder(args: unknown): boolean {
  try {
    return /\[REDACTED:[a-z0-9_]+\]/.test(JSON.stringify(args) ?? "");
  } catch {
    return false;
  }
}

/** Run one turn for `session`. Contract: see Session.run. */
export async function runTurn(session: Session, given: TurnInput, turnSignal: AbortSignal, turnOptions: TurnOptions): Promise<TurnResult> {
  const agent = session.agent;
  const { runner } = agent;
  // A child turn runs under limits clamped to its parent's budget (ToolContext.child).
  const limits = turnOptions.limits ? { ...agent.limits, ...turnOptions.limits } : agent.limits;
  const trigger = turnOptions.trigger ?? "user";
  const resume = turnOptions.resume;
  const metadata = resume ? resume.metadata : turnOptions.metadata;
  const input = resume ? resume.input : inputText(given);
  const turnId = resume ? resume.turnId : `${session.id}/${++session.turnCount}`;
  const outputSpec = turnOptions.output;
  const t0 = Date.now();
  // The wall-time limit cuts whatever runs when it runs out (stream, tool, phase), not only the next round.
  // One controller for both (AbortSignal.any costs a composite signal and weak refs per turn).
  const wall = new AbortController();
  const signal = wall.signal;
  const onTurnAbort = () => wall.abort(turnSignal.reason);
  if (turnSignal.aborted) onTurnAbort();
  else turnSignal.addEventListener("abort", onTurnAbort, { once: true });
  const wallCut = () => wall.signal.aborted && !turnSignal.aborted;
  let wallTripped = false;
  const usage = emptyUsage();
  const history = session.messages;
  let rounds = resume?.rounds ?? 0;
  let toolCalls = resume?.toolCalls ?? 0;
  let finalText = "";
  let startCount = history.length;
  /** Set when a group of calls waits for the host's approval: the turn pauses. */
  let pauseFor: PendingApproval[] | undefined;
  /** The host's answers to the paused calls (resume only), taken once each. */
  const answers = new Map<string, PendingApproval>(resume ? [...resume.requests].filter(([, r]) => r.answer) : []);
  /** Calls of this turn paused on a child's approval, with their arguments (kept in PausedTurn). */
  const childCalls = new Map<string, unknown>();
  let outputRetried = false;
  let output: unknown;

  let inputMessage: UserMessage;
  if (resume) {
    // A paused turn goes on under its own id; the answers are in the log already.
    await session.emit({ type: "turn.resumed", answered: [...answers.keys()] }, turnId, true);
    session.paused = undefined;
    const at = history.findLastIndex((m) => m.role === "user" && messageText(m) === input);
    inputMessage = (at >= 0 ? history[at] : history.find((m) => m.role === "user")) as UserMessage;
    startCount = Math.max(0, at);
  } else {
    // The user's words are durable before anything else happens. Messages queued while no turn
    // was running (a steer or follow-up that arrived just after the last turn ended) came first.
    const content = typeof given === "string" ? undefined : given;
    await session.emit({ type: "turn.started", input, trigger, metadata, ...(content ? { content: [...content] } : {}), ...(session.mode === "chat" ? { mode: "chat" as const } : {}) }, turnId);
    drain("steering");
    drain("follow_up");
    inputMessage = content ? { role: "user", content: [...content] } : userMessage(input);
    await append(session, turnId, inputMessage, true);
  }

  const policies = new PolicySet();
  // Handlers get a read-only policy view and their own copy of the host's metadata (events are deep-frozen).
  const baseContent = typeof given === "string" || resume ? undefined : inputMessage.content;
  // A resumed turn keeps the mode it paused in (tools were asked for; setMode is refused while paused).
  const mode = resume ? "agent" : session.mode;
  const base: TurnEventBase = Object.freeze({ sessionId: session.id, turnId, input, ...(baseContent ? { content: baseContent } : {}), trigger: resume ? "resume" : trigger, mode, history, policies: policies.view(), metadata: copyMetadata(metadata) });
  const ev = <P extends PhaseName>(phase: P, extra: Omit<PhaseEvents[P], keyof TurnEventBase> | object = {}) => Object.freeze({ ...base, ...extra, phase });
  /** Run a turn or round phase; its event is built only when someone subscribes. */
  const phase = async (name: PhaseName, extra: object = {}, step?: (e: any, added: Contributed[]) => any): Promise<PhaseResult | undefined> => {
    if (!runner.has(name)) return undefined;
    const res = await runner.run(name, ev(name, extra), { signal, owner: { session, turnId }, backgroundSignal: session.lifetime, ...(step ? { step } : {}) });
    session.record(res, turnId);
    session.startJobs(res.contributions, turnId);
    if (res.failed) throw phaseFailed(res.failed);
    return res;
  };
  const of = <K extends ContributionOf<any>["kind"]>(res: PhaseResult | undefined, kind: K) => (res?.contributions.filter((c) => c.value.kind === kind) ?? []) as Contributed<Extract<ContributionOf<any>, { kind: K }>>[];
  const merged = (res: PhaseResult | undefined, log: { records: PhaseResult["records"]; diagnostics: PhaseResult["diagnostics"] }, turn: string) => {
    if (!log.records.length && !log.diagnostics.length) return;
    void session.emit({ type: "contributions.merged", phase: res?.phase ?? "turn", contributions: log.records }, turn);
    for (const d of log.diagnostics) void session.emit({ type: "diagnostic", ...d }, turn);
  };

  let verdict: TurnVerdict;
  let tools = new Map<string, ResolvedTool>();
  /** Tools a plugin hid this turn (tool_visibility); a reveal shows them again. */
  let hiddenByPlugins: Visibility = { names: new Set(), byPlugin: new Map(), records: [] };
  /** Tools advertised to the model: all but hidden ones, plus those revealed this turn. */
  const visible = new Set<string>();
  let revealedSince = false;
  /** What the model is shown of the visible tools: schemas and their manifest rows (rebuilt only after a reveal). */
  const showTools = () => {
    const shown = [...tools.values()].filter((t) => visible.has(t.def.name));
    const row = (t: ResolvedTool) => ({ name: t.def.name, source: t.source.kind === "builtin" ? "builtin" : `${t.source.plugin}/${t.source.bundle}` });
    const hidden = [...tools.values()].filter((t) => !visible.has(t.def.name));
    return { schemas: shown.map(toolSchema), manifest: shown.map(row), hidden: hidden.slice(0, MAX_HIDDEN_LISTED).map(row) };
  };
  // Started here, once nothing before the try can throw past its clearTimeout.
  const wallTimer = setTimeout(() => wall.abort(new KeelError("KEEL_GUARD_TRIPPED", `The turn ran past its wall-time limit of ${limits.wallTimeMs} ms.`)), Math.max(0, limits.wallTimeMs - (Date.now() - t0)));
  try {
    // Turn phases.
    const rPolicy = await phase("turn.pre_policy");
    merged(rPolicy, policies.merge(of(rPolicy, "policy"), "turn.pre_policy"), turnId);
    const rContext = await phase("turn.pre_prompt_context");
    // Chat mode: no tool is materialised (the phase does not run, so no plugin builds a bundle) or sent.
    const builtin = mode === "chat" ? [] : (agent.options.tools ?? []);
    if (mode === "agent") {
      const rTools = await phase("turn.pre_tool_materialization", { tools: builtin.map((t) => t.name) });
      merged(rTools, policies.merge(of(rTools, "policy"), "turn.pre_tool_materialization"), turnId);
      const bundles = mergeToolBundles(builtin, of(rTools, "tool_bundle"), "turn.pre_tool_materialization");
      merged(rTools, bundles, turnId);
      tools = new Map(bundles.tools.map((t) => [t.def.name, t]));
      hiddenByPlugins = applyVisibility(of(rTools, "tool_visibility"), tools);
      if (hiddenByPlugins.records.length) merged(rTools, { records: hiddenByPlugins.records, diagnostics: [] }, turnId);
    }
    for (const t of tools.values()) if (!t.def.hidden && !hiddenByPlugins.names.has(t.def.name)) visible.add(t.def.name);
    const firstContext = mergePromptContext(of(rContext, "prompt_context"), "turn.pre_prompt_context", agent.caps);
    let preflight: PreflightOutcome | undefined;
    const pf = agent.options.preflight === true ? {} : agent.options.preflight || undefined;
    const hidden = pf ? [...tools.values()].filter((t) => !visible.has(t.def.name)).map((t) => t.def) : [];
    if (pf && hidden.length) {
      preflight = await runPreflight(pf.model ?? (agent.options.sideModel || agent.options.provider), input, hidden, pf, signal);
      addUsage(usage, preflight.usage);
      for (const n of preflight.revealed) visible.add(n);
      const { usage: pfUsage, ...logged } = preflight;
      void session.emit({ type: "preflight.completed", ...logged, usage: pfUsage }, turnId);
    }
    const rPreflight = await phase("turn.post_preflight_prompt_context", { context: firstContext.entries, ...(preflight ? { preflight: { status: preflight.status, revealed: preflight.revealed, ...(preflight.plan !== undefined ? { plan: preflight.plan } : {}) } } : {}) });
    const context = rPreflight ? mergePromptContext([...of(rContext, "prompt_context"), ...of(rPreflight, "prompt_context")], "turn.post_preflight_prompt_context", agent.caps) : firstContext;
    merged(rPreflight ?? rContext, context, turnId);
    const rCompile = await phase("turn.pre_prompt_compile", { context: context.entries, tools: [...visible], hiddenTools: [...tools.keys()].filter((n) => !visible.has(n)) });
    const sections = mergePromptSections(of(rCompile, "prompt_section"), "turn.pre_prompt_compile", agent.caps);
    merged(rCompile, sections, turnId);
    const system = compileSystemPrompt(agent.options.instructions ?? "", sections.sections, context.entries);
    let shown = showTools();
    const manifestBase = {
      sections: sections.sections.map((s) => ({ sectionId: s.sectionId, ...(s.title !== undefined ? { title: s.title } : {}), chars: s.content.length, plugins: s.plugins })),
      context: context.entries.map((e) => ({ id: e.id, domain: e.domain, chars: e.content.length, plugin: e.plugin })),
      tools: shown.manifest,
      ...(shown.hidden.length ? { hiddenTools: shown.hidden } : {}),
    };
    await phase("turn.post_prompt_compile", { system, manifest: { round: 0, ...manifestBase, messageCount: session.messages.length, systemChars: system.length, tokenEstimate: { exact: false, system: 0, tools: 0, messages: 0, total: 0 }, options: {}, finalRound: false } });

    // Rounds. Counting is exact whenever a request could come near the context ceiling.
    const window = agent.options.provider.contextWindow;
    const exactAbove = { exactAbove: window ? window * limits.contextCeiling * 0.5 : Infinity };
    let finalGuard: GuardName | undefined;
    let stopReason: StopReason = "end_turn";
    verdict = { status: "completed", reason: "end_turn" };
    // A resumed turn first answers the calls it paused on (and runs the ones after them).
    if (resume) {
      const calls = unansweredCalls(session.messages);
      if (calls.length) await runTools(calls, undefined);
    }
    if (pauseFor) verdict = { status: "paused", reason: "approval", pending: pauseFor.map((p) => p.callId) };
    else for (;;) {
      if (signal.aborted) throw signal.reason ?? new KeelError("KEEL_TURN_ABORTED", "aborted");
      if (!finalGuard) {
        const tripped = checkGuards();
        if (tripped) {
          finalGuard = tripped.guard;
          if (tripped.guard === "wall_time") wallTripped = true;
          void session.emit({ type: "guard.tripped", ...tripped }, turnId);
        }
      }
      drain("steering");
      rounds++;
      repair();
      let options: RequestOptions = { ...agent.options.requestOptions, ...(outputSpec && !finalGuard ? { output: outputSpec.format } : {}) };
      let retry: { reason: "context_too_long" } | undefined;
      let response: { message: AssistantMessage; stopReason: StopReason; usage: Partial<Usage> } | undefined;
      let stopAsked: string | undefined;
      for (let attempt = 1; !response; attempt++) {
        if (revealedSince) {
          shown = showTools();
          revealedSince = false;
        }
        const sendTools = finalGuard ? [] : shown.schemas;
        const sys = finalGuard ? `${system}\n\n${finalRoundInstruction(finalGuard)}` : system;
        const counted = session.messages;
        let estimate = agent.tokens.countRequest({ system: sys, messages: counted, tools: sendTools }, exactAbove);
        const rReq = await phase(
          "round.pre_request",
          { round: rounds, messages: session.messages, tokenEstimate: estimate.total, tokenCount: estimate, contextWindow: agent.options.provider.contextWindow, options, ...(retry ? { retry } : {}) },
          (e, added) => {
            let next = e;
            for (const c of added) {
              if (c.value.kind !== "message_edit") continue;
              try {
                const messages = applyMessageEdits(next.messages, c.value.edits);
                if (messages[0]?.role !== "user") throw new Error("the history must start with a user message");
                if (!messages.includes(inputMessage)) throw new Error("the edit removes or changes this turn's user message");
                if (messages[messages.length - 1]!.role === "assistant") throw new Error("the history must not end with an assistant message");
                void session.emit({ type: "context.edited", plugin: c.plugin, reason: c.value.reason, edits: c.value.edits, before: next.messages.length, after: messages.length }, turnId);
                session.messages = messages;
                freezeDeep(messages);
                next = Object.freeze({ ...next, messages });
              } catch (err) {
                void session.emit({ type: "diagnostic", level: "warn", code: "KEEL_CONTRIBUTION_INVALID", message: new KeelError("KEEL_CONTRIBUTION_INVALID", `message_edit rejected (history left as it was): ${errorMessage(err)}.`, { plugin: c.plugin, phase: "round.pre_request" }).message, plugin: c.plugin, phase: "round.pre_request" }, turnId);
              }
            }
            return next;
          },
        );
        if (rReq) {
          const ro = mergeRequestOptions(options, of(rReq, "request_options"), "round.pre_request");
          merged(rReq, ro, turnId);
          options = ro.options;
          stopAsked = of(rReq, "stop")[0]?.value.reason;
          if (session.messages !== counted) {
            repair();
            estimate = agent.tokens.countRequest({ system: sys, messages: session.messages, tools: sendTools }, exactAbove);
          }
        }
        if (stopAsked) break;
        if (!finalGuard && window && estimate.total > window * limits.contextCeiling) {
          finalGuard = "context_ceiling";
          void session.emit({ type: "guard.tripped", guard: "context_ceiling", limit: Math.floor(window * limits.contextCeiling), value: estimate.total }, turnId);
          continue;
        }
        // Known not to fit (the count is exact this far above the ceiling): never sent.
        if (window && estimate.total > window) {
          throw new TurnFailure({ status: "failed", reason: "context_overflow", code: "KEEL_CONTEXT_OVERFLOW", message: new KeelError("KEEL_CONTEXT_OVERFLOW", `The request counts ${estimate.total} tokens (messages ${estimate.messages}, system ${estimate.system}, tools ${estimate.tools}) and ${agent.options.provider.id}'s context window is ${window}; it was not sent.`).message });
        }
        const manifest: PromptManifest = { round: rounds, ...manifestBase, tools: finalGuard ? [] : shown.manifest, ...(shown.hidden.length ? { hiddenTools: shown.hidden } : {}), messageCount: session.messages.length, systemChars: sys.length, tokenEstimate: estimate, options: options as Record<string, unknown>, finalRound: !!finalGuard };
        void session.emit({ type: "prompt.compiled", manifest }, turnId);
        const request: ModelRequest = { system: sys, messages: session.messages, tools: sendTools, options };
        await session.confirmLease();
        try {
          response = await stream(request, attempt);
        } catch (err) {
          if (err instanceof ProviderError && err.errorClass === "context_too_long" && !retry && runner.has("round.pre_request")) {
            retry = { reason: "context_too_long" };
            continue;
          }
          throw err;
        }
      }
      if (stopAsked || !response) {
        verdict = { status: "stopped", reason: "plugin_stop", detail: stopAsked ?? "stopped before the request" };
        break;
      }
      stopReason = response.stopReason;
      await append(session, turnId, response.message);
      finalText = messageText(response.message) || finalText;
      const rResp = await phase("round.post_response", { round: rounds, response: response.message, stopReason: response.stopReason, usage: response.usage });
      const stop = of(rResp, "stop")[0];
      const calls = toolCallsOf(response.message);
      if (finalGuard) {
        if (calls.length) {
          for (const c of calls) await skip(c, "Error: tools are disabled in the final round after a limit was reached.");
          verdict = { status: "failed", reason: "final_round_tool_use", code: "KEEL_GUARD_TRIPPED", message: new KeelError("KEEL_GUARD_TRIPPED", `The model called tools in the final round after ${finalGuard}.`).message };
        } else verdict = { status: "stopped", reason: finalGuard };
        break;
      }
      if (calls.length) {
        await runTools(calls, stop?.value.reason);
        if (pauseFor) {
          verdict = { status: "paused", reason: "approval", pending: pauseFor.map((p) => p.callId) };
          break;
        }
        if (stop) {
          verdict = { status: "stopped", reason: "plugin_stop", detail: stop.value.reason };
          break;
        }
        continue;
      }
      if (stop) {
        verdict = { status: "stopped", reason: "plugin_stop", detail: stop.value.reason };
        break;
      }
      if (session.steering.length) continue;
      if (session.followUps.length) {
        drain("follow_up");
        continue;
      }
      verdict = { status: "completed", reason: stopReason === "max_tokens" || stopReason === "refusal" ? stopReason : stopReason === "end_turn" || stopReason === "stop_sequence" || stopReason === "tool_use" ? "end_turn" : "other" };
      if (outputSpec) {
        // Structured output: the answer must parse and match; one corrective round, then a failed verdict.
        const problem = checkOutput(finalText);
        if (problem) {
          if (!outputRetried) {
            outputRetried = true;
            void session.emit({ type: "diagnostic", level: "warn", code: "KEEL_OUTPUT_INVALID", message: `The answer did not match the output schema (${problem}); the model is asked once more.` }, turnId);
            await append(session, turnId, userMessage(`Your answer did not match the required output schema: ${problem}. Reply again with only a JSON value that matches the schema, nothing else.`));
            continue;
          }
          verdict = { status: "failed", reason: "output_invalid", code: "KEEL_OUTPUT_INVALID", message: new KeelError("KEEL_OUTPUT_INVALID", `The answer did not match the output schema after one corrective retry: ${problem}.`).message };
        }
      }
      break;
    }
  } catch (thrown) {
    // What plugin or provider code threw may be a hostile Proxy: inspect a plain stand-in.
    const err = plainThrown(thrown);
    if (err instanceof TurnFailure) verdict = err.verdict;
    else if (signal.aborted && isKeelError(signal.reason, "KEEL_PROCESS_FAULT")) verdict = { status: "failed", reason: "process_fault", code: "KEEL_PROCESS_FAULT", message: signal.reason.message, ...(signal.reason.plugin ? { plugin: signal.reason.plugin } : {}), ...(signal.reason.phase ? { phase: signal.reason.phase } : {}) };
    else if (wallCut()) {
      verdict = { status: "stopped", reason: "wall_time" };
      if (!wallTripped) void session.emit({ type: "guard.tripped", guard: "wall_time", limit: limits.wallTimeMs, value: Date.now() - t0 }, turnId);
    } else if (signal.aborted || (err instanceof ProviderError && err.errorClass === "aborted")) verdict = { status: "interrupted", reason: "aborted" };
    else if (err instanceof ProviderError) verdict = { status: "failed", reason: "provider_error", errorClass: err.errorClass, code: "KEEL_PROVIDER_ERROR", message: new KeelError("KEEL_PROVIDER_ERROR", `${agent.options.provider.id}: ${err.message} (class ${err.errorClass}).`).message };
    else if (isKeelError(err) && err.code !== "KEEL_STORE_FAILED" && err.code !== "KEEL_SESSION_BUSY") verdict = { status: "failed", reason: "provider_error", code: err.code, message: err.message };
    else {
      clearTimeout(wallTimer);
      turnSignal.removeEventListener("abort", onTurnAbort);
      throw err;
    }
  }
  clearTimeout(wallTimer);
  turnSignal.removeEventListener("abort", onTurnAbort);

  const paused = verdict.status === "paused" && pauseFor ? pauseFor : undefined;
  // Every tool call has a result even when the turn ended mid-way (a paused turn's calls wait for theirs).
  if (!paused) repair();
  const type = paused ? "turn.paused" : verdict.status === "failed" ? "turn.failed" : verdict.status === "interrupted" ? "turn.interrupted" : "turn.completed";
  let post: PhaseResult | undefined;
  if (!paused && runner.has("turn.post_turn")) {
    // Runs before the terminal event is written so its timing is in it; a crash here still
    // leaves the turn's messages on disk (the terminal write is durable either way).
    post = await runner.run("turn.post_turn", ev("turn.post_turn", { verdict, usage: { ...usage }, messages: session.messages.slice(startCount), finalText }), { signal: session.lifetime, owner: { session, turnId }, backgroundSignal: session.lifetime });
    session.record(post, turnId);
  }
  // Jobs first: a durable job's `job.pending` record joins the terminal event's durable write.
  if (post) session.startJobs(post.contributions, turnId);
  if (paused) session.paused = { turnId, input, metadata, rounds, toolCalls, requests: new Map(paused.map((p) => [p.callId, p])), ...(childCalls.size ? { childCalls } : {}) };
  await session.emit({ type, verdict, usage, rounds, toolCalls, timings: session.takeTimings() }, turnId, true);
  return { sessionId: session.id, turnId, verdict, text: finalText, usage, rounds, toolCalls, ...(paused ? { pending: paused.map((p) => ({ ...p })) } : {}), ...(verdict.status === "completed" && outputSpec ? { output } : {}) };

  /** Why `text` is not a valid structured answer, or undefined (then `output` holds the value). */
  function checkOutput(text: string): string | undefined {
    const parsed = parseAnswer(text);
    if (!parsed.ok) return parsed.error;
    let checked: ReturnType<OutputSpec["schema"]["safeParse"]>;
    try {
      checked = outputSpec!.schema.safeParse(parsed.value);
    } catch (err) {
      return `validating it threw: ${errorMessage(err)}`;
    }
    if (checked.success) {
      output = checked.data;
      return undefined;
    }
    return checked.error.issues.slice(0, 5).map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`).join("; ");
  }

  function repair(): void {
    const r = repairToolPairs(session.messages);
    if (r.messages === session.messages) return;
    session.messages = freezeDeep(r.messages);
    void session.emit({ type: "context.repaired", synthesizedResults: r.synthesized, droppedResults: r.dropped }, turnId);
  }

  function completed(call: ToolCallBlock, status: "ok" | "error" | "timeout" | "denied" | "skipped" | "cancelled", extra: { durationMs?: number; decision?: string; rewrittenBy?: string[] } = {}): void {
    void session.emit({ type: "tool.completed", round: rounds, callId: call.id, name: call.name, status, durationMs: extra.durationMs ?? 0, ...(extra.decision ? { decision: extra.decision } : {}), ...(extra.rewrittenBy ? { rewrittenBy: extra.rewrittenBy } : {}) }, turnId);
  }

  function checkGuards(): { guard: GuardName; limit: number; value: number } | undefined {
    if (rounds >= limits.maxRounds) return { guard: "max_rounds", limit: limits.maxRounds, value: rounds };
    if (toolCalls >= limits.maxToolCalls) return { guard: "max_tool_calls", limit: limits.maxToolCalls, value: toolCalls };
    const used = usage.inputTokens + usage.outputTokens;
    if (used >= limits.tokenBudget) return { guard: "token_budget", limit: limits.tokenBudget, value: used };
    const elapsed = Date.now() - t0;
    if (elapsed >= limits.wallTimeMs) return { guard: "wall_time", limit: limits.wallTimeMs, value: elapsed };
    return undefined;
  }

  function drain(queue: "steering" | "follow_up"): void {
    const q = queue === "steering" ? session.steering : session.followUps;
    while (q.length) {
      const m = q.shift()!;
      void session.emit({ type: "message.dequeued", queue, queueId: m.queueId }, turnId);
      void append(session, turnId, userMessage(m.text));
    }
  }

  function cutDuringCall(): string {
    return wallCut() ? `The turn's wall-time limit (${limits.wallTimeMs} ms) ran out during the model call; it was cut.` : "The turn was cancelled during the model call.";
  }

  /** One provider call. Contract: settles promptly on abort, even if the provider ignores the signal. */
  async function stream(request: ModelRequest, attempt: number): Promise<{ message: AssistantMessage; stopReason: StopReason; usage: Partial<Usage> }> {
    const started = performance.now();
    const provider = agent.options.provider;
    let iterator: AsyncIterator<ModelEvent> | undefined;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(new ProviderError("aborted", cutDuringCall()));
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
    aborted.catch(() => {});
    let finished = false;
    const joiners = new Map<string, ReturnType<typeof deltaJoiner>>();
    let firstChunkAt: number | undefined;
    try {
      iterator = provider.stream(wellFormedDeep(request), { signal })[Symbol.asyncIterator]();
      for (;;) {
        const next = await Promise.race([iterator.next(), aborted]);
        if (next.done) break;
        const e = next.value;
        if (e.type === "response") {
          const valid = MessageSchema.safeParse(e.message);
          if (!valid.success || e.message.role !== "assistant") {
            throw new ProviderError("unknown", `The provider returned a malformed response message (${valid.success ? "not an assistant message" : `${valid.error.issues[0]!.path.join(".")}: ${valid.error.issues[0]!.message}`}).`);
          }
          finished = true;
          for (const [key, j] of joiners) {
            const rest = j.flush();
            if (rest && agent.hasListeners) session.live({ type: "model.delta", sessionId: session.id, turnId, round: rounds, channel: key.startsWith("tool_args") ? "tool_args" : (key as "text" | "thinking"), text: rest });
          }
          addUsage(usage, e.usage);
          const answered = typeof e.provider === "string" ? e.provider : provider.id;
          const model = typeof e.model === "string" && e.model ? { model: codePointSlice(e.model, 0, 200) } : {};
          const firstChunk = firstChunkAt !== undefined ? { firstChunkMs: Math.round(firstChunkAt - started) } : {};
          void session.emit({ type: "model.responded", round: rounds, stopReason: e.stopReason, usage: e.usage, durationMs: Math.round(performance.now() - started), attempt, ...(typeof answered === "string" ? { provider: answered } : {}), ...model, ...firstChunk }, turnId);
          return { message: e.message, stopReason: e.stopReason, usage: e.usage ?? {} };
        }
        if (e.type !== "notice" && firstChunkAt === undefined) firstChunkAt = performance.now();
        if (e.type === "notice") {
          if (e.kind === "retry") firstChunkAt = undefined;
          void session.emit({ type: "model.notice", round: rounds, kind: e.kind, message: e.message, ...(e.provider !== undefined ? { provider: e.provider } : {}), ...(e.data !== undefined ? { data: e.data } : {}) }, turnId);
          continue;
        }
        if (agent.hasListeners) {
          // A stream may cut a surrogate pair between two deltas: listeners get whole characters.
          const channel = e.type === "text_delta" ? "text" : e.type === "thinking_delta" ? "thinking" : "tool_args";
          const key = e.type === "tool_call_delta" ? `tool_args:${e.id}` : channel;
          if (!joiners.has(key)) joiners.set(key, deltaJoiner());
          const text = joiners.get(key)!.push(e.type === "tool_call_delta" ? e.argsText : e.text);
          if (text) session.live({ type: "model.delta", sessionId: session.id, turnId, round: rounds, channel, text });
          // A turn stream's consumer fell behind: stop reading the provider until it catches up.
          const held = session.backpressure;
          if (held) await Promise.race([held, aborted]);
        }
      }
      finished = true;
      throw new ProviderError("network", "The provider stream ended without a final response.");
    } catch (thrown) {
      const err = plainThrown(thrown);
      const pe = err instanceof ProviderError ? err : signal.aborted ? new ProviderError("aborted", "aborted", { cause: err }) : isKeelError(err) ? undefined : new ProviderError("unknown", errorMessage(err), { cause: err });
      if (pe) void session.emit({ type: "model.failed", round: rounds, errorClass: pe.errorClass, message: pe.message, ...(pe.status !== undefined ? { status: pe.status } : {}) }, turnId);
      if (signal.aborted) throw new ProviderError("aborted", cutDuringCall(), { cause: err });
      throw pe ?? err;
    } finally {
      signal.removeEventListener("abort", onAbort!);
      if (!finished && iterator?.return) {
        // Stop a stream we walked away from (abort or error); a provider that throws here is ignored.
        try {
          void Promise.resolve(iterator.return()).catch(() => {});
        } catch {
          // ignored, see above
        }
      }
    }
  }

  /** Child sessions a resumed call waited on (PendingApproval.via). */
  function waitingChildren(callId: string): string[] {
    return resume?.childCalls?.has(callId) ? [...new Set([...resume.requests.values()].flatMap((r) => (r.via?.callId === callId ? [r.via.sessionId] : [])))] : [];
  }

  async function skip(call: ToolCallBlock, text: string, status: "skipped" | "cancelled" | "denied" = "skipped"): Promise<void> {
    // A call that waited on a child and will not run: nobody passes the answers on, so the child ends.
    for (const id of waitingChildren(call.id)) await abandonChild(session, id);
    completed(call, status);
    await append(session, turnId, errorResult(call.id, call.name, text));
  }

  async function runTools(calls: ToolCallBlock[], stopReasonText: string | undefined): Promise<void> {
    // Group consecutive parallel-safe calls; others run alone.
    const groups: Array<{ parallel: boolean; calls: ToolCallBlock[] }> = [];
    for (const c of calls) {
      const t = tools.get(c.name);
      const parallel = t ? (t.def.parallel ?? (t.def.category === undefined || t.def.category === "info" || t.def.category === "mcp")) : true;
      const last = groups[groups.length - 1];
      if (parallel && last?.parallel) last.calls.push(c);
      else groups.push({ parallel, calls: [c] });
    }
    let skipRest: string | undefined = stopReasonText ? `Skipped: a plugin asked to stop (${stopReasonText}).` : undefined;
    for (const { calls: group } of groups) {
      if (!skipRest && signal.aborted) skipRest = "Cancelled: the turn was cancelled before this call started.";
      // Steering queued at any point before a group starts (also during the model's stream) skips it.
      if (!skipRest && session.steering.length) skipRest = SKIPPED_STEERING;
      if (skipRest) {
        for (const c of group) await skip(c, skipRest, signal.aborted ? "cancelled" : "skipped");
        continue;
      }
      // Decisions in call order, then the runs concurrently, then results in call order.
      const prepared: Prepared[] = [];
      for (const c of group) prepared.push(await prepare(c));
      // Tools may have side effects: their calls (the assistant message, tool.started) reach the
      // store before they run, so a process killed mid-tool resumes with the call (and repairs it).
      await session.flush();
      const holds: ChildHold[] = prepared.map((p) => (p.children ? { resume: p.children } : {}));
      const runs = await Promise.all(prepared.map((p, i) => (p.ready ? executeTool(p.ready.def, p.ready.args, { callId: p.call.id, toolName: p.call.name, sessionId: session.id, turnId, budget: budget(), depth: agent.depth, rerun: !!p.children, child: (o, callSignal) => runChild(session, turnId, p.call.id, callSignal ?? signal, o, budget(), (u) => addUsage(usage, u), holds[i]!) }, p.ready.timeoutMs, signal, p.ready.view.source.plugin, progressOf(p.call)) : undefined)));
      // Calls waiting for the host pause the turn here: the calls after this group run on resume, in order.
      const waiting: PendingApproval[] = [];
      for (const [i, p] of prepared.entries()) {
        const hold = holds[i]!;
        hold.closed = true;
        // A child the call did not resume this time, or one that paused in a call that was cut short, waits for no one.
        for (const [n, left] of hold.resume ?? []) {
          void session.emit({ type: "diagnostic", level: "warn", code: "KEEL_CHILD_INVALID", message: `Call ${p.call.id} (${p.call.name}) ran again without resuming its child ${n} (session ${left.sessionId}, "${left.name}"), which waited for approval: that child's turn was ended. A tool must start the same children in the same order when it runs again.` }, turnId);
          await abandonChild(session, left.sessionId);
        }
        const cut = runs[i] && runs[i]!.status !== "ok" && runs[i]!.status !== "error";
        if ((cut || signal.aborted) && hold.paused?.length) {
          for (const id of new Set(hold.paused.map((w) => w.via!.sessionId))) await abandonChild(session, id);
          hold.paused = undefined;
        }
        if (p.pause) waiting.push(p.pause);
        else if (hold.paused?.length) {
          // A child waits for approval: so does this call (whatever the tool returned); it runs again on resume.
          for (const w of hold.paused) {
            void session.emit({ type: "approval.requested", round: rounds, callId: w.callId, name: w.name, args: w.args, ...(w.reason !== undefined ? { reason: w.reason } : {}), ...(w.plugin !== undefined ? { plugin: w.plugin } : {}), via: w.via! }, turnId);
            waiting.push({ ...w, turnId, round: rounds });
          }
          childCalls.set(p.call.id, p.ready!.args);
        } else await append(session, turnId, await finish(p, runs[i]));
      }
      if (waiting.length && signal.aborted) {
        // Cancelled while deciding: nothing waits for an answer; each call gets its result now.
        for (const w of waiting.filter((w) => !w.via)) await skip(prepared.find((p) => p.call.id === w.callId)!.call, "Cancelled: the turn was cancelled while this call waited for approval.", "cancelled");
        for (const p of prepared.filter((p) => waiting.some((w) => w.via?.callId === p.call.id))) await skip(p.call, "Cancelled: the turn was cancelled while this call's child waited for approval.", "cancelled");
        childCalls.clear();
      } else if (waiting.length) {
        pauseFor = waiting;
        return;
      }
    }
  }

  /** What is left of this turn's limits now. */
  function budget(): TurnBudget {
    return { rounds: Math.max(0, limits.maxRounds - rounds), toolCalls: Math.max(0, limits.maxToolCalls - toolCalls), tokens: Math.max(0, limits.tokenBudget - (usage.inputTokens + usage.outputTokens)), wallMs: Math.max(0, limits.wallTimeMs - (Date.now() - t0)) };
  }

  function progressOf(call: ToolCallBlock): ((p: { message: string; fraction?: number; elapsedMs: number }) => void) | undefined {
    if (!agent.hasListeners) return undefined;
    return (p) => session.live({ type: "tool.progress", sessionId: session.id, turnId, callId: call.id, name: call.name, ...p });
  }

  async function prepare(call: ToolCallBlock): Promise<Prepared> {
    if (resume?.childCalls?.has(call.id)) return await prepareAgain(call, resume.childCalls.get(call.id));
    // A call the host answered after a pause: counted and decided before, it takes the answer as its decision.
    const answered = answers.get(call.id);
    answers.delete(call.id);
    if (!answered && toolCalls >= limits.maxToolCalls) {
      completed(call, "skipped");
      return { call, result: errorResult(call.id, call.name, `Skipped: this turn reached its limit of ${limits.maxToolCalls} tool calls.`) };
    }
    if (!answered) toolCalls++;
    const resolved = tools.get(call.name);
    if (!resolved && mode === "chat") {
      completed(call, "error");
      return { call, result: errorResult(call.id, call.name, `Error: this session is in chat mode: no tools are available (the host switches modes between turns). Answer from the conversation.`) };
    }
    if (!resolved) {
      const names = [...tools.keys()];
      completed(call, "error");
      return { call, result: errorResult(call.id, call.name, `Error: ${new KeelError("KEEL_TOOL_UNKNOWN", `There is no tool "${call.name}". Available: ${names.slice(0, 40).join(", ") || "(none)"}.`, { tool: call.name }).message}`) };
    }
    const def = resolved.def;
    let view: ToolCallView = freezeDeep({ id: call.id, name: call.name, args: call.args, category: def.category ?? "info", source: { ...resolved.source } });
    let decision: ReturnType<typeof mergeDecisions> = { decision: "allow" };
    let approvedByUser = false;
    if (answered) {
      view = freezeDeep({ ...view, args: answered.args });
      // Read back from a store, arguments that held a secret hold its placeholder: never run a call with it.
      if (answered.answer!.approved && holdsPlaceholder(answered.args)) {
        completed(call, "error");
        return { call, result: errorResult(call.id, call.name, `Error: ${new KeelError("KEEL_APPROVAL_ARGS_REDACTED", `This call was approved, but its arguments held a secret that was not stored, so it was not run. Call it again if it is still needed.`, { tool: call.name }).message}`) };
      }
      if (answered.answer!.approved) approvedByUser = true;
      else decision = { decision: "deny", reason: answered.answer!.reason ?? "no reason given", plugin: "the user" };
    } else if (runner.has("tool.pre_call")) {
      const res = await runner.run("tool.pre_call", ev("tool.pre_call", { round: rounds, call: view }), { signal, owner: { session, turnId }, backgroundSignal: session.lifetime, step: (e, added) => {
        const withArgs = added.filter((c) => c.value.kind === "tool_decision" && c.value.args !== undefined);
        if (!withArgs.length) return e;
        view = freezeDeep({ ...view, args: (withArgs[withArgs.length - 1]!.value as ContributionOf<"tool_decision">).args });
        return Object.freeze({ ...e, call: view });
      } });
      session.record(res, turnId);
      if (res.failed) {
        const failure = (res.failed.details as { failure?: string } | undefined)?.failure;
        if (failure === "required") throw phaseFailed(res.failed);
        decision = { decision: "deny", reason: `a fail-closed check failed: ${res.failed.message}`, ...(res.failed.plugin ? { plugin: res.failed.plugin } : {}) };
      } else decision = mergeDecisions(of(res, "tool_decision"));
    }
    if (decision.decision === "ask") {
      const approve = agent.options.approve;
      const asking = { round: rounds, callId: call.id, name: call.name, args: view.args, ...(decision.reason ? { reason: decision.reason } : {}), ...(decision.plugin ? { plugin: decision.plugin } : {}) };
      if (session.alwaysAllowed.has(call.name)) {
        approvedByUser = true;
        void session.emit({ type: "approval.resolved", callId: call.id, name: call.name, approved: true, by: "always" }, turnId);
      } else if (approve) {
        void session.emit({ type: "approval.requested", ...asking }, turnId);
        let answer: ApprovalAnswer = { approved: false };
        try {
          const asked = approve({ sessionId: session.id, turnId, call: view, signal, ...(decision.reason ? { reason: decision.reason } : {}), ...(decision.plugin ? { plugin: decision.plugin } : {}) });
          answer = readAnswer(await raceAbort(Promise.resolve(asked), signal));
        } catch {
          answer = { approved: false };
        }
        if (signal.aborted) {
          completed(call, "cancelled");
          return { call, result: errorResult(call.id, call.name, "Cancelled: the turn was cancelled while waiting for approval.") };
        }
        void session.emit({ type: "approval.resolved", callId: call.id, name: call.name, ...answer, by: "callback" }, turnId);
        if (answer.approved && answer.always) session.alwaysAllowed.add(call.name);
        if (answer.approved) approvedByUser = true;
        else decision = { decision: "deny", reason: `the user did not approve it${answer.reason ? ` (${answer.reason})` : ""}`, ...(decision.plugin ? { plugin: decision.plugin } : {}) };
      } else if ((agent.options.ask ?? "pause") === "pause") {
        // No callback: the turn pauses and the host answers later (session.approve/deny, then resume()).
        void session.emit({ type: "approval.requested", ...asking }, turnId);
        return { call, pause: { ...asking, turnId, requestedAt: Date.now() } };
      } else decision = { decision: "deny", reason: "approval was required, and this agent denies asks (ask: \"deny\") without an approve() callback", ...(decision.plugin ? { plugin: decision.plugin } : {}) };
    }
    if (decision.decision === "deny") {
      completed(call, "denied", { decision: `deny${decision.plugin ? ` by ${decision.plugin}` : ""}` });
      return { call, result: errorResult(call.id, call.name, `Error: ${new KeelError("KEEL_TOOL_DENIED", `The call was denied${decision.plugin ? ` by ${decision.plugin}` : ""}${decision.reason ? `: ${decision.reason}` : ""}.`, { tool: call.name }).message}`) };
    }
    let args = view.args;
    if (def.input) {
      // The schema is plugin code too (refinements, transforms): a throw is an invalid call, not a crash.
      let parsed: { success: true; data: unknown } | { success: false; error: { issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }> } };
      try {
        parsed = def.input.safeParse(args) as typeof parsed;
      } catch (err) {
        parsed = { success: false, error: { issues: [{ path: [], message: `validating the arguments threw: ${errorMessage(err)}` }] } };
      }
      if (!parsed.success) {
        completed(call, "error");
        const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`).join("; ");
        // The tool never ran, but tool.post_result still sees the failure (a retry controller counts it).
        return { call, result: errorResult(call.id, call.name, `Error: ${new KeelError("KEEL_TOOL_ARGS_INVALID", `Invalid arguments — ${issues}.`, { tool: call.name }).message}`), rejected: view };
      }
      args = parsed.data;
    }
    void session.emit({ type: "tool.started", round: rounds, callId: call.id, name: call.name, args }, turnId);
    const timeoutMs = def.timeoutMs ?? agent.toolTimeouts[def.category ?? "info"];
    return { call, ready: { def, args, timeoutMs, view, approvedByUser, decision } };
  }

  /** A call whose child waited for approval: decided and counted before, it runs again with the answers. */
  async function prepareAgain(call: ToolCallBlock, args: unknown): Promise<Prepared> {
    const children: ChildResumes = new Map();
    for (const [id, a] of answers) {
      if (a.via?.callId !== call.id) continue;
      answers.delete(id);
      const entry = children.get(a.via.ordinal) ?? { sessionId: a.via.sessionId, name: a.via.child, answers: new Map<string, ApprovalAnswer>() };
      entry.answers.set(a.via.childCallId, a.answer!);
      children.set(a.via.ordinal, entry);
    }
    const resolved = tools.get(call.name);
    let problem: KeelError | undefined;
    if (!resolved) problem = new KeelError("KEEL_TOOL_UNKNOWN", `The tool "${call.name}" is gone since this call paused; the child session(s) it waited on were ended.`, { tool: call.name });
    else if (resolved.def.input) {
      // The tool may have changed since the pause (another process, another config): its arguments are checked again.
      let ok = false;
      try {
        ok = resolved.def.input.safeParse(args).success;
      } catch {
        ok = false;
      }
      if (!ok) problem = new KeelError("KEEL_TOOL_ARGS_INVALID", `The arguments this call paused with no longer fit "${call.name}" (its definition changed); the child session(s) it waited on were ended.`, { tool: call.name });
    }
    if (problem || !resolved) {
      for (const c of children.values()) await abandonChild(session, c.sessionId);
      completed(call, "error");
      return { call, result: errorResult(call.id, call.name, `Error: ${problem!.message}`) };
    }
    const view: ToolCallView = freezeDeep({ id: call.id, name: call.name, args, category: resolved.def.category ?? "info", source: { ...resolved.source } });
    void session.emit({ type: "tool.started", round: rounds, callId: call.id, name: call.name, args }, turnId);
    return { call, children, ready: { def: resolved.def, args, timeoutMs: resolved.def.timeoutMs ?? agent.toolTimeouts[resolved.def.category ?? "info"], view, approvedByUser: false, decision: { decision: "allow" } } };
  }

  function reveal(by: string, names: readonly string[]): void {
    const added = [...new Set(names)].filter((n) => tools.has(n) && !visible.has(n));
    const unknown = names.filter((n) => !tools.has(n));
    if (!added.length && !unknown.length) return;
    for (const n of added) visible.add(n);
    if (added.length) revealedSince = true;
    void session.emit({ type: "tools.revealed", by, names: added, ...(unknown.length ? { unknown } : {}) }, turnId);
  }

  async function finish(p: Prepared, run: ToolRun | undefined): Promise<ToolResultMessage> {
    if (p.rejected && runner.has("tool.post_result")) return afterResult(p.rejected, freezeDeep(p.result!), 0, false);
    if (!p.ready || !run) return p.result!;
    const { call } = p;
    const { view, approvedByUser, decision } = p.ready;
    let result: ToolResultMessage = freezeDeep(boundResult(run.result, limits.maxToolResultChars, limits.maxToolResultImageBytes));
    if (run.status !== "cancelled" && runner.has("tool.post_result")) result = await afterResult(view, result, run.durationMs, approvedByUser);
    if (run.reveal?.length) reveal(call.name, run.reveal);
    const owner = view.source.plugin;
    if (run.unhide && owner) reveal(call.name, [...(hiddenByPlugins.byPlugin.get(owner) ?? [])]);
    completed(call, run.status, { durationMs: run.durationMs, ...(approvedByUser ? { decision: "ask→approved" } : decision.plugin ? { decision: decision.decision } : {}), ...(result.rewrittenBy ? { rewrittenBy: result.rewrittenBy } : {}) });
    return result;
  }

  /** tool.post_result over a result: rewrites applied in order, then the size cap again. */
  async function afterResult(view: ToolCallView, given: ToolResultMessage, durationMs: number, approvedByUser: boolean): Promise<ToolResultMessage> {
    let result = given;
    {
      const res = await runner.run("tool.post_result", ev("tool.post_result", { round: rounds, call: view, result, durationMs, approvedByUser }), { signal, owner: { session, turnId }, backgroundSignal: session.lifetime, step: (e, added) => {
        for (const c of added) {
          if (c.value.kind !== "tool_result_rewrite") continue;
          const v = c.value;
          result = freezeDeep({ ...result, content: typeof v.content === "string" ? textContent(v.content) : v.content, isError: v.isError ?? result.isError, rewrittenBy: [...(result.rewrittenBy ?? []), c.plugin] });
        }
        return Object.freeze({ ...e, result });
      } });
      session.record(res, turnId);
      if (res.failed) throw phaseFailed(res.failed);
    }
    return freezeDeep(boundResult(result, limits.maxToolResultChars, limits.maxToolResultImageBytes));
  }
}

/** The approve() callback's answer as an ApprovalAnswer: `true`, or an object read inside a guard. */
function readAnswer(v: unknown): ApprovalAnswer {
  if (v === true) return { approved: true };
  if (v === null || typeof v !== "object") return { approved: false };
  const o = v as Record<string, unknown>;
  const approved = o.approved === true;
  const reason = typeof o.reason === "string" ? o.reason.slice(0, 2_000) : undefined;
  return { approved, ...(approved && o.always === true ? { always: true } : {}), ...(reason ? { reason } : {}) };
}

/** Append a message to the conversation and the log. */
function append(session: Session, turnId: string, message: Message, durable = false): Promise<void> | void {
  freezeDeep(message);
  session.appendMessage(message);
  return session.emit({ type: "message.appended", message }, turnId, durable);
}

export type { Usage };

/** Which tools the turn's tool_visibility contributions hide, and what each did. */
interface Visibility {
  names: Set<string>;
  /** What each plugin hid (a tool of that plugin may lift it: ToolOutput.unhide). */
  byPlugin: Map<string, Set<string>>;
  records: ContributionRecord[];
}

function applyVisibility(items: readonly Contributed<ContributionOf<"tool_visibility">>[], tools: ReadonlyMap<string, ResolvedTool>): Visibility {
  const names = new Set<string>();
  const byPlugin = new Map<string, Set<string>>();
  const records: ContributionRecord[] = [];
  for (const { plugin, value } of items) {
    const keep = new Set(value.keep ?? []);
    const categories = new Set(value.hide.categories ?? []);
    const byName = new Set(value.hide.names ?? []);
    let n = 0;
    for (const t of tools.values()) {
      if (keep.has(t.def.name)) continue;
      if (categories.has(t.def.category ?? "info") || byName.has(t.def.name)) {
        names.add(t.def.name);
        if (!byPlugin.has(plugin)) byPlugin.set(plugin, new Set());
        byPlugin.get(plugin)!.add(t.def.name);
        n++;
      }
    }
    records.push({ plugin, kind: "tool_visibility", status: "applied", reason: `${value.reason} (${n} tool(s) hidden)` });
  }
  return { names, byPlugin, records };
}
