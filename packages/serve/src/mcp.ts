/**
 * A Keel agent as an MCP server, on the MCP SDK: tools to ask it (a new conversation or the
 * caller's own earlier one), list the caller's sessions and answer approvals; over stdio
 * (`serveMcpStdio`) or Streamable HTTP (`startMcpHttp`).
 */
import { LineTransport } from "./jsonrpc.ts";
import { ServedAgent } from "./mcp-tools.ts";
import type { McpServeOptions } from "./mcp-tools.ts";

export { startMcpHttp } from "./mcp-http.ts";
export type { McpHttpOptions, RunningServer } from "./mcp-http.ts";
export { ServedAgent } from "./mcp-tools.ts";
export type { McpServeOptions } from "./mcp-tools.ts";

/** Options of the stdio server. */
export interface McpStdioOptions extends McpServeOptions {
  /** Default process.stdin / process.stdout (which then carries protocol only). */
  stdin?: NodeJS.ReadableStream;
  stdout?: NodeJS.WritableStream;
  /** Whose sessions these are (default "stdio": whoever can start the process). */
  principal?: string;
}

/**
 * Serve the agent over stdio.
 * Contract: stdout carries only JSON-RPC; `closed` settles when the client goes away (stdin
 * ends) or close() was called; close() does not close the agent.
 */
export async function serveMcpStdio(
  options: McpStdioOptions,
): Promise<{ closed: Promise<void>; close(): Promise<void> }> {
  const server = new ServedAgent(options).server(options.principal ?? "stdio");
  const transport = new LineTransport(
    (options.stdin ?? process.stdin) as import("node:stream").Readable,
    (options.stdout ?? process.stdout) as import("node:stream").Writable,
  );
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = () => resolve();
  });
  await server.connect(transport);
  return { closed, close: () => server.close() };
}
