/**
 * Turn the config's `plugins` list into plugin entries: objects pass through, falsy entries
 * stay (the kernel skips them, so `plugins[i]` paths keep pointing at the config's own list),
 * and package names are imported relative to the config file and called with their options.
 */
import { createRequire } from "node:module";
import { KeelError, errorMessage } from "@keel/kernel";
import type { PluginEntry, PluginSpec } from "@keel/kernel";

/**
 * Resolve every entry. Contract: throws KEEL_PLUGIN_NOT_FOUND (import failed) or
 * KEEL_CONFIG_INVALID (the package exports no plugin) with the entry's path.
 */
export async function resolvePlugins(specs: readonly PluginSpec[], from: string, importModule: (file: string) => Promise<unknown>): Promise<PluginEntry[]> {
  const out: PluginEntry[] = [];
  for (const [i, spec] of specs.entries()) {
    if (typeof spec === "string" || Array.isArray(spec)) {
      const [name, options] = (typeof spec === "string" ? [spec, undefined] : spec) as readonly [string, unknown?];
      out.push(await fromPackage(name, options, `plugins[${i}]`, from, importModule));
    } else out.push(spec as PluginEntry);
  }
  return out;
}

async function fromPackage(name: string, options: unknown, path: string, from: string, importModule: (file: string) => Promise<unknown>): Promise<PluginEntry> {
  let mod: unknown;
  try {
    const resolved = createRequire(from).resolve(name);
    mod = await importModule(resolved);
  } catch (err) {
    throw new KeelError("KEEL_PLUGIN_NOT_FOUND", `${from}: "${name}" could not be imported: ${errorMessage(err).split("\n")[0]}`, { path }, { cause: err });
  }
  const m = mod as { default?: unknown } | null;
  const exported = m && typeof m === "object" && "default" in m ? m.default : mod;
  if (typeof exported === "function") {
    try {
      return (options === undefined ? exported() : exported(options)) as PluginEntry;
    } catch (err) {
      throw new KeelError("KEEL_CONFIG_INVALID", `${from}: the plugin factory of "${name}" threw: ${errorMessage(err)}`, { path: `${path}[1]` }, { cause: err });
    }
  }
  if (exported && typeof exported === "object" && typeof (exported as { setup?: unknown }).setup === "function") {
    return (options === undefined ? exported : { ...exported, input: options }) as PluginEntry;
  }
  throw new KeelError("KEEL_CONFIG_INVALID", `${from}: "${name}" does not export a plugin (expected a default export that is a plugin object or a factory function).`, { path });
}
