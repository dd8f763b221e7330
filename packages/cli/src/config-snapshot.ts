/**
 * The config, read once inside a guard: every own value of its plain objects and arrays is
 * read here (getters and Proxy traps run once), so validation and the agent only see data,
 * and a value whose read throws is a located KEEL_CONFIG_READ_FAILED, not a stack trace.
 */
import { types } from "node:util";
import { KeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import { childPath, thrownText } from "./guard.ts";

/** Deepest nesting a config may have. */
export const MAX_CONFIG_DEPTH = 256;
/** Most entries one array of a config may have. */
export const MAX_CONFIG_ENTRIES = 1_000_000;

/** Fields read from a non-plain object (a class instance) at a position the CLI and kernel read. */
const PROBES: Array<[RegExp, readonly string[]]> = [
  [
    /^plugins\[\d+\]$/,
    ["then", "name", "version", "kernel", "description", "dependencies", "options", "input", "setup"],
  ],
  [/^observers\[\d+\]$/, ["name", "attach"]],
  [/^tools\[\d+\]$/, ["name", "description", "inputSchema", "category", "execute"]],
  [/^(model(\[\d+\])?|sideModel|models\..+\.model(\[\d+\])?)$/, ["id", "stream"]],
];

/**
 * A copy of `config` whose plain objects and arrays are fresh data (shared and circular
 * references are kept as such); functions, class instances and other objects are kept as they
 * are, after reading the fields the CLI and kernel use from them.
 * Contract: throws KEEL_CONFIG_READ_FAILED naming `filepath` and the path whose read threw.
 */
export function snapshotConfig(config: unknown, filepath: string): unknown {
  const copies = new Map<object, unknown>();
  const read = <T>(fn: () => T, path: string): T => {
    try {
      return fn();
    } catch (err) {
      throw new KeelError(
        "KEEL_CONFIG_READ_FAILED",
        `${filepath}: reading ${path || "the config"} threw: ${thrownText(err)}.`,
        { path: path || "(root)" },
        { cause: err },
      );
    }
  };
  const visit = (v: unknown, path: string, depth: number): unknown => {
    if (v === null || typeof v !== "object") return v;
    if (copies.has(v)) return copies.get(v);
    if (depth > MAX_CONFIG_DEPTH) {
      const shown = `${headOf(path, 60)}…`;
      throw new KeelError(
        "KEEL_CONFIG_INVALID",
        `${filepath}: ${shown} nests deeper than ${MAX_CONFIG_DEPTH} levels.`,
        { path: shown },
      );
    }
    const kind = read(
      () => (Array.isArray(v) ? "array" : types.isModuleNamespaceObject(v) ? "other" : isPlain(v) ? "plain" : "other"),
      path,
    );
    if (kind === "other") {
      copies.set(v, v);
      for (const [pattern, fields] of PROBES)
        if (pattern.test(path))
          for (const f of fields) read(() => (v as Record<string, unknown>)[f], childPath(path, f));
      return v;
    }
    if (kind === "array") {
      const out: unknown[] = [];
      copies.set(v, out);
      const n = read(() => (v as unknown[]).length, path);
      if (!(n <= MAX_CONFIG_ENTRIES))
        throw new KeelError(
          "KEEL_CONFIG_INVALID",
          `${filepath}: ${path} has ${n} entries (at most ${MAX_CONFIG_ENTRIES}).`,
          { path },
        );
      for (let i = 0; i < n; i++)
        out.push(
          visit(
            read(() => (v as unknown[])[i], childPath(path, i)),
            childPath(path, i),
            depth + 1,
          ),
        );
      return out;
    }
    const out: Record<string, unknown> = {};
    copies.set(v, out);
    for (const key of read(() => Object.keys(v), path)) {
      const at = childPath(path, key);
      // defineProperty, so a "__proto__" key stays a key.
      Object.defineProperty(out, key, {
        value: visit(
          read(() => (v as Record<string, unknown>)[key], at),
          at,
          depth + 1,
        ),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  };
  return visit(config, "", 0);
}

function isPlain(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
