import type { JsonSchema } from "@keel/kernel";
import { McpServerConnection, type ConnectionSettings } from "./connection.ts";
import { inventoryHash } from "./curation.ts";
import { assignToolNames, identityKey } from "./names.ts";
import type { McpServerConfig } from "./options.ts";
import { normalizeInputSchema } from "./schema.ts";
import { tailOf } from "@keel/kernel";

/** One MCP tool of the current inventory. Contract: `name` is its unique exposed name; `parameters` is normalised. */
export interface InventoryTool {
  name: string;
  server: string;
  tool: string;
  description: string;
  parameters: JsonSchema;
  serverDescription: string;
}

/** The tools of every connected server. Contract: `hash` changes whenever a name, description or schema does. */
export interface Inventory {
  tools: InventoryTool[];
  hash: string;
}

/** How one server's start went. Contract: `error` and `stderrTail` only when `ok` is false. */
export interface StartReport {
  server: string;
  ok: boolean;
  tools: number;
  durationMs: number;
  error?: string;
  stderrTail?: string;
}

/**
 * The configured MCP servers of one plugin instance.
 * Contract: `start` connects every enabled server in parallel and never rejects (failures are
 * in the reports); `close` ends every server; `inventory` reflects the current tool lists.
 */
export class McpPool {
  readonly servers = new Map<string, McpServerConnection>();
  #started: Promise<StartReport[]> | undefined;
  #cache: { key: string; inventory: Inventory } | undefined;

  constructor(servers: Readonly<Record<string, McpServerConfig>>, settings: ConnectionSettings) {
    for (const [key, config] of Object.entries(servers)) if (!config.disabled) this.servers.set(key, new McpServerConnection(key, config, settings));
  }

  /** Connect all servers once (later calls share the first attempt). */
  start(): Promise<StartReport[]> {
    this.#started ??= Promise.all(
      [...this.servers.values()].map(async (c) => {
        const t0 = performance.now();
        try {
          await c.connect();
          return { server: c.key, ok: true, tools: c.tools.length, durationMs: Math.round(performance.now() - t0) };
        } catch (err) {
          return { server: c.key, ok: false, tools: 0, durationMs: Math.round(performance.now() - t0), error: err instanceof Error ? err.message : String(err), ...(c.stderrTail ? { stderrTail: tailOf(c.stderrTail, 1_000) } : {}) };
        }
      }),
    );
    return this.#started;
  }

  get started(): boolean {
    return this.#started !== undefined;
  }

  /** The current inventory, with names unique across servers and against `reserved`. */
  inventory(reserved: readonly string[] = []): Inventory {
    const conns = [...this.servers.values()].filter((c) => c.state === "ready" || c.state === "restarting");
    const key = `${reserved.join(",")}|${conns.map((c) => `${c.key}:${c.toolsVersion}`).join(",")}`;
    if (this.#cache?.key === key) return this.#cache.inventory;
    const raw = conns.flatMap((c) => c.tools.map((t) => ({ server: c.key, tool: t.name, info: t, serverDescription: c.config.description ?? c.instructions ?? "" })));
    const names = assignToolNames(raw, reserved);
    const tools = raw.map((r) => ({
      name: names.get(identityKey(r))!,
      server: r.server,
      tool: r.tool,
      description: r.info.description?.trim() || r.info.title || r.tool,
      parameters: normalizeInputSchema(r.info.inputSchema),
      serverDescription: r.serverDescription,
    }));
    const inventory = { tools, hash: inventoryHash(tools) };
    this.#cache = { key, inventory };
    return inventory;
  }

  async close(): Promise<void> {
    this.#started = undefined;
    await Promise.all([...this.servers.values()].map((c) => c.close()));
  }
}
