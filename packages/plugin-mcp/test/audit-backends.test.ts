/** The audit log's contract on both backends: a SQLite file and a schema on PostgreSQL. */
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AuditLog, PostgresAuditLog } from "../src/index.ts";
import type { AuditStore } from "../src/index.ts";
import { dropTestSchemas, rawRows, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import { tempDirs } from "./support.ts";

const dirs = tempDirs();
afterEach(() => dirs.cleanup());
beforeAll(requirePostgres);
afterAll(dropTestSchemas);

/** Each backend opens a store, and opens it again on the same database. */
const backends: Array<[string, () => { open: () => AuditStore; rows: () => Promise<string[]> }]> = [
  [
    "SQLite",
    () => {
      // A folder that does not exist yet: the log creates it.
      const path = join(dirs.make(), "nested", "mcp-audit.sqlite");
      return {
        open: () => new AuditLog(path),
        rows: async () => {
          const l = new AuditLog(path);
          const r = l.all().map((x) => JSON.stringify(x));
          l.close();
          return r;
        },
      };
    },
  ],
  [
    "PostgreSQL",
    () => {
      const target = testTarget();
      return { open: () => new PostgresAuditLog(target), rows: () => rawRows(target.schema, "keel_mcp_calls") };
    },
  ],
];

describe.each(backends)("MCP audit on %s", (_name, backend) => {
  it("keeps every record for a second instance and counts recent uses per tool within the window", async () => {
    const db = backend();
    const log = db.open();
    const now = Date.now();
    const base = {
      sessionId: "s",
      server: "fs",
      tool: "read_file",
      name: "mcp__fs__read_file",
      durationMs: 3,
      outcome: "ok" as const,
      bytes: 10,
    };
    log.record({ ...base, ts: now - 48 * 3_600_000 });
    log.record({ ...base, ts: now - 60_000 });
    log.record({ ...base, ts: now - 1_000 });
    log.record({
      ...base,
      ts: now,
      tool: "write_file",
      name: "mcp__fs__write_file",
      outcome: "timeout",
      error: "late",
    });
    await log.close();
    const other = db.open();
    const all = await other.all();
    expect(all).toHaveLength(4);
    expect(all[3]).toMatchObject({ outcome: "timeout", error: "late", durationMs: 3, bytes: 10 });
    expect(await other.recentUses(now - 24 * 3_600_000)).toEqual(
      new Map([
        ["mcp__fs__read_file", 2],
        ["mcp__fs__write_file", 1],
      ]),
    );
    await other.close();
  });

  it("keeps each session's curation for a second instance: the last save wins, other sessions are apart", async () => {
    const db = backend();
    const log = db.open();
    const c1 = {
      inventoryHash: "h1",
      keep: ["mcp__fs__read_file"],
      compact: [],
      pinned: [],
      basis: { mcp__fs__read_file: "d1" },
    };
    const c2 = {
      ...c1,
      keep: ["mcp__fs__read_file", "mcp__fs__write_file"],
      compact: ["mcp__fs__write_file"],
      pinned: ["mcp__fs__write_file"],
      basis: { ...c1.basis, mcp__fs__write_file: "d2" },
    };
    log.saveCuration("a", c1);
    log.saveCuration("a", c2);
    log.saveCuration("b", c1);
    await log.close();
    const other = db.open();
    expect(await other.loadCuration("a")).toEqual(c2);
    expect(await other.loadCuration("b")).toEqual(c1);
    expect(await other.loadCuration("c")).toBeUndefined();
    await other.close();
  });

  it("a kept curation holds no key, even in a tool name", async () => {
    const db = backend();
    const key = `xoxb-123456789012-1234567890123-${"Ab9".repeat(8)}`;
    const log = db.open();
    const name = `mcp__fx__search-${key}`;
    log.saveCuration("s", {
      inventoryHash: "h",
      keep: [name],
      compact: [name],
      pinned: [name],
      basis: { [name]: "d" },
    });
    await log.close();
    const other = db.open();
    const json = JSON.stringify(await other.loadCuration("s"));
    expect(json).not.toContain(key);
    expect(json).toContain("[REDACTED:slack_token]");
    await other.close();
  });

  it("redacts an error that echoes a key before it is written", async () => {
    const db = backend();
    const key = `xoxb-123456789012-1234567890123-${"Ab9".repeat(8)}`;
    const log = db.open();
    log.record({
      ts: Date.now(),
      sessionId: "s",
      server: "fx",
      tool: "fail",
      name: "mcp__fx__fail",
      durationMs: 1,
      outcome: "tool_error",
      bytes: 0,
      error: `token ${key}`,
    });
    await log.close();
    const rows = await db.rows();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain("[REDACTED:slack_token]");
    expect(rows[0]).not.toContain(key);
  });
});

describe("PostgresAuditLog", () => {
  it("never throws on an unreachable server: the first failure is reported once and recent uses are empty", async () => {
    const errors: unknown[] = [];
    const log = new PostgresAuditLog({ url: "postgres://keel:pw@127.0.0.1:1/none" }, (e) => errors.push(e));
    log.record({ ts: 1, sessionId: "s", server: "a", tool: "b", name: "c", durationMs: 1, outcome: "ok", bytes: 0 });
    log.record({ ts: 2, sessionId: "s", server: "a", tool: "b", name: "c", durationMs: 1, outcome: "ok", bytes: 0 });
    await log.flush();
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/KEEL_MCP_AUDIT_FAILED.*not reachable/);
    expect(await log.recentUses(0)).toEqual(new Map());
  });
});
