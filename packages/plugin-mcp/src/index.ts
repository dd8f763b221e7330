/**
 * @keel/plugin-mcp — MCP servers (stdio, Streamable HTTP) as Keel tool bundles, curated so
 * each request carries the few tools that fit, with `tool_search` for the rest.
 */
import { mcp } from "./plugin.ts";

export default mcp;
export { mcp, PLUGIN_NAME, PLUGIN_VERSION } from "./plugin.ts";
export { McpOptionsSchema } from "./options.ts";
export type {
  HttpServerConfig,
  McpOptions,
  McpServerConfig,
  ResolvedMcpOptions,
  StdioServerConfig,
} from "./options.ts";
export { MAX_TOOL_NAME, assignToolNames, identityKey, sanitizeToolName } from "./names.ts";
export type { ToolIdentity } from "./names.ts";
export { normalizeInputSchema } from "./schema.ts";
export { mapCallResult } from "./results.ts";
export type { MappedResult, McpCallResult } from "./results.ts";
export { createRanker, DEFAULT_KEEL_RANKING } from "./rank.ts";
export type { CatalogEntry, KeelRankingOptions, RankedTool, RankingMethod, RankOptions, ToolRanker } from "./rank.ts";
export { curate, inventoryHash, searchTools } from "./curation.ts";
export type { CurateInput, CurateResult, CutOptions, KeepSet, SearchHit } from "./curation.ts";
export { cutAtSentence, presentTool, tidyText } from "./present.ts";
export type { PresentLimits, ToolForm } from "./present.ts";
export { intentWords } from "./intents.ts";
export { keelTokens, referenceTokens } from "./text.ts";
export { TOOL_SEARCH_NAME, TOOL_SEARCH_SCHEMA } from "./tool-search.ts";
export { AuditLog } from "./audit.ts";
export { PostgresAuditLog, AUDIT_MIGRATIONS } from "./postgres-audit.ts";
export type { AuditRecord, AuditStore, CallOutcome, StoredCuration } from "./audit.ts";
export { INHERITED_NETWORK_ENV, McpServerConnection, McpCallError, inheritedEnv } from "./connection.ts";
export type { McpToolInfo, ServerState } from "./connection.ts";
export { McpPool } from "./pool.ts";
export { DEFAULT_STOP_GRACE_MS, EXIT_WAIT_MS, ServerProcess, liveServerPids } from "./child.ts";
export type { ServerProcessOptions, StdioCodec } from "./child.ts";
export type { Inventory, InventoryTool, StartReport } from "./pool.ts";
