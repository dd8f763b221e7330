/**
 * `keel serve --mcp --http` in a real child process, called with the MCP SDK's Streamable HTTP
 * client and with raw requests: ask and continue, loopback without a token but never another
 * host, bearer tokens (401 without), callers that cannot open each other's sessions, malformed
 * bodies and bad methods answered with JSON-RPC errors while the server goes on, and a clean
 * stop on SIGINT / SIGTERM.
 */
import { request } from "node:http";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { helperProject, startServe } from "./support/helper-agent.ts";
import type { Served } from "./support/helper-agent.ts";

const TOKEN_A = "token-a-0123456789abcdef";
const TOKEN_B = "token-b-0123456789abcdef";
const running: Served[] = [];
const clients: Client[] = [];
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  for (const s of running) s.child.kill("SIGKILL");
});

async function serve(args: string[] = [], env: Record<string, string> = {}) {
  const p = helperProject();
  const s = await startServe(p, ["--mcp", "--http", ...args], env);
  running.push(s);
  if (!s.url) throw new Error(`keel serve did not start: ${s.stderr()}`);
  return { p, s, url: s.url };
}

async function client(url: string, token?: string): Promise<Client> {
  const c = new Client({ name: "test", version: "1.0.0" });
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  clients.push(c);
  return c;
}

function structured(r: unknown): { session_id: string; status: string; answer: string } {
  return (r as CallToolResult).structuredContent as never;
}
function text(r: unknown): string {
  return (r as CallToolResult).content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
}

const ACCEPT = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const INIT = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

/** A JSON-RPC answer from a JSON or an SSE body. */
async function rpc(
  res: Response,
): Promise<{ id?: unknown; error?: { code: number; message: string }; result?: unknown }> {
  const body = await res.text();
  const data = body.startsWith("event:") || body.startsWith("data:") ? /data: (.*)/.exec(body)?.[1] : body;
  return JSON.parse(data ?? "{}");
}

/** The status of a POST sent with another Host header. */
function statusWithHost(url: string, host: string, body: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers: { ...ACCEPT, host } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("keel serve --mcp --http", () => {
  it("answers over Streamable HTTP and continues the caller's session; another caller cannot open it", async () => {
    const { url, p } = await serve();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const a = await client(url);
    const r1 = await a.callTool({ name: "ask", arguments: { input: "the release is Thursday" } });
    const id = structured(r1).session_id;
    expect(structured(r1).answer).toBe("heard 1: the release is Thursday");
    const r2 = await a.callTool({ name: "ask", arguments: { input: "when?", session_id: id } });
    expect(structured(r2).answer).toBe("heard 2: the release is Thursday | when?");

    // A second client without a token is another caller (its own MCP session): not found, as an unknown id.
    const b = await client(url);
    const stolen = await b.callTool({ name: "ask", arguments: { input: "tell me", session_id: id } });
    expect(stolen.isError).toBe(true);
    expect(text(stolen)).toContain(`No session "${id}"`);
    const approve = await b.callTool({ name: "approve", arguments: { session_id: id, decision: "allow" } });
    expect(text(approve)).toContain(`No session "${id}"`);
    const listed = await b.callTool({ name: "sessions", arguments: {} });
    expect((listed.structuredContent as { sessions: unknown[] }).sessions).toEqual([]);
    expect(p.eventTypes(id).filter((t) => t === "turn.started")).toHaveLength(2);
    // While the owner's turn runs, the other caller still gets "not found" (never "busy": no oracle).
    const ctl = new AbortController();
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    const waiting = a.callTool({ name: "ask", arguments: { input: "wait", session_id: id } }, undefined, {
      signal: ctl.signal,
      onprogress: () => started(),
    });
    await running;
    const whileBusy = await b.callTool({ name: "ask", arguments: { input: "x", session_id: id } });
    expect(text(whileBusy)).toContain(`No session "${id}"`);
    ctl.abort();
    await expect(waiting).rejects.toThrow();
    // An MCP session id the server never gave is 404, as the spec says.
    const hijack = await fetch(url, {
      method: "POST",
      headers: { ...ACCEPT, "mcp-session-id": "00000000-0000-0000-0000-000000000000" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
    });
    expect(hijack.status).toBe(404);
    expect((await rpc(hijack)).error?.code).toBe(-32001);
  });

  it("refuses 0.0.0.0 without a token before anything starts", async () => {
    const p = helperProject();
    const s = await startServe(p, ["--mcp", "--http", "--host", "0.0.0.0"]);
    running.push(s);
    expect(await s.exited).toBe(2);
    expect(s.stderr()).toContain("pass --token (or set KEEL_SERVE_TOKEN)");
    expect(s.stderr()).not.toMatch(/\n\s+at /);
  });

  it("with tokens on 0.0.0.0: 401 without one; each token is its own caller, across MCP sessions", async () => {
    const { url } = await serve(["--host", "0.0.0.0"], { KEEL_SERVE_TOKEN: `${TOKEN_A},${TOKEN_B}` });
    const bare = await fetch(url, { method: "POST", headers: ACCEPT, body: JSON.stringify(INIT) });
    expect(bare.status).toBe(401);
    expect(bare.headers.get("www-authenticate")).toBe("Bearer");
    expect((await rpc(bare)).error?.message).toContain("Bearer");
    const wrong = await fetch(url, {
      method: "POST",
      headers: { ...ACCEPT, authorization: "Bearer not-the-token-at-all" },
      body: JSON.stringify(INIT),
    });
    expect(wrong.status).toBe(401);
    await expect(client(url)).rejects.toThrow();

    const a1 = await client(url, TOKEN_A);
    const id = structured(await a1.callTool({ name: "ask", arguments: { input: "first" } })).session_id;
    const a2 = await client(url, TOKEN_A);
    const again = await a2.callTool({ name: "ask", arguments: { input: "second", session_id: id } });
    expect(structured(again).answer).toBe("heard 2: first | second");
    const b = await client(url, TOKEN_B);
    const stolen = await b.callTool({ name: "ask", arguments: { input: "mine now", session_id: id } });
    expect(stolen.isError).toBe(true);
    expect(text(stolen)).toContain(`No session "${id}"`);
  });

  it("answers malformed JSON, a bad JSON-RPC message, a bad method and a foreign Host with errors, and keeps serving", async () => {
    const { url, s } = await serve();
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(url, { method: "POST", headers: { ...ACCEPT, ...headers }, body });
    const parse = await post("{ not json");
    expect(parse.status).toBe(400);
    expect(await rpc(parse)).toMatchObject({ id: null, error: { code: -32700 } });
    const invalid = await post(JSON.stringify({ jsonrpc: "1.0", id: 4, method: 5 }));
    expect(invalid.status).toBe(400);
    expect(await rpc(invalid)).toMatchObject({ id: 4, error: { code: -32600 } });
    const noSession = await post(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/list" }));
    expect(noSession.status).toBe(400);
    expect((await rpc(noSession)).error?.code).toBe(-32000);
    // fetch may not set Host: a DNS-rebinding page's request, by node:http.
    expect(await statusWithHost(url, "evil.example", JSON.stringify(INIT))).toBe(421);

    const init = await post(JSON.stringify(INIT));
    expect(init.status).toBe(200);
    const sid = init.headers.get("mcp-session-id")!;
    await init.text();
    const proto = { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" };
    await (await post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), proto)).text();
    const method = await post(JSON.stringify({ jsonrpc: "2.0", id: 6, method: "no/such/method" }), proto);
    expect(await rpc(method)).toMatchObject({ id: 6, error: { code: -32601 } });
    const badArgs = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "ask", arguments: { input: 3 } } }),
      proto,
    );
    const answer = await rpc(badArgs);
    expect(JSON.stringify(answer)).not.toMatch(/\\n\s+at /);
    expect(answer.error?.code ?? (answer.result as { isError?: boolean }).isError).toBeTruthy();

    const c = await client(url);
    const ok = await c.callTool({ name: "ask", arguments: { input: "still there?" } });
    expect(structured(ok).answer).toBe("heard 1: still there?");
    expect(s.stderr()).not.toMatch(/\n\s+at /);
  });

  it("stops cleanly: SIGINT exits 0, SIGTERM 143", async () => {
    for (const [signal, code] of [
      ["SIGINT", 0],
      ["SIGTERM", 143],
    ] as const) {
      const { url, s } = await serve();
      const c = await client(url);
      await c.callTool({ name: "ask", arguments: { input: "hi" } });
      s.child.kill(signal);
      expect(await s.exited, s.stderr()).toBe(code);
      expect(s.stderr()).not.toMatch(/\n\s+at /);
    }
  });
});
