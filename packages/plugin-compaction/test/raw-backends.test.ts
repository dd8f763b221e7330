/** The raw-output store's contract on both backends: a SQLite file and a schema on PostgreSQL. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresRawStore, RawStore } from "../src/index.ts";
import type { RawRecord, RawStorage } from "../src/index.ts";
import { dropTestSchemas, rawRows, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";

const dirs: string[] = [];
beforeAll(requirePostgres);
afterAll(async () => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  await dropTestSchemas();
});

const backends: Array<[string, () => { open: () => RawStorage; raw: () => Promise<string[]> }]> = [
  [
    "SQLite",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-raw-"));
      dirs.push(dir);
      return { open: () => new RawStore(join(dir, "c.sqlite")), raw: async () => [] };
    },
  ],
  [
    "PostgreSQL",
    () => {
      const target = testTarget();
      return { open: () => new PostgresRawStore(target), raw: () => rawRows(target.schema, "keel_compaction_raw") };
    },
  ],
];

const rec = (id: string, sessionId: string, text: string): RawRecord => ({
  id,
  sessionId,
  toolCallId: `c-${id}`,
  toolName: "shell",
  kind: "taco",
  text,
  tokens: 12,
  createdAt: 1_700_000_000_000,
});

describe.each(backends)("raw outputs on %s", (_name, backend) => {
  it("reads back what another instance stored, only in the session that stored it, redacted", async () => {
    const db = backend();
    const key = "AKIAQWERTYUIOP234567";
    const a = db.open();
    a.put(rec("r1", "s1", `line one\nsecret ${key}\nline three`));
    expect((await a.get("r1", "s1"))!.text).toBe("line one\nsecret [REDACTED:aws_access_key_id]\nline three");
    await a.close();
    const b = db.open();
    expect(await b.get("r1", "s1")).toMatchObject({
      id: "r1",
      toolCallId: "c-r1",
      toolName: "shell",
      kind: "taco",
      tokens: 12,
      createdAt: 1_700_000_000_000,
    });
    expect(await b.get("r1", "s2")).toBeUndefined();
    expect(await b.get("nope", "s1")).toBeUndefined();
    expect(b.degraded).toBe(false);
    await b.close();
    for (const row of await db.raw()) expect(row).not.toContain(key);
  });
});

describe("PostgresRawStore", () => {
  it("keeps serving from memory and says why when the server is unreachable", async () => {
    const s = new PostgresRawStore({ url: "postgres://keel:pw@127.0.0.1:1/none" });
    s.put(rec("r1", "s1", "kept in memory"));
    await s.close();
    expect(s.degraded).toBe(true);
    expect(s.lastError).toMatch(/127\.0\.0\.1:1.*not reachable/);
    expect(s.lastError).not.toContain(":pw@");
    expect((await s.get("r1", "s1"))!.text).toBe("kept in memory");
  });
});
