/** lineDiff, the replay's view of a changed prompt: compact, bounded, cut by code points. */
import { describe, expect, it } from "vitest";
import { isWellFormed } from "@keel/text";
import { lineDiff } from "../src/index.ts";

describe("lineDiff", () => {
  it("shows each change with a line of context and counts what it skips", () => {
    const a = ["intro", "one", "two", "three", "four", "five", "outro"].join("\n");
    const b = ["intro", "one", "TWO", "three", "four", "five", "outro", "added"].join("\n");
    expect(lineDiff(a, b)).toEqual([
      "  … 1 unchanged line",
      "  one",
      "- two",
      "+ TWO",
      "  three",
      "  … 2 unchanged lines",
      "  outro",
      "+ added",
    ]);
    expect(lineDiff(a, a)).toEqual([]);
  });

  it("is bounded: at most 60 lines, each at most 200 code points, never half a surrogate pair", () => {
    const a = Array.from({ length: 500 }, (_, i) => `line ${i}`).join("\n");
    const b = Array.from({ length: 500 }, (_, i) => `${"😀".repeat(300)} ${i}`).join("\n");
    const d = lineDiff(a, b);
    expect(d).toHaveLength(60);
    expect(d.at(-1)).toMatch(/^ {2}… \d+ more changed lines$/);
    for (const line of d) {
      expect([...line].length).toBeLessThanOrEqual(200);
      expect(isWellFormed(line)).toBe(true);
    }
    // Too many line pairs to match one by one (2,000 × 2,000): removed, then added, still bounded.
    const big = (tag: string) => Array.from({ length: 2_000 }, (_, i) => `${tag} ${i}`).join("\n");
    expect(lineDiff(big("x"), big("y"))).toHaveLength(60);
  });
});
