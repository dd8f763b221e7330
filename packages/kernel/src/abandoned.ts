/**
 * Work the kernel stopped waiting for (a handler, tool, job or setup that timed out or was
 * aborted) but that has not settled: what may still keep a process alive after a turn.
 */
const live = new Map<number, string>();
let nextId = 0;

/** Record `work` as abandoned under `label` until it settles. Contract: never throws. */
export function trackAbandoned(label: string, work: unknown): void {
  if (work === null || (typeof work !== "object" && typeof work !== "function")) return;
  const id = ++nextId;
  const done = () => void live.delete(id);
  try {
    const then = (work as { then?: unknown }).then;
    if (typeof then !== "function") return;
    live.set(id, label);
    then.call(work, done, done);
  } catch {
    live.delete(id);
  }
}

/**
 * Labels of abandoned work still running in this process, oldest first (e.g.
 * `handler memory:turn.post_turn`, `tool slow (call c1)`). Contract: a snapshot; never throws.
 */
export function abandonedWork(): string[] {
  return [...live.values()];
}
