/**
 * One served turn: run (or resume) it in the caller's session, answer its approvals through
 * the client when it can be asked (MCP elicitation), report progress, and turn the result
 * into an MCP tool result: the answer and the session id, the calls a paused turn waits for,
 * or a clear error (never a stack).
 */
import type { AgentEvent, ApprovalAnswer, PendingApproval, Session, TurnResult } from "@keel/agent";
import { errorMessage, isKeelError } from "@keel/kernel";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { truncate } from "@keel/text";

/** Asks the caller about one call; undefined leaves the turn paused. */
export type Asker = (pending: PendingApproval, signal: AbortSignal) => Promise<ApprovalAnswer | undefined>;

/** What the `ask` and `approve` tools return as structured content. */
export interface TurnAnswer {
  [key: string]: unknown;
  session_id: string;
  status: "completed" | "paused" | "stopped" | "failed" | "interrupted";
  answer: string;
  pending?: Array<{ call_id: string; tool: string; args?: unknown; reason?: string; plugin?: string }>;
}

/**
 * Answer what the session waits for through `ask` and resume, until the turn ends, or the
 * caller leaves a call unanswered. Contract: the pause is durable before anyone is asked.
 */
export async function settle(
  session: Session,
  result: TurnResult,
  ask: Asker | undefined,
  signal: AbortSignal,
): Promise<TurnResult> {
  while (ask && result.verdict.status === "paused") {
    await session.flush();
    for (const p of session.pendingApprovals().filter((q) => !q.answer)) {
      const answer = await ask(p, signal);
      if (!answer) return result;
      await answerCall(session, p.callId, answer);
    }
    result = await session.resume({ signal });
  }
  return result;
}

/** Store one answer (durable before any resume). */
export async function answerCall(session: Session, callId: string, a: ApprovalAnswer): Promise<void> {
  const who = a.answerer ? { answerer: a.answerer } : {};
  if (a.approved) await session.approve(callId, { ...(a.always ? { always: true } : {}), ...who });
  else await session.deny(callId, { ...(a.reason ? { reason: a.reason } : {}), ...who });
}

function argsText(args: unknown): string {
  try {
    return truncate(JSON.stringify(args) ?? "", 300);
  } catch {
    return "(arguments not shown)";
  }
}

/** Why a call asks and who asked, as ` (reason — asked by plugin)`; "" when the decision said neither. */
export function why(p: Pick<PendingApproval, "reason" | "plugin">): string {
  const said = [p.reason, p.plugin ? `asked by ${p.plugin}` : undefined].filter(Boolean).join(" — ");
  return said ? ` (${said})` : "";
}

/** The calls a paused session waits for, one line each. */
export function waitingLines(session: Session): string[] {
  return session
    .pendingApprovals()
    .filter((p) => !p.answer)
    .map((p) => `- ${p.callId}: ${p.name} ${argsText(p.args)}${why(p)}`);
}

/** The MCP result of a finished, paused or failed turn. Contract: failures are isError with the reason. */
export function turnResult(session: Session, result: TurnResult): CallToolResult {
  const v = result.verdict;
  const id = session.id;
  const more = `session_id: ${id} (pass it to ask to continue this conversation)`;
  if (v.status === "completed") {
    const answer: TurnAnswer = { session_id: id, status: "completed", answer: result.text };
    return { content: [text(result.text || "(the agent gave no text)"), text(more)], structuredContent: answer };
  }
  if (v.status === "paused") return pausedResult(session, result.text);
  const why =
    v.status === "failed"
      ? `The turn failed (${v.reason}${v.plugin ? `, ${v.plugin}` : ""}): ${v.message}`
      : v.status === "stopped"
        ? `The turn was stopped (${v.reason})${v.detail ? `: ${v.detail}` : ""}.${result.text ? ` Its last text: ${result.text}` : ""}`
        : `The turn was interrupted (${v.reason}); ask again to go on.`;
  return errorResult(`${why}\n${more}`);
}

/** The MCP result of a session whose turn waits for approval: which calls, and how to answer. */
export function pausedResult(session: Session, said = ""): CallToolResult {
  const id = session.id;
  const pending = session
    .pendingApprovals()
    .filter((p) => !p.answer)
    .map((p) => ({
      call_id: p.callId,
      tool: p.name,
      args: p.args,
      ...(p.reason ? { reason: p.reason } : {}),
      ...(p.plugin ? { plugin: p.plugin } : {}),
    }));
  const says = `The turn is paused: ${pending.length} tool call(s) wait for approval:\n${waitingLines(session).join("\n")}\nAnswer with the approve tool (session_id "${id}", decision allow, always or deny; call_id for one call, else all).`;
  const answer: TurnAnswer = { session_id: id, status: "paused", answer: said, pending };
  return { content: [text(says), text(`session_id: ${id}`)], structuredContent: answer };
}

/** An isError tool result for a thrown error: its message (a KeelError's says what to do), never a stack. */
export function thrownResult(err: unknown): CallToolResult {
  return errorResult(isKeelError(err) ? err.message : `The agent could not answer: ${errorMessage(err)}`);
}

export function errorResult(message: string): CallToolResult {
  return { content: [text(message)], isError: true };
}

function text(t: string): { type: "text"; text: string } {
  return { type: "text", text: t };
}

/** A short line for a progress notification about `e`, or undefined for events not worth one. */
export function progressLine(e: AgentEvent): string | undefined {
  switch (e.type) {
    case "turn.started":
      return "turn started";
    case "model.responded":
      return `round ${e.round} answered`;
    case "tool.started":
      return `calling ${e.name}`;
    case "tool.completed":
      return `${e.name} ${e.status}`;
    case "tool.progress":
      return `${e.name}: ${truncate(e.message, 200)}`;
    case "approval.requested":
      return `${e.name} waits for approval`;
    default:
      return undefined;
  }
}
