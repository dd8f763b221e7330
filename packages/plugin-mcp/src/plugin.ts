import { join } from "node:path";
import type { ContributionFor, ToolDefinition, ToolOutput } from "@keel/kernel";
import { definePlugin, defaultKeelHome, KeelError, headOf, tailOf } from "@keel/kernel";
import { AuditLog, type AuditStore, type CallOutcome } from "./audit.ts";
import { PostgresAuditLog } from "./postgres-audit.ts";
import { databaseFromEnv } from "@keel/store-postgres";
import { McpCallError } from "./connection.ts";
import { curate, searchTools, type KeepSet } from "./curation.ts";
import { McpOptionsSchema, type McpOptions, type ResolvedMcpOptions } from "./options.ts";
import { McpPool, type Inventory, type InventoryTool } from "./pool.ts";
import { createRanker, type ToolRanker } from "./rank.ts";
import { mapCallResult } from "./results.ts";
import { TOOL_SEARCH_NAME, TOOL_SEARCH_SCHEMA } from "./tool-search.ts";

export const PLUGIN_NAME = "@keel/plugin-mcp";
export const PLUGIN_VERSION = "0.1.0";

/** Per-conversation curation state. */
interface SessionState {
  keepSet?: KeepSet;
  /** Tools revealed by tool_search or the preflight plan: kept from then on. */
  pinned: Set<string>;
}

const CODES: Record<McpCallError["kind"], "KEEL_MCP_CALL_TIMEOUT" | "KEEL_MCP_SERVER_CRASHED" | "KEEL_MCP_SERVER_UNAVAILABLE" | "KEEL_MCP_CALL_FAILED" | "KEEL_TURN_ABORTED"> = {
  timeout: "KEEL_MCP_CALL_TIMEOUT",
  crashed: "KEEL_MCP_SERVER_CRASHED",
  unavailable: "KEEL_MCP_SERVER_UNAVAILABLE",
  protocol_error: "KEEL_MCP_CALL_FAILED",
  cancelled: "KEEL_TURN_ABORTED",
};

/**
 * MCP servers as curated Keel tool bundles.
 * Contract: servers connect in parallel at `session.start` (failures become diagnostics and
 * the agent goes on); every MCP tool is contributed at `turn.pre_tool_materialization` as
 * `mcp__<server>__<tool>` with `category: "mcp"` and `meta: { mcpServer, mcpTool }`, the
 * curated ones visible and the rest `hidden` (revealed by `tool_search`); every call is
 * audited; servers close at `session.end` of the last open session.
 */
export function mcp(input: McpOptions = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "MCP servers as curated tool bundles",
    options: McpOptionsSchema,
    input,
    setup(ctx) {
      const o = ctx.options;
      const rt = new Runtime(o);
      const connectMax = Math.max(o.connectTimeoutMs, ...Object.values(o.servers).map((s) => s.connectTimeoutMs ?? 0));
      ctx.on("session.start", (event) => rt.open(event.sessionId), { timeoutMs: connectMax + 5_000 });
      ctx.on("turn.pre_tool_materialization", (event) => rt.materialize(event.sessionId, event.input, event.tools), { timeoutMs: connectMax + 5_000 });
      ctx.on("turn.post_preflight_prompt_context", (event) => {
        if (event.preflight?.revealed.length) rt.pin(event.sessionId, event.preflight.revealed);
      });
      ctx.on("turn.pre_prompt_compile", (event) => rt.promptSection(event.hiddenTools));
      ctx.on("session.end", (event) => rt.release(event.sessionId));
    },
  });
}

/** The state of one plugin instance: its pool, audit log and conversations. */
class Runtime {
  readonly o: ResolvedMcpOptions;
  pool: McpPool | undefined;
  audit: AuditStore | undefined;
  auditError: string | undefined;
  readonly sessions = new Map<string, SessionState>();
  #ranker: { hash: string; ranker: ToolRanker } | undefined;
  #defs = new Map<string, ToolDefinition>();
  #crashes: string[] = [];
  #inventory: Inventory | undefined;
  #auditReported = false;

  constructor(o: ResolvedMcpOptions) {
    this.o = o;
  }

  #pool(): McpPool {
    if (!this.pool) {
      this.pool = new McpPool(this.o.servers, { clientName: this.o.clientName, clientVersion: PLUGIN_VERSION, connectTimeoutMs: this.o.connectTimeoutMs, restart: this.o.restart });
      for (const c of this.pool.servers.values()) c.onCrash = (m) => this.#crashes.push(`MCP server "${c.key}": ${m}`);
    }
    return this.pool;
  }

  #auditLog(): AuditStore | undefined {
    if (this.o.auditPath === false || this.audit || this.auditError) return this.audit;
    let path = this.o.auditPath ?? join(defaultKeelHome(), "mcp-audit.sqlite");
    try {
      // An explicit path is a SQLite file; otherwise the shared database when one is configured.
      const pg = this.o.auditPath === undefined ? databaseFromEnv() : undefined;
      const onError = (err: unknown) => (this.auditError = `writing ${path}: ${err instanceof Error ? err.message : String(err)}`);
      if (pg) {
        const log = new PostgresAuditLog(pg, onError);
        path = log.path;
        this.audit = log;
      } else this.audit = new AuditLog(path, onError);
    } catch (err) {
      this.auditError = `opening ${path}: ${err instanceof Error ? err.message : String(err)}`;
    }
    return this.audit;
  }

  async open(sessionId: string): Promise<ContributionFor<"session.start">[]> {
    if (!this.sessions.has(sessionId)) this.sessions.set(sessionId, { pinned: new Set() });
    const out: ContributionFor<"session.start">[] = [];
    for (const r of await this.#pool().start()) {
      if (r.ok) continue;
      const msg = new KeelError("KEEL_MCP_SERVER_START_FAILED", `${r.error}.${r.stderrTail ? ` Stderr ends with: ${tailOf(r.stderrTail.trim(), 1_500)}` : ""}`, { plugin: PLUGIN_NAME, phase: "session.start" }).message;
      out.push({ kind: "diagnostic", level: "warn", code: "KEEL_MCP_SERVER_START_FAILED", message: msg, data: { server: r.server, error: r.error ?? "", stderrTail: r.stderrTail ?? "", durationMs: r.durationMs } });
    }
    this.#auditLog();
    out.push(...this.#auditDiagnostic());
    return out;
  }

  /** The audit failure as a diagnostic, once per plugin instance. */
  #auditDiagnostic() {
    if (this.#auditReported || !this.auditError) return [];
    this.#auditReported = true;
    return [{ kind: "diagnostic" as const, level: "warn" as const, code: "KEEL_MCP_AUDIT_FAILED", message: new KeelError("KEEL_MCP_AUDIT_FAILED", `${this.auditError}.`, { plugin: PLUGIN_NAME }).message }];
  }

  pin(sessionId: string, names: readonly string[]): void {
    const s = this.sessions.get(sessionId);
    if (s) for (const n of names) s.pinned.add(n);
  }

  async release(sessionId: string): Promise<void> {
    this.sessions.delete(sessionId);
    if (this.sessions.size) return;
    const pool = this.pool;
    this.pool = undefined;
    this.#ranker = undefined;
    this.#inventory = undefined;
    this.#defs.clear();
    await pool?.close();
    const audit = this.audit;
    this.audit = undefined;
    await audit?.close();
  }

  #rankerFor(inv: Inventory): ToolRanker {
    if (this.#ranker?.hash !== inv.hash) {
      this.#ranker = { hash: inv.hash, ranker: createRanker(inv.tools.map((t) => ({ name: t.name, server: t.server, tool: t.tool, description: t.description, serverDescription: t.serverDescription })), this.o.ranking) };
    }
    return this.#ranker.ranker;
  }

  async #recent(): Promise<Map<string, number> | undefined> {
    return this.#auditLog()?.recentUses(Date.now() - this.o.recentWindowMs);
  }

  async materialize(sessionId: string, query: string, fixed: readonly string[]): Promise<ContributionFor<"turn.pre_tool_materialization">[]> {
    let state = this.sessions.get(sessionId);
    if (!state) this.sessions.set(sessionId, (state = { pinned: new Set() }));
    const pool = this.#pool();
    const out: ContributionFor<"turn.pre_tool_materialization">[] = [];
    if (!pool.started) out.push(...((await this.open(sessionId)) as ContributionFor<"turn.pre_tool_materialization">[]));
    else await pool.start();
    for (const c of this.#crashes.splice(0)) out.push({ kind: "diagnostic", level: "warn", code: "KEEL_MCP_SERVER_CRASHED", message: new KeelError("KEEL_MCP_SERVER_CRASHED", `${c}.`, { plugin: PLUGIN_NAME }).message });
    const inv = pool.inventory([...fixed, TOOL_SEARCH_NAME]);
    this.#inventory = inv;
    if (!inv.tools.length) return out;
    const ranker = this.#rankerFor(inv);
    const recent = await this.#recent();
    const search = this.o.toolSearch;
    const result = curate({
      ranker,
      inventoryHash: inv.hash,
      query,
      topK: this.o.topK,
      hardCap: this.o.hardCap,
      fixedCount: fixed.length + (search ? 1 : 0),
      ...(state.keepSet ? { previous: state.keepSet } : {}),
      pinned: [...state.pinned],
      ...(recent ? { rankOptions: { recentUses: recent } } : {}),
    });
    if (result.reset) state.pinned.clear();
    state.keepSet = result.keepSet;
    const visible = new Set(result.visible);
    const byName = new Map(inv.tools.map((t) => [t.name, t]));
    const tools: ToolDefinition[] = [];
    // Visible tools first, in keep-set order, so the advertised list only grows at its end.
    for (const n of result.visible) tools.push(this.#def(byName.get(n)!, false));
    for (const t of inv.tools) if (!visible.has(t.name)) tools.push(this.#def(t, true));
    if (search && visible.size < inv.tools.length) tools.push(this.#searchTool(sessionId, ranker));
    out.push({ kind: "tool_bundle", bundleId: "mcp", domain: "mcp", tools });
    out.push({
      kind: "diagnostic",
      level: "info",
      code: "mcp.curation",
      message: `MCP curation: ${visible.size} of ${inv.tools.length} tools visible (${result.added.length} added${result.reset ? ", keep-set reset: inventory changed" : ""}${result.capped.length ? `, ${result.capped.length} over the hard cap` : ""}).`,
      data: { inventoryHash: inv.hash, visible: result.visible, added: result.added, capped: result.capped, reset: result.reset, total: inv.tools.length },
    });
    out.push(...this.#auditDiagnostic());
    return out;
  }

  /** One stable line per server (inventory-wide counts, so the prompt does not change as tools are revealed). */
  promptSection(hidden: readonly string[]): ContributionFor<"turn.pre_prompt_compile"> | undefined {
    const inv = this.#inventory;
    if (!inv || !this.o.toolSearch) return undefined;
    const mine = new Set(inv.tools.map((t) => t.name));
    if (!hidden.some((n) => mine.has(n))) return undefined;
    const counts = new Map<string, number>();
    for (const t of inv.tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
    const servers = [...counts].map(([s, n]) => `${s} (${n})`).join(", ");
    return {
      kind: "prompt_section",
      id: "mcp.servers",
      sectionId: "mcp",
      title: "MCP tools",
      domain: "mcp",
      content: `Connected MCP servers (tools): ${servers}. Only some of their tools are listed; call \`${TOOL_SEARCH_NAME}\` with what you need done to find and enable the others.`,
    };
  }

  /** A tool definition per (tool, hidden); the same object across turns keeps schema and token caches warm. */
  #def(t: InventoryTool, hidden: boolean): ToolDefinition {
    const key = `${t.name}\u0000${hidden}\u0000${t.description}\u0000${JSON.stringify(t.parameters)}`;
    let def = this.#defs.get(key);
    if (def) return def;
    const server = this.pool?.servers.get(t.server);
    const timeoutMs = server?.config.timeoutMs ?? this.o.callTimeoutMs;
    def = {
      name: t.name,
      description: t.description,
      parameters: t.parameters,
      category: "mcp",
      // The plugin's own timeout fires first and cancels through MCP; the kernel's is the backstop.
      timeoutMs: timeoutMs + 2_000,
      meta: { mcpServer: t.server, mcpTool: t.tool },
      ...(hidden ? { hidden: true } : {}),
      execute: (args, ctx) => this.#call(t, args, ctx.signal, ctx.sessionId, timeoutMs),
    };
    this.#defs.set(key, def);
    return def;
  }

  async #call(t: InventoryTool, args: unknown, signal: AbortSignal, sessionId: string, timeoutMs: number): Promise<ToolOutput> {
    const t0 = performance.now();
    const conn = this.pool?.servers.get(t.server);
    let outcome: CallOutcome = "ok";
    let bytes = 0;
    let error: string | undefined;
    try {
      if (!conn) throw new McpCallError("unavailable", `MCP server "${t.server}" is not connected (the session was closed).`);
      const res = await conn.callTool(t.tool, args, { signal, timeoutMs });
      const mapped = mapCallResult(res, this.o.maxResultChars);
      bytes = mapped.bytes;
      if (mapped.output.isError) outcome = "tool_error";
      return mapped.output;
    } catch (err) {
      const e = err instanceof McpCallError ? err : new McpCallError("protocol_error", err instanceof Error ? err.message : String(err));
      outcome = e.kind;
      error = e.message;
      const text = e.kind === "cancelled" ? `Cancelled: ${e.message}` : `Error: ${new KeelError(CODES[e.kind], e.message, { plugin: PLUGIN_NAME, tool: t.name }).message}`;
      return { content: text, isError: true };
    } finally {
      this.#auditLog()?.record({ ts: Date.now(), sessionId, server: t.server, tool: t.tool, name: t.name, durationMs: Math.round((performance.now() - t0) * 1000) / 1000, outcome, bytes, ...(error ? { error } : {}) });
    }
  }

  #searchTool(sessionId: string, ranker: ToolRanker): ToolDefinition<{ query?: unknown; limit?: unknown }> {
    return {
      ...TOOL_SEARCH_SCHEMA,
      category: "info",
      meta: { mcpMeta: "tool_search" },
      // Reveals for the session that calls it (the kernel's context), never another one.
      execute: async (args, ctx) => {
        const query = typeof args?.query === "string" ? args.query.trim() : "";
        if (!query) return { content: "Error: tool_search needs a non-empty `query` describing what the tool should do.", isError: true };
        const limit = typeof args.limit === "number" && Number.isInteger(args.limit) ? Math.min(20, Math.max(1, args.limit)) : this.o.searchLimit;
        const recent = await this.#recent();
        const hits = searchTools(ranker, query, limit, recent ? { recentUses: recent } : undefined);
        if (!hits.length) return `No MCP tool matches "${query}". Try other words (what the tool does, or the service it talks to).`;
        this.pin(ctx?.sessionId ?? sessionId, hits.map((h) => h.name));
        const lines = hits.map((h) => `- ${h.name} (server ${h.server}): ${headOf(h.description.replace(/\s+/g, " "), 300)}`);
        return { content: `These tools are now available to call:\n${lines.join("\n")}`, reveal: hits.map((h) => h.name) };
      },
    };
  }
}
