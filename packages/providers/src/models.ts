/** Known context windows and prices of common models (small tables; options override them). */
import type { Usage } from "@keel/kernel";

/** Longest matching prefix wins. */
const CONTEXT_WINDOWS: ReadonlyArray<readonly [string, number]> = [
  ["claude-", 200_000],
  ["gpt-4.1", 1_047_576],
  ["gpt-4o", 128_000],
  ["gpt-4-turbo", 128_000],
  ["gpt-5", 400_000],
  ["o1", 200_000],
  ["o3", 200_000],
  ["o4-mini", 200_000],
];

/** USD per million tokens. `cacheWrite1h` defaults to `cacheWrite`. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
  cacheWrite1h?: number;
}

const PRICES: ReadonlyArray<readonly [string, ModelPrice]> = [
  ["claude-opus-4-5", { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25, cacheWrite1h: 10 }],
  ["claude-opus-4", { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75, cacheWrite1h: 30 }],
  ["claude-sonnet-4", { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75, cacheWrite1h: 6 }],
  ["claude-haiku-4-5", { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2 }],
  ["gpt-4o-mini", { input: 0.15, output: 0.6, cacheRead: 0.075 }],
  ["gpt-4o", { input: 2.5, output: 10, cacheRead: 1.25 }],
  ["gpt-4.1-mini", { input: 0.4, output: 1.6, cacheRead: 0.1 }],
  ["gpt-4.1", { input: 2, output: 8, cacheRead: 0.5 }],
  ["gpt-5-mini", { input: 0.25, output: 2, cacheRead: 0.025 }],
  ["gpt-5", { input: 1.25, output: 10, cacheRead: 0.125 }],
];

function byPrefix<T>(table: ReadonlyArray<readonly [string, T]>, model: string): T | undefined {
  let best: readonly [string, T] | undefined;
  for (const row of table) if (model.startsWith(row[0]) && (!best || row[0].length > best[0].length)) best = row;
  return best?.[1];
}

/** The context window of a model, when the table knows it. */
export function knownContextWindow(model: string): number | undefined {
  return byPrefix(CONTEXT_WINDOWS, model);
}

/** The price of a model, when the table knows it. */
/** `max_tokens` the Anthropic adapter sends when a request gives none. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 8192;

/**
 * The output ceiling an adapter asks for when a request gives no maxTokens (ModelProvider.maxOutputTokens):
 * Anthropic's default or `maxTokens`, an OpenAI adapter's `maxTokens`; undefined when the server decides.
 */
export function knownMaxOutputTokens(spec: string, maxTokens?: number): number | undefined {
  return spec.startsWith("anthropic:") ? (maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS) : maxTokens;
}

export function knownPrice(model: string): ModelPrice | undefined {
  return byPrefix(PRICES, model);
}

/** Cost of one response in USD. Contract: cache writes of the 1 h tier are priced as such when `write1h` says how many. */
export function costOf(price: ModelPrice, usage: Usage, write1h = 0): number {
  const m = 1_000_000;
  const w5 = Math.max(0, usage.cacheWriteTokens - write1h);
  const cost =
    (usage.inputTokens * price.input +
      usage.outputTokens * price.output +
      usage.cacheReadTokens * (price.cacheRead ?? price.input) +
      w5 * (price.cacheWrite ?? price.input) +
      write1h * (price.cacheWrite1h ?? price.cacheWrite ?? price.input)) /
    m;
  return Math.round(cost * 1e9) / 1e9;
}
