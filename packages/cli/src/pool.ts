/**
 * The provider pool of a config (`models`): each member's providers, its tags, price and window,
 * for AgentOptions.pool. A routed member that fails over falls back to its own chain, then to the
 * config's `model` chain (fallback()). Under a harness (keel replay) every member is the harness's
 * provider under the member's name, so a replay routes (and records the route) as the run did.
 */
import { KeelError, errorMessage, isKeelError } from "@keel/kernel";
import type { KeelConfig, ModelEntry, ModelProvider, ModelSpec, PoolMember, PoolModelEntry } from "@keel/agent";

type Providers = typeof import("@keel/providers");

/** A member's specs, tags and overrides, from a string or an entry. */
function entryOf(v: string | PoolModelEntry): { specs: ModelSpec[]; entry: Omit<PoolModelEntry, "model"> } {
  if (typeof v === "string") return { specs: [v as ModelSpec], entry: {} };
  const { model, ...entry } = v;
  return { specs: Array.isArray(model) ? [...(model as ModelSpec[])] : [model as ModelSpec], entry };
}

function specOf(s: ModelSpec): string | undefined {
  if (typeof s === "string") return s;
  return typeof (s as ModelProvider).stream === "function" ? undefined : (s as ModelEntry).model;
}

/** `provider` under another id (the member's first model): its window and price kept, `stream` bound to it. */
function named(provider: ModelProvider, id: string): ModelProvider {
  return {
    id,
    ...(provider.contextWindow !== undefined ? { contextWindow: provider.contextWindow } : {}),
    ...(provider.price ? { price: provider.price } : {}),
    ...(provider.maxOutputTokens !== undefined ? { maxOutputTokens: provider.maxOutputTokens } : {}),
    stream: (request, options) => provider.stream(request, options),
  };
}

function member(provider: ModelProvider, entry: Omit<PoolModelEntry, "model">, first: ModelProvider): PoolMember {
  const price = entry.price ?? first.price;
  const contextWindow = entry.contextWindow ?? first.contextWindow;
  return {
    provider,
    tags: [...(entry.tags ?? [])],
    ...(price ? { price: { input: price.input, output: price.output } } : {}),
    ...(contextWindow !== undefined ? { contextWindow } : {}),
  };
}

/**
 * The pool of an online agent. Contract: undefined without `models`; a member that cannot be
 * resolved (a missing key, a bad spec) throws a KeelError located at `models.<name>`.
 */
export async function onlinePool(
  config: KeelConfig,
  defaults: readonly ModelProvider[],
  env: NodeJS.ProcessEnv,
  filepath: string,
): Promise<Record<string, PoolMember> | undefined> {
  if (!config.models) return undefined;
  const providers: Providers = await import("@keel/providers");
  // Entries, not assignment: a member named __proto__ is an own member, not the object's prototype.
  const pool: Array<[string, PoolMember]> = [];
  for (const [name, value] of Object.entries(config.models)) {
    const { specs, entry } = entryOf(value);
    const own = specs.map((s) => {
      const spec = specOf(s);
      if (spec === undefined) return s as ModelProvider;
      const { model: _m, ...settings } = typeof s === "string" ? { model: s } : (s as ModelEntry);
      try {
        return providers.resolveModel(spec, {
          env,
          ...(config.baseURL ? { baseURL: config.baseURL } : {}),
          ...settings,
          ...(entry.price ? { price: entry.price } : {}),
          ...(entry.contextWindow !== undefined ? { contextWindow: entry.contextWindow } : {}),
        });
      } catch (err) {
        throw new KeelError(
          isKeelError(err) ? err.code : "KEEL_MODEL_UNAVAILABLE",
          `${filepath}: models.${name}: ${isKeelError(err) ? err.problem : errorMessage(err)}`,
          { path: `models.${name}.model` },
          { cause: err },
        );
      }
    });
    const ids = new Set(own.map((p) => p.id));
    const chain = [...own, ...defaults.filter((p) => !ids.has(p.id))];
    const provider = chain.length === 1 ? chain[0]! : named(providers.fallback(chain), own[0]!.id);
    pool.push([name, member(provider, entry, own[0]!)]);
  }
  return Object.fromEntries(pool);
}

/** The pool under a harness: every member is `rig` under the member's first model id, with its configured or known price and window. */
export async function rigPool(config: KeelConfig, rig: ModelProvider): Promise<Record<string, PoolMember> | undefined> {
  if (!config.models) return undefined;
  const { knownContextWindow, knownMaxOutputTokens, knownPrice } = await import("@keel/providers");
  // Entries, not assignment: a member named __proto__ is an own member, not the object's prototype.
  const pool: Array<[string, PoolMember]> = [];
  for (const [name, value] of Object.entries(config.models)) {
    const { specs, entry } = entryOf(value);
    const first = specs[0]!;
    const spec = specOf(first);
    const model = spec?.slice(spec.indexOf(":") + 1) ?? "";
    // The ceiling the member's adapter would ask for, so a budget estimates as the run did.
    const ceiling = spec !== undefined ? knownMaxOutputTokens(spec) : undefined;
    const known: ModelProvider =
      spec === undefined
        ? (first as ModelProvider)
        : {
            id: spec,
            ...(knownPrice(model) ? { price: knownPrice(model)! } : {}),
            ...(knownContextWindow(model) !== undefined ? { contextWindow: knownContextWindow(model)! } : {}),
            ...(ceiling !== undefined ? { maxOutputTokens: ceiling } : {}),
            stream: (request, options) => rig.stream(request, options),
          };
    const served = named(rig, known.id);
    const out = known.maxOutputTokens;
    pool.push([name, member(out !== undefined ? { ...served, maxOutputTokens: out } : served, entry, known)]);
  }
  return Object.fromEntries(pool);
}
