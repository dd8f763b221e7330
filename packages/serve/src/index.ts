/**
 * @keel/serve: a Keel agent served to other agents and clients, as an MCP server and an A2A
 * endpoint. Loopback by default; any other bind needs a bearer token; each caller's sessions
 * are its own.
 */
export { authorize, openOwned, resolveBind, SessionOwners } from "./auth.ts";
export type { Bind, BindOptions, Caller } from "./auth.ts";
export { startA2a } from "./a2a.ts";
export type { A2aOptions, A2aServer } from "./a2a.ts";
export type { CardOptions } from "./a2a-card.ts";
export { ANSWER_HELP } from "./a2a-approvals.ts";
export { SqliteTaskStore } from "./a2a-tasks.ts";
export { ServedAgent, serveMcpStdio, startMcpHttp } from "./mcp.ts";
export type { McpHttpOptions, McpServeOptions, McpStdioOptions, RunningServer } from "./mcp.ts";
