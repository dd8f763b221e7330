import {
  errorMessage,
  holderIsDead,
  isKeelError,
  isTerminalEvent,
  isTransientStoreError,
  KeelError,
  sessionsWithPendingJobs,
} from "@keel/agent";
import type { Agent, KeelEvent, Session, TurnResult, TurnToContinue } from "@keel/agent";

/**
 * What a worker does, as it happens. `claimed`: it holds the session and continues its turn;
 * `finished`: the turn ended (any verdict, `paused` included); `skipped`: not its to take now
 * (`busy`: a live instance runs it; `child`: its parent's recovery continues it; `not_ready`:
 * a paused turn still waits for an answer; `gone`: another worker finished it first);
 * `failed`: the session could not be continued (unreadable, corrupt), reported by id, and the
 * worker goes on with the others; `handed_back`: stopping, the turn was left for the next worker.
 */
export type WorkerEvent =
  | { type: "claimed"; sessionId: string; state: TurnToContinue["state"]; turnId: string }
  | { type: "finished"; sessionId: string; turnId: string; verdict: TurnResult["verdict"]; ms: number }
  | { type: "skipped"; sessionId: string; reason: "busy" | "child" | "not_ready" | "gone" }
  | { type: "failed"; sessionId: string; code: string; message: string }
  | { type: "handed_back"; sessionId: string; turnId: string }
  /** Durable jobs (memory extraction and the like) left pending in the session were run. */
  | { type: "jobs"; sessionId: string; ms: number }
  /** An item of a work source (e.g. an orphaned goal run) ran; `outcome` says how it ended. */
  | { type: "work"; source: string; id: string; outcome: string; ms: number }
  /**
   * The store failed with an error that passes by itself (connection refused or reset, a
   * terminated backend, SQLITE_BUSY, a timeout): told once when failing starts; the worker
   * waits `backoffMs` (growing, with jitter, up to `maxBackoffMs`) and tries again.
   */
  | { type: "store_unavailable"; code: string; message: string; lastPollAt?: number; backoffMs: number }
  /** The store answers again after `failures` failed attempts over `downMs`: told once. */
  | { type: "store_recovered"; downMs: number; failures: number };

/**
 * A worker's health, as `health()` reads it. Contract: `state` is `ok` while the store
 * answers, `retrying` from its first transient failure until a poll succeeds again, `stopped`
 * once the worker returned; `lastPollAt` is the last successful poll (epoch ms);
 * `backoffMs` is the wait before the next attempt (0 when healthy).
 */
export interface WorkerHealth {
  state: "starting" | "ok" | "retrying" | "stopped";
  lastPollAt?: number;
  consecutiveFailures: number;
  backoffMs: number;
  /** Since when the store has been failing (epoch ms), while retrying. */
  failingSince?: number;
  /** The last transient failure, while retrying. */
  lastError?: { code: string; message: string };
  /** What the worker did so far. */
  report: WorkerReport;
}

/** A running worker (startWorker). Contract: `done` never rejects on a transient store error. */
export interface WorkerHandle {
  /** Resolves with the report once the worker stopped (signal, or one pass with `once`). */
  readonly done: Promise<WorkerReport>;
  /** The worker's health now (a copy). */
  health(): WorkerHealth;
}

/**
 * More work a worker takes besides turns: a plugin's own durable work (e.g. @keel/plugin-goals'
 * orphaned goal runs). Contract: `claim` returns items this worker now owns (the source claims
 * them atomically, so two workers never run one), at most `limit`; an item's `run` resolves
 * with a short outcome and may be cut by `signal` (the worker stopping).
 */
export interface WorkSource {
  name: string;
  claim(
    agent: Agent,
    limit: number,
  ): Promise<Array<{ id: string; sessionId?: string; run(signal: AbortSignal): Promise<string> }>>;
}

/** Options of runWorker. */
export interface WorkerOptions {
  /** The agent whose sessions are continued; its `recovery` must be `"auto"` (a manual agent marks such turns interrupted on open). */
  agent: Agent;
  /** How often the store is asked for work (default 1 s). */
  intervalMs?: number;
  /** Turns continued at once (default 4). */
  concurrency?: number;
  /**
   * How long a session must have been quiet before it is taken (default: the agent's lease TTL).
   * A live holder renews its lease within it; a quiet pause lets the host that answered an
   * approval resume it itself.
   */
  minIdleMs?: number;
  /** One pass over the work there is, then return when it is done (a cron job). */
  once?: boolean;
  /** Stops claiming; running turns get `graceMs` to end, then are handed back unfinished. */
  signal?: AbortSignal;
  /** How long running turns may take to end once `signal` aborts (default 30 s). */
  graceMs?: number;
  /** More work than turns (orphaned goal runs, …), claimed each pass. */
  sources?: readonly WorkSource[];
  /** How often pending durable jobs are looked for (default 10 s; they are scanned across sessions). */
  jobsEveryMs?: number;
  /** The longest wait between attempts while the store fails with transient errors (default 30 s). */
  maxBackoffMs?: number;
  /** Each step, for logs and traces. Contract: a listener that throws is ignored. */
  onEvent?: (event: WorkerEvent) => void;
}

/** What a worker did. Contract: counts of the events it reported. */
export interface WorkerReport {
  passes: number;
  finished: number;
  failed: number;
  handedBack: number;
}

/** The default poll interval. */
const INTERVAL_MS = 1_000;

/** The default cap of the wait between attempts while the store fails. */
const MAX_BACKOFF_MS = 30_000;

/** Sessions asked for per pass, at most. */
const PAGE = 200;

/**
 * Run a worker until `signal` aborts (or one pass with `once`).
 * Contract: never runs a turn another live instance holds (the session lease decides); a
 * session that fails is reported and skipped, never stops the worker; a transient store error
 * (isTransientStoreError) is retried with backoff, never ends it (a turn it cut is taken again
 * once the store answers); any other failure to poll the store rejects; resolves with the
 * report once every turn it started has ended or been handed back.
 */
export async function runWorker(options: WorkerOptions): Promise<WorkerReport> {
  return startWorker(options).done;
}

/**
 * Start a worker (as runWorker) and keep a handle on it: `health()` says whether the store
 * answers, when it last did, and how long the worker waits before its next attempt.
 * Contract: throws KEEL_AGENT_OPTIONS_INVALID at once for an agent whose recovery is not "auto".
 */
export function startWorker(options: WorkerOptions): WorkerHandle {
  const { agent } = options;
  if (agent.options.recovery !== "auto")
    throw new KeelError(
      "KEEL_AGENT_OPTIONS_INVALID",
      `A worker needs an agent with recovery: "auto" (agent "${agent.name}" has ${JSON.stringify(agent.options.recovery ?? "manual")}); a manual agent would mark the turns it opens interrupted instead of finishing them.`,
      { path: "recovery" },
    );
  const w = new Worker(options);
  const done = w.run();
  return { done, health: () => w.health() };
}

class Worker {
  readonly report: WorkerReport = { passes: 0, finished: 0, failed: 0, handedBack: 0 };
  private readonly running = new Map<string, { session?: Session; done: Promise<void> }>();
  /** Sessions skipped as not this worker's (a child, an unanswered pause), with the update they were skipped at. */
  private readonly passed = new Map<string, number>();
  /**
   * Sessions whose continuation a transient store error cut, with the turn and when it was taken: taken
   * again at the next pass, not after minIdleMs; one gone from the list ended (perhaps by this worker's
   * own write whose answer the outage lost) and is reported from its terminal event.
   */
  private readonly cut = new Map<string, { turnId?: string; t0: number }>();
  private readonly options: WorkerOptions;
  private readonly agent: Agent;
  private readonly concurrency: number;
  private readonly minIdleMs: number;
  private readonly stopping = new AbortController();
  private jobsAt = 0;
  private state: WorkerHealth["state"] = "starting";
  private lastPollAt: number | undefined;
  private failures = 0;
  private failingSince: number | undefined;
  private lastError: { code: string; message: string } | undefined;
  private backoffMs = 0;
  private lastThrown: unknown;
  private onceFailingSince: number | undefined;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.agent = options.agent;
    this.concurrency = Math.max(1, options.concurrency ?? 4);
    this.minIdleMs = options.minIdleMs ?? options.agent.options.lease?.ttlMs ?? 30_000;
  }

  async run(): Promise<WorkerReport> {
    const { signal } = this.options;
    try {
      while (!signal?.aborted) {
        try {
          await this.pass();
        } catch (err) {
          // A store that is down for a moment is waited for; anything else (refused credentials, no such database) ends the worker.
          if (!isTransientStoreError(err)) throw err;
          this.storeFailed(err);
        }
        if (this.options.once && !this.failures) break;
        // One pass (a cron job): a store that stays down past the longest backoff is reported, not waited for forever.
        if (this.options.once && Date.now() - (this.onceFailingSince ??= Date.now()) > this.maxBackoff())
          throw this.lastThrown;
        await sleep(this.failures ? this.backoffMs : (this.options.intervalMs ?? INTERVAL_MS), signal);
      }
      await this.settle();
      return this.report;
    } finally {
      this.state = "stopped";
    }
  }

  health(): WorkerHealth {
    return {
      state: this.state,
      ...(this.lastPollAt !== undefined ? { lastPollAt: this.lastPollAt } : {}),
      consecutiveFailures: this.failures,
      backoffMs: this.failures ? this.backoffMs : 0,
      ...(this.failingSince !== undefined ? { failingSince: this.failingSince } : {}),
      ...(this.lastError ? { lastError: { ...this.lastError } } : {}),
      report: { ...this.report },
    };
  }

  /** A transient store failure: told once when failing starts; the next attempt waits longer (jittered, capped). */
  private storeFailed(err: unknown): void {
    this.failures++;
    this.lastThrown = err;
    const base = Math.max(1, this.options.intervalMs ?? INTERVAL_MS);
    const full = Math.min(this.maxBackoff(), base * 2 ** Math.min(this.failures - 1, 30));
    // Equal jitter: workers that lost the store together do not all come back at one moment.
    this.backoffMs = Math.round(full / 2 + (Math.random() * full) / 2);
    this.lastError = { code: isKeelError(err) ? err.code : "KEEL_STORE_FAILED", message: errorMessage(err) };
    if (this.state === "retrying") return;
    this.state = "retrying";
    this.failingSince = Date.now();
    this.emit({
      type: "store_unavailable",
      ...this.lastError,
      ...(this.lastPollAt !== undefined ? { lastPollAt: this.lastPollAt } : {}),
      backoffMs: this.backoffMs,
    });
  }

  private maxBackoff(): number {
    return Math.max(1, this.options.intervalMs ?? INTERVAL_MS, this.options.maxBackoffMs ?? MAX_BACKOFF_MS);
  }

  /** The store answered: told once after failures. */
  private storeAnswered(): void {
    this.lastPollAt = Date.now();
    if (this.state === "retrying")
      this.emit({
        type: "store_recovered",
        downMs: Date.now() - (this.failingSince ?? Date.now()),
        failures: this.failures,
      });
    this.state = "ok";
    this.failures = 0;
    this.backoffMs = 0;
    this.failingSince = undefined;
    this.lastError = undefined;
  }

  /** One look at the store: every candidate not taken yet is started, up to the concurrency. */
  private async pass(): Promise<void> {
    this.report.passes++;
    const store = this.agent.store;
    if (!store.unfinished) return this.storeAnswered();
    const now = Date.now();
    const list = await store.unfinished({ agent: this.agent.name, limit: PAGE });
    this.storeAnswered();
    // A cut turn no longer listed has ended: said from its terminal event, then no longer this worker's to hurry.
    if (this.cut.size)
      for (const [id, cut] of [...this.cut]) if (!list.some((c) => c.sessionId === id)) await this.ended(id, cut);
    for (const c of list) {
      if (this.options.signal?.aborted) return;
      // A turn whose holder died on this host is taken at once; others once quiet for minIdleMs (a live holder renews within it).
      // So is one this worker let go when the store failed under it (its own lease was dropped or is a dead owner's).
      const dead = c.state === "running" && c.holder !== undefined && holderIsDead(c.holder);
      if (!dead && !this.cut.has(c.sessionId) && now - c.updatedAt < this.minIdleMs) continue;
      if (this.passed.get(c.sessionId) === c.updatedAt) continue;
      await this.slot(c.sessionId, (slot) => this.take(c, slot));
    }
    await this.pendingJobs();
    for (const source of this.options.sources ?? []) await this.fromSource(source);
    if (this.options.once) await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /** Start `fn` in a free slot under `key` (waits for one); skipped when `key` already runs, unless `after` (then it waits for it). */
  private async slot(key: string, fn: (slot: { session?: Session }) => Promise<void>, after = false): Promise<void> {
    while (after && this.running.has(key)) await this.running.get(key)!.done;
    if (this.running.has(key)) return;
    while (this.running.size >= this.concurrency) await Promise.race([...this.running.values()].map((r) => r.done));
    const slot: { session?: Session; done: Promise<void> } = { done: Promise.resolve() };
    slot.done = fn(slot)
      .catch(() => undefined)
      .finally(() => this.running.delete(key));
    this.running.set(key, slot);
  }

  /** Sessions with durable jobs left pending: opened (which adopts their jobs), then closed once the jobs ended. */
  private async pendingJobs(): Promise<void> {
    if (!this.options.once && Date.now() - this.jobsAt < (this.options.jobsEveryMs ?? 10_000)) return;
    this.jobsAt = Date.now();
    let ids: string[];
    try {
      ids = await sessionsWithPendingJobs(this.agent);
    } catch (err) {
      return this.failed("(jobs)", err);
    }
    for (const id of ids)
      await this.slot(id, async (slot) => {
        const t0 = Date.now();
        try {
          slot.session = await this.agent.session(id, { waitMs: 0 });
          await slot.session.close({ graceMs: this.options.graceMs ?? 30_000 });
          this.emit({ type: "jobs", sessionId: id, ms: Date.now() - t0 });
        } catch (err) {
          await slot.session?.close().catch(() => undefined);
          this.failed(id, err);
        }
      });
  }

  /** The items a source has for this worker now. */
  private async fromSource(source: WorkSource): Promise<void> {
    let items: Awaited<ReturnType<WorkSource["claim"]>>;
    try {
      items = await source.claim(this.agent, Math.max(1, this.concurrency - this.running.size));
    } catch (err) {
      return this.failed(`(${source.name})`, err);
    }
    // An item in a session waits for the session's own work (its unfinished turn) and keeps the session to itself.
    for (const item of items)
      await this.slot(
        item.sessionId ?? `${source.name}:${item.id}`,
        async () => {
          const t0 = Date.now();
          try {
            const outcome = await item.run(this.stopping.signal);
            this.emit({ type: "work", source: source.name, id: item.id, outcome, ms: Date.now() - t0 });
          } catch (err) {
            this.failed(`${source.name}:${item.id}`, err);
          }
        },
        true,
      );
  }

  /** Claim one session and continue its turn. Contract: never rejects. */
  private async take(c: TurnToContinue, slot: { session?: Session }): Promise<void> {
    let session: Session | undefined;
    let skipped = false;
    let turnId: string | undefined;
    const t0 = Date.now();
    try {
      session = await this.agent.session(c.sessionId, { waitMs: 0 });
      slot.session = session;
      if (session.parentLink && session.unfinished && (await this.parentDone(session))) {
        // A child left running whose parent turn has ended: no one will go on with it; it ends interrupted.
        const turnId = session.unfinished.turnId;
        await session.abandonUnfinished();
        this.report.finished++;
        return this.emit({
          type: "finished",
          sessionId: c.sessionId,
          turnId,
          verdict: { status: "interrupted", reason: "process_exit" },
          ms: 0,
        });
      }
      const why = this.notMine(session, c);
      if (why) {
        // Not retried until the session changes (a child waits for its parent; a pause for its answers).
        skipped = why !== "busy";
        return this.emit({ type: "skipped", sessionId: c.sessionId, reason: why });
      }
      turnId = (c.state === "running" ? session.unfinished : session.pendingApprovals()[0])!.turnId;
      this.emit({ type: "claimed", sessionId: c.sessionId, state: c.state, turnId });
      const result = c.state === "running" ? await session.recover() : await session.resume();
      if (result.verdict.status === "interrupted" && result.verdict.reason === "handed_back") {
        this.report.handedBack++;
        return this.emit({ type: "handed_back", sessionId: c.sessionId, turnId });
      }
      this.report.finished++;
      this.emit({ type: "finished", sessionId: c.sessionId, turnId, verdict: result.verdict, ms: Date.now() - t0 });
      this.cut.delete(c.sessionId);
    } catch (err) {
      if (isTransientStoreError(err)) this.cut.set(c.sessionId, { turnId, t0: this.cut.get(c.sessionId)?.t0 ?? t0 });
      else this.cut.delete(c.sessionId);
      this.failed(c.sessionId, err);
    } finally {
      await session?.close().catch(() => undefined);
      // Remembered as of after this open's own record (session.resumed), so it alone never makes the session look changed.
      if (skipped) {
        const after = await Promise.resolve(this.agent.store.getSession(c.sessionId)).catch(() => undefined);
        this.passed.set(c.sessionId, after?.updatedAt ?? c.updatedAt);
      }
    }
  }

  /**
   * A cut turn that left the list: its terminal event, when there is one, is reported as `finished`
   * (the store may have kept the turn's end though the outage lost its answer to this worker).
   * Contract: never rejects; a store that still fails keeps the session cut for the next pass.
   */
  private async ended(sessionId: string, cut: { turnId?: string; t0: number }): Promise<void> {
    if (cut.turnId === undefined) return void this.cut.delete(sessionId);
    let events: readonly KeelEvent[];
    try {
      events = await this.agent.store.events(sessionId);
    } catch (err) {
      if (isTransientStoreError(err)) return;
      events = [];
    }
    this.cut.delete(sessionId);
    const end = events.findLast((e) => e.turnId === cut.turnId && isTerminalEvent(e));
    if (!end || !("verdict" in end) || end.type === "turn.paused") return;
    this.report.finished++;
    this.emit({ type: "finished", sessionId, turnId: cut.turnId, verdict: end.verdict, ms: Date.now() - cut.t0 });
  }

  /** True when the parent turn that started this child session has ended (completed, failed or interrupted). */
  private async parentDone(session: Session): Promise<boolean> {
    const link = session.parentLink!;
    const events = await this.agent.store.events(link.sessionId);
    const end = events.findLast(
      (e) => e.turnId === link.turnId && (e.type === "turn.started" || e.type === "turn.resumed" || isTerminalEvent(e)),
    );
    return end !== undefined && isTerminalEvent(end) && end.type !== "turn.paused";
  }

  /** Why this session is not the worker's to continue now, if so. */
  private notMine(session: Session, c: TurnToContinue): "busy" | "child" | "not_ready" | undefined {
    if (session.parentLink) return "child";
    if (c.state === "running") return session.unfinished ? undefined : "busy";
    const pending = session.pendingApprovals();
    return pending.length && pending.every((p) => p.answer) ? undefined : "not_ready";
  }

  private failed(sessionId: string, err: unknown): void {
    // The store, not the session: nothing is reported against it; it is taken again once the store answers.
    if (isTransientStoreError(err)) return this.storeFailed(err);
    if (isKeelError(err, "KEEL_SESSION_BUSY")) return this.emit({ type: "skipped", sessionId, reason: "busy" });
    if (isKeelError(err, "KEEL_NOT_UNFINISHED") || isKeelError(err, "KEEL_NOT_PAUSED"))
      return this.emit({ type: "skipped", sessionId, reason: "gone" });
    this.report.failed++;
    const code = isKeelError(err) ? err.code : "KEEL_STORE_FAILED";
    this.emit({ type: "failed", sessionId, code, message: errorMessage(err) });
  }

  /** Once stopping: running turns get the grace to end, then are handed back unfinished. */
  private async settle(): Promise<void> {
    const all = () => Promise.all([...this.running.values()].map((r) => r.done));
    if (!this.running.size) return;
    if (await within(all(), this.options.graceMs ?? 30_000)) return;
    this.stopping.abort(new KeelError("KEEL_TURN_HANDED_BACK", "The worker is stopping."));
    await Promise.all(
      [...this.running.values()].map((r) => r.session?.close({ handBack: true }).catch(() => undefined)),
    );
    await all();
  }

  private emit(event: WorkerEvent): void {
    try {
      this.options.onEvent?.(event);
    } catch {
      // A listener's failure is its own; the worker goes on.
    }
  }
}

/** Wait `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** True when `work` settled within `ms`. */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => (t = setTimeout(r, ms, false)));
  try {
    return await Promise.race([work.then(() => true as const), late]);
  } finally {
    clearTimeout(t);
  }
}
