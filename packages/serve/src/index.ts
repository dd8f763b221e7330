/**
 * @keel/serve: a Keel agent served to other agents and clients, as an MCP server and an A2A
 * endpoint. Loopback by default; any other bind needs a bearer token; each caller's sessions
 * are its own. The protocols' SDKs (@modelcontextprotocol/sdk, @a2a-js/sdk) are optional peer
 * dependencies, loaded when a server starts: a project installs the one it serves with.
 */
import { missingPackageOf, packageMissing } from "@keel/kernel";
import type { A2aOptions, A2aServer } from "./a2a.ts";
import type { McpHttpOptions, McpStdioOptions, RunningServer } from "./mcp.ts";

export { authorize, openOwned, resolveBind, SessionOwners } from "./auth.ts";
export type { Bind, BindOptions, Caller } from "./auth.ts";
export type { A2aOptions, A2aServer } from "./a2a.ts";
export type { CardOptions } from "./a2a-card.ts";
export { ANSWER_HELP } from "./a2a-approvals.ts";
export type { SqliteTaskStore } from "./a2a-tasks.ts";
export type { ServedAgent } from "./mcp.ts";
export type { McpHttpOptions, McpServeOptions, McpStdioOptions, RunningServer } from "./mcp.ts";

/** `import()` of one of this package's modules; a missing `sdk` is KEEL_PACKAGE_MISSING naming it and `feature`. */
async function withSdk<T>(sdk: string, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw missingPackageOf(err, [sdk]) ? packageMissing(sdk, feature, {}, err) : err;
  }
}

/**
 * Load the A2A server and its SDK (@a2a-js/sdk), e.g. to fail before an agent is built.
 * Contract: rejects with KEEL_PACKAGE_MISSING naming the package when it is not installed.
 */
export function loadA2a(): Promise<typeof import("./a2a.ts")> {
  return withSdk("@a2a-js/sdk", "An A2A endpoint (keel serve --a2a, startA2a)", () => import("./a2a.ts"));
}

/**
 * Load the MCP servers and their SDK (@modelcontextprotocol/sdk), e.g. to fail before an agent
 * is built. Contract: rejects with KEEL_PACKAGE_MISSING naming the package when it is not installed.
 */
export function loadMcp(): Promise<typeof import("./mcp.ts")> {
  return withSdk(
    "@modelcontextprotocol/sdk",
    "An MCP server (keel serve --mcp, serveMcpStdio, startMcpHttp)",
    () => import("./mcp.ts"),
  );
}

/**
 * Serve the agent as an A2A endpoint (see a2a.ts). Contract: as a2a.ts's startA2a; rejects with
 * KEEL_PACKAGE_MISSING, before anything listens, when @a2a-js/sdk is not installed.
 */
export async function startA2a(options: A2aOptions): Promise<A2aServer> {
  return (await loadA2a()).startA2a(options);
}

/**
 * Serve the agent over MCP on stdio (see mcp.ts). Contract: as mcp.ts's serveMcpStdio; rejects
 * with KEEL_PACKAGE_MISSING when @modelcontextprotocol/sdk is not installed.
 */
export async function serveMcpStdio(
  options: McpStdioOptions,
): Promise<{ closed: Promise<void>; close(): Promise<void> }> {
  return (await loadMcp()).serveMcpStdio(options);
}

/**
 * Serve the agent over MCP's Streamable HTTP (see mcp-http.ts). Contract: as mcp-http.ts's
 * startMcpHttp; rejects with KEEL_PACKAGE_MISSING, before anything listens, when
 * @modelcontextprotocol/sdk is not installed.
 */
export async function startMcpHttp(options: McpHttpOptions): Promise<RunningServer> {
  return (await loadMcp()).startMcpHttp(options);
}
