/**
 * Paused approvals over A2A: how the calls a turn waits for are told (the `input-required`
 * status message) and how a caller's follow-up message on the same task answers them.
 */
import { headOf } from "@keel/text";
import { z } from "zod";
import type { Message, Part } from "@a2a-js/sdk";
import type { PendingApproval } from "@keel/kernel";

/** How to answer. Contract: the card's skill and every input-required message say it in these words. */
export const ANSWER_HELP =
  'Answer a paused task (state input-required) with a message on the same taskId: the text "approve" or "deny" (then an optional reason) answers every waiting call, or one data part per call {"approve": true|false, "callId": "...", "reason": "..."} (callId may be left out when one call waits).';

/** One answer for one waiting call. */
export interface ApprovalReply {
  callId: string;
  approve: boolean;
  reason?: string;
}

const DataAnswer = z.object({
  approve: z.boolean(),
  callId: z.string().min(1).optional(),
  reason: z.string().optional(),
});

const YES = /^\s*(approve|approved|yes|y|allow|ok)\b[\s:,.-]*/i;
const NO = /^\s*(deny|denied|no|n|reject)\b[\s:,.-]*/i;

/**
 * Read a caller's answers to `waiting` (the unanswered calls).
 * Contract: returns the answers, or a sentence saying what was wrong (never throws); a callId
 * that does not wait is wrong; reasons are cut to 2,000 code points.
 */
export function readReplies(message: Message, waiting: readonly PendingApproval[]): ApprovalReply[] | string {
  const replies: ApprovalReply[] = [];
  const ids = new Set(waiting.map((p) => p.callId));
  for (const part of message.parts) {
    const content = part.content;
    if (content?.$case === "data") {
      const parsed = DataAnswer.safeParse(content.value);
      if (!parsed.success) return `A data part must be {"approve": true|false, "callId"?, "reason"?}. ${ANSWER_HELP}`;
      const callId = parsed.data.callId ?? (waiting.length === 1 ? waiting[0]!.callId : undefined);
      if (callId === undefined) return `Several calls wait: name each one's callId. ${ANSWER_HELP}`;
      if (!ids.has(callId)) return `No call "${headOf(callId, 80)}" waits for approval in this task.`;
      replies.push({ callId, approve: parsed.data.approve, ...reason(parsed.data.reason) });
    } else if (content?.$case === "text") {
      const m = YES.exec(content.value) ?? NO.exec(content.value);
      if (!m) return `"${headOf(content.value, 80)}" is not an answer. ${ANSWER_HELP}`;
      const approve = YES.test(content.value);
      for (const p of waiting) replies.push({ callId: p.callId, approve, ...reason(content.value.slice(m[0].length)) });
    }
  }
  return replies.length ? replies : `The message holds no answer. ${ANSWER_HELP}`;
}

function reason(text: string | undefined): { reason?: string } {
  const t = text?.trim();
  return t ? { reason: headOf(t, 2_000) } : {};
}

/**
 * The input-required message's parts. Contract: a text part (a line per waiting call with why it
 * asks and the plugin that asked, then ANSWER_HELP) and a data part `{ waiting: [{ callId, name, args, reason?, plugin? }] }`.
 */
export function waitingParts(waiting: readonly PendingApproval[]): Part[] {
  const lines = waiting.map(
    (p) =>
      `- ${p.name} ${headOf(JSON.stringify(p.args ?? {}), 500)} (callId ${p.callId})${p.reason ? `: ${p.reason}` : ""}${p.plugin ? ` — asked by ${p.plugin}` : ""}`,
  );
  const text = `${waiting.length === 1 ? "A tool call waits" : `${waiting.length} tool calls wait`} for approval:\n${lines.join("\n")}\n${ANSWER_HELP}`;
  const calls = waiting.map((p) => ({
    callId: p.callId,
    name: p.name,
    args: p.args ?? null,
    ...(p.reason ? { reason: p.reason } : {}),
    ...(p.plugin ? { plugin: p.plugin } : {}),
  }));
  return [
    { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" },
    {
      content: { $case: "data", value: { waiting: calls } },
      metadata: undefined,
      filename: "",
      mediaType: "application/json",
    },
  ];
}
