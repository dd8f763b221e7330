/** How to build an agent (createAgent's options) and what its approval callback is asked. */
import type { SessionMode } from "@keel/kernel";
import type { Limits } from "@keel/kernel";
import type { LeaseOptions } from "@keel/kernel";
import type { MergeCaps } from "@keel/kernel";
import type { AgentObserver } from "@keel/kernel";
import type { PluginEntry } from "@keel/kernel";
import type { PreflightOptions } from "./preflight.ts";
import type { ApprovalRequest, PoolMember } from "@keel/kernel";
import type { ModelProvider, RequestOptions } from "@keel/kernel";
import type { SessionStore } from "@keel/kernel";
import type { TokenCounter } from "@keel/kernel";
import type { ToolCategory, ToolDefinition } from "@keel/kernel";
import type { ApprovalAnswer } from "@keel/kernel";

/**
 * How to build an agent.
 * Contract: only `provider` is required; `store` (a SessionStore, "sqlite" or a postgres:// URL)
 * defaults to KEEL_DATABASE_URL, else SQLite at `<home>/sessions.sqlite`; `home` to KEEL_HOME
 * or ~/.keel. Plugins keep their data where the agent does (PluginSetupContext.storage).
 */
export type { ApprovalRequest };

export interface AgentOptions {
  name?: string;
  /**
   * What the agent does, in a line, for anyone who may ask: what `@keel/serve` publishes (the
   * A2A agent card, the MCP server's instructions and its `ask` tool). Contract: public; never
   * derived from `instructions`, which stay private (without it a generic text is published).
   */
  description?: string;
  provider: ModelProvider;
  /**
   * Named models a plugin may route a round to (`request_options.options.route` at
   * round.pre_request, e.g. @keel/plugin-router). Without a router, or without a pool, every
   * round goes to `provider`.
   */
  pool?: Readonly<Record<string, PoolMember>>;
  /**
   * The model plugins use for side calls (HookContext.model); default: `provider`. `false`:
   * none, so plugins use their deterministic fallbacks (e.g. when `provider` replays a script).
   */
  sideModel?: ModelProvider | false;
  /**
   * Ask the model, before the prompt is compiled, which hidden tools the turn needs (one
   * bounded, tool-less request; runs only when there are hidden tools). Default: off.
   */
  preflight?: boolean | PreflightOptions;
  instructions?: string;
  tools?: readonly ToolDefinition[];
  plugins?: readonly PluginEntry[];
  /** Where sessions live: a SessionStore, "sqlite" (files in `home`) or a postgres:// URL (tables in KEEL_DATABASE_SCHEMA, else public). */
  store?: SessionStore | string;
  home?: string;
  limits?: Partial<Limits>;
  toolTimeouts?: Partial<Record<ToolCategory, number>>;
  /**
   * Answers `ask` decisions in process: `true`, or `{ approved, always?, reason? }` (anything
   * else, a throw or a cancelled turn is a denial). Without it, `ask` does what `ask` says.
   */
  approve?: (request: ApprovalRequest) => boolean | ApprovalAnswer | Promise<boolean | ApprovalAnswer>;
  /**
   * What an `ask` decision does when there is no `approve()` callback. `pause` (default): the
   * turn pauses with the request stored in the session log, and the host answers later, from
   * any process (session.pendingApprovals(), approve()/deny(), resume()). `deny`: the call is
   * denied at once, with a result saying why.
   */
  ask?: "pause" | "deny";
  caps?: Partial<MergeCaps>;
  requestOptions?: RequestOptions;
  tokenCounter?: TokenCounter;
  /**
   * What phase runs are logged as `phase.completed` events. `notable` (default): runs with a
   * contribution, a diagnostic, a failure, or a handler slower than 1 ms; every run's timing
   * still lands in the turn's terminal event (`timings`). `full`: every run.
   */
  trace?: "notable" | "full";
  /**
   * Deadline of each plugin's `setup(ctx)`, ms. Default 10,000. Contract: a setup that has not
   * settled by then fails createAgent with KEEL_PLUGIN_SETUP_TIMEOUT naming the plugin.
   */
  setupTimeoutMs?: number;

  /**
   * Session leases (one writer per session): `ttlMs` (default 30 s) and how long opening a
   * session held elsewhere waits, `waitMs` (default 0: KEEL_SESSION_BUSY at once).
   */
  lease?: LeaseOptions;
  /**
   * Watchers of the agent's events (OpenTelemetry tracing, say): each is attached once the agent
   * is built and detached when it closes. Falsy entries are ignored (`cond && observer()`).
   */
  observers?: readonly (AgentObserver | false | null | undefined | 0 | "")[];
  /**
   * The mode of a session that has not switched (session.setMode): `agent` (default) sends
   * tools; `chat` sends none. A session's own switch is in its log and wins on resume.
   */
  mode?: SessionMode;
  /**
   * What happens to a turn a dead process (or a lapsed lease) left unfinished.
   * `manual` (default): it is marked interrupted when the session is next used, and nothing
   * runs until a person sends a message. `auto`: it continues from its log (Session.recover,
   * `keel worker`): completed tool results are kept, a call that was cut runs again only when
   * its tool is `repeatable` (else it gets one "interrupted" result), and the loop goes on.
   * Contract: with `auto`, run() on such a session first finishes that turn, then runs the input.
   */
  recovery?: "auto" | "manual";
  /**
   * @internal The id of a new child session (ToolContext.child), from its link to the parent
   * call and its ordinal among that call's children; undefined for a random one. A replay gives
   * each child the id it had when recorded, so what names it (a task's result) reads the same.
   * Child agents inherit it.
   */
  childSessionId?: (
    parent: { sessionId: string; turnId: string; callId: string; name: string },
    ordinal: number,
  ) => string | undefined;
}
