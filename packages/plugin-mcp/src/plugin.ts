import { createHash } from "node:crypto";
import { join } from "node:path";
import type { AgentStorage, ContributionFor, Message, ToolDefinition, ToolOutput } from "@keel/kernel";
import { definePlugin, KeelError } from "@keel/kernel";
import { tailOf } from "@keel/text";
import { AuditLog, type AuditStore, type CallOutcome, type StoredCuration } from "./audit.ts";
import { PostgresAuditLog } from "./postgres-audit.ts";
import { agentDatabase } from "@keel/store-postgres";
import { McpCallError, raceSignal } from "./connection.ts";
import { curate, searchTools, type KeepSet } from "./curation.ts";
import { cutAtSentence, presentTool, type ToolForm } from "./present.ts";
import { McpOptionsSchema, type McpOptions, type ResolvedMcpOptions } from "./options.ts";
import { mayBeOf } from "./names.ts";
import { McpPool, type Inventory, type InventoryTool, type StartReport } from "./pool.ts";
import { createRanker, type ToolRanker } from "./rank.ts";
import { mapCallResult } from "./results.ts";
import { TOOL_SEARCH_NAME, TOOL_SEARCH_SCHEMA } from "./tool-search.ts";

export const PLUGIN_NAME = "@keel/plugin-mcp";
/** Longest description a tool_search hit shows (code points). */
const SEARCH_DESCRIPTION_CHARS = 600;
/**
 * Longest wait of a resumed session's first turn for its kept servers (ms): about what a
 * prompt-cache miss on a long conversation costs, so waiting longer costs more than it saves.
 */
const KEPT_WAIT_MAX_MS = 10_000;

/**
 * Knobs of `mcp()` that are not options: for tests that must not wait out a product bound.
 * Contract: nothing validates or documents them for users; every field left out takes the
 * product's value.
 * @internal
 */
export interface McpInternals {
  /** Longest wait of a resumed session's first turn for its kept servers (ms); default `KEPT_WAIT_MAX_MS` (10 s). */
  keptWaitMaxMs?: number;
}
export const PLUGIN_VERSION = "0.1.0";

/** Per-conversation curation state. */
interface SessionState {
  keepSet?: KeepSet;
  /** Tools revealed by tool_search or the preflight plan: kept from then on. */
  pinned: Set<string>;
  /** Servers whose failed start this conversation was told about. */
  reported: Set<string>;
  /** Server → tool-list version in this conversation's last request (undefined before its first). */
  seen?: Map<string, number>;
  /** Kept name → digest of its definition when the keep-set was last built. */
  basis?: Map<string, string>;
  /** The stored curation was looked up (once per session and process). */
  restored?: boolean;
  /** A stored curation was loaded and no request was built from it yet: its kept servers still starting are waited for (once). */
  resumed?: boolean;
  /** What was stored last (JSON), to write only changes. */
  saved?: string;
}

const newState = (): SessionState => ({ pinned: new Set(), reported: new Set() });
/** What identifies a tool's definition as the model sees it. */
const defKey = (t: InventoryTool) =>
  `${t.server}\u0000${t.tool}\u0000${t.description}\u0000${JSON.stringify(t.parameters)}`;
/** Digest of a tool's definition, once per inventory object (the pool caches its inventory between turns). */
const digests = new WeakMap<InventoryTool, string>();
const digest = (t: InventoryTool) => {
  let d = digests.get(t);
  if (d === undefined) digests.set(t, (d = createHash("sha256").update(defKey(t)).digest("base64url").slice(0, 16)));
  return d;
};

const CODES: Record<
  McpCallError["kind"],
  | "KEEL_MCP_CALL_TIMEOUT"
  | "KEEL_MCP_SERVER_CRASHED"
  | "KEEL_MCP_SERVER_UNAVAILABLE"
  | "KEEL_MCP_CALL_FAILED"
  | "KEEL_MCP_CALL_REJECTED"
  | "KEEL_MCP_UPSTREAM_UNREACHABLE"
  | "KEEL_TURN_ABORTED"
> = {
  timeout: "KEEL_MCP_CALL_TIMEOUT",
  crashed: "KEEL_MCP_SERVER_CRASHED",
  unavailable: "KEEL_MCP_SERVER_UNAVAILABLE",
  protocol_error: "KEEL_MCP_CALL_FAILED",
  rejected: "KEEL_MCP_CALL_REJECTED",
  upstream: "KEEL_MCP_UPSTREAM_UNREACHABLE",
  cancelled: "KEEL_TURN_ABORTED",
};

/**
 * MCP servers as curated Keel tool bundles.
 * Contract: servers connect in parallel from `session.start`, which waits only until the
 * first one is ready plus `startGraceMs` (and for `required` servers); servers still starting
 * join at a later turn boundary, announced by an `mcp.tools_changed` diagnostic, with the
 * keep-set carried over (their tools are appended), except that a session resumed in a new
 * process waits, at its first turn, for the servers still starting whose tools its stored
 * keep-set or revealed set names (within their connect timeouts, at most 10 s, and the turn's signal), so
 * its first request sends the stored tool list; a start failure is a
 * `KEEL_MCP_SERVER_START_FAILED` diagnostic (of `session.start`, or of the next turn when the
 * session closed or another one did first) and the agent goes on; every MCP tool is
 * contributed at `turn.pre_tool_materialization` as
 * `mcp__<server>__<tool>` with `category: "mcp"` and `meta: { mcpServer, mcpTool }`, the
 * curated ones visible and the rest `hidden` (revealed by `tool_search`); every call is
 * audited; servers close at `session.end` of the last open session.
 */
export function mcp(input: McpOptions = {}, internals: McpInternals = {}) {
  return definePlugin({
    name: PLUGIN_NAME,
    version: PLUGIN_VERSION,
    kernel: "^1.0.0",
    description: "MCP servers as curated tool bundles",
    options: McpOptionsSchema,
    input,
    setup(ctx) {
      const o = ctx.options;
      const rt = new Runtime(o, ctx.storage, internals.keptWaitMaxMs ?? KEPT_WAIT_MAX_MS);
      const connectMax = Math.max(o.connectTimeoutMs, ...Object.values(o.servers).map((s) => s.connectTimeoutMs ?? 0));
      ctx.on("session.start", (event) => rt.open(event.sessionId), { timeoutMs: connectMax + 5_000 });
      // Late start failures (and the start times) as diagnostics when the last server settles, without holding the session.
      ctx.on("session.start", (event) => rt.lateStarts(event.sessionId), {
        id: "late-starts",
        await: "background",
        timeoutMs: connectMax + 5_000,
      });
      // Within its timeout: the start wait plus, on a resumed session, the wait for its kept servers (bounded by connectMax + 3 s).
      ctx.on(
        "turn.pre_tool_materialization",
        (event, hook) =>
          rt.materialize(event.sessionId, event.input, event.tools, event.history, hook.signal, connectMax + 3_000),
        { timeoutMs: connectMax + 5_000 },
      );
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
  /** Where the agent keeps its data: the audit log goes there. */
  readonly storage: AgentStorage;
  pool: McpPool | undefined;
  audit: AuditStore | undefined;
  auditError: string | undefined;
  readonly sessions = new Map<string, SessionState>();
  #ranker: { hash: string; ranker: ToolRanker } | undefined;
  #defs = new Map<string, ToolDefinition>();
  #crashes: string[] = [];
  #inventory: Inventory | undefined;
  #auditReported = false;
  /** Resolved (and replaced) whenever a session is released: background waits stop then. */
  #released = deferred();
  /** Longest wait for kept servers (ms): `KEPT_WAIT_MAX_MS` but in tests. */
  readonly #keptWaitMaxMs: number;

  constructor(o: ResolvedMcpOptions, storage: AgentStorage, keptWaitMaxMs: number) {
    this.o = o;
    this.storage = storage;
    this.#keptWaitMaxMs = keptWaitMaxMs;
  }

  #pool(): McpPool {
    if (!this.pool) {
      this.pool = new McpPool(this.o.servers, {
        clientName: this.o.clientName,
        clientVersion: PLUGIN_VERSION,
        connectTimeoutMs: this.o.connectTimeoutMs,
        restart: this.o.restart,
        stopGraceMs: this.o.stopGraceMs,
      });
      for (const c of this.pool.servers.values()) c.onCrash = (m) => this.#crashes.push(`MCP server "${c.key}": ${m}`);
    }
    return this.pool;
  }

  #auditLog(): AuditStore | undefined {
    if (this.o.auditPath === false || this.audit || this.auditError) return this.audit;
    let path = this.o.auditPath ?? join(this.storage.home, "mcp-audit.sqlite");
    try {
      // An explicit path is a SQLite file; otherwise the shared database when one is configured.
      const pg = this.o.auditPath === undefined ? agentDatabase(this.storage) : undefined;
      const onError = (err: unknown) =>
        (this.auditError = `writing ${path}: ${err instanceof Error ? err.message : String(err)}`);
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

  #state(sessionId: string): SessionState {
    let state = this.sessions.get(sessionId);
    if (!state) this.sessions.set(sessionId, (state = newState()));
    return state;
  }

  /** session.start: start the servers and wait for the first turn's set (see McpPool.firstTurn). */
  async open(sessionId: string): Promise<ContributionFor<"session.start">[]> {
    const state = this.#state(sessionId);
    const pool = this.#pool();
    await pool.firstTurn(this.o.startGraceMs);
    const out: ContributionFor<"session.start">[] = this.pool === pool ? this.#startFailures(state, pool.reports) : [];
    this.#auditLog();
    out.push(...this.#auditDiagnostic());
    return out;
  }

  /**
   * session.start, in the background: once every server has settled, the failures not yet
   * reported, and the start times when some server joined late. Stops (reporting nothing) when
   * a session is released first: a later turn reports what is left.
   */
  async lateStarts(sessionId: string): Promise<ContributionFor<"session.start">[]> {
    const pool = this.#pool();
    const released = this.#released.promise;
    await pool.firstTurn(this.o.startGraceMs);
    const late = pool.pending;
    if (!late.length) return [];
    const all = await Promise.race([pool.start(), released.then(() => undefined)]);
    const state = this.sessions.get(sessionId);
    if (!all || !state || this.pool !== pool) return [];
    return [
      ...this.#startFailures(state, all),
      {
        kind: "diagnostic",
        level: "info",
        code: "mcp.servers_started",
        message: `MCP servers started: ${all.map((r) => `${r.server} ${r.ok ? `ready in ${r.durationMs} ms` : `failed after ${r.durationMs} ms`}`).join(", ")}; ${late.map((k) => `"${k}"`).join(", ")} ${late.length === 1 ? "was" : "were"} still starting when the first turn could go on.`,
        data: {
          late,
          servers: all.map((r) => ({ server: r.server, ok: r.ok, tools: r.tools, durationMs: r.durationMs })),
        },
      },
    ];
  }

  /** Failed start reports this conversation was not told about yet, as diagnostics (once each). */
  #startFailures(state: SessionState, reports: readonly StartReport[]) {
    const out: Array<ContributionFor<"session.start"> & ContributionFor<"turn.pre_tool_materialization">> = [];
    for (const r of reports) {
      if (r.ok || state.reported.has(r.server)) continue;
      state.reported.add(r.server);
      const msg = new KeelError(
        "KEEL_MCP_SERVER_START_FAILED",
        `${r.error}.${r.stderrTail ? ` Stderr ends with: ${tailOf(r.stderrTail.trim(), 1_500)}` : ""}`,
        { plugin: PLUGIN_NAME, phase: "session.start" },
      ).message;
      out.push({
        kind: "diagnostic",
        level: "warn",
        code: "KEEL_MCP_SERVER_START_FAILED",
        message: msg,
        data: { server: r.server, error: r.error ?? "", stderrTail: r.stderrTail ?? "", durationMs: r.durationMs },
      });
    }
    return out;
  }

  /** The audit failure as a diagnostic, once per plugin instance. */
  #auditDiagnostic() {
    if (this.#auditReported || !this.auditError) return [];
    this.#auditReported = true;
    return [
      {
        kind: "diagnostic" as const,
        level: "warn" as const,
        code: "KEEL_MCP_AUDIT_FAILED",
        message: new KeelError("KEEL_MCP_AUDIT_FAILED", `${this.auditError}.`, { plugin: PLUGIN_NAME }).message,
      },
    ];
  }

  pin(sessionId: string, names: readonly string[]): void {
    const s = this.sessions.get(sessionId);
    if (!s) return;
    for (const n of names) s.pinned.add(n);
    if (s.keepSet) this.#save(sessionId, s);
  }

  /** A session's curation from the audit store (a session resumed in another process), once. */
  async #restore(sessionId: string, state: SessionState): Promise<void> {
    if (state.restored) return;
    state.restored = true;
    const stored = await this.#auditLog()?.loadCuration(sessionId);
    if (!stored || state.keepSet) return;
    state.keepSet = {
      inventoryHash: stored.inventoryHash,
      keep: stored.keep,
      ...(stored.compact.length ? { compact: stored.compact } : {}),
    };
    for (const n of stored.pinned) state.pinned.add(n);
    state.basis = new Map(Object.entries(stored.basis));
    state.resumed = true;
  }

  /** Keep the session's curation in the audit store when it changed. */
  #save(sessionId: string, state: SessionState): void {
    const audit = this.#auditLog();
    if (!audit || !state.keepSet) return;
    const c: StoredCuration = {
      inventoryHash: state.keepSet.inventoryHash,
      keep: state.keepSet.keep,
      compact: state.keepSet.compact ?? [],
      pinned: [...state.pinned],
      basis: Object.fromEntries(state.basis ?? []),
    };
    const json = JSON.stringify(c);
    if (json === state.saved) return;
    state.saved = json;
    audit.saveCuration(sessionId, c);
  }

  async release(sessionId: string): Promise<void> {
    this.sessions.delete(sessionId);
    this.#released.resolve();
    this.#released = deferred();
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
      this.#ranker = {
        hash: inv.hash,
        ranker: createRanker(
          inv.tools.map((t) => ({
            name: t.name,
            server: t.server,
            tool: t.tool,
            description: t.description,
            serverDescription: t.serverDescription,
          })),
          this.o.ranking,
        ),
      };
    }
    return this.#ranker.ranker;
  }

  async #recent(): Promise<Map<string, number> | undefined> {
    return this.#auditLog()?.recentUses(Date.now() - this.o.recentWindowMs);
  }

  async materialize(
    sessionId: string,
    query: string,
    fixed: readonly string[],
    history: readonly Message[] = [],
    signal?: AbortSignal,
    budgetMs = Infinity,
  ): Promise<ContributionFor<"turn.pre_tool_materialization">[]> {
    const t0 = performance.now();
    const state = this.#state(sessionId);
    const pool = this.#pool();
    const out: ContributionFor<"turn.pre_tool_materialization">[] = [];
    if (!pool.started)
      out.push(...((await this.open(sessionId)) as ContributionFor<"turn.pre_tool_materialization">[]));
    else await pool.firstTurn(this.o.startGraceMs);
    // The stored curation first: servers still starting that hold its tools are waited for.
    await this.#restore(sessionId, state);
    const waited = await this.#awaitKept(state, pool, signal, budgetMs - (performance.now() - t0));
    if (waited) out.push(waited);
    // Start failures no session.start handler could report to this conversation.
    out.push(...this.#startFailures(state, pool.reports));
    for (const c of this.#crashes.splice(0))
      out.push({
        kind: "diagnostic",
        level: "warn",
        code: "KEEL_MCP_SERVER_CRASHED",
        message: new KeelError("KEEL_MCP_SERVER_CRASHED", `${c}.`, { plugin: PLUGIN_NAME }).message,
      });
    const reserved = [...fixed, TOOL_SEARCH_NAME];
    const inv = pool.inventory(reserved);
    this.#inventory = inv;
    const change = this.#toolsChange(state, pool, inv);
    if (change) out.push(change);
    const waiting = this.#placeholders(pool, inv, reserved, history);
    if (!inv.tools.length) {
      if (waiting.length) out.push({ kind: "tool_bundle", bundleId: "mcp", domain: "mcp", tools: waiting });
      return out;
    }
    const ranker = this.#rankerFor(inv);
    const recent = await this.#recent();
    const search = this.o.toolSearch;
    const byName = new Map(inv.tools.map((t) => [t.name, t]));
    // Tools joined or left (a late server, tools/list_changed, a resumed session in a new
    // process) but no kept tool changed: the keep-set carries over, so the advertised list
    // keeps its prefix and new tools can only be appended. Kept tools missing now stay kept.
    let previous = state.keepSet;
    if (previous && previous.inventoryHash !== inv.hash && state.basis) {
      const basis = state.basis;
      if (previous.keep.every((n) => !byName.has(n) || digest(byName.get(n)!) === basis.get(n)))
        previous = { ...previous, inventoryHash: inv.hash };
    }
    const result = curate({
      ranker,
      inventoryHash: inv.hash,
      query,
      topK: this.o.topK,
      hardCap: this.o.hardCap,
      fixedCount: fixed.length + (search ? 1 : 0),
      ...(previous ? { previous } : {}),
      pinned: [...state.pinned],
      ...(recent ? { rankOptions: { recentUses: recent } } : {}),
      ...(this.o.adaptive ? { cut: this.o.adaptive } : {}),
    });
    if (result.reset) state.pinned.clear();
    state.keepSet = result.keepSet;
    const basis = new Map(state.basis && !result.reset ? state.basis : []);
    for (const n of result.keepSet.keep) if (byName.has(n)) basis.set(n, digest(byName.get(n)!));
    state.basis = basis;
    this.#save(sessionId, state);
    const visible = new Set(result.visible);
    const tools: ToolDefinition[] = [];
    // Visible tools first, in keep-set order, so the advertised list only grows at its end.
    const compact = new Set(result.keepSet.compact ?? []);
    for (const n of result.visible) tools.push(this.#def(byName.get(n)!, false, compact.has(n) ? "compact" : "full"));
    for (const t of inv.tools) if (!visible.has(t.name)) tools.push(this.#def(t, true, "full"));
    tools.push(...waiting);
    if (search && visible.size < inv.tools.length) tools.push(this.#searchTool(sessionId, ranker));
    out.push({ kind: "tool_bundle", bundleId: "mcp", domain: "mcp", tools });
    out.push({
      kind: "diagnostic",
      level: "info",
      code: "mcp.curation",
      message: `MCP curation: ${visible.size} of ${inv.tools.length} tools visible (${result.added.length} added${compact.size ? `, ${compact.size} in compact form` : ""}${result.reset ? ", keep-set reset: inventory changed" : ""}${result.capped.length ? `, ${result.capped.length} over the hard cap` : ""}).`,
      data: {
        inventoryHash: inv.hash,
        visible: result.visible,
        added: result.added,
        compact: [...compact],
        capped: result.capped,
        reset: result.reset,
        total: inv.tools.length,
      },
    });
    out.push(...this.#auditDiagnostic());
    return out;
  }

  /**
   * Wait for the servers still starting whose tools the conversation's keep-set or revealed
   * set names (a session resumed in a new process), so its first request sends the stored
   * tool list instead of a shorter one that grows back a turn later (two prompt-cache misses).
   * Once per session and process (again only when the turn was cancelled meanwhile).
   * Bounded by each server's connect timeout, `KEPT_WAIT_MAX_MS`, `budgetMs` and the turn's signal; servers gone
   * from the config or not holding kept tools are not waited for. Returns the
   * `mcp.kept_servers_waited` info diagnostic when it waited.
   */
  async #awaitKept(
    state: SessionState,
    pool: McpPool,
    signal: AbortSignal | undefined,
    budgetMs: number,
  ): Promise<ContributionFor<"turn.pre_tool_materialization"> | undefined> {
    // Only before the first request built from the stored list: once one has gone out (without
    // a server that did not make it), waiting again would hold every turn for nothing.
    if (!state.resumed) return undefined;
    state.resumed = false;
    const pending = pool.pending;
    const names = [...(state.keepSet?.keep ?? []), ...state.pinned];
    if (!pending.length || !names.length) return undefined;
    const servers = pending.filter((k) => names.some((n) => mayBeOf(n, k)));
    if (!servers.length) return undefined;
    const t0 = performance.now();
    const connectMs = Math.max(
      ...servers.map((k) => pool.servers.get(k)!.config.connectTimeoutMs ?? this.o.connectTimeoutMs),
    );
    const ms = Math.max(0, Math.min(connectMs + 1_000, budgetMs, this.#keptWaitMaxMs));
    await raceSignal(
      Promise.all(servers.map((k) => pool.settled(k))),
      signal ?? new AbortController().signal,
      ms,
    ).catch(() => undefined);
    // Cancelled: no request went out, so the next turn's is still the first one.
    if (signal?.aborted) state.resumed = true;
    const waitedMs = Math.round(performance.now() - t0);
    const ready = servers.filter((k) => pool.reports.some((r) => r.server === k && r.ok));
    const failed = servers.filter((k) => pool.reports.some((r) => r.server === k && !r.ok));
    const starting = servers.filter((k) => !ready.includes(k) && !failed.includes(k));
    const list = (ks: string[]) => ks.map((k) => `"${k}"`).join(", ");
    return {
      kind: "diagnostic",
      level: "info",
      code: "mcp.kept_servers_waited",
      message: `MCP: this turn waited ${waitedMs} ms for ${list(servers)}, still starting, whose tools this session's stored tool list holds${
        ready.length === servers.length
          ? ", so that list is sent unchanged (the prompt cache stays valid)."
          : `${ready.length ? `; ${list(ready)} ready` : ""}${failed.length ? `; ${list(failed)} failed to start: its tools are left out` : ""}${starting.length ? `; ${list(starting)} still starting after the wait's limit of ${Math.round(ms)} ms: its tools join a later turn` : ""}; this request's tool list is shorter than the stored one.`
      }`,
      data: { servers, ready, failed, starting, waitedMs, limitMs: Math.round(ms) },
    };
  }

  /**
   * The `mcp.tools_changed` diagnostic when the servers or tool lists differ from this
   * conversation's previous request (a server joined late or left, a tools/list_changed).
   */
  #toolsChange(
    state: SessionState,
    pool: McpPool,
    inv: Inventory,
  ): ContributionFor<"turn.pre_tool_materialization"> | undefined {
    const now = new Map<string, number>();
    for (const c of pool.servers.values())
      if (c.state === "ready" || c.state === "restarting") now.set(c.key, c.toolsVersion);
    const before = state.seen;
    state.seen = now;
    if (!before) return undefined;
    const joined = [...now.keys()].filter((k) => !before.has(k));
    const changed = [...now.keys()].filter((k) => before.has(k) && before.get(k) !== now.get(k));
    const left = [...before.keys()].filter((k) => !now.has(k));
    if (!joined.length && !changed.length && !left.length) return undefined;
    const count = (k: string) => inv.tools.filter((t) => t.server === k).length;
    const parts = [
      ...joined.map((k) => `"${k}" joined (${count(k)} tools)`),
      ...changed.map((k) => `"${k}" changed its tools (${count(k)} now)`),
      ...left.map((k) => `"${k}" left`),
    ];
    return {
      kind: "diagnostic",
      level: "info",
      code: "mcp.tools_changed",
      message: `MCP tools changed since the last turn: ${parts.join(", ")}.`,
      data: { joined, changed, left, inventoryHash: inv.hash, total: inv.tools.length },
    };
  }

  /**
   * Hidden stand-ins for tools of servers still starting that the conversation called before
   * (by name, from history): a call waits for the server, then runs the tool if it has it;
   * otherwise it gets a located error result.
   */
  #placeholders(
    pool: McpPool,
    inv: Inventory,
    reserved: readonly string[],
    history: readonly Message[],
  ): ToolDefinition[] {
    const pending = pool.pending;
    if (!pending.length) return [];
    const known = new Set([...inv.tools.map((t) => t.name), ...reserved]);
    const out = new Map<string, ToolDefinition>();
    for (const m of history) {
      if (m.role !== "assistant") continue;
      for (const b of m.content) {
        if (b.type !== "tool_call" || known.has(b.name) || out.has(b.name)) continue;
        const server = pending.find((k) => mayBeOf(b.name, k));
        if (server) out.set(b.name, this.#placeholder(pool, server, b.name, reserved));
      }
    }
    return [...out.values()];
  }

  #placeholder(pool: McpPool, server: string, name: string, reserved: readonly string[]): ToolDefinition {
    const conn = pool.servers.get(server)!;
    const connectMs = conn.config.connectTimeoutMs ?? this.o.connectTimeoutMs;
    const callMs = conn.config.timeoutMs ?? this.o.callTimeoutMs;
    const unavailable = (why: string): ToolOutput => ({
      content: `Error: ${new KeelError("KEEL_MCP_SERVER_UNAVAILABLE", why, { plugin: PLUGIN_NAME, tool: name }).message}`,
      isError: true,
    });
    return {
      name,
      description: `A tool of MCP server "${server}", which is still starting; calling it waits for the server.`,
      parameters: { type: "object", properties: {}, additionalProperties: true },
      category: "mcp",
      timeoutMs: connectMs + callMs + 4_000,
      meta: { mcpServer: server },
      hidden: true,
      execute: async (args, ctx) => {
        const report = await raceSignal(pool.settled(server), ctx.signal, connectMs + 2_000).catch(() => undefined);
        if (ctx.signal.aborted)
          return {
            content: `Cancelled: the call to "${name}" was cancelled while MCP server "${server}" was starting.`,
            isError: true,
          };
        if (!report)
          return unavailable(
            `MCP server "${server}" is still starting (or the session was closed); "${name}" could not run. Its tools join the tool list at the next turn once it is ready.`,
          );
        if (!report.ok)
          return unavailable(`MCP server "${server}" failed to start, so "${name}" could not run: ${report.error}.`);
        const t = pool.inventory(reserved).tools.find((x) => x.name === name);
        if (!t)
          return {
            content: `Error: ${new KeelError("KEEL_TOOL_UNKNOWN", `MCP server "${server}" is ready but has no tool exposed as "${name}".`, { plugin: PLUGIN_NAME, tool: name }).message}`,
            isError: true,
          };
        return this.#call(t, args, ctx.signal, ctx.sessionId, callMs);
      },
    };
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

  /** A tool definition per (tool, hidden, form); the same object across turns keeps schema and token caches warm. */
  #def(t: InventoryTool, hidden: boolean, form: ToolForm): ToolDefinition {
    const key = `${t.name}\u0000${hidden}\u0000${form}\u0000${t.description}\u0000${JSON.stringify(t.parameters)}`;
    let def = this.#defs.get(key);
    if (def) return def;
    const server = this.pool?.servers.get(t.server);
    const timeoutMs = server?.config.timeoutMs ?? this.o.callTimeoutMs;
    const shown = presentTool(t, form, {
      descriptionChars: this.o.descriptionChars,
      compactDescriptionChars: this.o.compactDescriptionChars,
    });
    def = {
      name: t.name,
      description: shown.description,
      parameters: shown.parameters,
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

  async #call(
    t: InventoryTool,
    args: unknown,
    signal: AbortSignal,
    sessionId: string,
    timeoutMs: number,
  ): Promise<ToolOutput> {
    const t0 = performance.now();
    const conn = this.pool?.servers.get(t.server);
    let outcome: CallOutcome = "ok";
    let bytes = 0;
    let error: string | undefined;
    try {
      if (!conn)
        throw new McpCallError("unavailable", `MCP server "${t.server}" is not connected (the session was closed).`);
      const res = await conn.callTool(t.tool, args, { signal, timeoutMs });
      const mapped = mapCallResult(res, this.o.maxResultChars);
      bytes = mapped.bytes;
      if (mapped.output.isError) outcome = "tool_error";
      return mapped.output;
    } catch (err) {
      const e =
        err instanceof McpCallError
          ? err
          : new McpCallError("protocol_error", err instanceof Error ? err.message : String(err));
      outcome = e.kind;
      error = e.message;
      const text =
        e.kind === "cancelled"
          ? `Cancelled: ${e.message}`
          : `Error: ${new KeelError(CODES[e.kind], e.message, { plugin: PLUGIN_NAME, tool: t.name }).message}`;
      return { content: text, isError: true };
    } finally {
      this.#auditLog()?.record({
        ts: Date.now(),
        sessionId,
        server: t.server,
        tool: t.tool,
        name: t.name,
        durationMs: Math.round((performance.now() - t0) * 1000) / 1000,
        outcome,
        bytes,
        ...(error ? { error } : {}),
      });
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
        if (!query)
          return {
            content: "Error: tool_search needs a non-empty `query` describing what the tool should do.",
            isError: true,
          };
        const limit =
          typeof args.limit === "number" && Number.isInteger(args.limit)
            ? Math.min(20, Math.max(1, args.limit))
            : this.o.searchLimit;
        const recent = await this.#recent();
        const hits = searchTools(
          ranker,
          query,
          limit,
          recent ? { recentUses: recent } : undefined,
          this.o.adaptive ? this.o.adaptive.searchRatio : 0,
        );
        if (!hits.length)
          return `No MCP tool matches "${query}". Try other words (what the tool does, or the service it talks to).`;
        this.pin(
          ctx?.sessionId ?? sessionId,
          hits.map((h) => h.name),
        );
        const lines = hits.map(
          (h) =>
            `- ${h.name} (server ${h.server}): ${cutAtSentence(h.description.replace(/\s+/g, " ").trim(), SEARCH_DESCRIPTION_CHARS)}`,
        );
        return {
          content: `These tools are now available to call:\n${lines.join("\n")}`,
          reveal: hits.map((h) => h.name),
        };
      },
    };
  }
}

/** A promise with its resolve function (Promise.withResolvers is ES2024). */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
