/** aiSdkModel(): a Vercel AI SDK language model as a Keel ModelProvider. */
import type { LanguageModelV3, LanguageModelV4 } from "@ai-sdk/provider";
import {
  errorMessage,
  isKeelError,
  KeelError,
  type ModelProvider,
  type ModelRequest,
  ProviderError,
} from "@keel/kernel";
import {
  knownContextWindow,
  knownPrice,
  type ModelPrice,
  type RetrySettings,
  retrySettings,
  type StreamRetryOptions,
  type StreamSession,
  withStreamRetries,
} from "@keel/providers";
import { classifyAiSdkError, isRequestFailure, withCallRetries } from "./errors.ts";
import { PartCollector } from "./parts.ts";
import { callOptions, type PromptTarget } from "./prompt.ts";
import { boundedParts, untilAborted } from "./stream.ts";

/** A language model of any `@ai-sdk/*` provider (specification v3 or v4). */
export type AiSdkLanguageModel = LanguageModelV3 | LanguageModelV4;

/**
 * Options of aiSdkModel. Contract: the retry and timeout options mean what they mean for Keel's
 * native providers (`{ model, idleTimeoutMs, firstByteTimeoutMs, maxRetryAfterMs }` config entries).
 */
export interface AiSdkModelOptions extends StreamRetryOptions {
  /** The Keel id. Default `<model.provider>:<model.modelId>`, e.g. `openai.responses:gpt-4o`. */
  id?: string;
  /** Re-sends before the stream starts (429, 5xx, connection failures), as the official SDKs make. Default 2. */
  maxRetries?: number;
  /** The context window in tokens. Default: Keel's table for OpenAI and Anthropic models. */
  contextWindow?: number;
  /** USD per million tokens, for `costUsd` and budgets. Default: Keel's table for OpenAI and Anthropic models; `false`: none. */
  price?: ModelPrice | false;
  /** Output ceiling sent when a request gives no `maxTokens` (and what budgets estimate with). Default: the provider's. */
  maxTokens?: number;
}

const SUPPORTED = ["v3", "v4"];

/** What Keel reads of a model, read once. */
interface ModelFacts {
  version: "v3" | "v4";
  provider: string;
  modelId: string;
}

const unsupported = (problem: string) =>
  new KeelError("KEEL_PROVIDER_MODEL_UNSUPPORTED", `aiSdkModel(): ${problem}`, { path: "model" });

/**
 * The model's facts, each read once inside a guard (a provider's getter or Proxy may throw).
 * Contract: throws KEEL_PROVIDER_MODEL_UNSUPPORTED, never what the model threw.
 */
function checked(model: unknown): ModelFacts {
  let facts: { version: unknown; provider: unknown; modelId: unknown; doStream: unknown };
  try {
    if (typeof model !== "object" || model === null)
      throw unsupported("was given something that is not an AI SDK language model.");
    const m = model as Record<string, unknown>;
    facts = { doStream: m.doStream, version: m.specificationVersion, provider: m.provider, modelId: m.modelId };
  } catch (err) {
    if (isKeelError(err)) throw err;
    throw unsupported(
      `reading the model's properties threw (${errorMessage(err)}); pass a language model of an @ai-sdk/* provider.`,
    );
  }
  const { version, provider, modelId } = facts;
  if (typeof facts.doStream !== "function")
    throw unsupported("was given something that is not an AI SDK language model (no doStream method).");
  const name = `${typeof provider === "string" ? provider : "?"}:${typeof modelId === "string" ? modelId : "?"}`;
  if (!SUPPORTED.includes(version as string))
    throw unsupported(
      `${name} implements AI SDK specification ${JSON.stringify(version) ?? "(none)"}; Keel calls ${SUPPORTED.join(" and ")}. Upgrade the @ai-sdk/* provider package (ai 6+ providers use v3, ai 7 providers v4).`,
    );
  if (typeof provider !== "string" || typeof modelId !== "string" || !modelId)
    throw unsupported("the model has no provider or modelId.");
  return { version: version as ModelFacts["version"], provider, modelId };
}

/** Price and context window from Keel's tables, for the OpenAI and Anthropic providers' models. */
function known(model: ModelFacts): { price?: ModelPrice; contextWindow?: number } {
  const family = model.provider.split(".")[0];
  if (family !== "openai" && family !== "anthropic") return {};
  const price = knownPrice(model.modelId);
  const contextWindow = knownContextWindow(model.modelId);
  return { ...(price ? { price } : {}), ...(contextWindow ? { contextWindow } : {}) };
}

/**
 * A Keel ModelProvider calling an AI SDK language model's `doStream` directly (no `ai` package:
 * Keel runs the tool loop, retries and fallbacks).
 * Contract: throws KEEL_PROVIDER_MODEL_UNSUPPORTED for anything but a v3/v4 language model and
 * KEEL_PROVIDER_OPTIONS_INVALID for a bad option; streams as the native adapters do (deltas, then one
 * `response` with usage, cost and stop reason); failures are ProviderErrors classified like the
 * native SDKs' (429 → rate_limited with retry-after, 529/5xx overloaded, 401/403 auth, context
 * 400 → context_too_long, fetch failure or cut stream → network, stall → timeout, abort → aborted),
 * with the same first-byte/idle timeouts, pre-stream retries and bounded stream retries.
 */
export function aiSdkModel(model: AiSdkLanguageModel, options: AiSdkModelOptions = {}): ModelProvider {
  const m = checked(model);
  const { id, retry, maxRetries } = checkedOptions(options, m);
  const table = known(m);
  const price = options.price === false ? undefined : (options.price ?? table.price);
  const contextWindow = options.contextWindow ?? table.contextWindow;
  const target: PromptTarget = {
    version: m.version,
    provider: m.provider,
    ...(options.maxTokens !== undefined ? { maxOutputTokens: options.maxTokens } : {}),
  };

  const told = {};
  const session = (request: ModelRequest): StreamSession => {
    const parts = new PartCollector({ id, model: m.provider, price, told });
    return {
      async open(signal) {
        const call = callOptions(request, target, signal);
        try {
          // Bounded by the signal: a provider that ignores it still gets cut by a timeout or an abort.
          const result = await untilAborted(
            withCallRetries(() => (model as LanguageModelV4).doStream(call), {
              provider: id,
              maxRetries,
              maxRetryAfterMs: retry.maxRetryAfterMs,
              signal,
            }),
            signal,
          );
          return boundedParts((result as { stream?: unknown } | undefined)?.stream, signal, id);
        } catch (err) {
          // A body that broke while the provider read its first chunk failed a started stream (as the
          // native SDKs see it): handed over as the stream's first step, so streamRetries apply.
          if (signal.aborted || err instanceof ProviderError || isRequestFailure(err)) throw err;
          return failing(classifyAiSdkError(err, id, signal));
        }
      },
      push: (part) => parts.push(part),
      finish: (signal) => parts.finish(signal),
    };
  };
  return {
    id,
    ...(contextWindow !== undefined ? { contextWindow } : {}),
    ...(price ? { price: { input: price.input, output: price.output } } : {}),
    ...(options.maxTokens !== undefined ? { maxOutputTokens: options.maxTokens } : {}),
    stream: (request, { signal }) => withStreamRetries(id, () => session(request), signal, retry),
  };
}

const invalid = (path: string, problem: string) => new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", problem, { path });

/** The options checked, each bad one refused by name. Contract: throws KEEL_PROVIDER_OPTIONS_INVALID. */
function checkedOptions(
  options: AiSdkModelOptions,
  m: ModelFacts,
): { id: string; retry: RetrySettings; maxRetries: number } {
  if (typeof options !== "object" || options === null)
    throw invalid("options", `aiSdkModel(): options must be an object, got ${String(options)}.`);
  const id = options.id ?? `${m.provider}:${m.modelId}`;
  if (typeof id !== "string" || !id.includes(":"))
    throw invalid("id", `aiSdkModel(): id must be "<provider>:<model>", got ${JSON.stringify(id)}.`);
  const retry = retrySettings(options, id);
  const maxRetries = options.maxRetries ?? 2;
  if (!Number.isInteger(maxRetries) || maxRetries < 0)
    throw invalid("maxRetries", `${id}: maxRetries must be a non-negative integer.`);
  for (const key of ["contextWindow", "maxTokens"] as const) {
    const v = options[key];
    if (v !== undefined && (!Number.isInteger(v) || v <= 0))
      throw invalid(
        key,
        `${id}: ${key} must be a positive whole number of tokens, got ${JSON.stringify(v) ?? String(v)}.`,
      );
  }
  if (options.price !== undefined && options.price !== false && !validPrice(options.price))
    throw invalid(
      "price",
      `${id}: price must be { input, output } in USD per million tokens (non-negative numbers), got ${JSON.stringify(options.price)}.`,
    );
  return { id, retry, maxRetries };
}

/** A stream whose first step throws `err`. */
function failing(err: unknown): AsyncIterable<unknown> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.reject(err),
      return: async () => ({ done: true, value: undefined }),
    }),
  };
}

function validPrice(p: unknown): boolean {
  if (typeof p !== "object" || p === null) return false;
  const r = p as Record<string, unknown>;
  const ok = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0;
  return (
    ok(r.input) &&
    ok(r.output) &&
    ["cacheRead", "cacheWrite", "cacheWrite1h"].every((k) => r[k] === undefined || ok(r[k]))
  );
}
