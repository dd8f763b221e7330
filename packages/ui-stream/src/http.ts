/** @internal What the chat and AG-UI handlers share: reading bodies, error responses, sessions by caller. */
import { z } from "zod";
import { errorMessage, isKeelError, messageText } from "@keel/kernel";
import { isTransientStoreError } from "@keel/agent";
import type { Agent, Session } from "@keel/agent";

/**
 * Which Keel session a chat (useChat's `id`, AG-UI's `threadId`) of one caller is.
 * Contract: keyed by (owner, chat id): the same chat id from another owner is another chat.
 * `set` never replaces a mapping (the first one written wins). A durable map keeps chats across
 * restarts (the sessions themselves are in the agent's store).
 */
export interface ChatSessions {
  get(owner: string, chatId: string): Promise<string | undefined> | string | undefined;
  set(owner: string, chatId: string, sessionId: string): Promise<void> | void;
}

/** A ChatSessions in memory. Contract: the first mapping of a chat wins; forgets every chat when the process ends. */
export function memoryChatSessions(): ChatSessions {
  const map = new Map<string, string>();
  const key = (owner: string, chatId: string) => JSON.stringify([owner, chatId]);
  return {
    get: (owner, chatId) => map.get(key(owner, chatId)),
    set: (owner, chatId, sessionId) => {
      if (!map.has(key(owner, chatId))) map.set(key(owner, chatId), sessionId);
    },
  };
}

/** Options shared by createChatHandler() and createAGUIHandler(). Contract: only `agent` is required. */
export interface ChatHandlerOptions {
  agent: Agent;
  /** How a session is opened (e.g. a host's cache of open handles); default `agent.session(id, { waitMs: 0 })`. */
  open?: (id?: string) => Promise<Session>;
  /**
   * Where chats map to sessions. Default: the agent's own store (`<home>/chats.sqlite` beside
   * the SQLite log, or a table in its PostgreSQL database), so a chat and its waiting approvals
   * survive a restart; in memory only where the agent's sessions are. `"memory"`: this process only.
   */
  chats?: ChatSessions | "memory";
  /**
   * Who is calling (e.g. a hash of the bearer token); undefined refuses the request (401).
   * Default: everyone is one caller, "anonymous" (put authentication in front).
   */
  principal?: (request: Request) => string | undefined | Promise<string | undefined>;
  /** Largest request body in bytes (default 8 MB). */
  maxBodyBytes?: number;
  /** Told of an unexpected error (answered 500 without its details); default: its message on stderr. */
  onError?: (err: unknown) => void;
  /** What a client that stops reading does to the turn: `cancel` (default) or `continue`. */
  onDisconnect?: "cancel" | "continue";
}

/** @internal An error answered with a status and a JSON body before anything is streamed. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const STATUS: Record<string, number> = {
  KEEL_SESSION_NOT_FOUND: 404,
  KEEL_APPROVAL_UNKNOWN: 404,
  KEEL_INPUT_INVALID: 400,
  KEEL_TURN_BUSY: 409,
  KEEL_SESSION_BUSY: 409,
  KEEL_APPROVAL_PENDING: 409,
  KEEL_NOT_PAUSED: 409,
};

/**
 * What a person did to get a refusal, said to them (a page shows `message`): a second tab, a stale
 * tab, a chat busy in another window. The developer's text (ids, API names) stays in `detail`.
 */
const FOR_THE_PERSON: Record<string, string> = {
  KEEL_TURN_BUSY:
    "The assistant is still answering in this chat (perhaps in another tab): wait for the answer, then send again.",
  KEEL_SESSION_BUSY:
    "The assistant is still answering in this chat (perhaps in another tab or window): wait for the answer, then send again.",
  KEEL_APPROVAL_UNKNOWN:
    "This approval was already answered (perhaps in another tab) or is no longer waiting: reload the chat to see where it stands.",
  KEEL_NOT_PAUSED:
    "Nothing in this chat is waiting for an approval any more (perhaps answered in another tab): reload the chat to see where it stands.",
};

/** What the page says while the agent's store is unreachable for a moment (a database outage). */
const STORE_AWAY = "The chat cannot be reached for a moment (its storage is unavailable): try again in a moment.";

/** @internal The JSON error response for what a handler threw. Contract: never a stack; an unexpected error goes to `onError`. */
export function failure(err: unknown, options: Pick<ChatHandlerOptions, "onError">): Response {
  const answer = (status: number, code: string, message: string, headers?: Record<string, string>) =>
    Response.json({ error: { code, message } }, { status, ...(headers ? { headers } : {}) });
  if (err instanceof HttpError) return answer(err.status, err.code, err.message);
  if (err instanceof z.ZodError) return answer(400, "BAD_REQUEST", z.prettifyError(err));
  const report = options.onError ?? ((e) => process.stderr.write(`@keel/ui-stream: ${errorMessage(e)}\n`));
  // The server's own failure: its text (addresses, settings) is the operator's, in the log.
  if (isTransientStoreError(err)) {
    report(err);
    const code = isKeelError(err) ? err.code : "KEEL_STORE_FAILED";
    return Response.json({ error: { code, message: STORE_AWAY } }, { status: 503, headers: { "retry-after": "5" } });
  }
  if (isKeelError(err) && STATUS[err.code] === undefined) {
    report(err);
    return answer(500, err.code, "The request failed inside the server; its log says why.");
  }
  if (isKeelError(err)) {
    const status = STATUS[err.code]!;
    const headers = err.code === "KEEL_SESSION_BUSY" ? { "retry-after": "1" } : undefined;
    const said = FOR_THE_PERSON[err.code];
    if (!said) return answer(status, err.code, err.message, headers);
    return Response.json(
      { error: { code: err.code, message: said, detail: err.message } },
      { status, ...(headers ? { headers } : {}) },
    );
  }
  report(err);
  return answer(500, "INTERNAL", "The request failed inside the server; its log says why.");
}

/** @internal The request's JSON body, parsed with `schema`. */
export async function readBody<T>(request: Request, schema: z.ZodType<T>, maxBytes: number): Promise<T> {
  const tooLarge = new HttpError(413, "BODY_TOO_LARGE", `The request body is larger than ${maxBytes} bytes.`);
  if (Number(request.headers.get("content-length") ?? 0) > maxBytes) throw tooLarge;
  const text = await readCapped(request, maxBytes, tooLarge);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, "BAD_REQUEST", "The request body is not JSON.");
  }
  return schema.parse(parsed);
}

/**
 * The body as text, read chunk by chunk. Contract: stops reading (and cancels the body) as soon
 * as it passes `maxBytes`, so a body without Content-Length (chunked) is never held whole.
 */
async function readCapped(request: Request, maxBytes: number, tooLarge: Error): Promise<string> {
  if (!request.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge;
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** @internal The caller's principal, or a 401. */
export async function callerOf(request: Request, options: ChatHandlerOptions): Promise<string> {
  const who = options.principal ? await options.principal(request) : "anonymous";
  if (!who) throw new HttpError(401, "UNAUTHORIZED", "This server needs credentials (Authorization header).");
  return who;
}

/**
 * @internal The caller's session for a chat: the mapped one, or (when `create`) a new one mapped now.
 * Contract: a chat the caller has not started is 404 unless `create`.
 */
export async function chatSession(
  options: Pick<ChatHandlerOptions, "agent" | "open">,
  chats: ChatSessions,
  owner: string,
  chatId: string,
  create: boolean,
): Promise<Session> {
  const open = options.open ?? ((id?: string) => options.agent.session(id, { waitMs: 0 }));
  const known = await chats.get(owner, chatId);
  if (known) return open(known);
  if (!create) throw new HttpError(404, "NOT_FOUND", `No chat "${chatId}": start it with a user message.`);
  const session = await open();
  await chats.set(owner, chatId, session.id);
  // Two first messages of one chat at once (two processes): the mapping written first wins.
  const mapped = await chats.get(owner, chatId);
  return mapped && mapped !== session.id ? open(mapped) : session;
}

/** @internal A finished call's result text, read from the session's history. */
export function resultText(session: Session): (callId: string) => string | undefined {
  return (callId) => {
    const m = session.messages.findLast((x) => x.role === "tool" && x.toolCallId === callId);
    return m ? messageText(m) : undefined;
  };
}
