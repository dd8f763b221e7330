import { z } from "zod";

const ms = z.number().int().positive();

/** A server started as a child process speaking MCP over stdio. */
const StdioServer = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /** Added to a small safe default environment (HOME, PATH, …), as the MCP SDK does; wins over inherited variables. */
  env: z.record(z.string(), z.string()).optional(),
  /**
   * Network variables passed on from Keel's own environment (proxy and CA settings:
   * INHERITED_NETWORK_ENV), so a server behind a proxy can reach its registry or API. `false`
   * passes none; a list of names passes those too. Default: true.
   */
  inheritEnv: z.union([z.boolean(), z.array(z.string().min(1))]).optional(),
  cwd: z.string().optional(),
  /** Per-call timeout (ms); default: the plugin's `callTimeoutMs`. */
  timeoutMs: ms.optional(),
  /** Handshake + first tools/list timeout (ms); default: the plugin's `connectTimeoutMs`. */
  connectTimeoutMs: ms.optional(),
  /** What the server is for, in words: helps curation when the server sends no instructions. */
  description: z.string().optional(),
  /**
   * The first turn waits until this server is ready (or has failed, within its connect
   * timeout), however long `startGraceMs` is. A failure is still a diagnostic, not an error.
   */
  required: z.boolean().optional(),
  disabled: z.boolean().optional(),
});

/** A server reached over Streamable HTTP. */
const HttpServer = z.strictObject({
  url: z.url(),
  headers: z.record(z.string(), z.string()).optional(),
  timeoutMs: ms.optional(),
  connectTimeoutMs: ms.optional(),
  description: z.string().optional(),
  required: z.boolean().optional(),
  disabled: z.boolean().optional(),
});

/** Options of `mcp()`. */
export const McpOptionsSchema = z.strictObject({
  /** Servers by key (the key becomes `<server>` in `mcp__<server>__<tool>`); the common `mcpServers` shape. */
  servers: z.record(z.string().min(1), z.union([StdioServer, HttpServer])).default({}),
  /** Most MCP tools added to the keep-set per request. */
  topK: z.number().int().min(0).default(15),
  /**
   * The adaptive visible set (measured on LiveMCPBench, README "Curation"): once `minK` tools
   * joined, a tool scoring below `ratio` × the best score does not; a tool joining with a score
   * below `compactBelow` × the best is sent in compact form (description cut to
   * `compactDescriptionChars`); `tool_search` drops hits below `searchRatio` × its best hit.
   * `false`: the top K join, all in full form, and `tool_search` returns up to its limit.
   */
  adaptive: z
    .union([
      z.literal(false),
      z.strictObject({
        minK: z.number().int().min(0).default(8),
        ratio: z.number().min(0).max(1).default(0.3),
        compactBelow: z.number().min(0).max(1).default(0.9),
        /** A `tool_search` hit after the first needs at least this share of the first hit's score. */
        searchRatio: z.number().min(0).max(1).default(0.7),
      }),
    ])
    .prefault({}),
  /** Longest tool description sent (code points; cut at a sentence end with "…"). A `tool_search` hit shows up to 600. */
  descriptionChars: z.number().int().min(16).default(400),
  /** Longest description of a tool in compact form (code points). */
  compactDescriptionChars: z.number().int().min(16).default(160),
  /** Most tools one request may carry (built-ins, tool_search and MCP tools). */
  hardCap: z.number().int().positive().default(128),
  /** Default per-call timeout (ms). */
  callTimeoutMs: ms.default(120_000),
  /** Default connect timeout (ms): spawn/handshake plus the first tools/list. */
  connectTimeoutMs: ms.default(30_000),
  /**
   * How long the first turn waits for the other servers once the first one is ready (ms).
   * Servers still starting then join at a later turn boundary; `required` servers are always
   * waited for. A value at least `connectTimeoutMs` waits for every server (the old behaviour).
   */
  startGraceMs: z.number().int().min(0).default(500),
  /**
   * Ending a stdio server (when the last session closes, a start fails, or the server exited
   * and left processes in its group): its stdin is closed, after this long (ms) its process
   * group gets SIGTERM, after this long again SIGKILL.
   */
  stopGraceMs: ms.default(1_000),
  /** Longest text a tool result keeps (characters); the rest is cut with a marker. */
  maxResultChars: z.number().int().positive().default(100_000),
  /** `keel` (default) or the reference ranking of MECHANICS.md. */
  ranking: z.enum(["keel", "reference"]).default("keel"),
  /** Offer the `tool_search` meta tool (when some MCP tools are hidden). */
  toolSearch: z.boolean().default(true),
  /** Default number of tool_search hits. */
  searchLimit: z.number().int().min(1).max(20).default(5),
  /** Audit log path; default `<KEEL_HOME>/mcp-audit.sqlite`; `false` turns auditing (and recent-use ranking) off. */
  auditPath: z.union([z.string().min(1), z.literal(false)]).optional(),
  /** Window of "recent use" for ranking (ms). */
  recentWindowMs: ms.default(24 * 3_600_000),
  /** Restarts of a crashed stdio server: attempts and backoff. */
  restart: z
    .strictObject({
      maxAttempts: z.number().int().min(0).default(5),
      baseDelayMs: ms.default(500),
      maxDelayMs: ms.default(30_000),
    })
    .prefault({}),
  /** Name this client gives servers in its handshake. */
  clientName: z.string().min(1).default("keel"),
});

/** Options as given to `mcp()`. Contract: validated by the kernel before setup (KEEL_PLUGIN_OPTIONS_INVALID names the path). */
export type McpOptions = z.input<typeof McpOptionsSchema>;
/** Options after defaults. Contract: every field with a default is set. */
export type ResolvedMcpOptions = z.output<typeof McpOptionsSchema>;
/** One server's configuration. Contract: stdio when it has `command`, Streamable HTTP when it has `url`. */
export type McpServerConfig = ResolvedMcpOptions["servers"][string];
/** A stdio server's configuration. Contract: started as `command args` without a shell. */
export type StdioServerConfig = z.output<typeof StdioServer>;
/** A Streamable HTTP server's configuration. Contract: `headers` go with every request. */
export type HttpServerConfig = z.output<typeof HttpServer>;
