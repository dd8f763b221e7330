/** How many `keel` children the fault suite runs at once, across every scenario of a file (2 cores). */
export const MAX_CLIS = 2;

let running = 0;
const waiting: Array<() => void> = [];

/** Run `fn` once fewer than MAX_CLIS others are running. Contract: the slot is freed however `fn` ends. */
export async function limited<T>(fn: () => Promise<T>): Promise<T> {
  while (running >= MAX_CLIS) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    waiting.shift()?.();
  }
}
