import type { KeelEvent } from "./events.ts";
import type { HeldLease, LeaseRequest } from "./lease.ts";

/** A session whose turn should go on (SessionStore.unfinished). Contract: `updatedAt` is its last append. */
export interface TurnToContinue {
  sessionId: string;
  agent: string;
  state: "running" | "answered";
  updatedAt: number;
  /**
   * Who holds the session's lease, when one is recorded (a store that keeps leases says): a
   * worker takes a turn whose holder is a dead process on its own host at once, instead of
   * waiting for the session to go quiet. `expiresAt` is epoch ms.
   */
  holder?: { owner: string; pid: number; host: string; expiresAt: number };
}

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
 * Where the agent a plugin is set up in keeps its data.
 * Contract: a plugin's default files go under `home`; with `database.kind === "postgres"` its
 * tables go in that database and schema; a plugin never reads KEEL_HOME or KEEL_DATABASE_URL.
 */
export interface AgentStorage {
  /** The agent's home folder, absolute (empty where the runtime has no file system). */
  readonly home: string;
  readonly database: StoreDatabase;
}

/**
 * The database a store keeps sessions in, so an agent's plugins keep their own data beside it.
 * Contract: `sqlite`: files (plugins use SQLite files in the agent's home); `postgres`: a
 * PostgreSQL database given by `url` or an opaque `pool` (a `pg.Pool`), tables in `schema`.
 */
export type StoreDatabase =
  | { readonly kind: "sqlite" }
  | { readonly kind: "postgres"; readonly url?: string; readonly pool?: unknown; readonly schema?: string };

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
  /**
   * Sessions whose turn should go on, oldest update first: `running`, a turn that has not ended
   * (running now, or left by a stopped process: the lease tells which), and `answered`, a paused
   * turn a person answered since. Contract: kept with each append, in the same transaction.
   * Optional: without it a worker (`keel worker`) finds nothing to continue in this store.
   */
  unfinished?(options?: { agent?: string; limit?: number }): TurnToContinue[] | Promise<TurnToContinue[]>;
  close(): void | Promise<void>;
  /**
   * Take the session's lease (one writer at a time) and keep it renewed until `stop()`.
   * Contract: throws KEEL_SESSION_BUSY naming the holder when another live writer holds it past
   * `request.waitMs`; a holder whose process is gone or whose lease expired is taken over.
   * Optional: a store without leases lets every writer in (one writer per store, then).
   * Keel's stores implement it with @keel/store-kit's takeLease.
   */
  lease?(sessionId: string, request: LeaseRequest): Promise<HeldLease>;
}

/**
 * Options of an append. Contract: with `lease`, the store appends only while that owner holds
 * the session's lease (else KEEL_SESSION_BUSY and nothing is written): a writer whose lease was
 * taken over after it stalled cannot interleave with the new holder.
 */
export interface AppendOptions {
  durable?: boolean;
  lease?: string;
}
