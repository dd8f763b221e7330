/**
 * Raw outputs on PostgreSQL: what one instance compressed or masked can be read back by a
 * turn of the same session served by another instance.
 */
import { errorMessage } from "@keel/kernel";
import { PgComponent, registerMigrations } from "@keel/store-postgres";
import type { PostgresTarget } from "@keel/store-postgres";
import { redact, redactValue } from "@keel/secrets";
import type { RawRecord, RawStorage } from "./store.ts";

/** Migrations of the raw-output table (entry i: version i → i + 1). Contract: never edited once released. */
export const RAW_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_compaction_raw (
     id TEXT PRIMARY KEY,
     session_id TEXT NOT NULL,
     tool_call_id TEXT NOT NULL,
     tool_name TEXT NOT NULL,
     kind TEXT NOT NULL,
     text TEXT NOT NULL,
     tokens INTEGER NOT NULL,
     created_at BIGINT NOT NULL
   );`,
];
registerMigrations("compaction", RAW_MIGRATIONS);

/**
 * The raw-output store on PostgreSQL.
 * Contract: as RawStore: `put` never throws or waits (the record is served from memory until
 * its insert lands; a failed insert keeps it in memory and sets `lastError`), text is redacted
 * before it is kept, `get` answers only the session that stored the record; `close()` waits for
 * pending inserts and leaves the store usable.
 */
export class PostgresRawStore implements RawStorage {
  readonly path: string;
  readonly #db: PgComponent;
  readonly #memory = new Map<string, RawRecord>();
  readonly #pending = new Set<Promise<unknown>>();
  lastError: string | undefined;

  constructor(target: PostgresTarget) {
    this.#db = new PgComponent(target, "compaction", RAW_MIGRATIONS, "KEEL_STORE_FAILED");
    this.path = this.#db.where;
  }

  get degraded(): boolean {
    return this.lastError !== undefined;
  }

  put(input: RawRecord): void {
    const r = { ...input, text: redact(input.text), toolName: redactValue(input.toolName) };
    this.#memory.set(r.id, r);
    const p = this.#db
      .query(
        "store a raw output in",
        "INSERT INTO {s}.keel_compaction_raw (id, session_id, tool_call_id, tool_name, kind, text, tokens, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET session_id = EXCLUDED.session_id, tool_call_id = EXCLUDED.tool_call_id, tool_name = EXCLUDED.tool_name, kind = EXCLUDED.kind, text = EXCLUDED.text, tokens = EXCLUDED.tokens, created_at = EXCLUDED.created_at",
        [r.id, r.sessionId, r.toolCallId, r.toolName, r.kind, r.text, r.tokens, r.createdAt],
      )
      .then(
        () => {
          if (this.#memory.get(r.id) === r) this.#memory.delete(r.id);
        },
        (err: unknown) => {
          this.lastError ??= `${this.path}: ${errorMessage(err)}`;
        },
      )
      .finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  async get(id: string, sessionId: string): Promise<RawRecord | undefined> {
    const mem = this.#memory.get(id);
    if (mem) return mem.sessionId === sessionId ? mem : undefined;
    try {
      const row = (
        await this.#db.query(
          "read a raw output in",
          "SELECT * FROM {s}.keel_compaction_raw WHERE id = $1 AND session_id = $2",
          [id, sessionId],
        )
      )[0];
      if (!row) return undefined;
      return {
        id: String(row.id),
        sessionId: String(row.session_id),
        toolCallId: String(row.tool_call_id),
        toolName: String(row.tool_name),
        kind: row.kind as RawRecord["kind"],
        text: String(row.text),
        tokens: Number(row.tokens),
        createdAt: Number(row.created_at),
      };
    } catch (err) {
      this.lastError ??= `${this.path}: ${errorMessage(err)}`;
      return undefined;
    }
  }

  /** Wait for pending inserts. Contract: the store stays usable (the plugin closes it between sessions; the pool is shared). */
  async close(): Promise<void> {
    await Promise.all([...this.#pending]);
  }
}
