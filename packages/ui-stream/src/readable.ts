/** @internal An async iterable of turn events as a pull-based ReadableStream of what `map` makes of each. */
import type { TurnStreamEvent } from "@keel/stream";

/**
 * Contract: one event is read per pull, and its mapped items are enqueued; the stream closes when the
 * iterable ends; cancelling calls `onCancel` when given (e.g. to detach a turn), else closes the iterator.
 */
export function closeOnCancel<T>(
  stream: AsyncIterable<TurnStreamEvent>,
  map: (e: TurnStreamEvent) => T[],
  onCancel?: () => void,
): ReadableStream<T> {
  const it = stream[Symbol.asyncIterator]();
  let closed = false;
  return new ReadableStream<T>(
    {
      async pull(controller) {
        for (;;) {
          const next = await it.next();
          // A read that settles after the client went away has nowhere to go.
          if (closed) return;
          if (next.done) return controller.close();
          const items = map(next.value);
          for (const item of items) controller.enqueue(item);
          if (items.length) return;
        }
      },
      async cancel() {
        closed = true;
        if (onCancel) onCancel();
        else await it.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}
