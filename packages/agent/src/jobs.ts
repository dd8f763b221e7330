/**
 * Durable background jobs: a `background_job` with `durable: true` is recorded as
 * `job.pending` in the session log before it runs, each attempt as `job.started`, and it
 * settles with `job.completed` (ok, or failed once its attempts, counted across restarts,
 * are used up). Work cut short by a close is `job.deferred`; a session that is resumed, or
 * any session opened later by the same store, re-runs what is still pending (by key): another
 * session adopts a job once it was deferred, its process (same host) is gone, or its timeout passed.
 */
import type { AttemptOutcome, HostAgent as Agent, HostSession as Session } from "./host-types.ts";
import type { ContributionOf } from "@keel/kernel";
import { errorMessage, KeelError, preview } from "@keel/kernel";
import type { KeelEvent, KeelEventData } from "@keel/kernel";
import type { Message } from "@keel/kernel";
import { freezeDeep, messageText } from "@keel/kernel";
import type { JobContext, JobTurn } from "@keel/kernel";
import { jobKey } from "@keel/kernel";
import type { HeldLease } from "@keel/kernel";
import { DEFAULT_LEASE } from "@keel/kernel";
import { PROCESS_ID, processGone, processInstance, thisHost } from "@keel/store-kit/core";

/** The types of the events a durable job leaves in the log. */
export const JOB_EVENT_TYPES = ["job.pending", "job.started", "job.deferred", "job.completed"] as const;

/** Longest JSON a durable job's payload may have: references, not content. */
export const MAX_JOB_PAYLOAD_CHARS = 4096;

/** Attempts of a durable job when its contribution gives none (counted across restarts). */
export const DEFAULT_DURABLE_ATTEMPTS = 3;

/** What a `job.pending` event records. */
export type JobRecord = Extract<KeelEventData, { type: "job.pending" }>;

/** What the log says about one key. */
interface KeyState {
  record: JobRecord & { sessionId: string; seq: number; ts: number; turnId: string | null };
  started: number;
  /** The process that ran the last attempt. */
  runner?: { pid: number; host: string; instance?: string };
  lastTs: number;
  deferred: boolean;
  settled: boolean;
}

/** Fold job events (one session's or every session's) into the state of each key. */
export function jobStates(events: readonly KeelEvent[]): Map<string, KeyState> {
  const out = new Map<string, KeyState>();
  const settled = new Set<string>();
  for (const e of events) {
    if (e.type === "job.completed") {
      if (e.status === "ok" || e.status === "failed" || e.status === "timeout") settled.add(e.idempotencyKey);
      continue;
    }
    if (e.type !== "job.pending" && e.type !== "job.started" && e.type !== "job.deferred") continue;
    let s = out.get(e.idempotencyKey);
    if (e.type === "job.pending" && !s) {
      s = { record: e, started: 0, lastTs: e.ts, deferred: false, settled: false };
      out.set(e.idempotencyKey, s);
    }
    if (!s) continue;
    s.lastTs = Math.max(s.lastTs, e.ts);
    if (e.type === "job.started") {
      s.started = Math.max(s.started, e.attempt);
      s.deferred = false;
      if (e.pid !== undefined && e.host !== undefined)
        s.runner = { pid: e.pid, host: e.host, ...(e.instance !== undefined ? { instance: e.instance } : {}) };
      else delete s.runner;
    } else if (e.type === "job.deferred") s.deferred = true;
  }
  for (const [k, s] of out) s.settled = settled.has(k);
  return out;
}

/** Why a durable job's payload cannot be recorded, or undefined when it can. Contract: never throws. */
export function payloadProblem(payload: unknown): string | undefined {
  if (payload === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (err) {
    return `its payload cannot be serialized: ${preview(errorMessage(err), 200)}`;
  }
  if (json === undefined) return "its payload is not JSON";
  if ([...json].length > MAX_JOB_PAYLOAD_CHARS)
    return `its payload is ${[...json].length} chars of JSON, over ${MAX_JOB_PAYLOAD_CHARS}`;
  return undefined;
}

/** Read a turn back from a session's log. Contract: frozen; undefined when the turn is not there. */
export async function readJobTurn(
  session: Session,
  sessionId: string,
  turnId: string | null,
): Promise<JobTurn | undefined> {
  if (!turnId) return undefined;
  if (sessionId === session.id) await session.flush();
  // The usual case (the turn that just ended, in this process) reads from its start only.
  const from =
    sessionId === session.id && session.lastTurnStart?.turnId === turnId
      ? { afterSeq: session.lastTurnStart.seq - 1 }
      : undefined;
  const events = await session.agent.store.events(sessionId, from);
  let input: string | undefined;
  let metadata: Record<string, unknown> = {};
  const messages: Message[] = [];
  for (const e of events) {
    if (e.turnId !== turnId) continue;
    if (e.type === "turn.started") {
      input = e.input;
      metadata = e.metadata ?? {};
    } else if (e.type === "message.appended") messages.push(e.message);
  }
  if (input === undefined) return undefined;
  let finalText = "";
  for (const m of messages) if (m.role === "assistant") finalText = messageText(m) || finalText;
  return freezeDeep({ turnId, input, metadata, messages, finalText });
}

/**
 * Record and run one durable job contribution in `session`.
 * Contract: never throws; a job without a registered runner or with a bad payload is
 * reported (diagnostic) and neither recorded nor run.
 */
export function startDurableJob(
  session: Session,
  plugin: string,
  value: ContributionOf<"background_job">,
  turnId: string | null,
): void {
  const key = value.idempotencyKey;
  const runner = session.agent.registry.jobs.get(jobKey(plugin, value.name));
  const reject = (code: "KEEL_JOB_RUNNER_MISSING" | "KEEL_JOB_PAYLOAD_INVALID", problem: string) => {
    const message = new KeelError(code, `Durable job "${value.name}" (${key}): ${problem}.`, { plugin }).message;
    void session.emit({ type: "diagnostic", level: "error", code, message, plugin }, turnId);
  };
  if (!runner) return reject("KEEL_JOB_RUNNER_MISSING", `no runner is registered under "${value.name}"`);
  const problem = payloadProblem(value.payload);
  if (problem) return reject("KEEL_JOB_PAYLOAD_INVALID", problem);
  if (!session.agent.claimJob(key)) {
    void session.emit(
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
    return;
  }
  const record: JobRecord = {
    type: "job.pending",
    plugin,
    name: value.name,
    idempotencyKey: key,
    ...(value.payload !== undefined ? { payload: JSON.parse(JSON.stringify(value.payload)) as unknown } : {}),
    attempts: value.attempts ?? DEFAULT_DURABLE_ATTEMPTS,
    timeoutMs: value.timeoutMs ?? 180_000,
    retryDelayMs: value.retryDelayMs ?? 1_000,
  };
  // Not awaited here: the record joins the batch the turn's terminal event writes durably.
  void session.emit(record, turnId);
  session.trackJob(runDurable(session, record, { sessionId: session.id, turnId }, 0, false, turnId));
}

/**
 * Re-run what the log leaves pending: this session's own jobs, and (when the store can list
 * them) other sessions' jobs that were deferred, or whose last attempt is older than their
 * timeout (the process that ran them is gone).
 * Contract: never throws; each key runs in at most one session of this agent at a time.
 */
export async function recoverJobs(session: Session): Promise<void> {
  const agent = session.agent;
  if (agent.registry.jobs.size === 0) return;
  let events: readonly KeelEvent[];
  try {
    events = agent.store.eventsOfType
      ? await agent.store.eventsOfType(JOB_EVENT_TYPES)
      : (await agent.store.events(session.id)).filter((e) => (JOB_EVENT_TYPES as readonly string[]).includes(e.type));
  } catch (err) {
    void session.emit(
      {
        type: "diagnostic",
        level: "warn",
        code: "KEEL_STORE_FAILED",
        message: new KeelError(
          "KEEL_STORE_FAILED",
          `Pending jobs could not be listed: ${preview(errorMessage(err), 200)}.`,
        ).message,
      },
      null,
    );
    return;
  }
  const now = Date.now();
  for (const [key, s] of jobStates(events)) {
    if (s.settled || !agent.registry.jobs.has(jobKey(s.record.plugin, s.record.name))) continue;
    const own = s.record.sessionId === session.id;
    const origin = s.record.origin ?? { sessionId: s.record.sessionId, turnId: s.record.turnId };
    if (!own && !s.deferred && now - s.lastTs < s.record.timeoutMs && !runnerGone(s.runner)) continue;
    if (!own && !(await sameAgent(session, s.record.sessionId))) continue;
    if (!agent.claimJob(key)) continue;
    // Another process may have read the same log at the same moment: the key's claim (a lease
    // named after it, in the same store) lets one of them run it; the winner reads the key's
    // state again, so a run that settled or started since the read above is seen.
    const claim = await claimAcrossProcesses(session, key);
    const fresh = claim === false ? undefined : await stateAfterClaim(agent.store, key, s);
    if (!fresh || fresh.settled) {
      if (claim) await claim.stop().catch(() => undefined);
      agent.releaseJob(key);
      continue;
    }
    const { sessionId: _s, seq: _q, ts: _t, turnId: _u, ...data } = s.record;
    const record: JobRecord = { ...data, type: "job.pending", origin };
    if (!own) void session.emit(record, null);
    const run = runDurable(session, record, origin, fresh.started, true, own ? s.record.turnId : null);
    // The claim is freed only once the outcome (job.completed or job.deferred) is on disk.
    session.trackJob(
      claim
        ? run.finally(() =>
            session
              .flush()
              .catch(() => undefined)
              .then(() => claim.stop())
              .catch(() => undefined),
          )
        : run,
    );
  }
}

/**
 * Sessions of `agent` with durable jobs left pending and running nowhere (deferred, past their
 * timeout, or their process gone), oldest first: opening one adopts its jobs (recoverJobs),
 * which is how a worker (`keel worker`) runs them. Contract: empty when the agent registers no
 * durable job or the store cannot list job records; never lists another agent's sessions.
 */
export async function sessionsWithPendingJobs(agent: Agent): Promise<string[]> {
  if (agent.registry.jobs.size === 0 || !agent.store.eventsOfType) return [];
  const now = Date.now();
  const out: string[] = [];
  for (const s of jobStates(await agent.store.eventsOfType(JOB_EVENT_TYPES)).values()) {
    if (s.settled || !agent.registry.jobs.has(jobKey(s.record.plugin, s.record.name))) continue;
    if (!s.deferred && now - s.lastTs < s.record.timeoutMs && !runnerGone(s.runner)) continue;
    const id = s.record.sessionId;
    if (!out.includes(id) && (await agent.store.getSession(id))?.agent === agent.name) out.push(id);
  }
  return out;
}

/**
 * Claim a durable job's key for this process across processes: the store's lease on
 * `job:<key>`. Contract: undefined when the store has no leases (one process only), false when
 * a live process holds the key (or the store failed), else the held claim (stop() frees it).
 */
async function claimAcrossProcesses(session: Session, key: string): Promise<HeldLease | false | undefined> {
  try {
    return await session.agent.store.lease?.(`job:${key}`, {
      ttlMs: session.agent.options.lease?.ttlMs ?? DEFAULT_LEASE.ttlMs,
      waitMs: 0,
      kind: "turn",
    });
  } catch {
    return false;
  }
}

/** The key's state read again once it is claimed (undefined when it cannot be read). */
async function stateAfterClaim(
  store: Session["agent"]["store"],
  key: string,
  before: KeyState,
): Promise<KeyState | undefined> {
  if (!store.eventsOfType) return before;
  try {
    return jobStates(await store.eventsOfType(JOB_EVENT_TYPES)).get(key);
  } catch {
    return undefined;
  }
}

/**
 * True when the attempt ran in a process of this machine that no longer exists (it was
 * killed), including an earlier process that had this process's pid (a restarted container).
 */
function runnerGone(runner: KeyState["runner"]): boolean {
  if (!runner || runner.host !== thisHost()) return false;
  if (runner.pid === PROCESS_ID) return runner.instance !== undefined && runner.instance !== processInstance();
  return processGone(runner.pid);
}

/** True when `sessionId` belongs to the same agent (by name) as `session`: only its jobs are adopted. */
async function sameAgent(session: Session, sessionId: string): Promise<boolean> {
  try {
    return (await session.agent.store.getSession(sessionId))?.agent === session.agent.name;
  } catch {
    return false;
  }
}

/** Run the attempts a job has left; record each, and how it ended. */
async function runDurable(
  session: Session,
  record: JobRecord,
  origin: { sessionId: string; turnId: string | null },
  used: number,
  recovered: boolean,
  turnId: string | null,
): Promise<void> {
  const { plugin, name, idempotencyKey: key } = record;
  const agent = session.agent;
  const t0 = performance.now();
  const tried = { n: used };
  try {
    // Let the caller's synchronous continuation (the turn's terminal event) reach the log first.
    await Promise.resolve();
    const r = await attemptJob(session, record, origin, tried, recovered, turnId);
    const n = tried.n;
    const unfinished = { sessionId: origin.sessionId, plugin, name, idempotencyKey: key, attempts: n };
    if (r.status === "aborted") {
      const reason = r.error ?? "the session was closed";
      void session.emit({ type: "job.deferred", plugin, name, idempotencyKey: key, attempts: n, reason }, turnId);
      agent.unfinishedJobs.push({ status: "pending", ...unfinished });
      return;
    }
    const status = r.status === "ok" ? "ok" : "failed";
    const durationMs = Math.round(performance.now() - t0);
    const error = r.error ? { error: r.error } : {};
    void session.emit(
      { type: "job.completed", plugin, name, idempotencyKey: key, status, durationMs, attempts: n, ...error },
      turnId,
    );
    if (status === "ok") return void session.completedJobs.add(key);
    const message = new KeelError(
      "KEEL_JOB_FAILED",
      `Durable job "${name}" (${key}) failed after ${n} attempt(s): ${r.error ?? "unknown error"}.`,
      { plugin },
    ).message;
    void session.emit({ type: "diagnostic", level: "error", code: "KEEL_JOB_FAILED", message, plugin }, turnId);
    agent.unfinishedJobs.push({ status: "failed", ...unfinished, ...error });
  } catch (err) {
    // The store failed (the job.started record could not be written): the job stays pending.
    agent.unfinishedJobs.push({
      status: "pending",
      sessionId: origin.sessionId,
      plugin,
      name,
      idempotencyKey: key,
      attempts: tried.n,
      error: preview(errorMessage(err), 200),
    });
  } finally {
    agent.releaseJob(key);
  }
}

/** The attempts left, each recorded as job.started before it runs; `tried.n` counts them. */
async function attemptJob(
  session: Session,
  record: JobRecord,
  origin: { sessionId: string; turnId: string | null },
  tried: { n: number },
  recovered: boolean,
  turnId: string | null,
): Promise<AttemptOutcome> {
  const { plugin, name, idempotencyKey: key } = record;
  const agent = session.agent;
  const runner = agent.registry.jobs.get(jobKey(plugin, name))!;
  let r: AttemptOutcome = {
    status: "failed",
    error: `gave up after ${tried.n} attempt(s) (the last was cut short by a restart)`,
  };
  while (tried.n < record.attempts) {
    const attempt = ++tried.n;
    const where = { pid: PROCESS_ID, host: thisHost(), instance: processInstance() };
    await session.emit({ type: "job.started", plugin, name, idempotencyKey: key, attempt, ...where }, turnId, true);
    r = await session.runAttempt(plugin, name, record.timeoutMs, (signal) => {
      const ctx: JobContext = Object.freeze({
        plugin,
        name,
        idempotencyKey: key,
        sessionId: origin.sessionId,
        turnId: origin.turnId,
        attempt,
        recovered,
        signal,
        model: agent.runner.model,
        turn: () => readJobTurn(session, origin.sessionId, origin.turnId),
      });
      return runner(record.payload, ctx);
    });
    if (r.status === "ok" || r.status === "aborted" || tried.n >= record.attempts) break;
    if (!(await session.pause(record.retryDelayMs * tried.n)))
      return { status: "aborted", error: "the session was closed" };
  }
  return r;
}
