/**
 * The raw-output store: every output the plugin compresses or masks is kept here verbatim,
 * so the model can read it back by line or character range. SQLite through node:sqlite;
 * when the file cannot be opened or written, an in-memory map for this process.
 */
import type { DatabaseSync } from "node:sqlite";
import { errorMessage } from "@keel/kernel";
import { openSqlite } from "@keel/store-sqlite";
import { codePointLength, codePointSlice, headOf, toWellFormed } from "@keel/text";
import { redact, redactValue } from "@keel/secrets";

/** One stored raw output. */
export interface RawRecord {
  id: string;
  sessionId: string;
  toolCallId: string;
  toolName: string;
  /** Why it was stored: `taco` (compressed at entry), `mask` (masked under pressure), `summary` (a summary the plugin wrote: the digest of its text as toolCallId, empty text). */
  kind: "taco" | "mask" | "summary";
  text: string;
  tokens: number;
  createdAt: number;
}

/**
 * Where raw outputs are kept (a SQLite file or PostgreSQL).
 * Contract: `put` never throws and never waits; `get` answers only the storing session.
 */
export interface RawStorage {
  readonly path: string;
  readonly degraded: boolean;
  readonly lastError: string | undefined;
  put(input: RawRecord): void;
  get(id: string, sessionId: string): RawRecord | undefined | Promise<RawRecord | undefined>;
  close(): void | Promise<void>;
}

/**
 * Raw outputs by id, each bound to the session that produced it.
 * Contract: `put` never throws (a failing disk switches to memory and reports it once through
 * `lastError`) and redacts the text with @keel/secrets before it is kept, in memory or on disk;
 * `get(id, sessionId)` returns what `put` stored (redacted) only to the session that stored it,
 * and undefined to any other, exactly as for an unknown id.
 */
export class RawStore implements RawStorage {
  readonly path: string;
  #db: DatabaseSync | undefined;
  #memory = new Map<string, RawRecord>();
  #failed = false;
  /** The first storage error, when the store fell back to memory. */
  lastError: string | undefined;

  constructor(path: string) {
    this.path = path;
  }

  #open(): DatabaseSync | undefined {
    if (this.#db || this.#failed) return this.#db;
    try {
      // Busy timeout before the WAL switch (both retried on a concurrent first open); a
      // malformed file is refused and the store falls back to memory.
      this.#db = openSqlite(this.path, {
        what: "compaction store",
        setup: (db) => {
          db.exec("PRAGMA secure_delete = ON");
          db.exec(
            "CREATE TABLE IF NOT EXISTS raw (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, tool_name TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, tokens INTEGER NOT NULL, created_at INTEGER NOT NULL)",
          );
        },
      });
    } catch (err) {
      this.#fail(err);
    }
    return this.#db;
  }

  #fail(err: unknown): void {
    this.#failed = true;
    this.lastError ??= `${this.path}: ${errorMessage(err)}`;
    try {
      this.#db?.close();
    } catch {
      // already failing
    }
    this.#db = undefined;
  }

  /** True once the store had to fall back to memory. */
  get degraded(): boolean {
    return this.#failed;
  }

  put(input: RawRecord): void {
    const record = { ...input, text: redact(input.text), toolName: redactValue(input.toolName) };
    this.#memory.set(record.id, record);
    const db = this.#open();
    if (!db) return;
    try {
      db.prepare(
        "INSERT OR REPLACE INTO raw (id, session_id, tool_call_id, tool_name, kind, text, tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      ).run(
        record.id,
        record.sessionId,
        record.toolCallId,
        record.toolName,
        record.kind,
        record.text,
        record.tokens,
        record.createdAt,
      );
      this.#memory.delete(record.id);
    } catch (err) {
      this.#fail(err);
    }
  }

  get(id: string, sessionId: string): RawRecord | undefined {
    const mem = this.#memory.get(id);
    if (mem) return mem.sessionId === sessionId ? mem : undefined;
    const db = this.#open();
    if (!db) return undefined;
    try {
      const row = db.prepare("SELECT * FROM raw WHERE id = ? AND session_id = ?").get(id, sessionId) as
        | Record<string, unknown>
        | undefined;
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
      this.#fail(err);
      return undefined;
    }
  }

  close(): void {
    try {
      this.#db?.close();
    } catch {
      // closing twice is harmless
    }
    this.#db = undefined;
  }
}

/**
 * Lines or characters of a stored text.
 * Contract: line numbers are 1-based and inclusive; characters are 0-based, end exclusive;
 * the slice is cut at `maxChars` with a note saying how to read on.
 */
export function sliceRaw(
  text: string,
  range: { startLine?: number; endLine?: number; startChar?: number; endChar?: number },
  maxChars: number,
): { text: string; lines: number; from: string; truncated: boolean } {
  const allLines = text.split("\n");
  let body: string;
  let from: string;
  if (range.startChar !== undefined || range.endChar !== undefined) {
    const total = codePointLength(text);
    const s = Math.max(0, range.startChar ?? 0);
    const e = Math.min(total, range.endChar ?? total);
    body = codePointSlice(text, s, Math.max(s, e));
    from = `chars ${s}–${Math.max(s, e)} of ${total}`;
  } else {
    const s = Math.max(1, range.startLine ?? 1);
    const e = Math.min(allLines.length, range.endLine ?? allLines.length);
    body = allLines.slice(s - 1, Math.max(s - 1, e)).join("\n");
    from = `lines ${s}–${Math.max(s - 1, e)} of ${allLines.length}`;
  }
  const truncated = body.length > maxChars && codePointLength(body) > maxChars;
  return { text: truncated ? headOf(body, maxChars) : toWellFormed(body), lines: allLines.length, from, truncated };
}
