/**
 * The HTTP API of the example as one fetch-style handler, `(Request) => Promise<Response>`:
 * it runs as is under any server that speaks Request/Response (server.ts adapts node:http).
 *
 *   POST /sessions                      → 201 {"id"}                     a new session
 *   POST /sessions/:id/turns            {"input"} → text/event-stream   run a turn, streamed
 *   GET  /sessions/:id/approvals        → {"pending": [...]}            calls waiting for a person
 *   POST /sessions/:id/approvals        {"answers": [{"callId", "approve", "always"?, "reason"?}]}
 *                                       → text/event-stream of the resumed turn once nothing is
 *                                         left unanswered, else 200 {"pending": [...]}
 *   GET  /sessions/:id/messages         → {"messages": [{"role", "text"}]}
 *   GET  /sessions/:id/stream           Last-Event-ID header (or ?after=) → text/event-stream of
 *                                         what the client missed, then the live turn to its
 *                                         verdict; 204 when it has seen the end already
 *   POST /api/chat                      useChat's body → the AI SDK UI message stream (@keel/ui-stream):
 *                                         a user message runs a turn, approval answers resume it
 *   GET  /api/chat/:id/messages         → {"messages": [UIMessage]} the chat read back for a reloaded page
 *   GET  /api/chat/:id/stream           the running turn's UI message stream from its start (useChat's
 *                                         `resume: true`); 204 when none runs
 *   POST /api/agui                      an AG-UI RunAgentInput → AG-UI events (`resume` answers interrupts)
 *   GET  /, /assets/*                   the chat page (examples/chat-ui's build), when `staticDir` is given
 *
 * A turn's stream survives its client: a client that disconnects leaves the turn running, and
 * rejoins it from any process with the last SSE id it received.
 *
 * Errors are JSON {"error": {"code", "message"}} with the Keel error code.
 */
import { z } from "zod";
import { KeelError, messageText } from "@keel/kernel";
import { rejoinTurn, sseResponse, streamResume, streamTurn } from "@keel/stream";
import { createAGUIHandler, createChatHandler } from "@keel/ui-stream";
import type { ChatSessions } from "@keel/ui-stream";
import type { Agent, ContentBlock, Session } from "@keel/agent";
import { staticFile } from "./static-files.ts";

/** A string or content blocks; the kernel checks the blocks (KEEL_INPUT_INVALID names the one at fault). */
const InputSchema = z.union([z.string().min(1), z.array(z.unknown())]);
const TurnBody = z.strictObject({ input: InputSchema });
const AnswerBody = z.strictObject({
  answers: z
    .array(
      z.strictObject({
        callId: z.string().min(1),
        approve: z.boolean(),
        always: z.boolean().optional(),
        reason: z.string().max(2000).optional(),
      }),
    )
    .min(1),
});

const STATUS: Record<string, number> = {
  KEEL_SESSION_NOT_FOUND: 404,
  KEEL_APPROVAL_UNKNOWN: 404,
  KEEL_INPUT_INVALID: 400,
  KEEL_STREAM_POSITION_INVALID: 400,
  KEEL_TURN_BUSY: 409,
  KEEL_SESSION_BUSY: 409,
  KEEL_APPROVAL_PENDING: 409,
  KEEL_NOT_PAUSED: 409,
};

function json(status: number, body: unknown): Response {
  return Response.json(body, { status });
}

class BadRequest extends Error {}
const MAX_BODY = 8 * 1024 * 1024;

function failure(err: unknown): Response {
  if (err instanceof BadRequest) return json(400, { error: { code: "BAD_REQUEST", message: err.message } });
  // Another process is running a turn in this session: the client may retry once it has ended.
  if (err instanceof KeelError && err.code === "KEEL_SESSION_BUSY")
    return Response.json(
      { error: { code: err.code, message: err.message } },
      { status: 409, headers: { "retry-after": "1" } },
    );
  if (err instanceof KeelError)
    return json(STATUS[err.code] ?? 500, { error: { code: err.code, message: err.message } });
  if (err instanceof z.ZodError) return json(400, { error: { code: "BAD_REQUEST", message: z.prettifyError(err) } });
  return json(500, { error: { code: "INTERNAL", message: err instanceof Error ? err.message : String(err) } });
}

async function body<T>(request: Request, schema: z.ZodType<T>): Promise<T> {
  const tooLarge = new BadRequest("The request body is larger than 8 MB.");
  if (Number(request.headers.get("content-length") ?? 0) > MAX_BODY) throw tooLarge;
  // Read chunk by chunk and stop past the limit: a chunked body is never held whole.
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of (request.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    // Leaving the loop cancels the body.
    if (size > MAX_BODY) throw tooLarge;
    chunks.push(chunk);
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadRequest("The request body is not JSON.");
  }
  return schema.parse(parsed);
}

/**
 * The handler. Contract: one agent per process, any number of processes on one store: every
 * request may go to any of them. A session handle stays cached between requests until it has
 * been idle for `idleMs` (default 10 minutes), holding no lease: a session is leased only while a
 * turn runs (or an answer is written), so another process reads it, answers its approvals and
 * resumes it; a handle catches up with what other processes wrote before it serves a request.
 */
export function createHandler(
  agent: Agent,
  options: { idleMs?: number; chats?: ChatSessions; staticDir?: string } = {},
): (request: Request) => Promise<Response> {
  const idle = new Map<string, NodeJS.Timeout>();
  const touch = (s: Session): Session => {
    clearTimeout(idle.get(s.id));
    const timer = setTimeout(
      () => (s.busy ? touch(s) : (idle.delete(s.id), void s.close().catch(() => undefined))),
      options.idleMs ?? 600_000,
    );
    idle.set(s.id, timer.unref());
    return s;
  };
  // An open handle reads what other processes wrote first (agent.session does); a turn running elsewhere is 409 at once.
  const session = async (id?: string): Promise<Session> =>
    touch(await agent.session(id === undefined ? undefined : decodeURIComponent(id), { waitMs: 0 }));

  // useChat and AG-UI clients: each chat is a session (one caller here: put authentication in front).
  // A chat disconnected mid-turn (a reload) leaves the turn running for the reloaded page to rejoin.
  const ui = {
    agent,
    open: session,
    onDisconnect: "continue" as const,
    ...(options.chats ? { chats: options.chats } : {}),
  };
  const chat = createChatHandler(ui);
  const agui = createAGUIHandler(ui);

  return async (request) => {
    const pathname = new URL(request.url).pathname;
    if (request.method === "POST" && pathname === "/api/chat") return chat(request);
    if (request.method === "GET" && /^\/api\/chat\/[^/]+\/(messages|stream)$/.test(pathname)) return chat(request);
    if (request.method === "POST" && pathname === "/api/agui") return agui(request);
    if (request.method === "GET" && options.staticDir && !pathname.startsWith("/sessions")) {
      const file = await staticFile(options.staticDir, pathname);
      if (file) return file;
    }
    const path = pathname.split("/").filter(Boolean);
    const route = `${request.method} /${path.map((p, i) => (i % 2 === 1 ? ":id" : p)).join("/")}`;
    try {
      switch (route) {
        case "POST /sessions":
          return json(201, { id: (await session()).id });
        case "POST /sessions/:id/turns": {
          const { input } = await body(request, TurnBody);
          const s = await session(path[1]!);
          // Not tied to the request: a client that disconnects leaves the turn running and may rejoin it.
          const turn = streamTurn(s, input as string | ContentBlock[]);
          // A turn another process is running in this session (409) is answered before any byte is streamed.
          await turn.started;
          return sseResponse(turn, { headers: { "x-keel-session": s.id }, onDisconnect: "continue" });
        }
        case "GET /sessions/:id/approvals":
          return json(200, { pending: (await session(path[1]!)).pendingApprovals() });
        case "POST /sessions/:id/approvals": {
          const { answers } = await body(request, AnswerBody);
          const s = await session(path[1]!);
          for (const a of answers) {
            if (a.approve)
              await s.approve(a.callId, {
                ...(a.always ? { always: true } : {}),
                ...(a.reason ? { reason: a.reason } : {}),
              });
            else await s.deny(a.callId, a.reason ? { reason: a.reason } : {});
          }
          const open = s.pendingApprovals().filter((p) => !p.answer);
          if (open.length) return json(200, { pending: open });
          const turn = streamResume(s);
          await turn.started;
          return sseResponse(turn, { headers: { "x-keel-session": s.id }, onDisconnect: "continue" });
        }
        case "GET /sessions/:id/messages":
          return json(200, {
            messages: (await session(path[1]!)).messages.map((m) => ({ role: m.role, text: messageText(m) })),
          });
        case "GET /sessions/:id/stream": {
          const s = await session(path[1]!);
          const after = request.headers.get("last-event-id") ?? new URL(request.url).searchParams.get("after");
          const rejoined = await rejoinTurn(s, { ...(after !== null ? { after } : {}), signal: request.signal });
          // 204 tells an EventSource that has seen the verdict to stop reconnecting.
          if (rejoined.upToDate) return new Response(null, { status: 204 });
          return sseResponse(rejoined, { headers: { "x-keel-session": s.id } });
        }
        default:
          return json(404, {
            error: {
              code: "NOT_FOUND",
              message: `No route ${request.method} ${new URL(request.url).pathname}. See app.ts for the routes.`,
            },
          });
      }
    } catch (err) {
      return failure(err);
    }
  };
}
