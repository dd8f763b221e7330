/**
 * The client side of Keel's lease protocol, for every store that keeps leases (SQLite,
 * PostgreSQL, memory): take a session's lease through the store's three primitives (acquire,
 * renew, release), keep it renewed, and take it over from a holder that died or stalled. A
 * store's `lease()` (SessionStore.lease) is `takeLease(this, id, request)`.
 */
import { KeelError } from "@keel/kernel";
import { PROCESS_ID, processGone, thisHost } from "./runtime.ts";
import type { HeldLease, LeaseRequest } from "@keel/kernel";

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
  /** A fresh id per holder (`turn:<uuid>` or `handoff:<uuid>`: what it is held for). */
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
export type LeaseOutcome =
  | { acquired: true; lease: SessionLease; previous?: SessionLease }
  | { acquired: false; holder: SessionLease };

/**
 * A store's lease primitives.
 * Contract: `acquireLease` succeeds, atomically, when there is no lease, it is `claim.owner`'s
 * already, it expired (`expiresAt <= now`), or its owner is `claim.replaces`; otherwise it returns
 * the holder and changes nothing. `renewLease` pushes the expiry to now + `ttlMs` and is false
 * (no change) when `owner` no longer holds it. `releaseLease` drops it if `owner` holds it
 * (idempotent, never another owner's).
 */
export interface LeasePrimitives {
  acquireLease(sessionId: string, claim: LeaseClaim): LeaseOutcome | Promise<LeaseOutcome>;
  renewLease(sessionId: string, owner: string, ttlMs: number): boolean | Promise<boolean>;
  releaseLease(sessionId: string, owner: string): void | Promise<void>;
}

/**
 * How long a claim waits for a lease held for a hand-off (whatever its own `waitMs`): a hand-off
 * writes a few events and lets go, so a turn starting at that moment waits instead of failing.
 */
export const HANDOFF_WAIT_MS = 5_000;

/**
 * The lease owners this process holds, shared by every copy of the kernel module loaded in it
 * (a config loaded through jiti may bring its own).
 */
const LIVE_OWNERS: Set<string> = ((globalThis as Record<symbol, unknown>)[Symbol.for("keel.liveLeaseOwners")] ??=
  new Set<string>()) as Set<string>;

/**
 * True when the lease's process is known to be gone: same host, and no such (living) pid, or
 * this very pid but an owner this process does not hold (an earlier process with our pid,
 * e.g. a container's PID 1 that was killed and restarted).
 */
export function holderIsDead(lease: Pick<SessionLease, "host" | "pid" | "owner">): boolean {
  if (lease.host !== thisHost()) return false;
  if (lease.pid === PROCESS_ID) return !LIVE_OWNERS.has(lease.owner);
  return processGone(lease.pid);
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
 * Contract: throws KEEL_SESSION_BUSY naming
 * the holder when it is alive after `waitMs`; a holder whose process is gone (same host) or
 * whose lease expired is replaced at once. `onWait` is told once when waiting starts.
 */
export async function takeLease(store: LeasePrimitives, sessionId: string, options: LeaseRequest): Promise<HeldLease> {
  const claim = {
    owner: `${options.kind}:${globalThis.crypto.randomUUID()}`,
    pid: PROCESS_ID,
    host: thisHost(),
    ttlMs: options.ttlMs,
  };
  const t0 = Date.now();
  const deadline = t0 + options.waitMs;
  let delay = 25;
  let told = false;
  // The owner is this process's from its first claim: the store may hold it before its answer is back here,
  // and another claim of this process that read it then must see a live holder, not a dead predecessor.
  LIVE_OWNERS.add(claim.owner);
  let kept = false;
  try {
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
        kept = true;
        return keep(
          store,
          sessionId,
          claim.owner,
          options.ttlMs,
          prev
            ? {
                pid: prev.pid,
                host: prev.host,
                reason: prev.expiresAt <= out.lease.acquiredAt ? "expired" : "holder_dead",
              }
            : undefined,
          issued,
        );
      }
      const holder = out.holder;
      const now = Date.now();
      const until = holder.owner.startsWith("handoff:") ? Math.max(deadline, t0 + HANDOFF_WAIT_MS) : deadline;
      if (now >= until) {
        throw new KeelError(
          "KEEL_SESSION_BUSY",
          `Session "${sessionId}" is in use by ${describe(holder)}; nothing was written${now > t0 ? ` after waiting ${now - t0} ms` : ""}.`,
        );
      }
      if (!told) {
        told = true;
        options.onWait?.(holder);
      }
      await sleep(Math.max(1, Math.min(delay, until - now, holder.expiresAt - now + 5)), options.signal);
      delay = Math.min(delay * 2, 500);
    }
  } finally {
    // Not taken (busy, aborted, the store failed): a lease left with this owner is no living holder's.
    if (!kept) LIVE_OWNERS.delete(claim.owner);
  }
}

/** A held lease's next renewal. */
interface Beat {
  due: number;
  run(): void;
}

/**
 * One timer for every lease this process holds: a turn adds its beat and removes it without
 * touching a timer (most turns end long before a renewal is due); the timer fires at the
 * earliest due beat and is not re-armed once no beat is left.
 */
const beats = new Set<Beat>();
let ticker: NodeJS.Timeout | undefined;
let tickAt = Number.POSITIVE_INFINITY;

function arm(at: number): void {
  clearTimeout(ticker);
  tickAt = at;
  ticker = setTimeout(tick, Math.max(10, at - Date.now()));
  (ticker as { unref?: () => void }).unref?.();
}

function tick(): void {
  ticker = undefined;
  tickAt = Number.POSITIVE_INFINITY;
  const now = Date.now();
  let next = Number.POSITIVE_INFINITY;
  for (const b of beats) {
    if (b.due <= now) b.run();
    if (beats.has(b)) next = Math.min(next, b.due);
  }
  if (next < Number.POSITIVE_INFINITY) arm(next);
}

function schedule(b: Beat): void {
  beats.add(b);
  if (!ticker || b.due < tickAt) arm(b.due);
}

function keep(
  store: LeasePrimitives,
  sessionId: string,
  owner: string,
  ttlMs: number,
  takenOver: HeldLease["takenOver"],
  issued: number,
): HeldLease {
  let stopped = false;
  let failures = 0;
  /** When the store's last confirmation of this lease was asked for: until a third of the TTL later no one can have taken it. */
  let renewedAt = issued;
  const period = Math.max(10, Math.floor(ttlMs / 3));
  LIVE_OWNERS.add(owner);
  const beat: Beat = {
    due: issued + period,
    run() {
      // A failed renewal (a busy disk) is retried at the next beat, three times in a row at most
      // (a closed store); a lost lease is caught by confirm() and the store's append fence.
      // The lease runs from when the renewal was sent, not from when its reply was handled (a stall in between must not look fresh).
      const sent = Date.now();
      beat.due = sent + period;
      void Promise.resolve()
        .then(() => store.renewLease(sessionId, owner, ttlMs))
        .then((held) => {
          failures = 0;
          if (held === false) beats.delete(beat);
          else renewedAt = Math.max(renewedAt, sent);
        })
        .catch(() => {
          if (++failures >= 3) beats.delete(beat);
        });
    },
  };
  schedule(beat);
  return {
    owner,
    ...(takenOver ? { takenOver } : {}),
    async confirm() {
      if (stopped) return;
      // Taken or renewed moments ago (the common case, a turn's rounds): a takeover needs the lease to expire or this process to die, so no write is needed.
      const now = Date.now();
      if (now - renewedAt < ttlMs / 3) return;
      if ((await store.renewLease(sessionId, owner, ttlMs)) !== false) renewedAt = now;
      else {
        beats.delete(beat);
        throw new KeelError(
          "KEEL_SESSION_BUSY",
          `This process lost the lease of session "${sessionId}" (it stalled past its ${ttlMs} ms lease and another holder took over); no further model call is made.`,
        );
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      beats.delete(beat);
      LIVE_OWNERS.delete(owner);
      await store.releaseLease(sessionId, owner);
    },
  };
}
