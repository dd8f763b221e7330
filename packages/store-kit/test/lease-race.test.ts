/**
 * Two holders in one process claiming one session at once (two agents, or two handles of one
 * session): a store's acquire commits, then its answer travels back (PostgreSQL's round trip)
 * before takeLease can note the owner as this process's. A claim that reads the lease in that
 * window saw this process's pid with an owner it did not know, took the holder for a dead
 * predecessor with our pid, and replaced it: both held the lease, both wrote, seqs collided.
 */
import { describe, expect, it } from "vitest";
import type { LeaseClaim, LeaseOutcome, LeasePrimitives, SessionLease } from "../src/lease.ts";
import { takeLease } from "../src/lease.ts";

/**
 * Lease primitives over a Map, answering after the change is made (a database's round trip):
 * the first answer takes `firstMs` (a slow connection), every other one 1 ms.
 */
function slowStore(firstMs: number): LeasePrimitives & { leases: Map<string, SessionLease> } {
  const leases = new Map<string, SessionLease>();
  let calls = 0;
  const later = <T>(value: T) => new Promise<T>((r) => setTimeout(() => r(value), calls++ === 0 ? firstMs : 1));
  return {
    leases,
    acquireLease(sessionId: string, claim: LeaseClaim): Promise<LeaseOutcome> {
      const now = Date.now();
      const held = leases.get(sessionId);
      if (held && held.owner !== claim.owner && held.expiresAt > now && held.owner !== claim.replaces)
        return later({ acquired: false, holder: held });
      const lease = {
        sessionId,
        owner: claim.owner,
        pid: claim.pid,
        host: claim.host,
        acquiredAt: now,
        expiresAt: now + claim.ttlMs,
      };
      leases.set(sessionId, lease);
      return later(held ? { acquired: true, lease, previous: held } : { acquired: true, lease });
    },
    renewLease: (sessionId, owner, ttlMs) => {
      const held = leases.get(sessionId);
      if (held?.owner !== owner) return later(false);
      held.expiresAt = Date.now() + ttlMs;
      return later(true);
    },
    releaseLease: (sessionId, owner) => {
      if (leases.get(sessionId)?.owner === owner) leases.delete(sessionId);
      return later(undefined);
    },
  };
}

describe("takeLease: two claims of one process at once", () => {
  it("one holds the session, the other is KEEL_SESSION_BUSY, however late the store's answer comes back", async () => {
    const store = slowStore(40);
    const request = { ttlMs: 30_000, waitMs: 0, kind: "turn" as const };
    const first = takeLease(store, "s1", request);
    // The second claim reads the lease after the first one's change and hears back before the first does.
    await new Promise((r) => setTimeout(r, 5));
    const second = takeLease(store, "s1", request);
    const [a, b] = await Promise.allSettled([first, second]);
    expect(a.status).toBe("fulfilled");
    expect(b.status).toBe("rejected");
    expect((b as PromiseRejectedResult).reason).toMatchObject({ code: "KEEL_SESSION_BUSY" });
    const held = (a as PromiseFulfilledResult<Awaited<typeof first>>).value;
    expect(store.leases.get("s1")?.owner).toBe(held.owner);
    await held.stop();
    expect(store.leases.has("s1")).toBe(false);
  });

  it("a claim that failed leaves no owner behind: a lease with that owner left in a store is one of a dead holder", async () => {
    const store = slowStore(1);
    let owner = "";
    const failing: LeasePrimitives = {
      ...store,
      acquireLease: (_id, claim) => {
        owner = claim.owner;
        return Promise.reject(new Error("connection lost"));
      },
    };
    await expect(takeLease(failing, "s2", { ttlMs: 30_000, waitMs: 0, kind: "turn" })).rejects.toThrow(
      "connection lost",
    );
    // Its row, had the claim committed before the connection dropped: this process does not hold it.
    const now = Date.now();
    store.leases.set("s2", {
      sessionId: "s2",
      owner,
      pid: process.pid,
      host: (await import("node:os")).hostname(),
      acquiredAt: now,
      expiresAt: now + 30_000,
    });
    const taken = await takeLease(store, "s2", { ttlMs: 30_000, waitMs: 0, kind: "turn" });
    expect(taken.takenOver).toMatchObject({ reason: "holder_dead" });
    await taken.stop();
  });
});
