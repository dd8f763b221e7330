/**
 * Session leases as the SessionStore contract states them (SQLite, PostgreSQL, in-memory), and the
 * SQLite open path's refusals: what the fault suite relies on, checked store by store.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeelEvent, SessionStore } from "@keel/kernel";
import { MemorySessionStore } from "../../testkit/src/index.ts";
import { openSqlite, SqliteSessionStore } from "@keel/store-sqlite";
import { holderIsDead, takeLease } from "@keel/store-kit";
import type { LeasePrimitives } from "@keel/store-kit";
import { keelErrorOf } from "../../agent/test/support/helpers.ts";
import { dropTestSchemas, openTestStore, requirePostgres } from "../../store-postgres/test/support/pg.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-lease-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const claim = (owner: string, ttlMs = 60_000, replaces?: string) => ({
  owner,
  pid: process.pid,
  host: hostname(),
  ttlMs,
  ...(replaces ? { replaces } : {}),
});
const ev = (sessionId: string, seq: number): KeelEvent =>
  ({
    type: "diagnostic",
    level: "info",
    code: "KEEL_HANDLER_THREW",
    message: `e${seq}`,
    sessionId,
    seq,
    ts: Date.now(),
    turnId: null,
  }) as unknown as KeelEvent;

const stores: Array<[string, () => SessionStore]> = [
  ["SqliteSessionStore", () => new SqliteSessionStore({ path: join(dir, `s${++n}.sqlite`) })],
  ["MemorySessionStore", () => new MemorySessionStore()],
  ["PostgresSessionStore", () => openTestStore()],
];
beforeAll(requirePostgres);
afterAll(dropTestSchemas);

describe.each(stores)("%s leases", (_name, make) => {
  it("one owner at a time: a second claim gets the holder, the same owner re-claims, release frees it", async () => {
    const store = make() as SessionStore & LeasePrimitives;
    await store.createSession({ id: "s", agent: "a", createdAt: 1 });
    const a = await store.acquireLease("s", claim("A"));
    expect(a).toMatchObject({ acquired: true, lease: { owner: "A", pid: process.pid } });
    expect(a.acquired && a.previous).toBeFalsy();
    expect(await store.acquireLease("s", claim("B"))).toMatchObject({ acquired: false, holder: { owner: "A" } });
    expect(await store.acquireLease("s", claim("A"))).toMatchObject({ acquired: true });
    await store.releaseLease("s", "B");
    expect(await store.acquireLease("s", claim("B"))).toMatchObject({ acquired: false });
    await store.releaseLease("s", "A");
    expect(await store.acquireLease("s", claim("B"))).toMatchObject({ acquired: true, lease: { owner: "B" } });
    await store.close();
  });

  it("an expired lease, or one named in `replaces`, is taken over and reported as `previous`; the old owner can no longer renew", async () => {
    const store = make() as SessionStore & LeasePrimitives;
    await store.createSession({ id: "s", agent: "a", createdAt: 1 });
    await store.acquireLease("s", claim("A", 100));
    await new Promise((r) => setTimeout(r, 120));
    expect(await store.acquireLease("s", claim("B"))).toMatchObject({ acquired: true, previous: { owner: "A" } });
    expect(await store.renewLease("s", "A", 60_000)).toBe(false);
    expect(await store.renewLease("s", "B", 60_000)).toBe(true);
    expect(await store.acquireLease("s", claim("C", 60_000, "B"))).toMatchObject({
      acquired: true,
      previous: { owner: "B" },
    });
    await store.close();
  });

  it("an append fenced by a lease it does not hold throws KEEL_SESSION_BUSY and writes nothing", async () => {
    const store = make() as SessionStore & LeasePrimitives;
    await store.createSession({ id: "s", agent: "a", createdAt: 1 });
    await store.acquireLease("s", claim("A"));
    await store.appendMany!([ev("s", 1)], { lease: "A" });
    const err = await keelErrorOf(() => store.appendMany!([ev("s", 2), ev("s", 3)], { lease: "B" }));
    expect(err.code).toBe("KEEL_SESSION_BUSY");
    expect((await store.events("s")).map((e) => e.seq)).toEqual([1]);
    await store.close();
  });
});

describe("SQLite opens", () => {
  it("a read-only store reads but refuses every write with KEEL_STORE_READ_ONLY", async () => {
    const path = join(dir, "ro.sqlite");
    const w = new SqliteSessionStore({ path });
    w.createSession({ id: "s", agent: "a", createdAt: 1 });
    w.append(ev("s", 1));
    w.close();
    const r = new SqliteSessionStore({ path, readOnly: true });
    expect(r.events("s").map((e) => e.seq)).toEqual([1]);
    expect((await keelErrorOf(() => r.append(ev("s", 2)))).code).toBe("KEEL_STORE_READ_ONLY");
    expect((await keelErrorOf(() => r.acquireLease("s", claim("A")))).code).toBe("KEEL_STORE_READ_ONLY");
    r.close();
  });

  it("a file that is not a database is refused with KEEL_STORE_CORRUPT naming it; a read-only open of a missing file creates nothing", async () => {
    const junk = join(dir, "junk.sqlite");
    writeFileSync(junk, Buffer.alloc(4096, 0x41));
    const err = await keelErrorOf(() => openSqlite(junk, { what: "test database" }));
    expect(err.code).toBe("KEEL_STORE_CORRUPT");
    expect(err.message).toContain(junk);
    const missing = join(dir, "missing.sqlite");
    expect((await keelErrorOf(() => openSqlite(missing, { readOnly: true }))).code).toBe("KEEL_STORE_FAILED");
    expect(spawnSync("test", ["-e", missing]).status).toBe(1);
  });

  it("holderIsDead: true for a pid that exited on this host, false for this process's held leases and for another host", async () => {
    const gone = spawnSync(process.execPath, ["-e", "console.log(process.pid)"]).stdout.toString().trim();
    const lease = {
      sessionId: "s",
      owner: "o",
      pid: Number(gone),
      host: hostname(),
      acquiredAt: 0,
      expiresAt: Date.now() + 60_000,
    };
    expect(holderIsDead(lease)).toBe(true);
    expect(holderIsDead({ ...lease, host: `${hostname()}-elsewhere` })).toBe(false);
    // This pid: alive while this process holds the owner; an owner it does not hold was an
    // earlier process with the same pid (a container's PID 1 restarted after a kill).
    const held = (await takeLease(new MemorySessionStore(), "s", { ttlMs: 60_000, waitMs: 0, kind: "turn" }))!;
    expect(holderIsDead({ ...lease, pid: process.pid, owner: held.owner })).toBe(false);
    expect(holderIsDead({ ...lease, pid: process.pid, owner: "an-earlier-process" })).toBe(true);
    await held.stop();
    expect(holderIsDead({ ...lease, pid: process.pid, owner: held.owner })).toBe(true);
  });
});
