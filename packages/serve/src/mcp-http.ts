/**
 * The MCP server over Streamable HTTP (node:http + the SDK's transport), stateful: each MCP
 * session (Mcp-Session-Id) has its own McpServer, bound to the caller that opened it.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { authorize } from "./auth.ts";
import type { Bind } from "./auth.ts";
import { parseMessages, RPC, rpcError } from "./jsonrpc.ts";
import { ServedAgent } from "./mcp-tools.ts";
import type { McpServeOptions } from "./mcp-tools.ts";

/** Options of the HTTP server: the agent's, and a checked bind (resolveBind). */
export interface McpHttpOptions extends McpServeOptions {
  bind: Bind;
  /** The path served (default /mcp). */
  path?: string;
  /** An MCP session with no request for this long is closed (default 30 minutes). */
  idleMs?: number;
}

/** A running server: its URL (the MCP endpoint) and how to stop it. */
export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

type Entry = {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  principal: string;
  /** When it last saw a request, and how many are in flight. */
  seen: number;
  active: number;
};

const MAX_BODY = 4 * 1024 * 1024;

function send(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

/** The request body as text; undefined once it passed MAX_BODY (answered 413). */
async function readBody(req: IncomingMessage, res: ServerResponse): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) {
      send(res, 413, rpcError(RPC.invalid, `Invalid Request: the body is over ${MAX_BODY} bytes`), {
        connection: "close",
      });
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The MCP sessions of one HTTP server, and how each request reaches its own. */
class Router {
  private readonly sessions = new Map<string, Entry>();
  private readonly served: ServedAgent;
  private readonly options: McpHttpOptions;
  port = 0;

  constructor(options: McpHttpOptions) {
    this.options = options;
    this.served = new ServedAgent(options);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = this.options.path ?? "/mcp";
    if (new URL(req.url ?? "/", "http://localhost").pathname !== path)
      return send(res, 404, rpcError(RPC.server, `Not found: the MCP endpoint is ${path}`));
    const sid = req.headers["mcp-session-id"];
    const sessionId = typeof sid === "string" ? sid : undefined;
    const caller = authorize(this.options.bind, this.port, req.headers, sessionId ? `mcp:${sessionId}` : "");
    if (!caller.ok)
      return send(
        res,
        caller.status,
        rpcError(RPC.server, caller.message),
        caller.status === 401 ? { "www-authenticate": "Bearer" } : {},
      );
    const entry = sessionId ? this.sessions.get(sessionId) : undefined;
    if (sessionId && entry?.principal !== caller.principal)
      return send(res, 404, rpcError(RPC.noSession, "Session not found: initialize a new MCP session"));
    if (entry) entry.seen = Date.now();
    if (req.method !== "POST") {
      if (!entry) return send(res, 400, rpcError(RPC.server, "Bad Request: Mcp-Session-Id header is required"));
      return this.within(entry, () => entry.transport.handleRequest(req, res));
    }
    const text = await readBody(req, res);
    if (text === undefined) return;
    const parsed = parseMessages(text);
    if (!parsed.ok) return send(res, 400, parsed.error);
    const body = JSON.parse(text) as unknown;
    if (entry) return this.within(entry, () => entry.transport.handleRequest(req, res, body));
    if (!parsed.messages.some((m) => isInitializeRequest(m)))
      return send(res, 400, rpcError(RPC.server, "Bad Request: no Mcp-Session-Id; send initialize first"));
    const entryNew = await this.open(this.options.bind.tokens.length ? caller.principal : undefined);
    return this.within(entryNew, () => entryNew.transport.handleRequest(req, res, body));
  }

  /** A new MCP session for `principal` (else its own id), known once initialized. */
  private async open(principal: string | undefined): Promise<Entry> {
    const id = randomUUID();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessioninitialized: (sid) => void this.sessions.set(sid, entry),
      onsessionclosed: (sid) => void this.sessions.delete(sid),
    });
    const entry: Entry = {
      principal: principal ?? `mcp:${id}`,
      server: this.served.server(principal ?? `mcp:${id}`),
      transport,
      seen: Date.now(),
      active: 0,
    };
    transport.onclose = () => void this.sessions.delete(id);
    await entry.server.connect(transport);
    return entry;
  }

  /** Count a request (or an open GET stream) as activity, so an idle sweep leaves the session alone. */
  private async within(entry: Entry, fn: () => Promise<void>): Promise<void> {
    entry.active++;
    try {
      await fn();
    } finally {
      entry.active--;
      entry.seen = Date.now();
    }
  }

  /** Close the MCP sessions idle for `idleMs` (no request in flight, none since). */
  sweep(idleMs: number): void {
    const now = Date.now();
    for (const [id, e] of this.sessions)
      if (e.active === 0 && now - e.seen > idleMs) {
        this.sessions.delete(id);
        void e.server.close().catch(() => {});
      }
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(all.map((e) => e.server.close()));
  }
}

/**
 * Serve the agent over Streamable HTTP on `bind`.
 * Contract: every request passes `authorize` (loopback Host, bearer token); the caller's
 * principal is its token's, else its MCP session's id; a malformed body gets a JSON-RPC error
 * with HTTP 400, an unknown or another caller's session id 404, and the server goes on; an
 * MCP session idle for `idleMs` is closed (its Keel sessions stay, owned as before).
 */
export async function startMcpHttp(options: McpHttpOptions): Promise<RunningServer> {
  const router = new Router(options);
  const http = createServer((req, res) => {
    router.handle(req, res).catch((err: unknown) => {
      options.note?.(`keel serve: an MCP request failed: ${err instanceof Error ? err.message : String(err)}`);
      send(res, 500, rpcError(RPC.internal, "Internal error"));
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.bind.port, options.bind.host, () => resolve());
  });
  router.port = (http.address() as AddressInfo).port;
  const idleMs = options.idleMs ?? 30 * 60_000;
  const sweeper = setInterval(() => router.sweep(idleMs), Math.min(60_000, idleMs)).unref();
  const host = options.bind.host.includes(":") ? `[${options.bind.host}]` : options.bind.host;
  const shown = host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host;
  return {
    url: `http://${shown}:${router.port}${options.path ?? "/mcp"}`,
    async close() {
      clearInterval(sweeper);
      await router.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
