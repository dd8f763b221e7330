/**
 * A chat read back from its session's log, for a page that reloads: its messages as the AI SDK's
 * UIMessages (what `useChat({ messages })` takes, a waiting approval in `approval-requested`),
 * and the turn still running as a UI message stream a reload rejoins (useChat's `resume: true`).
 */
import type { UIMessage, UIMessageChunk } from "ai";
import { isTerminalEvent, messageText } from "@keel/kernel";
import type { KeelEvent, TurnResult } from "@keel/kernel";
import type { Session } from "@keel/agent";
import { rejoinTurn } from "@keel/stream";
import type { TurnStreamEvent } from "@keel/stream";
import { resultText } from "./http.ts";
import { loadPeers } from "./peers.ts";
import { UIChunkMapper, uiMessageStreamResponse } from "./ui-message-stream.ts";

/** What reads a reloaded chat back: the AI SDK's `ai` (an optional peer), loaded on first use. */
let reader: Promise<typeof import("ai")["readUIMessageStream"]> | undefined;

/** The AI SDK's readUIMessageStream. Contract: rejects with KEEL_PACKAGE_MISSING naming `ai` when it is not installed (tried again next time). */
function uiMessageReader(): Promise<typeof import("ai")["readUIMessageStream"]> {
  reader ??= loadPeers(
    ["ai"],
    "Reading a chat back (chatMessages, createChatHandler's GET messages)",
    async () => (await import("ai")).readUIMessageStream,
  ).catch((err: unknown) => {
    reader = undefined;
    throw err;
  });
  return reader;
}

/** The assistant message a turn streams into (the `start` chunk's id when the handler is not given one). */
export const turnMessageId = (turnId: string): string => `keel-${turnId}`;

/** What one turn of the log says, as the turn stream would have said it. */
interface TurnLog {
  turnId: string;
  events: TurnStreamEvent[];
  /** The last terminal event's verdict (a pause is dropped when the turn resumes). */
  verdict: TurnStreamEvent | undefined;
  answers: Map<string, { approved: boolean; reason?: string }>;
}

/** The verdict event of a terminal stored event. */
function verdictOf(e: KeelEvent): TurnStreamEvent | undefined {
  if (!isTerminalEvent(e) || !("verdict" in e)) return undefined;
  const result = {
    sessionId: e.sessionId,
    turnId: e.turnId!,
    verdict: e.verdict,
    text: "",
    usage: e.usage,
    rounds: e.rounds,
    toolCalls: e.toolCalls,
  } as TurnResult;
  return { type: "verdict", result, id: String(e.seq) };
}

/**
 * The session's log as UIMessages: each turn's input a user message, each turn one assistant
 * message (`keel-<turn id>`, the id its stream started) built by the AI SDK's own reader from
 * the chunks the turn streamed (text whole, reasoning, tool parts with their outputs).
 * Contract: a call waiting for a person is `approval-requested` (`approval.id` = Keel call id),
 * one answered but not yet resumed `approval-responded`; a turn still running is there as far
 * as the log goes (a rejoin replaces it whole). Needs the package `ai` (an optional peer):
 * rejects with KEEL_PACKAGE_MISSING naming it, before reading the log, when it is not installed.
 */
export async function chatMessages(session: Session): Promise<UIMessage[]> {
  const readUIMessageStream = await uiMessageReader();
  // What this handle wrote last (a turn running here, a cut turn its opening marked interrupted) is read too.
  await session.flush().catch(() => undefined);
  const log = await session.agent.store.events(session.id);
  const results = new Map<string, string>();
  const out: Array<UIMessage | TurnLog> = [];
  let turn: TurnLog | undefined;
  let round = 0;
  for (const e of log) {
    if (e.type === "turn.started") {
      if (e.trigger === "user" || e.trigger === "follow_up")
        out.push({ id: `keel-input-${e.seq}`, role: "user", parts: [{ type: "text", text: e.input }] });
      turn = {
        turnId: e.turnId!,
        events: [{ type: "turn.started", turnId: e.turnId!, resumed: false }],
        verdict: undefined,
        answers: new Map(),
      };
      out.push(turn);
    } else if (!turn || e.turnId !== turn.turnId) continue;
    else if (e.type === "turn.resumed") turn.verdict = undefined;
    else if (e.type === "model.responded") round = e.round;
    else if (e.type === "message.appended") {
      const m = e.message;
      if (m.role === "tool") results.set(m.toolCallId, messageText(m));
      else if (m.role === "assistant")
        for (const b of m.content) {
          if (b.type === "text" && b.text) turn.events.push({ type: "text", delta: b.text, round, id: String(e.seq) });
          else if (b.type === "thinking" && b.text && !b.redacted)
            turn.events.push({ type: "thinking", delta: b.text, round, id: `${e.seq}r` });
        }
    } else if (e.type === "tool.started")
      turn.events.push({ type: "tool.started", callId: e.callId, name: e.name, args: e.args, round: e.round });
    else if (e.type === "approval.requested")
      turn.events.push({
        type: "approval.requested",
        callId: e.callId,
        name: e.name,
        args: e.args,
        ...(e.reason !== undefined ? { reason: e.reason } : {}),
        ...(e.plugin !== undefined ? { plugin: e.plugin } : {}),
      });
    else if (e.type === "approval.resolved")
      turn.answers.set(e.callId, { approved: e.approved, ...(e.reason ? { reason: e.reason } : {}) });
    else if (e.type === "tool.completed")
      turn.events.push({
        type: "tool.finished",
        callId: e.callId,
        name: e.name,
        status: e.status,
        durationMs: e.durationMs,
        ...(e.decision ? { decision: e.decision } : {}),
      });
    else if (isTerminalEvent(e)) turn.verdict = verdictOf(e);
  }
  const messages: UIMessage[] = [];
  for (const item of out) {
    if (!("turnId" in item)) messages.push(item);
    else {
      const m = await assistantMessage(item, (id) => results.get(id), readUIMessageStream);
      if (m) messages.push(m);
    }
  }
  return messages;
}

/** A turn's assistant message, assembled by the AI SDK from the chunks its events map to. */
async function assistantMessage(
  turn: TurnLog,
  outputOf: (callId: string) => unknown,
  readUIMessageStream: typeof import("ai")["readUIMessageStream"],
): Promise<UIMessage | undefined> {
  const mapper = new UIChunkMapper({ messageId: turnMessageId(turn.turnId), outputOf });
  const chunks = [...turn.events, ...(turn.verdict ? [turn.verdict] : [])].flatMap((e) => mapper.map(e));
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
  let message: UIMessage | undefined;
  // An `error` chunk (a failed turn) is the page's error, not a part: the reader reports it here.
  for await (const m of readUIMessageStream({ stream, onError: () => undefined })) message = m;
  if (!message) return undefined;
  // An answer written before the turn resumed: the part shows it, as addToolApprovalResponse left it.
  for (const part of message.parts as Array<{ state?: string; approval?: { id: string } }>) {
    const answer = part.state === "approval-requested" && part.approval && turn.answers.get(part.approval.id);
    if (answer) Object.assign(part, { state: "approval-responded", approval: { id: part.approval!.id, ...answer } });
  }
  // A turn that ended (not a pause) with a call still open: its process stopped mid-call. Failed, with why.
  const status = turn.verdict?.type === "verdict" ? turn.verdict.result.verdict.status : undefined;
  if (status && status !== "paused")
    for (const part of message.parts as Array<{ type: string; state?: string; approval?: { approved?: boolean } }>) {
      if (!OPEN.has(part.state ?? "") || !(part.type.startsWith("tool-") || part.type === "dynamic-tool")) continue;
      const ran = part.state !== "approval-requested" && part.approval?.approved !== false;
      const errorText = !ran
        ? `The turn ended (${status}) before this call was answered: it did not run.`
        : status === "interrupted"
          ? "The process running the turn stopped before this call finished: it may have run, but no result was recorded."
          : `The turn ended (${status}) before this call finished: it may have run, but no result was recorded.`;
      if (!ran) delete part.approval;
      Object.assign(part, { state: "output-error", errorText });
    }
  return message.parts.length ? message : undefined;
}

/** Tool part states of a call with no result yet. */
const OPEN = new Set(["input-streaming", "input-available", "approval-requested", "approval-responded"]);

/**
 * The response to useChat's reconnect (`GET {api}/{chat id}/stream`): 204 when no turn of the
 * session runs, else the running turn's assistant message replayed from its start (the AI SDK's
 * `resumeStreamIsReplay`: the client rebuilds that message from these chunks), then followed
 * live, from this process's events or the store, to its end.
 * Contract: the message id is `keel-<turn id>` (chatMessages' id for it); the pause of a turn
 * that was answered and resumed is not replayed as its end; a client that goes away stops
 * following, never the turn.
 */
export async function rejoinResponse(
  session: Session,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<Response> {
  // What this handle wrote last (a turn running here, a cut turn its opening marked interrupted) is read too.
  await session.flush().catch(() => undefined);
  const log = await session.agent.store.events(session.id);
  const latest = log.findLast((e) => e.type === "turn.started" || e.type === "turn.resumed");
  const ended = latest && log.some((e) => e.seq > latest.seq && e.turnId === latest.turnId && isTerminalEvent(e));
  if (!latest || (ended && !session.busy)) return new Response(null, { status: 204 });
  const start = log.find((e) => e.type === "turn.started" && e.turnId === latest.turnId) ?? latest;
  // Calls answered before the turn resumed show as running, not as asking again (no chunk says "answered").
  const answered = new Map<string, number>();
  for (const e of log)
    if (e.type === "approval.requested" && e.turnId === latest.turnId) answered.set(e.callId, e.round);
  for (const callId of answered.keys())
    if (!log.some((e) => e.type === "approval.resolved" && e.callId === callId)) answered.delete(callId);
  const rejoined = await rejoinTurn(session, { after: start.seq - 1, signal });
  const live = (async function* () {
    for await (const e of rejoined) {
      // A pause the turn has since resumed from is history, not this stream's end.
      if (e.type === "verdict" && Number(e.id) < latest.seq) continue;
      if (e.type === "approval.requested" && answered.has(e.callId))
        yield {
          type: "tool.started",
          callId: e.callId,
          name: e.name,
          args: e.args,
          round: answered.get(e.callId)!,
          ...(e.id ? { id: e.id } : {}),
        } as TurnStreamEvent;
      else yield e;
    }
  })();
  return uiMessageStreamResponse(live, {
    messageId: turnMessageId(latest.turnId!),
    outputOf: resultText(session),
    headers,
  });
}
