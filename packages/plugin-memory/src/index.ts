/**
 * @keel/plugin-memory — durable memory for Keel agents: a SQLite FTS5 store, ranked recall,
 * memory tools, and post-turn fact extraction, as one hook package.
 */
export type {
  ListQuery,
  Memory,
  MemoryInput,
  MemoryScope,
  MemorySource,
  MemoryStore,
  MissRecord,
  SearchHit,
  SearchQuery,
  WriteResult,
} from "./types.ts";
export { SCOPE_RANK } from "./types.ts";
export { SqliteMemoryStore, defaultMemoryDbPath, MISS_QUERY_CHARS } from "./sqlite-store.ts";
export type { SqliteMemoryStoreOptions } from "./sqlite-store.ts";
export { PostgresMemoryStore, MEMORY_MIGRATIONS } from "./postgres-store.ts";
export { ftsTokens } from "./fts-tokens.ts";
export { recall, prior, DEFAULT_TUNING } from "./recall.ts";
export type { Recalled, RecallRequest, RelevanceTuning } from "./recall.ts";
export { findSecrets, looksSecret, redactSecrets } from "./secrets.ts";
export { queryTerms, dateWindows, eventSpan, hasTimeExpression, isFrameWord, isWhenQuestion } from "./text.ts";
export { memory, memory as default, MemoryOptionsSchema, PLUGIN_NAME } from "./plugin.ts";
export type { MemoryHandle, MemoryOptions, MemoryPlugin, NamespaceResolver } from "./plugin.ts";
export { classifyTurn } from "./classify.ts";
export type { TurnClass } from "./classify.ts";
export { extractDeterministic, extractWithModel, FactsSchema } from "./extract.ts";
export type { Fact } from "./extract.ts";
export { runExtraction } from "./job.ts";
export type { ExtractionInput, ExtractionOutcome } from "./job.ts";
export { memoryTools, renderMemory } from "./tools.ts";
export type { ToolBinding } from "./tools.ts";
