import type { DatabaseSync, StatementSync } from "node:sqlite";
import { openSqlite } from "@keel/kernel";
import { redact } from "@keel/secrets";

/** How an MCP call ended. Contract: `tool_error` is a result with `isError`; the rest had no result. */
export type CallOutcome = "ok" | "tool_error" | "protocol_error" | "timeout" | "cancelled" | "crashed" | "unavailable";

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
 * Where MCP calls are audited (SQLite file or PostgreSQL).
 * Contract: `record` never throws and never waits; reads may be async.
 */
export interface AuditStore {
  /** The file or database, for messages. */
  readonly path: string;
  record(r: AuditRecord): void;
  /** Calls per exposed tool name since `sinceMs` (epoch ms); empty when the store cannot be read. */
  recentUses(sinceMs: number): Map<string, number> | Promise<Map<string, number>>;
  /** Every record, oldest first. */
  all(): AuditRecord[] | Promise<AuditRecord[]>;
  close(): void | Promise<void>;
}

/**
 * The MCP call audit log: one SQLite table (`node:sqlite`, WAL), written once per call.
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
      },
    });
    this.#insert = this.#db.prepare("INSERT INTO mcp_calls (ts, session_id, server, tool, name, duration_ms, outcome, bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    this.#recent = this.#db.prepare("SELECT name, COUNT(*) AS n FROM mcp_calls WHERE ts >= ? GROUP BY name");
  }

  record(r: AuditRecord): void {
    try {
      this.#insert.run(r.ts, r.sessionId, redact(r.server), redact(r.tool), redact(r.name), r.durationMs, r.outcome, r.bytes, r.error === undefined ? null : redact(r.error));
    } catch (err) {
      if (!this.#failed) this.#onError?.(err);
      this.#failed = true;
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
    return (this.#db.prepare("SELECT * FROM mcp_calls ORDER BY id").all() as Array<Record<string, unknown>>).map(auditRecordOf);
  }

  close(): void {
    try {
      this.#db.close();
    } catch {
      // already closed
    }
  }
}
