/** A model's price in USD per million tokens (what a budget estimate multiplies by). */
export interface ModelPriceView {
  input: number;
  output: number;
}

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

/**
 * Output tokens assumed for a request without `maxTokens`, when its cost is estimated before it is
 * sent: a conservative ceiling of one answer (most provider defaults are at or below it).
 */
export const DEFAULT_OUTPUT_ESTIMATE = 4096;

/**
 * The cost of a request before it is sent: `tokens` × input price plus the output ceiling
 * (`maxTokens`: the request's, else the provider's maxOutputTokens, else DEFAULT_OUTPUT_ESTIMATE) × output price. Contract: undefined without a price;
 * never below what the request can cost when every input token is billed at the input price.
 */
export function estimateCost(
  tokens: number,
  price: ModelPriceView | undefined,
  maxTokens?: number,
): number | undefined {
  if (!price) return undefined;
  const out = maxTokens ?? DEFAULT_OUTPUT_ESTIMATE;
  return (tokens * price.input + out * price.output) / 1_000_000;
}

/**
 * A response's usage with its cost: the provider's own `costUsd` when it reported a valid one,
 * else its tokens at `price` (cache tokens at the input price), so a priced model that reports no
 * cost still spends against a budget. Contract: unchanged without a price.
 */
export function chargedUsage(usage: Partial<Usage> | undefined, price: ModelPriceView | undefined): Partial<Usage> {
  const given = usage ?? {};
  const c = given.costUsd;
  if (!price || (typeof c === "number" && Number.isFinite(c) && c >= 0)) return given;
  const u = addUsage(emptyUsage(), { ...given, costUsd: undefined });
  const tokensIn = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  return { ...given, costUsd: (tokensIn * price.input + u.outputTokens * price.output) / 1_000_000 };
}
