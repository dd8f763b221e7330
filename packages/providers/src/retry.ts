/** Bounded retries of a stream that failed after it started. */
import { KeelError, ProviderError, type ModelEvent } from "@keel/kernel";
import { classifyError, retryAfterOf, retryableMidStream } from "./errors.ts";

/** Default of `firstByteTimeoutMs`: long prompts and reasoning models may think this long before their first event. */
export const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 120_000;
/** Default of `idleTimeoutMs`: a streaming model sends tokens or pings far more often than this. */
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
/** Default of `maxRetryAfterMs`: a longer wait asked by a 429/5xx is not honoured. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;
/** Default of both timeouts for OpenAI reasoning models, which may reason for minutes without sending an event. */
export const REASONING_TIMEOUT_MS = 300_000;

/**
 * Retry and timeout settings of a stream. Contract: every wait is bounded by default — nothing
 * here lets a request hang a process.
 */
export interface StreamRetryOptions {
  /** Further attempts after the first. Default 2. */
  streamRetries?: number;
  /** Linear backoff: attempt n waits n × this many ms. Default 500. */
  streamBackoffMs?: number;
  /**
   * A started stream silent for this long (no event) is cut (`timeout`) and retried like a reset.
   * Default 60,000 (OpenAI reasoning models: 300,000); 0 turns it off.
   */
  idleTimeoutMs?: number;
  /**
   * From sending the request to its first stream event (response headers included, the SDK's own
   * retries included); past it the attempt is cut with a `timeout` error (a fallback chain fails
   * over). Default 120,000 (OpenAI reasoning models: 300,000); 0 turns it off.
   */
  firstByteTimeoutMs?: number;
  /**
   * Longest `retry-after` (429/5xx) the SDK may wait before retrying; a response asking for more
   * is not retried but raised at once (its class, e.g. `rate_limited`, with `retryAfterMs`) after a
   * notice, so a fallback chain freezes it and fails over. Default 30,000.
   */
  maxRetryAfterMs?: number;
}

/** Validated settings of withStreamRetries. */
export interface RetrySettings {
  retries: number;
  backoffMs: number;
  idleMs: number;
  firstByteMs: number;
  maxRetryAfterMs: number;
}

/**
 * One attempt at a stream: `open` sends the request (the SDK retries failures before the stream
 * starts), `push` turns one raw SDK event into zero or more ModelEvents, `finish` gives the final
 * `response` once the raw stream ended (or throws when it was cut short).
 */
export interface StreamSession {
  /** Work before the request is sent (loading the SDK), not counted in the first-byte timeout. */
  ready?(): Promise<unknown>;
  open(signal: AbortSignal): Promise<AsyncIterable<any>>;
  push(raw: any): ModelEvent | ModelEvent[] | undefined;
  finish(signal: AbortSignal): ModelEvent;
}

/** Validated retry settings. Contract: throws KEEL_PROVIDER_OPTIONS_INVALID on a bad value. */
export function retrySettings(
  o: StreamRetryOptions,
  provider: string,
  defaults: { idleMs?: number; firstByteMs?: number } = {},
): RetrySettings {
  const retries = o.streamRetries ?? 2;
  const backoffMs = o.streamBackoffMs ?? 500;
  const idleMs = o.idleTimeoutMs ?? defaults.idleMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const firstByteMs = o.firstByteTimeoutMs ?? defaults.firstByteMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS;
  const maxRetryAfterMs = o.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
  for (const [name, v] of [
    ["idleTimeoutMs", idleMs],
    ["firstByteTimeoutMs", firstByteMs],
    ["maxRetryAfterMs", maxRetryAfterMs],
  ] as const) {
    if (!Number.isFinite(v) || v < 0)
      throw new KeelError(
        "KEEL_PROVIDER_OPTIONS_INVALID",
        `${provider}: ${name} must be a non-negative number of ms, got ${JSON.stringify(v)}.`,
        { path: name },
      );
  }
  if (!Number.isInteger(retries) || retries < 0)
    throw new KeelError(
      "KEEL_PROVIDER_OPTIONS_INVALID",
      `${provider}: streamRetries must be a non-negative integer, got ${JSON.stringify(retries)}.`,
      { path: "streamRetries" },
    );
  if (!Number.isFinite(backoffMs) || backoffMs < 0)
    throw new KeelError(
      "KEEL_PROVIDER_OPTIONS_INVALID",
      `${provider}: streamBackoffMs must be a non-negative number, got ${JSON.stringify(backoffMs)}.`,
      { path: "streamBackoffMs" },
    );
  return { retries, backoffMs, idleMs, firstByteMs, maxRetryAfterMs };
}

/**
 * Run attempts of a stream, retrying a failure that happened after the stream started.
 * Contract: errors before the stream started are thrown as they are (the SDK already retried
 * them); each retry yields a `retry` notice first (deltas so far are void); aborts are never
 * retried; a first-byte or idle timeout cuts the attempt as a `timeout` error; a timeout or a
 * retry-after beyond the cap is announced by an `info` notice before it is thrown; `return()`
 * stops the HTTP stream. A hand-written iterator: no generator hop per event.
 */
export function withStreamRetries(
  provider: string,
  begin: () => StreamSession,
  signal: AbortSignal,
  settings: RetrySettings,
): AsyncIterableIterator<ModelEvent> {
  let attempt = 0;
  let session: StreamSession | undefined;
  let raw: AsyncIterator<any> | undefined;
  let waitMs = 0;
  let finished = false;
  const queue: ModelEvent[] = [];
  const end = (): IteratorResult<ModelEvent> => ((finished = true), { done: true, value: undefined });
  // Watchdog: one interval per attempt, cutting the attempt's own controller when the request
  // waits past firstByteMs for its first event, or a started stream is silent past idleMs.
  const watch = {
    at: 0,
    first: true,
    stalled: undefined as "first" | "idle" | undefined,
    timer: undefined as ReturnType<typeof setInterval> | undefined,
    ctrl: undefined as AbortController | undefined,
    unlink: () => {},
  };
  const watching = settings.idleMs > 0 || settings.firstByteMs > 0;
  const stopWatch = () => {
    if (watch.timer) clearInterval(watch.timer);
    watch.timer = undefined;
    watch.unlink();
    watch.unlink = () => {};
  };
  const stalledError = () =>
    watch.stalled === "first"
      ? new ProviderError(
          "timeout",
          `${provider}: no response within ${settings.firstByteMs} ms (first-byte timeout); the request was cut.`,
        )
      : new ProviderError(
          "timeout",
          `${provider}: the stream stalled (no event for ${settings.idleMs} ms); it was cut.`,
        );
  /** An error to raise after the notice that explains it was yielded. */
  let deferred: ProviderError | undefined;
  const noticeFor = (e: ProviderError): ModelEvent | undefined => {
    if (e.errorClass === "timeout")
      return {
        type: "notice",
        kind: "info",
        provider,
        message: `${e.message} Giving up on this attempt.`,
        data: { reason: "timeout", errorClass: e.errorClass },
      };
    if (
      e.retryAfterMs !== undefined &&
      e.retryAfterMs > settings.maxRetryAfterMs &&
      (e.errorClass === "rate_limited" || e.errorClass === "overloaded")
    ) {
      return {
        type: "notice",
        kind: "info",
        provider,
        message: `${provider}: the server asked to wait ${Math.round(e.retryAfterMs / 1000)} s (retry-after) before retrying, more than the cap of ${Math.round(settings.maxRetryAfterMs / 1000)} s (maxRetryAfterMs); not waiting.`,
        data: {
          reason: "retry_after_capped",
          retryAfterMs: e.retryAfterMs,
          maxRetryAfterMs: settings.maxRetryAfterMs,
          errorClass: e.errorClass,
        },
      };
    }
    return undefined;
  };

  const fail = (err: unknown): IteratorResult<ModelEvent> => {
    const started = raw !== undefined;
    // Stop the HTTP stream (a no-op when it already ended or threw).
    void raw?.return?.()?.catch(() => {});
    raw = undefined;
    stopWatch();
    const e = watch.stalled && !signal.aborted ? stalledError() : classifyError(err, provider, signal);
    if (e.errorClass === "aborted" || !started || attempt >= settings.retries || !retryableMidStream(e)) {
      finished = true;
      const notice = e.errorClass === "aborted" ? undefined : noticeFor(e);
      if (!notice) throw e;
      deferred = e;
      return { done: false, value: notice };
    }
    attempt++;
    waitMs = settings.backoffMs * attempt;
    return {
      done: false,
      value: {
        type: "notice",
        kind: "retry",
        provider,
        message: `${provider}: the stream failed after it started (${e.errorClass}: ${e.message}); retrying in ${waitMs} ms (attempt ${attempt + 1} of ${settings.retries + 1}). Deltas so far are void.`,
        data: { attempt: attempt + 1, of: settings.retries + 1, errorClass: e.errorClass, waitMs },
      },
    };
  };

  const take = (r: IteratorResult<any>): IteratorResult<ModelEvent> | Promise<IteratorResult<ModelEvent>> => {
    let out: ModelEvent | ModelEvent[] | undefined;
    try {
      if (r.done) {
        if (watch.stalled) throw stalledError();
        const last = session!.finish(signal);
        raw = undefined;
        stopWatch();
        finished = true;
        return { done: false, value: last };
      }
      if (watch.timer) {
        watch.at = performance.now();
        watch.first = false;
      }
      out = session!.push(r.value);
    } catch (err) {
      return fail(err);
    }
    if (out === undefined) return next();
    if (!Array.isArray(out)) return { done: false, value: out };
    if (!out.length) return next();
    for (let i = 1; i < out.length; i++) queue.push(out[i]!);
    return { done: false, value: out[0]! };
  };

  const open = async (): Promise<IteratorResult<ModelEvent>> => {
    if (waitMs) {
      const ms = waitMs;
      waitMs = 0;
      await sleep(ms, signal);
    }
    session = begin();
    if (session.ready) {
      try {
        await session.ready();
      } catch (err) {
        return fail(err);
      }
    }
    let attemptSignal = signal;
    watch.stalled = undefined;
    watch.first = true;
    if (watching) {
      const ctrl = new AbortController();
      const link = () => ctrl.abort(signal.reason);
      signal.addEventListener("abort", link, { once: true });
      watch.unlink = () => signal.removeEventListener("abort", link);
      watch.ctrl = ctrl;
      attemptSignal = ctrl.signal;
      watch.at = performance.now();
      const limits = [settings.firstByteMs, settings.idleMs].filter((ms) => ms > 0);
      watch.timer = setInterval(
        () => {
          const limit = watch.first ? settings.firstByteMs : settings.idleMs;
          if (!limit || performance.now() - watch.at <= limit) return;
          watch.stalled = watch.first ? "first" : "idle";
          watch.ctrl?.abort();
        },
        Math.min(1_000, Math.max(5, Math.min(...limits) / 4)),
      );
      watch.timer.unref?.();
    }
    let iterable: AsyncIterable<any>;
    try {
      iterable = await session.open(attemptSignal);
    } catch (err) {
      return fail(err);
    }
    raw = iterable[Symbol.asyncIterator]();
    return next();
  };

  function next(): Promise<IteratorResult<ModelEvent>> {
    if (queue.length) return Promise.resolve({ done: false, value: queue.shift()! });
    if (deferred) {
      const e = deferred;
      deferred = undefined;
      return Promise.reject(e);
    }
    if (finished) return Promise.resolve(end());
    if (!raw) return open().catch((err) => ((finished = true), Promise.reject(err)));
    return raw.next().then(take, fail);
  }

  return {
    next,
    async return() {
      const r = raw;
      raw = undefined;
      stopWatch();
      queue.length = 0;
      deferred = undefined;
      finished = true;
      await r?.return?.();
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** Resolve after `ms`, or throw `aborted` when the signal fires. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  const aborted = () => new ProviderError("aborted", "The request was aborted while waiting to retry.");
  if (signal.aborted) return Promise.reject(aborted());
  return new Promise((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", abort);
      resolve();
    }, ms);
    signal.addEventListener("abort", abort, { once: true });
  });
}

/**
 * A fetch for the SDKs that keeps them from honouring a long `retry-after`: a failed response
 * asking for more than `maxRetryAfterMs` gets `x-should-retry: false`, which both SDKs obey, so
 * the error surfaces at once (with its retry-after) instead of a silent wait of up to hours, even
 * when the server said `x-should-retry: true`.
 */
export function cappedRetryFetch(maxRetryAfterMs: number, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    // An `x-should-retry: true` (the real APIs send it on 429/529) must not lift the cap: the SDK would then sleep the whole retry-after.
    if (res.ok || res.headers.get("x-should-retry") === "false") return res;
    const wait = retryAfterOf(res.headers);
    if (wait === undefined || wait <= maxRetryAfterMs) return res;
    const headers = new Headers(res.headers);
    headers.set("x-should-retry", "false");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  };
}
