import type { Message, ToolResultMessage } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import {
  compactHistory,
  deterministicSummary,
  MASK_PREFIX,
  salientIdentifiers,
  SHORTENED_TEXT_MARK,
} from "../src/index.ts";
import { expectPairs, textOf } from "./support.ts";

const counter = defaultTokenCounter();
const count = (m: Message) => counter.countMessage(m);
const countText = (t: string) => counter.countText(t);
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const call = (id: string, text: string, command: string): Message => ({
  role: "assistant",
  content: [
    { type: "text", text },
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
const musing = (i: number) =>
  `I will look at src/step_${i}.py next. ${"The reasoning goes on about the plan, weighing one option against another at length. ".repeat(12)}It mentions handler_${i}_special once.`;
const base: CompactOptions = {
  strategy: "mask",
  soft: 0.6,
  hard: 0.99,
  target: 0.3,
  protectedTail: { tokens: 0, messages: 2, share: 0.15 },
  cooldownRounds: 2,
  minMaskTokens: 60,
  summaryTokens: 1_200,
  summaryTimeoutMs: 1_000,
  retrieveTool: "context_retrieve",
  stubIdentifiers: 150,
  maskArguments: true,
};

async function compact(history: Message[], o: CompactOptions, windowShare = 0.9) {
  const stashed: ToolResultMessage[] = [];
  const r = await compactHistory({
    messages: history,
    overhead: 0,
    window: Math.floor(counter.countMessages(history) / windowShare),
    calibration: 1,
    pinned: new Set([0]),
    state: { round: 1, lastHard: undefined, exhausted: false },
    options: o,
    countText,
    countMessage: count,
    stash: (m) => (stashed.push(m), `m${stashed.length}`),
    model: undefined,
    goal: "the task",
  });
  return { r: r!, stashed };
}

describe("old assistant text is shortened like old tool outputs (maskText)", () => {
  const history: Message[] = [user("the task")];
  for (let i = 0; i < 6; i++) history.push(call(`c${i}`, musing(i), `ls ${i}`), result(`c${i}`, `ok ${i}`));

  it("keeps the first sentence, a read-back id and the identifiers that would leave; the newest call stays whole", async () => {
    const { r, stashed } = await compact(history, { ...base, maskText: true });
    const first = textOf(r.messages[1]!);
    expect(first.startsWith("I will look at src/step_0.py next. [rest of this message shortened:")).toBe(true);
    expect(first).toContain(SHORTENED_TEXT_MARK);
    expect(first).toMatch(/context_retrieve\(id="m\d+"\)/);
    expect(first).toContain("handler_0_special");
    expect(countText(first)).toBeLessThan(countText(musing(0)) / 3);
    // The full text is stored for read-back; calls and their ids are untouched.
    expect(stashed.some((m) => textOf(m) === musing(0))).toBe(true);
    expect(r.messages[1]!.content.find((b) => b.type === "tool_call")).toEqual(
      history[1]!.content.find((b) => b.type === "tool_call"),
    );
    expect(r.messages.at(-2)).toBe(history.at(-2));
    expect(r.report.masked.some((m) => m.tool === "assistant (text)" || m.tool === "bash (arguments)")).toBe(true);
    expectPairs(r.messages);
  });

  it("leaves assistant text alone when maskText is off (the option's old behaviour)", async () => {
    const r = (await compact(history, { ...base, maskText: false })).r;
    expect(r?.messages.every((m) => !textOf(m).includes(SHORTENED_TEXT_MARK)) ?? true).toBe(true);
  });
});

describe("summary size follows what it replaces (summaryShare)", () => {
  const history: Message[] = [user("the task")];
  for (let i = 0; i < 10; i++)
    history.push(
      call(`c${i}`, `Probe ${i}.`, `probe ${i}`),
      result(
        `c${i}`,
        `value_${i}_alpha at /srv/app/mod_${i}.py\n${Array.from({ length: 12 }, (_, k) => `row ${k}: status fine for node ${k}`).join("\n")}`,
      ),
    );
  history.push(user("go on"));
  const o: CompactOptions = {
    ...base,
    strategy: "subgoal",
    hard: 0.9,
    minMaskTokens: 100_000,
    protectedTail: { tokens: 0, messages: 2, share: 0.25 },
  };

  it("a share of 0.25 gives a summary about a quarter of the replaced tokens; a share of 1 is capped by summaryTokens only", async () => {
    const small = (await compact(history, { ...o, summaryShare: 0.25 }, 0.95)).r.report.summary!;
    const large = (await compact(history, { ...o, summaryShare: 1 }, 0.95)).r.report.summary!;
    expect(small.summaryTokens).toBeLessThanOrEqual(Math.max(150, small.tokensReplaced * 0.25) + 40);
    expect(large.summaryTokens).toBeGreaterThan(small.summaryTokens);
  });

  it("a tight budget trims the lists, keeping every heading (no line-number reduction of the summary)", () => {
    const text = deterministicSummary(history, "the task", [], 120, countText);
    for (const h of ["Goal:", "Decisions:", "Files touched:", "Key facts:", "Open questions:"])
      expect(text).toContain(h);
    expect(text).not.toMatch(/^L\d+: /m);
    expect(countText(text)).toBeLessThanOrEqual(120);
    // The newest items survive the trim.
    expect(text).toContain("/srv/app/mod_9.py");
  });

  it("takes facts from a masked output's identifier index, not from its read-back instructions", () => {
    const stub = result(
      "s1",
      `${MASK_PREFIX}: bash, 900 tokens, 40 lines; read it with context_retrieve(id="m0123456789ab", startLine, endLine). Identifiers: value_77_alpha, /srv/app/z.py]`,
    );
    const text = deterministicSummary([call("s1", "Look.", "cat z"), stub], "the task", [], 600, countText);
    expect(text).toContain("value_77_alpha");
    expect(text).not.toMatch(/startLine|endLine|m0123456789ab/);
  });
});

describe("salience", () => {
  it("a name that only appears as a JSON key ranks after the values", () => {
    const json = JSON.stringify({
      reservation_id: "FQ8APE",
      flight_number: "HAT056",
      payment_id: "credit_card_7407366",
    });
    const ranked = salientIdentifiers(json, Infinity);
    expect(ranked.indexOf("FQ8APE")).toBeLessThan(ranked.indexOf("reservation_id"));
    expect(ranked.indexOf("credit_card_7407366")).toBeLessThan(ranked.indexOf("flight_number"));
    expect(ranked.at(-1)).toMatch(/_id$|_number$/);
  });
});
