/**
 * A fetch-style AG-UI endpoint: a RunAgentInput (validated by @ag-ui/core's schema) runs a turn
 * for its last user message, or, with `resume` entries, answers the interrupts of the paused
 * turn (approvals) and streams the resumed turn. The thread id is the caller's own chat.
 * @ag-ui/core and @ag-ui/encoder are optional peers: checked when the handler is created, loaded
 * on its first request.
 */
import { z } from "zod";
import type { RunAgentInputSchema } from "@ag-ui/core/schemas";
import { streamResume, streamTurn } from "@keel/stream";
import type { Session } from "@keel/agent";
import type { TurnStream } from "@keel/stream";
import { aguiResponse, loadEncoder } from "./ag-ui.ts";
import { assertPeers, loadPeers } from "./peers.ts";
import type { ChatHandlerOptions } from "./http.ts";
import { chatsOf } from "./chat-store.ts";
import { callerOf, chatSession, failure, HttpError, readBody, resultText } from "./http.ts";

/** What a resume entry answering an approval interrupt carries. Contract: `reason` reaches the model on a denial. */
export const ApprovalPayloadSchema = z.strictObject({
  approved: z.boolean(),
  reason: z.string().max(2000).optional(),
});

type RunInput = z.infer<typeof RunAgentInputSchema>;

/** The text of the input's last message, when it is the user's. */
function lastUserText(input: RunInput): string {
  const last = input.messages.at(-1);
  if (last?.role !== "user")
    throw new HttpError(400, "BAD_REQUEST", "The last message must be the user's (or send `resume` entries).");
  // An image, audio, video or document part is refused, never dropped unseen.
  const other = typeof last.content === "string" ? -1 : last.content.findIndex((p) => p.type !== "text");
  if (other >= 0)
    throw new HttpError(
      400,
      "BAD_REQUEST",
      `The last message's content[${other}] is not text: this server takes text only (put its content in the message as text).`,
    );
  const text =
    typeof last.content === "string"
      ? last.content
      : last.content.map((p) => (p.type === "text" ? p.text : "")).join("\n");
  if (!text.trim()) throw new HttpError(400, "BAD_REQUEST", "The last user message has no text.");
  return text;
}

/** Answer the paused turn's interrupts from the resume entries. Contract: every entry is checked before any is written. */
async function answerInterrupts(
  session: Session,
  entries: NonNullable<RunInput["resume"]>,
  owner: string,
): Promise<void> {
  const answers = entries.map((entry, i) => {
    if (entry.status === "cancelled")
      return { id: entry.interruptId, approved: false, reason: "The person cancelled the request." };
    const payload = ApprovalPayloadSchema.safeParse(entry.payload);
    if (!payload.success)
      throw new HttpError(
        400,
        "BAD_REQUEST",
        `resume[${i}].payload: expected {"approved": boolean, "reason"?: string}.`,
      );
    return { id: entry.interruptId, ...payload.data };
  });
  for (const a of answers) {
    // Recorded with the caller who answered (the handler's principal).
    const given = { ...(a.reason ? { reason: a.reason } : {}), answerer: `ag-ui:${owner}` };
    if (a.approved) await session.approve(a.id, given);
    else await session.deny(a.id, given);
  }
  const open = session.pendingApprovals().filter((p) => !p.answer);
  if (open.length)
    throw new HttpError(
      409,
      "KEEL_APPROVAL_PENDING",
      `Answer every interrupt first: ${open.map((p) => p.callId).join(", ")}.`,
    );
}

/**
 * The AG-UI handler, `(Request) => Promise<Response>` for `POST` with a RunAgentInput.
 * Contract: malformed input is a 400 JSON error; errors before the stream are JSON with a status
 * (as createChatHandler); the response is encoded for the request's Accept (SSE or protobuf);
 * a paused turn ends with RUN_FINISHED's `interrupt` outcome, answered by the next run's `resume`.
 * Throws KEEL_PACKAGE_MISSING naming @ag-ui/core or @ag-ui/encoder (optional peers), when the
 * handler is created, if one is not installed.
 */
export function createAGUIHandler(options: ChatHandlerOptions): (request: Request) => Promise<Response> {
  const feature = "An AG-UI endpoint (createAGUIHandler)";
  assertPeers(["@ag-ui/core", "@ag-ui/encoder"], feature);
  const chats = chatsOf(options);
  let schema: Promise<typeof RunAgentInputSchema> | undefined;
  // Loaded by the first request (and again after a failed load); the encoder with it.
  const inputSchema = (): Promise<typeof RunAgentInputSchema> => {
    schema ??= loadPeers(["@ag-ui/core"], feature, async () => {
      const [m] = await Promise.all([import("@ag-ui/core/schemas"), loadEncoder()]);
      return m.RunAgentInputSchema;
    }).catch((err: unknown) => {
      schema = undefined;
      throw err;
    });
    return schema;
  };
  return async (request) => {
    try {
      if (request.method !== "POST") throw new HttpError(405, "METHOD_NOT_ALLOWED", "POST a RunAgentInput.");
      const owner = await callerOf(request, options);
      const input = await readBody(request, await inputSchema(), options.maxBodyBytes ?? 8 * 1024 * 1024);
      const resuming = (input.resume?.length ?? 0) > 0;
      const session = await chatSession(options, chats, owner, input.threadId, !resuming);
      let turn: TurnStream;
      if (resuming) {
        await answerInterrupts(session, input.resume!, owner);
        turn = streamResume(session);
      } else turn = streamTurn(session, lastUserText(input));
      await turn.started;
      return aguiResponse(turn, {
        threadId: input.threadId,
        runId: input.runId,
        accept: request.headers.get("accept"),
        outputOf: resultText(session),
        ...(resuming ? { knownCalls: input.resume!.map((r) => r.interruptId) } : {}),
        headers: { "x-keel-session": session.id },
        ...(options.onDisconnect === "continue" ? { onCancel: () => turn.detach() } : {}),
      });
    } catch (err) {
      return failure(err, options);
    }
  };
}
