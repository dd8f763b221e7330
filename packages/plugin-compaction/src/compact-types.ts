/** The types a compaction step reads and keeps: its options, its input, its state per session. */
import type { Message, ModelProvider, ToolResultMessage } from "@keel/kernel";
import type { ResolvedOptions } from "./options.ts";
import type { CountTokens } from "./reduce.ts";
import type { SubgoalRegistry } from "./subgoals.ts";

/** Loop guards of one session. */
export interface CompactState {
  /** Rounds seen so far in the session. */
  round: number;
  /** Round of the last hard compaction. */
  lastHard: number | undefined;
  /**
   * Set when a summary could not shrink the context (or nothing was left to summarise);
   * cleared once the request falls below the soft threshold or has grown by a tenth of the
   * window since (new material to compact).
   */
  exhausted: boolean;
  /** Calibrated tokens when `exhausted` was set. */
  exhaustedAt?: number;
}

/** The options a compaction step reads. */
export type CompactOptions = Pick<
  ResolvedOptions,
  | "strategy"
  | "soft"
  | "hard"
  | "target"
  | "protectedTail"
  | "cooldownRounds"
  | "minMaskTokens"
  | "summaryTokens"
  | "summaryTimeoutMs"
  | "retrieveTool"
  | "stubIdentifiers"
  | "maskArguments"
> &
  Partial<Pick<ResolvedOptions, "maskText" | "summaryShare" | "stubIndexShare">>;

/** What one step needs. */
export interface CompactInput {
  messages: readonly Message[];
  /** Tokens of the system prompt and tool definitions. */
  overhead: number;
  window: number;
  /** Reported input tokens / estimate (smoothed); 1 when unknown. */
  calibration: number;
  /** Indices never changed or removed (the first user message, this turn's input). */
  pinned: ReadonlySet<number>;
  /** Answering a context_too_long rejection: mask everything outside a minimal tail and summarise, cooldown ignored. */
  force?: boolean;
  state: CompactState;
  registry?: SubgoalRegistry;
  options: CompactOptions;
  countText: CountTokens;
  countMessage: (m: Message) => number;
  /** Keep a raw output retrievable; returns its id. */
  stash: (m: ToolResultMessage, kind: "mask" | "summary") => string;
  model: ModelProvider | undefined;
  signal?: AbortSignal;
  goal: string;
}
