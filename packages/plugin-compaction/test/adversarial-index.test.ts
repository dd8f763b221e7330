/**
 * The identifier index of a stub costs at most its share of what the stub replaces, counted as
 * it is sent (joined), for identifiers whose pieces merge differently once joined, and for
 * identifiers huge or numerous.
 */
import type { Message, ToolResultMessage } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import { compactHistory, MASK_PREFIX } from "../src/index.ts";
import { indexWithin } from "../src/mask.ts";
import { textOf } from "./support.ts";

const counter = defaultTokenCounter();
const countText = (t: string) => counter.countText(t);

/** Hex-like ids: counted alone each costs less than after ", " (o200k merges the pieces differently). */
const hex = (n: number) =>
  Array.from({ length: n }, (_, i) => `${(((i + 1) * 2654435761) >>> 0).toString(16).padStart(8, "0")}deadbeef`);

describe("indexWithin", () => {
  it("counts the index as joined, so it never exceeds its budget", () => {
    for (const budget of [50, 500, 5_000]) {
      const kept = indexWithin(hex(3_000), budget, countText);
      expect(kept.length).toBeGreaterThan(0);
      expect(countText(kept.join(", ")), `budget ${budget}`).toBeLessThanOrEqual(budget);
      // Still the most salient head, and nearly all the room used.
      expect(hex(3_000).slice(0, kept.length)).toEqual(kept);
      expect(
        countText(
          hex(3_000)
            .slice(0, kept.length + 1)
            .join(", "),
        ),
      ).toBeGreaterThan(budget);
    }
  });

  it("an identifier larger than the budget, or none, or a budget of 0: an empty index", () => {
    expect(indexWithin([`x_${"a".repeat(5_000)}`, "b_1"], 100, countText)).toEqual([]);
    expect(indexWithin([], 100, countText)).toEqual([]);
    expect(indexWithin(hex(10), 0, countText)).toEqual([]);
  });
});

describe("a masked output made of hex ids", () => {
  it("gets a stub whose index costs at most stubIndexShare of the output", async () => {
    const out = hex(400).join(" ");
    const history: Message[] = [
      { role: "user", content: [{ type: "text", text: "the task" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Listing." },
          { type: "tool_call", id: "c0", name: "bash", args: { command: "ls" } },
        ],
      },
      {
        role: "tool",
        toolCallId: "c0",
        toolName: "bash",
        content: [{ type: "text", text: out }],
        isError: false,
      } satisfies ToolResultMessage,
      {
        role: "assistant",
        content: [
          { type: "text", text: "next" },
          { type: "tool_call", id: "c1", name: "bash", args: { command: "ls" } },
        ],
      },
      {
        role: "tool",
        toolCallId: "c1",
        toolName: "bash",
        content: [{ type: "text", text: "ok" }],
        isError: false,
      } satisfies ToolResultMessage,
    ];
    const o: CompactOptions = {
      strategy: "mask",
      soft: 0.6,
      hard: 0.99,
      target: 0.1,
      protectedTail: { tokens: 0, messages: 2, share: 0.15 },
      cooldownRounds: 2,
      minMaskTokens: 60,
      summaryTokens: 1_200,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve",
      stubIdentifiers: 1_000,
      maskArguments: false,
      maskText: false,
      stubIndexShare: 0.5,
    };
    const r = (await compactHistory({
      messages: history,
      overhead: 0,
      window: Math.floor(counter.countMessages(history) / 0.9),
      calibration: 1,
      pinned: new Set([0]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText,
      countMessage: (m) => counter.countMessage(m),
      stash: () => "m1",
      model: undefined,
      goal: "the task",
    }))!;
    const stub = textOf(r.messages[2]!);
    expect(stub.startsWith(MASK_PREFIX)).toBe(true);
    const index = /Identifiers: (.*)\]$/.exec(stub)![1]!;
    const tokens = Number(/, (\d+) tokens,/.exec(stub)![1]);
    expect(countText(index)).toBeLessThanOrEqual(tokens * 0.5);
  });
});
