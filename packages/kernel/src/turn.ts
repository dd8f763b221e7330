/**
 * One turn of the agent loop, as its lifecycle reads. Each step is one named function below,
 * in the order it runs, with the turn's state (Turn) passed explicitly:
 *
 *   openTurn → policy → promptContext → toolMaterialization → preflight →
 *   postPreflightContext → promptCompile → answerPaused →
 *   rounds of [guards → steering → preRequest → callModel → postResponse → toolCalls → next] →
 *   closeTurn (post_turn, jobs, the terminal event)
 *
 * Approvals (approvals.ts), tool runs (tool-calls.ts), the provider stream (model-call.ts) and
 * the session's log, lease and children (TurnHost) plug in at those steps; none branches here.
 */
import type { ContributionOf } from "./contributions.ts";
import type { Contributed, PhaseResult } from "./dispatch.ts";
import { hashText } from "./hash.ts";
import { isKeelError, KeelError, plainThrown } from "./errors.ts";
import type { ResolvedTool } from "./merge.ts";
import {
  applyMessageEdits,
  mergePromptContext,
  mergePromptSections,
  mergeRequestOptions,
  mergeToolBundles,
  PolicySet,
} from "./merge.ts";
import type { AssistantMessage, Message, ToolCallBlock, UserMessage } from "./messages.ts";
import { freezeDeep, messageText, textContent, toolCallsOf } from "./messages.ts";
import { callModel } from "./model-call.ts";
import type { ModelAnswer } from "./model-call.ts";
import type { PhaseName, TurnEventBase } from "./phases.ts";
import { compileSystemPrompt, finalRoundInstruction } from "./prompt.ts";
import type { RequestDigest } from "./manifest.ts";
import type { ModelRequest, RequestOptions } from "./provider.ts";
import { ProviderError } from "./provider.ts";
import { repairToolPairs } from "./repair.ts";
import type { ActiveRoute } from "./routing.ts";
import { runToolCalls, skip } from "./tool-calls.ts";
import { droppedMarker, truncate } from "./text.ts";
import { applyVisibility, checkOutput, copyMetadata, toolSchema } from "./turn-parts.ts";
import type { RequestTokenCount } from "./token-counter.ts";
import type { PreflightPlan, Turn, TurnHost, TurnInput, TurnOptions } from "./turn-state.ts";
import { append, phaseFailed, TurnFailure } from "./turn-state.ts";
import { emptyUsage } from "./usage.ts";
import type { TurnResult, TurnVerdict } from "./verdict.ts";

/** Hidden tools named in a prompt manifest, at most (a catalog may hold thousands). */
const MAX_HIDDEN_LISTED = 200;

/** Run one turn in `session`. Contract: see Session.run; rejects only for a store failure or a lost lease. */
export async function runTurn(
  session: TurnHost,
  given: TurnInput,
  turnSignal: AbortSignal,
  options: TurnOptions,
): Promise<TurnResult> {
  const t = await openTurn(session, given, turnSignal, options);
  t.startClock();
  try {
    await policy(t);
    const context = await promptContext(t);
    await toolMaterialization(t);
    const plan = await preflight(t);
    await promptCompile(t, await postPreflightContext(t, context, plan));
    await answerPaused(t);
    while (!t.verdict) await round(t);
  } catch (thrown) {
    t.verdict = verdictOf(t, thrown);
  } finally {
    t.stopClock();
  }
  return closeTurn(t);
}

/** 1. The user's words are durable before anything else (or a paused turn goes on under its own id). */
async function openTurn(
  session: TurnHost,
  given: TurnInput,
  turnSignal: AbortSignal,
  options: TurnOptions,
): Promise<Turn> {
  const t = newTurn(session, given, turnSignal, options);
  // What handlers see as the history: the conversation before this turn.
  const history = session.messages;
  if (t.resume) {
    // The answers are in the log already; a recovered turn names the calls that had started when its process stopped.
    const r = t.resume.recovery;
    await session.emit(
      {
        type: "turn.resumed",
        answered: [...t.answers.keys()],
        ...(r
          ? {
              recovered: {
                cut: unansweredCalls(session.messages)
                  .filter((c) => r.started.has(c.id))
                  .map((c) => c.id),
                ...(r.leaseTakenOver ? { leaseTakenOver: r.leaseTakenOver } : {}),
              },
            }
          : {}),
      },
      t.turnId,
      true,
    );
    session.paused = undefined;
    const history = session.messages;
    const at = history.findLastIndex((m) => m.role === "user" && messageText(m) === t.input);
    t.inputMessage = (at >= 0 ? history[at] : history.find((m) => m.role === "user")) as UserMessage;
    t.startCount = Math.max(0, at);
  } else {
    // Messages queued while no turn ran (a steer or follow-up just after the last turn ended) come first.
    const content = typeof given === "string" ? undefined : given;
    await session.emit(
      {
        type: "turn.started",
        input: t.input,
        trigger: options.trigger ?? "user",
        metadata: t.metadata,
        ...(content ? { content: [...content] } : {}),
        ...(session.mode === "chat" ? { mode: "chat" as const } : {}),
      },
      t.turnId,
    );
    drain(t, "steering");
    drain(t, "follow_up");
    t.inputMessage = content
      ? { role: "user", content: [...content] }
      : { role: "user", content: textContent(t.input) };
    await append(session, t.turnId, t.inputMessage, true);
  }
  // Handlers get a read-only policy view and their own copy of the host's metadata (events are deep-frozen).
  const content = typeof given === "string" || t.resume ? undefined : t.inputMessage.content;
  t.base = Object.freeze({
    sessionId: session.id,
    turnId: t.turnId,
    input: t.input,
    ...(content ? { content } : {}),
    trigger: t.resume ? "resume" : (options.trigger ?? "user"),
    mode: t.mode,
    history,
    policies: t.policies.view(),
    metadata: copyMetadata(t.metadata),
  }) as TurnEventBase;
  return t;
}

/**
 * The turn's state. Its clock (startClock) aborts `signal` on cancellation and when the wall
 * time runs out, so the wall time cuts whatever runs (a stream, a tool, a phase).
 */
function newTurn(session: TurnHost, given: TurnInput, turnSignal: AbortSignal, options: TurnOptions): Turn {
  const agent = session.agent;
  const resume = options.resume;
  const limits = options.limits ? { ...agent.limits, ...options.limits } : agent.limits;
  const wall = new AbortController();
  const onTurnAbort = () => wall.abort(turnSignal.reason);
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const turnId = resume ? resume.turnId : `${session.id}/${++session.turnCount}`;
  const t: Turn = {
    session,
    agent,
    runner: agent.runner,
    turnId,
    limits,
    resume,
    t0,
    signal: wall.signal,
    owner: { session, turnId },
    input: resume ? resume.input : inputText(given),
    metadata: resume ? resume.metadata : options.metadata,
    // A resumed turn keeps the mode it paused in (tools were asked for; setMode is refused while paused).
    mode: resume ? "agent" : session.mode,
    outputSpec: options.output,
    wallCut: () => wall.signal.aborted && !turnSignal.aborted,
    wallTripped: false,
    startClock: () => {
      if (turnSignal.aborted) onTurnAbort();
      else turnSignal.addEventListener("abort", onTurnAbort, { once: true });
      timer = setTimeout(
        () =>
          wall.abort(
            new KeelError("KEEL_GUARD_TRIPPED", `The turn ran past its wall-time limit of ${limits.wallTimeMs} ms.`),
          ),
        Math.max(0, limits.wallTimeMs - (Date.now() - t0)),
      );
    },
    stopClock: () => (clearTimeout(timer), turnSignal.removeEventListener("abort", onTurnAbort)),
    // A resumed turn goes on from what it used before its pause (its result and its budget count the whole turn).
    usage: resume?.usage ? { ...resume.usage } : emptyUsage(),
    rounds: resume?.rounds ?? 0,
    toolCalls: resume?.toolCalls ?? 0,
    finalText: "",
    startCount: session.messages.length,
    inputMessage: undefined as unknown as Message,
    policies: new PolicySet(),
    base: undefined as unknown as TurnEventBase,
    tools: new Map(),
    hiddenByPlugins: { names: new Set(), byPlugin: new Map() },
    visible: new Set(),
    revealedSince: false,
    prompt: undefined,
    shown: { schemas: [], manifest: [], hidden: [] },
    finalGuard: undefined,
    route: undefined,
    pauseFor: undefined,
    answers: new Map(resume ? [...resume.requests].filter(([, r]) => r.answer) : []),
    childCalls: new Map(),
    outputRetried: false,
    output: undefined,
    verdict: undefined,
    event: (phase, extra = {}) => Object.freeze({ ...t.base, ...extra, phase }),
    of: (res, kind) => (res?.contributions.filter((c) => c.value.kind === kind) ?? []) as never,
  };
  return t;
}

/** The text parts of an input, joined by blank lines (what plugins read as `input`). */
export function inputText(input: TurnInput): string {
  return typeof input === "string" ? input : input.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n\n");
}

/** Run a turn or round phase and record it; its event (and `extra`, when a function) is built only when someone subscribes. */
async function phase(
  t: Turn,
  name: PhaseName,
  extra?: object | (() => object),
  step?: (e: any, added: Contributed[]) => any,
): Promise<PhaseResult | undefined> {
  if (!t.runner.has(name)) return undefined;
  const res = await t.runner.run(name, t.event(name, typeof extra === "function" ? extra() : extra), {
    signal: t.signal,
    owner: t.owner,
    backgroundSignal: t.session.lifetime,
    ...(step ? { step } : {}),
  });
  t.session.record(res, t.turnId);
  t.session.startJobs(res.contributions, t.turnId);
  if (res.failed) throw phaseFailed(res.failed);
  return res;
}

/** What a merge applied, truncated, omitted or rejected, and its diagnostics, into the log. */
function merged(
  t: Turn,
  res: PhaseResult | undefined,
  log: { records: PhaseResult["records"]; diagnostics: PhaseResult["diagnostics"] },
): void {
  if (!log.records.length && !log.diagnostics.length) return;
  void t.session.emit(
    { type: "contributions.merged", phase: res?.phase ?? "turn", contributions: log.records },
    t.turnId,
  );
  for (const d of log.diagnostics) void t.session.emit({ type: "diagnostic", ...d }, t.turnId);
}

/** 2. turn.pre_policy: the turn's policies. */
async function policy(t: Turn): Promise<void> {
  const res = await phase(t, "turn.pre_policy");
  merged(t, res, t.policies.merge(t.of(res, "policy"), "turn.pre_policy"));
}

/** 3. turn.pre_prompt_context: context entries (merged with the preflight's context in step 6). */
function promptContext(t: Turn): Promise<PhaseResult | undefined> {
  return phase(t, "turn.pre_prompt_context");
}

/** 4. turn.pre_tool_materialization: the tools of this turn (none in chat mode: the phase does not run), then what plugins hide. */
async function toolMaterialization(t: Turn): Promise<void> {
  const builtin = t.mode === "chat" ? [] : (t.agent.options.tools ?? []);
  if (t.mode === "agent") {
    const res = await phase(t, "turn.pre_tool_materialization", () => ({ tools: builtin.map((x) => x.name) }));
    merged(t, res, t.policies.merge(t.of(res, "policy"), "turn.pre_tool_materialization"));
    const bundles = mergeToolBundles(builtin, t.of(res, "tool_bundle"), "turn.pre_tool_materialization");
    merged(t, res, bundles);
    t.tools = new Map(bundles.tools.map((x) => [x.def.name, x]));
    const hidden = applyVisibility(t.of(res, "tool_visibility"), t.tools);
    t.hiddenByPlugins = hidden;
    if (hidden.records.length) merged(t, res, { records: hidden.records, diagnostics: [] });
  }
  for (const x of t.tools.values())
    if (!x.def.hidden && !t.hiddenByPlugins.names.has(x.def.name)) t.visible.add(x.def.name);
}

/** 5. The optional preflight plan (the host's seam): one bounded tool-less request that may reveal hidden tools. */
async function preflight(t: Turn): Promise<PreflightPlan | undefined> {
  const run = t.agent.seams.preflight;
  return run ? await run(t) : undefined;
}

/** 6. turn.post_preflight_prompt_context: context that may use the plan; all entries merged once. */
async function postPreflightContext(
  t: Turn,
  first: PhaseResult | undefined,
  pf: PreflightPlan | undefined,
): Promise<ReturnType<typeof mergePromptContext>> {
  const firstContext = mergePromptContext(t.of(first, "prompt_context"), "turn.pre_prompt_context", t.agent.caps);
  const res = await phase(t, "turn.post_preflight_prompt_context", () => ({
    context: firstContext.entries,
    ...(pf
      ? { preflight: { status: pf.status, revealed: pf.revealed, ...(pf.plan !== undefined ? { plan: pf.plan } : {}) } }
      : {}),
  }));
  const context = res
    ? mergePromptContext(
        [...t.of(first, "prompt_context"), ...t.of(res, "prompt_context")],
        "turn.post_preflight_prompt_context",
        t.agent.caps,
      )
    : firstContext;
  merged(t, res ?? first, context);
  return context;
}

/** 7. turn.pre_prompt_compile: sections, then the system prompt, its manifest, and turn.post_prompt_compile. */
async function promptCompile(t: Turn, context: ReturnType<typeof mergePromptContext>): Promise<void> {
  const res = await phase(t, "turn.pre_prompt_compile", () => ({
    context: context.entries,
    tools: [...t.visible],
    hiddenTools: [...t.tools.keys()].filter((n) => !t.visible.has(n)),
  }));
  const sections = mergePromptSections(t.of(res, "prompt_section"), "turn.pre_prompt_compile", t.agent.caps);
  merged(t, res, sections);
  const system = compileSystemPrompt(t.agent.options.instructions ?? "", sections.sections, context.entries);
  t.shown = showTools(t);
  const manifest = {
    sections: sections.sections.map((s) => ({
      sectionId: s.sectionId,
      ...(s.title !== undefined ? { title: s.title } : {}),
      chars: s.content.length,
      plugins: s.plugins,
      hash: digestText(t, s.content),
    })),
    context: context.entries.map((e) => ({
      id: e.id,
      domain: e.domain,
      chars: e.content.length,
      plugin: e.plugin,
      hash: digestText(t, e.content),
    })),
    tools: t.shown.manifest,
    ...(t.shown.hidden.length ? { hiddenTools: t.shown.hidden } : {}),
  };
  t.prompt = { system, manifest };
  await phase(t, "turn.post_prompt_compile", () => ({
    system,
    manifest: {
      round: 0,
      ...manifest,
      messageCount: t.session.messages.length,
      systemChars: system.length,
      tokenEstimate: { exact: false, system: 0, tools: 0, messages: 0, total: 0 },
      options: {},
      finalRound: false,
    },
  }));
}

/** What the model is shown of the visible tools: schemas and their manifest rows (rebuilt only after a reveal). */
function showTools(t: Turn): Turn["shown"] {
  const row = (x: ResolvedTool) => ({
    name: x.def.name,
    source: x.source.kind === "builtin" ? "builtin" : `${x.source.plugin}/${x.source.bundle}`,
  });
  const shown = [...t.tools.values()].filter((x) => t.visible.has(x.def.name));
  const hidden = [...t.tools.values()].filter((x) => !t.visible.has(x.def.name));
  return {
    schemas: shown.map(toolSchema),
    manifest: shown.map(row),
    hidden: hidden.slice(0, MAX_HIDDEN_LISTED).map(row),
  };
}

/** 8. A resumed turn first answers the calls it paused on (and runs the ones after them); a recovered one settles its cut calls. */
async function answerPaused(t: Turn): Promise<void> {
  if (!t.resume) return;
  const calls = unansweredCalls(t.session.messages);
  if (t.resume.recovery) return recoverCalls(t, calls);
  if (calls.length) await runToolCalls(t, calls, undefined);
  if (t.pauseFor) t.verdict = { status: "paused", reason: "approval", pending: t.pauseFor.map((p) => p.callId) };
}

/**
 * The calls a stopped process left without a result: one that never started runs as usual; one
 * that may have started runs again when its tool is repeatable or it started child sessions
 * (they go on from their logs), else it gets one "interrupted" result (given in call order, as a
 * live turn gives results). No call runs twice unasked. A turn whose final answer is in the log
 * already (the process stopped in turn.post_turn) ends with it: the model is not asked again.
 */
async function recoverCalls(t: Turn, calls: readonly ToolCallBlock[]): Promise<void> {
  const recovery = t.resume!.recovery!;
  const { started, children } = recovery;
  const again = t.resume!.childCalls!;
  const last = t.session.messages.at(-1);
  if (!calls.length && last?.role === "assistant") {
    t.finalText = messageText(last) || t.finalText;
    next(t, { message: last, stopReason: "end_turn", usage: {} }, undefined);
    return;
  }
  recovery.interrupted = new Map();
  for (const c of calls) {
    if (!started.has(c.id)) continue;
    const kids = children.get(c.id) ?? [];
    const def = t.tools.get(c.name)?.def;
    if (def && (kids.length || (def.repeatable ?? def.category === "info"))) again.set(c.id, started.get(c.id));
    else recovery.interrupted.set(c.id, interruptedText(c.name, def !== undefined));
  }
  if (calls.length) await runToolCalls(t, calls, undefined);
  if (t.pauseFor) t.verdict = { status: "paused", reason: "approval", pending: t.pauseFor.map((p) => p.callId) };
}

/** The result of a cut call that is not run again. */
function interruptedText(name: string, known: boolean): string {
  return known
    ? `No result: the process running this call stopped before it returned, and "${name}" is not marked safe to repeat, so it was not run again. It may or may not have taken effect: check before calling it again.`
    : `No result: the process running this call stopped before it returned, and the tool "${name}" is no longer available.`;
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

/** 9. One round: guards, steering, the request, the model's answer, its tool calls, and whether the turn goes on. */
async function round(t: Turn): Promise<void> {
  if (t.signal.aborted) throw t.signal.reason ?? new KeelError("KEEL_TURN_ABORTED", "aborted");
  guards(t);
  drain(t, "steering");
  t.rounds++;
  repair(t);
  const answer = await request(t);
  if (answer === "stopped") return;
  t.finalText = messageText(answer.message) || t.finalText;
  await append(t.session, t.turnId, answer.message);
  const res = await phase(t, "round.post_response", () => ({
    round: t.rounds,
    response: answer.message,
    stopReason: answer.stopReason,
    usage: answer.usage,
  }));
  const stop = t.of(res, "stop")[0];
  await toolCalls(t, answer.message, stop?.value.reason);
  if (!t.verdict) next(t, answer, stop?.value.reason);
}

/** 9a. A guard that ran out: the model gets one final round without tools (the wall time ends the turn at once). */
function guards(t: Turn): void {
  if (t.finalGuard) return;
  const { limits, usage } = t;
  const used = usage.inputTokens + usage.outputTokens;
  const elapsed = Date.now() - t.t0;
  const tripped =
    t.rounds >= limits.maxRounds
      ? { guard: "max_rounds" as const, limit: limits.maxRounds, value: t.rounds }
      : t.toolCalls >= limits.maxToolCalls
        ? { guard: "max_tool_calls" as const, limit: limits.maxToolCalls, value: t.toolCalls }
        : used >= limits.tokenBudget
          ? { guard: "token_budget" as const, limit: limits.tokenBudget, value: used }
          : elapsed >= limits.wallTimeMs
            ? { guard: "wall_time" as const, limit: limits.wallTimeMs, value: elapsed }
            : undefined;
  if (!tripped) return;
  t.finalGuard = tripped.guard;
  if (tripped.guard === "wall_time") t.wallTripped = true;
  void t.session.emit({ type: "guard.tripped", ...tripped }, t.turnId);
}

/** 9b. Queued messages enter the history as user messages. */
function drain(t: Turn, queue: "steering" | "follow_up"): void {
  const q = queue === "steering" ? t.session.steering : t.session.followUps;
  while (q.length) {
    const m = q.shift()!;
    void t.session.emit({ type: "message.dequeued", queue, queueId: m.queueId }, t.turnId);
    void append(t.session, t.turnId, { role: "user", content: textContent(m.text) });
  }
}

/** Every tool call in the history has exactly one result (a repair is recorded). */
function repair(t: Turn): void {
  const r = repairToolPairs(t.session.messages);
  if (r.messages === t.session.messages) return;
  t.session.messages = freezeDeep(r.messages);
  void t.session.emit(
    { type: "context.repaired", synthesizedResults: r.synthesized, droppedResults: r.dropped },
    t.turnId,
  );
}

/**
 * 9c. round.pre_request then the provider call; once more after a context_too_long when a plugin
 * can shorten the history. "stopped" when a plugin asked to stop (the verdict is set then).
 */
async function request(t: Turn): Promise<ModelAnswer | "stopped"> {
  let retry: { reason: "context_too_long" } | undefined;
  for (let attempt = 1; ; attempt++) {
    const prepared = await preRequest(t, retry);
    if (prepared === "again") continue;
    if ("answered" in prepared) return answered(t, prepared.answered);
    if ("stopped" in prepared) {
      t.verdict = { status: "stopped", reason: "plugin_stop", detail: prepared.stopped };
      return "stopped";
    }
    await t.session.confirmLease();
    try {
      return await callModel(t, prepared, attempt);
    } catch (err) {
      if (
        !(
          err instanceof ProviderError &&
          err.errorClass === "context_too_long" &&
          !retry &&
          t.runner.has("round.pre_request")
        )
      )
        throw err;
      retry = { reason: "context_too_long" };
    }
  }
}

/**
 * The request of this attempt: round.pre_request (message edits, request options, a stop), the
 * token count and the ceilings, the manifest. "again" when the context ceiling just tripped.
 */
async function preRequest(
  t: Turn,
  retry: { reason: "context_too_long" } | undefined,
): Promise<ModelRequest | { stopped: string } | { answered: Contributed<ContributionOf<"answer">> } | "again"> {
  if (t.revealedSince) {
    t.shown = showTools(t);
    t.revealedSince = false;
  }
  const final = t.finalGuard;
  const tools = final ? [] : t.shown.schemas;
  const system = final ? `${t.prompt!.system}\n\n${finalRoundInstruction(final)}` : t.prompt!.system;
  const window = t.agent.options.provider.contextWindow;
  const count = () =>
    t.agent.tokens.countRequest(
      { system, messages: t.session.messages, tools },
      { exactAbove: window ? window * t.limits.contextCeiling * 0.5 : Infinity },
    );
  const counted = t.session.messages;
  let estimate = count();
  let options: RequestOptions = {
    ...t.agent.options.requestOptions,
    ...(t.outputSpec && !final ? { output: t.outputSpec.format } : {}),
  };
  const round = t.agent.seams.round;
  const routing = round?.view(t, estimate.total, tools.length, counted, options);
  const res = await phase(
    t,
    "round.pre_request",
    () => ({
      round: t.rounds,
      messages: counted,
      tokenEstimate: estimate.total,
      tokenCount: estimate,
      contextWindow: window,
      options,
      ...(retry ? { retry } : {}),
      ...(routing ? { routing } : {}),
      ...(final ? { final: true as const } : {}),
    }),
    (e, added) => editMessages(t, e, added),
  );
  t.route = undefined;
  if (res) {
    const items = t.of(res, "request_options");
    const ro = mergeRequestOptions(options, items, "round.pre_request");
    merged(t, res, ro);
    options = ro.options.route ? takeRoute(t, ro.options, items) : ro.options;
    const stop = t.of(res, "stop")[0]?.value.reason;
    if (stop) return { stopped: stop };
    const answer = usableAnswer(t, t.of(res, "answer"), !!final);
    if (answer) return { answered: answer };
    if (t.session.messages !== counted) {
      repair(t);
      estimate = count();
    }
  } else if (options.route) options = takeRoute(t, options, []); // the agent's own requestOptions routed it
  if (round)
    estimate = round.fit(t, estimate, () =>
      t.agent.tokens.countRequest({ system, messages: t.session.messages, tools }, { exactAbove: 0 }),
    );
  const routed = t.route as ActiveRoute | undefined; // set by takeRoute, kept by fitRoute
  if (overCeiling(t, !!final, routed ? routed.contextWindow : window, estimate)) return "again";
  round?.check(t, estimate.total, options);
  emitManifest(
    t,
    !!final,
    system,
    estimate,
    options,
    t.agent.seams.digest?.request(system, tools, t.session.messages, options as Record<string, unknown>),
  );
  return { system, messages: t.session.messages, tools, options };
}

/** The round's plugin answer, if one may be used: calls need tools (not a final round, not chat mode). */
function usableAnswer(
  t: Turn,
  answers: Contributed<ContributionOf<"answer">>[],
  final: boolean,
): Contributed<ContributionOf<"answer">> | undefined {
  const a = answers[0];
  if (!a || !(a.value.calls?.length && (final || t.mode === "chat"))) return a;
  void t.session.emit(
    {
      type: "diagnostic",
      level: "warn",
      code: "KEEL_ANSWER_IGNORED",
      message: `${a.plugin}'s answer to round ${t.rounds} holds tool calls, but this round has no tools (${final ? "final round" : "chat mode"}); the model was asked instead.`,
      plugin: a.plugin,
      phase: "round.pre_request",
    },
    t.turnId,
  );
  return undefined;
}

/** 9c'. A plugin answered the round: its message (its text streamed to listeners in one delta), with call ids derived from the turn, round and position (the same in a replay). */
function answered(t: Turn, a: Contributed<ContributionOf<"answer">>): ModelAnswer {
  const { text, calls = [] } = a.value;
  const id = callIds(t);
  const content: AssistantMessage["content"] = [
    ...(text ? [{ type: "text" as const, text }] : []),
    ...calls.map((c, i) => ({ type: "tool_call" as const, id: id(i), name: c.name, args: c.args })),
  ];
  // Shown like the model's streamed text (a CLI prints the answer from these deltas).
  if (text && t.agent.hasListeners)
    t.session.live({
      type: "model.delta",
      sessionId: t.session.id,
      turnId: t.turnId,
      round: t.rounds,
      channel: "text",
      text,
    });
  void t.session.emit(
    { type: "round.answered", round: t.rounds, plugin: a.plugin, reason: a.value.reason, calls: calls.length },
    t.turnId,
  );
  return { message: { role: "assistant", content }, stopReason: calls.length ? "tool_use" : "end_turn", usage: {} };
}

/**
 * Ids for an answered round's calls: derived from the turn, round and position (the same in a
 * replay), salted until none is in the history yet. Contract: unique within the session even
 * where the round count starts over (a turn recovered after a crash counts its rounds anew).
 */
function callIds(t: Turn): (i: number) => string {
  const used = new Set(
    t.session.messages.flatMap((m) => (m.role === "assistant" ? toolCallsOf(m) : [])).map((c) => c.id),
  );
  return (i) => {
    let id = `call_${digestText(t, `${t.turnId}\u0000${t.rounds}\u0000${i}`)}`;
    for (let n = 1; used.has(id); n++) id = `call_${digestText(t, `${t.turnId}\u0000${t.rounds}\u0000${i}\u0000${n}`)}`;
    used.add(id);
    return id;
  };
}

/**
 * The context ceilings: past the soft one the next round is the final one (true: build the
 * request again); past the window itself the request is never sent (the count is exact there).
 */
function overCeiling(t: Turn, final: boolean, window: number | undefined, estimate: RequestTokenCount): boolean {
  if (!final && window && estimate.total > window * t.limits.contextCeiling) {
    t.finalGuard = "context_ceiling";
    const limit = Math.floor(window * t.limits.contextCeiling);
    void t.session.emit({ type: "guard.tripped", guard: "context_ceiling", limit, value: estimate.total }, t.turnId);
    return true;
  }
  if (window && estimate.total > window)
    throw new TurnFailure({
      status: "failed",
      reason: "context_overflow",
      code: "KEEL_CONTEXT_OVERFLOW",
      message: new KeelError(
        "KEEL_CONTEXT_OVERFLOW",
        `The request counts ${estimate.total} tokens (messages ${estimate.messages}, system ${estimate.system}, tools ${estimate.tools}) and ${(t.route?.provider ?? t.agent.options.provider).id}'s context window is ${window}; it was not sent.`,
      ).message,
    });
  return false;
}

/** Longest system prompt text recorded on prompt.compiled, in code points. */
const MAX_SYSTEM_RECORDED = 16_000;

/** The prompt manifest of this request: what a host or a replay sees was sent. */
function emitManifest(
  t: Turn,
  final: boolean,
  system: string,
  estimate: RequestTokenCount,
  options: RequestOptions,
  digest: (() => RequestDigest) | undefined,
): void {
  const shown = t.shown;
  const window = t.route ? t.route.contextWindow : t.agent.options.provider.contextWindow;
  const manifest = {
    round: t.rounds,
    ...t.prompt!.manifest,
    tools: final ? [] : shown.manifest,
    ...(shown.hidden.length ? { hiddenTools: shown.hidden } : {}),
    messageCount: t.session.messages.length,
    systemChars: system.length,
    tokenEstimate: estimate,
    options: options as Record<string, unknown>,
    finalRound: final,
    ...(window ? { contextWindow: window } : {}),
    ...(t.route ? { route: t.route.record } : {}),
  };
  // Computed when first read (by a store writing it, a replay, a listener): most logs in memory never do.
  // A getter defined here, not spread in above: a spread would read it at once.
  if (digest) Object.defineProperty(manifest, "digest", { get: digest, enumerable: true });
  // The text itself only when it changed within the turn: a replay diffs it, a log does not repeat it.
  const changed = system !== t.lastSystem;
  t.lastSystem = system;
  void t.session.emit(
    {
      type: "prompt.compiled",
      manifest,
      ...(changed ? { system: truncate(system, MAX_SYSTEM_RECORDED, { marker: droppedMarker }) } : {}),
    },
    t.turnId,
  );
}

/** A plugin's message edits (compaction), applied in waterfall order; an edit that would break the history is rejected. */
function editMessages(t: Turn, e: { messages: readonly Message[] }, added: Contributed[]): typeof e {
  let next = e;
  for (const c of added) {
    if (c.value.kind !== "message_edit") continue;
    try {
      const messages = applyMessageEdits(next.messages, c.value.edits);
      if (messages[0]?.role !== "user") throw new Error("the history must start with a user message");
      if (!messages.includes(t.inputMessage)) throw new Error("the edit removes or changes this turn's user message");
      if (messages[messages.length - 1]!.role === "assistant")
        throw new Error("the history must not end with an assistant message");
      void t.session.emit(
        {
          type: "context.edited",
          plugin: c.plugin,
          reason: c.value.reason,
          edits: c.value.edits,
          before: next.messages.length,
          after: messages.length,
        },
        t.turnId,
      );
      t.session.messages = messages;
      freezeDeep(messages);
      next = Object.freeze({ ...next, messages });
    } catch (err) {
      const message = new KeelError(
        "KEEL_CONTRIBUTION_INVALID",
        `message_edit rejected (history left as it was): ${err instanceof Error ? err.message : String(err)}.`,
        { plugin: c.plugin, phase: "round.pre_request" },
      ).message;
      void t.session.emit(
        {
          type: "diagnostic",
          level: "warn",
          code: "KEEL_CONTRIBUTION_INVALID",
          message,
          plugin: c.plugin,
          phase: "round.pre_request",
        },
        t.turnId,
      );
    }
  }
  return next;
}

/** 9e. The response's tool calls: skipped in the final round (the turn fails then), else run; a pause sets the verdict. */
async function toolCalls(t: Turn, message: AssistantMessage, stopReason: string | undefined): Promise<void> {
  const calls = toolCallsOf(message);
  if (!calls.length) return;
  if (t.finalGuard) {
    for (const c of calls) await skip(t, c, "Error: tools are disabled in the final round after a limit was reached.");
    t.verdict = {
      status: "failed",
      reason: "final_round_tool_use",
      code: "KEEL_GUARD_TRIPPED",
      message: new KeelError("KEEL_GUARD_TRIPPED", `The model called tools in the final round after ${t.finalGuard}.`)
        .message,
    };
    return;
  }
  await runToolCalls(t, calls, stopReason);
  if (t.pauseFor) t.verdict = { status: "paused", reason: "approval", pending: t.pauseFor.map((p) => p.callId) };
  else if (stopReason) t.verdict = { status: "stopped", reason: "plugin_stop", detail: stopReason };
}

/**
 * 9f. Whether the turn goes on: after a final round it ends; a response with tool calls goes on
 * (their results go to the model); a stop, queued messages, a structured answer to check, or done.
 */
function next(t: Turn, answer: ModelAnswer, stop: string | undefined): void {
  if (t.finalGuard) {
    t.verdict = { status: "stopped", reason: t.finalGuard };
    return;
  }
  if (toolCallsOf(answer.message).length) return;
  if (stop) {
    t.verdict = { status: "stopped", reason: "plugin_stop", detail: stop };
    return;
  }
  if (t.session.steering.length) return;
  if (t.session.followUps.length) return drain(t, "follow_up");
  const r = answer.stopReason;
  const done: TurnVerdict = {
    status: "completed",
    reason:
      r === "max_tokens" || r === "refusal"
        ? r
        : r === "end_turn" || r === "stop_sequence" || r === "tool_use"
          ? "end_turn"
          : "other",
  };
  // Structured output: the answer must parse and match; one corrective round, then a failed verdict.
  const problem = t.outputSpec ? checkOutput(t, t.finalText) : undefined;
  if (!problem) {
    t.verdict = done;
    return;
  }
  if (t.outputRetried) {
    t.verdict = {
      status: "failed",
      reason: "output_invalid",
      code: "KEEL_OUTPUT_INVALID",
      message: new KeelError(
        "KEEL_OUTPUT_INVALID",
        `The answer did not match the output schema after one corrective retry: ${problem}.`,
      ).message,
    };
    return;
  }
  t.outputRetried = true;
  void t.session.emit(
    {
      type: "diagnostic",
      level: "warn",
      code: "KEEL_OUTPUT_INVALID",
      message: `The answer did not match the output schema (${problem}); the model is asked once more.`,
    },
    t.turnId,
  );
  void append(t.session, t.turnId, {
    role: "user",
    content: textContent(
      `Your answer did not match the required output schema: ${problem}. Reply again with only a JSON value that matches the schema, nothing else.`,
    ),
  });
}

/** What a throw from a step means for the turn: its verdict, or the throw itself for a store failure or a lost lease. */
function verdictOf(t: Turn, thrown: unknown): TurnVerdict {
  // What plugin or provider code threw may be a hostile Proxy: inspect a plain stand-in.
  const err = plainThrown(thrown);
  const { signal } = t;
  if (err instanceof TurnFailure) return err.verdict;
  if (signal.aborted && isKeelError(signal.reason, "KEEL_PROCESS_FAULT"))
    return {
      status: "failed",
      reason: "process_fault",
      code: "KEEL_PROCESS_FAULT",
      message: signal.reason.message,
      ...(signal.reason.plugin ? { plugin: signal.reason.plugin } : {}),
      ...(signal.reason.phase ? { phase: signal.reason.phase } : {}),
    };
  if (t.wallCut()) {
    if (!t.wallTripped)
      void t.session.emit(
        { type: "guard.tripped", guard: "wall_time", limit: t.limits.wallTimeMs, value: Date.now() - t.t0 },
        t.turnId,
      );
    return { status: "stopped", reason: "wall_time" };
  }
  if (signal.aborted || (err instanceof ProviderError && err.errorClass === "aborted"))
    return { status: "interrupted", reason: "aborted" };
  if (err instanceof ProviderError)
    return {
      status: "failed",
      reason: "provider_error",
      errorClass: err.errorClass,
      code: "KEEL_PROVIDER_ERROR",
      message: new KeelError(
        "KEEL_PROVIDER_ERROR",
        `${t.agent.options.provider.id}: ${err.message} (class ${err.errorClass}).`,
      ).message,
    };
  if (isKeelError(err) && err.code !== "KEEL_STORE_FAILED" && err.code !== "KEEL_SESSION_BUSY")
    return { status: "failed", reason: "provider_error", code: err.code, message: err.message };
  throw err;
}

/**
 * 10. The turn ends: every call has its result (a paused turn's wait for theirs), turn.post_turn
 * runs (not for a pause), its jobs start, and the terminal event is written durably.
 */
async function closeTurn(t: Turn): Promise<TurnResult> {
  if (isKeelError(t.signal.reason, "KEEL_TURN_HANDED_BACK")) return handBack(t);
  const { session, turnId, verdict } = t;
  const paused = verdict!.status === "paused" && t.pauseFor ? t.pauseFor : undefined;
  if (!paused) repair(t);
  const type = paused
    ? "turn.paused"
    : verdict!.status === "failed"
      ? "turn.failed"
      : verdict!.status === "interrupted"
        ? "turn.interrupted"
        : "turn.completed";
  if (!paused && t.runner.has("turn.post_turn")) {
    // Runs before the terminal event is written so its timing is in it; a crash here still leaves the turn's messages on disk.
    const post = await t.runner.run(
      "turn.post_turn",
      t.event("turn.post_turn", {
        verdict,
        usage: { ...t.usage },
        messages: session.messages.slice(t.startCount),
        finalText: t.finalText,
      }),
      { signal: session.lifetime, owner: t.owner, backgroundSignal: session.lifetime },
    );
    session.record(post, turnId);
    // Jobs first: a durable job's `job.pending` record joins the terminal event's durable write.
    session.startJobs(post.contributions, turnId);
  }
  if (paused)
    session.paused = {
      turnId,
      input: t.input,
      metadata: t.metadata,
      rounds: t.rounds,
      toolCalls: t.toolCalls,
      usage: { ...t.usage },
      requests: new Map(paused.map((p) => [p.callId, p])),
      ...(t.childCalls.size ? { childCalls: t.childCalls } : {}),
    };
  await session.emit(
    {
      type,
      verdict: verdict!,
      usage: t.usage,
      rounds: t.rounds,
      toolCalls: t.toolCalls,
      timings: session.takeTimings(),
    },
    turnId,
    true,
  );
  const output = verdict!.status === "completed" && t.outputSpec ? { output: t.output } : {};
  return {
    sessionId: session.id,
    turnId,
    verdict: verdict!,
    text: t.finalText,
    usage: t.usage,
    rounds: t.rounds,
    toolCalls: t.toolCalls,
    ...(paused ? { pending: paused.map((p) => ({ ...p })) } : {}),
    ...output,
  };
}

/** A turn given back unfinished (its worker is stopping): what it wrote stays, no terminal event, so it goes on elsewhere. */
async function handBack(t: Turn): Promise<TurnResult> {
  await t.session.flush();
  return {
    sessionId: t.session.id,
    turnId: t.turnId,
    verdict: { status: "interrupted", reason: "handed_back" },
    text: t.finalText,
    usage: t.usage,
    rounds: t.rounds,
    toolCalls: t.toolCalls,
  };
}

/** A content digest by the host's seam (as its log stores the content), else the kernel's own hash. */
function digestText(t: Turn, text: string): string {
  const d = t.agent.seams.digest;
  return d ? d.text(text) : hashText(text);
}

/** options.route without a host to route it: the agent's provider serves, and the route is dropped. */
function takeRoute(
  t: Turn,
  options: RequestOptions,
  items: readonly Contributed<ContributionOf<"request_options">>[],
): RequestOptions {
  const round = t.agent.seams.round;
  if (round) return round.take(t, options, items);
  t.route = undefined;
  const { route: _route, ...rest } = options;
  return rest;
}
