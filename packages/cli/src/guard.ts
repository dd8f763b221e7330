/** Reading values that came from a config or plugin code, which may throw on any access. */
import { maskCredentials } from "@keel/kernel";

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
      if (err instanceof Error) {
        const name = attempt(() => String(err.name), "Error");
        const message = attempt(() => String(err.message), "");
        return name && name !== "Error" ? `${name}: ${message}` : message || name;
      }
      if (typeof err === "string") return err;
      if (err === undefined || typeof err === "function" || typeof err === "symbol") return String(err);
      return JSON.stringify(err) ?? String(err);
    }, "(an unprintable value)"),
  );
}

/** `parent.key` or `parent[3]`, the way validation paths are written. */
export function childPath(parent: string, key: string | number): string {
  return typeof key === "number" ? `${parent}[${key}]` : parent ? `${parent}.${key}` : key;
}
