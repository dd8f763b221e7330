import type { DatabaseSync, StatementSync } from "node:sqlite";
import { openSqlite } from "@keel/store-sqlite";
import { redact, redactValue } from "@keel/secrets";

/** How an MCP call ended. Contract: `tool_error` is a result with `isError`; the rest had no result. */
export type CallOutcome =
  | "ok"
  | "tool_error"
  | "protocol_error"
  | "rejected"
  | "upstream"
  | "timeout"
  | "cancelled"
  | "crashed"
  | "unavailable";

/** One audited MCP call. Contract: `ts` is epoch ms at the end of the call; `durationMs` is wall time. */
export interface AuditRecord {
  ts: number;
  sessionId: string;
  server: string;
  tool: string;
  /** The exposed (sanitised) name the model called. */
  name: string;
  durationMs: number;
  outcome: CallOutcome;
  /** UTF-8 bytes of the result content (0 when there was none). */
  bytes: number;
  error?: string;
}

/** A stored row (either backend) as a record. */
export function auditRecordOf(r: Record<string, unknown>): AuditRecord {
  return {
    ts: Number(r.ts),
    sessionId: String(r.session_id),
    server: String(r.server),
    tool: String(r.tool),
    name: String(r.name),
    durationMs: Number(r.duration_ms),
    outcome: r.outcome as CallOutcome,
    bytes: Number(r.bytes),
    ...(r.error != null ? { error: String(r.error) } : {}),
  };
}

/**
 * One conversation's curation, kept so a session resumed in another process sends the same tools.
 * Contract: tool names only (no arguments, no results); `basis` maps each kept name to a
 * digest of its definition when it was kept.
 */
export interface StoredCuration {
  inventoryHash: string;
  keep: string[];
  compact: string[];
  pinned: string[];
  basis: Record<string, string>;
}

/**
 * The curation as written: every name passed through @keel/secrets (a name a redaction would
 * change is not restored, which only costs that tool's place).
 */
export function storableCuration(c: StoredCuration): string {
  const names = (list: readonly string[]) => list.map((n) => redactValue(n));
  return JSON.stringify({
    ...c,
    keep: names(c.keep),
    compact: names(c.compact),
    pinned: names(c.pinned),
    basis: Object.fromEntries(Object.entries(c.basis).map(([n, d]) => [redactValue(n), d])),
  });
}

/** How long a session's curation is kept after its last change (ms): 90 days. */
export const CURATION_TTL_MS = 90 * 86_400_000;

/** The stored curation, or undefined when the JSON is not one (a damaged row is a fresh start); names deduplicated, `compact` within `keep`. */
export function curationOf(json: unknown): StoredCuration | undefined {
  try {
    const v = typeof json === "string" ? JSON.parse(json) : json;
    const names = (x: unknown) => Array.isArray(x) && x.every((n) => typeof n === "string");
    if (
      !v ||
      typeof v !== "object" ||
      typeof v.inventoryHash !== "string" ||
      !names(v.keep) ||
      !names(v.compact) ||
      !names(v.pinned)
    )
      return undefined;
    const basis =
      v.basis && typeof v.basis === "object" && !Array.isArray(v.basis)
        ? Object.fromEntries(Object.entries(v.basis).filter(([, d]) => typeof d === "string"))
        : {};
    // Each name once, compact ones among the kept (a repeated name would be sent twice).
    const keep: string[] = [...new Set<string>(v.keep)];
    return {
      inventoryHash: v.inventoryHash,
      keep,
      compact: [...new Set<string>(v.compact)].filter((n) => keep.includes(n)),
      pinned: [...new Set<string>(v.pinned)],
      basis: basis as Record<string, string>,
    };
  } catch {
    return undefined;
  }
}

/**
 * Where MCP calls are audited (SQLite file or PostgreSQL), and where each session's curation is kept.
 * Contract: `record` and `saveCuration` never throw and never wait; reads may be async and
 * answer empty (or undefined) when the store cannot be read.
 */
export interface AuditStore {
  /** The file or database, for messages. */
  readonly path: string;
  record(r: AuditRecord): void;
  /** Keep a session's curation (replacing the previous one). */
  saveCuration(sessionId: string, c: StoredCuration): void;
  /** A session's curation, if one was kept in the last 90 days. */
  loadCuration(sessionId: string): StoredCuration | undefined | Promise<StoredCuration | undefined>;
  /** Calls per exposed tool name since `sinceMs` (epoch ms); empty when the store cannot be read. */
  recentUses(sinceMs: number): Map<string, number> | Promise<Map<string, number>>;
  /** Every record, oldest first. */
  all(): AuditRecord[] | Promise<AuditRecord[]>;
  close(): void | Promise<void>;
}

/**
 * The MCP call audit log: one SQLite table (`node:sqlite`, WAL, synchronous NORMAL), written once per call.
 * Contract: `record` never throws (a failed write is reported through `onError` once per
 * instance) and redacts every text it writes with @keel/secrets (an error message that echoes
 * a call's arguments or result keeps no key); `recentUses` counts calls per exposed tool name
 * since a time.
 */
export class AuditLog implements AuditStore {
  readonly path: string;
  #db: DatabaseSync;
  #insert: StatementSync;
  #recent: StatementSync;
  #saveCuration: StatementSync;
  #loadCuration: StatementSync;
  #onError: ((err: unknown) => void) | undefined;
  #failed = false;

  constructor(path: string, onError?: (err: unknown) => void) {
    this.path = path;
    this.#onError = onError;
    // Busy timeout first, WAL switch and schema retried on a concurrent first open, a
    // malformed file refused (kernel's openSqlite, shared by every Keel database).
    this.#db = openSqlite(path, {
      what: "MCP audit log",
      setup: (db) => {
        db.exec("PRAGMA secure_delete=ON");
        // A row per call: a commit survives a killed process (WAL); only a power loss may drop
        // the last rows, and a call does not wait for an fsync.
        db.exec("PRAGMA synchronous=NORMAL");
        db.exec(`CREATE TABLE IF NOT EXISTS mcp_calls (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          ts INTEGER NOT NULL,
          session_id TEXT NOT NULL,
          server TEXT NOT NULL,
          tool TEXT NOT NULL,
          name TEXT NOT NULL,
          duration_ms REAL NOT NULL,
          outcome TEXT NOT NULL,
          bytes INTEGER NOT NULL,
          error TEXT
        )`);
        db.exec("CREATE INDEX IF NOT EXISTS mcp_calls_ts ON mcp_calls (ts)");
        db.exec(
          "CREATE TABLE IF NOT EXISTS mcp_sessions (session_id TEXT PRIMARY KEY, ts INTEGER NOT NULL, state TEXT NOT NULL)",
        );
      },
    });
    this.#saveCuration = this.#db.prepare(
      "INSERT INTO mcp_sessions (session_id, ts, state) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET ts = excluded.ts, state = excluded.state",
    );
    this.#loadCuration = this.#db.prepare("SELECT state FROM mcp_sessions WHERE session_id = ? AND ts >= ?");
    try {
      this.#db.prepare("DELETE FROM mcp_sessions WHERE ts < ?").run(Date.now() - CURATION_TTL_MS);
    } catch {
      // another process holds the write lock: the next open prunes
    }
    this.#insert = this.#db.prepare(
      "INSERT INTO mcp_calls (ts, session_id, server, tool, name, duration_ms, outcome, bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.#recent = this.#db.prepare("SELECT name, COUNT(*) AS n FROM mcp_calls WHERE ts >= ? GROUP BY name");
  }

  record(r: AuditRecord): void {
    try {
      this.#insert.run(
        r.ts,
        r.sessionId,
        redactValue(r.server),
        redactValue(r.tool),
        redactValue(r.name),
        r.durationMs,
        r.outcome,
        r.bytes,
        r.error === undefined ? null : redact(r.error),
      );
    } catch (err) {
      if (!this.#failed) this.#onError?.(err);
      this.#failed = true;
    }
  }

  saveCuration(sessionId: string, c: StoredCuration): void {
    try {
      this.#saveCuration.run(sessionId, Date.now(), storableCuration(c));
    } catch (err) {
      if (!this.#failed) this.#onError?.(err);
      this.#failed = true;
    }
  }

  loadCuration(sessionId: string): StoredCuration | undefined {
    try {
      const row = this.#loadCuration.get(sessionId, Date.now() - CURATION_TTL_MS) as { state: string } | undefined;
      return row ? curationOf(row.state) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Calls per exposed tool name since `sinceMs` (epoch ms). */
  recentUses(sinceMs: number): Map<string, number> {
    try {
      const rows = this.#recent.all(sinceMs) as Array<{ name: string; n: number }>;
      return new Map(rows.map((r) => [r.name, Number(r.n)]));
    } catch {
      return new Map();
    }
  }

  /** Every record, oldest first (for tests and `keel inspect`). */
  all(): AuditRecord[] {
    return (this.#db.prepare("SELECT * FROM mcp_calls ORDER BY id").all() as Array<Record<string, unknown>>).map(
      auditRecordOf,
    );
  }

  close(): void {
    try {
      this.#db.close();
    } catch {
      // already closed
    }
  }
}
