import type { Message } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import { compactHistory, SUMMARY_PREFIX, tailStart } from "../src/index.ts";
import { blocksOf } from "../src/messages.ts";
import { deterministicSummary } from "../src/summarize.ts";
import { expectPairs, textOf } from "./support.ts";

const counter = defaultTokenCounter();
const count = (m: Message) => counter.countMessage(m);
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const call = (id: string, command: string): Message => ({
  role: "assistant",
  content: [
    { type: "text", text: `Running ${id}.` },
    { type: "tool_call", id, name: "bash", args: { command } },
  ],
});
const result = (id: string, text: string): Message => ({
  role: "tool",
  toolCallId: id,
  toolName: "bash",
  content: [{ type: "text", text }],
  isError: false,
});
const filler = (tag: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${tag} line ${i}: nothing in particular happens here`).join("\n");

describe("protected tail on a small window", () => {
  const history: Message[] = [
    user("the task"),
    call("a", "ls"),
    result("a", filler("a", 80)),
    call("b", "ls"),
    result("b", filler("b", 80)),
    call("c", "ls"),
    result("c", filler("c", 80)),
  ];
  const blocks = blocksOf(history);

  it("keeps the last `messages` messages while they fit the cap, else only the newest call with its result", () => {
    const big = count(history[2]!) * 10;
    expect(tailStart(history, blocks, 0, 6, count)).toBe(1); // no cap: 6 messages, as before
    expect(tailStart(history, blocks, 0, 6, count, big)).toBe(1);
    expect(tailStart(history, blocks, 0, 6, count, count(history[5]!) + count(history[6]!) + 1)).toBe(5);
    expect(tailStart(history, blocks, 0, 6, count, 0)).toBe(5); // the newest block is always protected
    expect(tailStart(history, blocks, 0, 0, count, 0)).toBe(7); // unless no message is asked for
  });

  it("a window smaller than six messages masks everything but the newest call and its result", async () => {
    const o: CompactOptions = {
      strategy: "mask",
      soft: 0.6,
      hard: 0.9,
      target: 0.45,
      protectedTail: { tokens: 40_000, messages: 6, share: 0.25 },
      cooldownRounds: 2,
      minMaskTokens: 20,
      summaryTokens: 300,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve",
      stubIdentifiers: 150,
      maskArguments: true,
    };
    const total = counter.countMessages(history);
    const r = await compactHistory({
      messages: history,
      overhead: 0,
      window: Math.floor(total * 1.2),
      calibration: 1,
      pinned: new Set([0]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText: (t) => counter.countText(t),
      countMessage: count,
      stash: () => "x",
      model: undefined,
      goal: "the task",
    });
    expect(r!.report.masked.map((m) => m.toolCallId)).toEqual(["a", "b"]);
    expect(r!.messages[6]).toBe(history[6]);
    expectPairs(r!.messages);
  });
});

describe("deterministic summary of a history that already has one", () => {
  it("merges the earlier summary's items instead of nesting it, so repeated summaries do not grow", () => {
    const step = (i: number): Message[] => [
      call(`c${i}`, `cat src/mod_${i}.py`),
      result(`c${i}`, `def handler_${i}(): raise ValueError_${i}`),
    ];
    let summary: Message | undefined;
    const sizes: number[] = [];
    for (let round = 0; round < 6; round++) {
      const gone = [...(summary ? [summary] : []), ...Array.from({ length: 4 }, (_, k) => step(round * 4 + k)).flat()];
      const text = deterministicSummary(gone, "fix the handlers", [], 1_200, (t) => counter.countText(t));
      summary = user(`${SUMMARY_PREFIX} (${gone.length} messages, deterministic)]\n${text}`);
      sizes.push(counter.countText(text));
    }
    const last = textOf(summary!);
    expect(last.match(/^Goal:/gm)).toHaveLength(1);
    expect(last).not.toContain("Earlier summary");
    // Files touched: the newest 20 entries (path and file name of 10 steps), carried through merges.
    for (let i = 14; i < 24; i++) expect(last).toContain(`- src/mod_${i}.py`);
    expect(last).not.toContain("- src/mod_13.py");
    expect(sizes.at(-1)!).toBeLessThan(sizes[0]! * 3);
  });

  it("lists the identifiers leaving the context most recent first when the index is full", async () => {
    const history: Message[] = [user("the task")];
    for (let i = 0; i < 12; i++)
      history.push(
        call(`c${i}`, `probe ${i}`),
        result(`c${i}`, `found value_${i}_alpha and value_${i}_beta\n${filler(`p${i}`, 10)}`),
      );
    history.push(user("go on"));
    const o: CompactOptions = {
      strategy: "subgoal",
      soft: 0.6,
      hard: 0.9,
      target: 0.45,
      protectedTail: { tokens: 0, messages: 2, share: 0.25 },
      cooldownRounds: 2,
      minMaskTokens: 100_000,
      summaryTokens: 60,
      summaryShare: 1,
      summaryTimeoutMs: 1_000,
      retrieveTool: "context_retrieve",
      stubIdentifiers: 4,
      maskArguments: false,
    };
    const total = counter.countMessages(history);
    const r = await compactHistory({
      messages: history,
      overhead: 0,
      window: Math.floor(total / 0.95),
      calibration: 1,
      pinned: new Set([0, history.length - 1]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText: (t) => counter.countText(t),
      countMessage: count,
      stash: () => "x",
      model: undefined,
      goal: "the task",
    });
    const summary = r!.messages.find((m) => textOf(m).startsWith(SUMMARY_PREFIX));
    const index = /\nOther identifiers: (.*)$/m.exec(textOf(summary!))?.[1]?.split(", ") ?? [];
    expect(index).toHaveLength(4);
    // The summary's key facts keep the newest values (10, 9); the index the next newest (8, 7), none of the oldest.
    expect(textOf(summary!)).toContain("- value_10_alpha");
    expect(index.some((x) => x.includes("_8_") || x.includes("_7_"))).toBe(true);
    expect(index.some((x) => /_[0-3]_/.test(x))).toBe(false);
  });
});
