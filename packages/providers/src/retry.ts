/** Bounded retries of a stream that failed after it started. */
import { KeelError, ProviderError, type ModelEvent } from "@keel/kernel";
import { classifyError, retryableMidStream } from "./errors.ts";

/** Retry settings for failures after the stream started (reset, in-band error, truncation). */
export interface StreamRetryOptions {
  /** Further attempts after the first. Default 2. */
  streamRetries?: number;
  /** Linear backoff: attempt n waits n × this many ms. Default 500. */
  streamBackoffMs?: number;
  /** A started stream silent for this long is cut and retried (`network`). Default 0: off. */
  idleTimeoutMs?: number;
}

/** Validated settings of withStreamRetries. */
export interface RetrySettings {
  retries: number;
  backoffMs: number;
  idleMs: number;
}

/**
 * One attempt at a stream: `open` sends the request (the SDK retries failures before the stream
 * starts), `push` turns one raw SDK event into zero or more ModelEvents, `finish` gives the final
 * `response` once the raw stream ended (or throws when it was cut short).
 */
export interface StreamSession {
  open(signal: AbortSignal): Promise<AsyncIterable<any>>;
  push(raw: any): ModelEvent | ModelEvent[] | undefined;
  finish(signal: AbortSignal): ModelEvent;
}

/** Validated retry settings. Contract: throws KEEL_PROVIDER_OPTIONS_INVALID on a bad value. */
export function retrySettings(o: StreamRetryOptions, provider: string): RetrySettings {
  const retries = o.streamRetries ?? 2;
  const backoffMs = o.streamBackoffMs ?? 500;
  const idleMs = o.idleTimeoutMs ?? 0;
  if (!Number.isFinite(idleMs) || idleMs < 0) throw new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", `${provider}: idleTimeoutMs must be a non-negative number, got ${JSON.stringify(idleMs)}.`, { path: "idleTimeoutMs" });
  if (!Number.isInteger(retries) || retries < 0) throw new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", `${provider}: streamRetries must be a non-negative integer, got ${JSON.stringify(retries)}.`, { path: "streamRetries" });
  if (!Number.isFinite(backoffMs) || backoffMs < 0) throw new KeelError("KEEL_PROVIDER_OPTIONS_INVALID", `${provider}: streamBackoffMs must be a non-negative number, got ${JSON.stringify(backoffMs)}.`, { path: "streamBackoffMs" });
  return { retries, backoffMs, idleMs };
}

/**
 * Run attempts of a stream, retrying a failure that happened after the stream started.
 * Contract: errors before the stream started are thrown as they are (the SDK already retried
 * them); each retry yields a `retry` notice first (deltas so far are void); aborts are never
 * retried; `return()` stops the HTTP stream. A hand-written iterator: no generator hop per event.
 */
export function withStreamRetries(provider: string, begin: () => StreamSession, signal: AbortSignal, settings: RetrySettings): AsyncIterableIterator<ModelEvent> {
  let attempt = 0;
  let session: StreamSession | undefined;
  let raw: AsyncIterator<any> | undefined;
  let waitMs = 0;
  let finished = false;
  const queue: ModelEvent[] = [];
  const end = (): IteratorResult<ModelEvent> => ((finished = true), { done: true, value: undefined });
  // Stall watchdog (idleMs > 0): one interval per attempt, cutting the attempt's own controller.
  const idle = { at: 0, stalled: false, timer: undefined as ReturnType<typeof setInterval> | undefined, ctrl: undefined as AbortController | undefined, unlink: () => {} };
  const stopWatch = () => {
    if (idle.timer) clearInterval(idle.timer);
    idle.timer = undefined;
    idle.unlink();
    idle.unlink = () => {};
  };
  const stalledError = () => new ProviderError("network", `${provider}: the stream stalled (no event for ${settings.idleMs} ms); it was cut.`);

  const fail = (err: unknown): IteratorResult<ModelEvent> => {
    const started = raw !== undefined;
    // Stop the HTTP stream (a no-op when it already ended or threw).
    void raw?.return?.()?.catch(() => {});
    raw = undefined;
    stopWatch();
    const e = idle.stalled && !signal.aborted ? stalledError() : classifyError(err, provider, signal);
    if (e.errorClass === "aborted" || !started || attempt >= settings.retries || !retryableMidStream(e)) {
      finished = true;
      throw e;
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
        if (idle.stalled) throw stalledError();
        const last = session!.finish(signal);
        raw = undefined;
        stopWatch();
        finished = true;
        return { done: false, value: last };
      }
      if (idle.timer) idle.at = performance.now();
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
    let attemptSignal = signal;
    idle.stalled = false;
    if (settings.idleMs > 0) {
      const ctrl = new AbortController();
      const link = () => ctrl.abort(signal.reason);
      signal.addEventListener("abort", link, { once: true });
      idle.unlink = () => signal.removeEventListener("abort", link);
      idle.ctrl = ctrl;
      attemptSignal = ctrl.signal;
    }
    let iterable: AsyncIterable<any>;
    try {
      iterable = await session.open(attemptSignal);
    } catch (err) {
      return fail(err);
    }
    raw = iterable[Symbol.asyncIterator]();
    if (settings.idleMs > 0) {
      idle.at = performance.now();
      idle.timer = setInterval(() => {
        if (performance.now() - idle.at <= settings.idleMs) return;
        idle.stalled = true;
        idle.ctrl?.abort();
      }, Math.max(5, settings.idleMs / 4));
      idle.timer.unref?.();
    }
    return next();
  };

  function next(): Promise<IteratorResult<ModelEvent>> {
    if (queue.length) return Promise.resolve({ done: false, value: queue.shift()! });
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
