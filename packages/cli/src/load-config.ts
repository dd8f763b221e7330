/**
 * Find and load `agent.config.*`: cosmiconfig discovers it, jiti loads TypeScript and
 * JavaScript with `@keel/kernel` pinned to the host's own copy, so the config and its plugins
 * see the same classes and registry as the command running them.
 */
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Jiti } from "jiti";
import * as kernel from "@keel/kernel";
import * as kernelTesting from "@keel/kernel/testing";
import { KeelError, errorMessage, isKeelError } from "@keel/kernel";

/** Where discovery looks, in order, in each folder from the start folder up to the project root. */
export const SEARCH_PLACES = ["package.json", "agent.config.ts", "agent.config.mts", "agent.config.cts", "agent.config.js", "agent.config.mjs", "agent.config.cjs", "agent.config.json"];

/** A loaded, not yet validated, config. */
export interface LoadedConfig {
  config: unknown;
  filepath: string;
  /** Imports a module (a plugin package) the way the config was loaded: natively when safe, else through jiti. */
  importModule: (file: string) => Promise<unknown>;
}

let shared: Jiti | undefined;

/**
 * The jiti instance: `@keel/kernel` resolves to this process's kernel module, never a second
 * copy. Loaded on first use: most configs import natively and never need it.
 */
export async function configJiti(): Promise<Jiti> {
  if (shared) return shared;
  const { createJiti } = await import("jiti");
  shared ??= createJiti(import.meta.url, {
    interopDefault: false,
    moduleCache: true,
    fsCache: false,
    virtualModules: { "@keel/kernel": kernel, "@keel/kernel/testing": kernelTesting },
  });
  return shared;
}

const hostKernel = fileURLToPath(import.meta.resolve("@keel/kernel"));

/**
 * Native import is much faster than jiti's transform, and safe when `@keel/kernel`, resolved
 * from the config's folder, is this very file (one module instance).
 */
function nativeSafe(filepath: string): boolean {
  if (!/\.(m?ts|m?js)$/.test(filepath) || !process.features.typescript) return false;
  try {
    return realpathSync(createRequire(filepath).resolve("@keel/kernel")) === realpathSync(hostKernel);
  } catch {
    return false;
  }
}

async function importConfig(filepath: string): Promise<unknown> {
  if (nativeSafe(filepath)) {
    try {
      return await import(pathToFileURL(filepath).href);
    } catch {
      // Syntax the runtime cannot strip, a syntax error or a failed import: jiti reports it with its location.
    }
  }
  return (await configJiti()).import<unknown>(filepath);
}

async function jitiLoader(filepath: string): Promise<unknown> {
  const mod = (await importConfig(filepath)) as Record<string, unknown> | null;
  // ESM `export default`, or CommonJS `module.exports = …` (which jiti also shows as `default`).
  if (mod && typeof mod === "object" && "default" in mod && mod.default !== undefined) return mod.default;
  if (/\.c[jt]s$/.test(filepath) && mod && typeof mod === "object" && Object.keys(mod).length) return mod;
  const named = mod && typeof mod === "object" ? Object.keys(mod).filter((k) => k !== "__esModule") : [];
  throw new KeelError("KEEL_CONFIG_INVALID", `${filepath} has no default export${named.length ? ` (it exports ${named.join(", ")})` : ""}. Write \`export default defineConfig({ ... })\`.`, { path: filepath });
}

/**
 * Find (or, with `configPath`, load) the config.
 * Contract: throws KeelError KEEL_CONFIG_NOT_FOUND or KEEL_CONFIG_LOAD_FAILED naming the file.
 */
export async function loadConfig(options: { cwd: string; configPath?: string }): Promise<LoadedConfig> {
  const target = options.configPath ? resolve(options.cwd, options.configPath) : undefined;
  if (target && !existsSync(target)) throw new KeelError("KEEL_CONFIG_NOT_FOUND", `--config ${options.configPath}: no such file (${target}).`, { path: target });
  if (target && /\.(m|c)?(t|j)s$/.test(target)) {
    // An explicit script config needs no discovery: load it the way cosmiconfig would, without loading cosmiconfig.
    try {
      return checked({ config: await jitiLoader(target), filepath: target });
    } catch (err) {
      if (isKeelError(err)) throw err;
      throw new KeelError("KEEL_CONFIG_LOAD_FAILED", describeLoadError(err, target), { path: target }, { cause: err });
    }
  }
  const { cosmiconfig } = await import("cosmiconfig");
  const explorer = cosmiconfig("keel", {
    searchPlaces: SEARCH_PLACES,
    searchStrategy: "project",
    cache: false,
    loaders: { ".ts": jitiLoader, ".mts": jitiLoader, ".cts": jitiLoader, ".js": jitiLoader, ".mjs": jitiLoader, ".cjs": jitiLoader },
  });
  let found: { config: unknown; filepath: string; isEmpty?: boolean } | null;
  try {
    found = target ? await explorer.load(target) : await explorer.search(options.cwd);
  } catch (err) {
    if (isKeelError(err)) throw err;
    throw new KeelError("KEEL_CONFIG_LOAD_FAILED", describeLoadError(err, target), { path: fileOf(err) ?? target ?? options.cwd }, { cause: err });
  }
  if (!found) throw new KeelError("KEEL_CONFIG_NOT_FOUND", `Searched ${options.cwd} and its parents up to the project root.`, { path: options.cwd });
  return checked(found);
}

function checked(found: { config: unknown; filepath: string; isEmpty?: boolean }): LoadedConfig {
  if (found.isEmpty || found.config === undefined || found.config === null) {
    throw new KeelError("KEEL_CONFIG_INVALID", `${found.filepath} exports nothing. Export the config as the default export (export default defineConfig({ ... })).`, { path: found.filepath });
  }
  return { config: found.config, filepath: found.filepath, importModule: importConfig };
}

function fileOf(err: unknown): string | undefined {
  const f = (err as { filepath?: unknown } | null)?.filepath;
  return typeof f === "string" ? f : undefined;
}

/** A load error's message with its location (file:line:column) when the error has one. */
function describeLoadError(err: unknown, target: string | undefined): string {
  const file = fileOf(err) ?? target;
  const msg = errorMessage(err).split("\n").filter((l) => !l.startsWith("Require stack") && !l.startsWith("- ")).slice(0, 6).join("\n").replace(file ? `JSON Error in ${file}:\n` : "\u0000", "");
  const loc = (err as { loc?: { line?: number; column?: number } } | null)?.loc;
  const at = loc?.line !== undefined ? ` (at line ${loc.line}, column ${(loc.column ?? 0) + 1})` : "";
  const name = err instanceof Error && err.name !== "Error" ? `${err.name}: ` : "";
  return `${file ? `${file}: ` : ""}${name}${msg}${at}`;
}

/** The folder a config file lives in (plugins and scripts resolve relative to it). */
export function configDir(filepath: string): string {
  return dirname(filepath);
}
