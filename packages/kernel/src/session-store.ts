import type { KeelEvent } from "./events.ts";

/** A session as the store lists it. */
export interface SessionInfo {
  id: string;
  agent: string;
  createdAt: number;
  updatedAt: number;
  eventCount: number;
}

/**
 * Where sessions live. The default is SQLite (sqlite-store.ts); tests and benchmarks may use
 * the in-memory store; a PostgreSQL store implements the same interface.
 * Contract: `append` keeps the order of calls; when it returns (or its promise resolves) with
 * `durable: true` the event survives a process kill; `events` returns events in `seq` order.
 */
/**
 * The database a store keeps sessions in, so an agent's plugins keep their own data beside it.
 * Contract: `sqlite`: files (plugins use SQLite files in the agent's home); `postgres`: a
 * PostgreSQL database given by `url` or an opaque `pool` (a `pg.Pool`), tables in `schema`.
 */
export type StoreDatabase = { readonly kind: "sqlite" } | { readonly kind: "postgres"; readonly url?: string; readonly pool?: unknown; readonly schema?: string };

export interface SessionStore {
  /** Where this store keeps sessions. Optional: a store that does not say has its agent's plugins use SQLite files in its home. */
  readonly database?: StoreDatabase;
  createSession(info: { id: string; agent: string; createdAt: number }): void | Promise<void>;
  getSession(id: string): SessionInfo | undefined | Promise<SessionInfo | undefined>;
  listSessions(options?: { agent?: string; limit?: number }): SessionInfo[] | Promise<SessionInfo[]>;
  append(event: KeelEvent, options?: AppendOptions): void | Promise<void>;
  /**
   * Append several events of one session atomically (one transaction), in order.
   * Contract: all or nothing; with `durable: true` the whole batch is on disk when it returns.
   * Optional: without it the kernel calls `append` once per event.
   */
  appendMany?(events: readonly KeelEvent[], options?: AppendOptions): void | Promise<void>;
  events(sessionId: string, options?: { afterSeq?: number }): KeelEvent[] | Promise<KeelEvent[]>;
  /**
   * Every session's events of the given types, by session then seq (durable jobs use it to
   * find work left pending by another session or process). Optional: without it, pending
   * jobs re-run only when their own session is resumed.
   */
  eventsOfType?(types: readonly string[]): KeelEvent[] | Promise<KeelEvent[]>;
  close(): void | Promise<void>;
  /**
   * Take the session's lease (one writer per session), atomically in one write transaction.
   * Contract: succeeds when there is no lease, the lease is already `claim.owner`'s, it
   * expired (`expiresAt <= now`), or its owner is `claim.replaces`; otherwise returns the
   * holder and changes nothing. Optional: a store without leases lets every writer in.
   */
  acquireLease?(sessionId: string, claim: LeaseClaim): LeaseOutcome | Promise<LeaseOutcome>;
  /** Push the lease's expiry to now + `ttlMs`. Contract: false (and no change) when `owner` no longer holds it. */
  renewLease?(sessionId: string, owner: string, ttlMs: number): boolean | Promise<boolean>;
  /** Drop the lease if `owner` holds it. Contract: idempotent; never drops another owner's lease. */
  releaseLease?(sessionId: string, owner: string): void | Promise<void>;
}

/** Who holds a session and until when. Contract: `expiresAt` is epoch ms; `host` is os.hostname(). */
export interface SessionLease {
  sessionId: string;
  owner: string;
  pid: number;
  host: string;
  acquiredAt: number;
  expiresAt: number;
}

/** A request for a session's lease. */
export interface LeaseClaim {
  /** A fresh id per holder (one per open Session object). */
  owner: string;
  pid: number;
  host: string;
  ttlMs: number;
  /** Take the lease from this owner even before it expires (its process is known to be dead). */
  replaces?: string;
}

/**
 * The answer to a claim. Contract: `acquired: true` carries the new lease and, when another
 * owner held it before (expired or replaced), that `previous` lease; `acquired: false` carries
 * the live `holder`.
 */
export type LeaseOutcome = { acquired: true; lease: SessionLease; previous?: SessionLease } | { acquired: false; holder: SessionLease };

/**
 * Options of an append. Contract: with `lease`, the store appends only while that owner holds
 * the session's lease (else KEEL_SESSION_BUSY and nothing is written): a writer whose lease was
 * taken over after it stalled cannot interleave with the new holder.
 */
export interface AppendOptions {
  durable?: boolean;
  lease?: string;
}
