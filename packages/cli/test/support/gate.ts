/**
 * A gate for spawned processes of one test file: scenarios of a `describe.concurrent` block run
 * together, and their `keel` processes queue here, at most `limit` at a time (2 cores: a third
 * process at once only adds contention, while a scenario waiting on a timeout holds no core).
 */
export function gate(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let busy = 0;
  const queue: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (busy < limit) busy++;
    else await new Promise<void>((r) => queue.push(r));
    try {
      return await task();
    } finally {
      const next = queue.shift();
      if (next) next();
      else busy--;
    }
  };
}
