import { describe, expect, it } from "vitest";
import { countOf } from "../src/index.ts";

describe("countOf", () => {
  it("agrees in number: singular for exactly 1, plural otherwise, irregular plurals given", () => {
    expect(countOf(1, "round")).toBe("1 round");
    expect(countOf(0, "round")).toBe("0 rounds");
    expect(countOf(2, "tool call")).toBe("2 tool calls");
    expect(countOf(1.5, "turn")).toBe("1.5 turns");
    expect(countOf(1, "entry", "entries")).toBe("1 entry");
    expect(countOf(7, "entry", "entries")).toBe("7 entries");
  });
});
