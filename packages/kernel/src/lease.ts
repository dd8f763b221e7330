/**
 * Session leases: one writer per session while it runs a turn (or makes a short hand-off: an
 * approval answer, a job's record), so a second writer is refused (KEEL_SESSION_BUSY) or waits
 * before it writes anything, and a crashed holder's dangling turn is marked interrupted only
 * once its lease is free. Reading a session needs no lease.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { KeelError } from "./errors.ts";
import type { SessionLease, SessionStore } from "./session-store.ts";

/**
 * How sessions are leased. Contract: `ttlMs` (default 30 s) is how long a lease outlives its
 * last heartbeat (renewed every third of it); `waitMs` (default 0: refuse at once) is how long
 * opening a held session waits for the lease.
 */
export interface LeaseOptions {
  ttlMs?: number;
  waitMs?: number;
}

export const DEFAULT_LEASE = { ttlMs: 30_000, waitMs: 0 } as const;

/**
 * How long a claim waits for a lease held for a hand-off (whatever its own `waitMs`): a hand-off
 * writes a few events and lets go, so a turn starting at that moment waits instead of failing.
 */
export const HANDOFF_WAIT_MS = 5_000;

/** What a lease is held for: a turn, or a short hand-off. It is the owner id's prefix, so every holder can tell. */
export type LeaseKind = "turn" | "handoff";

/** Why a lease was taken from another holder. */
export type TakeoverReason = "expired" | "holder_dead";

/**
 * A held lease. Contract: `confirm()` throws KEEL_SESSION_BUSY when another holder took it
 * over; it renews the lease unless the store confirmed it less than a third of the TTL ago (no
 * one can have taken it since); `stop()` ends the heartbeat and releases the lease (idempotent).
 */
export interface HeldLease {
  owner: string;
  confirm(): Promise<void>;
  /** The holder before us, when we took the lease over from a crashed or stalled one. */
  takenOver?: { pid: number; host: string; reason: TakeoverReason };
  stop(): Promise<void>;
}

/**
 * The lease owners this process holds, shared by every copy of the kernel module loaded in it
 * (a config loaded through jiti may bring its own).
 */
const LIVE_OWNERS: Set<string> = ((globalThis as Record<symbol, unknown>)[Symbol.for("keel.liveLeaseOwners")] ??= new Set<string>()) as Set<string>;

/**
 * This process's id for the records it leaves (a durable job's attempts): a pid alone cannot
 * tell this process from a killed one that had the same pid (a container's PID 1 restarted).
 */
export const PROCESS_INSTANCE: string = ((globalThis as Record<symbol, unknown>)[Symbol.for("keel.processInstance")] ??= randomUUID()) as string;

let host: string | undefined;
/** This machine's name (os.hostname(), read once: the call is a system call, and a session open needs it). */
export function thisHost(): string {
  return (host ??= hostname());
}

/**
 * True when the lease's process is known to be gone: same host, and no such (living) pid, or
 * this very pid but an owner this process does not hold (an earlier process with our pid,
 * e.g. a container's PID 1 that was killed and restarted).
 */
export function holderIsDead(lease: SessionLease): boolean {
  if (lease.host !== thisHost()) return false;
  if (lease.pid === process.pid) return !LIVE_OWNERS.has(lease.owner);
  try {
    process.kill(lease.pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
  // A killed child its parent has not reaped yet still answers signal 0; it is a zombie.
  try {
    const stat = readFileSync(`/proc/${lease.pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return false;
  }
}

function describe(lease: SessionLease): string {
  const left = Math.max(0, lease.expiresAt - Date.now());
  const what = lease.owner.startsWith("handoff:") ? "writing to it" : "running a turn";
  return `process ${lease.pid} on ${lease.host}, ${what} (since ${new Date(lease.acquiredAt).toISOString()}, lease good for ${Math.ceil(left / 1000)} s more unless renewed)`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Take the lease of `sessionId` and keep it renewed until `stop()`.
 * Contract: resolves undefined when the store has no leases; throws KEEL_SESSION_BUSY naming
 * the holder when it is alive after `waitMs`; a holder whose process is gone (same host) or
 * whose lease expired is replaced at once. `onWait` is told once when waiting starts.
 */
export async function takeLease(
  store: SessionStore,
  sessionId: string,
  options: { ttlMs: number; waitMs: number; signal?: AbortSignal; onWait?: (holder: SessionLease) => void; kind?: LeaseKind },
): Promise<HeldLease | undefined> {
  if (!store.acquireLease) return undefined;
  const claim = { owner: `${options.kind ?? "turn"}:${randomUUID()}`, pid: process.pid, host: thisHost(), ttlMs: options.ttlMs };
  const t0 = Date.now();
  const deadline = t0 + options.waitMs;
  let delay = 25;
  let told = false;
  for (;;) {
    options.signal?.throwIfAborted();
    let issued = Date.now();
    let out = await store.acquireLease(sessionId, claim);
    if (!out.acquired && holderIsDead(out.holder)) {
      issued = Date.now();
      out = await store.acquireLease(sessionId, { ...claim, replaces: out.holder.owner });
    }
    if (out.acquired) {
      const prev = out.previous;
      return keep(store, sessionId, claim.owner, options.ttlMs, prev ? { pid: prev.pid, host: prev.host, reason: prev.expiresAt <= out.lease.acquiredAt ? "expired" : "holder_dead" } : undefined, issued);
    }
    const holder = out.holder;
    const now = Date.now();
    const until = holder.owner.startsWith("handoff:") ? Math.max(deadline, t0 + HANDOFF_WAIT_MS) : deadline;
    if (now >= until) {
      throw new KeelError("KEEL_SESSION_BUSY", `Session "${sessionId}" is in use by ${describe(holder)}; nothing was written${now > t0 ? ` after waiting ${now - t0} ms` : ""}.`);
    }
    if (!told) {
      told = true;
      options.onWait?.(holder);
    }
    await sleep(Math.max(1, Math.min(delay, until - now, holder.expiresAt - now + 5)), options.signal);
    delay = Math.min(delay * 2, 500);
  }
}

function keep(store: SessionStore, sessionId: string, owner: string, ttlMs: number, takenOver: HeldLease["takenOver"], issued: number): HeldLease {
  let stopped = false;
  let failures = 0;
  /** When the store's last confirmation of this lease was asked for: until a third of the TTL later no one can have taken it. */
  let renewedAt = issued;
  LIVE_OWNERS.add(owner);
  const timer = setInterval(() => {
    // A failed renewal (a busy disk) is retried at the next beat, three times in a row at most
    // (a closed store); a lost lease is caught by confirm() and the store's append fence.
    // The lease runs from when the renewal was sent, not from when its reply was handled (a stall in between must not look fresh).
    const issued = Date.now();
    void Promise.resolve()
      .then(() => store.renewLease?.(sessionId, owner, ttlMs))
      .then((held) => {
        failures = 0;
        if (held === false) clearInterval(timer);
        else renewedAt = Math.max(renewedAt, issued);
      })
      .catch(() => {
        if (++failures >= 3) clearInterval(timer);
      });
  }, Math.max(10, Math.floor(ttlMs / 3)));
  timer.unref();
  return {
    owner,
    ...(takenOver ? { takenOver } : {}),
    async confirm() {
      if (stopped) return;
      // Taken or renewed moments ago (the common case, a turn's rounds): a takeover needs the lease to expire or this process to die, so no write is needed.
      const now = Date.now();
      if (now - renewedAt < ttlMs / 3) return;
      if ((await store.renewLease?.(sessionId, owner, ttlMs)) !== false) renewedAt = now;
      else {
        clearInterval(timer);
        throw new KeelError("KEEL_SESSION_BUSY", `This process lost the lease of session "${sessionId}" (it stalled past its ${ttlMs} ms lease and another holder took over); no further model call is made.`);
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      LIVE_OWNERS.delete(owner);
      await store.releaseLease?.(sessionId, owner);
    },
  };
}
