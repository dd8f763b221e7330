/**
 * The one boundary where values from plugin and tool code enter the kernel: read once,
 * inside a guard, into plain data. Getters run once, Proxies are read through their traps
 * once and dropped, `toJSON` and non-enumerable or symbol keys are left behind; a throw, a
 * cycle, a bigint or symbol, or an oversize value makes the whole value unreadable.
 */
import { headOf } from "./text.ts";

/** A value that could not be read; `path` says where. */
export class UnreadableValueError extends Error {
  readonly path: string;
  constructor(path: string, problem: string) {
    super(`${path}: ${problem}`);
    this.name = "UnreadableValueError";
    this.path = path;
  }
}

const MAX_DEPTH = 64;
const MAX_NODES = 200_000;

/** Tool definitions a plugin returns again each turn keep one snapshot (stable identity for caches). */
const tools = new WeakMap<object, object>();

/**
 * Plain data copied from `value`. Contract: throws only UnreadableValueError; functions and
 * zod schemas (objects with a `safeParse` method) are kept by reference, everything else is
 * copied (arrays as arrays, other objects as plain objects of their own enumerable keys).
 */
export function snapshot(value: unknown, path = "(root)"): unknown {
  try {
    return copy(value, path, 0, new Set(), { n: 0 });
  } catch (err) {
    if (err instanceof UnreadableValueError) throw err;
    let why: string;
    try {
      why = err instanceof Error ? String(err.message) : String(err);
    } catch {
      why = "an unreadable error";
    }
    throw new UnreadableValueError(path, `reading it threw ${headOf(why, 200)}`);
  }
}

function copy(v: unknown, path: string, depth: number, seen: Set<object>, budget: { n: number }): unknown {
  if (v === null || v === undefined) return v;
  const t = typeof v;
  if (t === "string" || t === "number" || t === "boolean" || t === "function") return v;
  if (t === "bigint" || t === "symbol") throw new UnreadableValueError(path, `a ${t} is not data`);
  const o = v as object;
  if (depth > MAX_DEPTH) throw new UnreadableValueError(path, `nested deeper than ${MAX_DEPTH} levels`);
  if (++budget.n > MAX_NODES) throw new UnreadableValueError(path, `more than ${MAX_NODES} objects`);
  if (seen.has(o)) throw new UnreadableValueError(path, "a cycle");
  const cached = tools.get(o);
  if (cached) return cached;
  if (typeof (o as { safeParse?: unknown }).safeParse === "function") return o;
  seen.add(o);
  let out: unknown;
  try {
    if (Array.isArray(o)) {
      const n = o.length;
      if (n > MAX_NODES) throw new UnreadableValueError(path, `an array of ${n} items`);
      const arr = new Array<unknown>(n);
      for (let i = 0; i < n; i++) arr[i] = copy(o[i], `${path}[${i}]`, depth + 1, seen, budget);
      out = arr;
    } else {
      const rec: Record<string, unknown> = {};
      for (const k of Object.keys(o)) {
        if (k === "toJSON" || k === "__proto__") continue;
        rec[k] = copy(
          (o as Record<string, unknown>)[k],
          path === "(root)" ? k : `${path}.${k}`,
          depth + 1,
          seen,
          budget,
        );
      }
      if (typeof rec["execute"] === "function") tools.set(o, rec);
      out = rec;
    }
  } finally {
    seen.delete(o);
  }
  return out;
}

/**
 * Deep-freeze an event before any handler sees it: plain objects and arrays, recursively.
 * Contract: the event itself is always walked; below it, an already frozen object is taken
 * as deep-frozen (the kernel's convention: it shallow-freezes only event objects and
 * deep-freezes everything it nests, e.g. the history with freezeDeep), so a long history
 * costs nothing per phase. Class instances (other than arrays) are left as they are; the
 * kernel hands out read-only views of those instead.
 */
export function freezeEvent<T>(value: T): T {
  deepFreeze(value, 0);
  return value;
}

function deepFreeze(v: unknown, depth: number): void {
  if (v === null || typeof v !== "object" || depth > MAX_DEPTH) return;
  const o = v as object;
  if (depth > 0 && Object.isFrozen(o)) return;
  const proto: unknown = Object.getPrototypeOf(o);
  if (!(Array.isArray(o) || proto === Object.prototype || proto === null)) return;
  Object.freeze(o);
  if (Array.isArray(o)) for (const item of o) deepFreeze(item, depth + 1);
  else for (const k in o) deepFreeze((o as Record<string, unknown>)[k], depth + 1);
}
