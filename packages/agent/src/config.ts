/**
 * The shape of `agent.config.ts`: what a team declares, which the `keel` command turns into
 * an agent. `defineConfig` only gives types; validation happens where the config is loaded.
 */
import type { AgentOptions } from "./agent-options.ts";
import type { PluginEntry } from "@keel/kernel";
import { defineConfig as identityConfig } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import type { ToolDefinition } from "@keel/kernel";

/** A provider script as a config holds it: `{ steps }` (with `model`, `contextWindow`) or a bare array of steps. */
export type OfflineScript =
  | readonly Record<string, unknown>[]
  | { steps: readonly Record<string, unknown>[]; model?: string; contextWindow?: number };

/** Models the editor completes. Contract: suggestions only; any `<provider>:<model>` is accepted. */
export type KnownModelName =
  | "anthropic:claude-sonnet-4-6"
  | "anthropic:claude-opus-4-5"
  | "anthropic:claude-haiku-4-5"
  | "openai:gpt-5"
  | "openai:gpt-5-mini"
  | "openai:gpt-4.1"
  | "openai:gpt-4.1-mini"
  | "openai:gpt-4o"
  | "openai:gpt-4o-mini";

/**
 * A model string: `anthropic:<model>`, `openai:<model>` or `openai-compatible:<model>`.
 * Contract: a misspelt provider prefix is a type error; a new model name of a known provider is fine.
 */
export type ModelName = KnownModelName | `anthropic:${string}` | `openai:${string}` | `openai-compatible:${string}`;

/**
 * A model: a model string (`openai-compatible:` with `baseURL` or OPENAI_BASE_URL), the same
 * with per-model settings (ModelEntry), or a ModelProvider object.
 */
export type ModelSpec = ModelName | ModelEntry | ModelProvider;

/**
 * A model named by its spec, with settings of its own (timeouts, retries).
 * Contract: unset fields keep the provider's defaults (first byte 120 s, idle 60 s — 300 s both
 * for OpenAI reasoning models —, retry-after cap 30 s); 0 turns a timeout off.
 */
export interface ModelEntry {
  /** `anthropic:<model>`, `openai:<model>` or `openai-compatible:<model>`. */
  model: ModelName;
  /** A started stream silent this long is cut (`timeout`) and retried. Default 60,000. */
  idleTimeoutMs?: number;
  /** From the request to its first stream event; past it the request is cut (`timeout`). Default 120,000. */
  firstByteTimeoutMs?: number;
  /** Longest retry-after (429/5xx) honoured; beyond it the error is raised at once (a chain fails over). Default 30,000. */
  maxRetryAfterMs?: number;
  /** SDK retries before the stream starts. Default 2. */
  maxRetries?: number;
  /** Retries of a stream that failed after it started. Default 2. */
  streamRetries?: number;
}

/**
 * A member of the provider pool (config `models`): a model (or its own fallback chain) with the
 * tags a router matches. Contract: `price` (USD per million tokens) and `contextWindow` default
 * to the known tables of @keel/providers; a routed member that fails over falls back to its own
 * chain, then to the config's `model`.
 */
export interface PoolModelEntry {
  model: ModelSpec | readonly ModelSpec[];
  /** e.g. `cheap`, `fast`, `strong`, and the capabilities `tools`, `images`, `reasoning`. */
  tags?: readonly string[];
  price?: { input: number; output: number };
  contextWindow?: number;
}

/**
 * One entry of `plugins`. Contract: a plugin object (or a factory's result), a package name,
 * `[packageName, options]`, or a falsy value, which is ignored (`cond && plugin()`).
 */
export type PluginSpec = PluginEntry | string | readonly [string, unknown?];

/**
 * An agent's configuration.
 * Contract: every field is optional; `model` may list several models (a fallback chain);
 * without an API key the agent runs offline on `offline.script` (or an echo model).
 */
export interface KeelConfig {
  name?: string;
  /** What the agent does, in a line: what `keel serve` publishes (A2A card, MCP server); never taken from `instructions`. */
  description?: string;
  model?: ModelSpec | readonly ModelSpec[];
  /**
   * The provider pool a router plugin (@keel/plugin-router) routes rounds across, by name: a
   * model string or a PoolModelEntry with tags. `model` stays the default (what serves a round
   * no plugin routed).
   */
  models?: Readonly<Record<string, ModelName | PoolModelEntry>>;
  /** The model plugins use for side calls (extraction, summaries); default: `model`. */
  sideModel?: ModelSpec;
  /** Base URL for an OpenAI-compatible server (Ollama, vLLM, llama.cpp). */
  baseURL?: string;
  instructions?: string;
  plugins?: readonly PluginSpec[];
  tools?: readonly ToolDefinition[];
  limits?: AgentOptions["limits"];
  toolTimeouts?: AgentOptions["toolTimeouts"];
  requestOptions?: AgentOptions["requestOptions"];
  caps?: AgentOptions["caps"];
  preflight?: boolean | { timeoutMs?: number; maxTokens?: number; maxReveal?: number };
  trace?: AgentOptions["trace"];
  /** Deadline of each plugin's setup(ctx), ms. Default 10,000. */
  setupTimeoutMs?: AgentOptions["setupTimeoutMs"];
  /** Session leases: `ttlMs` (default 30 s) and `waitMs` (default 0: a held session is refused at once). */
  lease?: AgentOptions["lease"];
  /** Where sessions, memory and skills live; default KEEL_HOME or ~/.keel. */
  home?: string;
  /**
   * Where every store lives: "sqlite" (files in `home`, the default) or a PostgreSQL URL
   * (`postgres://user:password@host:5432/db`) shared by many instances. Default:
   * KEEL_DATABASE_URL, else "sqlite". Tables go in KEEL_DATABASE_SCHEMA (default public).
   */
  store?: "sqlite" | `postgres://${string}` | `postgresql://${string}`;
  approve?: AgentOptions["approve"];
  /** How new sessions run: "agent" (default: tools) or "chat" (no tools); a session's own switch (session.setMode, keel --mode) wins. */
  mode?: AgentOptions["mode"];
  /** What happens to a turn a stopped process left unfinished: `manual` (default) or `auto` (AgentOptions.recovery). */
  recovery?: AgentOptions["recovery"];
  /** Watchers of the agent's events, e.g. `otel()` from @keel/otel (OpenTelemetry spans); falsy entries are ignored. */
  observers?: AgentOptions["observers"];
  /**
   * The offline model: a provider script (inline, or a JSON file path relative to the config).
   * Its steps are checked where the config is loaded (@keel/testkit's `parseProviderScript`,
   * with the path of a bad field), so the host does not depend on the test kit for its shape.
   */
  offline?: { script?: OfflineScript | string };
}

/**
 * Keys of `C` that KeelConfig (or one of its nested objects) does not have, mapped to `never`,
 * so a mistyped key is a type error at that key even though defineConfig is generic.
 */
type NoExtraKeys<C, Shape> = C extends object
  ? {
      [K in keyof C]: K extends "model" | "sideModel"
        ? CheckModels<C[K]>
        : K extends keyof Shape
          ? NoExtraNested<C[K], Shape[K]>
          : never;
    }
  : C;
/** A nested plain object (limits, lease, preflight, offline) is checked against its object shape; arrays and functions are left alone. */
type NoExtraNested<V, S> = V extends readonly unknown[] | ((...args: never[]) => unknown)
  ? V
  : V extends object
    ? [Extract<NonNullable<S>, Record<string, unknown>>] extends [never]
      ? V
      : NoExtraKeys<V, Extract<NonNullable<S>, Record<string, unknown>>>
    : V;
/** A model entry object is checked against ModelEntry; a provider object (with `stream`) and a string pass. */
type CheckModel<V> = V extends string | { stream: unknown } ? V : V extends object ? NoExtraKeys<V, ModelEntry> : V;
type CheckModels<V> = V extends readonly unknown[] ? { [I in keyof V]: CheckModel<V[I]> } : CheckModel<V>;

/**
 * Identity function that types an `agent.config.ts`.
 * Contract: returns its argument unchanged; an unknown key (top level, `limits`, `lease`, …) is a type error.
 */
export const defineConfig: <const C extends KeelConfig>(config: C & NoExtraKeys<C, KeelConfig>) => C =
  identityConfig as never;
