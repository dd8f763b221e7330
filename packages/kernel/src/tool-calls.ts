/**
 * The tool calls of one response, as the loop's `toolCalls` step runs them: grouped (consecutive
 * parallel-safe calls together), each decided in call order (tool.pre_call, the approval point),
 * recorded before it runs, run with its timeout, its result bounded and rewritten
 * (tool.post_result), and appended in call order. Every call gets exactly one result, also when
 * it is skipped, denied, cancelled or its group pauses for approval.
 */
import type { AskOutcome } from "./approvals.ts";
import { decideAsk } from "./approvals.ts";
import type { ChildHold, ChildResumes } from "./child-types.ts";
import type { ContributionOf } from "./contributions.ts";
import { isKeelError, KeelError, errorMessage } from "./errors.ts";
import type { ToolDecision } from "./merge.ts";
import { mergeDecisions } from "./merge.ts";
import type { ContentBlock, ToolCallBlock, ToolResultMessage } from "./messages.ts";
import { freezeDeep, textContent } from "./messages.ts";
import type { ToolCallView } from "./phases.ts";
import type { ToolRun } from "./tool-exec.ts";
import { boundResult, errorResult, executeTool } from "./tool-exec.ts";
import type { ChildOptions, ToolDefinition, TurnBudget } from "./tools.ts";
import type { Turn } from "./turn-state.ts";
import { append, phaseFailed } from "./turn-state.ts";
import { addUsage } from "./usage.ts";
import type { ApprovalAnswer, PendingApproval } from "./verdict.ts";

/** One call after its decision: a result already (refused, denied), a pause, or ready to run. */
interface Prepared {
  call: ToolCallBlock;
  result?: ToolResultMessage;
  /** The call waits for the host's answer: the turn pauses after this group. */
  pause?: PendingApproval;
  ready?: {
    def: ToolDefinition;
    args: unknown;
    timeoutMs: number;
    view: ToolCallView;
    approvedByUser: boolean;
    decision: ToolDecision;
  };
  /** The call's child sessions that wait for approval, with the host's answers (a resumed call). */
  children?: ChildResumes;
  /** Refused before running (invalid arguments): tool.post_result still sees its error result. */
  rejected?: ToolCallView;
}

export const SKIPPED_STEERING = "Skipped due to queued user message.";

/** Run `calls` (one response's, or a resumed turn's unanswered ones). Sets `t.pauseFor` when a group waits for approval. */
export async function runToolCalls(
  t: Turn,
  calls: readonly ToolCallBlock[],
  stopReasonText: string | undefined,
): Promise<void> {
  let skipRest: string | undefined = stopReasonText
    ? `Skipped: a plugin asked to stop (${stopReasonText}).`
    : undefined;
  for (const group of groupsOf(t, calls)) {
    if (handingBack(t)) return;
    if (!skipRest && t.signal.aborted) skipRest = "Cancelled: the turn was cancelled before this call started.";
    // Steering queued at any point before a group starts (also during the model's stream) skips it.
    if (!skipRest && t.session.steering.length) skipRest = SKIPPED_STEERING;
    if (skipRest) {
      for (const c of group) await skip(t, c, skipRest, t.signal.aborted ? "cancelled" : "skipped");
      continue;
    }
    // Decisions in call order, then the runs concurrently, then results in call order.
    const prepared: Prepared[] = [];
    for (const c of group) prepared.push(await prepare(t, c));
    // Tools may have side effects: their calls (the assistant message, tool.started) reach the
    // store before they run, so a process killed mid-tool resumes with the call (and repairs it).
    await t.session.flush();
    const holds: ChildHold[] = prepared.map((p) => (p.children ? { resume: p.children } : {}));
    const running = holds.filter((_, i) => prepared[i]!.ready);
    for (const h of running) h.group = running;
    const runs = await Promise.all(
      prepared.map((p, i) =>
        p.ready ? execute(t, p, holds[i]!).finally(() => void (holds[i]!.done = true)) : undefined,
      ),
    );
    if (await settleGroup(t, prepared, holds, runs)) return;
  }
}

/** Consecutive parallel-safe calls together; every other call alone. */
function groupsOf(t: Turn, calls: readonly ToolCallBlock[]): ToolCallBlock[][] {
  const groups: Array<{ parallel: boolean; calls: ToolCallBlock[] }> = [];
  for (const c of calls) {
    const tool = t.tools.get(c.name);
    const parallel = tool
      ? (tool.def.parallel ??
        (tool.def.category === undefined || tool.def.category === "info" || tool.def.category === "mcp"))
      : true;
    const last = groups[groups.length - 1];
    if (parallel && last?.parallel) last.calls.push(c);
    else groups.push({ parallel, calls: [c] });
  }
  return groups.map((g) => g.calls);
}

function execute(t: Turn, p: Prepared, hold: ChildHold): Promise<ToolRun> {
  const r = p.ready!;
  const answer = r.decision.answer;
  if (answer) {
    const content = typeof answer.content === "string" ? textContent(answer.content) : answer.content;
    const result = {
      role: "tool" as const,
      toolCallId: p.call.id,
      toolName: p.call.name,
      content,
      isError: answer.isError,
    };
    return Promise.resolve({
      status: answer.isError ? "error" : "ok",
      result,
      durationMs: 0,
      ...(answer.reveal ? { reveal: answer.reveal } : {}),
    });
  }
  const ctx = {
    callId: p.call.id,
    toolName: p.call.name,
    sessionId: t.session.id,
    turnId: t.turnId,
    budget: budget(t),
    depth: t.agent.depth,
    rerun: !!p.children,
    child: <O>(o: ChildOptions<O>, callSignal?: AbortSignal) =>
      t.session.runChild(
        t.turnId,
        p.call.id,
        callSignal ?? t.signal,
        o,
        budget(t),
        (u) => {
          // A child's spend is the parent turn's and the parent session's (budgets count it).
          addUsage(t.usage, u);
          addUsage(t.session.spend, u);
        },
        hold,
      ),
  };
  return executeTool(r.def, r.args, ctx, r.timeoutMs, t.signal, r.view.source.plugin, progressOf(t, p.call));
}

/**
 * After a group ran: children left waiting are ended or waited on, results appended in call
 * order. Returns true when the group waits for approval (the turn pauses).
 */
async function settleGroup(
  t: Turn,
  prepared: Prepared[],
  holds: ChildHold[],
  runs: Array<ToolRun | undefined>,
): Promise<boolean> {
  // Given back: the calls that ran stay as they are in the log (started, no result), as after a crash.
  if (handingBack(t)) return false;
  const waiting: PendingApproval[] = [];
  for (const [i, p] of prepared.entries()) {
    const hold = holds[i]!;
    hold.closed = true;
    // A child the call did not resume this time, or one that paused in a call that was cut short, waits for no one.
    for (const [n, left] of hold.resume ?? []) {
      void t.session.emit(
        {
          type: "diagnostic",
          level: "warn",
          code: "KEEL_CHILD_INVALID",
          message: `Call ${p.call.id} (${p.call.name}) ran again without resuming its child ${n} (session ${left.sessionId}, "${left.name}"), which waited for approval: that child's turn was ended. A tool must start the same children in the same order when it runs again.`,
        },
        t.turnId,
      );
      await t.session.abandonChild(left.sessionId);
    }
    const cut = runs[i] && runs[i]!.status !== "ok" && runs[i]!.status !== "error";
    if ((cut || t.signal.aborted) && hold.paused?.length) {
      for (const id of new Set(hold.paused.map((w) => w.via!.sessionId))) await t.session.abandonChild(id);
      hold.paused = undefined;
    }
    if (p.pause) waiting.push(p.pause);
    else if (hold.paused?.length) {
      // A child waits for approval: so does this call (whatever the tool returned); it runs again on resume.
      for (const w of hold.paused) {
        void t.session.emit(
          {
            type: "approval.requested",
            round: t.rounds,
            callId: w.callId,
            name: w.name,
            args: w.args,
            ...(w.reason !== undefined ? { reason: w.reason } : {}),
            ...(w.plugin !== undefined ? { plugin: w.plugin } : {}),
            via: w.via!,
          },
          t.turnId,
        );
        waiting.push({ ...w, turnId: t.turnId, round: t.rounds });
      }
      t.childCalls.set(p.call.id, p.ready!.args);
    } else await append(t.session, t.turnId, await finish(t, p, runs[i]));
  }
  if (!waiting.length) return false;
  if (!t.signal.aborted) {
    t.pauseFor = waiting;
    return true;
  }
  // Cancelled while deciding: nothing waits for an answer; each call gets its result now.
  for (const w of waiting.filter((w) => !w.via))
    await skip(
      t,
      prepared.find((p) => p.call.id === w.callId)!.call,
      "Cancelled: the turn was cancelled while this call waited for approval.",
      "cancelled",
    );
  for (const p of prepared.filter((p) => waiting.some((w) => w.via?.callId === p.call.id)))
    await skip(
      t,
      p.call,
      "Cancelled: the turn was cancelled while this call's child waited for approval.",
      "cancelled",
    );
  t.childCalls.clear();
  return false;
}

/** What is left of the turn's limits now. */
function budget(t: Turn): TurnBudget {
  const { limits, usage } = t;
  const left = t.agent.seams.round?.leftUsd(t);
  return {
    rounds: Math.max(0, limits.maxRounds - t.rounds),
    toolCalls: Math.max(0, limits.maxToolCalls - t.toolCalls),
    tokens: Math.max(0, limits.tokenBudget - (usage.inputTokens + usage.outputTokens)),
    wallMs: Math.max(0, limits.wallTimeMs - (Date.now() - t.t0)),
    ...(left !== undefined ? { costUsd: Math.max(0, left) } : {}),
  };
}

function progressOf(
  t: Turn,
  call: ToolCallBlock,
): ((p: { message: string; fraction?: number; elapsedMs: number }) => void) | undefined {
  if (!t.agent.hasListeners) return undefined;
  return (p) =>
    t.session.live({
      type: "tool.progress",
      sessionId: t.session.id,
      turnId: t.turnId,
      callId: call.id,
      name: call.name,
      ...p,
    });
}

/** Record how a call ended. */
export function completed(
  t: Turn,
  call: ToolCallBlock,
  status: "ok" | "error" | "timeout" | "denied" | "skipped" | "cancelled",
  extra: {
    durationMs?: number;
    decision?: string;
    rewrittenBy?: string[];
    answeredBy?: string;
    raw?: { content: ContentBlock[]; isError: boolean };
  } = {},
): void {
  void t.session.emit(
    {
      type: "tool.completed",
      round: t.rounds,
      callId: call.id,
      name: call.name,
      status,
      durationMs: extra.durationMs ?? 0,
      ...(extra.decision ? { decision: extra.decision } : {}),
      ...(extra.rewrittenBy ? { rewrittenBy: extra.rewrittenBy } : {}),
      ...(extra.answeredBy ? { answeredBy: extra.answeredBy } : {}),
      ...(extra.raw ? { raw: extra.raw } : {}),
    },
    t.turnId,
  );
}

/** Child sessions a resumed call waited on (PendingApproval.via). */
function waitingChildren(t: Turn, callId: string): string[] {
  const resume = t.resume;
  // A call a stopped process cut that will not run again: its children (left unfinished) end too.
  const cut = resume?.recovery?.children.get(callId)?.map((c) => c.childSessionId) ?? [];
  return resume?.childCalls?.has(callId)
    ? [
        ...new Set([
          ...[...resume.requests.values()].flatMap((r) => (r.via?.callId === callId ? [r.via.sessionId] : [])),
          ...cut,
        ]),
      ]
    : cut;
}

/** The turn is being given back unfinished (a stopping worker): calls get no results, so the next claimer settles them. */
function handingBack(t: Turn): boolean {
  return isKeelError(t.signal.reason, "KEEL_TURN_HANDED_BACK");
}

/** Give a call that will not run its one result. */
export async function skip(
  t: Turn,
  call: ToolCallBlock,
  text: string,
  status: "skipped" | "cancelled" | "denied" = "skipped",
): Promise<void> {
  // A call that waited on a child and will not run: nobody passes the answers on, so the child ends.
  for (const id of waitingChildren(t, call.id)) await t.session.abandonChild(id);
  completed(t, call, status);
  await append(t.session, t.turnId, errorResult(call.id, call.name, text));
}

/** A call a stopped process cut that does not run again: its "interrupted" result; the child sessions it started have no one to go on for. */
async function cutForGood(t: Turn, call: ToolCallBlock): Promise<Prepared | undefined> {
  const cut = t.resume?.recovery?.interrupted?.get(call.id);
  if (cut === undefined) return undefined;
  for (const c of t.resume!.recovery!.children.get(call.id) ?? []) await t.session.abandonChild(c.childSessionId);
  completed(t, call, "cancelled");
  return { call, result: errorResult(call.id, call.name, cut) };
}

/** A call past the turn's tool-call limit: skipped, with a result saying so. */
function overLimit(t: Turn, call: ToolCallBlock): Prepared {
  completed(t, call, "skipped");
  const text = `Skipped: this turn reached its limit of ${t.limits.maxToolCalls} tool calls.`;
  return { call, result: errorResult(call.id, call.name, text) };
}

/** Decide one call: counted, its tool found, tool.pre_call and the approval point, its arguments checked. */
async function prepare(t: Turn, call: ToolCallBlock): Promise<Prepared> {
  const cut = await cutForGood(t, call);
  if (cut) return cut;
  if (t.resume?.childCalls?.has(call.id)) return await prepareAgain(t, call, t.resume.childCalls.get(call.id));
  // A call the host answered after a pause: counted and decided before, it takes the answer as its decision.
  const answered = t.answers.get(call.id);
  t.answers.delete(call.id);
  if (!answered && t.toolCalls >= t.limits.maxToolCalls) return overLimit(t, call);
  if (!answered) t.toolCalls++;
  const resolved = t.tools.get(call.name);
  if (!resolved) {
    completed(t, call, "error");
    const text =
      t.mode === "chat"
        ? "Error: this session is in chat mode: no tools are available (the host switches modes between turns). Answer from the conversation."
        : `Error: ${new KeelError("KEEL_TOOL_UNKNOWN", `There is no tool "${call.name}". Available: ${[...t.tools.keys()].slice(0, 40).join(", ") || "(none)"}.`, { tool: call.name }).message}`;
    return { call, result: errorResult(call.id, call.name, text) };
  }
  const def = resolved.def;
  // Checked against the tool's schema before any plugin decides: every handler sees the
  // arguments the tool will run with (defaults filled, coercions done).
  let checked = parseArgs(def, answered ? answered.args : call.args);
  let view: ToolCallView = freezeDeep({
    id: call.id,
    name: call.name,
    args: checked.ok ? frozenCopy(checked.args) : answered ? answered.args : call.args,
    category: def.category ?? "info",
    source: { ...resolved.source },
  });
  let decision: ToolDecision = { decision: "allow" };
  let approvedByUser = false;
  if (answered) {
    // Read back from a store, arguments that held a secret hold its placeholder: never run a call with it.
    if (answered.answer!.approved && holdsPlaceholder(answered.args)) {
      completed(t, call, "error");
      return {
        call,
        result: errorResult(
          call.id,
          call.name,
          `Error: ${new KeelError("KEEL_APPROVAL_ARGS_REDACTED", "This call was approved, but its arguments held a secret that was not stored, so it was not run. Call it again if it is still needed.", { tool: call.name }).message}`,
        ),
      };
    }
    if (answered.answer!.approved) approvedByUser = true;
    else decision = { decision: "deny", reason: answered.answer!.reason ?? "no reason given", plugin: "the user" };
  } else ({ view, decision, checked } = await preCall(t, def, view, checked));
  // Arguments that do not fit are refused before anyone is asked (a deny still names its plugin).
  if (!checked.ok && decision.decision !== "deny") return rejected(t, call, view, checked);
  if (decision.decision === "ask") {
    const asked: AskOutcome = await decideAsk(t, call, view, decision);
    if (asked.kind === "cancelled") {
      completed(t, call, "cancelled");
      return {
        call,
        result: errorResult(call.id, call.name, "Cancelled: the turn was cancelled while waiting for approval."),
      };
    }
    if (asked.kind === "pause") return { call, pause: asked.pending };
    if (asked.kind === "approved") approvedByUser = true;
    else decision = asked.decision;
  }
  if (decision.decision === "deny") {
    completed(t, call, "denied", { decision: `deny${decision.plugin ? ` by ${decision.plugin}` : ""}` });
    return {
      call,
      result: errorResult(
        call.id,
        call.name,
        `Error: ${new KeelError("KEEL_TOOL_DENIED", `The call was denied${decision.plugin ? ` by ${decision.plugin}` : ""}${decision.reason ? `: ${decision.reason}` : ""}.`, { tool: call.name }).message}`,
      ),
    };
  }
  return ready(t, call, def, view, (checked as { args: unknown }).args, approvedByUser, decision);
}

/**
 * tool.pre_call: the plugins' decisions (deny beats ask beats allow), with any argument rewrite
 * applied in order. A rewrite is checked against the tool's schema at once, so the handlers
 * after it (and the tool) see it with its defaults filled; one that does not fit is refused.
 */
async function preCall(
  t: Turn,
  def: ToolDefinition,
  given: ToolCallView,
  first: Checked,
): Promise<{ view: ToolCallView; decision: ToolDecision; checked: Checked }> {
  if (!t.runner.has("tool.pre_call")) return { view: given, decision: { decision: "allow" }, checked: first };
  let view = given;
  let checked = first;
  const res = await t.runner.run("tool.pre_call", t.event("tool.pre_call", { round: t.rounds, call: view }), {
    signal: t.signal,
    owner: t.owner,
    backgroundSignal: t.session.lifetime,
    step: (e, added) => {
      const withArgs = added.filter((c) => c.value.kind === "tool_decision" && c.value.args !== undefined);
      if (!withArgs.length) return e;
      const last = withArgs[withArgs.length - 1]!;
      const args = (last.value as ContributionOf<"tool_decision">).args;
      checked = { ...parseArgs(def, args), by: last.plugin };
      view = freezeDeep({ ...view, args: checked.ok ? frozenCopy(checked.args) : args });
      return Object.freeze({ ...e, call: view });
    },
  });
  t.session.record(res, t.turnId);
  if (!res.failed) return { view, decision: mergeDecisions(t.of(res, "tool_decision")), checked };
  const failure = (res.failed.details as { failure?: string } | undefined)?.failure;
  if (failure === "required") throw phaseFailed(res.failed);
  return {
    view,
    checked,
    decision: {
      decision: "deny",
      reason: `a fail-closed check failed: ${res.failed.message}`,
      ...(res.failed.plugin ? { plugin: res.failed.plugin } : {}),
    },
  };
}

/** A call's arguments as its tool reads them, or why they do not fit; `by`: the plugin whose rewrite they are. */
type Checked = ({ ok: true; args: unknown } | { ok: false; issues: string }) & { by?: string };

/**
 * `args` against the tool's schema: zod's output (defaults filled, coercions done), or, for a
 * tool given as plain JSON Schema (`parameters`, as MCP tools are), the top-level properties'
 * `default`s filled where an argument is left out. Contract: never throws (the schema is plugin code).
 */
function parseArgs(def: ToolDefinition, args: unknown): Checked {
  if (!def.input) return { ok: true, args: withDefaults(def.parameters, args) };
  let parsed:
    | ReturnType<NonNullable<ToolDefinition["input"]>["safeParse"]>
    | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };
  try {
    parsed = def.input.safeParse(args);
    if (parsed.success) return { ok: true, args: parsed.data };
  } catch (err) {
    parsed = {
      success: false,
      error: { issues: [{ path: [], message: `validating the arguments threw: ${errorMessage(err)}` }] },
    };
  }
  try {
    const issues = parsed.error.issues
      .slice(0, 5)
      .map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`)
      .join("; ");
    return { ok: false, issues };
  } catch (err) {
    return { ok: false, issues: `(root): the schema's issues could not be read: ${errorMessage(err)}` };
  }
}

/** `args` with the JSON Schema's top-level `default`s filled where an argument is absent; `args` itself when none applies. */
function withDefaults(schema: unknown, args: unknown): unknown {
  if (!isPlain(args)) return args;
  try {
    const props = (schema as { properties?: unknown } | undefined)?.properties;
    if (!isPlain(props)) return args;
    let out: Record<string, unknown> | undefined;
    for (const [k, s] of Object.entries(props)) {
      if (!isPlain(s) || !Object.hasOwn(s, "default") || (Object.hasOwn(args, k) && args[k] !== undefined)) continue;
      const value = JSON.stringify(s.default);
      if (value === undefined) continue;
      out ??= { ...args };
      out[k] = JSON.parse(value);
    }
    return out ?? args;
  } catch {
    return args;
  }
}

function isPlain(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** A frozen copy of the plain objects and arrays in `v` (other objects shared as they are): plugins see what the tool gets, and cannot touch it. */
function frozenCopy(v: unknown, depth = 0): unknown {
  if (depth >= 64 || typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) return Object.freeze(v.map((x) => frozenCopy(x, depth + 1)));
  if (!isPlain(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = frozenCopy(x, depth + 1);
  return Object.freeze(out);
}

/** A call whose arguments do not fit its tool: refused (tool.post_result still sees the failure: a retry controller counts it). */
function rejected(t: Turn, call: ToolCallBlock, view: ToolCallView, checked: Checked & { ok: false }): Prepared {
  completed(t, call, "error");
  const by = checked.by ? ` (rewritten by ${checked.by} at tool.pre_call)` : "";
  return {
    call,
    result: errorResult(
      call.id,
      call.name,
      `Error: ${new KeelError("KEEL_TOOL_ARGS_INVALID", `Invalid arguments${by} — ${checked.issues}.`, { tool: call.name, ...(checked.by ? { plugin: checked.by, phase: "tool.pre_call" } : {}) }).message}`,
    ),
    rejected: view,
  };
}

/** A call ready to run with `args`, exactly what was decided on: recorded as started. */
function ready(
  t: Turn,
  call: ToolCallBlock,
  def: ToolDefinition,
  view: ToolCallView,
  args: unknown,
  approvedByUser: boolean,
  decision: ToolDecision,
): Prepared {
  void t.session.emit({ type: "tool.started", round: t.rounds, callId: call.id, name: call.name, args }, t.turnId);
  return {
    call,
    ready: {
      def,
      args,
      timeoutMs: def.timeoutMs ?? t.agent.toolTimeouts[def.category ?? "info"],
      view,
      approvedByUser,
      decision,
    },
  };
}

/** A call whose child waited for approval: decided and counted before, it runs again with the answers. */
async function prepareAgain(t: Turn, call: ToolCallBlock, args: unknown): Promise<Prepared> {
  const children: ChildResumes = new Map();
  // A call a stopped process cut: its children go on from their logs, in the order it started them.
  for (const [i, c] of (t.resume?.recovery?.children.get(call.id) ?? []).entries())
    children.set(i + 1, { sessionId: c.childSessionId, name: c.name, answers: new Map(), recover: true });
  for (const [id, a] of t.answers) {
    if (a.via?.callId !== call.id) continue;
    t.answers.delete(id);
    const entry = children.get(a.via.ordinal) ?? {
      sessionId: a.via.sessionId,
      name: a.via.child,
      answers: new Map<string, ApprovalAnswer>(),
    };
    entry.answers.set(a.via.childCallId, a.answer!);
    children.set(a.via.ordinal, entry);
  }
  const resolved = t.tools.get(call.name);
  let problem: KeelError | undefined;
  if (!resolved)
    problem = new KeelError(
      "KEEL_TOOL_UNKNOWN",
      `The tool "${call.name}" is gone since this call ${t.resume?.recovery ? "was cut by a stopped process" : "paused"}; the child session(s) it waited on were ended.`,
      { tool: call.name },
    );
  else if (resolved.def.input && !fits(resolved.def, args))
    problem = new KeelError(
      "KEEL_TOOL_ARGS_INVALID",
      `The arguments this call ${t.resume?.recovery ? "started" : "paused"} with no longer fit "${call.name}" (its definition changed); the child session(s) it waited on were ended.`,
      { tool: call.name },
    );
  if (problem || !resolved) {
    for (const c of children.values()) await t.session.abandonChild(c.sessionId);
    completed(t, call, "error");
    return { call, result: errorResult(call.id, call.name, `Error: ${problem!.message}`) };
  }
  const view: ToolCallView = freezeDeep({
    id: call.id,
    name: call.name,
    args,
    category: resolved.def.category ?? "info",
    source: { ...resolved.source },
  });
  void t.session.emit({ type: "tool.started", round: t.rounds, callId: call.id, name: call.name, args }, t.turnId);
  return {
    call,
    children,
    ready: {
      def: resolved.def,
      args,
      timeoutMs: resolved.def.timeoutMs ?? t.agent.toolTimeouts[resolved.def.category ?? "info"],
      view,
      approvedByUser: false,
      decision: { decision: "allow" },
    },
  };
}

/** The tool may have changed since the pause (another process, another config): its arguments are checked again. */
function fits(def: ToolDefinition, args: unknown): boolean {
  try {
    return def.input!.safeParse(args).success;
  } catch {
    return false;
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

/** Show hidden tools for the rest of the turn (a tool's output revealed them). */
function reveal(t: Turn, by: string, names: readonly string[]): void {
  const added = [...new Set(names)].filter((n) => t.tools.has(n) && !t.visible.has(n));
  const unknown = names.filter((n) => !t.tools.has(n));
  if (!added.length && !unknown.length) return;
  for (const n of added) t.visible.add(n);
  if (added.length) t.revealedSince = true;
  void t.session.emit({ type: "tools.revealed", by, names: added, ...(unknown.length ? { unknown } : {}) }, t.turnId);
}

/** A call's one result: bounded, rewritten by tool.post_result, recorded. */
async function finish(t: Turn, p: Prepared, run: ToolRun | undefined): Promise<ToolResultMessage> {
  if (p.rejected && t.runner.has("tool.post_result"))
    return afterResult(t, p.rejected, freezeDeep(p.result!), 0, false);
  if (!p.ready || !run) return p.result!;
  const { call } = p;
  const { view, approvedByUser, decision } = p.ready;
  let result: ToolResultMessage = freezeDeep(
    boundResult(run.result, t.limits.maxToolResultChars, t.limits.maxToolResultImageBytes),
  );
  const raw = result;
  if (run.status !== "cancelled" && t.runner.has("tool.post_result"))
    result = await afterResult(t, view, result, run.durationMs, approvedByUser);
  if (run.reveal?.length) reveal(t, call.name, run.reveal);
  const owner = view.source.plugin;
  if (run.unhide && owner) reveal(t, call.name, [...(t.hiddenByPlugins.byPlugin.get(owner) ?? [])]);
  completed(t, call, run.status, {
    durationMs: run.durationMs,
    ...(approvedByUser ? { decision: "ask→approved" } : decision.plugin ? { decision: decision.decision } : {}),
    ...(decision.answer ? { answeredBy: decision.answer.plugin } : {}),
    // What the tool returned before plugins rewrote it: a replay feeds it to today's plugins.
    ...(result.rewrittenBy
      ? { rewrittenBy: result.rewrittenBy, raw: { content: raw.content, isError: raw.isError } }
      : {}),
  });
  return result;
}

/** tool.post_result over a result: rewrites applied in order, then the size cap again. */
async function afterResult(
  t: Turn,
  view: ToolCallView,
  given: ToolResultMessage,
  durationMs: number,
  approvedByUser: boolean,
): Promise<ToolResultMessage> {
  let result = given;
  const res = await t.runner.run(
    "tool.post_result",
    t.event("tool.post_result", { round: t.rounds, call: view, result, durationMs, approvedByUser }),
    {
      signal: t.signal,
      owner: t.owner,
      backgroundSignal: t.session.lifetime,
      step: (e, added) => {
        for (const c of added) {
          if (c.value.kind !== "tool_result_rewrite") continue;
          const v = c.value;
          result = freezeDeep({
            ...result,
            content: typeof v.content === "string" ? textContent(v.content) : v.content,
            isError: v.isError ?? result.isError,
            rewrittenBy: [...(result.rewrittenBy ?? []), c.plugin],
          });
        }
        return Object.freeze({ ...e, result });
      },
    },
  );
  t.session.record(res, t.turnId);
  if (res.failed) throw phaseFailed(res.failed);
  return freezeDeep(boundResult(result, t.limits.maxToolResultChars, t.limits.maxToolResultImageBytes));
}
