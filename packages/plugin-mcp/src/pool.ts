import type { JsonSchema } from "@keel/kernel";
import { McpServerConnection, type ConnectionSettings } from "./connection.ts";
import { inventoryHash } from "./curation.ts";
import { assignToolNames, identityKey } from "./names.ts";
import type { McpServerConfig } from "./options.ts";
import { normalizeInputSchema } from "./schema.ts";
import { tailOf } from "@keel/text";

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
 * in the reports); `firstTurn` resolves once a first turn may go on (see there) and never
 * rejects; `reports` holds the reports of the servers settled so far, in settling order;
 * `close` ends every server, also those still starting (their child processes included),
 * and resolves pending `firstTurn` and `settled` promises; `inventory` reflects the current
 * tool lists of the servers that are ready.
 */
export class McpPool {
  readonly servers = new Map<string, McpServerConnection>();
  #started: Promise<StartReport[]> | undefined;
  #settled = new Map<string, Promise<StartReport>>();
  #reports = new Map<string, StartReport>();
  /** performance.now() when the first server became ready. */
  #firstReadyAt: number | undefined;
  #closed = false;
  /** Called whenever a server settles or the pool closes. */
  #listeners = new Set<() => void>();
  #cache: { key: string; inventory: Inventory } | undefined;

  constructor(servers: Readonly<Record<string, McpServerConfig>>, settings: ConnectionSettings) {
    for (const [key, config] of Object.entries(servers))
      if (!config.disabled) this.servers.set(key, new McpServerConnection(key, config, settings));
  }

  /** Connect all servers once (later calls share the first attempt); resolves when every one has settled. */
  start(): Promise<StartReport[]> {
    this.#started ??= Promise.all(
      [...this.servers.values()].map((c) => {
        const p = this.#connect(c);
        this.#settled.set(c.key, p);
        return p;
      }),
    );
    return this.#started;
  }

  async #connect(c: McpServerConnection): Promise<StartReport> {
    const t0 = performance.now();
    let report: StartReport;
    try {
      await c.connect();
      report = { server: c.key, ok: true, tools: c.tools.length, durationMs: Math.round(performance.now() - t0) };
      this.#firstReadyAt ??= performance.now();
    } catch (err) {
      report = {
        server: c.key,
        ok: false,
        tools: 0,
        durationMs: Math.round(performance.now() - t0),
        error: err instanceof Error ? err.message : String(err),
        ...(c.stderrTail ? { stderrTail: tailOf(c.stderrTail, 1_000) } : {}),
      };
    }
    this.#reports.set(c.key, report);
    this.#notify();
    return report;
  }

  #notify(): void {
    for (const l of [...this.#listeners]) l();
  }

  /** Reports of the servers that have settled (ready or failed) so far. */
  get reports(): StartReport[] {
    return [...this.#reports.values()];
  }

  /** Keys of the servers still starting (not settled yet). */
  get pending(): string[] {
    return this.#closed ? [] : [...this.servers.keys()].filter((k) => !this.#reports.has(k));
  }

  /** One server's start report, once it has settled (starts the pool); undefined for an unknown key or after close. */
  settled(key: string): Promise<StartReport | undefined> {
    void this.start();
    const p = this.#settled.get(key);
    if (!p || this.#closed) return Promise.resolve(this.#reports.get(key));
    return new Promise((resolve) => {
      const check = () => {
        if (!this.#closed && !this.#reports.has(key)) return;
        this.#listeners.delete(check);
        resolve(this.#reports.get(key));
      };
      this.#listeners.add(check);
      check();
    });
  }

  /**
   * Starts the pool and resolves when the first turn may go on: every server has settled, or
   * one is ready and `graceMs` has passed since the first one became ready; either way only
   * once every `required` server has settled. Contract: never rejects; resolves at once after close.
   */
  firstTurn(graceMs: number): Promise<void> {
    void this.start();
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const check = () => {
        const waiting = [...this.servers.values()].filter((c) => !this.#reports.has(c.key));
        const graceLeft =
          this.#firstReadyAt === undefined ? Infinity : graceMs - (performance.now() - this.#firstReadyAt);
        const done = this.#closed || !waiting.length || (graceLeft <= 0 && !waiting.some((c) => c.config.required));
        if (done) {
          clearTimeout(timer);
          this.#listeners.delete(check);
          return resolve();
        }
        // A timer may fire a fraction of a millisecond early: each firing re-arms it if needed.
        if (graceLeft > 0 && graceLeft < Infinity && !timer) {
          timer = setTimeout(() => {
            timer = undefined;
            check();
          }, Math.ceil(graceLeft));
        }
      };
      this.#listeners.add(check);
      check();
    });
  }

  get started(): boolean {
    return this.#started !== undefined;
  }

  /** The current inventory, with names unique across servers and against `reserved`. */
  inventory(reserved: readonly string[] = []): Inventory {
    const conns = [...this.servers.values()].filter((c) => c.state === "ready" || c.state === "restarting");
    const key = `${reserved.join(",")}|${conns.map((c) => `${c.key}:${c.toolsVersion}`).join(",")}`;
    if (this.#cache?.key === key) return this.#cache.inventory;
    const raw = conns.flatMap((c) =>
      c.tools.map((t) => ({
        server: c.key,
        tool: t.name,
        info: t,
        serverDescription: c.config.description ?? c.instructions ?? "",
      })),
    );
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
    this.#closed = true;
    this.#notify();
    await Promise.all([...this.servers.values()].map((c) => c.close()));
  }
}
