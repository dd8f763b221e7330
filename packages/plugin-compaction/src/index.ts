/**
 * @keel/plugin-compaction — TACO tool-output compression, context-pressure compaction
 * (soft masking, hard structured summaries) and a subgoal registry for Keel agents.
 */
import { compaction } from "./plugin.ts";

export default compaction;
export { compaction, compressible, PLUGIN_NAME, PLUGIN_VERSION } from "./plugin.ts";
export { CompactionOptions, PruneOptions, STRATEGIES, SubgoalOptions, TacoOptions } from "./options.ts";
export type { CompactionInput, ResolvedOptions, Strategy } from "./options.ts";
export { compactHistory, tailStart } from "./compact.ts";
export { maskStub, MASKED_ARGS_PREFIX, SHORTENED_TEXT_MARK } from "./mask.ts";
export type { CompactInput, CompactOptions, CompactReport, CompactResult, CompactState } from "./compact.ts";
export { reduceText } from "./reduce.ts";
export type { CountTokens } from "./reduce.ts";
export { deterministicSummary, digestOutput, summarizeTurns } from "./summarize.ts";
export type { Produced } from "./summarize.ts";
export { extractIdentifiers, isErrorLine, salientIdentifiers } from "./identifiers.ts";
export { SubgoalRegistry, TIER, extractionPrompt, heuristicExtraction, parseExtraction } from "./subgoals.ts";
export type { Extraction, Subgoal } from "./subgoals.ts";
export { scoreBlocks, weightedJaccard, terms } from "./scoring.ts";
export type { ScoredBlock } from "./scoring.ts";
export {
  blocksOf,
  diffEdits,
  isCompacted,
  isSummary,
  messageKeys,
  DIGEST_PREFIX,
  MASK_PREFIX,
  SUMMARY_PREFIX,
} from "./messages.ts";
export { RawStore, sliceRaw } from "./store.ts";
export type { RawStorage } from "./store.ts";
export { PostgresRawStore, RAW_MIGRATIONS } from "./postgres-store.ts";
export type { RawRecord } from "./store.ts";
export { RetrieveArgs, retrieveTool } from "./retrieve.ts";
export { pruneTurn } from "./prune.ts";
export type { PruneOptions as PruneTurnOptions, PruneReason, PruneReport } from "./prune.ts";
export { PRUNED_PREFIX, PrunArgs, prunEdits, prunTargets, prunTool } from "./prun.ts";
