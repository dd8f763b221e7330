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
}

/** A running server: its URL (the MCP endpoint) and how to stop it. */
export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

type Entry = { transport: StreamableHTTPServerTransport; server: McpServer; principal: string };

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

/**
 * Serve the agent over Streamable HTTP on `bind`.
 * Contract: every request passes `authorize` (loopback Host, bearer token); the caller's
 * principal is its token's, else its MCP session's id; a malformed body gets a JSON-RPC error
 * with HTTP 400, an unknown or another caller's session id 404, and the server goes on.
 */
export async function startMcpHttp(options: McpHttpOptions): Promise<RunningServer> {
  const served = new ServedAgent(options);
  const path = options.path ?? "/mcp";
  const sessions = new Map<string, Entry>();
  let port = 0;

  const open = async (principal: string | undefined, req: IncomingMessage, res: ServerResponse, body: unknown) => {
    const id = randomUUID();
    const entry: Entry = {
      principal: principal ?? `mcp:${id}`,
      server: undefined as unknown as McpServer,
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => id,
        onsessioninitialized: (sid) => void sessions.set(sid, entry),
        onsessionclosed: (sid) => void sessions.delete(sid),
      }),
    };
    entry.server = served.server(entry.principal);
    entry.transport.onclose = () => void sessions.delete(id);
    await entry.server.connect(entry.transport);
    await entry.transport.handleRequest(req, res, body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== path) return send(res, 404, rpcError(RPC.server, `Not found: the MCP endpoint is ${path}`));
    const sid = req.headers["mcp-session-id"];
    const sessionId = typeof sid === "string" ? sid : undefined;
    const caller = authorize(options.bind, port, req.headers, sessionId ? `mcp:${sessionId}` : "");
    if (!caller.ok)
      return send(
        res,
        caller.status,
        rpcError(RPC.server, caller.message),
        caller.status === 401 ? { "www-authenticate": "Bearer" } : {},
      );
    const entry = sessionId ? sessions.get(sessionId) : undefined;
    if (sessionId && entry?.principal !== caller.principal)
      return send(res, 404, rpcError(RPC.noSession, "Session not found: initialize a new MCP session"));
    if (req.method !== "POST") {
      if (!entry) return send(res, 400, rpcError(RPC.server, "Bad Request: Mcp-Session-Id header is required"));
      return entry.transport.handleRequest(req, res);
    }
    const text = await readBody(req, res);
    if (text === undefined) return;
    const parsed = parseMessages(text);
    if (!parsed.ok) return send(res, 400, parsed.error);
    const body = JSON.parse(text) as unknown;
    if (entry) return entry.transport.handleRequest(req, res, body);
    if (!parsed.messages.some((m) => isInitializeRequest(m)))
      return send(res, 400, rpcError(RPC.server, "Bad Request: no Mcp-Session-Id; send initialize first"));
    return open(options.bind.tokens.length ? caller.principal : undefined, req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      options.note?.(`keel serve: an MCP request failed: ${err instanceof Error ? err.message : String(err)}`);
      send(res, 500, rpcError(RPC.internal, "Internal error"));
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(options.bind.port, options.bind.host, () => resolve());
  });
  port = (http.address() as AddressInfo).port;
  const host = options.bind.host.includes(":") ? `[${options.bind.host}]` : options.bind.host;
  return {
    url: `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${port}${path}`,
    async close() {
      await Promise.allSettled([...sessions.values()].map((e) => e.server.close()));
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
