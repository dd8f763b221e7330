/**
 * @keel/providers — Anthropic and OpenAI (and OpenAI-compatible) model providers for Keel, on the
 * official SDKs: streaming, tool calls, thinking/reasoning round-trips, prompt caching, usage and
 * cost, classified errors, bounded retries of broken streams, and a fallback chain. The SDKs are
 * optional peer dependencies: a project installs the one it uses (`PROVIDER_SDKS`).
 */
export { anthropicProvider } from "./anthropic.ts";
export type { AnthropicProviderOptions } from "./anthropic.ts";
export type { AnthropicThinkingData } from "./anthropic-request.ts";
export { openaiProvider } from "./openai.ts";
export type { OpenAIProviderOptions } from "./openai.ts";
export type { OpenAIReasoningData } from "./openai-request.ts";
export { fallback } from "./fallback.ts";
export type { FallbackOptions, FallbackProvider, FreezeState } from "./fallback.ts";
export { resolveModel } from "./resolve.ts";
export { PROVIDER_SDKS, sdkInstalled } from "./sdk.ts";
export type { ProviderSdk } from "./sdk.ts";
export type { ResolveModelOptions } from "./resolve.ts";
export { classifyError, classOf } from "./errors.ts";
export type { FailureFacts } from "./errors.ts";
export { chooseCacheTier, estimateRequestTokens, MIN_CACHE_TOKENS } from "./cache.ts";
export {
  ANTHROPIC_DEFAULT_MAX_TOKENS,
  costOf,
  knownContextWindow,
  knownMaxOutputTokens,
  knownPrice,
} from "./models.ts";
export type { ModelPrice } from "./models.ts";
export type { StreamRetryOptions } from "./retry.ts";
export { DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_RETRY_AFTER_MS } from "./retry.ts";
// Building blocks for adapters outside this package (@keel/ai-sdk): the same retries, timeouts and error classes.
export { fromFacts, retryAfterOf } from "./errors.ts";
export { parseArgs } from "./args.ts";
export { retrySettings, sleep, withStreamRetries } from "./retry.ts";
export type { RetrySettings, StreamSession } from "./retry.ts";
