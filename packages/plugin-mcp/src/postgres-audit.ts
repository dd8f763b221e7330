/**
 * The MCP call audit on PostgreSQL: the same records as the SQLite log, shared by every
 * instance, so recent-use ranking counts the calls of the whole fleet.
 */
import { PgComponent, registerMigrations } from "@keel/store-postgres";
import type { PostgresTarget } from "@keel/store-postgres";
import { redact, redactValue } from "@keel/secrets";
import { auditRecordOf, curationOf, CURATION_TTL_MS, storableCuration } from "./audit.ts";
import type { AuditRecord, AuditStore, StoredCuration } from "./audit.ts";

/** Migrations of the audit table (entry i: version i → i + 1). Contract: never edited once released. */
export const AUDIT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_mcp_calls (
     id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     ts BIGINT NOT NULL,
     session_id TEXT NOT NULL,
     server TEXT NOT NULL,
     tool TEXT NOT NULL,
     name TEXT NOT NULL,
     duration_ms DOUBLE PRECISION NOT NULL,
     outcome TEXT NOT NULL,
     bytes INTEGER NOT NULL,
     error TEXT
   );
   CREATE INDEX keel_mcp_calls_ts ON {s}.keel_mcp_calls (ts);`,
  `CREATE TABLE {s}.keel_mcp_sessions (
     session_id TEXT PRIMARY KEY,
     ts BIGINT NOT NULL,
     state TEXT NOT NULL
   );`,
];
registerMigrations("mcp-audit", AUDIT_MIGRATIONS);

/**
 * The audit log on PostgreSQL.
 * Contract: as AuditLog; `record` returns at once (inserts run in the background, in call
 * order, a failure reported through `onError` once) and `close()` waits for pending inserts.
 */
export class PostgresAuditLog implements AuditStore {
  readonly path: string;
  readonly #db: PgComponent;
  readonly #onError: ((err: unknown) => void) | undefined;
  readonly #pending = new Set<Promise<unknown>>();
  #tail: Promise<unknown> = Promise.resolve();
  #failed = false;
  #pruned = false;

  constructor(target: PostgresTarget, onError?: (err: unknown) => void) {
    this.#db = new PgComponent(target, "mcp-audit", AUDIT_MIGRATIONS, "KEEL_MCP_AUDIT_FAILED");
    this.path = this.#db.where;
    this.#onError = onError;
  }

  record(r: AuditRecord): void {
    this.#write(() =>
      this.#db.query(
        "record an MCP call in",
        "INSERT INTO {s}.keel_mcp_calls (ts, session_id, server, tool, name, duration_ms, outcome, bytes, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
          r.ts,
          r.sessionId,
          redactValue(r.server),
          redactValue(r.tool),
          redactValue(r.name),
          r.durationMs,
          r.outcome,
          r.bytes,
          r.error === undefined ? null : redact(r.error),
        ],
      ),
    );
  }

  saveCuration(sessionId: string, c: StoredCuration): void {
    const state = storableCuration(c);
    if (!this.#pruned) {
      this.#pruned = true;
      this.#write(() =>
        this.#db.query("prune MCP curations in", "DELETE FROM {s}.keel_mcp_sessions WHERE ts < $1", [
          Date.now() - CURATION_TTL_MS,
        ]),
      );
    }
    this.#write(() =>
      this.#db.query(
        "keep an MCP curation in",
        "INSERT INTO {s}.keel_mcp_sessions (session_id, ts, state) VALUES ($1, $2, $3) ON CONFLICT (session_id) DO UPDATE SET ts = EXCLUDED.ts, state = EXCLUDED.state",
        [sessionId, Date.now(), state],
      ),
    );
  }

  async loadCuration(sessionId: string): Promise<StoredCuration | undefined> {
    try {
      await this.flush();
      const rows = await this.#db.query<{ state: string }>(
        "read an MCP curation in",
        "SELECT state FROM {s}.keel_mcp_sessions WHERE session_id = $1 AND ts >= $2",
        [sessionId, Date.now() - CURATION_TTL_MS],
      );
      return rows[0] ? curationOf(rows[0].state) : undefined;
    } catch {
      return undefined;
    }
  }

  #write(run: () => Promise<unknown>): void {
    // Writes run one after another, so the log keeps the order calls ended in.
    const p = this.#tail
      .then(run)
      .catch((err: unknown) => {
        if (!this.#failed) this.#onError?.(err);
        this.#failed = true;
      })
      .finally(() => this.#pending.delete(p));
    this.#pending.add(p);
    this.#tail = p;
  }

  async recentUses(sinceMs: number): Promise<Map<string, number>> {
    try {
      const rows = await this.#db.query<{ name: string; n: string }>(
        "count recent MCP calls in",
        "SELECT name, count(*) AS n FROM {s}.keel_mcp_calls WHERE ts >= $1 GROUP BY name",
        [sinceMs],
      );
      return new Map(rows.map((r) => [r.name, Number(r.n)]));
    } catch {
      return new Map();
    }
  }

  async all(): Promise<AuditRecord[]> {
    await this.flush();
    return (await this.#db.query("read the MCP audit in", "SELECT * FROM {s}.keel_mcp_calls ORDER BY id")).map(
      auditRecordOf,
    );
  }

  /** Wait for the inserts started so far. */
  async flush(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  async close(): Promise<void> {
    await this.flush();
    this.#db.close();
  }
}
