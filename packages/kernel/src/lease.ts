/**
 * Session leases as the kernel sees them: one writer per session while it runs a turn (or makes a
 * short hand-off: an answer, a job's record); reading needs none. The protocol is the store's
 * (SessionStore.lease; @keel/store-kit implements it for Keel's stores).
 */

/**
 * How sessions are leased. Contract: `ttlMs` (default 30 s) is how long a lease outlives its
 * last heartbeat (renewed every third of it); `waitMs` (default 0: refuse at once) is how long a
 * turn or an answer waits for a session another instance is running a turn in.
 */
export interface LeaseOptions {
  ttlMs?: number;
  waitMs?: number;
}

export const DEFAULT_LEASE = { ttlMs: 30_000, waitMs: 0 } as const;

/** What a lease is held for: a turn, or a short hand-off. It is the owner id's prefix, so every holder can tell. */
export type LeaseKind = "turn" | "handoff";

/** Who holds a lease, as a waiter is told. */
export interface LeaseHolder {
  pid: number;
  host: string;
  expiresAt: number;
}

/** What a handle asks of the store when it takes a session's lease. */
export interface LeaseRequest {
  ttlMs: number;
  waitMs: number;
  kind: LeaseKind;
  signal?: AbortSignal;
  /** Told once when the session is held by another live writer and the claim starts waiting. */
  onWait?: (holder: LeaseHolder) => void;
}

/**
 * A held lease. Contract: `confirm()` throws KEEL_SESSION_BUSY when another holder took it
 * over; it renews the lease unless the store confirmed it less than a third of the TTL ago (no
 * one can have taken it since); `stop()` ends the heartbeat and releases the lease (idempotent).
 */
export interface HeldLease {
  owner: string;
  confirm(): Promise<void>;
  /** The holder before us, when we took the lease over from a crashed or stalled one. */
  takenOver?: { pid: number; host: string; reason: "expired" | "holder_dead" };
  stop(): Promise<void>;
}
