/** Reading values that came from a config or plugin code, which may throw on any access. */
import { errorMessage, maskCredentials } from "@keel/kernel";

/** `fn()`, or `fallback` when it throws. Contract: never throws. */
export function attempt<T, F>(fn: () => T, fallback: F): T | F {
  try {
    return fn();
  } catch {
    return fallback;
  }
}

/**
 * What a thrown value says, as one short line: `TypeError: boom`, `null`, `undefined`.
 * Contract: never throws, whatever was thrown (getters on `message` or `name` included);
 * a connection credential in it is masked (maskCredentials).
 */
export function thrownText(err: unknown): string {
  return maskCredentials(
    attempt(() => {
      // The kernel's one reading of a thrown value (an AggregateError's errors, a list, an object's message), with the error's name.
      const message = errorMessage(err);
      if (!(err instanceof Error)) return message;
      const name = attempt(() => String(err.name), "Error");
      return name && name !== "Error" && message !== name ? `${name}: ${message}` : message;
    }, "(an unprintable value)"),
  );
}

/** `parent.key` or `parent[3]`, the way validation paths are written. */
export function childPath(parent: string, key: string | number): string {
  return typeof key === "number" ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key;
}
