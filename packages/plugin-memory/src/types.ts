/** The memory model and the store interface every backend (SQLite, later PostgreSQL) implements. */

/** Where a memory applies inside its namespace. Contract: `user` ranks first, then `project`, then `global`. */
export type MemoryScope = "user" | "project" | "global";

/** Scope ranks used by the ranking formula (0 = primary). */
export const SCOPE_RANK: Readonly<Record<MemoryScope, number>> = Object.freeze({ user: 0, project: 1, global: 2 });

/** Where a memory came from. */
export interface MemorySource {
  sessionId?: string;
  turnId?: string;
  /** `tool`, `extractor`, `model_extractor`, `import`, … */
  via?: string;
}

/**
 * One stored memory.
 * Contract: `namespace` is the isolation boundary (recall never crosses it); a memory with
 * `supersededBy` or `forgottenAt` set is kept for audit and never recalled.
 */
export interface Memory {
  id: number;
  namespace: string;
  scope: MemoryScope;
  key: string | null;
  category: string | null;
  content: string;
  importance: number;
  confidence: number;
  source: MemorySource;
  /** When the fact happened or was stated (ms); defaults to `createdAt`. */
  occurredAt: number;
  createdAt: number;
  updatedAt: number;
  supersededBy: number | null;
  forgottenAt: number | null;
  forgetReason: string | null;
}

/** What a write gives. Contract: `content` is non-empty; importance and confidence lie in [0, 1]. */
export interface MemoryInput {
  namespace: string;
  scope?: MemoryScope;
  key?: string | null;
  category?: string | null;
  content: string;
  importance?: number;
  confidence?: number;
  source?: MemorySource;
  occurredAt?: number;
  /** Creation time (ms); default now. */
  at?: number;
}

/** The outcome of a write. */
export interface WriteResult {
  memory: Memory;
  /** Ids of the memories this one superseded (same namespace, scope and key). */
  superseded: number[];
  /** True when an identical active memory existed and was returned instead. */
  duplicate: boolean;
}

/** A full-text candidate with its backend relevance (higher is better). */
export interface SearchHit {
  memory: Memory;
  /** Backend relevance, higher is better (SQLite: −bm25). */
  score: number;
}

/** A full-text search. Contract: only active memories of `namespace` are returned. */
export interface SearchQuery {
  namespace: string;
  /** Terms to match (any of them); already normalised by the caller. */
  terms: readonly string[];
  scopes?: readonly MemoryScope[];
  limit: number;
  /** Only memories whose `occurredAt` lies in one of these ranges (ms, end exclusive); a store that cannot filter may ignore it. */
  within?: ReadonlyArray<{ start: number; end: number }>;
  /**
   * A term that no memory of the namespace holds (a misspelling, a word form the stemmer keeps apart: "tourney"
   * for "tournament") is matched by the first `variants` letters of its stem as a prefix, if
   * they are at least 4 (0 or absent = off). A store that cannot may ignore it.
   */
  variants?: number;
  /** Plain BM25 over the memory text alone (no key, category or context columns): the evaluation baseline. */
  plain?: boolean;
}

/** Filters of a listing. */
export interface ListQuery {
  namespace: string;
  scope?: MemoryScope;
  category?: string;
  key?: string;
  /** Include superseded and forgotten memories (audit view). */
  includeInactive?: boolean;
  limit?: number;
  offset?: number;
}

/** A recall that found nothing, kept for tuning. */
export interface MissRecord {
  id: number;
  namespace: string;
  query: string;
  at: number;
  sessionId: string | null;
  turnId: string | null;
}

/**
 * Durable memory storage.
 * Contract: every read is confined to the namespace it is given; writes with a key supersede
 * the active memory with the same (namespace, scope, key) atomically; forget is a soft
 * delete; `markExtracted` and the writes it guards commit together so a retried extraction
 * never duplicates; every text written (memories, keys, categories, miss queries) is redacted
 * with @keel/secrets inside the store, so no caller can persist a secret. Methods may be sync
 * or async (a network backend returns promises).
 */
export interface MemoryStore {
  write(input: MemoryInput): WriteResult | Promise<WriteResult>;
  /** Write many memories and mark `turnId` extracted in one transaction; returns [] when it already was. */
  writeExtraction(
    turnId: string,
    namespace: string,
    inputs: readonly MemoryInput[],
  ): WriteResult[] | Promise<WriteResult[]>;
  isExtracted(turnId: string): boolean | Promise<boolean>;
  get(namespace: string, id: number): Memory | undefined | Promise<Memory | undefined>;
  /** Active memories with exactly this key (any scope). */
  byKey(namespace: string, key: string): Memory[] | Promise<Memory[]>;
  list(query: ListQuery): Memory[] | Promise<Memory[]>;
  search(query: SearchQuery): SearchHit[] | Promise<SearchHit[]>;
  /** Active memories within `span` write positions of each seed in the same source session, in order (context expansion). */
  neighbours(
    namespace: string,
    seeds: readonly Memory[],
    span: number,
  ): Map<number, Memory[]> | Promise<Map<number, Memory[]>>;
  forget(namespace: string, id: number, reason?: string): Memory | undefined | Promise<Memory | undefined>;
  /** The supersession chain of a key, oldest first (audit). */
  history(namespace: string, key: string): Memory[] | Promise<Memory[]>;
  logMiss(miss: { namespace: string; query: string; sessionId?: string; turnId?: string }): void | Promise<void>;
  misses(namespace?: string, limit?: number): MissRecord[] | Promise<MissRecord[]>;
  count(namespace?: string): number | Promise<number>;
  close(): void | Promise<void>;
}
