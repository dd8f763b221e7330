/**
 * Find and load `agent.config.*`: cosmiconfig discovers it, Node (or jiti) loads TypeScript and
 * JavaScript with `@keel/kernel` pinned to the host's own copy, so the config and its plugins
 * see the same classes and registry as the command running them; other `@keel/*` packages the
 * project has not installed come from the CLI's installation (host-packages.ts).
 */
import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Jiti } from "jiti";
import * as agent from "@keel/agent/node";
import * as agentMain from "@keel/agent";
import * as kernel from "@keel/kernel";
import * as testkit from "@keel/testkit";
import { KeelError, isKeelError } from "@keel/kernel";
import { headOf } from "@keel/text";
import { attempt, thrownText } from "./guard.ts";
import { hostAliases, pinHostPackages } from "./host-packages.ts";

/** Where discovery looks, in order, in each folder from the start folder up to the project root. */
export const SEARCH_PLACES = [
  "package.json",
  "agent.config.ts",
  "agent.config.mts",
  "agent.config.cts",
  "agent.config.js",
  "agent.config.mjs",
  "agent.config.cjs",
  "agent.config.json",
];

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
 * copy, and (given the config file) each `@keel/*` package its project lacks to the CLI's copy.
 * Loaded on first use: most configs import natively and never need it.
 */
export async function configJiti(configFile?: string): Promise<Jiti> {
  const alias = configFile ? hostAliases(configFile) : {};
  const plain = Object.keys(alias).length === 0;
  if (plain && shared) return shared;
  const { createJiti } = await import("jiti");
  const made = createJiti(import.meta.url, {
    interopDefault: false,
    moduleCache: true,
    fsCache: false,
    virtualModules: {
      "@keel/kernel": kernel,
      "@keel/agent": agentMain,
      "@keel/agent/node": agent,
      "@keel/testkit": testkit,
      "@keel/kernel/testing": testkit,
    },
    ...(plain ? {} : { alias }),
  });
  if (plain) shared ??= made;
  return made;
}

const hostKernel = fileURLToPath(import.meta.resolve("@keel/kernel"));

/**
 * Native import is much faster than jiti's transform, and safe when `@keel/kernel` is this very
 * file (one module instance): always once the resolve hook pins it (host-packages.ts), else when
 * the config's folder resolves it here.
 */
function nativeSafe(filepath: string): boolean {
  if (!/\.(m?ts|m?js)$/.test(filepath) || !process.features.typescript) return false;
  if (pinHostPackages()) return true;
  try {
    return realpathSync(createRequire(filepath).resolve("@keel/kernel")) === realpathSync(hostKernel);
  } catch {
    return false;
  }
}

/**
 * In a CommonJS project (package.json without "type": "module") Node warns that it re-parses an
 * ES-module agent.config.ts (MODULE_TYPELESS_PACKAGE_JSON) on every command. That one warning,
 * for this one file, is dropped while it is imported; every other warning passes.
 */
async function quietTypeless<T>(filepath: string, load: () => Promise<T>): Promise<T> {
  const original = process.emitWarning;
  const url = pathToFileURL(filepath).href;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const code = typeof rest[0] === "object" && rest[0] ? (rest[0] as { code?: string }).code : rest[1];
    const text = typeof warning === "string" ? warning : warning.message;
    if (
      (code === "MODULE_TYPELESS_PACKAGE_JSON" ||
        (warning as { code?: string }).code === "MODULE_TYPELESS_PACKAGE_JSON") &&
      text.includes(url)
    )
      return;
    return (original as (...a: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return await load();
  } finally {
    process.emitWarning = original;
  }
}

/**
 * Import an eval file (`*.eval.ts`, `.mjs`, …) the way the config file is imported: an
 * uninstalled `@keel/*` package (`@keel/eval` itself) comes from the CLI's installation, and
 * `@keel/kernel` and `@keel/agent` are always the CLI's. Contract: its default export; throws
 * what the import threw.
 */
export async function importEvalFile(filepath: string): Promise<unknown> {
  const mod = (await importConfig(filepath)) as Record<string, unknown> | undefined;
  return mod && typeof mod === "object" && "default" in mod ? mod.default : mod;
}

async function importConfig(filepath: string): Promise<unknown> {
  if (nativeSafe(filepath)) {
    try {
      return await quietTypeless(filepath, () => import(pathToFileURL(filepath).href));
    } catch {
      // Syntax the runtime cannot strip, a syntax error or a failed import: jiti reports it with its location.
    }
  }
  return (await configJiti(filepath)).import<unknown>(filepath);
}

/**
 * A loaded script config crosses cosmiconfig in a box: cosmiconfig reads keys of what a loader
 * returns (`$import`), outside Keel's guard, so a Proxy or getter-laden config would throw
 * there, unlocated. Only `checked` opens the box.
 */
const boxes = new WeakMap<object, unknown>();
function box(value: unknown): unknown {
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return value;
  const b = {};
  boxes.set(b, value);
  return b;
}

async function jitiLoader(filepath: string): Promise<unknown> {
  return box(await loadScript(filepath));
}

async function loadScript(filepath: string): Promise<unknown> {
  let mod: unknown;
  try {
    mod = await importConfig(filepath);
  } catch (err) {
    // Whatever the file threw (`throw undefined` included) is located here, not in cosmiconfig.
    throw new KeelError(
      "KEEL_CONFIG_LOAD_FAILED",
      describeLoadError(err, filepath),
      { path: filepath },
      { cause: err },
    );
  }
  return defaultExport(mod, filepath);
}

/** The config a module exports: ESM `export default`, or CommonJS `module.exports` (which jiti also shows as `default`). */
function defaultExport(mod: unknown, filepath: string): unknown {
  try {
    const m = mod as Record<string, unknown>;
    if ("default" in m && (m.default !== undefined || !/\.c[jt]s$/.test(filepath)))
      return exportedConfig(m.default, filepath);
    if (/\.c[jt]s$/.test(filepath) && Object.keys(m).length) return exportedConfig(m, filepath);
    const named = Object.keys(m).filter((k) => k !== "__esModule");
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${filepath} has no default export${named.length ? ` (it exports ${named.join(", ")})` : ""}. Write \`export default defineConfig({ ... })\`.`,
      { path: "default export" },
    );
  } catch (err) {
    if (isKeelError(err)) throw err;
    throw new KeelError(
      "KEEL_CONFIG_READ_FAILED",
      `${filepath}: reading its exports threw: ${thrownText(err)}.`,
      { path: "default export" },
      { cause: err },
    );
  }
}

/** `value` when it can be a config; otherwise what it is, as a located error. */
function exportedConfig(value: unknown, filepath: string): unknown {
  const problem = notAConfig(value);
  if (problem)
    throw new KeelError("KEEL_CONFIG_INVALID", `${filepath}: the config file exports ${problem}.`, {
      path: "default export",
    });
  return value;
}

/** Why `v` cannot be a config (the default export), or undefined when it may be one. Contract: never throws. */
function notAConfig(v: unknown): string | undefined {
  const fix = "export an object from defineConfig({ ... })";
  if (v === null || v === undefined) return `${v}; ${fix}`;
  if (typeof v === "function") {
    if (v === agent.defineConfig) return "defineConfig itself; call it: export default defineConfig({ ... })";
    const name = attempt(() => String((v as { name?: unknown }).name ?? ""), "");
    return `a function${name && name !== "default" ? ` (${name})` : ""}, not a config (the CLI does not call it): ${fix}`;
  }
  if (typeof v !== "object")
    return `${typeof v === "string" ? `a string (${JSON.stringify(headOf(v, 40))})` : `a ${typeof v} (${attempt(() => String(v), "?")})`}; ${fix}`;
  if (attempt(() => typeof (v as { then?: unknown }).then === "function", false))
    return `a Promise; await inside the file instead: export default defineConfig(await …)`;
  if (attempt(() => Array.isArray(v), false)) return `an array; ${fix} (plugins go in its \`plugins: [...]\`)`;
  if (
    attempt(
      () =>
        typeof (v as { setup?: unknown }).setup === "function" && typeof (v as { name?: unknown }).name === "string",
      false,
    )
  )
    return `a plugin, not a config; put it in the plugins list: export default defineConfig({ plugins: [plugin] })`;
  return undefined;
}

/** How long loading the config may take. Contract: KEEL_CONFIG_TIMEOUT_MS when a positive number, else 10 000 ms. */
export function configLoadTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const ms = Number(env.KEEL_CONFIG_TIMEOUT_MS);
  return Number.isFinite(ms) && ms > 0 ? ms : 10_000;
}

/** `work`, or KEEL_CONFIG_LOAD_TIMEOUT naming `file` once `ms` pass (a top-level await that never settles, a FIFO). */
async function withDeadline<T>(work: Promise<T>, ms: number, file: () => string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new KeelError("KEEL_CONFIG_LOAD_TIMEOUT", `${file()} did not finish loading within ${ms} ms.`, {
            path: file(),
          }),
        ),
      ms,
    );
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Find (or, with `configPath`, load) the config, within `timeoutMs` (default: configLoadTimeoutMs()).
 * Contract: throws KeelError KEEL_CONFIG_NOT_FOUND, KEEL_CONFIG_LOAD_FAILED, KEEL_CONFIG_LOAD_TIMEOUT
 * or KEEL_CONFIG_INVALID (the file exports no config) naming the file.
 */
export async function loadConfig(options: {
  cwd: string;
  configPath?: string;
  timeoutMs?: number;
}): Promise<LoadedConfig> {
  const target = options.configPath ? resolve(options.cwd, options.configPath) : undefined;
  const ms = options.timeoutMs ?? configLoadTimeoutMs();
  const at = { file: target ?? options.cwd };
  return withDeadline(findConfig(options.cwd, options.configPath, target, ms, at), ms, () => at.file);
}

async function findConfig(
  cwd: string,
  configPath: string | undefined,
  target: string | undefined,
  ms: number,
  at: { file: string },
): Promise<LoadedConfig> {
  if (target && !existsSync(target))
    throw new KeelError("KEEL_CONFIG_NOT_FOUND", `--config ${configPath}: no such file (${target}).`, { path: target });
  if (target && attempt(() => statSync(target).isDirectory(), false)) {
    const inside = SEARCH_PLACES.find((f) => f !== "package.json" && existsSync(join(target, f)));
    throw new KeelError(
      "KEEL_CONFIG_NOT_FOUND",
      `--config ${configPath} is a folder, not a config file${inside ? `; did you mean --config ${join(configPath!, inside)}?` : "."}`,
      { path: target },
    );
  }
  if (target && attempt(() => !statSync(target).isFile(), false))
    throw new KeelError(
      "KEEL_CONFIG_NOT_FOUND",
      `--config ${configPath} is not a regular file (a FIFO, socket or device cannot be loaded).`,
      { path: target },
    );
  const importModule = (file: string) => withDeadline(importConfig(file), ms, () => file);
  if (target && /\.(m|c)?(t|j)s$/.test(target)) {
    // An explicit script config needs no discovery: load it the way cosmiconfig would, without loading cosmiconfig.
    try {
      return checked({ config: await loadScript(target), filepath: target }, importModule);
    } catch (err) {
      if (isKeelError(err)) throw err;
      throw new KeelError("KEEL_CONFIG_LOAD_FAILED", describeLoadError(err, target), { path: target }, { cause: err });
    }
  }
  if (!existsSync(cwd))
    throw new KeelError(
      "KEEL_CONFIG_NOT_FOUND",
      `The current folder ${cwd} no longer exists (was it removed?). Change to a folder that exists.`,
      { path: cwd },
    );
  if (!target) refuseSpecialFiles(cwd);
  const { cosmiconfig, defaultLoaders } = await import("cosmiconfig");
  // The file being loaded, so a deadline names it.
  const tracked =
    <A extends unknown[]>(load: (filepath: string, ...rest: A) => Promise<unknown>) =>
    (filepath: string, ...rest: A) => {
      at.file = filepath;
      return load(filepath, ...rest);
    };
  const jsonLoader = async (filepath: string, content: string) => {
    const value = await defaultLoaders[".json"](filepath, content);
    return filepath.endsWith("package.json") ? value : exportedConfig(value, filepath);
  };
  const explorer = cosmiconfig("keel", {
    searchPlaces: SEARCH_PLACES,
    searchStrategy: "project",
    cache: false,
    loaders: {
      ".ts": tracked(jitiLoader),
      ".mts": tracked(jitiLoader),
      ".cts": tracked(jitiLoader),
      ".js": tracked(jitiLoader),
      ".mjs": tracked(jitiLoader),
      ".cjs": tracked(jitiLoader),
      ".json": tracked(jsonLoader),
    },
  });
  let found: { config: unknown; filepath: string; isEmpty?: boolean } | null;
  try {
    found = target ? await explorer.load(target) : await explorer.search(cwd);
  } catch (err) {
    if (isKeelError(err)) throw err;
    throw new KeelError(
      "KEEL_CONFIG_LOAD_FAILED",
      describeLoadError(err, target),
      { path: fileOf(err) ?? target ?? cwd },
      { cause: err },
    );
  }
  if (!found)
    throw new KeelError("KEEL_CONFIG_NOT_FOUND", `Searched ${cwd} and its parents up to the project root.`, {
      path: cwd,
    });
  return checked(found, importModule);
}

/**
 * A FIFO, socket or device where discovery looks would block a read forever (and a process
 * cannot exit while a read is blocked), so it is refused before anything reads it.
 */
function refuseSpecialFiles(cwd: string): void {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    for (const place of SEARCH_PLACES) {
      const file = join(dir, place);
      const st = attempt(() => statSync(file), undefined);
      if (st && !st.isFile() && !st.isDirectory())
        throw new KeelError(
          "KEEL_CONFIG_LOAD_FAILED",
          `${file} is not a regular file (a FIFO, socket or device cannot be read as a config).`,
          { path: file },
        );
      // Discovery would skip an empty file and report "no config found"; say what it is instead.
      if (
        st?.isFile() &&
        place !== "package.json" &&
        st.size < 256 &&
        attempt(() => readFileSync(file, "utf8").trim() === "", false)
      ) {
        throw new KeelError(
          "KEEL_CONFIG_INVALID",
          `${file} is empty. Write \`export default defineConfig({ ... })\` in it, or delete it.`,
          { path: file },
        );
      }
    }
    if (existsSync(join(dir, "package.json")) || dirname(dir) === dir) return;
  }
}

function checked(
  found: { config: unknown; filepath: string; isEmpty?: boolean },
  importModule: (file: string) => Promise<unknown>,
): LoadedConfig {
  if (found.isEmpty)
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${found.filepath} is empty. Export the config as the default export (export default defineConfig({ ... })).`,
      { path: found.filepath },
    );
  const config =
    found.config !== null && typeof found.config === "object" && boxes.has(found.config)
      ? boxes.get(found.config)
      : found.config;
  exportedConfig(config, found.filepath);
  return { config, filepath: found.filepath, importModule };
}

function fileOf(err: unknown): string | undefined {
  const f = attempt(() => (err as { filepath?: unknown } | null)?.filepath, undefined);
  return typeof f === "string" ? f : undefined;
}

/** A load error's message with its location (file:line:column) when the error has one. Contract: never throws. */
function describeLoadError(err: unknown, target: string | undefined): string {
  const file = fileOf(err) ?? target;
  const msg =
    (err instanceof Error ? "" : "threw ") +
    thrownText(err)
      .split("\n")
      .filter((l) => !l.startsWith("Require stack") && !l.startsWith("- "))
      .slice(0, 6)
      .join("\n")
      .replace(file ? `JSON Error in ${file}:\n` : "\u0000", "")
      .trim();
  const loc = attempt(() => (err as { loc?: { line?: number; column?: number } } | null)?.loc, undefined);
  let at = loc?.line !== undefined ? ` (at line ${loc.line}, column ${(loc.column ?? 0) + 1})` : "";
  if (!at && file && !msg.includes(`${file}:`)) {
    // A file that threw: the topmost stack frame in it gives the line (jiti keeps lines, not columns).
    const stack = attempt(() => String((err as { stack?: unknown } | null)?.stack ?? ""), "").replaceAll(
      pathToFileURL(file).href,
      file,
    );
    const line = stack
      .split("\n")
      .find((l) => l.includes(`${file}:`))
      ?.split(`${file}:`)[1]
      ?.match(/^(\d+):\d+/)?.[1];
    if (line) at = ` (at ${file}:${line})`;
  }
  return `${file ? `${file}: ` : ""}${msg}${at}`;
}

/** The folder a config file lives in (plugins and scripts resolve relative to it). */
export function configDir(filepath: string): string {
  return dirname(filepath);
}
