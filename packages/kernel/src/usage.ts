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

/** Add `b` into `a` in place and return `a`. */
export function addUsage(a: Usage, b: Partial<Usage> | undefined): Usage {
  if (!b) return a;
  a.inputTokens += b.inputTokens ?? 0;
  a.outputTokens += b.outputTokens ?? 0;
  a.cacheReadTokens += b.cacheReadTokens ?? 0;
  a.cacheWriteTokens += b.cacheWriteTokens ?? 0;
  if (b.costUsd !== undefined) a.costUsd = (a.costUsd ?? 0) + b.costUsd;
  return a;
}
