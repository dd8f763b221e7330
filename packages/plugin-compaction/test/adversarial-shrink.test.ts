import { describe, expect, it } from "vitest";
import { extractIdentifiers, salientIdentifiers } from "../src/index.ts";

describe("identifier extraction on adversarial text", () => {
  // Long runs with a word boundary every other character and nothing that completes a match:
  // each pattern used to rescan the run from every boundary (100 KB of "a-" took ~45 s).
  const runs = { dashes: "a-".repeat(50_000), dots: "1.".repeat(50_000), ats: "a@".repeat(50_000), digitDashes: "1-".repeat(50_000) };
  for (const [name, text] of Object.entries(runs)) {
    it(`stays linear on 100 KB of ${name}`, () => {
      const t = performance.now();
      salientIdentifiers(text, Infinity);
      expect(performance.now() - t).toBeLessThan(4_000);
    });
  }

  it("still finds ordinary paths, file names and ids", () => {
    const ids = extractIdentifiers("see src/app/main.py and config.yaml, order W2X9K7 at /srv/data/x.log");
    expect(ids).toEqual(expect.arrayContaining(["src/app/main.py", "config.yaml", "W2X9K7", "/srv/data/x.log"]));
  });
});
