/** What the loop asks of a token counter: a request counted by part, to keep it under the context ceiling. */
import type { Message } from "./messages.ts";
import type { ToolSchema } from "./provider.ts";

/** Token counts of one request, by part. */
export interface RequestTokenCount {
  /** False when the parts are chars/4 estimates (the tokenizer was not needed yet). */
  exact: boolean;
  /** With `exact: false`: a proven upper bound on the request's tokens. */
  bound?: number;
  system: number;
  tools: number;
  messages: number;
  total: number;
}

/**
 * A token counter (createAgent's default is @keel/tokens' o200k counter).
 * Contract: `countRequest` is synchronous and `total` is the sum of the parts; below
 * `exactAbove` it may estimate (`exact: false`, with a proven `bound`), above it it counts
 * exactly when it has a tokenizer (a runtime without one, a Worker or a browser, estimates
 * erring high and says `exact: false`); `extendCounts`, when present, carries what it knows of `prev` to `next` (`prev`
 * plus `message`, both frozen), so a long history is not walked again each round.
 */
export interface TokenCounter {
  countRequest(
    request: { system: string; messages: readonly Message[]; tools: readonly ToolSchema[] },
    options?: { exactAbove?: number },
  ): RequestTokenCount;
  extendCounts?(prev: readonly Message[], next: readonly Message[], message: Message): void;
}

/** Tokens a file block (base64 `data`) is estimated at: at least 1,500, else 40 per KiB decoded. Contract: pure. */
export function fileTokens(base64: string): number {
  return Math.max(1_500, Math.ceil(((base64.length * 3) / 4 / 1024) * 40));
}
