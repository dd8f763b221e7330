import { describe, expect, it } from "vitest";
import { Bm25, bm25Idf, stem, STOPWORDS, terms, tokenize } from "../src/retrieval.ts";

describe("Bm25", () => {
  it("scores every document in order, by the Okapi formula with smoothed idf", () => {
    const docs = [["cat", "sat", "mat"], ["dog", "dog", "ran"], ["cat", "dog"], []];
    const index = new Bm25(docs);
    const avg = 8 / 4;
    const idf = (n: number) => Math.log(1 + (4 - n + 0.5) / (n + 0.5));
    const part = (f: number, len: number) => (f * 2.5) / (f + 1.5 * (0.25 + (0.75 * len) / avg));
    const s = index.score(["dog"]);
    expect(s).toHaveLength(4);
    expect(s[0]).toBe(0);
    expect(s[1]).toBeCloseTo(idf(2) * part(2, 3), 12);
    expect(s[2]).toBeCloseTo(idf(2) * part(1, 2), 12);
    expect(s[3]).toBe(0);
    expect(index.docFreq("dog")).toBe(2);
    expect(index.terms(1).get("dog")).toBe(2);
  });

  it("ranks the rarer term higher, saturates term frequency and favours the shorter document", () => {
    const index = new Bm25([
      ["rare", "common"],
      ["common"],
      ["common"],
      ["common", "common", "common", "common"],
      ["common", "x", "y", "z", "w", "v"],
    ]);
    const [rare] = index.score(["rare"]);
    const [common] = index.score(["common"]);
    expect(rare).toBeGreaterThan(common!);
    const s = index.score(["common"]);
    // Four times the term in a longer document: more than once, far less than four times as much.
    expect(s[3]).toBeGreaterThan(s[1]!);
    expect(s[3]).toBeLessThan(2 * s[1]!);
    // Same frequency, longer document: lower score; b = 0 ignores length.
    expect(s[4]).toBeLessThan(s[1]!);
    const flat = new Bm25([["common"], ["common", "x", "y", "z"]], { b: 0 }).score(["common"]);
    expect(flat[0]).toBe(flat[1]);
  });

  it("counts a repeated query token each time, scales by weight and ignores unknown tokens", () => {
    const index = new Bm25([["alpha", "beta"], ["beta", "gamma"], ["delta"]]);
    const once = index.score(["alpha"])[0]!;
    expect(once).toBeGreaterThan(0);
    expect(index.score(["alpha", "alpha"])[0]).toBeCloseTo(2 * once, 12);
    expect(index.score(["alpha"], new Map([["alpha", 0.25]]))[0]).toBeCloseTo(0.25 * once, 12);
    expect(index.score(["nowhere"])).toEqual([0, 0, 0]);
    expect(new Bm25([]).score(["alpha"])).toEqual([]);
    expect(index.idf("nowhere")).toBe(0);
  });

  it("bm25Idf: smoothed is 0 for an absent token; fts5 is FTS5's, floored at 1e-6, and never takes N below n", () => {
    expect(bm25Idf(10, 0)).toBe(0);
    expect(bm25Idf(10, 1)).toBeCloseTo(Math.log(1 + 9.5 / 1.5), 12);
    expect(bm25Idf(10, 9)).toBeGreaterThan(0);
    expect(bm25Idf(10, 1, "fts5")).toBeCloseTo(Math.log(9.5 / 1.5), 12);
    expect(bm25Idf(10, 0, "fts5")).toBeCloseTo(Math.log(10.5 / 0.5), 12);
    expect(bm25Idf(10, 9, "fts5")).toBe(1e-6);
    expect(bm25Idf(3, 5, "fts5")).toBe(bm25Idf(5, 5, "fts5"));
    expect(bm25Idf(10, 2)).toBeGreaterThan(bm25Idf(10, 3));
  });
});

describe("tokenize", () => {
  it("lowercases, drops stopwords and one-letter words, and Porter-stems by default", () => {
    expect(tokenize("The cats were RUNNING quickly to a meeting")).toEqual(["cat", "run", "quickli", "meet"]);
    expect(STOPWORDS.has("the")).toBe(true);
    expect(tokenize("x y z")).toEqual([]);
    expect(tokenize("the of and", { stopwords: false, stem: false })).toEqual(["the", "of", "and"]);
    expect(tokenize("tool server list", { extraStopwords: new Set(["tool", "server"]) })).toEqual(["list"]);
  });

  it("keeps negated contractions and joins apostrophes; a possessive 's is dropped", () => {
    expect(tokenize("Ana's dog couldn't bark", { stem: false })).toEqual(["ana", "dog", "couldnt", "bark"]);
    expect(tokenize("Ana’s dog couldn’t bark", { stem: false })).toEqual(["ana", "dog", "couldnt", "bark"]);
    expect(tokenize("you're here", { stem: false })).toEqual([]);
    // As FTS5: an apostrophe separates.
    expect(tokenize("Ana's dog couldn't", { apostrophes: false, stopwords: false, stem: false, minLength: 1 })).toEqual(
      ["ana", "s", "dog", "couldn", "t"],
    );
  });

  it("splits camelCase and acronyms only when asked", () => {
    expect(tokenize("readFileSync HTTPServer get_user-id", { camelCase: true, stem: false })).toEqual([
      "read",
      "file",
      "sync",
      "http",
      "server",
      "user",
      "id",
    ]);
    expect(tokenize("readFileSync", { stem: false })).toEqual(["readfilesync"]);
  });

  it("cuts words as FTS5 unicode61: marks stay inside a word, emoji and punctuation separate", () => {
    expect(tokenize("नमस्ते दुनिया", { stem: false })).toEqual(["नमस्ते", "दुनिया"]);
    expect(tokenize("fix🐛bug, then—ship!", { stem: false, stopwords: false })).toEqual(["fix", "bug", "then", "ship"]);
    expect(tokenize("Café naïve", { foldDiacritics: true, stem: false })).toEqual(["cafe", "naive"]);
    expect(tokenize("Café", { stem: false })).toEqual(["café"]);
    // A lone combining mark folds away to nothing and is no token.
    expect(tokenize("a \u0301 b", { foldDiacritics: true, stopwords: false, stem: false, minLength: 1 })).toEqual([
      "a",
      "b",
    ]);
  });

  it("makes CJK runs bigrams only when asked", () => {
    expect(tokenize("東京タワー", { cjkBigrams: true })).toEqual(["東京", "京タ", "タワ", "ワー"]);
    expect(tokenize("東 travel東京", { cjkBigrams: true })).toEqual(["東", "travel", "東京"]);
    expect(tokenize("東京タワー")).toEqual(["東京タワー"]);
  });

  it("counts minLength in code points", () => {
    expect(tokenize("𠀀 𠀀𠀀", { stem: false, minLength: 2 })).toEqual(["𠀀𠀀"]);
  });

  it("terms: distinct tokens in first-seen order", () => {
    expect(terms("Files, file and FILES; folders")).toEqual(["file", "folder"]);
  });
});

describe("stem", () => {
  it("porter conflates derivations as FTS5 does; light only takes inflections off", () => {
    expect(stem("generally")).toBe("gener");
    expect(stem("generate")).toBe("gener");
    expect(stem("cities")).toBe("citi");
    expect(stem("at")).toBe("at");
    const long = `${"a".repeat(61)}ings`;
    expect(stem(`${"a".repeat(60)}ings`)).toBe("a".repeat(60));
    expect(stem(long)).toBe(long);
    expect(stem("generally", "light")).toBe("general");
    expect(stem("generated", "light")).toBe("generat");
    expect(stem("files", "light")).toBe("file");
    expect(stem("cities", "light")).toBe("city");
    expect(stem("stopped", "light")).toBe("stop");
    expect(stem("status", "light")).toBe("status");
    expect(stem("mp3s", "light")).toBe("mp3s");
    expect(tokenize("running files", { stem: "light" })).toEqual(["run", "file"]);
  });
});
