/** Ranking, keep-set stability, the hard cap and tool_search, on a small synthetic catalog. */
import { describe, expect, it } from "vitest";
import {
  createRanker,
  curate,
  intentWords,
  inventoryHash,
  keelTokens,
  referenceTokens,
  searchTools,
  type CatalogEntry,
} from "../src/index.ts";
import { entry } from "./support.ts";

const CATALOG: CatalogEntry[] = [
  entry("fs", "read_file", "Read the complete contents of a file from disk."),
  entry("fs", "write_file", "Create a new file or overwrite an existing file with new content."),
  entry("fs", "list_directory", "List the entries of a directory."),
  entry("weather", "getWeatherForecast", "Forecast for a city for the next days."),
  entry("weather", "get_alerts", "Severe weather alerts for a US state."),
  entry("git", "git_log", "Show the commit history of a repository."),
  entry("git", "git_commit", "Record staged changes to the repository."),
  entry("time", "get_current_time", "Current date and time in a timezone."),
  entry("calc", "calculate", "Evaluate a math expression."),
  ...Array.from({ length: 20 }, (_, i) =>
    entry("misc", `filler_${i}`, `Unrelated helper number ${i} for spreadsheets and slides.`),
  ),
];
const HASH = inventoryHash(CATALOG.map((c) => ({ name: c.name, description: c.description })));
const names = (list: Array<{ name: string }>) => list.map((t) => t.name);

describe("tokenisers", () => {
  it("reference drops tokens of 3 characters or fewer; keel splits camelCase and stems", () => {
    expect(referenceTokens("Get the git log of repos")).toEqual(["repos"]);
    expect(keelTokens("getWeatherForecast files")).toEqual(["weather", "forecast", "file"]);
  });

  it("intent words come from cues in the request, not from its topic", () => {
    expect(intentWords("save the summary to /root/notes/report.md")).toContain("markdown");
    expect(intentWords("what will the weather be tomorrow")).toContain("current date");
    expect(intentWords("tell me a joke")).toBe("");
  });
});

describe("ranking", () => {
  it("reference: BM25 over description, server and tool name plus 0.5 per recent use", () => {
    const r = createRanker(CATALOG, "reference");
    expect(r.rank("weather alerts for Texas")[0]!.name).toBe("mcp__weather__get_alerts");
    // "forecast" is inside a camelCase name the reference does not split; the description still matches.
    expect(r.rank("forecast for Paris")[0]!.name).toBe("mcp__weather__getWeatherForecast");
    const plain = r.rank("repository");
    const boosted = r.rank("repository", { recentUses: new Map([["mcp__git__git_commit", 1]]) });
    expect(
      boosted.find((t) => t.name === "mcp__git__git_commit")!.score -
        plain.find((t) => t.name === "mcp__git__git_commit")!.score,
    ).toBeCloseTo(0.5);
  });

  it("keel: camelCase names, server relevance and intents", () => {
    const r = createRanker(CATALOG, "keel");
    expect(r.rank("weather forecast")[0]!.name).toBe("mcp__weather__getWeatherForecast");
    const saved = names(r.rank("summarise the commit history and save it to /tmp/out.md").slice(0, 4));
    expect(saved).toContain("mcp__git__git_log");
    expect(saved).toContain("mcp__fs__write_file");
    expect(names(r.rank("book a table for tomorrow evening").slice(0, 1))).toEqual(["mcp__time__get_current_time"]);
  });

  it("returns every tool once, ties in catalog order", () => {
    for (const method of ["keel", "reference"] as const) {
      const ranked = createRanker(CATALOG, method).rank("nothing matches zzzz");
      expect(names(ranked)).toEqual(names(CATALOG));
    }
  });
});

describe("curate", () => {
  const ranker = createRanker(CATALOG, "keel");
  const base = { ranker, inventoryHash: HASH, topK: 3, hardCap: 128, fixedCount: 1 };

  it("keeps the top K tools with a positive score", () => {
    const r = curate({ ...base, query: "read a file from the directory" });
    expect(r.visible).toHaveLength(3);
    expect(r.visible).toEqual(names(r.ranked.slice(0, 3)));
    expect(r.visible).toContain("mcp__fs__read_file");
    expect(curate({ ...base, query: "zzzz qqqq" }).visible).toEqual([]);
  });

  it("grows append-only across requests (stable prefix) and resets when the inventory changes", () => {
    const first = curate({ ...base, query: "read a file" });
    const second = curate({ ...base, query: "weather alerts", previous: first.keepSet });
    expect(second.visible.slice(0, first.visible.length)).toEqual(first.visible);
    expect(second.added.length).toBeGreaterThan(0);
    expect(second.added.every((n) => !first.visible.includes(n))).toBe(true);
    const third = curate({ ...base, query: "read a file", previous: second.keepSet });
    expect(third.visible).toEqual(second.visible);
    expect(third.added).toEqual([]);
    const changed = curate({ ...base, inventoryHash: "other", query: "weather alerts", previous: second.keepSet });
    expect(changed.reset).toBe(true);
    expect(changed.visible).toEqual(names(changed.ranked.filter((t) => t.score > 0).slice(0, 3)));
    expect(changed.visible).not.toContain("mcp__fs__read_file");
  });

  it("keeps pinned (revealed) tools and respects the hard cap by rank, pinned first", () => {
    const r = curate({
      ...base,
      topK: 6,
      hardCap: 4,
      fixedCount: 1,
      query: "file directory weather",
      pinned: ["mcp__calc__calculate"],
    });
    expect(r.visible).toHaveLength(3);
    expect(r.visible).toContain("mcp__calc__calculate");
    expect(r.capped.length).toBe(r.keepSet.keep.length - 3);
    expect(r.keepSet.keep).toContain("mcp__calc__calculate");
    expect(r.visible).toEqual(r.keepSet.keep.filter((n) => r.visible.includes(n)));
  });
});

describe("searchTools", () => {
  it("returns at most `limit` positive hits, best first", () => {
    const ranker = createRanker(CATALOG, "keel");
    const hits = searchTools(ranker, "commit history", 2);
    expect(hits.map((h) => h.name)).toEqual(["mcp__git__git_log", "mcp__git__git_commit"]);
    expect(hits[0]!.description).toContain("commit history");
    expect(searchTools(ranker, "zzzz", 5)).toEqual([]);
  });
});
