/** Options of the compaction plugin (zod schema, defaults from MECHANICS "Compaction"). */
import type { ModelProvider } from "@keel/kernel";
import { z } from "zod";

const ratio = z.number().gt(0).max(1);
const provider = z.custom<ModelProvider>((p) => typeof (p as ModelProvider | undefined)?.stream === "function", {
  message: "expected a ModelProvider with a stream() method",
});

/** Which old content the soft stage removes first. */
export const STRATEGIES = ["truncate", "mask", "subgoal", "subgoal_mig"] as const;
/** A soft-stage strategy: `truncate` drops the oldest turns, the others mask old tool outputs (oldest first, or by subgoal tier, or tier minus redundancy). */
export type Strategy = (typeof STRATEGIES)[number];

export const TacoOptions = z
  .object({
    enabled: z.boolean().default(true),
    /** Outputs above this many tokens are compressed. */
    threshold: z.number().int().positive().default(2_000),
    /** Size the digest aims for, in tokens. */
    target: z.number().int().positive().default(500),
    /** Tool names whose outputs may be compressed. */
    tools: z
      .array(z.string().min(1))
      .default([
        "shell",
        "bash",
        "exec",
        "run",
        "run_command",
        "terminal",
        "web_scrape",
        "web_fetch",
        "fetch",
        "read",
        "read_file",
        "cat",
        "open",
      ]),
    /** Tool categories whose outputs may be compressed. */
    categories: z.array(z.enum(["exec", "mcp", "info", "edit"])).default(["exec"]),
    /** Tool names never compressed (wins over everything). */
    exclude: z.array(z.string().min(1)).default([]),
    /** Also compress MCP tools (category `mcp` or a `mcp__` name). */
    includeMcp: z.boolean().default(false),
    /** Deadline of the digest model call; then the deterministic reduction is used. */
    timeoutMs: z.number().int().positive().default(15_000),
  })
  .strict();

export const SubgoalOptions = z
  .object({
    /** `model`: background model call (deterministic fallback); `heuristic`: deterministic only. */
    extractor: z.enum(["model", "heuristic"]).default("model"),
    /** Extract after every Nth round (and at every turn end). */
    every: z.number().int().positive().default(2),
    /** Messages the extractor reads. */
    window: z.number().int().positive().default(6),
    /** How long a compaction waits for an extraction still running. */
    waitMs: z.number().int().nonnegative().default(2_000),
    timeoutMs: z.number().int().positive().default(20_000),
    /** Largest share of the window the active subgoal may pin; its older part beyond that counts as completed. */
    maxActiveShare: ratio.default(0.3),
  })
  .strict();

export const PruneOptions = z
  .object({
    /** Intra-turn pruning (y-agent's): failed, empty and repeated tool-call branches, and old reasoning. */
    enabled: z.boolean().default(true),
    /** First round of a turn that may be pruned. */
    fromRound: z.number().int().positive().default(3),
    /** Prune only when at least this many tokens could go. */
    minCandidateTokens: z.number().int().nonnegative().default(3_000),
    /** Most tool results removed in one pass. */
    maxMessages: z.number().int().positive().default(5),
  })
  .strict();

export const CompactionOptions = z
  .object({
    /** The side model for digests, summaries and extraction; `false` = deterministic only. Default: the agent's side model. */
    model: z.union([provider, z.literal(false)]).optional(),
    /** The context window in tokens; default: the provider's. */
    window: z.number().int().positive().optional(),
    strategy: z.enum(STRATEGIES).default("subgoal"),
    /** Fraction of the window where old tool outputs start being masked (no model call). */
    soft: ratio.default(0.6),
    /** Fraction of the window where old turns are summarised by a model. */
    hard: ratio.default(0.9),
    /** Fraction of the window the soft stage brings a request down to. */
    target: ratio.default(0.45),
    /** Never touched: the last `messages` messages and up to `tokens` (capped at `share` of the window). */
    protectedTail: z
      .object({
        tokens: z.number().int().nonnegative().default(40_000),
        messages: z.number().int().nonnegative().default(6),
        share: ratio.default(0.15),
      })
      .strict()
      .prefault({}),
    /** Rounds after a hard compaction before the next one. */
    cooldownRounds: z.number().int().nonnegative().default(2),
    /** Most identifiers a masked output's stub lists (those not visible elsewhere in the context). */
    stubIdentifiers: z.number().int().nonnegative().default(150),
    /** A stub's identifier index costs at most this share of the tokens of what the stub replaces (most salient identifiers kept). */
    stubIndexShare: ratio.default(0.5),
    /** Also mask large tool-call arguments of old assistant messages (already executed; retrievable). */
    maskArguments: z.boolean().default(true),
    /** Also shorten long text of old assistant messages to its first sentence (retrievable, identifiers indexed). */
    maskText: z.boolean().default(true),
    /** A tool output smaller than this (tokens) is never masked. */
    minMaskTokens: z.number().int().nonnegative().default(120),
    /** Longest structured summary, in tokens. */
    summaryTokens: z.number().int().positive().default(1_200),
    /** A summary (with its identifier index) aims at this share of the tokens it replaces (at least 150 tokens, at most `summaryTokens`). */
    summaryShare: ratio.default(0.5),
    summaryTimeoutMs: z.number().int().positive().default(30_000),
    /** Smoothing of the calibration ratio (reported input tokens / estimate). */
    calibrationAlpha: ratio.default(0.3),
    /** SQLite file for raw outputs; default `<KEEL_HOME>/compaction.sqlite`. */
    path: z.string().min(1).optional(),
    /** Name of the retrieval tool; `false` offers none. */
    retrieveTool: z.union([z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/), z.literal(false)]).default("context_retrieve"),
    taco: TacoOptions.prefault({}),
    prune: PruneOptions.prefault({}),
    /** Offer the model a tool by this name to drop its own stale tool outputs (the pi loop's prun); `false`: none. */
    prun: z.union([z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/), z.literal(false)]).default(false),
    subgoals: SubgoalOptions.prefault({}),
  })
  .strict()
  .refine((o) => o.target <= o.soft && o.soft <= o.hard, { message: "expected target ≤ soft ≤ hard", path: ["soft"] });

/** What `compaction(options)` accepts. */
export type CompactionInput = z.input<typeof CompactionOptions>;
/** Parsed options, defaults applied. */
export type ResolvedOptions = z.output<typeof CompactionOptions>;
