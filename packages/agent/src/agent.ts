/**
 * The agent: a frozen plugin registry, a provider, tools and a session store. Sessions run
 * turns (turn.ts); the agent owns the event stream and the phase runner.
 */
import * as z from "zod/mini";
import { limitsSchema, toolTimeoutsSchema } from "@keel/kernel";
import type { Contributed, PhaseDiagnostic, PhaseResult, PhaseTracer } from "@keel/kernel";
import { PhaseRunner } from "@keel/kernel";
import { errorMessage, isKeelError, KeelError, preview } from "@keel/kernel";
import type {
  AgentEvent,
  ContributionRecord,
  HandlerSummary,
  KeelEvent,
  KeelEventData,
  LiveEvent,
  SessionMode,
  TurnTimings,
} from "@keel/kernel";
import { freezeDeep } from "@keel/kernel";
import type { MergeCaps } from "@keel/kernel";
import { DEFAULT_CAPS } from "@keel/kernel";
import type { Message } from "@keel/kernel";
import type { PhaseName } from "@keel/kernel";
import { PHASE_NAMES, PHASES } from "@keel/kernel";
import type { ModelProvider } from "@keel/kernel";
import type { PluginRegistry } from "@keel/kernel";
import { buildRegistry } from "@keel/kernel";
import { extendPairState, HISTORY_FACTS_MIN } from "@keel/kernel";
import { trackAbandoned } from "@keel/kernel";
import type { SessionInfo, SessionStore } from "@keel/kernel";
import type { AgentStorage, TurnSeams } from "@keel/kernel";
import type { HostRuntime } from "./storage.ts";
import { hostRuntime, resolveStorage } from "./storage.ts";
import { estimateCounter } from "./estimate-counter.ts";
import { seamsOf } from "./seams.ts";
import type { TokenCounter } from "@keel/kernel";
import type { ToolCategory } from "@keel/kernel";
import { DEFAULT_TOOL_TIMEOUTS, TOOL_NAME_PATTERN } from "@keel/kernel";
import type { ApprovalAnswer, PendingApproval, TurnResult } from "@keel/kernel";
import type { PausedTurn, PreparedTurn, RunOptions, TurnHost, TurnInput, TurnOptions } from "@keel/kernel";
import { runTurn, unansweredCalls } from "@keel/kernel";
import type { AgentOptions } from "./agent-options.ts";
import type { Limits } from "@keel/kernel";
import { DEFAULT_LIMITS } from "@keel/kernel";
import type { ChildHold } from "@keel/kernel";
import type { ChildOptions, ChildRun, TurnBudget } from "@keel/kernel";
import type { Usage } from "@keel/kernel";
import { emptyUsage } from "@keel/kernel";
import { errorResult } from "@keel/kernel";
import { abandonChild, runChild } from "./child.ts";
import { checkInput, outputSpecOf } from "@keel/kernel";
import { wellFormedProvider } from "@keel/kernel";
import { codePointSlice, extendWellFormed, headOf, toWellFormed, truncate } from "@keel/text";
import type { AgentObserver } from "@keel/kernel";
import { DETACH_DEADLINE_MS } from "@keel/kernel";
import type { AttemptOutcome, HostAgent, HostSession, UnfinishedJob } from "./host-types.ts";
import { recoverJobs, startDurableJob } from "./jobs.ts";
import { inFaultScope, setCredentialMask } from "@keel/kernel";
import type { HeldLease, LeaseKind } from "@keel/kernel";
import { DEFAULT_LEASE } from "@keel/kernel";
import type { LogCursor } from "./session-replay.ts";
import { newCursor, replay } from "./session-replay.ts";

/**
 * Options of agent.session().
 * Contract: opening never waits for another instance; `waitMs` and `onWait` apply to this
 * handle's writes (its turns, answers and queued messages) when another instance is writing.
 */
export interface SessionOpenOptions {
  /** How long this handle's turns and answers wait for a session another instance is running a turn in; default `lease.waitMs`. */
  waitMs?: number;
  /** Stops the open (its read, and the repair of a turn a dead process left open). */
  signal?: AbortSignal;
  /** Told once per wait when another instance is running a turn in the session and this handle starts waiting. */
  onWait?: (holder: { pid: number; host: string; expiresAt: number }) => void;
  /** @internal a child session's link to the turn and call that start it (ToolContext.child) */
  parent?: { sessionId: string; turnId: string; callId: string; name: string; depth: number };
}

/** One row of the phase map (`keel inspect`). */
export interface PhaseMapRow {
  phase: PhaseName;
  kind: string;
  accepts: readonly string[];
  subscriptions: Array<{
    id: string;
    plugin: string;
    stage: string;
    priority: number;
    after: readonly string[];
    before: readonly string[];
    await: string;
    timeoutMs: number;
    failure: string;
  }>;
}

type Listener = (event: AgentEvent) => void;

// zod/mini, as the kernel's schemas (its limits schema, imported here, sets zod's English messages).
const positive = z.number().check(z.positive());
const positiveInt = () => z.number().check(z.int(), z.positive());
const provider = (message: string) =>
  z.custom<ModelProvider>((p) => typeof (p as ModelProvider | undefined)?.stream === "function", { message });
const AgentOptionsSchema = z.strictObject({
  name: z.optional(z.string().check(z.minLength(1))),
  provider: provider("expected a ModelProvider with a stream() method"),
  pool: z.optional(
    z.record(
      z
        .string()
        .check(z.regex(/^[A-Za-z0-9_.-]{1,64}$/, "expected a pool name of letters, digits, _ . - (at most 64)")),
      z.strictObject({
        provider: provider("expected a ModelProvider with a stream() method"),
        tags: z.optional(z.array(z.string().check(z.minLength(1)))),
        price: z.optional(z.strictObject({ input: z.number().check(z.gte(0)), output: z.number().check(z.gte(0)) })),
        contextWindow: z.optional(positiveInt()),
      }),
    ),
  ),
  sideModel: z.optional(
    z.union([z.literal(false), provider("expected a ModelProvider with a stream() method, or false")]),
  ),
  preflight: z.optional(
    z.union([
      z.boolean(),
      z.strictObject({
        model: z.optional(provider("expected a ModelProvider with a stream() method")),
        timeoutMs: z.optional(positive),
        maxTokens: z.optional(positiveInt()),
        maxReveal: z.optional(positiveInt()),
      }),
    ]),
  ),
  instructions: z.optional(z.string()),
  description: z.optional(z.string()),
  tools: z.optional(z.array(z.unknown())),
  plugins: z.optional(z.array(z.unknown())),
  home: z.optional(z.string().check(z.minLength(1))),
  limits: z.optional(limitsSchema),
  toolTimeouts: z.optional(toolTimeoutsSchema),
  caps: z.optional(
    z.strictObject({
      contextEntries: z.optional(positiveInt()),
      contextChars: z.optional(positive),
      sections: z.optional(positiveInt()),
      sectionChars: z.optional(positive),
      sectionsTotalChars: z.optional(positive),
    }),
  ),
  approve: z.optional(
    z.custom<NonNullable<AgentOptions["approve"]>>((f) => typeof f === "function", { message: "expected a function" }),
  ),
  ask: z.optional(z.enum(["pause", "deny"])),
  trace: z.optional(z.enum(["notable", "full"])),
  setupTimeoutMs: z.optional(positive),
  lease: z.optional(
    z.strictObject({
      ttlMs: z.optional(z.number().check(z.int(), z.gte(100))),
      waitMs: z.optional(z.number().check(z.gte(0))),
    }),
  ),
  store: z.optional(
    z.union(
      [
        z.string().check(z.minLength(1)),
        z.custom<SessionStore>((v) => typeof (v as SessionStore | undefined)?.append === "function", {
          message: "expected a SessionStore",
        }),
      ],
      { message: 'expected a SessionStore, "sqlite" or a postgres:// URL' },
    ),
  ),
  tokenCounter: z.optional(
    z.custom<TokenCounter>((v) => typeof (v as TokenCounter | undefined)?.countRequest === "function", {
      message: "expected a token counter (an object with countRequest(), such as @keel/tokens' TokenCounter)",
    }),
  ),
  requestOptions: z.optional(z.record(z.string(), z.unknown())),
  observers: z.optional(z.array(z.unknown())),
  mode: z.optional(z.enum(["agent", "chat"])),
  recovery: z.optional(z.enum(["auto", "manual"])),
  childSessionId: z.optional(
    z.custom<NonNullable<AgentOptions["childSessionId"]>>((v) => typeof v === "function", {
      message: "expected a function",
    }),
  ),
});

/** A handler slower than this always gets its phase recorded, even in `notable` tracing. */
const SLOW_HANDLER_MS = 1;

/** Build an agent: validate and set up plugins, freeze the registry, open the store. */
export async function createAgent(options: AgentOptions): Promise<Agent> {
  const checked = z.safeParse(AgentOptionsSchema, options);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    const path = issue.path.map(String).join(".") || "(options)";
    throw new KeelError("KEEL_AGENT_OPTIONS_INVALID", `${path}: ${issue.message}.`, { path });
  }
  // ctx.on / registerJob after setup are reported on the agent (a diagnostic), never thrown.
  const late: KeelError[] = [];
  let built: Agent | undefined;
  // The stores are resolved first: plugins are told where the agent keeps its data when they are set up.
  const runtime = await hostRuntime();
  // Error messages mask connection credentials with the runtime's full scanner from here on.
  if (runtime?.maskCredentials) setCredentialMask(runtime.maskCredentials);
  const resolved = await resolveStorage(options, undefined, runtime);
  let registry: PluginRegistry;
  try {
    registry = await buildRegistry(options.plugins ?? [], undefined, {
      storage: resolved.storage,
      report: (err) => (built ? built.reportFault(err) : late.push(err)),
      ...(options.setupTimeoutMs !== undefined ? { setupTimeoutMs: options.setupTimeoutMs } : {}),
    });
  } catch (err) {
    if (resolved.owns && resolved.storage.database.kind === "postgres")
      await Promise.resolve(resolved.open().close()).catch(() => undefined);
    throw err;
  }
  const builtin = options.tools ?? [];
  const seen = new Set<string>();
  for (const [i, t] of builtin.entries()) {
    if (
      !t ||
      typeof t.name !== "string" ||
      !TOOL_NAME_PATTERN.test(t.name) ||
      typeof t.execute !== "function" ||
      typeof t.description !== "string" ||
      (t.input !== undefined && typeof t.input?.safeParse !== "function")
    ) {
      throw new KeelError("KEEL_TOOL_INVALID", `tools[${i}] (${JSON.stringify(t?.name)}) is malformed.`, {
        path: `tools[${i}]`,
      });
    }
    if (seen.has(t.name))
      throw new KeelError("KEEL_TOOL_DUPLICATE", `"${t.name}" is given twice.`, { tool: t.name, path: `tools[${i}]` });
    seen.add(t.name);
  }
  built = new Agent(options, registry, resolved.open(), resolved.owns, resolved.storage, runtime);
  for (const err of late) built.reportFault(err);
  for (const [i, o] of (options.observers ?? []).entries()) if (o) built.attachObserver(o, i);
  return built;
}

/**
 * A built agent. Contract: its plugin registry is frozen; it may hold many sessions, each
 * running at most one turn at a time.
 */
export class Agent implements HostAgent {
  readonly name: string;
  readonly registry: PluginRegistry;
  readonly store: SessionStore;
  readonly runner: PhaseRunner;
  readonly options: AgentOptions;
  readonly limits: Limits;
  readonly caps: MergeCaps;
  readonly toolTimeouts: Record<ToolCategory, number>;
  readonly tokens: TokenCounter;
  /** What the host adds to the kernel's turn: routing and budgets, preflight, digests. */
  readonly seams: TurnSeams;
  readonly trace: "notable" | "full";
  private readonly listeners = new Set<Listener>();
  private readonly threwOnce = new WeakSet<Listener>();
  private readonly detachers: Array<{ name: string; detach: () => unknown }> = [];
  /** 0 for an agent the host built; a child agent's (ToolContext.child) is its parent's + 1. */
  depth = 0;
  /** @internal child agents by name, built on first use and closed with this one */
  readonly children = new Map<string, Promise<Agent>>();
  private readonly open = new Map<string, Session>();
  /** @internal whether this agent has session `id` open (or opening) in this process */
  isOpen(id: string): boolean {
    return this.open.has(id) || this.opening.has(id);
  }
  private readonly opening = new Map<string, Promise<Session>>();
  private readonly ownsStore: boolean;
  private closed = false;
  private readonly claimed = new Set<string>();
  private readonly faults: KeelError[] = [];
  /** Observers whose detach failed or overran its deadline when the agent closed (sessions are closed by then); the CLI reports them. */
  readonly observerFailures: KeelError[] = [];
  /** Durable jobs this agent left pending (cut by close) or gave up on; the CLI reports them. */
  readonly unfinishedJobs: UnfinishedJob[] = [];

  /** Where this agent keeps its data (its home, and the database its plugins share with the session log). */
  readonly storage: AgentStorage;

  constructor(
    options: AgentOptions,
    registry: PluginRegistry,
    store: SessionStore,
    ownsStore: boolean,
    storage: AgentStorage,
    runtime?: HostRuntime,
  ) {
    this.options = options;
    this.storage = storage;
    this.name = options.name ?? "agent";
    this.registry = registry;
    this.store = store;
    this.ownsStore = ownsStore;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.caps = { ...DEFAULT_CAPS, ...options.caps };
    this.toolTimeouts = { ...DEFAULT_TOOL_TIMEOUTS, ...options.toolTimeouts };
    this.tokens = options.tokenCounter ?? runtime?.tokenCounter() ?? estimateCounter;
    this.seams = seamsOf(options, runtime?.digest);
    this.trace = options.trace ?? "notable";
    const tracer: PhaseTracer = {
      phaseStarted: (phase, owner) => {
        if (this.listeners.size === 0) return;
        const o = owner as { session: Session; turnId: string | null } | undefined;
        if (o) this.publish({ type: "phase.started", sessionId: o.session.id, turnId: o.turnId, phase });
      },
      backgroundSettled: (phase, handler, contributions, records, diagnostics, owner) => {
        const o = owner as { session: Session; turnId: string | null } | undefined;
        o?.session.backgroundSettled(phase, o.turnId, handler, contributions, records, diagnostics);
      },
    };
    this.runner = new PhaseRunner(
      registry,
      tracer,
      options.sideModel === false ? undefined : wellFormedProvider(options.sideModel ?? options.provider),
    );
  }

  /** Receive every event (stored and live). Returns an unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** @internal */
  publish(event: AgentEvent): void {
    if (this.listeners.size === 0) return;
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (err) {
        // A listener's failure must not break the turn; it is said once per listener, not silently dropped.
        if (this.threwOnce.has(l)) continue;
        this.threwOnce.add(l);
        this.reportFault(
          new KeelError(
            "KEEL_OBSERVER_FAILED",
            `An event listener (agent.subscribe, or an observer's) threw on a ${event.type} event: ${headOf(errorMessage(err), 300)}. It stays subscribed; its later throws are not reported.`,
          ),
        );
      }
    }
  }

  /** @internal attach one observer; a throw is reported (KEEL_OBSERVER_FAILED), never raised. */
  attachObserver(observer: AgentObserver, index: number): void {
    let name = `observers[${index}]`;
    try {
      const n: unknown = observer.name;
      if (typeof n === "string" && n) name = codePointSlice(n, 0, 80);
      const detach: unknown = observer.attach(this);
      if (typeof detach === "function") this.detachers.push({ name, detach: detach as () => unknown });
    } catch (err) {
      this.reportFault(
        new KeelError(
          "KEEL_OBSERVER_FAILED",
          `Observer "${name}" threw in attach(): ${headOf(errorMessage(err), 300)}`,
          { path: `observers[${index}]` },
        ),
      );
    }
  }

  /** @internal a child agent (ToolContext.child): createAgent with these options, on this agent's store and home */
  spawn(options: AgentOptions): Promise<Agent> {
    return createAgent(options);
  }

  /** @internal take a durable job's key for this process; false when it already runs here. */
  claimJob(key: string): boolean {
    if (this.claimed.has(key)) return false;
    this.claimed.add(key);
    return true;
  }

  /** @internal */
  releaseJob(key: string): void {
    this.claimed.delete(key);
  }

  /**
   * Record a fault raised outside any handler call (e.g. ctx.on from a timer) as a diagnostic
   * in every open session (in the running turn when there is one), or in the next one opened.
   * Contract: never throws.
   */
  reportFault(err: KeelError): void {
    const sessions = [...this.open.values()];
    if (!sessions.length) {
      if (this.faults.length < 100) this.faults.push(err);
      return;
    }
    for (const s of sessions) {
      try {
        void s.emit(
          {
            type: "diagnostic",
            level: "error",
            code: err.code,
            message: err.message,
            ...(err.plugin ? { plugin: err.plugin } : {}),
            ...(err.phase ? { phase: err.phase } : {}),
          },
          s.currentTurnId,
        );
      } catch {
        // The session's store failed; the fault has nowhere to go.
      }
    }
  }

  /**
   * @internal the process guard caught a fault: record it in every open session and close
   * the turns that are open with a failed verdict. Returns the ids of those turns.
   */
  recordFault(fault: { source: "uncaughtException" | "unhandledRejection"; error: KeelError }): string[] {
    const turns: string[] = [];
    for (const s of this.open.values()) {
      const turnId = s.currentTurnId;
      void s.emit(
        {
          type: "fault",
          code: "KEEL_PROCESS_FAULT",
          source: fault.source,
          message: fault.error.message,
          ...(fault.error.plugin ? { plugin: fault.error.plugin } : {}),
        },
        turnId,
        false,
      );
      if (turnId) {
        turns.push(turnId);
        s.cancel(fault.error);
      }
    }
    return turns;
  }

  /** True when anything listens (lets the loop skip building live events). */
  get hasListeners(): boolean {
    return this.listeners.size > 0;
  }

  /**
   * Open a session: a new one, or an existing one by id (resume).
   * Contract: the session's lease is taken first and held until `close()`: while another live
   * process or agent holds it, this throws KEEL_SESSION_BUSY naming the holder (after `waitMs`),
   * before anything is read or written. Resuming replays the stored events; a turn that never
   * ended (its holder is gone) is marked interrupted and its user message stays in the history.
   */
  async session(id?: string, options: SessionOpenOptions = {}): Promise<Session> {
    if (this.closed)
      throw new KeelError("KEEL_AGENT_CLOSED", `session(${id ? `"${id}"` : ""}) was called after close().`);
    if (id && this.open.has(id)) {
      // An open handle first reads what other instances wrote since it last did (no lease needed).
      const open = this.open.get(id)!;
      await open.sync();
      return open;
    }
    if (id && this.opening.has(id)) return this.opening.get(id)!;
    const opening = this.openSession(id, options);
    if (id) {
      this.opening.set(id, opening);
      void opening.then(
        () => this.opening.delete(id),
        () => this.opening.delete(id),
      );
    }
    return opening;
  }

  /** Children started per parent call so far (AgentOptions.childSessionId's ordinal). */
  private childOrdinals = new Map<string, number>();

  /** A new child's id from AgentOptions.childSessionId, when it gives one that is not taken. */
  private childIdFor(parent: NonNullable<SessionOpenOptions["parent"]>): string | undefined {
    const pick = this.options.childSessionId;
    if (!pick) return undefined;
    const key = `${parent.sessionId}\u0000${parent.turnId}\u0000${parent.callId}`;
    const ordinal = this.childOrdinals.get(key) ?? 0;
    this.childOrdinals.set(key, ordinal + 1);
    const id = pick(
      { sessionId: parent.sessionId, turnId: parent.turnId, callId: parent.callId, name: parent.name },
      ordinal,
    );
    return typeof id === "string" && id.length > 0 && !this.open.has(id) ? id : undefined;
  }

  private async openSession(id: string | undefined, options: SessionOpenOptions): Promise<Session> {
    let session: Session;
    const leasing = {
      ttlMs: this.options.lease?.ttlMs ?? DEFAULT_LEASE.ttlMs,
      waitMs: options.waitMs ?? this.options.lease?.waitMs ?? DEFAULT_LEASE.waitMs,
      ...(options.onWait ? { onWait: options.onWait } : {}),
    };
    if (id && (await this.store.getSession(id))) {
      // Opening reads; it takes no lease unless the log ends in a turn whose holder is gone (marked interrupted then).
      session = new Session(this, id, leasing);
      await session.load(options.signal);
    } else if (id) {
      throw new KeelError("KEEL_SESSION_NOT_FOUND", `No session "${id}".`);
    } else {
      const given = options.parent ? this.childIdFor(options.parent) : undefined;
      session = new Session(this, given ?? globalThis.crypto.randomUUID(), leasing);
      await this.store.createSession({ id: session.id, agent: this.name, createdAt: Date.now() });
      // A child's link to its parent call is on disk before the child runs (it is checked on resume); a top-level
      // session's first event joins the first turn's durable write (one fsync fewer per new session).
      await session.emit(
        { type: "session.created", agent: this.name, ...(options.parent ? { parent: options.parent } : {}) },
        null,
        options.parent !== undefined,
      );
      session.parentLink = options.parent;
    }
    this.open.set(session.id, session);
    for (const err of this.faults.splice(0)) this.reportFault(err);
    await session.phase("session.start", { sessionId: session.id, agent: this.name, resumed: session.resumed });
    await recoverJobs(session);
    return session;
  }

  /** Past sessions of this agent, newest first. */
  async sessions(limit = 50): Promise<SessionInfo[]> {
    return this.store.listSessions({ agent: this.name, limit });
  }

  /** The phase map: every phase, its subscriptions in order, with policies. */
  inspect(): PhaseMapRow[] {
    return PHASE_NAMES.map((phase) => ({
      phase,
      kind: PHASES[phase].kind,
      accepts: PHASES[phase].accepts,
      subscriptions: this.runner.subscriptions(phase).map((s) => ({
        id: s.id,
        plugin: s.plugin,
        stage: s.stage,
        priority: s.priority,
        after: s.after,
        before: s.before,
        await: s.await,
        timeoutMs: s.timeoutMs,
        failure: s.failure,
      })),
    }));
  }

  /** Wait for background handlers and jobs still running. */
  async drain(): Promise<void> {
    const pending = [...this.runner.background];
    for (const s of this.open.values()) pending.push(...s.jobs);
    await Promise.allSettled(pending);
  }

  /** Close every open session (session.end), drain background work, close an owned store. */
  async close(options: CloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled(this.opening.values());
    for (const s of [...this.open.values()]) await s.close(options);
    await Promise.allSettled([...this.runner.background]);
    // Child agents share this agent's store: closed before it.
    await Promise.allSettled([...this.children.values()].map(async (c) => (await c).close(options)));
    // Observers flush what they buffered (spans of the turns just closed) before the process may exit.
    await Promise.allSettled(
      this.detachers.map(async ({ name, detach }) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        try {
          const deadline = new Promise<"late">((r) => (timer = setTimeout(r, DETACH_DEADLINE_MS, "late")));
          if ((await Promise.race([Promise.resolve().then(detach), deadline])) === "late")
            this.observerFailures.push(
              new KeelError(
                "KEEL_OBSERVER_FAILED",
                `Observer "${name}" did not detach within ${DETACH_DEADLINE_MS} ms (a flush that never finished); the agent closed without waiting for it, and what it had not exported is lost.`,
              ),
            );
        } catch (err) {
          this.observerFailures.push(
            new KeelError(
              "KEEL_OBSERVER_FAILED",
              `Observer "${name}" threw in its detach: ${headOf(errorMessage(err), 300)}`,
            ),
          );
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    if (this.ownsStore) await this.store.close();
  }

  /** @internal */
  forget(id: string): void {
    this.open.delete(id);
  }
}

/**
 * How to close. Contract: running turns are cancelled and awaited; background jobs and
 * handlers get `graceMs` (default 30 s) to finish, then their signals abort.
 */
export interface CloseOptions {
  graceMs?: number;
  /**
   * Give running turns back unfinished instead of ending them interrupted: no terminal event is
   * written, so the next worker or recover() continues them (a stopping worker does this).
   */
  handBack?: boolean;
}

/** Code points of a host's approval or denial reason that are kept. */
const MAX_REASON_CHARS = 2_000;

/** Options with a second cancellation signal joined in. */
function withSignal<O>(options: RunOptions<O>, signal: AbortSignal | undefined): RunOptions<O> {
  if (!signal) return options;
  return { ...options, signal: options.signal ? AbortSignal.any([options.signal, signal]) : signal };
}

/** How long events emitted without a lease wait before a hand-off writes them (a turn starting meanwhile takes them). */
const IDLE_WRITE_MS = 50;

/** A hold with nothing to do but write what is queued. */
const noop = (): void => undefined;

type Later = (fn: () => void) => unknown;
const immediate = globalThis as { setImmediate?: Later; clearImmediate?: (h: unknown) => void };
/** Run `fn` once the current I/O settles: setImmediate where the runtime has it (Node), else a zero timeout. */
const soon: Later = immediate.setImmediate ?? ((fn) => setTimeout(fn, 0));
const cancelSoon = (h: unknown): void =>
  immediate.clearImmediate ? immediate.clearImmediate(h) : clearTimeout(h as ReturnType<typeof setTimeout>);

/** A timer that does not keep a Node process alive (a browser's or a Worker's timer is a number: kept as is). */
function unref<T>(timer: T): T {
  (timer as { unref?: () => void }).unref?.();
  return timer;
}

/** Why a session's lifetime signal aborts on a plain close (nothing was running). */
const SESSION_CLOSED = new KeelError("KEEL_TURN_ABORTED", "The session was closed.");

/**
 * A conversation with durable state.
 * Contract: `run` persists the input before any provider call; at most one turn runs at a
 * time; `steer` and `followUp` are durable the moment they return.
 */
export class Session implements TurnHost, HostSession {
  readonly id: string;
  readonly agent: Agent;
  #messages: readonly Message[] = Object.freeze([]);

  /** The conversation as the model sees it. Contract: a frozen array, replaced on every change. */
  get messages(): readonly Message[] {
    return this.#messages;
  }

  set messages(next: readonly Message[]) {
    this.#messages = Object.isFrozen(next) ? next : Object.freeze(next);
  }

  /**
   * @internal Append one (frozen) message. What the kernel knows of the history so far (tool
   * pairing, well-formed text, token sums) carries over, so a long history is not walked again
   * every round.
   */
  appendMessage(message: Message): void {
    const prev = this.#messages;
    const next = Object.freeze([...prev, message]);
    this.#messages = next;
    // A short history is rescanned in no time; facts are kept from HISTORY_FACTS_MIN messages on.
    if (prev.length < HISTORY_FACTS_MIN) return;
    extendPairState(prev, next, message);
    extendWellFormed(prev, next, message);
    this.agent.tokens.extendCounts?.(prev, next, message);
  }
  seq = 0;
  turnCount = 0;
  resumed = false;
  readonly steering: Array<{ queueId: string; text: string }> = [];
  readonly followUps: Array<{ queueId: string; text: string }> = [];
  readonly completedJobs = new Set<string>();
  /** @internal the turn paused for approval, if any (rebuilt from the log on resume) */
  paused: PausedTurn | undefined;
  /** @internal with agent `recovery: "auto"`: the turn a stopped process left unfinished, found under the lease */
  unfinished: PausedTurn | undefined;
  /** @internal tools the host approved "always" in this session */
  readonly alwaysAllowed = new Set<string>();
  readonly spend: Usage = emptyUsage();
  /** @internal the mode this session switched to (from its log), if it ever did */
  switchedMode: SessionMode | undefined;
  /** @internal a child session's link to the parent turn and call that started it (from session.created) */
  parentLink: SessionOpenOptions["parent"];
  /** @internal a turn stream's back-pressure: the provider loop waits on it before reading on */
  backpressure: Promise<void> | undefined;
  /** @internal where the latest turn of this process starts in the log (a job reads its turn from there). */
  lastTurnStart: { turnId: string; seq: number } | undefined;
  readonly jobs = new Set<Promise<unknown>>();
  private readonly runningJobs = new Set<string>();
  private current: AbortController | undefined;
  private running: Promise<TurnResult> | undefined;
  private closed = false;
  private readonly life = new AbortController();
  private writes: Promise<void> | undefined;
  private pending: KeelEvent[] = [];
  private timings: TurnTimings = { phases: {}, plugins: {} };
  private writeError: unknown;
  /** @internal the lease this handle writes under while it runs a turn or makes a hand-off (undefined between them) */
  lease: HeldLease | undefined;
  /** What the held lease is for, and how many holds (a turn, hand-offs within it) share it. */
  private leaseKind: LeaseKind | undefined;
  private holders = 0;
  /** Set while this handle takes the lease; settles when it holds it (or failed to). */
  private taking: Promise<void> | undefined;
  /** Settles when the lease held now is given back. */
  private released: Promise<void> | undefined;
  private release: (() => void) | undefined;
  /** Events emitted while this handle holds no lease: numbered and written at its next hold, after it caught up. */
  private outbox: Array<{ data: KeelEventData; turnId: string | null; durable: boolean }> = [];
  /** Where this handle's reading of the log stands (an unfinished turn, approvals asked in it). */
  private readonly cursor: LogCursor = newCursor();
  /** @internal how this handle waits for a lease another instance holds */
  readonly leasing: {
    ttlMs: number;
    waitMs: number;
    onWait?: (holder: { pid: number; host: string; expiresAt: number }) => void;
  };

  constructor(
    agent: Agent,
    id: string,
    leasing: Session["leasing"] = { ttlMs: DEFAULT_LEASE.ttlMs, waitMs: DEFAULT_LEASE.waitMs },
  ) {
    this.agent = agent;
    this.id = id;
    this.leasing = leasing;
  }

  /** Aborts when the session is closed (after the grace period): background work listens to it. */
  get lifetime(): AbortSignal {
    return this.life.signal;
  }

  /** True while a turn runs. */
  get busy(): boolean {
    return this.current !== undefined;
  }

  /** The id of the running turn, or null. */
  get currentTurnId(): string | null {
    return this.current ? `${this.id}/${this.turnCount}` : null;
  }

  /**
   * Run one turn. `input` is the user's text, or content blocks (text, images, PDF files).
   * Contract: resolves with the verdict (`paused` when tool calls wait for approval); rejects
   * only for KEEL_INPUT_INVALID, KEEL_OUTPUT_SCHEMA_INVALID, KEEL_TURN_BUSY,
   * KEEL_APPROVAL_PENDING (a paused turn must be answered first) or a store failure.
   */
  async run<O = unknown>(input: TurnInput, options: RunOptions<O> = {}): Promise<TurnResult<O>> {
    return this.fresh(() => this.prepareRun(input, options)) as Promise<TurnResult<O>>;
  }

  /** @internal one turn of a child session: clamped limits, trigger `subagent` (ToolContext.child) */
  runAsChild<O>(input: TurnInput, options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>> {
    return this.prepareRun(input, options, { limits, trigger: "subagent" })();
  }

  /**
   * The door checks of run() (they throw now), then a function that starts the turn: a host
   * that streams it (@keel/stream) passes a second signal and a `held` callback, called once the
   * turn holds its session. Contract: as run().
   */
  prepare<O = unknown>(input: TurnInput, options: RunOptions<O> = {}): PreparedTurn<O> {
    return this.prepareRun(input, options);
  }

  private prepareRun<O>(
    input: TurnInput,
    options: RunOptions<O>,
    more: { limits?: Partial<Limits>; trigger?: "subagent" } = {},
  ): PreparedTurn<O> {
    const checked = checkInput(input);
    const output = options.output ? outputSpecOf(options.output, options.outputName, options.outputFormat) : undefined;
    const budget = turnBudget(options.maxCostUsd, more.limits?.maxCostUsd ?? this.agent.limits.maxCostUsd);
    this.ready();
    if (this.paused)
      throw new KeelError(
        "KEEL_APPROVAL_PENDING",
        `Session "${this.id}" has turn ${this.paused.turnId} paused for ${this.paused.requests.size} tool call(s): ${[...this.paused.requests.values()].map((r) => `${r.name} (${r.callId})`).join(", ")}. Answer them (approve/deny) and resume() first.`,
      );
    return (signal, held) =>
      this.start(checked, withSignal(options, signal), {
        ...(output ? { output } : {}),
        ...more,
        ...(budget !== undefined ? { limits: { ...more.limits, maxCostUsd: budget } } : {}),
        ...(held ? { held } : {}),
      }) as Promise<TurnResult<O>>;
  }

  /** How this session's turns run: `agent` (tools) or `chat` (none). Contract: the last setMode() in the log, else the agent's `mode`, else `agent`. */
  get mode(): SessionMode {
    return this.switchedMode ?? this.agent.options.mode ?? "agent";
  }

  /**
   * Switch the session's mode between turns; durable when it resolves, honoured by every later
   * turn in any process. Contract: KEEL_MODE_INVALID for another value, while a turn runs, or
   * while a turn waits for approval; setting the current mode records nothing.
   */
  async setMode(mode: SessionMode): Promise<void> {
    if (mode !== "agent" && mode !== "chat")
      throw new KeelError(
        "KEEL_MODE_INVALID",
        `setMode(${JSON.stringify(typeof mode === "string" ? headOf(mode, 40) : typeof mode)}) on session "${this.id}".`,
      );
    if (this.current)
      throw new KeelError(
        "KEEL_MODE_INVALID",
        `Session "${this.id}" is running a turn; switch to ${mode} mode after it ends.`,
      );
    if (this.closed) throw new KeelError("KEEL_AGENT_CLOSED", `Session "${this.id}" is closed.`);
    await this.hold("handoff", async () => {
      if (this.paused)
        throw new KeelError(
          "KEEL_MODE_INVALID",
          `Session "${this.id}" has turn ${this.paused.turnId} waiting for approval; answer and resume it first.`,
        );
      if (mode === this.mode) return;
      await this.emit({ type: "session.mode", mode }, null, true);
      this.switchedMode = mode;
    });
  }

  /** The tool calls the paused turn waits for (empty when no turn is paused). Contract: copies. */
  pendingApprovals(): PendingApproval[] {
    return this.paused
      ? [...this.paused.requests.values()].map((r) => ({ ...r, ...(r.answer ? { answer: { ...r.answer } } : {}) }))
      : [];
  }

  /**
   * Approve a pending call; with `always`, later asks for this tool in this session are approved
   * without asking; `answerer`: who approved it (recorded on approval.resolved, see ApprovalAnswer).
   * Contract: durable when it resolves; the last answer before resume() counts.
   */
  async approve(callId: string, options: { always?: boolean; reason?: string; answerer?: string } = {}): Promise<void> {
    await this.answer(callId, {
      approved: true,
      ...(options.always ? { always: true } : {}),
      ...(options.reason ? { reason: options.reason } : {}),
      ...(options.answerer ? { answerer: options.answerer } : {}),
    });
  }

  /**
   * Deny a pending call; the model gets an error result with `reason`. `answerer`: who denied it
   * (recorded, see ApprovalAnswer). Contract: durable when it resolves.
   */
  async deny(callId: string, options: { reason?: string; answerer?: string } = {}): Promise<void> {
    await this.answer(callId, {
      approved: false,
      ...(options.reason ? { reason: options.reason } : {}),
      ...(options.answerer ? { answerer: options.answerer } : {}),
    });
  }

  private async answer(callId: string, given: ApprovalAnswer): Promise<void> {
    this.ready();
    // A reason is the person's words for the model: well-formed, and bounded like any tool result text.
    const answer: ApprovalAnswer = {
      ...given,
      ...(typeof given.reason === "string" ? { reason: truncate(toWellFormed(given.reason), MAX_REASON_CHARS) } : {}),
      // Who answered: a name for the audit trail, bounded like one.
      ...(typeof given.answerer === "string" ? { answerer: truncate(toWellFormed(given.answerer), 200) } : {}),
    };
    // Under the lease, on the log as it is now: any instance may answer, one at a time.
    await this.hold("handoff", async () => {
      const req = this.paused?.requests.get(callId);
      if (!req)
        throw new KeelError(
          "KEEL_APPROVAL_UNKNOWN",
          `Session "${this.id}" has no pending approval "${callId}"${this.paused ? ` (pending: ${[...this.paused.requests.keys()].join(", ")})` : " (no turn is paused)"}.`,
        );
      await this.emit({ type: "approval.resolved", callId, name: req.name, ...answer, by: "host" }, req.turnId, true);
      req.answer = answer;
      if (answer.approved && answer.always && !req.via) this.alwaysAllowed.add(req.name);
    });
  }

  /**
   * Continue the paused turn: answered calls run (or get their denial), the calls after them run,
   * and the loop goes on. Contract: throws KEEL_NOT_PAUSED when nothing is paused and
   * KEEL_APPROVAL_PENDING while a call is unanswered; `output` must be given again if the turn had one.
   */
  async resume<O = unknown>(options: RunOptions<O> = {}): Promise<TurnResult<O>> {
    return this.fresh(() => this.prepareResume(options)) as Promise<TurnResult<O>>;
  }

  /**
   * The door of run() or resume(): when it refuses for the paused turn's state, that state may be
   * behind the log (another instance answered, resumed or ended the turn), so the log is read and
   * the door judged once more. A door that opens does so at once (the turn is running on return).
   */
  private fresh(prepare: () => () => Promise<TurnResult<unknown>>): Promise<TurnResult<unknown>> {
    let go: () => Promise<TurnResult<unknown>>;
    try {
      go = prepare();
    } catch (err) {
      if (!isKeelError(err, "KEEL_APPROVAL_PENDING") && !isKeelError(err, "KEEL_NOT_PAUSED")) throw err;
      return this.sync().then(() => prepare()());
    }
    return go();
  }

  /**
   * @internal End the paused turn without resuming it (its parent no longer waits for it): it is
   * interrupted, its waiting calls get "interrupted" results when the session goes on, and the
   * child sessions it waited on are ended the same way.
   */
  async abandonPaused(reason: "aborted" | "process_exit"): Promise<void> {
    if (!this.paused || this.current) return;
    const p = await this.hold("handoff", async () => {
      const p = this.paused;
      if (!p) return undefined;
      this.paused = undefined;
      await this.emit(
        {
          type: "turn.interrupted",
          verdict: { status: "interrupted", reason },
          usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
          rounds: p.rounds,
          toolCalls: p.toolCalls,
        },
        p.turnId,
        true,
      );
      return p;
    });
    for (const id of new Set([...(p?.requests.values() ?? [])].flatMap((r) => (r.via ? [r.via.sessionId] : []))))
      await abandonChild(this, id);
  }

  /**
   * @internal End the turn a stopped process left unfinished here, interrupted (and its own
   * children): no one goes on with it, because the parent call that started this child session
   * will not run again.
   */
  async abandonUnfinished(): Promise<void> {
    if (!this.unfinished || this.current) return;
    await this.hold("handoff", async () => {
      if (!this.unfinished) return;
      const u = this.takeUnfinished();
      this.cursor.open = u.turnId;
      await this.interruptOpenTurn(u.recovery?.leaseTakenOver);
    });
  }

  /**
   * Finish the turn a stopped process (or a lapsed lease) left unfinished, from its log:
   * completed tool results are kept; a call that was cut runs again when its tool is
   * `repeatable` (or it started child sessions, which go on), else it gets one "interrupted"
   * result; then the loop goes on. With agent `recovery: "auto"` a worker (or the next run())
   * does this by itself. Contract: throws KEEL_NOT_UNFINISHED when there is no such turn (it
   * ended, or another instance finished it) and KEEL_SESSION_BUSY while a live instance runs it;
   * otherwise as run().
   */
  async recover<O = unknown>(options: RunOptions<O> = {}): Promise<TurnResult<O>> {
    this.ready();
    if (!this.unfinished && !this.lease && !this.taking) {
      await this.catchUp();
      if (this.cursor.open) {
        this.recovering = true;
        try {
          await this.hold("handoff", noop, { waitMs: 0, ...(options.signal ? { signal: options.signal } : {}) });
        } finally {
          this.recovering = false;
        }
      }
    }
    return this.prepareRecover(options)() as Promise<TurnResult<O>>;
  }

  /** True while recover() looks for the unfinished turn (it is kept, whatever the agent's `recovery`). */
  private recovering = false;

  /** The door checks of recover() (they throw now), then a function that continues the turn. Contract: as prepare(). */
  prepareRecover<O = unknown>(options: RunOptions<O> = {}, more: { limits?: Partial<Limits> } = {}): PreparedTurn<O> {
    const output = options.output ? outputSpecOf(options.output, options.outputName, options.outputFormat) : undefined;
    this.ready();
    if (!this.unfinished)
      throw new KeelError(
        "KEEL_NOT_UNFINISHED",
        `Session "${this.id}" has no turn left unfinished by a stopped process.`,
      );
    return (signal, held) =>
      this.start("", withSignal(options, signal), {
        recover: true,
        ...(output ? { output } : {}),
        ...more,
        ...(held ? { held } : {}),
      }) as Promise<TurnResult<O>>;
  }

  /** @internal continue a child's unfinished turn (its parent's call was cut and runs again) within `limits`. */
  recoverAsChild<O>(options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>> {
    return this.prepareRecover(options, { limits })();
  }

  /** @internal resume a paused child turn (ToolContext.child, after its parent resumed) within `limits`. */
  resumeAsChild<O>(options: RunOptions<O>, limits: Partial<Limits>): Promise<TurnResult<O>> {
    return this.prepareResume(options, { limits })();
  }

  /** The door checks of resume() (they throw now), then a function that resumes the turn. Contract: as prepare(). */
  prepareResume<O = unknown>(options: RunOptions<O> = {}, more: { limits?: Partial<Limits> } = {}): PreparedTurn<O> {
    const output = options.output ? outputSpecOf(options.output, options.outputName, options.outputFormat) : undefined;
    this.ready();
    const paused = this.paused;
    if (!paused) throw new KeelError("KEEL_NOT_PAUSED", `Session "${this.id}" has no paused turn.`);
    const open = [...paused.requests.values()].filter((r) => !r.answer);
    if (open.length)
      throw new KeelError(
        "KEEL_APPROVAL_PENDING",
        `Turn ${paused.turnId} still waits for ${open.map((r) => `${r.name} (${r.callId})`).join(", ")}.`,
      );
    return (signal, held) =>
      this.start("", withSignal(options, signal), {
        resume: paused,
        ...(output ? { output } : {}),
        ...more,
        ...(held ? { held } : {}),
      }) as Promise<TurnResult<O>>;
  }

  private ready(): void {
    if (this.current) throw new KeelError("KEEL_TURN_BUSY", `Session "${this.id}" is running a turn.`);
    if (this.closed) throw new KeelError("KEEL_AGENT_CLOSED", `Session "${this.id}" is closed.`);
  }

  private async start(
    input: TurnInput,
    options: RunOptions<unknown>,
    extra: {
      resume?: PausedTurn;
      recover?: boolean;
      output?: ReturnType<typeof outputSpecOf>;
      limits?: Partial<Limits>;
      trigger?: "subagent";
      held?: () => void;
    },
  ): Promise<TurnResult> {
    const ctrl = new AbortController();
    this.current = ctrl;
    const outer = options.signal;
    const onAbort = () => ctrl.abort(outer!.reason);
    if (outer?.aborted) ctrl.abort(outer.reason);
    else outer?.addEventListener("abort", onAbort, { once: true });
    // The turn holds the session's lease from before it reads what other instances wrote to its terminal event.
    const { held, ...turnExtra } = extra;
    // recover() keeps the turn it finds open under the lease whatever the agent's `recovery` (its note is renewed when the log moved on).
    if (extra.recover) this.recovering = true;
    const turn = this.hold(
      "turn",
      () => {
        this.recovering = false;
        const checked = this.doorAgain(turnExtra);
        held?.();
        return this.turnUnderLease(input, ctrl.signal, options.metadata ?? {}, checked);
      },
      { signal: ctrl.signal },
    );
    this.running = turn;
    try {
      return await turn;
    } finally {
      if (extra.recover) this.recovering = false;
      this.running = undefined;
      outer?.removeEventListener("abort", onAbort);
      this.current = undefined;
    }
  }

  /**
   * The turn, under the lease: an unfinished one goes on (recover(), or first of all when
   * recovery is "auto" and the log leaves one), then the input's.
   */
  private async turnUnderLease(
    input: TurnInput,
    signal: AbortSignal,
    metadata: Record<string, unknown>,
    checked: Omit<TurnOptions, "metadata"> & { recover?: boolean },
  ): Promise<TurnResult> {
    const { recover, ...rest } = checked;
    if (recover) return runTurn(this, "", signal, { ...rest, metadata, resume: this.takeUnfinished() });
    if (!rest.resume && this.unfinished) {
      const first = await runTurn(this, "", signal, {
        metadata,
        resume: this.takeUnfinished(),
        ...(rest.limits ? { limits: rest.limits } : {}),
      });
      if (first.verdict.status === "paused")
        throw new KeelError(
          "KEEL_APPROVAL_PENDING",
          `Session "${this.id}": the turn a stopped process left unfinished (${first.turnId}) went on first and paused for ${first.pending?.map((p) => `${p.name} (${p.callId})`).join(", ")}. Answer them (approve/deny) and resume() first; this input was not run.`,
        );
    }
    return runTurn(this, input, signal, { ...rest, metadata });
  }

  /** The door checks of run() and resume() once more, on the log as it is now (another instance may have paused or resumed the turn). */
  private doorAgain<T extends { resume?: PausedTurn; recover?: boolean }>(extra: T): T {
    if (extra.recover) {
      if (!this.unfinished)
        throw new KeelError(
          "KEEL_NOT_UNFINISHED",
          `Session "${this.id}" has no unfinished turn any more (another instance finished or ended it).`,
        );
      return extra;
    }
    if (!extra.resume) {
      if (this.paused)
        throw new KeelError(
          "KEEL_APPROVAL_PENDING",
          `Session "${this.id}" has turn ${this.paused.turnId} paused for ${this.paused.requests.size} tool call(s) (another instance paused it): ${[...this.paused.requests.values()].map((r) => `${r.name} (${r.callId})`).join(", ")}. Answer them (approve/deny) and resume() first.`,
        );
      return extra;
    }
    const paused = this.paused;
    if (!paused)
      throw new KeelError(
        "KEEL_NOT_PAUSED",
        `Session "${this.id}" has no paused turn (another instance resumed or ended it).`,
      );
    const open = [...paused.requests.values()].filter((r) => !r.answer);
    if (open.length)
      throw new KeelError(
        "KEEL_APPROVAL_PENDING",
        `Turn ${paused.turnId} still waits for ${open.map((r) => `${r.name} (${r.callId})`).join(", ")}.`,
      );
    return { ...extra, resume: paused };
  }

  /**
   * @internal Run `fn` holding the session's lease: taken (or joined, when this handle holds it
   * already) first, then what other instances wrote since this handle last read is applied, and
   * what this handle emitted meanwhile is written; given back once `fn` settled and every event
   * is written. Contract: throws KEEL_SESSION_BUSY naming the holder when another instance holds
   * it past the wait (`waitMs`, default this handle's), before anything is written.
   */
  async hold<T>(
    kind: LeaseKind,
    fn: () => T | Promise<T>,
    options: { waitMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    await this.acquire(kind, options);
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      // The first failure is the one to tell (a store that stopped a turn fails its last write too).
      await this.unhold().catch(() => undefined);
      throw err;
    }
    await this.unhold();
    return result;
  }

  private async acquire(kind: LeaseKind, options: { waitMs?: number; signal?: AbortSignal }): Promise<void> {
    for (;;) {
      // A hand-off joins whatever this handle holds; a turn joins a turn's (a child's resume within it).
      if (this.holders > 0 && (kind === "handoff" || this.leaseKind === "turn")) {
        this.holders++;
        return;
      }
      if (this.taking) await this.taking.catch(() => undefined);
      else if (this.holders > 0 || this.released) await this.released;
      else break;
    }
    let done!: () => void;
    this.taking = new Promise((r) => (done = r));
    try {
      const store = this.agent.store;
      const lease = await store.lease?.(this.id, {
        ttlMs: this.leasing.ttlMs,
        waitMs: options.waitMs ?? this.leasing.waitMs,
        kind,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(this.leasing.onWait ? { onWait: this.leasing.onWait } : {}),
      });
      try {
        await this.catchUp();
      } catch (err) {
        await lease?.stop().catch(() => undefined);
        throw err;
      }
      this.lease = lease;
      this.leaseKind = kind;
      this.holders = 1;
      this.released = new Promise((r) => (this.release = r));
      // What this handle emitted while it held nothing goes first, numbered after what it just read.
      clearTimeout(this.idleWrite);
      this.idleWrite = undefined;
      const queued = this.outbox.splice(0);
      for (const q of queued) void this.emit(q.data, q.turnId);
      try {
        if (queued.some((q) => q.durable)) await this.write(true);
        // A turn left open by a holder that is gone (this lease was free or taken over) ends here, interrupted,
        // or (recovery "auto") is kept to go on from its log.
        if (this.cursor.open && (this.recovering || this.agent.options.recovery === "auto")) {
          this.noteUnfinished(lease?.takenOver);
          // The takeover is said in the log under this lease: a hold that does not go on with the turn (an
          // idle write, a close) frees the lease after it, and whoever goes on then must still say so.
          if (lease?.takenOver) this.recordTakeover(this.cursor.open, lease.takenOver);
        } else if (this.cursor.open) await this.interruptOpenTurn(lease?.takenOver);
      } catch (err) {
        await this.unhold().catch(() => undefined);
        throw err;
      }
    } finally {
      this.taking = undefined;
      done();
    }
  }

  /** Give back one hold; the last one writes every pending event, then frees the lease. */
  private async unhold(): Promise<void> {
    if (--this.holders > 0) return;
    try {
      // Jobs and background handlers may emit while the batch is written: loop until nothing is left.
      for (;;) {
        await this.write(false);
        while (this.writes) await this.writes;
        if (!this.pending.length) break;
      }
    } finally {
      const lease = this.lease;
      this.lease = undefined;
      this.leaseKind = undefined;
      await lease?.stop().catch(() => undefined);
      const release = this.release;
      this.released = undefined;
      this.release = undefined;
      release?.();
    }
  }

  /** The catch-up in flight: the next one reads after it (two reads from one seq would apply the same events twice). */
  private catching: Promise<void> | undefined;

  /** Apply what other instances wrote since this handle last read. Contract: needs no lease; catch-ups run one at a time. */
  private catchUp(): Promise<void> {
    const before = this.catching;
    const run = (async () => {
      await before?.catch(() => undefined);
      const events = await this.agent.store.events(this.id, { afterSeq: this.seq });
      if (!events.length) return;
      const messages = replay(this, this.cursor, [...this.messages], events);
      this.messages = freezeDeep(messages);
      // What this handle noted as unfinished is stale now: another instance went on with the turn
      // (it may have ended it, or run more calls before it too stopped). The next hold notes it
      // again from the log if it is still open, so a turn is never finished twice, nor a call it
      // started after the note run again.
      this.unfinished = undefined;
    })();
    this.catching = run;
    void run.then(
      () => this.catching === run && (this.catching = undefined),
      () => this.catching === run && (this.catching = undefined),
    );
    return run;
  }

  /**
   * Read what other instances wrote to this session since this handle last read it (their turns,
   * answers, queued messages), so pendingApprovals(), messages and the next turn see it.
   * Contract: needs no lease and writes nothing; does nothing while this handle runs a turn.
   */
  async sync(): Promise<void> {
    if (this.lease || this.taking) return;
    await this.catchUp();
  }

  /** Cancel the running turn, if any. */
  cancel(reason?: unknown): void {
    this.current?.abort(reason ?? new KeelError("KEEL_TURN_ABORTED", "cancel() was called."));
  }

  /** Queue a message for the running turn; it is injected before the next model call and skips tool calls not yet started. */
  async steer(text: string): Promise<void> {
    const queueId = globalThis.crypto.randomUUID();
    await this.emit({ type: "message.queued", queue: "steering", queueId, text }, null, true);
    this.steering.push({ queueId, text });
  }

  /** Queue a message to be handled after the model would otherwise stop. */
  async followUp(text: string): Promise<void> {
    const queueId = globalThis.crypto.randomUUID();
    await this.emit({ type: "message.queued", queue: "follow_up", queueId, text }, null, true);
    this.followUps.push({ queueId, text });
  }

  /** The session's stored events. */
  async events(): Promise<KeelEvent[]> {
    await this.flush();
    return this.agent.store.events(this.id);
  }

  /** Run session.end and detach the session from the agent. */
  async close(options: CloseOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.current)
      this.cancel(
        options.handBack
          ? new KeelError("KEEL_TURN_HANDED_BACK", `Session "${this.id}" was closed to be handed back.`)
          : new KeelError("KEEL_TURN_ABORTED", "The session was closed."),
      );
    await this.running?.catch(() => undefined);
    await this.phase("session.end", { sessionId: this.id, agent: this.agent.name });
    const background = [...this.jobs, ...this.agent.runner.background];
    if (background.length) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((r) => (timer = setTimeout(r, options.graceMs ?? 30_000)));
      await Promise.race([Promise.allSettled(background), grace]);
      clearTimeout(timer);
    }
    // A plain close aborts with one shared reason: an abort() without one builds a DOMException and its stack every time.
    this.life.abort(
      this.jobs.size || this.agent.runner.background.size
        ? new KeelError("KEEL_TURN_ABORTED", "The session was closed.")
        : SESSION_CLOSED,
    );
    await Promise.allSettled([...this.jobs]);
    try {
      // A job's record emitted without a lease waits for another instance's turn to end, within the grace (it would run again
      // if lost); the rest (the open's own records, diagnostics) is written if the session is free now, else dropped.
      const jobRecords = this.outbox.some((q) => q.data.type.startsWith("job."));
      if (!this.lease && this.outbox.length)
        await this.hold("handoff", noop, { waitMs: jobRecords ? (options.graceMs ?? 30_000) : 0 }).catch(
          (err: unknown) => this.lostAtClose(err),
        );
      else await this.flush();
    } finally {
      await this.lease?.stop().catch(() => undefined);
      this.agent.forget(this.id);
    }
  }

  /**
   * Append an event to the log and publish it. Events are written in batches (one
   * transaction) when the loop next waits for I/O; a durable event writes the batch at once.
   * Contract: with `durable`, resolves only once the store reports it on disk; order is kept.
   */
  emit(data: KeelEventData, turnId: string | null, durable = false): Promise<void> | void {
    if (!this.lease && this.agent.store.lease) {
      // No lease held: numbered and written at the next hold (at once, in a hand-off, when durable).
      const entry = { data, turnId, durable };
      this.outbox.push(entry);
      // A durable event whose hold is refused (another instance is running a turn) was not written, and its caller is told so: it is dropped, never written later.
      if (durable)
        return this.hold("handoff", noop).catch((err: unknown) => {
          const at = this.outbox.indexOf(entry);
          if (at >= 0) this.outbox.splice(at, 1);
          throw err;
        });
      // A little later, so what an open emits joins the first turn's hold when one follows at once.
      this.idleWrite ??= unref(setTimeout(this.writeIdle, IDLE_WRITE_MS));
      return;
    }
    const event = { ...data, sessionId: this.id, seq: ++this.seq, ts: Date.now(), turnId } as KeelEvent;
    if (data.type === "turn.started" && turnId) this.lastTurnStart = { turnId, seq: event.seq };
    this.pending.push(event);
    this.agent.publish(event);
    if (durable) return this.write(true);
    this.soon ??= soon(this.writeSoon);
  }

  /** The pending "write soon", cancelled when a write takes the batch first (a loop that never yields would pile them up, each holding the session). */
  private soon: unknown;

  /** The pending write of what was emitted without a lease (cancelled when a hold takes the outbox first). */
  private idleWrite: ReturnType<typeof setTimeout> | undefined;

  /** How long the next try of an idle write waits after another instance refused it (doubles up to 5 s). */
  private idleBackoff = IDLE_WRITE_MS;

  private readonly writeIdle = (): void => {
    this.idleWrite = undefined;
    if (this.lease || this.taking || !this.outbox.length || this.closed) return;
    void this.hold("handoff", noop).then(
      () => (this.idleBackoff = IDLE_WRITE_MS),
      (err: unknown) => {
        if (!isKeelError(err, "KEEL_SESSION_BUSY")) return void (this.writeError ??= err);
        // Another instance is running a turn: try again later, until written (or the session closes, which waits for it).
        this.idleBackoff = Math.min(this.idleBackoff * 2, 5_000);
        if (this.outbox.length && !this.closed) this.idleWrite ??= unref(setTimeout(this.writeIdle, this.idleBackoff));
      },
    );
  };

  /** Events a close could not write (another instance held the session past the grace): reported, since they are lost. */
  private lostAtClose(err: unknown): void {
    if (!isKeelError(err, "KEEL_SESSION_BUSY")) throw err;
    const lost = this.outbox.splice(0);
    const jobs = lost.filter((q) => q.data.type.startsWith("job.")).length;
    if (jobs)
      this.agent.reportFault(
        new KeelError(
          "KEEL_SESSION_BUSY",
          `Closing session "${this.id}": ${lost.length} event(s) (${jobs} job record(s)) could not be written before the close grace ran out, because another instance kept a turn running in it; a job whose record is lost runs again at a later start (jobs are idempotent by their key). ${err instanceof Error ? err.message : ""}`,
        ),
      );
  }

  private readonly writeSoon = (): void => {
    this.soon = undefined;
    try {
      const w = this.write(false);
      if (w) w.catch((err: unknown) => (this.writeError ??= err));
    } catch (err) {
      this.writeError ??= err;
    }
  };

  /** Write the pending batch. Contract: throws (or rejects) with the first store failure seen. */
  private write(durable: boolean): Promise<void> | void {
    if (this.writeError) {
      const err = this.writeError;
      this.writeError = undefined;
      throw err;
    }
    if (this.soon) {
      cancelSoon(this.soon);
      this.soon = undefined;
    }
    if (!this.pending.length) return this.writes ? this.writes.then(() => {}) : undefined;
    const batch = this.pending;
    this.pending = [];
    const store = this.agent.store;
    const lease = this.lease?.owner;
    const options =
      durable || lease ? { ...(durable ? { durable: true } : {}), ...(lease ? { lease } : {}) } : undefined;
    const run = (): void | Promise<void> => {
      if (store.appendMany) return store.appendMany(batch, options);
      let chain: Promise<void> | undefined;
      for (const e of batch) {
        if (chain) chain = chain.then(() => store.append(e, options));
        else {
          const r = store.append(e, options);
          if (r && typeof (r as Promise<void>).then === "function") chain = r as Promise<void>;
        }
      }
      return chain;
    };
    // A batch that fails goes back to the front of the queue, so a later write retries it.
    const failed = (err: unknown): never => {
      this.pending = batch.concat(this.pending);
      throw isKeelError(err)
        ? err
        : new KeelError(
            "KEEL_STORE_FAILED",
            `Writing ${batch.length} event(s) of session "${this.id}" failed: ${errorMessage(err)}.`,
            {},
            { cause: err },
          );
    };
    let w: void | Promise<void>;
    try {
      w = this.writes ? this.writes.then(run) : run();
    } catch (err) {
      return failed(err);
    }
    if (w && typeof (w as Promise<void>).then === "function") {
      const p: Promise<void> = (w as Promise<void>).catch(failed).finally(() => {
        if (this.writes === p) this.writes = undefined;
      });
      this.writes = p;
      return p;
    }
  }

  /**
   * @internal Before a provider call: renew the lease, and throw KEEL_SESSION_BUSY when this
   * process lost it (it stalled past its TTL and another holder took over), so no paid call
   * is made for a session someone else now writes. Then what the turn recorded since its last
   * write (the round's tool results) must be stored: a call whose answer cannot be recorded is
   * paid for and made again, so a failing store stops the turn here (KEEL_STORE_FAILED), before
   * any spend, and it goes on from its log later. No store round-trip when nothing is pending.
   */
  async confirmLease(): Promise<void> {
    const waiting = this.pending.length;
    let what = "its lease could not be confirmed";
    try {
      await this.lease?.confirm();
      if (!this.pending.length && !this.writes && !this.writeError) return;
      what = `${waiting ? `${waiting} event(s) of the turn` : "the turn's last events"} could not be stored`;
      await this.write(false);
      while (this.writes) await this.writes;
    } catch (err) {
      // Lost to another holder: that is the busy session, said as such; any other failure is the store's.
      if (isKeelError(err, "KEEL_SESSION_BUSY")) throw err;
      const cause = isKeelError(err) ? err.problem : errorMessage(err);
      throw new KeelError(
        "KEEL_STORE_FAILED",
        `Session "${this.id}": ${what} before its next model call, so no model call was made (its answer could not have been recorded, and the call would be paid for again): ${cause} What was stored is kept (the user's message included): once the store is back, with the agent's recovery "auto" the turn goes on from its log (\`keel worker\` finishes it), else it is marked interrupted when the session is next used.`,
        isKeelError(err) ? err.location : {},
        { cause: err },
      );
    }
  }

  /** @internal publish a live-only event */
  live(event: LiveEvent): void {
    this.agent.publish(event);
  }

  /** @internal the children point of a turn: one child turn for a tool call (ToolContext.child) */
  runChild<O>(
    turnId: string,
    callId: string,
    signal: AbortSignal,
    options: ChildOptions<O>,
    budget: TurnBudget,
    addToParent: (usage: Usage) => void,
    hold: ChildHold,
  ): Promise<ChildRun<O>> {
    return runChild(this, turnId, callId, signal, options, budget, addToParent, hold);
  }

  /** @internal end a child session this session's paused call waited on */
  abandonChild(sessionId: string): Promise<void> {
    return abandonChild(this, sessionId);
  }

  /**
   * Write every pending event and wait for the store. Contract: rejects with a store failure;
   * events this handle emitted while holding no lease stay queued (for its next hold) when
   * another instance is running a turn in the session.
   */
  async flush(): Promise<void> {
    if (!this.lease && this.outbox.length) {
      await this.hold("handoff", noop).catch((err: unknown) => {
        if (!isKeelError(err, "KEEL_SESSION_BUSY")) throw err;
      });
      return;
    }
    await this.write(false);
    while (this.writes) await this.writes;
  }

  /** Run a session-scoped phase and record it. */
  async phase(phase: "session.start" | "session.end", event: object): Promise<void> {
    if (!this.agent.runner.has(phase)) return;
    // No turn runs, so no wall-time guard: the limit caps each blocking handler here instead (a session.start that never settles cannot hold the session).
    const res = await this.agent.runner.run(
      phase,
      { ...event, phase },
      {
        signal: this.lifetime,
        owner: { session: this, turnId: null },
        backgroundSignal: this.lifetime,
        maxHandlerMs: this.agent.limits.wallTimeMs,
      },
    );
    this.record(res, null);
    this.startJobs(res.contributions, null);
  }

  /** @internal record a phase result: the phase event, then its diagnostics. */
  record(res: PhaseResult, turnId: string | null): void {
    const t = (this.timings.phases[res.phase] ??= { runs: 0, ms: 0 });
    t.runs++;
    t.ms += res.durationMs;
    let notable =
      this.agent.trace === "full" || res.records.length > 0 || res.diagnostics.length > 0 || res.failed !== undefined;
    for (const h of res.handlers) {
      const p = (this.timings.plugins[h.plugin] ??= { calls: 0, ms: 0 });
      p.calls++;
      p.ms += h.durationMs;
      // A handler that contributed is notable even when fast: which plugin built each part of a request must be in the log.
      if (h.status !== "ok" || h.durationMs >= SLOW_HANDLER_MS || h.contributions > 0) notable = true;
    }
    if (notable)
      void this.emit(
        {
          type: "phase.completed",
          phase: res.phase,
          durationMs: Math.round(res.durationMs * 1000) / 1000,
          handlers: [...res.handlers],
          contributions: [...res.records],
        },
        turnId,
      );
    for (const d of res.diagnostics) void this.emit({ type: "diagnostic", ...d }, turnId);
  }

  /** @internal take the timings gathered since the last call (one turn's worth). */
  takeTimings(): TurnTimings {
    const t = this.timings;
    this.timings = { phases: {}, plugins: {} };
    for (const v of [...Object.values(t.phases), ...Object.values(t.plugins)]) v.ms = Math.round(v.ms * 1000) / 1000;
    return t;
  }

  /** @internal a background handler settled after its phase closed */
  backgroundSettled(
    phase: PhaseName,
    turnId: string | null,
    handler: HandlerSummary,
    contributions: Contributed[],
    records: ContributionRecord[],
    diagnostics: PhaseDiagnostic[],
  ): void {
    void this.emit({ type: "phase.background", phase, handler, contributions: records }, turnId);
    for (const d of diagnostics) void this.emit({ type: "diagnostic", ...d }, turnId);
    this.startJobs(contributions, turnId);
  }

  /**
   * @internal Start background jobs, once per idempotency key per session.
   * Contract: never awaited by a turn; each ends in one `job.completed` event.
   */
  startJobs(contributions: readonly Contributed[], turnId: string | null): void {
    for (const { plugin, value } of contributions) {
      if (value.kind !== "background_job") continue;
      const key = value.idempotencyKey;
      if (this.completedJobs.has(key) || this.runningJobs.has(key)) {
        void this.emit(
          {
            type: "job.completed",
            plugin,
            name: value.name,
            idempotencyKey: key,
            status: "skipped_duplicate",
            durationMs: 0,
          },
          turnId,
        );
        continue;
      }
      if (value.durable) {
        startDurableJob(this, plugin, value, turnId);
        continue;
      }
      this.runningJobs.add(key);
      const t0 = performance.now();
      const attempts = value.attempts ?? 1;
      const job = (async () => {
        let r: { status: "ok" | "failed" | "timeout" | "aborted"; error?: string } = { status: "failed" };
        let n = 0;
        while (n < attempts) {
          n++;
          r = await this.runAttempt(plugin, value.name, value.timeoutMs ?? 180_000, (signal) => value.run!(signal));
          if (r.status === "ok" || r.status === "aborted" || n >= attempts) break;
          // A failed or timed-out attempt is retried after a short, growing pause (cut short by close).
          if (!(await this.pause((value.retryDelayMs ?? 1_000) * n))) break;
        }
        this.runningJobs.delete(key);
        if (r.status === "ok") this.completedJobs.add(key);
        void this.emit(
          {
            type: "job.completed",
            plugin,
            name: value.name,
            idempotencyKey: key,
            durationMs: Math.round(performance.now() - t0),
            ...r,
            ...(attempts > 1 ? { attempts: n } : {}),
          },
          turnId,
        );
      })();
      this.trackJob(job);
    }
  }

  /** @internal count a job as running until it settles (close waits for it). */
  trackJob(job: Promise<unknown>): void {
    this.jobs.add(job);
    void job.finally(() => this.jobs.delete(job));
  }

  /** @internal wait `ms`; false when the session closed first. */
  pause(ms: number): Promise<boolean> {
    return new Promise<boolean>((res) => {
      if (this.life.signal.aborted) return res(false);
      const t = setTimeout(() => res(true), ms);
      this.life.signal.addEventListener("abort", () => (clearTimeout(t), res(false)), { once: true });
    });
  }

  /** @internal one attempt of a background job, under its timeout and the session's lifetime. Contract: never rejects. */
  runAttempt(
    plugin: string,
    name: string,
    timeoutMs: number,
    fn: (signal: AbortSignal) => unknown,
  ): Promise<AttemptOutcome> {
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        ctrl.abort();
        reject(new KeelError("KEEL_HANDLER_TIMEOUT", `Background job "${name}" ran past ${timeoutMs} ms.`, { plugin }));
      }, timeoutMs);
    });
    const onClose = () => ctrl.abort(this.life.signal.reason);
    const closed = new Promise<never>((_, reject) => {
      if (this.life.signal.aborted) reject(new KeelError("KEEL_TURN_ABORTED", "The session was closed."));
      this.life.signal.addEventListener(
        "abort",
        () => {
          onClose();
          reject(new KeelError("KEEL_TURN_ABORTED", "The session was closed before the job finished."));
        },
        { once: true },
      );
    });
    const scope = { plugin, phase: `job ${name}` };
    const work = Promise.resolve().then(() =>
      inFaultScope(
        () => scope,
        () => fn(ctrl.signal),
      ),
    );
    let settled = false;
    void work.then(
      () => (settled = true),
      () => (settled = true),
    );
    return Promise.race([work, timeout, closed])
      .then(
        () => ({ status: "ok" as const }),
        (err: unknown) => ({
          status: isKeelError(err, "KEEL_HANDLER_TIMEOUT")
            ? ("timeout" as const)
            : isKeelError(err, "KEEL_TURN_ABORTED")
              ? ("aborted" as const)
              : ("failed" as const),
          error: preview(errorMessage(err)),
        }),
      )
      .finally(() => {
        clearTimeout(timer);
        if (!settled) trackAbandoned(`job ${plugin}/${name}`, work);
      });
  }

  /**
   * Rebuild state from the log. Contract: takes no lease, unless the log ends in a turn that
   * never ended and its holder is gone: that turn is then marked interrupted (a turn another
   * instance is running now is left to it).
   */
  async load(signal?: AbortSignal): Promise<void> {
    const events = await this.agent.store.events(this.id);
    // Deep: events trust a frozen history to be frozen all the way down (callers that append freeze each message).
    this.messages = freezeDeep(replay(this, this.cursor, [], events));
    this.resumed = true;
    if (this.cursor.open) {
      // Running elsewhere (its holder is alive): left alone; the next hold here repairs it if that holder dies.
      await this.hold("handoff", noop, { waitMs: 0, ...(signal ? { signal } : {}) }).catch((err: unknown) => {
        if (!isKeelError(err, "KEEL_SESSION_BUSY")) throw err;
      });
      if (this.unfinished) {
        // Recorded already (with the takeover) when this open's hold took the lease over.
        if (this.takeoverRecorded !== this.unfinished.turnId)
          void this.emit(
            { type: "session.resumed", agent: this.agent.name, unfinishedTurn: this.unfinished.turnId },
            null,
          );
      } else if (this.cursor.open) void this.emit({ type: "session.resumed", agent: this.agent.name }, null);
    } else void this.emit({ type: "session.resumed", agent: this.agent.name }, null);
  }

  /** Under the lease: the open turn's lease was taken over from its holder; said in the log, and kept on the cursor for this handle's next note. */
  private recordTakeover(turnId: string, takenOver: NonNullable<HeldLease["takenOver"]>): void {
    this.cursor.takenOver = { turnId, ...takenOver };
    this.takeoverRecorded = turnId;
    void this.emit(
      { type: "session.resumed", agent: this.agent.name, unfinishedTurn: turnId, leaseTakenOver: { ...takenOver } },
      null,
    );
  }

  /**
   * Under the lease: the turn the log leaves open (its holder is gone) is kept to go on from its log
   * (recovery "auto"), with the takeover this hold made, or else the one the log records since the turn last went on.
   */
  private noteUnfinished(heldTakenOver: HeldLease["takenOver"]): void {
    const c = this.cursor;
    if (this.unfinished?.turnId === c.open) return;
    const recorded = c.takenOver?.turnId === c.open ? c.takenOver : undefined;
    const takenOver =
      heldTakenOver ?? (recorded ? { pid: recorded.pid, host: recorded.host, reason: recorded.reason } : undefined);
    this.unfinished = {
      turnId: c.open!,
      input: c.started?.input ?? "",
      metadata: c.started?.metadata ?? {},
      rounds: c.rounds,
      toolCalls: c.toolCalls,
      requests: new Map(),
      childCalls: new Map(),
      recovery: {
        started: new Map(c.startedArgs),
        children: new Map([...c.callChildren].map(([id, list]) => [id, list.map((x) => ({ ...x }))])),
        ...(takenOver ? { leaseTakenOver: { ...takenOver } } : {}),
      },
    };
  }

  /** The turn whose lease takeover this handle's last hold recorded (session.resumed). */
  private takeoverRecorded: string | undefined;

  /** The unfinished turn, now this handle's to run (the log's open turn is no longer someone else's). */
  private takeUnfinished(): PausedTurn {
    const u = this.unfinished!;
    this.unfinished = undefined;
    this.cursor.open = null;
    // Its turn.resumed says the takeover now; a later note of this turn (handed back again) has its own.
    this.cursor.takenOver = undefined;
    return u;
  }

  /**
   * Under the lease, end the turn the log leaves open (its holder is gone): a call cut off while
   * its child session ran says which session kept the child's work, the turn is marked
   * interrupted (durably), and its child sessions are ended the same way.
   */
  private async interruptOpenTurn(takenOver: HeldLease["takenOver"]): Promise<void> {
    const open = this.cursor.open!;
    this.cursor.open = null;
    void this.emit(
      {
        type: "session.resumed",
        agent: this.agent.name,
        interruptedTurn: open,
        ...(takenOver ? { leaseTakenOver: takenOver } : {}),
      },
      null,
    );
    const cut = this.cursor.children.get(open) ?? [];
    const waiting = new Map(unansweredCalls(this.messages).map((c) => [c.id, c.name]));
    for (const c of [...this.cursor.lastChild.values()].filter((c) => waiting.has(c.callId) && cut.includes(c))) {
      const message = freezeDeep(
        errorResult(
          c.callId,
          waiting.get(c.callId)!,
          `No result: the process stopped before this call returned. Its child session ${c.childSessionId} ("${c.name}") keeps the child's work so far; call the tool again if you still need it.`,
        ),
      );
      this.appendMessage(message);
      await this.emit({ type: "message.appended", message }, open);
    }
    await this.emit(
      {
        type: "turn.interrupted",
        verdict: { status: "interrupted", reason: "process_exit" },
        usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        rounds: 0,
        toolCalls: 0,
      },
      open,
      true,
    );
    // Its child sessions died with it: opening one marks its own open turn interrupted (and its children's).
    for (const id of new Set(cut.map((c) => c.childSessionId))) {
      try {
        const child = await this.agent.session(id);
        // One that paused for approval in the meantime waits for no one now: it ends too.
        await child.abandonPaused("process_exit");
        // With recovery "auto" its open turn was kept to go on: nothing will, its parent's turn ended.
        await child.abandonUnfinished();
        await child.close();
      } catch (err) {
        await this.emit(
          {
            type: "diagnostic",
            level: "warn",
            code: "KEEL_CHILD_INVALID",
            message: `Child session ${id} of the interrupted turn could not be closed: ${headOf(errorMessage(err), 300)}. Open it to repair it.`,
          },
          open,
        );
      }
    }
  }
}

/** A turn's dollar limit: run()'s `maxCostUsd` when it is smaller than the one in force. Contract: throws KEEL_AGENT_OPTIONS_INVALID for a value that is not a positive number. */
function turnBudget(asked: unknown, current: number | undefined): number | undefined {
  if (asked === undefined) return undefined;
  if (typeof asked !== "number" || !(asked > 0) || !Number.isFinite(asked))
    throw new KeelError(
      "KEEL_AGENT_OPTIONS_INVALID",
      `run(): maxCostUsd must be a positive number of dollars (got ${String(asked)}).`,
      {
        path: "maxCostUsd",
      },
    );
  return current !== undefined && current < asked ? current : asked;
}
