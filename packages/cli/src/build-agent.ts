/**
 * From a loaded config to a running agent: validate it, resolve plugins and models (offline
 * when no key is set), and create the agent. Every failure is a KeelError naming the file.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { createAgent, defaultKeelHome, KeelError, errorMessage, isKeelError, maskCredentials } from "@keel/agent/node";
import { scriptedProvider } from "@keel/testkit";
import { defaultSessionDbPath } from "@keel/store-sqlite";
import { readRegularFile } from "@keel/safe-path";
import { headOf } from "@keel/text";
import type {
  Agent,
  AgentOptions,
  KeelConfig,
  ModelEntry,
  ModelName,
  ModelProvider,
  ModelSpec,
  KeelPlugin,
  SessionStore,
} from "@keel/agent";
import type { ProviderScriptInput } from "@keel/testkit";
import { ConfigSchema } from "./config-schema.ts";
import { configDir } from "./load-config.ts";
import type { LoadedConfig } from "./load-config.ts";
import { echoProvider } from "./echo-provider.ts";
import { resolvePlugins } from "./plugins.ts";
import { snapshotConfig } from "./config-snapshot.ts";
import { attempt, childPath, thrownText } from "./guard.ts";
import { pluginEntryHint } from "./plugin-hints.ts";
import { checkHome } from "./home.ts";
import { onlinePool, rigPool } from "./pool.ts";
import { chooseDatabase, postgresSessionStore } from "./database.ts";
import type { Database } from "./database.ts";

/** How the agent is built. */
export interface BuildOptions {
  env?: NodeJS.ProcessEnv;
  /** Force the offline model even when a key is set. */
  offline?: boolean;
  /** Overrides the config's home (KEEL_HOME is the default of both). */
  home?: string;
  /** Where offline/online notes go (stderr in the CLI). */
  note?: (line: string) => void;
  /** The session store (default: SQLite in the home); `keel inspect` passes an in-memory one. */
  store?: SessionStore;
  /**
   * Replaces the config's `model` (`keel --model`): spec strings, a fallback chain in order. A spec
   * the config also lists as `{ model, …settings }` keeps those settings.
   */
  model?: readonly string[];
  /**
   * Set `env.KEEL_HOME` to the chosen home before plugins set up, so plugins that keep their
   * databases under KEEL_HOME (memory, skills, the MCP audit, compaction) follow `home` and the
   * config's `home` too. The CLI sets it (its env is process.env).
   */
  shareHome?: boolean;
  /** Overrides the config's `recovery` (`keel worker` continues unfinished turns: "auto"). */
  recovery?: "auto" | "manual";
  /**
   * A harness (keel replay) supplies the model and approvals and adds plugins: the config's
   * model and side model are not used (no key is needed), everything else is the config's.
   */
  /** Plugins a command adds after the config's (keel eval's tool seam). */
  plugins?: readonly KeelPlugin[];
  rig?: {
    provider: ModelProvider;
    plugins: readonly KeelPlugin[];
    approve?: AgentOptions["approve"];
    childSessionId?: AgentOptions["childSessionId"];
  };
}

/** A built agent and how its model was chosen. */
export interface BuiltAgent {
  agent: Agent;
  config: KeelConfig;
  offline: boolean;
  modelIds: string[];
  /** The home folder the agent runs in (resolved). */
  home: string;
  /** True when the home held no session database before this agent was built (a first run there). */
  freshHome: boolean;
  /** Where the stores are: SQLite in the home, or PostgreSQL (config `store` or KEEL_DATABASE_URL). */
  database: Database;
}

/**
 * Snapshot `loaded.config` (every value read once, inside a guard) and validate the snapshot.
 * Contract: returns the snapshot; throws KEEL_CONFIG_INVALID or KEEL_CONFIG_READ_FAILED naming
 * the file and the path.
 */
export function validateConfig(loaded: Pick<LoadedConfig, "config" | "filepath">): KeelConfig {
  const config = snapshotConfig(loaded.config, loaded.filepath);
  let r: ReturnType<typeof ConfigSchema.safeParse>;
  try {
    r = ConfigSchema.safeParse(config);
  } catch (err) {
    throw new KeelError(
      "KEEL_CONFIG_READ_FAILED",
      `${loaded.filepath}: validating the config threw: ${thrownText(err)}.`,
      { path: "(root)" },
      { cause: err },
    );
  }
  if (r.success) {
    checkSerializable(config as KeelConfig, loaded.filepath);
    return config as KeelConfig;
  }
  const seen = new Set<string>();
  const issues = r.error.issues.flatMap((i) => {
    const hint =
      i.path[0] === "plugins" && typeof i.path[1] === "number"
        ? pluginEntryHint((config as KeelConfig).plugins?.[i.path[1]], formatPath(i.path.slice(0, 2)))
        : undefined;
    const path = hint ? formatPath(i.path.slice(0, 2)) : formatPath(i.path);
    const line = hint ? `  ${hint}` : `  ${path}: ${i.message}${found(config, i.path)}`;
    if (seen.has(line)) return [];
    seen.add(line);
    return [{ path, line }];
  });
  const lines = issues.slice(0, 8).map((i) => i.line);
  throw new KeelError("KEEL_CONFIG_INVALID", `${loaded.filepath}:\n${lines.join("\n")}\n`, { path: issues[0]!.path });
}

/** requestOptions go over the wire as JSON: a cycle or a BigInt there is a config error now, not a failed request later. */
function checkSerializable(config: KeelConfig, filepath: string): void {
  const bad = unserializable(config.requestOptions, "requestOptions", [], new WeakSet());
  if (bad)
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${filepath}: ${bad.path} ${bad.why}; requestOptions are sent as JSON.`,
      { path: bad.path },
    );
  if (expanded(config.requestOptions, new Map()) > MAX_JSON_VALUES) {
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${filepath}: requestOptions would be more than ${MAX_JSON_VALUES} values as JSON (a value shared many times over); requestOptions are sent as JSON.`,
      { path: "requestOptions" },
    );
  }
}

const MAX_JSON_VALUES = 1_000_000;

/** How many values `v` (acyclic) becomes as JSON, where a shared value counts each time it appears. */
function expanded(v: unknown, memo: Map<object, number>): number {
  if (!v || typeof v !== "object") return 1;
  const known = memo.get(v);
  if (known !== undefined) return known;
  let n = 1;
  for (const x of Object.values(v)) if ((n += expanded(x, memo)) > MAX_JSON_VALUES) break;
  memo.set(v, n);
  return n;
}

/** The first value JSON cannot carry; `clean` holds values already checked (a shared value is walked once). */
function unserializable(
  v: unknown,
  path: string,
  ancestors: object[],
  clean: WeakSet<object>,
): { path: string; why: string } | undefined {
  if (typeof v === "bigint") return { path, why: "is a BigInt" };
  if (!v || typeof v !== "object" || clean.has(v)) return undefined;
  if (ancestors.includes(v)) return { path, why: "refers back to an enclosing value (a circular structure)" };
  const inner = [...ancestors, v];
  const entries = Array.isArray(v) ? v.map((x, i) => [i, x] as const) : Object.entries(v);
  for (const [k, x] of entries) {
    const bad = unserializable(x, childPath(path, k), inner, clean);
    if (bad) return bad;
  }
  clean.add(v);
  return undefined;
}

/** `plugins[2].options.topK` from a zod path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || "(root)";
}

function found(root: unknown, path: readonly PropertyKey[]): string {
  let v: unknown = root;
  for (const p of path)
    v = v && typeof v === "object" ? attempt(() => (v as Record<PropertyKey, unknown>)[p], undefined) : undefined;
  if (v === undefined) return "";
  const shown =
    typeof v === "function"
      ? "a function"
      : typeof v === "string"
        ? JSON.stringify(maskCredentials(v))
        : (attempt(() => {
            const j = JSON.stringify(v);
            return j === undefined ? String(v) : headOf(j, 80);
          }, undefined) ?? (Array.isArray(v) ? "an array" : "an object that is not JSON (circular?)"));
  return ` (found ${shown})`;
}

/** The env var a model needs, or undefined when it is usable as configured. */
export function missingCredential(
  spec: string,
  env: NodeJS.ProcessEnv,
  baseURL: string | undefined,
): string | undefined {
  if (spec.startsWith("anthropic:")) return env.ANTHROPIC_API_KEY ? undefined : "ANTHROPIC_API_KEY";
  if (spec.startsWith("openai:")) return env.OPENAI_API_KEY || env.OPENAI_BASE_URL ? undefined : "OPENAI_API_KEY";
  if (spec.startsWith("openai-compatible:")) return baseURL || env.OPENAI_BASE_URL ? undefined : "OPENAI_BASE_URL";
  return undefined;
}

/** The SDK package serving `spec` when it is not installed where @keel/providers imports it; else undefined. */
async function missingSdk(spec: string): Promise<string | undefined> {
  const { PROVIDER_SDKS, sdkInstalled } = await import("@keel/providers");
  const kind = spec.slice(0, spec.indexOf(":"));
  const sdk = Object.hasOwn(PROVIDER_SDKS, kind) ? PROVIDER_SDKS[kind as keyof typeof PROVIDER_SDKS] : undefined;
  return sdk && !sdkInstalled(sdk) ? sdk : undefined;
}

/** Build the agent a config describes. */
export async function buildAgent(loaded: LoadedConfig, options: BuildOptions = {}): Promise<BuiltAgent> {
  const env = options.env ?? process.env;
  const note = options.note ?? (() => {});
  const config = validateConfig(loaded);
  const dir = configDir(loaded.filepath);
  const home = options.home ?? config.home;
  if (home !== undefined)
    checkHome(resolve(dir, home), options.home !== undefined ? "--home" : `${loaded.filepath}: home`);
  else checkHome(defaultKeelHome(env), env.KEEL_HOME ? "KEEL_HOME" : "the default home");
  const database = chooseDatabase(config, env, loaded.filepath);
  const plugins = await resolvePlugins(config.plugins ?? [], loaded.filepath, loaded.importModule);
  const configured: ModelSpec[] =
    config.model === undefined ? [] : Array.isArray(config.model) ? [...config.model] : [config.model as ModelSpec];
  const specs: ModelSpec[] = options.model
    ? options.model.map((m) => configured.find((c) => typeof c === "object" && specString(c) === m) ?? (m as ModelName))
    : configured;
  const strings = specs.map(specString).filter((s): s is string => s !== undefined && !s.startsWith("scripted:"));
  const missing = strings.map((s) => missingCredential(s, env, config.baseURL)).filter((m): m is string => !!m);
  const offline =
    options.offline === true ||
    env.KEEL_OFFLINE === "1" ||
    specs.length === 0 ||
    specs.some((s) => specString(s)?.startsWith("scripted:")) ||
    (strings.length > 0 && missing.length === strings.length);
  let provider: ModelProvider;
  let sideModel: ModelProvider | false | undefined;
  let pool: AgentOptions["pool"];
  if (options.rig) {
    provider = options.rig.provider;
    // A log written before manifests held the window: the one the config's model has (the
    // context ceiling and compaction go by it), so the replay trips and compacts as recorded.
    if (provider.contextWindow === undefined) {
      const window = await configuredWindow(specs, config, dir, loaded.filepath);
      if (window) provider = { ...provider, contextWindow: window };
    }
    sideModel = false; // the recording holds no side-model answers: plugins use their deterministic fallbacks
    pool = await rigPool(config, provider);
  } else if (offline) {
    provider = offlineProvider(config, dir, loaded.filepath);
    sideModel = false; // a script answers the conversation only; plugins use their deterministic fallbacks
    const why =
      options.offline || env.KEEL_OFFLINE === "1"
        ? "offline mode was asked for"
        : missing.length
          ? `${[...new Set(missing)].join(" / ")} is not set`
          : "the config names no model";
    // The SDK is the project's to install: say so with the key, so the first online run is not a refusal.
    const sdk = strings[0] !== undefined ? await missingSdk(strings[0]) : undefined;
    note(
      `keel: offline — ${why}; the model is ${provider.id}${typeof config.offline?.script === "string" ? ` replaying ${config.offline.script}` : ""}. ${sdk ? `Install its SDK (npm install ${sdk}) and set the API key` : "Set the API key"} to use ${strings[0] ?? "a real model"}.`,
    );
  } else {
    // Models whose key is missing are left out of the chain; the rest serve in order.
    const chain = await onlineProviders(
      specs.filter((s) => specString(s) === undefined || !missingCredential(specString(s)!, env, config.baseURL)),
      env,
      config.baseURL,
      { filepath: loaded.filepath, path: "model" },
    );
    provider = chain.length === 1 ? chain[0]! : (await import("@keel/providers")).fallback(chain);
    pool = await onlinePool(config, chain, env, loaded.filepath);
    if (config.sideModel !== undefined)
      sideModel = await onlineProvider([config.sideModel], env, config.baseURL, {
        filepath: loaded.filepath,
        path: "sideModel",
      });
    note(`keel: model ${provider.id}${pool ? `; pool ${Object.keys(pool).join(", ")}` : ""}`);
  }
  if (database.kind === "postgres") note(`keel: stores on ${database.shown} (${database.source})`);
  const agentOptions: AgentOptions = {
    provider,
    ...(pool ? { pool } : {}),
    ...(sideModel !== undefined ? { sideModel } : {}),
    ...(config.name !== undefined ? { name: config.name } : {}),
    ...(config.description !== undefined ? { description: config.description } : {}),
    ...(config.instructions !== undefined ? { instructions: config.instructions } : {}),
    plugins: [...plugins, ...(options.plugins ?? []), ...(options.rig?.plugins ?? [])],
    ...(config.tools ? { tools: config.tools } : {}),
    ...(config.limits ? { limits: config.limits } : {}),
    ...(config.toolTimeouts ? { toolTimeouts: config.toolTimeouts } : {}),
    ...(config.requestOptions ? { requestOptions: config.requestOptions } : {}),
    ...(config.caps ? { caps: config.caps } : {}),
    ...(config.preflight !== undefined ? { preflight: config.preflight } : {}),
    ...(config.trace ? { trace: config.trace } : {}),
    ...(config.setupTimeoutMs !== undefined ? { setupTimeoutMs: config.setupTimeoutMs } : {}),
    ...(config.lease ? { lease: config.lease } : {}),
    // Always said outright: what the config chose wins over KEEL_DATABASE_URL, which createAgent would read otherwise.
    store: options.store ?? (database.kind === "postgres" ? postgresSessionStore(database) : "sqlite"),
    // A rig without approve() (its recording paused for approvals) pauses too: not the config's callback.
    ...(options.rig
      ? options.rig.approve
        ? { approve: options.rig.approve }
        : {}
      : config.approve
        ? { approve: config.approve }
        : {}),
    ...(options.rig?.childSessionId ? { childSessionId: options.rig.childSessionId } : {}),
    ...(config.observers ? { observers: config.observers } : {}),
    ...(config.mode ? { mode: config.mode } : {}),
    ...(options.recovery || config.recovery ? { recovery: options.recovery ?? config.recovery } : {}),
    home: resolve(home !== undefined ? resolve(dir, home) : defaultKeelHome(env)),
  };
  const homeDir = agentOptions.home!;
  const freshHome = !options.store && database.kind === "sqlite" && !existsSync(defaultSessionDbPath(homeDir));
  // Processes keel starts (MCP servers, tools) see the home it uses.
  if (options.shareHome) env.KEEL_HOME = homeDir;
  try {
    const agent = await createAgent(agentOptions);
    return {
      agent,
      config: options.model ? { ...config, model: specs.length === 1 ? specs[0]! : specs } : config,
      offline,
      modelIds: [provider.id],
      home: homeDir,
      freshHome,
      database,
    };
  } catch (err) {
    if (isKeelError(err))
      throw new KeelError(err.code, `${loaded.filepath}: ${err.problem}`, err.location, { cause: err });
    throw new KeelError("KEEL_CONFIG_INVALID", `${loaded.filepath}: ${errorMessage(err)}`, {}, { cause: err });
  }
}

function offlineProvider(config: KeelConfig, dir: string, filepath: string): ModelProvider {
  const script = config.offline?.script;
  if (script === undefined) return echoProvider();
  let input: ProviderScriptInput;
  if (typeof script === "string") {
    const file = resolve(dir, script);
    try {
      // Never waited on: a FIFO or a device named as the script is refused, not read.
      input = JSON.parse(readRegularFile(file).toString("utf8")) as ProviderScriptInput;
    } catch (err) {
      throw new KeelError(
        "KEEL_CONFIG_INVALID",
        `${filepath}: offline.script "${script}" could not be read as JSON: ${errorMessage(err)}`,
        { path: "offline.script" },
        { cause: err },
      );
    }
  } else input = script as ProviderScriptInput;
  try {
    return scriptedProvider(input);
  } catch (err) {
    throw new KeelError(
      "KEEL_CONFIG_INVALID",
      `${filepath}: offline.script: ${errorMessage(err)}`,
      { path: "offline.script" },
      { cause: err },
    );
  }
}

/** The spec string of a model given by string or as `{ model, …settings }`; undefined for a provider object. */
function specString(s: ModelSpec): string | undefined {
  if (typeof s === "string") return s;
  return typeof (s as ModelProvider).stream === "function" ? undefined : (s as ModelEntry).model;
}

/** The context window of the model the config names (no key needed), or of its offline script. */
async function configuredWindow(
  specs: readonly ModelSpec[],
  config: KeelConfig,
  dir: string,
  filepath: string,
): Promise<number | undefined> {
  const named = specs.filter((s) => specString(s) === undefined || !specString(s)!.startsWith("scripted:"));
  if (!named.length) return offlineProvider(config, dir, filepath).contextWindow;
  const { knownContextWindow } = await import("@keel/providers");
  const windows = named.map((s) => {
    const spec = specString(s);
    if (spec === undefined) return (s as ModelProvider).contextWindow;
    const colon = spec.indexOf(":");
    const kind = spec.slice(0, colon);
    return kind === "anthropic" || kind === "openai" ? knownContextWindow(spec.slice(colon + 1)) : undefined;
  });
  const known = windows.filter((w): w is number => typeof w === "number" && w > 0);
  // A chain is only as wide as its narrowest member (as fallback() reports it).
  return known.length ? Math.min(...known) : undefined;
}

async function onlineProvider(
  specs: readonly ModelSpec[],
  env: NodeJS.ProcessEnv,
  baseURL: string | undefined,
  at: ConfigPlace,
): Promise<ModelProvider> {
  const list = await onlineProviders(specs, env, baseURL, at);
  if (list.length === 1) return list[0]!;
  return (await import("@keel/providers")).fallback(list);
}

/** Where in which config file a model is named, for the errors resolving it. */
interface ConfigPlace {
  filepath: string;
  path: string;
}

async function onlineProviders(
  specs: readonly ModelSpec[],
  env: NodeJS.ProcessEnv,
  baseURL: string | undefined,
  at: ConfigPlace,
): Promise<ModelProvider[]> {
  const providers = specs.some((s) => specString(s) !== undefined) ? await import("@keel/providers") : undefined;
  const list = specs.map((s) => {
    const spec = specString(s);
    if (spec === undefined) return s as ModelProvider;
    const { model: _model, ...settings } = typeof s === "string" ? { model: s } : (s as ModelEntry);
    try {
      return providers!.resolveModel(spec, { env, ...(baseURL ? { baseURL } : {}), ...settings });
    } catch (err) {
      // Located at the config: a missing SDK or key is fixed in (or beside) the file that names the model.
      throw isKeelError(err)
        ? new KeelError(err.code, `${at.filepath}: ${err.problem}`, { path: at.path }, { cause: err })
        : new KeelError(
            "KEEL_MODEL_UNAVAILABLE",
            `${at.filepath}: "${spec}": ${errorMessage(err)}`,
            { path: at.path },
            { cause: err },
          );
    }
  });
  return list;
}
