/**
 * @keel/ai-sdk — any Vercel AI SDK language model (`openai("gpt-4o")` from @ai-sdk/openai,
 * `anthropic(…)`, `createOpenAICompatible(…)(…)`, …) as a Keel ModelProvider: Keel's request
 * mapping, streamed deltas, usage and cost, classified errors, timeouts, retries and fallback.
 */
export { aiSdkModel } from "./model.ts";
export type { AiSdkLanguageModel, AiSdkModelOptions } from "./model.ts";
export { classifyAiSdkError } from "./errors.ts";
export type { AiSdkReasoningData } from "./prompt.ts";
