/** Classify any SDK, network or in-band failure into a kernel ProviderError. */
import { ProviderError, type ProviderErrorClass } from "@keel/kernel";

// The SDKs' error classes, recognised by shape and class name so that this module does not
// load either SDK (each costs a few hundred ms of start-up).
type SdkApiError = Error & {
  status: number | undefined;
  headers?: Headers;
  error?: unknown;
  type?: string | null;
  code?: string | null;
};
const sdkClass = (err: unknown): string => (err instanceof Error ? err.constructor.name : "");
const isSdkAbort = (err: unknown): boolean => sdkClass(err) === "APIUserAbortError";
const isSdkConnection = (err: unknown): err is Error => /^APIConnection(Timeout)?Error$/.test(sdkClass(err));
const isSdkApiError = (err: unknown): err is SdkApiError =>
  err instanceof Error && "status" in err && "headers" in err && "error" in err;

/** What is known about a failure, whatever its source. */
export interface FailureFacts {
  status?: number | undefined;
  /** Provider error type (`rate_limit_error`, `server_error`, …). */
  type?: string | null | undefined;
  /** OpenAI error code (`context_length_exceeded`, `rate_limit_exceeded`, …). */
  code?: string | null | undefined;
  message: string;
  retryAfterMs?: number | undefined;
}

const CONTEXT =
  /prompt is too long|context[ _-]?length|context window|maximum context|too many tokens|input is too long|exceeds the (model'?s? )?(context|maximum)/i;

/** The class of a failure from its status, type, code and message. Contract: total; `unknown` when nothing matches. */
export function classOf(f: FailureFacts): ProviderErrorClass {
  const type = f.type ?? "";
  const code = f.code ?? "";
  const status = f.status;
  if (
    code === "context_length_exceeded" ||
    status === 413 ||
    ((status === 400 || status === undefined) && CONTEXT.test(f.message))
  )
    return "context_too_long";
  if (
    status === 401 ||
    status === 403 ||
    type === "authentication_error" ||
    type === "permission_error" ||
    code === "invalid_api_key" ||
    code === "insufficient_quota" ||
    type === "billing_error"
  )
    return "auth";
  if (status === 429 || type === "rate_limit_error" || code === "rate_limit_exceeded") return "rate_limited";
  if (
    (status !== undefined && status >= 500) ||
    type === "overloaded_error" ||
    type === "api_error" ||
    type === "server_error" ||
    code === "server_error" ||
    code === "server_is_overloaded" ||
    code === "overloaded"
  )
    return "overloaded";
  if (status !== undefined && status >= 400) return "invalid_request";
  if (type === "invalid_request_error" || code === "invalid_request_error" || code === "invalid_prompt")
    return "invalid_request";
  return "unknown";
}

/** Milliseconds a response asked us to wait (`retry-after-ms`, `retry-after` in seconds or as a date). */
export function retryAfterOf(headers: { get(name: string): string | null } | undefined | null): number | undefined {
  if (!headers || typeof headers.get !== "function") return undefined;
  const ms = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return Math.round(ms);
  const raw = headers.get("retry-after");
  if (!raw) return undefined;
  const seconds = Number.parseFloat(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(raw);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
}

const NETWORK =
  /terminated|other side closed|ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|socket|fetch failed|network|UND_ERR/i;

function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e: any = err, i = 0; e && i < 5; e = e.cause, i++)
    parts.push(`${e.name ?? ""} ${e.code ?? ""} ${e.message ?? String(e)}`);
  return parts.join(" | ");
}

/**
 * A ProviderError for anything an SDK call or stream threw.
 * Contract: an aborted `signal` always gives `aborted`; status and retry-after are kept.
 */
export function classifyError(err: unknown, provider: string, signal?: AbortSignal): ProviderError {
  if (err instanceof ProviderError) return err;
  if (signal?.aborted || isSdkAbort(err))
    return new ProviderError("aborted", `${provider}: the request was aborted.`, { cause: err });
  if (isSdkConnection(err)) {
    return new ProviderError("network", `${provider}: ${err.message} (${causeChain(err.cause)})`, { cause: err });
  }
  if (isSdkApiError(err)) {
    const e = err;
    const body = e.error as any;
    const facts: FailureFacts = {
      status: e.status,
      type: e.type ?? body?.error?.type ?? body?.type,
      code: e.code ?? body?.code ?? body?.error?.code,
      message: e.message,
      retryAfterMs: retryAfterOf(e.headers as Headers | undefined),
    };
    return fromFacts(facts, provider, err);
  }
  if (err instanceof SyntaxError)
    return new ProviderError("unknown", `${provider}: malformed stream data: ${err.message}`, { cause: err });
  const chain = causeChain(err);
  if (NETWORK.test(chain))
    return new ProviderError("network", `${provider}: connection failed mid-stream (${chain}).`, { cause: err });
  return new ProviderError("unknown", `${provider}: ${err instanceof Error ? err.message : String(err)}`, {
    cause: err,
  });
}

/** A ProviderError from known facts (in-band error events, failed responses). */
export function fromFacts(f: FailureFacts, provider: string, cause?: unknown): ProviderError {
  const errorClass = classOf(f);
  const where = f.status === undefined ? "in-band error" : `HTTP ${f.status}`;
  const msg = f.message.startsWith(String(f.status)) ? f.message : `${where}: ${f.message}`;
  return new ProviderError(errorClass, `${provider}: ${msg}`, {
    ...(f.status !== undefined ? { status: f.status } : {}),
    ...(f.retryAfterMs !== undefined ? { retryAfterMs: f.retryAfterMs } : {}),
    ...(cause !== undefined ? { cause } : {}),
  });
}

/** Classes worth another attempt once a stream has started. */
export function retryableMidStream(e: ProviderError): boolean {
  return (
    e.errorClass === "network" ||
    e.errorClass === "timeout" ||
    e.errorClass === "overloaded" ||
    e.errorClass === "rate_limited"
  );
}
