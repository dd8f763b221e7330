/**
 * The plugin contract: an object with a name, a version, the kernel range it supports,
 * its dependencies, an optional zod options schema, and one entry point, `setup(ctx)`,
 * where it subscribes handlers to phases.
 */
import type { AgentStorage } from "./session-store.ts";
import type * as z from "zod/mini";
import type { ContributionInputOf } from "./contributions.ts";
import type { AcceptedKind, AwaitPolicy, FailurePolicy, PhaseEvent, PhaseName } from "./phases.ts";
import type { Message } from "./messages.ts";
import type { ModelProvider } from "./provider.ts";
import type { ZodSchema } from "./tools.ts";

/** A value or a promise of it. */
export type MaybePromise<T> = T | Promise<T>;

/** A contribution phase P accepts, as a handler writes it. */
export type ContributionFor<P extends PhaseName> = { [K in AcceptedKind<P>]: ContributionInputOf<K> }[AcceptedKind<P>];

/** What a handler of phase P may return. Contract: nothing, one contribution, or a list. */
export type HandlerResult<P extends PhaseName> = MaybePromise<
  ContributionFor<P> | readonly ContributionFor<P>[] | void | undefined | null
>;

/**
 * Given to every handler call.
 * Contract: `signal` aborts when the handler's deadline passes or the turn is cancelled;
 * reading it is cheap, so read it only when you need it.
 */
export interface HookContext {
  readonly plugin: string;
  readonly phase: PhaseName;
  readonly subscription: string;
  readonly signal: AbortSignal;
  /**
   * The model a handler may call for side work (extraction, summaries, plans): the agent's
   * `sideModel`, else its main provider. Use `complete()` to get one whole answer.
   */
  readonly model: ModelProvider | undefined;
}

/** A phase handler. */
export type Handler<P extends PhaseName> = (event: PhaseEvent<P>, ctx: HookContext) => HandlerResult<P>;

/**
 * Named ordering stages: all `pre` handlers run before `normal`, then `post`, then `final`.
 * Contract: a `final` handler sees what every other handler passed on and only decides: no
 * handler outside `final` can be ordered after it, and what it would change in a waterfall
 * (tool arguments, messages) is not applied (a permission check cannot be rewritten past).
 */
export type Stage = "pre" | "normal" | "post" | "final";

/**
 * How a subscription runs.
 * Contract: defaults are stage `normal`, priority 0 (lower runs first), await `blocking`
 * with a 30 s timeout (`deadline`: 1 s; `background`: 180 s), and the phase's default
 * failure policy; `fallback` requires non-empty `fallback` contributions.
 */
export interface SubscribeOptions<P extends PhaseName> {
  id?: string;
  stage?: Stage;
  priority?: number;
  after?: readonly string[];
  before?: readonly string[];
  await?: AwaitPolicy;
  timeoutMs?: number;
  failure?: FailurePolicy;
  fallback?: readonly ContributionFor<P>[];
}

/**
 * What `setup(ctx)` receives.
 * Contract: `on` may only be called during setup; after setup the registry is frozen.
 */
export interface PluginSetupContext<O> {
  readonly plugin: string;
  readonly options: O;
  /**
   * Where the agent this plugin is set up in keeps its data: its home (default files go there)
   * and its database (on PostgreSQL, tables go there too). Contract: a plugin's defaults follow
   * it, never KEEL_HOME or KEEL_DATABASE_URL, so two agents in one process share nothing.
   */
  readonly storage: AgentStorage;
  readonly kernelVersion: string;
  /** Aborts when the setup deadline (AgentOptions.setupTimeoutMs) passes; pass it to slow I/O. */
  readonly signal: AbortSignal;
  /** True when a plugin with that name is registered (for optional `after`/`before` edges). */
  hasPlugin(name: string): boolean;
  on<P extends PhaseName>(phase: P, handler: Handler<P>, options?: SubscribeOptions<P>): void;
  /**
   * Register the runner of this plugin's durable background jobs named `name` (a
   * `background_job` contribution with `durable: true`). Contract: setup only; the kernel
   * calls it for a job recorded in the log, also after a restart, until the job settles.
   */
  registerJob(name: string, runner: JobRunner): void;
}

/**
 * What a durable job's runner is given.
 * Contract: `payload` is the JSON the contribution carried (as stored in the log);
 * `turn()` reads the job's turn back from the session log (frozen), so a payload holds
 * references, not content; `attempt` counts from 1 across restarts.
 */
export interface JobContext {
  readonly plugin: string;
  readonly name: string;
  readonly idempotencyKey: string;
  /** The session and turn the job belongs to (its origin when another session adopted it). */
  readonly sessionId: string;
  readonly turnId: string | null;
  readonly attempt: number;
  /** True when the job is re-run after a restart or resume (not in the process that queued it). */
  readonly recovered: boolean;
  readonly signal: AbortSignal;
  readonly model: ModelProvider | undefined;
  turn(): Promise<JobTurn | undefined>;
}

/** A turn as read back from the session log for a job. */
export interface JobTurn {
  readonly turnId: string;
  readonly input: string;
  readonly metadata: Readonly<Record<string, unknown>>;
  /** This turn's messages (user input, steering, assistant, tool results), frozen. */
  readonly messages: readonly Message[];
  /** The last assistant text of the turn. */
  readonly finalText: string;
}

/** A durable job's runner. Contract: safe to run more than once for one key (idempotent). */
export type JobRunner = (payload: unknown, ctx: JobContext) => unknown;

/**
 * A Keel plugin.
 * Contract: `name` is unique among an agent's plugins; `kernel` is a semver range the
 * kernel version must satisfy; `dependencies` (name → range, or names) must all be present;
 * `input` is validated against `options` before `setup` runs.
 */
export interface KeelPlugin<S extends ZodSchema = ZodSchema> {
  name: string;
  version: string;
  kernel?: string;
  description?: string;
  dependencies?: Readonly<Record<string, string>> | readonly string[];
  options?: S;
  /** The raw options the user gave (validated against `options`). */
  input?: z.input<S>;
  setup(ctx: PluginSetupContext<z.output<S>>): void | Promise<void>;
}

/** Identity function that types a plugin. Contract: returns its argument unchanged. */
export function definePlugin<S extends ZodSchema = ZodSchema<undefined>>(plugin: KeelPlugin<S>): KeelPlugin<S> {
  return plugin;
}

/** An entry of an agent's plugin list; falsy entries are ignored so `cond && plugin()` works. */
export type PluginEntry = KeelPlugin<any> | false | null | undefined | 0 | "";

/**
 * An `agent.config.ts`'s default export, returned as it is. `@keel/agent`'s defineConfig is this
 * same function with the config's type (KeelConfig); this one stays in the kernel so a config
 * that imports it from here keeps loading.
 * Contract: returns its argument unchanged.
 */
export function defineConfig<C extends object>(config: C): C {
  return config;
}
