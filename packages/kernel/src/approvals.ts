/**
 * The approval point of a tool call: what an `ask` decision becomes. An "always" answer given
 * earlier in the session approves it; an `approve()` callback answers in process; without one
 * the turn pauses (the host answers later, from any process) or, with `ask: "deny"`, the call is
 * denied at once. The loop calls `decideAsk` and acts on its outcome; nothing else here touches it.
 */
import type { ToolDecision } from "./merge.ts";
import { codePointSlice, toWellFormed } from "./text.ts";
import type { ToolCallBlock } from "./messages.ts";
import type { ToolCallView } from "./phases.ts";
import type { Turn } from "./turn-state.ts";
import type { ApprovalAnswer, PendingApproval } from "./verdict.ts";

/** What an ask comes to: run it (approved by the person), deny it, cancel it (the turn was), or pause the turn on it. */
export type AskOutcome =
  | { kind: "approved" }
  | { kind: "denied"; decision: ToolDecision }
  | { kind: "cancelled" }
  | { kind: "pause"; pending: PendingApproval };

/** Decide an `ask` for `call`. Contract: records approval.requested / approval.resolved; never throws for a callback's failure (a denial). */
export async function decideAsk(
  t: Turn,
  call: ToolCallBlock,
  view: ToolCallView,
  decision: ToolDecision,
): Promise<AskOutcome> {
  const { session, turnId, signal } = t;
  const approve = t.agent.options.approve;
  const asking = {
    round: t.rounds,
    callId: call.id,
    name: call.name,
    args: view.args,
    ...(decision.reason ? { reason: decision.reason } : {}),
    ...(decision.plugin ? { plugin: decision.plugin } : {}),
  };
  if (session.alwaysAllowed.has(call.name)) {
    void session.emit(
      { type: "approval.resolved", callId: call.id, name: call.name, approved: true, by: "always" },
      turnId,
    );
    return { kind: "approved" };
  }
  if (approve) {
    void session.emit({ type: "approval.requested", ...asking }, turnId);
    let answer: ApprovalAnswer = { approved: false };
    try {
      const asked = approve({
        sessionId: session.id,
        turnId,
        call: view,
        signal,
        ...(decision.reason ? { reason: decision.reason } : {}),
        ...(decision.plugin ? { plugin: decision.plugin } : {}),
      });
      answer = readAnswer(await raceAbort(Promise.resolve(asked), signal));
    } catch {
      answer = { approved: false };
    }
    if (signal.aborted) return { kind: "cancelled" };
    void session.emit(
      { type: "approval.resolved", callId: call.id, name: call.name, ...answer, by: "callback" },
      turnId,
    );
    if (answer.approved && answer.always) session.alwaysAllowed.add(call.name);
    if (answer.approved) return { kind: "approved" };
    return {
      kind: "denied",
      decision: {
        decision: "deny",
        reason: `the user did not approve it${answer.reason ? ` (${answer.reason})` : ""}`,
        ...(decision.plugin ? { plugin: decision.plugin } : {}),
      },
    };
  }
  if ((t.agent.options.ask ?? "pause") === "pause") {
    // No callback: the turn pauses and the host answers later (session.approve/deny, then resume()).
    void session.emit({ type: "approval.requested", ...asking }, turnId);
    return { kind: "pause", pending: { ...asking, turnId, requestedAt: Date.now() } };
  }
  return {
    kind: "denied",
    decision: {
      decision: "deny",
      reason: 'approval was required, and this agent denies asks (ask: "deny") without an approve() callback',
      ...(decision.plugin ? { plugin: decision.plugin } : {}),
    },
  };
}

/** The approve() callback's answer as an ApprovalAnswer: `true`, or an object read inside a guard. */
function readAnswer(v: unknown): ApprovalAnswer {
  if (v === true) return { approved: true };
  if (v === null || typeof v !== "object") return { approved: false };
  const o = v as Record<string, unknown>;
  const approved = o.approved === true;
  const reason = typeof o.reason === "string" ? codePointSlice(o.reason, 0, 2_000) : undefined;
  const answerer = typeof o.answerer === "string" ? codePointSlice(toWellFormed(o.answerer), 0, 200) : undefined;
  return {
    approved,
    ...(approved && o.always === true ? { always: true } : {}),
    ...(reason ? { reason } : {}),
    ...(answerer ? { answerer } : {}),
  };
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
