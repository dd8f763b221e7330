/**
 * The plugin registry: checks every plugin's metadata in one place before any plugin runs,
 * runs the setups, resolves the order of every phase's subscriptions, and freezes.
 */
import type { Contribution } from "./contributions.ts";
import { validateContribution } from "./contributions.ts";
import { trackAbandoned } from "./abandoned.ts";
import { errorMessage, isKeelError, KeelError } from "./errors.ts";
import type { AwaitPolicy, FailurePolicy, PhaseName } from "./phases.ts";
import { isPhaseName, PHASE_NAMES, PHASES } from "./phases.ts";
import type { Handler, JobRunner, KeelPlugin, PluginEntry, Stage, SubscribeOptions } from "./plugin.ts";
import { satisfies, validRange } from "./semver.ts";
import { truncate } from "./text.ts";
import { inFaultScope } from "./fault-scope.ts";
import { didYouMean } from "./suggest.ts";
import type { AgentStorage } from "./session-store.ts";

/** The kernel's version; plugins' `kernel` ranges are checked against it. */
export const KERNEL_VERSION = "1.0.0";

/** Default deadline (ms) of one plugin's setup(ctx). */
export const DEFAULT_SETUP_TIMEOUT_MS = 10_000;

/** Options of buildRegistry. */
export interface RegistryOptions extends RegistryHooks {
  /** Deadline of each setup(ctx), ms. Default DEFAULT_SETUP_TIMEOUT_MS. */
  setupTimeoutMs?: number;
  /** Where the agent keeps its data (PluginSetupContext.storage). Default: no home (the host sets it: createAgent does) and SQLite. */
  storage?: AgentStorage;
}

/** Default timeouts (ms) by await policy. */
export const DEFAULT_TIMEOUTS: Record<AwaitPolicy, number> = { blocking: 30_000, deadline: 1_000, background: 180_000 };

const STAGE_RANK: Record<Stage, number> = { pre: 0, normal: 1, post: 2, final: 3 };
const AWAITS = new Set<AwaitPolicy>(["blocking", "deadline", "background"]);
const FAILURES = new Set<FailurePolicy>(["best_effort", "required", "fallback", "fail_closed"]);

/**
 * One resolved subscription.
 * Contract: immutable after the registry is built; `position` is its index in its phase's
 * order; `waitFor` lists positions it must wait for (its `after`/`before` edges).
 */
export interface Subscription {
  readonly id: string;
  readonly plugin: string;
  readonly phase: PhaseName;
  readonly handler: Handler<any>;
  readonly stage: Stage;
  readonly priority: number;
  readonly after: readonly string[];
  readonly before: readonly string[];
  readonly await: AwaitPolicy;
  readonly timeoutMs: number;
  readonly failure: FailurePolicy;
  readonly fallback: readonly Contribution[];
  readonly position: number;
  readonly waitFor: readonly number[];
}

/** A registered plugin. */
export interface RegisteredPlugin {
  readonly name: string;
  readonly version: string;
  readonly kernel: string | undefined;
  readonly dependencies: Readonly<Record<string, string>>;
  readonly options: unknown;
}

/** The frozen result of registration. Contract: never changes after `buildRegistry` resolves. */
export interface PluginRegistry {
  readonly kernelVersion: string;
  readonly plugins: readonly RegisteredPlugin[];
  readonly phases: ReadonlyMap<PhaseName, readonly Subscription[]>;
  /** Durable job runners by `jobKey(plugin, name)` (PluginSetupContext.registerJob). */
  readonly jobs: ReadonlyMap<string, JobRunner>;
}

/** The key of a plugin's job runner in `PluginRegistry.jobs`. */
export function jobKey(plugin: string, name: string): string {
  return `${plugin}\u0000${name}`;
}

/** How registration reports misuse that happens after setup. Contract: a late call never throws into its caller. */
export interface RegistryHooks {
  /**
   * Called for ctx.on / ctx.registerJob after setup (e.g. from a timer): the call is ignored
   * and reported here as KEEL_REGISTRY_FROZEN instead of throwing into the caller's timer.
   */
  report?(err: KeelError): void;
}

type Draft = Omit<Subscription, "position" | "waitFor"> & { order: number[] };

/**
 * Validate plugins, run their setups in dependency order and resolve subscription order.
 * Contract: throws a KeelError (registration codes of errors.ts) naming the plugin and what
 * to fix; never runs a setup when any plugin's metadata is invalid; a setup that has not
 * settled within `setupTimeoutMs` fails with KEEL_PLUGIN_SETUP_TIMEOUT (its `ctx.signal` aborts,
 * and its later `ctx.on` calls throw).
 */
export async function buildRegistry(
  entries: readonly PluginEntry[],
  kernelVersion = KERNEL_VERSION,
  options: RegistryOptions = {},
): Promise<PluginRegistry> {
  const setupMs = options.setupTimeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS;
  const storage: AgentStorage = Object.freeze(options.storage ?? { home: "", database: { kind: "sqlite" } });
  const hooks: RegistryHooks = options;
  const plugins = checkPlugins(entries, kernelVersion);
  const names = new Set(plugins.map((p) => p.plugin.name));
  const drafts: Draft[] = [];
  const jobs = new Map<string, JobRunner>();
  /** A late call must not throw (it usually runs in a timer, where a throw kills the process). */
  const late = (err: KeelError): void => {
    try {
      hooks.report?.(err);
    } catch {
      // The host's reporter failed; the call is ignored either way.
    }
  };
  const shared: SetupShared = { storage, kernelVersion, names, drafts, jobs, late };
  for (const checked of setupOrder(plugins)) await runSetup(shared, checked, setupMs);
  const phases = new Map<PhaseName, readonly Subscription[]>();
  for (const phase of PHASE_NAMES) {
    const subs = resolveOrder(
      phase,
      drafts.filter((d) => d.phase === phase),
      names,
    );
    if (subs.length) phases.set(phase, subs);
  }
  return Object.freeze({
    kernelVersion,
    plugins: Object.freeze(
      plugins.map(({ plugin, options }) =>
        Object.freeze({
          name: plugin.name,
          version: plugin.version,
          kernel: plugin.kernel,
          dependencies: deps(plugin),
          options,
        }),
      ),
    ),
    phases,
    jobs,
  });
}

/** What every plugin's setup shares: the subscriptions and job runners collected so far. */
interface SetupShared {
  storage: AgentStorage;
  kernelVersion: string;
  names: Set<string>;
  drafts: Draft[];
  jobs: Map<string, JobRunner>;
  late(err: KeelError): void;
}

/**
 * Run one plugin's setup under its deadline, in a fault scope naming it. Contract: its `ctx`
 * accepts calls only until this returns; a later call is reported through `late`, not thrown.
 */
async function runSetup(shared: SetupShared, checked: Checked, setupMs: number): Promise<void> {
  const { plugin, index } = checked;
  const deadline = new AbortController();
  let active = true;
  const ctx = setupContext(shared, checked, deadline.signal, () => active);
  // A ref'd timer: it also keeps the process alive while a setup waits on nothing at all.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new KeelError("KEEL_PLUGIN_SETUP_TIMEOUT", `setup() did not settle within ${setupMs} ms.`, {
        plugin: plugin.name,
        path: `plugins[${index}]`,
      });
      deadline.abort(err);
      reject(err);
    }, setupMs);
  });
  try {
    const setup = Promise.resolve().then(() =>
      inFaultScope(
        () => ({ plugin: plugin.name, phase: "setup" }),
        () => plugin.setup(ctx),
      ),
    );
    await Promise.race([setup, timedOut]).catch((err: unknown) => {
      if (isKeelError(err, "KEEL_PLUGIN_SETUP_TIMEOUT")) trackAbandoned(`setup of plugin ${plugin.name}`, setup);
      throw err;
    });
  } catch (err) {
    if (isKeelError(err)) throw err;
    throw new KeelError(
      "KEEL_PLUGIN_SETUP_FAILED",
      `setup() threw: ${errorMessage(err)}.`,
      { plugin: plugin.name, path: `plugins[${index}]` },
      { cause: err },
    );
  } finally {
    clearTimeout(timer);
    active = false;
  }
}

/** The `ctx` a plugin's setup receives: subscribe, register job runners, while `open()`. */
function setupContext(shared: SetupShared, checked: Checked, signal: AbortSignal, open: () => boolean) {
  const { plugin, index, options } = checked;
  const { storage, kernelVersion, names, drafts, jobs, late } = shared;
  const seen = new Set<string>();
  let local = 0;
  const frozenError = (call: string, ignored: string, extra: { phase?: string } = {}) =>
    new KeelError("KEEL_REGISTRY_FROZEN", `${call} was called after setup finished; the ${ignored} was ignored.`, {
      plugin: plugin.name,
      ...extra,
    });
  return {
    plugin: plugin.name,
    storage,
    signal,
    options,
    kernelVersion,
    hasPlugin: (name: string) => names.has(name),
    on<P extends PhaseName>(phase: P, handler: Handler<P>, opts: SubscribeOptions<P> = {}) {
      if (!open()) return late(frozenError(`ctx.on("${String(phase)}")`, "subscription", { phase: String(phase) }));
      const draft = subscription(plugin.name, phase, handler, opts, [index, local++]);
      if (seen.has(draft.id))
        throw new KeelError("KEEL_SUBSCRIPTION_DUPLICATE", `Subscription "${draft.id}" is declared twice.`, {
          plugin: plugin.name,
          phase,
          subscription: draft.id,
        });
      seen.add(draft.id);
      drafts.push(draft);
    },
    registerJob(name: string, runner: JobRunner) {
      if (!open()) return late(frozenError(`ctx.registerJob("${String(name)}")`, "runner"));
      if (typeof name !== "string" || !name || name.length > 100 || typeof runner !== "function")
        throw new KeelError(
          "KEEL_SUBSCRIPTION_INVALID",
          `registerJob(${JSON.stringify(name)}) needs a name (1-100 chars) and a runner function.`,
          { plugin: plugin.name },
        );
      if (jobs.has(jobKey(plugin.name, name)))
        throw new KeelError("KEEL_SUBSCRIPTION_DUPLICATE", `Job runner "${name}" is registered twice.`, {
          plugin: plugin.name,
        });
      jobs.set(jobKey(plugin.name, name), runner);
    },
  };
}

interface Checked {
  plugin: KeelPlugin;
  index: number;
  options: unknown;
}

/**
 * The plugin's fields, each read once (inside the caller's guard): later reads cannot throw
 * or change. `setup` is still called on the original object, so `this` works.
 */
function readPlugin(entry: NonNullable<PluginEntry>): Partial<KeelPlugin> {
  if (typeof entry !== "object") return entry as Partial<KeelPlugin>;
  const o = entry as KeelPlugin;
  const setup = o.setup;
  const d = o.dependencies as unknown;
  const dependencies = Array.isArray(d)
    ? [...(d as string[])]
    : d && typeof d === "object"
      ? { ...(d as Record<string, string>) }
      : (d as undefined);
  return {
    name: o.name,
    version: o.version,
    kernel: o.kernel,
    description: o.description,
    ...(dependencies !== undefined ? { dependencies } : {}),
    ...(o.options !== undefined ? { options: o.options } : {}),
    input: o.input,
    setup: (typeof setup === "function"
      ? (ctx: Parameters<KeelPlugin["setup"]>[0]) => setup.call(o, ctx)
      : setup) as KeelPlugin["setup"],
  };
}

function deps(p: KeelPlugin): Record<string, string> {
  const d = p.dependencies;
  if (!d) return {};
  if (Array.isArray(d)) return Object.fromEntries((d as string[]).map((n) => [n, "*"]));
  return { ...(d as Record<string, string>) };
}

function checkPlugins(entries: readonly PluginEntry[], kernelVersion: string): Checked[] {
  const out: Checked[] = [];
  const byName = new Map<string, Checked>();
  entries.forEach((entry, index) => {
    if (!entry) return;
    const path = `plugins[${index}]`;
    let p: Partial<KeelPlugin>;
    try {
      p = readPlugin(entry);
    } catch (err) {
      throw new KeelError(
        "KEEL_PLUGIN_INVALID",
        `Reading the plugin object threw: ${errorMessage(err)}. Return a plain plugin object (definePlugin), not a Proxy or an object with throwing getters.`,
        { path },
        { cause: err },
      );
    }
    if (typeof p !== "object" || typeof p.name !== "string" || !p.name.trim()) {
      throw new KeelError("KEEL_PLUGIN_INVALID", `The entry is ${describe(entry)}, not a plugin with a name.`, {
        path,
      });
    }
    if (typeof p.version !== "string" || typeof p.setup !== "function") {
      throw new KeelError(
        "KEEL_PLUGIN_INVALID",
        `Missing ${typeof p.version !== "string" ? "`version`" : "`setup`"}.`,
        { plugin: p.name, path },
      );
    }
    if (byName.has(p.name)) {
      throw new KeelError(
        "KEEL_PLUGIN_DUPLICATE",
        `"${p.name}" appears at plugins[${byName.get(p.name)!.index}] and ${path}.`,
        { plugin: p.name, path },
      );
    }
    if (p.kernel !== undefined && (!validRange(p.kernel) || !satisfies(kernelVersion, p.kernel))) {
      throw new KeelError(
        "KEEL_KERNEL_RANGE_UNSUPPORTED",
        `It requires kernel "${p.kernel}" but this kernel is ${kernelVersion}.`,
        { plugin: p.name, path },
      );
    }
    const options = parseOptions(p, path);
    const checked = { plugin: p as KeelPlugin, index, options };
    byName.set(p.name, checked);
    out.push(checked);
  });
  checkDependencies(out, byName);
  return out;
}

/** A plugin's options validated by its zod schema (its input as is without one), located on failure. */
function parseOptions(p: Partial<KeelPlugin>, path: string): unknown {
  let options: unknown = p.input;
  if (p.options) {
    // No input means "all defaults": an object schema with defaults accepts {} but not undefined.
    let parsed: ReturnType<NonNullable<typeof p.options>["safeParse"]>;
    try {
      parsed = p.options.safeParse(p.input);
      if (!parsed.success && p.input === undefined) {
        const empty = p.options.safeParse({});
        if (empty.success) parsed = empty;
      }
    } catch (err) {
      // The schema is plugin code (refinements, transforms): a throw is invalid options, located.
      throw new KeelError(
        "KEEL_PLUGIN_OPTIONS_INVALID",
        `Validating the options threw: ${errorMessage(err)}.`,
        { plugin: p.name, path: `${path}.options` },
        { cause: err },
      );
    }
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const at = [`${path}.options`, ...issue.path.map(String)].join(".");
      throw new KeelError(
        "KEEL_PLUGIN_OPTIONS_INVALID",
        `${issue.message} (found ${describe(valueAt(p.input, issue.path))}).`,
        { plugin: p.name, path: at },
      );
    }
    options = parsed.data;
  }
  return options;
}

/** Every declared dependency is in the list, at a version its range accepts. */
function checkDependencies(out: readonly Checked[], byName: Map<string, Checked>): void {
  for (const c of out) {
    for (const [dep, range] of Object.entries(deps(c.plugin))) {
      const target = byName.get(dep);
      if (!target)
        throw new KeelError(
          "KEEL_DEPENDENCY_MISSING",
          `It depends on "${dep}", which is not in the plugins list.${didYouMean(dep, byName.keys())}`,
          { plugin: c.plugin.name, path: `plugins[${c.index}].dependencies` },
        );
      if (range !== "*" && !satisfies(target.plugin.version, range)) {
        throw new KeelError(
          "KEEL_DEPENDENCY_VERSION",
          `It needs "${dep}" ${range} but ${target.plugin.version} is registered.`,
          { plugin: c.plugin.name, path: `plugins[${c.index}].dependencies` },
        );
      }
    }
  }
}

/** Plugins ordered so that dependencies set up first; stable by list order. */
function setupOrder(plugins: Checked[]): Checked[] {
  const byName = new Map(plugins.map((p) => [p.plugin.name, p]));
  const state = new Map<string, "visiting" | "done">();
  const out: Checked[] = [];
  const visit = (p: Checked, trail: string[]) => {
    const s = state.get(p.plugin.name);
    if (s === "done") return;
    if (s === "visiting") {
      const cycle = [...trail.slice(trail.indexOf(p.plugin.name)), p.plugin.name];
      throw new KeelError("KEEL_DEPENDENCY_CYCLE", `Plugin dependencies form a cycle: ${cycle.join(" -> ")}.`, {
        plugin: p.plugin.name,
      });
    }
    state.set(p.plugin.name, "visiting");
    for (const dep of Object.keys(deps(p.plugin))) visit(byName.get(dep)!, [...trail, p.plugin.name]);
    state.set(p.plugin.name, "done");
    out.push(p);
  };
  for (const p of plugins) visit(p, []);
  return out;
}

function subscription<P extends PhaseName>(
  plugin: string,
  phase: P,
  handler: Handler<P>,
  o: SubscribeOptions<P>,
  order: number[],
): Draft {
  if (!isPhaseName(phase)) {
    throw new KeelError("KEEL_PHASE_UNKNOWN", `"${String(phase)}" is not a phase.${didYouMean(phase, PHASE_NAMES)}`, {
      plugin,
      phase: String(phase),
    });
  }
  const id = o.id ? `${plugin}:${phase}#${o.id}` : `${plugin}:${phase}`;
  const bad = (what: string) => new KeelError("KEEL_SUBSCRIPTION_INVALID", what, { plugin, phase, subscription: id });
  if (typeof handler !== "function") throw bad("The handler is not a function.");
  const awaitPolicy = o.await ?? "blocking";
  if (!AWAITS.has(awaitPolicy)) throw bad(`await "${awaitPolicy}" is not one of blocking, deadline, background.`);
  const failure = o.failure ?? (awaitPolicy === "background" ? "best_effort" : PHASES[phase].failure);
  if (!FAILURES.has(failure))
    throw bad(`failure "${failure}" is not one of best_effort, required, fallback, fail_closed.`);
  if (awaitPolicy === "background" && failure !== "best_effort")
    throw bad(
      `failure "${failure}" cannot apply to a background handler: nothing waits for it. Use best_effort, or await it.`,
    );
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUTS[awaitPolicy];
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
    throw bad(`timeoutMs must be a positive number, got ${String(o.timeoutMs)}.`);
  const stage = o.stage ?? "normal";
  if (!(stage in STAGE_RANK)) throw bad(`stage "${stage}" is not one of pre, normal, post, final.`);
  const priority = o.priority ?? 0;
  if (!Number.isFinite(priority)) throw bad("priority must be a finite number.");
  const fallback: Contribution[] = [];
  for (const [i, raw] of (o.fallback ?? []).entries()) {
    const v = validateContribution(raw);
    if (!v.ok) throw bad(`fallback[${i}] is invalid at ${v.path}: ${v.message}.`);
    if (!(PHASES[phase].accepts as readonly string[]).includes(v.value.kind))
      throw bad(`fallback[${i}] is a "${v.value.kind}" contribution, which ${phase} does not accept.`);
    fallback.push(v.value);
  }
  if (failure === "fallback" && fallback.length === 0)
    throw new KeelError("KEEL_FALLBACK_EMPTY", `Subscription "${id}" has no fallback contributions.`, {
      plugin,
      phase,
      subscription: id,
    });
  return {
    id,
    plugin,
    phase,
    handler,
    stage,
    priority,
    after: [...(o.after ?? [])],
    before: [...(o.before ?? [])],
    await: awaitPolicy,
    timeoutMs,
    failure,
    fallback,
    order,
  };
}

/** Sort by stage, priority, list order; then honour after/before edges (stable topological sort). */
function resolveOrder(phase: PhaseName, drafts: Draft[], names: Set<string>): readonly Subscription[] {
  const key = (d: Draft) => [STAGE_RANK[d.stage], d.priority, ...d.order];
  const sorted = [...drafts].sort((a, b) => {
    const ka = key(a),
      kb = key(b);
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
    return 0;
  });
  const n = sorted.length;
  const preds: Set<number>[] = sorted.map(() => new Set());
  const byPlugin = new Map<string, number[]>();
  sorted.forEach((d, i) => {
    byPlugin.set(d.plugin, [...(byPlugin.get(d.plugin) ?? []), i]);
  });
  sorted.forEach((d, i) => {
    for (const [list, dir] of [
      [d.after, "after"],
      [d.before, "before"],
    ] as const) {
      for (const name of list) {
        if (!names.has(name))
          throw new KeelError(
            "KEEL_ORDER_UNKNOWN_PLUGIN",
            `${dir}: ["${name}"] names no registered plugin.${didYouMean(name, names)}`,
            { plugin: d.plugin, phase, subscription: d.id },
          );
        for (const j of byPlugin.get(name) ?? []) {
          if (j === i) continue;
          const [first, then] = dir === "after" ? [sorted[j]!, d] : [d, sorted[j]!];
          if (first.stage === "final" && then.stage !== "final")
            throw new KeelError(
              "KEEL_ORDER_AFTER_FINAL",
              `${then.id} (stage ${then.stage}) would run after ${first.id}, a final subscription, through ${dir}: ["${name}"].`,
              { plugin: d.plugin, phase, subscription: d.id },
            );
          if (dir === "after") preds[i]!.add(j);
          else preds[j]!.add(i);
        }
      }
    }
  });
  const done = new Array<boolean>(n).fill(false);
  const out: number[] = [];
  while (out.length < n) {
    let next = -1;
    for (let i = 0; i < n; i++) {
      if (!done[i] && [...preds[i]!].every((p) => done[p])) {
        next = i;
        break;
      }
    }
    if (next < 0) {
      const stuck = sorted.filter((_, i) => !done[i]).map((d) => d.id);
      throw new KeelError(
        "KEEL_DEPENDENCY_CYCLE",
        `after/before edges in ${phase} form a cycle among: ${stuck.join(", ")}.`,
        { plugin: sorted.find((_, i) => !done[i])!.plugin, phase },
      );
    }
    done[next] = true;
    out.push(next);
  }
  const position = new Map(out.map((orig, pos) => [orig, pos]));
  return Object.freeze(
    out.map((orig, pos) => {
      const { order: _order, ...d } = sorted[orig]!;
      return Object.freeze({
        ...d,
        position: pos,
        waitFor: Object.freeze([...preds[orig]!].map((p) => position.get(p)!).sort((a, b) => a - b)),
      });
    }),
  );
}

function describe(v: unknown): string {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  if (typeof v === "string") return JSON.stringify(truncate(v, 41));
  if (typeof v === "function") return "a function";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur = root;
  for (const k of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[k];
  }
  return cur;
}
