import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { dateWindows, PostgresMemoryStore, recall, SqliteMemoryStore } from "../src/index.ts";
import type { MemoryStore } from "../src/index.ts";
import { variantPrefix } from "../src/fts-tokens.ts";
import { dropTestSchemas, requirePostgres, testTarget } from "../../store-postgres/test/support/pg.ts";
import { cleanup, tempDir } from "./support/helpers.ts";

afterEach(cleanup);
beforeAll(requirePostgres);
afterAll(dropTestSchemas);

const d = (y: number, m: number, day: number) => Date.UTC(y, m - 1, day);
const now = d(2023, 12, 1);

describe("hostile recall input", () => {
  it("PostgreSQL: a query word longer than a lexeme may be is skipped, not sent to tsquery (variants on)", async () => {
    const s = new PostgresMemoryStore(testTarget());
    const won = (await s.write({ namespace: "n", content: "Nate won the regional tournament" })).memory;
    const r = await recall(s, { namespace: "n", query: `${"a".repeat(3000)} tournament`, now });
    expect(r.map((x) => x.memory.id)).toEqual([won.id]);
    await s.close();
  });

  it('reads no date out of words that only begin like a month ("marathon 5", "Mark 12", "in marathons")', () => {
    for (const q of [
      "Did Nate run the marathon 5 times?",
      "What did Mark 12 say?",
      "Was it decent 3 times?",
      "What did he win in marathons?",
      "the mayor 4 years ago",
    ]) {
      expect(dateWindows(q, now), q).toEqual([]);
    }
    // Real month names and abbreviations still read.
    expect(dateWindows("on Mar 12?", now)).toHaveLength(3);
    expect(dateWindows("on March 12, 2023", now)).toEqual([{ start: d(2023, 3, 12), end: d(2023, 3, 13) }]);
    expect(dateWindows("on Sept 3 2023", now)).toEqual([{ start: d(2023, 9, 3), end: d(2023, 9, 4) }]);
  });

  it('reads "between December 28 and January 3 2023" as the days across the new year, not the whole of 2023', () => {
    const w = dateWindows("What did Tim do between December 28 and January 3 2023?", now);
    expect(w).toContainEqual({ start: d(2022, 12, 28), end: d(2023, 1, 4) });
    expect(w.every((x) => x.end - x.start <= 8 * 86_400_000)).toBe(true);
    const w2 = dateWindows("between December 28 2022 and January 3?", now);
    expect(w2).toContainEqual({ start: d(2022, 12, 28), end: d(2023, 1, 4) });
  });

  it("makes no window for a day that does not exist (no rollover into the next month or 1900s)", () => {
    for (const q of [
      "on February 30",
      "on February 30, 2023",
      "on 2023-13-01",
      "on 2023-02-29",
      "on 0099-05-01",
      "on May 0 2023",
    ])
      expect(dateWindows(q, now), q).toEqual([]);
    expect(dateWindows("on 2024-02-29", now)).toEqual([{ start: d(2024, 2, 29), end: d(2024, 3, 1) }]);
    // Without a year: only the leap years among the last three (none of 2021-2023).
    expect(dateWindows("on February 29", now)).toEqual([]);
    expect(dateWindows("on February 29", d(2024, 6, 1))).toEqual([{ start: d(2024, 2, 29), end: d(2024, 3, 1) }]);
  });

  it("cuts a variant prefix by code points, so letters beyond the BMP make one too", () => {
    expect(variantPrefix("𠀀𠀁𠀂𠀃𠀄𠀅", 5)).toBe("𠀀𠀁𠀂𠀃𠀄");
    expect(variantPrefix("𠀀𠀁𠀂", 5)).toBeUndefined();
    expect(variantPrefix("tourney", 5)).toBe("tourn");
  });

  it("reads the dates of a huge pasted message in bounded time", () => {
    const t = performance.now();
    dateWindows("May 3 ".repeat(20_000), now);
    dateWindows("On May 3 2023 ".repeat(10_000), now);
    expect(performance.now() - t).toBeLessThan(300);
  });
});

describe.each([
  ["SQLite", (): MemoryStore => new SqliteMemoryStore({ path: join(tempDir(), "memory.sqlite") })],
  ["PostgreSQL", (): MemoryStore => new PostgresMemoryStore(testTarget())],
])("variants on %s", (_name, open) => {
  it("decide on the namespace's own words: another namespace's memories change neither the results nor reveal their words", async () => {
    const s = open();
    const won = (await s.write({ namespace: "n", content: "Nate won the regional tournament" })).memory;
    const q = { namespace: "n", terms: ["tourney"], limit: 10, variants: 5 };
    expect((await s.search(q)).map((h) => h.memory.id)).toEqual([won.id]);
    // Another user writes the very word: "n" must search as before (else the result is an oracle for it).
    await s.write({ namespace: "other", content: "my secret tourney plan" });
    expect((await s.search(q)).map((h) => h.memory.id)).toEqual([won.id]);
    // A word "n" does hold is still matched as it is.
    const t = (await s.write({ namespace: "n", content: "the tourney starts" })).memory;
    expect((await s.search(q)).map((h) => h.memory.id)).toEqual([t.id]);
    await s.close();
  });

  it("reads any number of date ranges, and non-finite ones, the same way", async () => {
    const s = open();
    const m = (await s.write({ namespace: "n", content: "Nate won", occurredAt: 1000, at: 1000 })).memory;
    const ids = async (within: Array<{ start: number; end: number }>) =>
      (await s.search({ namespace: "n", terms: ["nate"], limit: 5, within })).map((h) => h.memory.id);
    expect(await ids(Array.from({ length: 5000 }, (_, i) => ({ start: i * 2, end: i * 2 + 1 })))).toEqual([m.id]);
    expect(await ids([{ start: -Infinity, end: Infinity }])).toEqual([m.id]);
    expect(await ids([{ start: NaN, end: Infinity }])).toEqual([]);
    expect(await ids([{ start: 5000, end: 0 }])).toEqual([]);
    await s.close();
  });

  it("finds a word beyond the BMP by its five-letter prefix", async () => {
    const s = open();
    const m = (await s.write({ namespace: "n", content: "𠀀𠀁𠀂𠀃𠀄𠀇𠀈 x" })).memory;
    expect(
      (await s.search({ namespace: "n", terms: ["𠀀𠀁𠀂𠀃𠀄𠀅"], limit: 5, variants: 5 })).map((h) => h.memory.id),
    ).toEqual([m.id]);
    await s.close();
  });
});
