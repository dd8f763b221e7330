/**
 * The off-Node token estimate (a Worker, a browser tab) against the o200k counter Node uses:
 * it must not undercount any kind of text by much (a context ceiling or a budget would be
 * passed unseen), and must not overcount prose so much that a window looks full early.
 */
import { describe, expect, it } from "vitest";
import { estimateTokens } from "../src/estimate-counter.ts";
import { TokenCounter } from "../../tokens/src/index.ts";

const o200k = new TokenCounter();
const samples: Record<string, string> = {
  english:
    "The release is on Thursday. Before then we need to finish the migration guide, update the changelog and make sure every example still runs against the new host package. ".repeat(
      8,
    ),
  chinese: "今天的会议推迟到明天下午三点，请大家准时参加并提前准备好各自的进度报告。".repeat(10),
  japanese: "明日の午後に新しいバージョンをリリースします。テストがすべて通ることを確認してください。".repeat(10),
  emoji: "🚀🎉👍🔥✨😀🙈🌍".repeat(30),
  base64: btoa(String.fromCharCode(...Array.from({ length: 600 }, (_, i) => (i * 73 + 11) % 256))),
  hex: Array.from({ length: 400 }, (_, i) => ((i * 2654435761) >>> 0).toString(16).padStart(8, "0")).join(""),
  json: JSON.stringify(
    Array.from({ length: 40 }, (_, i) => ({ id: i, name: `item-${i}`, ok: i % 2 === 0, tags: ["a", "b"], n: i * 3.5 })),
  ),
  code: "export function add(a: number, b: number): number {\n  return a + b;\n}\n".repeat(20),
};

describe("the off-Node token estimate", () => {
  for (const [kind, text] of Object.entries(samples)) {
    it(`${kind}: at least 0.9× and at most 2.5× what o200k counts`, () => {
      const exact = o200k.countText(text);
      const est = estimateTokens(text);
      expect(est, `${kind}: estimate ${est}, o200k ${exact}`).toBeGreaterThanOrEqual(Math.floor(exact * 0.9));
      expect(est, `${kind}: estimate ${est}, o200k ${exact}`).toBeLessThanOrEqual(Math.ceil(exact * 2.5));
    });
  }
});
