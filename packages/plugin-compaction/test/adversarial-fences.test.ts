/**
 * Hostile inputs for the promise that a shortened text, a summary, a reduction and a digest never
 * leave a Markdown code fence open: CRLF line ends, a backtick fence whose info string holds
 * tildes, a cut that turns a line into a fence opener, an output the tool cut inside a block.
 */
import type { Message, ToolResultMessage } from "@keel/kernel";
import { defaultTokenCounter } from "@keel/tokens";
import { isWellFormed } from "@keel/text";
import { describe, expect, it } from "vitest";
import type { CompactOptions } from "../src/index.ts";
import { compactHistory, digestOutput, reduceText, SHORTENED_TEXT_MARK } from "../src/index.ts";
import { closeFences, firstSentenceOf } from "../src/messages.ts";
import { fitSummary } from "../src/summarize.ts";
import { leavesFenceOpen, textOf } from "./support.ts";

const counter = defaultTokenCounter();
const countText = (t: string) => counter.countText(t);

describe("the fence checks themselves", () => {
  it("a backtick fence whose info string holds tildes is closed by a bare backtick run, and a closed text is left as it is", () => {
    const text = "```~~~\ncode\n```";
    expect(leavesFenceOpen(text)).toBe(false);
    expect(closeFences(text)).toBe(text);
    expect(leavesFenceOpen(closeFences("```~~~ info\ncode"))).toBe(false);
  });

  it("CRLF line ends: a tilde fence is seen, so an open one is closed", () => {
    for (const text of ["~~~\r\ncode\r\n", "~~~ python\r\ncode\r\nmore", "```\r\ncode\r\n"]) {
      expect(leavesFenceOpen(text)).toBe(true);
      expect(leavesFenceOpen(closeFences(text)), JSON.stringify(text)).toBe(false);
    }
  });
});

describe("cuts never open a fence", () => {
  it("a model summary with CRLF line ends that leaves a tilde fence open gets it closed, whole or cut to its budget", () => {
    const answer = `Goal:\r\n- ship it\r\nKey facts:\r\n~~~ text\r\n${Array.from({ length: 300 }, (_, i) => `row_${i} = value_${i}`).join("\r\n")}`;
    expect(leavesFenceOpen(answer)).toBe(true);
    expect(leavesFenceOpen(fitSummary(answer, 10_000, countText))).toBe(false);
    const cut = fitSummary(answer, 60, countText);
    expect(countText(cut)).toBeLessThanOrEqual(60);
    expect(leavesFenceOpen(cut), cut).toBe(false);
  });

  it("a summary whose first items are cut by code points: the cut turns no line into an open fence", () => {
    // "```js `x`" is no fence (a backtick in its info string); its head "```js aaa" would be one.
    const answer = `Goal:\n\`\`\`js ${"a".repeat(600)} \`x\`\nKey facts:\n- ${"b".repeat(600)}`;
    expect(leavesFenceOpen(answer)).toBe(false);
    const cut = fitSummary(answer, 60, countText);
    expect(countText(cut)).toBeLessThanOrEqual(60);
    expect(leavesFenceOpen(cut), cut).toBe(false);
  });

  it("a one-line text reduced by its head and tail: the head opens no fence the line did not", () => {
    const line = `\`\`\`js ${"a".repeat(6_000)} \`x\``;
    expect(leavesFenceOpen(line)).toBe(false);
    const reduced = reduceText(line, 100, countText);
    expect(reduced).toContain("chars omitted");
    expect(leavesFenceOpen(reduced), reduced.slice(0, 80)).toBe(false);
  });

  it("a deterministic digest of an output the tool cut inside a code block closes it before its identifier index", async () => {
    const raw = [
      "# README",
      "```python",
      ...Array.from({ length: 300 }, (_, i) => `setting_${i} = load_value("key_${i}")  # line ${i}`),
    ].join("\n");
    const digest = await digestOutput({
      text: raw,
      toolName: "bash",
      args: { command: "head -302 README.md" },
      target: 300,
      model: undefined,
      timeoutMs: 1_000,
      count: countText,
    });
    expect(digest.text).toContain("[identifiers in the omitted part:");
    expect(leavesFenceOpen(digest.text), digest.text.slice(-200)).toBe(false);
  });
});

describe("a shortened assistant text with CRLF line ends", () => {
  it("keeps the block's first code line, not a bare tilde", async () => {
    const body = "The reasoning goes on about the plan, weighing one option against another at length. ".repeat(12);
    const text = `~~~\r\nimport os\r\n${Array.from({ length: 20 }, (_, i) => `result_${i} = compute(${i})`).join("\r\n")}\r\n~~~\r\n${body}`;
    const say = (id: string, t: string): Message => ({
      role: "assistant",
      content: [
        { type: "text", text: t },
        { type: "tool_call", id, name: "bash", args: { command: "ls" } },
      ],
    });
    const result = (id: string, t: string): ToolResultMessage => ({
      role: "tool",
      toolCallId: id,
      toolName: "bash",
      content: [{ type: "text", text: t }],
      isError: false,
    });
    const history: Message[] = [
      { role: "user", content: [{ type: "text", text: "the task" }] },
      say("c0", text),
      result("c0", "ok"),
      say("c1", "next"),
      result("c1", "ok"),
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
      stubIdentifiers: 150,
      maskArguments: false,
      maskText: true,
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
    const shortened = textOf(r.messages[1]!);
    expect(shortened).toMatch(new RegExp(`^import os \\${SHORTENED_TEXT_MARK}`));
    expect(leavesFenceOpen(shortened)).toBe(false);
  });
});

describe("the first sentence of a text that opens with a fenced block", () => {
  it("is its first code line even when the block holds shorter fence lines, else the text after an empty block", () => {
    expect(firstSentenceOf("````md\n```\ninner line. More\n```\n````\nAfter the block.")).toBe("inner line.");
    expect(firstSentenceOf("```\n\n```\n\nAfter the empty block. More.")).toBe("After the empty block.");
    expect(firstSentenceOf("~~~\r\n~~~\r\n```\r\n```\r\nAfter two. More.")).toBe("After two.");
    expect(firstSentenceOf("```\n```")).toBe("");
    // Many empty blocks: linear, no recursion.
    expect(firstSentenceOf(`${"```\n```\n".repeat(100_000)}Last.`)).toBe("Last.");
  });
});

describe("a huge model summary is fitted without counting it whole", () => {
  // The exact counter costs ~1-2 µs a character on text it has not seen (1 MB of zero-width
  // spaces: ~2 s a count); bisecting over the whole text counted it about three times over.
  const counted = () => {
    let chars = 0;
    return { count: (t: string) => ((chars += t.length), countText(t)), chars: () => chars };
  };
  it("one 1 MB line, or 1 MB of headings: what is counted is bounded by the budget, not by the text", () => {
    for (const answer of [
      "\u200b".repeat(1 << 20),
      `Key facts: ${"value_1 ".repeat(1 << 17)}`,
      Array.from({ length: 40_000 }, (_, i) => `Heading number ${i}:`).join("\n"),
    ]) {
      const c = counted();
      const cut = fitSummary(answer, 300, c.count);
      expect(countText(cut)).toBeLessThanOrEqual(300);
      expect(countText(cut)).toBeGreaterThan(250);
      expect(c.chars()).toBeLessThan(100_000);
    }
  });
});

describe("seeded random texts of fence-like lines", () => {
  // Lines a hostile or sloppy model writes: every form of fence (indented, long, tilde, with
  // info strings holding backticks or tildes), headings, items, astral and combining characters,
  // CRLF ends; cut at every budget from 0 up.
  const pieces = [
    "```",
    "````",
    "~~~",
    "~~~~ x",
    "```py",
    "```js `x`",
    "   ```",
    "    ```",
    "```~~~",
    "Goal:",
    "Key facts:",
    "## Notes",
    "- item 😀 é",
    "- value_1 at /srv/a.py",
    "plain line of text here.",
    "x".repeat(300),
    "\u200b",
    "",
  ];
  const rng = (seed: number) => () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  it("closeFences, fitSummary, reduceText and firstSentenceOf never leave a fence open; fitSummary keeps its budget and every pair", () => {
    for (let s = 1; s <= 300; s++) {
      const r = rng(s);
      const eol = r() < 0.3 ? "\r\n" : "\n";
      const text = Array.from(
        { length: 1 + Math.floor(r() * 60) },
        () => pieces[Math.floor(r() * pieces.length)]!,
      ).join(eol);
      expect(leavesFenceOpen(closeFences(text)), JSON.stringify(text)).toBe(false);
      const budget = Math.floor(r() * 120);
      const fit = fitSummary(text, budget, countText);
      expect(countText(fit), JSON.stringify(text)).toBeLessThanOrEqual(budget);
      expect(leavesFenceOpen(fit), JSON.stringify([text, budget])).toBe(false);
      expect(isWellFormed(fit)).toBe(true);
      if (!leavesFenceOpen(text))
        expect(leavesFenceOpen(reduceText(text, Math.max(1, budget), countText)), JSON.stringify([text, budget])).toBe(
          false,
        );
      expect(firstSentenceOf(text, true)).not.toMatch(/```|~~~/);
    }
  });
});

describe("a fence that spans two text blocks of one assistant message", () => {
  it("is not cut open: the block that opens it is not shortened while a later text block closes it", async () => {
    const code = Array.from({ length: 40 }, (_, i) => `result_${i} = compute(${i})`).join("\n");
    const history: Message[] = [
      { role: "user", content: [{ type: "text", text: "the task" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: `Here is the script:\n\`\`\`python\n${code}` },
          { type: "text", text: "```\nRun it." },
          { type: "tool_call", id: "c0", name: "bash", args: { command: "ls" } },
        ],
      },
      { role: "tool", toolCallId: "c0", toolName: "bash", content: [{ type: "text", text: "ok" }], isError: false },
      {
        role: "assistant",
        content: [
          { type: "text", text: "next" },
          { type: "tool_call", id: "c1", name: "bash", args: { command: "ls" } },
        ],
      },
      { role: "tool", toolCallId: "c1", toolName: "bash", content: [{ type: "text", text: "ok" }], isError: false },
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
      stubIdentifiers: 150,
      maskArguments: false,
      maskText: true,
    };
    const r = await compactHistory({
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
    });
    const texts = (r?.messages[1] ?? history[1]!).content.flatMap((b) => (b.type === "text" ? [b.text] : []));
    expect(leavesFenceOpen(texts.join("\n")), JSON.stringify(texts)).toBe(false);
    // One block alone that leaves its fence open (a model cut at max tokens) is still shortened.
    const alone: Message[] = [
      history[0]!,
      {
        role: "assistant",
        content: [
          { type: "text", text: `Here is the script:\n\`\`\`python\n${code}` },
          { type: "tool_call", id: "c0", name: "bash", args: { command: "ls" } },
        ],
      },
      ...history.slice(2),
    ];
    const r2 = await compactHistory({
      messages: alone,
      overhead: 0,
      window: Math.floor(counter.countMessages(alone) / 0.9),
      calibration: 1,
      pinned: new Set([0]),
      state: { round: 1, lastHard: undefined, exhausted: false },
      options: o,
      countText,
      countMessage: (m) => counter.countMessage(m),
      stash: () => "m1",
      model: undefined,
      goal: "the task",
    });
    expect(textOf(r2!.messages[1]!)).toMatch(new RegExp(`^Here is the script: \\${SHORTENED_TEXT_MARK}`));
  });
});

describe("a text that opens with a fence inside a list item or a blockquote", () => {
  it("gives the block's first code line, not the bare list or quote marker", () => {
    expect(firstSentenceOf("- ```python\n  import os\n  ```\nThen more.")).toBe("import os");
    expect(firstSentenceOf("1. ```bash\n   ls -la /srv\n   ```\nThen more.")).toBe("ls -la /srv");
    expect(firstSentenceOf("> ```sh\n> make all\n> ```\nThen more.")).toBe("make all");
    expect(firstSentenceOf("- plain item. More.")).toBe("- plain item.");
    expect(firstSentenceOf("> quoted. More.")).toBe("> quoted.");
  });
});
