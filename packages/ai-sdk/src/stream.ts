/**
 * A model's doStream promise and stream parts, bounded by the attempt's abort signal. The AI SDK
 * providers pass the signal to fetch, but a third-party provider may ignore it: without these
 * bounds its stall would never be cut (idle and first-byte timeouts abort the signal) and an
 * abort would leave it running.
 */
import { ProviderError } from "@keel/kernel";

type Reader = { read(): Promise<IteratorResult<unknown>>; cancel(reason?: unknown): Promise<unknown> | undefined };

/** Settle with `promise`, or reject with the signal's reason as soon as `signal` fires. Contract: no listener is left behind. */
export function untilAborted<T>(promise: PromiseLike<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    promise.then(
      (v) => (signal.removeEventListener("abort", stop), resolve(v)),
      (e) => (signal.removeEventListener("abort", stop), reject(e)),
    );
  });
}

/** A reader of the model's stream: a ReadableStream's, or an async iterable's as one. */
function readerOf(stream: unknown, provider: string): Reader {
  const s = stream as { getReader?: unknown; [Symbol.asyncIterator]?: unknown } | null | undefined;
  if (typeof s?.getReader === "function") return (s.getReader as () => Reader).call(s);
  if (typeof s?.[Symbol.asyncIterator] === "function") {
    const it = (s[Symbol.asyncIterator] as () => AsyncIterator<unknown>).call(s);
    return { read: () => it.next(), cancel: () => it.return?.() };
  }
  throw new ProviderError(
    "unknown",
    `${provider}: the model's doStream returned no stream (a ReadableStream of parts).`,
  );
}

/**
 * The stream's parts, each read raced against `signal`. Contract: when `signal` fires, a pending
 * read rejects with its reason at once and the stream is cancelled (not waited for); `return()`
 * cancels it without waiting either, so a provider that never settles cannot hang Keel.
 */
export function boundedParts(stream: unknown, signal: AbortSignal, provider: string): AsyncIterable<unknown> {
  const reader = readerOf(stream, provider);
  let pending: ((err: unknown) => void) | undefined;
  const cancel = (reason?: unknown) => {
    signal.removeEventListener("abort", onAbort);
    try {
      void Promise.resolve(reader.cancel(reason)).catch(() => {});
    } catch {
      // A provider whose cancel throws has nothing more to stop.
    }
  };
  const onAbort = () => {
    const reject = pending;
    pending = undefined;
    cancel(signal.reason);
    reject?.(signal.reason);
  };
  signal.addEventListener("abort", onAbort, { once: true });
  const iterator: AsyncIterator<unknown> = {
    next: () => {
      if (signal.aborted) return Promise.reject(signal.reason);
      return new Promise((resolve, reject) => {
        pending = reject;
        let read: Promise<IteratorResult<unknown>>;
        try {
          read = Promise.resolve(reader.read());
        } catch (err) {
          read = Promise.reject(err);
        }
        read.then(
          (r) => {
            pending = undefined;
            if (r.done) signal.removeEventListener("abort", onAbort);
            resolve(r);
          },
          (err) => {
            pending = undefined;
            signal.removeEventListener("abort", onAbort);
            reject(err);
          },
        );
      });
    },
    return: async () => {
      pending = undefined;
      cancel();
      return { done: true, value: undefined };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
