/** The loop's guards: how far one turn may go. */
import * as z from "zod/mini";
import { englishMessages } from "./zod.ts";

englishMessages();

/**
 * Loop guards. Contract: when one runs out the model gets one final round without tools —
 * except `wallTimeMs`, which cuts whatever runs and ends the turn at once.
 * Defaults: 50 rounds, 200 tool calls, 1,000,000 tokens, 600 s, 0.95 of the context window,
 * 100,000 code points per tool result.
 */
export interface Limits {
  /** Normal rounds (provider requests with tools); the final round without tools comes on top. */
  maxRounds: number;
  /** Tool calls per turn; calls past it in one response get a "skipped" result. */
  maxToolCalls: number;
  /** Input + output tokens the provider reported for this turn. */
  tokenBudget: number;
  /**
   * Wall time of one turn, ms. Checked between rounds and also enforced while a provider stream,
   * a tool call or a phase runs: when it runs out mid-round the running work is aborted (a cut
   * tool call still gets its result), no final round is made, and the turn ends `stopped`
   * (`wall_time`) with a `guard.tripped` event.
   */
  wallTimeMs: number;
  /** Fraction of the provider's context window a request may fill. */
  contextCeiling: number;
  /**
   * Code points of text one tool result may hold (every tool: built-in, plugin, MCP); a
   * longer result keeps its head and tail with a marker saying how much was cut.
   */
  maxToolResultChars: number;
  /**
   * Bytes of image data (base64, as sent) one tool result may hold in all; images past it are
   * replaced by a note saying what was dropped (a provider refuses an oversize image or body).
   */
  maxToolResultImageBytes: number;
  /**
   * Dollars one turn may spend (the providers' reported `costUsd`). A request whose estimate
   * (tokens × input price + output ceiling × output price, see estimateCost) would pass it is not
   * sent: the turn ends `stopped` with reason `budget`. Unset: no limit. A model without a price
   * is held to the token limits only.
   */
  maxCostUsd?: number;
  /** Dollars one session may spend over all its turns, as its log's `model.responded` events add up (durable across restarts). */
  maxSessionCostUsd?: number;
  /** Input + output tokens one session may use over all its turns (for models without prices), as its log adds up. */
  maxSessionTokens?: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxRounds: 50,
  maxToolCalls: 200,
  tokenBudget: 1_000_000,
  wallTimeMs: 600_000,
  contextCeiling: 0.95,
  maxToolResultChars: 100_000,
  maxToolResultImageBytes: 5_000_000,
};

const positive = z.optional(z.number().check(z.positive()));
const positiveInt = () => z.optional(z.number().check(z.int(), z.positive()));

/** The schema of a partial `limits` option (createAgent and agent.config.ts). Contract: strict; every field optional. */
export const limitsSchema = z.strictObject({
  maxRounds: positiveInt(),
  maxToolCalls: positiveInt(),
  tokenBudget: positive,
  wallTimeMs: positive,
  contextCeiling: z.optional(z.number().check(z.gt(0), z.lte(1))),
  maxToolResultChars: positiveInt(),
  maxToolResultImageBytes: z.optional(z.number().check(z.int(), z.nonnegative())),
  maxCostUsd: positive,
  maxSessionCostUsd: positive,
  maxSessionTokens: positiveInt(),
});

/** The schema of a partial `toolTimeouts` option, ms per tool category. Contract: strict; every field optional. */
export const toolTimeoutsSchema = z.strictObject({ exec: positive, mcp: positive, info: positive, edit: positive });
