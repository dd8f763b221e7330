import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { KeelError, isKeelError } from "@keel/kernel";
import { didYouMean } from "@keel/text";
import { thrownText } from "./guard.ts";
import { resolveFrom } from "./host-packages.ts";
import type { PluginEntry, PluginSpec } from "@keel/agent";

/**
 * Resolve every entry. Contract: throws KEEL_PLUGIN_NOT_FOUND (import failed) or
 * KEEL_CONFIG_INVALID (the package exports no plugin) with the entry's path.
 */
export async function resolvePlugins(
  specs: readonly PluginSpec[],
  from: string,
  importModule: (file: string) => Promise<unknown>,
): Promise<PluginEntry[]> {
  const out: PluginEntry[] = [];
  for (const [i, spec] of specs.entries()) {
    if (typeof spec === "string" || Array.isArray(spec)) {
      const [name, options] = (typeof spec === "string" ? [spec, undefined] : spec) as readonly [string, unknown?];
      out.push(await fromPackage(name, options, `plugins[${i}]`, from, importModule));
    } else out.push(spec as PluginEntry);
  }
  return out;
}

async function fromPackage(
  name: string,
  options: unknown,
  path: string,
  from: string,
  importModule: (file: string) => Promise<unknown>,
): Promise<PluginEntry> {
  let mod: unknown;
  try {
    const resolved = resolveFrom(name, from);
    mod = await importModule(resolved);
  } catch (err) {
    if (isKeelError(err))
      throw new KeelError(err.code, `${from}: "${name}": ${err.problem}`, { ...err.location, path }, { cause: err });
    throw new KeelError(
      "KEEL_PLUGIN_NOT_FOUND",
      `${from}: "${name}" could not be imported: ${thrownText(err).split("\n")[0]}${didYouMean(name, installedNames(from))}`,
      { path },
      { cause: err },
    );
  }
  const read = <T>(fn: () => T, what: string): T => {
    try {
      return fn();
    } catch (err) {
      throw new KeelError(
        "KEEL_CONFIG_READ_FAILED",
        `${from}: reading ${what} of "${name}" threw: ${thrownText(err)}.`,
        { path },
        { cause: err },
      );
    }
  };
  const exported = read(() => {
    const m = mod as { default?: unknown } | null;
    return m && typeof m === "object" && "default" in m ? m.default : mod;
  }, "the default export");
  if (typeof exported === "function") {
    let made: unknown;
    try {
      made = options === undefined ? exported() : exported(options);
    } catch (err) {
      throw new KeelError(
        "KEEL_CONFIG_INVALID",
        `${from}: the plugin factory of "${name}" threw: ${thrownText(err)}`,
        { path: `${path}[1]` },
        { cause: err },
      );
    }
    if (read(() => typeof (made as { then?: unknown } | null)?.then === "function", "the factory's result")) {
      throw new KeelError(
        "KEEL_CONFIG_INVALID",
        `${from}: the plugin factory of "${name}" returned a Promise; the package's factory must be synchronous (or import it and write plugins: [await factory()]).`,
        { path },
      );
    }
    return made as PluginEntry;
  }
  if (
    exported &&
    typeof exported === "object" &&
    read(() => typeof (exported as { setup?: unknown }).setup === "function", "setup")
  ) {
    return (
      options === undefined ? exported : read(() => ({ ...exported, input: options }), "the plugin object")
    ) as PluginEntry;
  }
  throw new KeelError(
    "KEEL_CONFIG_INVALID",
    `${from}: "${name}" does not export a plugin (expected a default export that is a plugin object or a factory function).`,
    { path },
  );
}

/** Keel's own plugins and the packages installed beside the config (node_modules up the tree), for "did you mean". */
function installedNames(from: string): string[] {
  const names = new Set([
    "@keel/plugin-memory",
    "@keel/plugin-skills",
    "@keel/plugin-mcp",
    "@keel/plugin-compaction",
    "@keel/plugin-permissions",
    "@keel/plugin-workflows",
  ]);
  for (let dir = dirname(from); ; dir = dirname(dir)) {
    try {
      for (const entry of readdirSync(join(dir, "node_modules"))) {
        if (!entry.startsWith("@")) names.add(entry);
        else for (const sub of readdirSync(join(dir, "node_modules", entry))) names.add(`${entry}/${sub}`);
      }
    } catch {
      // no node_modules here
    }
    if (dirname(dir) === dir) break;
  }
  return [...names];
}
