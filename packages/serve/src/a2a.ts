/**
 * A Keel agent as an A2A endpoint (JSON-RPC over plain node:http, on @a2a-js/sdk): the agent
 * card at `/.well-known/agent-card.json`, and at `/` the v1.0 methods (SendMessage,
 * SendStreamingMessage, GetTask, CancelTask, ...) and their v0.3 names (message/send,
 * message/stream, tasks/get, tasks/cancel, ...).
 */
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AgentCard, formatSSEEvent, SSE_HEADERS, TaskState } from "@a2a-js/sdk";
import type { CancelTaskRequest, SendMessageRequest } from "@a2a-js/sdk";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { DefaultRequestHandler, JsonRpcTransportHandler, ServerCallContext } from "@a2a-js/sdk/server";
import type { StreamResponse } from "@a2a-js/sdk";
import type { Agent } from "@keel/agent";
import { agentCard, legacyCard } from "./a2a-card.ts";
import type { CardOptions } from "./a2a-card.ts";
import { KeelExecutor } from "./a2a-executor.ts";
import { principalOf, SqliteTaskStore } from "./a2a-tasks.ts";
import { authorize, openOwned } from "./auth.ts";
import type { Bind, SessionOwners } from "./auth.ts";

/** Options of startA2a. Contract: `owners` and `tasksPath` may share one SQLite file (separate tables). */
export interface A2aOptions extends CardOptions {
  agent: Agent;
  owners: SessionOwners;
  /** From resolveBind. */
  bind: Bind;
  /** Where tasks are kept (default in memory; the CLI uses `<home>/serve.sqlite`). */
  tasksPath?: string;
}

/** A running A2A endpoint. Contract: `close()` drops open connections and streams, then the task store. */
export interface A2aServer {
  /** The JSON-RPC endpoint (the card is at `${url}.well-known/agent-card.json`). */
  url: string;
  close(): Promise<void>;
}

const CARD_PATH = "/.well-known/agent-card.json";
const MAX_BODY = 4 * 1024 * 1024;
const MAX_DEPTH = 100;
/** application/json, application/a2a+json and other `+json` types, with or without parameters. */
const JSON_TYPE = /^\s*application\/([\w.-]+\+)?json\s*(;|$)/i;

class Principal {
  private readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
  get isAuthenticated(): boolean {
    return true;
  }
  get userName(): string {
    return this.name;
  }
}

/** What the handler serves from. */
interface Keel {
  agent: Agent;
  owners: SessionOwners;
  store: SqliteTaskStore;
  executor: KeelExecutor;
}

/** The SDK's handler, with A2A contexts bound to the caller's own Keel sessions and one message at a time per task. */
class OwnedHandler extends DefaultRequestHandler {
  private readonly keel: Keel;
  constructor(card: AgentCard, keel: Keel) {
    super(card, keel.store, keel.executor);
    this.keel = keel;
  }

  override async sendMessage(params: SendMessageRequest, context: ServerCallContext) {
    const claim = await this.claim(params, context);
    try {
      await this.bindContext(params, context);
      return await super.sendMessage(params, context);
    } finally {
      if (claim) this.keel.executor.unclaim(claim.taskId, claim.claim);
    }
  }

  override async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const claim = await this.claim(params, context);
    try {
      await this.bindContext(params, context);
      yield* super.sendMessageStream(params, context);
    } finally {
      if (claim) this.keel.executor.unclaim(claim.taskId, claim.claim);
    }
  }

  /** Cancelling a paused task abandons its Keel turn even when no executor holds it (after a restart). */
  override async cancelTask(params: CancelTaskRequest, context: ServerCallContext) {
    const task = params.id ? await this.keel.store.load(params.id, context) : undefined;
    if (task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      const { agent, owners } = this.keel;
      const session = await openOwned(agent, owners, principalOf(context), task.contextId).catch(() => undefined);
      if (session?.pendingApprovals().length) await session.abandonPaused("aborted");
    }
    return super.cancelTask(params, context);
  }

  /**
   * A message on an existing task is refused while that task is still handling another: the
   * SDK would run it on the same event bus, and its KEEL_TURN_BUSY failure would end the task
   * whose turn is still running (dropping that turn's answer).
   */
  private async claim(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): Promise<{ taskId: string; claim: symbol } | undefined> {
    const taskId = params.message?.taskId;
    if (!taskId) return undefined;
    const claim = this.keel.executor.claim(taskId);
    if (claim) return { taskId, claim };
    // Another caller's busy task is "not found", like one that does not exist.
    if (!(await this.keel.store.load(taskId, context))) throw new TaskNotFoundError(`Task not found: ${taskId}`);
    throw new UnsupportedOperationError(
      `Task ${taskId} is still working on an earlier message: wait for its status to be final or input-required (or cancel it), then send this again.`,
    );
  }

  /** A new conversation opens a session for the caller; a named one must be the caller's (else not found). */
  private async bindContext(params: SendMessageRequest, context: ServerCallContext): Promise<void> {
    const message = params.message;
    if (!message || message.taskId) return; // the SDK answers these (a task is loaded as the caller's)
    const principal = principalOf(context);
    if (message.contextId) {
      if (!this.keel.owners.owns(principal, message.contextId))
        throw new TaskNotFoundError(`No conversation "${message.contextId}" (contextId) of yours.`);
      return;
    }
    message.contextId = (await openOwned(this.keel.agent, this.keel.owners, principal)).id;
  }
}

function rpcError(id: unknown, code: number, message: string): object {
  return { jsonrpc: "2.0", id: typeof id === "string" || typeof id === "number" ? id : null, error: { code, message } };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

/** The body, or undefined when it is over MAX_BODY. */
async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY) return undefined;
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** What a request is served with. */
interface Endpoint {
  options: A2aOptions;
  port: number;
  url: string;
  v1: JsonRpcTransportHandler;
  v03: LegacyJsonRpcTransportHandler;
}

/** The body as one JSON-RPC request object, or the JSON-RPC error that answers it. */
async function readRequest(req: IncomingMessage): Promise<Record<string, unknown> | [number, object]> {
  const body = await readBody(req);
  if (body === undefined) return [413, rpcError(null, -32600, "The request is over 4 MiB.")];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [200, rpcError(null, -32700, "Parse error: the body is not JSON.")];
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return [200, rpcError(null, -32600, "Invalid Request: send one JSON-RPC request object.")];
  // The SDK converts and stores messages recursively: deeper JSON overflows its stack midway
  // (after the turn already ran), so it is refused here, before anything runs.
  if (tooDeep(parsed, MAX_DEPTH))
    return [
      200,
      rpcError(
        (parsed as { id?: unknown }).id,
        -32600,
        `Invalid Request: JSON nested deeper than ${MAX_DEPTH} levels.`,
      ),
    ];
  return parsed as Record<string, unknown>;
}

/** Whether `value` nests objects/arrays deeper than `max` (walked without recursion). */
function tooDeep(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [v, depth] = next;
    if (v === null || typeof v !== "object") continue;
    if (depth >= max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** One HTTP request: the card, or a JSON-RPC call by an authorized caller. */
async function route(e: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { agent, bind } = e.options;
  const path = (req.url ?? "/").split("?")[0];
  const caller = authorize(bind, e.port, { host: req.headers.host, authorization: req.headers.authorization });
  if (!caller.ok && (caller.status === 421 || path !== CARD_PATH))
    return sendJson(res, caller.status, rpcError(null, -32600, caller.message), {
      ...(caller.status === 401 ? { "www-authenticate": "Bearer" } : {}),
    });
  if (path === CARD_PATH && req.method === "GET") {
    const here = req.headers.host ? `http://${req.headers.host}/` : e.url;
    const card = agentCard(agent, here, bind.tokens.length > 0, e.options);
    const version = String(req.headers["a2a-version"] ?? "0.3");
    return sendJson(res, 200, version.startsWith("0.") ? legacyCard(card) : AgentCard.toJSON(card), {
      vary: "A2A-Version",
    });
  }
  if (path !== "/" || req.method !== "POST")
    return sendJson(res, 404, rpcError(null, -32600, `POST JSON-RPC to / (the card is at ${CARD_PATH}).`));
  // A web page may POST text/plain to 127.0.0.1 without asking (no CORS preflight); a JSON type it may not.
  if (!JSON_TYPE.test(req.headers["content-type"] ?? ""))
    return sendJson(res, 415, rpcError(null, -32600, "Send the JSON-RPC request with Content-Type: application/json."));
  const request = await readRequest(req);
  if (Array.isArray(request)) return sendJson(res, request[0], request[1]);
  const legacy = typeof request.method === "string" && request.method.includes("/");
  const context = new ServerCallContext({
    user: new Principal((caller.ok && caller.principal) || "local"),
    requestedVersion: legacy ? "0.3" : "1.0",
  });
  const answer = await (legacy ? e.v03 : e.v1).handle(request, context);
  if (!(Symbol.asyncIterator in answer)) return sendJson(res, 200, answer);
  await stream(res, answer as AsyncGenerator<unknown>, request.id);
}

/**
 * Serve `agent` over A2A on `bind`.
 * Contract: the card needs no token (it says which scheme to use) but loopback Host rules apply;
 * every JSON-RPC call needs a token when the bind has any (401 otherwise); each principal sees
 * only its own contexts and tasks (others' are not found, -32001); bad input is a JSON-RPC
 * error (-32700, -32600, -32601, -32602), never a crash; a port in use rejects (EADDRINUSE).
 */
export async function startA2a(options: A2aOptions): Promise<A2aServer> {
  const { agent, owners, bind } = options;
  // The store opens first: one that cannot open leaves nothing listening.
  const store = new SqliteTaskStore(options.tasksPath);
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(bind.port, bind.host, () => (server.off("error", reject), resolve()));
  }).catch((err: unknown) => {
    store.close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  const host = bind.host.includes(":") && !bind.host.startsWith("[") ? `[${bind.host}]` : bind.host;
  const url = `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${port}/`;
  const card = agentCard(agent, url, bind.tokens.length > 0, options);
  const handler = new OwnedHandler(card, { agent, owners, store, executor: new KeelExecutor(agent, owners) });
  const endpoint: Endpoint = {
    options,
    port,
    url,
    v1: new JsonRpcTransportHandler(handler),
    v03: new LegacyJsonRpcTransportHandler(handler),
  };
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    route(endpoint, req, res).catch(() => {
      if (!res.headersSent)
        sendJson(res, 500, rpcError(null, -32603, "Internal error: the request could not be served."));
      else res.end();
    });
  });
  return {
    url,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      store.close();
    },
  };
}

/** Write a JSON-RPC stream as server-sent events; an error before the first event is a plain JSON-RPC error. */
async function stream(res: ServerResponse, events: AsyncGenerator<unknown>, id: unknown): Promise<void> {
  let first: IteratorResult<unknown>;
  try {
    first = await events.next();
  } catch (err) {
    return sendJson(res, 200, rpcError(id, JsonRpcTransportHandler.mapToJSONRPCError(err).code, message(err)));
  }
  res.writeHead(200, SSE_HEADERS);
  try {
    // A caller that leaves does not stop the task: the stream is drained (the SDK stores the task as it is read).
    for (let next = first; !next.done; next = await events.next())
      if (!res.writableEnded && !res.destroyed) res.write(formatSSEEvent(next.value));
  } catch (err) {
    const mapped = JsonRpcTransportHandler.mapToJSONRPCError(err);
    if (!res.destroyed) res.write(`event: error\ndata: ${JSON.stringify(rpcError(id, mapped.code, message(err)))}\n\n`);
  } finally {
    res.end();
  }
}

function message(err: unknown): string {
  return JsonRpcTransportHandler.mapToJSONRPCError(err).message;
}
