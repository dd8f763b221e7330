/**
 * A SessionStore in process memory: for short-lived agents (a Worker request, a browser tab),
 * tests and benchmarks. Nothing survives the process.
 */
import { KeelError } from "@keel/kernel";
import type {
  AppendOptions,
  HeldLease,
  KeelEvent,
  LeaseRequest,
  SessionInfo,
  SessionStore,
  TurnToContinue,
} from "@keel/kernel";
import { takeLease, turnStateChange } from "@keel/store-kit/core";
import type { LeaseClaim, LeaseOutcome, SessionLease, TurnState } from "@keel/store-kit/core";

interface MemorySession {
  info: SessionInfo;
  events: KeelEvent[];
  /** Every seq stored: built at the first append whose seq is not above all others (until then `maxSeq` tells a repeat). */
  seqs: Set<number> | undefined;
  maxSeq: number;
  /** False once an append arrived with a lower seq than the last one. */
  sorted: boolean;
  turnState?: TurnState;
}

/**
 * A SessionStore kept in Maps, with the same semantics and errors as SqliteSessionStore.
 * Contract: `append` is O(1) and stores a frozen shallow copy of the event (nested objects are
 * shared with the caller, so do not mutate them); `events` returns a fresh array of those
 * frozen copies; `durable` is accepted and ignored.
 */
export class MemorySessionStore implements SessionStore {
  readonly #sessions = new Map<string, MemorySession>();
  readonly #leases = new Map<string, SessionLease>();
  #closed = false;

  /** Create an empty session. Contract: an existing id throws KEEL_STORE_FAILED. */
  createSession(info: { id: string; agent: string; createdAt: number }): void {
    this.#assertOpen();
    if (this.#sessions.has(info.id)) {
      throw new KeelError("KEEL_STORE_FAILED", `Session "${info.id}" already exists in the in-memory store.`);
    }
    this.#sessions.set(info.id, {
      info: { id: info.id, agent: info.agent, createdAt: info.createdAt, updatedAt: info.createdAt, eventCount: 0 },
      events: [],
      seqs: undefined,
      maxSeq: Number.NEGATIVE_INFINITY,
      sorted: true,
    });
  }

  /** The session, or undefined when the id is unknown. */
  getSession(id: string): SessionInfo | undefined {
    this.#assertOpen();
    const session = this.#sessions.get(id);
    return session === undefined ? undefined : { ...session.info };
  }

  /** Sessions, most recently updated first (ties: most recently created first). */
  listSessions(options: { agent?: string; limit?: number } = {}): SessionInfo[] {
    this.#assertOpen();
    const out: SessionInfo[] = [];
    for (const s of this.#sessions.values())
      if (options.agent === undefined || s.info.agent === options.agent) out.push({ ...s.info });
    // Map order is creation order; reverse it so the stable sort breaks ties newest-first.
    out.reverse().sort((a, b) => b.updatedAt - a.updatedAt);
    const limit = options.limit;
    return limit === undefined || limit < 0 ? out : out.slice(0, limit);
  }

  /** Append one event (see the class contract). */
  /** Append events in order (see SessionStore.appendMany). Contract: stops at the first failing event. */
  appendMany(events: readonly KeelEvent[], options?: AppendOptions): void {
    for (const e of events) this.append(e, options);
  }

  append(event: KeelEvent, options?: AppendOptions): void {
    this.#assertOpen();
    if (options?.lease !== undefined && this.#leases.get(event.sessionId)?.owner !== options.lease) {
      throw new KeelError(
        "KEEL_SESSION_BUSY",
        `This holder no longer holds the lease of session "${event.sessionId}"; nothing more was written.`,
      );
    }
    const session = this.#sessions.get(event.sessionId);
    if (session === undefined) {
      throw new KeelError(
        "KEEL_SESSION_NOT_FOUND",
        `Cannot append event ${event.seq} (${event.type}): no session "${event.sessionId}" in the in-memory store.`,
      );
    }
    if (!(event.seq > session.maxSeq) && (session.seqs ??= new Set(session.events.map((e) => e.seq))).has(event.seq)) {
      throw new KeelError(
        "KEEL_SESSION_BUSY",
        `Session "${event.sessionId}" already has an event with seq ${event.seq} in the in-memory store; two writers are appending to the same session (one of them without its lease).`,
      );
    }
    const last = session.events[session.events.length - 1];
    if (last !== undefined && event.seq < last.seq) session.sorted = false;
    session.seqs?.add(event.seq);
    if (event.seq > session.maxSeq) session.maxSeq = event.seq;
    session.events.push(Object.freeze({ ...event }));
    session.info.eventCount++;
    if (event.ts > session.info.updatedAt) session.info.updatedAt = event.ts;
    const change = turnStateChange(event);
    if (change && "set" in change) session.turnState = change.set;
    else if (change && session.turnState === "paused") session.turnState = "answered";
  }

  /** Sessions whose turn should go on (SessionStore.unfinished), oldest update first. */
  unfinished(options: { agent?: string; limit?: number } = {}): TurnToContinue[] {
    this.#assertOpen();
    const out: TurnToContinue[] = [];
    for (const s of this.#sessions.values())
      if (
        (s.turnState === "running" || s.turnState === "answered") &&
        (!options.agent || s.info.agent === options.agent)
      ) {
        const l = this.#leases.get(s.info.id);
        out.push({
          sessionId: s.info.id,
          agent: s.info.agent,
          state: s.turnState,
          updatedAt: s.info.updatedAt,
          ...(l ? { holder: { owner: l.owner, pid: l.pid, host: l.host, expiresAt: l.expiresAt } } : {}),
        });
      }
    out.sort((a, b) => a.updatedAt - b.updatedAt);
    return options.limit === undefined || options.limit < 0 ? out : out.slice(0, options.limit);
  }

  /** The session's events in `seq` order, those after `afterSeq` when given; empty for an unknown session. */
  events(sessionId: string, options?: { afterSeq?: number }): KeelEvent[] {
    this.#assertOpen();
    const session = this.#sessions.get(sessionId);
    if (session === undefined) return [];
    if (!session.sorted) {
      session.events.sort((a, b) => a.seq - b.seq);
      session.sorted = true;
    }
    const afterSeq = options?.afterSeq;
    if (afterSeq === undefined) return session.events.slice();
    return session.events.filter((e) => e.seq > afterSeq);
  }

  /** Every session's events of `types`, by session then seq. */
  eventsOfType(types: readonly string[]): KeelEvent[] {
    this.#assertOpen();
    const want = new Set(types);
    const out: KeelEvent[] = [];
    for (const id of [...this.#sessions.keys()].sort())
      for (const e of this.events(id)) if (want.has(e.type)) out.push(e);
    return out;
  }

  /** Take the session's lease and keep it renewed (SessionStore.lease, over the primitives below). */
  lease(sessionId: string, request: LeaseRequest): Promise<HeldLease> {
    return takeLease(this, sessionId, request);
  }

  /** Take the session's lease (LeasePrimitives.acquireLease). */
  acquireLease(sessionId: string, claim: LeaseClaim): LeaseOutcome {
    this.#assertOpen();
    const held = this.#leases.get(sessionId);
    const now = Date.now();
    if (held && held.owner !== claim.owner && held.expiresAt > now && held.owner !== claim.replaces)
      return { acquired: false, holder: { ...held } };
    const lease: SessionLease = {
      sessionId,
      owner: claim.owner,
      pid: claim.pid,
      host: claim.host,
      acquiredAt: held?.owner === claim.owner ? held.acquiredAt : now,
      expiresAt: now + claim.ttlMs,
    };
    this.#leases.set(sessionId, lease);
    return held && held.owner !== claim.owner
      ? { acquired: true, lease: { ...lease }, previous: held }
      : { acquired: true, lease: { ...lease } };
  }

  /** Extend `owner`'s lease; false when it no longer holds it. */
  renewLease(sessionId: string, owner: string, ttlMs: number): boolean {
    this.#assertOpen();
    const held = this.#leases.get(sessionId);
    if (held?.owner !== owner) return false;
    held.expiresAt = Math.max(held.expiresAt, Date.now() + ttlMs);
    return true;
  }

  /** Drop `owner`'s lease (idempotent). */
  releaseLease(sessionId: string, owner: string): void {
    this.#assertOpen();
    if (this.#leases.get(sessionId)?.owner === owner) this.#leases.delete(sessionId);
  }

  /** Drop every session. Contract: idempotent; later calls throw KEEL_STORE_FAILED. */
  close(): void {
    this.#closed = true;
    this.#sessions.clear();
    this.#leases.clear();
  }

  #assertOpen(): void {
    if (this.#closed) throw new KeelError("KEEL_STORE_FAILED", "The in-memory session store is closed.");
  }
}
