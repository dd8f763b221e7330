/** aiSdkModel(): a Vercel AI SDK language model as a Keel ModelProvider. */
import type { LanguageModelV3, LanguageModelV4 } from "@ai-sdk/provider";
import { KeelError, type ModelProvider, type ModelRequest, ProviderError } from "@keel/kernel";
import {
  knownContextWindow,
  knownPrice,
  type ModelPrice,
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

/** The model checked as a callable AI SDK language model. */
function checked(model: unknown): AiSdkLanguageModel {
  const m = model as Partial<AiSdkLanguageModel> | null | undefined;
  const version = m?.specificationVersion;
  if (typeof m !== "object" || m === null || typeof m.doStream !== "function")
    throw new KeelError(
      "KEEL_PROVIDER_MODEL_UNSUPPORTED",
      "aiSdkModel() was given something that is not an AI SDK language model (no doStream method).",
      { path: "model" },
    );
  if (!SUPPORTED.includes(version as string))
    throw new KeelError(
      "KEEL_PROVIDER_MODEL_UNSUPPORTED",
      `aiSdkModel(): ${String(m.provider)}:${String(m.modelId)} implements AI SDK specification ${JSON.stringify(version)}; Keel calls ${SUPPORTED.join(" and ")}. Upgrade the @ai-sdk/* provider package (ai 6+ providers use v3, ai 7 providers v4).`,
      { path: "model" },
    );
  if (typeof m.provider !== "string" || typeof m.modelId !== "string" || !m.modelId)
    throw new KeelError("KEEL_PROVIDER_MODEL_UNSUPPORTED", "aiSdkModel(): the model has no provider or modelId.", {
      path: "model",
    });
  return m as AiSdkLanguageModel;
}

/** Price and context window from Keel's tables, for the OpenAI and Anthropic providers' models. */
function known(model: AiSdkLanguageModel): { price?: ModelPrice; contextWindow?: number } {
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
  const id = options.id ?? `${m.provider}:${m.modelId}`;
  if (typeof id !== "string" || !id.includes(":"))
    throw new KeelError(
      "KEEL_PROVIDER_OPTIONS_INVALID",
      `aiSdkModel(): id must be "<provider>:<model>", got ${JSON.stringify(id)}.`,
      {
        path: "id",
      },
    );
  const retry = retrySettings(options, id);
  const maxRetries = options.maxRetries ?? 2;
  if (!Number.isInteger(maxRetries) || maxRetries < 0)
    throw new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", `${id}: maxRetries must be a non-negative integer.`, {
      path: "maxRetries",
    });
  if (options.price !== undefined && options.price !== false && !validPrice(options.price))
    throw new KeelError(
      "KEEL_PROVIDER_OPTIONS_INVALID",
      `${id}: price must be { input, output } in USD per million tokens (non-negative numbers), got ${JSON.stringify(options.price)}.`,
      { path: "price" },
    );
  const table = known(m);
  const price = options.price === false ? undefined : (options.price ?? table.price);
  const contextWindow = options.contextWindow ?? table.contextWindow;
  const target: PromptTarget = {
    version: m.specificationVersion,
    provider: m.provider,
    ...(options.maxTokens !== undefined ? { maxOutputTokens: options.maxTokens } : {}),
  };

  const session = (request: ModelRequest): StreamSession => {
    const parts = new PartCollector({ id, model: m.provider, price });
    return {
      async open(signal) {
        const call = callOptions(request, target, signal);
        try {
          // Bounded by the signal: a provider that ignores it still gets cut by a timeout or an abort.
          const result = await untilAborted(
            withCallRetries(() => (m as LanguageModelV4).doStream(call), {
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
