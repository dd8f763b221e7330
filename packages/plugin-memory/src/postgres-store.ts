/**
 * The memory store on PostgreSQL, for instances sharing one database. Each memory carries a
 * tsvector of the tokens SQLite's FTS5 tokenizer would make (content, key, category and
 * context as weights A–D), and search scores BM25 exactly as FTS5's bm25() does (k1 1.2,
 * b 0.75, the same column weights and statistics over every active memory), so recall ranks
 * alike on both backends.
 */
import { headOf } from "@keel/text";
import { bm25Idf } from "@keel/text/retrieval";
import { redact } from "@keel/secrets";
import { PgComponent, registerMigrations } from "@keel/store-postgres";
import type { PgQuery, PostgresTarget } from "@keel/store-postgres";
import { ftsTokens, variantPrefix } from "./fts-tokens.ts";
import { CONTEXT_CHARS, checkInput, DF_REFRESH_WRITES, SCORE_BUDGET, searchRanges } from "./memory-input.ts";
import { MISS_QUERY_CHARS } from "./sqlite-store.ts";
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

/** Index statistics written by other instances are picked up within this time. */
const STATS_TTL_MS = 30_000;
/** tsvector limits: positions up to 16,383, lexemes under 2 KiB. */
const MAX_POS = 16_383;
const MAX_LEXEME_BYTES = 2000;
/** Stays well under the 1 MiB a tsvector may hold. */
const MAX_VECTOR_BYTES = 900_000;

/**
 * Migrations of the memory tables (entry i: version i → i + 1; `{s}` is the schema).
 * Contract: never edited once released.
 */
export const MEMORY_MIGRATIONS: readonly string[] = [
  `CREATE TABLE {s}.keel_memories (
     id INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     namespace TEXT NOT NULL,
     scope TEXT NOT NULL,
     key TEXT,
     category TEXT,
     content TEXT NOT NULL,
     importance DOUBLE PRECISION NOT NULL,
     confidence DOUBLE PRECISION NOT NULL,
     source_session TEXT,
     source_turn TEXT,
     source_via TEXT,
     seq INTEGER,
     context TEXT NOT NULL DEFAULT '',
     occurred_at BIGINT NOT NULL,
     created_at BIGINT NOT NULL,
     updated_at BIGINT NOT NULL,
     superseded_by INTEGER,
     forgotten_at BIGINT,
     forget_reason TEXT,
     tsv TSVECTOR NOT NULL,
     doclen INTEGER NOT NULL
   );
   CREATE INDEX keel_memories_ns_key ON {s}.keel_memories (namespace, key) WHERE key IS NOT NULL;
   CREATE INDEX keel_memories_ns_session ON {s}.keel_memories (namespace, source_session, seq);
   CREATE INDEX keel_memories_dedupe ON {s}.keel_memories (namespace, md5(content));
   CREATE INDEX keel_memories_fts ON {s}.keel_memories USING GIN (tsv) WHERE superseded_by IS NULL AND forgotten_at IS NULL;
   CREATE TABLE {s}.keel_memory_misses (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, namespace TEXT NOT NULL, query TEXT NOT NULL, at BIGINT NOT NULL, session_id TEXT, turn_id TEXT);
   CREATE TABLE {s}.keel_memory_extractions (turn_id TEXT PRIMARY KEY, namespace TEXT NOT NULL, at BIGINT NOT NULL, facts INTEGER NOT NULL);`,
];

registerMigrations("memory", MEMORY_MIGRATIONS);

const ACTIVE = "superseded_by IS NULL AND forgotten_at IS NULL";
const COLUMNS =
  "id, namespace, scope, key, category, content, importance, confidence, source_session, source_turn, source_via, occurred_at, created_at, updated_at, superseded_by, forgotten_at, forget_reason";

type Row = Record<string, unknown>;

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function toMemory(r: Row): Memory {
  const source: Memory["source"] = {};
  if (r.source_session !== null) source.sessionId = String(r.source_session);
  if (r.source_turn !== null) source.turnId = String(r.source_turn);
  if (r.source_via !== null) source.via = String(r.source_via);
  return {
    id: num(r.id),
    namespace: String(r.namespace),
    scope: r.scope as MemoryScope,
    key: (r.key as string | null) ?? null,
    category: (r.category as string | null) ?? null,
    content: String(r.content),
    importance: num(r.importance),
    confidence: num(r.confidence),
    source,
    occurredAt: num(r.occurred_at),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
    supersededBy: numOrNull(r.superseded_by),
    forgottenAt: numOrNull(r.forgotten_at),
    forgetReason: (r.forget_reason as string | null) ?? null,
  };
}

/** A lexeme quoted for tsvector/tsquery input. */
function lexeme(t: string): string {
  return `'${t.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`;
}

/** The tsvector text of a memory (columns as weights A–D, FTS5 token positions) and its token count. */
export function memoryVector(
  content: string,
  key: string,
  category: string,
  context: string,
): { tsv: string; doclen: number } {
  const positions = new Map<string, string[]>();
  let pos = 0;
  let bytes = 0;
  for (const [text, weight] of [
    [content, "A"],
    [key, "B"],
    [category, "C"],
    [context, "D"],
  ] as const) {
    for (const t of ftsTokens(text)) {
      pos++;
      if (pos > MAX_POS) continue;
      let list = positions.get(t);
      if (!list) {
        // A tsvector holds at most 1 MiB: past the budget, new words are counted but not indexed.
        const size = Buffer.byteLength(t) + 8;
        if (size > MAX_LEXEME_BYTES + 8 || bytes + size > MAX_VECTOR_BYTES) continue;
        bytes += size;
        positions.set(t, (list = []));
      }
      if (list.length < 255) list.push(`${pos}${weight}`), (bytes += 2);
    }
  }
  return { tsv: [...positions].map(([t, p]) => `${lexeme(t)}:${p.join(",")}`).join(" "), doclen: pos };
}

/** Query terms as index tokens (a term of several tokens contributes each), deduplicated. */
function queryTokens(terms: readonly string[]): string[] {
  return [...new Set(terms.flatMap((t) => ftsTokens(t)).filter((t) => Buffer.byteLength(t) <= MAX_LEXEME_BYTES))];
}

/** A search term: an index token, or a prefix of index tokens. */
type PgTerm = string | { prefix: string };

/** A tsquery matching any term (`only`: in that weight only). */
function anyOf(tokens: readonly PgTerm[], only?: string): string {
  return tokens
    .map((t) =>
      typeof t === "string" ? `${lexeme(t)}${only ? `:${only}` : ""}` : `${lexeme(t.prefix)}:*${only ?? ""}`,
    )
    .join(" | ");
}

/**
 * A MemoryStore on PostgreSQL.
 * Contract: the MemoryStore contract of SqliteMemoryStore (same dedupe, supersession, soft
 * deletes, namespace confinement, redaction of every text before it is written, miss log cut
 * to 512 code points, one extraction per turn id); writes to one namespace are serialised
 * across instances by an advisory lock; failures are KEEL_MEMORY_STORE_FAILED naming the
 * database without its password. Tables are created on first use.
 */
export class PostgresMemoryStore implements MemoryStore {
  /** The database, for messages. */
  readonly path: string;
  readonly #db: PgComponent;
  readonly #df = new Map<string, number>();
  #dfWrites = 0;
  #stats: { n: number; avgdl: number; at: number } | undefined;

  constructor(target: PostgresTarget) {
    this.#db = new PgComponent(target, "memory", MEMORY_MIGRATIONS, "KEEL_MEMORY_STORE_FAILED");
    this.path = this.#db.where;
  }

  /** Create or migrate the tables now (otherwise the first call does). */
  ready(): Promise<void> {
    return this.#db.ready();
  }

  async #insert(q: PgQuery, input: MemoryInput): Promise<WriteResult> {
    const { namespace: ns, content, scope, importance, confidence, key, category, at } = checkInput(input);
    // One writer per namespace at a time, across instances: dedupe, positions and supersession stay consistent.
    await q("SELECT pg_advisory_xact_lock(hashtextextended($1, 4242))", [`keel-memory:${ns}`]);
    const same = await q(
      `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE namespace = $1 AND md5(content) = md5($2) AND content = $2 AND scope = $3 AND key IS NOT DISTINCT FROM $4 AND ${ACTIVE} LIMIT 1`,
      [ns, content, scope, key],
    );
    if (same[0]) return { memory: toMemory(same[0]), superseded: [], duplicate: true };
    const src = input.source ?? {};
    let seq: number | null = null;
    let context = "";
    if (src.sessionId !== undefined) {
      const prev = (
        await q(
          `SELECT seq, content FROM {s}.keel_memories WHERE namespace = $1 AND source_session = $2 ORDER BY seq DESC NULLS LAST LIMIT 1`,
          [ns, src.sessionId],
        )
      )[0];
      seq = (prev ? num(prev.seq) : 0) + 1;
      context = prev ? headOf(String(prev.content), CONTEXT_CHARS) : "";
    }
    const { tsv, doclen } = memoryVector(content, key ?? "", category ?? "", context);
    const inserted = await q(
      `INSERT INTO {s}.keel_memories (namespace, scope, key, category, content, importance, confidence, source_session, source_turn, source_via, seq, context, occurred_at, created_at, updated_at, tsv, doclen)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15::tsvector, $16) RETURNING ${COLUMNS}`,
      [
        ns,
        scope,
        key,
        category,
        content,
        importance,
        confidence,
        src.sessionId ?? null,
        src.turnId ?? null,
        src.via ?? null,
        seq,
        context,
        input.occurredAt ?? at,
        at,
        tsv,
        doclen,
      ],
    );
    const memory = toMemory(inserted[0]!);
    this.#dfWrites++;
    let superseded: number[] = [];
    if (key) {
      const old = await q(
        `UPDATE {s}.keel_memories SET superseded_by = $1, updated_at = $2 WHERE namespace = $3 AND key = $4 AND scope = $5 AND id <> $1 AND ${ACTIVE} RETURNING id`,
        [memory.id, at, ns, key, scope],
      );
      superseded = old.map((r) => num(r.id)).sort((a, b) => a - b);
    }
    return { memory, superseded, duplicate: false };
  }

  async write(input: MemoryInput): Promise<WriteResult> {
    return this.#db.tx("write a memory to", (q) => this.#insert(q, input));
  }

  /** Write many memories in one transaction (bulk import, benchmarks). */
  async writeMany(inputs: readonly MemoryInput[]): Promise<WriteResult[]> {
    return this.#db.tx("write memories to", async (q) => {
      const out: WriteResult[] = [];
      for (const i of inputs) out.push(await this.#insert(q, i));
      return out;
    });
  }

  async writeExtraction(turnId: string, namespace: string, inputs: readonly MemoryInput[]): Promise<WriteResult[]> {
    return this.#db.tx("write extracted memories to", async (q) => {
      // Claim the turn first: a second instance extracting it waits here, then finds it taken.
      const claimed = await q(
        "INSERT INTO {s}.keel_memory_extractions (turn_id, namespace, at, facts) VALUES ($1, $2, $3, 0) ON CONFLICT (turn_id) DO NOTHING RETURNING turn_id",
        [turnId, namespace, Date.now()],
      );
      if (!claimed.length) return [];
      const out: WriteResult[] = [];
      for (const i of inputs) out.push(await this.#insert(q, i));
      await q("UPDATE {s}.keel_memory_extractions SET facts = $2 WHERE turn_id = $1", [
        turnId,
        out.filter((r) => !r.duplicate).length,
      ]);
      return out;
    });
  }

  async isExtracted(turnId: string): Promise<boolean> {
    return (
      (
        await this.#db.query("read extractions in", "SELECT 1 FROM {s}.keel_memory_extractions WHERE turn_id = $1", [
          turnId,
        ])
      ).length > 0
    );
  }

  async get(namespace: string, id: number): Promise<Memory | undefined> {
    if (!Number.isSafeInteger(id) || id < 1 || id > 2_147_483_647) return undefined;
    const r = await this.#db.query(
      "read a memory in",
      `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE namespace = $1 AND id = $2`,
      [namespace, id],
    );
    return r[0] ? toMemory(r[0]) : undefined;
  }

  async byKey(namespace: string, key: string): Promise<Memory[]> {
    return (
      await this.#db.query(
        "read memories by key in",
        `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE namespace = $1 AND key = $2 AND ${ACTIVE} ORDER BY id DESC`,
        [namespace, key],
      )
    ).map(toMemory);
  }

  async list(lq: ListQuery): Promise<Memory[]> {
    const where = ["namespace = $1"];
    const args: Array<string | number> = [lq.namespace];
    if (!lq.includeInactive) where.push(ACTIVE);
    if (lq.scope) args.push(lq.scope), where.push(`scope = $${args.length}`);
    if (lq.category) args.push(lq.category), where.push(`category = $${args.length}`);
    if (lq.key) args.push(lq.key), where.push(`key = $${args.length}`);
    args.push(Math.max(1, Math.min(lq.limit ?? 50, 10_000)), Math.max(0, lq.offset ?? 0));
    return (
      await this.#db.query(
        "list memories in",
        `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE ${where.join(" AND ")} ORDER BY id DESC LIMIT $${args.length - 1} OFFSET $${args.length}`,
        args,
      )
    ).map(toMemory);
  }

  async search(sq: SearchQuery): Promise<SearchHit[]> {
    const all = queryTokens(sq.terms);
    if (!all.length) return [];
    const only = sq.plain ? "A" : undefined;
    const w = sq.plain ? [1, 0, 0, 0] : [1, 2, 0.5, 1];
    const stats = await this.#statistics();
    if (!stats.n) return [];
    const tokens = await this.#bounded(
      await this.#variants(sq.namespace, sq.terms, all, only ? 0 : (sq.variants ?? 0)),
      only,
    );
    const idfs: number[] = [];
    for (const t of tokens) {
      // FTS5's idf; counts cached at different moments (other instances write meanwhile) never make N < hits.
      idfs.push(bm25Idf(stats.n, await this.#docFreq(t, only), "fts5"));
    }
    const scopes = sq.scopes?.length ? sq.scopes : null;
    const within = searchRanges(sq.within);
    if (within && !within.length) return [];
    // A prefix term's frequency in a memory is that of every token it begins (FTS5's prefix phrase).
    const rows = await this.#db.query(
      "search memories in",
      `WITH q(i, term, pre, idf) AS (SELECT * FROM unnest($3::int[], $4::text[], $5::bool[], $6::float8[])),
       m AS (SELECT id, doclen, tsv FROM {s}.keel_memories WHERE tsv @@ $2::tsquery AND namespace = $1 AND ${ACTIVE} AND ($12::text[] IS NULL OR scope = ANY($12))
         AND ($13::bigint[] IS NULL OR EXISTS (SELECT 1 FROM unnest($13::bigint[], $14::bigint[]) w(s, e) WHERE occurred_at >= w.s AND occurred_at < w.e)))
       SELECT m.id, sum(q.idf * (f.freq * 2.2) / (f.freq + 1.2 * (0.25 + 0.75 * m.doclen / $7::float8))) AS score
       FROM m CROSS JOIN LATERAL (
         SELECT q.i, sum((SELECT sum(CASE x WHEN 'A' THEN $8::float8 WHEN 'B' THEN $9::float8 WHEN 'C' THEN $10::float8 ELSE $11::float8 END) FROM unnest(u.weights) x)) AS freq
         FROM unnest(m.tsv) u JOIN q ON (NOT q.pre AND u.lexeme = q.term) OR (q.pre AND starts_with(u.lexeme, q.term))
         GROUP BY q.i
       ) f JOIN q ON q.i = f.i
       GROUP BY m.id, m.doclen HAVING sum(f.freq) > 0 ORDER BY score DESC, m.id LIMIT $15`,
      [
        sq.namespace,
        anyOf(tokens, only),
        tokens.map((_, i) => i),
        tokens.map((t) => (typeof t === "string" ? t : t.prefix)),
        tokens.map((t) => typeof t !== "string"),
        idfs,
        stats.avgdl,
        ...w,
        scopes,
        within?.map((r) => r[0]) ?? null,
        within?.map((r) => r[1]) ?? null,
        sq.limit,
      ],
    );
    if (!rows.length) return [];
    const ids = rows.map((r) => num(r.id));
    const full = await this.#db.query(
      "read memories in",
      `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE id = ANY($1::int[])`,
      [ids],
    );
    const byId = new Map(full.map((r) => [num(r.id), r]));
    return rows.flatMap((r) => {
      const m = byId.get(num(r.id));
      return m ? [{ memory: toMemory(m), score: num(r.score) }] : [];
    });
  }

  /** As the SQLite store: a word of one token that no memory of the namespace holds is searched by its variant prefix. */
  async #variants(
    namespace: string,
    words: readonly string[],
    tokens: readonly string[],
    letters: number,
  ): Promise<PgTerm[]> {
    if (!letters) return [...tokens];
    const prefixOf = new Map<string, string>();
    for (const word of words) {
      const own = ftsTokens(word);
      // Only a token the query keeps (an overlong one is no lexeme PostgreSQL accepts in a tsquery).
      if (own.length !== 1 || prefixOf.has(own[0]!) || !tokens.includes(own[0]!)) continue;
      const p =
        (await this.#docFreq(own[0]!)) === 0 || !(await this.#heldIn(namespace, own[0]!))
          ? variantPrefix(word, letters)
          : undefined;
      if (p) prefixOf.set(own[0]!, p);
    }
    return tokens.map((t) => (prefixOf.has(t) ? { prefix: prefixOf.get(t)! } : t));
  }

  /**
   * Whether a namespace's own active memories hold a token: it, not the whole table, decides a
   * variant, so other namespaces neither change what this one finds nor reveal their words
   * through it. Only a yes is cached (a token the namespace lacks may be written next).
   */
  async #heldIn(namespace: string, token: string): Promise<boolean> {
    const key = `\u0001${namespace}\u0001${token}`;
    if (this.#df.has(key)) return true;
    const held =
      (
        await this.#db.query(
          "look up a word in",
          `SELECT 1 AS x FROM {s}.keel_memories WHERE tsv @@ $1::tsquery AND namespace = $2 AND ${ACTIVE} LIMIT 1`,
          [anyOf([token]), namespace],
        )
      ).length > 0;
    if (held) this.#df.set(key, 1);
    return held;
  }

  /** Rows and average tokens of the active index (FTS5's N and avgdl), cached a short while. */
  async #statistics(): Promise<{ n: number; avgdl: number; at: number }> {
    const now = Date.now();
    // An empty index is never cached: another instance may write the first memories any moment.
    if (this.#stats && this.#stats.n > 0 && now - this.#stats.at < STATS_TTL_MS && this.#dfWrites < DF_REFRESH_WRITES)
      return this.#stats;
    // Term counts are refreshed with the statistics, so idf and N agree.
    this.#df.clear();
    this.#dfWrites = 0;
    const r = (
      await this.#db.query(
        "read index statistics in",
        `SELECT count(*) AS n, coalesce(sum(doclen), 0) AS tokens FROM {s}.keel_memories WHERE ${ACTIVE}`,
      )
    )[0]!;
    const n = num(r.n);
    return (this.#stats = { n, avgdl: n ? Math.max(num(r.tokens) / n, 1e-9) : 1, at: now });
  }

  async #docFreq(token: PgTerm, only?: string): Promise<number> {
    const cacheKey = typeof token === "string" ? `${only ?? ""}:${token}` : `${only ?? ""}*${token.prefix}`;
    const known = this.#df.get(cacheKey);
    if (known !== undefined) return known;
    const r = await this.#db.query(
      "count matches in",
      `SELECT count(*) AS n FROM {s}.keel_memories WHERE tsv @@ $1::tsquery AND ${ACTIVE}`,
      [anyOf([token], only)],
    );
    const n = num(r[0]!.n);
    if (n > 0) this.#df.set(cacheKey, n); // a term no memory has yet may be written by another instance next
    return n;
  }

  /** As the SQLite store: the rarest tokens while their matches stay within SCORE_BUDGET (the rarest always kept). */
  async #bounded(tokens: readonly PgTerm[], only?: string): Promise<PgTerm[]> {
    if (this.#df.size > 50_000) this.#df.clear();
    const withDf: Array<{ t: PgTerm; n: number }> = [];
    for (const t of tokens) withDf.push({ t, n: await this.#docFreq(t, only) });
    if (only) return [...tokens];
    const keep = new Set<PgTerm>();
    let rows = 0;
    for (const { t, n } of withDf.slice().sort((a, b) => a.n - b.n)) {
      if (keep.size && rows + n > SCORE_BUDGET) break;
      keep.add(t);
      rows += n;
    }
    return tokens.filter((t) => keep.has(t));
  }

  async neighbours(namespace: string, seeds: readonly Memory[], span: number): Promise<Map<number, Memory[]>> {
    const out = new Map<number, Memory[]>();
    if (span < 1) return out;
    const ids = seeds.filter((s) => s.source.sessionId !== undefined).map((s) => s.id);
    if (!ids.length) return out;
    const rows = await this.#db.query(
      "read neighbours in",
      `SELECT me.id AS seed, m.${COLUMNS.split(", ").join(", m.")} FROM {s}.keel_memories me JOIN {s}.keel_memories m ON m.namespace = me.namespace AND m.source_session = me.source_session AND m.seq BETWEEN me.seq - $1 AND me.seq + $1
       WHERE me.id = ANY($2::int[]) AND me.namespace = $3 AND m.id <> me.id AND m.superseded_by IS NULL AND m.forgotten_at IS NULL ORDER BY me.id, m.seq`,
      [span, ids, namespace],
    );
    for (const id of ids) out.set(id, []);
    for (const r of rows) out.get(num(r.seed))?.push(toMemory(r));
    return out;
  }

  async forget(namespace: string, id: number, reason?: string): Promise<Memory | undefined> {
    if (!Number.isSafeInteger(id) || id < 1 || id > 2_147_483_647) return undefined;
    const now = Date.now();
    const r = await this.#db.query(
      "forget a memory in",
      `UPDATE {s}.keel_memories SET forgotten_at = $1, forget_reason = $2, updated_at = $1 WHERE namespace = $3 AND id = $4 AND ${ACTIVE} RETURNING ${COLUMNS}`,
      [now, reason ?? null, namespace, id],
    );
    return r[0] ? toMemory(r[0]) : undefined;
  }

  async history(namespace: string, key: string): Promise<Memory[]> {
    return (
      await this.#db.query(
        "read a key's history in",
        `SELECT ${COLUMNS} FROM {s}.keel_memories WHERE namespace = $1 AND key = $2 ORDER BY id`,
        [namespace, key],
      )
    ).map(toMemory);
  }

  async logMiss(miss: { namespace: string; query: string; sessionId?: string; turnId?: string }): Promise<void> {
    await this.#db.query(
      "log a recall miss in",
      "INSERT INTO {s}.keel_memory_misses (namespace, query, at, session_id, turn_id) VALUES ($1, $2, $3, $4, $5)",
      [
        miss.namespace,
        headOf(redact(miss.query), MISS_QUERY_CHARS),
        Date.now(),
        miss.sessionId ?? null,
        miss.turnId ?? null,
      ],
    );
  }

  async misses(namespace?: string, limit = 100): Promise<MissRecord[]> {
    const rows =
      namespace === undefined
        ? await this.#db.query(
            "read the miss log in",
            "SELECT * FROM {s}.keel_memory_misses ORDER BY id DESC LIMIT $1",
            [limit],
          )
        : await this.#db.query(
            "read the miss log in",
            "SELECT * FROM {s}.keel_memory_misses WHERE namespace = $1 ORDER BY id DESC LIMIT $2",
            [namespace, limit],
          );
    return rows.map((r) => ({
      id: num(r.id),
      namespace: String(r.namespace),
      query: String(r.query),
      at: num(r.at),
      sessionId: (r.session_id as string | null) ?? null,
      turnId: (r.turn_id as string | null) ?? null,
    }));
  }

  async count(namespace?: string): Promise<number> {
    const r =
      namespace === undefined
        ? await this.#db.query("count memories in", `SELECT count(*) AS n FROM {s}.keel_memories WHERE ${ACTIVE}`)
        : await this.#db.query(
            "count memories in",
            `SELECT count(*) AS n FROM {s}.keel_memories WHERE namespace = $1 AND ${ACTIVE}`,
            [namespace],
          );
    return num(r[0]!.n);
  }

  close(): void {
    this.#db.close();
  }
}
