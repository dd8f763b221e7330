/**
 * A fetch-style handler for `useChat` (the AI SDK's DefaultChatTransport): a new user message
 * runs a turn; an assistant message carrying approval answers answers the session's paused
 * approvals and streams the resumed turn. Both answer in the UI message stream protocol. A page
 * that reloads reads the chat back (`GET {api}/{id}/messages`) and rejoins a running turn
 * (`GET {api}/{id}/stream`, useChat's `resume: true`).
 */
import { z } from "zod";
import { isKeelError } from "@keel/kernel";
import type { Session } from "@keel/agent";
import { streamResume, streamTurn } from "@keel/stream";
import type { TurnStream } from "@keel/stream";
import { chatMessages, rejoinResponse } from "./chat-history.ts";
import { chatsOf } from "./chat-store.ts";
import type { ChatHandlerOptions, ChatSessions } from "./http.ts";
import { callerOf, chatSession, failure, HttpError, readBody, resultText } from "./http.ts";
import { assertPeers } from "./peers.ts";
import { uiMessageStreamResponse } from "./ui-message-stream.ts";

const Part = z.looseObject({ type: z.string().min(1).max(200) });
const UIMessage = z.looseObject({
  id: z.string().max(500),
  role: z.enum(["system", "user", "assistant"]),
  parts: z.array(Part).max(10_000),
});

/** The body DefaultChatTransport posts. Contract: extra fields (the transport's `body`) are allowed. */
export const ChatRequestSchema = z.looseObject({
  id: z.string().min(1).max(500),
  messages: z.array(UIMessage).min(1).max(100_000),
  trigger: z.enum(["submit-message", "regenerate-message"]),
  messageId: z.string().max(500).optional(),
});

/** An answered approval, as useChat's addToolApprovalResponse leaves it on a tool part. */
const Responded = z.looseObject({
  type: z.string().regex(/^(tool-.+|dynamic-tool)$/),
  toolCallId: z.string().min(1).max(500),
  state: z.literal("approval-responded"),
  approval: z.looseObject({
    id: z.string().min(1).max(500),
    approved: z.boolean(),
    reason: z.string().max(2000).optional(),
  }),
});

const ToolPart = z.looseObject({ type: z.string().regex(/^(tool-.+|dynamic-tool)$/), toolCallId: z.string() });

type ChatMessage = z.infer<typeof UIMessage>;

/** The text of a user message's text parts. Contract: a file part is a 400, never dropped unseen. */
function userText(message: ChatMessage): string {
  const file = message.parts.findIndex((p) => p.type === "file");
  if (file >= 0)
    throw new HttpError(
      400,
      "BAD_REQUEST",
      `messages[-1].parts[${file}] is a file: this server takes text only (put the file's content in the message as text).`,
    );
  return message.parts
    .map((p) => (p.type === "text" && typeof p.text === "string" ? p.text : ""))
    .filter(Boolean)
    .join("\n");
}

/** `GET …/<chat id>/messages` or `GET …/<chat id>/stream`: the chat id and what is asked. */
function readRoute(request: Request): { chatId: string; what: "messages" | "stream" } | undefined {
  const path = new URL(request.url).pathname.split("/");
  const what = path.at(-1);
  if ((what !== "messages" && what !== "stream") || path.length < 3) return undefined;
  try {
    const chatId = decodeURIComponent(path.at(-2)!);
    return chatId && chatId.length <= 500 ? { chatId, what } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The chat handler, `(Request) => Promise<Response>`: `POST` with useChat's body; `GET
 * {api}/{chat id}/messages` → `{ messages }` (UIMessages for `useChat({ messages })`, a waiting
 * approval in `approval-requested`); `GET {api}/{chat id}/stream` → the running turn's stream
 * replayed from its start, or 204 when none runs (useChat's `resume: true`).
 * Contract: malformed bodies are 400 JSON errors; the chat id is the caller's own (another
 * caller's id is another chat: no messages, nothing to rejoin); errors before the stream starts
 * are JSON with a status (409 for a busy session or a message sent while an approval waits, its
 * text telling the person what to do; 404 for an unknown chat or approval); once streaming,
 * failures are the protocol's `error` chunk. `regenerate-message` is refused (400): a Keel
 * session's history is append-only. Chats are kept in the agent's store unless `chats` says otherwise.
 * Needs the package `ai` (an optional peer: its reader builds a reloaded chat's messages): throws
 * KEEL_PACKAGE_MISSING naming it, when the handler is created, if it is not installed.
 */
export function createChatHandler(options: ChatHandlerOptions): (request: Request) => Promise<Response> {
  assertPeers(["ai"], "A useChat endpoint (createChatHandler)");
  const chats = chatsOf(options);
  return async (request) => {
    try {
      const read = request.method === "GET" ? readRoute(request) : undefined;
      if (read) return await readChat(options, chats, await callerOf(request, options), read, request.signal);
      if (request.method !== "POST")
        throw new HttpError(
          405,
          "METHOD_NOT_ALLOWED",
          "POST useChat's request body; GET <api>/<chat id>/messages or <api>/<chat id>/stream.",
        );
      const owner = await callerOf(request, options);
      const body = await readBody(request, ChatRequestSchema, options.maxBodyBytes ?? 8 * 1024 * 1024);
      if (body.trigger === "regenerate-message")
        throw new HttpError(400, "BAD_REQUEST", "Regenerating a message is not supported: send a new message.");
      const last = body.messages.at(-1)!;
      if (last.role === "user") return await runTurn(options, chats, owner, body.id, last);
      if (last.role === "assistant") return await answer(options, chats, owner, body.id, last);
      throw new HttpError(400, "BAD_REQUEST", "The last message must be the user's or carry approval answers.");
    } catch (err) {
      return failure(err, options);
    }
  };
}

async function runTurn(
  options: ChatHandlerOptions,
  chats: ChatSessions,
  owner: string,
  chatId: string,
  last: ChatMessage,
): Promise<Response> {
  const text = userText(last);
  if (!text.trim()) throw new HttpError(400, "BAD_REQUEST", "The last user message has no text part.");
  const session = await chatSession(options, chats, owner, chatId, true);
  refuseWhileWaiting(session);
  const turn = streamTurn(session, text);
  try {
    await turn.started;
  } catch (err) {
    // Paused by another process since this handle last read the log.
    if (isKeelError(err, "KEEL_APPROVAL_PENDING")) refuseWhileWaiting(session, true);
    throw err;
  }
  return respond(options, turn, session.id, { outputOf: resultText(session) });
}

async function answer(
  options: ChatHandlerOptions,
  chats: ChatSessions,
  owner: string,
  chatId: string,
  last: ChatMessage,
): Promise<Response> {
  // A part in state approval-responded that is not a well-formed answer is a 400 naming it, not skipped.
  const answers = last.parts.flatMap((p, i) => {
    if (p.state !== "approval-responded") return [];
    const r = Responded.safeParse(p);
    if (!r.success) throw new HttpError(400, "BAD_REQUEST", `messages[-1].parts[${i}]: ${z.prettifyError(r.error)}`);
    return [r.data];
  });
  if (!answers.length)
    throw new HttpError(400, "BAD_REQUEST", "The last message is the assistant's but answers no approval.");
  const session = await chatSession(options, chats, owner, chatId, false);
  const waiting = new Map(session.pendingApprovals().map((p) => [p.callId, p]));
  for (const a of answers) {
    const pending = waiting.get(a.approval.id);
    // An answer the session already has (a retried request) is not written twice.
    if (pending?.answer) continue;
    // Recorded with the caller who answered (the handler's principal).
    const given = { ...(a.approval.reason ? { reason: a.approval.reason } : {}), answerer: `chat:${owner}` };
    if (a.approval.approved) await session.approve(a.approval.id, given);
    else await session.deny(a.approval.id, given);
  }
  const open = session.pendingApprovals().filter((p) => !p.answer);
  if (open.length)
    throw new HttpError(
      409,
      "KEEL_APPROVAL_PENDING",
      `Answer every waiting call before the turn goes on: ${open.map((p) => `"${p.name}" (${p.callId})`).join(", ")} still ${open.length > 1 ? "wait" : "waits"} for approval.`,
    );
  const turn = streamResume(session);
  await turn.started;
  const knownCalls = last.parts.flatMap((p) => {
    const r = ToolPart.safeParse(p);
    return r.success ? [r.data.toolCallId] : [];
  });
  return respond(options, turn, session.id, { messageId: last.id, knownCalls, outputOf: resultText(session) });
}

/**
 * A new message while a call waits for approval is a 409 telling the person what to do: answer
 * the waiting call first (the page keeps the message to send again). Contract: KEEL_APPROVAL_PENDING.
 */
function refuseWhileWaiting(session: Session, always = false): void {
  const waiting = session.pendingApprovals().filter((p) => !p.answer);
  if (!waiting.length && !always) return;
  const names = [...new Set(waiting.map((p) => p.name))];
  const what = names.length ? names.map((n) => `"${n}"`).join(", ") : "A tool call";
  throw new HttpError(
    409,
    "KEEL_APPROVAL_PENDING",
    `${what} ${waiting.length > 1 ? "are" : "is"} waiting for your approval: approve or deny ${waiting.length > 1 ? "them" : "it"} first, then send your message again.`,
  );
}

/** The chat read back for a page that reloads: its messages, or its running turn's stream. */
async function readChat(
  options: ChatHandlerOptions,
  chats: ChatSessions,
  owner: string,
  route: { chatId: string; what: "messages" | "stream" },
  signal: AbortSignal,
): Promise<Response> {
  const known = await chats.get(owner, route.chatId);
  // A chat not started (or another caller's) has nothing to show and nothing to rejoin.
  if (!known) return route.what === "messages" ? Response.json({ messages: [] }) : new Response(null, { status: 204 });
  const session = await chatSession(options, chats, owner, route.chatId, false);
  if (route.what === "messages")
    return Response.json({ messages: await chatMessages(session) }, { headers: { "x-keel-session": session.id } });
  return rejoinResponse(session, signal, { "x-keel-session": session.id });
}

function respond(
  options: ChatHandlerOptions,
  turn: TurnStream,
  sessionId: string,
  init: { messageId?: string; knownCalls?: string[]; outputOf: (callId: string) => unknown },
): Response {
  return uiMessageStreamResponse(turn, {
    ...init,
    headers: { "x-keel-session": sessionId },
    ...(options.onDisconnect === "continue" ? { onCancel: () => turn.detach() } : {}),
  });
}
