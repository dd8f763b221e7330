/**
 * One abort listener per signal for the kernel's short waits on a turn's signal (each tool
 * call, each model call): an addEventListener/removeEventListener pair on an AbortSignal costs
 * more than most steps of a turn, a Set entry next to nothing.
 */

interface Watch {
  signal: AbortSignal;
  fns: Set<() => void>;
}

/** The signal watched last (a turn's calls share it); another signal gets its own listener. */
let last: Watch | undefined;

/**
 * Call `fn` when `signal` aborts, as `addEventListener("abort", fn, { once: true })` would:
 * in the order added, not when it was removed before its turn. Returns what removes it. Contract: a signal that has aborted already never calls it
 * (check `signal.aborted` first); a throw is reported as an uncaught error, the others still run.
 */
export function whenAborted(signal: AbortSignal, fn: () => void): () => void {
  let w = last;
  if (w?.signal !== signal) {
    const fns = new Set<() => void>();
    signal.addEventListener(
      "abort",
      () => {
        // As Node's EventTarget: one removed before its turn is skipped, one added meanwhile runs too.
        for (const f of fns) {
          fns.delete(f);
          try {
            f();
          } catch (err) {
            queueMicrotask(() => {
              throw err;
            });
          }
        }
      },
      { once: true },
    );
    last = w = { signal, fns };
  }
  const { fns } = w;
  fns.add(fn);
  return () => void fns.delete(fn);
}
