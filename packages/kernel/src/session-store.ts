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
export interface SessionStore {
  createSession(info: { id: string; agent: string; createdAt: number }): void | Promise<void>;
  getSession(id: string): SessionInfo | undefined | Promise<SessionInfo | undefined>;
  listSessions(options?: { agent?: string; limit?: number }): SessionInfo[] | Promise<SessionInfo[]>;
  append(event: KeelEvent, options?: { durable?: boolean }): void | Promise<void>;
  /**
   * Append several events of one session atomically (one transaction), in order.
   * Contract: all or nothing; with `durable: true` the whole batch is on disk when it returns.
   * Optional: without it the kernel calls `append` once per event.
   */
  appendMany?(events: readonly KeelEvent[], options?: { durable?: boolean }): void | Promise<void>;
  events(sessionId: string, options?: { afterSeq?: number }): KeelEvent[] | Promise<KeelEvent[]>;
  /**
   * Every session's events of the given types, by session then seq (durable jobs use it to
   * find work left pending by another session or process). Optional: without it, pending
   * jobs re-run only when their own session is resumed.
   */
  eventsOfType?(types: readonly string[]): KeelEvent[] | Promise<KeelEvent[]>;
  close(): void | Promise<void>;
}
