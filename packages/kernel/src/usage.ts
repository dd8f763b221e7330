/**
 * Token usage reported by a provider for one response.
 * Contract: all counts are non-negative integers; absent counts are 0.
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Cost in US dollars when the adapter knows the model's prices. */
  costUsd?: number;
}

/** A zero usage record. */
export function emptyUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
}

/** A provider-reported count, or 0 when it is missing, negative or not a number. */
function count(n: unknown): number {
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** Add `b` into `a` in place and return `a`. Contract: ignores missing or invalid counts. */
export function addUsage(a: Usage, b: Partial<Usage> | undefined): Usage {
  if (!b) return a;
  a.inputTokens += count(b.inputTokens);
  a.outputTokens += count(b.outputTokens);
  a.cacheReadTokens += count(b.cacheReadTokens);
  a.cacheWriteTokens += count(b.cacheWriteTokens);
  if (typeof b.costUsd === "number" && Number.isFinite(b.costUsd) && b.costUsd >= 0)
    a.costUsd = (a.costUsd ?? 0) + b.costUsd;
  return a;
}
