/** The adaptive visible set: the relevance cut, compact forms fixed in the keep-set, tool_search's cut, and how definitions are written. */
import { describe, expect, it } from "vitest";
import { isWellFormed } from "@keel/text";
import {
  createRanker,
  curate,
  cutAtSentence,
  inventoryHash,
  presentTool,
  searchTools,
  tidyText,
  type CatalogEntry,
} from "../src/index.ts";
import { entry } from "./support.ts";

const CATALOG: CatalogEntry[] = [
  entry("fs", "read_file", "Read the complete contents of a file from disk."),
  entry("fs", "write_file", "Create a new file or overwrite an existing file with new content."),
  entry("fs", "list_directory", "List the entries of a directory."),
  entry("weather", "get_forecast", "Weather forecast for a city for the next days."),
  entry("weather", "get_alerts", "Severe weather alerts for a US state."),
  entry("git", "git_log", "Show the commit history of a repository."),
  // Weak matches: "file" appears once in a long text, so they score far below the best.
  ...Array.from({ length: 20 }, (_, i) =>
    entry(
      "misc",
      `helper_${i}`,
      `Helper ${i} for spreadsheets, slides, charts, calendars, contacts, tickets and, rarely, a file.`,
    ),
  ),
];
const HASH = inventoryHash(CATALOG.map((c) => ({ name: c.name, description: c.description })));
const ranker = createRanker(CATALOG);
const CUT = { minK: 2, ratio: 0.5, compactBelow: 0.9 };

describe("adaptive cut", () => {
  it("stops where relevance falls below the ratio once minK tools joined; without a cut the weak tail fills K", () => {
    const fixed = curate({
      ranker,
      inventoryHash: HASH,
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
    });
    const cut = curate({
      ranker,
      inventoryHash: HASH,
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
    });
    expect(fixed.visible).toHaveLength(10);
    expect(fixed.visible.some((n) => n.includes("helper"))).toBe(true);
    expect(cut.visible[0]).toBe("mcp__fs__read_file");
    expect(cut.visible.length).toBeGreaterThanOrEqual(CUT.minK);
    expect(cut.visible.length).toBeLessThan(10);
    const best = cut.ranked[0]!.score;
    const score = new Map(cut.ranked.map((r) => [r.name, r.score]));
    // Beyond minK, every joined tool is within the ratio.
    for (const n of cut.visible.slice(CUT.minK)) expect(score.get(n)!).toBeGreaterThanOrEqual(CUT.ratio * best);
  });

  it("marks tools below compactBelow × best as compact, and a kept tool keeps its form on later turns whatever they rank", () => {
    const t1 = curate({
      ranker,
      inventoryHash: HASH,
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
    });
    const compact1 = new Set(t1.keepSet.compact);
    expect(compact1.has("mcp__fs__read_file")).toBe(false);
    expect(compact1.size).toBeGreaterThan(0);
    for (const n of compact1) expect(t1.visible).toContain(n);
    // Next turn: a query where a compact tool of turn 1 is now the best match.
    const again = [...compact1][0]!;
    const t2 = curate({
      ranker,
      inventoryHash: HASH,
      query: CATALOG.find((c) => c.name === again)!.description,
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
      previous: t1.keepSet,
    });
    expect(t2.keepSet.keep.slice(0, t1.keepSet.keep.length)).toEqual(t1.keepSet.keep);
    expect(t2.keepSet.compact).toEqual(expect.arrayContaining([...compact1]));
    // A pinned tool (revealed by tool_search) joins in full form.
    const t3 = curate({
      ranker,
      inventoryHash: HASH,
      query: "weather",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
      previous: t2.keepSet,
      pinned: ["mcp__git__git_log"],
    });
    expect(t3.visible).toContain("mcp__git__git_log");
    expect(t3.keepSet.compact ?? []).not.toContain("mcp__git__git_log");
  });

  it("a catalog no larger than K is kept whole, in full form", () => {
    const small = createRanker(CATALOG.slice(0, 6));
    const r = curate({
      ranker: small,
      inventoryHash: "x",
      query: "read the file",
      topK: 10,
      hardCap: 128,
      fixedCount: 1,
      cut: CUT,
    });
    expect(r.visible).toHaveLength(6);
    expect(r.keepSet.compact).toBeUndefined();
  });

  it("tool_search drops hits below minRatio × its best hit, never the best one", () => {
    const all = searchTools(ranker, "file", 20);
    const cut = searchTools(ranker, "file", 20, undefined, 0.7);
    expect(cut.length).toBeGreaterThan(0);
    expect(cut.length).toBeLessThan(all.length);
    expect(cut[0]!.name).toBe(all[0]!.name);
    for (const h of cut) expect(h.score).toBeGreaterThanOrEqual(0.7 * cut[0]!.score);
  });
});

describe("definitions as sent", () => {
  const limits = { descriptionChars: 60, compactDescriptionChars: 30 };
  it("trims docstring indentation and blank lines, and cuts by code points at a sentence end", () => {
    expect(tidyText("\n      Search papers.\n\n      Args:\n        q: words\n")).toBe(
      "Search papers.\nArgs:\nq: words",
    );
    const long = "Read a file from disk. It returns the whole text, and more words follow here.";
    expect(cutAtSentence(long, 40)).toBe("Read a file from disk.…");
    // No sentence end past 40%: cut at the limit. Emoji are one code point each and never split.
    const emoji = "😀".repeat(50);
    const cut = cutAtSentence(emoji, 10);
    expect([...cut]).toHaveLength(10);
    expect(cut.endsWith("…")).toBe(true);
    expect(isWellFormed(cut)).toBe(true);
    expect(cutAtSentence("short", 10)).toBe("short");
  });

  it("full and compact forms keep every parameter, drop titles that repeat names, and leave the input unchanged", () => {
    const parameters = {
      type: "object",
      title: "read_fileArguments",
      properties: {
        path: { type: "string", title: "Path", description: "\n    The file.\n    Absolute.\n" },
        mode: { type: "string", title: "How to open it", enum: ["r", "rb"] },
        nested: {
          type: "object",
          $schema: "http://json-schema.org/draft-07/schema#",
          properties: { title: { type: "string", title: "Title" } },
        },
      },
      required: ["path"],
    };
    const before = JSON.stringify(parameters);
    const description =
      "Read a file. Returns its text. Fails when the path is outside the allowed folders, or when the file is binary and too large.";
    const full = presentTool({ tool: "read_file", description, parameters }, "full", limits);
    const compact = presentTool({ tool: "read_file", description, parameters }, "compact", limits);
    expect(JSON.stringify(parameters)).toBe(before);
    expect([...full.description].length).toBeLessThanOrEqual(60);
    expect([...compact.description].length).toBeLessThanOrEqual(30);
    expect(compact.description).toBe("Read a file.…");
    expect(full.description).toBe("Read a file. Returns its text.…");
    expect(full.parameters).toEqual({
      type: "object",
      properties: {
        path: { type: "string", description: "The file.\nAbsolute." },
        mode: { type: "string", title: "How to open it", enum: ["r", "rb"] },
        nested: { type: "object", properties: { title: { type: "string" } } },
      },
      required: ["path"],
    });
    expect(compact.parameters).toEqual(full.parameters);
  });
});
