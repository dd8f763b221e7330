/**
 * The SQLite memory store: one file (WAL) through `node:sqlite`, an FTS5 index kept in step
 * by triggers, soft deletes and supersession chains kept for audit.
 */
import { join } from "node:path";
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { errorMessage, KeelError } from "@keel/kernel";
import { defaultKeelHome } from "@keel/safe-path";
import { openSqlite } from "@keel/store-sqlite";
import { headOf } from "@keel/text";
import { redact, redactValue } from "@keel/secrets";
import { CONTEXT_CHARS, checkInput, DF_REFRESH_WRITES, SCORE_BUDGET, searchRanges } from "./memory-input.ts";
import type {
  ListQuery,
  Memory,
  MemoryInput,
  MemoryScope,
  MemoryStore,
  MissRecord,
  SearchHit,
  SearchQuery,
  WriteResult,
} from "./types.ts";
import { variantPrefix } from "./fts-tokens.ts";

/** BM25 weight of the context column (the memory's own text weighs 1). */
const CONTEXT_WEIGHT = 1.0;

/** Longest query text kept in the miss log. */
export const MISS_QUERY_CHARS = 512;

/**
 * Redact what a database written before the shared scanner may hold: memories (their key,
 * category and content) and the miss log, which once kept whole user messages verbatim.
 */
function scrubSecrets(db: DatabaseSync): void {
  // Overwritten text must not survive in freed pages.
  db.exec("PRAGMA secure_delete = ON");
  const mem = db.prepare("UPDATE memories SET content = ?, key = ?, category = ? WHERE id = ?");
  for (const r of db.prepare("SELECT id, content, key, category FROM memories").all() as Array<{
    id: number;
    content: string;
    key: string | null;
    category: string | null;
  }>) {
    const [content, key, category] = [
      redact(r.content),
      r.key === null ? null : redactValue(r.key),
      r.category === null ? null : redactValue(r.category),
    ];
    if (content !== r.content || key !== r.key || category !== r.category) mem.run(content, key, category, r.id);
  }
  const miss = db.prepare("UPDATE misses SET query = ? WHERE id = ?");
  for (const r of db.prepare("SELECT id, query FROM misses").all() as Array<{ id: number; query: string }>) {
    const query = headOf(redact(r.query), MISS_QUERY_CHARS);
    if (query !== r.query) miss.run(query, r.id);
  }
}

/** Schema steps in order: SQL, or a function for a step SQL cannot express. */
const MIGRATIONS: ReadonlyArray<string | ((db: DatabaseSync) => void)> = [
  `CREATE TABLE memories (
     id INTEGER PRIMARY KEY,
     namespace TEXT NOT NULL,
     scope TEXT NOT NULL,
     key TEXT,
     category TEXT,
     content TEXT NOT NULL,
     importance REAL NOT NULL,
     confidence REAL NOT NULL,
     source_session TEXT,
     source_turn TEXT,
     source_via TEXT,
     seq INTEGER,
     context TEXT NOT NULL DEFAULT '',
     occurred_at INTEGER NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     superseded_by INTEGER,
     forgotten_at INTEGER,
     forget_reason TEXT
   );
   CREATE INDEX memories_ns_key ON memories(namespace, key) WHERE key IS NOT NULL;
   CREATE INDEX memories_ns_session ON memories(namespace, source_session, seq);
   CREATE INDEX memories_ns_created ON memories(namespace, created_at);
   CREATE INDEX memories_dedupe ON memories(namespace, substr(content, 1, 80));
   CREATE VIRTUAL TABLE memories_fts USING fts5(content, key, category, context, content='memories', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');
   CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
     INSERT INTO memories_fts(rowid, content, key, category, context) VALUES (new.id, new.content, coalesce(new.key, ''), coalesce(new.category, ''), new.context);
   END;
   CREATE TRIGGER memories_retire AFTER UPDATE OF superseded_by, forgotten_at ON memories
     WHEN old.superseded_by IS NULL AND old.forgotten_at IS NULL AND (new.superseded_by IS NOT NULL OR new.forgotten_at IS NOT NULL) BEGIN
     INSERT INTO memories_fts(memories_fts, rowid, content, key, category, context) VALUES ('delete', old.id, old.content, coalesce(old.key, ''), coalesce(old.category, ''), old.context);
   END;
   CREATE TRIGGER memories_ad AFTER DELETE ON memories WHEN old.superseded_by IS NULL AND old.forgotten_at IS NULL BEGIN
     INSERT INTO memories_fts(memories_fts, rowid, content, key, category, context) VALUES ('delete', old.id, old.content, coalesce(old.key, ''), coalesce(old.category, ''), old.context);
   END;
   CREATE TABLE misses (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, query TEXT NOT NULL, at INTEGER NOT NULL, session_id TEXT, turn_id TEXT);
   CREATE TABLE extractions (turn_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, at INTEGER NOT NULL, facts INTEGER NOT NULL);`,
  scrubSecrets,
];

/** Options of the SQLite memory store. */
export interface SqliteMemoryStoreOptions {
  /** The database file (parent folders are created) or `":memory:"`; default `<KEEL_HOME>/memory.sqlite`. */
  path?: string;
}

/** The default memory database. Contract: `<home>/memory.sqlite`. */
export function defaultMemoryDbPath(home: string = defaultKeelHome()): string {
  return join(home, "memory.sqlite");
}

interface Row {
  id: number;
  namespace: string;
  scope: string;
  key: string | null;
  category: string | null;
  content: string;
  importance: number;
  confidence: number;
  source_session: string | null;
  source_turn: string | null;
  source_via: string | null;
  occurred_at: number;
  created_at: number;
  updated_at: number;
  superseded_by: number | null;
  forgotten_at: number | null;
  forget_reason: string | null;
  score?: number;
}

/** The columns a Memory is read from, in order (the index-only context and seq are never read back). */
const MEMORY_COLUMNS = [
  "id",
  "namespace",
  "scope",
  "key",
  "category",
  "content",
  "importance",
  "confidence",
  "source_session",
  "source_turn",
  "source_via",
  "occurred_at",
  "created_at",
  "updated_at",
  "superseded_by",
  "forgotten_at",
  "forget_reason",
] as const;
const SELECT_MEMORY = MEMORY_COLUMNS.map((c) => `m.${c}`).join(", ");

/** A row read as an array of MEMORY_COLUMNS (then any extra columns) as a Row. */
function arrayRow(a: readonly unknown[]): Row {
  const r: Record<string, unknown> = {};
  for (let i = 0; i < MEMORY_COLUMNS.length; i++) r[MEMORY_COLUMNS[i]!] = a[i];
  return r as unknown as Row;
}

function toMemory(r: Row): Memory {
  const source: Memory["source"] = {};
  if (r.source_session !== null) source.sessionId = r.source_session;
  if (r.source_turn !== null) source.turnId = r.source_turn;
  if (r.source_via !== null) source.via = r.source_via;
  return {
    id: r.id,
    namespace: r.namespace,
    scope: r.scope as MemoryScope,
    key: r.key,
    category: r.category,
    content: r.content,
    importance: r.importance,
    confidence: r.confidence,
    source,
    occurredAt: r.occurred_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    supersededBy: r.superseded_by,
    forgottenAt: r.forgotten_at,
    forgetReason: r.forget_reason,
  };
}

/** A search term: a word, or a prefix of indexed tokens. */
type FtsTerm = string | { prefix: string };

/** An FTS5 query matching any of `terms` (each quoted, so user text is never FTS syntax; a prefix is followed by `*`). */
export function ftsAnyOf(terms: readonly FtsTerm[]): string {
  return terms
    .map((t) => (typeof t === "string" ? `"${t.replace(/"/g, '""')}"` : `"${t.prefix.replace(/"/g, '""')}"*`))
    .join(" OR ");
}

/**
 * A MemoryStore in one SQLite file.
 * Contract: see MemoryStore; every text it writes (content, key, category, miss query) is
 * redacted by @keel/secrets first; several processes may open the same file (WAL, busy timeout
 * 5 s); a failure to open throws KEEL_MEMORY_STORE_FAILED naming the path.
 */
export class SqliteMemoryStore implements MemoryStore {
  readonly path: string;
  readonly #db: DatabaseSync;
  readonly #stmts = new Map<string, StatementSync>();
  #closed = false;
  readonly #df = new Map<string, number>();
  #dfWrites = 0;

  constructor(options: SqliteMemoryStoreOptions = {}) {
    this.path = options.path ?? defaultMemoryDbPath();
    try {
      // One open path for every Keel database: busy timeout first, WAL switch and migration
      // retried while another process holds the lock, a quick check before any write.
      this.#db = openSqlite(this.path, {
        what: "memory database",
        setup: (db) => {
          db.exec("PRAGMA synchronous=NORMAL");
          db.exec("PRAGMA cache_size=-32768");
          db.exec("PRAGMA mmap_size=268435456");
          this.#migrate(db);
        },
      });
    } catch (err) {
      throw new KeelError(
        "KEEL_MEMORY_STORE_FAILED",
        `Opening ${this.path} failed: ${errorMessage(err)}.`,
        { path: this.path },
        { cause: err },
      );
    }
  }

  #migrate(db: DatabaseSync): void {
    const current = () => (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version;
    if (current() === MIGRATIONS.length) return;
    db.exec("BEGIN IMMEDIATE");
    try {
      // Read again inside the write lock: another process may have migrated meanwhile.
      const version = current();
      if (version > MIGRATIONS.length)
        throw new Error(`schema version ${version} is newer than this plugin (${MIGRATIONS.length})`);
      for (let v = version; v < MIGRATIONS.length; v++) {
        const step = MIGRATIONS[v]!;
        if (typeof step === "string") db.exec(step);
        else step(db);
      }
      db.exec(`PRAGMA user_version=${MIGRATIONS.length}`);
      db.exec("COMMIT");
    } catch (err) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw err;
    }
  }

  #stmt(sql: string): StatementSync {
    if (this.#closed)
      throw new KeelError("KEEL_MEMORY_STORE_FAILED", `The memory store ${this.path} is closed.`, { path: this.path });
    let s = this.#stmts.get(sql);
    if (!s) {
      s = this.#db.prepare(sql);
      this.#stmts.set(sql, s);
    }
    return s;
  }

  /**
   * Rows of a statement selecting SELECT_MEMORY first, then `extra` columns. Read as arrays where
   * node:sqlite can (Node 24): building an object per row costs more than the read (the hot path
   * of recall reads ~100 rows).
   */
  #memoryRows(sql: string, extra: readonly string[], ...args: SQLInputValue[]): Array<Row & Record<string, unknown>> {
    const st = this.#stmt(sql) as StatementSync & { setReturnArrays?: (on: boolean) => void };
    if (!st.setReturnArrays) return st.all(...args) as unknown as Array<Row & Record<string, unknown>>;
    st.setReturnArrays(true);
    return (st.all(...args) as unknown as unknown[][]).map((a) => {
      const r = arrayRow(a) as Row & Record<string, unknown>;
      extra.forEach((c, i) => {
        r[c] = a[MEMORY_COLUMNS.length + i];
      });
      return r;
    });
  }

  #tx<T>(fn: () => T): T {
    this.#db.exec("BEGIN IMMEDIATE");
    try {
      const out = fn();
      this.#db.exec("COMMIT");
      return out;
    } catch (err) {
      this.#db.exec("ROLLBACK");
      throw err;
    }
  }

  #guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof KeelError) throw err;
      throw new KeelError(
        "KEEL_MEMORY_STORE_FAILED",
        `${what} in ${this.path} failed: ${errorMessage(err)}.`,
        { path: this.path },
        { cause: err },
      );
    }
  }

  /** Insert one memory (inside a transaction). */
  #insert(input: MemoryInput): WriteResult {
    const { content, scope, importance, confidence, key, category, at } = checkInput(input);
    const same = this.#stmt(
      "SELECT * FROM memories WHERE namespace = ? AND substr(content, 1, 80) = substr(?, 1, 80) AND content = ? AND scope = ? AND key IS ? AND superseded_by IS NULL AND forgotten_at IS NULL LIMIT 1",
    ).get(input.namespace, content, content, scope, key) as Row | undefined;
    if (same) return { memory: toMemory(same), superseded: [], duplicate: true };
    const src = input.source ?? {};
    const pos = this.#position(input.namespace, src.sessionId);
    const { lastInsertRowid } = this.#stmt(
      `INSERT INTO memories (namespace, scope, key, category, content, importance, confidence, source_session, source_turn, source_via, seq, context, occurred_at, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      input.namespace,
      scope,
      key,
      category,
      content,
      importance,
      confidence,
      src.sessionId ?? null,
      src.turnId ?? null,
      src.via ?? null,
      pos.seq,
      pos.context,
      input.occurredAt ?? at,
      at,
      at,
    );
    const id = Number(lastInsertRowid);
    this.#dfWrites++;
    let superseded: number[] = [];
    if (key) {
      const old = this.#stmt(
        "SELECT id FROM memories WHERE namespace = ? AND key = ? AND scope = ? AND id != ? AND superseded_by IS NULL AND forgotten_at IS NULL",
      ).all(input.namespace, key, scope, id) as Array<{ id: number }>;
      superseded = old.map((r) => r.id);
      for (const o of superseded)
        this.#stmt("UPDATE memories SET superseded_by = ?, updated_at = ? WHERE id = ?").run(id, at, o);
    }
    const row = this.#stmt("SELECT * FROM memories WHERE id = ?").get(id) as unknown as Row;
    return { memory: toMemory(row), superseded, duplicate: false };
  }

  /** Position in the source session, and the previous memory's text as index-only context. */
  #position(namespace: string, session: string | undefined): { seq: number | null; context: string } {
    if (session === undefined) return { seq: null, context: "" };
    const prev = this.#stmt(
      "SELECT seq, content FROM memories WHERE namespace = ? AND source_session = ? ORDER BY seq DESC LIMIT 1",
    ).get(namespace, session) as { seq: number; content: string } | undefined;
    return { seq: (prev?.seq ?? 0) + 1, context: prev ? headOf(prev.content, CONTEXT_CHARS) : "" };
  }

  write(input: MemoryInput): WriteResult {
    return this.#guard("Writing a memory", () => this.#tx(() => this.#insert(input)));
  }

  /** Write many memories in one transaction (bulk import, benchmarks). */
  writeMany(inputs: readonly MemoryInput[]): WriteResult[] {
    return this.#guard("Writing memories", () => this.#tx(() => inputs.map((i) => this.#insert(i))));
  }

  writeExtraction(turnId: string, namespace: string, inputs: readonly MemoryInput[]): WriteResult[] {
    return this.#guard("Writing extracted memories", () =>
      this.#tx(() => {
        if (this.#stmt("SELECT 1 FROM extractions WHERE turn_id = ?").get(turnId)) return [];
        const out = inputs.map((i) => this.#insert(i));
        this.#stmt("INSERT INTO extractions (turn_id, namespace, at, facts) VALUES (?, ?, ?, ?)").run(
          turnId,
          namespace,
          Date.now(),
          out.filter((r) => !r.duplicate).length,
        );
        return out;
      }),
    );
  }

  isExtracted(turnId: string): boolean {
    return this.#guard(
      "Reading extractions",
      () => !!this.#stmt("SELECT 1 FROM extractions WHERE turn_id = ?").get(turnId),
    );
  }

  get(namespace: string, id: number): Memory | undefined {
    return this.#guard("Reading a memory", () => {
      const r = this.#stmt("SELECT * FROM memories WHERE namespace = ? AND id = ?").get(namespace, id) as
        | Row
        | undefined;
      return r ? toMemory(r) : undefined;
    });
  }

  byKey(namespace: string, key: string): Memory[] {
    return this.#guard("Reading memories by key", () =>
      (
        this.#stmt(
          "SELECT * FROM memories WHERE namespace = ? AND key = ? AND superseded_by IS NULL AND forgotten_at IS NULL ORDER BY id DESC",
        ).all(namespace, key) as unknown as Row[]
      ).map(toMemory),
    );
  }

  list(q: ListQuery): Memory[] {
    return this.#guard("Listing memories", () => {
      const where = ["namespace = ?"];
      const args: Array<string | number> = [q.namespace];
      if (!q.includeInactive) where.push("superseded_by IS NULL AND forgotten_at IS NULL");
      if (q.scope) where.push("scope = ?"), args.push(q.scope);
      if (q.category) where.push("category = ?"), args.push(q.category);
      if (q.key) where.push("key = ?"), args.push(q.key);
      args.push(Math.max(1, Math.min(q.limit ?? 50, 10_000)), Math.max(0, q.offset ?? 0));
      return (
        this.#stmt(`SELECT * FROM memories WHERE ${where.join(" AND ")} ORDER BY id DESC LIMIT ? OFFSET ?`).all(
          ...args,
        ) as unknown as Row[]
      ).map(toMemory);
    });
  }

  search(q: SearchQuery): SearchHit[] {
    if (!q.terms.length) return [];
    return this.#guard("Searching memories", () => {
      // The FTS index holds active memories only (superseded and forgotten rows are removed from it).
      const scopes = q.scopes?.length ? ` AND m.scope IN (${q.scopes.map(() => "?").join(",")})` : "";
      // A few ranges as an OR of comparisons (several times faster than reading JSON per match);
      // many as one JSON argument (an OR per range outgrows SQLite's expression depth near 1,000).
      const ranges = searchRanges(q.within);
      if (ranges && !ranges.length) return [];
      const asJson = !!ranges && ranges.length > 64;
      const within = !ranges
        ? ""
        : asJson
          ? " AND EXISTS (SELECT 1 FROM json_each(?) w WHERE m.occurred_at >= w.value ->> 0 AND m.occurred_at < w.value ->> 1)"
          : ` AND (${ranges.map(() => "(m.occurred_at >= ? AND m.occurred_at < ?)").join(" OR ")})`;
      const w = q.plain ? "1.0, 0.0, 0.0, 0.0" : `1.0, 2.0, 0.5, ${CONTEXT_WEIGHT}`;
      const terms = q.plain ? q.terms : this.#bounded(q.terms, q.variants ?? 0, q.namespace);
      const match = q.plain ? `content : (${ftsAnyOf(terms)})` : ftsAnyOf(terms);
      const args = [
        match,
        q.namespace,
        ...(q.scopes ?? []),
        ...(!ranges ? [] : asJson ? [JSON.stringify(ranges)] : ranges.flat()),
        q.limit,
      ];
      // Rank ids only; read the full rows of the top ones.
      const top =
        this.#stmt(`SELECT m.id AS id, -bm25(memories_fts, ${w}) AS score FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
        WHERE memories_fts MATCH ? AND m.namespace = ?${scopes}${within} ORDER BY score DESC LIMIT ?`).all(
          ...args,
        ) as Array<{ id: number; score: number }>;
      if (!top.length) return [];
      const rows = this.#memoryRows(
        `SELECT ${SELECT_MEMORY} FROM json_each(?) j JOIN memories m ON m.id = j.value`,
        [],
        JSON.stringify(top.map((r) => r.id)),
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      return top.flatMap((t) => (byId.has(t.id) ? [{ memory: toMemory(byId.get(t.id)!), score: t.score }] : []));
    });
  }

  /**
   * The terms worth scoring: rarest first (document counts, cached), while the rows they match
   * stay within SCORE_BUDGET; the rarest term is always kept. Very frequent terms carry little
   * BM25 weight but cost a score per matching row.
   */
  #bounded(terms: readonly string[], variants: number, namespace: string): readonly FtsTerm[] {
    if (this.#dfWrites >= DF_REFRESH_WRITES || this.#df.size > 50_000) this.#df.clear(), (this.#dfWrites = 0);
    const count = this.#stmt("SELECT count(*) AS n FROM memories_fts WHERE memories_fts MATCH ?");
    const df = (t: FtsTerm): number => {
      const key = typeof t === "string" ? t : `\u0000${t.prefix}`;
      let n = this.#df.get(key);
      if (n === undefined) this.#df.set(key, (n = (count.get(ftsAnyOf([t])) as { n: number }).n));
      return n;
    };
    // Whether the namespace itself holds a word decides its variant: other namespaces' memories
    // must neither change what this one finds nor reveal their words. Only a yes is cached (a
    // word the namespace lacks may be written next).
    const here = this.#stmt(
      "SELECT 1 AS x FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? AND m.namespace = ? LIMIT 1",
    );
    const heldHere = (word: string): boolean => {
      const key = `\u0001${namespace}\u0001${word}`;
      if (this.#df.has(key)) return true;
      const held = here.get(ftsAnyOf([word]), namespace) !== undefined;
      if (held) this.#df.set(key, 1);
      return held;
    };
    const withDf = terms.map((word): { t: FtsTerm; n: number } => {
      const n = df(word);
      const prefix = variants && !heldHere(word) ? variantPrefix(word, variants) : undefined;
      return prefix ? { t: { prefix }, n: df({ prefix }) } : { t: word, n };
    });
    const sorted = withDf.slice().sort((a, b) => a.n - b.n);
    const keep = new Set<FtsTerm>();
    let rows = 0;
    for (const { t, n } of sorted) {
      if (keep.size && rows + n > SCORE_BUDGET) break;
      keep.add(t);
      rows += n;
    }
    return withDf.filter((x) => keep.has(x.t)).map((x) => x.t);
  }

  neighbours(namespace: string, seeds: readonly Memory[], span: number): Map<number, Memory[]> {
    return this.#guard("Reading neighbours", () => {
      const out = new Map<number, Memory[]>();
      if (span < 1) return out;
      const ids = seeds.filter((s) => s.source.sessionId !== undefined).map((s) => s.id);
      if (!ids.length) return out;
      for (const id of ids) out.set(id, []);
      // One statement for every seed; CROSS JOIN keeps SQLite from scanning the namespace first.
      const rows = this.#memoryRows(
        `SELECT ${SELECT_MEMORY}, me.id AS seed_id FROM json_each(?) j CROSS JOIN memories me ON me.id = j.value
        CROSS JOIN memories m ON m.namespace = me.namespace AND m.source_session = me.source_session AND m.seq BETWEEN me.seq - ? AND me.seq + ?
        WHERE me.namespace = ? AND m.id != me.id AND m.superseded_by IS NULL AND m.forgotten_at IS NULL ORDER BY j.key, m.seq`,
        ["seed_id"],
        JSON.stringify(ids),
        span,
        span,
        namespace,
      );
      for (const r of rows) out.get(Number(r.seed_id))?.push(toMemory(r));
      return out;
    });
  }

  forget(namespace: string, id: number, reason?: string): Memory | undefined {
    return this.#guard("Forgetting a memory", () =>
      this.#tx(() => {
        const now = Date.now();
        const r = this.#stmt(
          "UPDATE memories SET forgotten_at = ?, forget_reason = ?, updated_at = ? WHERE namespace = ? AND id = ? AND forgotten_at IS NULL AND superseded_by IS NULL",
        ).run(now, reason ?? null, now, namespace, id);
        if (!r.changes) return undefined;
        return toMemory(this.#stmt("SELECT * FROM memories WHERE id = ?").get(id) as unknown as Row);
      }),
    );
  }

  history(namespace: string, key: string): Memory[] {
    return this.#guard("Reading a key's history", () =>
      (
        this.#stmt("SELECT * FROM memories WHERE namespace = ? AND key = ? ORDER BY id").all(
          namespace,
          key,
        ) as unknown as Row[]
      ).map(toMemory),
    );
  }

  logMiss(miss: { namespace: string; query: string; sessionId?: string; turnId?: string }): void {
    this.#guard("Logging a recall miss", () => {
      this.#stmt("INSERT INTO misses (namespace, query, at, session_id, turn_id) VALUES (?, ?, ?, ?, ?)").run(
        miss.namespace,
        headOf(redact(miss.query), MISS_QUERY_CHARS),
        Date.now(),
        miss.sessionId ?? null,
        miss.turnId ?? null,
      );
    });
  }

  misses(namespace?: string, limit = 100): MissRecord[] {
    return this.#guard("Reading the miss log", () => {
      const rows = (namespace === undefined
        ? this.#stmt("SELECT * FROM misses ORDER BY id DESC LIMIT ?").all(limit)
        : this.#stmt("SELECT * FROM misses WHERE namespace = ? ORDER BY id DESC LIMIT ?").all(
            namespace,
            limit,
          )) as unknown as Array<{
        id: number;
        namespace: string;
        query: string;
        at: number;
        session_id: string | null;
        turn_id: string | null;
      }>;
      return rows.map((r) => ({
        id: r.id,
        namespace: r.namespace,
        query: r.query,
        at: r.at,
        sessionId: r.session_id,
        turnId: r.turn_id,
      }));
    });
  }

  count(namespace?: string): number {
    return this.#guard("Counting memories", () => {
      const active = "superseded_by IS NULL AND forgotten_at IS NULL";
      const r = (
        namespace === undefined
          ? this.#stmt(`SELECT count(*) AS n FROM memories WHERE ${active}`).get()
          : this.#stmt(`SELECT count(*) AS n FROM memories WHERE namespace = ? AND ${active}`).get(namespace)
      ) as { n: number };
      return r.n;
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stmts.clear();
    this.#db.close();
  }
}
