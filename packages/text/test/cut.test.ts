import { describe, expect, it } from "vitest";
import {
  codePointLength,
  codePointSlice,
  deltaJoiner,
  didYouMean,
  headOf,
  isWellFormed,
  tailOf,
  toWellFormed,
  truncate,
  wellFormedDeep,
  wellFormedOnce,
} from "../src/index.ts";

const EMOJI = "😀";

describe("@keel/text", () => {
  it("cuts by code points: an astral character is kept whole or dropped whole, never halved", () => {
    const s = `ab${EMOJI}cd${EMOJI}`;
    expect(codePointLength(s)).toBe(6);
    for (let n = 0; n <= 6; n++) {
      expect(isWellFormed(codePointSlice(s, 0, n))).toBe(true);
      expect(isWellFormed(headOf(s, n))).toBe(true);
      expect(isWellFormed(tailOf(s, n))).toBe(true);
    }
    expect(codePointSlice(s, 2, 3)).toBe(EMOJI);
    const cut = truncate(EMOJI.repeat(500), 100);
    expect(isWellFormed(cut)).toBe(true);
    expect(codePointLength(cut)).toBeLessThanOrEqual(100);
  });

  it("repairs lone surrogates, deep and across stream deltas", () => {
    expect(toWellFormed("a\uD800b")).toBe("a\uFFFDb");
    const v = Object.freeze({ m: Object.freeze(["ok", "x\uDC00"]) });
    expect(wellFormedDeep(v)).toEqual({ m: ["ok", "x\uFFFD"] });
    const j = deltaJoiner();
    expect(j.push("a\uD83D") + j.push("\uDE00b") + j.flush()).toBe(`a${EMOJI}b`);
  });

  it("wellFormedOnce gives what wellFormedDeep gives; a repaired frozen value keeps one copy", () => {
    const clean = Object.freeze({
      role: "user",
      content: Object.freeze([Object.freeze({ type: "text", text: "hi" })]),
    });
    expect(wellFormedOnce(clean)).toBe(clean);
    const broken = Object.freeze({ a: Object.freeze(["ok", "x\uD800"]), b: { c: "\uDC00y" }, n: 1 });
    const once = wellFormedOnce(broken);
    expect(once).toEqual(wellFormedDeep({ ...broken }));
    expect(once).toEqual({ a: ["ok", "x\uFFFD"], b: { c: "\uFFFDy" }, n: 1 });
    expect(wellFormedOnce(broken)).toBe(once);
    expect(wellFormedDeep(broken)).toBe(once);
  });

  it("suggests the closest known name", () => {
    expect(didYouMean("turn.pre_polcy", ["turn.pre_policy", "turn.post_turn"])).toContain("turn.pre_policy");
  });
});
