/** AI SDK failures (APICallError, in-band stream errors, fetch failures) as classified Keel ProviderErrors. */
import { ProviderError } from "@keel/kernel";
import { classifyError, type FailureFacts, fromFacts, retryAfterOf, sleep } from "@keel/providers";

// Recognised by the AI SDK's global marker symbols, so any copy of @ai-sdk/provider is understood.
const API_CALL = Symbol.for("vercel.ai.error.AI_APICallError");
const STREAM_ERROR = Symbol.for("vercel.ai.error.AI_ProviderStreamError");
const INVALID_DATA = Symbol.for("vercel.ai.error.AI_InvalidResponseDataError");

type Bag = Record<string | symbol, unknown>;
const isObject = (v: unknown): v is Bag => typeof v === "object" && v !== null;
const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);

/** `responseHeaders` (a plain record) with the `get` retryAfterOf reads. */
function headersOf(raw: unknown): { get(name: string): string | null } | undefined {
  if (!isObject(raw)) return undefined;
  const lower = new Map<string, string>();
  for (const [k, v] of Object.entries(raw)) if (typeof v === "string") lower.set(k.toLowerCase(), v);
  return { get: (name) => lower.get(name.toLowerCase()) ?? null };
}

/** The provider's error type and code, from a parsed error body (`{error: {type, code}}`, `{type, code}`). */
function typeAndCode(data: unknown, body: unknown): { type?: string; code?: string } {
  let parsed: unknown = data;
  if (!isObject(parsed) && typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
  }
  if (!isObject(parsed)) return {};
  const inner = isObject(parsed.error) ? parsed.error : parsed;
  const type = str(inner.type) ?? (inner === parsed ? undefined : str(parsed.type));
  const code = str(inner.code) ?? (typeof inner.code === "number" ? String(inner.code) : undefined);
  return { ...(type ? { type } : {}), ...(code ? { code } : {}) };
}

/**
 * Whether `err` is an AI SDK APICallError for the request itself: an HTTP error status or a failed
 * connection; not one for a body that broke after a 2xx ("Failed to process successful response").
 */
export function isRequestFailure(err: unknown): boolean {
  if (!isObject(err) || err[API_CALL] !== true) return false;
  return typeof err.statusCode !== "number" || err.statusCode >= 300;
}

/** The AI SDK's "stream ended without a finish reason" (a truncated stream). */
function isTruncation(err: unknown): boolean {
  return isObject(err) && err[INVALID_DATA] === true && /ended without/i.test(str(err.message) ?? "");
}

/** What is known about an AI SDK error object; undefined when it is none (a plain Error, an abort). */
export function factsOf(err: unknown): FailureFacts | undefined {
  if (!isObject(err)) return undefined;
  if (err[API_CALL] === true) {
    const status = typeof err.statusCode === "number" ? err.statusCode : undefined;
    const retryAfterMs = retryAfterOf(headersOf(err.responseHeaders));
    return {
      ...(status !== undefined ? { status } : {}),
      ...typeAndCode(err.data, err.responseBody),
      message: str(err.message) ?? "the API call failed",
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    };
  }
  // In-band errors: the stream error objects of @ai-sdk/provider-utils, or a provider's raw error
  // chunk (`{ message, type, code }`), which some providers put in an `error` part as it came.
  if (err[STREAM_ERROR] === true || (!(err instanceof Error) && (str(err.message) || str(err.type)))) {
    const nested = isObject(err.error) ? err.error : err;
    const status = typeof err.statusCode === "number" ? err.statusCode : undefined;
    return {
      ...(status !== undefined ? { status } : {}),
      type: str(nested.type) ?? null,
      code: str(nested.code) ?? null,
      message: str(nested.message) ?? str(err.message) ?? "in-band error",
    };
  }
  return undefined;
}

/**
 * A ProviderError for anything an AI SDK model threw or put in an `error` stream part.
 * Contract: an aborted `signal` gives `aborted`; an APICallError keeps its status and retry-after
 * (`retry-after-ms`, `retry-after` seconds or date); an APICallError without a status (the AI SDK's
 * "Cannot connect to API") is `network`; anything else is classified as the native adapters do.
 */
export function classifyAiSdkError(err: unknown, provider: string, signal?: AbortSignal): ProviderError {
  if (err instanceof ProviderError) return err;
  if (signal?.aborted) return new ProviderError("aborted", `${provider}: the request was aborted.`, { cause: err });
  if (isTruncation(err))
    return new ProviderError("network", `${provider}: the stream ended before the model finished (truncated).`, {
      cause: err,
    });
  // A body that broke after a 2xx: what broke it (a reset is `network`).
  if (isObject(err) && err[API_CALL] === true && !isRequestFailure(err))
    return classifyError(err.cause ?? new Error(str(err.message)), provider, signal);
  const facts = factsOf(err);
  if (!facts) return classifyError(err, provider, signal);
  const e = fromFacts(facts, provider, err);
  if (e.errorClass === "unknown" && isObject(err) && err[API_CALL] === true && err.isRetryable === true)
    return new ProviderError("network", `${provider}: ${facts.message}`, { cause: err });
  return e;
}

/** Classes the request is re-sent for before its stream started (what the native SDKs retry). */
const PRE_STREAM = new Set(["rate_limited", "overloaded", "network"]);

/**
 * Run `call` (a model's doStream) with the retries the official SDKs make before a stream starts:
 * APICallErrors of 429, 5xx/529 and connection failures are re-sent up to `maxRetries` times, after the
 * retry-after the server asked for, or 0.5 s, 1 s, 2 s… (at most 8 s).
 * Contract: a retry-after beyond `maxRetryAfterMs` is not waited for (the error is thrown at once);
 * an APICallError is thrown classified, any other error as it is; waits end with `aborted` when `signal` fires.
 */
export async function withCallRetries<T>(
  call: () => PromiseLike<T>,
  o: { provider: string; maxRetries: number; maxRetryAfterMs: number; signal: AbortSignal },
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      // Not an HTTP failure: the body broke after the response came (a provider reads its first chunk in doStream).
      if (!isRequestFailure(err) || o.signal.aborted) throw err;
      const e = classifyAiSdkError(err, o.provider, o.signal);
      const capped = e.retryAfterMs !== undefined && e.retryAfterMs > o.maxRetryAfterMs;
      if (attempt >= o.maxRetries || !PRE_STREAM.has(e.errorClass) || capped) throw e;
      await sleep(e.retryAfterMs ?? Math.min(8_000, 500 * 2 ** attempt), o.signal);
    }
  }
}
