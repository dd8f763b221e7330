/**
 * From a loaded config to a running agent: validate it, resolve plugins and models (offline
 * when no key is set), and create the agent. Every failure is a KeelError naming the file.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createAgent, KeelError, errorMessage, isKeelError, scriptedProvider } from "@keel/kernel";
import type { Agent, AgentOptions, KeelConfig, ModelProvider, ModelSpec, ProviderScriptInput, SessionStore } from "@keel/kernel";
import { ConfigSchema } from "./config-schema.ts";
import { configDir } from "./load-config.ts";
import type { LoadedConfig } from "./load-config.ts";
import { echoProvider } from "./echo-provider.ts";
import { resolvePlugins } from "./plugins.ts";

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
}

/** A built agent and how its model was chosen. */
export interface BuiltAgent {
  agent: Agent;
  config: KeelConfig;
  offline: boolean;
  modelIds: string[];
}

/** Validate `loaded.config`. Contract: throws KEEL_CONFIG_INVALID naming the file and the path. */
export function validateConfig(loaded: Pick<LoadedConfig, "config" | "filepath">): KeelConfig {
  const r = ConfigSchema.safeParse(loaded.config);
  if (r.success) return loaded.config as KeelConfig;
  const lines = r.error.issues.slice(0, 8).map((i) => `  ${formatPath(i.path)}: ${i.message}${found(loaded.config, i.path)}`);
  const first = r.error.issues[0]!;
  throw new KeelError("KEEL_CONFIG_INVALID", `${loaded.filepath}:\n${lines.join("\n")}\n`, { path: formatPath(first.path) });
}

/** `plugins[2].options.topK` from a zod path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || "(root)";
}

function found(root: unknown, path: readonly PropertyKey[]): string {
  let v: unknown = root;
  for (const p of path) v = v && typeof v === "object" ? (v as Record<PropertyKey, unknown>)[p] : undefined;
  if (v === undefined) return "";
  const shown = typeof v === "function" ? "a function" : typeof v === "string" ? JSON.stringify(v) : (() => { try { return JSON.stringify(v)?.slice(0, 80) ?? String(v); } catch { return String(v); } })();
  return ` (found ${shown})`;
}

/** The env var a model needs, or undefined when it is usable as configured. */
export function missingCredential(spec: string, env: NodeJS.ProcessEnv, baseURL: string | undefined): string | undefined {
  if (spec.startsWith("anthropic:")) return env.ANTHROPIC_API_KEY ? undefined : "ANTHROPIC_API_KEY";
  if (spec.startsWith("openai:")) return env.OPENAI_API_KEY || env.OPENAI_BASE_URL ? undefined : "OPENAI_API_KEY";
  if (spec.startsWith("openai-compatible:")) return baseURL || env.OPENAI_BASE_URL ? undefined : "OPENAI_BASE_URL";
  return undefined;
}

/** Build the agent a config describes. */
export async function buildAgent(loaded: LoadedConfig, options: BuildOptions = {}): Promise<BuiltAgent> {
  const env = options.env ?? process.env;
  const note = options.note ?? (() => {});
  const config = validateConfig(loaded);
  const dir = configDir(loaded.filepath);
  const plugins = await resolvePlugins(config.plugins ?? [], loaded.filepath, loaded.importModule);
  const specs: ModelSpec[] = config.model === undefined ? [] : Array.isArray(config.model) ? [...config.model] : [config.model as ModelSpec];
  const strings = specs.filter((s): s is string => typeof s === "string" && !s.startsWith("scripted:"));
  const missing = strings.map((s) => missingCredential(s, env, config.baseURL)).filter((m): m is string => !!m);
  const offline = options.offline === true || env.KEEL_OFFLINE === "1" || specs.length === 0 || specs.some((s) => typeof s === "string" && s.startsWith("scripted:")) || (strings.length > 0 && missing.length === strings.length);
  let provider: ModelProvider;
  let sideModel: ModelProvider | false | undefined;
  if (offline) {
    provider = offlineProvider(config, dir, loaded.filepath);
    sideModel = false; // a script answers the conversation only; plugins use their deterministic fallbacks
    const why = options.offline || env.KEEL_OFFLINE === "1" ? "offline mode was asked for" : missing.length ? `${[...new Set(missing)].join(" / ")} is not set` : "the config names no model";
    note(`keel: offline — ${why}; the model is ${provider.id}${typeof config.offline?.script === "string" ? ` replaying ${config.offline.script}` : ""}. Set the API key to use ${strings[0] ?? "a real model"}.`);
  } else {
    // Models whose key is missing are left out of the chain; the rest serve in order.
    provider = await onlineProvider(specs.filter((s) => typeof s !== "string" || !missingCredential(s, env, config.baseURL)), env, config.baseURL);
    if (config.sideModel !== undefined) sideModel = await onlineProvider([config.sideModel], env, config.baseURL);
    note(`keel: model ${provider.id}`);
  }
  const agentOptions: AgentOptions = {
    provider,
    ...(sideModel !== undefined ? { sideModel } : {}),
    ...(config.name !== undefined ? { name: config.name } : {}),
    ...(config.instructions !== undefined ? { instructions: config.instructions } : {}),
    plugins,
    ...(config.tools ? { tools: config.tools } : {}),
    ...(config.limits ? { limits: config.limits } : {}),
    ...(config.toolTimeouts ? { toolTimeouts: config.toolTimeouts } : {}),
    ...(config.requestOptions ? { requestOptions: config.requestOptions } : {}),
    ...(config.caps ? { caps: config.caps } : {}),
    ...(config.preflight !== undefined ? { preflight: config.preflight } : {}),
    ...(config.trace ? { trace: config.trace } : {}),
    ...(config.lease ? { lease: config.lease } : {}),
    ...(options.store ? { store: options.store } : {}),
    ...(config.approve ? { approve: config.approve } : {}),
    ...((options.home ?? config.home) !== undefined ? { home: resolve(dir, (options.home ?? config.home)!) } : {}),
  };
  try {
    const agent = await createAgent(agentOptions);
    return { agent, config, offline, modelIds: [provider.id] };
  } catch (err) {
    if (isKeelError(err)) throw new KeelError(err.code, `${loaded.filepath}: ${err.problem}`, err.location, { cause: err });
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
      input = JSON.parse(readFileSync(file, "utf8")) as ProviderScriptInput;
    } catch (err) {
      throw new KeelError("KEEL_CONFIG_INVALID", `${filepath}: offline.script "${script}" could not be read as JSON: ${errorMessage(err)}`, { path: "offline.script" }, { cause: err });
    }
  } else input = script;
  try {
    return scriptedProvider(input);
  } catch (err) {
    throw new KeelError("KEEL_CONFIG_INVALID", `${filepath}: offline.script: ${errorMessage(err)}`, { path: "offline.script" }, { cause: err });
  }
}

async function onlineProvider(specs: readonly ModelSpec[], env: NodeJS.ProcessEnv, baseURL: string | undefined): Promise<ModelProvider> {
  const providers = specs.some((s) => typeof s === "string") ? await import("@keel/providers") : undefined;
  const list = specs.map((s) => {
    if (typeof s !== "string") return s;
    try {
      return providers!.resolveModel(s, { env, ...(baseURL ? { baseURL } : {}) });
    } catch (err) {
      throw isKeelError(err) ? err : new KeelError("KEEL_MODEL_UNAVAILABLE", `"${s}": ${errorMessage(err)}`, { path: "model" }, { cause: err });
    }
  });
  if (list.length === 1) return list[0]!;
  return (providers ?? (await import("@keel/providers"))).fallback(list);
}
